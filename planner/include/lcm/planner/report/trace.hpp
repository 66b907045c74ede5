// The predicted trace of one training step as Chrome Trace Event JSON (opens in Perfetto
// and chrome://tracing): one process per pipeline stage (rank class), one thread per
// stream (compute, TP, CP, EP, DP, PP), every op of the schedule with its modelled time
// and the same name the executor's measured traces use (op_name(), e.g.
// "L.attn.qkv.fwd"). Times come from timing.hpp; the placement follows the pipeline
// schedule (1F1B; interleaved stages are shown as 1F1B over whole stages).
#pragma once

#include <nlohmann/json.hpp>

#include "lcm/model/estimate.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm::report {

enum class TraceDetail { kOp, kLayer };  // one event per op, or per layer pass

struct TraceOptions {
  TraceDetail detail = TraceDetail::kOp;
  int max_micro_batches = 0;  // 0: all micro-batches of the step
};

nlohmann::ordered_json predicted_trace(const Scenario& s, const Estimate& e, const Schedule& sched,
                                       const TraceOptions& opts);

}  // namespace lcm::report
