// The communication of one layout (`lcm comm`): per collective item its volume
// (Estimate::comm), its time (op_time of the schedule's ops of that item), and per
// parallel dimension the group topology (mesh_topology), the time, and how much of it
// the step does not hide (StepTime / StageTime). All per GPU per step, on one pipeline
// stage: the one Estimate::comm reports (the busiest).
#pragma once

#include <string>
#include <vector>

#include "lcm/model/estimate.hpp"
#include "lcm/model/timing.hpp"

namespace lcm::plan {

struct CommItemTime {
  CommItem item;       // volume (Estimate::comm)
  double time_s = 0;   // all its calls in the step
};

// Communication ops without a Comm item (pipeline receives, the cross-entropy all-reduce).
struct UncountedComm {
  std::string op;  // op base name, e.g. "pp.recv"
  CommDim dim = CommDim::kTp;
  Collective kind = Collective::kAllReduce;
  int group_size = 1;
  double time_s = 0;
};

struct DimComm {
  CommDim dim = CommDim::kTp;
  GroupTopology group;     // rank 0's group along the dimension
  double sent_bytes = 0;   // Comm::sent_bytes_by_dim
  double time_s = 0;       // per-micro-batch ops, serial sum over the step
  double exposed_s = 0;    // not hidden under compute (StageTime::exposed_comm x micro-batches)
  double hidden_s = 0;
  double step_time_s = 0;  // once-per-step ops on this dimension (their overlap: CommBreakdown::step_*)
};

struct CommBreakdown {
  Estimate estimate;
  MeshTopology topology;
  int stage = 0;  // pipeline stage of every figure (Comm::stage)
  std::vector<CommItemTime> items;
  std::vector<UncountedComm> uncounted;
  std::vector<DimComm> dims;  // tp, cp, ep, pp, dp, edp, emb (per-micro-batch ops: tp cp ep pp)
  // Once-per-step collectives of the stage (gradient reduction, parameter gather, TP and
  // embedding gradient sums), all dimensions together as the step time composes them.
  double step_time_s = 0, step_exposed_s = 0, step_hidden_s = 0;
};

// Precondition: validate_scenario(s) is empty.
CommBreakdown comm_breakdown(const Scenario& s);

}  // namespace lcm::plan
