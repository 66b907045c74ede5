// lcm-gui update latency: one layout control change -> re-validate, re-estimate, rebuild the
// layout panel's valid-value lists and the estimate view's summary and charts (what the
// user waits for before the window shows the new numbers). Budget: 16 ms (one frame at
// 60 Hz). Also the timeline's rebuild, which happens only while its tab is shown.
//   QT_QPA_PLATFORM=offscreen build/bin/lcm_bench_gui
#include <cstdlib>

#include <QApplication>
#include <QComboBox>
#include <QStandardItemModel>
#include <benchmark/benchmark.h>

#include "lcm/gui/estimate_view.hpp"
#include "lcm/gui/layout_panel.hpp"
#include "lcm/gui/main_window.hpp"
#include "lcm/gui/scenario_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/model/estimate.hpp"

namespace {

lcm::gui::MainWindow* window(const char* scenario) {
  static lcm::gui::MainWindow* w = nullptr;
  static std::string loaded;
  if (!w) {
    w = new lcm::gui::MainWindow();
    w->resize(1600, 1000);
    w->setAttribute(Qt::WA_DontShowOnScreen);
    w->show();
  }
  if (loaded != scenario) {
    if (!w->scenario_panel()->open_file(QStringLiteral(LCM_SOURCE_DIR "/scenarios/") + scenario)) std::abort();
    loaded = scenario;
  }
  return w;
}

// Alternates a knob between its current value and the first other value the combo box
// offers (a valid layout), through the combo box.
void BM_LayoutChange(benchmark::State& state, const char* scenario, lcm::gui::LayoutPanel::Knob knob) {
  lcm::gui::MainWindow* w = window(scenario);
  QComboBox* c = w->layout_panel()->combo(knob);
  const int a = c->currentData().toInt();
  int b = a;
  auto* model = qobject_cast<QStandardItemModel*>(c->model());
  for (int i = 0; i < c->count() && b == a; ++i)
    if (model->item(i)->isEnabled() && c->itemData(i).toInt() != a) b = c->itemData(i).toInt();
  if (b == a) {
    state.SkipWithError("no other valid value");
    return;
  }
  int next = b;
  for (auto _ : state) {
    if (!w->layout_panel()->choose(knob, next)) state.SkipWithError("value not offered");
    QApplication::processEvents();
    benchmark::DoNotOptimize(w->session()->estimate().time.step_s);
    next = next == a ? b : a;
  }
  state.SetLabel(QString("%1 %2 <-> %3").arg(c->objectName()).arg(a).arg(b).toStdString());
}
using lcm::gui::LayoutPanel;
BENCHMARK_CAPTURE(BM_LayoutChange, default_pp, "default.yaml", LayoutPanel::kPp)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LayoutChange, default_tp, "default.yaml", LayoutPanel::kTp)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LayoutChange, deepseek_v3_ep, "deepseek-v3.yaml", LayoutPanel::kEp)->Unit(benchmark::kMillisecond);

// The pieces: the model's estimate alone, and the estimate view's rebuild (summary + charts).
void BM_EstimateOnly(benchmark::State& state) {
  lcm::gui::MainWindow* w = window("default.yaml");
  for (auto _ : state) benchmark::DoNotOptimize(lcm::estimate(w->session()->scenario()).time.step_s);
}
BENCHMARK(BM_EstimateOnly)->Unit(benchmark::kMillisecond);

void BM_EstimateViewRebuild(benchmark::State& state) {
  lcm::gui::MainWindow* w = window("default.yaml");
  for (auto _ : state) w->estimate_view()->refresh();
}
BENCHMARK(BM_EstimateViewRebuild)->Unit(benchmark::kMillisecond);

void BM_TimelineRebuild(benchmark::State& state) {
  lcm::gui::MainWindow* w = window("default.yaml");
  for (auto _ : state) w->timeline_view()->refresh();
}
BENCHMARK(BM_TimelineRebuild)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
