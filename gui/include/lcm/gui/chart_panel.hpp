// A chart view with "Export PNG / SVG…" buttons; the panel owns its current chart.
#pragma once

#include <QString>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLabel;
QT_END_NAMESPACE

namespace lcm::gui {

class ChartPanel : public QWidget {
  Q_OBJECT
 public:
  // `name`: default file name stem for exports ("memory", "step-time", ...).
  explicit ChartPanel(const QString& name, QWidget* parent = nullptr);
  // Replaces the chart (the old one is deleted); null shows `message` instead.
  void set_chart(QChart* chart, const QString& message = {});
  QChart* chart() const;
  QChartView* view() const { return view_; }
  // Writes the chart as PNG or SVG (by extension); false with the reason in *error.
  bool export_to(const QString& path, QString* error);

 private:
  void export_dialog();

  QString name_;
  QChartView* view_;
  QLabel* message_;
};

}  // namespace lcm::gui
