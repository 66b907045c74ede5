// Reports of a calibration (`lcm calibrate`): per class (points, parameters before ->
// after, residuals), per point (measured, predicted before and after, error), and the
// predicted-vs-measured table of one profile; with cross-validation, the in-sample and
// held-out errors per class side by side and the guard's warning. The fit is
// model/calibration.hpp's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/calibration.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

// The guard of a cross-validated fit (docs/calibration.md): when the held-out share of
// points within 10% is more than `max_drop_pp` percentage points below the in-sample
// share, one line "WARNING: ..." naming both shares and the classes that lose the most
// points under cross-validation; "" otherwise, and when c.cv was not run.
inline constexpr double kDefaultCvMaxDropPp = 10.0;
std::string cv_warning(const Calibration& c, double max_drop_pp);

// Tables: fit per class (in-sample residuals), cross-validation (when run; the warning
// among its notes), parameters, and with `per_point` every point.
std::vector<Table> calibration_tables(const Calibration& c, bool per_point,
                                      double cv_max_drop_pp = kDefaultCvMaxDropPp);
nlohmann::ordered_json calibration_json(const Calibration& c, double cv_max_drop_pp = kDefaultCvMaxDropPp);
// The predicted-vs-measured table of one profile (no fit), for docs and tests.
Table comparison_table(const std::vector<PointResult>& rows, const std::string& title);
// The same rows summed up by family, in order of first appearance: an MoE layer's router
// GEMMs (ops named L.moe.router.*) and its grouped expert GEMMs (L.moe.experts.*, GEMMs)
// apart, every other point by its class. Per family: points, how many within 10%, the
// smallest and largest error, mean |error| and mean signed error (error = predicted /
// measured - 1). The held-out sets' READMEs quote it.
Table comparison_family_table(const std::vector<PointResult>& rows);

}  // namespace lcm::report
