// `lcm trace SCENARIO -o FILE`: Chrome Trace Event JSON of one predicted step.
#include "commands.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "lcm/model/estimate.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/trace.hpp"

namespace lcm::cli {

void register_trace(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("trace", "Write the predicted trace of one step (Chrome Trace Event JSON, opens in "
                                          "Perfetto): one process per pipeline stage, one thread per stream");
  auto so = std::make_shared<ScenarioOptions>();
  auto out = std::make_shared<std::string>();
  auto detail = std::make_shared<std::string>("op");
  auto max_mb = std::make_shared<int>(0);
  add_scenario_options(*cmd, *so);
  cmd->add_option("-o,--output", *out, "Trace file to write (atomically); '-' for stdout")
      ->required()
      ->check(output_path_validator());
  // Every command has --format; a trace has one (Chrome Trace Event JSON).
  cmd->add_option("--format", "Output format (a trace is Chrome Trace Event JSON)")
      ->check(CLI::IsMember({"json"}))
      ->default_str("json");
  cmd->add_option("--detail", *detail, "One event per op, or per layer pass")
      ->check(CLI::IsMember({"op", "layer"}))
      ->capture_default_str();
  cmd->add_option("--micro-batches", *max_mb, "Show only the first N micro-batches of the step (0: all)")
      ->check(in_range(0, 1 << 30));
  cmd->callback([so, out, detail, max_mb, &exit_code] {
    auto s = load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    const Estimate e = estimate(*s);
    // The trace has ~70 events per layer and micro-batch (op detail): bound its size.
    const int64_t shown = *max_mb > 0 ? std::min(*max_mb, std::max(1, e.mesh.num_micro_batches))
                                      : std::max(1, e.mesh.num_micro_batches);
    const int64_t layers = s->model.num_layers + s->model.mtp_num_layers;
    if (layers * shown > limits::kTraceLayerMicroBatches) {
      std::cerr << fmt::format("lcm: trace: {} layers x {} micro-batches is more than {} layer passes (lcm's cap on the "
                               "trace size, ~100 MB); show fewer with --micro-batches N (N <= {})\n",
                               layers, shown, limits::kTraceLayerMicroBatches,
                               std::max<int64_t>(1, limits::kTraceLayerMicroBatches / layers));
      exit_code = kExitBadInput;
      return;
    }
    const Schedule sched = build_schedule(*s, e.mesh, e.stage_layers, e.gpu_params);
    report::TraceOptions opts;
    opts.detail = *detail == "layer" ? report::TraceDetail::kLayer : report::TraceDetail::kOp;
    opts.max_micro_batches = *max_mb;
    const std::string text = report::predicted_trace(*s, e, sched, opts).dump() + "\n";
    exit_code = write_output(*out == "-" ? std::string() : *out, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
