// A scenario's mesh, stage layers and op schedule, built the way estimate() builds them, for
// tests that inspect ops; a scenario that does not validate fails the calling test.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm::testing {

struct Built {
  Mesh mesh;
  std::vector<StageLayers> layers;
  Schedule sched;
};

inline Built build(const Scenario& s) {
  for (const Problem& p : validate_scenario(s)) ADD_FAILURE() << p.key << ": " << p.message;
  Built b;
  b.mesh = derive_mesh(s);
  b.layers = stage_layers(s, b.mesh);
  b.sched = build_schedule(s, b.mesh, b.layers, gpu_params(s, b.mesh, b.layers));
  return b;
}

}  // namespace lcm::testing
