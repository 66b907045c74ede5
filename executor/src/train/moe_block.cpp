// MoE block of the training runner, ep = 1 (moe_block.hpp).
//
// Parameter layouts (PyTorch Linear: [out, in], y = x W^T), all bf16 with fp32 grads:
//   router       [E, h]
//   experts.fc1  [E, 2f, h]  (rows 0..f-1 the gate, f..2f-1 the up projection)
//   experts.fc2  [E, h, f]
//   shared.fc1   [2 fs, h], shared.fc2 [h, fs]   (fs = shared_ffn; only when fs > 0)
//   expert_bias  [E]         (selection only; receives no gradient: the aux-free update
//                             is the runner's, outside AdamW)
// Routing follows Megatron's topk_softmax_with_capacity (moe.hpp documents the semantics the
// bench kernels share); the aux loss uses the plain top-k of the scores for its counts, as
// Megatron's compute_routing_scores_for_aux_loss does.
#include "lcm/executor/train/moe_block.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/moe_kernels.cuh"
#include "lcm/executor/error.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/model/capacity.hpp"
#include "train/moe_block_kernels.cuh"

namespace lcm::exec::train {

struct MoeBlock::Impl {
  MoeBlockConfig c;
  CachingAllocator& alloc;
  LtGemm& gemm;
  cudaStream_t s;
  int64_t n = 0;    // assignments T k
  int64_t cap = -1; // per-expert capacity; -1 dropless
  int64_t rows_max = 0;
  ParamView router{}, fc1{}, fc2{}, sfc1{}, sfc2{}, bias{};
  int32_t* host = nullptr;  // pinned: counts[E], kept[E]
  std::vector<int32_t> load, kept;
  std::vector<int64_t> rows, offs;  // per expert: GEMM rows and first row
  int64_t rows_total = 0;
  bool saved = false;
  const bf16* x = nullptr;

  // Saved by the forward.
  DeviceArray<float> logits, w, psum, zsum;
  DeviceArray<int32_t> idx, eid, eid2, pos, pos2, row_of, chunk_counts, counts, kept_d, offset, totals2, need, aux_count;
  DeviceArray<uint32_t> thr;
  DeviceArray<bf16> send, h1, a, back, sh1, sa;

  Impl(const MoeBlockConfig& cfg, CachingAllocator& al, LtGemm& g, cudaStream_t st) : c(cfg), alloc(al), gemm(g), s(st) {}

