// The memory + compute scaling table across sequence lengths: per layer and per step,
// attention-core vs MLP/expert vs projection FLOPs, activation memory, and the sequence
// length where attention-core FLOPs overtake the MLP (closed form).
#pragma once

#include <cstdint>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm {

struct ScalingRow {
  int64_t seq_length = 0;
  // Forward FLOPs of one layer for one sequence (averaged over the layer mix).
  double layer_attn_core = 0;
  double layer_attn_proj = 0;
  double layer_mlp = 0;
  double attn_core_share = 0;  // attn_core / (attn_core + attn_proj + mlp), per layer
  // Whole step (global batch), model FLOPs under the scenario's convention.
  double step_flops = 0;
  double step_attn_core = 0;
  double step_mlp = 0;
  double step_attn_proj = 0;
  // Memory on the worst stage under the scenario's layout with seq_length replaced.
  double activation_bytes_per_layer = 0;  // one micro-batch, one GPU
  double activation_bytes = 0;            // worst stage, all in-flight micro-batches
  double peak_bytes = 0;
  double peak_high_bytes = 0;  // Memory::peak_high_bytes: what `fits` compares with HBM
  bool fits = true;
  bool may_fit = true;  // Memory::may_fit (tight: may_fit && !fits)
  bool layout_valid = true;               // seq divisible by 2*cp etc.
  bool attention_dominates = false;       // attn_core > mlp at this length
};

struct Crossover {
  // Sequence length where per-layer attention-core FLOPs equal MLP FLOPs:
  //   dense: s* = 2 * r * h * f / (c * a * d_qk_v) with the constants documented in
  //   scaling.cpp; MoE uses the active experts (top-k routed + shared). With sliding-window
  //   layers the crossover is solved for (the first token count where attention leads); 0
  //   when attention never overtakes (every layer windowed with a short window).
  double dense_seq = 0;  // for the model's dense layers (0 if it has none)
  double moe_seq = 0;    // for its MoE layers (0 if none)
};

Crossover attention_mlp_crossover(const ModelSpec& model, bool causal_halved);
std::vector<ScalingRow> scaling_table(const Scenario& base, const std::vector<int64_t>& seqs);

}  // namespace lcm
