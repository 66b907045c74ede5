// The planner's decisions: ranking, near-ties, the tightest constraint, failures, the
// Megatron flags of a layout (round trip through the Megatron importer), determinism
// across thread counts, the progress bar.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "../../planner/cli/progress.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/planner/report/plan_report.hpp"
#include "plan_test_util.hpp"

namespace lcm::plan {
namespace {

using plantest::scenario;

TEST(PlanSearch, RanksValidFittingLayoutsByStepTime) {
  const Scenario base = scenario("mixtral-8x7b", {}, 64);
  PlanOptions o;
  o.top_k = 15;
  const PlanResult r = search(base, o);
  EXPECT_EQ(r.counts.evaluated, r.counts.enumerated);
  EXPECT_LE(r.counts.fit, r.counts.valid);
  EXPECT_LE(r.counts.valid, r.counts.enumerated);
  ASSERT_EQ(r.ranked.size(), 15u);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Ranked& g = r.ranked[i];
    const Scenario s = apply_layout(base, g.layout);
    EXPECT_TRUE(validate_scenario(s).empty()) << layout_string(g.layout, base);
    EXPECT_TRUE(g.metrics.fits);
    const Metrics fresh = metrics_of_estimate(s);
    EXPECT_EQ(fresh.step_s, g.metrics.step_s);
    EXPECT_TRUE(fresh.fits);
    if (i > 0) {
      // The fastest first, then its error-band ties by the high end of their band, then the
      // others by step time.
      const Ranked& p = r.ranked[i - 1];
      EXPECT_TRUE(p.tie || !g.tie);
      EXPECT_LE(r.ranked[0].metrics.step_s, g.metrics.step_s);
      if (i > 1 && p.tie && g.tie)
        EXPECT_LE(p.metrics.step_s * (1 + p.band.high), g.metrics.step_s * (1 + g.band.high));
      else
        EXPECT_LE(p.metrics.step_s, g.metrics.step_s);
      // Groups are distinct predictions.
      EXPECT_FALSE(r.ranked[i - 1].metrics.step_s == g.metrics.step_s &&
                   r.ranked[i - 1].metrics.peak_bytes == g.metrics.peak_bytes);
    }
    for (const Layout& e : g.equivalent) {
      const Metrics m = metrics_of_estimate(apply_layout(base, e));
      EXPECT_EQ(m.step_s, g.metrics.step_s);
      EXPECT_EQ(m.peak_bytes, g.metrics.peak_bytes);
    }
  }
  // Nothing that fits is faster than #1: the fastest out-of-memory layouts are slower or
  // do not fit, and the ranked list starts at the minimum.
  for (const Ranked& g : r.out_of_memory) EXPECT_FALSE(g.metrics.fits);
  // The scenario's own hand-written layout is in the space; #1 is at least as fast.
  const Metrics own = metrics_of_estimate(scenario("mixtral-8x7b"));
  if (own.fits) {
    EXPECT_LE(r.ranked.front().metrics.step_s, own.step_s);
  }
}

// The memory band decides (issue 12): a layout whose band ((peak - fragmentation) x (1 - 4.10%)
// to peak x (1 + 6.44%)) straddles HBM is tight: kept apart from the ranked layouts, never
// ranked with them and never among the out-of-memory ones. Checked against fresh estimates
// and against a sample of every outcome.
TEST(PlanSearch, TightLayoutsAreKeptApartFromTheRankedOnes) {
  const Scenario base = scenario("mixtral-8x7b", {}, 64);
  PlanOptions o;
  o.sample_every = 7;
  const PlanResult r = search(base, o);
  ASSERT_FALSE(r.tight.empty());
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.counts.tight, 0u);
  EXPECT_LE(r.counts.fit + r.counts.tight, r.counts.valid);
  for (const Ranked& g : r.tight) {
    const Metrics fresh = metrics_of_estimate(apply_layout(base, g.layout));
    EXPECT_FALSE(fresh.fits) << layout_string(g.layout, base);
    EXPECT_TRUE(fresh.may_fit) << layout_string(g.layout, base);
    EXPECT_EQ(fresh.step_s, g.metrics.step_s);
    // The band straddles HBM: bottom within, top above.
    EXPECT_LE(g.metrics.peak_low_bytes, g.metrics.hbm_bytes);
    EXPECT_GT(g.metrics.peak_high_bytes, g.metrics.hbm_bytes);
    // Top peak x 1.0644, bottom (peak - fragmentation) x 0.9590, the largest over the stages.
    const Memory mem = estimate(apply_layout(base, g.layout)).memory;
    double top = 0, bottom = 0;
    for (const StageMemory& st : mem.stages) {
      ASSERT_GT(st.fragmentation, 0.0);
      top = std::max(top, st.peak * 1.0644);
      bottom = std::max(bottom, (st.peak - st.fragmentation) * 0.9590);
    }
    EXPECT_NEAR(g.metrics.peak_high_bytes / top, 1.0, 1e-9);
    EXPECT_NEAR(g.metrics.peak_low_bytes / bottom, 1.0, 1e-9);
  }
  for (size_t i = 1; i < r.tight.size(); ++i) EXPECT_LE(r.tight[i - 1].metrics.step_s, r.tight[i].metrics.step_s);
  for (const Ranked& g : r.ranked) EXPECT_TRUE(g.metrics.fits);
  for (const Ranked& g : r.out_of_memory) EXPECT_FALSE(g.metrics.may_fit);
  // Every sampled tight layout is at least as slow as the fastest kept one (when it was timed).
  int sampled_tight = 0;
  for (const auto& [l, outcome] : r.samples) {
    if (outcome.status != Outcome::Status::kTight) continue;
    ++sampled_tight;
    EXPECT_TRUE(outcome.metrics.may_fit && !outcome.metrics.fits);
    if (outcome.has_time) EXPECT_GE(outcome.metrics.step_s, r.tight.front().metrics.step_s);
  }
  EXPECT_GT(sampled_tight, 0);
  // --headroom 10%: the same verdicts against HBM x 0.9; everything tight there was at most
  // tight or out of memory before (a smaller budget never turns a miss into a fit).
  PlanOptions h;
  std::string error;
  ASSERT_TRUE(h.constraints.set_headroom("10%", error)) << error;
  const PlanResult rh = search(base, h);
  EXPECT_LE(rh.counts.fit, r.counts.fit);
  EXPECT_LE(rh.counts.fit + rh.counts.tight, r.counts.fit + r.counts.tight);
  for (const Ranked& g : rh.tight) EXPECT_NEAR(g.metrics.hbm_bytes, 0.9 * base.hardware.gpu.hbm_bytes, 1.0);
}

