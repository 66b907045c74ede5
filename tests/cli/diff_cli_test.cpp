// `lcm diff` (issue 13): a scenario against itself is all zeros; two layouts of one scenario
// carry exactly the numbers `lcm estimate --layout ... --format json` gives each; the
// differences are B - A and (B - A) / A of those numbers.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

using nlohmann::json;

json lcm_json(const std::string& args) {
  const lcm::test::LcmRun r = lcm::test::run_lcm(args + " --format json", "diff_test");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

void expect_all_zero(const json& j) {
  for (const char* section : {"headline", "memory", "step"}) {
    ASSERT_TRUE(j.contains(section)) << section;
    for (const auto& [key, v] : j[section].items()) {
      if (key == "fits" || key == "may_fit") {
        EXPECT_FALSE(v["changed"].get<bool>());
        continue;
      }
      EXPECT_EQ(v["a"], v["b"]) << section << "." << key;
      EXPECT_EQ(v["diff"].get<double>(), 0.0) << section << "." << key;
      EXPECT_EQ(v["rel"].get<double>(), 0.0) << section << "." << key;
    }
  }
}

TEST(DiffCli, ScenarioAgainstItselfIsAllZeros) {
  const json j = lcm_json("diff scenarios/default.yaml scenarios/default.yaml");
  expect_all_zero(j);
  // 11 headline quantities (7, fits and may_fit among them, and the ends of the step-time and
  // MFU bands), 2 + 15 + 4 memory terms, every step term (3 op classes, the comm dims, bubble,
  // optimizer).
  EXPECT_EQ(j["headline"].size(), 11u);
  EXPECT_TRUE(j["bands_overlap"].get<bool>());
  EXPECT_EQ(j["memory"].size(), 21u);
  EXPECT_GT(j["step"]["gemm"]["a"].get<double>(), 0.0);
  // A bundled name and the same layout given as --layout on both sides: zeros too.
  expect_all_zero(lcm_json("diff default --layout-a 'tp2 cp4 pp2' --layout-b 'tp2 cp4 pp2'"));
}

TEST(DiffCli, TwoLayoutsMatchEstimateExactly) {
  const std::string la = "tp2 cp4(p2p) pp2 mbs1 sel optim", lb = "tp4 cp2(a2a) pp4 mbs1 full no_shard";
  const json d = lcm_json("diff scenarios/default.yaml --layout-a '" + la + "' --layout-b '" + lb + "'");
  const json ea = lcm_json("estimate scenarios/default.yaml --layout '" + la + "'");
  const json eb = lcm_json("estimate scenarios/default.yaml --layout '" + lb + "'");
  EXPECT_EQ(d["a"]["mesh"]["pp"], 2);
  EXPECT_EQ(d["b"]["mesh"]["pp"], 4);
  auto check = [&](const json& row, const json& a, const json& b) {
    EXPECT_EQ(row["a"].get<double>(), a.get<double>());
    EXPECT_EQ(row["b"].get<double>(), b.get<double>());
    EXPECT_EQ(row["diff"].get<double>(), b.get<double>() - a.get<double>());
    if (a.get<double>() != 0)
      EXPECT_EQ(row["rel"].get<double>(), (b.get<double>() - a.get<double>()) / a.get<double>());
  };
  check(d["headline"]["step_s"], ea["time"]["step_s"], eb["time"]["step_s"]);
  check(d["headline"]["tokens_per_s_per_gpu"], ea["time"]["tokens_per_s_per_gpu"], eb["time"]["tokens_per_s_per_gpu"]);
  check(d["headline"]["mfu"], ea["time"]["mfu"], eb["time"]["mfu"]);
  check(d["headline"]["needs_bytes"], ea["memory"]["peak_high_bytes"], eb["memory"]["peak_high_bytes"]);
  EXPECT_EQ(d["headline"]["fits"]["a"], ea["memory"]["fits"]);
  EXPECT_EQ(d["headline"]["fits"]["b"], eb["memory"]["fits"]);
  EXPECT_EQ(d["headline"]["may_fit"]["a"], ea["memory"]["may_fit"]);
  EXPECT_EQ(d["headline"]["may_fit"]["b"], eb["memory"]["may_fit"]);
  const json& sa = ea["memory"]["stages"][ea["memory"]["verdict_stage"].get<size_t>()];
  const json& sb = eb["memory"]["stages"][eb["memory"]["verdict_stage"].get<size_t>()];
  for (const auto& [k, v] : sa["terms"].items()) check(d["memory"][k], v, sb["terms"][k]);
  check(d["memory"]["peak_high"], sa["peak_high_bytes"], sb["peak_high_bytes"]);
  check(d["memory"]["allocated"], sa["allocated_bytes"], sb["allocated_bytes"]);
  for (const auto& [k, v] : ea["time"]["compute_s"].items()) check(d["step"][k], v, eb["time"]["compute_s"][k]);
  for (const auto& [k, v] : ea["time"]["exposed_comm_s"].items())
    check(d["step"][k], v, eb["time"]["exposed_comm_s"][k]);
  check(d["step"]["bubble"], ea["time"]["bubble_s"], eb["time"]["bubble_s"]);
  check(d["step"]["optimizer"], ea["time"]["optimizer_s"], eb["time"]["optimizer_s"]);
  // The layouts differ where they should: pipeline bubble and the pp stages' weights.
  EXPECT_NE(d["step"]["bubble"]["diff"].get<double>(), 0.0);
  EXPECT_NE(d["memory"]["weights"]["diff"].get<double>(), 0.0);
}

TEST(DiffCli, TableMarkdownCsvAndOutputFile) {
  const lcm::test::LcmRun t = lcm::test::run_lcm("diff default default", "diff_test");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("lcm diff: A = default"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("step_s"), std::string::npos);
  const lcm::test::LcmRun m = lcm::test::run_lcm("diff default default --format md", "diff_test");
  EXPECT_NE(m.out.find("| term"), std::string::npos) << m.out;
  const lcm::test::LcmRun c = lcm::test::run_lcm("diff default default --format csv", "diff_test");
  ASSERT_EQ(c.code, 0);
  EXPECT_EQ(c.out.substr(0, c.out.find('\n')), "section,item,a,b,diff,rel,unit");
  EXPECT_NE(c.out.find("\nstep,gemm,"), std::string::npos);
}

}  // namespace
