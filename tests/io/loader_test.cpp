// Scenario loader: happy paths with exact values, derived defaults, value forms, overrides.
#include <fstream>

#include "io_test_util.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::io::test {
namespace {

using testing::HasSubstr;

TEST(Loader, BaseScenarioExactValuesAndDerivedDefaults) {
  auto r = load_text(kBaseScenario);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value();
  EXPECT_EQ(s.name, "base");
  EXPECT_EQ(s.model.name, "tiny");
  EXPECT_EQ(s.model.num_layers, 8);
  EXPECT_EQ(s.model.hidden_size, 1024);
  EXPECT_EQ(s.model.ffn_hidden_size, 4096);
  EXPECT_EQ(s.model.num_attention_heads, 16);
  EXPECT_EQ(s.model.vocab_size, 32000);
  // Derived as Megatron derives them.
  EXPECT_EQ(s.model.num_query_groups, 16);       // = heads (MHA)
  EXPECT_EQ(s.model.kv_channels, 64);            // = hidden / heads
  EXPECT_TRUE(s.model.add_qkv_bias);             // = add_bias_linear (default true)
  EXPECT_EQ(s.parallel.expert_tensor_parallel_size, 2);  // = tp
  // Documented defaults.
  EXPECT_EQ(s.model.make_vocab_size_divisible_by, 128);
  EXPECT_EQ(s.model.normalization, Normalization::kLayerNorm);
  EXPECT_EQ(s.model.num_experts, 0);
  EXPECT_TRUE(s.model.moe_layer_pattern.empty());
  EXPECT_EQ(s.training.precision, Precision::kBf16);
  EXPECT_EQ(s.training.attention_backend, AttentionBackend::kFused);
  EXPECT_EQ(s.parallel.data_parallel_sharding_strategy, DpSharding::kNoShard);
  EXPECT_FALSE(s.parallel.use_distributed_optimizer);
  EXPECT_EQ(s.parallel.recompute_modules, static_cast<uint32_t>(kRecomputeCoreAttn));
  EXPECT_EQ(rank_order_to_string(s.parallel.order), "tp-cp-ep-dp-pp");
  EXPECT_TRUE(s.flop_convention.causal_halved);
  EXPECT_FALSE(s.flop_convention.include_recompute);
  // Hardware resolved from the profile.
  EXPECT_EQ(s.num_gpus, 8);
  EXPECT_EQ(s.hardware.name, "h200-sxm");
  EXPECT_DOUBLE_EQ(s.hardware.gpu.hbm_bytes, 143771.0 * 1024 * 1024);
}

TEST(Loader, EveryKeyParsed) {
  const std::string text = R"(name: full
model:
  name: m
  num_layers: 4
  hidden_size: 512
  ffn_hidden_size: 1536
  num_attention_heads: 8
  num_query_groups: 2
  kv_channels: 96
  vocab_size: 1000
  make_vocab_size_divisible_by: 64
  untie_embeddings_and_output_weights: true
  swiglu: true
  add_bias_linear: false
  add_qkv_bias: true
  qk_layernorm: true
  normalization: RMSNorm
  position_embedding_type: rope
  max_position_embeddings: 4096
  rotary_base: 500000.5
  rope_scaling: {type: yarn, factor: 2.5, original_max_position_embeddings: 2048}
  num_experts: 8
  moe_router_topk: 2
  moe_ffn_hidden_size: 256
  moe_shared_expert_intermediate_size: 512
  moe_layer_freq: [0, 1, 1, 1]
  moe_expert_capacity_factor: 1.25
  moe_pad_expert_input_to_capacity: true
  moe_token_dispatcher_type: flex
  moe_router_score_function: sigmoid
  moe_router_num_groups: 4
  moe_router_group_topk: 2
  moe_router_enable_expert_bias: true
  mtp_num_layers: 1
training:
  seq_length: 4K
  micro_batch_size: 2
  global_batch_size: 8
  precision: fp8
  attention_backend: flash
  cross_entropy_loss_fusion: true
  cross_entropy_fusion_impl: te
  grad_reduce_in_fp32: false
  main_params_dtype: bf16
  exp_avg_dtype: bf16
  exp_avg_sq_dtype: fp8
parallel:
  tensor_model_parallel_size: 2
  sequence_parallel: true
  pipeline_model_parallel_size: 2
  num_layers_per_virtual_pipeline_stage: 1
  context_parallel_size: 2
  cp_comm_type: a2a+p2p
  hierarchical_context_parallel_sizes: [2, 1]
  expert_model_parallel_size: 2
  expert_tensor_parallel_size: 1
  use_distributed_optimizer: true
  data_parallel_sharding_strategy: optim_grads
  recompute_granularity: selective
  recompute_modules: [core_attn, moe_act, layernorm]
  rank_order: tp-cp-ep-pp-dp
  overlap_grad_reduce: true
  overlap_param_gather: true
  tp_comm_overlap: true
  overlap_moe_expert_parallel_comm: true
  moe_fp8_dispatch: true
hardware:
  profile: h100-sxm
  num_gpus: 8
flop_convention:
  causal_halved: false
  include_recompute: true
)";
  auto r = load_text(text);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value();
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.num_query_groups, 2);
  EXPECT_EQ(m.kv_channels, 96);
  EXPECT_EQ(m.make_vocab_size_divisible_by, 64);
  EXPECT_TRUE(m.untie_embeddings_and_output_weights && m.swiglu && m.add_qkv_bias && m.qk_layernorm);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_EQ(m.normalization, Normalization::kRMSNorm);
  EXPECT_EQ(m.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(m.rotary_base, 500000.5);
  EXPECT_EQ(m.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 2.5);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_EQ(m.moe_layer_pattern, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(m.moe_expert_capacity_factor, 1.25);
  EXPECT_TRUE(m.moe_pad_expert_input_to_capacity);
  EXPECT_EQ(m.moe_token_dispatcher_type, Dispatcher::kFlex);
  EXPECT_EQ(m.moe_router_score_function, RouterScore::kSigmoid);
  EXPECT_EQ(m.moe_router_num_groups, 4);
  EXPECT_EQ(m.moe_router_group_topk, 2);
  EXPECT_TRUE(m.moe_router_enable_expert_bias);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 512);
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_EQ(s.training.seq_length, 4096);
  EXPECT_EQ(s.training.precision, Precision::kFp8);
  // flash: FlashAttention-2 (unfused refuses CP: below)
  EXPECT_EQ(s.training.attention_backend, AttentionBackend::kFlash2);
  EXPECT_TRUE(s.training.cross_entropy_loss_fusion);
  EXPECT_EQ(s.training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe);
  EXPECT_FALSE(s.training.grad_reduce_in_fp32);
  EXPECT_EQ(s.training.main_params_dtype, DType::kBf16);
  EXPECT_EQ(s.training.exp_avg_sq_dtype, DType::kFp8);
  const ParallelSpec& p = s.parallel;
  EXPECT_EQ(p.num_layers_per_virtual_pipeline_stage, 1);
  EXPECT_EQ(p.cp_comm_type, CpCommType::kA2AP2P);
  EXPECT_EQ(p.hierarchical_context_parallel_sizes, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.expert_tensor_parallel_size, 1);
  EXPECT_EQ(p.data_parallel_sharding_strategy, DpSharding::kOptimGrads);
  EXPECT_EQ(p.recompute_modules, static_cast<uint32_t>(kRecomputeCoreAttn | kRecomputeMoeAct | kRecomputeLayernorm));
  EXPECT_EQ(rank_order_to_string(p.order), "tp-cp-ep-pp-dp");
  EXPECT_TRUE(p.overlap_grad_reduce && p.overlap_param_gather && p.tp_comm_overlap &&
              p.overlap_moe_expert_parallel_comm && p.moe_fp8_dispatch);
  EXPECT_FALSE(s.flop_convention.causal_halved);
  EXPECT_TRUE(s.flop_convention.include_recompute);
  EXPECT_EQ(s.hardware.name, "h100-sxm");
}

