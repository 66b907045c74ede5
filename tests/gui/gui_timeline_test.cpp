// The Timeline tab and `lcm plot timeline`: rows and labels from 4 pipeline stages up,
// distinct colours per pass and stream, zoom and pan, hover details with the layer index,
// pipeline flows, and one step time in the title and the headline.
#include <set>

#include <QImage>
#include <QLabel>
#include <QTabWidget>
#include <QtTest>

#include "../../gui/src/chart_util.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/estimate_view.hpp"
#include "lcm/gui/main_window.hpp"
#include "lcm/gui/plot.hpp"
#include "lcm/gui/scenario_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/timeline.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/ops.hpp"

using namespace lcm;

namespace {

const QString kDefault = QStringLiteral(LCM_SOURCE_DIR "/scenarios/default.yaml");
const QString kLlama70b = QStringLiteral(LCM_SOURCE_DIR "/scenarios/llama3.1-70b.yaml");

// Llama 3.1 70B (80 layers) on 64 GPUs with `pp` pipeline stages: TP 8 / PP pp / CP rest
// (valid for pp = 1, 2, 4, 8; pp = 16 with TP 4).
Scenario llama70b_with_pp(int pp) {
  auto r = io::load_scenario(kLlama70b.toStdString());
  Scenario s = r.value();
  plan::Layout l = plan::layout_of(s);
  l.pp = pp;
  l.vl = 0;
  l.tp = pp == 16 ? 4 : 8;
  l.etp = l.tp;
  l.cp = std::max(1, 64 / (l.tp * pp));
  s = plan::apply_layout(s, l);
  return s;
}

int count_category(const gui::TimelineData& d, int cat) {
  int n = 0;
  for (const gui::TimelineEvent& e : d.events) n += e.category == cat;
  return n;
}

}  // namespace

class TimelineTest : public QObject {
  Q_OBJECT

 private slots:
  void rows_and_full_labels_from_4_stages_up();
  void passes_and_streams_have_distinct_colours();
  void wheel_keys_and_drag_zoom_and_pan();
  void hover_names_the_op_layer_times_and_stream();
  void pipeline_sends_flow_to_their_receives();
  void flow_events_of_a_trace_are_used();
  void title_and_headline_show_the_same_step_time();
  void plot_renders_every_row();
};

void TimelineTest::rows_and_full_labels_from_4_stages_up() {
  for (int pp : {4, 8, 16}) {
    const Scenario s = llama70b_with_pp(pp);
    const auto problems = validate_scenario(s);
    QVERIFY2(problems.empty(), problems.empty() ? "" : problems.front().message.c_str());
    const Estimate e = estimate(s);
    const gui::TimelineData d = gui::timeline_data(s, e);
    // One compute row per stage, labelled in full; communication rows follow their stage.
    int compute_rows = 0;
    for (size_t r = 0; r < d.rows.size(); ++r) {
      const gui::TimelineRow& row = d.rows[r];
      static const char* const kStream[] = {"compute", "TP", "CP", "EP", "DP", "PP"};
      QCOMPARE(row.label, QString("stage %1  %2").arg(row.stage).arg(kStream[row.stream]));
      if (row.stream == 0) ++compute_rows;
      if (r > 0) QVERIFY(d.rows[r - 1].stage <= row.stage);
    }
    QCOMPARE(compute_rows, pp);
    QCOMPARE(d.rows.back().stage, pp - 1);
    // At 1280 px the label gutter holds the longest label whole, and every row gets its height.
    gui::TimelineWidget w;
    w.set_data(d, gui::timeline_title(d, pp));
    w.resize(1280 - 360, w.minimumSizeHint().height());
    int longest = 0;
    for (const gui::TimelineRow& row : d.rows)
      longest = std::max(longest, w.fontMetrics().horizontalAdvance(row.label));
    QVERIFY(longest > w.fontMetrics().horizontalAdvance("stage 1"));
    QVERIFY(w.gutter_width() >= longest + 12);
    QVERIFY(w.row_center(1) - w.row_center(0) >= w.fontMetrics().height());
    QVERIFY(w.minimumSizeHint().height() >= static_cast<int>(d.rows.size()) * w.fontMetrics().height());
  }
}

