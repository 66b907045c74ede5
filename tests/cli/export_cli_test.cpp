// `lcm export megatron|nemo|torchtitan` and the matching `lcm import` (issue 13, runnable
// exports): export -> import gives a scenario that estimates exactly as the original
// (`lcm estimate --format json`, the names aside) for every bundled scenario and a few
// planner layouts; hand-checked lines of the exported files; layouts a target cannot express
// and malformed inputs exit 2 with one line naming the reason or file:line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* kTag = "export_test";

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("lcm_export_files_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// The estimate without the scenario's and the model's names (an import names them itself).
json estimate_json(const std::string& args) {
  const lcm::test::LcmRun r = lcm::test::run_lcm("estimate " + args + " --format json", kTag);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0) return {};
  json j = json::parse(r.out);
  j["scenario"].erase("name");
  j["scenario"].erase("model");
  return j;
}

struct Case {
  std::string scenario;  // bundled name
  int gpus;
  std::string args;  // extra options of export and estimate (--layout, --set)
};

// export TARGET -> import TARGET -> estimate, against estimate of the original.
void expect_round_trip(const std::string& target, const Case& c) {
  const fs::path dir = scratch();
  const fs::path job = dir / ("job." + target), imported = dir / "imported.yaml";
  const std::string src = "scenarios/" + c.scenario + ".yaml";
  const lcm::test::LcmRun e =
      lcm::test::run_lcm("export " + target + " " + src + " " + c.args + " -o '" + job.string() + "'", kTag);
  ASSERT_EQ(e.code, 0) << target << " " << c.scenario << " " << c.args << "\n" << e.err;
  std::string import = "import " + target + " '" + job.string() + "' --gpus " + std::to_string(c.gpus) +
                       " --hw h200-sxm.calibrated --name rt -o '" + imported.string() + "'";
  if (target == "torchtitan") import += " --model " + src;
  const lcm::test::LcmRun i = lcm::test::run_lcm(import, kTag);
  ASSERT_EQ(i.code, 0) << target << " " << c.scenario << " " << c.args << "\n" << i.err;
  const json a = estimate_json(src + " " + c.args);
  const json b = estimate_json("'" + imported.string() + "'");
  EXPECT_EQ(a, b) << target << " " << c.scenario << " " << c.args;
}

const std::vector<Case>& bundled() {
  static const std::vector<Case> cases = {
      {"default", 64, ""},       {"deepseek-v3", 128, ""}, {"llama3.1-70b", 64, ""},    {"llama3.1-8b", 8, ""},
      {"mixtral-8x22b", 64, ""}, {"mixtral-8x7b", 64, ""}, {"qwen3-235b-a22b", 64, ""}, {"qwen3-30b-a3b", 64, ""},
  };
  return cases;
}

TEST(ExportRoundTrip, BundledScenariosThroughMegatronScript) {
  for (const Case& c : bundled()) expect_round_trip("megatron", c);
}

TEST(ExportRoundTrip, BundledScenariosThroughMegatronBridgeYaml) {
  for (const Case& c : bundled()) expect_round_trip("nemo", c);
}

// TorchTitan has no ZeRO-1 and no Megatron-style selective recompute (see the bad-input
// tests): every bundled scenario goes through with FSDP2 and full recompute, DeepSeek-V3 with
// an even pipeline, fp32 Adam moments and whole fp32 master weights too.
TEST(ExportRoundTrip, BundledScenariosThroughTorchTitanToml) {
  for (Case c : bundled()) {
    c.args = c.scenario == "deepseek-v3"
                 ? "--layout 'pp1 full optim_grads_params' --set training.exp_avg_dtype=fp32 "
                   "--set training.exp_avg_sq_dtype=fp32 --set training.store_param_remainders=false"
                 : "--layout 'full optim_grads_params'";
    expect_round_trip("torchtitan", c);
  }
}

