// MoE layer: buffers, forward, backward and verification (see moe_layer.hpp).
#include "kernels/moe_layer.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "infra/comms.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/kernels.cuh"
#include "kernels/moe_kernels.cuh"
#include "kernels/moe_pattern.hpp"
#include "lcm/executor/pattern.hpp"
#include "lcm/model/ops.hpp"

namespace lcm::exec {

namespace {

// Each phase is a schedule op (ops.hpp); its name comes from the model's one name table.
struct PhaseOp {
  OpId id;
  Pass pass;
  GemmPart part = GemmPart::kNone;
};
constexpr PhaseOp kPhaseOps[kMoePhases] = {
    {OpId::kMoeRouter, Pass::kFwd},
    {OpId::kMoeTopk, Pass::kFwd},
    {OpId::kMoePermute, Pass::kFwd},
    {OpId::kMoeDispatchCounts, Pass::kFwd},
    {OpId::kMoeDispatchA2A, Pass::kFwd},
    {OpId::kMoeExpertsFc1, Pass::kFwd},
    {OpId::kMoeExpertsAct, Pass::kFwd},
    {OpId::kMoeExpertsFc2, Pass::kFwd},
    {OpId::kMoeCombineA2A, Pass::kFwd},
    {OpId::kMoeUnpermute, Pass::kFwd},
    {OpId::kMoeUnpermute, Pass::kBwd},
    {OpId::kMoeCombineA2A, Pass::kBwd},
    {OpId::kMoeExpertsFc2, Pass::kBwd, GemmPart::kDgrad},
    {OpId::kMoeExpertsFc2, Pass::kBwd, GemmPart::kWgrad},
    {OpId::kMoeExpertsAct, Pass::kBwd},
    {OpId::kMoeExpertsFc1, Pass::kBwd, GemmPart::kDgrad},
    {OpId::kMoeExpertsFc1, Pass::kBwd, GemmPart::kWgrad},
    {OpId::kMoeDispatchA2A, Pass::kBwd},
    {OpId::kMoePermute, Pass::kBwd},
    {OpId::kMoeTopk, Pass::kBwd},
    {OpId::kMoeRouter, Pass::kBwd, GemmPart::kDgrad},
    {OpId::kMoeRouter, Pass::kBwd, GemmPart::kWgrad},
};


float bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
float input_value(uint64_t seed, uint64_t i, float scale) { return bf16_round(pattern::uniform_pm1(seed, i) * scale); }

template <typename T>
std::vector<T> download(const T* src, size_t n, cudaStream_t s) {
  std::vector<T> out(n);
  if (n) LCM_CUDA_CHECK(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

std::vector<float> download_bf16(const void* src, size_t n, cudaStream_t s) {
  std::vector<uint16_t> raw(n);
  if (n) LCM_CUDA_CHECK(cudaMemcpyAsync(raw.data(), src, n * 2, cudaMemcpyDeviceToHost, s));
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = static_cast<uint32_t>(raw[i]) << 16;
    std::memcpy(&out[i], &b, 4);
  }
  return out;
}

// A device allocation freed at scope exit (verification scratch).
template <typename T>
struct Scratch {
  T* p = nullptr;
  explicit Scratch(size_t n) {
    if (n) LCM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
  }
  ~Scratch() {
    if (p) cudaFree(p);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The MoE outputs' tolerance (compare.hpp): factor x (|ref| + mag) + abs per element, where
// mag is the reference's magnitude term, and the relative L2 bound.
Tolerance moe_tolerance(double factor, double abs, double rel_l2_limit) {
  return Tolerance{.rel = factor, .mag_rel = factor, .abs = abs, .rel_l2_limit = rel_l2_limit};
}

}  // namespace

const char* op_name(MoePhase p) {
  static const std::array<std::string, kMoePhases> names = [] {
    std::array<std::string, kMoePhases> n;
    for (size_t i = 0; i < n.size(); ++i)
      n[i] = lcm::op_name(kPhaseOps[i].id, kPhaseOps[i].pass, kPhaseOps[i].part, kLayerPrefix);
    return n;
  }();
  return names[static_cast<size_t>(p)].c_str();
}
bool is_comm(MoePhase p) {
  return p == MoePhase::kDispatchCounts || p == MoePhase::kDispatch || p == MoePhase::kCombine ||
         p == MoePhase::kCombineBwd || p == MoePhase::kDispatchBwd;
}
bool is_forward(MoePhase p) { return static_cast<int>(p) <= static_cast<int>(MoePhase::kUnpermute); }

bool MoeCheck::fwd_ok() const { return logits.ok() && routing.ok() && dispatch.ok() && permute.ok() && y.ok(); }
bool MoeCheck::ok() const { return fwd_ok() && dx.ok() && dwr.ok() && dw1.ok() && dw2.ok(); }
int64_t MoeCheck::wrong() const {
  int64_t w = 0;
  for (const Comparison* c : {&logits, &routing, &dispatch, &permute, &y, &dx, &dwr, &dw1, &dw2}) w += c->failures();
  return w;
}
int64_t MoeCheck::checked() const {
  int64_t n = 0;
  for (const Comparison* c : {&logits, &routing, &dispatch, &permute, &y, &dx, &dwr, &dw1, &dw2}) n += c->checked;
  return n;
}
nlohmann::json to_json(const MoeCheck& c) {
  return {{"logits", to_json(c.logits)}, {"routing", to_json(c.routing)}, {"dispatch", to_json(c.dispatch)},
          {"permute", to_json(c.permute)}, {"Y", to_json(c.y)},             {"dX", to_json(c.dx)},
          {"dWr", to_json(c.dwr)},         {"dW1", to_json(c.dw1)},         {"dW2", to_json(c.dw2)}};
}

MoeLayer::MoeLayer(cudaStream_t stream, Comms* comms, ncclComm_t ep_comm, int ep_rank, int global_rank,
                   double timeout_s)
    : stream_(stream), comms_(comms), comm_(ep_comm), ep_rank_(ep_rank), global_rank_(global_rank), timeout_s_(timeout_s) {
  gemm_ = std::make_unique<LtGemm>(stream_, int64_t{32} << 20);
}

MoeLayer::~MoeLayer() {
  if (std::uncaught_exceptions() > 0) return;  // a hung kernel or collective would block cudaFree
  release();
}

void MoeLayer::release() {
  for (void* p : allocs_) cudaFree(p);
  allocs_.clear();
  if (host_) cudaFreeHost(host_);
  host_ = nullptr;
  x_.clear();
  dout_.clear();
}

template <typename T>
T* MoeLayer::alloc(size_t n) {
  void* p = nullptr;
  LCM_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  allocs_.push_back(p);
  return static_cast<T*>(p);
}

namespace {
int64_t recv_rows_bound(const MoeProblem& p) {
  const int64_t per_source = p.cf > 0 ? std::min(p.assignments(), p.capacity() * p.local_experts()) : p.assignments();
  return per_source * p.ep;
}
}  // namespace

double MoeLayer::device_bytes(const MoeProblem& p, int sets) {
  const double T = static_cast<double>(p.tokens), h = static_cast<double>(p.hidden), f = static_cast<double>(p.ffn);
  const double n = static_cast<double>(p.assignments()), R = static_cast<double>(recv_rows_bound(p));
  const double El = p.local_experts(), E = p.experts;
  double b = sets * 4.0 * T * h;                       // X, dOut
  b += 2.0 * (2.0 * h * E + 2.0 * El * 3.0 * h * f);   // weights and gradients
  b += T * E * 6.0 + n * 40.0;                         // logits, dlogits, routing arrays
  b += 2.0 * h * (n * 4.0 + T * 2.0);                  // send, back, dyperm, dxperm; Y, dX
  b += 2.0 * R * (h * 4.0 + f * 6.0);                  // recv, yexp, dyexp, dxe; h1, a, da, dh1
  return b + (64 << 20);
}

void MoeLayer::setup(const MoeProblem& p, int sets, uint64_t seed) {
  release();
  p_ = p;
  seed_ = seed;
  const size_t T = static_cast<size_t>(p.tokens), h = static_cast<size_t>(p.hidden), f = static_cast<size_t>(p.ffn);
  const size_t E = static_cast<size_t>(p.experts), El = static_cast<size_t>(p.local_experts());
  const size_t n = static_cast<size_t>(p.assignments()), k = static_cast<size_t>(p.topk);
  recv_capacity_ = recv_rows_bound(p);
  const size_t R = static_cast<size_t>(recv_capacity_);
  for (int s = 0; s < sets; ++s) {
    x_.push_back(alloc<uint16_t>(T * h));
    dout_.push_back(alloc<uint16_t>(T * h));
    kernels::fill_bf16_scaled(x_.back(), T * h, x_seed(s), token_base() * h, 1.0f, stream_);
    kernels::fill_bf16_scaled(dout_.back(), T * h, dout_seed(s), token_base() * h, 1.0f, stream_);
  }
  wr_ = alloc<uint16_t>(h * E);
  dwr_ = alloc<uint16_t>(h * E);
  kernels::fill_bf16_scaled(wr_, h * E, wr_seed(), 0, router_weight_scale(p), stream_);
  w1_ = alloc<uint16_t>(El * h * 2 * f);
  w2_ = alloc<uint16_t>(El * f * h);
  dw1_ = alloc<uint16_t>(El * h * 2 * f);
  dw2_ = alloc<uint16_t>(El * f * h);
  for (size_t j = 0; j < El; ++j) {
    const int e = ep_rank_ * p.local_experts() + static_cast<int>(j);
    kernels::fill_bf16_scaled(static_cast<uint16_t*>(w1_) + j * h * 2 * f, h * 2 * f, w1_seed(e), 0, fc1_weight_scale(p),
                              stream_);
    kernels::fill_bf16_scaled(static_cast<uint16_t*>(w2_) + j * f * h, f * h, w2_seed(e), 0, fc2_weight_scale(p), stream_);
  }
  const std::vector<float> lw = routing_log_weights(p);
  if (!lw.empty()) {
    log_w_ = alloc<float>(E);
    LCM_CUDA_CHECK(cudaMemcpyAsync(log_w_, lw.data(), E * 4, cudaMemcpyHostToDevice, stream_));
  } else {
    log_w_ = nullptr;
  }
  logits_ = alloc<float>(T * E);
  dl_ = alloc<uint16_t>(T * E);
  idx_ = alloc<int32_t>(n);
  w_ = alloc<float>(n);
  eid_ = alloc<int32_t>(n);
  eid2_ = alloc<int32_t>(n);
  pos_ = alloc<int32_t>(n);
  pos2_ = alloc<int32_t>(n);
  row_of_ = alloc<int32_t>(n);
  dprob_ = alloc<float>(n);
  chunk_counts_ = alloc<int32_t>(static_cast<size_t>(kernels::moe_rank_chunks(static_cast<int64_t>(n))) * E);
  counts_ = alloc<int32_t>(E);
  kept_ = alloc<int32_t>(E);
  offset_ = alloc<int32_t>(E);
  totals2_ = alloc<int32_t>(E);
  thr_ = alloc<uint32_t>(E);
  need_ = alloc<int32_t>(E);
  recv_counts_ = alloc<int32_t>(static_cast<size_t>(p.ep) * El);
  LCM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), (2 * E + static_cast<size_t>(p.ep) * El) * 4));
  send_ = alloc<uint16_t>(n * h);
  back_ = alloc<uint16_t>(n * h);
  dyperm_ = alloc<uint16_t>(n * h);
  dxperm_ = alloc<uint16_t>(n * h);
  y_ = alloc<uint16_t>(T * h);
  dx_ = alloc<uint16_t>(T * h);
  if (p.ep > 1) {
    recv_ = alloc<uint16_t>(R * h);
    yexp_ = alloc<uint16_t>(R * h);
    dyexp_ = alloc<uint16_t>(R * h);
    dxe_ = alloc<uint16_t>(R * h);
  } else {  // one rank: the expert layout is the send layout
    recv_ = send_;
    yexp_ = back_;
    dyexp_ = dyperm_;
    dxe_ = dxperm_;
  }
  h1_ = alloc<uint16_t>(R * 2 * f);
  a_ = alloc<uint16_t>(R * f);
  da_ = alloc<uint16_t>(R * f);
  dh1_ = alloc<uint16_t>(R * 2 * f);
  (void)k;
  poison_outputs();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void MoeLayer::poison_outputs() {
  const size_t T = static_cast<size_t>(p_.tokens), h = static_cast<size_t>(p_.hidden), f = static_cast<size_t>(p_.ffn);
  const size_t E = static_cast<size_t>(p_.experts), El = static_cast<size_t>(p_.local_experts());
  for (void* q : {y_, dx_}) LCM_CUDA_CHECK(cudaMemsetAsync(q, 0xff, T * h * 2, stream_));
  LCM_CUDA_CHECK(cudaMemsetAsync(dwr_, 0xff, h * E * 2, stream_));
  LCM_CUDA_CHECK(cudaMemsetAsync(dw1_, 0xff, El * h * 2 * f * 2, stream_));
  LCM_CUDA_CHECK(cudaMemsetAsync(dw2_, 0xff, El * f * h * 2, stream_));
}

void MoeLayer::wait(const std::string& what) {
  if (comms_) comms_->wait_stream(stream_, what);
  else wait_stream(stream_, timeout_s_, what);
}

int64_t MoeLayer::dropped() const {
  int64_t d = 0;
  for (size_t e = 0; e < h_counts_.size(); ++e) d += h_counts_[e] - h_kept_[e];
  return d;
}

// to_experts: src in the send layout (expert-major, this rank's tokens), dst in the expert
// layout (local expert j: rows from source 0, 1, ...); else the reverse.
void MoeLayer::exchange(const void* src, void* dst, bool to_experts, const std::string& what) {
  const int n = p_.ep, El = p_.local_experts();
  const size_t row = static_cast<size_t>(p_.hidden) * 2;
  std::vector<int64_t> send_off(static_cast<size_t>(p_.experts));
  int64_t run = 0;
  for (int e = 0; e < p_.experts; ++e) {
    send_off[static_cast<size_t>(e)] = run;
    run += h_kept_[static_cast<size_t>(e)];
  }
  const auto recv_off = [&](int j, int s) {
    int64_t o = row_off_[static_cast<size_t>(j)];
    for (int q = 0; q < s; ++q) o += h_recv_[static_cast<size_t>(q * El + j)];
    return o;
  };
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < n && r == ncclSuccess; ++peer) {
    for (int j = 0; j < El && r == ncclSuccess; ++j) {
      // my tokens for peer's expert j, and peer's tokens for my expert j
      const int64_t mine = h_kept_[static_cast<size_t>(peer * El + j)];
      const int64_t theirs = h_recv_[static_cast<size_t>(peer * El + j)];
      const char* s_mine = static_cast<const char*>(src) + static_cast<size_t>(send_off[static_cast<size_t>(peer * El + j)]) * row;
      const char* s_theirs = static_cast<const char*>(src) + static_cast<size_t>(recv_off(j, peer)) * row;
      char* d_mine = static_cast<char*>(dst) + static_cast<size_t>(send_off[static_cast<size_t>(peer * El + j)]) * row;
      char* d_theirs = static_cast<char*>(dst) + static_cast<size_t>(recv_off(j, peer)) * row;
      if (to_experts) {
        if (mine > 0) r = ncclSend(s_mine, static_cast<size_t>(mine) * row / 2, ncclBfloat16, peer, comm_, stream_);
        if (r == ncclSuccess && theirs > 0)
          r = ncclRecv(d_theirs, static_cast<size_t>(theirs) * row / 2, ncclBfloat16, peer, comm_, stream_);
      } else {
        if (theirs > 0) r = ncclSend(s_theirs, static_cast<size_t>(theirs) * row / 2, ncclBfloat16, peer, comm_, stream_);
        if (r == ncclSuccess && mine > 0)
          r = ncclRecv(d_mine, static_cast<size_t>(mine) * row / 2, ncclBfloat16, peer, comm_, stream_);
      }
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  comms_->complete_call(r != ncclSuccess ? r : end, comm_, what);
}

void MoeLayer::forward(int set, const PhaseHook& hook) {
  const auto mark = [&](MoePhase ph, bool start) {
    if (hook) hook(ph, start);
  };
  const MoeProblem& p = p_;
  const int64_t T = p.tokens, h = p.hidden, f = p.ffn, n = p.assignments();
  const int E = p.experts, El = p.local_experts();
  const void* x = x_.at(static_cast<size_t>(set));
  kernels::RouterDesc rd{static_cast<int>(T), E, p.topk, p.groups, p.topk_groups,
                         p.score == RouterScore::kSigmoid ? 1 : 0, routing_seed(set), token_base(), log_w_};

  mark(MoePhase::kRouter, true);
  gemm_->run(T, E, h, x, false, wr_, false, logits_, true, 0.0f, /*exact_algo=*/true);
  mark(MoePhase::kRouter, false);

  mark(MoePhase::kTopk, true);
  kernels::moe_router_topk(rd, logits_, idx_, w_, eid_, stream_);
  mark(MoePhase::kTopk, false);

  mark(MoePhase::kPermute, true);
  const int64_t cap = p.capacity();
  kernels::moe_rank(eid_, n, E, chunk_counts_, counts_, pos_, stream_);  // counts and token-order positions
  const int32_t* kept_pos = pos_;
  if (cap < 0) {
    kernels::moe_offsets(counts_, E, -1, kept_, offset_, stream_);
    LCM_CUDA_CHECK(cudaMemcpyAsync(eid2_, eid_, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice, stream_));
  } else if (p.policy == DropPolicy::kPosition) {
    kernels::moe_keep_position(idx_, pos_, n, cap, eid2_, stream_);
    kernels::moe_offsets(counts_, E, cap, kept_, offset_, stream_);
  } else {
    kernels::moe_probs_threshold(idx_, w_, n, counts_, E, cap, thr_, need_, stream_);
    kernels::moe_mark_ties(idx_, w_, n, thr_, need_, eid2_, stream_);
    kernels::moe_rank(eid2_, n, E, chunk_counts_, totals2_, pos2_, stream_);  // rank among ties
    kernels::moe_keep_probs(idx_, w_, n, thr_, need_, pos2_, eid2_, stream_);
    kernels::moe_rank(eid2_, n, E, chunk_counts_, totals2_, pos2_, stream_);  // rank among kept
    kernels::moe_offsets(totals2_, E, -1, kept_, offset_, stream_);
    kept_pos = pos2_;
  }
  kernels::moe_scatter(x, h, eid2_, kept_pos, offset_, n, p.topk, row_of_, send_, stream_);
  mark(MoePhase::kPermute, false);

  // Receive sizes: kept counts to the experts' ranks, then to the host.
  const size_t Es = static_cast<size_t>(E);
  if (p.ep > 1) {
    mark(MoePhase::kDispatchCounts, true);
    ncclResult_t r = ncclGroupStart();
    for (int peer = 0; peer < p.ep && r == ncclSuccess; ++peer) {
      r = ncclSend(kept_ + peer * El, static_cast<size_t>(El), ncclInt32, peer, comm_, stream_);
      if (r == ncclSuccess) r = ncclRecv(recv_counts_ + peer * El, static_cast<size_t>(El), ncclInt32, peer, comm_, stream_);
    }
    const ncclResult_t end = ncclGroupEnd();
    comms_->complete_call(r != ncclSuccess ? r : end, comm_, "moe dispatch counts");
  }
  LCM_CUDA_CHECK(cudaMemcpyAsync(host_, counts_, Es * 4, cudaMemcpyDeviceToHost, stream_));
  LCM_CUDA_CHECK(cudaMemcpyAsync(host_ + Es, kept_, Es * 4, cudaMemcpyDeviceToHost, stream_));
  if (p.ep > 1)
    LCM_CUDA_CHECK(cudaMemcpyAsync(host_ + 2 * Es, recv_counts_, static_cast<size_t>(p.ep * El) * 4,
                                   cudaMemcpyDeviceToHost, stream_));
  if (p.ep > 1) mark(MoePhase::kDispatchCounts, false);
  wait("moe dispatch counts (host sync)");
  h_counts_.assign(host_, host_ + Es);
  h_kept_.assign(host_ + Es, host_ + 2 * Es);
  if (p.ep > 1) h_recv_.assign(host_ + 2 * Es, host_ + 2 * Es + static_cast<size_t>(p.ep * El));
  else h_recv_ = h_kept_;
  rows_.assign(static_cast<size_t>(El), 0);
  row_off_.assign(static_cast<size_t>(El), 0);
  recv_total_ = 0;
  for (int j = 0; j < El; ++j) {
    row_off_[static_cast<size_t>(j)] = recv_total_;
    for (int s = 0; s < p.ep; ++s) rows_[static_cast<size_t>(j)] += h_recv_[static_cast<size_t>(s * El + j)];
    recv_total_ += rows_[static_cast<size_t>(j)];
  }
  if (recv_total_ > recv_capacity_) throw ExecError("moe: received rows exceed the buffer bound");

  if (p.ep > 1) {
    mark(MoePhase::kDispatch, true);
    exchange(send_, recv_, true, "moe dispatch all-to-all");
    mark(MoePhase::kDispatch, false);
  }
  const auto bf = [](void* base, int64_t off) { return static_cast<uint16_t*>(base) + off; };
  const uint16_t* w1 = static_cast<const uint16_t*>(w1_);
  const uint16_t* w2 = static_cast<const uint16_t*>(w2_);
  mark(MoePhase::kFc1, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    gemm_->run(m, 2 * f, h, bf(recv_, o * h), false, w1 + static_cast<size_t>(j) * h * 2 * f, false, bf(h1_, o * 2 * f), false);
  }
  mark(MoePhase::kFc1, false);
  mark(MoePhase::kAct, true);
  kernels::moe_swiglu_fwd(h1_, a_, recv_total_, f, stream_);
  mark(MoePhase::kAct, false);
  mark(MoePhase::kFc2, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    gemm_->run(m, h, f, bf(a_, o * f), false, w2 + static_cast<size_t>(j) * f * h, false, bf(yexp_, o * h), false);
  }
  mark(MoePhase::kFc2, false);
  if (p.ep > 1) {
    mark(MoePhase::kCombine, true);
    exchange(yexp_, back_, false, "moe combine all-to-all");
    mark(MoePhase::kCombine, false);
  }
  mark(MoePhase::kUnpermute, true);
  kernels::moe_unpermute_fwd(back_, row_of_, w_, T, p.topk, h, y_, stream_);
  mark(MoePhase::kUnpermute, false);
}

void MoeLayer::backward(int set, const PhaseHook& hook) {
  const auto mark = [&](MoePhase ph, bool start) {
    if (hook) hook(ph, start);
  };
  const MoeProblem& p = p_;
  const int64_t T = p.tokens, h = p.hidden, f = p.ffn;
  const int E = p.experts, El = p.local_experts();
  const void* x = x_.at(static_cast<size_t>(set));
  const void* dout = dout_.at(static_cast<size_t>(set));
  kernels::RouterDesc rd{static_cast<int>(T), E, p.topk, p.groups, p.topk_groups,
                         p.score == RouterScore::kSigmoid ? 1 : 0, routing_seed(set), token_base(), log_w_};
  const auto bf = [](void* base, int64_t off) { return static_cast<uint16_t*>(base) + off; };
  const uint16_t* w1 = static_cast<const uint16_t*>(w1_);
  const uint16_t* w2 = static_cast<const uint16_t*>(w2_);

  mark(MoePhase::kUnpermuteBwd, true);
  kernels::moe_unpermute_bwd(dout, back_, row_of_, w_, T, p.topk, h, dyperm_, dprob_, stream_);
  mark(MoePhase::kUnpermuteBwd, false);
  if (p.ep > 1) {
    mark(MoePhase::kCombineBwd, true);
    exchange(dyperm_, dyexp_, true, "moe combine all-to-all backward");
    mark(MoePhase::kCombineBwd, false);
  }
  mark(MoePhase::kFc2Dgrad, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    gemm_->run(m, f, h, bf(dyexp_, o * h), false, w2 + static_cast<size_t>(j) * f * h, true, bf(da_, o * f), false);
  }
  mark(MoePhase::kFc2Dgrad, false);
  mark(MoePhase::kFc2Wgrad, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    uint16_t* dw = bf(dw2_, static_cast<int64_t>(j) * f * h);
    if (m == 0) LCM_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(f * h) * 2, stream_));
    else gemm_->run(f, h, m, bf(a_, o * f), true, bf(dyexp_, o * h), false, dw, false);
  }
  mark(MoePhase::kFc2Wgrad, false);
  mark(MoePhase::kActBwd, true);
  kernels::moe_swiglu_bwd(h1_, da_, dh1_, recv_total_, f, stream_);
  mark(MoePhase::kActBwd, false);
  mark(MoePhase::kFc1Dgrad, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    gemm_->run(m, h, 2 * f, bf(dh1_, o * 2 * f), false, w1 + static_cast<size_t>(j) * h * 2 * f, true, bf(dxe_, o * h),
               false);
  }
  mark(MoePhase::kFc1Dgrad, false);
  mark(MoePhase::kFc1Wgrad, true);
  for (int j = 0; j < El; ++j) {
    const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
    uint16_t* dw = bf(dw1_, static_cast<int64_t>(j) * h * 2 * f);
    if (m == 0) LCM_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(h * 2 * f) * 2, stream_));
    else gemm_->run(h, 2 * f, m, bf(recv_, o * h), true, bf(dh1_, o * 2 * f), false, dw, false);
  }
  mark(MoePhase::kFc1Wgrad, false);
  if (p.ep > 1) {
    mark(MoePhase::kDispatchBwd, true);
    exchange(dxe_, dxperm_, false, "moe dispatch all-to-all backward");
    mark(MoePhase::kDispatchBwd, false);
  }
  mark(MoePhase::kPermuteBwd, true);
  kernels::moe_permute_bwd(dxperm_, row_of_, T, p.topk, h, dx_, stream_);
  mark(MoePhase::kPermuteBwd, false);
  mark(MoePhase::kTopkBwd, true);
  kernels::moe_topk_bwd(rd, logits_, idx_, w_, dprob_, dl_, stream_);
  mark(MoePhase::kTopkBwd, false);
  mark(MoePhase::kRouterDgrad, true);
  gemm_->run(T, h, E, dl_, false, wr_, true, dx_, false, 1.0f, /*exact_algo=*/true);
  mark(MoePhase::kRouterDgrad, false);
  mark(MoePhase::kRouterWgrad, true);
  gemm_->run(h, E, T, x, true, dl_, false, dwr_, false, 0.0f, /*exact_algo=*/true);
  mark(MoePhase::kRouterWgrad, false);
}