TEST(Loader, SeqLengthSuffixes) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, int64_t>>{
           {"4K", 4096}, {"32K", 32768}, {"128K", 131072}, {"1M", 1048576}, {"8192", 8192}}) {
    auto r = load_text(base_with("seq_length: 8192", "seq_length: " + text), {"max_position_embeddings=2000000"});
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().str();
    EXPECT_EQ(r.value().training.seq_length, value) << text;
  }
}

TEST(Loader, MoeLayerFreqForms) {
  const std::string moe = "  num_experts: 4\n  moe_layer_freq: ";
  auto load_freq = [&](const std::string& freq) {
    return load_text(base_with("  position_embedding_type: rope\n", "  position_embedding_type: rope\n" + moe + freq + "\n"));
  };
  auto every2 = load_freq("2");  // Megatron: layer i is MoE iff i % 2 == 0
  ASSERT_TRUE(every2.ok()) << every2.error().str();
  EXPECT_EQ(every2.value().model.moe_layer_pattern, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0, 1, 0}));
  auto all = load_freq("1");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all.value().model.moe_layer_pattern.empty());
  EXPECT_EQ(all.value().model.moe_ffn_hidden_size, 4096);  // = ffn_hidden_size
  for (const std::string& form : {std::string("\"([0]*3+[1]*5)\""), std::string("\"[0]*3+[1]*5\""),
                                  std::string("[0, 0, 0, 1, 1, 1, 1, 1]")}) {
    auto r = load_freq(form);
    ASSERT_TRUE(r.ok()) << form << ": " << r.error().str();
    EXPECT_EQ(r.value().model.moe_layer_pattern, (std::vector<uint8_t>{0, 0, 0, 1, 1, 1, 1, 1})) << form;
  }
}

