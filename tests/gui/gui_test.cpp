// lcm-gui widgets driven offscreen: every number the GUI shows must equal what lcm::model /
// lcm::planner return for the same scenario and layout.
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStackedBarSeries>
#include <QStandardItemModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QProcess>
#include <QTableWidget>
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
#include "lcm/gui/plot.hpp"
#include "lcm/gui/sweep_tabs.hpp"
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
  void fp8_recipe_combo_sets_the_recipe();
  void document_length_and_lora_controls_set_the_scenario();
  void validation_tab_compares_the_committed_measurements();
  void export_writes_png_and_svg();
  void model_name_is_the_scenarios_own();
  void hardware_entry_is_the_scenarios_profile();
  void headline_chart_and_why_not_state_the_verdicts_number();
  void capacity_tab_says_once_why_a_dense_model_has_nothing();
  void validation_counts_agree_with_lcm_plot();
  void validation_default_comes_from_the_data_dir();
  void help_needs_no_display();
  void routing_skew_knob_prices_the_busiest_rank();
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

  // The table is what plan::search returns for the base scenario (with lcm plan's default: no
  // headroom, the memory band decides).
  plan::PlanOptions po;
  po.constraints.use_default_headroom();
  po.why_not = 10;  // as the planner tab asks
  const plan::PlanResult direct = plan::search(w.session()->base(), po);
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
  double slowest = 0;  // error-band ties are ordered by their band's high end, not by step time
  for (int i = 0; i < n; ++i) slowest = std::max(slowest, p->model()->ranked(i)->metrics.step_s);
  QCOMPARE(table->model()->index(0, gui::PlanTableModel::kStep).data(Qt::UserRole).toDouble(), slowest);
  QVERIFY(p->why_not_table()->model()->rowCount() > 0);
  // The why-not table lists the search's tight layouts (the memory band straddles HBM) first.
  QVERIFY(!direct.tight.empty());
  QAbstractItemModel* why = p->why_not_table()->model();
  int tight_rows = 0;
  for (int i = 0; i < why->rowCount(); ++i) tight_rows += why->index(i, 0).data().toString() == "tight (may fit)";
  QCOMPARE(tight_rows, static_cast<int>(direct.tight.size()));
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

// The routing-skew knob sets model.moe_routing_skew; the estimate is the model's for it (the
// default scenario's EP 8 Mixtral: one expert per rank, so its MoE layers slow down).
void GuiTest::routing_skew_knob_prices_the_busiest_rank() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  QVERIFY(w.session()->has_estimate());
  const double balanced = w.session()->estimate().time.step_s;
  auto* skew = w.scenario_panel()->findChild<QDoubleSpinBox*>("moe_routing_skew");
  QVERIFY(skew);
  QCOMPARE(skew->value(), 0.0);
  QCOMPARE(skew->text(), QString("balanced"));
  skew->setValue(1.0);
  QCOMPARE(w.session()->base().model.moe_routing_skew, 1.0);
  QVERIFY(w.session()->has_estimate());
  const Scenario& s = w.session()->base();
  const Estimate direct = estimate(plan::apply_layout(s, w.session()->layout()));
  QCOMPARE(w.session()->estimate().time.step_s, direct.time.step_s);
  QVERIFY2(direct.time.step_s > 1.2 * balanced, qPrintable(QString("%1 vs %2").arg(direct.time.step_s).arg(balanced)));
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

