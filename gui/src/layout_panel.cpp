// LayoutPanel.
#include "lcm/gui/layout_panel.hpp"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "lcm/gui/session.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::gui {

namespace {

QString str(std::string_view v) { return QString::fromUtf8(v.data(), static_cast<int>(v.size())); }

// The VPP entry of a scenario's own pipeline_model_parallel_layout (it sets the virtual
// stages and the layer placement; any other entry, or a PP change, drops it).
constexpr int kCustomLayout = -1;

int get(const plan::Layout& l, LayoutPanel::Knob k) {
  switch (k) {
    case LayoutPanel::kTp: return l.tp;
    case LayoutPanel::kCp: return l.cp;
    case LayoutPanel::kPp: return l.pp;
    case LayoutPanel::kVl: return l.custom_pipeline ? kCustomLayout : l.vl;
    case LayoutPanel::kEp: return l.ep;
    case LayoutPanel::kEtp: return l.etp;
    case LayoutPanel::kMbs: return l.mbs;
    case LayoutPanel::kOrder: return l.pp_before_dp ? 1 : 0;
    case LayoutPanel::kRecompute: return static_cast<int>(l.recompute);
    case LayoutPanel::kSharding: return static_cast<int>(l.sharding);
    case LayoutPanel::kCpComm: return static_cast<int>(l.cp_comm);
    case LayoutPanel::kDispatcher: return static_cast<int>(l.dispatcher);
    case LayoutPanel::kNumKnobs: break;
  }
  return 0;
}

plan::Layout with(plan::Layout l, LayoutPanel::Knob k, int v) {
  switch (k) {
    case LayoutPanel::kTp: l.tp = v; break;
    case LayoutPanel::kCp:
      l.cp = v;
      if (v == 1) l.cp_comm = CpCommType::kP2P, l.cp_a2a = 0;
      break;
    case LayoutPanel::kPp:
      if (v != l.pp) l.custom_pipeline = false;
      l.pp = v;
      if (v == 1) l.vl = 0;
      l.first_stage_layers = l.last_stage_layers = 0;
      break;
    case LayoutPanel::kVl:
      l.custom_pipeline = v == kCustomLayout;
      l.vl = l.custom_pipeline ? 0 : v;
      if (l.custom_pipeline) l.first_stage_layers = l.last_stage_layers = 0;
      break;
    case LayoutPanel::kEp: l.ep = v; break;
    case LayoutPanel::kEtp: l.etp = v; break;
    case LayoutPanel::kMbs: l.mbs = v; break;
    case LayoutPanel::kOrder: l.pp_before_dp = v != 0; break;
    case LayoutPanel::kRecompute: l.recompute = static_cast<RecomputeGranularity>(v); break;
    case LayoutPanel::kSharding: l.sharding = static_cast<DpSharding>(v); break;
    case LayoutPanel::kCpComm: l.cp_comm = static_cast<CpCommType>(v); break;
    case LayoutPanel::kDispatcher: l.dispatcher = static_cast<Dispatcher>(v); break;
    case LayoutPanel::kNumKnobs: break;
  }
  return l;
}

// (value, label) candidates of a knob before validation.
std::vector<std::pair<int, QString>> candidates(LayoutPanel::Knob k, const Scenario& s, const plan::Layout& cur) {
  std::vector<std::pair<int, QString>> out;
  auto ints = [&](const std::vector<int>& v) {
    for (int x : v) out.emplace_back(x, QString::number(x));
  };
  switch (k) {
    case LayoutPanel::kTp:
    case LayoutPanel::kCp:
    case LayoutPanel::kPp:
    case LayoutPanel::kEp:
    case LayoutPanel::kEtp: ints(plan::divisors(std::max(1, s.num_gpus))); break;
    case LayoutPanel::kVl: {
      if (!s.parallel.pipeline_layout.empty())
        out.emplace_back(kCustomLayout, QString("the scenario's layout (%1 stages)").arg(s.parallel.pipeline_layout.size()));
      out.emplace_back(0, "off");
      const int per_stage = s.model.num_layers / std::max(1, cur.pp);
      for (int d : plan::divisors(std::max(1, per_stage)))
        if (d < per_stage) out.emplace_back(d, QString("%1 layers per virtual stage").arg(d));
      break;
    }
    case LayoutPanel::kMbs: ints({1, 2, 4, 8, 16}); break;
    case LayoutPanel::kOrder:
      out.emplace_back(0, "tp-cp-ep-dp-pp (Megatron default)");
      out.emplace_back(1, "tp-cp-ep-pp-dp (--use-tp-pp-dp-mapping)");
      break;
    case LayoutPanel::kRecompute:
      for (auto v : {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull})
        out.emplace_back(static_cast<int>(v), str(to_string(v)));
      break;
    case LayoutPanel::kSharding:
      for (auto v : {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads, DpSharding::kOptimGradsParams})
        out.emplace_back(static_cast<int>(v), str(to_string(v)));
      break;
    case LayoutPanel::kCpComm:
      for (auto v : {CpCommType::kP2P, CpCommType::kAllGather, CpCommType::kA2A})
        out.emplace_back(static_cast<int>(v), str(to_string(v)));
      break;
    case LayoutPanel::kDispatcher:
      for (auto v : {Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kFlex})
        out.emplace_back(static_cast<int>(v), str(to_string(v)));
      break;
    case LayoutPanel::kNumKnobs: break;
  }
  return out;
}

}  // namespace

