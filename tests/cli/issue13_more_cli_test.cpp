// Issue 13, the remaining small points: `lcm sweep --tokens-per-step` (global batch x
// sequence kept constant by default) and the search constraints of `lcm plan` on sweeps;
// `lcm calibrate`'s output naming (-o the profile, --report-out the fit report); and
// Megatron's --account-for-embedding/loss-in-pipeline-split imported, validated and
// estimated on its functional-test config (6 layers, pp 4, 2 virtual stages).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"
#include "../planner/plan_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using lcm::test::LcmRun;
using lcm::test::slurp;
using nlohmann::json;

LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "issue13_more_test"); }

json lcm_json(const std::string& args) {
  const LcmRun r = lcm(args + " --format json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

using lcm::plantest::csv_fields;
using lcm::plantest::lines;

// A scratch directory for files the commands write (absolute: lcm runs in the source tree).
fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("lcm_issue13_more_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// The winner's global batch: dp x micro-batch x micro-batches per pipeline.
int64_t winner_batch(const json& plan) {
  const json& l = plan.at("ranked").at(0).at("layout");
  return l.at("data_parallel_size").get<int64_t>() * l.at("micro_batch_size").get<int64_t>() *
         l.at("num_micro_batches").get<int64_t>();
}

// scenarios/mixtral-8x7b.yaml: seq_length 32K, global_batch_size 128: 4,194,304 tokens per step.
const std::string kMixtral = "sweep scenarios/mixtral-8x7b.yaml -q --threads 2 ";

TEST(SweepTokensPerStep, ConstantIsTheDefaultAndScalesTheGlobalBatch) {
  const json j = lcm_json(kMixtral + "--vary seq_length=8K,48K,128K");
  EXPECT_EQ(j.at("tokens_per_step_mode"), "constant");
  const json& pts = j.at("points");
  ASSERT_EQ(pts.size(), 3u);
  // 8K: 4194304 / 8192 = 512 sequences.
  EXPECT_EQ(pts[0].at("seq_length"), 8192);
  EXPECT_EQ(pts[0].at("global_batch_size"), 512);
  EXPECT_EQ(pts[0].at("tokens_per_step"), 4194304);
  EXPECT_EQ(pts[0].at("plan").at("scenario").at("global_batch_size"), 512) << pts[0].at("plan").at("scenario");
  EXPECT_EQ(winner_batch(pts[0].at("plan")), 512);
  // 48K: 4194304 / 49152 = 85.33, not a whole number of sequences: infeasible, not rounded.
  EXPECT_TRUE(pts[1].at("plan").is_null());
  EXPECT_TRUE(pts[1].at("global_batch_size").is_null());
  const std::string why = pts[1].at("infeasible");
  EXPECT_NE(why.find("global_batch_size 4194304 / 49152 = 85.33, not a whole number of sequences"), std::string::npos)
      << why;
  // 128K: 4194304 / 131072 = 32.
  EXPECT_EQ(pts[2].at("global_batch_size"), 32);
  EXPECT_EQ(pts[2].at("tokens_per_step"), 4194304);
  EXPECT_EQ(winner_batch(pts[2].at("plan")), 32);
}

TEST(SweepTokensPerStep, ScaleKeepsTheGlobalBatch) {
  const json j = lcm_json(kMixtral + "--vary seq_length=8K,128K --tokens-per-step scale");
  EXPECT_EQ(j.at("tokens_per_step_mode"), "scale");
  const json& pts = j.at("points");
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].at("global_batch_size"), 128);
  EXPECT_EQ(pts[0].at("tokens_per_step"), 128 * 8192);
  EXPECT_EQ(pts[1].at("global_batch_size"), 128);
  EXPECT_EQ(pts[1].at("tokens_per_step"), 128 * 131072);
  EXPECT_EQ(winner_batch(pts[1].at("plan")), 128);
}

TEST(SweepTokensPerStep, EveryFormatShowsTheModeBatchAndTokens) {
  const LcmRun t = lcm(kMixtral + "--vary seq_length=8K,48K");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("tokens per step: constant"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("global batch"), std::string::npos);
  EXPECT_NE(t.out.find("4194304"), std::string::npos);
  EXPECT_NE(t.out.find("seq_length=48K: infeasible:"), std::string::npos) << t.out;
  const LcmRun md = lcm(kMixtral + "--vary seq_length=8K --tokens-per-step scale --format md");
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("tokens per step: scale"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tokens/step |"), std::string::npos) << md.out;

  const LcmRun c = lcm(kMixtral + "--vary seq_length=8K,48K --format csv");
  ASSERT_EQ(c.code, 0) << c.err;
  const auto ls = lines(c.out);
  ASSERT_EQ(ls.size(), 3u) << c.out;
  const auto h = csv_fields(ls[0]);
  ASSERT_GE(h.size(), 6u);
  EXPECT_EQ((std::vector<std::string>(h.begin(), h.begin() + 6)),
            (std::vector<std::string>{"seq_length", "num_gpus", "tokens_per_step_mode", "global_batch_size",
                                      "tokens_per_step", "status"}));
  const auto ok = csv_fields(ls[1]), bad = csv_fields(ls[2]);
  EXPECT_EQ(ok.size(), h.size());
  EXPECT_EQ((std::vector<std::string>(ok.begin(), ok.begin() + 6)),
            (std::vector<std::string>{"8K", "64", "constant", "512", "4194304", "ok"}));
  ASSERT_EQ(bad.size(), h.size()) << ls[2];
  EXPECT_EQ(bad[5], "infeasible");
  EXPECT_NE(bad.back().find("not a whole number"), std::string::npos) << ls[2];
}

TEST(SweepTokensPerStep, ConstantRefusesAVariedGlobalBatch) {
  const std::string grid = "--vary seq_length=8K,16K --vary global_batch_size=64,128";
  const LcmRun r = lcm(kMixtral + grid);
  EXPECT_EQ(r.code, 2);
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--tokens-per-step scale"), std::string::npos) << r.err;
  const LcmRun bad = lcm(kMixtral + "--vary seq_length=8K --tokens-per-step fixed");
  EXPECT_EQ(bad.code, 2) << bad.err;
  const json s = lcm_json(kMixtral + grid + " --tokens-per-step scale");
  ASSERT_EQ(s.at("points").size(), 4u);
  EXPECT_EQ(s.at("points")[3].at("global_batch_size"), 128);
  EXPECT_EQ(s.at("points")[3].at("tokens_per_step"), 128 * 16384);
}

TEST(SweepTokensPerStep, BatchBelowEveryLayoutsDataParallelIsExplained) {
  // Llama 3.1 8B: 16 x 128K = 2,097,152 tokens per step; at 2M the global batch is 1. With
  // tp 8 and no context parallelism, 512 GPUs need dp >= 512 / (8 x 32 layers) = 2.
  const json j = lcm_json(
      "sweep scenarios/llama3.1-8b.yaml -q --threads 2 --gpus 512 --fix tp=8 --max cp=1 "
      "--vary seq_length=1M,2M");
  const json& pts = j.at("points");
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].at("global_batch_size"), 2);
  EXPECT_FALSE(pts[0].at("plan").at("ranked").empty());
  EXPECT_EQ(pts[1].at("global_batch_size"), 1);
  EXPECT_TRUE(pts[1].at("plan").at("ranked").empty());
  const std::string why = pts[1].at("plan").at("failure");
  EXPECT_NE(why.find("global_batch_size (1) is not divisible by micro_batch_size (1) times data_parallel_size"),
            std::string::npos)
      << why;
}

