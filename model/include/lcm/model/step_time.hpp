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
#include <cstdint>
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
  double host_idle = 0;  // per micro-batch, in fwd / bwd: the GPU waiting on the host (host-bound regime)
  // This rank's once-per-step ops (StageSchedule::step), per step: collectives not hidden
  // (StepTime::dp_exposed of the bottleneck rank), hidden, and the optimizer update.
  double step_exposed = 0, step_hidden = 0, optimizer = 0;
  bool operator==(const StageTime&) const = default;
};

struct StepTime {
  std::vector<StageTime> stages;
  int bottleneck_stage = 0;
  double pipeline = 0;   // forward/backward of all micro-batches incl. bubble
  double bubble = 0;     // idle time of the bottleneck stage in the pipeline
  double dp_exposed = 0; // data-parallel collectives not hidden (incl. the last bucket)
  double dp_hidden = 0;
  double optimizer = 0;
  // Per step: the GPU waiting on the host (kernel enqueue, synchronisations) on the bottleneck
  // stage, micro-batches multiplied out, plus the step's closing synchronisation.
  double host_idle = 0;
  // Per step: the wait for the job's slowest GPU (slowest_gpu_wait), idle time on every other.
  double straggler = 0;
  double step_s = 0;
  // Per-step totals on the bottleneck stage (micro-batches multiplied out).
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> exposed_comm{};
  double tokens_per_s = 0;  // the whole job's (global batch x sequence / step_s)
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;  // TFLOP/s
  double mfu = 0;
  double hfu = 0;
  bool operator==(const StepTime&) const = default;
};

StepTime step_time(const Scenario& s, const Mesh& m, const Schedule& sched, const Flops& flops);

// ---------------------------------------------------------------------------------
// The slowest GPU (issue 12; docs/time-model.md, "The slowest GPU"). GPUs of one SKU differ in
// the speed they sustain under the power limit (silicon and cooling: the clock that holds the
// limit differs from chip to chip). A step synchronises every GPU of the job (each layer's TP
// collectives, the pipeline's sends, the gradient reduction), so it runs at the pace of its
// slowest GPU. With each GPU's speed normal around the profile's with relative standard
// deviation sigma, the slowest of n GPUs stretches the tensor-core time T of the step by
// sigma x E[max of n standard normals] x T: (GEMM seconds x (fp8 ? spread_fp8 : spread) +
// attention seconds x spread) x expected_max_standard_normal(n). Memory-bound kernels,
// communication and the host are not power-limited and are left alike.
// ---------------------------------------------------------------------------------
// E[max of n independent standard normals], Blom's approximation
// Phi^-1((n - 0.375) / (n + 0.25)) (within 0.6 % of the exact value from n = 8 up, 4 % at n = 2);
// 0 for n <= 1.
double expected_max_standard_normal(int64_t n);
// Seconds the step waits for its slowest GPU: `compute` the step's per-class compute seconds.
double slowest_gpu_wait(const std::array<double, kNumOpClasses>& compute, bool fp8, int64_t num_gpus,
                        const EfficiencySpec& e);

// ---------------------------------------------------------------------------------
// The named additive terms of a step time on the bottleneck stage, per step: compute per
// op class, exposed communication per dimension (every CommDim, EDP and embedding
// included; DP's includes StepTime::dp_exposed, the non-overlapped gradient tail),
// pipeline bubble, optimizer. They sum to StepTime::step_s. The one list every report,
// chart and explanation of a step time names its terms from.
// ---------------------------------------------------------------------------------
enum class StepTermGroup : uint8_t { kCompute, kExposedComm, kBubble, kOptimizer };
// The host-bound term ("host": the GPU idle while the host enqueues or synchronises) and the
// slowest-GPU term ("straggler": the other GPUs waiting for the slowest) are in group kBubble:
// like the pipeline bubble they are idle GPU time.

struct StepTerm {
  StepTermGroup group = StepTermGroup::kCompute;
  // key: stable and unique: "gemm", "attention", "memory_bound", the CommDim names ("tp" ...
  // "emb"), "bubble", "host", "straggler", "optimizer".
  const char* key = "";
  const char* label = "";   // short, for charts: "GEMM", "TP comm", "pipeline bubble"
  const char* phrase = "";  // in a sentence: "GEMM compute", "exposed TP communication"
  double seconds = 0;       // per step
};
inline constexpr int kNumStepTerms = kNumOpClasses + kNumCommDims + 4;

// The terms in report order: OpClass order, CommDim order, bubble, host, straggler, optimizer.
std::array<StepTerm, kNumStepTerms> step_terms(const std::array<double, kNumOpClasses>& compute,
                                               const std::array<double, kNumCommDims>& exposed_comm, double bubble,
                                               double host_idle, double straggler, double optimizer);
inline std::array<StepTerm, kNumStepTerms> step_terms(const StepTime& t) {
  return step_terms(t.compute, t.exposed_comm, t.bubble, t.host_idle, t.straggler, t.optimizer);
}

// ---------------------------------------------------------------------------------
// The pieces step_time() is made of: op lists are timed (pass_time, layer_times,
// step_op_times) and composed (model/src/step_compose.hpp). The incremental estimator
// (incremental.hpp) times each list once per pass_time_key and composes many layouts.
// ---------------------------------------------------------------------------------

