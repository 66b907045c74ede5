// Step time from the schedule: per-micro-batch forward and backward time of each
// pipeline stage (compute plus the communication that is not hidden), the pipeline
// schedule (1F1B or interleaved 1F1B) with its bubble, the data-parallel gradient /
// parameter collectives with their non-overlapped tail, and the optimizer.
//
// MFU = model FLOPs per second per GPU / dense BF16 peak (Megatron / Korthikanti
// convention, with the scenario's causal convention); HFU uses hardware FLOPs
// (recompute included). Both against the BF16 dense peak even for FP8 runs, as NVIDIA's
// tables do.
#pragma once

#include <array>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/timing.hpp"

namespace lcm {

enum class OpClass : uint8_t { kGemm, kAttention, kMemoryBound };
inline constexpr int kNumOpClasses = 3;

struct StageTime {
  int stage = 0;
  double fwd = 0;  // one micro-batch, all model chunks of the stage, exposed comm included
  double bwd = 0;  // one micro-batch: recompute + backward, exposed comm included
  std::array<double, kNumOpClasses> compute{};     // per micro-batch (fwd + bwd + recompute)
  std::array<double, kNumCommDims> exposed_comm{};  // per micro-batch
  std::array<double, kNumCommDims> hidden_comm{};   // per micro-batch
  // This rank's once-per-step ops (StageSchedule::step), per step: collectives not hidden
  // (StepTime::dp_exposed of the bottleneck rank), hidden, and the optimizer update.
  double step_exposed = 0, step_hidden = 0, optimizer = 0;
};

struct StepTime {
  std::vector<StageTime> stages;
  int bottleneck_stage = 0;
  double pipeline = 0;   // forward/backward of all micro-batches incl. bubble
  double bubble = 0;     // idle time of the bottleneck stage in the pipeline
  double dp_exposed = 0; // data-parallel collectives not hidden (incl. the last bucket)
  double dp_hidden = 0;
  double optimizer = 0;
  double step_s = 0;
  // Per-step totals on the bottleneck stage (micro-batches multiplied out).
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> exposed_comm{};
  double tokens_per_s = 0;  // the whole job's (global batch x sequence / step_s)
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;  // TFLOP/s
  double mfu = 0;
  double hfu = 0;
};

StepTime step_time(const Scenario& s, const Mesh& m, const Schedule& sched, const Flops& flops);

// ---------------------------------------------------------------------------------
// The named additive terms of a step time on the bottleneck stage, per step: compute per
// op class, exposed communication per dimension (every CommDim, EDP and embedding
// included; DP's includes StepTime::dp_exposed, the non-overlapped gradient tail),
// pipeline bubble, optimizer. They sum to StepTime::step_s. The one list every report,
// chart and explanation of a step time names its terms from.
// ---------------------------------------------------------------------------------
enum class StepTermGroup : uint8_t { kCompute, kExposedComm, kBubble, kOptimizer };

struct StepTerm {
  StepTermGroup group = StepTermGroup::kCompute;
  const char* key = "";     // stable and unique: "gemm", "attention", "memory_bound", the
                            // CommDim names ("tp" ... "emb"), "bubble", "optimizer"
  const char* label = "";   // short, for charts: "GEMM", "TP comm", "pipeline bubble"
  const char* phrase = "";  // in a sentence: "GEMM compute", "exposed TP communication"
  double seconds = 0;       // per step
};
inline constexpr int kNumStepTerms = kNumOpClasses + kNumCommDims + 2;

// The terms in report order: OpClass order, CommDim order, bubble, optimizer.
std::array<StepTerm, kNumStepTerms> step_terms(const std::array<double, kNumOpClasses>& compute,
                                               const std::array<double, kNumCommDims>& exposed_comm, double bubble,
                                               double optimizer);
inline std::array<StepTerm, kNumStepTerms> step_terms(const StepTime& t) {
  return step_terms(t.compute, t.exposed_comm, t.bubble, t.optimizer);
}

// ---------------------------------------------------------------------------------
// The pieces step_time() is composed of, for callers that time many layouts and share
// what layouts have in common (the planner): op lists are timed once (pass_time,
// layer_times, step_op_times) and composed per layout (compose_step_time). step_time()
// is exactly these calls, so a composition from shared pieces is bit-identical to it.
// ---------------------------------------------------------------------------------

// Time of one op list (one pass of one layer or block) with the communication that the
// list's compute hides. Per micro-batch, seconds.
struct PassTime {
  double total = 0;  // compute + exposed communication
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> exposed{};
  std::array<double, kNumCommDims> hidden{};
};
PassTime pass_time(const std::vector<Op>& ops, const ParallelSpec& par, const MeshTopology& topo,
                   const HardwareSpec& hw);

// One layer kind's lists (Schedule::dense / moe / mtp), timed.
struct LayerTimes {
  PassTime fwd, recompute, bwd;
};
LayerTimes layer_times(const LayerOps& l, const ParallelSpec& par, const MeshTopology& topo, const HardwareSpec& hw);

// A once-per-step op (StageSchedule::step) reduced to its time and how it may overlap.
enum class StepOpRole : uint8_t {
  kOptimizer,      // memory-bound optimizer update
  kExposed,        // not overlappable
  kUnderBackward,  // overlappable gradient reduction: hides under the backward passes
  kUnderForward,   // overlappable parameter all-gather: hides under the forward passes
};
// Whether the overlap rules let this communication op run under compute: the CP ring
// exchange, TP collectives with tp_comm_overlap, EP collectives with
// overlap_moe_expert_parallel_comm. pass_time() applies their budgets; the predicted
// trace places such ops beside the compute stream.
bool overlaps_compute(const Op& op, const ParallelSpec& par);

struct StepOpTime {
  double time = 0;  // all its calls in one step (op_time x Op::calls), seconds
  StepOpRole role = StepOpRole::kExposed;
  int calls = 1;    // calls per step: 1, or one per micro-batch (Megatron-FSDP ZeRO-2/3)
};
std::vector<StepOpTime> step_op_times(const std::vector<Op>& step, const MeshTopology& topo, const HardwareSpec& hw);

struct StageInputs;
struct StepInputs;
// One pipeline rank's forward and backward of one micro-batch: its op-list times summed in
// execution order (exposed communication included, pipeline p2p hidden under
// interleaving) into a StageTime (stage index left 0). The part of the stage time that
// does not depend on the step collectives.
StageTime stage_microbatch_time(const StageInputs& st, const StepInputs& in);

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

// The step time from timed pieces. `per_stage`: fill StepTime::stages (one entry per
// pipeline rank); without it `stages` stays empty and nothing is allocated.
StepTime compose_step_time(const Scenario& s, const StepInputs& in, const Flops& flops, bool per_stage = true);

}  // namespace lcm
