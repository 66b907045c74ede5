// The parallel mesh derived from a scenario, the layout validity rules, the rank-order
// rule shared with the executor, and the assignment of layers to pipeline stages.
//
// Dense (attention) layers split the world as TP x CP x DP x PP; expert layers split
// the same ranks as ETP x EP x EDP x PP (Megatron's MoE parallel folding). DP and EDP
// are derived: dp = world / (tp*cp*pp), edp = world / (etp*ep*pp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm {

struct Mesh {
  int world = 1;
  int tp = 1, cp = 1, pp = 1, dp = 1;  // dense layers
  int etp = 1, ep = 1, edp = 1;        // expert layers (same pp)
  int vp = 1;                          // model chunks per pipeline rank (1: no interleaving)
  bool sp = false;                     // sequence parallel in effect (needs tp > 1)
  int num_micro_batches = 1;           // per pipeline per step: gbs / (mbs * dp)
  int64_t padded_vocab = 0;            // vocab padded to make_vocab_size_divisible_by * tp
};

// One layout problem: the scenario key it concerns and what was expected.
struct Problem {
  std::string key;
  std::string message;
};

// All violated rules (Megatron's validate_args and lcm's own range checks); empty when
// the scenario is a valid layout. Pure: the loader attaches file:line to each key.
std::vector<Problem> validate_scenario(const Scenario& s);

// validate_scenario in two parts, for callers that vary only the data-parallel sharding
// knobs (data_parallel_sharding_strategy, use_distributed_optimizer, overlap_param_gather)
// of one layout: validate_scenario(s) is validate_layout(s).problems followed, when
// sizes_ok, by validate_sharding(s). validate_layout reads none of those knobs.
struct LayoutValidation {
  std::vector<Problem> problems;
  bool sizes_ok = true;  // false: a size is out of range and no later rule ran
};
LayoutValidation validate_layout(const Scenario& s);
std::vector<Problem> validate_sharding(const Scenario& s);

// Precondition: validate_scenario(s) is empty.
Mesh derive_mesh(const Scenario& s);

// Megatron vocab padding: round up to a multiple of make_vocab_size_divisible_by * tp.
int64_t padded_vocab_size(int64_t vocab, int divisible_by, int tp);

// What one pipeline rank holds (all of its virtual chunks together).
struct StageLayers {
  int num_layers = 0;        // transformer layers on this rank
  int num_moe_layers = 0;    // of which MoE layers
  bool has_embedding = false;  // first stage
  bool has_output = false;     // last stage: final norm, output layer, loss
  int num_mtp_layers = 0;      // MTP blocks live on the last stage
  // Layers whose whole forward is recomputed in backward (recompute_granularity full):
  // all of them with method uniform; the first recompute_num_layers of each model chunk
  // with method block. 0 without full recompute.
  int num_recomputed_layers = 0;
  int num_recomputed_moe_layers = 0;
  bool operator==(const StageLayers&) const = default;
};

// Layers per pipeline rank, honouring uneven first/last stages and the MoE pattern.
std::vector<StageLayers> stage_layers(const Scenario& s, const Mesh& m);
// The global 0-based indices of the transformer layers each pipeline rank runs (index =
// rank), in the order it runs them: chunk by chunk with interleaving, each chunk in model
// order. The same split as stage_layers.
std::vector<std::vector<int>> stage_layer_indices(const Scenario& s, const Mesh& m);
// What each model chunk holds: pp x vp entries, rank-major (entry r * vp + j is rank r's
// chunk j; one chunk per rank without interleaving). The embedding is on rank 0's chunk 0,
// the loss and the MTP layers on the last rank's last chunk. Summed over a rank's chunks,
// the counts are stage_layers'.
std::vector<StageLayers> chunk_layers(const Scenario& s, const Mesh& m);

// The shard sizes of a mesh: a part of several cache keys (cache_key.hpp).
struct ShardKey {
  int32_t tp = 0, sp = 0, cp = 0, ep = 0, etp = 0;
  bool operator==(const ShardKey&) const = default;
};
inline ShardKey shard_key(const Mesh& m) { return {.tp = m.tp, .sp = m.sp, .cp = m.cp, .ep = m.ep, .etp = m.etp}; }
// How the layers split over pipeline ranks and virtual stages: a part of cache keys.
struct PipelineSplitKey {
  int32_t pp = 0, vp = 0, layers_per_virtual_stage = 0, first_stage_layers = 0, last_stage_layers = 0;
  int32_t layout_hash_lo = 0, layout_hash_hi = 0;  // pipeline_layout_hash; 0, 0 without one
  bool operator==(const PipelineSplitKey&) const = default;
};
// A 64-bit hash (FNV-1a) of a custom pipeline layout's stages; 0 for none.
uint64_t pipeline_layout_hash(const std::vector<std::string>& stages);
inline PipelineSplitKey pipeline_split_key(const Scenario& s, const Mesh& m) {
  const ParallelSpec& p = s.parallel;
  const uint64_t h = p.pipeline_layout.empty() ? 0 : pipeline_layout_hash(p.pipeline_layout);
  return {.pp = m.pp,
          .vp = m.vp,
          .layers_per_virtual_stage = p.num_layers_per_virtual_pipeline_stage,
          .first_stage_layers = p.num_layers_in_first_pipeline_stage,
          .last_stage_layers = p.num_layers_in_last_pipeline_stage,
          .layout_hash_lo = static_cast<int32_t>(static_cast<uint32_t>(h)),
          .layout_hash_hi = static_cast<int32_t>(static_cast<uint32_t>(h >> 32))};
}

// Cache key (cache_key.hpp) of stage_layers, gpu_params(s, m, stage_layers(s, m))
// (params.hpp) and count_flops (flops.hpp), computed together, and of the per-stage
// layer and recompute counts of build_schedule: the mesh sizes, the pipeline split and
// the recompute policy.
struct StructureKey {
  ShardKey shards;
  PipelineSplitKey split;
  int32_t account_for_embedding = 0, account_for_loss = 0;
  int32_t recompute_granularity = 0, recompute_method = 0, recompute_num_layers = 0, recompute_modules = 0;
  bool operator==(const StructureKey&) const = default;
};
StructureKey structure_key(const Scenario& s, const Mesh& m);

// True when transformer layer i (0-based) is an MoE layer.
bool is_moe_layer(const ModelSpec& model, int layer);

// ---------------------------------------------------------------------------------
// Rank order (shared with the executor's communicator construction).
// Coordinates of a global rank along tp, cp, ep, dp, pp for a given order; the first
// entry of `order` varies fastest. For the dense mesh ep = 1; for the expert mesh the
// same function runs with (tp -> etp, cp -> 1, ep -> ep, dp -> edp).
// ---------------------------------------------------------------------------------
struct RankGrid {
  std::array<int, kNumOrderDims> size{1, 1, 1, 1, 1};  // indexed by Dim
  std::array<Dim, kNumOrderDims> order{Dim::kTp, Dim::kCp, Dim::kEp, Dim::kDp, Dim::kPp};
};

RankGrid dense_grid(const Mesh& m, const ParallelSpec& p);
RankGrid expert_grid(const Mesh& m, const ParallelSpec& p);
std::array<int, kNumOrderDims> coords_of(const RankGrid& g, int rank);
int rank_of(const RankGrid& g, const std::array<int, kNumOrderDims>& coords);
// The ranks of `rank`'s group along `dim`, in coordinate order.
std::vector<int> group_ranks(const RankGrid& g, Dim dim, int rank);

}  // namespace lcm
