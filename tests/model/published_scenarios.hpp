// The scenarios tests/model/perf_validation_test.cpp builds from the published H100 tables
// (validation/published/: megatron_bridge_perf_summary.csv, nemo_24.07_h100.csv,
// megatron_weak_scaling_h100.csv), for tests that check other properties of the same runs
// (tests/model/no_false_oom_test.cpp: every run that ran must fit).
#pragma once

#include <string>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm::test {

struct PublishedScenario {
  std::string table;  // "bridge", "nemo", "weak", "nemo_long", "ci"
  std::string id;     // the row as perf_validation_test names it
  Scenario scenario;
  double published_step_s = 0;  // CI rows: iter_time_s_median_excl_first (0: none published)
};

// Every evaluated row of the four training-run tables (the three above and, since session 25,
// nemo_long_sequence_h100.csv; rows the model cannot express are left out).
// Defined in perf_validation_test.cpp.
std::vector<PublishedScenario> published_h100_scenarios();

// The Megatron-LM CI rows (megatron_functional_tests_h100.csv) that have a GPU count, imported
// from their flags as megatron_ci_memory_test.cpp imports them. Defined there.
std::vector<PublishedScenario> published_ci_scenarios();

}  // namespace lcm::test
