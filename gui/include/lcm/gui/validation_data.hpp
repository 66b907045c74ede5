// Predicted-vs-measured rows from executor results (lcm-exec --out directories,
// docs/executor.md "Outputs"). Reading the results as the model's ops is the planner's
// (calib::read_measurements, planner/calibrate), the prediction the model's
// (lcm::compare, model/calibration.hpp: the timing functions the step time uses); this
// only turns their PointResults into rows.
#pragma once

#include <string>
#include <vector>

#include <QString>

#include "lcm/gui/charts.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::gui {

struct ValidationLoad {
  std::vector<ValidationRow> rows;
  int files = 0;    // result files read
  int skipped = 0;  // points the reader could not use (failed checks, no op shape)
  int within_10 = 0;  // rows predicted within 10% (lcm::count_within)
  QString error;    // non-empty: nothing could be read
};

// Every measured point under `path` (a results directory or one summary JSON), predicted
// on `hw` as it stands (no fit).
ValidationLoad load_validation_rows(const QString& path, const HardwareSpec& hw);

}  // namespace lcm::gui
