// PlannerTab.
#include "lcm/gui/planner_tab.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QThread>
#include <QVBoxLayout>

#include "lcm/gui/plan_table_model.hpp"
#include "lcm/gui/session.hpp"

namespace lcm::gui {

PlannerTab::PlannerTab(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      run_(new QPushButton("Search all layouts", this)),
      cancel_(new QPushButton("Cancel", this)),
      progress_(new QProgressBar(this)),
      status_(new QLabel(this)),
      model_(new PlanTableModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView(this)),
      why_model_(new WhyNotModel(this)),
      why_proxy_(new QSortFilterProxyModel(this)),
      why_not_(new QTableView(this)) {
  run_->setObjectName("plan_run");
  cancel_->setObjectName("plan_cancel");
  cancel_->setEnabled(false);
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setFormat("%p% of the layouts evaluated");
  status_->setObjectName("plan_status");
  status_->setWordWrap(true);
  connect(run_, &QPushButton::clicked, this, &PlannerTab::start);
  connect(cancel_, &QPushButton::clicked, this, &PlannerTab::cancel);

  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_->setObjectName("plan_table");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PlanTableModel::kRank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  // Every column as wide as its widest text (the layout strings are long): the table scrolls
  // sideways on a narrow window instead of cutting text off.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
  table_->setToolTip("Click a row to load that layout; click a header to sort");
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &PlannerTab::row_selected);

  why_proxy_->setSourceModel(why_model_);
  why_proxy_->setSortRole(Qt::UserRole);
  why_not_->setObjectName("why_not_table");
  why_not_->setModel(why_proxy_);
  why_not_->setSortingEnabled(true);
  why_not_->verticalHeader()->hide();
  why_not_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  why_not_->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);

  auto* bar = new QHBoxLayout();
  bar->addWidget(run_);
  bar->addWidget(cancel_);
  bar->addWidget(progress_, 1);
  auto* why_box = new QWidget(this);
  auto* why_lay = new QVBoxLayout(why_box);
  why_lay->setContentsMargins(0, 0, 0, 0);
  auto* why_title = new QLabel("<b>Why not</b>: rules that rejected layouts (\"only reason\": relaxing that rule alone "
                                "would admit them), and the fastest layouts that do not fit HBM",
                                why_box);
  why_title->setWordWrap(true);
  why_lay->addWidget(why_title);
  why_lay->addWidget(why_not_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(why_box);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(bar);
  lay->addWidget(status_);
  lay->addWidget(split, 1);
  status_->setText("Search every valid layout of the scenario's model and job on its GPU count.");
  // A new model, job or cluster size makes the table stale.
  connect(session_, &Session::baseChanged, this, [this] {
    if (running_) cancel();
    model_->clear();
    why_model_->clear();
  });
}

PlannerTab::~PlannerTab() {
  if (stop_) *stop_ = true;  // a closing window does not wait for a whole search
  wait_for_workers();
}

QString PlannerTab::status_text() const { return status_->text(); }

void PlannerTab::set_running(bool on) {
  running_ = on;
  run_->setEnabled(!on);
  cancel_->setEnabled(on);
}

void PlannerTab::start() {
  if (running_) return;
  const uint64_t gen = ++generation_;
  const Scenario base = session_->base();
  set_running(true);
  progress_->setValue(0);
  status_->setText(QString("Searching the layouts of %1 on %2 GPUs…")
                       .arg(QString::fromStdString(base.model.name))
                       .arg(base.num_gpus));
  QPointer<PlannerTab> self(this);
  stop_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int>* stopped = &stopped_;
  QThread* worker = QThread::create([self, gen, base, stop = stop_, stopped] {
    plan::PlanOptions o;
    o.stop = stop.get();
    o.top_k = 50;
    o.why_not = 10;
    // The memory model's band decides "fits" (fits / tight / out of memory), as in `lcm plan`.
    o.constraints.use_default_headroom();
    o.progress = [self, gen](uint64_t done, uint64_t total) {
      const int v = total > 0 ? static_cast<int>(1000.0 * static_cast<double>(done) / static_cast<double>(total)) : 0;
      QMetaObject::invokeMethod(
          self, [self, gen, v] {
            if (self && self->generation_ == gen && self->running_) self->progress_->setValue(v);
          },
          Qt::QueuedConnection);
    };
    auto r = std::make_shared<const plan::PlanResult>(plan::search(base, o));
    if (r->cancelled) {
      ++*stopped;
      return;  // cancelled: nothing to show
    }
    QMetaObject::invokeMethod(
        self, [self, gen, r, base] {
          if (self) self->finished(gen, r, base);
        },
        Qt::QueuedConnection);
  });
  workers_.push_back(worker);
  connect(worker, &QThread::finished, this, [this, worker] {
    workers_.erase(std::remove(workers_.begin(), workers_.end(), worker), workers_.end());
    worker->deleteLater();
  });
  worker->start(QThread::LowPriority);
}

void PlannerTab::cancel() {
  if (!running_) return;
  ++generation_;  // the running search's result is now stale
  if (stop_) *stop_ = true;  // and its workers stop
  set_running(false);
  progress_->setValue(0);
  status_->setText("Search cancelled.");
  emit searchFinished(false);
}

void PlannerTab::wait_for_workers() {
  for (QThread* w : std::vector<QThread*>(workers_)) w->wait();
}

void PlannerTab::finished(uint64_t generation, std::shared_ptr<const plan::PlanResult> r, Scenario base) {
  if (generation != generation_ || !running_) return;  // cancelled or superseded
  set_running(false);
  progress_->setValue(1000);
  show_result(r, base);
  const plan::PlanCounts& c = r->counts;
  status_->setText(QString("%1 layouts enumerated, %2 valid, %3 fit HBM less the %7% headroom (the memory model's "
                           "spread); %4 ranked groups shown (%8 within the error band of #1: their order is within the "
                           "model's error); %5 s on %6 threads. Click a row to load its layout.")
                       .arg(c.enumerated)
                       .arg(c.valid)
                       .arg(c.fit)
                       .arg(r->ranked.size())
                       .arg(r->seconds, 0, 'f', 2)
                       .arg(r->threads)
                       .arg(100.0 * r->constraints.headroom, 0, 'f', 2)
                       .arg(r->ties));
  emit searchFinished(true);
}

void PlannerTab::show_result(std::shared_ptr<const plan::PlanResult> r, const Scenario& base) {
  model_->set_result(r, base);
  why_model_->set_result(r, base);
  table_->resizeColumnsToContents();
  why_not_->resizeColumnsToContents();
}

void PlannerTab::row_selected() {
  const QModelIndexList rows = table_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return;
  const plan::Ranked* r = model_->ranked(proxy_->mapToSource(rows.front()).row());
  if (r) session_->set_layout(r->layout);
}

}  // namespace lcm::gui
