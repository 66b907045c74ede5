// lcm-gui widgets driven offscreen: every number the GUI shows must equal what lcm::model /
// lcm::planner return for the same scenario and layout.
#include <QBarSet>
#include <QChart>
#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStackedBarSeries>
#include <QStandardItemModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "lcm/gui/chart_panel.hpp"
#include "lcm/gui/charts.hpp"
#include "lcm/gui/estimate_view.hpp"
#include "lcm/gui/layout_panel.hpp"
#include "lcm/gui/main_window.hpp"
#include "lcm/gui/plan_table_model.hpp"
#include "lcm/gui/planner_tab.hpp"
#include "lcm/gui/scenario_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/validation_data.hpp"
#include "lcm/gui/validation_tab.hpp"
#include "lcm/model/calibration.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/calibrate/measurements.hpp"

using namespace lcm;
using lcm::gui::LayoutPanel;

namespace {

const QString kDefault = QStringLiteral(LCM_SOURCE_DIR "/scenarios/default.yaml");
const QString kLlama8b = QStringLiteral(LCM_SOURCE_DIR "/scenarios/llama3.1-8b.yaml");

// Every row's sort value (Qt::UserRole) in `column` is at most the one above it.
bool non_increasing(const QAbstractItemModel* m, int column) {
  for (int r = 1; r < m->rowCount(); ++r)
    if (m->index(r, column).data(Qt::UserRole).toDouble() > m->index(r - 1, column).data(Qt::UserRole).toDouble())
      return false;
  return m->rowCount() >= 2;
}

// The memory chart's stacked values (GiB) of set `set` at stage `stage`.
double bar_value(QChart* c, int set, int stage) {
  for (QAbstractSeries* s : c->series())
    if (auto* bars = qobject_cast<QStackedBarSeries*>(s)) return bars->barSets().at(set)->at(stage);
  return -1;
}

}  // namespace

class GuiTest : public QObject {
  Q_OBJECT

 private slots:
  void changing_a_parallel_degree_updates_the_estimate();
  void memory_groups_sum_to_the_stage_peak();
  void invalid_values_are_not_offered();
  void planner_run_fills_the_table_and_a_row_loads_its_layout();
  void cancel_stops_a_search();
  void bad_yaml_shows_the_error_with_its_key();
  void knob_change_that_breaks_the_layout_is_reported_with_its_key();
  void validation_tab_compares_the_committed_measurements();
  void export_writes_png_and_svg();
};

void GuiTest::changing_a_parallel_degree_updates_the_estimate() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  gui::Session* s = w.session();
  QVERIFY(s->has_estimate());
  const double before = s->estimate().time.step_s;
  QCOMPARE(s->layout().pp, 2);

  // PP 2 -> 4 through the combo box, as a user would.
  QVERIFY(w.layout_panel()->choose(LayoutPanel::kPp, 4));
  QCOMPARE(s->layout().pp, 4);
  const Scenario expected_s = plan::apply_layout(s->base(), s->layout());
  QVERIFY(validate_scenario(expected_s).empty());
  const Estimate expected = estimate(expected_s);
  QVERIFY(s->has_estimate());
  QCOMPARE(s->estimate().time.step_s, expected.time.step_s);
  QCOMPARE(s->estimate().memory.peak_bytes, expected.memory.peak_bytes);
  QCOMPARE(s->estimate().time.mfu, expected.time.mfu);
  QVERIFY(s->estimate().time.step_s != before);

  // The views show the new numbers: four stages in the memory chart, each bar the model's terms.
  QChart* mem = w.estimate_view()->memory_panel()->chart();
  QCOMPARE(static_cast<int>(expected.memory.stages.size()), 4);
  for (int st = 0; st < 4; ++st) {
    const gui::MemoryGroups g = gui::memory_groups(expected.memory.stages[static_cast<size_t>(st)]);
    QCOMPARE(bar_value(mem, 0, st), g.weights / (1024.0 * 1024.0 * 1024.0));
    QCOMPARE(bar_value(mem, 3, st), g.activations / (1024.0 * 1024.0 * 1024.0));
  }
  QVERIFY2(w.estimate_view()->summary_text().contains(QString::number(expected.time.step_s, 'g', 4)),
           qPrintable(w.estimate_view()->summary_text()));
  QVERIFY(w.estimate_view()->summary_text().contains(QString::number(expected.time.mfu * 100, 'f', 1)));
  QVERIFY(w.estimate_view()->time_panel()->chart()->title().contains(QString::number(expected.time.step_s, 'g', 4)));
}

void GuiTest::memory_groups_sum_to_the_stage_peak() {
  auto sc = io::load_scenario(kDefault.toStdString());
  QVERIFY(sc.ok());
  const Estimate e = estimate(sc.value());
  for (const StageMemory& st : e.memory.stages) {
    const gui::MemoryGroups g = gui::memory_groups(st);
    const double sum = g.weights + g.grads + g.optimizer + g.activations + g.buffers;
    QVERIFY(std::abs(sum - st.peak) <= 1e-9 * st.peak);
  }
  double terms = 0;
  for (const gui::TimeTerm& t : gui::step_time_terms(e.time)) terms += t.seconds;
  QVERIFY(std::abs(terms - e.time.step_s) <= 1e-9 * e.time.step_s);
}

