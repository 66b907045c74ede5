// Validation of the memory model against Megatron-LM's CI golden values on DGX-H100.
//
// Every row of validation/published/megatron_functional_tests_h100.csv that has
// mem_max_allocated_bytes_max is turned into a Megatron flag list (column name = flag
// name; "True" = bare flag; blank = absent), imported as Megatron would read it, and the
// predicted allocator peak (StageMemory::allocated) of the pipeline stage that holds global
// rank world_size - 1 is compared with the measured figure: Megatron logs
// torch.cuda.memory_stats()["allocated_bytes.all.peak"] to tensorboard from that rank only,
// and the CSV's _max is the maximum over logged iterations.
//
// The table is printed; docs/validation-memory.md records it. The test fails when the mean
// or the worst absolute error exceeds the bounds recorded below (what the model achieves,
// rounded up slightly), or when too few rows could be evaluated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/uncertainty.hpp"
#include "published_scenarios.hpp"

namespace {

// Recorded bounds: what the model achieves with the real importer (mean 4.0%, worst 27.8%,
// 39 of 44 evaluated rows within 10%), rounded slightly so that regressions fail. The worst
// row relies on flags the CSV does not carry (dropout 0, interleaving); docs/validation-memory.md
// lists every row's omitted flags. These rows are a DEVELOPMENT set: the model's structure was
// changed while looking at them. The within-10% count was 40 before the FP8 saved-input terms
// (issue 12): they move the FP8 TP-overlap row from -8.7% to -10.8%, a row whose userbuffers and
// FP8 parameters (--tp-comm-overlap, --fp8-param-gather) are not modelled; the count was lowered
// to 39 for that reason, not tuned.
constexpr double kMeanErrorBoundPct = 4.5;
constexpr double kWorstErrorBoundPct = 30.0;
constexpr int kMinEvaluatedRows = 44;
constexpr int kMinRowsWithin10Pct = 39;

const char* kCsv = LCM_SOURCE_DIR "/validation/published/megatron_functional_tests_h100.csv";

// Columns that are not Megatron flags.
const std::set<std::string> kNonFlagColumns = {
    "category", "test_case", "test_type", "platform", "recipe", "num_gpus_assumed",
    "iter_time_s_median_excl_first", "iter_time_s_min", "iter_time_steps",
    "mem_allocated_bytes_last", "mem_max_allocated_bytes_max", "dp_derived"};

// Features present in CI rows that lcm's memory model does not express; such rows are
// reported as skipped with the reason.
struct Unsupported {
  const char* flag;
  const char* reason;
};
const Unsupported kUnsupported[] = {
    {"cuda-graph-impl", "CUDA graphs: static input/output buffers and private memory pools are not modelled"},
};

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

struct Row {
  std::map<std::string, std::string> cols;
  std::vector<std::string> order;  // column order, for a stable flag order
  const std::string& get(const std::string& k) const {
    static const std::string empty;
    auto it = cols.find(k);
    return it == cols.end() ? empty : it->second;
  }
};

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  if (!std::getline(in, line)) return rows;
  const std::vector<std::string> header = split_csv_line(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    Row r;
    r.order = header;
    for (size_t i = 0; i < header.size(); ++i) r.cols[header[i]] = i < cells.size() ? cells[i] : "";
    rows.push_back(std::move(r));
  }
  return rows;
}

