// compare_class_chart: `lcm compare`'s per-class totals as grouped bars.
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QValueAxis>

#include "lcm/gui/charts.hpp"
#include "lcm/planner/report/compare_report.hpp"

namespace lcm::gui {

QChart* compare_class_chart(const report::Comparison& c) {
  auto* pred = new QBarSet("predicted");
  auto* meas = new QBarSet("measured");
  QStringList categories;
  for (int i = 0; i < report::kNumCompareClasses; ++i) {
    const report::Total& t = c.classes[static_cast<size_t>(i)];
    if (t.predicted_ops == 0 && t.measured_ops == 0) continue;
    categories << QString::fromUtf8(report::to_string(static_cast<report::CompareClass>(i)));
    *pred << t.predicted_s * 1e3;
    *meas << t.measured_s * 1e3;
  }
  auto* series = new QBarSeries;
  series->append(pred);
  series->append(meas);
  auto* chart = new QChart;
  chart->setTitle(QString::fromStdString(c.scenario + ": predicted vs measured per op class (rank 0, per step)"));
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  auto* y = new QValueAxis;
  y->setTitleText("ms per step");
  y->setMin(0);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  return chart;
}

}  // namespace lcm::gui
