// `lcm compare`: a measured directory built from the prediction itself with planted, known
// perturbations (one op 20% slower, one op missing, one extra measured op, a 7% host gap,
// +3% activation memory), and the comparison must report exactly those errors; the
// committed fixture tests/data/compare/ and its byte-exact Markdown report.
//
// Regenerating the committed fixture (docs/compare.md#fixture):
//   LCM_WRITE_COMPARE_FIXTURE=tests/data/compare build/bin/lcm_planner_tests --gtest_filter='CompareFixture.*'
//   build/bin/lcm compare scenarios/llama3.1-8b.yaml tests/data/compare --format markdown -o tests/data/compare/expected.md
// (both from the source tree root).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lcm/model/estimate.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/timing.hpp"
#include "lcm/planner/report/compare_report.hpp"
#include "plan_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using lcm::plantest::lcm;
using nlohmann::json;
using nlohmann::ordered_json;

// What `lcm-exec train --layers 2` on one GPU would record for scenarios/llama3.1-8b.yaml.
const std::vector<lcm::io::Override> kOverrides = {
    {"model.num_layers", "2"},
    {"parallel.tensor_model_parallel_size", "1"},
    {"parallel.context_parallel_size", "1"},
    {"hardware.num_gpus", "1"},
    {"training.seq_length", "8192"},
    {"training.global_batch_size", "4"},
};

// The planted perturbations.
constexpr const char* kSlowOp = "L.mlp.fc1.fwd";
constexpr int kSlowLayer = 1;
constexpr double kSlowFactor = 1.2;  // measured 20% slower
constexpr const char* kMissingOp = "L.mlp.act.bwd";
constexpr int kMissingLayer = 0;
constexpr const char* kExtraOp = "L.attn.qkv.fp8cast.fwd";  // a bf16 run has no FP8 casts in the prediction
constexpr int kExtraLayer = 0;
constexpr double kExtraSeconds = 0.25e-3;  // per step
constexpr double kHostGap = 0.07;  // of the measured step
constexpr double kActivationFactor = 1.03;
constexpr int kMeasuredSteps = 4;  // after one warm-up step

struct Prediction {
  lcm::Scenario s;
  lcm::Estimate e;
  lcm::Schedule sched;
  std::vector<lcm::report::PredictedOp> ops;
};

Prediction predict() {
  Prediction p{lcm::plantest::scenario("llama3.1-8b", kOverrides), {}, {}, {}};
  p.e = lcm::estimate(p.s);
  p.sched = lcm::build_schedule(p.s, p.e.mesh, p.e.stage_layers, p.e.gpu_params);
  p.ops = lcm::report::predicted_op_times(p.s, p.e, p.sched, 0);
  return p;
}

struct MeasuredOp {
  std::string name;
  int layer;
  double per_step;
};

// The measured ops: the prediction with the op perturbations planted.
std::vector<MeasuredOp> measured_ops(const Prediction& p) {
  std::vector<MeasuredOp> out;
  for (const auto& o : p.ops) {
    if (o.name == kMissingOp && o.layer == kMissingLayer) continue;
    const double f = o.name == kSlowOp && o.layer == kSlowLayer ? kSlowFactor : 1.0;
    out.push_back({o.name, o.layer, o.seconds * f});
  }
  out.push_back({kExtraOp, kExtraLayer, kExtraSeconds});
  return out;
}

double sum_of(const std::vector<MeasuredOp>& ops) {
  double t = 0;
  for (const auto& o : ops) t += o.per_step;
  return t;
}

// The allocator's categories at the peak: the model's terms (the mapping docs/compare.md
// states), activations 3% above the model.
std::array<double, 6> categories(const lcm::StageMemory& m) {
  return {m.weights + m.fp8_weight_cache + m.fsdp_gather_buffers,
          m.grads,
          m.main_params + m.optimizer_states,
          (m.activations + m.logits_and_loss + m.transient_peak) * kActivationFactor,
          m.workspaces,
          m.comm_buffers};
}

