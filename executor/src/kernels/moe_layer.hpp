// One MoE layer on one rank of an EP group, forward and backward, with its buffers, and the
// check of its outputs (moe.hpp has the rules, moe_kernels.cuh the kernels).
//
// Forward: router GEMM (X Wr, fp32 logits) -> top-k (+ synthetic routing term) -> permute
// (histogram, drops, prefix sum, scatter into an expert-major send buffer) -> counts
// all-to-all and a host sync (the receive sizes) -> dispatch all-to-all (one ncclSend /
// ncclRecv per peer and local expert, so received rows land grouped by local expert: no
// second permutation) -> per local expert fc1 (cuBLASLt), SwiGLU, fc2 -> combine all-to-all
// (the reverse) -> un-permute (router-weighted sum per token). Backward: the mirror, with
// dgrad and wgrad of every GEMM, the top-k backward and the router GEMM's gradients.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lcm/executor/compare.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/executor/moe.hpp"

namespace lcm::exec {

class Comms;

// Phases of one layer, forward then backward, in execution order. Names are the model's op
// names (model/src/schedule_gen.hpp moe_block, docs/op-schedule.md) with the trace's "L."
// prefix and pass suffix; kDispatchCounts is the executor's own (the count exchange and the
// host sync before the dispatch).
enum class MoePhase : uint8_t {
  kRouter, kTopk, kPermute, kDispatchCounts, kDispatch, kFc1, kAct, kFc2, kCombine, kUnpermute,
  kUnpermuteBwd, kCombineBwd, kFc2Dgrad, kFc2Wgrad, kActBwd, kFc1Dgrad, kFc1Wgrad, kDispatchBwd, kPermuteBwd,
  kTopkBwd, kRouterDgrad, kRouterWgrad,
};
inline constexpr int kMoePhases = 22;
const char* op_name(MoePhase p);
bool is_comm(MoePhase p);  // all-to-all phases (absent when ep = 1)
bool is_forward(MoePhase p);

// Called around every phase (start = true before, false after) when timing.
using PhaseHook = std::function<void(MoePhase, bool start)>;

struct MoeCheck {
  Comparison logits, routing, dispatch, permute, y, dx, dwr, dw1, dw2;
  bool ok() const;
  bool fwd_ok() const;
  int64_t wrong() const;
  int64_t checked() const;
};
nlohmann::json to_json(const MoeCheck& c);

class MoeLayer {
 public:
  // comms: the EP communicator's owner (null when ep = 1); ep_rank: this rank in the EP group;
  // global_rank: picks this rank's tokens.
  MoeLayer(cudaStream_t stream, Comms* comms, ncclComm_t ep_comm, int ep_rank, int global_rank, double timeout_s);
  ~MoeLayer();
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  // Device bytes the layer needs for p with `sets` input sets.
  static double device_bytes(const MoeProblem& p, int sets);
  void setup(const MoeProblem& p, int sets, uint64_t seed);
  const MoeProblem& problem() const { return p_; }

  void forward(int set, const PhaseHook& hook = {});
  void backward(int set, const PhaseHook& hook = {});
  void poison_outputs();  // NaN into Y, dX, dWr, dW1, dW2

  // After forward + backward of `set`: checks routing, drops, permutation, Y, dX and sampled
  // weight-gradient elements (moe.hpp, docs/executor.md).
  MoeCheck verify(int set, bool full, uint64_t sample_seed);
  void corrupt_output(int64_t token, int64_t col, float value);  // Y[token, col] (--inject corrupt)

  // Of the last forward: per-expert assignments before drops (this routing group), after drops,
  // rows this rank's experts received.
  const std::vector<int32_t>& counts() const { return h_counts_; }
  const std::vector<int32_t>& kept() const { return h_kept_; }
  int64_t received_rows() const { return recv_total_; }
  int64_t dropped() const;

  uint64_t x_seed(int set) const { return seed_ * 1000003ull + 101ull * static_cast<uint64_t>(set) + 1; }
  uint64_t dout_seed(int set) const { return x_seed(set) + 50; }
  uint64_t routing_seed(int set) const { return seed_ * 7919ull + static_cast<uint64_t>(set) + 3; }
  uint64_t wr_seed() const { return seed_ * 31ull + 7; }
  uint64_t w1_seed(int expert) const { return seed_ * 131ull + 2ull * static_cast<uint64_t>(expert) + 1000; }
  uint64_t w2_seed(int expert) const { return w1_seed(expert) + 1; }
  uint64_t token_base() const { return static_cast<uint64_t>(global_rank_) * static_cast<uint64_t>(p_.tokens); }

 private:
  void release();
  void exchange(const void* src, void* dst, bool to_experts, const std::string& what);
  void wait(const std::string& what);
  template <typename T>
  T* alloc(size_t n);

  cudaStream_t stream_;
  Comms* comms_;
  ncclComm_t comm_;
  int ep_rank_, global_rank_;
  double timeout_s_;
  MoeProblem p_;
  uint64_t seed_ = 0;
  std::unique_ptr<LtGemm> gemm_;
  std::vector<void*> allocs_;
  // inputs per set
  std::vector<void*> x_, dout_;
  // weights and their gradients
  void* wr_ = nullptr;
  void* w1_ = nullptr;
  void* w2_ = nullptr;
  void* dwr_ = nullptr;
  void* dw1_ = nullptr;
  void* dw2_ = nullptr;
  float* log_w_ = nullptr;
  // routing and dispatch
  float* logits_ = nullptr;
  int32_t *idx_ = nullptr, *eid_ = nullptr, *eid2_ = nullptr, *pos_ = nullptr, *pos2_ = nullptr, *row_of_ = nullptr;
  float* w_ = nullptr;
  int32_t *chunk_counts_ = nullptr, *counts_ = nullptr, *kept_ = nullptr, *offset_ = nullptr, *totals2_ = nullptr;
  uint32_t* thr_ = nullptr;
  int32_t* need_ = nullptr;
  int32_t* recv_counts_ = nullptr;  // [ep][local experts]
  int32_t* host_ = nullptr;         // pinned: counts [E], kept [E], recv counts [ep * El]
  // activations
  void *send_ = nullptr, *recv_ = nullptr, *h1_ = nullptr, *a_ = nullptr, *yexp_ = nullptr, *back_ = nullptr, *y_ = nullptr;
  void *dyperm_ = nullptr, *dyexp_ = nullptr, *da_ = nullptr, *dh1_ = nullptr, *dxe_ = nullptr, *dxperm_ = nullptr,
       *dx_ = nullptr, *dl_ = nullptr;
  float* dprob_ = nullptr;
  int64_t recv_capacity_ = 0;
  // host view of the last dispatch
  std::vector<int32_t> h_counts_, h_kept_, h_recv_;  // h_recv_[s * El + j]
  std::vector<int64_t> rows_, row_off_;              // per local expert
  int64_t recv_total_ = 0;
};

}  // namespace lcm::exec
