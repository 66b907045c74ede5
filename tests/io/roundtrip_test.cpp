// scenario_to_yaml: load(to_yaml(s)) == s, field by field, for a scenario with every field
// away from its default and for every bundled scenario.
#include <filesystem>

#include "io_test_util.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::io::test {
namespace {

void expect_same(const Scenario& a, const Scenario& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.num_gpus, b.num_gpus);
  const ModelSpec &m = a.model, &n = b.model;
  EXPECT_EQ(m.name, n.name);
  EXPECT_EQ(m.num_layers, n.num_layers);
  EXPECT_EQ(m.hidden_size, n.hidden_size);
  EXPECT_EQ(m.ffn_hidden_size, n.ffn_hidden_size);
  EXPECT_EQ(m.num_attention_heads, n.num_attention_heads);
  EXPECT_EQ(m.num_query_groups, n.num_query_groups);
  EXPECT_EQ(m.kv_channels, n.kv_channels);
  EXPECT_EQ(m.vocab_size, n.vocab_size);
  EXPECT_EQ(m.make_vocab_size_divisible_by, n.make_vocab_size_divisible_by);
  EXPECT_EQ(m.untie_embeddings_and_output_weights, n.untie_embeddings_and_output_weights);
  EXPECT_EQ(m.swiglu, n.swiglu);
  EXPECT_EQ(m.activation, n.activation);
  EXPECT_EQ(m.add_bias_linear, n.add_bias_linear);
  EXPECT_EQ(m.add_qkv_bias, n.add_qkv_bias);
  EXPECT_EQ(m.qk_layernorm, n.qk_layernorm);
  EXPECT_EQ(m.normalization, n.normalization);
  EXPECT_EQ(m.position_embedding_type, n.position_embedding_type);
  EXPECT_EQ(m.max_position_embeddings, n.max_position_embeddings);
  EXPECT_EQ(m.rotary_base, n.rotary_base);
  EXPECT_EQ(m.rope_scaling.type, n.rope_scaling.type);
  EXPECT_EQ(m.rope_scaling.factor, n.rope_scaling.factor);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, n.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(m.num_experts, n.num_experts);
  EXPECT_EQ(m.moe_router_topk, n.moe_router_topk);
  EXPECT_EQ(m.moe_ffn_hidden_size, n.moe_ffn_hidden_size);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, n.moe_shared_expert_intermediate_size);
  EXPECT_EQ(m.moe_layer_pattern, n.moe_layer_pattern);
  EXPECT_EQ(m.moe_expert_capacity_factor, n.moe_expert_capacity_factor);
  EXPECT_EQ(m.moe_pad_expert_input_to_capacity, n.moe_pad_expert_input_to_capacity);
  EXPECT_EQ(m.moe_token_dispatcher_type, n.moe_token_dispatcher_type);
  EXPECT_EQ(m.moe_router_score_function, n.moe_router_score_function);
  EXPECT_EQ(m.moe_router_num_groups, n.moe_router_num_groups);
  EXPECT_EQ(m.moe_router_group_topk, n.moe_router_group_topk);
  EXPECT_EQ(m.moe_router_enable_expert_bias, n.moe_router_enable_expert_bias);
  EXPECT_EQ(m.multi_latent_attention, n.multi_latent_attention);
  EXPECT_EQ(m.q_lora_rank, n.q_lora_rank);
  EXPECT_EQ(m.kv_lora_rank, n.kv_lora_rank);
  EXPECT_EQ(m.qk_head_dim, n.qk_head_dim);
  EXPECT_EQ(m.qk_pos_emb_head_dim, n.qk_pos_emb_head_dim);
  EXPECT_EQ(m.v_head_dim, n.v_head_dim);
  EXPECT_EQ(m.mtp_num_layers, n.mtp_num_layers);
  const TrainingSpec &t = a.training, &u = b.training;
  EXPECT_EQ(t.seq_length, u.seq_length);
  EXPECT_EQ(t.micro_batch_size, u.micro_batch_size);
  EXPECT_EQ(t.global_batch_size, u.global_batch_size);
  EXPECT_EQ(t.precision, u.precision);
  EXPECT_EQ(t.attention_backend, u.attention_backend);
  EXPECT_EQ(t.cross_entropy_loss_fusion, u.cross_entropy_loss_fusion);
  EXPECT_EQ(t.cross_entropy_fusion_impl, u.cross_entropy_fusion_impl);
  EXPECT_EQ(t.grad_reduce_in_fp32, u.grad_reduce_in_fp32);
  EXPECT_EQ(t.main_params_dtype, u.main_params_dtype);
  EXPECT_EQ(t.exp_avg_dtype, u.exp_avg_dtype);
  EXPECT_EQ(t.exp_avg_sq_dtype, u.exp_avg_sq_dtype);
  const ParallelSpec &p = a.parallel, &q = b.parallel;
  EXPECT_EQ(p.tensor_model_parallel_size, q.tensor_model_parallel_size);
  EXPECT_EQ(p.sequence_parallel, q.sequence_parallel);
  EXPECT_EQ(p.pipeline_model_parallel_size, q.pipeline_model_parallel_size);
  EXPECT_EQ(p.num_layers_per_virtual_pipeline_stage, q.num_layers_per_virtual_pipeline_stage);
  EXPECT_EQ(p.num_layers_in_first_pipeline_stage, q.num_layers_in_first_pipeline_stage);
  EXPECT_EQ(p.num_layers_in_last_pipeline_stage, q.num_layers_in_last_pipeline_stage);
  EXPECT_EQ(p.account_for_embedding_in_pipeline_split, q.account_for_embedding_in_pipeline_split);
  EXPECT_EQ(p.account_for_loss_in_pipeline_split, q.account_for_loss_in_pipeline_split);
  EXPECT_EQ(p.context_parallel_size, q.context_parallel_size);
  EXPECT_EQ(p.cp_comm_type, q.cp_comm_type);
  EXPECT_EQ(p.hierarchical_context_parallel_sizes, q.hierarchical_context_parallel_sizes);
  EXPECT_EQ(p.expert_model_parallel_size, q.expert_model_parallel_size);
  EXPECT_EQ(p.expert_tensor_parallel_size, q.expert_tensor_parallel_size);
  EXPECT_EQ(p.use_distributed_optimizer, q.use_distributed_optimizer);
  EXPECT_EQ(p.data_parallel_sharding_strategy, q.data_parallel_sharding_strategy);
  EXPECT_EQ(p.recompute_granularity, q.recompute_granularity);
  EXPECT_EQ(p.recompute_method, q.recompute_method);
  EXPECT_EQ(p.recompute_num_layers, q.recompute_num_layers);
  EXPECT_EQ(p.recompute_modules, q.recompute_modules);
  EXPECT_EQ(rank_order_to_string(p.order), rank_order_to_string(q.order));
  EXPECT_EQ(p.overlap_grad_reduce, q.overlap_grad_reduce);
  EXPECT_EQ(p.overlap_param_gather, q.overlap_param_gather);
  EXPECT_EQ(p.tp_comm_overlap, q.tp_comm_overlap);
  EXPECT_EQ(p.overlap_moe_expert_parallel_comm, q.overlap_moe_expert_parallel_comm);
  EXPECT_EQ(p.moe_fp8_dispatch, q.moe_fp8_dispatch);
  EXPECT_EQ(p.cuda_graph_impl, q.cuda_graph_impl);
  EXPECT_EQ(p.cuda_graph_modules, q.cuda_graph_modules);
  EXPECT_EQ(a.flop_convention.causal_halved, b.flop_convention.causal_halved);
  EXPECT_EQ(a.flop_convention.include_recompute, b.flop_convention.include_recompute);
  EXPECT_EQ(a.hardware.name, b.hardware.name);
  EXPECT_EQ(a.hardware.gpu.hbm_bytes, b.hardware.gpu.hbm_bytes);
}

