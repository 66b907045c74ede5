// `lcm plan SCENARIO [--gpus N] [--top K]`: every valid Megatron layout of the scenario's
// model and job on N GPUs, ranked by step time, with why-not and near-tie explanations
// and the winner's Megatron flags.
#include <iostream>

#include <fmt/format.h>

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
  add_constraint_options(*cmd, *pa);
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, pa, &exit_code] {
    if (!parse_constraints(*pa)) {
      exit_code = kExitBadInput;
      return;
    }
    std::string own_error;
    auto s = load_for_planning(*so, {}, so->gpus, &own_error);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    // The layout to place among the ranked ones: --layout, else the scenario's own.
    std::optional<Scenario> ref;
    if (!so->layout.empty()) {
      ref = apply_layout_option(*s, so->layout);
      if (!ref) {
        exit_code = kExitBadInput;
        return;
      }
    } else if (own_error.empty()) {
      ref = *s;
    }
    note_searched_keys(*so);
    const plan::PlanResult r = run_search(*s, *pa, "planning");
    if (r.ranked.empty()) {
      std::cerr << "lcm: " << so->path << ": " << report::plan_failure(*s, r) << "\n";
      exit_code = kExitBadInput;
      return;
    }
    const std::string label = so->layout.empty() ? "the scenario's layout" : "--layout";
    const std::string rank = ref ? report::reference_rank(*s, r, *ref, label)
                                 : fmt::format("{}: not valid on {} GPUs ({})", label, s->num_gpus, own_error);
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) {
      auto j = report::plan_json(*s, r);
      j["reference_layout"] = rank;
      text = j.dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render_csv(report::plan_csv_table(*s, r));
    } else {
      auto tables = report::plan_tables(*s, r);
      tables.front().notes.insert(tables.front().notes.begin(), rank);
      text = report::render(tables, f);
    }
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
