// Issue 13 (CLI half): options apply (--gpus, --hw), one memory number for the verdict,
// --layout in the planner's notation (round trip over every row of a plan), --set's
// dependent keys and Megatron names, and where the scenario's own layout ranks.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using CmdResult = lcm::test::LcmRun;
using lcm::test::slurp;

CmdResult lcm(const std::string& args) { return lcm::test::run_lcm(args, "issue13_test"); }

json lcm_json(const std::string& args) {
  const CmdResult r = lcm(args + " --format json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(Issue13Options, GpusAppliesToEstimate) {
  const json j = lcm_json("estimate scenarios/default.yaml --gpus 128");
  EXPECT_EQ(j["scenario"]["num_gpus"], 128);
  EXPECT_EQ(j["mesh"]["world"], 128);
  // tp2 cp4 pp2 of the scenario: dp = 128 / 16 = 8 (64 GPUs gave 4).
  EXPECT_EQ(j["mesh"]["dp"], 8);
  EXPECT_EQ(lcm_json("estimate scenarios/default.yaml")["mesh"]["dp"], 4);
}

TEST(Issue13Options, HwAppliesToEstimateAndPlan) {
  const json e = lcm_json("estimate scenarios/default.yaml --hw h100-sxm");
  EXPECT_EQ(e["scenario"]["hardware"], "h100-sxm");
  // H100 SXM: 85.5e9 bytes of HBM (hwprofiles/h100-sxm.yaml); the H200's 150.8e9.
  EXPECT_LT(e["memory"]["hbm_bytes"].get<double>(), 86e9);
  EXPECT_GT(lcm_json("estimate scenarios/default.yaml")["memory"]["hbm_bytes"].get<double>(), 140e9);
  const json p = lcm_json("plan scenarios/default.yaml --hw h100-sxm -q --threads 1 --top 3");
  EXPECT_EQ(p["scenario"]["hardware"], "h100-sxm");
  // No default headroom: the memory band decides, against the H100's whole HBM.
  const double budget = e["memory"]["hbm_bytes"].get<double>();
  EXPECT_EQ(p["constraints"]["headroom"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(p["ranked"][0]["metrics"]["hbm_bytes"].get<double>(), budget);
  EXPECT_DOUBLE_EQ(p["constraints"]["hbm_budget_bytes"].get<double>(), budget);
}

TEST(Issue13Memory, VerdictNumberIsTheTopOfTheRangeEverywhere) {
  const json e = lcm_json("estimate scenarios/default.yaml");
  const json& mem = e["memory"];
  double high = 0;
  int stage = -1;
  for (const json& st : mem["stages"])
    if (st["peak_high_bytes"].get<double>() > high) high = st["peak_high_bytes"], stage = st["stage"];
  EXPECT_EQ(mem["peak_high_bytes"].get<double>(), high);
  EXPECT_EQ(mem["verdict_stage"], stage);
  EXPECT_EQ(mem["fits"].get<bool>(), high <= mem["hbm_bytes"].get<double>());
  EXPECT_GT(high, mem["peak_bytes"].get<double>());  // the headline's number is not the mid-range peak
  // The table's headline states that number first, then the range it tops.
  const CmdResult t = lcm("estimate scenarios/default.yaml");
  const std::string headline = fmt::format("{:.2f} on stage {} of HBM {:.2f}: fits (peak {:.2f}", high / kGiB,
                                           stage, mem["hbm_bytes"].get<double>() / kGiB,
                                           mem["stages"][stage]["peak_bytes"].get<double>() / kGiB);
  EXPECT_NE(t.out.find("memory needed / GPU (GiB)"), std::string::npos);
  EXPECT_NE(t.out.find(headline), std::string::npos) << headline << "\n" << t.out;

  // The plan's needs column and its why-not messages use the same number.
  const json p = lcm_json("plan scenarios/default.yaml --hw h100-sxm -q --threads 1 --top 3");
  for (const json& r : p["ranked"]) {
    const json& m = r["metrics"];
    EXPECT_DOUBLE_EQ(m["needs_gib"].get<double>(), m["peak_high_bytes"].get<double>() / kGiB);
    EXPECT_LE(m["peak_high_bytes"].get<double>(), m["hbm_bytes"].get<double>());
    EXPECT_GT(m["peak_high_bytes"].get<double>(), m["peak_bytes"].get<double>());
  }
  for (const json& w : p["why_not"]) {
    if (w["reason"] != "out_of_memory") continue;
    const json& m = w["metrics"];
    EXPECT_FALSE(m["fits"].get<bool>());
    const std::string needs = fmt::format("needs {:.2f} GiB of {:.2f}", m["peak_high_bytes"].get<double>() / kGiB,
                                          m["hbm_bytes"].get<double>() / kGiB);
    EXPECT_NE(w["message"].get<std::string>().find(needs), std::string::npos) << w["message"];
  }
}

// Every row of a plan, given back through --layout, is that row: same step time and memory.
void expect_round_trip(const std::string& scenario, int top) {
  const json p = lcm_json(fmt::format("plan {} -q --threads 1 --top {}", scenario, top));
  ASSERT_EQ(p["ranked"].size(), static_cast<size_t>(top));
  for (const json& r : p["ranked"]) {
    const std::string l = r["layout_string"];
    const json e = lcm_json(fmt::format("estimate {} --layout '{}'", scenario, l));
    EXPECT_EQ(e["time"]["step_s"].get<double>(), r["metrics"]["step_s"].get<double>()) << l;
    EXPECT_EQ(e["memory"]["peak_high_bytes"].get<double>(), r["metrics"]["peak_high_bytes"].get<double>()) << l;
    EXPECT_EQ(e["mesh"]["tp"], r["layout"]["tensor_model_parallel_size"]) << l;
    EXPECT_EQ(e["mesh"]["vp"], r["layout"]["virtual_pipeline_model_parallel_size"]) << l;
    EXPECT_EQ(e["mesh"]["dp"], r["layout"]["data_parallel_size"]) << l;
  }
}

TEST(Issue13Layout, EveryPlanRowRoundTripsThroughEstimateMoe) { expect_round_trip("scenarios/default.yaml", 10); }
TEST(Issue13Layout, EveryPlanRowRoundTripsThroughEstimateDense) { expect_round_trip("scenarios/llama3.1-8b.yaml", 10); }

TEST(Issue13Layout, CommAndTraceTakeTheLayout) {
  const std::string l = "tp1 cp32(a2a8+p2p4) pp2 vp16 ep8 etp1 dp1 mbs1 no-rc optim alltoall";
  const CmdResult c = lcm("comm scenarios/default.yaml --layout '" + l + "'");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("(pipeline stage 0; " + l + ";"), std::string::npos) << c.out.substr(0, 300);
  const CmdResult t = lcm("trace scenarios/default.yaml --detail layer --micro-batches 1 -o - --layout '" + l + "'");
  ASSERT_EQ(t.code, 0) << t.err;
  const json tr = json::parse(t.out);
  EXPECT_FALSE(tr["traceEvents"].empty());
}

TEST(Issue13Set, DependentKeysFollowWithOneNote) {
  // tp -> 1: sequence_parallel (on in default.yaml) turns off, said once.
  const CmdResult r = lcm("estimate scenarios/default.yaml --set tensor_model_parallel_size=1 --set context_parallel_size=8 "
                          "--format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "lcm: note: --set also set sequence_parallel=false (needs tensor_model_parallel_size > 1)\n");
  EXPECT_EQ(json::parse(r.out)["mesh"]["sp"], false);
  // full -> selective: recompute_num_layers (1 in default.yaml) goes back to null.
  const CmdResult s = lcm("estimate scenarios/default.yaml --set recompute_granularity=selective --format json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.err, "lcm: note: --set also set recompute_num_layers=null (applies only to full recompute)\n");
}

TEST(Issue13Set, MegatronCoreNamesAndNull) {
  // 32 layers on pp2: 16 per rank; 4 virtual stages of 4 layers.
  const CmdResult r = lcm("estimate scenarios/default.yaml --set virtual_pipeline_model_parallel_size=4 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["mesh"]["vp"], 4);
  EXPECT_NE(r.err.find("num_layers_per_virtual_pipeline_stage=4 (from virtual_pipeline_model_parallel_size=4)"),
            std::string::npos);
  EXPECT_EQ(lcm_json("estimate scenarios/default.yaml --set num_layers_per_virtual_pipeline_stage=4 "
                     "--set parallel.virtual_pipeline_model_parallel_size=null")["mesh"]["vp"],
            1);
  EXPECT_EQ(lcm_json("estimate scenarios/default.yaml --set num_layers_per_virtual_pipeline_stage=8")["mesh"]["vp"], 2);
  EXPECT_EQ(lcm_json("estimate scenarios/default.yaml --set num_layers_per_virtual_pipeline_stage=null")["mesh"]["vp"], 1);
  // Megatron-LM's decoder_first_pipeline_num_layers is lcm's num_layers_in_first_pipeline_stage.
  const json u = lcm_json("estimate scenarios/default.yaml --set decoder_first_pipeline_num_layers=15 "
                          "--set decoder_last_pipeline_num_layers=17");
  ASSERT_EQ(u["memory"]["stages"].size(), 2u);
}

TEST(Issue13Plan, SaysWhereTheScenariosLayoutRanks) {
  const CmdResult r = lcm("plan scenarios/default.yaml -q --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const json e = lcm_json("estimate scenarios/default.yaml");
  const std::string line =
      fmt::format("the scenario's layout (tp2 cp4(p2p) pp2 ep8 etp1 dp4 mbs1 full optim alltoall): below the top 10 "
                  "(step {:.3f} s",
                  e["time"]["step_s"].get<double>());
  EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  // A layout of the table given with --layout is found at its rank.
  const json p = lcm_json("plan scenarios/default.yaml -q --threads 1");
  const std::string third = p["ranked"][2]["layout_string"];
  const CmdResult t = lcm("plan scenarios/default.yaml -q --threads 1 --layout '" + third + "'");
  EXPECT_NE(t.out.find("--layout (" + third + "): #3 of the table"), std::string::npos) << t.out;
}

TEST(Issue13Estimate, DenseModelsShowNoExpertMesh) {
  const CmdResult r = lcm("estimate scenarios/llama3.1-8b.yaml");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.find("ep="), std::string::npos) << r.out.substr(0, 500);
  EXPECT_NE(lcm("estimate scenarios/default.yaml").out.find("| ep=8 etp=1 edp=4"), std::string::npos);
}

TEST(Issue13Small, MinutesDropRatesAndTraceFormat) {
  const json e = lcm_json("estimate scenarios/default.yaml");
  const double step = e["time"]["step_s"];
  ASSERT_GE(step, 60.0);
  EXPECT_NE(lcm("estimate scenarios/default.yaml").out.find(fmt::format("{:.3f} = {:.1f} min", step, step / 60.0)),
            std::string::npos);
  // Capacity factor 2 under balanced routing drops ~1e-14 of the tokens: "< 0.001" (%), not 1.4e-12.
  const json c = lcm_json("capacity scenarios/default.yaml");
  ASSERT_LT(c["rows"][3]["drop_fraction"].get<double>(), 1e-5);
  const CmdResult t = lcm("capacity scenarios/default.yaml");
  EXPECT_NE(t.out.find("< 0.001"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("e-1"), std::string::npos) << t.out;
  const CmdResult tr = lcm("trace scenarios/default.yaml --format json --micro-batches 1 --detail layer -o -");
  EXPECT_EQ(tr.code, 0) << tr.err;
  EXPECT_EQ(lcm("trace scenarios/default.yaml --format csv -o -").code, 2);
}

}  // namespace
