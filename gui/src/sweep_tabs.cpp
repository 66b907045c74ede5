// ScalingTab, CapacityTab.
#include "lcm/gui/sweep_tabs.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/gui/plot.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/planner/report/capacity_report.hpp"

namespace lcm::gui {

ScalingTab::ScalingTab(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      flops_(new ChartPanel("scaling-flops", this)),
      memory_(new ChartPanel("scaling-memory", this)),
      note_(new QLabel(this)) {
  note_->setWordWrap(true);
  auto* split = new FlowSplitter(1300, 430);
  split->addWidget(flops_);
  split->addWidget(memory_);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(note_);
  lay->addWidget(in_scroll_area(split, this), 1);
  connect(session_, &Session::estimateChanged, this, [this] {
    dirty_ = true;
    if (isVisible()) refresh();
  });
}

void ScalingTab::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) refresh();
}

void ScalingTab::refresh() {
  dirty_ = false;
  const Scenario& s = session_->scenario();
  if (!session_->has_estimate()) {
    flops_->set_chart(nullptr, "No estimate: the layout is not valid");
    memory_->set_chart(nullptr, "No estimate: the layout is not valid");
    return;
  }
  const auto rows = scaling_table(s, scaling_seq_lengths());
  const Crossover x = attention_mlp_crossover(s.model, s.flop_convention.causal_halved);
  int invalid = 0;
  for (const ScalingRow& r : rows) invalid += r.layout_valid ? 0 : 1;
  note_->setText(QString("Sequence lengths 4K to 1M with everything else as in the scenario (scaling_table). The "
                         "dashed vertical line is the closed-form crossover where attention-core FLOPs equal MLP FLOPs "
                         "(attention_mlp_crossover).%1")
                     .arg(invalid ? QString(" %1 lengths are not valid for this layout and are left out of the memory "
                                            "chart.")
                                        .arg(invalid)
                                  : QString()));
  flops_->set_chart(scaling_flops_chart(s, rows, x));
  memory_->set_chart(scaling_memory_chart(s, rows, x));
}

CapacityTab::CapacityTab(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      routing_(new QComboBox(this)),
      zipf_(new QDoubleSpinBox(this)),
      method_(new QComboBox(this)),
      note_(new QLabel(this)),
      panel_(new ChartPanel("capacity", this)),
      table_(new QTableWidget(this)) {
  routing_->setObjectName("capacity_routing");
  routing_->addItem("balanced", static_cast<int>(RoutingKind::kBalanced));
  routing_->addItem("Zipf skew", static_cast<int>(RoutingKind::kZipf));
  routing_->addItem("measured loads", static_cast<int>(RoutingKind::kMeasured));
  zipf_->setObjectName("capacity_zipf");
  zipf_->setRange(0, 4);
  zipf_->setSingleStep(0.1);
  zipf_->setValue(1.0);
  zipf_->setPrefix("s = ");
  method_->addItem("exact", static_cast<int>(DropMethod::kExact));
  method_->addItem("Monte Carlo", static_cast<int>(DropMethod::kMonteCarlo));
  auto* open = new QPushButton("Loads file…", this);
  open->setToolTip("Per-expert loads: CSV expert,tokens / one count per line / JSON (docs/moe-routing.md)");
  connect(open, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, "Measured per-expert loads");
    if (!p.isEmpty()) load_loads(p);
  });
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel("routing", this));
  bar->addWidget(routing_);
  bar->addWidget(zipf_);
  bar->addWidget(new QLabel("method", this));
  bar->addWidget(method_);
  bar->addWidget(open);
  bar->addStretch();
  note_->setWordWrap(true);
  table_->setColumnCount(5);
  table_->setHorizontalHeaderLabels({"CF", "C", "dropped (%)", "slot fill (%)", "peak (GiB)"});
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  auto* split = new FlowSplitter(1400, 380);
  split->addWidget(panel_);
  split->addWidget(table_);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(bar);
  lay->addWidget(note_);
  lay->addWidget(in_scroll_area(split, this), 1);
  auto again = [this] {
    dirty_ = true;
    if (isVisible()) refresh();
  };
  connect(routing_, &QComboBox::currentIndexChanged, this, again);
  connect(method_, &QComboBox::currentIndexChanged, this, again);
  connect(zipf_, &QDoubleSpinBox::valueChanged, this, again);
  connect(session_, &Session::estimateChanged, this, again);
}

