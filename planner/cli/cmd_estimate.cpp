// `lcm estimate SCENARIO`: every breakdown of one layout.
#include "commands.hpp"

#include "lcm/model/estimate.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/estimate_report.hpp"

namespace lcm::cli {

void register_estimate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("estimate", "Predict parameters, FLOPs, memory per stage and communication");
  auto so = std::make_shared<ScenarioOptions>();
  auto oo = std::make_shared<OutputOptions>();
  add_scenario_options(*cmd, *so);
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, &exit_code] {
    auto s = load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    const Estimate e = estimate(*s);
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) {
      text = report::estimate_json(*s, e).dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render_csv(report::estimate_long_table(*s, e));
    } else {
      text = report::render(report::estimate_tables(*s, e), f);
    }
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