// Writes DIR/summary.json and DIR/trace.rank0.json (docs/train-output.md) for the planted run.
void write_fixture(const Prediction& p, const fs::path& dir) {
  const auto ops = measured_ops(p);
  const double op_sum = sum_of(ops);
  const double step = op_sum / (1.0 - kHostGap);
  const int m = p.sched.num_micro_batches;
  const lcm::StageMemory& mem = p.e.memory.stages.front();
  const auto cat = categories(mem);
  double allocated = 0;
  for (double b : cat) allocated += b;

  ordered_json j;
  j["format"] = "lcm-exec-train/1";
  j["scenario"] = {{"path", "scenarios/llama3.1-8b.yaml"}, {"name", "llama3.1-8b"}};
  ordered_json ov = ordered_json::array();
  for (const auto& o : kOverrides) ov.push_back({o.key, o.value});
  j["overrides"] = ov;
  j["scaled"] = {{"model.num_layers", {{"from", 32}, {"to", 2}}}};
  j["device"] = {{"name", "planted fixture (no GPU)"}, {"count", 1}, {"cuda_driver", 0}, {"cudnn", 0}};
  j["config"] = {{"seq_length", 8192},  {"micro_batch_size", 1}, {"micro_batches", m},
                 {"recompute", "full"}, {"precision", "bf16"},   {"seed", 1234}};
  const double tokens = 8192.0 * 4;
  ordered_json steps = ordered_json::array();
  for (int i = 1; i <= kMeasuredSteps + 1; ++i)
    steps.push_back({{"step", i},
                     {"time_s", i == 1 ? 2 * step : step},
                     {"loss", 11.0 - 0.1 * i},
                     {"grad_norm", 1.0},
                     {"tokens", tokens},
                     {"warmup", i == 1}});
  j["steps"] = steps;
  j["step_time_s"] = {{"median", step}, {"min", step}, {"max", step}, {"measured_steps", kMeasuredSteps}};
  j["tokens_per_s"] = tokens / step;
  j["mfu"] = p.e.time.mfu * p.e.time.step_s / step;
  j["model_flops_per_step"] = p.e.flops.model_flops;
  ordered_json jops = ordered_json::array();
  for (const auto& o : ops) {
    const bool step_op =
        o.layer < 0 && o.name.find(".fwd") == std::string::npos && o.name.find(".bwd") == std::string::npos;
    const int count = (step_op ? 1 : m) * kMeasuredSteps;
    const double total = o.per_step * kMeasuredSteps;
    jops.push_back(
        {{"name", o.name}, {"layer", o.layer}, {"count", count}, {"total_s", total}, {"mean_s", total / count}});
  }
  j["ops"] = jops;
  j["memory"] = {{"peak_allocated_bytes", allocated},
                 {"peak_reserved_bytes", allocated + mem.fragmentation},
                 {"at_peak_by_category",
                  {{"weights", cat[0]},
                   {"grads", cat[1]},
                   {"optimizer", cat[2]},
                   {"activations", cat[3]},
                   {"workspace", cat[4]},
                   {"other", cat[5]}}},
                 {"context_bytes", mem.cuda_context},
                 {"library_workspace_bytes", mem.cublas_workspace}};
  j["routing"] = ordered_json::array();
  fs::create_directories(dir);
  std::ofstream(dir / "summary.json", std::ios::binary) << j.dump(2) << "\n";

  // One event per op and step (micro-batches aggregated), back to back on the compute
  // stream, the host gap spread evenly after each op.
  const double gap = (step - op_sum) / static_cast<double>(ops.size());
  std::ofstream t(dir / "trace.rank0.json", std::ios::binary);
  t << "{\"traceEvents\": [\n";
  t << R"({"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},)"
    << "\n";
  t << R"({"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "compute"}})";
  double now = 0;
  for (int i = 1; i <= kMeasuredSteps + 1; ++i) {
    for (const auto& o : ops) {
      ordered_json args{{"layer", o.layer}, {"micro_batch", 0}, {"step", i}};
      if (i == 1) args["warmup"] = true;
      const double dur = (i == 1 ? 2.0 : 1.0) * o.per_step;
      t << ",\n"
        << ordered_json{{"name", o.name}, {"ph", "X"}, {"ts", now * 1e6}, {"dur", dur * 1e6},
                        {"pid", 0},       {"tid", 0},  {"args", args}}
               .dump();
      now += dur + (i == 1 ? 2.0 : 1.0) * gap;
    }
  }
  t << "\n], \"displayTimeUnit\": \"ms\"}\n";
}