TEST(PlanSearch, SameAnswerOnOneAndTwoThreads) {
  const Scenario base = scenario("qwen3-30b-a3b", {}, 128);
  PlanOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const PlanResult a = search(base, one), b = search(base, two);
  EXPECT_EQ(a.counts.enumerated, b.counts.enumerated);
  EXPECT_EQ(a.counts.valid, b.counts.valid);
  EXPECT_EQ(a.counts.fit, b.counts.fit);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(a.ranked[i].layout, b.ranked[i].layout) << i;
    EXPECT_EQ(a.ranked[i].metrics.step_s, b.ranked[i].metrics.step_s) << i;
  }
  ASSERT_EQ(a.rejections.size(), b.rejections.size());
  for (size_t i = 0; i < a.rejections.size(); ++i) {
    EXPECT_EQ(a.rejections[i].key, b.rejections[i].key);
    EXPECT_EQ(a.rejections[i].count, b.rejections[i].count);
    EXPECT_EQ(a.rejections[i].example, b.rejections[i].example);
  }
}

// A stop request ends the search early: a stop set before it starts evaluates only the
// meshes rejected up front, one set from another thread while it runs leaves it partial.
TEST(PlanSearch, StopEndsTheSearchEarly) {
  const Scenario base = scenario("mixtral-8x7b", {{"seq_length", "128K"}}, 1024);
  const PlanResult full = search(base);
  EXPECT_FALSE(full.cancelled);
  std::atomic<bool> stop{true};
  PlanOptions o;
  o.stop = &stop;
  const PlanResult none = search(base, o);
  EXPECT_TRUE(none.cancelled);
  EXPECT_TRUE(none.ranked.empty());
  EXPECT_LT(none.counts.evaluated, full.counts.evaluated / 100);

  std::atomic<bool> later{false};
  PlanOptions p;
  p.stop = &later;
  p.threads = 2;
  bool asked = false;
  p.progress = [&](uint64_t done, uint64_t total) {
    if (!asked && done > 0 && done < total) {
      later = true;  // the first progress report: stop now
      asked = true;
    }
  };
  const PlanResult part = search(base, p);
  if (asked) {  // the search took longer than one progress period (100 ms)
    EXPECT_TRUE(part.cancelled);
    EXPECT_LT(part.counts.evaluated, full.counts.evaluated);
  }
}

