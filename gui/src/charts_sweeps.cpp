// Charts across a swept input: FLOPs split and memory versus sequence length (scaling),
// dropped tokens versus capacity factor (capacity), predicted versus measured op times
// (validation).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <QAreaSeries>
#include <QLineSeries>
#include <QScatterSeries>

#include "chart_util.hpp"
#include "lcm/gui/charts.hpp"

namespace lcm::gui {

using detail::kGiB;

namespace {

QLineSeries* line(const QString& name, int color, double width = 2.2, Qt::PenStyle style = Qt::SolidLine) {
  auto* l = new QLineSeries();
  l->setName(name);
  QPen pen(detail::palette(color));
  pen.setWidthF(width);
  pen.setStyle(style);
  l->setPen(pen);
  l->setPointsVisible(true);
  return l;
}

void attach(QChart* c, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
  c->addSeries(s);
  s->attachAxis(x);
  s->attachAxis(y);
}

QString seq_label(double seq) {
  if (seq >= 1024.0 * 1024.0) return QString("%1M").arg(seq / (1024.0 * 1024.0), 0, 'g', 3);
  return QString("%1K").arg(seq / 1024.0, 0, 'g', 4);
}

// Rounds a log axis range out to powers of `base`.
void log_range(QLogValueAxis* a, double lo, double hi, double base) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo <= 0) lo = 1, hi = base;
  lo = std::max(lo, std::numeric_limits<double>::min());
  hi = std::max(hi, lo * base);
  a->setRange(std::pow(base, std::floor(std::log(lo) / std::log(base))),
              std::pow(base, std::ceil(std::log(hi) / std::log(base))));
}

// A vertical line at the crossover, named with its sequence length.
void crossover_line(QChart* c, double seq, double y0, double y1, QAbstractAxis* x, QAbstractAxis* y,
                    const QString& what) {
  if (!(seq > 0)) return;
  auto* v = line(QString("crossover %1 (%2)").arg(seq_label(seq), what), 8, 1.8, Qt::DashLine);
  v->setPointsVisible(false);
  v->append(seq / 1024.0, y0);
  v->append(seq / 1024.0, y1);
  attach(c, v, x, y);
}

}  // namespace

QChart* scaling_flops_chart(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x) {
  QChart* c = detail::new_chart(QString("%1: FLOPs of one layer").arg(QString::fromStdString(s.model.name)));
  auto* core = line("attention core", 5);
  auto* mlp = line(has_moe(s.model) ? "active experts" : "MLP", 0);
  auto* proj = line("projections", 2);
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (const ScalingRow& r : rows) {
    const double k = static_cast<double>(r.seq_length) / 1024.0;
    core->append(k, r.layer_attn_core / 1e12);
    mlp->append(k, r.layer_mlp / 1e12);
    proj->append(k, r.layer_attn_proj / 1e12);
    for (double v : {r.layer_attn_core, r.layer_mlp, r.layer_attn_proj}) {
      if (v > 0 && std::isfinite(v)) lo = std::min(lo, v / 1e12), hi = std::max(hi, v / 1e12);
    }
  }
  auto* ax = detail::log_axis("sequence length (K tokens, 1K = 1024)", 2);
  auto* ay = detail::log_axis("forward TFLOP per sequence", 10);
  if (!rows.empty()) {
    ax->setRange(static_cast<double>(rows.front().seq_length) / 1024.0,
                 static_cast<double>(rows.back().seq_length) / 1024.0);
  }
  log_range(ay, lo, hi, 10);
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  attach(c, core, ax, ay);
  attach(c, mlp, ax, ay);
  attach(c, proj, ax, ay);
  const bool moe = has_moe(s.model);
  crossover_line(c, moe ? x.moe_seq : x.dense_seq, ay->min(), ay->max(), ax, ay, moe ? "MoE" : "dense");
  if (moe && x.dense_seq > 0) crossover_line(c, x.dense_seq, ay->min(), ay->max(), ax, ay, "dense");
  return c;
}

QChart* scaling_memory_chart(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x) {
  QChart* c = detail::new_chart(QString("Memory per GPU, worst stage"));
  auto* act = line("activations", 3);
  auto* peak = line("peak", 0);
  auto* hbm = line(QString("HBM %1 GiB").arg(s.hardware.gpu.hbm_bytes / kGiB, 0, 'f', 1), 5, 2.0, Qt::DashLine);
  QPen red(QColor(200, 0, 0));
  red.setWidthF(2.5);
  red.setStyle(Qt::DashLine);
  hbm->setPen(red);
  hbm->setPointsVisible(false);
  double lo = std::numeric_limits<double>::max(), hi = s.hardware.gpu.hbm_bytes / kGiB;
  for (const ScalingRow& r : rows) {
    if (!r.layout_valid) continue;  // e.g. a sequence the CP split does not divide
    const double k = static_cast<double>(r.seq_length) / 1024.0;
    act->append(k, r.activation_bytes / kGiB);
    peak->append(k, r.peak_bytes / kGiB);
    lo = std::min(lo, r.activation_bytes / kGiB);
    hi = std::max(hi, r.peak_bytes / kGiB);
  }
  auto* ax = detail::log_axis("sequence length (K tokens, 1K = 1024)", 2);
  auto* ay = detail::log_axis("memory per GPU (GiB)", 10);
  if (!rows.empty()) {
    const double k0 = static_cast<double>(rows.front().seq_length) / 1024.0;
    const double k1 = static_cast<double>(rows.back().seq_length) / 1024.0;
    ax->setRange(k0, k1);
    hbm->append(k0, s.hardware.gpu.hbm_bytes / kGiB);
    hbm->append(k1, s.hardware.gpu.hbm_bytes / kGiB);
  }
  log_range(ay, lo, hi, 10);
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  attach(c, act, ax, ay);
  attach(c, peak, ax, ay);
  attach(c, hbm, ax, ay);
  const bool moe = has_moe(s.model);
  crossover_line(c, moe ? x.moe_seq : x.dense_seq, ay->min(), ay->max(), ax, ay, moe ? "MoE" : "dense");
  return c;
}