// The row's flags as Megatron would receive them. Lists are written "[a b c]" in the CSV
// (nargs='+' flags); they are passed space-separated.
std::vector<lcm::io::MegatronFlag> row_flags(const Row& r, int line) {
  std::vector<lcm::io::MegatronFlag> flags;
  for (const std::string& col : r.order) {
    if (kNonFlagColumns.count(col) || col.rfind("env_", 0) == 0) continue;
    std::string v = r.get(col);
    if (v.empty() || v == "False") continue;
    lcm::io::MegatronFlag f;
    f.name = col;
    f.file = "megatron_functional_tests_h100.csv";
    f.line = line;
    if (v == "True") {
      f.value = "";
    } else {
      if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
      f.value = v;
    }
    flags.push_back(f);
  }
  // The CSV omits file-path flags. Rows without a tokenizer type or vocab size run with
  // --vocab-file pointing at the GPT-2 BPE vocabulary (50257 tokens; checked in every such
  // model_config.yaml at d98e8a64), which Megatron pads like any other vocabulary.
  const auto add = [&](const char* name, const char* value, const char* source) {
    flags.push_back(lcm::io::MegatronFlag{.name = name, .value = value, .file = source, .line = line});
  };
  if (r.get("tokenizer-type").empty() && r.get("vocab-size").empty())
    add("vocab-size", "50257", "GPT-2 BPE vocab-file (not in the CSV)");
  // The CSV has no column for --microbatch-group-size-per-virtual-pipeline-stage. The one row
  // that sets it (micro-batches 40 / (4 x dp 2) = 5 on pp 4 with interleaving, which Megatron
  // only runs with a group of 5) has it from its model_config.yaml
  // (tests/functional_tests/test_cases/gpt/<test>/model_config.yaml, NVIDIA/Megatron-LM 5739fce).
  if (r.get("test_case") == "gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_tunable_overlap")
    add("microbatch-group-size-per-virtual-pipeline-stage", "5", "model_config.yaml of the test (not in the CSV)");
  return flags;
}

#ifndef LCM_PUBLISHED_SCENARIOS_ONLY  // no_false_oom_test links this file for its scenarios only
// Per-stage terms in GiB (set LCM_MEMORY_BREAKDOWN=1 to print them for every row).
void print_breakdown(const std::string& name, const lcm::Memory& mem) {
  constexpr double g = 1024.0 * 1024.0 * 1024.0;
  std::printf("%s\n  st  weights  grads  main  optim  fsdp   fp8  act/mb  inflt    act  logits trans  comm  alloc\n",
              name.c_str());
  for (const auto& st : mem.stages)
    std::printf("  %2d %7.3f %6.3f %5.3f %6.3f %5.3f %5.3f %7.3f %6.2f %6.3f %7.3f %5.3f %5.3f %6.3f\n", st.stage,
                st.weights / g, st.grads / g, st.main_params / g, st.optimizer_states / g,
                st.fsdp_gather_buffers / g, st.fp8_weight_cache / g, st.activations_per_microbatch / g,
                st.in_flight_microbatches, st.activations / g, st.logits_and_loss / g, st.transient_peak / g,
                st.comm_buffers / g, st.allocated / g);
}

