// `lcm diff A B` / `lcm diff A --layout-a "..." --layout-b "..."`: two estimates side by side,
// every memory term of the verdict stage and every step-time term with B - A and the relative
// difference (lcm/planner/report/diff_report.hpp). Both sides are lcm::estimate's.
#include "commands.hpp"

#include <iostream>

#include <fmt/format.h>

#include "lcm/model/estimate.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/diff_report.hpp"

namespace lcm::cli {

namespace {

struct DiffArgs {
  std::string a, b;
  std::string layout_a, layout_b;
  std::vector<std::string> sets;
  int gpus = 0;
  std::string hw;
  OutputOptions out;
};

std::string side_label(const std::string& path, const std::string& flag, const std::string& layout) {
  return layout.empty() ? path : fmt::format("{} {} \"{}\"", path, flag, layout);
}

int run_diff(const DiffArgs& d) {
  const bool layouts = !d.layout_a.empty() || !d.layout_b.empty();
  if (!d.b.empty() && layouts) {
    std::cerr << "lcm: diff: give two scenarios A B, or one scenario with --layout-a / --layout-b, not both\n";
    return kExitBadInput;
  }
  if (d.b.empty() && !layouts) {
    std::cerr << "lcm: diff: B is missing: give a second scenario, or --layout-a / --layout-b for the first\n";
    return kExitBadInput;
  }
  auto side = [&](const std::string& path, const std::string& layout) {
    ScenarioOptions so;
    so.path = path;
    so.sets = d.sets;
    so.gpus = d.gpus;
    so.hw = d.hw;
    so.layout = layout;
    return load_or_report(so);
  };
  const std::string path_b = d.b.empty() ? d.a : d.b;
  auto sa = side(d.a, d.layout_a);
  if (!sa) return kExitBadInput;
  auto sb = side(path_b, d.layout_b);
  if (!sb) return kExitBadInput;
  const Estimate ea = estimate(*sa), eb = estimate(*sb);
  const report::DiffSide a{side_label(d.a, "--layout-a", d.layout_a), &*sa, &ea};
  const report::DiffSide b{side_label(path_b, "--layout-b", d.layout_b), &*sb, &eb};
  const report::Format f = parse_format(d.out.format);
  std::string text;
  if (f == report::Format::kJson) text = report::diff_json(a, b).dump(2) + "\n";
  else if (f == report::Format::kCsv) text = report::render_csv(report::diff_long_table(a, b));
  else text = report::render(report::diff_tables(a, b), f);
  return write_output(d.out.output, text) ? kExitOk : kExitFailure;
}

}  // namespace

void register_diff(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("diff",
                                 "Two scenarios, or two layouts of one, side by side: every memory and step-time term "
                                 "with B - A and the relative difference");
  auto d = std::make_shared<DiffArgs>();
  cmd->add_option("A", d->a, "Scenario YAML or bundled scenario name")->required();
  cmd->add_option("B", d->b, "Second scenario (or give --layout-a / --layout-b for A)");
  cmd->add_option("--layout-a", d->layout_a,
                  "Layout of side A in the planner's notation (\"tp2 cp4(p2p) pp2 ...\"; knobs not named keep A's)");
  cmd->add_option("--layout-b", d->layout_b, "Layout of side B, of the same scenario A");
  cmd->add_option("--set", d->sets, "Override a key on both sides: --set seq_length=64K (repeatable)");
  cmd->add_option("--gpus", d->gpus, "GPU count on both sides")->check(in_range(int64_t{1}, limits::kNumGpus));
  cmd->add_option("--hw", d->hw, "Hardware profile name or path on both sides");
  add_output_options(*cmd, d->out, {"table", "md", "json", "csv"});
  cmd->callback([d, &exit_code] { exit_code = run_diff(*d); });
}

}  // namespace lcm::cli
