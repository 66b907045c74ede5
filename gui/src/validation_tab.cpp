// ValidationModel, ReportTableModel, TrainRunView, ValidationTab.
#include "lcm/gui/validation_tab.hpp"

#include <cmath>
#include <limits>

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QFileInfo>
#include <QVBoxLayout>

#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/charts.hpp"
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

ReportTableModel::ReportTableModel(report::Table table, QObject* parent)
    : QAbstractTableModel(parent), table_(std::move(table)) {}

int ReportTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.rows.size());
}
int ReportTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.header.size());
}

QVariant ReportTableModel::data(const QModelIndex& index, int role) const {
  if (index.row() < 0 || index.row() >= rowCount() || index.column() < 0 || index.column() >= columnCount()) return {};
  const std::vector<std::string>& row = table_.rows[static_cast<size_t>(index.row())];
  const QString text =
      static_cast<size_t>(index.column()) < row.size() ? QString::fromStdString(row[static_cast<size_t>(index.column())]) : QString();
  bool number = false;
  QString digits = text;
  if (digits.endsWith('%')) digits.chop(1);
  const double value = digits.toDouble(&number);
  switch (role) {
    case Qt::DisplayRole: return text;
    case Qt::TextAlignmentRole:
      return number || text == "-" ? int(Qt::AlignRight | Qt::AlignVCenter) : int(Qt::AlignLeft | Qt::AlignVCenter);
    case Qt::UserRole:
      if (number) return value;
      if (text == "-") return -std::numeric_limits<double>::infinity();  // absent on that side: sorts last
      return text;
    default: return {};
  }
}

QVariant ReportTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= columnCount()) return {};
  return QString::fromStdString(table_.header[static_cast<size_t>(section)]);
}

namespace {

// "Step: a predicted vs b (...)" -> "Step"; "Memory (MiB; ...)" -> "Memory".
QString page_name(const std::string& title) {
  const size_t end = title.find_first_of(":(");
  QString name = QString::fromStdString(title.substr(0, end));
  return name.trimmed();
}

QString error_html(const QString& s) { return "<span style='color:#b00020'>" + s.toHtmlEscaped() + "</span>"; }

}  // namespace

TrainRunView::TrainRunView(QWidget* parent)
    : QWidget(parent),
      run_path_(new QLineEdit(this)),
      scenario_path_(new QLineEdit(this)),
      status_(new QLabel(this)),
      panel_(new ChartPanel("compare_classes", this)),
      tables_(new QTabWidget(this)) {
  run_path_->setObjectName("train_run_path");
  run_path_->setPlaceholderText("an lcm-exec train run directory (summary.json)");
  scenario_path_->setObjectName("train_run_scenario");
  scenario_path_->setPlaceholderText("the summary's scenario.path");
  scenario_path_->setToolTip("The scenario of the prediction; empty: the one summary.json names");
  auto* open = new QPushButton("Open run…", this);
  open->setToolTip("An lcm-exec train --out directory: summary.json, trace.rank0.json (docs/train-output.md)");
  connect(open, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getExistingDirectory(this, "lcm-exec train run directory", run_path_->text());
    if (!p.isEmpty()) load(p, scenario_path_->text());
  });
  auto* compare = new QPushButton("Compare", this);
  compare->setToolTip("Compare the run in the path field with the prediction of the scenario field");
  connect(compare, &QPushButton::clicked, this, [this] { load(run_path_->text(), scenario_path_->text()); });
  connect(run_path_, &QLineEdit::returnPressed, compare, &QPushButton::click);
  connect(scenario_path_, &QLineEdit::returnPressed, compare, &QPushButton::click);
  status_->setObjectName("train_run_status");
  status_->setWordWrap(true);
  status_->setText("Open an lcm-exec train run directory to hold lcm's prediction against it (lcm compare).");
  tables_->setObjectName("train_run_tables");
  tables_->setElideMode(Qt::ElideNone);
  tables_->setUsesScrollButtons(true);
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel("Run:", this));
  bar->addWidget(run_path_, 3);
  bar->addWidget(open);
  bar->addWidget(new QLabel("Scenario:", this));
  bar->addWidget(scenario_path_, 2);
  bar->addWidget(compare);
  auto* split = new FlowSplitter(1500, 300, this);
  split->addWidget(panel_);
  split->addWidget(tables_);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(bar);
  lay->addWidget(status_);
  lay->addWidget(split, 1);
}

QString TrainRunView::status_text() const { return status_->text(); }