TEST(ExportRoundTrip, PlannerLayouts) {
  const std::vector<Case> megatron_and_nemo = {
      {"llama3.1-70b", 64, "--layout 'tp8 cp1 pp4 vp2 sel optim'"},
      {"default", 64, "--layout 'tp1 cp8(a2a) pp1 ep8 no_shard'"},
      {"qwen3-30b-a3b", 64, "--layout 'tp2 cp4(a2a2+p2p2) pp2 ep4 etp2 full optim_grads'"},
      {"mixtral-8x7b", 64, "--layout 'tp2 cp2(allgather) pp2 ep8 etp1 mbs1 full optim_grads_params'"},
  };
  for (const Case& c : megatron_and_nemo) {
    expect_round_trip("megatron", c);
    expect_round_trip("nemo", c);
  }
  const std::vector<Case> titan = {
      {"llama3.1-8b", 8, "--layout 'tp1 cp1 no-rc no_shard'"},
      {"llama3.1-70b", 64, "--layout 'tp8 cp1 pp4 vp2 full optim_grads_params'"},
      {"mixtral-8x7b", 64, "--layout 'tp2 cp2(allgather) pp2 ep8 etp1 full optim_grads_params'"},
  };
  for (const Case& c : titan) expect_round_trip("torchtitan", c);
  // A sliding window (GPT-OSS-style: 128 keys, every second layer full) survives both
  // round trips; TorchTitan has none to express it.
  const Case windowed{"llama3.1-8b", 8, "--set model.window_size=128 --set model.window_attn_skip_freq=2 "
                                         "--layout 'tp1 cp1 no-rc no_shard'"};
  expect_round_trip("megatron", windowed);
  expect_round_trip("nemo", windowed);
  const lcm::test::LcmRun t = lcm::test::run_lcm("export torchtitan scenarios/llama3.1-8b.yaml " + windowed.args, kTag);
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.err.find("sliding-window attention: TorchTitan's job config has no window"), std::string::npos) << t.err;
  // The MLP's function (Nemotron-4's squared ReLU, GPT-OSS's gated quick-GELU) survives the
  // Megatron round trip as --squared-relu / --quick-geglu; the Megatron-Bridge YAML cannot set
  // activation_func and says so; TorchTitan refuses.
  const Case squared{"llama3.1-8b", 8, "--set model.swiglu=false --set model.activation=squared_relu "
                                        "--layout 'tp1 cp1 no-rc no_shard'"};
  const Case quick{"llama3.1-8b", 8, "--set model.activation=quick_gelu --layout 'tp1 cp1 no-rc no_shard'"};
  expect_round_trip("megatron", squared);
  expect_round_trip("megatron", quick);
  const std::string sq = lcm::test::run_lcm("export megatron scenarios/llama3.1-8b.yaml " + squared.args, kTag).out;
  EXPECT_NE(sq.find("\n    --squared-relu  # no gate\n"), std::string::npos) << sq;
  EXPECT_EQ(sq.find("--swiglu"), std::string::npos);
  const std::string qg = lcm::test::run_lcm("export megatron scenarios/llama3.1-8b.yaml " + quick.args, kTag).out;
  EXPECT_NE(qg.find("\n    --quick-geglu  # gated quick-GELU\n"), std::string::npos) << qg;
  EXPECT_EQ(qg.find("--swiglu"), std::string::npos);
  const std::string br = lcm::test::run_lcm("export nemo scenarios/llama3.1-8b.yaml " + squared.args, kTag).out;
  EXPECT_NE(br.find("gated_linear_unit: false  # no gate: the recipe's activation_func must be squared_relu"),
            std::string::npos)
      << br;
  const lcm::test::LcmRun tt = lcm::test::run_lcm("export torchtitan scenarios/llama3.1-8b.yaml " + squared.args, kTag);
  EXPECT_NE(tt.code, 0);
  EXPECT_NE(tt.err.find("activation squared_relu: TorchTitan's models run SwiGLU (or GeLU) MLPs"), std::string::npos)
      << tt.err;
}

std::string exported(const std::string& args) {
  const lcm::test::LcmRun r = lcm::test::run_lcm("export " + args, kTag);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.out;
}

