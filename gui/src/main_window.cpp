// MainWindow.
#include "lcm/gui/main_window.hpp"

#include <QApplication>
#include <QDir>
#include <QEventLoop>
#include <QMenuBar>
#include <QPixmap>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "lcm/gui/estimate_view.hpp"
#include "lcm/gui/layout_panel.hpp"
#include "lcm/gui/planner_tab.hpp"
#include "lcm/gui/scenario_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/sweep_tabs.hpp"
#include "lcm/gui/validation_data.hpp"
#include "lcm/gui/validation_tab.hpp"

namespace lcm::gui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      session_(new Session(this)),
      scenario_(new ScenarioPanel(session_)),
      layout_(new LayoutPanel(session_)),
      tabs_(new QTabWidget()),
      estimate_(new EstimateView(session_)),
      timeline_(new TimelineView(session_)),
      planner_(new PlannerTab(session_)),
      scaling_(new ScalingTab(session_)),
      capacity_(new CapacityTab(session_)),
      validation_(new ValidationTab(session_)) {
  setWindowTitle("lcm — long-context MoE training planner");
  auto* left = new QWidget();
  auto* left_lay = new QVBoxLayout(left);
  left_lay->addWidget(scenario_);
  left_lay->addWidget(layout_);
  left_lay->addStretch();
  auto* scroll = new QScrollArea();
  scroll->setWidget(left);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(340);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  tabs_->addTab(estimate_, "Estimate");
  tabs_->addTab(timeline_, "Timeline");
  tabs_->addTab(planner_, "Planner");
  tabs_->addTab(scaling_, "Scaling");
  tabs_->addTab(capacity_, "Capacity");
  tabs_->addTab(validation_, "Validation");
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(scroll);
  split->addWidget(tabs_);
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);
  setCentralWidget(split);

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open scenario…", QKeySequence::Open, scenario_, &ScenarioPanel::open_dialog);
  file->addAction("&Save scenario as…", QKeySequence::SaveAs, scenario_, &ScenarioPanel::save_dialog);
  file->addAction("&Import Megatron command line…", scenario_, &ScenarioPanel::import_dialog);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
  const QString results = default_validation_input();
  if (!results.isEmpty()) validation_->load(results);
}

bool MainWindow::save_screenshots(const QString& dir, QString* error) {
  if (!QDir().mkpath(dir)) {
    *error = QString("cannot create %1").arg(dir);
    return false;
  }
  static const char* const kNames[] = {"estimate", "timeline", "planner", "scaling", "capacity", "validation"};
  for (int i = 0; i < tabs_->count(); ++i) {
    if (tabs_->widget(i) == capacity_) capacity_->set_zipf(1.2);  // skewed routing shows more than balanced
    tabs_->setCurrentIndex(i);
    QApplication::processEvents();
    if (tabs_->currentWidget() == planner_ && planner_->model() && !planner_->running()) {
      QEventLoop loop;
      connect(planner_, &PlannerTab::searchFinished, &loop, &QEventLoop::quit);
      planner_->start();
      loop.exec();
      QApplication::processEvents();
    }
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(QString("%1.png").arg(kNames[i]));
    if (!grab().save(path, "PNG")) {
      *error = QString("cannot write %1").arg(path);
      return false;
    }
  }
  tabs_->setCurrentIndex(0);
  return true;
}

}  // namespace lcm::gui