bool TrainRunView::load(const QString& dir, const QString& scenario) {
  run_path_->setText(dir);
  scenario_path_->setText(scenario);
  comparison_.reset();
  const auto fail = [this](const QString& why) {
    status_->setText(error_html(why));
    panel_->set_chart(nullptr, why);
    show_comparison();
    return false;
  };
  if (dir.isEmpty()) return fail("No run directory given.");
  auto m = report::read_train_summary(dir.toStdString());
  if (!m) return fail(QString::fromStdString(m.error().str()));
  scenario_path_->setPlaceholderText(QString::fromStdString(m.value().scenario_path));
  const std::string path = scenario.isEmpty() ? m.value().scenario_path : scenario.toStdString();
  auto s = report::load_compare_scenario(path, m.value(), {});
  if (!s) return fail(QString::fromStdString(s.error().str()));
  auto c = report::compare_run(s.value(), m.value());
  if (!c) return fail(QString::fromStdString(c.error().str()));
  comparison_ = std::move(c.value());
  status_->setText(QString("%1: %2 predicted from %3 (%4 measured steps on %5)")
                       .arg(QDir::toNativeSeparators(dir).toHtmlEscaped(),
                            QString::fromStdString(comparison_->scenario).toHtmlEscaped(),
                            QString::fromStdString(path).toHtmlEscaped())
                       .arg(comparison_->measured_steps)
                       .arg(QString::fromStdString(comparison_->device.empty() ? "an unnamed device"
                                                                               : comparison_->device)
                                .toHtmlEscaped()));
  panel_->set_chart(compare_class_chart(*comparison_));
  show_comparison();
  return true;
}

void TrainRunView::show_comparison() {
  while (tables_->count() > 0) {
    QWidget* w = tables_->widget(0);
    tables_->removeTab(0);
    w->deleteLater();
  }
  if (!comparison_) return;
  for (report::Table& t : report::compare_tables(*comparison_)) {
    auto* page = new QWidget(tables_);
    const QString name = page_name(t.title);
    auto* title = new QLabel(QString::fromStdString(t.title), page);
    title->setWordWrap(true);
    QStringList notes;
    for (const std::string& n : t.notes) notes << QString::fromStdString(n);
    auto* model = new ReportTableModel(std::move(t), page);
    auto* proxy = new QSortFilterProxyModel(page);
    proxy->setSourceModel(model);
    proxy->setSortRole(Qt::UserRole);
    auto* view = new QTableView(page);
    view->setObjectName("train_run_table");
    view->setModel(proxy);
    view->setSortingEnabled(name == "Per op");  // the other tables keep the report's order
    if (name == "Per op") view->sortByColumn(-1, Qt::AscendingOrder);  // the report's order until a click
    view->verticalHeader()->hide();
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    auto* lay = new QVBoxLayout(page);
    lay->addWidget(title);
    lay->addWidget(view, 1);
    if (!notes.isEmpty()) {
      auto* note = new QLabel(notes.join('\n'), page);
      note->setWordWrap(true);
      lay->addWidget(note);
    }
    tables_->addTab(page, name);
  }
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
  auto* bench = new QWidget(this);
  auto* bar = new QHBoxLayout();
  bar->addWidget(open);
  bar->addWidget(status_, 1);
  auto* split = new FlowSplitter(1500, 300, bench);
  split->addWidget(panel_);
  split->addWidget(table_);
  auto* bench_lay = new QVBoxLayout(bench);
  bench_lay->setContentsMargins(0, 0, 0, 0);
  bench_lay->addLayout(bar);
  bench_lay->addWidget(split, 1);
  pages_ = new QTabWidget(this);
  pages_->setObjectName("validation_pages");
  pages_->addTab(bench, "Op benchmarks");
  train_run_ = new TrainRunView(this);
  pages_->addTab(train_run_, "Train run");
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(pages_, 1);
  // The prediction depends on the hardware profile.
  connect(session_, &Session::baseChanged, this, [this] {
    if (!path_.isEmpty()) reload();
  });
  status_->setText("Open an lcm-exec results directory to compare its measured op times with the model.");
}

QString ValidationTab::status_text() const { return status_->text(); }

bool ValidationTab::load_train_run(const QString& dir, const QString& scenario) {
  pages_->setCurrentWidget(train_run_);
  return train_run_->load(dir, scenario);
}

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
  // Against a profile calibrated on these points the share is IN-SAMPLE (lcm calibrate
  // reports the held-out one); say so rather than let it read as a validation figure.
  status_->setText(QString("%1: %2 points from %3 files on profile %4 (%5 skipped); %6 within ±10% (in-sample when "
                           "the profile was calibrated on these points: `lcm calibrate` reports the held-out share).")
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
