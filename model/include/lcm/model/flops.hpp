// FLOPs of one training step (one global batch), split by op class and by pass.
// Convention (explicit, see FlopConvention): 2 FLOPs per multiply-accumulate; backward
// = 2x forward for every GEMM (dgrad + wgrad; a frozen LoRA base GEMM 1x, dgrad only); causal attention counted as half of
// the full s x s work when causal_halved; recomputation counted only in `recompute`
// and included in the headline total only when include_recompute (hardware FLOPs).
// With causal_halved and no recompute the total equals Megatron-LM's
// num_floating_point_operations (training.py, d98e8a64; docs/reference/formulas.md §2.1).
#pragma once

#include "lcm/model/mesh.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

struct FlopTerms {
  double attn_proj = 0;       // QKV (or MLA down/up) and output projections
  double attn_core = 0;       // QK^T and PV
  double dense_mlp = 0;       // MLPs of dense layers
  double routed_experts = 0;  // active experts only (top-k per token)
  double shared_experts = 0;
  double router = 0;          // h x E gating GEMM (not in Megatron's count)
  double logits = 0;          // output layer (+ MTP heads)
  double mtp = 0;             // MTP transformer blocks and projections
  double lora_adapters = 0;   // LoRA adapters' A and B GEMMs (training.peft: lora)

  double total() const {
    return attn_proj + attn_core + dense_mlp + routed_experts + shared_experts + router + logits +
           mtp + lora_adapters;
  }
  bool operator==(const FlopTerms&) const = default;
};

struct Flops {
  FlopTerms fwd;        // whole step, all GPUs
  FlopTerms bwd;
  FlopTerms recompute;  // extra forward work from activation recomputation
  // Headline counts per step (all GPUs) under the scenario's FlopConvention:
  double model_flops = 0;     // fwd + bwd (no recompute)
  double hardware_flops = 0;  // fwd + bwd + recompute
  double per_step = 0;        // model or hardware FLOPs, as the convention says
  // Megatron's num_floating_point_operations (causal, no router, no recompute),
  // whatever the convention, for side-by-side comparison with Megatron logs.
  double megatron_flops = 0;
  double per_gpu_per_step = 0;  // per_step / world
  bool operator==(const Flops&) const = default;
};

Flops count_flops(const Scenario& s, const Mesh& m);

// Per-layer, per-sequence forward FLOPs (one sequence of length `seq`, batch 1, no
// parallelism), used by the scaling table and the attention-vs-MLP crossover.
struct LayerFlops {
  double attn_proj = 0;
  double attn_core = 0;  // causal-halved per convention
  double mlp = 0;        // dense MLP, or routed (active) + shared experts for an MoE layer
};
LayerFlops layer_forward_flops(const ModelSpec& model, int64_t seq, bool moe_layer,
                               bool causal_halved);

// Executed FLOPs of one fused attention core forward: QKᵀ and PV over the fraction of the
// seq_q x seq_kv score matrix it computes (work_fraction; 0.5 for a causal square),
// 2 FLOPs per multiply-accumulate. The backward executes kAttentionBackwardFlopFactor
// times that (FlashAttention's convention: dQ, dK, dV plus the recomputed P); model FLOPs
// count it as 2x. The schedule's attention ops and `lcm calibrate` both use these.
double attention_core_flops(const AttentionShape& a);
inline constexpr double kAttentionBackwardFlopFactor = 2.5;

// Sliding-window attention. Query i of a causal sequence of `seq` tokens attends min(i, W) + 1
// keys; as a fraction of the seq x seq matrix, in the continuum that makes a full causal
// square 1/2: (W s - W^2 / 2) / s^2 for W < s, else 1/2 (the window covers the sequence).
double windowed_pair_fraction(int64_t window, int64_t seq);
// Share of a layer kind's layers (MoE or dense) that run windowed attention: layer l
// (1-based) is windowed unless window_attn_skip_freq N > 0 divides l; 0 without a window.
double windowed_layer_share(const ModelSpec& m, bool moe_layers);
// The two layer populations of a mixed attention op (AttentionShape::windowed_share): every
// layer windowed (work_fraction from the window over the seq_kv keys, the per-rank share of
// the same pairs: seq_q / seq_kv of them), or every layer in full (no window).
AttentionShape attention_windowed_view(const AttentionShape& a);
AttentionShape attention_full_view(const AttentionShape& a);

}  // namespace lcm