void MoeLayer::corrupt_output(int64_t token, int64_t col, float value) {
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const __nv_bfloat16 v = __float2bfloat16_rn(value);
  LCM_CUDA_CHECK(cudaMemcpy(static_cast<__nv_bfloat16*>(y_) + token * p_.hidden + col, &v, 2, cudaMemcpyHostToDevice));
}

MoeCheck MoeLayer::verify(int set, bool full, uint64_t sample_seed) {
  MoeCheck out;
  cudaStream_t s = stream_;
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  const MoeProblem& p = p_;
  const int64_t T = p.tokens, h = p.hidden, f = p.ffn, n = p.assignments();
  const int E = p.experts, k = p.topk, El = p.local_experts();
  const uint64_t xs = x_seed(set), ds = dout_seed(set);
  const uint64_t tb = token_base();
  const float wr_scale = router_weight_scale(p), w1_scale = fc1_weight_scale(p), w2_scale = fc2_weight_scale(p);
  const auto xval = [&](int64_t t, int64_t c) { return input_value(xs, (tb + static_cast<uint64_t>(t)) * h + c, 1.0f); };
  const auto dval = [&](int64_t t, int64_t c) { return input_value(ds, (tb + static_cast<uint64_t>(t)) * h + c, 1.0f); };
  const auto wrval = [&](int64_t c, int e) { return input_value(wr_seed(), static_cast<uint64_t>(c * E + e), wr_scale); };

  const std::vector<float> logits = download(logits_, static_cast<size_t>(T * E), s);
  const std::vector<int32_t> idx = download(idx_, static_cast<size_t>(n), s);
  const std::vector<float> w = download(w_, static_cast<size_t>(n), s);
  const std::vector<int32_t> row_of = download(row_of_, static_cast<size_t>(n), s);

  // Sampled tokens: all (full), else 0, 1, T-1 and random ones.
  std::mt19937_64 rng(sample_seed ^ 0x6d6f65ull);
  std::vector<int64_t> tokens;
  if (full) {
    for (int64_t t = 0; t < T; ++t) tokens.push_back(t);
  } else {
    std::set<int64_t> pick{0, std::min<int64_t>(1, T - 1), T - 1};
    while (static_cast<int64_t>(pick.size()) < std::min<int64_t>(T, 32)) pick.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(T)));
    tokens.assign(pick.begin(), pick.end());
  }

  // 1. Logits of sampled tokens: the router GEMM in float64 plus the routing term.
  const std::vector<float> lw = routing_log_weights(p);
  {
    Comparer cmp(moe_tolerance(1.0 / 1024, 1e-5, 1e-3));
    const size_t nl = std::min<size_t>(tokens.size(), full ? tokens.size() : 16);
    std::vector<double> wcol(static_cast<size_t>(h));
    for (int e = 0; e < E; ++e) {
      for (int64_t c = 0; c < h; ++c) wcol[static_cast<size_t>(c)] = wrval(c, e);
      for (size_t i = 0; i < nl; ++i) {
        const int64_t t = tokens[i];
        double dot = 0, mag = 0;
        for (int64_t c = 0; c < h; ++c) {
          const double v = static_cast<double>(xval(t, c)) * wcol[static_cast<size_t>(c)];
          dot += v;
          mag += std::fabs(v);
        }
        double ref = dot;
        if (!lw.empty())
          ref += static_cast<double>(lw[static_cast<size_t>(e)]) +
                 static_cast<double>(pattern::routing_gumbel(routing_seed(set), tb + static_cast<uint64_t>(t), static_cast<uint32_t>(e)));
        cmp.add(logits[static_cast<size_t>(t * E + e)], ref, mag + 1e-3 * std::fabs(ref), t * E + e);
      }
    }
    out.logits = cmp.result();
  }
  // 2. Top-k of every token from the GPU's logits (exact, up to near-ties in the score); gate
  // weights within 1e-5 |ref| + 1e-7, relative L2 error 1e-4.
  {
    Comparer cw(Tolerance{.rel = 1e-5, .abs = 1e-7, .rel_l2_limit = 1e-4});
    int64_t wrong_expert = 0;  // assignments whose weight is within tolerance but whose expert is not
    for (int64_t t = 0; t < T; ++t) {
      const float* l = &logits[static_cast<size_t>(t * E)];
      const TokenRoute r = route_token(l, p);
      for (int j = 0; j < k; ++j) {
        const size_t a = static_cast<size_t>(t * k + j);
        bool ok = r.idx[static_cast<size_t>(j)] == idx[a];
        if (!ok) {  // accept a swap of two experts whose keys tie to within float rounding
          const auto key = [&](int e) {
            return p.score == RouterScore::kSigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(l[e]))) : static_cast<double>(l[e]);
          };
          ok = idx[a] >= 0 && idx[a] < E && std::fabs(key(idx[a]) - key(r.idx[static_cast<size_t>(j)])) <= 1e-6 * (1 + std::fabs(key(idx[a])));
        }
        if (cw.add(w[a], r.w[static_cast<size_t>(j)], 0, static_cast<int64_t>(a)) && !ok) ++wrong_expert;
      }
    }
    out.routing = cw.result();
    out.routing.wrong += wrong_expert;
  }
  // 3. Counts, drops and rows: the host reference of the whole routing group.
  {
    Comparison c;  // exact: every row, count and kept count equal
    bool valid = true;
    for (int32_t e : idx) valid = valid && e >= 0 && e < E;
    if (!valid) {
      c.checked = n;
      c.wrong = n;
    } else {
      const Dispatch d = reference_dispatch(idx, w, T, k, E, p.capacity(), p.policy);
      for (int64_t a = 0; a < n; ++a) {
        ++c.checked;
        if (d.row[static_cast<size_t>(a)] != row_of[static_cast<size_t>(a)]) ++c.wrong;
      }
      for (int e = 0; e < E; ++e) {
        c.checked += 2;
        if (d.counts[static_cast<size_t>(e)] != h_counts_[static_cast<size_t>(e)]) ++c.wrong;
        if (d.kept[static_cast<size_t>(e)] != h_kept_[static_cast<size_t>(e)]) ++c.wrong;
      }
    }
    out.dispatch = c;
  }
  // 4. Permutation: every kept row of the send buffer equals its token's X row (on the GPU).
  {
    Scratch<unsigned long long> bad(1);
    LCM_CUDA_CHECK(cudaMemsetAsync(bad.p, 0, 8, s));
    kernels::moe_count_wrong_permute(x_.at(static_cast<size_t>(set)), send_, row_of_, T, k, h, bad.p, s);
    const auto v = download(bad.p, 1, s);
    int64_t kept_rows = 0;
    for (int32_t r : row_of) kept_rows += r >= 0 ? 1 : 0;
    out.permute.checked = kept_rows * h;
    out.permute.wrong = static_cast<int64_t>(v[0]);
  }
  // 5. Y and dX of the sampled tokens: expert FFNs recomputed by the reference kernels
  // (fp32, no tensor cores), expert by expert (weights regenerated for remote experts).
  {
    struct Item {
      int64_t t;
      int j;
    };
    std::map<int, std::vector<Item>> by_expert;
    for (int64_t t : tokens)
      for (int j = 0; j < k; ++j)
        if (row_of[static_cast<size_t>(t * k + j)] >= 0) by_expert[idx[static_cast<size_t>(t * k + j)]].push_back({t, j});
    const size_t nt = tokens.size();
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < nt; ++i) slot[tokens[i]] = i;
    std::vector<double> yref(nt * static_cast<size_t>(h), 0.0), ymag(nt * static_cast<size_t>(h), 0.0);
    std::vector<double> dxref(nt * static_cast<size_t>(h), 0.0), dxmag(nt * static_cast<size_t>(h), 0.0);
    std::vector<double> dp(static_cast<size_t>(n), 0.0);
    Scratch<uint16_t> w1s(static_cast<size_t>(h * 2 * f)), w2s(static_cast<size_t>(f * h));
    for (const auto& [e, items] : by_expert) {
      const bool local = e / El == ep_rank_;
      const uint16_t* w1 = local ? static_cast<const uint16_t*>(w1_) + static_cast<size_t>(e % El) * h * 2 * f : w1s.p;
      const uint16_t* w2 = local ? static_cast<const uint16_t*>(w2_) + static_cast<size_t>(e % El) * f * h : w2s.p;
      if (!local) {
        kernels::fill_bf16_scaled(w1s.p, static_cast<size_t>(h * 2 * f), w1_seed(e), 0, w1_scale, s);
        kernels::fill_bf16_scaled(w2s.p, static_cast<size_t>(f * h), w2_seed(e), 0, w2_scale, s);
      }
      const int m = static_cast<int>(items.size());
      std::vector<float> xin(static_cast<size_t>(m * h)), dye(static_cast<size_t>(m * h));
      for (int r = 0; r < m; ++r)
        for (int64_t c = 0; c < h; ++c) {
          xin[static_cast<size_t>(r * h + c)] = xval(items[static_cast<size_t>(r)].t, c);
          dye[static_cast<size_t>(r * h + c)] =
              w[static_cast<size_t>(items[static_cast<size_t>(r)].t * k + items[static_cast<size_t>(r)].j)] *
              dval(items[static_cast<size_t>(r)].t, c);
        }
      Scratch<float> din(static_cast<size_t>(m * std::max(h, 2 * f))), dout1(static_cast<size_t>(m * 2 * f)),
          dout2(static_cast<size_t>(m * h)), dmag(static_cast<size_t>(m * std::max(h, 2 * f)));
      LCM_CUDA_CHECK(cudaMemcpyAsync(din.p, xin.data(), xin.size() * 4, cudaMemcpyHostToDevice, s));
      kernels::ref_rowmat(din.p, m, h, w1, 2 * f, false, dout1.p, nullptr, s);
      const std::vector<float> h1 = download(dout1.p, static_cast<size_t>(m * 2 * f), s);
      std::vector<float> act(static_cast<size_t>(m * f));
      for (int r = 0; r < m; ++r)
        for (int64_t c = 0; c < f; ++c) {
          const double g = h1[static_cast<size_t>(r * 2 * f + c)], u = h1[static_cast<size_t>(r * 2 * f + f + c)];
          act[static_cast<size_t>(r * f + c)] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
        }
      LCM_CUDA_CHECK(cudaMemcpyAsync(din.p, act.data(), act.size() * 4, cudaMemcpyHostToDevice, s));
      kernels::ref_rowmat(din.p, m, f, w2, h, false, dout2.p, dmag.p, s);
      const std::vector<float> ye = download(dout2.p, static_cast<size_t>(m * h), s);
      const std::vector<float> yemag = download(dmag.p, static_cast<size_t>(m * h), s);
      // backward: dA = dYe W2^T, dH1 (SwiGLU), dXe = dH1 W1^T
      LCM_CUDA_CHECK(cudaMemcpyAsync(din.p, dye.data(), dye.size() * 4, cudaMemcpyHostToDevice, s));
      kernels::ref_rowmat(din.p, m, h, w2, f, true, dout1.p, nullptr, s);
      const std::vector<float> da = download(dout1.p, static_cast<size_t>(m * f), s);
      std::vector<float> dh1(static_cast<size_t>(m * 2 * f));
      for (int r = 0; r < m; ++r)
        for (int64_t c = 0; c < f; ++c) {
          const double g = h1[static_cast<size_t>(r * 2 * f + c)], u = h1[static_cast<size_t>(r * 2 * f + f + c)];
          const double sg = 1.0 / (1.0 + std::exp(-g)), d = da[static_cast<size_t>(r * f + c)];
          dh1[static_cast<size_t>(r * 2 * f + c)] = static_cast<float>(d * u * sg * (1.0 + g * (1.0 - sg)));
          dh1[static_cast<size_t>(r * 2 * f + f + c)] = static_cast<float>(d * g * sg);
        }
      LCM_CUDA_CHECK(cudaMemcpyAsync(din.p, dh1.data(), dh1.size() * 4, cudaMemcpyHostToDevice, s));
      kernels::ref_rowmat(din.p, m, 2 * f, w1, h, true, dout2.p, dmag.p, s);
      const std::vector<float> dxe = download(dout2.p, static_cast<size_t>(m * h), s);
      const std::vector<float> dxemag = download(dmag.p, static_cast<size_t>(m * h), s);
      for (int r = 0; r < m; ++r) {
        const Item& it = items[static_cast<size_t>(r)];
        const size_t a = static_cast<size_t>(it.t * k + it.j), sl = slot[it.t];
        const double wa = w[a];
        double dot = 0;
        for (int64_t c = 0; c < h; ++c) {
          const size_t o = sl * static_cast<size_t>(h) + static_cast<size_t>(c), q = static_cast<size_t>(r * h + c);
          yref[o] += wa * ye[q];
          ymag[o] += wa * yemag[q];
          dxref[o] += dxe[q];
          dxmag[o] += dxemag[q];
          dot += static_cast<double>(dval(it.t, c)) * ye[q];
        }
        dp[a] = dot;
      }
    }
    // Router backward of the sampled tokens: dlogits from dprob, then dX += dl Wr^T.
    for (size_t i = 0; i < nt; ++i) {
      const int64_t t = tokens[i];
      double sdot = 0, ssum = 0;
      for (int j = 0; j < k; ++j) sdot += static_cast<double>(w[static_cast<size_t>(t * k + j)]) * dp[static_cast<size_t>(t * k + j)];
      if (p.score == RouterScore::kSigmoid)
        for (int j = 0; j < k; ++j)
          ssum += 1.0 / (1.0 + std::exp(-static_cast<double>(logits[static_cast<size_t>(t * E + idx[static_cast<size_t>(t * k + j)])])));
      for (int j = 0; j < k; ++j) {
        const size_t a = static_cast<size_t>(t * k + j);
        const int e = idx[a];
        double dl;
        if (p.score == RouterScore::kSoftmax) {
          dl = w[a] * (dp[a] - sdot);
        } else {
          const double sj = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[static_cast<size_t>(t * E + e)])));
          dl = sj * (1 - sj) * (k > 1 ? (dp[a] - sdot) / ssum : dp[a]);
        }
        for (int64_t c = 0; c < h; ++c) {
          const double v = dl * wrval(c, e);
          dxref[i * static_cast<size_t>(h) + static_cast<size_t>(c)] += v;
          dxmag[i * static_cast<size_t>(h) + static_cast<size_t>(c)] += std::fabs(v) * 1.05 + 1e-4 * std::fabs(dl);
        }
      }
    }
    Comparer cy(moe_tolerance(1.0 / 64, 1e-6, 1e-2)), cdx(moe_tolerance(1.0 / 64, 1e-6, 2e-2));
    for (size_t i = 0; i < nt; ++i) {
      const int64_t t = tokens[i];
      const std::vector<float> gy = download_bf16(static_cast<const uint16_t*>(y_) + t * h, static_cast<size_t>(h), s);
      const std::vector<float> gdx = download_bf16(static_cast<const uint16_t*>(dx_) + t * h, static_cast<size_t>(h), s);
      for (int64_t c = 0; c < h; ++c) {
        const size_t o = i * static_cast<size_t>(h) + static_cast<size_t>(c);
        cy.add(gy[static_cast<size_t>(c)], yref[o], ymag[o], t * h + c);
        cdx.add(gdx[static_cast<size_t>(c)], dxref[o], dxmag[o], t * h + c);
      }
    }
    out.y = cy.result();
    out.dx = cdx.result();
  }
  // 6. Weight gradients, sampled elements: dWr from the GPU's dlogits; dW1, dW2 of the first and
  // last local expert from the expert's received rows (the GEMMs' own inputs).
  {
    const std::vector<float> dl = download_bf16(dl_, static_cast<size_t>(T * E), s);
    Comparer c(moe_tolerance(1.0 / 128, 1e-6, 1e-2));
    for (int q = 0; q < 16; ++q) {
      const int64_t col = static_cast<int64_t>(rng() % static_cast<uint64_t>(h));
      const int e = static_cast<int>(rng() % static_cast<uint64_t>(E));
      double ref = 0, mag = 0;
      for (int64_t t = 0; t < T; ++t) {
        const double v = static_cast<double>(xval(t, col)) * dl[static_cast<size_t>(t * E + e)];
        ref += v;
        mag += std::fabs(v);
      }
      const auto got = download_bf16(static_cast<const uint16_t*>(dwr_) + col * E + e, 1, s);
      c.add(got[0], ref, mag, col * E + e);
    }
    out.dwr = c.result();

    Comparer c1(moe_tolerance(1.0 / 128, 1e-6, 1e-2)), c2(moe_tolerance(1.0 / 128, 1e-6, 1e-2));
    for (int j : {0, El - 1}) {
      const int64_t m = rows_[static_cast<size_t>(j)], o = row_off_[static_cast<size_t>(j)];
      for (int q = 0; q < 8; ++q) {
        // dW2[a, b] = sum_r A[r, a] dYexp[r, b]; dW1[c, g] = sum_r X[r, c] dH1[r, g]
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(f)), b = static_cast<int64_t>(rng() % static_cast<uint64_t>(h));
        const int64_t cc = static_cast<int64_t>(rng() % static_cast<uint64_t>(h)), g = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * f));
        std::vector<int64_t> ia, ib, ic, ig;
        for (int64_t r = 0; r < m; ++r) {
          ia.push_back((o + r) * f + a);
          ib.push_back((o + r) * h + b);
          ic.push_back((o + r) * h + cc);
          ig.push_back((o + r) * 2 * f + g);
        }
        const auto gather = [&](const void* base, const std::vector<int64_t>& ix) {
          if (ix.empty()) return std::vector<float>{};
          Scratch<int64_t> di(ix.size());
          Scratch<float> dv(ix.size());
          LCM_CUDA_CHECK(cudaMemcpyAsync(di.p, ix.data(), ix.size() * 8, cudaMemcpyHostToDevice, s));
          kernels::gather_bf16(base, di.p, ix.size(), dv.p, s);
          return download(dv.p, ix.size(), s);
        };
        const auto va = gather(a_, ia), vb = gather(dyexp_, ib), vc = gather(recv_, ic), vg = gather(dh1_, ig);
        double r2 = 0, m2 = 0, r1 = 0, m1 = 0;
        for (int64_t r = 0; r < m; ++r) {
          r2 += static_cast<double>(va[static_cast<size_t>(r)]) * vb[static_cast<size_t>(r)];
          m2 += std::fabs(static_cast<double>(va[static_cast<size_t>(r)]) * vb[static_cast<size_t>(r)]);
          r1 += static_cast<double>(vc[static_cast<size_t>(r)]) * vg[static_cast<size_t>(r)];
          m1 += std::fabs(static_cast<double>(vc[static_cast<size_t>(r)]) * vg[static_cast<size_t>(r)]);
        }
        const auto g2 = download_bf16(static_cast<const uint16_t*>(dw2_) + static_cast<size_t>(j) * f * h + a * h + b, 1, s);
        const auto g1 = download_bf16(static_cast<const uint16_t*>(dw1_) + static_cast<size_t>(j) * h * 2 * f + cc * 2 * f + g, 1, s);
        c2.add(g2[0], r2, m2, static_cast<int64_t>(j) * f * h + a * h + b);
        c1.add(g1[0], r1, m1, static_cast<int64_t>(j) * h * 2 * f + cc * 2 * f + g);
      }
    }
    out.dw1 = c1.result();
    out.dw2 = c2.result();
  }
  return out;
}

}  // namespace lcm::exec
