// EstimateView and TimelineView.
#include "lcm/gui/estimate_view.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QVBoxLayout>

#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/gui/session.hpp"

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
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(memory_);
  split->addWidget(time_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(summary_);
  lay->addWidget(split, 1);
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
  summary_->setText(
      QString("<b>step time</b> %1 s &nbsp; <b>throughput</b> %2 tokens/s per GPU (%3 tokens/s total) &nbsp; "
              "<b>MFU</b> %4% &nbsp; <b>HFU</b> %5% &nbsp; <b>%6</b> TFLOP/s per GPU<br>"
              "<b>peak memory</b> %7 GiB of %8 GiB HBM (worst stage %9) — <b style='color:%10'>%11</b>")
          .arg(t.step_s, 0, 'g', 4)
          .arg(loc.toString(t.tokens_per_s_per_gpu, 'f', 0))
          .arg(loc.toString(t.tokens_per_s, 'f', 0))
          .arg(t.mfu * 100, 0, 'f', 1)
          .arg(t.hfu * 100, 0, 'f', 1)
          .arg(t.model_tflops_per_gpu, 0, 'f', 0)
          .arg(e.memory.peak_bytes / kGiB, 0, 'f', 1)
          .arg(e.memory.hbm_bytes / kGiB, 0, 'f', 1)
          .arg(e.memory.worst_stage)
          .arg(e.memory.fits ? "#00796b" : "#b00020")
          .arg(e.memory.fits ? "fits" : "does not fit"));
  memory_->set_chart(memory_chart(s, e));
  time_->set_chart(step_time_chart(s, e));
}

TimelineView::TimelineView(Session* session, QWidget* parent)
    : QWidget(parent), session_(session), panel_(new ChartPanel("timeline", this)) {
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(panel_);
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
    panel_->set_chart(nullptr, "No estimate: the layout is not valid");
    return;
  }
  panel_->set_chart(timeline_chart(timeline_data(session_->scenario(), session_->estimate())));
}

}  // namespace lcm::gui
