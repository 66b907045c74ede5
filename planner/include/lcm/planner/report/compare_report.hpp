// `lcm compare PREDICTION MEASURED_DIR`: lcm's prediction held against one `lcm-exec train`
// run (docs/train-output.md, format 1; docs/compare.md). The measured side is read from
// DIR/summary.json (and DIR/trace.rank0.json for the combined trace); the predicted side is
// the model's: the per-op times of rank 0's pipeline stage are those of the predicted trace
// (report::predicted_trace, i.e. the schedule and op_time()), the step time is step_time()'s
// and the memory terms are estimate_memory()'s. Nothing here derives a cost.
//
// Ops are aligned by (prefix, op id, pass, GEMM part, layer): measured names are read with
// lcm::parse_op_name. An op on one side only is listed as such, never dropped.
// Errors are predicted / measured - 1 (as `lcm calibrate`): +10% means the model is slow.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/config_error.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/mem_category.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

// ---------------------------------------------------------------------------------
// The measured side: DIR/summary.json.
// ---------------------------------------------------------------------------------
inline constexpr const char* kTrainSummaryFormat = "lcm-exec-train/1";

// The allocator's categories at the allocated peak (memory.at_peak_by_category): lcm::MemCategory
// (lcm/model/mem_category.hpp), the list lcm-exec train files its bytes under.

struct TrainOp {
  std::string name;  // as measured, e.g. "L.attn.qkv.fwd"
  OpName parsed;  // parse_op_name(name)
  int layer = -1;  // global layer index (MTP depth for "MTP." ops), -1 outside layers
  int64_t count = 0;
  double total_s = 0;  // over the measured steps
};

// lcm-exec train's own host costs, measured at its start (summary.json "host").
struct RunHostCosts {
  double gemm_enqueue_s = 0, kernel_enqueue_s = 0, sync_s = 0;
};

struct TrainSummary {
  std::string file;  // the summary.json read (for messages)
  std::string scenario_name, scenario_path;
  std::vector<io::Override> overrides;
  std::string device;  // "" when absent
  int first_measured_step = 0;  // the first step with warmup false
  int measured_steps = 0;
  double step_median_s = 0, step_min_s = 0, step_max_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  std::vector<TrainOp> ops;
  double peak_allocated = 0, peak_reserved = 0;  // bytes
  std::array<double, kNumMemCategories> at_peak{};
  double context = 0, library_workspace = 0;
  // nullopt: the summary has no "host" block (runs before session 11) or its figures are -1
  // (not measured); the prediction then keeps the profile's `host:` costs.
  std::optional<RunHostCosts> host;
};

// Parses and validates summary.json text; missing or ill-typed keys, an unknown format, an
// op name that does not parse and a repeated (name, layer) are errors naming `file` and
// the key ("ops[3].name").
io::Result<TrainSummary> parse_train_summary(const std::string& json_text, const std::string& file);
// DIR/summary.json, read with io::read_input_file.
io::Result<TrainSummary> read_train_summary(const std::string& dir);
// The overrides of the summary followed by `extra`, for io::LoadOptions.
std::vector<io::Override> prediction_overrides(const TrainSummary& m, const std::vector<io::Override>& extra);

// ---------------------------------------------------------------------------------
// The comparison.
// ---------------------------------------------------------------------------------
// Op classes of the comparison, from Op::kind; kNotPredicted: a measured op whose id the
// prediction's schedule does not hold (its kind is unknown to the prediction).
enum class CompareClass : uint8_t { kGemm, kAttention, kMemoryBound, kCommunication, kNotPredicted };
inline constexpr int kNumCompareClasses = 5;
const char* to_string(CompareClass c);  // "GEMM", "attention", "memory-bound", "communication", "not predicted"

enum class LayerKind : uint8_t { kDense, kMoe, kMtp, kOutside };
inline constexpr int kNumLayerKinds = 4;
const char* to_string(LayerKind k);  // "dense layers", "MoE layers", "MTP depths", "outside layers"

