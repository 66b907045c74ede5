// Skewed routing over expert-parallel ranks (expert_load.hpp) and what it does to the
// schedule and the memory model (model.moe_routing_skew): hand-derived busiest-rank loads,
// and the busiest rank's expert GEMMs, all-to-all bytes and saved activations.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "../common/built_schedule.hpp"
#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/expert_load.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm {
namespace {

// Zipf(1) over 4 experts, top-1: p = (12, 6, 4, 3) / 25. Two EP ranks of 2 experts: the three
// pairings {12|34}, {13|24}, {14|23} are equally likely under a random placement; the busiest
// rank holds 18/25, 16/25 and 15/25 -> E[max] = 49/75 against a mean of 1/2: 98/75. Its
// experts, largest first, average (12/25, (6 + 4 + 3)/3/25).
TEST(RoutedLoad, TwoRanksOfTwoExpertsByEnumeration) {
  const RoutedLoad l = routed_load(4, 1, 1.0, 2, 0.0);
  EXPECT_NEAR(l.copies_per_token, 1.0, 1e-12);
  EXPECT_NEAR(l.busiest_factor, 98.0 / 75.0, 0.005);  // Monte Carlo over 4096 placements
  ASSERT_EQ(l.busiest_loads.size(), 2u);
  EXPECT_NEAR(l.busiest_loads[0], 12.0 / 25.0, 1e-12);  // the top expert is always on the busiest rank
  EXPECT_NEAR(l.busiest_loads[1], 13.0 / 75.0, 0.002);
}

// One expert per rank: the busiest rank always holds the most popular expert, so the factor
// is max q / mean q exactly, with q the top-k inclusion probabilities.
TEST(RoutedLoad, OneExpertPerRankIsTheTopExpert) {
  const std::vector<double> q = topk_inclusion_probabilities(zipf_weights(8, 1.2), 2);
  const RoutedLoad l = routed_load(8, 2, 1.2, 8, 0.0);
  EXPECT_NEAR(l.copies_per_token, 2.0, 1e-9);
  EXPECT_NEAR(l.busiest_factor, q[0] / (2.0 / 8.0), 1e-12);
  ASSERT_EQ(l.busiest_loads.size(), 1u);
  EXPECT_NEAR(l.busiest_loads[0], q[0], 1e-12);
}

TEST(RoutedLoad, BalancedAndSingleRankAreExact) {
  const RoutedLoad b = routed_load(64, 8, 0.0, 8, 0.0);
  EXPECT_EQ(b.busiest_factor, 1.0);
  EXPECT_NEAR(b.copies_per_token, 8.0, 1e-12);
  ASSERT_EQ(b.busiest_loads.size(), 8u);
  for (double x : b.busiest_loads) EXPECT_NEAR(x, 8.0 / 64.0, 1e-15);
  // ep 1: one rank holds every expert; nothing to wait for.
  const RoutedLoad one = routed_load(16, 2, 1.2, 1, 0.0);
  EXPECT_EQ(one.busiest_factor, 1.0);
  ASSERT_EQ(one.busiest_loads.size(), 16u);
  EXPECT_GT(one.busiest_loads.front(), one.busiest_loads.back());
}

// A capacity caps each expert's share at C/T: under zipf:1.2 on 8 experts, top-2, with a cap
// of 0.3 copies per token, w = min(q, 0.3) and the busiest rank holds the capped top expert.
TEST(RoutedLoad, CapacityCapsEachExpert) {
  const std::vector<double> q = topk_inclusion_probabilities(zipf_weights(8, 1.2), 2);
  ASSERT_GT(q[0], 0.3);
  double capped = 0;
  for (double x : q) capped += std::min(x, 0.3);
  const RoutedLoad l = routed_load(8, 2, 1.2, 8, 0.3);
  EXPECT_NEAR(l.copies_per_token, capped, 1e-12);
  EXPECT_NEAR(l.busiest_factor, 0.3 / (capped / 8.0), 1e-12);
}

TEST(RoutedLoad, MoreSkewLoadsTheBusiestRankMore) {
  double last = 1.0;
  for (double s : {0.3, 0.6, 1.0, 1.5}) {
    const double f = routed_load(64, 6, s, 8, 0.0).busiest_factor;
    EXPECT_GT(f, last) << "zipf:" << s;
    last = f;
  }
}

// The table of docs/moe-routing.md, "Skew in the step", as printed there (3 decimals).
TEST(RoutedLoad, DocumentedFactors) {
  struct Row {
    int experts, topk;
    double s;
    std::vector<std::pair<int, double>> ep_factor;
  };
  const std::vector<Row> rows = {
      {8, 2, 0.5, {{2, 1.105}, {4, 1.304}, {8, 1.715}}},
      {8, 2, 1.0, {{2, 1.219}, {4, 1.649}, {8, 2.524}}},
      {128, 8, 0.5, {{2, 1.047}, {4, 1.131}, {8, 1.277}, {16, 1.548}, {32, 2.069}, {64, 3.133}}},
      {128, 8, 1.0, {{2, 1.123}, {4, 1.345}, {8, 1.748}, {16, 2.520}, {32, 4.049}, {64, 7.145}}},
      {256, 8, 0.5, {{8, 1.225}, {16, 1.438}, {32, 1.839}, {64, 2.653}}},
  };
  for (const Row& r : rows)
    for (const auto& [ep, f] : r.ep_factor)
      EXPECT_NEAR(routed_load(r.experts, r.topk, r.s, ep, 0.0).busiest_factor, f, 0.0005)
          << "E " << r.experts << " k " << r.topk << " zipf:" << r.s << " ep " << ep;
}

TEST(RoutedLoad, ExcessShrinksAsTheSquareRootOfTheLayers) {
  EXPECT_DOUBLE_EQ(busiest_factor_over_layers(1.5, 1), 1.5);
  EXPECT_DOUBLE_EQ(busiest_factor_over_layers(1.5, 4), 1.25);
  EXPECT_DOUBLE_EQ(busiest_factor_over_layers(1.0, 48), 1.0);
}

// ---- the schedule and the memory model ----

Scenario mixtral_ep8(double skew) {
  Scenario s;
  s.name = "skew";
  s.model = testing::mixtral_8x7b();
  s.model.moe_routing_skew = skew;
  s.hardware = testing::test_h100();
  s.num_gpus = 8;
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 8;
  s.parallel.expert_model_parallel_size = 8;
  return s;
}

using testing::Built;
using testing::build;

const Op& fwd_op(const Built& b, OpId id) {
  for (const Op& o : b.sched.moe.fwd)
    if (o.id == id) return o;
  ADD_FAILURE() << "no forward op " << to_string(id);
  static const Op none;
  return none;
}

// Mixtral on EP 8 (one expert per rank), 4096 tokens per rank, top-2: balanced, every rank's
// expert sees 8192 copies; under zipf:1.2 the busiest rank's expert sees T * 8 * q_1, and its
// dispatch and combine all-to-alls carry that many copies. The permute stays the sender's.
TEST(RoutingSkew, BusiestRankSetsExpertGemmsAndAllToAll) {
  const Built bal = build(mixtral_ep8(0.0));
  const Built skw = build(mixtral_ep8(1.2));
  const double q1 = topk_inclusion_probabilities(zipf_weights(8, 1.2), 2)[0];
  const double factor = q1 / 0.25;
  EXPECT_EQ(fwd_op(bal, OpId::kMoeExpertsFc1).gemm.m, 8192);
  EXPECT_EQ(fwd_op(skw, OpId::kMoeExpertsFc1).gemm.m, static_cast<int64_t>(8192 * factor));
  EXPECT_EQ(fwd_op(skw, OpId::kMoeExpertsFc2).gemm.m, static_cast<int64_t>(8192 * factor));
  const double a2a = 8192.0 * 4096 * 2;  // copies x hidden x bf16
  EXPECT_DOUBLE_EQ(fwd_op(bal, OpId::kMoeDispatchA2A).coll.message_bytes, a2a);
  EXPECT_NEAR(fwd_op(skw, OpId::kMoeDispatchA2A).coll.message_bytes, a2a * factor, 1e-6 * a2a);
  EXPECT_NEAR(fwd_op(skw, OpId::kMoeCombineA2A).coll.message_bytes, a2a * factor, 1e-6 * a2a);
  EXPECT_DOUBLE_EQ(fwd_op(skw, OpId::kMoePermute).mem.bytes, fwd_op(bal, OpId::kMoePermute).mem.bytes);
}

// Qwen3-like 128 experts on EP 8: 16 local experts, so the grouped GEMMs carry the busiest
// rank's per-expert loads (largest first), and balanced routing keeps the even split.
TEST(RoutingSkew, GroupedGemmsCarryTheBusiestRanksLoads) {
  Scenario s = mixtral_ep8(0.0);
  s.model = testing::qwen3_30b_a3b();
  EXPECT_TRUE(fwd_op(build(s), OpId::kMoeExpertsFc1).gemm.loads.even());
  s.model.moe_routing_skew = 1.0;
  const Op& fc1 = fwd_op(build(s), OpId::kMoeExpertsFc1);
  EXPECT_EQ(fc1.gemm.groups, 16);
  const RoutedLoad l = routed_load(128, 8, 1.0, 8, 0.0);
  EXPECT_EQ(fc1.gemm.loads, expert_load_shares(l.busiest_loads));
  EXPECT_GT(fc1.gemm.loads.share[0], fc1.gemm.loads.share[15]);
  EXPECT_EQ(fc1.gemm.m, static_cast<int64_t>(4096.0 * 8 * l.busiest_factor));
}

// Saved expert activations of one layer scale with the busiest rank's copies; over the
// stage's 32 MoE layers the excess shrinks as 1/sqrt(32). The non-expert parts do not move.
TEST(RoutingSkew, SavedExpertActivationsOverTheStagesLayers) {
  const Scenario bal = mixtral_ep8(0.0), skw = mixtral_ep8(1.2);
  auto per_mb = [](const Scenario& s) {
    const Mesh m = derive_mesh(s);
    const auto layers = stage_layers(s, m);
    return estimate_memory(s, m, layers, gpu_params(s, m, layers)).stages[0].activations_per_microbatch;
  };
  // Expert part of one Mixtral layer at tp 1, bf16, N = T * 2 copies: fc1 input 2Nh, fc1
  // output 2N * 2f, activation output 2Nf, probabilities 4N.
  const double T = 4096, h = 4096, f = 14336, N = 2 * T;
  const double expert_part = 2 * N * h + 2 * N * 2 * f + 2 * N * f + 4 * N;
  const double q1 = topk_inclusion_probabilities(zipf_weights(8, 1.2), 2)[0];
  const double over_layers = busiest_factor_over_layers(q1 / 0.25, 32);
  EXPECT_NEAR(per_mb(skw) - per_mb(bal), 32 * expert_part * (over_layers - 1.0), 1.0);
}

TEST(RoutingSkew, DenseModelsRejectIt) {
  Scenario s = mixtral_ep8(0.0);
  s.model = testing::llama3_8b();
  s.parallel.expert_model_parallel_size = 1;
  s.model.moe_routing_skew = 1.0;
  bool found = false;
  for (const Problem& p : validate_scenario(s)) found |= p.key == "model.moe_routing_skew";
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace lcm