void expect_lines(const std::string& text, const std::vector<std::string>& lines) {
  for (const std::string& l : lines) EXPECT_NE(text.find("\n" + l + "\n"), std::string::npos) << "missing line: " << l;
}

// A setting survives the Megatron script's and the Megatron-Bridge YAML's round trips, and each
// export writes it as the given line.
void expect_setting_exported(const Case& c, const std::string& script_line, const std::string& yaml_line) {
  expect_round_trip("megatron", c);
  expect_round_trip("nemo", c);
  EXPECT_NE(exported("megatron scenarios/default.yaml " + c.args).find(script_line), std::string::npos) << script_line;
  EXPECT_NE(exported("nemo scenarios/default.yaml " + c.args).find(yaml_line), std::string::npos) << yaml_line;
}

// The FP8 recipe survives both round trips: --fp8-recipe in the script, the Megatron-Bridge
// recipe name (bf16_with_fp8_current_scaling_mixed) in the YAML; TorchTitan cannot take
// blockwise scaling (its float8 converter scales per tensor or per row).
TEST(ExportRoundTrip, Fp8Recipe) {
  expect_setting_exported({"default", 64, "--set training.precision=fp8 --set training.fp8_recipe=tensorwise"},
                          "    --fp8-recipe tensorwise", "mixed_precision: bf16_with_fp8_current_scaling_mixed");
  // The default scenario's profile (h200-sxm.calibrated) carries the block-scaled GEMM term.
  const lcm::test::LcmRun tt = lcm::test::run_lcm(
      "export torchtitan scenarios/default.yaml --layout 'full optim_grads_params' --set training.precision=fp8 "
      "--set training.fp8_recipe=blockwise",
      kTag);
  EXPECT_NE(tt.code, 0);
  EXPECT_NE(tt.err.find("fp8_recipe blockwise: TorchTitan's float8 converter (torchao) scales per tensor or per row"),
            std::string::npos)
      << tt.err;
}

// FP8 weights survive both round trips: Megatron's --fp8-param-gather, Megatron-Bridge's
// ddp.fp8_param_gather.
TEST(ExportRoundTrip, Fp8ParamGather) {
  expect_setting_exported({"default", 64, "--set training.precision=fp8 --set training.fp8_param_gather=true"},
                          "    --fp8-param-gather", "  fp8_param_gather: true");
}

// 16-bit master-weight remainders survive both round trips: Megatron's precision-aware optimizer
// (which stores them by default) and Megatron-Bridge's optimizer.store_param_remainders.
TEST(ExportRoundTrip, StoreParamRemainders) {
  expect_setting_exported({"default", 64, "--set training.store_param_remainders=true"},
                          "    --use-precision-aware-optimizer", "  store_param_remainders: true");
}

// The attention backend survives both round trips: FlashAttention-2 is Megatron's
// --attention-backend flash and Megatron-Bridge's attention_backend: flash.
TEST(ExportRoundTrip, FlashAttention2Backend) {
  expect_setting_exported({"default", 64, "--set training.attention_backend=flash2"}, "    --attention-backend flash  #",
                          "attention_backend: flash\n");
  EXPECT_NE(exported("megatron scenarios/default.yaml").find("    --attention-backend auto"), std::string::npos);
}

