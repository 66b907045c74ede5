// Shared by `lcm plan`, `lcm sweep`: loading the scenario to plan and running one search
// with the progress bar.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::cli {

struct PlanArgs {
  int top = 10;
  int why_not = 5;
  int threads = 0;
  bool quiet = false;
  // Search constraints, as given (parsed by parse_constraints).
  std::vector<std::string> fixes, excludes, maxes;
  std::string headroom, tie;
  plan::SearchConstraints constraints;
  double near_tie = plan::PlanOptions{}.near_tie;
};
void add_plan_options(CLI::App& cmd, PlanArgs& a, bool with_top);
// --fix, --exclude, --max, --headroom, --tie (`lcm plan`, `lcm sweep`: every point).
void add_constraint_options(CLI::App& cmd, PlanArgs& a);
// Fills a.constraints and a.near_tie from the options; on bad input prints one line
// ("lcm: --fix tp=x: ...") and returns false.
bool parse_constraints(PlanArgs& a);

// Loads the scenario with its --set overrides plus `extra`, for planning: its own layout
// is only a starting point, so a layout the overrides make invalid (say --set
// num_experts=4 under expert_model_parallel_size 8) is replaced by the trivial layout
// before giving up. `gpus` (> 0) replaces the GPU count. On error prints one line
// ("lcm: ...") and returns nullopt. `own_error` (when given) gets the load error of the
// scenario's own layout when it was replaced ("" when it was kept).
std::optional<Scenario> load_for_planning(const ScenarioOptions& so, const std::vector<io::Override>& extra,
                                          int gpus, std::string* own_error = nullptr);

// A knob the planner chooses itself (tensor_model_parallel_size, parallel.micro_batch_size...);
// key_base: the key without its section ("parallel.x" -> "x").
bool is_searched_key(const std::string& key);
std::string key_base(const std::string& key);

// Notes on stderr for --set keys of knobs the planner chooses itself.
void note_searched_keys(const ScenarioOptions& so);

// One search with a progress bar labelled `label` (unless quiet or not a terminal).
plan::PlanResult run_search(const Scenario& s, const PlanArgs& a, const std::string& label);

}  // namespace lcm::cli
