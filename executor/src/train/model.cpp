// The training runner's transformer (model.hpp).
#include "train/model.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cassert>
#include <cmath>
#include <utility>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train {

namespace {

constexpr int64_t kAlign = 64;  // elements: every tensor starts 256-byte aligned in the fp32 buffers
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Rewrites the pass of every tag (a MoE block's forward run again as a recompute).
class PassRewrite : public OpRecorder {
 public:
  PassRewrite(OpRecorder* inner, Pass pass) : inner_(inner), pass_(pass) {}
  void begin(const OpTag& tag, cudaStream_t s) override {
    OpTag t = tag;
    t.pass = pass_;
    inner_->begin(t, s);
  }
  void end(cudaStream_t s) override { inner_->end(s); }

 private:
  OpRecorder* inner_;
  Pass pass_;
};

// Per-tensor init seed: the runner's seed and the tensor's index (train_reference.py reads
// the weights from the dump, so this only needs to be fixed, not shared).
uint64_t tensor_seed(uint64_t seed, size_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<OpId> moe_block_forward_ops(bool shared) {
  std::vector<OpId> ops{OpId::kMoeRouter,     OpId::kMoeTopk,       OpId::kMoePermute,    OpId::kMoeExpertsFc1,
                        OpId::kMoeExpertsAct, OpId::kMoeExpertsFc2, OpId::kMoeUnpermute};
  if (shared)  // one by one: GCC 12 reads past a 3-element initializer_list insert (-Warray-bounds)
    for (OpId id : {OpId::kMoeSharedFc1, OpId::kMoeSharedAct, OpId::kMoeSharedFc2}) ops.push_back(id);
  return ops;
}

namespace {
bool is_gemm(OpId id) {
  return id == OpId::kMoeRouter || id == OpId::kMoeExpertsFc1 || id == OpId::kMoeExpertsFc2 ||
         id == OpId::kMoeSharedFc1 || id == OpId::kMoeSharedFc2;
}
}  // namespace

struct Model::LayerActs {
  DeviceArray<bf16> n1, q, k, v, o, mid, n2, h1, a1;
  DeviceArray<float> rstd1, stats, rstd2;
  bool live = false;
  void release() {
    n1.reset(), q.reset(), k.reset(), v.reset(), o.reset(), mid.reset(), n2.reset(), h1.reset(), a1.reset();
    rstd1.reset(), stats.reset(), rstd2.reset();
    live = false;
  }
};

void Model::add_param(const std::string& name, std::vector<int64_t> shape, float std, float value, bool decay) {
  ParamInfo pi;
  pi.name = name;
  pi.shape = std::move(shape);
  pi.numel = 1;
  for (int64_t d : pi.shape) pi.numel *= d;
  pi.offset = flat_;
  pi.init_std = std;
  pi.init_value = value;
  pi.decay = decay;
  flat_ += align_up(pi.numel);
  params_.push_back(std::move(pi));
}

Model::Model(const TrainPlan& p, CachingAllocator& alloc, cudaStream_t stream, bool dry, LtGemm* gemm,
             cudnnHandle_t cudnn)
    : p_(p), alloc_(alloc), stream_(stream), dry_(dry), gemm_(gemm) {
  const int64_t h = p.hidden, d = p.head_dim, qkv_out = (p.heads + 2 * p.groups) * d;
  // Megatron's init: N(0, 0.02) everywhere, the output layers of each block (attention
  // projection, fc2) N(0, 0.02 / sqrt(2 L)); norm weights 1.
  const float std = 0.02f;
  const float out_std = static_cast<float>(0.02 / std::sqrt(2.0 * p.num_layers));
  add_param("embedding", {p.padded_vocab, h}, std, 0, true);
  embedding_ = 0;
  lp_.resize(static_cast<size_t>(p.num_layers));
  moe_.resize(static_cast<size_t>(p.num_layers));
  acts_.resize(static_cast<size_t>(p.num_layers));
  std::vector<std::vector<ParamView>> moe_views(static_cast<size_t>(p.num_layers));
  std::vector<std::vector<int>> moe_param_index(static_cast<size_t>(p.num_layers));
  for (int l = 0; l < p.num_layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    LayerParams& q = lp_[static_cast<size_t>(l)];
    acts_[static_cast<size_t>(l)] = std::make_unique<LayerActs>();
    q.attn_norm = static_cast<int>(params_.size());
    add_param(pre + "attn_norm", {h}, 0, 1.0f, false);
    q.qkv = static_cast<int>(params_.size());
    add_param(pre + "attn.qkv", {qkv_out, h}, std, 0, true);
    q.proj = static_cast<int>(params_.size());
    add_param(pre + "attn.proj", {h, p.heads * d}, out_std, 0, true);
    q.mlp_norm = static_cast<int>(params_.size());
    add_param(pre + "mlp_norm", {h}, 0, 1.0f, false);
    if (!p.moe_layer[static_cast<size_t>(l)]) {
      q.fc1 = static_cast<int>(params_.size());
      add_param(pre + "mlp.fc1", {2 * p.ffn, h}, std, 0, true);
      q.fc2 = static_cast<int>(params_.size());
      add_param(pre + "mlp.fc2", {h, p.ffn}, out_std, 0, true);
    } else if (!dry) {
      const ModelSpec& md = p.scenario.model;
      MoeBlockConfig c;
      c.tokens = p.tokens;
      c.hidden = h;
      c.expert_ffn = p.expert_ffn;
      c.shared_ffn = p.shared_ffn;
      c.experts = p.experts;
      c.topk = p.topk;
      c.score = md.moe_router_score_function;
      c.groups = md.moe_router_num_groups;
      c.group_topk = md.moe_router_group_topk;
      c.expert_bias = md.moe_router_enable_expert_bias;
      c.capacity_factor = md.moe_expert_capacity_factor;
      c.pad_to_capacity = md.moe_pad_expert_input_to_capacity;
      c.aux_loss_coeff = p.moe_aux_loss_coeff;
      c.z_loss_coeff = p.moe_z_loss_coeff;
      c.num_layers_for_aux = p.num_layers;
      auto blk = std::make_unique<MoeBlock>(c, alloc, *gemm, stream);
      for (const ParamView& v : blk->param_shapes()) {
        const std::string name = v.name;
        const bool output = name.size() >= 3 && name.compare(name.size() - 3, 3, "fc2") == 0;
        const float s0 = v.init_std > 0 && output ? out_std : v.init_std;
        moe_param_index[static_cast<size_t>(l)].push_back(static_cast<int>(params_.size()));
        add_param(pre + "moe." + name, {v.numel}, s0, 0, name.find("bias") == std::string::npos);
        moe_views[static_cast<size_t>(l)].push_back(v);
      }
      moe_[static_cast<size_t>(l)] = std::move(blk);
    }
  }
  final_norm_ = static_cast<int>(params_.size());
  add_param("final_norm", {h}, 0, 1.0f, false);
  if (!p.tied_embeddings) {
    output_ = static_cast<int>(params_.size());
    add_param("output", {p.padded_vocab, h}, std, 0, true);
  } else {
    output_ = embedding_;
  }

  model_ = DeviceArray<bf16>(alloc, static_cast<size_t>(flat_), MemCategory::kWeights);
  grad_ = DeviceArray<float>(alloc, static_cast<size_t>(flat_), MemCategory::kGrads);
  master_ = DeviceArray<float>(alloc, static_cast<size_t>(flat_), MemCategory::kOptimizer);
  m_ = DeviceArray<float>(alloc, static_cast<size_t>(flat_), MemCategory::kOptimizer);
  v_ = DeviceArray<float>(alloc, static_cast<size_t>(flat_), MemCategory::kOptimizer);
  for (int l = 0; l < p.num_layers; ++l) {
    auto& views = moe_views[static_cast<size_t>(l)];
    if (views.empty()) continue;
    for (size_t i = 0; i < views.size(); ++i) {
      const ParamInfo& pi = params_[static_cast<size_t>(moe_param_index[static_cast<size_t>(l)][i])];
      views[i].weight = model_.get() + pi.offset;
      views[i].grad = grad_.get() + pi.offset;
    }
    moe_[static_cast<size_t>(l)]->bind(views);
  }
  sumsq_ = DeviceArray<double>(alloc, 1, MemCategory::kOptimizer);
  clip_scale_ = DeviceArray<float>(alloc, 2, MemCategory::kOptimizer);

  aux_scratch_ = DeviceArray<float>(alloc, 1, MemCategory::kOther);

  // RoPE tables for positions 0..s-1.
  const int64_t half = d / 2;
  rope_inv_freq_ = DeviceArray<float>(alloc, static_cast<size_t>(half), MemCategory::kOther);
  rope_cos_ = DeviceArray<float>(alloc, static_cast<size_t>(p.s * half), MemCategory::kOther);
  rope_sin_ = DeviceArray<float>(alloc, static_cast<size_t>(p.s * half), MemCategory::kOther);
  if (!dry) {
    float mscale = 1.0f;
    const std::vector<float> inv = rope_inv_freq(p.rope, d, &mscale);
    rope_mscale_ = mscale;
    LCM_CUDA_CHECK(cudaMemcpyAsync(rope_inv_freq_.get(), inv.data(), inv.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
    rope_table(rope_inv_freq_.get(), rope_cos_.get(), rope_sin_.get(), p.s, half, rope_mscale_, stream);
    LCM_CUDA_CHECK(cudaGetLastError());
    LCM_CUDA_CHECK(cudaStreamSynchronize(stream));  // `inv` is pageable host memory on the stack

    AttentionProblem ap;
    ap.b = p.b;
    ap.s = p.s;
    ap.hq = p.heads;
    ap.hkv = p.groups;
    ap.d = d;
    ap.causal = true;
    ap.scale = p.softmax_scale;
    attn_ = std::make_unique<CudnnAttention>(cudnn, stream, ap, 1, p.deterministic_attention);
    if (!attn_->supported()) throw ExecError("cuDNN attention " + ap.shape_text() + ": " + attn_->unsupported_reason());
    attn_ws_ = DeviceArray<char>(alloc, attn_->workspace_bytes(), MemCategory::kWorkspace);
  }
}

Model::~Model() = default;

template <class F>
void Model::op(OpId id, Pass pass, GemmPart part, int layer, F&& f) {
  const bool step = pass == Pass::kStep;
  OpScope scope(rec_, OpTag{id, pass, part, layer, step ? -1 : mb_}, stream_);
  if (!dry_) {
    f();
    LCM_CUDA_CHECK(cudaGetLastError());
  }
}

void Model::linear_fwd(const bf16* x, const bf16* w, bf16* y, int64_t out, int64_t in) {
  gemm_->run(p_.tokens, out, in, x, false, w, true, y, false);
}
void Model::linear_dgrad(const bf16* dy, const bf16* w, bf16* dx, int64_t out, int64_t in) {
  gemm_->run(p_.tokens, in, out, dy, false, w, false, dx, false);
}
void Model::linear_wgrad(const bf16* dy, const bf16* x, float* dw, int64_t out, int64_t in) {
  gemm_->run(out, in, p_.tokens, dy, true, x, false, dw, true, 1.0f);
}

int Model::attention_set(const AttentionTensors& t) {
  const std::array<const void*, 9> key{t.q, t.k, t.v, t.o, t.stats, t.dout, t.dq, t.dk, t.dv};
  const auto it = attn_sets_.find(key);
  if (it != attn_sets_.end()) return it->second;
  const int set = static_cast<int>(attn_sets_.size());
  attn_sets_.emplace(key, set);
  attn_->bind(set, t, attn_ws_.get());
  return set;
}

void Model::init_weights(uint64_t seed) {
  if (dry_) return;
  LCM_CUDA_CHECK(cudaMemsetAsync(master_.get(), 0, master_.bytes(), stream_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamInfo& pi = params_[i];
    init_params(master_.get() + pi.offset, pi.numel, pi.init_std, pi.init_value, tensor_seed(seed, i), stream_);
  }
  LCM_CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), stream_));
  LCM_CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), stream_));
  refresh_bf16();
}