struct Result {
  std::string name;
  bool evaluated = false;
  std::string skip_reason;
  double predicted = 0, measured = 0, error_pct = 0;
  int worst_stage = 0;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<Result> evaluate_all() {
  std::vector<Result> results;
  const std::vector<Row> rows = read_rows(kCsv);
  auto hw = lcm::io::load_hardware_profile(LCM_SOURCE_DIR "/hwprofiles/h100-sxm.yaml");
  if (!hw.ok()) {
    ADD_FAILURE() << "cannot load the h100-sxm profile: " << hw.error().str();
    return results;
  }
  int line = 1;
  for (const Row& r : rows) {
    ++line;
    const std::string& measured = r.get("mem_max_allocated_bytes_max");
    if (measured.empty()) continue;
    Result res;
    res.name = r.get("test_case");
    res.measured = std::stod(measured);
    for (const Unsupported& u : kUnsupported) {
      if (!r.get(u.flag).empty() && r.get(u.flag) != "none") res.skip_reason = u.reason;
    }
    if (res.skip_reason.empty()) {
      const int gpus = r.get("num_gpus_assumed").empty() ? 8 : std::stoi(r.get("num_gpus_assumed"));
      auto sc = lcm::io::import_megatron(row_flags(r, line), gpus, hw.value(), res.name);
      if (!sc.ok()) {
        res.skip_reason = "not importable on " + std::to_string(gpus) + " GPUs: " + sc.error().str();
      } else {
        const lcm::Scenario& s = sc.value();
        const lcm::Mesh m = lcm::derive_mesh(s);
        const auto layers = lcm::stage_layers(s, m);
        const auto params = lcm::gpu_params(s, m, layers);
        const lcm::Memory mem = lcm::estimate_memory(s, m, layers, params);
        // The CI figure is logged by the tensorboard writer, which exists only on global
        // rank world_size - 1 (megatron/training/global_vars.py::_set_tensorboard_writer;
        // training.py::training_log logs that rank's torch.cuda.memory_stats()). Compare
        // with the pipeline stage that rank sits on under the scenario's rank order.
        const lcm::RankGrid grid = lcm::dense_grid(m, s.parallel);
        const int stage = lcm::coords_of(grid, m.world - 1)[static_cast<size_t>(lcm::Dim::kPp)];
        res.evaluated = true;
        res.worst_stage = stage;
        res.predicted = mem.stages[static_cast<size_t>(stage)].allocated;
        res.error_pct = 100.0 * (res.predicted - res.measured) / res.measured;
        if (std::getenv("LCM_MEMORY_BREAKDOWN") != nullptr) print_breakdown(res.name, mem);
      }
    }
    results.push_back(res);
  }
  return results;
}

TEST(MegatronCiMemory, AllocatedPeakWithinRecordedBounds) {
  const std::vector<Result> results = evaluate_all();
  ASSERT_FALSE(results.empty()) << "no rows with mem_max_allocated_bytes_max in " << kCsv;

  std::printf("\n%-84s %10s %10s %8s %5s\n", "test case", "pred GiB", "meas GiB", "err %", "stage");
  double sum_abs = 0, worst = 0;
  std::string worst_name;
  int n = 0, within10 = 0;
  for (const Result& r : results) {
    if (!r.evaluated) continue;
    within10 += std::fabs(r.error_pct) <= 10.0 ? 1 : 0;
    std::printf("%-84s %10.3f %10.3f %+8.1f %5d\n", r.name.c_str(), r.predicted / kGiB,
                r.measured / kGiB, r.error_pct, r.worst_stage);
    sum_abs += std::fabs(r.error_pct);
    if (std::fabs(r.error_pct) > worst) {
      worst = std::fabs(r.error_pct);
      worst_name = r.name;
    }
    ++n;
  }
  for (const Result& r : results) {
    if (r.evaluated) continue;
    std::printf("SKIPPED %-76s %s\n", r.name.c_str(), r.skip_reason.c_str());
  }
  const double mean = n > 0 ? sum_abs / n : 0.0;
  std::printf("evaluated %d of %zu rows; mean |error| %.1f%%, worst %.1f%% (%s); %d within 10%%\n",
              n, results.size(), mean, worst, worst_name.c_str(), within10);

  EXPECT_GE(n, kMinEvaluatedRows);
  EXPECT_GE(within10, kMinRowsWithin10Pct);
  EXPECT_LE(mean, kMeanErrorBoundPct);
  EXPECT_LE(worst, kWorstErrorBoundPct) << worst_name;
}

#endif  // LCM_PUBLISHED_SCENARIOS_ONLY

}  // namespace

// published_scenarios.hpp: every CI row with a GPU count (num_gpus_assumed) that imports, as
// the test above imports it. Rows without one (release rows) ran on node counts the CSV does
// not give, so their layout on 8 GPUs is not the run's.
std::vector<lcm::test::PublishedScenario> lcm::test::published_ci_scenarios() {
  std::vector<PublishedScenario> out;
  auto hw = lcm::io::load_hardware_profile(LCM_SOURCE_DIR "/hwprofiles/h100-sxm.yaml");
  if (!hw.ok()) return out;
  int line = 1;
  for (const Row& r : read_rows(kCsv)) {
    ++line;
    if (r.get("num_gpus_assumed").empty()) continue;
    bool unsupported = false;
    for (const Unsupported& u : kUnsupported) unsupported |= !r.get(u.flag).empty() && r.get(u.flag) != "none";
    if (unsupported) continue;
    auto sc = lcm::io::import_megatron(row_flags(r, line), std::stoi(r.get("num_gpus_assumed")), hw.value(),
                                       r.get("test_case"));
    if (!sc.ok()) continue;
    const std::string& t = r.get("iter_time_s_median_excl_first");
    out.push_back({.table = "ci",
                   .id = r.get("test_case"),
                   .scenario = sc.value(),
                   .published_step_s = t.empty() ? 0.0 : std::stod(t)});
  }
  return out;
}