const lcm::report::OpComparison* find(const lcm::report::Comparison& c, const std::string& name, int layer) {
  for (const auto& o : c.ops)
    if (o.name == name && o.layer == layer) return &o;
  return nullptr;
}

fs::path temp_dir(const std::string& tag) {
  return fs::temp_directory_path() / ("lcm_compare_test_" + std::to_string(::getpid()) + "_" + tag);
}

// The predicted per-op times are the model's: on one GPU without communication the ops of
// the trace and the host-bound idle time (the step's closing sync, docs/time-model.md) sum to
// the step time, and one op is op_time x micro-batches.
TEST(CompareFixture, PredictedOpTimesAreTheModels) {
  const Prediction p = predict();
  ASSERT_EQ(p.sched.stages.size(), 1u);
  ASSERT_EQ(p.sched.num_micro_batches, 4);
  double sum = 0;
  for (const auto& o : p.ops) sum += o.seconds;
  EXPECT_GT(p.e.time.host_idle, 0);
  EXPECT_NEAR((sum + p.e.time.host_idle) / p.e.time.step_s, 1.0, 1e-9);
  const auto fc1 = std::find_if(p.sched.dense.fwd.begin(), p.sched.dense.fwd.end(),
                                [](const lcm::Op& op) { return op.id == lcm::OpId::kMlpFc1; });
  ASSERT_NE(fc1, p.sched.dense.fwd.end());
  const double one = lcm::op_time(*fc1, lcm::mesh_topology(p.s, p.e.mesh), p.s.hardware) * fc1->calls;
  for (int layer : {0, 1}) {
    const auto it =
        std::find_if(p.ops.begin(), p.ops.end(), [&](const auto& o) { return o.name == kSlowOp && o.layer == layer; });
    ASSERT_NE(it, p.ops.end());
    EXPECT_NEAR(it->seconds / (4 * one), 1.0, 1e-12);
  }
  // Both planted ops exist in the prediction; the extra one does not.
  const auto has = [&](const std::string& n, int l) {
    return std::any_of(p.ops.begin(), p.ops.end(), [&](const auto& o) { return o.name == n && o.layer == l; });
  };
  EXPECT_TRUE(has(kMissingOp, kMissingLayer));
  EXPECT_FALSE(has(kExtraOp, kExtraLayer));
}

