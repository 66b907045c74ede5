// The predicted timeline: trace -> TimelineData, and the interactive view that paints it.
#include "lcm/gui/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <QBuffer>
#include <QHelpEvent>
#include <QImage>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>
#include <QToolTip>
#include <QWheelEvent>

#include "chart_util.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/planner/report/trace.hpp"

namespace lcm::gui {

namespace {

constexpr const char* kStreamNames[kNumStreams] = {"compute", "TP", "CP", "EP", "DP", "PP"};
constexpr const char* kCategoryNames[kTlNumCategories] = {
    "forward", "backward", "recompute", "optimizer step", "TP comm", "CP comm", "EP comm", "DP comm", "PP send/recv"};

// The compute stream by pass; a communication stream by its dimension.
int category_of(int stream, const std::string& name) {
  if (stream != static_cast<int>(Stream::kCompute)) return kTlTpComm + stream - 1;
  const auto parsed = parse_op_name(name);
  if (!parsed) return kTlStep;
  switch (parsed->pass) {
    case Pass::kFwd: return kTlForward;
    case Pass::kBwd: return kTlBackward;
    case Pass::kRecompute: return kTlRecompute;
    case Pass::kStep: return kTlStep;
  }
  return kTlStep;
}

int int_arg(const nlohmann::ordered_json& args, const char* key) {
  const auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<int>() : -1;
}

QString time_text(double s) {
  const double a = std::abs(s);
  if (a >= 60) return QString("%1 s").arg(s, 0, 'f', 2);
  if (a >= 1) return QString("%1 s").arg(s, 0, 'f', 4);
  if (a >= 1e-3) return QString("%1 ms").arg(s * 1e3, 0, 'f', 3);
  return QString("%1 µs").arg(s * 1e6, 0, 'f', 2);
}

// Tick step of about `target` ticks over `span`: 1, 2 or 5 times a power of ten.
double nice_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

const char* timeline_category_name(int category) {
  return category >= 0 && category < kTlNumCategories ? kCategoryNames[category] : "";
}

QColor timeline_category_color(int category) {
  // Okabe-Ito (colour-blind safe) for passes and the busiest streams, then distinct greys
  // and a dark teal, so that no two categories share a colour.
  static const QColor kColors[kTlNumCategories] = {
      QColor(0, 114, 178),  // forward: blue
      QColor(230, 159, 0),  // backward: orange
      QColor(204, 121, 167),  // recompute: reddish purple
      QColor(110, 110, 110),  // optimizer step: grey
      QColor(0, 158, 115),  // TP: bluish green
      QColor(86, 180, 233),  // CP: sky blue
      QColor(213, 94, 0),  // EP: vermillion
      QColor(240, 228, 66),  // DP: yellow
      QColor(0, 80, 80),  // PP: dark teal
  };
  return category >= 0 && category < kTlNumCategories ? kColors[category] : QColor(0, 0, 0);
}

TimelineData timeline_from_trace(const nlohmann::ordered_json& trace, double step_s) {
  TimelineData d;
  d.step_s = step_s;
  struct Raw {
    int pid, tid;
    TimelineEvent ev;
  };
  std::vector<Raw> raw;
  struct FlowEnd {
    int pid, tid;
    double ts;
  };
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::vector<FlowEnd>, std::vector<FlowEnd>>>
      flow_ends;
  int stages = 0;
  const auto events = trace.find("traceEvents");
  if (events == trace.end()) return d;
  for (const auto& ev : *events) {
    const std::string ph = ev.value("ph", "");
    if (ph == "s" || ph == "f") {
      const auto key = std::make_tuple(ev.value("cat", ""), ev.value("name", ""), ev["id"].dump());
      auto& ends = flow_ends[key];
      (ph == "s" ? ends.first : ends.second)
          .push_back({ev.value("pid", -1), ev.value("tid", -1), ev.value("ts", 0.0) * 1e-6});
      continue;
    }
    if (ph != "X") continue;
    const int pid = ev.value("pid", -1), tid = ev.value("tid", -1);
    if (pid < 0 || tid < 0 || tid >= kNumStreams) continue;
    Raw r{pid, tid, {}};
    r.ev.name = ev.value("name", "");
    r.ev.category = category_of(tid, r.ev.name);
    r.ev.start_s = ev.value("ts", 0.0) * 1e-6;
    r.ev.end_s = r.ev.start_s + ev.value("dur", 0.0) * 1e-6;
    if (const auto a = ev.find("args"); a != ev.end() && a->is_object()) {
      r.ev.layer = int_arg(*a, "layer");
      r.ev.mtp_depth = int_arg(*a, "mtp_depth");
      r.ev.micro_batch = int_arg(*a, "micro_batch");
      const auto o = a->find("overlapped");
      r.ev.overlapped = o != a->end() && o->is_boolean() && o->get<bool>();
    }
    stages = std::max(stages, pid + 1);
    raw.push_back(std::move(r));
  }
  // Rows: every stage's compute stream, then the communication streams it uses.
  std::vector<std::array<int, kNumStreams>> row_of(static_cast<size_t>(stages));
  for (auto& a : row_of) a.fill(-1);
  for (const Raw& r : raw) row_of[static_cast<size_t>(r.pid)][static_cast<size_t>(r.tid)] = 0;
  for (int p = 0; p < stages; ++p) {
    for (int t = 0; t < kNumStreams; ++t) {
      int& slot = row_of[static_cast<size_t>(p)][static_cast<size_t>(t)];
      if (t != 0 && slot < 0) continue;
      slot = static_cast<int>(d.rows.size());
      d.rows.push_back({p, t, QString("stage %1  %2").arg(p).arg(kStreamNames[t])});
    }
  }
  // Events by row, then start (stable: the trace's order breaks ties).
  std::stable_sort(raw.begin(), raw.end(), [&](const Raw& a, const Raw& b) {
    const int ra = row_of[static_cast<size_t>(a.pid)][static_cast<size_t>(a.tid)];
    const int rb = row_of[static_cast<size_t>(b.pid)][static_cast<size_t>(b.tid)];
    return ra != rb ? ra < rb : a.ev.start_s < b.ev.start_s;
  });
  d.events.reserve(raw.size());
  for (Raw& r : raw) {
    r.ev.row = row_of[static_cast<size_t>(r.pid)][static_cast<size_t>(r.tid)];
    d.end_s = std::max(d.end_s, r.ev.end_s);
    d.events.push_back(std::move(r.ev));
  }
  // Flows. The event a flow end binds to: on its row, the one enclosing its time (else the
  // nearest start).
  auto enclosing = [&](const FlowEnd& f) {
    if (f.pid < 0 || f.pid >= stages || f.tid < 0 || f.tid >= kNumStreams) return -1;
    const int row = row_of[static_cast<size_t>(f.pid)][static_cast<size_t>(f.tid)];
    int best = -1;
    double best_gap = 0;
    for (size_t i = 0; i < d.events.size(); ++i) {
      const TimelineEvent& e = d.events[i];
      if (e.row != row) continue;
      const double gap = f.ts < e.start_s ? e.start_s - f.ts : f.ts > e.end_s ? f.ts - e.end_s : 0;
      if (best < 0 || gap < best_gap) best = static_cast<int>(i), best_gap = gap;
    }
    return best;
  };
  for (const auto& [key, ends] : flow_ends) {
    const size_t n = std::min(ends.first.size(), ends.second.size());
    for (size_t i = 0; i < n; ++i) {
      const int a = enclosing(ends.first[i]), b = enclosing(ends.second[i]);
      if (a >= 0 && b >= 0) d.flows.push_back({a, b});
    }
  }
  if (flow_ends.empty() && stages > 1) {
    // No flow events: the n-th send of a micro-batch from stage r meets the n-th receive of
    // it on the stage it goes to (activations to r + 1, gradients to r - 1).
    std::map<std::tuple<int, int, int>, std::vector<int>> sends, recvs;  // (to stage, kind, micro-batch)
    for (size_t i = 0; i < d.events.size(); ++i) {
      const TimelineEvent& e = d.events[i];
      const TimelineRow& row = d.rows[static_cast<size_t>(e.row)];
      if (row.stream != static_cast<int>(Stream::kPp)) continue;
      const auto parsed = parse_op_name(e.name);
      if (!parsed) continue;
      const int idx = static_cast<int>(i);
      switch (parsed->id) {
        case OpId::kPpSend: sends[{(row.stage + 1) % stages, 0, e.micro_batch}].push_back(idx); break;
        case OpId::kPpSendGrad: sends[{(row.stage + stages - 1) % stages, 1, e.micro_batch}].push_back(idx); break;
        case OpId::kPpRecv: recvs[{row.stage, 0, e.micro_batch}].push_back(idx); break;
        case OpId::kPpRecvGrad: recvs[{row.stage, 1, e.micro_batch}].push_back(idx); break;
        default: break;
      }
    }
    for (const auto& [key, from] : sends) {
      const auto it = recvs.find(key);
      if (it == recvs.end()) continue;
      for (size_t i = 0; i < std::min(from.size(), it->second.size()); ++i) d.flows.push_back({from[i], it->second[i]});
    }
  }
  return d;
}

TimelineData timeline_data(const Scenario& s, const Estimate& e) {
  const Schedule sched = build_schedule(s, e.mesh, e.stage_layers, e.gpu_params);
  return timeline_from_trace(report::predicted_trace(s, e, sched, report::TraceOptions{}), e.time.step_s);
}

QString timeline_title(const TimelineData& d, int pp) {
  return QString("Predicted timeline of one step: step time %1 (1F1B, pp = %2)")
      .arg(detail::step_time_text(d.step_s))
      .arg(pp);
}

// ---- the view ----

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setObjectName("timeline");
}

void TimelineWidget::set_data(TimelineData d, QString title) {
  data_ = std::move(d);
  title_ = std::move(title);
  by_row_.assign(data_.rows.size(), {});
  for (size_t i = 0; i < data_.events.size(); ++i)
    by_row_[static_cast<size_t>(data_.events[i].row)].push_back(static_cast<int>(i));
  reset_view();
  updateGeometry();
}

void TimelineWidget::reset_view() {
  t0_ = 0;
  t1_ = std::max({data_.end_s, data_.step_s, 1e-9});
  update();
}

void TimelineWidget::set_view(double t0, double t1) {
  const double full = std::max({data_.end_s, data_.step_s, 1e-9});
  const double min_span = full * 1e-7;
  double span = std::clamp(t1 - t0, min_span, full);
  t0 = std::clamp(t0, 0.0, full - span);
  t0_ = t0;
  t1_ = t0 + span;
  update();
}

void TimelineWidget::zoom(double factor, int anchor_x) {
  const int left = gutter_width(), right = plot_right(width());
  const double frac = std::clamp(static_cast<double>(anchor_x - left) / std::max(1, right - left), 0.0, 1.0);
  const double at = t0_ + frac * (t1_ - t0_);
  const double span = (t1_ - t0_) / factor;
  set_view(at - frac * span, at - frac * span + span);
}

void TimelineWidget::pan_pixels(int dx) {
  const double per_px = (t1_ - t0_) / std::max(1, plot_right(width()) - gutter_width());
  set_view(t0_ - dx * per_px, t1_ - dx * per_px);
}

int TimelineWidget::row_height() const { return fontMetrics().height() + 8; }
int TimelineWidget::axis_height() const { return fontMetrics().height() * 2 + 12; }
int TimelineWidget::plot_right(int w) const { return w - 12; }

int TimelineWidget::gutter_width() const {
  int w = 0;
  for (const TimelineRow& r : data_.rows) w = std::max(w, fontMetrics().horizontalAdvance(r.label));
  return w + 20;
}

int TimelineWidget::legend_height(int width) const {
  // Entries flow left to right and wrap; each is a swatch and its whole name.
  const QFontMetrics fm = fontMetrics();
  int x = 8, lines = 1;
  for (int c = 0; c < kTlNumCategories; ++c) {
    const int w = 18 + fm.horizontalAdvance(timeline_category_name(c)) + 16;
    if (x + w > width - 8 && x > 8) ++lines, x = 8;
    x += w;
  }
  return lines * (fm.height() + 6);
}

int TimelineWidget::header_height() const {
  QFont bold = font();
  bold.setBold(true);
  return QFontMetrics(bold).height() + 10 + legend_height(std::max(width(), 400)) + 6;
}

int TimelineWidget::row_center(int row) const { return header_height() + row * row_height() + row_height() / 2; }

double TimelineWidget::x_of(double t) const {
  const int left = gutter_width(), right = plot_right(width());
  return left + (t - t0_) / (t1_ - t0_) * (right - left);
}

QSize TimelineWidget::minimumSizeHint() const {
  return {gutter_width() + 200, header_height() + static_cast<int>(data_.rows.size()) * row_height() + axis_height()};
}

QSize TimelineWidget::sizeHint() const { return minimumSizeHint().expandedTo(QSize(900, 400)); }

int TimelineWidget::event_at(QPoint p) const {
  const int top = header_height();
  if (p.y() < top || p.x() < gutter_width()) return -1;
  const int row = (p.y() - top) / row_height();
  if (row < 0 || row >= static_cast<int>(by_row_.size())) return -1;
  const double per_px = (t1_ - t0_) / std::max(1, plot_right(width()) - gutter_width());
  const double t = t0_ + (p.x() - gutter_width()) * per_px;
  // The event covering t; a narrow one within 2 pixels counts (events thinner than a pixel).
  int best = -1;
  double best_gap = 2 * per_px;
  for (int i : by_row_[static_cast<size_t>(row)]) {
    const TimelineEvent& e = data_.events[static_cast<size_t>(i)];
    if (e.start_s > t + best_gap) break;
    const double gap = t < e.start_s ? e.start_s - t : t > e.end_s ? t - e.end_s : 0;
    if (gap <= best_gap && (best < 0 || gap < best_gap || gap == 0)) best = i, best_gap = gap;
  }
  return best;
}

QString TimelineWidget::event_text(int event) const {
  if (event < 0 || event >= static_cast<int>(data_.events.size())) return {};
  const TimelineEvent& e = data_.events[static_cast<size_t>(event)];
  const TimelineRow& r = data_.rows[static_cast<size_t>(e.row)];
  QString where = e.layer >= 0       ? QString("layer %1").arg(e.layer)
                  : e.mtp_depth >= 0 ? QString("MTP depth %1").arg(e.mtp_depth)
                                     : QString("no layer (stage edge / step op)");
  QString s = QString("<b>%1</b><br>%2, %3<br>start %4, duration %5<br>stage %6, stream %7")
                  .arg(QString::fromStdString(e.name).toHtmlEscaped(), timeline_category_name(e.category), where,
                       time_text(e.start_s), time_text(e.end_s - e.start_s))
                  .arg(r.stage)
                  .arg(kStreamNames[r.stream]);
  if (e.micro_batch >= 0) s += QString(", micro-batch %1").arg(e.micro_batch);
  if (r.stream != 0) s += e.overlapped ? "<br>overlapped with compute" : "<br>exposed (blocks compute)";
  return s;
}

void TimelineWidget::paint_to(QPainter& p, QSize size) const {
  const QFontMetrics fm = fontMetrics();
  const int w = size.width(), h = size.height();
  const int left = gutter_width(), right = plot_right(w), top = header_height(), rh = row_height();
  const double span = t1_ - t0_;
  auto x_at = [&](double t) { return left + (t - t0_) / span * (right - left); };
  p.fillRect(QRect(0, 0, w, h), Qt::white);
  p.setFont(font());

  // Title and legend.
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(Qt::black);
  p.drawText(QPoint(8, QFontMetrics(bold).ascent() + 5), title_);
  p.setFont(font());
  int lx = 8, ly = QFontMetrics(bold).height() + 10;
  for (int c = 0; c < kTlNumCategories; ++c) {
    const QString name = timeline_category_name(c);
    const int ew = 18 + fm.horizontalAdvance(name) + 16;
    if (lx + ew > w - 8 && lx > 8) lx = 8, ly += fm.height() + 6;
    p.fillRect(QRect(lx, ly + (fm.height() - 12) / 2, 12, 12), timeline_category_color(c));
    p.setPen(Qt::black);
    p.drawText(QPoint(lx + 18, ly + fm.ascent()), name);
    lx += ew;
  }

  // Rows: alternating stage bands, labels in the gutter (never elided: the gutter fits the
  // longest label).
  const int nrows = static_cast<int>(data_.rows.size());
  for (int r = 0; r < nrows; ++r) {
    const TimelineRow& row = data_.rows[static_cast<size_t>(r)];
    const QRect band(0, top + r * rh, w, rh);
    p.fillRect(band, row.stage % 2 ? QColor(246, 246, 250) : QColor(255, 255, 255));
    if (row.stream == 0 && r > 0) {
      p.setPen(QColor(170, 170, 170));
      p.drawLine(0, band.top(), w, band.top());
    }
    p.setPen(row.stream == 0 ? Qt::black : QColor(70, 70, 70));
    p.drawText(QRect(8, band.top(), left - 12, rh), Qt::AlignVCenter | Qt::AlignLeft, row.label);
  }
  const int bottom = top + nrows * rh;
  p.setClipRect(QRect(left, top, right - left, bottom - top));
  // Events; runs thinner than a pixel merge into one mark per pixel column and category.
  for (int r = 0; r < nrows; ++r) {
    const int y = top + r * rh + 3, bh = rh - 6;
    int pend_cat = -1;
    double px0 = 0, px1 = 0;
    auto flush = [&] {
      if (pend_cat < 0) return;
      const QRectF rect(px0, y, std::max(1.0, px1 - px0), bh);
      const QColor c = timeline_category_color(pend_cat);
      p.fillRect(rect, c);
      if (rect.width() >= 4) {
        p.setPen(QPen(c.darker(140), 0.8));
        p.drawRect(rect);
      }
      pend_cat = -1;
    };
    for (int i : by_row_[static_cast<size_t>(r)]) {
      const TimelineEvent& e = data_.events[static_cast<size_t>(i)];
      if (e.end_s < t0_ || e.start_s > t1_) continue;
      const double x0 = x_at(e.start_s), x1 = x_at(e.end_s);
      if (pend_cat == e.category && x0 <= px1 + 0.5 && x1 - x0 < 3) {
        px1 = std::max(px1, x1);
        continue;
      }
      flush();
      pend_cat = e.category;
      px0 = x0;
      px1 = x1;
      if (x1 - x0 >= 3) {
        flush();
        // The op name inside its box when the whole name fits.
        const QString name = QString::fromStdString(e.name);
        const double vis0 = std::max(x0, static_cast<double>(left)), vis1 = std::min(x1, static_cast<double>(right));
        if (vis1 - vis0 > fm.horizontalAdvance(name) + 6) {
          const QColor c = timeline_category_color(e.category);
          p.setPen(c.lightness() > 150 ? Qt::black : Qt::white);
          p.drawText(QRectF(vis0 + 3, y, vis1 - vis0 - 6, bh), Qt::AlignVCenter | Qt::AlignLeft, name);
        }
      }
    }
    flush();
  }
  // Pipeline flows: an arrow from the end of a send to the start of its receive.
  p.setRenderHint(QPainter::Antialiasing, true);
  const QColor flow(40, 40, 40, 170);
  for (const TimelineFlow& f : data_.flows) {
    const TimelineEvent& a = data_.events[static_cast<size_t>(f.from)];
    const TimelineEvent& b = data_.events[static_cast<size_t>(f.to)];
    if (std::max(a.end_s, b.start_s) < t0_ || std::min(a.end_s, b.start_s) > t1_) continue;
    const QPointF from(x_at(a.end_s), top + a.row * rh + rh / 2.0);
    const QPointF to(x_at(b.start_s), top + b.row * rh + rh / 2.0);
    QPainterPath path(from);
    const double bend = std::max(12.0, std::abs(to.x() - from.x()) / 3);
    path.cubicTo(from + QPointF(bend, 0), to - QPointF(bend, 0), to);
    p.setPen(QPen(flow, 1.2));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    QPolygonF head;
    head << to << to + QPointF(-7, -3.5) << to + QPointF(-7, 3.5);
    p.setBrush(flow);
    p.drawPolygon(head);
  }
  p.setRenderHint(QPainter::Antialiasing, false);
  // The step end (Estimate::time.step_s).
  if (data_.step_s >= t0_ && data_.step_s <= t1_) {
    p.setPen(QPen(QColor(200, 0, 0), 1.5, Qt::DashLine));
    p.drawLine(QPointF(x_at(data_.step_s), top), QPointF(x_at(data_.step_s), bottom));
  }
  p.setClipping(false);

  // Time axis.
  p.setPen(QColor(90, 90, 90));
  p.drawLine(left, bottom, right, bottom);
  const double unit = data_.step_s >= 2 || span >= 2 ? 1.0 : span >= 2e-3 ? 1e3 : 1e6;
  const char* unit_name = unit == 1.0 ? "s" : unit == 1e3 ? "ms" : "µs";
  const double step = nice_step(span * unit, std::max(2, (right - left) / 110)) / unit;
  const int digits = std::max(0, -static_cast<int>(std::floor(std::log10(step * unit))));
  for (double t = std::ceil(t0_ / step) * step; t <= t1_ + 1e-12 * span; t += step) {
    const double x = x_at(t);
    p.drawLine(QPointF(x, bottom), QPointF(x, bottom + 4));
    const QString label = QString::number(t * unit, 'f', digits);
    p.drawText(QPointF(x - fm.horizontalAdvance(label) / 2.0, bottom + 4 + fm.ascent()), label);
  }
  const QString axis =
      QString("time since step start (%1); wheel or + / - zoom, drag or arrows pan, 0 resets").arg(unit_name);
  p.drawText(QPointF(left, bottom + 8 + fm.height() + fm.ascent()), axis);
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paint_to(p, size());
}

QByteArray TimelineWidget::render(QSize size, ImageFormat f) {
  // The rows must fit: the image grows to the height they need.
  resize(size);  // the legend's wrap, and so the header's height, follows the width
  resize(size.width(), std::max(size.height(), minimumSizeHint().height()));
  const QSize s = this->size();
  QByteArray bytes;
  QBuffer buf(&bytes);
  buf.open(QIODevice::WriteOnly);
  if (f == ImageFormat::kPng) {
    QImage img(s * 2, QImage::Format_ARGB32_Premultiplied);
    img.setDevicePixelRatio(2);
    {
      QPainter p(&img);
      paint_to(p, s);
    }
    img.save(&buf, "PNG");
    return bytes;
  }
  QSvgGenerator gen;
  gen.setOutputDevice(&buf);
  gen.setSize(s);
  gen.setViewBox(QRect(QPoint(0, 0), s));
  gen.setTitle(title_);
  gen.setDescription("lcm timeline");
  {
    QPainter p(&gen);
    paint_to(p, s);
  }
  return bytes;
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  const int dy = e->angleDelta().y();
  if (dy == 0) return QWidget::wheelEvent(e);
  zoom(std::pow(1.25, dy / 120.0), static_cast<int>(e->position().x()));
  e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return QWidget::mousePressEvent(e);
  dragging_ = true;
  drag_x_ = static_cast<int>(e->position().x());
  setCursor(Qt::ClosedHandCursor);
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  if (!dragging_) return QWidget::mouseMoveEvent(e);
  const int x = static_cast<int>(e->position().x());
  pan_pixels(x - drag_x_);
  drag_x_ = x;
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  dragging_ = false;
  unsetCursor();
  QWidget::mouseReleaseEvent(e);
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const int mid = (gutter_width() + plot_right(width())) / 2;
  const int step = std::max(20, (plot_right(width()) - gutter_width()) / 10);
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom(1.5, mid); break;
    case Qt::Key_Minus: zoom(1 / 1.5, mid); break;
    case Qt::Key_0: reset_view(); break;
    case Qt::Key_Left: pan_pixels(step); break;
    case Qt::Key_Right: pan_pixels(-step); break;
    default: return QWidget::keyPressEvent(e);
  }
  e->accept();
}

bool TimelineWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const int i = event_at(he->pos());
    if (i >= 0) QToolTip::showText(he->globalPos(), event_text(i), this);
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

}  // namespace lcm::gui
