// Error bands end to end (issue 12; docs/time-model.md "Error bands", docs/planner.md):
// lcm calibrate writes the profile's uncertainty section from its held-out residuals and the
// profile loads it back; a malformed section is a one-line error; lcm estimate's JSON band
// is the step time's; lcm diff says whether two bands overlap.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

namespace fs = std::filesystem;
using lcm::test::LcmRun;
using lcm::test::slurp;
using nlohmann::json;

LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "bands_cli_test"); }

json lcm_json(const std::string& args) {
  const LcmRun r = lcm(args + " --format json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("lcm_bands_cli_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// The estimate's note names the composition spread as stored (session 40: -4.59 % / +10.77 %
// over 316 rows, to two decimals); the words on a low end at zero are for a spread whose low end
// is within half a per cent of zero (sessions 38-39), not this one.
TEST(BandsCli, EstimateNoteNamesTheCompositionSpread) {
  const LcmRun r = lcm("estimate scenarios/default.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("composition spread -4.59%..+10.77% from 316 published-table rows, a DEVELOPMENT-SET figure"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("its low end is zero or above"), std::string::npos) << r.out;
}

TEST(BandsCli, CalibrateWritesTheHeldOutUncertaintySection) {
  const fs::path prof = scratch() / "fit.yaml";
  const LcmRun r = lcm("calibrate validation/measured/h200/gemm_run1.json --profile h200-sxm -o " + prof.string() +
                       " --report-out " + (scratch() / "fit.json").string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string yaml = slurp(prof);
  // Appended once, replacing the starting profile's own section.
  const auto at = yaml.find("\nuncertainty:\n");
  ASSERT_NE(at, std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("\nuncertainty:\n", at + 1), std::string::npos);
  EXPECT_NE(yaml.find("source: \"lcm calibrate: held-out residuals (5-fold cross-validation by shape)"), std::string::npos);
  // The profile loads and the band uses it: the op level is present with the file's source.
  const json e = lcm_json("estimate scenarios/llama3.1-8b.yaml --hw " + prof.string());
  const json& op = e.at("time").at("band").at("op_level");
  EXPECT_TRUE(op.at("present").get<bool>());
  EXPECT_NE(op.at("source").get<std::string>().find("held-out residuals"), std::string::npos);
  // Without cross-validation the section says its residuals are in-sample.
  const LcmRun in = lcm("calibrate validation/measured/h200/gemm_run1.json --profile h200-sxm --folds 0 -o " +
                        prof.string() + " --report-out " + (scratch() / "fit0.json").string() + " --format json");
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_NE(slurp(prof).find("IN-SAMPLE residuals"), std::string::npos);
}

TEST(BandsCli, AMalformedUncertaintySectionIsAOneLineError) {
  std::string text = slurp(fs::path(LCM_SOURCE_DIR) / "hwprofiles/h200-sxm.yaml");
  const auto p10 = text.find("gemm_bf16_p10: ");
  ASSERT_NE(p10, std::string::npos);
  text.replace(p10, text.find('\n', p10) - p10, "gemm_bf16_p10: 0.5");  // above its p90
  const fs::path bad = scratch() / "bad.yaml";
  std::ofstream(bad) << text;
  const LcmRun r = lcm("estimate scenarios/llama3.1-8b.yaml --hw " + bad.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("uncertainty.gemm_bf16_p10: the 10th percentile (0.5) is above the 90th"), std::string::npos)
      << r.err;
  std::string missing = slurp(fs::path(LCM_SOURCE_DIR) / "hwprofiles/h200-sxm.yaml");
  const auto n = missing.find("  nic_p90: ");
  missing.erase(n, missing.find('\n', n) + 1 - n);
  std::ofstream(bad) << missing;
  const LcmRun m = lcm("estimate scenarios/llama3.1-8b.yaml --hw " + bad.string());
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("missing required key 'nic_p90'"), std::string::npos) << m.err;
}

TEST(BandsCli, EstimateJsonBandIsTheStepTimes) {
  const json e = lcm_json("estimate scenarios/default.yaml");
  const json& t = e.at("time");
  const json& b = t.at("band");
  const double step = t.at("step_s"), lo = b.at("relative_low"), hi = b.at("relative_high");
  // The composition spread (session 40: -4.59 % / +10.77 %) straddles zero; from session 38 to
  // 39 it lay at or above zero, and a band could lie wholly above the step.
  EXPECT_LT(lo, hi);
  EXPECT_GT(hi, 0.0);
  EXPECT_DOUBLE_EQ(b.at("step_s").at(0).get<double>(), step * (1 + lo));
  EXPECT_DOUBLE_EQ(b.at("step_s").at(1).get<double>(), step * (1 + hi));
  EXPECT_DOUBLE_EQ(b.at("mfu").at(0).get<double>(), t.at("mfu").get<double>() / (1 + hi));
  EXPECT_DOUBLE_EQ(b.at("mfu").at(1).get<double>(), t.at("mfu").get<double>() / (1 + lo));
  // Centre and half-width in log space give the ends: exp(m -+ s) - 1, s^2 = s_op^2 + s_comp^2.
  const double m = b.at("op_level").at("log_center").get<double>() + b.at("composition").at("log_center").get<double>();
  const double s = std::hypot(b.at("op_level").at("log_half_width").get<double>(),
                              b.at("composition").at("log_half_width").get<double>());
  EXPECT_NEAR(lo, std::expm1(m - s), 1e-12);
  EXPECT_NEAR(hi, std::expm1(m + s), 1e-12);
  EXPECT_TRUE(b.at("composition").at("development_set").get<bool>());
  EXPECT_EQ(b.at("composition").at("rows"),
            316);  // 258 before dgxc v25.04's rows, 63 before session 25's long-sequence rows, 72 before session
      // 29's LoRA rows, 76 before session 30's blockwise-FP8 MoE-layer
      // rows, 82 before session 37's dgxc-benchmarking rows
  // The CSV carries the ends too.
  const LcmRun csv = lcm("estimate scenarios/default.yaml --format csv");
  ASSERT_EQ(csv.code, 0);
  EXPECT_NE(csv.out.find("time,,step_s_low,"), std::string::npos);
  EXPECT_NE(csv.out.find("time,,mfu_high,"), std::string::npos);
}

TEST(BandsCli, DiffSaysWhetherTheBandsOverlap) {
  // Mixtral-8x7B 128K on 64 GPUs (62.4 s) against Llama-3.1-8B 128K on 8 (98.7 s): A's band
  // ends below the start of B's.
  const json far = lcm_json("diff default llama3.1-8b");
  const double a_hi = far.at("headline").at("step_s_high").at("a"), b_lo = far.at("headline").at("step_s_low").at("b");
  EXPECT_LT(a_hi, b_lo);
  EXPECT_FALSE(far.at("bands_overlap").get<bool>());
  const LcmRun t = lcm("diff default llama3.1-8b");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("do not overlap: the difference is larger than the model's error"), std::string::npos) << t.out;
  // Two layouts 1% apart overlap: a tie.
  const json near = lcm_json("diff default --layout-a 'tp2 cp4 pp2' --layout-b 'tp2 cp4(a2a) pp2'");
  EXPECT_TRUE(near.at("bands_overlap").get<bool>());
}

}  // namespace
