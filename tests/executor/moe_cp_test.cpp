// Host tests of the MoE and ring-attention benchmarks' pure logic: options, capacity and
// drops against the model's formula, the routing reference, the loads file, and the
// load-balanced CP chunks and ring steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "lcm/executor/cp_attention.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/model/routing.hpp"
#include "lcm/executor/moe.hpp"
#include "lcm/executor/options.hpp"

namespace lcm::exec {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "lcm-exec");
  return parse_args(static_cast<int>(args.size()), args.data());
}

TEST(MoeOptions, ParsesEveryOption) {
  const Options o = parse({"bench", "moe", "--layout", "ep=2", "--tokens", "4096", "--hidden", "7168", "--ffn", "2048",
                           "--experts", "256", "--topk", "8", "--groups", "8", "--topk-groups", "4", "--score",
                           "sigmoid", "--capacity-factor", "none,1.0,1.25", "--drop-policy", "position", "--skew",
                           "balanced,zipf:1.2,router"});
  EXPECT_EQ(o.family, Family::kMoe);
  EXPECT_EQ(o.moe.tokens, 4096);
  EXPECT_EQ(o.moe.experts, 256);
  EXPECT_EQ(o.moe.topk, 8);
  EXPECT_EQ(o.moe.groups, 8);
  EXPECT_EQ(o.moe.score, RouterScore::kSigmoid);
  EXPECT_EQ(o.moe.drop_policy, DropPolicy::kPosition);
  EXPECT_EQ(o.moe.capacity_factors, (std::vector<double>{0.0, 1.0, 1.25}));
  ASSERT_EQ(o.moe.skews.size(), 3u);
  EXPECT_EQ(o.moe.skews[1].kind, RoutingSkew::Kind::kZipf);
  EXPECT_DOUBLE_EQ(o.moe.skews[1].s, 1.2);
  EXPECT_EQ(o.moe.skews[1].text(), "zipf:1.2");
  EXPECT_EQ(o.moe.skews[2].text(), "router");
}

