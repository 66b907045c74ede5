// EstimateView and TimelineView.
#include "lcm/gui/estimate_view.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QVBoxLayout>

#include "chart_util.hpp"
#include "lcm/gui/chart_export.hpp"
#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/timeline.hpp"

namespace lcm::gui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

EstimateView::EstimateView(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      summary_(new QLabel(this)),
      memory_(new ChartPanel("memory", this)),
      time_(new ChartPanel("step-time", this)) {
  summary_->setObjectName("estimate_summary");
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  summary_->setStyleSheet("font-size: 11pt; padding: 4px;");
  auto* split = new FlowSplitter(1300, 430);
  split->addWidget(memory_);
  split->addWidget(time_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(summary_);
  lay->addWidget(in_scroll_area(split, this), 1);
  connect(session_, &Session::estimateChanged, this, &EstimateView::refresh);
  refresh();
}

QString EstimateView::summary_text() const { return summary_->text(); }

void EstimateView::refresh() {
  if (!session_->has_estimate()) {
    QString msg = "No estimate: the layout is not valid";
    if (!session_->problems().empty())
      msg += QString::fromStdString(" (" + session_->problems().front().key + ": " + session_->problems().front().message + ")");
    summary_->setText("<span style='color:#b00020'>" + msg.toHtmlEscaped() + "</span>");
    memory_->set_chart(nullptr, msg);
    time_->set_chart(nullptr, msg);
    return;
  }
  const Scenario& s = session_->scenario();
  const Estimate& e = session_->estimate();
  const StepTime& t = e.time;
  const QLocale loc(QLocale::English);
  // The memory verdict and the number it compares: Memory::fits holds when every stage's
  // peak_high (the top of its peak range) is within HBM, so the headline shows that stage's
  // peak_high, with its peak and range.
  const StageMemory& v = verdict_stage(e.memory);
  summary_->setText(
      QString("<b>step time</b> %1 &nbsp; <b>throughput</b> %2 tokens/s per GPU (%3 tokens/s total) &nbsp; "
              "<b>MFU</b> %4% &nbsp; <b>HFU</b> %5% &nbsp; <b>%6</b> TFLOP/s per GPU<br>"
              "<small>ranges: the model's 80% error band (docs/time-model.md, \"Error bands\"; its composition part is "
              "a development-set figure)</small><br>"
              "<b>memory</b> needs up to %7 GiB of %8 GiB HBM on stage %9 (peak %10 GiB, range %11–%7 GiB) — "
              "<b style='color:%12'>%13</b>")
          .arg(QString("%1 (%2–%3)")
                   .arg(detail::step_time_text(t.step_s))
                   .arg(detail::step_time_text(time_range(t.step_s, e.band).low))
                   .arg(detail::step_time_text(time_range(t.step_s, e.band).high)))
          .arg(QString("%1 (%2–%3)")
                   .arg(loc.toString(t.tokens_per_s_per_gpu, 'f', 0))
                   .arg(loc.toString(rate_range(t.tokens_per_s_per_gpu, e.band).low, 'f', 0))
                   .arg(loc.toString(rate_range(t.tokens_per_s_per_gpu, e.band).high, 'f', 0)))
          .arg(loc.toString(t.tokens_per_s, 'f', 0))
          .arg(QString("%1 (%2–%3)")
                   .arg(t.mfu * 100, 0, 'f', 1)
                   .arg(rate_range(t.mfu, e.band).low * 100, 0, 'f', 1)
                   .arg(rate_range(t.mfu, e.band).high * 100, 0, 'f', 1))
          .arg(t.hfu * 100, 0, 'f', 1)
          .arg(t.model_tflops_per_gpu, 0, 'f', 0)
          .arg(v.peak_high / kGiB, 0, 'f', 2)
          .arg(e.memory.hbm_bytes / kGiB, 0, 'f', 2)
          .arg(v.stage)
          .arg(v.peak / kGiB, 0, 'f', 2)
          .arg(v.peak_low / kGiB, 0, 'f', 2)
          .arg(e.memory.fits ? "#00796b" : e.memory.may_fit ? "#e65100" : "#b00020")
          .arg(e.memory.fits ? "fits" : e.memory.may_fit ? "tight: may not fit" : "does not fit"));
  memory_->set_chart(memory_chart(s, e));
  time_->set_chart(step_time_chart(s, e));
}

TimelineView::TimelineView(Session* session, QWidget* parent)
    : QWidget(parent), session_(session), message_(new QLabel(this)), timeline_(new TimelineWidget()) {
  message_->setWordWrap(true);
  message_->setStyleSheet("color: #b00020;");
  message_->hide();
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(timeline_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* exp = new QPushButton("Export…", this);
  exp->setObjectName("export_timeline");
  exp->setToolTip("Save the timeline as shown (zoom included) as PNG or SVG");
  connect(exp, &QPushButton::clicked, this, [this] {
    export_dialog(this, "timeline", [this](const QString& p, QString* err) { return export_to(p, err); });
  });
  auto* bar = new QHBoxLayout();
  bar->addWidget(message_, 1);
  bar->addStretch();
  bar->addWidget(exp);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(scroll, 1);
  lay->addLayout(bar);
  connect(session_, &Session::estimateChanged, this, [this] {
    dirty_ = true;
    if (isVisible()) refresh();
  });
}

void TimelineView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) refresh();
}

void TimelineView::refresh() {
  dirty_ = false;
  if (!session_->has_estimate()) {
    timeline_->set_data({}, {});
    message_->setText("No estimate: the layout is not valid");
    message_->show();
    return;
  }
  message_->hide();
  TimelineData d = timeline_data(session_->scenario(), session_->estimate());
  QString title = timeline_title(d, session_->estimate().mesh.pp);
  timeline_->set_data(std::move(d), std::move(title));
}

bool TimelineView::export_to(const QString& path, QString* error) {
  const auto f = image_format_for(path);
  if (!f) {
    *error = QString("%1: expected a .png or .svg file name").arg(path);
    return false;
  }
  const QSize shown = timeline_->size();
  const QByteArray bytes = timeline_->render(shown, *f);
  return write_file_atomically(path, bytes, error);
}

}  // namespace lcm::gui
