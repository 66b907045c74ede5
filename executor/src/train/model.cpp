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
  DeviceArray<bf16> qpre, kpre;              // qk_layernorm (GQA): Q and K before their norm
  DeviceArray<bf16> qlat, qlat_n, kvlat, kvlat_n, kpe;  // MLA: latents before / after the norm, the unrotated shared key
  DeviceArray<float> rstd1, stats, rstd2, rstd_q, rstd_k;
  bool live = false;
  void release() {
    n1.reset(), q.reset(), k.reset(), v.reset(), o.reset(), mid.reset(), n2.reset(), h1.reset(), a1.reset();
    qpre.reset(), kpre.reset(), qlat.reset(), qlat_n.reset(), kvlat.reset(), kvlat_n.reset(), kpe.reset();
    rstd1.reset(), stats.reset(), rstd2.reset(), rstd_q.reset(), rstd_k.reset();
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
  const int64_t h = p.hidden, d = p.head_dim, qkv_out = (p.heads + 2 * p.groups) * d, dv = p.v_dim;
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
    if (!p.mla) {
      q.qkv = static_cast<int>(params_.size());
      add_param(pre + "attn.qkv", {qkv_out, h}, std, 0, true);
      if (p.qk_norm) {
        q.q_norm = static_cast<int>(params_.size());
        add_param(pre + "attn.q_norm", {d}, 0, 1.0f, false);
        q.k_norm = static_cast<int>(params_.size());
        add_param(pre + "attn.k_norm", {d}, 0, 1.0f, false);
      }
    } else {
      // Megatron's MLASelfAttention: linear_q_down_proj, linear_kv_down_proj ([kv latent | k_pe] rows),
      // q_layernorm / kv_layernorm, linear_q_up_proj (or linear_q_proj), linear_kv_up_proj ([k_nope | v] per head).
      if (p.q_lora > 0) {
        q.q_down = static_cast<int>(params_.size());
        add_param(pre + "attn.q_down", {p.q_lora, h}, std, 0, true);
      }
      q.kv_down = static_cast<int>(params_.size());
      add_param(pre + "attn.kv_down", {p.kv_lora + p.qk_rope, h}, std, 0, true);
      if (p.qk_norm) {
        if (p.q_lora > 0) {
          q.q_norm = static_cast<int>(params_.size());
          add_param(pre + "attn.q_norm", {p.q_lora}, 0, 1.0f, false);
        }
        q.k_norm = static_cast<int>(params_.size());
        add_param(pre + "attn.kv_norm", {p.kv_lora}, 0, 1.0f, false);
      }
      q.q_up = static_cast<int>(params_.size());
      add_param(pre + (p.q_lora > 0 ? "attn.q_up" : "attn.q"), {p.heads * d, p.q_lora > 0 ? p.q_lora : h}, std, 0, true);
      q.kv_up = static_cast<int>(params_.size());
      add_param(pre + "attn.kv_up", {p.heads * (p.qk_nope + dv), p.kv_lora}, std, 0, true);
    }
    q.proj = static_cast<int>(params_.size());
    add_param(pre + "attn.proj", {h, p.heads * dv}, out_std, 0, true);
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

  // RoPE tables for positions 0..s-1 (MLA: over the qk_rope channels).
  const int64_t half = p.rope_dim / 2;
  rope_inv_freq_ = DeviceArray<float>(alloc, static_cast<size_t>(half), MemCategory::kOther);
  rope_cos_ = DeviceArray<float>(alloc, static_cast<size_t>(p.s * half), MemCategory::kOther);
  rope_sin_ = DeviceArray<float>(alloc, static_cast<size_t>(p.s * half), MemCategory::kOther);
  if (!dry) {
    float mscale = 1.0f;
    const std::vector<float> inv = rope_inv_freq(p.rope, p.rope_dim, &mscale);
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
    ap.dv = dv == d ? 0 : dv;
    ap.causal = true;
    ap.scale = p.softmax_scale;
    attn_ = std::make_unique<CudnnAttention>(cudnn, stream, ap, 1, p.deterministic_attention);
    if (!attn_->supported()) throw ExecError("cuDNN attention " + ap.shape_text() + ": " + attn_->unsupported_reason());
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
void Model::linear_dgrad(const bf16* dy, const bf16* w, bf16* dx, int64_t out, int64_t in, float beta) {
  gemm_->run(p_.tokens, in, out, dy, false, w, false, dx, false, beta);
}
void Model::linear_wgrad(const bf16* dy, const bf16* x, float* dw, int64_t out, int64_t in) {
  gemm_->run(out, in, p_.tokens, dy, true, x, false, dw, true, 1.0f);
}

int Model::attention_set(const AttentionTensors& t, void* workspace) {
  const std::array<const void*, 10> key{t.q, t.k, t.v, t.o, t.stats, t.dout, t.dq, t.dk, t.dv, workspace};
  const auto it = attn_sets_.find(key);
  if (it != attn_sets_.end()) return it->second;
  const int set = static_cast<int>(attn_sets_.size());
  attn_sets_.emplace(key, set);
  attn_->bind(set, t, workspace);
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

// The attention block between its norm and the core: projections, qk_layernorm and RoPE
// into a.q, a.k, a.v (BSHD), tagged as the schedule's ops.
void Model::attention_forward(int l, LayerActs& a, Pass pass, const std::function<bool(uint32_t)>& runs) {
  const LayerParams& q = lp_[static_cast<size_t>(l)];
  const int64_t T = p_.tokens, h = p_.hidden, d = p_.head_dim, hq = p_.heads, hkv = p_.groups;
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  const auto copy_cols = [&](void* dst, int64_t dst_cols, const void* src, int64_t src_cols, int64_t col0, int64_t cols) {
    LCM_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_cols) * sizeof(bf16),
                                     static_cast<const bf16*>(src) + col0, static_cast<size_t>(src_cols) * sizeof(bf16),
                                     static_cast<size_t>(cols) * sizeof(bf16), static_cast<size_t>(T),
                                     cudaMemcpyDeviceToDevice, stream_));
  };
  if (!p_.mla) {
    if (!runs(0)) return;
    if (!a.q.get()) {
      a.q = act<bf16>(T * hq * d), a.k = act<bf16>(T * hkv * d), a.v = act<bf16>(T * hkv * d);
      if (p_.qk_norm) {
        a.qpre = act<bf16>(T * hq * d), a.kpre = act<bf16>(T * hkv * d);
        a.rstd_q = act<float>(T * hq), a.rstd_k = act<float>(T * hkv);
      }
    }
    const int64_t row = (hq + 2 * hkv) * d;
    auto qkv = act<bf16>(T * row);
    op(OpId::kAttnQkv, pass, GemmPart::kNone, l, [&] { linear_fwd(a.n1.get(), W(q.qkv), qkv.get(), row, h); });
    // Q, K and V out of the fused projection's rows into BSHD tensors, turned by RoPE in the
    // same pass; with qk_layernorm the split comes first, each head of Q and K is normalised
    // (the norm's inputs kept for its backward), then RoPE turns them.
    if (p_.qk_norm) {
      op(OpId::kAttnQkNorm, pass, GemmPart::kNone, l, [&] {
        qkv_split_rope(qkv.get(), a.qpre.get(), a.kpre.get(), a.v.get(), nullptr, nullptr, T, p_.s, hq, hkv, d, false,
                       stream_);
        rmsnorm_fwd(a.qpre.get(), W(q.q_norm), a.q.get(), a.rstd_q.get(), T * hq, d, p_.norm_eps, stream_);
        rmsnorm_fwd(a.kpre.get(), W(q.k_norm), a.k.get(), a.rstd_k.get(), T * hkv, d, p_.norm_eps, stream_);
      });
      op(OpId::kAttnRope, pass, GemmPart::kNone, l, [&] {
        rope_fwd(a.q.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, d, stream_);
        rope_fwd(a.k.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hkv, d, d, stream_);
      });
    } else {
      op(OpId::kAttnRope, pass, GemmPart::kNone, l, [&] {
        qkv_split_rope(qkv.get(), a.q.get(), a.k.get(), a.v.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, hkv,
                       d, true, stream_);
      });
    }
    return;
  }
  // MLA (Megatron's multi_latent_attention.py at tp 1): down projections of the normed input,
  // qk_layernorm of the latents, up projections, RoPE on the last qk_rope channels of each
  // query head and on the shared key, K = [k_nope | k_pe] per head, V.
  const int64_t dn = p_.qk_nope, dr = p_.qk_rope, dv = p_.v_dim, ql = p_.q_lora, kl = p_.kv_lora;
  if (runs(0)) {
    if (!a.kvlat.get()) {
      if (ql > 0) a.qlat = act<bf16>(T * ql);
      a.kvlat = act<bf16>(T * kl), a.kpe = act<bf16>(T * dr);
      if (p_.qk_norm) {
        if (ql > 0) a.qlat_n = act<bf16>(T * ql), a.rstd_q = act<float>(T);
        a.kvlat_n = act<bf16>(T * kl), a.rstd_k = act<float>(T);
      }
    }
    if (ql > 0)
      op(OpId::kAttnQDown, pass, GemmPart::kNone, l, [&] { linear_fwd(a.n1.get(), W(q.q_down), a.qlat.get(), ql, h); });
    auto kvd = act<bf16>(T * (kl + dr));
    op(OpId::kAttnKvDown, pass, GemmPart::kNone, l, [&] {
      linear_fwd(a.n1.get(), W(q.kv_down), kvd.get(), kl + dr, h);
      copy_cols(a.kvlat.get(), kl, kvd.get(), kl + dr, 0, kl);
      copy_cols(a.kpe.get(), dr, kvd.get(), kl + dr, kl, dr);
    });
  }
  if (!runs(kRecomputeMlaUpProj)) return;
  if (!a.q.get()) a.q = act<bf16>(T * hq * d), a.k = act<bf16>(T * hq * d), a.v = act<bf16>(T * hq * dv);
  if (p_.qk_norm)
    op(OpId::kAttnQkNorm, pass, GemmPart::kNone, l, [&] {
      if (ql > 0) rmsnorm_fwd(a.qlat.get(), W(q.q_norm), a.qlat_n.get(), a.rstd_q.get(), T, ql, p_.norm_eps, stream_);
      rmsnorm_fwd(a.kvlat.get(), W(q.k_norm), a.kvlat_n.get(), a.rstd_k.get(), T, kl, p_.norm_eps, stream_);
    });
  const bf16* q_in = ql > 0 ? (p_.qk_norm ? a.qlat_n.get() : a.qlat.get()) : a.n1.get();
  const bf16* kv_in = p_.qk_norm ? a.kvlat_n.get() : a.kvlat.get();
  op(ql > 0 ? OpId::kAttnQUp : OpId::kAttnQ, pass, GemmPart::kNone, l,
     [&] { linear_fwd(q_in, W(q.q_up), a.q.get(), hq * d, ql > 0 ? ql : h); });
  auto kvu = act<bf16>(T * hq * (dn + dv));
  op(OpId::kAttnKvUp, pass, GemmPart::kNone, l, [&] { linear_fwd(kv_in, W(q.kv_up), kvu.get(), hq * (dn + dv), kl); });
  auto kpe = act<bf16>(T * dr);
  op(OpId::kAttnRope, pass, GemmPart::kNone, l, [&] {
    LCM_CUDA_CHECK(cudaMemcpyAsync(kpe.get(), a.kpe.get(), a.kpe.bytes(), cudaMemcpyDeviceToDevice, stream_));
    rope_fwd(a.q.get() + dn, rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, dr, stream_);
    rope_fwd(kpe.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, 1, dr, dr, stream_);
    mla_assemble_kv(kvu.get(), kpe.get(), a.k.get(), a.v.get(), T, hq, dn, dr, dv, stream_);
  });
}