// Bounding (skipping the step time of layouts that cannot enter the tables) changes
// nothing the search reports: the whole JSON report but the seconds is identical.
TEST(PlanSearch, BoundingChangesNothing) {
  struct Case {
    const char* id;
    std::vector<io::Override> sets;
    int gpus;
  };
  const Case cases[] = {{"mixtral-8x7b", {{"seq_length", "128K"}}, 256},
                        {"mixtral-8x7b", {}, 64},
                        {"deepseek-v3", {{"seq_length", "32K"}}, 256},
                        {"llama3.1-70b", {{"seq_length", "128K"}}, 128},
                        {"qwen3-30b-a3b", {}, 24}};  // 24 GPUs: few layouts, little fits
  for (const Case& c : cases) {
    const Scenario base = scenario(c.id, c.sets, c.gpus);
    PlanOptions bounded, full;
    full.bound = false;
    bounded.top_k = full.top_k = 3;  // small tables: more layouts bounded
    bounded.why_not = full.why_not = 2;
    nlohmann::ordered_json a = report::plan_json(base, search(base, bounded));
    nlohmann::ordered_json b = report::plan_json(base, search(base, full));
    a["counts"].erase("seconds");
    b["counts"].erase("seconds");
    EXPECT_EQ(a.dump(1), b.dump(1)) << c.id << " on " << c.gpus;
  }
}

// Two layouts constructed to differ only in pp: the near-tie names the knob and the term.
TEST(PlanNearTies, NameTheKnobsAndTheSeparatingTerm) {
  const Scenario base = scenario("mixtral-8x7b", {}, 64);
  Ranked a, b, c, far;
  a.layout.tp = 2, a.layout.cp = 2, a.layout.pp = 2, a.layout.ep = 8;
  b.layout = a.layout;
  b.layout.pp = 4;
  a.metrics.step_s = 10.0;
  a.metrics.compute = {6.0, 3.0, 0.5};
  a.metrics.bubble = 0.5;
  a.metrics.peak_bytes = 100e9;
  a.metrics.peak_high_bytes = 100e9;  // the memory the near-tie compares: what the verdict uses
  b.metrics = a.metrics;
  b.metrics.bubble = 0.65;  // pipeline bubble +0.15 s
  b.metrics.compute[0] = 5.95;  // GEMM -0.05 s
  b.metrics.step_s = 10.1;
  b.metrics.peak_bytes = 80e9;
  b.metrics.peak_high_bytes = 80e9;
  c = a;  // exact time tie, more memory, another sharding
  c.layout.sharding = DpSharding::kOptimGradsParams;
  c.metrics.peak_bytes = 120e9;
  c.metrics.peak_high_bytes = 120e9;
  far = a;
  far.layout.tp = 4;
  far.metrics.step_s = 10.5;  // 5%: not a near-tie
  const std::vector<NearTie> ties = near_ties({a, c, b, far}, 0.02, base);
  ASSERT_EQ(ties.size(), 2u);
  EXPECT_EQ(ties[0].rank, 2);
  EXPECT_EQ(ties[0].relative, 0.0);
  ASSERT_EQ(ties[0].differences.size(), 1u);
  EXPECT_EQ(ties[0].differences[0], "sharding no_shard -> optim_grads_params");
  EXPECT_NEAR(ties[0].memory_delta_bytes, 20e9, 1);
  EXPECT_EQ(ties[1].rank, 3);
  EXPECT_NEAR(ties[1].relative, 0.01, 1e-12);
  ASSERT_EQ(ties[1].differences.size(), 1u);
  EXPECT_EQ(ties[1].differences[0], "pp 2 -> 4");
  EXPECT_EQ(ties[1].term, "pipeline bubble");
  EXPECT_NEAR(ties[1].term_delta_s, 0.15, 1e-12);
  EXPECT_EQ(ties[1].gain_term, "GEMM compute");
  EXPECT_NEAR(ties[1].gain_delta_s, -0.05, 1e-12);
  EXPECT_TRUE(near_ties({a, far}, 0.02, base).empty());
  EXPECT_EQ(near_ties({a, far}, 0.06, base).size(), 1u);
}

