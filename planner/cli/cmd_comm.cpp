// `lcm comm SCENARIO`: the communication of the scenario's layout per dimension and
// collective: bytes, time, exposed vs hidden, intra- vs inter-node.
#include "commands.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/comm_report.hpp"

namespace lcm::cli {

void register_comm(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("comm", "Communication breakdown of one layout: per dimension and collective, bytes, "
                                         "time, exposed vs hidden, intra- vs inter-node");
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
    const plan::CommBreakdown c = plan::comm_breakdown(*s);
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) text = report::comm_json(*s, c).dump(2) + "\n";
    else if (f == report::Format::kCsv) text = report::render_csv(report::comm_csv_table(*s, c));
    else text = report::render(report::comm_tables(*s, c), f);
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
