// `lcm capacity` end to end (exit codes, JSON / CSV / table output, measured loads files)
// and the loads-file parser.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "lcm/planner/report/capacity_report.hpp"
#include "../common/run_lcm.hpp"

namespace {

namespace fs = std::filesystem;

using lcm::test::LcmRun;
using lcm::test::slurp;

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("lcm_capacity_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// Runs `lcm ARGS` from the source tree root (scratch() is its directory too).
LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "capacity_test"); }

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

const char* kMixtral = "scenarios/mixtral-8x7b.yaml";

nlohmann::json capacity_json(const std::string& extra) {
  const LcmRun r = lcm(std::string("capacity ") + kMixtral + " --format json " + extra);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// ---------------------------------------------------------------------------------
// Output formats.
// ---------------------------------------------------------------------------------

TEST(CapacityCli, JsonBalancedSweep) {
  const auto j = capacity_json("--cf 1.0,1.25,1.5,2.0");
  EXPECT_EQ(j.at("schema_version"), 1);
  const auto& rt = j.at("routing");
  EXPECT_EQ(rt.at("distribution"), "balanced");
  EXPECT_EQ(rt.at("method"), "exact");
  EXPECT_EQ(rt.at("tokens_source"), "scenario");
  EXPECT_EQ(rt.at("experts"), 8);
  EXPECT_EQ(rt.at("topk"), 2);
  const auto t = rt.at("tokens").get<int64_t>();
  ASSERT_GT(t, 0);
  for (const auto& q : rt.at("inclusion_probabilities")) EXPECT_DOUBLE_EQ(q.get<double>(), 0.25);
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 4u);
  const double cfs[] = {1.0, 1.25, 1.5, 2.0};
  double prev = 1.0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    EXPECT_DOUBLE_EQ(r.at("cf").get<double>(), cfs[i]);
    EXPECT_EQ(r.at("capacity").get<int64_t>(), static_cast<int64_t>(std::ceil(t * 2.0 / 8 * cfs[i])));
    const double d = r.at("drop_fraction").get<double>();
    EXPECT_GE(d, 0.0);
    EXPECT_LE(d, prev);
    prev = d;
    EXPECT_NEAR(r.at("processed_fraction").get<double>(), 1.0 - d, 1e-12);
    EXPECT_NEAR(r.at("expert_flops").get<double>(), j.at("dropless").at("expert_flops").get<double>() * (1 - d),
                1e-6 * r.at("expert_flops").get<double>());
    EXPECT_GT(r.at("peak_bytes").get<double>(), 0.0);
  }
  EXPECT_GT(rows[0].at("drop_fraction").get<double>(), 0.0);  // CF 1 drops under balanced routing
  EXPECT_LT(rows[3].at("drop_fraction").get<double>(), 1e-9);
}

TEST(CapacityCli, ZipfDropsMoreThanBalanced) {
  const auto bal = capacity_json("--cf 1.0,1.25,1.5,2.0");
  const auto zipf = capacity_json("--cf 1.0,1.25,1.5,2.0 --skew zipf:1.0");
  EXPECT_EQ(zipf.at("routing").at("distribution"), "zipf");
  EXPECT_DOUBLE_EQ(zipf.at("routing").at("zipf_s").get<double>(), 1.0);
  double sum = 0, prev = 1.0;
  for (const auto& q : zipf.at("routing").at("inclusion_probabilities")) {
    EXPECT_LE(q.get<double>(), prev);
    prev = q.get<double>();
    sum += prev;
  }
  EXPECT_NEAR(sum, 2.0, 1e-10);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_GT(zipf.at("rows")[i].at("drop_fraction").get<double>(),
              bal.at("rows")[i].at("drop_fraction").get<double>());
  // Zipf with S = 0 is balanced routing.
  const auto flat = capacity_json("--cf 1.0,1.25 --skew zipf:0");
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(flat.at("rows")[i].at("drop_fraction").get<double>(),
                bal.at("rows")[i].at("drop_fraction").get<double>(), 1e-12);
}

