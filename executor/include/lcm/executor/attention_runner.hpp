// Buffers, execution and verification of one attention problem: `sets` distinct buffer
// sets (Q, K, V, dO filled with pattern::uniform_pm1 rounded to bf16; O, Stats, dQ, dK, dV
// written by cuDNN), a cuDNN fused-attention forward and backward on each, and the check
// of every output against the project's reference kernels (attention_ref.cuh).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lcm/executor/attention.hpp"
#include "lcm/executor/cudnn_attention.hpp"

namespace lcm::exec {

nlohmann::json to_json(const AttnCheckSet& c);

class AttentionRunner {
 public:
  explicit AttentionRunner(cudaStream_t stream);
  ~AttentionRunner();
  AttentionRunner(const AttentionRunner&) = delete;
  AttentionRunner& operator=(const AttentionRunner&) = delete;

  // Builds the cuDNN plans; if supported, allocates and fills `sets` buffer sets and poisons
  // their outputs (NaN).
  void setup(const AttentionProblem& p, int sets, uint64_t seed, int max_plans = 1);
  bool supported() const { return attn_ && attn_->supported(); }
  std::string unsupported_reason() const;
  CudnnAttention& cudnn() { return *attn_; }
  const AttentionProblem& problem() const { return p_; }
  int sets() const { return static_cast<int>(sets_.size()); }
  double device_bytes() const;  // buffers + workspace
  void rebind();                // after CudnnAttention::select_fwd/select_bwd

  void forward(int set) { attn_->forward(set); }
  void backward(int set) { attn_->backward(set); }
  void poison_outputs();  // NaN into O, Stats, dQ, dK, dV of every set

  // Compares set `set`'s outputs with the reference (waits for the stream): every row when
  // `full`, else attention_sample()'s rows; plus a scan of every output for non-finite values.
  AttnCheckSet verify(int set, bool full, uint64_t sample_seed);
  // Overwrites element (b, h, i, t) of one output (for the checker's tests and --inject).
  void corrupt(int set, AttnOut which, int64_t b, int64_t h, int64_t i, int64_t t, float value);

  // The device pointers of buffer set `set` (ring attention compares against them).
  AttentionTensors tensors(int set) const {
    const Set& x = sets_.at(static_cast<size_t>(set));
    return {x.q, x.k, x.v, x.o, x.stats, x.dout, x.dq, x.dk, x.dv};
  }
  uint64_t input_seed(int set, int tensor) const { return seed_ * 1000003ull + 4ull * static_cast<uint64_t>(set) + static_cast<uint64_t>(tensor); }

 private:
  struct Set {
    void* q = nullptr;
    void* k = nullptr;
    void* v = nullptr;
    void* dout = nullptr;
    void* o = nullptr;
    float* stats = nullptr;
    void* dq = nullptr;
    void* dk = nullptr;
    void* dv = nullptr;
  };
  void release();
  cudaStream_t stream_;
  cudnnHandle_t handle_ = nullptr;
  AttentionProblem p_;
  uint64_t seed_ = 0;
  std::unique_ptr<CudnnAttention> attn_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<Set> sets_;
};

}  // namespace lcm::exec
