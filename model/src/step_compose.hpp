// Internal to lcm_model: the pieces step_time() is composed of, for the incremental
// estimator (incremental.cpp), which times op lists once and composes many layouts from
// them. step_time() is exactly these calls, so a composition from shared pieces is
// bit-identical to it.
#pragma once

#include <array>
#include <vector>

#include "lcm/model/flops.hpp"
#include "lcm/model/pipeline_schedule.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/step_time.hpp"

namespace lcm {

// What one pipeline rank runs, its op lists already timed. Stages with equal inputs
// have equal times, so several ranks may share one StageInputs (StepInputs::stage_input).
struct StageInputs {
  int dense = 0, dense_recomputed = 0;  // as StageSchedule
  int moe = 0, moe_recomputed = 0;
  int mtp = 0, mtp_recomputed = 0;
  // pass_time of the StageSchedule lists pre_fwd, post_fwd, post_bwd, pre_bwd (non-null).
  const PassTime* pre_fwd = nullptr;
  const PassTime* post_fwd = nullptr;
  const PassTime* post_bwd = nullptr;
  const PassTime* pre_bwd = nullptr;
  const StepOpTime* step = nullptr;  // step_op_times of StageSchedule::step
  int num_step = 0;
  // stage_microbatch_time(*this, in) computed beforehand (layouts that differ only in
  // their step collectives share it), or null: compose_step_time computes it.
  const StageTime* microbatch_time = nullptr;
};

// The layer counts of a stage (StageSchedule, or anything with its count fields).
template <class Counts>
void copy_layer_counts(const Counts& c, StageInputs& in) {
  in.dense = c.dense;
  in.dense_recomputed = c.dense_recomputed;
  in.moe = c.moe;
  in.moe_recomputed = c.moe_recomputed;
  in.mtp = c.mtp;
  in.mtp_recomputed = c.mtp_recomputed;
}

struct StepInputs {
  const LayerTimes* dense = nullptr;  // layer_times of Schedule::dense / moe / mtp
  const LayerTimes* moe = nullptr;
  const LayerTimes* mtp = nullptr;
  const StageInputs* stages = nullptr;  // distinct stage inputs
  const int* stage_input = nullptr;     // per pipeline rank: index into `stages`
  int num_ranks = 0;                    // pipeline ranks (Mesh::pp)
  int vp = 1;                           // Mesh::vp
  int num_micro_batches = 1;            // Mesh::num_micro_batches
};

// One pipeline rank's forward and backward of one micro-batch: its op-list times summed in
// execution order (exposed communication included, pipeline p2p hidden under
// interleaving) into a StageTime (stage index left 0). The part of the stage time that
// does not depend on the step collectives.
StageTime stage_microbatch_time(const StageInputs& st, const StepInputs& in);

// The pipeline passes of every model chunk (pp x vp entries, rank-major, as
// pipeline_makespan takes them): rank r's micro-batch forward and backward
// (rank_fb[r] = {fwd, bwd}) split over its model chunks in proportion to what each chunk runs
// (chunk_layers: its dense, MoE and MTP layers, the recomputed ones in the backward, the
// embedding on the first and the output layer and loss on the last chunk, pipeline p2p
// left out), so a rank's chunks sum to its pass times. Without interleaving a chunk is its rank.
std::vector<ChunkPass> pipeline_chunk_passes(const Scenario& s, const StepInputs& in,
                                             const std::vector<std::array<double, 2>>& rank_fb);

// The step time from timed pieces. `per_stage`: fill StepTime::stages (one entry per
// pipeline rank); without it `stages` stays empty.
StepTime compose_step_time(const Scenario& s, const StepInputs& in, const Flops& flops, bool per_stage = true);

}  // namespace lcm
