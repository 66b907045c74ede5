// lcm-exec train on the host: the command line and the scenario checks (one-line
// UsageErrors), the op-tag contract (the runner's dry-run tags equal the model's schedule
// for one layer and for a whole step, so the two cannot drift apart) and the summary JSON
// round trip.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/checkpoint.hpp"
#include "lcm/executor/train/runner.hpp"
#include "lcm/executor/train/summary.hpp"
#include "lcm/model/schedule.hpp"

namespace {

using namespace lcm;
using namespace lcm::exec::train;
using lcm::exec::UsageError;

TrainOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"lcm-exec", "train"});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_args(static_cast<int>(argv.size()), argv.data());
}

std::string usage_error(std::vector<std::string> args, int gpus = 1) {
  try {
    const TrainOptions o = parse(std::move(args));
    plan_training(o, gpus);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// One GPU, groups of size 1, a short sequence and two micro-batches.
std::vector<std::string> single_gpu(const std::string& scenario) {
  return {scenario,
          "--set", "hardware.num_gpus=1",
          "--set", "parallel.tensor_model_parallel_size=1",
          "--set", "parallel.sequence_parallel=false",
          "--set", "parallel.context_parallel_size=1",
          "--set", "parallel.pipeline_model_parallel_size=1",
          "--set", "parallel.expert_model_parallel_size=1",
          "--set", "parallel.use_distributed_optimizer=false",
          "--set", "parallel.overlap_grad_reduce=false",
          "--set", "parallel.overlap_param_gather=false",
          "--set", "training.seq_length=1024",
          "--set", "training.global_batch_size=2"};
}

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

TEST(TrainOptions, ParsesTypedValues) {
  const TrainOptions o = parse({"llama3.1-8b", "--layers", "2", "--steps", "7", "--set", "training.seq_length=8192",
                                "--out", "/tmp/x", "--data", "copy", "--seed", "9"});
  EXPECT_EQ(o.scenario, "llama3.1-8b");
  EXPECT_EQ(o.layers, 2);
  EXPECT_EQ(o.steps, 7);
  ASSERT_EQ(o.sets.size(), 1u);
  EXPECT_EQ(o.sets[0].first, "training.seq_length");
  EXPECT_EQ(o.sets[0].second, "8192");
  EXPECT_EQ(o.data, "copy");
  EXPECT_EQ(o.seed, 9u);
}

TEST(TrainOptions, BadInputIsOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "scenario is required"},
      {{"llama3.1-8b", "--steps", "0"}, "--steps"},
      {{"llama3.1-8b", "--layers", "x"}, "--layers"},
      {{"llama3.1-8b", "--set", "novalue"}, "expected KEY=VALUE"},
      {{"llama3.1-8b", "--resume"}, "--resume needs --save DIR"},
      {{"llama3.1-8b", "--resume", "--out", "/tmp/x"}, "--resume needs --save DIR"},
      {{"llama3.1-8b", "--save"}, "--save"},
      {{"llama3.1-8b", "--save-every", "2"}, "--save-every needs --save DIR"},
      {{"llama3.1-8b", "--save-every", "0", "--save", "/tmp/x"}, "--save-every"},
      {{"llama3.1-8b", "--lr-decay-steps", "0"}, "--lr-decay-steps"},
      {{"llama3.1-8b", "--steps", "4", "--lr-warmup-steps", "5"}, "--lr-warmup-steps exceeds --steps"},
      {{"llama3.1-8b", "--steps", "10", "--lr-decay-steps", "4", "--lr-warmup-steps", "5"},
       "--lr-warmup-steps exceeds --lr-decay-steps"},
      {{"llama3.1-8b", "--frobnicate"}, "frobnicate"},
  };
  for (const auto& [args, expected] : cases) {
    std::string what;
    try {
      parse(args);
    } catch (const UsageError& e) {
      what = e.what();
    }
    EXPECT_NE(what.find(expected), std::string::npos) << "'" << what << "' lacks '" << expected << "'";
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(TrainOptions, CheckpointOptions) {
  const TrainOptions o = parse({"llama3.1-8b", "--save", "/tmp/ck", "--save-every", "2", "--resume", "--steps", "3",
                                "--lr-decay-steps", "6", "--lr-warmup-steps", "5"});
  EXPECT_EQ(o.save_dir, "/tmp/ck");
  EXPECT_EQ(o.save_every, 2);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.lr_decay_steps, 6);
  EXPECT_FALSE(o.deterministic);
  const TrainOptions d = parse({"llama3.1-8b"});
  EXPECT_EQ(d.save_dir, "");
  EXPECT_EQ(d.save_every, 0);
  EXPECT_FALSE(d.resume);
  EXPECT_EQ(d.lr_decay_steps, 0);
  // The runner's attention backward is the deterministic one unless asked otherwise.
  const auto args = with(single_gpu("llama3.1-8b"), {"--layers", "2"});
  EXPECT_FALSE(plan_training(parse(args), 1).deterministic_attention);
  EXPECT_TRUE(plan_training(parse(with(args, {"--deterministic"})), 1).deterministic_attention);
}

// The fingerprint of a run: scenario keys as run plus the optimizer's, schedule's and data's
// settings; --steps only through the schedule's length.
nlohmann::json fingerprint_of(const std::vector<std::string>& extra) {
  std::vector<std::string> a = with(single_gpu("llama3.1-8b"), {"--layers", "2"});
  a.insert(a.end(), extra.begin(), extra.end());
  const TrainOptions o = parse(a);
  return run_fingerprint(o, plan_training(o, 1));
}

TEST(TrainCheckpoint, FingerprintNamesTheFirstDifference) {
  const nlohmann::json base = fingerprint_of({"--steps", "6"});
  EXPECT_EQ(base.at("model.num_layers"), "2");
  EXPECT_EQ(base.at("training.seq_length"), "1024");
  EXPECT_EQ(base.at("--lr-decay-steps"), 6);
  EXPECT_FALSE(base.contains("name"));
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "6"})), "");
  // A run cut short on the same schedule has the same fingerprint.
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "3", "--lr-decay-steps", "6"})), "");
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "3"})),
            "--lr-decay-steps is 6 in the checkpoint, 3 here");
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "6", "--set", "training.seq_length=2048"})),
            "training.seq_length is \"1024\" in the checkpoint, \"2048\" here");
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "6", "--seed", "7"})),
            "--seed is 1234 in the checkpoint, 7 here");
  EXPECT_EQ(fingerprint_difference(base, fingerprint_of({"--steps", "6", "--data", "copy"})),
            "--data is \"synthetic\" in the checkpoint, \"copy\" here");
  nlohmann::json fewer = base;
  fewer.erase("--clip-grad");
  EXPECT_EQ(fingerprint_difference(fewer, base), "--clip-grad is absent in the checkpoint, \"1\" here");
  EXPECT_EQ(fingerprint_difference(base, fewer), "--clip-grad is \"1\" in the checkpoint, absent here");
}