TEST(SweepConstraints, FixTp8OnlyYieldsTp8Winners) {
  const json j = lcm_json(kMixtral + "--vary seq_length=8K,32K --fix tp=8 --max pp=2 --headroom 10% --tie 5%");
  ASSERT_EQ(j.at("points").size(), 2u);
  for (const json& p : j.at("points")) {
    const json& plan = p.at("plan");
    EXPECT_EQ(plan.at("constraints").at("given"), json::array({"fix tp=8", "max pp=2", "headroom 10%", "tie 5%"}));
    EXPECT_DOUBLE_EQ(plan.at("constraints").at("headroom").get<double>(), 0.10);
    EXPECT_DOUBLE_EQ(plan.at("constraints").at("near_tie").get<double>(), 0.05);
    ASSERT_FALSE(plan.at("ranked").empty());
    for (const json& r : plan.at("ranked")) {
      EXPECT_EQ(r.at("layout").at("tensor_model_parallel_size"), 8) << r.at("layout_string");
      EXPECT_LE(r.at("layout").at("pipeline_model_parallel_size").get<int>(), 2) << r.at("layout_string");
    }
  }
  // Without the constraint the 32K winner is not tp 8 (so the constraint changed something).
  const json free = lcm_json(kMixtral + "--vary seq_length=32K");
  EXPECT_NE(free.at("points")[0].at("plan").at("ranked")[0].at("layout").at("tensor_model_parallel_size"), 8);
  const LcmRun bad = lcm(kMixtral + "--vary seq_length=8K --fix tp=x");
  EXPECT_EQ(bad.code, 2);
  ASSERT_EQ(lines(bad.err).size(), 1u) << bad.err;
  EXPECT_EQ(bad.err.rfind("lcm: --fix tp=x: ", 0), 0u) << bad.err;
}

