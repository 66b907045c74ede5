// MoE routing under a capacity factor: capacity (Megatron get_capacity), exact expected
// drops checked against brute-force enumeration of every routing, Monte Carlo agreement,
// Zipf inclusion probabilities, measured loads, and the sweep's consequences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "../common/test_models.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/routing.hpp"

namespace lcm {
namespace {

// ---------------------------------------------------------------------------------
// Independent references: enumerate every routing of T tokens.
// ---------------------------------------------------------------------------------

// Every ordered draw of k distinct experts (successive sampling proportional to p) with its
// probability p_a/1 * p_b/(1-p_a) * ...
struct TopkOutcome {
  std::vector<int> experts;
  double prob = 0;
};
std::vector<TopkOutcome> ordered_topk_outcomes(const std::vector<double>& p, int k) {
  std::vector<TopkOutcome> out;
  std::vector<int> cur;
  std::function<void(double, double)> rec = [&](double prob, double used) {
    if (static_cast<int>(cur.size()) == k) {
      out.push_back({cur, prob});
      return;
    }
    for (int e = 0; e < static_cast<int>(p.size()); ++e) {
      if (std::find(cur.begin(), cur.end(), e) != cur.end()) continue;
      cur.push_back(e);
      rec(prob * p[static_cast<size_t>(e)] / (1.0 - used), used + p[static_cast<size_t>(e)]);
      cur.pop_back();
    }
  };
  rec(1.0, 0.0);
  return out;
}

// E[sum_e max(0, n_e - C)] / (T k) by enumerating all outcomes^T joint routings.
double brute_force_drop(const std::vector<double>& p, int k, int tokens, int64_t cap) {
  const auto outcomes = ordered_topk_outcomes(p, k);
  std::vector<int64_t> loads(p.size(), 0);
  double expected = 0;
  std::function<void(int, double)> rec = [&](int t, double prob) {
    if (t == tokens) {
      int64_t excess = 0;
      for (int64_t n : loads) excess += std::max<int64_t>(0, n - cap);
      expected += prob * static_cast<double>(excess);
      return;
    }
    for (const TopkOutcome& o : outcomes) {
      for (int e : o.experts) ++loads[static_cast<size_t>(e)];
      rec(t + 1, prob * o.prob);
      for (int e : o.experts) --loads[static_cast<size_t>(e)];
    }
  };
  rec(0, 1.0);
  return expected / (static_cast<double>(tokens) * k);
}

std::vector<double> uniform(int e) { return std::vector<double>(static_cast<size_t>(e), 1.0 / e); }

// ---------------------------------------------------------------------------------
// Capacity.
// ---------------------------------------------------------------------------------

TEST(Capacity, MatchesMegatronGetCapacity) {
  // ceil(T*k/E * CF): Mixtral, 4096 tokens per rank, top-2 of 8.
  EXPECT_EQ(capacity(4096, 2, 8, 1.0), 1024);
  EXPECT_EQ(capacity(4096, 2, 8, 1.25), 1280);
  EXPECT_EQ(capacity(4096, 2, 8, 1.3), 1332);  // 1331.2 rounds up
  EXPECT_EQ(capacity(1000, 1, 3, 1.0), 334);   // Switch, k = 1
  // Megatron divides first, then multiplies, in double: (400/8)*1.1 = 55.00000000000001,
  // so C = 56 where exact arithmetic gives 55.
  EXPECT_EQ(capacity(400, 1, 8, 1.1), 56);
  EXPECT_EQ(capacity(800, 1, 8, 1.1), 111);
  // The order matters: (20/3)*1.05 = 7.000000000000001 -> 8 where 20*1.05/3 = 7.0 -> 7, and
  // (45/3)*2.2 = 33.0 -> 33 where 45*2.2/3 = 33.00000000000001 -> 34.
  EXPECT_EQ(capacity(10, 2, 3, 1.05), 8);
  EXPECT_EQ(capacity(45, 1, 3, 2.2), 33);
  EXPECT_EQ(capacity(8, 1, 8, 0.5), 1);
  EXPECT_EQ(capacity(8, 1, 8, 0.5, /*min_capacity=*/4), 4);
  EXPECT_EQ(capacity(8, 1, 8, 2.0, /*min_capacity=*/4), 4);
  EXPECT_EQ(capacity(800, 1, 8, 2.0, /*min_capacity=*/4), 200);
  EXPECT_EQ(capacity_for_assignments(100.0, 4, 1.25), 32);
}

TEST(Capacity, RoutingGroupIsTheLocalSequenceShard) {
  Scenario s;
  s.model = testing::mixtral_8x7b();  // a complete model: resolve() asserts one (found by the ASan + asserts suite)
  s.training.micro_batch_size = 2;
  s.training.seq_length = 8192;
  Mesh m;
  m.tp = 4;
  m.cp = 2;
  m.sp = true;
  EXPECT_EQ(routing_group_tokens(s, m), 2 * 8192 / 2 / 4);
  m.sp = false;  // without SP every TP rank routes the whole CP shard
  EXPECT_EQ(routing_group_tokens(s, m), 2 * 8192 / 2);
}

// ---------------------------------------------------------------------------------
// Exact expected drops against enumeration.
// ---------------------------------------------------------------------------------

TEST(ExactDrops, BalancedTop1MatchesEnumerationOfAll4To8Routings) {
  // E = 4, k = 1, T = 8: 4^8 = 65536 equally likely routings.
  const std::vector<double> q = uniform(4);
  for (int64_t cap = 0; cap <= 9; ++cap) {
    const double brute = brute_force_drop(uniform(4), 1, 8, cap);
    EXPECT_NEAR(expected_drop_fraction(q, 8, 1, cap), brute, 1e-14) << "C = " << cap;
  }
  // Hand check at C = 2 (CF = 1): E[max(0, n - 2)] for n ~ Bin(8, 1/4) is
  // sum_{n>=3} (n-2) C(8,n) 4^-n (3/4)^(8-n) = 30618/65536 = 0.467193603515625; times 4
  // experts over 8 assignments: 0.2335968017578125.
  double hand = 0;
  for (int n = 3; n <= 8; ++n) {
    double choose = 1;
    for (int i = 0; i < n; ++i) choose = choose * (8 - i) / (i + 1);
    hand += (n - 2) * choose * std::pow(0.25, n) * std::pow(0.75, 8 - n);
  }
  EXPECT_DOUBLE_EQ(hand, 0.467193603515625);
  EXPECT_NEAR(expected_drop_fraction(q, 8, 1, capacity(8, 1, 4, 1.0)), 0.2335968017578125, 1e-15);
}

TEST(ExactDrops, BalancedTop2WithoutReplacementMatchesEnumeration) {
  // E = 4, k = 2, T = 5: each token picks one of the 6 expert pairs; q_e = k/E = 1/2.
  // (The enumeration sums 12^5 products of thirds: its own rounding is ~1e-12.)
  const std::vector<double> q(4, 0.5);
  for (int64_t cap = 0; cap <= 5; ++cap) {
    EXPECT_NEAR(expected_drop_fraction(q, 5, 2, cap), brute_force_drop(uniform(4), 2, 5, cap), 1e-10)
        << "C = " << cap;
  }
}

TEST(ExactDrops, ZipfTop2MatchesEnumeration) {
  // E = 4, k = 2, T = 4, p ~ 1/i: the loads are dependent, the expectation is still exact.
  const std::vector<double> p = zipf_weights(4, 1.0);
  const std::vector<double> q = topk_inclusion_probabilities(p, 2);
  for (int64_t cap = 0; cap <= 4; ++cap) {
    EXPECT_NEAR(expected_drop_fraction(q, 4, 2, cap), brute_force_drop(p, 2, 4, cap), 1e-12)
        << "C = " << cap;
  }
}

TEST(ExactDrops, BinomialExcessMatchesDirectSumForLargeN) {
  // n = 200000, q = 1/8 (top-2 of 16): sum over the whole support in long double.
  const int64_t n = 200000;
  const double q = 0.125;
  const long double mean = n * static_cast<long double>(q);
  const long double sd = std::sqrt(mean * (1 - q));
  for (double z : {-3.0, -0.5, 0.0, 0.7, 2.0, 4.0, 6.0}) {
    const auto c = static_cast<int64_t>(std::llround(mean + z * sd));
    long double direct = 0;
    for (int64_t x = c + 1; x <= n; ++x) {
      using ld = long double;
      const ld lp = std::lgamma(static_cast<ld>(n) + 1) - std::lgamma(static_cast<ld>(x) + 1) -
                    std::lgamma(static_cast<ld>(n - x) + 1) + x * std::log(static_cast<ld>(q)) +
                    (n - x) * std::log1p(-static_cast<ld>(q));
      const long double term = (x - c) * std::exp(lp);
      direct += term;
      if (x > mean && term < 1e-30L) break;
    }
    const double got = expected_binomial_excess(n, q, c);
    EXPECT_NEAR(got, static_cast<double>(direct), 1e-9 * std::max(1.0, static_cast<double>(direct)) + 1e-25)
        << "z = " << z;
  }
  EXPECT_EQ(expected_binomial_excess(n, q, n), 0.0);
  EXPECT_NEAR(expected_binomial_excess(n, q, -5), static_cast<double>(mean) + 5, 1e-9);
  EXPECT_EQ(expected_binomial_excess(10, 1.0, 4), 6.0);
  EXPECT_EQ(expected_binomial_excess(10, 0.0, 4), 0.0);
}

TEST(ExactDrops, BinomialExcessMatchesSymmetricClosedFormUpToABillion) {
  // X ~ Bin(n, 1/2), n even: E[max(0, X - n/2)] = E|X - n/2| / 2 = (n/4) C(n, n/2) 2^-n, and
  // C(n, n/2) 2^-n = sqrt(2/(pi n)) (1 - 1/(4n) + 1/(32n^2) + O(n^-3)).
  for (int64_t n : {int64_t{100000}, int64_t{10000000}, int64_t{1000000000}}) {
    const long double nn = static_cast<long double>(n);
    const long double pmf_mid =
        std::sqrt(2.0L / (3.14159265358979323846L * nn)) * (1 - 1 / (4 * nn) + 1 / (32 * nn * nn));
    const double ref = static_cast<double>(nn / 4 * pmf_mid);
    EXPECT_NEAR(expected_binomial_excess(n, 0.5, n / 2), ref, 1e-12 * ref) << "n = " << n;
    // One step up removes P(X > n/2) = (1 - pmf_mid) / 2.
    const double step = expected_binomial_excess(n, 0.5, n / 2) - expected_binomial_excess(n, 0.5, n / 2 + 1);
    EXPECT_NEAR(step, static_cast<double>((1 - pmf_mid) / 2), 1e-9) << "n = " << n;
  }
}

// ---------------------------------------------------------------------------------
// Inclusion probabilities of top-k without replacement.
// ---------------------------------------------------------------------------------

TEST(Inclusion, MatchesEnumerationOfOrderedDraws) {
  const std::vector<double> w = {5.0, 0.3, 2.0, 1.0, 0.05, 0.7};
  for (int k : {2, 3, 5}) {
    std::vector<double> ref(w.size(), 0.0);
    const double sum = std::accumulate(w.begin(), w.end(), 0.0);
    std::vector<double> p(w.size());
    for (size_t i = 0; i < w.size(); ++i) p[i] = w[i] / sum;
    for (const TopkOutcome& o : ordered_topk_outcomes(p, k))
      for (int e : o.experts) ref[static_cast<size_t>(e)] += o.prob;
    const std::vector<double> q = topk_inclusion_probabilities(w, k);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(q[i], ref[i], 1e-12) << "k = " << k << " e = " << i;
  }
}

TEST(Inclusion, SumsToKAndFollowsPopularity) {
  for (double s : {0.5, 1.0, 2.0}) {
    const std::vector<double> q = topk_inclusion_probabilities(zipf_weights(256, s), 8);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 8.0, 1e-10) << "S = " << s;
    for (size_t i = 1; i < q.size(); ++i) EXPECT_LE(q[i], q[i - 1] + 1e-15);
    EXPECT_LE(q.front(), 1.0);
  }
  // Top-1 is the popularity itself; top-E includes everyone.
  const std::vector<double> p = zipf_weights(8, 1.3);
  EXPECT_EQ(topk_inclusion_probabilities(p, 1), p);
  for (double x : topk_inclusion_probabilities(p, 8)) EXPECT_EQ(x, 1.0);
}

TEST(Inclusion, ZipfZeroIsBalanced) {
  const std::vector<double> p = zipf_weights(8, 0.0);
  for (double x : p) EXPECT_DOUBLE_EQ(x, 0.125);
  const std::vector<double> q = topk_inclusion_probabilities(p, 2);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_DOUBLE_EQ(q[i], 0.25);
  for (double cf : {0.8, 1.0, 1.25, 2.0}) {
    const int64_t c = capacity(4096, 2, 8, cf);
    EXPECT_DOUBLE_EQ(expected_drop_fraction(q, 4096, 2, c),
                     expected_drop_fraction(std::vector<double>(8, 0.25), 4096, 2, c));
  }
}

// ---------------------------------------------------------------------------------
// Properties of the drop rate.
// ---------------------------------------------------------------------------------

TEST(ExactDrops, FallMonotonicallyWithCapacityFactorAndVanish) {
  const int64_t t = 4096;
  for (double s : {0.0, 0.7, 1.5}) {
    const std::vector<double> q = topk_inclusion_probabilities(zipf_weights(8, s), 2);
    double prev = 1.0;
    for (double cf = 0.25; cf <= 8.0; cf += 0.05) {
      const double d = expected_drop_fraction(q, t, 2, capacity(t, 2, 8, cf));
      EXPECT_LE(d, prev) << "S = " << s << " CF = " << cf;
      EXPECT_GE(d, 0.0);
      prev = d;
    }
    // CF = E/k gives C = T: no expert can receive more than T tokens.
    EXPECT_EQ(expected_drop_fraction(q, t, 2, capacity(t, 2, 8, 4.0)), 0.0);
  }
  // Balanced, CF = 1: C equals the mean load, so about half of the experts overflow by
  // ~0.4 sd: drops ~ 0.4*sqrt(T k/E (1 - k/E)) / (T k / E) = 1.1%.
  const double d1 = expected_drop_fraction(std::vector<double>(8, 0.25), t, 2, capacity(t, 2, 8, 1.0));
  EXPECT_GT(d1, 0.008);
  EXPECT_LT(d1, 0.014);
  EXPECT_LT(expected_drop_fraction(std::vector<double>(8, 0.25), t, 2, capacity(t, 2, 8, 1.5)), 1e-12);
  // CF < 1 drops at least 1 - CF of the assignments (E*C < T*k).
  EXPECT_GE(expected_drop_fraction(std::vector<double>(8, 0.25), t, 2, capacity(t, 2, 8, 0.5)), 0.5 - 1e-12);
}

// ---------------------------------------------------------------------------------
// Monte Carlo.
// ---------------------------------------------------------------------------------

void expect_exact_inside_mc_ci(const std::vector<double>& p, int k, int64_t t, uint64_t seed) {
  const int e = static_cast<int>(p.size());
  const std::vector<double> q = topk_inclusion_probabilities(p, k);
  std::vector<int64_t> caps;
  for (double cf : {0.9, 1.0, 1.1, 1.25, 1.5}) caps.push_back(capacity(t, k, e, cf));
  const auto mc = monte_carlo_drop_fraction(p, t, k, caps, {4000, seed});
  for (size_t i = 0; i < caps.size(); ++i) {
    const double exact = expected_drop_fraction(q, t, k, caps[i]);
    EXPECT_GE(exact, mc[i].ci_low) << "C = " << caps[i] << " mc " << mc[i].mean;
    EXPECT_LE(exact, mc[i].ci_high) << "C = " << caps[i] << " mc " << mc[i].mean;
    EXPECT_EQ(mc[i].samples, 4000);
  }
}

TEST(MonteCarlo, AgreesWithExactBalanced) { expect_exact_inside_mc_ci(uniform(8), 2, 512, 7); }
TEST(MonteCarlo, AgreesWithExactZipf) { expect_exact_inside_mc_ci(zipf_weights(8, 1.0), 2, 512, 11); }
TEST(MonteCarlo, AgreesWithExactZipfFineGrained) {
  // Heavy skew with many picks: exercises the sampler's rejection-then-scan switch.
  expect_exact_inside_mc_ci(zipf_weights(16, 2.0), 6, 128, 3);
}

TEST(MonteCarlo, IsDeterministicForASeed) {
  const std::vector<int64_t> caps = {64, 70, 80};
  const auto a = monte_carlo_drop_fraction(zipf_weights(8, 1.0), 256, 2, caps, {200, 42});
  const auto b = monte_carlo_drop_fraction(zipf_weights(8, 1.0), 256, 2, caps, {200, 42});
  const auto c = monte_carlo_drop_fraction(zipf_weights(8, 1.0), 256, 2, caps, {200, 43});
  for (size_t i = 0; i < caps.size(); ++i) {
    EXPECT_EQ(a[i].mean, b[i].mean);
    EXPECT_EQ(a[i].sd, b[i].sd);
  }
  EXPECT_NE(a[0].mean, c[0].mean);
  // Common random numbers across capacities: larger C never drops more.
  EXPECT_GE(a[0].mean, a[1].mean);
  EXPECT_GE(a[1].mean, a[2].mean);
}

// ---------------------------------------------------------------------------------
// Measured loads.
// ---------------------------------------------------------------------------------

TEST(MeasuredDrops, HandComputedExample) {
  // 4 experts, 100 assignments: mean load 25.
  const std::vector<double> loads = {10, 30, 20, 40};
  EXPECT_EQ(capacity_for_assignments(100, 4, 1.0), 25);   // drops 5 + 15
  EXPECT_DOUBLE_EQ(measured_drop_fraction(loads, 25), 0.20);
  EXPECT_EQ(capacity_for_assignments(100, 4, 1.25), 32);  // 31.25 -> 32, drops 8
  EXPECT_DOUBLE_EQ(measured_drop_fraction(loads, 32), 0.08);
  EXPECT_EQ(capacity_for_assignments(100, 4, 1.5), 38);   // drops 2
  EXPECT_DOUBLE_EQ(measured_drop_fraction(loads, 38), 0.02);
  EXPECT_DOUBLE_EQ(measured_drop_fraction(loads, 50), 0.0);
  EXPECT_DOUBLE_EQ(measured_drop_fraction({0, 0}, 1), 0.0);
}

// ---------------------------------------------------------------------------------
// The sweep (needs the whole cost model through estimate()).
// ---------------------------------------------------------------------------------

Scenario mixtral_scenario() {
  Scenario s;
  s.name = "routing-test";
  s.model = testing::mixtral_8x7b();
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 64;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.num_gpus = 64;
  s.hardware.name = "test-h200";
  s.hardware.gpu.hbm_bytes = 141e9;
  s.hardware.gpu.peak_bf16_flops = 989e12;
  s.hardware.gpu.hbm_bw = 4.8e12;
  s.hardware.interconnect.gpus_per_node = 8;
  s.hardware.interconnect.nvlink_bw = 450e9;
  s.hardware.interconnect.nic_bw = 50e9;
  return s;
}

TEST(CapacitySweep, DropsScaleVolumesAndPaddingUsesAllSlots) {
  const Scenario s = mixtral_scenario();
  ASSERT_TRUE(validate_scenario(s).empty());
  CapacityOptions o;
  o.capacity_factors = {1.0, 1.25, 2.0};
  const CapacitySweep sw = capacity_sweep(s, o);
  EXPECT_EQ(sw.tokens, 4096 / 2);  // seq / tp under SP
  EXPECT_EQ(sw.tokens_source, TokensSource::kScenario);
  EXPECT_EQ(sw.experts, 8);
  EXPECT_EQ(sw.topk, 2);
  ASSERT_EQ(sw.rows.size(), 3u);
  EXPECT_GT(sw.dropless_expert_flops, 0.0);
  EXPECT_GT(sw.dropless_a2a_bytes, 0.0);  // ep = 8 with the all-to-all dispatcher
  for (const CapacityRow& r : sw.rows) {
    EXPECT_EQ(r.capacity, capacity(2048, 2, 8, r.cf));
    EXPECT_DOUBLE_EQ(r.drop_fraction, expected_drop_fraction(sw.inclusion, 2048, 2, r.capacity));
    EXPECT_DOUBLE_EQ(r.processed_fraction, 1.0 - r.drop_fraction);
    EXPECT_DOUBLE_EQ(r.expert_flops, sw.dropless_expert_flops * (1.0 - r.drop_fraction));
    EXPECT_DOUBLE_EQ(r.a2a_bytes, sw.dropless_a2a_bytes * (1.0 - r.drop_fraction));
    EXPECT_NEAR(r.kept_per_expert, 2048.0 * 2 * (1 - r.drop_fraction) / 8, 1e-9);
    EXPECT_TRUE(r.layout_valid);
    EXPECT_GT(r.peak_bytes, 0.0);
  }
  EXPECT_GT(sw.rows[0].drop_fraction, sw.rows[1].drop_fraction);

  o.pad_to_capacity = true;  // E*C slots computed and sent, drops or not
  const CapacitySweep padded = capacity_sweep(s, o);
  for (const CapacityRow& r : padded.rows) {
    EXPECT_DOUBLE_EQ(r.processed_fraction, 8.0 * static_cast<double>(r.capacity) / (2048.0 * 2));
    EXPECT_DOUBLE_EQ(r.expert_flops, padded.dropless_expert_flops * r.processed_fraction);
  }
  EXPECT_NEAR(padded.rows[2].processed_fraction, 2.0, 1e-12);

  // Padded slots are what the comm model itself sends for a padded scenario (E*C slots):
  // the sweep's scaling and estimate_comm agree where both are defined.
  for (const CapacityRow& r : padded.rows) {
    Scenario sc = s;
    sc.model.moe_expert_capacity_factor = r.cf;
    sc.model.moe_pad_expert_input_to_capacity = true;
    const Comm c = estimate(sc).comm;
    double a2a = 0, ep = 0;
    for (int i = 0; i < c.num_items; ++i) {
      const CommItem& it = c.items[static_cast<size_t>(i)];
      if (it.dim != CommDim::kEp) continue;
      ep += it.sent_bytes;
      if (it.kind == Collective::kAllToAll) a2a += it.sent_bytes;
    }
    EXPECT_NEAR(r.a2a_bytes, a2a, 1e-9 * a2a) << "CF " << r.cf;
    EXPECT_NEAR(r.ep_bytes, ep, 1e-9 * ep) << "CF " << r.cf;
  }
}

TEST(CapacitySweep, AllGatherDispatcherTrafficDoesNotShrink) {
  Scenario s = mixtral_scenario();
  s.model.moe_token_dispatcher_type = Dispatcher::kAllGather;
  CapacityOptions o;
  o.capacity_factors = {1.0};
  o.routing = RoutingKind::kZipf;
  o.zipf_s = 1.0;
  const CapacitySweep sw = capacity_sweep(s, o);
  EXPECT_EQ(sw.ep_rule, EpTrafficRule::kUnchanged);
  ASSERT_GT(sw.rows[0].drop_fraction, 0.1);
  EXPECT_EQ(sw.rows[0].ep_bytes, sw.dropless_ep_bytes);
  EXPECT_GT(sw.dropless_ep_bytes, 0.0);
  EXPECT_LT(sw.rows[0].expert_flops, sw.dropless_expert_flops);  // experts still skip drops
}

TEST(CapacitySweep, MeasuredLoadsAndTokenOverride) {
  Scenario s = mixtral_scenario();
  CapacityOptions o;
  o.capacity_factors = {1.0, 1.25};
  o.routing = RoutingKind::kMeasured;
  o.loads = {100, 300, 200, 400, 250, 250, 250, 250};  // 2000 assignments, mean 250
  CapacitySweep sw = capacity_sweep(s, o);
  EXPECT_EQ(sw.method, DropMethod::kMeasured);
  EXPECT_EQ(sw.tokens, 1000);
  EXPECT_EQ(sw.tokens_source, TokensSource::kLoads);
  EXPECT_EQ(sw.rows[0].capacity, 250);
  EXPECT_DOUBLE_EQ(sw.rows[0].drop_fraction, (50.0 + 150.0) / 2000.0);
  EXPECT_EQ(sw.rows[1].capacity, 313);  // 312.5
  EXPECT_DOUBLE_EQ(sw.rows[1].drop_fraction, 87.0 / 2000.0);
  // Scaled to a routing group of 4000 tokens (8000 assignments, loads x4): C = 1000 at
  // CF 1 drops 200 + 600 of 8000.
  o.tokens = 4000;
  sw = capacity_sweep(s, o);
  EXPECT_EQ(sw.rows[0].capacity, 1000);
  EXPECT_DOUBLE_EQ(sw.rows[0].drop_fraction, 0.1);
  EXPECT_EQ(sw.tokens_source, TokensSource::kOverride);
}

}  // namespace
}  // namespace lcm
