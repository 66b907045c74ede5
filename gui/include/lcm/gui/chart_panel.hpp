// A chart view with "Export PNG / SVG…" buttons; the panel owns its current chart.
#pragma once

#include <functional>

#include <QSplitter>
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

// A splitter of chart panes that puts them side by side when it is at least `side_by_side`
// pixels wide, and one above the other, each at least `stacked_height` pixels high, when
// narrower, so that every chart keeps the room its legend, axis labels and title need
// (QtCharts elides what does not fit) from a 1280x800 window up. Put it in a scroll area
// (in_scroll_area) for the stacked case.
class FlowSplitter : public QSplitter {
 public:
  FlowSplitter(int side_by_side, int stacked_height, QWidget* parent = nullptr);

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  int side_by_side_;
  int stacked_height_;
};

// The Export… button's dialog: asks for a .png / .svg file name (default `stem`.png) and
// calls `write(path, &error)`; a failure is shown in a message box.
void export_dialog(QWidget* parent, const QString& stem, const std::function<bool(const QString&, QString*)>& write);

// `w` in a frameless, vertically scrolling area that gives it the viewport's width.
QWidget* in_scroll_area(QWidget* w, QWidget* parent);

}  // namespace lcm::gui
