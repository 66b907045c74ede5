// PlanTableModel, WhyNotModel.
#include "lcm/gui/plan_table_model.hpp"

#include <numeric>

namespace lcm::gui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

PlanTableModel::PlanTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanTableModel::set_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base) {
  beginResetModel();
  result_ = std::move(r);
  layout_text_.clear();
  if (result_)
    for (const plan::Ranked& k : result_->ranked)
      layout_text_.push_back(QString::fromStdString(plan::layout_string(k.layout, base)));
  endResetModel();
}

void PlanTableModel::clear() {
  beginResetModel();
  result_.reset();
  layout_text_.clear();
  endResetModel();
}

const plan::Ranked* PlanTableModel::ranked(int row) const {
  if (!result_ || row < 0 || row >= static_cast<int>(result_->ranked.size())) return nullptr;
  return &result_->ranked[static_cast<size_t>(row)];
}

int PlanTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !result_ ? 0 : static_cast<int>(result_->ranked.size());
}
int PlanTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kNumColumns; }

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  const plan::Ranked* r = ranked(index.row());
  if (!r) return {};
  const plan::Metrics& m = r->metrics;
  const double comm = std::accumulate(m.exposed_comm.begin(), m.exposed_comm.end(), 0.0);
  double raw = 0;
  switch (index.column()) {
    case kRank: raw = index.row() + 1; break;
    case kLayout: break;
    case kStep: raw = m.step_s; break;
    case kTokens: raw = m.tokens_per_s_per_gpu; break;
    case kMfu: raw = m.mfu * 100; break;
    case kPeak: raw = m.peak_bytes / kGiB; break;
    case kBubble: raw = m.bubble; break;
    case kExposedComm: raw = comm; break;
    default: return {};
  }
  if (role == Qt::UserRole) return index.column() == kLayout ? QVariant(layout_text_[static_cast<size_t>(index.row())]) : QVariant(raw);
  if (role == Qt::TextAlignmentRole && index.column() != kLayout) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kRank: return index.row() + 1;
    case kLayout: return layout_text_[static_cast<size_t>(index.row())];
    case kStep: {  // with the error band (plan::rank_ties set it) and the tie marker
      const Range st = time_range(m.step_s, r->band);
      return QString("%1 (%2-%3)%4")
          .arg(raw, 0, 'f', 3)
          .arg(st.low, 0, 'f', 3)
          .arg(st.high, 0, 'f', 3)
          .arg(r->tie && result_->ties > 1 ? " tie" : "");
    }
    case kMfu: {
      const Range mfu = rate_range(m.mfu, r->band);
      return QString("%1 (%2-%3)").arg(raw, 0, 'f', 1).arg(mfu.low * 100, 0, 'f', 1).arg(mfu.high * 100, 0, 'f', 1);
    }
    case kBubble:
    case kExposedComm: return QString::number(raw, 'f', 3);
    case kTokens: return QString::number(raw, 'f', 0);
    case kPeak: return QString::number(raw, 'f', 1);
    default: return {};
  }
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kHeaders[kNumColumns] = {"rank",         "layout",          "step (s, 80% band)",
                                                    "tokens/s/GPU", "MFU (%, band)",   "peak (GiB)",
                                                    "bubble (s)",   "exposed comm (s)"};
  return section >= 0 && section < kNumColumns ? QVariant(kHeaders[section]) : QVariant();
}

WhyNotModel::WhyNotModel(QObject* parent) : QAbstractTableModel(parent) {}

void WhyNotModel::set_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base) {
  beginResetModel();
  rows_.clear();
  if (r) {
    for (const plan::Rejection& j : r->rejections)
      rows_.push_back({QString("rule %1").arg(QString::fromStdString(j.key)), j.count, j.sole_count,
                       QString::fromStdString(j.message + "  (e.g. " + plan::layout_string(j.example, base) + ")")});
    // Tight layouts first (the memory band straddles HBM: the model cannot say), as `lcm
    // plan`'s May-fit table lists them; they are not ranked with the layouts that fit.
    for (const plan::Ranked& k : r->tight)
      rows_.push_back({"tight (may fit)", 1, 1,
                       QString("%1: memory band %2-%3 GiB straddles %4 GiB HBM on stage %5; step %6 s")
                           .arg(QString::fromStdString(plan::layout_string(k.layout, base)))
                           .arg(k.metrics.peak_low_bytes / kGiB, 0, 'f', 2)
                           .arg(k.metrics.peak_high_bytes / kGiB, 0, 'f', 2)
                           .arg(k.metrics.hbm_bytes / kGiB, 0, 'f', 2)
                           .arg(k.metrics.miss_stage)
                           .arg(k.metrics.step_s, 0, 'f', 3)});
    for (const plan::Ranked& k : r->out_of_memory)
      rows_.push_back({"out of memory", 1, 1,
                       // The number the verdict compares (Memory::fits): the top of the peak range,
                       // peak_high = HBM + miss_bytes on the miss stage, as `lcm plan` prints it.
                       QString("%1: needs up to %2 GiB of %3 GiB HBM on stage %4 (%5 GiB over)")
                           .arg(QString::fromStdString(plan::layout_string(k.layout, base)))
                           .arg((k.metrics.hbm_bytes + k.metrics.miss_bytes) / kGiB, 0, 'f', 2)
                           .arg(k.metrics.hbm_bytes / kGiB, 0, 'f', 2)
                           .arg(k.metrics.miss_stage)
                           .arg(k.metrics.miss_bytes / kGiB, 0, 'f', 2)});
  }
  endResetModel();
}

void WhyNotModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

int WhyNotModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int WhyNotModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kNumColumns; }

QVariant WhyNotModel::data(const QModelIndex& index, int role) const {
  if (index.row() < 0 || index.row() >= static_cast<int>(rows_.size())) return {};
  const Row& r = rows_[static_cast<size_t>(index.row())];
  if (role == Qt::ToolTipRole) return r.detail;
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  switch (index.column()) {
    case kWhat: return r.what;
    case kCount: return r.count;
    case kSole: return r.sole;
    case kDetail: return r.detail;
    default: return {};
  }
}

QVariant WhyNotModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kHeaders[kNumColumns] = {"why not", "layouts", "only reason", "detail"};
  return section >= 0 && section < kNumColumns ? QVariant(kHeaders[section]) : QVariant();
}

}  // namespace lcm::gui
