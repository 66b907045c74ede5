// Expert capacity under a capacity factor (Megatron's get_capacity) and the tokens one
// router call sees on a rank. Below the op schedule, which sizes the dispatch of a
// dropping MoE layer with it; routing.hpp builds the drop statistics on top.
// Vocabulary: docs/reference/formulas.md §6, docs/moe-routing.md.
#pragma once

#include <cstdint>

#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

// Megatron get_capacity(num_tokens = tokens*topk, num_experts, capacity_factor,
// min_capacity): ceil((tokens*topk / experts) * cf) evaluated in double precision in
// the same order as Megatron (so (400/8) * 1.1 = 55.00000000000001 gives 56 there and
// here), then raised to min_capacity (<= 0: none; Megatron's router passes none). It
// saturates at tokens*topk (no expert can receive more), so no CF overflows it.
int64_t capacity(int64_t tokens, int topk, int experts, double cf, int64_t min_capacity = 0);
// The same for a total of `assignments` token-expert pairs (measured loads).
int64_t capacity_for_assignments(double assignments, int experts, double cf,
                                 int64_t min_capacity = 0);

// Whether the op schedule applies the capacity factor: only the alltoall dispatcher drops or
// pads to capacity there (flex and allgather are priced dropless).
inline bool schedule_applies_capacity(const ModelSpec& m) {
  return m.moe_expert_capacity_factor > 0.0 && m.moe_token_dispatcher_type == Dispatcher::kAllToAll;
}

// Tokens one router call sees on one rank: micro_batch * seq / cp, divided by tp when
// sequence parallelism is in effect (MoE layers with TP need SP in Megatron).
int64_t routing_group_tokens(const Scenario& s, const Mesh& m);

}  // namespace lcm