void Model::refresh_bf16() {
  if (dry_) return;
  cast_to_bf16(master_.get(), model_.get(), flat_, stream_);
  LCM_CUDA_CHECK(cudaGetLastError());
}

void Model::zero_grads() {
  if (dry_) return;
  LCM_CUDA_CHECK(cudaMemsetAsync(grad_.get(), 0, grad_.bytes(), stream_));
}

void Model::layer_forward(int l, LayerActs& a, const bf16* x, bf16* out, Pass pass, float* aux_loss) {
  const size_t li = static_cast<size_t>(l);
  const LayerParams& q = lp_[li];
  const int64_t T = p_.tokens, h = p_.hidden, d = p_.head_dim, hq = p_.heads, hkv = p_.groups, f = p_.ffn;
  const bool rc = pass == Pass::kRecompute;
  const bool full = p_.recompute_layer[li] != 0;
  const bool moe = p_.moe_layer[li] != 0;
  // Whether an op of these recompute modules runs in this pass (every op in the forward and
  // under full recompute; under selective recompute those of the selected modules).
  auto runs = [&](uint32_t modules) { return !rc || full || (p_.recompute_modules & modules) != 0; };
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  if (!a.live) {
    a.n1 = act<bf16>(T * h);
    a.rstd1 = act<float>(T);
    a.q = act<bf16>(T * hq * d);
    a.k = act<bf16>(T * hkv * d);
    a.v = act<bf16>(T * hkv * d);
    a.o = act<bf16>(T * hq * d);
    a.stats = act<float>(p_.b * hq * p_.s);
    a.mid = act<bf16>(T * h);
    a.n2 = act<bf16>(T * h);
    a.rstd2 = act<float>(T);
    if (!moe) {
      a.h1 = act<bf16>(T * 2 * f);
      a.a1 = act<bf16>(T * f);
    }
    a.live = true;
  }

  if (runs(kRecomputeLayernorm))
    op(OpId::kAttnNorm, pass, GemmPart::kNone, l,
       [&] { rmsnorm_fwd(x, W(q.attn_norm), a.n1.get(), a.rstd1.get(), T, h, p_.norm_eps, stream_); });
  if (runs(0)) {
    auto qkv = act<bf16>(T * (hq + 2 * hkv) * d);
    op(OpId::kAttnQkv, pass, GemmPart::kNone, l, [&] { linear_fwd(a.n1.get(), W(q.qkv), qkv.get(), (hq + 2 * hkv) * d, h); });
    // RoPE: Q, K and V out of the fused projection's rows into BSHD tensors, then rotated.
    op(OpId::kAttnRope, pass, GemmPart::kNone, l, [&] {
      const size_t row = static_cast<size_t>((hq + 2 * hkv) * d) * sizeof(bf16);
      const size_t qw = static_cast<size_t>(hq * d) * sizeof(bf16), kw = static_cast<size_t>(hkv * d) * sizeof(bf16);
      const char* src = reinterpret_cast<const char*>(qkv.get());
      LCM_CUDA_CHECK(cudaMemcpy2DAsync(a.q.get(), qw, src, row, qw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
      LCM_CUDA_CHECK(cudaMemcpy2DAsync(a.k.get(), kw, src + qw, row, kw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
      LCM_CUDA_CHECK(
          cudaMemcpy2DAsync(a.v.get(), kw, src + qw + kw, row, kw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
      rope_fwd(a.q.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, d, stream_);
      rope_fwd(a.k.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hkv, d, d, stream_);
    });
  }
  if (runs(kRecomputeCoreAttn))
    op(OpId::kAttnCore, pass, GemmPart::kNone, l, [&] {
      AttentionTensors t;
      t.q = a.q.get(), t.k = a.k.get(), t.v = a.v.get(), t.o = a.o.get(), t.stats = a.stats.get();
      t.dout = a.o.get(), t.dq = a.q.get(), t.dk = a.k.get(), t.dv = a.v.get();  // the backward pack is not run
      attn_->forward(attention_set(t));
    });
  if (runs(0)) {
    auto y = act<bf16>(T * h);
    op(OpId::kAttnProj, pass, GemmPart::kNone, l, [&] { linear_fwd(a.o.get(), W(q.proj), y.get(), h, hq * d); });
    op(OpId::kAttnBda, pass, GemmPart::kNone, l, [&] { add(x, y.get(), a.mid.get(), T * h, stream_); });
  }
  if (runs(kRecomputeLayernorm))
    op(OpId::kMlpNorm, pass, GemmPart::kNone, l,
       [&] { rmsnorm_fwd(a.mid.get(), W(q.mlp_norm), a.n2.get(), a.rstd2.get(), T, h, p_.norm_eps, stream_); });
  DeviceArray<bf16> y2;
  if (!moe) {
    if (runs(kRecomputeMlp)) {
      y2 = act<bf16>(T * h);
      op(OpId::kMlpFc1, pass, GemmPart::kNone, l, [&] { linear_fwd(a.n2.get(), W(q.fc1), a.h1.get(), 2 * f, h); });
      op(OpId::kMlpAct, pass, GemmPart::kNone, l, [&] { swiglu_fwd(a.h1.get(), a.a1.get(), T, f, stream_); });
      op(OpId::kMlpFc2, pass, GemmPart::kNone, l, [&] { linear_fwd(a.a1.get(), W(q.fc2), y2.get(), h, f); });
    }
  } else if (runs(0)) {  // selective recompute of MoE modules is refused by plan_training
    y2 = act<bf16>(T * h);
    if (dry_) {
      for (OpId id : moe_block_forward_ops(p_.shared_ffn > 0)) op(id, pass, GemmPart::kNone, l, [] {});
    } else {
      PassRewrite rw(rec_, pass);
      moe_[li]->forward(a.n2.get(), y2.get(), rc ? aux_scratch_.get() : aux_loss, l, mb_, rec_ ? &rw : nullptr);
      LCM_CUDA_CHECK(cudaGetLastError());
    }
  }
  if (runs(0)) op(OpId::kMlpBda, pass, GemmPart::kNone, l, [&] { add(a.mid.get(), y2.get(), out, T * h, stream_); });
  if (!rc && full) {  // full recompute: keep only the layer input
    a.release();
    if (moe && !dry_) moe_[li]->release_saved();
  }
}

void Model::layer_backward(int l, LayerActs& a, const bf16* x, const bf16* dy, bf16* dx) {
  const size_t li = static_cast<size_t>(l);
  const LayerParams& q = lp_[li];
  const int64_t T = p_.tokens, h = p_.hidden, d = p_.head_dim, hq = p_.heads, hkv = p_.groups, f = p_.ffn;
  const bool moe = p_.moe_layer[li] != 0;
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  auto G = [&](int idx) { return grad_.get() + params_[static_cast<size_t>(idx)].offset; };
  if (p_.recompute_layer[li] || (p_.recompute == RecomputeKind::kSelective && p_.recompute_modules != 0)) {
    auto out = act<bf16>(T * h);  // the recomputed layer output is not needed again
    layer_forward(l, a, x, out.get(), Pass::kRecompute, nullptr);
  }
  const Pass B = Pass::kBwd;
  op(OpId::kMlpBda, B, GemmPart::kNone, l, [] {});  // identity: dy flows to both summands
  auto dn2 = act<bf16>(T * h);
  if (!moe) {
    auto da1 = act<bf16>(T * f);
    op(OpId::kMlpFc2, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dy, W(q.fc2), da1.get(), h, f); });
    op(OpId::kMlpFc2, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dy, a.a1.get(), G(q.fc2), h, f); });
    auto dh1 = act<bf16>(T * 2 * f);
    op(OpId::kMlpAct, B, GemmPart::kNone, l, [&] { swiglu_bwd(a.h1.get(), da1.get(), dh1.get(), T, f, stream_); });
    da1.reset();
    op(OpId::kMlpFc1, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dh1.get(), W(q.fc1), dn2.get(), 2 * f, h); });
    op(OpId::kMlpFc1, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dh1.get(), a.n2.get(), G(q.fc1), 2 * f, h); });
  } else if (dry_) {
    const auto fwd = moe_block_forward_ops(p_.shared_ffn > 0);
    for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
      if (is_gemm(*it)) {
        op(*it, B, GemmPart::kDgrad, l, [] {});
        op(*it, B, GemmPart::kWgrad, l, [] {});
      } else {
        op(*it, B, GemmPart::kNone, l, [] {});
      }
    }
  } else {
    // The aux / z losses enter the step's loss once per micro-batch, averaged like the LM loss.
    moe_[li]->backward(dy, dn2.get(), 1.0f / static_cast<float>(p_.micro_batches), l, mb_, rec_);
    LCM_CUDA_CHECK(cudaGetLastError());
    moe_[li]->release_saved();
  }
  auto dmid = act<bf16>(T * h);
  op(OpId::kMlpNorm, B, GemmPart::kNone, l, [&] {
    rmsnorm_bwd(a.mid.get(), W(q.mlp_norm), a.rstd2.get(), dn2.get(), dmid.get(), G(q.mlp_norm), T, h, stream_);
    add(dmid.get(), dy, dmid.get(), T * h, stream_);  // + the residual's gradient
  });
  dn2.reset();
  op(OpId::kAttnBda, B, GemmPart::kNone, l, [] {});  // identity
  auto dout = act<bf16>(T * hq * d);
  op(OpId::kAttnProj, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dmid.get(), W(q.proj), dout.get(), h, hq * d); });
  op(OpId::kAttnProj, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dmid.get(), a.o.get(), G(q.proj), h, hq * d); });
  auto dq = act<bf16>(T * hq * d), dk = act<bf16>(T * hkv * d), dv = act<bf16>(T * hkv * d);
  op(OpId::kAttnCore, B, GemmPart::kNone, l, [&] {
    AttentionTensors t;
    t.q = a.q.get(), t.k = a.k.get(), t.v = a.v.get(), t.o = a.o.get(), t.stats = a.stats.get();
    t.dout = dout.get(), t.dq = dq.get(), t.dk = dk.get(), t.dv = dv.get();
    attn_->backward(attention_set(t));
  });
  dout.reset();
  auto dqkv = act<bf16>(T * (hq + 2 * hkv) * d);
  op(OpId::kAttnRope, B, GemmPart::kNone, l, [&] {
    rope_bwd(dq.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, d, stream_);
    rope_bwd(dk.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hkv, d, d, stream_);
    const size_t row = static_cast<size_t>((hq + 2 * hkv) * d) * sizeof(bf16);
    const size_t qw = static_cast<size_t>(hq * d) * sizeof(bf16), kw = static_cast<size_t>(hkv * d) * sizeof(bf16);
    char* dst = reinterpret_cast<char*>(dqkv.get());
    LCM_CUDA_CHECK(cudaMemcpy2DAsync(dst, row, dq.get(), qw, qw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
    LCM_CUDA_CHECK(cudaMemcpy2DAsync(dst + qw, row, dk.get(), kw, kw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
    LCM_CUDA_CHECK(
        cudaMemcpy2DAsync(dst + qw + kw, row, dv.get(), kw, kw, static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
  });
  dq.reset(), dk.reset(), dv.reset();
  auto dn1 = act<bf16>(T * h);
  op(OpId::kAttnQkv, B, GemmPart::kDgrad, l,
     [&] { linear_dgrad(dqkv.get(), W(q.qkv), dn1.get(), (hq + 2 * hkv) * d, h); });
  op(OpId::kAttnQkv, B, GemmPart::kWgrad, l,
     [&] { linear_wgrad(dqkv.get(), a.n1.get(), G(q.qkv), (hq + 2 * hkv) * d, h); });
  dqkv.reset();
  op(OpId::kAttnNorm, B, GemmPart::kNone, l, [&] {
    rmsnorm_bwd(x, W(q.attn_norm), a.rstd1.get(), dn1.get(), dx, G(q.attn_norm), T, h, stream_);
    add(dx, dmid.get(), dx, T * h, stream_);
  });
  a.release();
}

void Model::micro_batch(const int32_t* tokens, const int32_t* labels, float grad_scale, float* loss_rows,
                        float* aux_loss, int mb, OpRecorder* rec) {
  rec_ = rec;
  mb_ = mb;
  const int64_t T = p_.tokens, h = p_.hidden, Vp = p_.padded_vocab;
  const int L = p_.num_layers;
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  auto G = [&](int idx) { return grad_.get() + params_[static_cast<size_t>(idx)].offset; };
  std::vector<DeviceArray<bf16>> hs;
  hs.reserve(static_cast<size_t>(L) + 1);
  for (int l = 0; l <= L; ++l) hs.push_back(act<bf16>(T * h));
  op(OpId::kEmbed, Pass::kFwd, GemmPart::kNone, -1, [&] { embedding_fwd(tokens, W(embedding_), hs[0].get(), T, h, stream_); });
  for (int l = 0; l < L; ++l)
    layer_forward(l, *acts_[static_cast<size_t>(l)], hs[static_cast<size_t>(l)].get(), hs[static_cast<size_t>(l) + 1].get(),
                  Pass::kFwd, aux_loss);
  // Head: final norm, output layer, fused cross-entropy (its gradient written in the same
  // pass: the loss op's backward has nothing left to do).
  auto nf = act<bf16>(T * h);
  auto rstd = act<float>(T);
  op(OpId::kFinalNorm, Pass::kFwd, GemmPart::kNone, -1, [&] {
    rmsnorm_fwd(hs[static_cast<size_t>(L)].get(), W(final_norm_), nf.get(), rstd.get(), T, h, p_.norm_eps, stream_);
  });
  auto logits = act<bf16>(T * Vp);
  op(OpId::kLogits, Pass::kFwd, GemmPart::kNone, -1, [&] { linear_fwd(nf.get(), W(output_), logits.get(), Vp, h); });
  auto dlogits = act<bf16>(T * Vp);
  op(OpId::kLoss, Pass::kFwd, GemmPart::kNone, -1, [&] {
    cross_entropy_fwd_bwd(logits.get(), labels, loss_rows, dlogits.get(), T, p_.vocab, Vp, grad_scale, stream_);
  });
  logits.reset();
  op(OpId::kLoss, Pass::kBwd, GemmPart::kNone, -1, [] {});
  auto dnf = act<bf16>(T * h);
  op(OpId::kLogits, Pass::kBwd, GemmPart::kDgrad, -1, [&] { linear_dgrad(dlogits.get(), W(output_), dnf.get(), Vp, h); });
  op(OpId::kLogits, Pass::kBwd, GemmPart::kWgrad, -1, [&] { linear_wgrad(dlogits.get(), nf.get(), G(output_), Vp, h); });
  dlogits.reset();
  auto g0 = act<bf16>(T * h), g1 = act<bf16>(T * h);
  op(OpId::kFinalNorm, Pass::kBwd, GemmPart::kNone, -1, [&] {
    rmsnorm_bwd(hs[static_cast<size_t>(L)].get(), W(final_norm_), rstd.get(), dnf.get(), g0.get(), G(final_norm_), T, h,
                stream_);
  });
  nf.reset(), rstd.reset(), dnf.reset();
  hs[static_cast<size_t>(L)].reset();
  bf16* dy = g0.get();
  bf16* dx = g1.get();
  for (int l = L - 1; l >= 0; --l) {
    layer_backward(l, *acts_[static_cast<size_t>(l)], hs[static_cast<size_t>(l)].get(), dy, dx);
    if (l > 0) hs[static_cast<size_t>(l)].reset();
    std::swap(dy, dx);
  }
  op(OpId::kEmbed, Pass::kBwd, GemmPart::kNone, -1, [&] { embedding_bwd(tokens, dy, G(embedding_), T, h, stream_); });
  rec_ = nullptr;
  mb_ = -1;
}

void Model::optimizer_step(const AdamParams& ap, float clip, float* grad_norm, OpRecorder* rec) {
  rec_ = rec;
  op(OpId::kOptimizerStep, Pass::kStep, GemmPart::kNone, -1, [&] {
    LCM_CUDA_CHECK(cudaMemsetAsync(sumsq_.get(), 0, sizeof(double), stream_));
    sum_squares(grad_.get(), flat_, sumsq_.get(), stream_);
    clip_coefficient(sumsq_.get(), clip, clip_scale_.get(), grad_norm, stream_);
    // AdamW over runs of tensors with the same weight decay (norm weights: none).
    size_t i = 0;
    while (i < params_.size()) {
      size_t j = i;
      while (j < params_.size() && params_[j].decay == params_[i].decay) ++j;
      const int64_t begin = params_[i].offset;
      const int64_t end = j < params_.size() ? params_[j].offset : flat_;
      AdamParams a = ap;
      if (!params_[i].decay) a.weight_decay = 0.0f;
      adamw_step(master_.get() + begin, model_.get() + begin, m_.get() + begin, v_.get() + begin, grad_.get() + begin,
                 end - begin, a, clip_scale_.get(), stream_);
      i = j;
    }
  });
  rec_ = nullptr;
}

std::vector<Model::Routing> Model::routing() const {
  std::vector<Routing> out;
  for (size_t l = 0; l < moe_.size(); ++l)
    if (moe_[l]) out.push_back({static_cast<int>(l), moe_[l]->load(), moe_[l]->kept()});
  return out;
}

}  // namespace lcm::exec::train