#ifndef LCM_PUBLISHED_SCENARIOS_ONLY
// Step time against the CI rows' iteration times (iter_time_s_median_excl_first: the median of
// Megatron-LM's golden `iteration-time` values, first logged step excluded). Declared before
// the first score (validation/published/DECLARATION_ci_step_time.md): every row
// published_ci_scenarios() returns, lcm::estimate's whole step on the H100 profile, error =
// predicted / measured - 1 (negative: lcm predicts a shorter step). Tiny models (12 layers,
// hidden 512, 1024 tokens, one micro-batch per step): the host side dominates.
// docs/validation-performance.md ("Megatron-LM CI iteration times") records the table.
TEST(MegatronCiStepTime, IterationTimeWithinRecordedBounds) {
  const std::vector<lcm::test::PublishedScenario> rows = lcm::test::published_ci_scenarios();
  ASSERT_FALSE(rows.empty());
  std::printf("\n| CI row | layout | predicted s | measured s | error %% | band s | host-bound idle s |\n"
              "|---|---|---:|---:|---:|---|---:|\n");
  int n = 0, within20 = 0, within50 = 0, in_band = 0;
  double sum_abs = 0, sum_signed = 0;
  for (const lcm::test::PublishedScenario& p : rows) {
    if (p.published_step_s <= 0) continue;
    const lcm::Estimate e = lcm::estimate(p.scenario);
    ASSERT_TRUE(e.has_time) << p.id;
    const double pred = e.time.step_s, meas = p.published_step_s;
    const double err = 100.0 * (pred / meas - 1.0);
    const lcm::Range band = lcm::time_range(pred, e.band);
    ++n;
    sum_abs += std::fabs(err);
    sum_signed += err;
    within20 += std::fabs(err) <= 20.0 ? 1 : 0;
    within50 += std::fabs(err) <= 50.0 ? 1 : 0;
    const bool covered = meas >= band.low && meas <= band.high;
    in_band += covered ? 1 : 0;
    const lcm::Mesh& m = e.mesh;
    const std::string layout = "tp" + std::to_string(m.tp) + " cp" + std::to_string(m.cp) + " pp" + std::to_string(m.pp) +
                               (m.vp > 1 ? " vp" + std::to_string(m.vp) : "") +
                               (m.ep > 1 ? " ep" + std::to_string(m.ep) : "") + " dp" + std::to_string(m.dp) +
                               " mb" + std::to_string(m.num_micro_batches);
    std::printf("| %s | %s | %.4f | %.4f | %+.1f | %.4f-%.4f%s | %.4f |\n", p.id.c_str(), layout.c_str(), pred, meas,
                err, band.low, band.high, covered ? "" : " (outside)", e.time.host_idle);
  }
  ASSERT_GT(n, 0);
  const double mae = sum_abs / n, signed_err = sum_signed / n;
  // Recorded bounds. First prediction (model frozen, declared at dbea8c7): 38 rows, mean |error|
  // 46.7 %, signed -35.6 %, 4 within 20 %, 21 within 50 %, 5 inside their band: the host-bound
  // regime of these tiny steps is predicted too short. Then (development set) the per-micro-batch
  // Python outside the layers, measured with Megatron-LM (host runs set 3, declared before
  // measuring; hwprofiles host: microbatch_overhead_us): 40.3 %, signed -27.6 %, 7 within 20 %,
  // 25 within 50 %, 8 inside their band. Later terms brought it to 36.0 % (session 33); session
  // 34 priced unfused attention as its kernels (14 of these rows run it): 35.8 %, signed -22.5 %,
  // 10 within 20 %, 28 within 50 %, 11 inside their band; the bounds follow that.
  constexpr int kMinRows = 38;
  constexpr double kMaeBoundPct = 35.9;
  constexpr int kMinWithin50 = 28;
  std::printf("Megatron-LM CI iteration times (H100): %d rows, mean |error| %.1f %%, mean signed error %+.1f %%, "
              "%d within 20 %%, %d within 50 %%, %d inside their band\n",
              n, mae, signed_err, within20, within50, in_band);
  EXPECT_GE(n, kMinRows);
  EXPECT_LE(mae, kMaeBoundPct);
  EXPECT_GE(within50, kMinWithin50);
}
#endif  // LCM_PUBLISHED_SCENARIOS_ONLY
