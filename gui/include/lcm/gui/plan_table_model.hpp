// Table models over a plan::PlanResult: the ranked layouts, and the "why not" list
// (rejected rules and the fastest layouts that do not fit). Display values are the
// planner's Metrics in display units; sorting uses the raw numbers (Qt::UserRole).
#pragma once

#include <memory>

#include <QAbstractTableModel>

#include "lcm/planner/search/plan.hpp"

namespace lcm::gui {

class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kRank, kLayout, kStep, kTokens, kMfu, kPeak, kBubble, kExposedComm, kNumColumns };
  explicit PlanTableModel(QObject* parent = nullptr);
  void set_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base);
  void clear();
  const plan::Ranked* ranked(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::shared_ptr<const plan::PlanResult> result_;
  std::vector<QString> layout_text_;
};

class WhyNotModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kWhat, kCount, kSole, kDetail, kNumColumns };
  explicit WhyNotModel(QObject* parent = nullptr);
  void set_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  struct Row {
    QString what;
    qulonglong count = 0, sole = 0;
    QString detail;
  };
  std::vector<Row> rows_;
};

}  // namespace lcm::gui