void GuiTest::invalid_values_are_not_offered() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  // Mixtral has 32 heads over 8 query groups: TP 64 breaks the head split and must be
  // greyed out with the rule; choosing it is refused and the layout stays.
  QComboBox* tp = w.layout_panel()->combo(LayoutPanel::kTp);
  const int i = tp->findData(64);
  QVERIFY(i >= 0);
  auto* model = qobject_cast<QStandardItemModel*>(tp->model());
  QVERIFY(!model->item(i)->isEnabled());
  QVERIFY(!model->item(i)->toolTip().isEmpty());
  QVERIFY(!w.layout_panel()->choose(LayoutPanel::kTp, 64));
  QCOMPARE(w.session()->layout().tp, 2);
  // Every enabled value is valid on its own.
  for (int k = 0; k < tp->count(); ++k) {
    if (!model->item(k)->isEnabled()) continue;
    plan::Layout l = w.session()->layout();
    l.tp = tp->itemData(k).toInt();
    QVERIFY2(w.session()->problems_for(l).empty(), qPrintable(tp->itemText(k)));
  }
}

void GuiTest::planner_run_fills_the_table_and_a_row_loads_its_layout() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kLlama8b));
  gui::PlannerTab* p = w.planner_tab();
  QSignalSpy done(p, &gui::PlannerTab::searchFinished);
  p->start();
  QVERIFY(p->running());
  QVERIFY(!p->run_button()->isEnabled());
  QVERIFY(p->cancel_button()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(!p->running(), 120000);
  QCOMPARE(done.count(), 1);
  QCOMPARE(done.at(0).at(0).toBool(), true);
  QCOMPARE(p->progress()->value(), 1000);
  QTableView* table = p->table();
  QVERIFY(table->model()->rowCount() >= 2);

  // The table is what plan::search returns for the base scenario.
  const plan::PlanResult direct = plan::search(w.session()->base());
  QCOMPARE(p->model()->ranked(0)->metrics.step_s, direct.ranked.front().metrics.step_s);

  // Select the second-ranked layout: the session, the layout panel and the estimate follow.
  const int row = 1;
  const plan::Ranked* r = p->model()->ranked(row);
  QVERIFY(r);
  auto* proxy = qobject_cast<QSortFilterProxyModel*>(table->model());
  table->selectRow(proxy->mapFromSource(p->model()->index(row, 0)).row());
  QVERIFY(w.session()->layout() == r->layout);
  QCOMPARE(w.layout_panel()->combo(LayoutPanel::kTp)->currentData().toInt(), r->layout.tp);
  QCOMPARE(w.layout_panel()->combo(LayoutPanel::kPp)->currentData().toInt(), r->layout.pp);
  QCOMPARE(w.layout_panel()->combo(LayoutPanel::kCp)->currentData().toInt(), r->layout.cp);
  QVERIFY(w.session()->has_estimate());
  QCOMPARE(w.session()->estimate().time.step_s, r->metrics.step_s);
  QCOMPARE(w.session()->estimate().memory.peak_bytes, r->metrics.peak_bytes);

  // Sorting by step time descending puts the slowest ranked layout first.
  table->sortByColumn(gui::PlanTableModel::kStep, Qt::DescendingOrder);
  QVERIFY(non_increasing(table->model(), gui::PlanTableModel::kStep));
  const int n = p->model()->rowCount();
  QCOMPARE(table->model()->index(0, gui::PlanTableModel::kStep).data(Qt::UserRole).toDouble(),
           p->model()->ranked(n - 1)->metrics.step_s);
  QVERIFY(p->why_not_table()->model()->rowCount() > 0);
}

void GuiTest::cancel_stops_a_search() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  gui::PlannerTab* p = w.planner_tab();
  QSignalSpy done(p, &gui::PlannerTab::searchFinished);
  p->start();
  QVERIFY(p->running());
  p->cancel_button()->click();
  // Idle at once: the buttons, the progress and the status say so.
  QVERIFY(!p->running());
  QVERIFY(p->run_button()->isEnabled());
  QVERIFY(!p->cancel_button()->isEnabled());
  QCOMPARE(p->progress()->value(), 0);
  QVERIFY(p->status_text().contains("cancelled"));
  QCOMPARE(done.count(), 1);
  QCOMPARE(done.at(0).at(0).toBool(), false);
  // The search itself stopped (PlanOptions::stop), and its partial result never reaches
  // the table.
  p->wait_for_workers();
  QCOMPARE(p->stopped_searches(), 1);
  QCoreApplication::processEvents();
  QTest::qWait(50);
  QCOMPARE(p->table()->model()->rowCount(), 0);
  QCOMPARE(done.count(), 1);
  // A new search afterwards completes normally.
  p->start();
  QTRY_VERIFY_WITH_TIMEOUT(!p->running(), 120000);
  QVERIFY(p->table()->model()->rowCount() > 0);
}