// One aligned op: per step, seconds.
struct OpComparison {
  std::string name;
  int layer = -1;
  CompareClass cls = CompareClass::kNotPredicted;
  LayerKind kind = LayerKind::kOutside;
  std::optional<double> predicted_s, measured_s;  // nullopt: absent on that side
};

struct Total {
  double predicted_s = 0, measured_s = 0;  // each side's ops (one-sided ops count on their side)
  int predicted_ops = 0, measured_ops = 0;
};

// A memory row: a measured category and the model terms it is compared with.
struct MemoryRow {
  std::string item;  // "weights", ..., "peak allocated", "CUDA context", ...
  std::string terms;  // the model's StageMemory terms summed, e.g. "main_params + optimizer_states"
  std::optional<double> predicted, measured;  // bytes; nullopt: that side has no such figure
};

struct Comparison {
  std::string scenario;  // the prediction's scenario name
  std::string measured;  // the summary's file
  std::string device;
  int num_micro_batches = 1;
  int measured_steps = 0;
  std::vector<OpComparison> ops;  // both sides, in the predicted trace's order, then measured-only ops
  std::array<Total, kNumCompareClasses> classes{};
  std::array<Total, kNumLayerKinds> layer_kinds{};
  Total all;
  double predicted_step_s = 0, measured_step_s = 0;  // model step time; measured median
  double measured_step_min_s = 0, measured_step_max_s = 0;
  double predicted_tokens_per_s = 0, measured_tokens_per_s = 0;
  double predicted_mfu = 0, measured_mfu = 0;
  std::vector<MemoryRow> memory;
  double measured_categories_sum = 0;  // sum of at_peak_by_category (should be peak allocated)
  bool host_from_run = false;  // the prediction's host costs: the run's own (true) or the profile's
  HostSpec host;               // those the prediction used
};

// Per-op times of one predicted step on pipeline stage `stage` (the stage of global rank 0
// is 0), summed over micro-batches, keyed like measured ops; from the predicted trace.
struct PredictedOp {
  std::string name;
  int layer = -1;
  double seconds = 0;  // per step
};
std::vector<PredictedOp> predicted_op_times(const Scenario& s, const Estimate& e, const Schedule& sched, int stage = 0);

// The scenario of the prediction: `scenario_path` loaded with the summary's overrides, then
// `extra` (--set / --profile); where the summary records the runner's own host costs, they
// replace the profile's `host:` block (which holds PyTorch eager's): kernel_launch = the GEMM
// enqueue, sync = the round trip, no per-layer Python, no launch latency beyond the sync
// (docs/compare.md, "Host costs"). Errors: the loader's (noting where the overrides came from),
// and a prediction larger than the predicted trace's cap (limits::kTraceLayerMicroBatches)
// that compare_run aligns with. `lcm compare` and lcm-gui's Validation tab both load here.
io::Result<Scenario> load_compare_scenario(const std::string& scenario_path, const TrainSummary& m,
                                           const std::vector<io::Override>& extra);

// Aligns the run with the prediction of `s` (the scenario with the summary's overrides
// applied). Errors: a measured op whose layer the scenario does not have.
io::Result<Comparison> compare_run(const Scenario& s, const TrainSummary& m);

std::vector<Table> compare_tables(const Comparison& c);
Table compare_long_table(const Comparison& c);  // one table of every row, for CSV
nlohmann::ordered_json compare_json(const Comparison& c);

// One Chrome trace of the predicted step (report::predicted_trace's processes, renamed
// "predicted" or "predicted stage R") and one measured step of rank 0 as the process
// "measured rank 0": the events of `step` in `measured_trace` (DIR/trace.rank0.json),
// shifted to start at 0. Errors name `trace_file` and the key.
io::Result<nlohmann::ordered_json> compare_trace(const Scenario& s, const Estimate& e, const Schedule& sched,
                                                 const std::string& measured_trace_text, const std::string& trace_file,
                                                 int step);

}  // namespace lcm::report
