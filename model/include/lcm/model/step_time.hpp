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
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;  // TFLOP/s
  double mfu = 0;
  double hfu = 0;
};

StepTime step_time(const Scenario& s, const Mesh& m, const Schedule& sched, const Flops& flops);

}  // namespace lcm
