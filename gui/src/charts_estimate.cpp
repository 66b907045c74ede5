// Charts of one estimate: memory per stage against HBM, the step-time terms (the predicted
// timeline of one step is timeline.cpp).
#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QHorizontalBarSeries>
#include <QLineSeries>
#include <QStackedBarSeries>

#include "chart_util.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/model/step_time.hpp"

namespace lcm::gui {

using detail::kGiB;

MemoryGroups memory_groups(const StageMemory& st) {
  MemoryGroups g;
  g.weights = st.weights + st.fp8_weight_cache + st.fsdp_gather_buffers;
  g.grads = st.grads;
  g.optimizer = st.main_params + st.optimizer_states;
  g.activations = st.activations + st.logits_and_loss + st.transient_peak;
  g.buffers = st.comm_buffers + st.workspaces + st.cuda_context + st.nccl_buffers + st.cublas_workspace +
              st.fragmentation;
  return g;
}

// The stage the model's verdict is about (Memory::verdict_stage, set with Memory::fits).
const StageMemory& verdict_stage(const Memory& m) {
  assert(m.verdict_stage >= 0 && static_cast<size_t>(m.verdict_stage) < m.stages.size());
  return m.stages[static_cast<size_t>(m.verdict_stage)];
}

std::vector<TimeTerm> step_time_terms(const StepTime& t) {
  std::vector<TimeTerm> out;
  for (const StepTerm& term : step_terms(t)) out.push_back({term.label, term.seconds});
  return out;
}

std::vector<int64_t> scaling_seq_lengths() {
  std::vector<int64_t> v;
  for (int64_t s = 4096; s <= 1024 * 1024; s *= 2) v.push_back(s);
  return v;
}

QChart* memory_chart(const Scenario& s, const Estimate& e) {
  const Memory& m = e.memory;
  const StageMemory& v = verdict_stage(m);
  QChart* c = detail::new_chart(QString("Memory per GPU: up to %1 GiB (stage %2, peak %3 GiB)")
                                    .arg(v.peak_high / kGiB, 0, 'f', 2)
                                    .arg(v.stage)
                                    .arg(v.peak / kGiB, 0, 'f', 2));
  // Short legend names (docs/gui.md lists the StageMemory terms in each group).
  const char* const names[5] = {"weights", "gradients", "optimizer", "activations", "buffers"};
  std::array<QBarSet*, 5> sets{};
  for (int i = 0; i < 5; ++i) {
    sets[static_cast<size_t>(i)] = new QBarSet(names[i]);
    sets[static_cast<size_t>(i)]->setColor(detail::palette(i));
    sets[static_cast<size_t>(i)]->setBorderColor(detail::palette(i).darker(130));
  }
  QStringList cats;
  double top = m.hbm_bytes;
  for (const StageMemory& st : m.stages) {
    const MemoryGroups g = memory_groups(st);
    *sets[0] << g.weights / kGiB;
    *sets[1] << g.grads / kGiB;
    *sets[2] << g.optimizer / kGiB;
    *sets[3] << g.activations / kGiB;
    *sets[4] << g.buffers / kGiB;
    cats << QString::number(st.stage);  // the axis title says "pipeline stage": 16 labels fit
    top = std::max(top, st.peak);
  }
  auto* bars = new QStackedBarSeries();
  for (QBarSet* b : sets) bars->append(b);
  bars->setBarWidth(m.stages.size() > 1 ? 0.6 : 0.35);
  c->addSeries(bars);

  auto* hbm = new QLineSeries();
  hbm->setName(QString("HBM %1 GiB").arg(m.hbm_bytes / kGiB, 0, 'f', 1));
  const double n = static_cast<double>(m.stages.size());
  hbm->append(-0.5, m.hbm_bytes / kGiB);
  hbm->append(n - 0.5, m.hbm_bytes / kGiB);
  QPen pen(QColor(200, 0, 0));
  pen.setWidthF(2.5);
  pen.setStyle(Qt::DashLine);
  hbm->setPen(pen);
  c->addSeries(hbm);

  auto* ax = new QBarCategoryAxis();
  ax->append(cats);
  ax->setTitleText(QString("pipeline stage (pp = %1, %2 GPUs)").arg(e.mesh.pp).arg(s.num_gpus));
  auto* ay = detail::value_axis("memory per GPU (GiB)", "%.0f");
  ay->setRange(0, top / kGiB * 1.12);
  ay->applyNiceNumbers();
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  bars->attachAxis(ax);
  bars->attachAxis(ay);
  hbm->attachAxis(ax);
  hbm->attachAxis(ay);
  return c;
}

QChart* step_time_chart(const Scenario& s, const Estimate& e) {
  (void)s;
  const StepTime& t = e.time;
  const detail::TimeUnit u = detail::time_unit(t.step_s);
  // The step time with its 80% error band (model/uncertainty.hpp); the summary above the
  // chart gives the MFU's band.
  const Range st = time_range(t.step_s, e.band);
  QChart* c = detail::new_chart(QString("Step time %1 (%2–%3), MFU %4% (stage %5)")
                                    .arg(detail::step_time_text(t.step_s))
                                    .arg(detail::step_time_text(st.low))
                                    .arg(detail::step_time_text(st.high))
                                    .arg(t.mfu * 100, 0, 'f', 1)
                                    .arg(t.bottleneck_stage));
  // Horizontal bars list their first category at the bottom: reverse to read top-down.
  std::vector<TimeTerm> terms = step_time_terms(t);
  std::reverse(terms.begin(), terms.end());
  auto* set = new QBarSet(QString("per step, bottleneck stage (%1)").arg(u.name));
  set->setColor(detail::palette(0));
  QStringList cats;
  double top = 0;
  for (const TimeTerm& term : terms) {
    *set << term.seconds * u.scale;
    cats << term.name;
    top = std::max(top, term.seconds * u.scale);
  }
  auto* series = new QHorizontalBarSeries();
  series->append(set);
  series->setBarWidth(0.7);
  series->setLabelsVisible(true);
  series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
  series->setLabelsFormat("@value");
  series->setLabelsPrecision(3);
  c->addSeries(series);
  auto* ay = new QBarCategoryAxis();
  ay->append(cats);
  auto* ax = detail::value_axis(QString("time per step (%1)").arg(u.name), "%.3g");
  ax->setRange(0, std::max(top, 1e-12) * 1.15);
  ax->applyNiceNumbers();
  c->addAxis(ay, Qt::AlignLeft);
  c->addAxis(ax, Qt::AlignBottom);
  series->attachAxis(ay);
  series->attachAxis(ax);
  c->legend()->setVisible(false);
  return c;
}

}  // namespace lcm::gui