TEST(MoeOptions, RejectsBadValuesWithClearErrors) {
  EXPECT_THROW(parse({"bench", "moe", "--capacity-factor", "0"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--capacity-factor", "x"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--skew", "zipf:-1"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--skew", "pareto"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--topk", "9", "--experts", "8"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--groups", "3", "--topk-groups", "1", "--experts", "8"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--groups", "4"}), UsageError);  // --topk-groups missing
  EXPECT_THROW(parse({"bench", "moe", "--hidden", "100"}), UsageError);
  EXPECT_THROW(parse({"bench", "moe", "--drop-policy", "random"}), UsageError);
  EXPECT_THROW(parse({"bench", "gemm", "--tokens", "4"}), UsageError);  // an option of bench moe only
  try {
    parse({"bench", "moe", "--score", "relu"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax, sigmoid"), std::string::npos);
  }
}

TEST(CpAttentionOptions, DefaultsToTheCpGroupAndBatchOne) {
  const Options o = parse({"bench", "cp-attention", "--layout", "cp=2"});
  EXPECT_EQ(o.family, Family::kCpAttention);
  EXPECT_EQ(o.group, Group::kCp);
  ASSERT_EQ(o.attn_points.size(), 3u);
  EXPECT_EQ(o.attn_points[2].shape.seq_q, 131072);
  EXPECT_TRUE(o.attn_points[2].shape.causal);
  EXPECT_THROW(parse({"bench", "cp-attention", "--shapes", "2x4096x8x8x64"}), UsageError);
  EXPECT_THROW(parse({"bench", "cp-attention", "--no-causal"}), UsageError);
  EXPECT_EQ(parse({"bench", "cp-attention", "--group", "world"}).group, Group::kWorld);
}

TEST(MoeCapacity, UsesTheModelsFormula) {
  for (int64_t t : {100, 4096, 8192})
    for (int k : {1, 2, 8})
      for (int e : {8, 64, 256})
        for (double cf : {0.5, 1.0, 1.1, 1.25, 2.0}) {
          MoeProblem p;
          p.tokens = t;
          p.topk = k;
          p.experts = e;
          p.cf = cf;
          EXPECT_EQ(p.capacity(), lcm::capacity(t, k, e, cf));
          EXPECT_EQ(p.capacity(), static_cast<int64_t>(std::ceil(static_cast<double>(t * k) / e * cf)));
        }
  MoeProblem p;
  p.tokens = 400;
  p.topk = 1;
  p.experts = 8;
  p.cf = 1.1;
  EXPECT_EQ(p.capacity(), 56);  // (400/8)*1.1 = 55.000000000000007 in double, as Megatron
  p.cf = 0;
  EXPECT_EQ(p.capacity(), -1);  // dropless
}

TEST(MoeDispatch, DropsByProbabilityOrPositionAndLaysOutExpertMajor) {
  // 6 tokens, top-1, 2 experts; expert 0 gets tokens 0,1,2,4 with weights .9 .1 .5 .7
  const std::vector<int32_t> idx{0, 0, 0, 1, 0, 1};
  const std::vector<float> w{0.9f, 0.1f, 0.5f, 0.8f, 0.7f, 0.6f};
  const Dispatch probs = reference_dispatch(idx, w, 6, 1, 2, 2, DropPolicy::kProbs);
  EXPECT_EQ(probs.counts, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(probs.kept, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(probs.dropped, 2);
  EXPECT_DOUBLE_EQ(probs.drop_fraction(), 2.0 / 6.0);
  EXPECT_EQ(probs.row, (std::vector<int32_t>{0, -1, -1, 2, 1, 3}));  // keeps .9 and .7, token order within expert
  const Dispatch pos = reference_dispatch(idx, w, 6, 1, 2, 2, DropPolicy::kPosition);
  EXPECT_EQ(pos.row, (std::vector<int32_t>{0, 1, -1, 2, -1, 3}));  // the first two in token order
  const Dispatch none = reference_dispatch(idx, w, 6, 1, 2, -1, DropPolicy::kProbs);
  EXPECT_EQ(none.dropped, 0);
  EXPECT_EQ(none.row, (std::vector<int32_t>{0, 1, 2, 4, 3, 5}));
  // ties under `probs`: the earlier token is kept
  const Dispatch ties = reference_dispatch({0, 0, 0}, {0.5f, 0.5f, 0.5f}, 3, 1, 1, 2, DropPolicy::kProbs);
  EXPECT_EQ(ties.row, (std::vector<int32_t>{0, 1, -1}));
}

TEST(MoeDispatch, MeasuredDropRateMatchesTheModelsMeasuredDropFraction) {
  std::mt19937_64 rng(5);
  const int E = 16, k = 2;
  const int64_t T = 1000;
  std::vector<int32_t> idx;
  std::vector<float> w;
  for (int64_t t = 0; t < T; ++t) {
    const int a = static_cast<int>(rng() % E);
    int b = static_cast<int>(rng() % (E - 1));
    if (b >= a) ++b;
    idx.push_back(a % 3 == 0 ? 0 : a);  // skewed toward expert 0
    idx.push_back(b);
    w.push_back(0.6f);
    w.push_back(0.4f);
  }
  for (int64_t t = 0; t < T; ++t)
    if (idx[static_cast<size_t>(t * 2)] == idx[static_cast<size_t>(t * 2 + 1)]) idx[static_cast<size_t>(t * 2 + 1)] = (idx[static_cast<size_t>(t * 2)] + 1) % E;
  const int64_t C = lcm::capacity(T, k, E, 1.0);
  const Dispatch d = reference_dispatch(idx, w, T, k, E, C, DropPolicy::kProbs);
  std::vector<double> loads(d.counts.begin(), d.counts.end());
  EXPECT_NEAR(d.drop_fraction(), lcm::measured_drop_fraction(loads, static_cast<double>(C)), 1e-12);
  EXPECT_GT(d.dropped, 0);
}

TEST(MoeRouting, SoftmaxSigmoidAndGroupLimitedTopk) {
  MoeProblem p;
  p.experts = 8;
  p.topk = 2;
  const float l[8] = {0.1f, 2.0f, -1.0f, 1.5f, 0.0f, 1.9f, 0.3f, -0.5f};
  TokenRoute r = route_token(l, p);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{1, 5}));
  EXPECT_NEAR(r.w[0], 1.0 / (1.0 + std::exp(1.9 - 2.0)), 1e-6);  // softmax over the selected logits
  EXPECT_NEAR(r.w[0] + r.w[1], 1.0, 1e-6);
  p.score = RouterScore::kSigmoid;
  r = route_token(l, p);
  const double s1 = 1 / (1 + std::exp(-2.0)), s5 = 1 / (1 + std::exp(-1.9));
  EXPECT_NEAR(r.w[0], s1 / (s1 + s5), 1e-6);
  // groups of 2: {0,1} {2,3} {4,5} {6,7}; group scores (top-1 each): 2.0, 1.5, 1.9, 0.3;
  // one group only -> experts 1 and 0
  p.score = RouterScore::kSoftmax;
  p.groups = 4;
  p.topk_groups = 1;
  p.topk = 1;
  EXPECT_EQ(route_token(l, p).idx, (std::vector<int32_t>{1}));
  p.topk = 2;
  p.topk_groups = 2;  // top-1 per group summed: groups 0 (2.0) and 2 (1.9) -> experts 1, 5
  EXPECT_EQ(route_token(l, p).idx, (std::vector<int32_t>{1, 5}));
}

TEST(MoeRouting, LogWeightsAreTheModelsZipfLaw) {
  MoeProblem p;
  p.experts = 8;
  p.topk = 2;
  p.skew = parse_skews("zipf:1.5")[0];
  const std::vector<float> lw = routing_log_weights(p);
  const std::vector<double> z = lcm::zipf_weights(8, 1.5);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(lw[i], std::log(z[i]), 1e-6);
  p.cf = 1.0;
  p.tokens = 4096;
  EXPECT_GT(expected_drop_fraction(p), 0.05);
  p.skew = RoutingSkew{};
  EXPECT_LT(expected_drop_fraction(p), 0.05);
  p.cf = 0;
  EXPECT_EQ(expected_drop_fraction(p), 0.0);
}

TEST(MoeLoads, FileIsOneCountPerLineAfterCommentLines) {
  const std::string s = format_loads({5, 0, 12}, "two\nlines");
  EXPECT_EQ(s, "# two\n# lines\n5\n0\n12\n");
  // what lcm capacity --loads accepts: '#' comments, then one non-negative count per line
  std::istringstream in(s);
  std::vector<double> v;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') v.push_back(std::stod(line));
  EXPECT_EQ(v, (std::vector<double>{5, 0, 12}));
}

TEST(CpLayout, RankHoldsChunksRAndMirror) {
  const CpLayout l{16, 2, 0};  // chunks of 4: rank 0 holds 0 and 3, rank 1 holds 1 and 2
  EXPECT_EQ(l.chunk(), 4);
  EXPECT_EQ(l.global_row(0), 0);
  EXPECT_EQ(l.global_row(3), 3);
  EXPECT_EQ(l.global_row(4), 12);
  EXPECT_EQ(l.global_row(7), 15);
  const CpLayout m{16, 2, 1};
  EXPECT_EQ(m.global_row(0), 4);
  EXPECT_EQ(m.global_row(4), 8);
  for (int64_t g = 0; g < 16; ++g) {
    const int r = CpLayout::owner(g, 16, 2);
    const CpLayout owner{16, 2, r};
    EXPECT_EQ(owner.global_row(CpLayout::local_of(g, 16, 2)), g);
  }
  EXPECT_THROW((CpLayout{18, 2, 0}).validate(), UsageError);
  EXPECT_EQ(m.kv_source(1), 0);
  EXPECT_EQ(l.step_kind(1), CpStepKind::kUpper);  // rank 0 at step 1 holds rank 1's later chunks
  EXPECT_EQ(m.step_kind(1), CpStepKind::kLower);
}

TEST(CpLayout, RingComputesEveryCausalPairOnceWithEqualWork) {
  for (int cp : {1, 2, 3, 4, 8}) {
    const int64_t S = 2 * cp * 3;
    std::vector<int64_t> pairs = cp_ring_pairs(S, cp);
    std::sort(pairs.begin(), pairs.end());
    EXPECT_TRUE(std::adjacent_find(pairs.begin(), pairs.end()) == pairs.end()) << "cp " << cp;
    EXPECT_EQ(static_cast<int64_t>(pairs.size()), S * (S + 1) / 2) << "cp " << cp;
    for (int64_t x : pairs) EXPECT_LE(x % S, x / S);  // key <= query
    for (int r = 0; r < cp; ++r)
      for (int i = 1; i < cp; ++i) {  // every off-diagonal step: 2 c^2 pairs, as the diagonal's causal half
        const CpLayout::Span s = CpLayout{S, cp, r}.step_span(i);
        EXPECT_EQ(s.q_rows * s.k_rows, 2 * 3 * 3);
      }
  }
}

}  // namespace
}  // namespace lcm::exec
