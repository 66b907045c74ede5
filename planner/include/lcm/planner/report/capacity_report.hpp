// Rendering of the capacity-factor sweep (`lcm capacity`): per capacity factor the
// capacity C, the dropped-token rate (with its Monte Carlo confidence interval), expert
// slot use, EP all-to-all bytes, routed-expert FLOPs and peak memory, as text / Markdown
// tables, CSV and JSON; and the parser of measured per-expert load files.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/routing.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

// `loads_source` names the measured-loads file in the notes (empty for the other routings).
std::vector<Table> capacity_tables(const Scenario& s, const CapacitySweep& sw,
                                   const std::string& loads_source = "");
Table capacity_csv_table(const Scenario& s, const CapacitySweep& sw);
nlohmann::ordered_json capacity_json(const Scenario& s, const CapacitySweep& sw,
                             const std::string& loads_source = "");

// Per-expert loads (token-expert assignments routed to each expert in one routing group),
// from the text of a loads file (docs/moe-routing.md, "Measured loads"):
//   CSV with a header naming an `expert` column and a `tokens` (or `load`, `loads`,
//       `count`) column, one row per expert 0..E-1 in any order, other columns ignored;
//   one count per line, line i = expert i (no header);
//   JSON: an array of counts, or an object whose "loads" member is that array (other
//       members ignored).
// Blank lines and lines starting with '#' are skipped in the text forms. Counts are
// finite, non-negative numbers and must not all be zero. Errors carry `file` and the
// 1-based line of the offending entry.
io::Result<std::vector<double>> parse_expert_loads(const std::string& text, const std::string& file);

}  // namespace lcm::report