void TimelineTest::passes_and_streams_have_distinct_colours() {
  std::set<QRgb> colours;
  for (int c = 0; c < gui::kTlNumCategories; ++c) colours.insert(gui::timeline_category_color(c).rgb());
  QCOMPARE(static_cast<int>(colours.size()), static_cast<int>(gui::kTlNumCategories));
  // The default scenario (full recompute, TP, CP, EP, PP) has forward, backward and recompute
  // ops; each event's category is its pass by the op name table.
  auto r = io::load_scenario(kDefault.toStdString());
  const Scenario& s = r.value();
  const gui::TimelineData d = gui::timeline_data(s, estimate(s));
  QVERIFY(count_category(d, gui::kTlForward) > 0);
  QVERIFY(count_category(d, gui::kTlBackward) > 0);
  QVERIFY(count_category(d, gui::kTlRecompute) > 0);
  QVERIFY(count_category(d, gui::kTlPpComm) > 0);
  for (const gui::TimelineEvent& e : d.events) {
    const gui::TimelineRow& row = d.rows[static_cast<size_t>(e.row)];
    if (row.stream != 0) {
      QCOMPARE(e.category, gui::kTlTpComm + row.stream - 1);
      continue;
    }
    const auto n = parse_op_name(e.name);
    QVERIFY2(n.has_value(), e.name.c_str());
    const int want = n->pass == Pass::kFwd         ? gui::kTlForward
                     : n->pass == Pass::kBwd       ? gui::kTlBackward
                     : n->pass == Pass::kRecompute ? gui::kTlRecompute
                                                   : gui::kTlStep;
    QCOMPARE(e.category, want);
  }
}