TEST(TrainCheckpoint, ResumeRefusesAnotherConfigurationInOneLine) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lcm_train_resume_host_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto resume = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = with(single_gpu("llama3.1-8b"), {"--layers", "2", "--resume", "--save", dir.string()});
    a.insert(a.end(), extra.begin(), extra.end());
    const TrainOptions o = parse(a);
    return load_resume(o, plan_training(o, 1));
  };
  const auto refusal = [&](std::vector<std::string> extra) {
    try {
      resume(std::move(extra));
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string where = (dir / "checkpoint").string();
  EXPECT_EQ(refusal({"--steps", "6"}), "train: --resume: no checkpoint in " + where);
  const float w[4] = {1, 2, 3, 4};
  save_checkpoint(dir, {{"step", 3}, {"fingerprint", fingerprint_of({"--steps", "6"})}}, {{"master", w, sizeof w}});
  const LoadedCheckpoint ck = resume({"--steps", "6"});
  EXPECT_EQ(ck.meta.at("step"), 3);
  EXPECT_EQ(ck.blobs.at("master").size(), sizeof w);
  EXPECT_EQ(refusal({"--steps", "6", "--set", "training.seq_length=2048"}),
            "train: --resume: " + where +
                " is another configuration's: training.seq_length is \"1024\" in the checkpoint, \"2048\" here");
  EXPECT_EQ(refusal({"--steps", "6", "--lr", "1e-3"}),
            "train: --resume: " + where + " is another configuration's: --lr is \"0.0003\" in the checkpoint, \"0.001\" here");
  EXPECT_EQ(refusal({"--steps", "3", "--lr-decay-steps", "6"}),
            "train: --resume: " + where + " is at step 3, --steps 3 leaves nothing to train");
  save_checkpoint(dir, {{"something", "else"}}, {});
  EXPECT_EQ(refusal({"--steps", "6"}),
            "train: --resume: " + where + " is not a training-runner checkpoint (no step or fingerprint)");
  fs::remove_all(dir);
}

TEST(TrainPlan, LayoutMustFitTheGpusAtHand) {
  // llama3.1-8b is tp 2 x cp 4 on 8 GPUs: the message names the --set that makes it fit.
  const std::string e = usage_error({"llama3.1-8b"});
  EXPECT_NE(e.find("needs 8 GPUs"), std::string::npos) << e;
  EXPECT_NE(e.find("--set hardware.num_gpus=1"), std::string::npos) << e;
  EXPECT_NE(e.find("--set parallel.tensor_model_parallel_size=1"), std::string::npos) << e;
  EXPECT_NE(e.find("--set parallel.context_parallel_size=1"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // The same layout on 8 GPUs passes the size check and is refused for group sizes > 1.
  EXPECT_NE(usage_error({"llama3.1-8b"}, 8).find("groups of size 1"), std::string::npos);
  EXPECT_EQ(usage_error(single_gpu("llama3.1-8b")), "");
}

TEST(TrainPlan, RefusesWhatTheRunnerDoesNotImplement) {
  EXPECT_NE(usage_error(with(single_gpu("llama3.1-8b"), {"--set", "model.normalization=LayerNorm"})).find("LayerNorm"),
            std::string::npos);
  EXPECT_NE(usage_error(with(single_gpu("llama3.1-8b"), {"--set", "training.precision=fp8"})).find("bf16 only"),
            std::string::npos);
  EXPECT_NE(usage_error(with(single_gpu("llama3.1-8b"), {"--layers", "40"})).find("exceeds"), std::string::npos);
  EXPECT_NE(usage_error(with(single_gpu("mixtral-8x7b"), {"--set", "model.moe_routing_skew=zipf:1.0"}))
                .find("model.moe_routing_skew is the routing the estimate assumes"),
            std::string::npos);
  EXPECT_NE(usage_error(with(single_gpu("llama3.1-8b"), {"--set", "parallel.recompute_granularity=selective", "--set",
                                                          "parallel.recompute_num_layers=null", "--set",
                                                          "parallel.recompute_modules=[mla_up_proj]"}))
                .find("only supported with multi_latent_attention"),
            std::string::npos);
  // The runner's cuDNN graph is full causal attention: a windowed model is refused by name, with
  // the fix (the estimate would price a window the run does not have).
  EXPECT_NE(usage_error(with(single_gpu("llama3.1-8b"), {"--set", "model.window_size=128"}))
                .find("sliding-window attention is not implemented by the runner (full causal attention only): --set "
                      "model.window_size=null"),
            std::string::npos);
}

TEST(TrainPlan, ShapesComeFromResolve) {
  const TrainPlan p = plan_training(parse(with(single_gpu("llama3.1-8b"), {"--layers", "2"})), 1);
  EXPECT_EQ(p.num_layers, 2);
  EXPECT_EQ(p.layers_from, 32);
  EXPECT_EQ(p.layers_to, 2);
  EXPECT_EQ(p.heads, 32);
  EXPECT_EQ(p.groups, 8);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.ffn, 14336);
  EXPECT_EQ(p.hidden, 4096);
  EXPECT_EQ(p.tokens, 1024);
  EXPECT_EQ(p.vocab, 128256);
  EXPECT_EQ(p.padded_vocab, 128256);  // already a multiple of 128
  EXPECT_EQ(p.micro_batches, 2);      // global 2 / (micro 1 x dp 1)
  EXPECT_EQ(p.recompute, RecomputeKind::kFull);  // the scenario's full uniform recompute
  EXPECT_EQ(p.recompute_layer, (std::vector<char>{1, 1}));
  EXPECT_EQ(p.rope.type, 2);  // llama3 scaling
  // The overrides make the scenario describe the run (lcm compare applies them).
  ASSERT_FALSE(p.overrides.empty());
  EXPECT_EQ(p.overrides.back().first, "model.num_layers");
  EXPECT_EQ(p.overrides.back().second, "2");
}

// The schedule's compute ops of one step on this rank, with the layer index of each, in
// execution order: per micro-batch the embedding, every layer's forward, the head forward
// and backward, every layer's recompute and backward (last layer first), the embedding's
// backward; then the step ops.
struct Expected {
  std::vector<std::string> names;
};

std::string name_of(const OpTag& t) { return op_name(t.id, t.pass, t.part, t.layer >= 0 ? kLayerPrefix : ""); }
std::string keyed(const std::string& name, int layer) { return name + "@" + std::to_string(layer); }

std::vector<std::string> schedule_step(const TrainPlan& p, int micro_batches) {
  const Scenario& s = p.scenario;
  const Mesh& m = p.mesh;
  const auto layers = stage_layers(s, m);
  const Schedule sc = build_schedule(s, m, layers, gpu_params(s, m, layers));
  const StageSchedule& st = sc.stages.at(0);
  std::vector<std::string> out;
  auto add = [&](const std::vector<Op>& ops, int layer) {
    for (const Op& o : ops)
      if (o.stream == Stream::kCompute) out.push_back(keyed(op_name(o, layer >= 0 ? kLayerPrefix : ""), layer));
  };
  const auto order = stage_layer_indices(s, m).at(0);
  for (int mb = 0; mb < micro_batches; ++mb) {
    add(st.pre_fwd, -1);
    for (int l : order) add(p.moe_layer[static_cast<size_t>(l)] ? sc.moe.fwd : sc.dense.fwd, l);
    add(st.post_fwd, -1);
    add(st.post_bwd, -1);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const LayerOps& lo = p.moe_layer[static_cast<size_t>(*it)] ? sc.moe : sc.dense;
      if (p.recompute == RecomputeKind::kSelective || p.recompute_layer[static_cast<size_t>(*it)]) add(lo.recompute, *it);
      add(lo.bwd, *it);
    }
    add(st.pre_bwd, -1);
  }
  add(st.step, -1);
  // The schedule's recompute counts agree with the plan's per-layer flags.
  int dense_rc = 0, moe_rc = 0;
  for (int l : order) {
    const bool rc = p.recompute == RecomputeKind::kSelective || p.recompute_layer[static_cast<size_t>(l)];
    (p.moe_layer[static_cast<size_t>(l)] ? moe_rc : dense_rc) += rc ? 1 : 0;
  }
  if (!sc.dense.recompute.empty() || !sc.moe.recompute.empty()) {
    EXPECT_EQ(st.dense_recomputed, dense_rc);
    EXPECT_EQ(st.moe_recomputed, moe_rc);
  }
  return out;
}

std::vector<std::string> runner_step(const TrainPlan& p, int micro_batches) {
  std::vector<std::string> out;
  for (const OpTag& t : dry_run_tags(p, micro_batches)) out.push_back(keyed(name_of(t), t.layer));
  return out;
}

void expect_contract(const std::vector<std::string>& args) {
  const TrainPlan p = plan_training(parse(args), 1);
  const auto want = schedule_step(p, p.micro_batches);
  const auto got = runner_step(p, p.micro_batches);
  EXPECT_EQ(got, want);
  // Micro-batch and step indices on the tags: every op of micro-batch k carries k, the step ops -1.
  const auto tags = dry_run_tags(p, p.micro_batches);
  ASSERT_FALSE(tags.empty());
  EXPECT_EQ(tags.front().micro_batch, 0);
  EXPECT_EQ(tags.back().id, OpId::kOptimizerStep);
  EXPECT_EQ(tags.back().micro_batch, -1);
  EXPECT_EQ(tags[tags.size() - 2].micro_batch, p.micro_batches - 1);
}

TEST(TrainContract, OneDenseLayerMatchesTheSchedule) {
  // One layer, no recompute: the exact list, spelled out once by hand, then the schedule. The
  // residual adds have no backward op (dropout 0, no bias: no kernel; session 32).
  const TrainPlan p = plan_training(
      parse(with(single_gpu("llama3.1-8b"), {"--layers", "1", "--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"})), 1);
  std::vector<std::string> got;
  for (const OpTag& t : dry_run_tags(p, 1)) got.push_back(name_of(t));
  const std::vector<std::string> want = {
      "embed.fwd", "L.attn.norm.fwd", "L.attn.qkv.fwd", "L.attn.rope.fwd", "L.attn.core.fwd", "L.attn.proj.fwd",
      "L.attn.bda.fwd", "L.mlp.norm.fwd", "L.mlp.fc1.fwd", "L.mlp.act.fwd", "L.mlp.fc2.fwd", "L.mlp.bda.fwd",
      "final.norm.fwd", "logits.fwd", "loss.fwd", "loss.bwd", "logits.bwd.dgrad", "logits.bwd.wgrad",
      "final.norm.bwd", "L.mlp.fc2.bwd.dgrad", "L.mlp.fc2.bwd.wgrad", "L.mlp.act.bwd",
      "L.mlp.fc1.bwd.dgrad", "L.mlp.fc1.bwd.wgrad", "L.mlp.norm.bwd", "L.attn.proj.bwd.dgrad",
      "L.attn.proj.bwd.wgrad", "L.attn.core.bwd", "L.attn.rope.bwd", "L.attn.qkv.bwd.dgrad", "L.attn.qkv.bwd.wgrad",
      "L.attn.norm.bwd", "embed.bwd", "optimizer.step"};
  EXPECT_EQ(got, want);
  std::vector<std::string> sched;
  for (const std::string& k : schedule_step(p, 1)) sched.push_back(k.substr(0, k.rfind('@')));
  EXPECT_EQ(sched, want);
}

TEST(TrainContract, DenseStepNoRecompute) {
  expect_contract(with(single_gpu("llama3.1-8b"), {"--layers", "3", "--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"}));
}

TEST(TrainContract, DenseStepSelectiveRecompute) {
  expect_contract(with(single_gpu("llama3.1-8b"),
                       {"--layers", "2", "--set", "parallel.recompute_granularity=selective", "--set", "parallel.recompute_num_layers=null", "--set",
                        "parallel.recompute_modules=[core_attn, layernorm, mlp]"}));
}

TEST(TrainContract, DenseStepFullRecomputeUniformAndBlock) {
  expect_contract(with(single_gpu("llama3.1-8b"), {"--layers", "2"}));  // full, uniform
  expect_contract(with(single_gpu("llama3.1-8b"),
                       {"--layers", "3", "--set", "parallel.recompute_method=block", "--set",
                        "parallel.recompute_num_layers=1"}));
}

TEST(TrainContract, MoeStepMatchesTheSchedule) {
  expect_contract(with(single_gpu("mixtral-8x7b"), {"--layers", "2", "--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"}));
  expect_contract(with(single_gpu("mixtral-8x7b"),
                       {"--layers", "2", "--set", "parallel.recompute_granularity=full", "--set",
                        "parallel.recompute_method=uniform", "--set", "parallel.recompute_num_layers=1"}));
}

// Qwen3-30B-A3B: qk-layernorm (per-head Q and K norms, the schedule's attn.qk_norm) in MoE layers.
TEST(TrainContract, QkLayernormStepMatchesTheSchedule) {
  const auto qwen = with(single_gpu("qwen3-30b-a3b"), {"--layers", "2"});
  expect_contract(with(qwen, {"--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"}));
  expect_contract(with(qwen, {"--set", "parallel.recompute_granularity=selective", "--set", "parallel.recompute_num_layers=null",
                              "--set", "parallel.recompute_modules=[core_attn, layernorm]"}));
  expect_contract(with(qwen, {"--set", "parallel.recompute_granularity=full", "--set", "parallel.recompute_method=uniform",
                              "--set", "parallel.recompute_num_layers=1"}));
  const TrainPlan p = plan_training(
      parse(with(qwen, {"--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"})), 1);
  EXPECT_TRUE(p.qk_norm);
  std::vector<std::string> names;
  for (const OpTag& t : dry_run_tags(p, 1)) names.push_back(name_of(t));
  // qk_norm sits between the QKV projection and RoPE, forward and backward.
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  EXPECT_EQ(at("L.attn.qk_norm.fwd"), at("L.attn.qkv.fwd") + 1);
  EXPECT_EQ(at("L.attn.rope.fwd"), at("L.attn.qk_norm.fwd") + 1);
  EXPECT_EQ(at("L.attn.qk_norm.bwd"), at("L.attn.rope.bwd") + 1);
}

// DeepSeek-V3 slices (with qk_layernorm, as Megatron's DeepSeek-V3 recipes set it): multi-latent
// attention with q-LoRA and latent norms (a dense layer,
// then a MoE layer with 16 experts), without q-LoRA, and under mla_up_proj recompute.
std::vector<std::string> deepseek_slice(const std::vector<std::string>& extra) {
  std::vector<std::string> args =
      with(single_gpu("deepseek-v3"), {"--layers", "2",
                                       "--set",    "model.mtp_num_layers=0",
                                       "--set",    "model.qk_layernorm=true",
                                       "--set",    "model.num_experts=16",
                                       "--set",    "model.moe_layer_freq=([0]*1+[1]*60)",
                                       "--set",    "model.moe_token_dispatcher_type=alltoall",
                                       "--set",    "training.exp_avg_dtype=fp32",
                                       "--set",    "training.exp_avg_sq_dtype=fp32",
                                       "--set",    "training.store_param_remainders=false",
                                       "--set",    "parallel.num_layers_in_first_pipeline_stage=null",
                                       "--set",    "parallel.num_layers_in_last_pipeline_stage=null"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(TrainContract, MlaStepMatchesTheSchedule) {
  const std::vector<std::string> none{"--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"};
  expect_contract(deepseek_slice(none));
  expect_contract(deepseek_slice(with(none, {"--set", "model.q_lora_rank=0"})));
  expect_contract(deepseek_slice(with(none, {"--set", "model.qk_layernorm=false"})));
  expect_contract(deepseek_slice({}));  // the scenario's full uniform recompute
  expect_contract(deepseek_slice({"--set", "parallel.recompute_granularity=selective", "--set", "parallel.recompute_num_layers=null",
                                  "--set", "parallel.recompute_modules=[mla_up_proj, core_attn, layernorm]"}));
  const TrainPlan p = plan_training(parse(deepseek_slice(none)), 1);
  EXPECT_TRUE(p.mla);
  EXPECT_EQ(p.head_dim, 192);  // qk_nope 128 + qk_rope 64
  EXPECT_EQ(p.v_dim, 128);
  EXPECT_EQ(p.rope_dim, 64);
  EXPECT_EQ(p.groups, p.heads);
  EXPECT_EQ(p.q_lora, 1536);
  EXPECT_EQ(p.kv_lora, 512);
  EXPECT_EQ(p.moe_layer, (std::vector<char>{0, 1}));
  // YaRN with mscale_all_dim 0 (what the spec carries): the plain 1/sqrt(192).
  EXPECT_FLOAT_EQ(p.softmax_scale, static_cast<float>(1.0 / std::sqrt(192.0)));
  std::vector<std::string> names;
  for (const OpTag& t : dry_run_tags(p, 1)) names.push_back(name_of(t));
  const auto first = std::find(names.begin(), names.end(), "L.attn.q_down.fwd");
  ASSERT_NE(first, names.end());
  const std::vector<std::string> fwd(first, first + 8);
  EXPECT_EQ(fwd, (std::vector<std::string>{"L.attn.q_down.fwd", "L.attn.kv_down.fwd", "L.attn.qk_norm.fwd",
                                           "L.attn.q_up.fwd", "L.attn.kv_up.fwd", "L.attn.rope.fwd", "L.attn.core.fwd",
                                           "L.attn.proj.fwd"}));
}

TEST(TrainContract, PlantedDriftIsCaught) {
  // The check bites: the schedule of another recompute policy differs from the runner's.
  const TrainPlan none = plan_training(
      parse(with(single_gpu("llama3.1-8b"), {"--layers", "1", "--set", "parallel.recompute_granularity=none", "--set", "parallel.recompute_num_layers=null"})), 1);
  const TrainPlan full = plan_training(parse(with(single_gpu("llama3.1-8b"), {"--layers", "1"})), 1);
  EXPECT_NE(runner_step(none, 1), schedule_step(full, 1));
}

TEST(TrainSummary, JsonRoundTrip) {
  TrainSummary s;
  s.scenario_path = "scenarios/llama3.1-8b.yaml";
  s.scenario_name = "llama3.1-8b-128k";
  s.overrides = {{"model.num_layers", "2"}, {"hardware.num_gpus", "1"}};
  s.scaled = true;
  s.layers_from = 32;
  s.layers_to = 2;
  s.device_name = "NVIDIA H200";
  s.cuda_driver = 13000;
  s.cudnn = 91400;
  s.seq_length = 8192;
  s.micro_batches = 4;
  s.recompute = "full";
  s.seed = 7;
  s.model_flops_per_step = 4.0e12;
  s.peak_flops = 989e12;
  s.steps = {{1, 0.9, 10.5, 3.0, 0.0, 32768, true, 1980, 300}, {2, 0.5, 10.0, 2.0, 0.0, 32768, false, 1755, 690},
             {3, 0.3, 9.0, 1.0, 0.0, 32768, false, 1710, 700}, {4, 0.4, 8.5, 1.0, 0.0, 32768, false, -1, -1}};
  s.ops = {{"L.attn.qkv.fwd", 0, 12, 0.024}};
  s.peak_allocated = 123456789;
  s.peak_reserved = 223456789;
  s.at_peak_by[0] = 1000;
  s.context_bytes = 536870912;
  s.routing = {{1, {10, 30}, {10, 20}}};
  s.host = {5.5e-6, 2.25e-6, 1.5e-5};
  s.finish();
  // Median of {0.5, 0.3, 0.4} (step 1 is warm-up), tokens over their summed time.
  EXPECT_DOUBLE_EQ(s.step_time_median, 0.4);
  EXPECT_DOUBLE_EQ(s.step_time_min, 0.3);
  EXPECT_DOUBLE_EQ(s.step_time_max, 0.5);
  EXPECT_EQ(s.measured_steps, 3);
  EXPECT_NEAR(s.tokens_per_s, 3 * 32768 / 1.2, 1e-6);
  EXPECT_NEAR(s.mfu, 4.0e12 / 0.4 / 989e12, 1e-15);
  EXPECT_DOUBLE_EQ(s.routing[0].dropped_fraction(), 0.25);
  // Clock and power: medians over the measured steps that were sampled (steps 2 and 3).
  EXPECT_DOUBLE_EQ(s.sm_clock_mhz_median, 0.5 * (1755 + 1710));
  EXPECT_DOUBLE_EQ(s.power_w_median, 695);
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["clocks"]["sm_mhz_median"].get<double>(), 1732.5);
  EXPECT_EQ(j["host"]["gemm_enqueue_s"].get<double>(), 5.5e-6);
  EXPECT_EQ(j["host"]["sync_s"].get<double>(), 1.5e-5);
  EXPECT_EQ(j["steps"][1]["power_w"].get<double>(), 690);
  EXPECT_EQ(j["format"], "lcm-exec-train/1");
  EXPECT_EQ(j["scaled"]["model.num_layers"]["from"], 32);
  EXPECT_EQ(j["ops"][0]["mean_s"].get<double>(), 0.002);
  const TrainSummary back = summary_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back, s);
  // A summary written before the host costs were measured reads back with none (-1).
  nlohmann::json old = j;
  old.erase("host");
  EXPECT_EQ(summary_from_json(old).host, HostCosts{});
}

}  // namespace
