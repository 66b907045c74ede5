// `lcm plan SCENARIO [--gpus N] [--top K]`: every valid Megatron layout of the scenario's
// model and job on N GPUs, ranked by step time, with why-not and near-tie explanations
// and the winner's Megatron flags.
#include <iostream>

#include "commands.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/plan_report.hpp"
#include "plan_common.hpp"

namespace lcm::cli {

void register_plan(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("plan", "Search every valid layout for N GPUs and rank the ones that fit by step time");
  auto so = std::make_shared<ScenarioOptions>();
  auto oo = std::make_shared<OutputOptions>();
  auto pa = std::make_shared<PlanArgs>();
  add_scenario_options(*cmd, *so);
  cmd->get_option("--gpus")->description("GPUs to plan for (default: the scenario's num_gpus)");
  add_plan_options(*cmd, *pa, true);
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, pa, &exit_code] {
    auto s = load_for_planning(*so, {}, so->gpus);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    note_searched_keys(*so);
    const plan::PlanResult r = run_search(*s, *pa, "planning");
    if (r.ranked.empty()) {
      std::cerr << "lcm: " << so->path << ": " << report::plan_failure(*s, r) << "\n";
      exit_code = kExitBadInput;
      return;
    }
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) {
      text = report::plan_json(*s, r).dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render_csv(report::plan_csv_table(*s, r));
    } else {
      text = report::render(report::plan_tables(*s, r), f);
    }
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
