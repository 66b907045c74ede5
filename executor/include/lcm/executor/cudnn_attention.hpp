// Causal GQA flash attention through cuDNN's backend (graph) API, forward and backward.
//
// The cuDNN C++ frontend is not used (its headers are not installed on the machines this
// runs on); the operation graphs below are the ones the frontend's SDPA nodes build
// (cudnn-frontend include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
// CompositeSDPANode and CompositeSDPABackwardNode, and the causal diagonal-band mask of
// utils/attn_score_modifiers.h), written against the backend descriptors directly. cuDNN
// recognises the pattern and runs its fused flash-attention engine on it, the engine behind
// torch.nn.functional.scaled_dot_product_attention's cuDNN backend and Transformer Engine.
//
// Forward:  S = Q K^T; S *= scale; [causal: S = row >= col ? S : -inf];
//           M = rowmax S; E = exp(S - M); Z = rowsum E; Stats = M + log Z; P = E / Z (bf16);
//           O = P V.
// Backward: Dsum = rowsum(dO * O) (fp32, workspace); S as above; P = exp(S - Stats);
//           dV = P^T dO; dP = dO V^T; dS = P (dP - Dsum) scale; dK = dS^T Q; dQ = dS K
//           (through an fp32 dQ accumulator in the workspace). With GQA the per-query-head
//           dK, dV are summed over each group by a reduction the engine fuses.
// bf16 inputs and outputs, fp32 softmax statistics and fp32 compute; BSHD layout
// (attention.hpp). Engine configs come from cuDNN's heuristics (CUDNN_HEUR_MODE_A, then
// FALLBACK), the first that finalizes into an execution plan is used unless asked otherwise.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lcm/executor/attention.hpp"

namespace lcm::exec {

// cudnnGetVersion() of the loaded library and CUDNN_VERSION of the headers.
size_t cudnn_runtime_version();
size_t cudnn_header_version();
std::string cudnn_version_string(size_t v);  // 91400 -> "9.14.0"

[[noreturn]] void throw_cudnn_error(int status, const char* expr, const char* file, int line);
#define LCM_CUDNN_CHECK(expr)                                                              \
  do {                                                                                     \
    const cudnnStatus_t lcm_st_ = (expr);                                                  \
    if (lcm_st_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::lcm::exec::throw_cudnn_error(static_cast<int>(lcm_st_), #expr, __FILE__, __LINE__); \
  } while (0)

// Owns one cudnnBackendDescriptor_t.
class CudnnDesc {
 public:
  CudnnDesc() = default;
  explicit CudnnDesc(cudnnBackendDescriptorType_t type);
  ~CudnnDesc();
  CudnnDesc(CudnnDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  CudnnDesc& operator=(CudnnDesc&& o) noexcept;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The device pointers of one forward + backward.
struct AttentionTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
};

class CudnnAttention {
 public:
  // Builds both graphs and their execution plans on `handle` (whose stream is set to
  // `stream`). max_plans > 1 keeps that many finalized plans per direction (see select_*).
  // deterministic: the backward graph of cudnn-frontend's set_deterministic_algorithm(true)
  // on Hopper (its "dP workspace" variant: dQ = dS K written by the matmul itself, no fp32 dQ
  // accumulator that the engine fills with atomic adds), so dQ, dK, dV are bit-identical from
  // run to run; the default is the frontend's default (the accumulator; faster). Blackwell's
  // deterministic engine additionally needs knob overrides the frontend applies and this
  // class does not: on sm 10.x and later deterministic = true is refused (unsupported()).
  CudnnAttention(cudnnHandle_t handle, cudaStream_t stream, const AttentionProblem& p, int max_plans = 1,
                 bool deterministic = false);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  bool supported() const { return !fwd_.plans.empty() && !bwd_.plans.empty(); }
  const std::string& unsupported_reason() const { return reason_; }
  size_t workspace_bytes() const;  // enough for the selected forward and backward plans
  // Enough for the forward alone: a set bound with a workspace of this size runs forward()
  // only (the backward's fp32 dQ accumulator and plan workspace are not needed there).
  size_t forward_workspace_bytes() const;
  int num_fwd_plans() const { return static_cast<int>(fwd_.plans.size()); }
  int num_bwd_plans() const { return static_cast<int>(bwd_.plans.size()); }
  void select_fwd(int i);
  void select_bwd(int i);
  nlohmann::json describe() const;  // graph variant, engines, workspace, versions
  double build_seconds() const { return build_s_; }
  bool deterministic() const { return deterministic_; }

  // Registers the pointers of buffer set `set` (variant packs are built once per set).
  void bind(int set, const AttentionTensors& t, void* workspace);
  void forward(int set);   // O, Stats
  void backward(int set);  // dQ, dK, dV from Q, K, V, O, dO, Stats

 private:
  struct Plan {
    CudnnDesc config;  // the engine config the plan was made from, kept alive with it
    CudnnDesc plan;
    int64_t workspace = 0;
    int64_t engine = -1;
    int heuristic_index = -1;
  };
  struct Direction {
    std::vector<CudnnDesc> keep;          // tensors and operations the graph references
    CudnnDesc graph;
    std::vector<int64_t> by_value_uids;   // scalars of this graph, passed by host pointer
    std::vector<Plan> plans;
    int selected = 0;
    std::string variant;
    std::vector<CudnnDesc> packs;         // one variant pack per bound set
  };
  struct Variant {
    const char* name;
    bool gen_index_int32;  // GEN_INDEX computed in INT32 (else FLOAT, the frontend's choice)
  };
  static void clear(Direction& d);  // releases plans, graph, then the tensors and operations
  void build(bool backward, int max_plans);
  void build_graph(Direction& dir, bool backward, const Variant& v);
  void make_plans(Direction& dir, int max_plans, std::string& why);
  CudnnDesc make_pack(const Direction& dir, const std::vector<std::pair<int64_t, const void*>>& ptrs,
                      void* workspace) const;
  int64_t fe_workspace_bytes() const;  // dQ accumulator + softmax row sums, ahead of cuDNN's

  cudnnHandle_t handle_;
  cudaStream_t stream_;
  AttentionProblem p_;
  Direction fwd_, bwd_;
  std::string reason_;
  double build_s_ = 0;
  bool deterministic_ = false;
  // By-value scalars: cuDNN reads them through these host pointers at every execute.
  float scale_ = 1.0f;
  float one_ = 1.0f;
  float neg_inf_ = 0.0f;
  float left_bound_ = 0.0f;  // window + 1: the sliding-window mask keeps col + left_bound > row
  std::vector<void*> set_workspace_;
};

}  // namespace lcm::exec
