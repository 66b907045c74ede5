// Charts of one estimate: memory per stage against HBM, the step-time terms, the predicted
// timeline of one step.
#include <algorithm>
#include <array>
#include <cmath>

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QCategoryAxis>
#include <QHorizontalBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <nlohmann/json.hpp>

#include "chart_util.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/planner/report/trace.hpp"

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
  QChart* c = detail::new_chart(QString("Memory per GPU by pipeline stage (peak %1 GiB)").arg(m.peak_bytes / kGiB, 0, 'f', 1));
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
    cats << QString("stage %1").arg(st.stage);
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
  QChart* c = detail::new_chart(QString("Step time %1 %2, MFU %3% (stage %4)")
                                    .arg(t.step_s * u.scale, 0, 'g', 4)
                                    .arg(u.name)
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

TimelineData timeline_data(const Scenario& s, const Estimate& e) {
  TimelineData d;
  d.step_s = e.time.step_s;
  const Schedule sched = build_schedule(s, e.mesh, e.stage_layers, e.gpu_params);
  const nlohmann::ordered_json trace = report::predicted_trace(s, e, sched, report::TraceOptions{});
  static const char* const kStream[kNumStreams] = {"compute", "TP", "CP", "EP", "DP", "PP"};
  d.categories = {"forward", "backward", "recompute", "optimizer / step", "TP comm", "CP comm", "EP comm",
                  "DP comm", "PP comm"};
  const int stages = static_cast<int>(sched.stages.size());
  // Rows: every stage's compute stream, then its communication streams that carry events.
  std::vector<std::array<bool, kNumStreams>> used(static_cast<size_t>(stages));
  struct Ev {
    int pid, tid, cat;
    double t0, t1;
  };
  std::vector<Ev> evs;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    const int pid = ev["pid"].get<int>();
    const int tid = ev["tid"].get<int>();
    if (pid < 0 || pid >= stages || tid < 0 || tid >= kNumStreams) continue;
    int cat = 3 + tid;  // communication streams
    if (tid == 0) {
      const std::string& name = ev["name"].get_ref<const std::string&>();
      if (name.find(".recompute") != std::string::npos) cat = 2;
      else if (name.find(".bwd") != std::string::npos) cat = 1;
      else if (name.find(".fwd") != std::string::npos) cat = 0;
      else cat = 3;
    }
    const double t0 = ev["ts"].get<double>() * 1e-6;
    evs.push_back({pid, tid, cat, t0, t0 + ev["dur"].get<double>() * 1e-6});
    used[static_cast<size_t>(pid)][static_cast<size_t>(tid)] = true;
  }
  std::vector<std::array<int, kNumStreams>> row_of(static_cast<size_t>(stages));
  for (int p = 0; p < stages; ++p) {
    for (int t = 0; t < kNumStreams; ++t) {
      row_of[static_cast<size_t>(p)][static_cast<size_t>(t)] = -1;
      if (t != 0 && !used[static_cast<size_t>(p)][static_cast<size_t>(t)]) continue;
      row_of[static_cast<size_t>(p)][static_cast<size_t>(t)] = static_cast<int>(d.rows.size());
      d.rows.push_back(QString("stage %1 %2").arg(p).arg(kStream[t]));
    }
  }
  // Merge runs: events of one row and category that touch (gap below 0.1% of the step).
  const double gap = 1e-3 * std::max(d.step_s, 1e-9);
  std::vector<int> last(d.rows.size() * d.categories.size(), -1);
  for (const Ev& ev : evs) {
    const int row = row_of[static_cast<size_t>(ev.pid)][static_cast<size_t>(ev.tid)];
    const size_t slot = static_cast<size_t>(row) * d.categories.size() + static_cast<size_t>(ev.cat);
    const int li = last[slot];
    if (li >= 0) {
      TimelineBar& b = d.bars[static_cast<size_t>(li)];
      if (ev.t0 <= b.end_s + gap && ev.t0 >= b.start_s) {
        b.end_s = std::max(b.end_s, ev.t1);
        continue;
      }
    }
    last[slot] = static_cast<int>(d.bars.size());
    d.bars.push_back({row, ev.cat, ev.t0, ev.t1});
  }
  for (const TimelineBar& b : d.bars) d.step_s = std::max(d.step_s, b.end_s);
  return d;
}

QChart* timeline_chart(const TimelineData& d) {
  const detail::TimeUnit u = detail::time_unit(d.step_s);
  QChart* c = detail::new_chart(QString("Predicted timeline of one step (%1 %2, 1F1B)")
                                    .arg(d.step_s * u.scale, 0, 'g', 4)
                                    .arg(u.name));
  const double half = 0.38;
  const size_t ncat = d.categories.size();
  // One area series per (row, category): its upper edge rises to row + half inside a bar.
  std::vector<std::vector<const TimelineBar*>> by_slot(d.rows.size() * ncat);
  for (const TimelineBar& b : d.bars) by_slot[static_cast<size_t>(b.row) * ncat + static_cast<size_t>(b.category)].push_back(&b);
  auto* ax = detail::value_axis(QString("time since step start (%1)").arg(u.name), "%.4g");
  ax->setRange(0, d.step_s * u.scale);
  ax->applyNiceNumbers();
  auto* ay = new QCategoryAxis();
  ay->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  const double rows = static_cast<double>(d.rows.size());
  ay->setRange(-0.6, rows - 0.4);
  // Category end values must increase: the last row sits at the bottom (y = 0).
  for (size_t r = d.rows.size(); r-- > 0;) ay->append(d.rows[r], rows - 1.0 - static_cast<double>(r));
  ay->setTitleText("pipeline stage, stream");
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  std::vector<bool> legend_shown(ncat, false);
  for (size_t slot = 0; slot < by_slot.size(); ++slot) {
    const auto& bars = by_slot[slot];
    if (bars.empty()) continue;
    const size_t cat = slot % ncat;
    const double y = rows - 1.0 - static_cast<double>(slot / ncat);
    auto* upper = new QLineSeries();
    auto* lower = new QLineSeries();
    for (const TimelineBar* b : bars) {
      const double x0 = b->start_s * u.scale, x1 = b->end_s * u.scale;
      upper->append(x0, y - half);
      upper->append(x0, y + half);
      upper->append(x1, y + half);
      upper->append(x1, y - half);
    }
    lower->append(bars.front()->start_s * u.scale, y - half);
    lower->append(bars.back()->end_s * u.scale, y - half);
    auto* area = new QAreaSeries(upper, lower);
    area->setName(d.categories[cat]);
    area->setColor(detail::palette(static_cast<int>(cat)));
    area->setBorderColor(detail::palette(static_cast<int>(cat)).darker(140));
    QPen pen = area->pen();
    pen.setWidthF(0.5);
    area->setPen(pen);
    c->addSeries(area);
    area->attachAxis(ax);
    area->attachAxis(ay);
    const auto markers = c->legend()->markers(area);
    if (legend_shown[cat]) {
      for (QLegendMarker* mk : markers) mk->setVisible(false);
    }
    legend_shown[cat] = true;
  }
  return c;
}

}  // namespace lcm::gui