// scenarios/default.yaml: Mixtral 8x7B (32 layers, 8 experts top-2, GQA 8 groups), 128K
// tokens, tp2 + SP, cp4 p2p, pp2, ep8 etp1, full uniform recompute of 1 layer, distributed
// optimizer with both overlaps, on 64 H200 = 8 nodes of 8.
TEST(ExportGolden, DefaultScenarioMegatronScript) {
  const std::string s = exported("megatron scenarios/default.yaml");
  expect_lines(s, {"NNODES=${NNODES:-8}",
                   "GPUS_PER_NODE=${GPUS_PER_NODE:-8}",
                   "    --num-layers 32",
                   "    --num-query-groups 8",
                   "    --seq-length 131072",
                   "    --num-experts 8",
                   "    --moe-router-topk 2",
                   "    --tensor-model-parallel-size 2",
                   "    --sequence-parallel",
                   "    --pipeline-model-parallel-size 2",
                   "    --context-parallel-size 4",
                   "    --cp-comm-type p2p",
                   "    --expert-model-parallel-size 8",
                   "    --expert-tensor-parallel-size 1",
                   "    --micro-batch-size 1",
                   "    --global-batch-size 64",
                   "    --use-distributed-optimizer",
                   "    --recompute-granularity full",
                   "    --recompute-method uniform",
                   "    --recompute-num-layers 1",
                   "    --overlap-grad-reduce",
                   "    --overlap-param-gather",
                   "DATA_ARGS=(--mock-data)"});
  EXPECT_NE(s.find("  torchrun --nnodes \"$NNODES\" --node-rank \"$NODE_RANK\""), std::string::npos);
  EXPECT_NE(s.find("  srun --nodes \"$NNODES\" --ntasks-per-node 1"), std::string::npos);
  // The script is valid bash.
  const fs::path p = scratch() / "default.sh";
  write_file(p, s);
  EXPECT_EQ(std::system(("bash -n '" + p.string() + "'").c_str()), 0);
}

TEST(ExportGolden, DefaultScenarioMegatronBridgeYaml) {
  const std::string s = exported("nemo scenarios/default.yaml");
  expect_lines(s, {"  tensor_model_parallel_size: 2", "  context_parallel_size: 4", "  cp_comm_type: p2p",
                   "  pipeline_model_parallel_size: 2", "  num_moe_experts: 8", "  expert_model_parallel_size: 8",
                   "  expert_tensor_parallel_size: 1", "  recompute_granularity: full", "  micro_batch_size: 1",
                   "  global_batch_size: 64", "  use_distributed_optimizer: true", "mixed_precision: bf16_mixed"});
}

// With FSDP2 and full recompute: dp = 64 / (2 x 4 x 2) = 4, sharded; the pipeline's local
// batch is 64 / 4 = 16 sequences cut into micro-batches of 1; 32 / 2 = 16 layers per stage.
TEST(ExportGolden, DefaultScenarioTorchTitanToml) {
  const std::string s = exported("torchtitan scenarios/default.yaml --layout 'full optim_grads_params'");
  expect_lines(s, {"seq_len = 131072", "global_batch_size = 64", "data_parallel_replicate_degree = 1",
                   "tensor_parallel_degree = 2  # sequence parallel norms with TP (always in TorchTitan)",
                   "pipeline_parallel_degree = 2", "pipeline_parallel_schedule = \"1F1B\"",
                   "pipeline_parallel_layers_per_stage = 16", "pipeline_parallel_microbatch_size = 1",
                   "context_parallel_degree = 4", "expert_parallel_degree = 8", "expert_tensor_parallel_degree = 1",
                   "mode = \"full\""});
  EXPECT_NE(s.find("\ndata_parallel_shard_degree = 4"), std::string::npos);
  EXPECT_NE(s.find("\nlocal_batch_size = 16"), std::string::npos);
  EXPECT_NE(s.find("\ncontext_parallel_rotate_method = \"alltoall\""), std::string::npos);
}

lcm::test::LcmRun run(const std::string& args) { return lcm::test::run_lcm(args, kTag); }

