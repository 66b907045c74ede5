// The cost model's entry point: every breakdown from one scenario.
#include "lcm/model/estimate.hpp"

#include "lcm/model/schedule.hpp"

namespace lcm {

Estimate estimate(const Scenario& s, const EstimateOptions& opts) {
  Estimate e;
  e.mesh = derive_mesh(s);
  e.stage_layers = stage_layers(s, e.mesh);
  e.params = count_params(s, e.mesh.padded_vocab);
  e.gpu_params = gpu_params(s, e.mesh, e.stage_layers);
  e.flops = count_flops(s, e.mesh);
  e.memory = estimate_memory(s, e.mesh, e.stage_layers, e.gpu_params);
  e.comm = estimate_comm(s, e.mesh, e.stage_layers);
  if (opts.with_time) {
    const Schedule sched = build_schedule(s, e.mesh, e.stage_layers, e.gpu_params);
    e.time = step_time(s, e.mesh, sched, e.flops);
    e.band = step_band(e.time, s);
    e.has_time = true;
  }
  return e;
}

}  // namespace lcm