TEST(CompareFixture, ReportsExactlyThePlantedErrors) {
  const Prediction p = predict();
  const fs::path dir = temp_dir("planted");
  fs::remove_all(dir);
  write_fixture(p, dir);
  if (const char* out = std::getenv("LCM_WRITE_COMPARE_FIXTURE")) write_fixture(p, out);

  auto m = lcm::report::read_train_summary(dir.string());
  ASSERT_TRUE(m) << m.error().str();
  ASSERT_EQ(m.value().measured_steps, kMeasuredSteps);
  ASSERT_EQ(m.value().first_measured_step, 2);
  lcm::io::LoadOptions lo;
  lo.overrides = lcm::report::prediction_overrides(m.value(), {});
  auto s = lcm::io::load_scenario(std::string(LCM_SOURCE_DIR) + "/scenarios/llama3.1-8b.yaml", lo);
  ASSERT_TRUE(s) << s.error().str();
  auto r = lcm::report::compare_run(s.value(), m.value());
  ASSERT_TRUE(r) << r.error().str();
  const lcm::report::Comparison& c = r.value();
  using lcm::report::CompareClass;

  // Per op: every op on both sides has error 0, except the slow one: 1/1.2 - 1.
  int both = 0;
  for (const auto& o : c.ops) {
    if (!o.predicted_s || !o.measured_s) continue;
    ++both;
    const double err = *o.predicted_s / *o.measured_s - 1.0;
    const bool slow = o.name == kSlowOp && o.layer == kSlowLayer;
    EXPECT_NEAR(err, slow ? 1.0 / 1.2 - 1.0 : 0.0, 1e-12) << o.name << " layer " << o.layer;
  }
  EXPECT_EQ(both, static_cast<int>(p.ops.size()) - 1);
  // Exactly two one-sided ops: the missing one (predicted only) and the extra one.
  std::vector<const lcm::report::OpComparison*> one_sided;
  for (const auto& o : c.ops)
    if (!o.predicted_s || !o.measured_s) one_sided.push_back(&o);
  ASSERT_EQ(one_sided.size(), 2u);
  const auto* missing = find(c, kMissingOp, kMissingLayer);
  const auto* extra = find(c, kExtraOp, kExtraLayer);
  ASSERT_NE(missing, nullptr);
  ASSERT_NE(extra, nullptr);
  EXPECT_TRUE(missing->predicted_s && !missing->measured_s);
  EXPECT_EQ(missing->cls, CompareClass::kMemoryBound);
  EXPECT_TRUE(!extra->predicted_s && extra->measured_s);
  EXPECT_NEAR(*extra->measured_s, kExtraSeconds, 1e-15);
  EXPECT_EQ(extra->cls, CompareClass::kNotPredicted);
  EXPECT_EQ(extra->kind, lcm::report::LayerKind::kDense);

  // Per class: GEMM measured = predicted + 0.2 x the slow op; memory-bound measured =
  // predicted - the missing op; attention equal; the extra op alone in "not predicted".
  const double slow = find(c, kSlowOp, kSlowLayer)->predicted_s.value();
  const double act = missing->predicted_s.value();
  const auto& gemm = c.classes[static_cast<size_t>(CompareClass::kGemm)];
  const auto& memb = c.classes[static_cast<size_t>(CompareClass::kMemoryBound)];
  const auto& attn = c.classes[static_cast<size_t>(CompareClass::kAttention)];
  const auto& comm = c.classes[static_cast<size_t>(CompareClass::kCommunication)];
  const auto& notp = c.classes[static_cast<size_t>(CompareClass::kNotPredicted)];
  EXPECT_NEAR(gemm.measured_s - gemm.predicted_s, 0.2 * slow, 1e-12);
  EXPECT_NEAR(memb.predicted_s - memb.measured_s, act, 1e-12);
  EXPECT_EQ(memb.predicted_ops - memb.measured_ops, 1);
  EXPECT_NEAR(attn.measured_s / attn.predicted_s, 1.0, 1e-12);
  EXPECT_EQ(comm.predicted_ops + comm.measured_ops, 0);  // one GPU: no communication
  EXPECT_EQ(notp.predicted_ops, 0);
  EXPECT_EQ(notp.measured_ops, 1);
  EXPECT_NEAR(notp.measured_s, kExtraSeconds, 1e-15);
  // Per layer kind: the extra and missing ops are in layer 0, the slow one in layer 1, all dense.
  const auto& dense = c.layer_kinds[static_cast<size_t>(lcm::report::LayerKind::kDense)];
  EXPECT_NEAR(dense.measured_s - dense.predicted_s, 0.2 * slow - act + kExtraSeconds, 1e-12);
  const auto& outside = c.layer_kinds[static_cast<size_t>(lcm::report::LayerKind::kOutside)];
  EXPECT_NEAR(outside.measured_s / outside.predicted_s, 1.0, 1e-12);

  // Step: the measured op sum is the predicted one + 0.2 x slow - missing + extra; the
  // host gap is 7% of the measured step; the model's step is its op sum (one GPU).
  const double op_sum = c.all.predicted_s + 0.2 * slow - act + kExtraSeconds;
  EXPECT_NEAR(c.all.measured_s / op_sum, 1.0, 1e-12);
  EXPECT_NEAR(c.measured_step_s, op_sum / 0.93, 1e-12);
  EXPECT_NEAR((c.measured_step_s - c.all.measured_s) / c.measured_step_s, 0.07, 1e-12);
  EXPECT_NEAR(c.predicted_step_s / c.measured_step_s - 1.0, p.e.time.step_s * 0.93 / op_sum - 1.0, 1e-12);

  // Memory: activations +3% (error 1/1.03 - 1), every other category exact; peak allocated
  // off by 3% of the activation terms.
  const lcm::StageMemory& sm = p.e.memory.stages.front();
  const double acts = sm.activations + sm.logits_and_loss + sm.transient_peak;
  ASSERT_GT(acts, 0);
  for (const auto& row : c.memory) {
    if (!row.predicted || !row.measured) {
      EXPECT_EQ(row.item, "NCCL buffers");
      continue;
    }
    if (*row.measured == 0) {
      EXPECT_EQ(*row.predicted, 0) << row.item;
      continue;
    }
    const double err = *row.predicted / *row.measured - 1.0;
    if (row.item == "activations") EXPECT_NEAR(err, 1.0 / 1.03 - 1.0, 1e-12);
    else if (row.item == "peak allocated") EXPECT_NEAR(err, sm.allocated / (sm.allocated + 0.03 * acts) - 1.0, 1e-12);
    else EXPECT_NEAR(err, 0.0, 1e-12) << row.item;
  }
  EXPECT_NEAR(c.measured_categories_sum, sm.allocated + 0.03 * acts, 1.0);
  fs::remove_all(dir);
}