// ---- lcm calibrate: -o is the profile, --report-out the fit report ------------------------

const std::string kGemm = "calibrate validation/measured/h200/gemm_run1.json --profile h200-sxm ";

TEST(CalibrateOutputs, OutputIsTheProfileReportOutTheReport) {
  const fs::path d = scratch();
  const fs::path prof = d / "fit.yaml", rep = d / "fit_report.json";
  const LcmRun r = lcm(kGemm + "-o " + prof.string() + " --report-out " + rep.string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");  // both outputs went to their files
  const std::string yaml = slurp(prof);
  EXPECT_NE(yaml.find("name: fit"), std::string::npos) << yaml.substr(0, 400);  // named after its file
  EXPECT_NE(yaml.find("lcm calibrate:"), std::string::npos);
  const json j = json::parse(slurp(rep));
  EXPECT_EQ(j.at("output"), prof.string());
  EXPECT_EQ(j.at("classes").at(0).at("class"), "gemm_bf16");
  // The report's former spelling still works (docs/calibration.md named it).
  const fs::path rep2 = d / "fit_report.md";
  const LcmRun old = lcm(kGemm + "-o " + prof.string() + " --report " + rep2.string() + " --format md");
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_NE(slurp(rep2).find("gemm_bf16"), std::string::npos);
  // Without --report-out the report is the command's stdout.
  const LcmRun out = lcm(kGemm + "-o " + prof.string() + " --format json");
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(json::parse(out.out).at("output"), prof.string());
}

TEST(CalibrateOutputs, ProfileAndReportNeedTheirOwnDestinations) {
  const fs::path prof = scratch() / "same.yaml";
  for (const std::string& args : {"-o " + prof.string() + " --report-out " + prof.string(), std::string("-o -")}) {
    const LcmRun r = lcm(kGemm + args);
    EXPECT_EQ(r.code, 2) << args;
    ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("would both go to"), std::string::npos) << r.err;
  }
}

