// Validation tab: executor results (an lcm-exec --out directory) against the model on the
// session's hardware profile: a predicted-vs-measured scatter with the y = x line and a
// sortable table of the rows with their relative error.
#pragma once

#include <vector>

#include <QAbstractTableModel>
#include <QWidget>

#include "lcm/gui/charts.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
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

 private:
  void reload();

  Session* session_;
  QString path_;
  QLabel* status_;
  ChartPanel* panel_;
  ValidationModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
};

}  // namespace lcm::gui