// Every dimension's exposed communication is a term, EDP and embedding included.
TEST(PlanNearTies, NameEdpAndEmbeddingCommunication) {
  const Scenario base = scenario("mixtral-8x7b", {}, 64);
  Ranked a, b;
  a.layout.ep = 8;
  b.layout = a.layout;
  b.layout.ep = 4;
  a.metrics.step_s = 10.0;
  a.metrics.compute = {6.0, 3.0, 0.5};
  a.metrics.exposed_comm[static_cast<size_t>(CommDim::kEdp)] = 0.1;
  a.metrics.exposed_comm[static_cast<size_t>(CommDim::kEmb)] = 0.3;
  b.metrics = a.metrics;
  b.metrics.exposed_comm[static_cast<size_t>(CommDim::kDp)] = 0.05;
  b.metrics.exposed_comm[static_cast<size_t>(CommDim::kEdp)] = 0.25;  // +0.15 s
  b.metrics.exposed_comm[static_cast<size_t>(CommDim::kEmb)] = 0.2;   // -0.1 s
  b.metrics.step_s = 10.1;
  const std::vector<NearTie> ties = near_ties({a, b}, 0.02, base);
  ASSERT_EQ(ties.size(), 1u);
  EXPECT_EQ(ties[0].term, "exposed EDP communication");
  EXPECT_NEAR(ties[0].term_delta_s, 0.15, 1e-12);
  EXPECT_EQ(ties[0].gain_term, "exposed embedding communication");
  EXPECT_NEAR(ties[0].gain_delta_s, -0.1, 1e-12);
}

// The named terms of a layout's metrics add up to its step time, under unique keys.
TEST(PlanNearTies, StepTermsSumToTheStepTime) {
  const Metrics m = metrics_of_estimate(scenario("deepseek-v3", {}, 0));
  const auto terms = step_terms(m);
  double sum = 0;
  std::set<std::string> keys;
  for (const StepTerm& t : terms) {
    sum += t.seconds;
    keys.insert(t.key);
  }
  EXPECT_EQ(keys.size(), terms.size());
  EXPECT_GT(m.step_s, 0);
  EXPECT_NEAR(sum, m.step_s, 1e-9 * m.step_s);
}

// Real searches report near-ties consistent with the ranked metrics.
TEST(PlanNearTies, SearchNearTiesAreWithinTheThreshold) {
  const Scenario base = scenario("mixtral-8x7b", {}, 64);
  const PlanResult r = search(base);
  ASSERT_FALSE(r.ranked.empty());
  for (const NearTie& t : r.near_ties) {
    const Metrics& m = r.ranked[static_cast<size_t>(t.rank - 1)].metrics;
    EXPECT_LE(m.step_s, r.ranked.front().metrics.step_s * 1.02);
    EXPECT_FALSE(t.differences.empty());
  }
}

TEST(PlanFailures, NoValidLayoutNamesTheTightestConstraint) {
  // 12 GPUs of 8-GPU nodes: Megatron needs whole nodes (or less than one).
  const Scenario base = scenario("mixtral-8x7b", {}, 12);
  const PlanResult r = search(base);
  EXPECT_EQ(r.counts.valid, 0u);
  EXPECT_GT(r.counts.enumerated, 0u);
  const Rejection* t = tightest_constraint(r);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->key, "hardware.num_gpus");
  EXPECT_GT(t->sole_count, 0u);
  const std::string msg = report::plan_failure(base, r);
  EXPECT_NE(msg.find("no valid layout for 12 GPUs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hardware.num_gpus"), std::string::npos) << msg;
}

TEST(PlanFailures, TightestConstraintIsTheOneThatBlocksMostOnItsOwn) {
  PlanResult r;
  Rejection a{"model.num_layers", "x", {}, 100, 5};
  Rejection b{"training.global_batch_size", "y", {}, 50, 40};
  r.rejections = {a, b};
  ASSERT_NE(tightest_constraint(r), nullptr);
  EXPECT_EQ(tightest_constraint(r)->key, "training.global_batch_size");
}