// The FP8 recipe combo: enabled with fp8 only; tensorwise reaches the scenario (and adds the
// amax pass: a slower step); blockwise runs on the profile's block-scaled GEMM term.
void GuiTest::fp8_recipe_combo_sets_the_recipe() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  auto* precision = w.scenario_panel()->findChild<QComboBox*>("precision");
  auto* recipe = w.scenario_panel()->findChild<QComboBox*>("fp8_recipe");
  QVERIFY(precision && recipe);
  QVERIFY(!recipe->isEnabled());
  precision->setCurrentIndex(precision->findData(static_cast<int>(Precision::kFp8)));
  emit precision->activated(precision->currentIndex());
  QVERIFY(recipe->isEnabled());
  QVERIFY(w.session()->has_estimate());
  const double delayed = w.session()->estimate().time.step_s;
  recipe->setCurrentIndex(recipe->findData(static_cast<int>(Fp8Recipe::kTensorwise)));
  emit recipe->activated(recipe->currentIndex());
  QCOMPARE(w.session()->base().training.fp8_recipe, Fp8Recipe::kTensorwise);
  QVERIFY(w.session()->has_estimate());
  QVERIFY(w.session()->estimate().time.step_s > delayed);
  // The default profile (h200-sxm.calibrated) carries the block-scaled term (0.6004 of the FP8
  // peak, below per-tensor's 0.6408): blockwise is valid and its GEMMs are slower.
  recipe->setCurrentIndex(recipe->findData(static_cast<int>(Fp8Recipe::kBlockwise)));
  emit recipe->activated(recipe->currentIndex());
  QCOMPARE(w.session()->base().training.fp8_recipe, Fp8Recipe::kBlockwise);
  QVERIFY2(w.session()->has_estimate(), qPrintable(w.scenario_panel()->error_text()));
  QVERIFY(w.session()->estimate().time.step_s > delayed);
}

// Packed documents and LoRA: each control reaches the scenario and the estimate; the LoRA
// targets are enabled with a rank, and unchecking every one is the loader's one-line error (the
// last valid scenario is kept).
void GuiTest::document_length_and_lora_controls_set_the_scenario() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kLlama8b));
  auto* doc = w.scenario_panel()->findChild<QSpinBox*>("document_length");
  auto* rank = w.scenario_panel()->findChild<QSpinBox*>("lora_rank");
  auto* qkv = w.scenario_panel()->findChild<QCheckBox*>("lora_qkv");
  QVERIFY(doc && rank && qkv);
  QVERIFY(w.session()->has_estimate());
  const Estimate unpacked = w.session()->estimate();
  QCOMPARE(doc->value(), 0);
  QCOMPARE(doc->maximum(), static_cast<int>(w.session()->base().training.seq_length));
  // Documents of 1024 tokens: attention runs within each, less work than over the sequence.
  doc->setValue(1024);
  QCOMPARE(w.session()->base().training.document_length, int64_t{1024});
  QVERIFY(w.session()->has_estimate());
  QVERIFY(w.session()->estimate().flops.model_flops < unpacked.flops.model_flops);
  QVERIFY(w.session()->estimate().time.step_s < unpacked.time.step_s);
  doc->setValue(0);
  QCOMPARE(w.session()->base().training.document_length, int64_t{0});

  // LoRA rank 16 on every target: the base model is frozen, no weight gradients, no base
  // optimizer state: a faster step and a smaller peak.
  QCOMPARE(rank->value(), 0);
  QVERIFY(!qkv->isEnabled());
  rank->setValue(16);
  QCOMPARE(w.session()->base().training.peft, Peft::kLora);
  QCOMPARE(w.session()->base().training.lora_rank, int64_t{16});
  QCOMPARE(w.session()->base().training.lora_targets, kLoraAllTargets);
  QVERIFY2(w.session()->has_estimate(), qPrintable(w.scenario_panel()->error_text()));
  QVERIFY(qkv->isEnabled());
  QVERIFY(w.session()->estimate().time.step_s < unpacked.time.step_s);
  QVERIFY(w.session()->estimate().memory.peak_bytes < unpacked.memory.peak_bytes);
  // qkv only.
  for (const char* name : {"lora_proj", "lora_fc1", "lora_fc2"})
    w.scenario_panel()->findChild<QCheckBox*>(name)->setChecked(false);
  QCOMPARE(w.session()->base().training.lora_targets, static_cast<uint32_t>(kLoraQkv));
  QVERIFY(w.scenario_panel()->error_text().isEmpty());
  // None: refused with the key; the scenario keeps qkv.
  qkv->setChecked(false);
  QVERIFY2(w.scenario_panel()->error_text().contains("training.lora_target_modules"),
           qPrintable(w.scenario_panel()->error_text()));
  QCOMPARE(w.session()->base().training.lora_targets, static_cast<uint32_t>(kLoraQkv));
  qkv->setChecked(true);
  QVERIFY(w.scenario_panel()->error_text().isEmpty());
  // Rank 0: peft none, every weight trains again (the estimate of the file's scenario).
  rank->setValue(0);
  QCOMPARE(w.session()->base().training.peft, Peft::kNone);
  QCOMPARE(w.session()->base().training.lora_rank, int64_t{0});
  QVERIFY(!qkv->isEnabled());
  QCOMPARE(w.session()->estimate().time.step_s, unpacked.time.step_s);
}