  moe::RouteDesc route_desc() const {
    moe::RouteDesc d;
    d.tokens = static_cast<int>(c.tokens);
    d.experts = c.experts;
    d.topk = c.topk;
    d.groups = c.groups;
    d.group_topk = c.group_topk;
    d.sigmoid = c.score == RouterScore::kSigmoid;
    d.aux = c.aux_loss_coeff != 0.0f;
    d.z = c.z_loss_coeff != 0.0f;
    return d;
  }
  OpTag tag(OpId id, Pass p, int layer, int mb, GemmPart part = GemmPart::kNone) const {
    return OpTag{id, p, part, layer, mb};
  }
  template <class T>
  DeviceArray<T> act(size_t count) {
    return DeviceArray<T>(alloc, std::max<size_t>(count, 1), MemCategory::kActivations);
  }
  const bf16* w1(int e) const { return fc1.weight + static_cast<int64_t>(e) * 2 * c.expert_ffn * c.hidden; }
  const bf16* w2(int e) const { return fc2.weight + static_cast<int64_t>(e) * c.hidden * c.expert_ffn; }
  void release() {
    for (auto* p : {&logits, &w, &psum, &zsum}) p->reset();
    for (auto* p : {&idx, &eid, &eid2, &pos, &pos2, &row_of, &chunk_counts, &counts, &kept_d, &offset, &totals2, &need,
                    &aux_count})
      p->reset();
    thr.reset();
    for (auto* p : {&send, &h1, &a, &back, &sh1, &sa}) p->reset();
    saved = false;
  }
};

MoeBlock::MoeBlock(const MoeBlockConfig& c, CachingAllocator& alloc, LtGemm& gemm, cudaStream_t s)
    : impl_(new Impl(c, alloc, gemm, s)) {
  Impl& m = *impl_;
  const auto fail = [&](const std::string& why) {
    delete impl_;
    impl_ = nullptr;
    throw ExecError("MoE block: " + why);
  };
  if (c.tokens <= 0 || c.hidden <= 0 || c.expert_ffn <= 0 || c.experts <= 0 || c.topk <= 0 || c.topk > c.experts)
    fail("tokens, hidden, expert_ffn, experts and 0 < topk <= experts are required");
  if (c.hidden % 8 != 0 || c.expert_ffn % 8 != 0 || c.shared_ffn % 8 != 0)
    fail("hidden, expert_ffn and shared_ffn must be multiples of 8 (16-byte rows for the permutation and cuBLASLt)");
  if (c.groups > 0 && (c.experts % c.groups != 0 || c.group_topk <= 0 || c.topk % c.group_topk != 0 ||
                       c.topk / c.group_topk > c.experts / c.groups))
    fail("group-limited routing needs experts % groups == 0 and topk % group_topk == 0");
  if (c.expert_bias && c.score != RouterScore::kSigmoid)
    fail("the expert bias applies to sigmoid scores only (Megatron's topk_softmax_with_capacity)");
  m.n = c.tokens * c.topk;
  m.cap = c.capacity_factor > 0 ? lcm::capacity(c.tokens, c.topk, c.experts, c.capacity_factor) : -1;
  if (m.cap < 0) m.rows_max = m.n;
  else if (c.pad_to_capacity) m.rows_max = m.cap * c.experts;
  else m.rows_max = std::min<int64_t>(m.n, m.cap * c.experts);
  LCM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m.host), 2 * static_cast<size_t>(c.experts) * 4));
}

MoeBlock::~MoeBlock() {
  if (!impl_) return;
  impl_->release();
  if (impl_->host) cudaFreeHost(impl_->host);
  delete impl_;
}

std::vector<ParamView> MoeBlock::param_shapes() const {
  const MoeBlockConfig& c = impl_->c;
  const int64_t E = c.experts, h = c.hidden, f = c.expert_ffn, fs = c.shared_ffn;
  // Megatron's init: normal(0, 0.02); output layers (fc2) scaled by 1 / sqrt(2 num_layers).
  const float out_std = 0.02f / std::sqrt(2.0f * static_cast<float>(std::max(1, c.num_layers_for_aux)));
  std::vector<ParamView> v;
  v.push_back({"router", nullptr, nullptr, E * h, 0.02f});
  v.push_back({"experts.fc1", nullptr, nullptr, E * 2 * f * h, 0.02f});
  v.push_back({"experts.fc2", nullptr, nullptr, E * h * f, out_std});
  if (fs > 0) {
    v.push_back({"shared.fc1", nullptr, nullptr, 2 * fs * h, 0.02f});
    v.push_back({"shared.fc2", nullptr, nullptr, h * fs, out_std});
  }
  if (c.expert_bias) v.push_back({"expert_bias", nullptr, nullptr, E, 0.0f});
  return v;
}

void MoeBlock::bind(const std::vector<ParamView>& views) {
  Impl& m = *impl_;
  const std::vector<ParamView> want = param_shapes();
  if (views.size() != want.size()) throw ExecError("MoE block bind: " + std::to_string(want.size()) + " views expected");
  for (size_t i = 0; i < want.size(); ++i) {
    const ParamView& v = views[i];
    if (std::strcmp(v.name, want[i].name) != 0 || v.numel != want[i].numel || !v.weight)
      throw ExecError(std::string("MoE block bind: view ") + std::to_string(i) + " must be " + want[i].name + " of " +
                      std::to_string(want[i].numel) + " elements with a weight");
    const std::string name = v.name;
    if (name != "expert_bias" && !v.grad) throw ExecError("MoE block bind: " + name + " needs a grad buffer");
    if (name == "router") m.router = v;
    else if (name == "experts.fc1") m.fc1 = v;
    else if (name == "experts.fc2") m.fc2 = v;
    else if (name == "shared.fc1") m.sfc1 = v;
    else if (name == "shared.fc2") m.sfc2 = v;
    else m.bias = v;
  }
}