// The committed fixture, through the `lcm` binary: the Markdown report byte for byte.
TEST(CompareCli, MarkdownOfTheCommittedFixtureIsExact) {
  const auto r = lcm("compare scenarios/llama3.1-8b.yaml tests/data/compare --format markdown");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string expected = lcm::plantest::slurp(fs::path(LCM_SOURCE_DIR) / "tests/data/compare/expected.md");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(r.out, expected) << "regenerate with the command in docs/compare.md#fixture if the model changed";
  // The planted errors as the report states them.
  EXPECT_NE(r.out.find("| L.mlp.fc1.fwd | 1 | GEMM |"), std::string::npos);
  EXPECT_NE(r.out.find("-16.7% |"), std::string::npos);
  EXPECT_NE(r.out.find("(7.0% of the measured step)"), std::string::npos);
  EXPECT_NE(r.out.find("| L.attn.qkv.fp8cast.fwd | 0 | not predicted | - |"), std::string::npos);
  EXPECT_NE(r.out.find("| L.mlp.act.bwd | 0 | memory-bound |"), std::string::npos);
  EXPECT_NE(r.out.find("-2.9% |"), std::string::npos);  // activations: 1/1.03 - 1
}

TEST(CompareCli, JsonCsvAndAtomicOutput) {
  const auto j = lcm("compare scenarios/llama3.1-8b.yaml tests/data/compare --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = json::parse(j.out);
  EXPECT_NEAR(doc.at("step").at("measured_host_gap_fraction").get<double>(), 0.07, 1e-9);
  EXPECT_EQ(doc.at("classes").at("not predicted").at("measured_ops"), 1);
  const auto csv = lcm("compare scenarios/llama3.1-8b.yaml tests/data/compare --format csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("section,item,layer,class,unit,predicted,measured,error\n", 0), 0u);
  EXPECT_NE(csv.out.find("\nop,L.mlp.fc1.fwd,1,GEMM,s,"), std::string::npos);

  const fs::path dir = temp_dir("out");
  fs::create_directories(dir);
  const auto o = lcm("compare scenarios/llama3.1-8b.yaml tests/data/compare --format markdown -o '" +
                     (dir / "r.md").string() + "'");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(lcm::plantest::slurp(dir / "r.md"),
            lcm::plantest::slurp(fs::path(LCM_SOURCE_DIR) / "tests/data/compare/expected.md"));
  fs::remove_all(dir);
}

TEST(CompareCli, TraceHasThePredictedAndTheMeasuredStep) {
  const fs::path dir = temp_dir("trace");
  fs::create_directories(dir);
  const fs::path file = dir / "t.json";
  const auto r = lcm("compare scenarios/llama3.1-8b.yaml tests/data/compare --trace-out '" + file.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const json t = json::parse(lcm::plantest::slurp(file));
  std::map<int, std::string> names;
  int predicted = 0, measured = 0;
  double measured_start = 1e300;
  for (const json& ev : t.at("traceEvents")) {
    if (ev.at("ph") == "M" && ev.at("name") == "process_name") names[ev.at("pid")] = ev.at("args").at("name");
    if (ev.at("ph") != "X") continue;
    if (ev.at("pid") == 0) ++predicted;
    if (ev.at("pid") == 1) {
      ++measured;
      EXPECT_EQ(ev.at("args").at("step"), 2);  // the first measured step, not the warm-up
      measured_start = std::min(measured_start, ev.at("ts").get<double>());
    }
  }
  EXPECT_EQ(names[0], "predicted");
  EXPECT_EQ(names[1], "measured rank 0");
  // The fixture has one event per measured op and step: the prediction's ops, less one, plus one.
  const json summary = json::parse(lcm::plantest::slurp(fs::path(LCM_SOURCE_DIR) / "tests/data/compare/summary.json"));
  EXPECT_EQ(measured, static_cast<int>(summary.at("ops").size()));
  EXPECT_GT(predicted, measured);  // the prediction places each op once per micro-batch
  EXPECT_EQ(measured_start, 0.0);
  fs::remove_all(dir);
}

}  // namespace

namespace {

// The committed fixture's summary.json with `host` set to `host_json` (nothing when empty).
fs::path fixture_with_host(const std::string& name, const std::string& host_json) {
  const fs::path dir = temp_dir(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(std::string(LCM_SOURCE_DIR) + "/tests/data/compare/summary.json");
  json j = json::parse(in);
  if (!host_json.empty()) j["host"] = json::parse(host_json);
  std::ofstream(dir / "summary.json") << j.dump(1);
  return dir;
}

}  // namespace

// lcm-exec train records its own host costs (C++ enqueue, measured at start); the prediction
// of the run takes them in place of the profile's `host:` block (PyTorch eager's): kernel
// enqueue = the GEMM enqueue, sync = the round trip, no per-layer Python, no extra latency.
TEST(CompareHost, TheRunsOwnHostCostsReplaceTheProfiles) {
  const std::string scenario = std::string(LCM_SOURCE_DIR) + "/scenarios/llama3.1-8b.yaml";
  auto m = lcm::report::read_train_summary(
      fixture_with_host("host_run", R"({"gemm_enqueue_s": 4.5e-6, "kernel_enqueue_s": 2.5e-6, "sync_s": 1.2e-5})")
          .string());
  ASSERT_TRUE(m) << m.error().str();
  ASSERT_TRUE(m.value().host.has_value());
  auto s = lcm::report::load_compare_scenario(scenario, m.value(), {});
  ASSERT_TRUE(s) << s.error().str();
  EXPECT_DOUBLE_EQ(s.value().hardware.host.kernel_launch, 4.5e-6);
  EXPECT_DOUBLE_EQ(s.value().hardware.host.sync, 1.2e-5);
  EXPECT_EQ(s.value().hardware.host.layer_overhead_fwd, 0.0);
  EXPECT_EQ(s.value().hardware.host.layer_overhead_bwd, 0.0);
  EXPECT_EQ(s.value().hardware.host.moe_overhead_fwd, 0.0);
  EXPECT_EQ(s.value().hardware.host.moe_overhead_bwd, 0.0);
  EXPECT_EQ(s.value().hardware.host.launch_latency, 0.0);
  auto c = lcm::report::compare_run(s.value(), m.value());
  ASSERT_TRUE(c) << c.error().str();
  EXPECT_TRUE(c.value().host_from_run);
  const ordered_json j = lcm::report::compare_json(c.value());
  EXPECT_EQ(j["host"]["source"], "run");
  EXPECT_DOUBLE_EQ(j["host"]["kernel_launch_s"].get<double>(), 4.5e-6);

  // Without the block (runs before session 11), or with the runner's "not measured" (-1),
  // the profile's costs stay: the same as loading the scenario with the overrides alone.
  for (const std::string& host : {std::string(), std::string(R"({"gemm_enqueue_s": -1, "kernel_enqueue_s": -1, "sync_s": -1})")}) {
    auto m0 = lcm::report::read_train_summary(fixture_with_host("host_profile", host).string());
    ASSERT_TRUE(m0) << m0.error().str();
    EXPECT_FALSE(m0.value().host.has_value());
    auto s0 = lcm::report::load_compare_scenario(scenario, m0.value(), {});
    ASSERT_TRUE(s0) << s0.error().str();
    lcm::io::LoadOptions lo;
    lo.overrides = lcm::report::prediction_overrides(m0.value(), {});
    auto plain = lcm::io::load_scenario(scenario, lo);
    ASSERT_TRUE(plain) << plain.error().str();
    EXPECT_EQ(s0.value().hardware.host, plain.value().hardware.host);
    EXPECT_GT(s0.value().hardware.host.layer_overhead_fwd, 0.0);  // the profile's per-layer Python
    EXPECT_GT(s0.value().hardware.host.layer_overhead_bwd, 0.0);
  }
}

TEST(CompareHost, BadHostCostsAreOneLineErrors) {
  auto bad = lcm::report::read_train_summary(
      fixture_with_host("host_bad", R"({"gemm_enqueue_s": 4.5e-6, "kernel_enqueue_s": 2.5e-6, "sync_s": -2})").string());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("host.sync_s"), std::string::npos) << bad.error().str();
  EXPECT_NE(bad.error().str().find("expected a number >= -1"), std::string::npos) << bad.error().str();
  auto half = lcm::report::read_train_summary(
      fixture_with_host("host_half", R"({"gemm_enqueue_s": -0.5, "kernel_enqueue_s": 2.5e-6, "sync_s": 1e-5})").string());
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().str().find("host.gemm_enqueue_s: expected a time >= 0 (or -1: not measured)"),
            std::string::npos)
      << half.error().str();
  auto missing =
      lcm::report::read_train_summary(fixture_with_host("host_missing", R"({"gemm_enqueue_s": 4.5e-6})").string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().str().find("host.kernel_enqueue_s"), std::string::npos) << missing.error().str();
}

// The `lcm-exec train` suites on an H100 (validation/measured/h100/train_suite1/, train_suite2/
// and train_suite3/), re-predicted from the committed summaries with --profile h100-sxm, run by run:
// a model change that moves any run's step error by more than 1.5 points, or its peak allocated
// error by more than 0.5, fails here, and so does a suite median or worst past the recorded one
// by more than 0.5 point (a guard; both suites are development sets since their scores).
// Suite 1, held out when scored at 9243a25 (step median 1.6 %, worst 6.7 %), and suite 2, held
// out for the elementwise rate (train_suite2/DECLARATION.md: 8.6 % / 13.9 % with 0.70, 2.5 % /
// 10.1 % with the adopted 0.79); the figures below are the model's since session 32's
// memory-bound backward rules (read off suites 1 and 2's traces, so development figures there).
namespace {

struct SuiteRun {
  const char* name;
  const char* scenario;
  double step_error;  // predicted / measured - 1
  double peak_error;
};

void expect_suite_holds(const char* suite, const std::vector<SuiteRun>& runs_of, double median_step,
                        double worst_step, double median_peak, double worst_peak) {
  const fs::path runs = fs::path(LCM_SOURCE_DIR) / "validation/measured/h100" / suite / "runs";
  std::vector<double> step, peak;
  for (const SuiteRun& r : runs_of) {
    SCOPED_TRACE(r.name);
    auto m = lcm::report::read_train_summary((runs / r.name).string());
    ASSERT_TRUE(m) << m.error().str();
    const std::string scenario = std::string(LCM_SOURCE_DIR) + "/scenarios/" + r.scenario + ".yaml";
    auto s = lcm::report::load_compare_scenario(scenario, m.value(), {{"hardware.profile", "h100-sxm"}});
    ASSERT_TRUE(s) << s.error().str();
    EXPECT_EQ(s.value().hardware.name, "h100-sxm");
    auto c = lcm::report::compare_run(s.value(), m.value());
    ASSERT_TRUE(c) << c.error().str();
    const double e = c.value().predicted_step_s / c.value().measured_step_s - 1.0;
    EXPECT_NEAR(e, r.step_error, 0.015);
    step.push_back(std::fabs(e));
    for (const auto& row : c.value().memory)
      if (row.item == "peak allocated" && row.predicted && row.measured) {
        const double pe = *row.predicted / *row.measured - 1.0;
        EXPECT_NEAR(pe, r.peak_error, 0.005);
        peak.push_back(std::fabs(pe));
      }
  }
  ASSERT_EQ(step.size(), runs_of.size());
  ASSERT_EQ(peak.size(), runs_of.size());
  std::sort(step.begin(), step.end());
  std::sort(peak.begin(), peak.end());
  const auto median = [](const std::vector<double>& v) {
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  EXPECT_LE(median(step), median_step + 0.005);
  EXPECT_LE(step.back(), worst_step + 0.005);
  EXPECT_LE(median(peak), median_peak + 0.005);
  EXPECT_LE(peak.back(), worst_peak + 0.005);
}

}  // namespace

TEST(TrainSuiteH100, SuiteOneHolds) {
  expect_suite_holds("train_suite1",
                     {{"llama8b_s8k_none", "llama3.1-8b", 0.039, 0.001},
                      {"llama8b_s32k_full", "llama3.1-8b", -0.022, -0.005},
                      {"llama8b_s64k_full", "llama3.1-8b", -0.029, -0.010},
                      {"llama8b_s64k_sel_mb1", "llama3.1-8b", -0.021, -0.008},
                      {"llama8b_s128k_full", "llama3.1-8b", -0.006, -0.016},
                      {"mixtral_s16k_sel_mb1", "mixtral-8x7b", 0.004, -0.012},
                      {"qwen3_30b_s8k_full_mb4", "qwen3-30b-a3b", 0.032, 0.002}},
                     0.022, 0.039, 0.008, 0.016);
}

TEST(TrainSuiteH100, SuiteTwoHolds) {
  expect_suite_holds("train_suite2",
                     {{"llama8b_s2k_none_mb4", "llama3.1-8b", 0.094, 0.003},
                      {"llama8b_s16k_none_mb1", "llama3.1-8b", 0.013, -0.001},
                      {"llama8b_s96k_full", "llama3.1-8b", 0.005, -0.013},
                      {"mixtral_s4k_mb1", "mixtral-8x7b", 0.025, -0.002},
                      {"qwen3_30b_s2k_mb2", "qwen3-30b-a3b", 0.017, -0.001},
                      {"qwen3_30b_s4k_cf1.25_mb2", "qwen3-30b-a3b", 0.085, 0.001}},
                     0.021, 0.094, 0.002, 0.013);
}

// Suite 3, held out for session 32's memory-bound backward rules (train_suite3/DECLARATION.md,
// 36ebd63), scored once at 1965991: step median 2.9 %, worst 5.7 %; peak allocated 0.6 % / 2.4 %.
TEST(TrainSuiteH100, SuiteThreeHolds) {
  expect_suite_holds("train_suite3",
                     {{"llama8b_s4k_sel_mb2", "llama3.1-8b", 0.057, 0.002},
                      {"llama8b_s12k_full_mb2", "llama3.1-8b", 0.010, -0.000},
                      {"llama8b_s24k_none_mb1", "llama3.1-8b", 0.029, -0.003},
                      {"llama8b_s48k_sel_mb1", "llama3.1-8b", -0.005, -0.006},
                      {"mixtral_s8k_sel_mb2", "mixtral-8x7b", 0.019, -0.006},
                      {"qwen3_30b_s16k_sel_mb1", "qwen3-30b-a3b", 0.048, -0.024},
                      {"deepseek_s4k_cf1.25_mb2", "deepseek-v3", 0.032, 0.008}},
                     0.029, 0.057, 0.006, 0.024);
}