// Time of one op list (one pass of one layer or block) with the communication that the
// list's compute hides. Per micro-batch, seconds.
struct PassTime {
  double total = 0;  // compute + exposed communication
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> exposed{};
  std::array<double, kNumCommDims> hidden{};
  // Host side (docs/time-model.md, "Host-bound regime"): time the host takes to enqueue the
  // list's kernels (plus the per-layer Python overhead of a layer list), its device-to-host
  // synchronisations and the GPU time they leave idle (round trip + first launch latency).
  double host = 0;
  double kernels = 0;  // kernels the host enqueues for the list (host_kernels of its ops)
  int syncs = 0;
  double sync_idle = 0;
  // The list's ops up to and including the first one that synchronises: their GPU time (op
  // times summed, nothing hidden) and the host's enqueue of their kernels; 0 without a sync.
  // A caller adds the Python that precedes the synchronisation (HostSpec::moe_presync_fwd).
  double pre_sync_gpu = 0, pre_sync_host = 0;
  bool operator==(const PassTime&) const = default;
};
PassTime pass_time(const std::vector<Op>& ops, const ParallelSpec& par, const MeshTopology& topo,
                   const HardwareSpec& hw);
// One pass run by itself and timed from its first enqueue to the GPU's last kernel (a layer
// benchmark's CUDA events around one forward or backward): the host-bound regime of one
// pass, max(GPU, host) plus the idle of each synchronisation (docs/time-model.md,
// "Host-bound regime"; the step composes passes with the same clock). With a synchronisation
// the pass starts on an idle GPU, so what precedes it is a segment of its own:
// max(pre_sync_gpu, pre_sync_host) + max(rest of the GPU, rest of the host). Seconds.
double standalone_pass_seconds(const PassTime& p);
// pass_time of a stage's four edge lists (StageSchedule pre_fwd, post_fwd, post_bwd, pre_bwd),
// with the per-micro-batch Python outside the layers (HostSpec::microbatch_overhead): half on
// the forward list that holds the embedding, half on the one that holds the loss.
std::array<PassTime, 4> edge_times(const std::array<const std::vector<Op>*, 4>& lists, const ParallelSpec& par,
                                   const MeshTopology& topo, const HardwareSpec& hw);

// Cache key (cache_key.hpp) of pass_time and step_op_times of one op list, besides the
// list itself and the hardware: the overlap switches pass_time reads and the topology of
// each group the list's communication runs on.
struct PassTimeSwitches {
  int32_t tp_comm_overlap = 0, overlap_moe_expert_parallel_comm = 0;
  int32_t cuda_graph_impl = 0;  // CudaGraphImpl; layer_times and edge_times read it with the modules
  uint32_t cuda_graph_modules = 0;
  bool operator==(const PassTimeSwitches&) const = default;
};
PassTimeSwitches pass_time_switches(const ParallelSpec& par);
// The groups an op list communicates on: bit d for the group of CommDim d, and
// kUsesExpertTp / kUsesExpertTpEp for the expert groups (CommGroup).
inline constexpr uint32_t kUsesExpertTp = 1u << kNumCommDims, kUsesExpertTpEp = 1u << (kNumCommDims + 1);
uint32_t comm_uses(const std::vector<Op>& ops);
uint32_t comm_uses(const LayerOps& l);
struct PassTimeKey {
  PassTimeSwitches switches;
  std::array<GroupTopology, kNumCommDims> dim{};  // the used ones; the others left default
  GroupTopology expert_tp, expert_tp_ep;
  bool operator==(const PassTimeKey&) const = default;
};
// `uses`: comm_uses of the list (or of several lists timed together: a superset is a key too).
PassTimeKey pass_time_key(uint32_t uses, const ParallelSpec& par, const MeshTopology& topo);

// One layer kind's lists (Schedule::dense / moe / mtp), timed.
struct LayerTimes {
  PassTime fwd, recompute, bwd;
  bool operator==(const LayerTimes&) const = default;
};
LayerTimes layer_times(const LayerOps& l, const ParallelSpec& par, const MeshTopology& topo, const HardwareSpec& hw);
// Whether the scenario's CUDA graphs (ParallelSpec::cuda_graph_impl / cuda_graph_modules)
// capture op `id` of a layer; `moe_layer`: the op belongs to an MoE layer's list.
bool graph_captures(OpId id, bool moe_layer, const ParallelSpec& par);

// A once-per-step op (StageSchedule::step) reduced to its time and how it may overlap.
enum class StepOpRole : uint8_t {
  kOptimizer,      // memory-bound optimizer update
  kExposed,        // not overlappable
  kUnderBackward,  // overlappable gradient reduction or ZeRO-3 backward re-gather
                   // (dp / edp.params.allgather.bwd): hides under the backward passes
  kUnderForward,   // other overlappable parameter all-gather: hides under the forward passes
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
  // Of `time`, the GPU's wait for the host (the optimizer step's per-tensor host work beyond its
  // kernels' time): the step reports it as host-bound idle, not as optimizer work.
  double host_wait = 0;
  bool operator==(const StepOpTime&) const = default;
};
std::vector<StepOpTime> step_op_times(const std::vector<Op>& step, const MeshTopology& topo, const HardwareSpec& hw);

}  // namespace lcm
