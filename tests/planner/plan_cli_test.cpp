// `lcm plan`, `lcm sweep`, `lcm comm` end to end: exit codes, one-line errors, formats
// on stdout, -o, no progress bar when stderr is not a terminal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan_test_util.hpp"

namespace {

using nlohmann::json;
using lcm::plantest::lcm;
using lcm::plantest::lines;

TEST(PlanCli, RanksAndPrintsTheWinnersFlags) {
  const auto r = lcm("plan scenarios/mixtral-8x7b.yaml --top 5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress bar: stderr is not a terminal
  EXPECT_NE(r.out.find("Best layouts: Mixtral-8x7B on 64 x h200-sxm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Why not"), std::string::npos);
  EXPECT_NE(r.out.find("--tensor-model-parallel-size"), std::string::npos);
  EXPECT_NE(r.out.find("  5  tie  tp"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  6  tie  tp"), std::string::npos) << r.out;
  // Near-ties are not a ranking to 0.1%: the tie line says so.
  EXPECT_NE(r.out.find("tie: #1-#5 have error bands overlapping the fastest layout's"), std::string::npos) << r.out;
}

TEST(PlanCli, JsonIsSortedAndEveryRankedLayoutFits) {
  const auto r = lcm("plan scenarios/mixtral-8x7b.yaml --gpus 128 --set seq_length=128K --format json --top 8");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("num_gpus"), 128);
  ASSERT_EQ(j.at("ranked").size(), 8u);
  double prev = 0;
  const double fastest = j.at("ranked").at(0).at("metrics").at("step_s");
  for (const json& x : j.at("ranked")) {
    EXPECT_TRUE(x.at("metrics").at("fits").get<bool>());
    // The fastest first, then its ties (all 8 here: the bands are tens of percent wide) by
    // the high end of their band.
    ASSERT_TRUE(x.at("tie").get<bool>());
    EXPECT_GE(x.at("metrics").at("step_s").get<double>(), fastest);
    if (x.at("rank").get<int>() > 1) {
      EXPECT_GE(x.at("band").at("step_s").at(1).get<double>(), prev);
      prev = x.at("band").at("step_s").at(1).get<double>();
    }
    EXPECT_EQ(x.at("layout").at("data_parallel_size").get<int>() * x.at("layout").at("tensor_model_parallel_size").get<int>() *
                  x.at("layout").at("context_parallel_size").get<int>() *
                  x.at("layout").at("pipeline_model_parallel_size").get<int>(),
              128);
  }
}

TEST(PlanCli, CsvAndMarkdownOnStdoutAndAtomicOutputFile) {
  const auto csv = lcm("plan scenarios/llama3.1-8b.yaml --format csv --top 3");
  ASSERT_EQ(csv.code, 0) << csv.err;
  const auto ls = lines(csv.out);
  ASSERT_EQ(ls.size(), 4u);
  EXPECT_EQ(ls[0].rfind("rank,layout,tp,", 0), 0u);
  const auto md = lcm("plan scenarios/llama3.1-8b.yaml --format md");
  ASSERT_EQ(md.code, 0) << md.err;
  // Decision, May-fit (tight layouts), why-not, flags.
  EXPECT_EQ(lcm::plantest::check_markdown_tables(md.out), 4);
  EXPECT_NE(md.out.find("### May fit"), std::string::npos);

  const std::string file = std::string(LCM_BINARY_DIR) + "/plan_cli_test_out.json";
  std::remove(file.c_str());
  const auto r = lcm("plan scenarios/llama3.1-8b.yaml --format json -o '" + file + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const json j = json::parse(lcm::plantest::slurp(file), nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  EXPECT_FALSE(j.at("ranked").empty());
  std::remove(file.c_str());
}

TEST(PlanCli, NoValidLayoutNamesTheTightestConstraint) {
  const auto r = lcm("plan scenarios/mixtral-8x7b.yaml --gpus 12");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("no valid layout for 12 GPUs"), std::string::npos) << r.err;
  // 300 meshes: tp 1, 2, 4 (divisors of 8 that divide 12) with etp every divisor of tp; tp 4's
  // etp 2 adds 20 (5 cp x pipeline splits of 12 / 4 ranks, x 4 ep) to the 280 of etp in {1, tp}.
  EXPECT_NE(r.err.find("every one of the 300 candidates breaks hardware.num_gpus"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("multiple of gpus_per_node (8)"), std::string::npos) << r.err;
}

TEST(PlanCli, NothingFitsSaysByHowMuch) {
  const auto r = lcm("plan scenarios/deepseek-v3.yaml --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  // No default headroom: the memory band decides against the whole 140.40 GiB.
  EXPECT_NE(r.err.find("nothing fits in 140.40 GiB of HBM per GPU on 8 GPUs"), std::string::npos) << r.err;
  // --headroom still reserves a share: 140.40 x 0.9 = 126.36 GiB.
  const auto h = lcm("plan scenarios/deepseek-v3.yaml --gpus 8 --headroom 10%");
  EXPECT_EQ(h.code, 2);
  EXPECT_NE(h.err.find("nothing fits in 126.36 GiB per GPU (HBM 140.40 GiB less the 10.00% headroom) on 8 GPUs"),
            std::string::npos)
      << h.err;
  EXPECT_NE(r.err.find("misses by"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("attention_backend"), std::string::npos) << r.err;
  // Unfused attention's s x s probabilities at 128K: the message names the knob.
  const auto u = lcm("plan scenarios/llama3.1-8b.yaml --set attention_backend=unfused");
  EXPECT_EQ(u.code, 2);
  ASSERT_EQ(lines(u.err).size(), 1u) << u.err;
  EXPECT_NE(u.err.find("training.attention_backend is unfused, which keeps every layer's seq x seq probabilities and "
                       "cannot use context parallelism (--set attention_backend=fused lifts both)"),
            std::string::npos)
      << u.err;
}

TEST(PlanCli, BadOptionsAreOneLineErrors) {
  for (const char* args : {"plan scenarios/mixtral-8x7b.yaml --gpus 0", "plan scenarios/mixtral-8x7b.yaml --top 0",
                           "plan scenarios/mixtral-8x7b.yaml --format xml", "plan scenarios/nope.yaml",
                           "plan scenarios/mixtral-8x7b.yaml --set seq_length=-5",
                           "sweep scenarios/mixtral-8x7b.yaml --vary seq_length",
                           "sweep scenarios/mixtral-8x7b.yaml --vary seq_length=4K,,8K",
                           "sweep scenarios/mixtral-8x7b.yaml --vary bogus_key=1,2"}) {
    const auto r = lcm(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(PlanCli, SetOfASearchedKnobIsNoted) {
  const auto r = lcm("plan scenarios/llama3.1-8b.yaml --set tensor_model_parallel_size=8 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("the planner chooses tensor_model_parallel_size itself"), std::string::npos) << r.err;
}

TEST(SweepCli, OneWinnerPerPoint) {
  const auto r = lcm("sweep scenarios/mixtral-8x7b.yaml --vary seq_length=8K,32K --vary num_experts=8,16 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("points").size(), 4u);
  EXPECT_EQ(j.at("points").at(1).at("values").at("seq_length"), "8K");
  EXPECT_EQ(j.at("points").at(1).at("values").at("num_experts"), "16");
  for (const json& p : j.at("points")) EXPECT_FALSE(p.at("plan").at("ranked").empty());
  const auto t = lcm("sweep scenarios/mixtral-8x7b.yaml --vary seq_length=8K,32K");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("changes vs previous point"), std::string::npos);
  // title, header, rule, two points, the tokens-per-step note, one ties note per point, the
  // band note and the "needs GiB" note
  EXPECT_EQ(lines(t.out).size(), 10u) << t.out;
  EXPECT_NE(t.out.find("seq_length=8K: #1-#10 of the plan are error-band ties"), std::string::npos) << t.out;
}

TEST(SweepCli, PointsWhereTheScenariosOwnLayoutBreaksStillPlan) {
  // num_experts 4 breaks the scenario's expert_model_parallel_size 8; the planner replaces it.
  const auto r = lcm("sweep scenarios/mixtral-8x7b.yaml --vary num_experts=4,8 --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 3u);
  EXPECT_NE(ls[1].find(",ok,"), std::string::npos) << ls[1];
}

TEST(CommCli, BreakdownPerDimensionAndCollective) {
  const auto r = lcm("comm scenarios/mixtral-8x7b.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Communication by dimension"), std::string::npos);
  EXPECT_NE(r.out.find("inter-node"), std::string::npos);
  EXPECT_NE(r.out.find("all_to_all"), std::string::npos);
  const auto j = lcm("comm scenarios/mixtral-8x7b.yaml --format json --set context_parallel_size=4");
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_FALSE(json::parse(j.out).at("items").empty());
  const auto bad = lcm("comm scenarios/mixtral-8x7b.yaml --set context_parallel_size=3");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(lines(bad.err).size(), 1u) << bad.err;
}

}  // namespace