void MoeBlock::forward(const bf16* x, bf16* y, float* aux_loss_out, int layer, int micro_batch, OpRecorder* rec) {
  Impl& m = *impl_;
  const MoeBlockConfig& c = m.c;
  if (!m.router.weight) throw ExecError("MoE block forward before bind()");
  m.release();
  m.x = x;
  const int64_t T = c.tokens, h = c.hidden, f = c.expert_ffn, fs = c.shared_ffn, n = m.n;
  const int E = c.experts, k = c.topk;
  const size_t En = static_cast<size_t>(E), nn = static_cast<size_t>(n);
  const moe::RouteDesc rd = m.route_desc();
  cudaStream_t s = m.s;

  m.logits = m.act<float>(static_cast<size_t>(T) * En);
  {
    OpScope op(rec, m.tag(OpId::kMoeRouter, Pass::kFwd, layer, micro_batch), s);
    m.gemm.run(T, E, h, x, false, m.router.weight, true, m.logits.get(), true, 0.0f, /*exact_algo=*/true);
  }
  m.idx = m.act<int32_t>(nn);
  m.w = m.act<float>(nn);
  m.eid = m.act<int32_t>(nn);
  m.aux_count = m.act<int32_t>(En);
  m.psum = m.act<float>(En);
  m.zsum = m.act<float>(1);
  {
    OpScope op(rec, m.tag(OpId::kMoeTopk, Pass::kFwd, layer, micro_batch), s);
    moe::route(rd, m.logits.get(), c.expert_bias ? m.bias.weight : nullptr, m.idx.get(), m.w.get(), m.eid.get(),
               m.aux_count.get(), m.psum.get(), m.zsum.get(), s);
    if (aux_loss_out)
      moe::loss_finalize(rd, m.aux_count.get(), m.psum.get(), m.zsum.get(), c.aux_loss_coeff, c.z_loss_coeff,
                         aux_loss_out, s);
  }
  m.eid2 = m.act<int32_t>(nn);
  m.pos = m.act<int32_t>(nn);
  m.pos2 = m.act<int32_t>(nn);
  m.row_of = m.act<int32_t>(nn);
  m.chunk_counts = m.act<int32_t>(static_cast<size_t>(kernels::moe_rank_chunks(n)) * En);
  m.counts = m.act<int32_t>(En);
  m.kept_d = m.act<int32_t>(En);
  m.offset = m.act<int32_t>(En);
  m.totals2 = m.act<int32_t>(En);
  m.need = m.act<int32_t>(En);
  m.thr = m.act<uint32_t>(En);
  m.send = m.act<bf16>(static_cast<size_t>(m.rows_max * h));
  {
    OpScope op(rec, m.tag(OpId::kMoePermute, Pass::kFwd, layer, micro_batch), s);
    kernels::moe_rank(m.eid.get(), n, E, m.chunk_counts.get(), m.counts.get(), m.pos.get(), s);
    const int32_t* kept_pos = m.pos.get();
    if (m.cap < 0) {
      kernels::moe_offsets(m.counts.get(), E, -1, m.kept_d.get(), m.offset.get(), s);
      LCM_CUDA_CHECK(cudaMemcpyAsync(m.eid2.get(), m.eid.get(), nn * 4, cudaMemcpyDeviceToDevice, s));
    } else if (c.drop_by_position) {
      kernels::moe_keep_position(m.idx.get(), m.pos.get(), n, m.cap, m.eid2.get(), s);
      kernels::moe_offsets(m.counts.get(), E, m.cap, m.kept_d.get(), m.offset.get(), s);
    } else {
      kernels::moe_probs_threshold(m.idx.get(), m.w.get(), n, m.counts.get(), E, m.cap, m.thr.get(), m.need.get(), s);
      kernels::moe_mark_ties(m.idx.get(), m.w.get(), n, m.thr.get(), m.need.get(), m.eid2.get(), s);
      kernels::moe_rank(m.eid2.get(), n, E, m.chunk_counts.get(), m.totals2.get(), m.pos2.get(), s);  // among ties
      kernels::moe_keep_probs(m.idx.get(), m.w.get(), n, m.thr.get(), m.need.get(), m.pos2.get(), m.eid2.get(), s);
      kernels::moe_rank(m.eid2.get(), n, E, m.chunk_counts.get(), m.totals2.get(), m.pos2.get(), s);  // among kept
      kernels::moe_offsets(m.totals2.get(), E, -1, m.kept_d.get(), m.offset.get(), s);
      kept_pos = m.pos2.get();
    }
    if (c.pad_to_capacity && m.cap >= 0) {
      moe::padded_offsets(E, m.cap, m.offset.get(), s);
      LCM_CUDA_CHECK(cudaMemsetAsync(m.send.get(), 0, static_cast<size_t>(m.rows_max * h) * 2, s));
    }
    kernels::moe_scatter(x, h, m.eid2.get(), kept_pos, m.offset.get(), n, k, m.row_of.get(), m.send.get(), s);
    // Rows per expert to the host (the expert GEMMs' shapes).
    LCM_CUDA_CHECK(cudaMemcpyAsync(m.host, m.counts.get(), En * 4, cudaMemcpyDeviceToHost, s));
    LCM_CUDA_CHECK(cudaMemcpyAsync(m.host + E, m.kept_d.get(), En * 4, cudaMemcpyDeviceToHost, s));
    LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  m.load.assign(m.host, m.host + E);
  m.kept.assign(m.host + E, m.host + 2 * E);
  m.rows.assign(En, 0);
  m.offs.assign(En, 0);
  m.rows_total = 0;
  for (int e = 0; e < E; ++e) {
    m.rows[static_cast<size_t>(e)] = c.pad_to_capacity && m.cap >= 0 ? m.cap : m.kept[static_cast<size_t>(e)];
    m.offs[static_cast<size_t>(e)] = m.rows_total;
    m.rows_total += m.rows[static_cast<size_t>(e)];
  }
  if (m.rows_total > m.rows_max) throw ExecError("MoE block: kept rows exceed the buffer bound (a bug)");
  const int64_t R = m.rows_total;
  m.h1 = m.act<bf16>(static_cast<size_t>(R * 2 * f));
  m.a = m.act<bf16>(static_cast<size_t>(R * f));
  m.back = m.act<bf16>(static_cast<size_t>(R * h));
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc1, Pass::kFwd, layer, micro_batch), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0) m.gemm.run(r, 2 * f, h, m.send.get() + o * h, false, m.w1(e), true, m.h1.get() + o * 2 * f, false);
    }
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsAct, Pass::kFwd, layer, micro_batch), s);
    swiglu_fwd(m.h1.get(), m.a.get(), R, f, s);
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc2, Pass::kFwd, layer, micro_batch), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0) m.gemm.run(r, h, f, m.a.get() + o * f, false, m.w2(e), true, m.back.get() + o * h, false);
    }
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeUnpermute, Pass::kFwd, layer, micro_batch), s);
    kernels::moe_unpermute_fwd(m.back.get(), m.row_of.get(), m.w.get(), T, k, h, y, s);
  }
  if (fs > 0) {
    m.sh1 = m.act<bf16>(static_cast<size_t>(T * 2 * fs));
    m.sa = m.act<bf16>(static_cast<size_t>(T * fs));
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc1, Pass::kFwd, layer, micro_batch), s);
      m.gemm.run(T, 2 * fs, h, x, false, m.sfc1.weight, true, m.sh1.get(), false, 0.0f, /*exact_algo=*/true);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedAct, Pass::kFwd, layer, micro_batch), s);
      swiglu_fwd(m.sh1.get(), m.sa.get(), T, fs, s);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc2, Pass::kFwd, layer, micro_batch), s);
      m.gemm.run(T, h, fs, m.sa.get(), false, m.sfc2.weight, true, y, false, 1.0f, /*exact_algo=*/true);  // y += shared
    }
  }
  m.saved = true;
}