void TimelineTest::wheel_keys_and_drag_zoom_and_pan() {
  auto r = io::load_scenario(kDefault.toStdString());
  const Scenario& s = r.value();
  const Estimate e = estimate(s);
  gui::TimelineData d = gui::timeline_data(s, e);
  const double full = std::max(d.end_s, d.step_s);
  gui::TimelineWidget w;
  w.set_data(d, "t");
  w.resize(1000, w.minimumSizeHint().height());
  w.show();
  QCOMPARE(w.view_start(), 0.0);
  QCOMPARE(w.view_end(), full);
  // Wheel up one notch at x: zooms in by 1.25 and keeps the time under x where it was.
  const int x = w.gutter_width() + 300;
  const double per_px = full / (w.width() - 12 - w.gutter_width());
  const double at = 300 * per_px;
  QWheelEvent wheel(QPointF(x, 100), w.mapToGlobal(QPointF(x, 100)), QPoint(), QPoint(0, 120), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(&w, &wheel);
  QVERIFY(std::abs((w.view_end() - w.view_start()) - full / 1.25) <= 1e-9 * full);
  const double per_px2 = (w.view_end() - w.view_start()) / (w.width() - 12 - w.gutter_width());
  QVERIFY(std::abs(w.view_start() + 300 * per_px2 - at) <= 1e-9 * full);
  // Keys: + zooms in by 1.5, - back out, 0 resets.
  const double span = w.view_end() - w.view_start();
  QTest::keyClick(&w, Qt::Key_Plus);
  QVERIFY(std::abs((w.view_end() - w.view_start()) - span / 1.5) <= 1e-9 * full);
  QTest::keyClick(&w, Qt::Key_Minus);
  QVERIFY(std::abs((w.view_end() - w.view_start()) - span) <= 1e-9 * full);
  // Drag 100 px to the left: the window moves 100 px of time later.
  const double t0 = w.view_start();
  const double per_px3 = (w.view_end() - w.view_start()) / (w.width() - 12 - w.gutter_width());
  QTest::mousePress(&w, Qt::LeftButton, Qt::NoModifier, QPoint(x, 100));
  QMouseEvent move(QEvent::MouseMove, QPointF(x - 100, 100), w.mapToGlobal(QPointF(x - 100, 100)), Qt::NoButton,
                   Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(&w, &move);
  QTest::mouseRelease(&w, Qt::LeftButton, Qt::NoModifier, QPoint(x - 100, 100));
  QVERIFY(std::abs(w.view_start() - (t0 + 100 * per_px3)) <= 1e-9 * full);
  QTest::keyClick(&w, Qt::Key_0);
  QCOMPARE(w.view_start(), 0.0);
  QCOMPARE(w.view_end(), full);
}

void TimelineTest::hover_names_the_op_layer_times_and_stream() {
  auto r = io::load_scenario(kDefault.toStdString());
  const Scenario& s = r.value();
  gui::TimelineData d = gui::timeline_data(s, estimate(s));
  // The first attention-core forward of layer 3 (stage 0 holds layers 0..15).
  int pick = -1;
  for (size_t i = 0; i < d.events.size(); ++i)
    if (d.events[i].layer == 3 && d.events[i].name == "L.attn.core.fwd") {
      pick = static_cast<int>(i);
      break;
    }
  QVERIFY(pick >= 0);
  const gui::TimelineEvent ev = d.events[static_cast<size_t>(pick)];
  gui::TimelineWidget w;
  w.set_data(d, "t");
  w.resize(1000, w.minimumSizeHint().height());
  // Zoom so that the op spans the middle of the plot, then hover its centre.
  const double dur = ev.end_s - ev.start_s;
  w.set_view(ev.start_s - dur, ev.end_s + dur);
  const QPoint at(static_cast<int>(w.x_of((ev.start_s + ev.end_s) / 2)), w.row_center(ev.row));
  QCOMPARE(w.event_at(at), pick);
  const QString text = w.event_text(pick);
  QVERIFY2(text.contains("L.attn.core.fwd"), qPrintable(text));
  QVERIFY(text.contains("layer 3"));
  QVERIFY(text.contains("forward"));
  QVERIFY(text.contains("stage 0, stream compute"));
  QVERIFY(text.contains(QString("micro-batch %1").arg(ev.micro_batch)));
  // Start and duration in the unit of their size (ms for this op).
  QVERIFY(dur < 1 && dur >= 1e-3);
  QVERIFY2(text.contains(QString("duration %1 ms").arg(dur * 1e3, 0, 'f', 3)), qPrintable(text));
  // Outside the rows: nothing.
  QCOMPARE(w.event_at(QPoint(5, w.row_center(0))), -1);
}

void TimelineTest::pipeline_sends_flow_to_their_receives() {
  const Scenario s = llama70b_with_pp(4);
  const gui::TimelineData d = gui::timeline_data(s, estimate(s));
  int sends = 0;
  for (const gui::TimelineEvent& e : d.events) {
    const auto n = parse_op_name(e.name);
    if (n && (n->id == OpId::kPpSend || n->id == OpId::kPpSendGrad)) ++sends;
  }
  QVERIFY(sends > 0);
  QCOMPARE(static_cast<int>(d.flows.size()), sends);  // every send reaches a receive
  for (const gui::TimelineFlow& f : d.flows) {
    const gui::TimelineEvent& a = d.events[static_cast<size_t>(f.from)];
    const gui::TimelineEvent& b = d.events[static_cast<size_t>(f.to)];
    const int sa = d.rows[static_cast<size_t>(a.row)].stage, sb = d.rows[static_cast<size_t>(b.row)].stage;
    const auto na = parse_op_name(a.name), nb = parse_op_name(b.name);
    QVERIFY(na && nb);
    QCOMPARE(a.micro_batch, b.micro_batch);
    if (na->id == OpId::kPpSend) {
      QCOMPARE(nb->id, OpId::kPpRecv);
      QCOMPARE(sb, sa + 1);
    } else {
      QCOMPARE(na->id, OpId::kPpSendGrad);
      QCOMPARE(nb->id, OpId::kPpRecvGrad);
      QCOMPARE(sb, sa - 1);
    }
  }
}

void TimelineTest::flow_events_of_a_trace_are_used() {
  // Two stages, one op each, and a flow from the first to the second (Chrome trace "s"/"f").
  const auto trace = nlohmann::ordered_json::parse(R"({"traceEvents": [
    {"name": "pp.send.fwd", "ph": "X", "ts": 0, "dur": 10, "pid": 0, "tid": 5, "args": {"micro_batch": 0}},
    {"name": "pp.recv.fwd", "ph": "X", "ts": 12, "dur": 4, "pid": 1, "tid": 5, "args": {"micro_batch": 0}},
    {"name": "L.mlp.fc1.fwd", "ph": "X", "ts": 16, "dur": 30, "pid": 1, "tid": 0, "args": {"micro_batch": 0, "layer": 7}},
    {"name": "act", "cat": "pp", "ph": "s", "id": 1, "ts": 10, "pid": 0, "tid": 5},
    {"name": "act", "cat": "pp", "ph": "f", "bp": "e", "id": 1, "ts": 12, "pid": 1, "tid": 5}]})");
  const gui::TimelineData d = gui::timeline_from_trace(trace, 50e-6);
  // Rows: stage 0 compute, stage 0 PP, stage 1 compute, stage 1 PP.
  QCOMPARE(static_cast<int>(d.rows.size()), 4);
  QCOMPARE(d.rows[1].label, QString("stage 0  PP"));
  QCOMPARE(static_cast<int>(d.events.size()), 3);
  QCOMPARE(d.end_s, 46e-6);
  QCOMPARE(d.step_s, 50e-6);
  QCOMPARE(static_cast<int>(d.flows.size()), 1);
  QCOMPARE(d.events[static_cast<size_t>(d.flows[0].from)].name, std::string("pp.send.fwd"));
  QCOMPARE(d.events[static_cast<size_t>(d.flows[0].to)].name, std::string("pp.recv.fwd"));
  for (const gui::TimelineEvent& e : d.events)
    if (e.name == "L.mlp.fc1.fwd") {
      QCOMPARE(e.layer, 7);
      QCOMPARE(e.category, static_cast<int>(gui::kTlForward));
      QCOMPARE(e.start_s, 16e-6);
    }
}

