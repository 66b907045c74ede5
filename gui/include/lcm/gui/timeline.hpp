// The predicted timeline of one step as an interactive view (Timeline tab, `lcm plot
// timeline`): the events of report::predicted_trace (op detail) on one row per pipeline
// stage and stream, coloured by pass (forward, backward, recompute, optimizer step) on the
// compute stream and by dimension on the communication streams; pipeline send -> receive
// flow arrows; zoom and pan (mouse wheel, drag, keys + - 0 and arrows); hover details (op,
// layer, micro-batch, start, duration, stream). Nothing here computes a time: every start
// and duration is the trace's, the step time is Estimate::time.step_s.
#pragma once

#include <string>
#include <vector>

#include <QByteArray>
#include <QColor>
#include <QString>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "lcm/gui/chart_export.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::gui {

// Categories, in legend order: compute passes, then one per communication stream.
enum TimelineCategory : int {
  kTlForward,
  kTlBackward,
  kTlRecompute,
  kTlStep,
  kTlTpComm,
  kTlCpComm,
  kTlEpComm,
  kTlDpComm,
  kTlPpComm,
  kTlNumCategories
};
const char* timeline_category_name(int category);  // "forward", ..., "PP send/recv"
QColor timeline_category_color(int category);  // distinct for every category

struct TimelineRow {
  int stage = 0;  // trace pid
  int stream = 0;  // trace tid (lcm::Stream)
  QString label;  // "stage 3  compute"
};

struct TimelineEvent {
  int row = 0;
  int category = 0;
  double start_s = 0;
  double end_s = 0;
  std::string name;  // op name (ops.hpp name table)
  int layer = -1;  // args.layer (global transformer layer), -1 when none
  int mtp_depth = -1;  // args.mtp_depth, -1 when none
  int micro_batch = -1;  // args.micro_batch
  bool overlapped = false;  // args.overlapped (communication hidden under compute)
};

// A pipeline transfer: the send event on one stage to the receive event on the next.
struct TimelineFlow {
  int from = 0;  // index into events
  int to = 0;
};

struct TimelineData {
  std::vector<TimelineRow> rows;  // stage-major; every stage's compute row, then its used streams
  std::vector<TimelineEvent> events;  // per row in start order
  std::vector<TimelineFlow> flows;
  double step_s = 0;  // Estimate::time.step_s (the title and the step-end line)
  double end_s = 0;  // the last event's end (the trace may run past step_s)
};

// From a Chrome trace as report::predicted_trace writes it (X events with pid = stage,
// tid = stream, args). Flow events ("s" / "f" with one id) become flows when the trace
// has them; otherwise each PP send is paired with the receive of the same micro-batch and
// pass on the neighbouring stage.
TimelineData timeline_from_trace(const nlohmann::ordered_json& trace, double step_s);
// The predicted trace of `s` (valid, estimated as `e`) as timeline data.
TimelineData timeline_data(const Scenario& s, const Estimate& e);

// "Predicted timeline of one step: step time 62.4 s (1F1B, pp = 4)".
QString timeline_title(const TimelineData& d, int pp);

class TimelineWidget : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineWidget(QWidget* parent = nullptr);
  void set_data(TimelineData d, QString title);
  const TimelineData& data() const { return data_; }
  const QString& title() const { return title_; }

  // The visible time window (seconds); zoom keeps the time under `anchor_x` in place.
  double view_start() const { return t0_; }
  double view_end() const { return t1_; }
  void set_view(double t0, double t1);
  void zoom(double factor, int anchor_x);  // factor > 1 zooms in
  void pan_pixels(int dx);
  void reset_view();

  // Geometry (widget coordinates): the label gutter's width, a row's vertical centre,
  // the x of a time; the event under a point (-1 if none) and its hover text.
  int gutter_width() const;
  int row_center(int row) const;
  double x_of(double t) const;
  int event_at(QPoint p) const;
  QString event_text(int event) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  // Paints the whole view into `p` as shown at `size` (screen, PNG or SVG).
  void paint_to(QPainter& p, QSize size) const;
  // The view rendered at `size` (the widget is laid out at that size first).
  QByteArray render(QSize size, ImageFormat f);

 protected:
  void paintEvent(QPaintEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;  // tooltips

 private:
  int header_height() const;
  int legend_height(int width) const;
  int axis_height() const;
  int row_height() const;
  int plot_right(int width) const;

  TimelineData data_;
  QString title_;
  std::vector<std::vector<int>> by_row_;  // event indices per row, by start
  double t0_ = 0, t1_ = 1;
  bool dragging_ = false;
  int drag_x_ = 0;
};

}  // namespace lcm::gui
