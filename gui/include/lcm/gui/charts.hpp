// The charts of lcm-gui and `lcm plot`: one function per chart, from the model's and the
// planner's value results to a QChart (the caller owns it). Nothing here computes a cost:
// every plotted number is a field of Estimate, ScalingRow, CapacitySweep or a validation
// row, converted only to display units (GiB = 2^30 bytes, ms, %, K tokens = 1024).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <QString>

#include "lcm/model/estimate.hpp"
#include "lcm/model/routing.hpp"
#include "lcm/model/scaling.hpp"
#include "lcm/model/specs.hpp"

QT_BEGIN_NAMESPACE
class QChart;
QT_END_NAMESPACE

namespace lcm::report {
struct Comparison;
}  // namespace lcm::report

namespace lcm::gui {

// Memory per GPU as named terms of one pipeline stage (StageMemory), grouped for the stacked
// bar; the groups sum to StageMemory::peak. Bytes.
struct MemoryGroups {
  double weights = 0;      // weights + fp8_weight_cache + fsdp_gather_buffers
  double grads = 0;        // grads
  double optimizer = 0;    // main_params + optimizer_states
  double activations = 0;  // activations + logits_and_loss + transient_peak
  double buffers = 0;      // comm_buffers + workspaces + cuda_context + nccl_buffers + cublas_workspace + fragmentation
};
MemoryGroups memory_groups(const StageMemory& st);

// The stage whose memory decides the verdict: Memory::fits compares every stage's
// StageMemory::peak_high (the top of its peak range) with HBM, so the one with the largest
// peak_high. Every view that states the verdict shows this stage's peak_high.
const StageMemory& verdict_stage(const Memory& m);

// The additive terms of StepTime on the bottleneck stage (they sum to StepTime::step_s):
// compute per op class, exposed communication per dimension, pipeline bubble, optimizer.
struct TimeTerm {
  QString name;
  double seconds = 0;
};
std::vector<TimeTerm> step_time_terms(const StepTime& t);

// Sequence lengths of the scaling charts: 4K, 8K, ..., 1M.
std::vector<int64_t> scaling_seq_lengths();

// One predicted-vs-measured point (validation tab, validation chart).
struct ValidationRow {
  std::string family;  // "gemm", "attention", "collectives", ...
  std::string op;      // op name ("L.attn.core.fwd", "bench.gemm.4096x4096x4096")
  std::string key;     // unique key of the measured point
  std::string source;  // results file
  double predicted_s = 0;
  double measured_s = 0;
  double error = 0;  // predicted / measured - 1 (lcm::PointResult::error_after)
};

QChart* memory_chart(const Scenario& s, const Estimate& e);
QChart* step_time_chart(const Scenario& s, const Estimate& e);
QChart* scaling_flops_chart(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x);
QChart* scaling_memory_chart(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x);
QChart* capacity_chart(const Scenario& s, const CapacitySweep& sw);
QChart* validation_chart(const std::vector<ValidationRow>& rows, const QString& subtitle);
// `lcm compare`: predicted and measured ms per step of each op class present on either
// side (report::Comparison::classes), two bar series. Used by the Validation tab's train
// run view and `lcm compare --plots`.
QChart* compare_class_chart(const report::Comparison& c);

}  // namespace lcm::gui
