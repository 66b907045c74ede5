// ChartPanel.
#include "lcm/gui/chart_panel.hpp"

#include <QChart>
#include <QChartView>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QVBoxLayout>

#include "lcm/gui/chart_export.hpp"

namespace lcm::gui {

ChartPanel::ChartPanel(const QString& name, QWidget* parent)
    : QWidget(parent), name_(name), view_(new QChartView(this)), message_(new QLabel(this)) {
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumSize(320, 220);
  message_->setWordWrap(true);
  message_->setStyleSheet("color: #b00020;");
  message_->hide();
  auto* exp = new QPushButton("Export…", this);
  exp->setToolTip("Save this chart as PNG or SVG");
  exp->setObjectName("export_" + name);
  connect(exp, &QPushButton::clicked, this, &ChartPanel::export_dialog);
  auto* bar = new QHBoxLayout();
  bar->addWidget(message_, 1);
  bar->addStretch();
  bar->addWidget(exp);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(view_, 1);
  lay->addLayout(bar);
}

void ChartPanel::set_chart(QChart* chart, const QString& message) {
  QChart* old = view_->chart();
  if (!chart) chart = new QChart();
  view_->setChart(chart);
  delete old;
  message_->setText(message);
  message_->setVisible(!message.isEmpty());
}

FlowSplitter::FlowSplitter(int side_by_side, int stacked_height, QWidget* parent)
    : QSplitter(Qt::Horizontal, parent), side_by_side_(side_by_side), stacked_height_(stacked_height) {
  setChildrenCollapsible(false);
}

void FlowSplitter::resizeEvent(QResizeEvent* e) {
  const Qt::Orientation o = e->size().width() >= side_by_side_ ? Qt::Horizontal : Qt::Vertical;
  if (o != orientation()) {
    setOrientation(o);
    setMinimumHeight(o == Qt::Vertical ? count() * stacked_height_ + (count() - 1) * handleWidth() : 0);
    setSizes(QList<int>(count(), 1));  // equal shares in the new direction
  }
  QSplitter::resizeEvent(e);
}

QWidget* in_scroll_area(QWidget* w, QWidget* parent) {
  auto* scroll = new QScrollArea(parent);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setWidget(w);
  return scroll;
}

QChart* ChartPanel::chart() const { return view_->chart(); }

bool ChartPanel::export_to(const QString& path, QString* error) {
  const auto f = image_format_for(path);
  if (!f) {
    *error = QString("%1: expected a .png or .svg file name").arg(path);
    return false;
  }
  return write_file_atomically(path, render_view(view_, *f), error);
}

void ChartPanel::export_dialog() {
  gui::export_dialog(this, name_, [this](const QString& p, QString* err) { return export_to(p, err); });
}

void export_dialog(QWidget* parent, const QString& stem, const std::function<bool(const QString&, QString*)>& write) {
  QString selected;
  const QString path = QFileDialog::getSaveFileName(parent, "Export chart", stem + ".png",
                                                    "PNG image (*.png);;SVG image (*.svg)", &selected);
  if (path.isEmpty()) return;
  QString p = path;
  if (!image_format_for(p)) p += selected.contains("svg") ? ".svg" : ".png";
  QString err;
  if (!write(p, &err)) QMessageBox::warning(parent, "Export failed", err);
}

}  // namespace lcm::gui
