// Routing skew end to end (issue 12; docs/moe-routing.md "Skew in the step"): --set
// model.moe_routing_skew reaches the estimate, whose JSON and table say what was assumed and
// what it makes of the busiest EP rank; the plan's title names it; a bad value is one line.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"
#include "lcm/model/expert_load.hpp"

namespace {

using lcm::test::LcmRun;
using nlohmann::json;

LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "skew_cli_test"); }

json estimate_json(const std::string& set) {
  const LcmRun r = lcm("estimate scenarios/mixtral-8x7b.yaml " + set + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

// Mixtral on the scenario's EP 8: one expert per rank, so the busiest rank's factor is the top
// expert's inclusion probability over the mean, k / E.
TEST(SkewCli, EstimateReportsTheBusiestRankAndSlowsDown) {
  const json bal = estimate_json("");
  EXPECT_EQ(bal["routing"]["skew"], "balanced");
  EXPECT_EQ(bal["routing"]["busiest_ep_rank_factor"], 1.0);
  EXPECT_FALSE(bal["routing"].contains("routed_copies_per_token"));
  const json skw = estimate_json("--set model.moe_routing_skew=zipf:1.0");
  EXPECT_EQ(skw["routing"]["skew"], "zipf:1");
  const double q1 = lcm::topk_inclusion_probabilities(lcm::zipf_weights(8, 1.0), 2)[0];
  EXPECT_NEAR(skw["routing"]["busiest_ep_rank_factor"].get<double>(), q1 / 0.25, 1e-9);
  EXPECT_NEAR(skw["routing"]["routed_copies_per_token"].get<double>(), 2.0, 1e-9);
  EXPECT_GT(skw["time"]["step_s"].get<double>(), 1.3 * bal["time"]["step_s"].get<double>());
  EXPECT_GT(skw["memory"]["peak_bytes"].get<double>(), bal["memory"]["peak_bytes"].get<double>());
  // FLOPs are the model's, whatever the routing.
  EXPECT_EQ(skw["flops"]["per_step"], bal["flops"]["per_step"]);
}

TEST(SkewCli, TableAndPlanTitleNameTheAssumption) {
  const LcmRun est = lcm("estimate scenarios/mixtral-8x7b.yaml --set model.moe_routing_skew=zipf:1.0");
  ASSERT_EQ(est.code, 0) << est.err;
  EXPECT_NE(est.out.find("routing      "), std::string::npos) << est.out;
  EXPECT_NE(est.out.find("zipf:1 (model.moe_routing_skew): the busiest EP rank's experts get 2.524x"), std::string::npos)
      << est.out;
  const LcmRun plan = lcm("plan scenarios/mixtral-8x7b.yaml --set model.moe_routing_skew=zipf:1.0 --top 1 -q");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find(", routing skew zipf:1 ("), std::string::npos) << plan.out;
}

TEST(SkewCli, BadValueIsOneLine) {
  const LcmRun r = lcm("estimate scenarios/mixtral-8x7b.yaml --set model.moe_routing_skew=zipf:x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.moe_routing_skew: 'zipf:x': expected balanced or zipf:S with 0 <= S <= 64"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace
