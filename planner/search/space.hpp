// The planner's search space (internal to planner/search): the meshes of N GPUs and the
// deeper knobs of each (docs/planner.md, "The search space").
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

// The deep knobs of one mesh (tp, cp, pp and its split, ep, etp).
struct MeshSpec {
  Layout mesh;  // tp, cp, pp (+split), ep, etp set; the rest default
  std::vector<int> vls;
  std::vector<int> mbss;
  std::vector<std::pair<CpCommType, int>> cp_comms;
  std::vector<DpSharding> shardings;
  std::vector<Dispatcher> dispatchers;
  bool two_orders = false;
  uint64_t leaves = 0;  // layouts under the mesh
};

// One work item: the meshes of one (tp, cp, ep, etp), which share their layer op lists.
struct Item {
  std::vector<MeshSpec> meshes;
  uint64_t leaves = 0;
};

struct Space {
  std::vector<RecomputeGranularity> recomputes{RecomputeGranularity::kNone, RecomputeGranularity::kSelective,
                                               RecomputeGranularity::kFull};
  std::vector<Item> items;  // largest first
  // Meshes invalid even with the most permissive deeper knobs: one candidate each.
  std::vector<std::pair<Layout, std::vector<Problem>>> rejected_meshes;
  uint64_t leaves = 0;          // layouts of the items
  uint64_t meshes_checked = 0;  // validate_scenario calls made to build the space
};

// Every mesh of base.num_gpus GPUs; each checked once with the most permissive deeper
// knobs (no interleaving, micro-batch 1, no recompute, p2p, distributed optimizer). Knob
// values the constraints exclude are not enumerated (a mesh left without any layout is
// dropped, not counted as rejected).
Space enumerate_space(const Scenario& base, const SearchConstraints& c = {});

}  // namespace lcm::plan
