// Validation tab, two pages. "Op benchmarks": executor results (an lcm-exec --out directory)
// against the model on the session's hardware profile: a predicted-vs-measured scatter with
// the y = x line and a sortable table of the rows with their relative error. "Train run":
// `lcm compare` of an `lcm-exec train` run directory (docs/compare.md): the report's tables
// (report::compare_tables, shown as they are) and the per-class bars; nothing is recomputed.
#pragma once

#include <optional>
#include <vector>

#include <QAbstractTableModel>
#include <QWidget>

#include "lcm/gui/charts.hpp"
#include "lcm/planner/report/compare_report.hpp"
#include "lcm/planner/report/table.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QLineEdit;
class QTabWidget;
class QSortFilterProxyModel;
class QTableView;
QT_END_NAMESPACE

namespace lcm::gui {

class ChartPanel;
class Session;

class ValidationModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kOp, kKey, kFamily, kPredicted, kMeasured, kError, kNumColumns };
  explicit ValidationModel(QObject* parent = nullptr);
  void set_rows(std::vector<ValidationRow> rows);
  const std::vector<ValidationRow>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<ValidationRow> rows_;
};

// One report::Table as a model: the cells as the report writes them. Qt::UserRole is the
// sort key: the cell's number where it reads as one ("+6.7%" -> 6.7; "-" -> -inf), else
// its text.
class ReportTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit ReportTableModel(report::Table table, QObject* parent = nullptr);
  const report::Table& table() const { return table_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  report::Table table_;
};

// The "Train run" page: a run directory (path field + button) and the scenario of the
// prediction (default: the summary's scenario.path; a path typed here overrides it).
class TrainRunView : public QWidget {
  Q_OBJECT
 public:
  explicit TrainRunView(QWidget* parent = nullptr);
  // Reads DIR/summary.json, loads the scenario (report::load_compare_scenario) and compares
  // (report::compare_run). `scenario`: overrides the summary's path when not empty. False
  // (with the reason shown) on any error.
  bool load(const QString& dir, const QString& scenario = {});
  const std::optional<report::Comparison>& comparison() const { return comparison_; }
  ChartPanel* panel() const { return panel_; }
  QTabWidget* tables() const { return tables_; }  // one page per report table, a QTableView each
  QString status_text() const;

 private:
  void show_comparison();

  QLineEdit* run_path_;
  QLineEdit* scenario_path_;
  QLabel* status_;
  ChartPanel* panel_;
  QTabWidget* tables_;
  std::optional<report::Comparison> comparison_;
};

class ValidationTab : public QWidget {
  Q_OBJECT
 public:
  explicit ValidationTab(Session* session, QWidget* parent = nullptr);
  // Reads the results and compares them; false (with the reason shown) when nothing was read.
  bool load(const QString& path);
  ChartPanel* panel() const { return panel_; }
  ValidationModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QString status_text() const;
  TrainRunView* train_run() const { return train_run_; }
  // `lcm-gui --train-run DIR`: loads the run and shows its page.
  bool load_train_run(const QString& dir, const QString& scenario = {});

 private:
  void reload();

  Session* session_;
  QString path_;
  QLabel* status_;
  ChartPanel* panel_;
  ValidationModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QTabWidget* pages_;
  TrainRunView* train_run_;
};

}  // namespace lcm::gui
