// Reports of the layout planner (`lcm plan`, `lcm sweep`): the decision table, the
// why-not table, near-ties, the winner's Megatron flags; as terminal / Markdown tables,
// one-row-per-layout CSV and JSON (schema in docs/planner.md). They only render
// plan::PlanResult; nothing here evaluates a layout.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/planner/report/table.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::report {

inline constexpr int kPlanSchemaVersion = 1;

// `base` is the planned scenario (its num_gpus is the plan's).
nlohmann::ordered_json plan_json(const Scenario& base, const plan::PlanResult& r);
std::vector<Table> plan_tables(const Scenario& base, const plan::PlanResult& r);
Table plan_csv_table(const Scenario& base, const plan::PlanResult& r);  // one row per ranked layout

// Megatron-LM flags of a layout, one command-line string.
std::string megatron_command(const Scenario& s);

// One-line explanations when the plan has no answer ("" when it has one): no layout
// passes Megatron's rules (names the tightest rule), or none fits HBM (says by how much
// the closest misses).
std::string plan_failure(const Scenario& base, const plan::PlanResult& r);

// Where a given layout (the scenario's own, or --layout) ranks among the plan's: "the
// scenario's layout, tp8 ... : #3" / "would rank #12 (...% slower than #1)" / "is not valid
// on 64 GPUs: ..." / "does not fit: needs ... GiB of ...". `ref` is the base scenario with
// that layout; `label` names it ("the scenario's layout").
std::string reference_rank(const Scenario& base, const plan::PlanResult& r, const Scenario& ref,
                           const std::string& label);

// `lcm sweep`: one plan per point of the --vary grid.
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> values;  // KEY, VALUE as given
  Scenario scenario;  // its global_batch_size and seq_length are the point's
  plan::PlanResult result;
  std::string infeasible;  // why the point was not planned ("" when it was); then result is empty
};
// What `lcm sweep --tokens-per-step` keeps when seq_length varies: kConstant the tokens per
// step (global_batch_size x seq_length) of the scenario's own point, so global_batch_size
// scales inversely with seq_length; kScale global_batch_size, so tokens per step grow with it.
enum class TokensPerStep { kConstant, kScale };
const char* to_string(TokensPerStep t);
nlohmann::ordered_json sweep_json(const std::vector<SweepPoint>& points, TokensPerStep mode);
std::vector<Table> sweep_tables(const std::vector<SweepPoint>& points, TokensPerStep mode);
Table sweep_csv_table(const std::vector<SweepPoint>& points, TokensPerStep mode);

}  // namespace lcm::report