// window_size: W or Megatron's [W, 0]; null or [-1, 0] is no window; a right bound other than
// 0 (a non-causal window) is refused, as is window_attn_skip_freq without a window.
// model.activation names the MLP's function where it is not the gate's default; it must agree
// with the gate (Megatron's flags); it is written only when not `default`.
TEST(Loader, ActivationNamesTheFunctionAndFollowsTheGate) {
  auto load_act = [&](const std::string& extra) {
    return load_text(base_with("  position_embedding_type: rope\n", "  position_embedding_type: rope\n" + extra));
  };
  auto r = load_act("  activation: squared_relu\n");  // the base scenario has no gate
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().model.activation, Activation::kSquaredRelu);
  auto q = load_act("  swiglu: true\n  activation: quick_gelu\n");
  ASSERT_TRUE(q.ok()) << q.error().str();
  EXPECT_EQ(q.value().model.activation, Activation::kQuickGelu);
  EXPECT_EQ(load_text(kBaseScenario).value().model.activation, Activation::kDefault);
  const std::string ungated = error_of(load_act("  activation: quick_gelu\n"));
  EXPECT_NE(ungated.find("model.activation: quick_gelu is gated (Megatron --quick-geglu): set model.swiglu true"),
            std::string::npos)
      << ungated;
  const std::string gated = error_of(load_act("  swiglu: true\n  activation: squared_relu\n"));
  EXPECT_NE(gated.find("model.activation: squared_relu is not gated (Megatron --squared-relu): set model.swiglu false"),
            std::string::npos)
      << gated;
  const std::string bad = error_of(load_act("  activation: relu\n"));
  EXPECT_NE(bad.find("model.activation: expected one of: default, squared_relu, quick_gelu; got 'relu'"),
            std::string::npos)
      << bad;
  EXPECT_EQ(scenario_to_yaml(load_text(kBaseScenario).value(), "h200-sxm").find("activation:"), std::string::npos);
  EXPECT_NE(scenario_to_yaml(r.value(), "h200-sxm").find("activation: squared_relu"), std::string::npos);
}