TEST(CapacityCli, CsvHasOneRowPerCapacityFactor) {
  const LcmRun r = lcm(std::string("capacity ") + kMixtral + " --cf 1,1.5,3 --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("cf,capacity,drop_fraction,drop_ci_low,drop_ci_high,", 0), 0u) << header;
  const auto fields = std::count(header.begin(), header.end(), ',') + 1;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ',') + 1, fields) << line;
  }
  EXPECT_EQ(rows, 3);
}

TEST(CapacityCli, TableAndMarkdownCarryTheNotes) {
  const LcmRun t = lcm(std::string("capacity ") + kMixtral + " --skew zipf:1.0");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("dropless"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Zipf S = 1"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Method: exact"), std::string::npos) << t.out;
  EXPECT_EQ(count_lines(t.out) > 8, true);
  const LcmRun md = lcm(std::string("capacity ") + kMixtral + " --format md --method mc --samples 50 --tokens 256");
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("| cf |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("drop 95% CI %"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("seed 1"), std::string::npos) << md.out;
}

TEST(CapacityCli, MonteCarloIsSeededAndBracketsTheExactValue) {
  const std::string args = "--cf 0.9,1.0,1.25 --tokens 1024 --skew zipf:0.8";
  const auto exact = capacity_json(args);
  const auto a = capacity_json(args + " --method mc --samples 2000 --seed 9");
  const auto b = capacity_json(args + " --method mc --samples 2000 --seed 9");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.at("routing").at("samples"), 2000);
  EXPECT_EQ(a.at("routing").at("seed"), 9);
  EXPECT_EQ(a.at("routing").at("tokens"), 1024);
  EXPECT_EQ(a.at("routing").at("tokens_source"), "--tokens");
  for (size_t i = 0; i < 3; ++i) {
    const auto& r = a.at("rows")[i];
    const double x = exact.at("rows")[i].at("drop_fraction").get<double>();
    EXPECT_LE(r.at("drop_ci_low").get<double>(), x);
    EXPECT_GE(r.at("drop_ci_high").get<double>(), x);
    EXPECT_LT(r.at("drop_ci_low").get<double>(), r.at("drop_ci_high").get<double>());
  }
}

TEST(CapacityCli, PadToCapacityComputesEverySlot) {
  const auto j = capacity_json("--cf 1.0,1.5 --pad");
  EXPECT_TRUE(j.at("routing").at("pad_to_capacity").get<bool>());
  const double t = j.at("routing").at("tokens").get<double>();
  for (const auto& r : j.at("rows"))
    EXPECT_NEAR(r.at("processed_fraction").get<double>(), 8.0 * r.at("capacity").get<double>() / (2 * t), 1e-12);
}

TEST(CapacityCli, OutputFileIsWritten) {
  const fs::path out = scratch() / "capacity.json";
  fs::remove(out);
  const LcmRun r = lcm(std::string("capacity ") + kMixtral + " --format json -o '" + out.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(nlohmann::json::parse(slurp(out)).at("rows").size(), 4u);
}

// ---------------------------------------------------------------------------------
// Measured loads.
// ---------------------------------------------------------------------------------

// 2000 assignments over 8 experts, mean 250. CF 1: C = 250, drops 50 + 150. CF 1.25:
// C = ceil(312.5) = 313, drops 87. CF 2: C = 500, none.
const char* kLoadsCsv = "expert,tokens\n0,100\n1,300\n2,200\n3,400\n4,250\n5,250\n6,250\n7,250\n";

void expect_hand_example(const nlohmann::json& j) {
  EXPECT_EQ(j.at("routing").at("distribution"), "measured");
  EXPECT_EQ(j.at("routing").at("method"), "measured");
  EXPECT_EQ(j.at("routing").at("tokens"), 1000);
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("capacity"), 250);
  EXPECT_DOUBLE_EQ(rows[0].at("drop_fraction").get<double>(), 0.1);
  EXPECT_EQ(rows[1].at("capacity"), 313);
  EXPECT_DOUBLE_EQ(rows[1].at("drop_fraction").get<double>(), 87.0 / 2000);
  EXPECT_EQ(rows[2].at("capacity"), 500);
  EXPECT_DOUBLE_EQ(rows[2].at("drop_fraction").get<double>(), 0.0);
}