void GuiTest::bad_yaml_shows_the_error_with_its_key() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  const double step = w.session()->estimate().time.step_s;
  QTemporaryDir dir;
  const QString bad = dir.filePath("bad.yaml");
  QFile f(bad);
  QVERIFY(f.open(QIODevice::WriteOnly));
  QFile src(kDefault);
  QVERIFY(src.open(QIODevice::ReadOnly));
  f.write(src.readAll().replace("  tensor_model_parallel_size: 2", "  tensor_model_paralel_size: 2"));
  f.close();
  QVERIFY(!w.scenario_panel()->open_file(bad));
  const QString err = w.scenario_panel()->error_text();
  QVERIFY2(err.contains("tensor_model_paralel_size"), qPrintable(err));
  QVERIFY2(err.contains("bad.yaml:"), qPrintable(err));
  auto* label = w.scenario_panel()->findChild<QLabel*>("scenario_error");
  QVERIFY(label && !label->isHidden());
  QVERIFY(label->text().contains("<b>parallel.tensor_model_paralel_size</b>"));
  // The document is unchanged.
  QCOMPARE(w.session()->path(), kDefault);
  QCOMPARE(w.session()->estimate().time.step_s, step);
  // A file that does not exist is an error too, not a crash.
  QVERIFY(!w.scenario_panel()->open_file(dir.filePath("missing.yaml")));
  QVERIFY(!w.scenario_panel()->error_text().isEmpty());
}

void GuiTest::knob_change_that_breaks_the_layout_is_reported_with_its_key() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  // 8 GPUs cannot hold TP 2 x CP 4 x PP 2 x EP 8.
  auto* gpus = w.scenario_panel()->findChild<QComboBox*>("num_gpus");
  gpus->setCurrentIndex(gpus->findData(8));
  emit gpus->activated(gpus->currentIndex());
  QCOMPARE(w.session()->base().num_gpus, 8);
  QVERIFY(!w.session()->has_estimate());
  QVERIFY(!w.session()->problems().empty());
  const QString err = w.scenario_panel()->error_text();
  QVERIFY2(err.contains(QString::fromStdString(w.session()->problems().front().key)), qPrintable(err));
  QVERIFY(w.estimate_view()->summary_text().contains("not valid"));
}

void GuiTest::validation_tab_compares_the_committed_measurements() {
  const QString dir = gui::default_results_dir();
  QVERIFY(!dir.isEmpty());
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  gui::ValidationTab* v = w.validation_tab();
  QVERIFY(v->load(dir));
  // The rows are the planner's reading of the results, predicted by lcm::compare.
  calib::Measurements m;
  QVERIFY(calib::read_measurements(dir.toStdString(), w.session()->base().hardware.interconnect.gpus_per_node, m).ok());
  const auto cmp = compare(m.points, w.session()->base().hardware);
  QCOMPARE(v->model()->rowCount(), static_cast<int>(cmp.size()));
  QVERIFY(cmp.size() > 20);
  for (size_t i = 0; i < cmp.size(); ++i) {
    QCOMPARE(v->model()->rows()[i].predicted_s, cmp[i].predicted_before_s);
    QCOMPARE(v->model()->rows()[i].measured_s, cmp[i].point->measured_s);
    QCOMPARE(v->model()->rows()[i].error, cmp[i].error_after());
  }
  // Sorted by |error|, largest first.
  QTableView* t = v->table();
  t->sortByColumn(gui::ValidationModel::kError, Qt::DescendingOrder);
  QVERIFY(non_increasing(t->model(), gui::ValidationModel::kError));
  // A directory without results is reported, not a crash.
  QTemporaryDir empty;
  QVERIFY(!v->load(empty.path()));
  QCOMPARE(v->model()->rowCount(), 0);
}

void GuiTest::export_writes_png_and_svg() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  w.resize(1400, 900);
  w.show();
  QTemporaryDir dir;
  QString err;
  gui::ChartPanel* mem = w.estimate_view()->memory_panel();
  QVERIFY2(mem->export_to(dir.filePath("m.png"), &err), qPrintable(err));
  QImage img(dir.filePath("m.png"));
  QVERIFY(!img.isNull());
  QVERIFY(img.width() >= 400);
  QVERIFY2(mem->export_to(dir.filePath("m.svg"), &err), qPrintable(err));
  QFile svg(dir.filePath("m.svg"));
  QVERIFY(svg.open(QIODevice::ReadOnly));
  const QByteArray text = svg.readAll();
  QVERIFY(text.contains("<svg"));
  QVERIFY(text.contains("stage 1"));
  QVERIFY(!mem->export_to(dir.filePath("m.jpg"), &err));
  QVERIFY(err.contains(".png or .svg"));
}

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
