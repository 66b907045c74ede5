// Metrics of a layout from the model's Memory and StepTime (one home for both paths).
#include "lcm/model/estimate.hpp"
#include "plan_internal.hpp"

namespace lcm::plan {

void memory_metrics(const Memory& mem, Metrics& m) {
  m.peak_bytes = mem.peak_bytes;
  m.allocated_peak_bytes = mem.allocated_peak_bytes;
  m.worst_stage = mem.worst_stage;
  m.fits = mem.fits;
  m.may_fit = mem.may_fit;
  m.hbm_bytes = mem.hbm_bytes;
  m.peak_high_bytes = mem.peak_high_bytes;
  m.peak_low_bytes = mem.peak_low_bytes;
  m.miss_bytes = mem.peak_high_bytes - mem.hbm_bytes;
  m.miss_stage = mem.verdict_stage;
}

void time_metrics(const StepTime& t, Metrics& m) {
  m.step_s = t.step_s;
  m.tokens_per_s_per_gpu = t.tokens_per_s_per_gpu;
  m.mfu = t.mfu;
  m.hfu = t.hfu;
  m.bubble = t.bubble;
  m.pipeline = t.pipeline;
  m.dp_exposed = t.dp_exposed;
  m.optimizer = t.optimizer;
  m.host_idle = t.host_idle;  // issue 12, host-bound regime
  m.straggler = t.straggler;  // issue 12, the slowest GPU
  m.exposed_comm = t.exposed_comm;
  m.compute = t.compute;
  m.bottleneck_stage = t.bottleneck_stage;
}

Metrics metrics_of_estimate(const Scenario& s) {
  const Estimate e = estimate(s, EstimateOptions{.with_time = true});
  Metrics m;
  time_metrics(e.time, m);
  memory_metrics(e.memory, m);
  return m;
}

}  // namespace lcm::plan
