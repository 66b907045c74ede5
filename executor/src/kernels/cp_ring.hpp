// Ring attention over the CP group (cp_attention.hpp has the chunk and step rules): cuDNN
// fused attention per step on the compute stream (three graphs: the causal diagonal block,
// the lower and the upper half blocks), K and V passed to the next rank with ncclSend /
// ncclRecv on a communication stream while the current step computes, partial outputs
// merged by log-sum-exp. Backward: the same ring of K, V, plus the dK, dV accumulated for
// the block each rank holds, passed on after each step's compute and home after the last.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lcm/executor/attention.hpp"
#include "lcm/executor/cp_attention.hpp"
#include "lcm/executor/cudnn_attention.hpp"

namespace lcm::exec {

class Comms;
class EventSeries;

struct CpEvents;  // per-step CUDA events of one pass (cp_ring.cpp)

struct CpCheck {
  std::array<Comparison, 5> vs_single{};  // O, LSE, dQ, dK, dV of the ring against single-GPU cuDNN
  AttnCheckSet single_vs_reference;       // single-GPU cuDNN against the reference kernels
  bool ok() const;
  int64_t wrong() const;
  int64_t checked() const;
};
nlohmann::json to_json(const CpCheck& c);

// Times of one pass: per step (compute on the compute stream, communication on the comm
// stream) and the whole pass.
struct CpPassTimes {
  std::vector<std::vector<double>> compute_us;  // [step][rep]
  std::vector<std::vector<double>> comm_us;     // [message][rep]: kv for steps 0..cp-2, (bwd) then dkv for steps 0..cp-1
  std::vector<double> total_us;                 // [rep]
};

class CpRing {
 public:
  CpRing(cudaStream_t compute, cudaStream_t comm, Comms* comms, ncclComm_t cp_comm, int cp, int cp_rank,
         double timeout_s);
  ~CpRing();
  CpRing(const CpRing&) = delete;
  CpRing& operator=(const CpRing&) = delete;

  // full: the whole problem (b = 1, S, heads, d, causal). Builds the three graph kinds.
  void setup(const AttentionProblem& full, int sets, uint64_t seed);
  bool supported() const;
  std::string unsupported_reason() const;
  static double device_bytes(const AttentionProblem& full, int cp, int sets);
  const CpLayout& layout() const { return lay_; }
  nlohmann::json describe() const;

  // One pass; with_comm = false runs the same steps on the local K, V (compute only).
  // `rep` indexes the timing events when timing (begin_timing sized them).
  void begin_timing(int reps);
  void forward(int set, bool with_comm, int rep = -1);
  void backward(int set, bool with_comm, int rep = -1);
  CpPassTimes times(bool backward, bool with_comm) const;
  void record_base(cudaStream_t s);  // the trace origin of every timed series
  std::vector<const EventSeries*> compute_series(bool backward, bool with_comm) const;
  std::vector<const EventSeries*> comm_series(bool backward, bool with_comm) const;
  void poison_outputs();

  // Compares the ring's outputs of `set` (from a forward + backward with communication) with
  // single-GPU cuDNN attention on the full sequence, which is itself checked against the
  // reference kernels (every row when full_reference, else sampled rows).
  CpCheck verify(int set, bool full_reference, uint64_t sample_seed);
  void corrupt_dq(int set, int64_t local_row, float value);  // --inject corrupt

  uint64_t input_seed(int set) const { return seed_ + static_cast<uint64_t>(set); }  // AttentionRunner's seed

 private:
  struct Set {
    void *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // local 2c rows
    void *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
    float* lse = nullptr;  // [hq, 2c]
  };
  void release();
  void bind_all();
  int pack_index(int set, bool with_comm, int step) const { return ((set * 2) + (with_comm ? 1 : 0)) * cp_ + step; }
  CudnnAttention& graph(CpStepKind k) { return *graphs_[static_cast<size_t>(k)]; }
  void kv_exchange(int step, const void* k_src, const void* v_src, void* k_dst, void* v_dst, int rep, int msg,
                   bool backward);
  void send_recv(const std::vector<std::pair<const void*, void*>>& bufs, size_t elems, const std::string& what);
  void* alloc(size_t bytes);

  cudaStream_t compute_, comm_;
  Comms* comms_;
  ncclComm_t cp_comm_;
  int cp_, cp_rank_;
  double timeout_s_;
  cudnnHandle_t handle_ = nullptr;
  AttentionProblem full_;
  CpLayout lay_;
  uint64_t seed_ = 0;
  std::array<std::unique_ptr<CudnnAttention>, 3> graphs_;
  std::vector<void*> allocs_;
  void* workspace_ = nullptr;
  std::vector<Set> sets_;
  std::array<void*, 2> kbuf_{}, vbuf_{}, dkt_{}, dvt_{};  // ring buffers: K, V; traveling dK, dV
  void *o_step_ = nullptr, *dq_step_ = nullptr, *dk_step_ = nullptr, *dv_step_ = nullptr;
  float *lse_step_ = nullptr, *lse_half_ = nullptr, *o_acc_ = nullptr, *dq_acc_ = nullptr;
  std::unique_ptr<CpEvents> ev_[2][2];  // [backward][with_comm]
};

}  // namespace lcm::exec
