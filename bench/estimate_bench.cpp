// Speed of one full estimate (all breakdowns) on one core. Target (issue 2): <= 5 us.
// Run: build/bin/lcm_bench_estimate [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/scenario_loader.hpp"

namespace {

lcm::Scenario load(const std::string& id) {
  auto r = lcm::io::load_scenario(std::string(LCM_SOURCE_DIR) + "/scenarios/" + id + ".yaml");
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().str().c_str());
    std::abort();
  }
  return r.value();
}

// Issue 2's "full estimate": parameters, FLOPs, memory per stage, communication.
void BM_Estimate(benchmark::State& state, const std::string& id) {
  const lcm::Scenario s = load(id);
  for (auto _ : state) {
    lcm::Estimate e = lcm::estimate(s, lcm::EstimateOptions{.with_time = false});
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}

// Everything above plus the op schedule and the step time.
void BM_EstimateWithTime(benchmark::State& state, const std::string& id) {
  const lcm::Scenario s = load(id);
  for (auto _ : state) {
    lcm::Estimate e = lcm::estimate(s, lcm::EstimateOptions{.with_time = true});
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK_CAPTURE(BM_EstimateWithTime, mixtral_8x7b, std::string("mixtral-8x7b"));
BENCHMARK_CAPTURE(BM_EstimateWithTime, deepseek_v3, std::string("deepseek-v3"));
BENCHMARK_CAPTURE(BM_Estimate, llama31_8b, std::string("llama3.1-8b"));
BENCHMARK_CAPTURE(BM_Estimate, llama31_70b, std::string("llama3.1-70b"));
BENCHMARK_CAPTURE(BM_Estimate, mixtral_8x7b, std::string("mixtral-8x7b"));
BENCHMARK_CAPTURE(BM_Estimate, qwen3_235b, std::string("qwen3-235b-a22b"));
BENCHMARK_CAPTURE(BM_Estimate, deepseek_v3, std::string("deepseek-v3"));

BENCHMARK_MAIN();