void GuiTest::validation_tab_compares_the_committed_measurements() {
  const QString dir = QStringLiteral(LCM_SOURCE_DIR "/validation/measured/h200");
  QVERIFY(QFileInfo(dir).isDir());
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
  QVERIFY(text.contains("pipeline stage (pp = 2"));
  QVERIFY(!mem->export_to(dir.filePath("m.jpg"), &err));
  QVERIFY(err.contains(".png or .svg"));
}

void GuiTest::hardware_entry_is_the_scenarios_profile() {
  // default.yaml names "h200-sxm.calibrated": the panel shows that profile, not "h200-sxm"
  // (a dotted name is not a file suffix), and the estimate uses it.
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  auto* hw = w.scenario_panel()->findChild<QComboBox*>("hardware");
  QVERIFY(hw != nullptr);
  QCOMPARE(hw->currentText(), QString("h200-sxm.calibrated"));
  QCOMPARE(w.session()->base().hardware.name, std::string("h200-sxm.calibrated"));
  // Saving it names the same profile (it wrote "profile: h200-sxm" before).
  QTemporaryDir dir;
  const QString saved = dir.filePath("saved.yaml");
  QString err;
  QVERIFY2(w.session()->save(saved, &err), qPrintable(err));
  QFile back(saved);
  QVERIFY(back.open(QIODevice::ReadOnly));
  QVERIFY(back.readAll().contains("profile: h200-sxm.calibrated\n"));
  // A path to a profile file selects its entry too.
  QFile src(kDefault);
  QVERIFY(src.open(QIODevice::ReadOnly));
  QByteArray text = src.readAll();
  src.close();
  text.replace("profile: h200-sxm.calibrated", "profile: " LCM_SOURCE_DIR "/hwprofiles/h100-sxm.yaml");
  const QString other = dir.filePath("by-path.yaml");
  QFile f(other);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text);
  f.close();
  QVERIFY(w.scenario_panel()->open_file(other));
  QCOMPARE(hw->currentText(), QString("h100-sxm"));
}

void GuiTest::model_name_is_the_scenarios_own() {
  // Llama 3.1 70B saved as "deepseek-v3.yaml": the panel shows the file's model, not the file name's.
  QTemporaryDir dir;
  const QString copy = dir.filePath("deepseek-v3.yaml");
  QVERIFY(QFile::copy(QStringLiteral(LCM_SOURCE_DIR "/scenarios/llama3.1-70b.yaml"), copy));
  auto own = io::load_scenario(copy.toStdString());
  QVERIFY(own.ok());
  QCOMPARE(own.value().model.name, std::string("Llama-3.1-70B"));
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(copy));
  auto* model = w.scenario_panel()->findChild<QComboBox*>("model");
  QCOMPARE(model->currentText(), QString("Llama-3.1-70B"));
  // A model no bundled scenario has: its own name, as an entry of its own.
  QFile src(copy);
  QVERIFY(src.open(QIODevice::ReadOnly));
  QByteArray text = src.readAll();
  src.close();
  text.replace("name: Llama-3.1-70B", "name: My-70B-variant");
  const QString other = dir.filePath("mixtral-8x7b.yaml");
  QFile f(other);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text);
  f.close();
  QVERIFY(w.scenario_panel()->open_file(other));
  QCOMPARE(model->currentText(), QString("My-70B-variant"));
  QCOMPARE(model->findText("My-70B-variant"), model->count() - 1);
  // Back to a bundled model: the extra entry goes, the bundled one is selected.
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  QCOMPARE(model->currentText(), QString("Mixtral-8x7B"));
  QCOMPARE(model->findText("My-70B-variant"), -1);
}