// parallel.cuda_graph_impl / cuda_graph_modules: Megatron's names and rules (an empty list is
// the whole layer; Megatron's deprecated "full" is accepted, "full_iteration" is the impl now);
// nothing is written without graphs. `--set cuda_graph_scope=...` is Megatron's former name.
TEST(Loader, CudaGraphKnobsAndMegatronsRules) {
  const std::string moe_model = "  num_experts: 8\n  moe_router_topk: 2\n";
  auto load_graphs = [&](const std::string& model_extra, const std::string& parallel_extra) {
    std::string s = base_with("  position_embedding_type: rope\n", "  position_embedding_type: rope\n" + model_extra);
    const std::string from = "  sequence_parallel: true\n";
    s.replace(s.find(from), from.size(), from + parallel_extra);
    return load_text(s);
  };
  auto r = load_graphs(moe_model, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [moe_router, moe_preprocess]\n");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().parallel.cuda_graph_impl, CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(r.value().parallel.cuda_graph_modules, kCudaGraphMoeRouter | kCudaGraphMoePreprocess);
  auto whole = load_graphs("", "  cuda_graph_impl: local\n  cuda_graph_modules: full\n");
  ASSERT_TRUE(whole.ok()) << whole.error().str();
  EXPECT_EQ(whole.value().parallel.cuda_graph_modules, 0u);
  EXPECT_EQ(scenario_to_yaml(load_text(kBaseScenario).value(), "h200-sxm").find("cuda_graph"), std::string::npos);
  auto err = [&](const std::string& m, const std::string& p) { return error_of(load_graphs(m, p)); };
  EXPECT_THAT(err("", "  cuda_graph_impl: cudagraph\n"),
              HasSubstr("parallel.cuda_graph_impl: expected one of: none, local, transformer_engine, full_iteration; "
                        "got 'cudagraph'"));
  EXPECT_THAT(err("", "  cuda_graph_impl: local\n  cuda_graph_modules: [attn, mamba]\n"),
              HasSubstr("unknown CUDA graph module 'mamba'; expected any of: attn, mlp, moe, moe_router, moe_preprocess"));
  EXPECT_THAT(err("", "  cuda_graph_modules: [full_iteration]\n"),
              HasSubstr("'full_iteration' is not a module: set cuda_graph_impl: full_iteration"));
  EXPECT_THAT(err("", "  cuda_graph_modules: [attn]\n"),
              HasSubstr("parallel.cuda_graph_modules: cuda_graph_modules has no effect without cuda_graph_impl"));
  EXPECT_THAT(err("", "  cuda_graph_impl: local\n  cuda_graph_modules: [moe_router]\n"),
              HasSubstr("moe cuda graph is only supported for MoE."));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [moe_preprocess]\n"),
              HasSubstr("moe_preprocess cuda graph is only supported with moe_router cuda graph."));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [moe, moe_router]\n"),
              HasSubstr("cuda_graph_modules must not contain both moe and moe_router."));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [moe]\n"),
              HasSubstr("moe cuda graph is only supported with drop-padding MoE."));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [mlp]\n"),
              HasSubstr("mlp cuda graph is only supported for dense layers"));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: local\n"),
              HasSubstr("an empty cuda_graph_modules captures whole layers, and an MoE layer's dispatcher copies"));
  EXPECT_THAT(err(moe_model, "  cuda_graph_impl: full_iteration\n"),
              HasSubstr("a full_iteration graph cannot hold the token dispatcher's device-to-host copy"));
  EXPECT_THAT(err("", "  cuda_graph_impl: full_iteration\n  cuda_graph_modules: [attn]\n"),
              HasSubstr("cuda_graph_modules must be empty when cuda_graph_impl is full_iteration"));
  EXPECT_THAT(err("", "  cuda_graph_impl: local\n  recompute_granularity: full\n  recompute_num_layers: 1\n"),
              HasSubstr("full recompute is only supported with full iteration CUDA graph."));
  // Drop-and-pad MoE: the whole block and a full-iteration graph are possible.
  const std::string padded = moe_model + "  moe_expert_capacity_factor: 1.0\n  moe_pad_expert_input_to_capacity: true\n";
  EXPECT_TRUE(load_graphs(padded, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [attn, moe]\n").ok());
  EXPECT_TRUE(load_graphs(padded, "  cuda_graph_impl: full_iteration\n").ok());
  EXPECT_THAT(err(padded, "  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [moe_router, moe_preprocess]\n"),
              HasSubstr("moe_preprocess cuda graph is not supported when there are DtoH copies"));
  auto set = load_text(kBaseScenario, {"cuda_graph_impl=local", "cuda_graph_scope=[attn]"});
  ASSERT_TRUE(set.ok()) << set.error().str();
  EXPECT_EQ(set.value().parallel.cuda_graph_modules, kCudaGraphAttn);
}

TEST(Loader, SlidingWindowForms) {
  auto load_window = [&](const std::string& extra) {
    return load_text(base_with("  position_embedding_type: rope\n", "  position_embedding_type: rope\n" + extra));
  };
  for (const std::string& form : {std::string("128"), std::string("[128, 0]")}) {
    auto r = load_window("  window_size: " + form + "\n  window_attn_skip_freq: 2\n");
    ASSERT_TRUE(r.ok()) << form << ": " << r.error().str();
    EXPECT_EQ(r.value().model.window_size, 128) << form;
    EXPECT_EQ(r.value().model.window_attn_skip_freq, 2) << form;
  }
  for (const std::string& off : {std::string("null"), std::string("[-1, 0]")}) {
    auto r = load_window("  window_size: " + off + "\n");
    ASSERT_TRUE(r.ok()) << off << ": " << r.error().str();
    EXPECT_EQ(r.value().model.window_size, 0) << off;
  }
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                : ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
  };
  EXPECT_TRUE(has(error_of(load_window("  window_size: [128, 4]\n")),
                  "model.window_size: only causal windows are modelled (right bound 0), got [128, 4]"));
  EXPECT_TRUE(has(error_of(load_window("  window_size: [128, 0, 1]\n")), "got a list of 3"));
  EXPECT_TRUE(has(error_of(load_window("  window_attn_skip_freq: 2\n")),
                  "model.window_attn_skip_freq: window_attn_skip_freq needs model.window_size"));
}