LayoutPanel::LayoutPanel(Session* session, QWidget* parent) : QWidget(parent), session_(session), derived_(new QLabel(this)) {
  static const char* const kNames[kNumKnobs] = {
      "tensor_model_parallel_size", "context_parallel_size",       "pipeline_model_parallel_size",
      "virtual pipeline",           "expert_model_parallel_size",  "expert_tensor_parallel_size",
      "micro_batch_size",           "rank order",                  "recompute_granularity",
      "data_parallel_sharding",     "cp_comm_type",                "moe_token_dispatcher_type"};
  static const char* const kLabels[kNumKnobs] = {"TP", "CP", "PP", "VPP", "EP", "ETP", "micro-batch", "rank order",
                                                 "recompute", "DP sharding / ZeRO", "CP comm", "dispatcher"};
  auto* box = new QGroupBox("Layout (only valid values are selectable)", this);
  auto* form = new QFormLayout();
  for (int k = 0; k < kNumKnobs; ++k) {
    auto* c = new QComboBox(box);
    c->setObjectName(kNames[k]);
    c->setToolTip(kNames[k]);
    combos_.push_back(c);
    form->addRow(kLabels[k], c);
    connect(c, &QComboBox::currentIndexChanged, this, [this, k] { changed(static_cast<Knob>(k)); });
  }
  derived_->setObjectName("derived");
  derived_->setWordWrap(true);
  derived_->setStyleSheet("color: #444;");
  auto* inner = new QVBoxLayout(box);
  inner->addLayout(form);
  inner->addWidget(derived_);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(box);
  connect(session_, &Session::layoutChanged, this, &LayoutPanel::refresh);
  refresh();
}

bool LayoutPanel::choose(Knob k, int value) {
  QComboBox* c = combo(k);
  const int i = c->findData(value);
  if (i < 0) return false;
  auto* model = qobject_cast<QStandardItemModel*>(c->model());
  if (model && !model->item(i)->isEnabled()) return false;
  c->setCurrentIndex(i);
  return true;
}

void LayoutPanel::refresh() {
  updating_ = true;
  const Scenario& base = session_->base();
  const plan::Layout& cur = session_->layout();
  const bool moe = has_moe(base.model);
  for (int k = 0; k < kNumKnobs; ++k) {
    const Knob knob = static_cast<Knob>(k);
    QComboBox* c = combos_[static_cast<size_t>(k)];
    auto* model = qobject_cast<QStandardItemModel*>(c->model());
    const auto cands = candidates(knob, base, cur);
    const int value_now = get(cur, knob);
    // Rebuild the items only when the candidate values change (a new GPU count, model or
    // PP); otherwise only their enabled state and tooltips (cheaper: one frame matters).
    bool same = c->count() == static_cast<int>(cands.size());
    for (int i = 0; same && i < c->count(); ++i) same = c->itemData(i).toInt() == cands[static_cast<size_t>(i)].first;
    if (!same) {
      c->clear();
      for (const auto& [value, label] : cands) c->addItem(label, value);
    }
    int current = -1;
    for (int i = 0; i < static_cast<int>(cands.size()); ++i) {
      const int value = cands[static_cast<size_t>(i)].first;
      const bool is_current = value == value_now;
      if (is_current) current = i;
      const auto problems = is_current ? std::vector<Problem>{} : session_->problems_for(with(cur, knob, value));
      QStandardItem* item = model->item(i);
      const bool enabled = problems.empty();
      if (item->isEnabled() != enabled) item->setEnabled(enabled);
      const QString tip = enabled ? QString() : QString::fromStdString(problems.front().key + ": " + problems.front().message);
      if (item->toolTip() != tip) item->setToolTip(tip);
    }
    if (current < 0) {  // a value outside the candidates (e.g. an imported layout)
      c->addItem(QString::number(value_now), value_now);
      current = c->count() - 1;
    }
    if (c->currentIndex() != current) c->setCurrentIndex(current);
    const bool applies = (knob != kEp && knob != kEtp && knob != kDispatcher) || moe;
    c->setEnabled(applies && c->count() > 1);
  }
  if (session_->has_estimate()) {
    const Mesh& m = session_->estimate().mesh;
    derived_->setText(QString("derived: dp = %1, edp = %2, vp = %3, %4 micro-batches per step%5")
                          .arg(m.dp)
                          .arg(m.edp)
                          .arg(m.vp)
                          .arg(m.num_micro_batches)
                          .arg(m.sp ? ", sequence parallel" : ""));
  } else {
    derived_->setText("derived: (invalid layout)");
  }
  updating_ = false;
}

void LayoutPanel::changed(Knob k) {
  if (updating_) return;
  QComboBox* c = combo(k);
  if (c->currentIndex() < 0) return;
  session_->set_layout(with(session_->layout(), k, c->currentData().toInt()));
}

}  // namespace lcm::gui
