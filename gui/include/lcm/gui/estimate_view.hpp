// Estimate view: headline numbers (step time, tokens/s, MFU, peak memory and the verdict), memory per GPU
// per pipeline stage against HBM, and the step-time breakdown; rebuilt on every estimate.
#pragma once

#include <QWidget>

QT_BEGIN_NAMESPACE
class QLabel;
QT_END_NAMESPACE

namespace lcm::gui {

class ChartPanel;
class Session;
class TimelineWidget;

class EstimateView : public QWidget {
  Q_OBJECT
 public:
  explicit EstimateView(Session* session, QWidget* parent = nullptr);
  QString summary_text() const;  // the headline line as plain text
  ChartPanel* memory_panel() const { return memory_; }
  ChartPanel* time_panel() const { return time_; }
  void refresh();

 private:
  Session* session_;
  QLabel* summary_;
  ChartPanel* memory_;
  ChartPanel* time_;
};

// The predicted timeline of one step (TimelineWidget in a vertical scroll area, with an
// export button); rebuilt when it is shown and the estimate changed.
class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(Session* session, QWidget* parent = nullptr);
  TimelineWidget* timeline() const { return timeline_; }
  void refresh();  // now, visible or not
  // Writes the timeline as PNG or SVG (by extension) at the view's size; false with the reason.
  bool export_to(const QString& path, QString* error);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  Session* session_;
  QLabel* message_;
  TimelineWidget* timeline_;
  bool dirty_ = true;
};

}  // namespace lcm::gui
