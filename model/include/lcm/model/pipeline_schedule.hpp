// The pipeline schedule as Megatron-Core runs it, simulated op by op: every pipeline rank
// executes its forward and backward passes of each model chunk in the order of
// forward_backward_pipelining_without_interleaving (vp = 1) or
// forward_backward_pipelining_with_interleaving (vp > 1, micro-batches in groups of
// `microbatch_group_size_per_vp_stage`, pp by default), each pass starting when its rank is free and
// its input is there: the forward of virtual stage s after the forward of s - 1, the backward
// of s after the backward of s + 1 (the last virtual stage's after its own forward). Virtual
// stage s = chunk * pp + rank. Point-to-point transfers take no time here: their cost is in the
// pass times (exposed) or hidden (interleaving's --overlap-p2p-comm).
//
// The closed form m * fb_max + (sum_r fb_r - fb_max) / vp (docs/time-model.md) is this
// makespan exactly when every chunk of a rank takes the same time; with uneven chunks (the
// embedding on the first, the output layer and loss on the last, custom layouts) the two
// differ, and this function is the reference (tests/model/pipeline_schedule_test.cpp).
#pragma once

#include <span>
#include <vector>

namespace lcm {

struct ChunkPass {
  double fwd = 0;  // one micro-batch's forward through one model chunk of one rank
  double bwd = 0;  // its backward (recompute included)
};

// One pass of a pipeline rank: a micro-batch's forward or backward through one of its chunks.
struct PipelinePass {
  int micro_batch = 0;
  int chunk = 0;  // the rank's model chunk (0 without interleaving)
  bool fwd = true;
};

// Rank r's passes in Megatron-Core's order (the one pipeline_makespan runs): without
// interleaving (vp = 1) pp - r - 1 warm-up forwards, then one forward and one backward
// alternating, then the remaining backwards; interleaved, the schedule table's order.
// `group` as below (0: pp).
std::vector<PipelinePass> pipeline_rank_order(int pp, int vp, int num_micro_batches, int group, int r);

// Wall time from the first forward to the last backward. `chunks` holds pp * vp entries,
// rank-major: chunks[r * vp + c] is rank r's chunk c. Requires pp >= 1, vp >= 1,
// num_micro_batches >= 1.
// `group`: Megatron's microbatch_group_size_per_vp_stage (0: pp); validate_scenario's rules
// (pp <= group <= num_micro_batches, the remainder 0 or >= pp) keep the orders deadlock-free.
double pipeline_makespan(int pp, int vp, int num_micro_batches, std::span<const ChunkPass> chunks, int group = 0);

// A lower bound of pipeline_makespan from the same inputs, without simulating: rank r runs all
// its passes (num_micro_batches x the sum of its chunks) after the first micro-batch's forward
// has crossed chunk 0 of ranks 0..r-1 and before the last micro-batch's backward crosses them
// again (every rank's last pass is a chunk-0 backward); the maximum over ranks. Equal to the
// makespan when every chunk takes the same time.
double pipeline_makespan_lower_bound(int pp, int vp, int num_micro_batches, std::span<const ChunkPass> chunks);

}  // namespace lcm