TEST(Loader, DistributedOptimizerAndShardingStrategy) {
  auto udo = load_text(kBaseScenario, {"use_distributed_optimizer=true"});
  ASSERT_TRUE(udo.ok());
  EXPECT_EQ(udo.value().parallel.data_parallel_sharding_strategy, DpSharding::kOptim);
  auto fsdp = load_text(kBaseScenario, {"data_parallel_sharding_strategy=optim_grads_params"});
  ASSERT_TRUE(fsdp.ok());
  EXPECT_TRUE(fsdp.value().parallel.use_distributed_optimizer);
  auto both = load_text(kBaseScenario, {"use_distributed_optimizer=true", "data_parallel_sharding_strategy=optim_grads"});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both.value().parallel.data_parallel_sharding_strategy, DpSharding::kOptimGrads);
}

TEST(Loader, AliasesOfEnumSpellings) {
  auto r = load_text(kBaseScenario, {"cp_comm_type=allgather", "attention_backend=flash"});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().parallel.cp_comm_type, CpCommType::kAllGather);
  EXPECT_EQ(r.value().training.attention_backend, AttentionBackend::kFlash2);
  auto c = load_text(kBaseScenario, {"attention_backend=cudnn"});
  ASSERT_TRUE(c.ok()) << c.error().str();
  EXPECT_EQ(c.value().training.attention_backend, AttentionBackend::kFused);
}

// attention_backend unfused parses (its non-default value; EveryKeyParsed's scenario runs CP,
// which unfused attention cannot).
TEST(Loader, UnfusedAttentionBackendParsed) {
  auto r = load_text(kBaseScenario, {"attention_backend=unfused"});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().training.attention_backend, AttentionBackend::kUnfused);
  auto l = load_text(kBaseScenario, {"attention_backend=local"});
  ASSERT_TRUE(l.ok()) << l.error().str();
  EXPECT_EQ(l.value().training.attention_backend, AttentionBackend::kUnfused);
}

TEST(Overrides, ParseOverride) {
  auto ok = parse_override(" parallel.tensor_model_parallel_size = 4 ");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().key, "parallel.tensor_model_parallel_size");
  EXPECT_EQ(ok.value().value, "4");
  EXPECT_THAT(parse_override("tensor_model_parallel_size").error().str(), testing::HasSubstr("expected KEY=VALUE"));
  EXPECT_THAT(parse_override("tensor_model_parallel_size=").error().str(), testing::HasSubstr("missing value"));
  EXPECT_THAT(parse_override("Tensor-Size=4").error().str(), testing::HasSubstr("Megatron-Core field name"));
}