TEST(CapacityCli, MeasuredLoadsCsvJsonAndPlain) {
  const fs::path csv = write_file("loads.csv", kLoadsCsv);
  expect_hand_example(capacity_json("--cf 1,1.25,2 --loads '" + csv.string() + "'"));
  const fs::path json = write_file("loads.json", R"({"layer": 3, "loads": [100, 300, 200, 400, 250, 250, 250, 250]})");
  expect_hand_example(capacity_json("--cf 1,1.25,2 --loads '" + json.string() + "'"));
  const fs::path arr = write_file("loads_arr.json", "[100,300,200,400,250,250,250,250]\n");
  expect_hand_example(capacity_json("--cf 1,1.25,2 --loads '" + arr.string() + "'"));
  const fs::path plain = write_file("loads.txt", "# tokens per expert\n100\n300\n200\n400\n250\n250\n250\n250\n");
  expect_hand_example(capacity_json("--cf 1,1.25,2 --loads '" + plain.string() + "'"));
  // --tokens rescales the loads (same shares) to T*k = 8000 assignments: C = 1000 at CF 1.
  const auto scaled = capacity_json("--cf 1 --tokens 4000 --loads '" + csv.string() + "'");
  EXPECT_EQ(scaled.at("rows")[0].at("capacity"), 1000);
  EXPECT_DOUBLE_EQ(scaled.at("rows")[0].at("drop_fraction").get<double>(), 0.1);
}

// ---------------------------------------------------------------------------------
// Bad input: exit code 2 with a one-line message.
// ---------------------------------------------------------------------------------

void expect_bad_input(const std::string& args, const std::string& needle) {
  const LcmRun r = lcm("capacity " + args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << args;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << " -> " << r.err;
  EXPECT_LE(count_lines(r.err), 2u) << r.err;
}

TEST(CapacityCli, BadCapacityFactorList) {
  const std::string m = std::string(kMixtral);
  expect_bad_input(m + " --cf 1.0,abc", "--cf");
  expect_bad_input(m + " --cf 0", "--cf");
  expect_bad_input(m + " --cf 1.0,-1.5", "--cf");
  expect_bad_input(m + " --cf 1.0,,2.0", "--cf");
  expect_bad_input(m + " --cf 1.0,", "--cf");
  expect_bad_input(m + " --cf inf", "--cf");
}

TEST(CapacityCli, BadSkewAndOptions) {
  const std::string m = std::string(kMixtral);
  expect_bad_input(m + " --skew zipf:-1", "--skew");
  expect_bad_input(m + " --skew pareto:1", "--skew");
  expect_bad_input(m + " --skew zipf:", "--skew");
  expect_bad_input(m + " --skew zipf:abc", "--skew");
  expect_bad_input(m + " --skew zipf:1000", "too large");
  expect_bad_input(m + " --method mc --samples 0", "--samples");
  expect_bad_input(m + " --tokens 0", "--tokens");
  expect_bad_input(m + " --tokens 1,2", "--tokens");
  expect_bad_input(m + " --method bogus", "--method");
}

TEST(CapacityCli, BadLoadsFiles) {
  const std::string m = std::string(kMixtral);
  expect_bad_input(m + " --loads /nonexistent/loads.csv", "/nonexistent/loads.csv");
  const fs::path bad = write_file("bad.csv", "expert,tokens\n0,10\n1,x\n");
  expect_bad_input(m + " --loads '" + bad.string() + "'", bad.string() + ":3");
  const fs::path neg = write_file("neg.txt", "10\n20\n-3\n");
  expect_bad_input(m + " --loads '" + neg.string() + "'", neg.string() + ":3");
  const fs::path js = write_file("bad.json", "{\"loads\": [1, 2,\n 3,, 4]}");
  expect_bad_input(m + " --loads '" + js.string() + "'", js.string() + ":2");
  const fs::path six = write_file("six.csv", "expert,load\n0,1\n1,2\n2,3\n3,4\n4,5\n5,6\n");
  expect_bad_input(m + " --loads '" + six.string() + "'", "num_experts = 8");
  const fs::path csv = write_file("ok.csv", kLoadsCsv);
  expect_bad_input(m + " --loads '" + csv.string() + "' --skew zipf:1", "--skew");
  expect_bad_input(m + " --loads '" + csv.string() + "' --method exact", "--method");
}

TEST(CapacityCli, DenseScenarioIsRejected) {
  expect_bad_input("scenarios/llama3.1-8b.yaml", "dense model");
}

// ---------------------------------------------------------------------------------
// The loads-file parser.
// ---------------------------------------------------------------------------------

using lcm::report::parse_expert_loads;

TEST(LoadsParser, CsvHeaderVariantsOrderAndComments) {
  auto r = parse_expert_loads(
      "\xEF\xBB\xBF# bench moe\nExpert, Load, share\r\n2, 7, 0.1\r\n0, 5.5, 0.2\n\n1, 0, 0\n", "f");
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r.value(), (std::vector<double>{5.5, 0, 7}));
  r = parse_expert_loads("layer,expert,count\n9,1,4\n9,0,3\n", "f");
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r.value(), (std::vector<double>{3, 4}));
  r = parse_expert_loads("0,3\n1,4\n", "f");  // no header
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r.value(), (std::vector<double>{3, 4}));
}