TEST(PlanFailures, NothingFitsSaysByHowMuchTheClosestMisses) {
  const Scenario base = scenario("deepseek-v3", {}, 8);
  const PlanResult r = search(base);
  EXPECT_GT(r.counts.valid, 0u);
  EXPECT_EQ(r.counts.fit, 0u);
  ASSERT_TRUE(r.has_closest_miss);
  EXPECT_GT(r.closest_miss_metrics.miss_bytes, 0);
  // The closest miss is the valid layout with the smallest miss: check against a sample.
  PlanOptions o;
  o.sample_every = 13;
  for (const auto& [l, outcome] : search(base, o).samples)
    if (outcome.status == Outcome::Status::kOutOfMemory) {
      EXPECT_GE(outcome.metrics.miss_bytes, r.closest_miss_metrics.miss_bytes);
    }
  const std::string msg = report::plan_failure(base, r);
  EXPECT_NE(msg.find("nothing fits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("misses by"), std::string::npos) << msg;
  EXPECT_NE(msg.find(layout_string(r.closest_miss, base)), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------
// Megatron flags round trip: flags of a layout + the job's other flags, imported by
// `lcm import megatron`, give back the layout.
// ---------------------------------------------------------------------------------

// The Megatron CI's Mixtral job (tests/data/megatron) without its layout flags.
std::vector<io::MegatronFlag> job_flags_without_layout() {
  const std::string text =
      plantest::slurp(std::string(LCM_SOURCE_DIR) + "/tests/data/megatron/mixtral_8x7b_tp1pp4ep8vpp8_release.yaml");
  auto flags = io::parse_megatron_model_config(text, "mixtral.yaml");
  EXPECT_TRUE(flags.ok()) << flags.error().str();
  const std::vector<std::string> layout = {
      "tensor-model-parallel-size", "sequence-parallel", "pipeline-model-parallel-size",
      "num-layers-per-virtual-pipeline-stage", "context-parallel-size", "expert-model-parallel-size",
      "expert-tensor-parallel-size", "use-distributed-optimizer", "overlap-grad-reduce", "overlap-param-gather",
      "micro-batch-size", "moe-token-dispatcher-type"};
  std::vector<io::MegatronFlag> out;
  for (const io::MegatronFlag& f : flags.value())
    if (std::find(layout.begin(), layout.end(), f.name) == layout.end()) out.push_back(f);
  return out;
}

Scenario reimport(const Scenario& s) {
  std::vector<io::MegatronFlag> flags = job_flags_without_layout();
  std::string line;
  for (const std::string& f : megatron_flags(s)) line += f + " ";
  auto mine = io::parse_megatron_command_line(line, "plan");
  EXPECT_TRUE(mine.ok()) << mine.error().str();
  flags.insert(flags.end(), mine.value().begin(), mine.value().end());
  auto r = io::import_megatron(flags, s.num_gpus, s.hardware, "roundtrip");
  EXPECT_TRUE(r.ok()) << line << "\n" << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.value() : Scenario{};
}

TEST(PlanFlags, RoundTripThroughTheMegatronImporter) {
  auto hw = io::load_hardware_profile(std::string(LCM_SOURCE_DIR) + "/hwprofiles/h200-sxm.yaml");
  ASSERT_TRUE(hw.ok());
  // The job as Megatron's CI runs it (global batch 256), on 256 GPUs: the base scenario.
  std::vector<io::MegatronFlag> flags = job_flags_without_layout();
  flags.push_back({"micro-batch-size", "1", "test", 1, 1});
  auto base_r = io::import_megatron(flags, 256, hw.value(), "mixtral");
  ASSERT_TRUE(base_r.ok()) << base_r.error().str();
  Scenario base = base_r.value();
  base.parallel.overlap_grad_reduce = true;
  base.parallel.overlap_param_gather = true;

  std::vector<Layout> layouts;
  Layout l;
  l.tp = 2, l.cp = 4, l.pp = 2, l.ep = 8, l.etp = 1, l.mbs = 1;
  l.sharding = DpSharding::kOptim;
  l.recompute = RecomputeGranularity::kSelective;
  layouts.push_back(l);
  Layout v = l;  // interleaving, a2a CP, full recompute, tp-pp-dp order, allgather dispatcher
  v.vl = 4, v.cp_comm = CpCommType::kA2A, v.recompute = RecomputeGranularity::kFull, v.pp_before_dp = true;
  v.dispatcher = Dispatcher::kAllGather;
  layouts.push_back(v);
  Layout h = l;  // hierarchical CP, FSDP, flex dispatcher, ETP = TP
  h.cp = 8, h.cp_comm = CpCommType::kA2AP2P, h.cp_a2a = 2, h.sharding = DpSharding::kOptimGradsParams;
  h.dispatcher = Dispatcher::kFlex, h.etp = 2;
  layouts.push_back(h);
  Layout u = l;  // uneven pipeline, no TP, ZeRO-2, all-gather CP, no recompute, no sharding
  u.tp = 1, u.etp = 1, u.pp = 8, u.first_stage_layers = 5, u.last_stage_layers = 3, u.cp = 2;
  u.cp_comm = CpCommType::kAllGather, u.sharding = DpSharding::kOptimGrads, u.recompute = RecomputeGranularity::kNone;
  layouts.push_back(u);
  Layout d = l;
  d.sharding = DpSharding::kNoShard, d.mbs = 2;
  layouts.push_back(d);
  // And the winner of a real search.
  const PlanResult r = search(base);
  ASSERT_FALSE(r.ranked.empty());
  layouts.push_back(r.ranked.front().layout);

  for (const Layout& x : layouts) {
    const Scenario s = apply_layout(base, x);
    ASSERT_TRUE(validate_scenario(s).empty()) << layout_string(x, base) << ": " << validate_scenario(s).front().message;
    const Scenario back = reimport(s);
    EXPECT_EQ(layout_of(back), x) << layout_string(x, base) << " came back as " << layout_string(layout_of(back), base)
                                  << "\n" << report::megatron_command(s);
    EXPECT_EQ(back.parallel.sequence_parallel, s.parallel.sequence_parallel);
    EXPECT_EQ(back.parallel.use_distributed_optimizer, s.parallel.use_distributed_optimizer);
    EXPECT_EQ(back.parallel.overlap_grad_reduce, s.parallel.overlap_grad_reduce);
    EXPECT_EQ(back.parallel.overlap_param_gather, s.parallel.overlap_param_gather);
    EXPECT_EQ(back.parallel.recompute_method, s.parallel.recompute_method);
    EXPECT_EQ(back.parallel.recompute_num_layers, s.parallel.recompute_num_layers);
    EXPECT_EQ(back.parallel.hierarchical_context_parallel_sizes, s.parallel.hierarchical_context_parallel_sizes);
    // Same layout, same prediction.
    EXPECT_EQ(metrics_of_estimate(back).step_s, metrics_of_estimate(s).step_s) << layout_string(x, base);
  }
}

TEST(PlanFlags, OnlyLayoutFlagsAndNonDefaults) {
  const Scenario base = scenario("llama3.1-8b", {}, 8);
  Layout l;
  l.tp = 1;
  const std::vector<std::string> f = megatron_flags(apply_layout(base, l));
  const std::string line = report::megatron_command(apply_layout(base, l));
  EXPECT_NE(line.find("--tensor-model-parallel-size 1"), std::string::npos);
  EXPECT_EQ(line.find("--sequence-parallel"), std::string::npos);  // tp 1
  EXPECT_EQ(line.find("--cp-comm-type"), std::string::npos);       // cp 1
  EXPECT_EQ(line.find("--expert-model-parallel-size"), std::string::npos);  // dense model
  EXPECT_EQ(line.find("--recompute"), std::string::npos);
  EXPECT_EQ(line.find("--use-distributed-optimizer"), std::string::npos);
}

TEST(PlanLayout, ApplyAndLayoutOfAreInverse) {
  const Scenario base = scenario("deepseek-v3", {}, 1024);
  Layout l;
  l.tp = 2, l.cp = 4, l.cp_comm = CpCommType::kA2AP2P, l.cp_a2a = 2, l.pp = 8, l.first_stage_layers = 7;
  l.last_stage_layers = 6, l.ep = 32, l.etp = 1, l.mbs = 1, l.recompute = RecomputeGranularity::kFull;
  l.sharding = DpSharding::kOptimGrads, l.dispatcher = Dispatcher::kFlex, l.pp_before_dp = true;
  EXPECT_EQ(layout_of(apply_layout(base, l)), l);
  EXPECT_EQ(layout_string(l, base),
            "tp2 cp4(a2a2+p2p2) pp8(first7,last6) ep32 etp1 dp16 mbs1 full optim_grads flex order=tp-cp-ep-pp-dp");
  // The scenario's overlap switches apply where Megatron allows them.
  Layout plain = l;
  plain.sharding = DpSharding::kNoShard;
  EXPECT_FALSE(apply_layout(base, plain).parallel.overlap_param_gather);
  EXPECT_TRUE(apply_layout(base, l).parallel.overlap_param_gather);
}

TEST(PlanLayout, ACustomPipelineLayoutIsKeptNamedAndWritten) {
  // DeepSeek-V3 with Megatron-Bridge's layout (32 stages on pp 8: vp 4).
  const Scenario base =
      scenario("deepseek-v3", {{"parallel.num_layers_in_first_pipeline_stage", "null", "t"},
                               {"parallel.num_layers_in_last_pipeline_stage", "null", "t"},
                               {"parallel.pipeline_model_parallel_layout", "Et|(tt|)*30mL", "t"}});
  const Layout own = layout_of(base);
  EXPECT_TRUE(own.custom_pipeline);
  EXPECT_EQ(own.first_stage_layers, 0);
  EXPECT_EQ(apply_layout(base, own).parallel.pipeline_layout, base.parallel.pipeline_layout);
  const std::string name = layout_string(own, base);
  EXPECT_NE(name.find(" pp8(layout) vp4 "), std::string::npos) << name;
  Layout back;
  std::string error;
  ASSERT_TRUE(parse_layout_string(name, base, back, error)) << error;
  EXPECT_EQ(back, own);
  // Another pipeline split drops the layout; the notation cannot change its virtual stages.
  ASSERT_TRUE(parse_layout_string("pp8(first7,last6)", base, back, error)) << error;
  EXPECT_FALSE(back.custom_pipeline);
  EXPECT_TRUE(apply_layout(base, back).parallel.pipeline_layout.empty());
  EXPECT_FALSE(parse_layout_string("pp8(layout) vp2", base, back, error));
  EXPECT_NE(error.find("32 stages = pp8 x vp4, not vp2"), std::string::npos) << error;
  EXPECT_FALSE(parse_layout_string("pp16(layout)", scenario("default"), back, error));
  EXPECT_NE(error.find("no pipeline_model_parallel_layout"), std::string::npos) << error;
  // Megatron's flag, in its own syntax.
  const std::string line = report::megatron_command(base);
  EXPECT_NE(line.find("--pipeline-model-parallel-layout 'Et|(tt|)*30mL'"), std::string::npos) << line;
  EXPECT_EQ(line.find("--decoder-first-pipeline-num-layers"), std::string::npos);
}

TEST(PlanProgress, DrawsOnlyAfterOneSecondAndClears) {
  std::ostringstream out;
  {
    cli::ProgressBar bar(out, "planning", true);
    bar.update(10, 100, 0.5);
    EXPECT_EQ(out.str(), "");
    bar.update(50, 100, 1.5);
    EXPECT_TRUE(bar.drawn());
    EXPECT_NE(out.str().find(" 50%"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("planning ["), std::string::npos);
    bar.update(60, 100, 1.55);  // within 100 ms: no redraw
    EXPECT_EQ(out.str().find(" 60%"), std::string::npos);
    bar.update(100, 100, 1.6);  // done: always drawn
    EXPECT_NE(out.str().find("100%"), std::string::npos);
    bar.finish();
    EXPECT_FALSE(bar.drawn());
    EXPECT_EQ(out.str().back(), '\r');
  }
  std::ostringstream quiet;
  cli::ProgressBar off(quiet, "planning", false);
  off.update(50, 100, 5.0);
  off.finish();
  EXPECT_EQ(quiet.str(), "");
  EXPECT_NE(cli::ProgressBar::line("x", 1500000, 3000000, 2.0).find("1.5M/3.0M"), std::string::npos);
}

}  // namespace
}  // namespace lcm::plan
