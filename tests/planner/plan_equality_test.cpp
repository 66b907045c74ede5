// The planner shares sub-results between layouts (the model's incremental estimator);
// every layout's result must still equal a fresh validate_scenario + estimate() of it,
// exactly (bit for bit). Checked on every layout of a full search (the cached path, in
// search order), on samples of larger searches and on random layouts through one
// evaluator (caches hit in random order).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "lcm/model/estimate.hpp"
#include "plan_test_util.hpp"

namespace lcm::plan {
namespace {

using plantest::scenario;

// Every field of the outcome against the reference; `what` names the layout.
void expect_equal_to_fresh(const Scenario& base, const Layout& l, const Outcome& o, const std::string& what) {
  const Scenario s = apply_layout(base, l);
  const std::vector<Problem> problems = validate_scenario(s);
  ASSERT_EQ(o.status == Outcome::Status::kInvalid, !problems.empty()) << what;
  if (!problems.empty()) {
    ASSERT_EQ(o.problems.size(), problems.size()) << what;
    for (size_t i = 0; i < problems.size(); ++i) {
      EXPECT_EQ(o.problems[i].key, problems[i].key) << what;
      EXPECT_EQ(o.problems[i].message, problems[i].message) << what;
    }
    return;
  }
  const Metrics m = metrics_of_estimate(s);
  EXPECT_EQ(o.status == Outcome::Status::kFits, m.fits) << what;
  EXPECT_EQ(o.metrics.peak_bytes, m.peak_bytes) << what;
  EXPECT_EQ(o.metrics.allocated_peak_bytes, m.allocated_peak_bytes) << what;
  EXPECT_EQ(o.metrics.worst_stage, m.worst_stage) << what;
  EXPECT_EQ(o.metrics.fits, m.fits) << what;
  EXPECT_EQ(o.metrics.hbm_bytes, m.hbm_bytes) << what;
  EXPECT_EQ(o.metrics.miss_bytes, m.miss_bytes) << what;
  EXPECT_EQ(o.metrics.miss_stage, m.miss_stage) << what;
  if (!o.has_time) {
    // The search times out-of-memory layouts only near HBM.
    EXPECT_FALSE(m.fits) << what;
    return;
  }
  EXPECT_EQ(o.metrics.step_s, m.step_s) << what;
  EXPECT_EQ(o.metrics.tokens_per_s_per_gpu, m.tokens_per_s_per_gpu) << what;
  EXPECT_EQ(o.metrics.mfu, m.mfu) << what;
  EXPECT_EQ(o.metrics.hfu, m.hfu) << what;
  EXPECT_EQ(o.metrics.bubble, m.bubble) << what;
  EXPECT_EQ(o.metrics.pipeline, m.pipeline) << what;
  EXPECT_EQ(o.metrics.dp_exposed, m.dp_exposed) << what;
  EXPECT_EQ(o.metrics.optimizer, m.optimizer) << what;
  EXPECT_EQ(o.metrics.bottleneck_stage, m.bottleneck_stage) << what;
  for (size_t d = 0; d < o.metrics.exposed_comm.size(); ++d)
    EXPECT_EQ(o.metrics.exposed_comm[d], m.exposed_comm[d]) << what << " exposed dim " << d;
  for (size_t c = 0; c < o.metrics.compute.size(); ++c)
    EXPECT_EQ(o.metrics.compute[c], m.compute[c]) << what << " compute class " << c;
}

// A search's sampled layouts against fresh estimates; returns the number checked.
size_t check_search_sample(const Scenario& base, uint64_t every) {
  PlanOptions o;
  o.sample_every = every;
  o.threads = 2;
  const PlanResult r = search(base, o);
  size_t timed = 0, invalid = 0;
  for (const auto& [l, outcome] : r.samples) {
    expect_equal_to_fresh(base, l, outcome, layout_string(l, base));
    timed += outcome.has_time;
    invalid += outcome.status == Outcome::Status::kInvalid;
    if (::testing::Test::HasFailure()) break;
  }
  // The sample covers the kinds of results.
  EXPECT_GT(timed, 10u);
  return r.samples.size();
}

// Every layout the search evaluates (bounding off, so every valid layout near HBM or
// below it has its composed step time), none skipped.
TEST(PlanEquality, EveryLayoutOfAFullSearchEqualsFreshEstimates) {
  const Scenario base = scenario("mixtral-8x7b", {{"seq_length", "128K"}}, 64);
  PlanOptions o;
  o.sample_every = 1;
  o.threads = 2;
  const PlanResult r = search(base, o);
  size_t timed = 0, invalid = 0, oom = 0;
  for (const auto& [l, outcome] : r.samples) {
    expect_equal_to_fresh(base, l, outcome, layout_string(l, base));
    timed += outcome.has_time;
    invalid += outcome.status == Outcome::Status::kInvalid;
    oom += outcome.status == Outcome::Status::kOutOfMemory;
    if (::testing::Test::HasFailure()) break;
  }
  // Every valid and every timed layout of the search was checked (the search counts
  // them itself; meshes rejected before expansion are invalid and not sampled).
  EXPECT_EQ(r.samples.size() - invalid, r.counts.valid);
  EXPECT_EQ(timed, r.counts.timed);
  EXPECT_GT(r.samples.size(), 20000u);
  EXPECT_GT(timed, 2000u);
  EXPECT_GT(invalid, 1000u);
  EXPECT_GT(oom, 100u);
  std::printf("checked %zu layouts (%zu timed, %zu out of memory, %zu invalid)\n", r.samples.size(), timed, oom,
              invalid);
}

TEST(PlanEquality, MixtralSearchSampleEqualsFreshEstimates) {
  const size_t n = check_search_sample(scenario("mixtral-8x7b", {}, 64), 613);
  EXPECT_GT(n, 1000u);
}

TEST(PlanEquality, MixtralLongContextSearchSampleEqualsFreshEstimates) {
  const size_t n = check_search_sample(scenario("mixtral-8x7b", {{"seq_length", "128K"}}, 256), 701);
  EXPECT_GT(n, 500u);
}

// MLA, MTP, dense and MoE layers, uneven pipelines, FP8 dispatch: every model feature.
TEST(PlanEquality, DeepSeekV3SearchSampleEqualsFreshEstimates) {
  const size_t n = check_search_sample(scenario("deepseek-v3", {}, 512), 1499);
  EXPECT_GT(n, 500u);
}

TEST(PlanEquality, DenseModelSearchSampleEqualsFreshEstimates) {
  const size_t n = check_search_sample(scenario("llama3.1-70b", {}, 128), 97);
  EXPECT_GT(n, 300u);
}

// Random layouts (valid or not) through one evaluator: cache entries are reused by
// layouts in no particular order.
TEST(PlanEquality, RandomLayoutsThroughOneEvaluator) {
  for (const char* id : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"}) {
    const Scenario base = scenario(id, {}, 256);
    Evaluator ev(base);
    std::mt19937 rng(42);
    auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
    int valid = 0;
    for (int i = 0; i < 1500 && !::testing::Test::HasFailure(); ++i) {
      Layout l;
      l.tp = pick({1, 2, 4, 8});
      l.cp = pick({1, 2, 4, 8});
      l.pp = pick({1, 2, 4, 8});
      l.vl = pick({0, 0, 1, 2, 4});
      l.ep = base.model.num_experts > 0 ? pick({1, 2, 4, 8, 16}) : 1;
      l.etp = pick({1, l.tp});
      l.mbs = pick({1, 1, 2});
      l.recompute = static_cast<RecomputeGranularity>(rng() % 3);
      l.sharding = static_cast<DpSharding>(rng() % 4);
      l.cp_comm = static_cast<CpCommType>(rng() % 4);
      l.cp_a2a = l.cp_comm == CpCommType::kA2AP2P ? pick({1, 2}) : 0;
      l.dispatcher = static_cast<Dispatcher>(rng() % 3);
      l.pp_before_dp = rng() % 2;
      const Outcome o = ev.evaluate(l);
      valid += o.status != Outcome::Status::kInvalid;
      EXPECT_TRUE(o.status == Outcome::Status::kInvalid || o.has_time);
      expect_equal_to_fresh(base, l, o, std::string(id) + ": " + layout_string(l, base));
    }
    EXPECT_GT(valid, 50) << id;
  }
}

// A mesh the search rejects before expanding it counts once; the rejection must hold for
// every deeper knob. Check it on every rejection example of a search and on variants.
TEST(PlanEquality, RejectionsHoldForEveryVariantOfTheMesh) {
  const Scenario base = scenario("mixtral-8x7b", {}, 96);
  const PlanResult r = search(base);
  ASSERT_FALSE(r.rejections.empty());
  std::mt19937 rng(7);
  for (const Rejection& x : r.rejections) {
    const std::vector<Problem> p = validate_scenario(apply_layout(base, x.example));
    ASSERT_FALSE(p.empty()) << x.key;
    bool has_key = false;
    for (const Problem& q : p) has_key |= q.key == x.key;
    EXPECT_TRUE(has_key) << x.key << " not among the example's problems";
  }
  // Meshes invalid with the search's most permissive deep knobs stay invalid for others.
  int checked = 0;
  for (int tp : {1, 2, 4, 8})
    for (int cp : {1, 2, 3, 4, 6, 8, 12})
      for (int pp : {1, 2, 3, 4, 6, 8})
        for (int ep : {1, 2, 4, 8}) {
          Layout l;
          l.tp = tp, l.cp = cp, l.pp = pp, l.ep = ep, l.etp = 1;
          l.sharding = DpSharding::kOptim;
          if (validate_scenario(apply_layout(base, l)).empty()) continue;
          for (int k = 0; k < 8; ++k) {
            Layout v = l;
            v.vl = static_cast<int>(rng() % 3);
            v.mbs = 1 << (rng() % 3);
            v.recompute = static_cast<RecomputeGranularity>(rng() % 3);
            v.sharding = static_cast<DpSharding>(rng() % 4);
            v.cp_comm = static_cast<CpCommType>(rng() % 3);
            v.dispatcher = static_cast<Dispatcher>(rng() % 3);
            v.pp_before_dp = rng() % 2;
            EXPECT_FALSE(validate_scenario(apply_layout(base, v)).empty()) << layout_string(v, base);
            ++checked;
          }
        }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace lcm::plan
