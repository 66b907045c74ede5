// One MoE block of the training runner (ep = 1 today; groups come from the layout in the
// next issue): router GEMM (fp32 logits), score (softmax or sigmoid), top-k with optional
// group-limited routing and expert bias, capacity factor with Megatron's drop policies
// (probs / position) and optional padding to capacity, or dropless; load-balancing aux loss
// and router z-loss (Megatron's switch_load_balancing_loss_func and z_loss_func, scaled as
// Megatron scales them); permutation, grouped expert GEMMs (fc1, SwiGLU, fc2), un-permute
// weighted by the gates; shared experts (their own fc1/SwiGLU/fc2 on every token, added).
// Forward and backward with real inputs and parameter gradients; every op bracketed with
// OpScope tags of the model's contract (OpId::kMoeRouter, kMoeTopk, kMoePermute,
// kMoeExpertsFc1, kMoeExpertsAct, kMoeExpertsFc2, kMoeUnpermute, kMoeSharedFc1, ...).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "lcm/executor/train/allocator.hpp"
#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/recorder.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::exec {
class LtGemm;
}

namespace lcm::exec::train {

struct MoeBlockConfig {
  int64_t tokens = 0;  // rows of one micro-batch on this rank
  int64_t hidden = 0;
  int64_t expert_ffn = 0;  // per expert
  int64_t shared_ffn = 0;  // total shared-expert width; 0: none
  int experts = 0, topk = 0;
  RouterScore score = RouterScore::kSoftmax;
  int groups = 0, group_topk = 0;  // 0: no group-limited routing
  bool expert_bias = false;        // DeepSeek-V3 aux-free bias (added for selection only)
  double capacity_factor = 0;      // <= 0: dropless
  bool drop_by_position = false;   // false: Megatron "probs" policy
  bool pad_to_capacity = false;
  float aux_loss_coeff = 0.0f;     // Megatron --moe-aux-loss-coeff
  float z_loss_coeff = 0.0f;       // Megatron --moe-z-loss-coeff
  int num_layers_for_aux = 1;      // Megatron divides the logged aux loss by the layer count
};

// A parameter the block owns a view of: bf16 working copy and fp32 main grad, both
// slices of the runner's contiguous buffers (the runner initialises and updates them).
struct ParamView {
  const char* name;  // "router", "experts.fc1", "experts.fc2", "shared.fc1", "shared.fc2", "expert_bias"
  bf16* weight = nullptr;
  float* grad = nullptr;
  int64_t numel = 0;
  float init_std = 0.02f;  // what the runner initialises it with (0: constant 0)
};

class MoeBlock {
 public:
  // gemm: the runner's cuBLASLt wrapper on the compute stream.
  MoeBlock(const MoeBlockConfig& c, CachingAllocator& alloc, LtGemm& gemm, cudaStream_t s);
  ~MoeBlock();
  MoeBlock(const MoeBlock&) = delete;
  MoeBlock& operator=(const MoeBlock&) = delete;

  // Shapes of the parameters, in a fixed order; the runner fills weight/grad and calls bind().
  std::vector<ParamView> param_shapes() const;
  void bind(const std::vector<ParamView>& views);

  // y = MoE(x) for x [tokens, hidden] (x stays alive until backward). Saves what the
  // backward needs (allocated from the allocator as kActivations; released by backward(),
  // or kept for a recompute per the runner's choice). *aux_loss_out (device float, +=):
  // the aux and z losses of this micro-batch, already scaled by their coefficients.
  void forward(const bf16* x, bf16* y, float* aux_loss_out, int layer, int micro_batch, OpRecorder* rec);
  // dx = dL/dx given dy (and the aux/z losses' gradients with loss_scale); parameter grads +=.
  void backward(const bf16* dy, bf16* dx, float loss_scale, int layer, int micro_batch, OpRecorder* rec);
  void release_saved();  // drop saved activations (recompute: forward again before backward)

  // Of the last forward: tokens per expert before and after drops (host copies, read
  // after the stream synchronises; for the summary's routing statistics).
  const std::vector<int32_t>& load() const;
  const std::vector<int32_t>& kept() const;
  // The last forward's assignments, [tokens x topk] in token order: the expert of each and
  // whether it was kept (not dropped at capacity). Synchronises the stream; valid until the
  // saved activations are released (`--dump`: the PyTorch reference replays the routing).
  struct Slots {
    std::vector<int32_t> expert, kept;
  };
  Slots last_slots() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace lcm::exec::train