void TimelineTest::title_and_headline_show_the_same_step_time() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  w.resize(1280, 800);
  w.show();
  w.tabs()->setCurrentWidget(w.timeline_view());
  QApplication::processEvents();
  const double step = w.session()->estimate().time.step_s;
  const QString text = gui::detail::step_time_text(step);
  QVERIFY2(w.estimate_view()->summary_text().contains("<b>step time</b> " + text),
           qPrintable(w.estimate_view()->summary_text()));
  QVERIFY2(w.timeline_view()->timeline()->title().contains("step time " + text),
           qPrintable(w.timeline_view()->timeline()->title()));
  QVERIFY(w.estimate_view()->time_panel()->chart()->title().contains(text));
  QCOMPARE(w.timeline_view()->timeline()->data().step_s, step);
}

void TimelineTest::plot_renders_every_row() {
  const Scenario s = llama70b_with_pp(16);
  std::string err;
  const QByteArray png = gui::render_plot("timeline", s, {}, QSize(1200, 700), gui::ImageFormat::kPng, &err);
  QVERIFY2(!png.isEmpty(), err.c_str());
  const gui::TimelineData d = gui::timeline_data(s, estimate(s));
  gui::TimelineWidget probe;
  probe.set_data(d, gui::timeline_title(d, 16));
  probe.resize(1200, 700);
  QImage img = QImage::fromData(png, "PNG");
  QCOMPARE(img.width(), 2400);
  // Taller than asked: 16 stages' rows at full height.
  QCOMPARE(img.height(), 2 * std::max(700, probe.minimumSizeHint().height()));
  QVERIFY(probe.minimumSizeHint().height() > 700);
  const QByteArray svg = gui::render_plot("timeline", s, {}, QSize(1200, 700), gui::ImageFormat::kSvg, &err);
  QVERIFY(svg.contains("stage 15  compute"));
  QVERIFY(svg.contains("recompute"));
  QVERIFY(svg.contains(gui::detail::step_time_text(estimate(s).time.step_s).toUtf8()));
}

QTEST_MAIN(TimelineTest)
#include "gui_timeline_test.moc"
