// `lcm compare --plots DIR`: the comparison's PNG charts, rendered offscreen with QtCharts.
// Registers itself with the planner's hook (lcm/planner/cli/registry.hpp,
// register_compare_plotter); gui/CMakeLists.txt links it into `lcm` where Qt6 is found.
// Charts only draw values of report::Comparison; nothing is computed here.
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QStackedBarSeries>
#include <QValueAxis>

#include "lcm/gui/chart_export.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/planner/cli/registry.hpp"
#include "lcm/planner/report/compare_report.hpp"

namespace lcm::gui {

namespace {

constexpr QSize kSize(1200, 700);

void add_axes(QChart* chart, QAbstractSeries* series, const QStringList& categories, const QString& unit) {
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  auto* y = new QValueAxis;
  y->setTitleText(unit);
  y->setMin(0);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
}

// One stacked bar per side: the op classes, then the step time beyond the op sum
// (measured: host gaps; predicted: pipeline bubble and exposed tails, 0 when the ops overlap).
QChart* step_breakdown_chart(const report::Comparison& c) {
  auto* series = new QStackedBarSeries;
  for (int i = 0; i < report::kNumCompareClasses; ++i) {
    const report::Total& t = c.classes[static_cast<size_t>(i)];
    if (t.predicted_ops == 0 && t.measured_ops == 0) continue;
    auto* set = new QBarSet(QString::fromUtf8(report::to_string(static_cast<report::CompareClass>(i))));
    *set << t.predicted_s * 1e3 << t.measured_s * 1e3;
    series->append(set);
  }
  auto* rest = new QBarSet("step beyond the op sum (host gaps / bubble)");
  *rest << std::max(0.0, c.predicted_step_s - c.all.predicted_s) * 1e3
        << std::max(0.0, c.measured_step_s - c.all.measured_s) * 1e3;
  series->append(rest);
  auto* chart = new QChart;
  chart->setTitle(QString::fromStdString(c.scenario + ": step time, predicted vs measured (median)"));
  chart->addSeries(series);
  add_axes(chart, series, {"predicted", "measured"}, "ms per step");
  return chart;
}

bool write_compare_plots(const report::Comparison& c, const std::string& dir, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir + ": " + ec.message();
    return false;
  }
  // Offscreen unless the caller chose a platform: no display is needed.
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char arg0[] = "lcm";
  static char* argv[] = {arg0, nullptr};
  QApplication qapp(argc, argv);
  const std::pair<const char*, QChart*> charts[] = {{"per_class.png", compare_class_chart(c)},
                                                    {"step_breakdown.png", step_breakdown_chart(c)}};
  bool ok = true;
  for (const auto& [name, chart] : charts) {
    const QByteArray bytes = render_chart(chart, kSize, ImageFormat::kPng);
    QString werr;
    if (ok &&
        !write_file_atomically(QString::fromStdString((std::filesystem::path(dir) / name).string()), bytes, &werr)) {
      *error = werr.toStdString();
      ok = false;
    }
  }
  return ok;
}

[[maybe_unused]] const bool kRegistered = cli::register_compare_plotter(write_compare_plots);

}  // namespace

}  // namespace lcm::gui
