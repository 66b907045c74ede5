// ValidationModel, ValidationTab.
#include "lcm/gui/validation_tab.hpp"

#include <cmath>

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QFileInfo>
#include <QVBoxLayout>

#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/validation_data.hpp"

namespace lcm::gui {

ValidationModel::ValidationModel(QObject* parent) : QAbstractTableModel(parent) {}

void ValidationModel::set_rows(std::vector<ValidationRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int ValidationModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int ValidationModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kNumColumns; }

QVariant ValidationModel::data(const QModelIndex& index, int role) const {
  if (index.row() < 0 || index.row() >= static_cast<int>(rows_.size())) return {};
  const ValidationRow& r = rows_[static_cast<size_t>(index.row())];
  const double err = r.error;
  if (role == Qt::TextAlignmentRole && index.column() >= kPredicted) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole) return QString::fromStdString(r.key + " (" + r.source + ")");
  if (role == Qt::UserRole) {  // sort keys
    switch (index.column()) {
      case kPredicted: return r.predicted_s;
      case kMeasured: return r.measured_s;
      case kError: return std::abs(err);
      default: break;
    }
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  switch (index.column()) {
    case kOp: return QString::fromStdString(r.op);
    case kKey: return QString::fromStdString(r.key);
    case kFamily: return QString::fromStdString(r.family);
    case kPredicted: return QString::number(r.predicted_s * 1e6, 'f', 1);
    case kMeasured: return QString::number(r.measured_s * 1e6, 'f', 1);
    case kError: return QString("%1%2%").arg(err >= 0 ? "+" : "").arg(err * 100, 0, 'f', 1);
    default: return {};
  }
}

QVariant ValidationModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kHeaders[kNumColumns] = {"op", "point", "class", "pred. (µs)", "meas. (µs)", "error"};
  return section >= 0 && section < kNumColumns ? QVariant(QString::fromUtf8(kHeaders[section])) : QVariant();
}

ValidationTab::ValidationTab(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      status_(new QLabel(this)),
      panel_(new ChartPanel("validation", this)),
      model_(new ValidationModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView(this)) {
  auto* open = new QPushButton("Open results…", this);
  open->setToolTip("An lcm-exec --out directory (summary.json) or a directory of lcm-exec summaries");
  connect(open, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getExistingDirectory(
        this, "lcm-exec results directory", QFileInfo(path_).isFile() ? QFileInfo(path_).absolutePath() : path_);
    if (!p.isEmpty()) load(p);
  });
  status_->setObjectName("validation_status");
  status_->setWordWrap(true);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_->setObjectName("validation_table");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(ValidationModel::kError, Qt::DescendingOrder);
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setColumnHidden(ValidationModel::kKey, true);  // the point key is the row's tooltip
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);  // wide op names scroll, never cut
  auto* bar = new QHBoxLayout();
  bar->addWidget(open);
  bar->addWidget(status_, 1);
  auto* split = new FlowSplitter(1500, 300, this);
  split->addWidget(panel_);
  split->addWidget(table_);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(bar);
  lay->addWidget(split, 1);
  // The prediction depends on the hardware profile.
  connect(session_, &Session::baseChanged, this, [this] {
    if (!path_.isEmpty()) reload();
  });
  status_->setText("Open an lcm-exec results directory to compare its measured op times with the model.");
}

QString ValidationTab::status_text() const { return status_->text(); }

bool ValidationTab::load(const QString& path) {
  path_ = path;
  reload();
  return model_->rowCount() > 0;
}

void ValidationTab::reload() {
  const HardwareSpec& hw = session_->base().hardware;
  if (hw.gpu.peak_bf16_flops <= 0) {  // no scenario (hardware profile) loaded yet
    model_->set_rows({});
    status_->setText(QString("%1: open a scenario to compare against its hardware profile.").arg(path_));
    panel_->set_chart(nullptr, "No hardware profile yet");
    return;
  }
  const ValidationLoad v = load_validation_rows(path_, hw);
  if (!v.error.isEmpty()) {
    model_->set_rows({});
    status_->setText("<span style='color:#b00020'>" + v.error.toHtmlEscaped() + "</span>");
    panel_->set_chart(nullptr, v.error);
    return;
  }
  status_->setText(QString("%1: %2 points from %3 files on profile %4 (%5 skipped); %6 within ±10%.")
                       .arg(QDir::toNativeSeparators(path_).toHtmlEscaped())
                       .arg(v.rows.size())
                       .arg(v.files)
                       .arg(QString::fromStdString(hw.name))
                       .arg(v.skipped)
                       .arg(v.within_10));
  panel_->set_chart(validation_chart(v.rows, QString::fromStdString(hw.name)));
  model_->set_rows(v.rows);
}

}  // namespace lcm::gui
