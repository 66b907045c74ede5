// Planner tab: plan::search of the session's base scenario on a worker thread, with a
// progress bar and cancel; a sortable table of the ranked layouts (selecting a row loads
// that layout into the session) and the "why not" list.
//
// Cancel: the tab is idle at once and the search's stop flag (PlanOptions::stop) is set,
// so its workers return after the mesh they are on; the partial result is discarded.
#pragma once

#include <atomic>
#include <memory>

#include <QWidget>

#include "lcm/planner/search/plan.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;
class QThread;
QT_END_NAMESPACE

namespace lcm::gui {

class PlanTableModel;
class Session;
class WhyNotModel;

class PlannerTab : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerTab(Session* session, QWidget* parent = nullptr);
  ~PlannerTab() override;

  void start();   // no-op while a search runs
  void cancel();  // the running search's result will be ignored
  bool running() const { return running_; }
  int stopped_searches() const { return stopped_.load(); }  // searches that returned cancelled
  // Shows a search result of `base` in the tables (what a finished search does).
  void show_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base);
  // Waits for every worker (also detached ones) to end; for shutdown and tests.
  void wait_for_workers();

  QTableView* table() const { return table_; }
  QTableView* why_not_table() const { return why_not_; }
  PlanTableModel* model() const { return model_; }
  QPushButton* run_button() const { return run_; }
  QPushButton* cancel_button() const { return cancel_; }
  QProgressBar* progress() const { return progress_; }
  QString status_text() const;

 signals:
  void searchFinished(bool completed);  // false: cancelled

 private:
  void finished(uint64_t generation, std::shared_ptr<const plan::PlanResult> r, Scenario base);
  void set_running(bool on);
  void row_selected();

  Session* session_;
  uint64_t generation_ = 0;
  std::shared_ptr<std::atomic<bool>> stop_;  // of the running search
  std::atomic<int> stopped_{0};
  bool running_ = false;
  std::vector<QThread*> workers_;
  QPushButton* run_;
  QPushButton* cancel_;
  QProgressBar* progress_;
  QLabel* status_;
  PlanTableModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  WhyNotModel* why_model_;
  QSortFilterProxyModel* why_proxy_;
  QTableView* why_not_;
};

}  // namespace lcm::gui