void GuiTest::headline_chart_and_why_not_state_the_verdicts_number() {
  // Mixtral 8x7B at 128K without recompute and one micro-batch per DP rank does not fit.
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  plan::Layout l = w.session()->layout();
  l.recompute = RecomputeGranularity::kNone;
  w.session()->set_layout(l);
  QVERIFY(w.session()->has_estimate());
  const Memory& m = w.session()->estimate().memory;
  // The verdict: Memory::fits holds exactly when the largest peak_high is within HBM.
  const StageMemory& v = gui::verdict_stage(m);
  for (const StageMemory& st : m.stages) QVERIFY(st.peak_high <= v.peak_high);
  QCOMPARE(m.fits, v.peak_high <= m.hbm_bytes);
  QVERIFY(!m.fits);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const QString needs = QString::number(v.peak_high / kGiB, 'f', 2);
  const QString summary = w.estimate_view()->summary_text();
  QVERIFY2(summary.contains("needs up to " + needs + " GiB"), qPrintable(summary));
  QVERIFY(summary.contains(QString("on stage %1").arg(v.stage)));
  QVERIFY(summary.contains(QString("range %1–%2 GiB").arg(v.peak_low / kGiB, 0, 'f', 2).arg(needs)));
  QVERIFY(summary.contains("does not fit"));
  QVERIFY(w.estimate_view()->memory_panel()->chart()->title().contains("up to " + needs + " GiB"));
  // The planner's why-not row of this layout names the same number (HBM + miss = peak_high).
  auto r = std::make_shared<plan::PlanResult>();
  r->out_of_memory.push_back(plan::Ranked{l, plan::metrics_of_estimate(w.session()->scenario()), {}, 0, {}, false});
  QCOMPARE(r->out_of_memory[0].metrics.miss_stage, v.stage);
  gui::WhyNotModel why;
  why.set_result(r, w.session()->base());
  QCOMPARE(why.rowCount(), 1);
  const QString detail = why.index(0, gui::WhyNotModel::kDetail).data().toString();
  QVERIFY2(detail.contains("needs up to " + needs + " GiB"), qPrintable(detail));
  QVERIFY(detail.contains(QString("on stage %1").arg(v.stage)));
  QVERIFY(detail.contains(QString("(%1 GiB over)").arg((v.peak_high - m.hbm_bytes) / kGiB, 0, 'f', 2)));
  // And a layout that fits says so with its own number.
  w.session()->set_layout(plan::layout_of(w.session()->base()));
  const StageMemory& v2 = gui::verdict_stage(w.session()->estimate().memory);
  QVERIFY(w.session()->estimate().memory.fits);
  QVERIFY(w.estimate_view()->summary_text().contains("needs up to " + QString::number(v2.peak_high / kGiB, 'f', 2)));
  QVERIFY(w.estimate_view()->summary_text().contains(">fits<"));
}