TEST(CalibrateOutputs, CompareWritesItsTableToOutput) {
  const fs::path table = scratch() / "compare.csv";
  const LcmRun r = lcm(kGemm + "--compare --format csv -o " + table.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const auto ls = lines(slurp(table));
  ASSERT_GE(ls.size(), 2u);
  EXPECT_EQ(ls[0], "op,class,shape,measured us,predicted us,error");
  const LcmRun both = lcm(kGemm + "--compare -o " + table.string() + " --report-out " + table.string() + ".2");
  EXPECT_EQ(both.code, 2);
  EXPECT_EQ(lines(both.err).size(), 1u) << both.err;
}

TEST(CalibrateOutputs, HelpNamesBoth) {
  const LcmRun r = lcm("calibrate --help");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Write the calibrated profile (YAML) to FILE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--report-out,--report"), std::string::npos) << r.out;
}

// ---- Megatron's account-for-embedding/loss flags, end to end ------------------------------

TEST(AccountForEmbeddingAndLoss, MegatronCiConfigImportsValidatesAndEstimates) {
  const fs::path yaml = scratch() / "account_for.yaml";
  const LcmRun imp =
      lcm("import megatron "
          "tests/data/megatron/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split.yaml "
          "--gpus 8 --hw h100-sxm -o " +
          yaml.string());
  ASSERT_EQ(imp.code, 0) << imp.err;
  const std::string text = slurp(yaml);
  EXPECT_NE(text.find("account_for_embedding_in_pipeline_split: true"), std::string::npos);
  EXPECT_NE(text.find("account_for_loss_in_pipeline_split: true"), std::string::npos);
  EXPECT_NE(text.find("num_layers_per_virtual_pipeline_stage: 1"), std::string::npos);  // (6 + 2) / 4 / 2

  const json e = lcm_json("estimate " + yaml.string());
  EXPECT_EQ(e.at("mesh").at("pp"), 4);
  EXPECT_EQ(e.at("mesh").at("vp"), 2);
  const json& st = e.at("memory").at("stages");
  ASSERT_EQ(st.size(), 4u);
  // Per rank (mesh_test derives the chunks): the embedding takes rank 0's first slot, the
  // loss rank 3's last: 1, 2, 2, 1 transformer layers.
  std::vector<int> layers;
  for (const json& s : st) layers.push_back(s.at("layers"));
  EXPECT_EQ(layers, (std::vector<int>{1, 2, 2, 1}));
  EXPECT_TRUE(st[0].at("has_embedding"));
  EXPECT_TRUE(st[3].at("has_output"));
  // BF16 weights, 2 bytes per parameter. A layer (hidden 512, ffn 2048, biases, two
  // LayerNorms): qkv 512x1536+1536, proj 512x512+512, fc1 512x2048+2048, fc2 2048x512+512,
  // norms 4x512 = 3,152,384. Embedding: 50304 (padded 50257) x 512 + 1024 x 512 learned
  // positions = 26,279,936. Output layer (untied) 50304 x 512 = 25,755,648 plus the final
  // LayerNorm 1024.
  const double layer = 3152384, emb = 26279936, out = 25755648 + 1024;
  EXPECT_EQ(st[0].at("terms").at("weights").get<double>(), 2 * (emb + layer));
  EXPECT_EQ(st[1].at("terms").at("weights").get<double>(), 2 * (2 * layer));
  EXPECT_EQ(st[2].at("terms").at("weights").get<double>(), 2 * (2 * layer));
  EXPECT_EQ(st[3].at("terms").at("weights").get<double>(), 2 * (layer + out));
  // Time follows the split: the two middle ranks run the same two layers; rank 0 one layer
  // plus the embedding lookup, less than two layers in the forward. (Its backward, which holds
  // the micro-batch's host-bound idle, also carries half of the per-micro-batch Python outside
  // the layers, host.microbatch_overhead: on this host-bound model about one layer's worth,
  // which is what the split accounts for.)
  const json& ts = e.at("time").at("stages");
  ASSERT_EQ(ts.size(), 4u);
  EXPECT_DOUBLE_EQ(ts[1].at("fwd_s").get<double>(), ts[2].at("fwd_s").get<double>());
  EXPECT_DOUBLE_EQ(ts[1].at("bwd_s").get<double>(), ts[2].at("bwd_s").get<double>());
  EXPECT_LT(ts[0].at("fwd_s").get<double>(), ts[1].at("fwd_s").get<double>());

  // Megatron rejects the flags together with an uneven first/last stage; so does lcm, on
  // import (naming the flag) and on a scenario.
  const LcmRun flags = lcm(
      "import megatron --gpus 8 --hw h100-sxm -- --num-layers 6 --hidden-size 512 --num-attention-heads 8 "
      "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 --bf16 "
      "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 3 --account-for-loss-in-pipeline-split");
  EXPECT_EQ(flags.code, 2);
  EXPECT_NE(flags.err.find("--account-for-loss-in-pipeline-split: num_layers_in_first_pipeline_stage and "
                           "num_layers_in_last_pipeline_stage cannot be set at the same time"),
            std::string::npos)
      << flags.err;
  const LcmRun uneven =
      lcm("estimate " + yaml.string() +
          " --set num_layers_per_virtual_pipeline_stage=null --set num_layers_in_first_pipeline_stage=3");
  EXPECT_EQ(uneven.code, 2);
  EXPECT_NE(uneven.err.find("cannot be set at the same time with account_for_embedding_in_pipeline_split"),
            std::string::npos)
      << uneven.err;
}

}  // namespace
