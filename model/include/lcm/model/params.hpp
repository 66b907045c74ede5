// Parameter counts: whole model (total and active per token, per component) and what
// one GPU of a pipeline stage holds after TP / PP / EP / ETP sharding.
// Source: Megatron-LM theoretical_memory_usage.py::compute_weight_and_optimizer_memory
// (docs/reference/formulas.md §1). Counts are in parameters (not bytes).
#pragma once

#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

struct ParamComponents {
  double embedding = 0;       // input word embedding (padded vocab x h)
  double attention = 0;       // QKV / MLA projections, output projection, their biases, qk-norms
  double dense_mlp = 0;       // MLPs of dense layers
  double router = 0;          // MoE router weights (+ expert bias)
  double routed_experts = 0;  // all routed experts (active: top-k of them)
  double shared_experts = 0;
  double norms = 0;           // per-layer norms and the final norm
  double output_layer = 0;    // untied LM head (0 when tied)
  double mtp = 0;             // multi-token-prediction blocks (excluded from `main`)
  double lora_adapters = 0;   // LoRA adapters (training.peft: lora), the only trainable ones then

  double total() const {
    return embedding + attention + dense_mlp + router + routed_experts + shared_experts + norms +
           output_layer + mtp + lora_adapters;
  }
  // The published convention: main model without MTP, embeddings and output layer included.
  double main() const { return total() - mtp; }
};

struct ParamCounts {
  ParamComponents total;   // every parameter
  ParamComponents active;  // parameters touched per token (routed experts: top-k of E)
};

ParamCounts count_params(const ModelSpec& model, int64_t padded_vocab);

// LoRA adapters of one layer, unsharded (training.peft: lora; all zero otherwise): per target
// linear in -> out, A (r x in) and B (out x r), r (in + out) parameters in 2 tensors. `attn`:
// qkv and proj; `mlp`: fc1 / fc2 of the dense MLP (dense layer) or of the shared experts (MoE
// layer); `per_expert`: one routed expert's fc1 / fc2. The one home of the adapters' shapes:
// the parameter counts and the FLOP count (2 FLOPs per parameter per token) use it.
struct LoraLayerParams {
  double attn = 0, mlp = 0, per_expert = 0;
  double attn_tensors = 0, mlp_tensors = 0, per_expert_tensors = 0;
};
LoraLayerParams lora_layer_params(const ModelSpec& model, const TrainingSpec& t, bool moe_layer);
// The same with the scenario's LoRA adapters (lora_adapters; 0 without peft).
ParamCounts count_params(const Scenario& s, int64_t padded_vocab);
// count_params(...).total alone (the memory model's ZeRO-3 unit needs no active count).
ParamComponents total_params(const ModelSpec& model, int64_t padded_vocab);

// Parameters resident on one GPU of a pipeline stage. Dense parameters are replicated
// over DP x CP; expert parameters over EDP. That split drives optimizer sharding.
struct GpuParams {
  double dense = 0;   // non-expert parameters on this GPU (after TP and PP)
  double expert = 0;  // routed-expert parameters on this GPU (after ETP, EP and PP)
  // Parameter tensors on this GPU (TP and ETP shard a tensor, they do not change the count):
  // the optimizer step's host work walks them (schedule's optimizer.step).
  double dense_tensors = 0;
  double expert_tensors = 0;  // the local experts' (E / EP of them)
  // What trains: every parameter, or under LoRA only the adapters (included in dense / expert
  // above). Gradients, main parameters, optimizer states and the DP gradient and parameter
  // collectives are sized by these.
  double trainable_dense = 0;
  double trainable_expert = 0;
  double trainable_dense_tensors = 0;
  double trainable_expert_tensors = 0;
  double total() const { return dense + expert; }
  double trainable() const { return trainable_dense + trainable_expert; }
  // A GPU's parameters with all of them training (no PEFT), tensors as given.
  static GpuParams all_trainable(double dense, double expert, double dense_tensors = 0, double expert_tensors = 0) {
    return {dense, expert, dense_tensors, expert_tensors, dense, expert, dense_tensors, expert_tensors};
  }
  bool operator==(const GpuParams&) const = default;
};

// The word-embedding and output-layer parameters of a pipeline rank (on its TP rank): the
// embedding on the rank that holds it, the output layer on the last one when it is a weight of
// its own (untied, or tied across a pipeline). FP8 runs keep both in bf16; the rest of the
// rank's parameters run as Transformer Engine's FP8 linear layers (norms included: a few per
// mille).
double stage_embedding_params(const Scenario& s, const Mesh& m, bool has_embedding, bool has_output);

// Per pipeline rank, index = stage (0 = first).
std::vector<GpuParams> gpu_params(const Scenario& s, const Mesh& m,
                                  const std::vector<StageLayers>& stages);

}  // namespace lcm
