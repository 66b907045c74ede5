// `lcm diff`: two estimates side by side, term by term. Every memory term of the verdict
// stage (Memory::verdict_stage, StageMemory's fields), every step-time term (step_terms, the
// one term list) and the headline quantities, each with B - A and (B - A) / A. Nothing here
// computes a formula: both sides are model::estimate's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/estimate.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

inline constexpr int kDiffSchemaVersion = 1;

struct DiffSide {
  std::string label;  // how the command line named it: "scenarios/default.yaml --layout-a \"tp2 pp2\""
  const Scenario* scenario = nullptr;
  const Estimate* estimate = nullptr;
};

struct DiffRow {
  std::string section;  // "headline", "memory", "step"
  std::string key;  // JSON key: "step_s", "weights", "gemm"
  std::string unit;  // "s", "bytes", "tokens/s", "fraction", "bool", "count"
  double a = 0;
  double b = 0;
  double diff() const { return b - a; }
  // (b - a) / a; 0 where both are 0; NaN where only a is 0 (rendered "-" and JSON null).
  double rel() const;
};

// Headline rows first (step time, tokens/s/GPU, MFU, needs, fits), then the verdict stage's
// memory terms, then the step-time terms. Both estimates must have their step time.
std::vector<DiffRow> diff_rows(const Estimate& a, const Estimate& b);

nlohmann::ordered_json diff_json(const DiffSide& a, const DiffSide& b);
std::vector<Table> diff_tables(const DiffSide& a, const DiffSide& b);
Table diff_long_table(const DiffSide& a, const DiffSide& b);  // CSV: section,item,a,b,diff,rel,unit

}  // namespace lcm::report