void expect_one_line_error(const lcm::test::LcmRun& r, const std::string& part) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ExportBadInput, LayoutsTheTargetCannotExpress) {
  // The bundled scenario's distributed optimizer (ZeRO-1) has no TorchTitan switch.
  expect_one_line_error(run("export torchtitan scenarios/default.yaml"),
                        "lcm: export torchtitan: cannot express this layout: data_parallel_sharding_strategy optim");
  expect_one_line_error(run("export torchtitan scenarios/default.yaml --layout 'cp8(a2a) full optim_grads_params'"),
                        "cp_comm_type a2a");
  expect_one_line_error(run("export torchtitan scenarios/mixtral-8x7b.yaml --layout 'optim_grads_params'"),
                        "selective recompute");
  expect_one_line_error(run("export megatron scenarios/llama3.1-8b.yaml --set rope_scaling.type=dynamic_ntk"),
                        "dynamic_ntk");
  expect_one_line_error(run("export megatron scenarios/default.yaml --layout 'tp2 order=tp-dp-cp-ep-pp'"), "order");
  // LoRA and packed documents: Megatron-LM's pretrain_gpt.py has neither.
  expect_one_line_error(run("export megatron scenarios/llama3.1-8b.yaml --set training.peft=lora --set training.lora_rank=16"),
                        "peft lora: Megatron-LM's pretrain_gpt.py has no LoRA");
  expect_one_line_error(run("export megatron scenarios/llama3.1-8b.yaml --set training.document_length=512"),
                        "document_length 512: packed sequences");
}

// LoRA goes to Megatron-Bridge as a peft section; the importer refuses it rather than reading
// the job back as full training.
TEST(ExportBadInput, BridgeLoraExportsAndIsNotImportedSilently) {
  const fs::path job = scratch() / "lora.yaml";
  const lcm::test::LcmRun e = run("export nemo scenarios/llama3.1-8b.yaml --set training.peft=lora --set training.lora_rank=16 "
                                  "--set training.lora_target_modules=[linear_qkv] -o '" + job.string() + "'");
  ASSERT_EQ(e.code, 0) << e.err;
  std::ifstream in(job);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("peft:\n  _target_: megatron.bridge.peft.lora.LoRA\n  dim: 16\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  target_modules: [linear_qkv]\n"), std::string::npos) << text;
  expect_one_line_error(run("import nemo '" + job.string() + "' --gpus 8 --hw h200-sxm"), "peft (LoRA) is not imported");
}

TEST(ExportBadInput, MalformedTomlNamesFileAndLine) {
  const fs::path dir = scratch();
  const std::string base = "[training]\nseq_len = 4096\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + "[parallelism]\ntensor_parallel_degree = {a = 1}\n", ":4:"},  // inline table
      {base + "global_batch_size = [1,\n  2]\n", ":3:"},  // multi-line array
      {base + "seq_len = 8192\n", ":3:"},  // duplicate key
      {base + "[training]\n", ":3:"},  // duplicate table
      {base + "[parallelism]\ntensor_parallel_degree = two\n", ":4:"},  // bare word
      {base + "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n", ":5:"},
      {base + "[activation_checkpoint]\nmode = \"selective\"\n", ":4:"},  // not modelled
  };
  for (const auto& [text, where] : cases) {
    const fs::path p = dir / "bad.toml";
    write_file(p, text);
    const lcm::test::LcmRun r =
        run("import torchtitan '" + p.string() + "' --model scenarios/llama3.1-8b.yaml --gpus 8 --hw h200-sxm");
    expect_one_line_error(r, p.string() + where);
  }
}

TEST(ExportBadInput, ScriptArrayNotDefined) {
  const fs::path p = scratch() / "bad.sh";
  write_file(
      p, "#!/bin/bash\nMODEL_ARGS=(--num-layers 2)\ntorchrun pretrain_gpt.py \"${MODEL_ARGS[@]}\" \"${OTHER[@]}\"\n");
  expect_one_line_error(run("import megatron '" + p.string() + "' --gpus 8 --hw h200-sxm"),
                        p.string() + ":3: array OTHER is passed to the training script but not defined");
}

TEST(ExportBadInput, BridgeYamlSequenceLengthsDisagree) {
  const fs::path p = scratch() / "bad.yaml";
  write_file(
      p, "model:\n  num_layers: 2\n  seq_length: 4096\ndataset:\n  seq_length: 8192\nmixed_precision: bf16_mixed\n");
  expect_one_line_error(run("import nemo '" + p.string() + "' --gpus 8 --hw h200-sxm"), "dataset.seq_length 8192");
}

}  // namespace