void Model::layer_forward(int l, LayerActs& a, const bf16* x, bf16* out, Pass pass, float* aux_loss) {
  const size_t li = static_cast<size_t>(l);
  const LayerParams& q = lp_[li];
  const int64_t T = p_.tokens, h = p_.hidden, hq = p_.heads, f = p_.ffn;
  const bool rc = pass == Pass::kRecompute;
  const bool full = p_.recompute_layer[li] != 0;
  const bool moe = p_.moe_layer[li] != 0;
  // Whether an op of these recompute modules runs in this pass (every op in the forward and
  // under full recompute; under selective recompute those of the selected modules).
  const std::function<bool(uint32_t)> runs = [&](uint32_t modules) {
    return !rc || full || (p_.recompute_modules & modules) != 0;
  };
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  if (!a.live) {
    a.n1 = act<bf16>(T * h);
    a.rstd1 = act<float>(T);
    a.o = act<bf16>(T * hq * p_.v_dim);
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
  attention_forward(l, a, pass, runs);
  if (runs(kRecomputeCoreAttn))
    op(OpId::kAttnCore, pass, GemmPart::kNone, l, [&] {
      AttentionTensors t;
      t.q = a.q.get(), t.k = a.k.get(), t.v = a.v.get(), t.o = a.o.get(), t.stats = a.stats.get();
      t.dout = a.o.get(), t.dq = a.q.get(), t.dk = a.k.get(), t.dv = a.v.get();  // the backward pack is not run
      DeviceArray<char> ws(alloc_, attn_->forward_workspace_bytes(), MemCategory::kWorkspace);
      attn_->forward(attention_set(t, ws.get()));
    });
  // mla_up_proj recompute: the up projections' outputs (Q, K, V) are rebuilt before the backward.
  if (p_.mla && !rc && !full && p_.recompute == RecomputeKind::kSelective &&
      (p_.recompute_modules & kRecomputeMlaUpProj) != 0)
    a.q.reset(), a.k.reset(), a.v.reset();
  if (runs(0)) {
    auto y = act<bf16>(T * h);
    op(OpId::kAttnProj, pass, GemmPart::kNone, l, [&] { linear_fwd(a.o.get(), W(q.proj), y.get(), h, hq * p_.v_dim); });
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
      if (capture_ && !rc) capture_->push_back({l, mb_, moe_[li]->last_slots()});
    }
  }
  if (runs(0)) op(OpId::kMlpBda, pass, GemmPart::kNone, l, [&] { add(a.mid.get(), y2.get(), out, T * h, stream_); });
  if (!rc && full) {  // full recompute: keep only the layer input
    a.release();
    if (moe && !dry_) moe_[li]->release_saved();
  }
}