void CapacityTab::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) refresh();
}

void CapacityTab::set_zipf(double s) {
  zipf_->setValue(s);
  routing_->setCurrentIndex(routing_->findData(static_cast<int>(RoutingKind::kZipf)));
}

bool CapacityTab::load_loads(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    note_->setText(QString("<span style='color:#b00020'>%1: cannot read the loads file</span>").arg(path.toHtmlEscaped()));
    return false;
  }
  auto r = report::parse_expert_loads(f.readAll().toStdString(), path.toStdString());
  if (!r) {
    note_->setText("<span style='color:#b00020'>" + QString::fromStdString(r.error().str()).toHtmlEscaped() + "</span>");
    return false;
  }
  loads_ = std::move(r).value();
  loads_path_ = path;
  routing_->setCurrentIndex(routing_->findData(static_cast<int>(RoutingKind::kMeasured)));
  dirty_ = true;
  refresh();
  return true;
}

void CapacityTab::refresh() {
  dirty_ = false;
  const Scenario& s = session_->scenario();
  const auto routing = static_cast<RoutingKind>(routing_->currentData().toInt());
  zipf_->setEnabled(routing == RoutingKind::kZipf);
  table_->setRowCount(0);
  // The reason is said once, in the note above the (empty) chart.
  auto fail = [this](const QString& why) {
    note_->setText("<span style='color:#b00020'>" + why.toHtmlEscaped() + "</span>");
    panel_->set_chart(nullptr);
  };
  if (!session_->has_estimate()) return fail("No estimate: the layout is not valid");
  if (!has_moe(s.model))
    return fail(QString("Nothing to show for %1: it is a dense model (num_experts = 0). Expert capacity and dropped "
                        "tokens exist only where a router sends tokens to experts; open an MoE scenario or set "
                        "num_experts.")
                    .arg(QString::fromStdString(s.model.name)));
  if (routing == RoutingKind::kMeasured && loads_.size() != static_cast<size_t>(s.model.num_experts))
    return fail(loads_.empty() ? QString("Choose a loads file (one count per expert)")
                               : QString("%1 has loads for %2 experts, but the model has %3")
                                     .arg(loads_path_)
                                     .arg(loads_.size())
                                     .arg(s.model.num_experts));
  CapacityOptions o;
  o.capacity_factors = default_capacity_factors();
  o.routing = routing;
  o.zipf_s = zipf_->value();
  o.loads = loads_;
  o.method = static_cast<DropMethod>(method_->currentData().toInt());
  const CapacitySweep sw = capacity_sweep(s, o);
  note_->setText(QString("Expected share of token-expert assignments dropped when each expert takes at most C = "
                         "ceil(T·k/E · CF) tokens per routing group (capacity_sweep, docs/moe-routing.md). "
                         "Dropless (no capacity factor) peak memory: %1 GiB.")
                     .arg(sw.dropless_peak_bytes / (1024.0 * 1024.0 * 1024.0), 0, 'f', 1));
  panel_->set_chart(capacity_chart(s, sw));
  table_->setRowCount(static_cast<int>(sw.rows.size()));
  for (size_t i = 0; i < sw.rows.size(); ++i) {
    const CapacityRow& r = sw.rows[i];
    const QString cells[5] = {QString::number(r.cf, 'f', 3), QString::number(r.capacity),
                              r.drop_fraction == 0 ? QString("0")
                              : r.drop_fraction * 100 < 1e-4 ? QString("< 0.0001")
                                                             : QString::number(r.drop_fraction * 100, 'g', 4),
                              QString::number(r.slot_fill * 100, 'f', 1),
                              QString::number(r.peak_bytes / (1024.0 * 1024.0 * 1024.0), 'f', 1)};
    for (int c = 0; c < 5; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(static_cast<int>(i), c, item);
    }
  }
}

}  // namespace lcm::gui
