// Speed of the layout planner: layouts evaluated per second (each with its validity,
// memory and, when it fits, step time), on 1 and 2 threads. Target (issue "Time model and
// planner"): >= 1,000,000 layouts/s on the 2-core CI machine with both cores; every layout
// of Mixtral-8x7B at 128K on 1024 GPUs in < 0.5 s, on 16384 GPUs in < 3 s.
// Run: build/bin/lcm_bench_plan [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/search/plan.hpp"

namespace {

lcm::Scenario load(const std::string& id, const std::string& seq, int gpus) {
  lcm::io::LoadOptions lo;
  lo.overrides.push_back({"seq_length", seq});
  auto r = lcm::io::load_scenario(std::string(LCM_SOURCE_DIR) + "/scenarios/" + id + ".yaml", lo);
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().str().c_str());
    std::abort();
  }
  lcm::Scenario s = r.value();
  s.num_gpus = gpus;
  return s;
}

// A whole search; the rate is layouts evaluated (valid or not) per second of wall time.
void BM_Plan(benchmark::State& state, const std::string& id, const std::string& seq, int gpus) {
  const lcm::Scenario s = load(id, seq, gpus);
  lcm::plan::PlanOptions o;
  o.threads = static_cast<int>(state.range(0));
  uint64_t layouts = 0, timed = 0, builds = 0;
  for (auto _ : state) {
    const lcm::plan::PlanResult r = lcm::plan::search(s, o);
    layouts += r.counts.evaluated;
    timed += r.counts.timed;
    builds += r.counts.schedules_built;
    benchmark::DoNotOptimize(r.ranked.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(layouts));
  state.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(layouts), benchmark::Counter::kIsRate);
  state.counters["layouts"] = static_cast<double>(layouts) / static_cast<double>(state.iterations());
  state.counters["timed"] = static_cast<double>(timed) / static_cast<double>(state.iterations());
  state.counters["schedules_built"] = static_cast<double>(builds) / static_cast<double>(state.iterations());
}

// One layout through a fresh estimate(): what the planner's sharing saves.
void BM_FreshEstimate(benchmark::State& state) {
  const lcm::Scenario s = load("mixtral-8x7b", "128K", 1024);
  lcm::plan::Layout l;
  l.tp = 2;
  l.cp = 8;
  l.pp = 4;
  l.ep = 8;
  l.etp = 1;
  l.mbs = 1;
  l.sharding = lcm::DpSharding::kOptim;
  const lcm::Scenario x = lcm::plan::apply_layout(s, l);
  for (auto _ : state) benchmark::DoNotOptimize(lcm::plan::metrics_of_estimate(x));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK_CAPTURE(BM_Plan, mixtral_128k_1024, std::string("mixtral-8x7b"), std::string("128K"), 1024)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Plan, mixtral_128k_16384, std::string("mixtral-8x7b"), std::string("128K"), 16384)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Plan, deepseek_v3_32k_1024, std::string("deepseek-v3"), std::string("32K"), 1024)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_FreshEstimate);

BENCHMARK_MAIN();
