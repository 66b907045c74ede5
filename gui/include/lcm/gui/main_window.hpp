// The lcm-gui window: scenario and layout panels on the left, the views as tabs on the
// right (Estimate, Timeline, Planner, Scaling, Capacity, Validation), a File menu.
#pragma once

#include <QMainWindow>

QT_BEGIN_NAMESPACE
class QTabWidget;
QT_END_NAMESPACE

namespace lcm::gui {

class CapacityTab;
class EstimateView;
class LayoutPanel;
class PlannerTab;
class ScalingTab;
class ScenarioPanel;
class Session;
class TimelineView;
class ValidationTab;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  Session* session() const { return session_; }
  ScenarioPanel* scenario_panel() const { return scenario_; }
  LayoutPanel* layout_panel() const { return layout_; }
  EstimateView* estimate_view() const { return estimate_; }
  TimelineView* timeline_view() const { return timeline_; }
  PlannerTab* planner_tab() const { return planner_; }
  ScalingTab* scaling_tab() const { return scaling_; }
  CapacityTab* capacity_tab() const { return capacity_; }
  ValidationTab* validation_tab() const { return validation_; }
  QTabWidget* tabs() const { return tabs_; }

  // One PNG per tab in `dir` (estimate.png, timeline.png, planner.png, ...), the window at
  // its current size; the planner tab after a completed search. False with the reason.
  bool save_screenshots(const QString& dir, QString* error);

 private:
  Session* session_;
  ScenarioPanel* scenario_;
  LayoutPanel* layout_;
  QTabWidget* tabs_;
  EstimateView* estimate_;
  TimelineView* timeline_;
  PlannerTab* planner_;
  ScalingTab* scaling_;
  CapacityTab* capacity_;
  ValidationTab* validation_;
};

}  // namespace lcm::gui
