// Reports of a calibration (`lcm calibrate`): per class (points, parameters before ->
// after, residuals), per point (measured, predicted before and after, error), and the
// predicted-vs-measured table of one profile. The fit is model/calibration.hpp's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/calibration.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

std::vector<Table> calibration_tables(const Calibration& c, bool per_point);
nlohmann::ordered_json calibration_json(const Calibration& c);
// The predicted-vs-measured table of one profile (no fit), for docs and tests.
Table comparison_table(const std::vector<PointResult>& rows, const std::string& title);

}  // namespace lcm::report
