// `lcm compare PREDICTION MEASURED_DIR`: the prediction for the configuration an
// `lcm-exec train` run describes (the scenario with the run's overrides), held against the
// run's DIR/summary.json op by op, per class, per layer kind, at step level and in memory
// (docs/compare.md). --trace-out writes the predicted and the measured timeline into one
// Chrome trace; --plots DIR renders PNG charts where lcm was built with Qt6.
#include "commands.hpp"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/cli/registry.hpp"
#include "lcm/planner/report/compare_report.hpp"

namespace lcm::cli {

namespace {

// A measured trace holds every step of the run: larger than the other inputs.
constexpr size_t kMaxTraceBytes = size_t{256} << 20;

struct CompareArgs {
  std::string prediction;
  std::string measured_dir;
  std::vector<std::string> sets;
  std::string profile;
  OutputOptions out;
  std::string trace_out;
  std::string plots;
};

int run_compare(const CompareArgs& a) {
  auto m = report::read_train_summary(a.measured_dir);
  if (!m) {
    std::cerr << "lcm: " << m.error().str() << "\n";
    return kExitBadInput;
  }
  std::vector<io::Override> extra;
  for (const std::string& s : a.sets) {
    auto ov = io::parse_override(s);
    if (!ov) {
      std::cerr << "lcm: " << ov.error().str() << "\n";
      return kExitBadInput;
    }
    extra.push_back(ov.value());
  }
  if (!a.profile.empty()) extra.push_back({"hardware.profile", a.profile});
  auto s = report::load_compare_scenario(a.prediction, m.value(), extra);
  if (!s) {
    std::cerr << "lcm: " << s.error().str() << "\n";
    return kExitBadInput;
  }
  auto c = report::compare_run(s.value(), m.value());
  if (!c) {
    std::cerr << "lcm: " << c.error().str() << "\n";
    return kExitBadInput;
  }

  if (!a.trace_out.empty()) {
    const std::string file = (std::filesystem::path(a.measured_dir) / "trace.rank0.json").string();
    auto text = io::read_input_file(file, "the measured trace", kMaxTraceBytes);
    if (!text) {
      std::cerr << "lcm: " << text.error().str() << "\n";
      return kExitBadInput;
    }
    const Estimate e = estimate(s.value());
    const Schedule sched = build_schedule(s.value(), e.mesh, e.stage_layers, e.gpu_params);
    auto trace = report::compare_trace(s.value(), e, sched, text.value(), file, m.value().first_measured_step);
    if (!trace) {
      std::cerr << "lcm: " << trace.error().str() << "\n";
      return kExitBadInput;
    }
    if (!write_output(a.trace_out == "-" ? std::string() : a.trace_out, trace.value().dump() + "\n"))
      return kExitFailure;
  }
  if (!a.plots.empty()) {
    const ComparePlotter plot = compare_plotter();
    if (plot == nullptr) {
      std::cerr << "lcm: compare: --plots: lcm was built without Qt6 (install qt6-base-dev qt6-charts-dev "
                   "qt6-svg-dev and rebuild with -DLCM_BUILD_GUI=ON)\n";
      return kExitBadInput;
    }
    std::string error;
    if (!plot(c.value(), a.plots, &error)) {
      std::cerr << "lcm: compare: --plots: " << error << "\n";
      return kExitFailure;
    }
  }

  const report::Format f = parse_format(a.out.format);
  std::string text;
  if (f == report::Format::kJson) text = report::compare_json(c.value()).dump(2) + "\n";
  else if (f == report::Format::kCsv) text = report::render_csv(report::compare_long_table(c.value()));
  else text = report::render(report::compare_tables(c.value()), f);
  return write_output(a.out.output, text) ? kExitOk : kExitFailure;
}

}  // namespace

void register_compare(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("compare",
                                 "Hold the prediction against an `lcm-exec train` run: per op, per class, per layer "
                                 "kind, step time and memory (docs/compare.md)");
  auto a = std::make_shared<CompareArgs>();
  cmd->add_option("PREDICTION", a->prediction, "Scenario YAML or bundled scenario name the run was made from")
      ->required();
  cmd->add_option("MEASURED_DIR", a->measured_dir, "The run's --out directory (summary.json, trace.rank0.json)")
      ->required();
  cmd->add_option("--set", a->sets, "Override a key after the run's own overrides: --set num_layers=2 (repeatable)");
  cmd->add_option("--profile", a->profile, "Hardware profile name or path to predict with (hardware.profile)");
  add_output_options(*cmd, a->out, {"table", "md", "markdown", "json", "csv"});
  cmd->add_option("--trace-out", a->trace_out,
                  "Write one Chrome trace (Perfetto) with the predicted and the measured step (atomically; '-' "
                  "for stdout)");
  cmd->add_option("--plots", a->plots, "Write PNG charts (per class, step breakdown) into this directory (Qt6)");
  cmd->callback([a, &exit_code] { exit_code = run_compare(*a); });
}

}  // namespace lcm::cli
