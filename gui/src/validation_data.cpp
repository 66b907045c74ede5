// lcm-exec results -> calib::read_measurements -> lcm::compare -> rows.
#include "lcm/gui/validation_data.hpp"

#include <QFileInfo>

#include "lcm/model/calibration.hpp"
#include "lcm/model/io/data_dir.hpp"
#include "lcm/planner/calibrate/measurements.hpp"

namespace lcm::gui {

ValidationLoad load_validation_rows(const QString& path, const HardwareSpec& hw) {
  ValidationLoad out;
  calib::Measurements m;
  auto r = calib::read_measurements(measurements_spec(path), hw.interconnect.gpus_per_node, m);
  if (!r) {
    out.error = QString::fromStdString(r.error().str());
    return out;
  }
  out.files = static_cast<int>(m.files.size());
  out.skipped = static_cast<int>(m.skipped.size());
  if (m.points.empty()) {
    out.error = QString("%1: no measured points (lcm-exec results expected)").arg(path);
    return out;
  }
  const std::vector<PointResult> cmp = compare(m.points, hw);
  out.rows.reserve(cmp.size());
  for (const PointResult& p : cmp) {
    out.rows.push_back(ValidationRow{to_string(p.cls), p.point->name, p.point->key, p.point->source,
                                     p.predicted_before_s, p.point->measured_s, p.error_after()});
  }
  out.within_10 = count_within(cmp, 0.10);
  return out;
}

QString default_validation_input() {
  const auto list = io::find_data("validation/measured/h200/calibration_inputs.txt");
  return list ? QFileInfo(QString::fromStdString(list->string())).absoluteFilePath() : QString();
}

std::string measurements_spec(const QString& path) {
  return (path.endsWith(".txt", Qt::CaseInsensitive) ? "@" : "") + path.toStdString();
}

}  // namespace lcm::gui