void MoeBlock::backward(const bf16* dy, bf16* dx, float loss_scale, int layer, int micro_batch, OpRecorder* rec) {
  Impl& m = *impl_;
  const MoeBlockConfig& c = m.c;
  if (!m.saved) throw ExecError("MoE block backward without saved activations (forward first)");
  const int64_t T = c.tokens, h = c.hidden, f = c.expert_ffn, fs = c.shared_ffn, R = m.rows_total;
  const int E = c.experts, k = c.topk;
  const size_t nn = static_cast<size_t>(m.n);
  const moe::RouteDesc rd = m.route_desc();
  cudaStream_t s = m.s;
  const bf16* x = m.x;
  bool dx_written = false;

  if (fs > 0) {
    DeviceArray<bf16> dsa = m.act<bf16>(static_cast<size_t>(T * fs)), dsh1 = m.act<bf16>(static_cast<size_t>(T * 2 * fs));
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc2, Pass::kBwd, layer, micro_batch, GemmPart::kDgrad), s);
      m.gemm.run(T, fs, h, dy, false, m.sfc2.weight, false, dsa.get(), false, 0.0f, /*exact_algo=*/true);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc2, Pass::kBwd, layer, micro_batch, GemmPart::kWgrad), s);
      m.gemm.run(h, fs, T, dy, true, m.sa.get(), false, m.sfc2.grad, true, 1.0f, /*exact_algo=*/true);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedAct, Pass::kBwd, layer, micro_batch), s);
      swiglu_bwd(m.sh1.get(), dsa.get(), dsh1.get(), T, fs, s);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc1, Pass::kBwd, layer, micro_batch, GemmPart::kDgrad), s);
      m.gemm.run(T, h, 2 * fs, dsh1.get(), false, m.sfc1.weight, false, dx, false, 0.0f, /*exact_algo=*/true);
    }
    {
      OpScope op(rec, m.tag(OpId::kMoeSharedFc1, Pass::kBwd, layer, micro_batch, GemmPart::kWgrad), s);
      m.gemm.run(2 * fs, h, T, dsh1.get(), true, x, false, m.sfc1.grad, true, 1.0f, /*exact_algo=*/true);
    }
    dx_written = true;
  }

  DeviceArray<float> dprob = m.act<float>(nn);
  DeviceArray<bf16> dyperm = m.act<bf16>(static_cast<size_t>(R * h));
  {
    OpScope op(rec, m.tag(OpId::kMoeUnpermute, Pass::kBwd, layer, micro_batch), s);
    if (c.pad_to_capacity && m.cap >= 0)  // padded rows are never written by the kernel
      LCM_CUDA_CHECK(cudaMemsetAsync(dyperm.get(), 0, static_cast<size_t>(R * h) * 2, s));
    kernels::moe_unpermute_bwd(dy, m.back.get(), m.row_of.get(), m.w.get(), T, k, h, dyperm.get(), dprob.get(), s);
  }
  DeviceArray<bf16> da = m.act<bf16>(static_cast<size_t>(R * f));
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc2, Pass::kBwd, layer, micro_batch, GemmPart::kDgrad), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0) m.gemm.run(r, f, h, dyperm.get() + o * h, false, m.w2(e), false, da.get() + o * f, false);
    }
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc2, Pass::kBwd, layer, micro_batch, GemmPart::kWgrad), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0)
        m.gemm.run(h, f, r, dyperm.get() + o * h, true, m.a.get() + o * f, false, m.fc2.grad + e * h * f, true, 1.0f);
    }
  }
  DeviceArray<bf16> dh1 = m.act<bf16>(static_cast<size_t>(R * 2 * f));
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsAct, Pass::kBwd, layer, micro_batch), s);
    swiglu_bwd(m.h1.get(), da.get(), dh1.get(), R, f, s);
  }
  da.reset();
  DeviceArray<bf16> dxperm = std::move(dyperm);  // same size [R, h]; dyperm is no longer read
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc1, Pass::kBwd, layer, micro_batch, GemmPart::kDgrad), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0) m.gemm.run(r, h, 2 * f, dh1.get() + o * 2 * f, false, m.w1(e), false, dxperm.get() + o * h, false);
    }
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeExpertsFc1, Pass::kBwd, layer, micro_batch, GemmPart::kWgrad), s);
    for (int e = 0; e < E; ++e) {
      const int64_t r = m.rows[static_cast<size_t>(e)], o = m.offs[static_cast<size_t>(e)];
      if (r > 0)
        m.gemm.run(2 * f, h, r, dh1.get() + o * 2 * f, true, m.send.get() + o * h, false, m.fc1.grad + e * 2 * f * h,
                   true, 1.0f);
    }
  }
  dh1.reset();
  {
    OpScope op(rec, m.tag(OpId::kMoePermute, Pass::kBwd, layer, micro_batch), s);
    moe::permute_bwd(dxperm.get(), m.row_of.get(), T, k, h, dx, dx_written, s);
  }
  dxperm.reset();
  DeviceArray<bf16> dl = m.act<bf16>(static_cast<size_t>(T * E));
  {
    OpScope op(rec, m.tag(OpId::kMoeTopk, Pass::kBwd, layer, micro_batch), s);
    const double Td = static_cast<double>(T);
    const float aux_g = static_cast<float>(static_cast<double>(loss_scale) * c.aux_loss_coeff * E /
                                           (static_cast<double>(k) * Td * Td));
    const float z_g = static_cast<float>(static_cast<double>(loss_scale) * c.z_loss_coeff * 2.0 / Td);
    moe::router_bwd(rd, m.logits.get(), m.idx.get(), m.w.get(), dprob.get(), m.aux_count.get(), aux_g, z_g, dl.get(), s);
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeRouter, Pass::kBwd, layer, micro_batch, GemmPart::kDgrad), s);
    m.gemm.run(T, h, E, dl.get(), false, m.router.weight, false, dx, false, 1.0f, /*exact_algo=*/true);
  }
  {
    OpScope op(rec, m.tag(OpId::kMoeRouter, Pass::kBwd, layer, micro_batch, GemmPart::kWgrad), s);
    m.gemm.run(E, h, T, dl.get(), true, x, false, m.router.grad, true, 1.0f, /*exact_algo=*/true);
  }
  // The temporaries return to the allocator here; the stream orders their reuse.
  m.release();
}

void MoeBlock::release_saved() { impl_->release(); }
MoeBlock::Slots MoeBlock::last_slots() const {
  const Impl& m = *impl_;
  const size_t n = static_cast<size_t>(m.n);
  Slots out;
  out.expert.resize(n);
  out.kept.resize(n);
  LCM_CUDA_CHECK(cudaStreamSynchronize(m.s));
  LCM_CUDA_CHECK(cudaMemcpy(out.expert.data(), m.idx.get(), n * 4, cudaMemcpyDeviceToHost));
  LCM_CUDA_CHECK(cudaMemcpy(out.kept.data(), m.row_of.get(), n * 4, cudaMemcpyDeviceToHost));
  for (int32_t& k : out.kept) k = k >= 0 ? 1 : 0;  // row_of is -1 for a dropped assignment
  return out;
}

const std::vector<int32_t>& MoeBlock::load() const { return impl_->load; }
const std::vector<int32_t>& MoeBlock::kept() const { return impl_->kept; }

}  // namespace lcm::exec::train