// The attention block's backward from dL/d(projection output) (dmid) down to dL/dn1.
DeviceArray<bf16> Model::attention_backward(int l, LayerActs& a, const bf16* dmid) {
  const LayerParams& q = lp_[static_cast<size_t>(l)];
  const int64_t T = p_.tokens, h = p_.hidden, d = p_.head_dim, hq = p_.heads, hkv = p_.groups, dv = p_.v_dim;
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  auto G = [&](int idx) { return grad_.get() + params_[static_cast<size_t>(idx)].offset; };
  const Pass B = Pass::kBwd;
  const auto copy_cols = [&](void* dst, int64_t dst_cols, int64_t col0, const void* src, int64_t src_cols, int64_t cols) {
    LCM_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<bf16*>(dst) + col0, static_cast<size_t>(dst_cols) * sizeof(bf16), src,
                                     static_cast<size_t>(src_cols) * sizeof(bf16), static_cast<size_t>(cols) * sizeof(bf16),
                                     static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
  };
  auto dout = act<bf16>(T * hq * dv);
  op(OpId::kAttnProj, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dmid, W(q.proj), dout.get(), h, hq * dv); });
  op(OpId::kAttnProj, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dmid, a.o.get(), G(q.proj), h, hq * dv); });
  auto dq = act<bf16>(T * hq * d), dk = act<bf16>(T * hkv * d), dvv = act<bf16>(T * hkv * dv);
  op(OpId::kAttnCore, B, GemmPart::kNone, l, [&] {
    AttentionTensors t;
    t.q = a.q.get(), t.k = a.k.get(), t.v = a.v.get(), t.o = a.o.get(), t.stats = a.stats.get();
    t.dout = dout.get(), t.dq = dq.get(), t.dk = dk.get(), t.dv = dvv.get();
    DeviceArray<char> ws(alloc_, attn_->workspace_bytes(), MemCategory::kWorkspace);
    attn_->backward(attention_set(t, ws.get()));
  });
  dout.reset();
  auto dn1 = act<bf16>(T * h);
  if (!p_.mla) {
    const int64_t row = (hq + 2 * hkv) * d;
    auto dqkv = act<bf16>(T * row);
    if (!p_.qk_norm) {
      op(OpId::kAttnRope, B, GemmPart::kNone, l, [&] {
        qkv_join_rope(dq.get(), dk.get(), dvv.get(), dqkv.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, hkv, d,
                      true, stream_);
      });
    } else {
      op(OpId::kAttnRope, B, GemmPart::kNone, l, [&] {
        rope_bwd(dq.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, d, stream_);
        rope_bwd(dk.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, hkv, d, d, stream_);
      });
      auto dqp = act<bf16>(T * hq * d), dkp = act<bf16>(T * hkv * d);
      op(OpId::kAttnQkNorm, B, GemmPart::kNone, l, [&] {
        rmsnorm_bwd(a.qpre.get(), W(q.q_norm), a.rstd_q.get(), dq.get(), dqp.get(), G(q.q_norm), T * hq, d, stream_);
        rmsnorm_bwd(a.kpre.get(), W(q.k_norm), a.rstd_k.get(), dk.get(), dkp.get(), G(q.k_norm), T * hkv, d, stream_);
        qkv_join_rope(dqp.get(), dkp.get(), dvv.get(), dqkv.get(), nullptr, nullptr, T, p_.s, hq, hkv, d, false, stream_);
      });
    }
    dq.reset(), dk.reset(), dvv.reset();
    op(OpId::kAttnQkv, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dqkv.get(), W(q.qkv), dn1.get(), row, h); });
    op(OpId::kAttnQkv, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dqkv.get(), a.n1.get(), G(q.qkv), row, h); });
    return dn1;
  }
  // MLA, the forward's ops in reverse: rope, kv_up, q_up (q), qk_norm, kv_down, q_down.
  const int64_t dn = p_.qk_nope, dr = p_.qk_rope, ql = p_.q_lora, kl = p_.kv_lora;
  auto dkvu = act<bf16>(T * hq * (dn + dv));
  auto dkpe = act<bf16>(T * dr);
  op(OpId::kAttnRope, B, GemmPart::kNone, l, [&] {
    rope_bwd(dq.get() + dn, rope_cos_.get(), rope_sin_.get(), T, p_.s, hq, d, dr, stream_);
    mla_split_kv_grad(dk.get(), dvv.get(), dkvu.get(), dkpe.get(), T, hq, dn, dr, dv, stream_);
    rope_bwd(dkpe.get(), rope_cos_.get(), rope_sin_.get(), T, p_.s, 1, dr, dr, stream_);
  });
  dk.reset(), dvv.reset();
  const bf16* q_in = ql > 0 ? (p_.qk_norm ? a.qlat_n.get() : a.qlat.get()) : a.n1.get();
  const bf16* kv_in = p_.qk_norm ? a.kvlat_n.get() : a.kvlat.get();
  auto dkv_in = act<bf16>(T * kl);
  op(OpId::kAttnKvUp, B, GemmPart::kDgrad, l, [&] { linear_dgrad(dkvu.get(), W(q.kv_up), dkv_in.get(), hq * (dn + dv), kl); });
  op(OpId::kAttnKvUp, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dkvu.get(), kv_in, G(q.kv_up), hq * (dn + dv), kl); });
  dkvu.reset();
  // Without q-LoRA the Q projection reads n1: its dgrad is the first writer of dn1.
  DeviceArray<bf16> dq_in = ql > 0 ? act<bf16>(T * ql) : DeviceArray<bf16>();
  const OpId q_op = ql > 0 ? OpId::kAttnQUp : OpId::kAttnQ;
  op(q_op, B, GemmPart::kDgrad, l,
     [&] { linear_dgrad(dq.get(), W(q.q_up), ql > 0 ? dq_in.get() : dn1.get(), hq * d, ql > 0 ? ql : h); });
  op(q_op, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dq.get(), q_in, G(q.q_up), hq * d, ql > 0 ? ql : h); });
  dq.reset();
  DeviceArray<bf16> dqlat, dkvlat;
  if (p_.qk_norm) {
    if (ql > 0) dqlat = act<bf16>(T * ql);
    dkvlat = act<bf16>(T * kl);
    op(OpId::kAttnQkNorm, B, GemmPart::kNone, l, [&] {
      if (ql > 0)
        rmsnorm_bwd(a.qlat.get(), W(q.q_norm), a.rstd_q.get(), dq_in.get(), dqlat.get(), G(q.q_norm), T, ql, stream_);
      rmsnorm_bwd(a.kvlat.get(), W(q.k_norm), a.rstd_k.get(), dkv_in.get(), dkvlat.get(), G(q.k_norm), T, kl, stream_);
    });
  }
  const bf16* g_qlat = p_.qk_norm ? dqlat.get() : dq_in.get();
  const bf16* g_kvlat = p_.qk_norm ? dkvlat.get() : dkv_in.get();
  auto dkvd = act<bf16>(T * (kl + dr));
  op(OpId::kAttnKvDown, B, GemmPart::kDgrad, l, [&] {
    copy_cols(dkvd.get(), kl + dr, 0, g_kvlat, kl, kl);
    copy_cols(dkvd.get(), kl + dr, kl, dkpe.get(), dr, dr);
    linear_dgrad(dkvd.get(), W(q.kv_down), dn1.get(), kl + dr, h, ql > 0 ? 0.0f : 1.0f);
  });
  op(OpId::kAttnKvDown, B, GemmPart::kWgrad, l, [&] { linear_wgrad(dkvd.get(), a.n1.get(), G(q.kv_down), kl + dr, h); });
  if (ql > 0) {
    op(OpId::kAttnQDown, B, GemmPart::kDgrad, l, [&] { linear_dgrad(g_qlat, W(q.q_down), dn1.get(), ql, h, 1.0f); });
    op(OpId::kAttnQDown, B, GemmPart::kWgrad, l, [&] { linear_wgrad(g_qlat, a.n1.get(), G(q.q_down), ql, h); });
  }
  return dn1;
}