Scenario roundtrip(const Scenario& s, const std::string& profile) {
  const std::string yaml = scenario_to_yaml(s, profile);
  auto r = load_scenario_string(yaml, "roundtrip.yaml", opts_with());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str()) << "\n" << yaml;
  return r.ok() ? r.value() : Scenario{};
}

TEST(RoundTrip, EveryFieldAwayFromItsDefault) {
  auto base = load_text(kBaseScenario);
  ASSERT_TRUE(base.ok());
  Scenario s = base.value();
  s.name = "every field: quoted? \"yes\"";
  s.model.name = "m #1";
  s.model.num_layers = 4;
  s.model.ffn_hidden_size = 3000;
  s.model.num_query_groups = 4;
  s.model.kv_channels = 80;
  s.model.make_vocab_size_divisible_by = 64;
  s.model.untie_embeddings_and_output_weights = true;
  s.model.swiglu = true;
  s.model.activation = Activation::kQuickGelu;  // gated, as swiglu above
  s.model.add_bias_linear = false;
  s.model.add_qkv_bias = true;
  s.model.qk_layernorm = true;
  s.model.normalization = Normalization::kRMSNorm;
  s.model.max_position_embeddings = 1000;
  s.model.rotary_base = 123456.789;
  s.model.rope_scaling = RopeScaling{RopeScalingType::kDynamicNtk, 1.0 / 3.0, 777};
  s.model.num_experts = 16;
  s.model.moe_router_topk = 3;
  s.model.moe_ffn_hidden_size = 333;
  s.model.moe_shared_expert_intermediate_size = 444;
  s.model.moe_layer_pattern = {0, 1, 0, 1};
  s.model.moe_expert_capacity_factor = 1.1;
  s.model.moe_pad_expert_input_to_capacity = true;
  s.model.moe_token_dispatcher_type = Dispatcher::kAllGather;
  s.model.moe_router_score_function = RouterScore::kSigmoid;
  s.model.moe_router_num_groups = 4;
  s.model.moe_router_group_topk = 2;
  s.model.moe_router_enable_expert_bias = true;
  s.model.mtp_num_layers = 2;
  s.training.seq_length = 12288;
  s.training.micro_batch_size = 2;
  s.training.global_batch_size = 64;
  s.training.precision = Precision::kFp8;
  s.training.cross_entropy_loss_fusion = true;
  s.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
  s.training.grad_reduce_in_fp32 = false;
  s.training.main_params_dtype = DType::kBf16;
  s.training.exp_avg_dtype = DType::kFp8;
  s.training.exp_avg_sq_dtype = DType::kBf16;
  ParallelSpec& p = s.parallel;
  p.pipeline_model_parallel_size = 2;
  p.num_layers_per_virtual_pipeline_stage = 1;
  p.context_parallel_size = 2;
  p.cp_comm_type = CpCommType::kA2AP2P;
  p.hierarchical_context_parallel_sizes = {2, 1};
  p.expert_model_parallel_size = 2;
  p.expert_tensor_parallel_size = 1;
  p.use_distributed_optimizer = true;
  p.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  p.recompute_granularity = RecomputeGranularity::kFull;
  p.recompute_method = RecomputeMethod::kBlock;
  p.recompute_num_layers = 2;
  p.recompute_modules = kRecomputeMlp | kRecomputeSharedExperts;
  const Dim order[kNumOrderDims] = {Dim::kTp, Dim::kEp, Dim::kCp, Dim::kPp, Dim::kDp};
  std::copy(std::begin(order), std::end(order), p.order);
  p.overlap_grad_reduce = p.overlap_param_gather = p.tp_comm_overlap = p.moe_fp8_dispatch = true;
  s.flop_convention = FlopConvention{false, true};
  s.hardware.name = "h200-sxm";
  ASSERT_TRUE(validate_scenario(s).empty()) << validate_scenario(s)[0].key << ": " << validate_scenario(s)[0].message;
  expect_same(s, roundtrip(s, "h200-sxm"));
  // Unfused attention (it cannot run CP: that part of the mesh off for it).
  {
    Scenario u = s;
    u.training.attention_backend = AttentionBackend::kUnfused;
    u.parallel.context_parallel_size = 1;
    u.parallel.cp_comm_type = CpCommType::kP2P;
    u.parallel.hierarchical_context_parallel_sizes.clear();
    u.num_gpus /= 2;
    ASSERT_TRUE(validate_scenario(u).empty()) << validate_scenario(u)[0].key << ": " << validate_scenario(u)[0].message;
    expect_same(u, roundtrip(u, "h200-sxm"));
  }

  // Accounting for embedding/loss, uneven stages, dropless routing, no rope scaling.
  p.num_layers_per_virtual_pipeline_stage = 0;
  p.num_layers_in_first_pipeline_stage = 1;
  p.num_layers_in_last_pipeline_stage = 3;
  s.model.moe_expert_capacity_factor = 0;
  s.model.moe_pad_expert_input_to_capacity = false;
  s.model.rope_scaling = RopeScaling{};
  expect_same(s, roundtrip(s, "h200-sxm"));
  p.num_layers_in_first_pipeline_stage = p.num_layers_in_last_pipeline_stage = 0;
  p.account_for_embedding_in_pipeline_split = p.account_for_loss_in_pipeline_split = true;
  s.model.num_layers = 6;
  s.model.moe_layer_pattern.clear();
  expect_same(s, roundtrip(s, "h200-sxm"));
  // CUDA graphs (per-layer graphs need a recompute other than full; the router and the
  // dispatcher's preprocessing of a dropless alltoall MoE), then the whole layer of a dense model.
  p.recompute_granularity = RecomputeGranularity::kSelective;
  p.recompute_num_layers = 0;
  s.model.moe_token_dispatcher_type = Dispatcher::kAllToAll;
  p.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
  p.cuda_graph_modules = kCudaGraphAttn | kCudaGraphMoeRouter | kCudaGraphMoePreprocess;
  ASSERT_TRUE(validate_scenario(s).empty()) << validate_scenario(s)[0].key << ": " << validate_scenario(s)[0].message;
  expect_same(s, roundtrip(s, "h200-sxm"));
  EXPECT_NE(scenario_to_yaml(s, "h200-sxm").find("cuda_graph_modules: [attn, moe_router, moe_preprocess]"),
            std::string::npos);
  s.model.num_experts = 0;
  p.expert_model_parallel_size = 1;
  p.cuda_graph_impl = CudaGraphImpl::kLocal;
  p.cuda_graph_modules = 0;
  ASSERT_TRUE(validate_scenario(s).empty()) << validate_scenario(s)[0].key << ": " << validate_scenario(s)[0].message;
  expect_same(s, roundtrip(s, "h200-sxm"));
  EXPECT_NE(scenario_to_yaml(s, "h200-sxm").find("cuda_graph_modules: []"), std::string::npos);
}

TEST(RoundTrip, BundledScenarios) {
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/scenarios")) {
    auto r = load_scenario(e.path().string());
    ASSERT_TRUE(r.ok()) << r.error().str();
    SCOPED_TRACE(e.path().string());
    expect_same(r.value(), roundtrip(r.value(), r.value().hardware.name));
  }
}

TEST(RoundTrip, WriterUsesCanonicalSpellingsAndTheHardwareReference) {
  auto r = load_text(kBaseScenario, {"cp_comm_type=allgather", "seq_length=4K"});
  ASSERT_TRUE(r.ok());
  const std::string yaml = scenario_to_yaml(r.value(), "../hwprofiles/h200-sxm.yaml");
  EXPECT_THAT(yaml, testing::HasSubstr("cp_comm_type: all_gather"));
  EXPECT_THAT(yaml, testing::HasSubstr("seq_length: 4096"));
  EXPECT_THAT(yaml, testing::HasSubstr("profile: ../hwprofiles/h200-sxm.yaml"));
  EXPECT_THAT(yaml, testing::HasSubstr("rank_order: tp-cp-ep-dp-pp"));
}

}  // namespace
}  // namespace lcm::io::test
