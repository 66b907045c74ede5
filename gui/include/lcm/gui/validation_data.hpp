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

// Every measured point of `path`, predicted on `hw` as it stands (no fit). `path`: a results
// directory, one summary JSON, or a list of inputs (a .txt file, one input per line: what
// calib::read_measurements reads as "@LIST").
ValidationLoad load_validation_rows(const QString& path, const HardwareSpec& hw);

// The default measurements of the Validation tab and of `lcm plot validation`: the inputs
// of the committed H200 calibration, validation/measured/h200/calibration_inputs.txt, found
// in the data directories (io::find_data: $LCM_DATA_DIR, <exe>/../share/lcm, the source tree
// of an uninstalled build); "" when none has it. Both use this one list, so both count the
// same points (the whole directory also holds superseded and reference runs).
QString default_validation_input();
// `path` as read_measurements reads it: a .txt list gets the "@" of a list.
std::string measurements_spec(const QString& path);

}  // namespace lcm::gui