void Model::layer_backward(int l, LayerActs& a, const bf16* x, const bf16* dy, bf16* dx) {
  const size_t li = static_cast<size_t>(l);
  const LayerParams& q = lp_[li];
  const int64_t T = p_.tokens, h = p_.hidden, f = p_.ffn;
  const bool moe = p_.moe_layer[li] != 0;
  auto W = [&](int idx) { return model_.get() + params_[static_cast<size_t>(idx)].offset; };
  auto G = [&](int idx) { return grad_.get() + params_[static_cast<size_t>(idx)].offset; };
  if (p_.recompute_layer[li] || (p_.recompute == RecomputeKind::kSelective && p_.recompute_modules != 0)) {
    auto out = act<bf16>(T * h);  // the recomputed layer output is not needed again
    layer_forward(l, a, x, out.get(), Pass::kRecompute, nullptr);
  }
  const Pass B = Pass::kBwd;
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
  auto dn1 = attention_backward(l, a, dmid.get());
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
  // The gradient of the logits is written over them (Transformer Engine's fused cross-entropy;
  // plan_training's overrides describe the loss so).
  op(OpId::kLoss, Pass::kFwd, GemmPart::kNone, -1, [&] {
    cross_entropy_fwd_bwd(logits.get(), labels, loss_rows, logits.get(), T, p_.vocab, Vp, grad_scale, stream_);
  });
  DeviceArray<bf16> dlogits = std::move(logits);
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