QChart* capacity_chart(const Scenario& s, const CapacitySweep& sw) {
  QString routing = to_string(sw.routing);
  if (sw.routing == RoutingKind::kZipf) routing = QString("Zipf s = %1").arg(sw.zipf_s);
  QChart* c = detail::new_chart(QString("Dropped tokens, %1 routing (E = %2, top-%3, T = %4)")
                                    .arg(routing)
                                    .arg(sw.experts)
                                    .arg(sw.topk)
                                    .arg(sw.tokens));
  (void)s;
  auto* drop = line(QString("dropped (%1)").arg(to_string(sw.method)), 0);
  double lo = std::numeric_limits<double>::max(), hi = 0, top = 0;
  const bool mc = sw.method == DropMethod::kMonteCarlo;
  auto* ci_hi = new QLineSeries();
  auto* ci_lo = new QLineSeries();
  for (const CapacityRow& r : sw.rows) {
    drop->append(r.cf, r.drop_fraction * 100);
    ci_hi->append(r.cf, r.drop_ci_high * 100);
    ci_lo->append(r.cf, r.drop_ci_low * 100);
    lo = std::min(lo, r.cf);
    hi = std::max(hi, r.cf);
    top = std::max(top, std::max(r.drop_fraction, r.drop_ci_high) * 100);
  }
  auto* ax = detail::value_axis("capacity factor (expert capacity / mean load)", "%.2f");
  auto* ay = detail::value_axis("dropped tokens (% of token-expert assignments)", "%.3g");
  if (!sw.rows.empty()) ax->setRange(lo, hi);
  ay->setRange(0, std::max(top, 1e-3) * 1.1);
  ay->applyNiceNumbers();
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  if (mc) {
    auto* band = new QAreaSeries(ci_hi, ci_lo);
    band->setName("95% CI");
    QColor fill = detail::palette(4);
    fill.setAlpha(90);
    band->setColor(fill);
    band->setBorderColor(fill);
    attach(c, band, ax, ay);
  } else {
    delete ci_hi;
    delete ci_lo;
  }
  attach(c, drop, ax, ay);
  return c;
}

QChart* validation_chart(const std::vector<ValidationRow>& rows, const QString& subtitle) {
  QChart* c = detail::new_chart(QString("Predicted vs measured time per op%1").arg(subtitle.isEmpty() ? "" : " (" + subtitle + ")"));
  std::map<std::string, QScatterSeries*> by_family;
  double lo = std::numeric_limits<double>::max(), hi = 0;
  int color = 0;
  for (const ValidationRow& r : rows) {
    if (!(r.predicted_s > 0) || !(r.measured_s > 0) || !std::isfinite(r.predicted_s) || !std::isfinite(r.measured_s))
      continue;
    QScatterSeries*& s = by_family[r.family];
    if (!s) {
      s = new QScatterSeries();
      s->setName(QString::fromStdString(r.family));
      s->setMarkerSize(9);
      s->setColor(detail::palette(color));
      s->setBorderColor(detail::palette(color).darker(140));
      ++color;
    }
    s->append(r.measured_s * 1e6, r.predicted_s * 1e6);
    lo = std::min({lo, r.measured_s * 1e6, r.predicted_s * 1e6});
    hi = std::max({hi, r.measured_s * 1e6, r.predicted_s * 1e6});
  }
  if (hi <= 0) lo = 1, hi = 1e6;
  auto* ax = detail::log_axis("measured time per call (µs)", 10);
  auto* ay = detail::log_axis("predicted time per call (µs)", 10);
  log_range(ax, lo, hi, 10);
  log_range(ay, lo, hi, 10);
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  auto* diag = line("y = x", 8, 1.5, Qt::DashLine);
  diag->setPointsVisible(false);
  diag->append(ax->min(), ax->min());
  diag->append(ax->max(), ax->max());
  attach(c, diag, ax, ay);
  for (auto& [family, s] : by_family) attach(c, s, ax, ay);
  return c;
}

}  // namespace lcm::gui