TEST(LoadsParser, ErrorsNameTheLine) {
  auto r = parse_expert_loads("expert,tokens\n0,1\n0,2\n", "x.csv");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line, 3);
  EXPECT_NE(r.error().str().find("x.csv:3"), std::string::npos) << r.error().str();
  EXPECT_NE(r.error().message.find("twice"), std::string::npos);
  r = parse_expert_loads("expert,tokens\n0,1\n2,2\n", "x.csv");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("expert 1 missing"), std::string::npos) << r.error().str();
  r = parse_expert_loads("id,value\n0,1\n", "x.csv");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line, 1);
  r = parse_expert_loads("expert,tokens\n0,1,2\n", "x.csv");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line, 2);
  r = parse_expert_loads("1\nnan\n", "x.txt");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line, 2);
  r = parse_expert_loads("[1, 2,\n  \"three\"]", "x.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line, 2);
  EXPECT_NE(r.error().message.find("loads[2]"), std::string::npos);
  r = parse_expert_loads("{\"counts\": [1]}", "x.json");
  ASSERT_FALSE(r);
  r = parse_expert_loads("0\n0\n", "x.txt");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("zero"), std::string::npos);
  r = parse_expert_loads("  \n", "x.txt");
  ASSERT_FALSE(r);
}

}  // namespace

namespace {

// A capacity factor so large that Megatron's ceil(T*k/E * CF) overflows int64: the capacity
// saturates at T*k (no expert can receive more), nothing is dropped, and the estimate's
// step time is the dropless one, not a faster one (issue 14: 42.2 s vs 62.4 s).
TEST(CapacityCli, HugeCapacityFactorSaturatesWithoutDrops) {
  const auto j = capacity_json("--cf 2.0,1e16,1e300 --tokens 4K");
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("capacity").get<int64_t>(), 2048);       // 4096 * 2 / 8 * 2
  EXPECT_EQ(rows[1].at("capacity").get<int64_t>(), 4096 * 2);   // saturated at T * k
  EXPECT_EQ(rows[2].at("capacity").get<int64_t>(), 4096 * 2);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(rows[i].at("drop_fraction").get<double>(), 0.0);
    EXPECT_EQ(rows[i].at("processed_fraction").get<double>(), 1.0);
  }
  auto step = [](const std::string& set) {
    const LcmRun r = lcm(std::string("estimate ") + kMixtral + " --format json" + set);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("time").at("step_s").get<double>();
  };
  const double dropless = step(""), huge = step(" --set moe_expert_capacity_factor=1e16"),
               big = step(" --set moe_expert_capacity_factor=64");
  EXPECT_EQ(huge, big);  // both saturated: identical schedules
  EXPECT_NEAR(huge, dropless, 0.02 * dropless);
  EXPECT_GE(huge, 0.999 * dropless);
}

}  // namespace
