// `lcm plan` search constraints (issue 13): --fix, --max and --exclude leave knob values out
// of the space; --headroom moves the fits line to HBM x (1 - P/100), checked against the
// numbers `lcm estimate --layout ... --format json` gives; --tie; all shown in the header.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

using nlohmann::json;

lcm::test::LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "plan_constraints_test"); }

json lcm_json(const std::string& args) {
  const lcm::test::LcmRun r = lcm(args + " --format json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

const std::string kPlan = "plan scenarios/default.yaml -q --threads 2 --top 200 ";

TEST(PlanConstraints, FixTpEveryRowHasTp8) {
  const json p = lcm_json(kPlan + "--fix tp=8");
  ASSERT_FALSE(p["ranked"].empty());
  for (const json& r : p["ranked"]) EXPECT_EQ(r["layout"]["tensor_model_parallel_size"], 8) << r["layout_string"];
  EXPECT_EQ(p["constraints"]["given"], json::array({"fix tp=8"}));
  // Fewer candidates than the free search: the constraint is applied while enumerating.
  const json free = lcm_json(kPlan);
  EXPECT_LT(p["counts"]["enumerated"].get<uint64_t>(), free["counts"]["enumerated"].get<uint64_t>());
  bool other_tp = false;
  for (const json& r : free["ranked"]) other_tp |= r["layout"]["tensor_model_parallel_size"] != 8;
  EXPECT_TRUE(other_tp);
}

TEST(PlanConstraints, MaxPpAndFixSharding) {
  const json p = lcm_json(kPlan + "--max pp=2 --fix sharding=optim");
  ASSERT_FALSE(p["ranked"].empty());
  for (const json& r : p["ranked"]) {
    EXPECT_LE(r["layout"]["pipeline_model_parallel_size"].get<int>(), 2) << r["layout_string"];
    EXPECT_EQ(r["layout"]["data_parallel_sharding_strategy"], "optim") << r["layout_string"];
  }
}

TEST(PlanConstraints, ExcludeRemovesTheValue) {
  // Exactly the layouts with the value go: valid(free) = valid(without it) + valid(only it).
  const std::string space = kPlan + "--fix tp=8 --fix cp=2 ";
  const json free = lcm_json(space);
  for (const auto& [value, only, field, shown] :
       {std::tuple<std::string, std::string, std::string, std::string>{
            "zero3", "sharding=zero3", "data_parallel_sharding_strategy", "optim_grads_params"},
        {"full", "recompute=full", "recompute_granularity", "full"},
        {"a2a", "cp_comm=a2a", "cp_comm_type", "a2a"}}) {
    const json without = lcm_json(space + "--exclude " + value);
    const json with_only = lcm_json(space + "--fix " + only);
    ASSERT_FALSE(without["ranked"].empty()) << value;
    ASSERT_FALSE(with_only["ranked"].empty()) << value;
    for (const json& r : without["ranked"]) EXPECT_NE(r["layout"][field], shown) << value << ": " << r["layout_string"];
    for (const json& r : with_only["ranked"])
      EXPECT_EQ(r["layout"][field], shown) << value << ": " << r["layout_string"];
    EXPECT_EQ(free["counts"]["valid"].get<uint64_t>(),
              without["counts"]["valid"].get<uint64_t>() + with_only["counts"]["valid"].get<uint64_t>())
        << value;
  }
}

TEST(PlanConstraints, HeadroomTurnsANearFitIntoAMiss) {
  const std::string space = kPlan + "--fix tp=2 --fix cp=4 ";
  const json p5 = lcm_json(space + "--headroom 5%");
  const double hbm = p5["ranked"][0]["metrics"]["hbm_bytes"].get<double>() / 0.95;
  EXPECT_EQ(p5["constraints"]["headroom"].get<double>(), 0.05);
  // A layout that fits with 5% headroom but needs more than 90% of HBM.
  std::string layout;
  for (const json& r : p5["ranked"]) {
    const double needs = r["metrics"]["peak_high_bytes"].get<double>();
    EXPECT_LE(needs, 0.95 * hbm * (1 + 1e-12));
    if (needs > 0.90 * hbm && layout.empty()) layout = r["layout_string"];
  }
  ASSERT_FALSE(layout.empty()) << "no ranked layout needs between 90% and 95% of HBM";
  // Its numbers from `lcm estimate`: it fits the full HBM, needs more than 90% of it.
  const json e = lcm_json("estimate scenarios/default.yaml --layout '" + layout + "'");
  const double needs = e["memory"]["peak_high_bytes"].get<double>();
  const double full = e["memory"]["hbm_bytes"].get<double>();
  EXPECT_DOUBLE_EQ(full, hbm);
  EXPECT_GT(needs, 0.90 * full);
  EXPECT_LE(needs, 0.95 * full);
  // With 10% headroom it is a miss: not ranked, and no ranked row needs more than 90%.
  const json p10 = lcm_json(space + "--headroom 10%");
  EXPECT_DOUBLE_EQ(p10["constraints"]["hbm_budget_bytes"].get<double>(), 0.90 * full);
  for (const json& r : p10["ranked"]) {
    EXPECT_NE(r["layout_string"], layout);
    EXPECT_LE(r["metrics"]["peak_high_bytes"].get<double>(), 0.90 * full);
  }
  EXPECT_LT(p10["counts"]["fit"].get<uint64_t>(), p5["counts"]["fit"].get<uint64_t>());
}

TEST(PlanConstraints, TieAndHeaderLine) {
  const json p = lcm_json(kPlan + "--fix tp=8 --tie 5%");
  EXPECT_EQ(p["constraints"]["near_tie"].get<double>(), 0.05);
  for (const json& t : p["near_ties"]) EXPECT_LE(t["relative"].get<double>(), 0.05);
  const lcm::test::LcmRun r = lcm(kPlan + "--fix tp=8 --max pp=2 --headroom 10%");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[constraints: fix tp=8, max pp=2, headroom 10%] [HBM budget"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GiB: headroom 10.0%]"), std::string::npos) << r.out;
  // The fits rule names the headroom that decided it.
  EXPECT_NE(r.out.find("headroom --headroom 10%"), std::string::npos) << r.out;
}

}  // namespace