TEST(Overrides, BareAndSectionKeysApplyAfterTheFileAndLastWins) {
  auto r = load_text(kBaseScenario, {"tensor_model_parallel_size=4", "parallel.tensor_model_parallel_size=1",
                                     "seq_length=16K", "model.rope_scaling.type=linear", "rope_scaling.factor=2"});
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value();
  EXPECT_EQ(s.parallel.tensor_model_parallel_size, 1);
  EXPECT_EQ(s.parallel.expert_tensor_parallel_size, 1);  // derived after the overrides
  EXPECT_EQ(s.training.seq_length, 16384);
  EXPECT_EQ(s.model.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(s.model.rope_scaling.factor, 2.0);
}

TEST(Overrides, GoThroughTheSameChecksWithLocationSet) {
  EXPECT_EQ(error_of(load_text(kBaseScenario, {"tensor_model_parallel_size=two"})),
            "--set tensor_model_parallel_size=two: parallel.tensor_model_parallel_size: expected an integer in [1, 1048576], "
            "got 'two'");
  EXPECT_EQ(error_of(load_text(kBaseScenario, {"hiden_size=4"})).substr(0, 62),
            "--set hiden_size=4: hiden_size: unknown key 'hiden_size'; did ");
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"name=x"})), testing::HasSubstr("ambiguous key; write name or model.name"));
  // An override that breaks the layout is reported at "--set".
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"tensor_model_parallel_size=3"})),
              testing::StartsWith("--set tensor_model_parallel_size=3: parallel.tensor_model_parallel_size: world size "
                                                  "(8) is not divisible"));
  auto r = load_text(kBaseScenario, {"tensor_model_parallel_size=8", "num_attention_heads=12", "kv_channels=64"});
  EXPECT_THAT(error_of(r), testing::StartsWith("--set num_attention_heads=12: model.num_attention_heads: num_attention_heads (12) must be a "
                                               "multiple of tensor_model_parallel_size (8) (and 1 more: "
                                               "model.num_query_groups)"));
}

TEST(Loader, ProfileFoundNextToTheScenarioFile) {
  // load_scenario resolves `profile: h200-sxm.calibrated` through <scenario dir>/../hwprofiles.
  auto r = load_scenario(source_dir() + "/scenarios/llama3.1-8b.yaml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().hardware.name, "h200-sxm.calibrated");
  auto found = find_hardware_profile("h100-sxm", {});
  ASSERT_TRUE(found.ok()) << found.error().str();
  EXPECT_THAT(found.value(), testing::EndsWith("hwprofiles/h100-sxm.yaml"));
  auto by_path = find_hardware_profile(profile_dir() + "/h200-sxm.yaml", {"/nonexistent"});
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path.value(), profile_dir() + "/h200-sxm.yaml");
}

// Fuzz finding 9 (set_fuzz, docs/reliability.md): `--set model.name=` with a carriage return
// loaded, and the written scenario lost it on reading back. Text keys are one line.
TEST(Loader, ControlCharacterInTextIsAnError) {
  for (const std::string& bad : {std::string("model.name=mo\\e\rx"), std::string("model.name=a\x01" "b")}) {
    auto r = load_text(kBaseScenario, {bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().str(), testing::HasSubstr("expected one line of text, got a control character")) << r.error().str();
  }
  auto cr = load_text(kBaseScenario, {"model.name=mo\\e\rx"});
  ASSERT_FALSE(cr.ok());
  EXPECT_THAT(cr.error().str(), testing::HasSubstr("(byte 0x0d) at position 5"));
  // A YAML file's double-quoted escape reaches the same check.
  const std::string base = kBaseScenario;
  ASSERT_EQ(base.rfind("name: base\n", 0), 0u);
  auto yaml = load_text("name: \"a\\tb\"\n" + base.substr(11));
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.error().str(), testing::HasSubstr("(byte 0x09) at position 2"));
  EXPECT_TRUE(load_text(kBaseScenario, {"model.name=mo\\e"}).ok());  // a backslash is text
}

TEST(Loader, MegatronModelConfigThroughLoadScenario) {
  const std::string path = data_dir() + "/megatron/gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed.yaml";
  LoadOptions o = opts_with({"global_batch_size=64"});
  o.num_gpus = 8;
  o.hardware = "h100-sxm";
  auto r = load_scenario(path, o);
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().hardware.name, "h100-sxm");
  EXPECT_EQ(r.value().training.global_batch_size, 64);  // override applied after import
  EXPECT_EQ(r.value().parallel.expert_model_parallel_size, 4);
}

}  // namespace
}  // namespace lcm::io::test