void GuiTest::capacity_tab_says_once_why_a_dense_model_has_nothing() {
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kLlama8b));
  w.resize(1280, 800);
  w.show();
  w.tabs()->setCurrentWidget(w.capacity_tab());
  QApplication::processEvents();
  // The reason is shown once among the tab's visible texts, and names the model.
  int said = 0;
  QString note;
  for (QLabel* l : w.capacity_tab()->findChildren<QLabel*>())
    if (l->isVisible() && l->text().contains("dense model")) ++said, note = l->text();
  QCOMPARE(said, 1);
  QVERIFY2(note.contains("Nothing to show for Llama-3.1-8B") && note.contains("num_experts = 0"), qPrintable(note));
  QCOMPARE(w.capacity_tab()->table()->rowCount(), 0);
  QVERIFY(w.capacity_tab()->panel()->chart()->series().isEmpty());
  // An MoE model fills the chart and the table, one row per capacity factor.
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  QApplication::processEvents();
  QCOMPARE(w.capacity_tab()->table()->rowCount(), static_cast<int>(gui::default_capacity_factors().size()));
}

void GuiTest::validation_counts_agree_with_lcm_plot() {
  // One set for both: the calibration inputs list (not the whole directory, which also holds
  // superseded and reference runs).
  const QString list = gui::default_validation_input();
  QVERIFY(list.endsWith("validation/measured/h200/calibration_inputs.txt"));
  gui::MainWindow w;
  QVERIFY(w.scenario_panel()->open_file(kDefault));
  const HardwareSpec& hw = w.session()->base().hardware;
  calib::Measurements m;
  QVERIFY(calib::read_measurements("@" + list.toStdString(), hw.interconnect.gpus_per_node, m).ok());
  const int points = static_cast<int>(m.points.size());
  QVERIFY(points > 100);
  // The window loaded the default at start.
  QCOMPARE(w.validation_tab()->model()->rowCount(), points);
  QVERIFY2(w.validation_tab()->status_text().contains(QString("%1 points").arg(points)),
           qPrintable(w.validation_tab()->status_text()));
  QVERIFY(!w.validation_tab()->status_text().contains("@"));
  QVERIFY(w.validation_tab()->status_text().startsWith(list));
  // `lcm plot validation` with its default input counts the same points.
  QTemporaryDir dir;
  QProcess p;
  p.start(QStringLiteral(LCM_BINARY_DIR "/bin/lcm"), {"plot", "validation", kDefault, "-o", dir.filePath("v.svg")});
  QVERIFY(p.waitForFinished(120000));
  QCOMPARE(p.exitCode(), 0);
  QFile svg(dir.filePath("v.svg"));
  QVERIFY(svg.open(QIODevice::ReadOnly));
  QVERIFY(svg.readAll().contains(QString("%1 points").arg(points).toUtf8()));
}

void GuiTest::validation_default_comes_from_the_data_dir() {
  // $LCM_DATA_DIR first (then <exe>/../share/lcm, then the source tree of a build-tree binary):
  // a data directory with its own copy of the list is the default.
  QTemporaryDir data;
  const QString sub = data.filePath("validation/measured/h200");
  QVERIFY(QDir().mkpath(sub));
  QVERIFY(QFile::copy(QStringLiteral(LCM_SOURCE_DIR "/validation/measured/h200/calibration_inputs.txt"),
                      sub + "/calibration_inputs.txt"));
  qputenv("LCM_DATA_DIR", data.path().toUtf8());
  const QString got = gui::default_validation_input();
  qunsetenv("LCM_DATA_DIR");
  QCOMPARE(got, QFileInfo(sub + "/calibration_inputs.txt").absoluteFilePath());
  QCOMPARE(gui::measurements_spec(got), "@" + got.toStdString());
  QCOMPARE(gui::measurements_spec("/x/results"), std::string("/x/results"));
}

void GuiTest::help_needs_no_display() {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* k : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(k);
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(LCM_BINARY_DIR "/bin/lcm-gui"), {"--help"});
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitStatus(), QProcess::NormalExit);
  QCOMPARE(p.exitCode(), 0);
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QVERIFY2(out.contains("--screenshot") && out.contains("--size"), qPrintable(out));
}

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
