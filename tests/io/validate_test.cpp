// validate_scenario: one test per rule. Each starts from a valid scenario, breaks one rule
// and expects exactly that problem (key + Megatron-like message); a few also check the
// loader's rendering at the file position of the key.
#include <functional>

#include "io_test_util.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::io::test {
namespace {

using testing::HasSubstr;

Scenario base() {
  auto r = load_text(kBaseScenario);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.value() : Scenario{};
}

Scenario moe_base() {  // 8 experts on every layer, EP 4
  Scenario s = base();
  s.model.num_experts = 8;
  s.model.moe_ffn_hidden_size = 1024;
  s.parallel.expert_model_parallel_size = 4;
  s.parallel.expert_tensor_parallel_size = 1;
  EXPECT_TRUE(validate_scenario(s).empty());
  return s;
}

// Exactly one problem, with this key, whose message contains `text`.
void expect_problem(const Scenario& s, const std::string& key, const std::string& text) {
  const std::vector<Problem> p = validate_scenario(s);
  ASSERT_EQ(p.size(), 1u) << [&] {
    std::string all;
    for (const Problem& q : p) all += q.key + ": " + q.message + "\n";
    return all;
  }();
  EXPECT_EQ(p[0].key, key);
  EXPECT_THAT(p[0].message, HasSubstr(text));
}

TEST(Validate, BaseAndBundledLayoutsAreValid) { EXPECT_TRUE(validate_scenario(base()).empty()); }

TEST(Validate, WorldDivisibleByTpPpCp) {
  Scenario s = base();
  s.parallel.context_parallel_size = 3;
  s.training.seq_length = 8190;  // a multiple of 2 * 3
  expect_problem(s, "parallel.context_parallel_size",
                 "world size (8) is not divisible by tensor_model_parallel_size * pipeline_model_parallel_size * "
                 "context_parallel_size (2 * 1 * 3 = 6)");
}

// Transformer Engine runs a sliding window under CP with the a2a and all-gather
// implementations only; all of them are fine without CP.
TEST(Validate, SlidingWindowUnderContextParallelism) {
  Scenario s = base();
  s.model.window_size = 128;
  s.model.window_attn_skip_freq = 2;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.context_parallel_size = 2;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.cp_comm_type = CpCommType::kP2P;
  expect_problem(s, "parallel.cp_comm_type",
                 "sliding-window attention (model.window_size 128) runs under context parallelism with cp_comm_type "
                 "a2a or all_gather only, got p2p");
  s.parallel.cp_comm_type = CpCommType::kAllGather;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.model.window_size = 0;
  expect_problem(s, "model.window_attn_skip_freq", "window_attn_skip_freq needs model.window_size");
}

TEST(Validate, HeadsDivisibleByTp) {
  Scenario s = base();
  s.model.num_attention_heads = 12;
  s.model.num_query_groups = 4;
  s.num_gpus = 16;
  s.parallel.tensor_model_parallel_size = 8;
  expect_problem(s, "model.num_attention_heads", "num_attention_heads (12) must be a multiple of tensor_model_parallel_size (8)");
}

TEST(Validate, QueryGroupsMultipleOrDivisorOfTp) {
  Scenario s = base();
  s.parallel.tensor_model_parallel_size = 8;
  s.model.num_query_groups = 12;
  s.model.num_attention_heads = 24;
  expect_problem(s, "model.num_query_groups", "num_query_groups (12) must be a multiple or divisor of tensor_model_parallel_size (8)");
  s.model.num_query_groups = 2;  // a divisor of tp: KV heads replicated, as Megatron allows
  EXPECT_TRUE(validate_scenario(s).empty());
}

TEST(Validate, HeadsMultipleOfQueryGroups) {
  Scenario s = base();
  s.model.num_query_groups = 6;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  expect_problem(s, "model.num_query_groups", "num_attention_heads (16) must be a multiple of num_query_groups (6)");
}

TEST(Validate, ExpertsDivisibleByEp) {
  Scenario s = moe_base();
  s.model.num_experts = 6;
  s.model.moe_router_topk = 2;
  expect_problem(s, "model.num_experts", "Number of experts (6) should be a multiple of expert_model_parallel_size (4)");
}

TEST(Validate, EpNeedsExperts) {
  Scenario s = base();
  s.parallel.expert_model_parallel_size = 2;
  expect_problem(s, "parallel.expert_model_parallel_size", "num_experts must be non None to use expert model parallelism");
}

TEST(Validate, ExpertGridDividesWorld) {
  Scenario s = moe_base();
  s.parallel.expert_tensor_parallel_size = 4;  // 4 * 4 * 1 = 16 > 8
  expect_problem(s, "parallel.expert_model_parallel_size",
                 "world size (8) is not divisible by expert_tensor_parallel_size * expert_model_parallel_size * "
                 "pipeline_model_parallel_size (4 * 4 * 1 = 16)");
}

TEST(Validate, LayersDivisibleByPp) {
  Scenario s = base();
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_tensor_parallel_size = 1;
  s.model.num_layers = 10;
  expect_problem(s, "model.num_layers", "number of layers (10) should be divisible by the pipeline-model-parallel size (4)");
  s.model.num_layers = 6;
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;  // 6 + 2 = 8
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.account_for_loss_in_pipeline_split = false;  // 7
  expect_problem(s, "model.num_layers", "number of layers (7 (num_layers 6 + embedding/loss))");
}

TEST(Validate, LayersPerStageDivisibleByVirtualStage) {
  Scenario s = base();
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.num_layers_per_virtual_pipeline_stage = 3;  // 4 layers per stage
  expect_problem(s, "parallel.num_layers_per_virtual_pipeline_stage",
                 "number of layers per pipeline stage (4) must be divisible by number of layers per virtual pipeline "
                 "stage (3)");
}

TEST(Validate, VirtualPipelineNeedsPp) {
  Scenario s = base();
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  expect_problem(s, "parallel.num_layers_per_virtual_pipeline_stage",
                 "an interleaved (virtual) pipeline schedule needs pipeline_model_parallel_size > 1");
}

TEST(Validate, UnevenStagesConsistent) {
  Scenario s = base();
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_tensor_parallel_size = 1;
  s.model.num_layers = 10;
  s.parallel.num_layers_in_first_pipeline_stage = 2;
  s.parallel.num_layers_in_last_pipeline_stage = 2;  // 6 middle layers over 2 stages
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.num_layers_in_last_pipeline_stage = 3;  // 5 over 2
  expect_problem(s, "model.num_layers", "number of layers at middle stage: 5 must be divisible by the middle pipeline model parallel size 2");
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.num_layers_in_last_pipeline_stage = 2;  // 6 layers left, no middle stage
  expect_problem(s, "parallel.num_layers_in_first_pipeline_stage", "Mismatch: 6 middle layers remaining but 0 middle PP stages available");
}

TEST(Validate, UnevenStagesWithVirtualStagesNotModelled) {
  Scenario s = base();
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.num_layers_in_first_pipeline_stage = 3;
  s.parallel.num_layers_in_last_pipeline_stage = 5;
  s.parallel.num_layers_per_virtual_pipeline_stage = 1;
  expect_problem(s, "parallel.num_layers_per_virtual_pipeline_stage", "cannot be combined with num_layers_in_first/last_pipeline_stage");
}

TEST(Validate, UnevenStagesWithEmbeddingOrLossAccountingRejected) {
  // Megatron-Core's TransformerConfig raises on the combination (its uneven split ignores
  // the embedding / loss slots). 10 layers on 4 stages as 2 / 3 / 3 / 2 is valid alone.
  Scenario s = base();
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_tensor_parallel_size = 1;
  s.model.num_layers = 10;
  s.parallel.num_layers_in_first_pipeline_stage = 2;
  s.parallel.num_layers_in_last_pipeline_stage = 2;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.account_for_embedding_in_pipeline_split = true;
  expect_problem(s, "parallel.account_for_embedding_in_pipeline_split",
                 "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set at the same "
                 "time with account_for_embedding_in_pipeline_split");
  s.parallel.account_for_embedding_in_pipeline_split = false;
  s.parallel.account_for_loss_in_pipeline_split = true;
  s.parallel.num_layers_in_first_pipeline_stage = 0;  // the last stage alone is uneven too
  s.parallel.num_layers_in_last_pipeline_stage = 4;  // 6 middle layers over 3 stages
  expect_problem(s, "parallel.account_for_loss_in_pipeline_split", "cannot be set at the same time");
}

TEST(Validate, SeqLengthMultipleOfTwiceCp) {
  Scenario s = base();
  s.parallel.context_parallel_size = 4;
  s.training.global_batch_size = 1;
  s.training.seq_length = 8196;
  expect_problem(s, "training.seq_length", "seq_length (8196) should be a multiple of 2 * context_parallel_size (8)");
}

TEST(Validate, GlobalBatchDivisibleByMicroBatchTimesDp) {
  Scenario s = base();
  s.training.global_batch_size = 6;  // dp = 4
  expect_problem(s, "training.global_batch_size",
                 "global_batch_size (6) is not divisible by micro_batch_size (1) times data_parallel_size (4)");
}

TEST(Validate, SequenceParallelWithTpOneIsAccepted) {
  Scenario s = base();
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.sequence_parallel = true;  // Megatron turns it off with a warning
  EXPECT_TRUE(validate_scenario(s).empty());
}

TEST(Validate, ExpertAndTensorParallelNeedSequenceParallel) {
  Scenario s = moe_base();
  s.parallel.sequence_parallel = false;
  expect_problem(s, "parallel.sequence_parallel",
                 "When using expert parallelism and tensor parallelism for training, sequence parallelism must be used");
}

TEST(Validate, TpCommOverlapNeedsSequenceParallel) {
  Scenario s = base();
  s.parallel.tp_comm_overlap = true;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.sequence_parallel = false;
  expect_problem(s, "parallel.tp_comm_overlap",
                 "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled");
}

TEST(Validate, CpA2aNeedsCpDividingHeads) {
  Scenario s = base();
  s.model.num_attention_heads = 12;
  s.model.num_query_groups = 12;
  s.model.kv_channels = 64;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.context_parallel_size = 4;
  s.training.global_batch_size = 1;
  s.parallel.cp_comm_type = CpCommType::kA2A;  // 6 heads per TP rank over CP 4
  expect_problem(s, "parallel.cp_comm_type",
                 "cp_comm_type a2a scatters heads over the CP group: attention heads per TP rank (6) must be divisible "
                 "by context_parallel_size (4)");
}

TEST(Validate, HierarchicalCpSizesMultiplyToCp) {
  Scenario s = base();
  s.parallel.context_parallel_size = 4;
  s.training.global_batch_size = 1;
  s.parallel.cp_comm_type = CpCommType::kA2AP2P;
  s.parallel.hierarchical_context_parallel_sizes = {2, 2};
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.hierarchical_context_parallel_sizes = {2, 4};
  expect_problem(s, "parallel.hierarchical_context_parallel_sizes",
                 "context_parallel_size (4) must equal the product of hierarchical_context_parallel_sizes (8)");
  s.parallel.hierarchical_context_parallel_sizes = {};
  expect_problem(s, "parallel.hierarchical_context_parallel_sizes",
                 "must be set when a2a+p2p is used in cp comm");
}

TEST(Validate, FullRecomputeNeedsLayerCount) {
  Scenario s = base();
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  expect_problem(s, "parallel.recompute_num_layers",
                 "When using recompute_granularity: full recompute_num_layers must be between 1 and "
                 "num_layers_per_pipeline_rank: 8");
  s.parallel.recompute_num_layers = 9;
  expect_problem(s, "parallel.recompute_num_layers", "between 1 and num_layers_per_pipeline_rank: 8");
  s.parallel.recompute_num_layers = 1;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  expect_problem(s, "parallel.recompute_num_layers", "recompute_num_layers (1) applies only to recompute_granularity: full");
}

TEST(Validate, NumGpusMultipleOfNodeOrSmaller) {
  Scenario s = base();
  s.num_gpus = 12;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.expert_tensor_parallel_size = 1;
  s.training.global_batch_size = 12;
  expect_problem(s, "hardware.num_gpus", "num_gpus (12) must be a multiple of gpus_per_node (8) of h200-sxm, or fewer than one node");
  s.num_gpus = 4;
  s.training.global_batch_size = 4;
  EXPECT_TRUE(validate_scenario(s).empty());
}

TEST(Validate, NumGpusPositive) {
  Scenario s = base();
  s.num_gpus = 0;
  const auto p = validate_scenario(s);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].key, "hardware.num_gpus");
  EXPECT_THAT(p[0].message, HasSubstr("num_gpus must be positive"));
}

TEST(Validate, CapacityFactorPaddingNeedsFactor) {
  Scenario s = moe_base();
  s.model.moe_pad_expert_input_to_capacity = true;
  expect_problem(s, "model.moe_pad_expert_input_to_capacity", "requires moe_expert_capacity_factor");
  s.model.moe_expert_capacity_factor = 1.0;
  EXPECT_TRUE(validate_scenario(s).empty());
}

TEST(Validate, TopkAtMostNumExperts) {
  Scenario s = moe_base();
  s.model.moe_router_topk = 9;
  expect_problem(s, "model.moe_router_topk", "moe_router_topk (9) must be between 1 and num_experts (8)");
}

TEST(Validate, GroupLimitedRouting) {
  Scenario s = moe_base();
  s.model.moe_router_num_groups = 3;
  s.model.moe_router_group_topk = 1;
  expect_problem(s, "model.moe_router_num_groups", "num_experts (8) must be divisible by moe_router_num_groups (3)");
  s.model.moe_router_num_groups = 4;
  s.model.moe_router_group_topk = 5;
  expect_problem(s, "model.moe_router_group_topk", "moe_router_group_topk (5) must be between 1 and moe_router_num_groups (4)");
}

TEST(Validate, MoePatternLength) {
  Scenario s = moe_base();
  s.model.moe_layer_pattern = {0, 1, 1};
  expect_problem(s, "model.moe_layer_freq", "moe_layer_freq lists 3 layers but num_layers is 8");
}

TEST(Validate, MlaFieldsPresent) {
  Scenario s = base();
  s.model.multi_latent_attention = true;
  s.model.kv_lora_rank = 512;
  expect_problem(s, "model.multi_latent_attention", "needs kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim");
  s.model.qk_head_dim = 128;
  s.model.qk_pos_emb_head_dim = 64;
  s.model.v_head_dim = 128;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.model.num_query_groups = 4;
  expect_problem(s, "model.num_query_groups", "Group query attention is mutually exclusive with multi latent attention");
}

TEST(Validate, LearnedAbsoluteCoversSequence) {
  Scenario s = base();
  s.model.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  s.model.max_position_embeddings = 4096;
  expect_problem(s, "model.max_position_embeddings",
                 "max_position_embeddings (4096) must be greater than or equal to seq_length (8192)");
}

TEST(Validate, RopeScalingNeedsRope) {
  Scenario s = base();
  s.model.position_embedding_type = PositionEmbedding::kNone;
  s.model.rope_scaling = RopeScaling{RopeScalingType::kYarn, 4.0, 4096};
  expect_problem(s, "model.rope_scaling", "rope_scaling needs position_embedding_type: rope");
}

TEST(Validate, MtpNeedsRopeOrNone) {
  Scenario s = base();
  s.model.mtp_num_layers = 1;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.model.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  s.model.max_position_embeddings = 8192;
  expect_problem(s, "model.mtp_num_layers", "Multi-Token Prediction (MTP) is not supported with learned_absolute");
}

TEST(Validate, OverlapParamGatherNeedsDistributedOptimizerAndGradOverlap) {
  Scenario s = base();
  s.parallel.overlap_param_gather = true;
  s.parallel.overlap_grad_reduce = true;
  expect_problem(s, "parallel.overlap_param_gather", "only supported with distributed optimizer");
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.parallel.overlap_grad_reduce = false;
  expect_problem(s, "parallel.overlap_param_gather", "Must use overlap_param_gather with overlap_grad_reduce");
}

TEST(Validate, ExpertParallelCommOverlapRules) {
  Scenario s = moe_base();
  s.parallel.overlap_moe_expert_parallel_comm = true;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.model.moe_token_dispatcher_type = Dispatcher::kAllGather;
  expect_problem(s, "parallel.overlap_moe_expert_parallel_comm", "supported with alltoall/flex token dispatcher");
}

TEST(Validate, Fp8NeedsFp8Peak) {
  Scenario s = base();
  s.training.precision = Precision::kFp8;
  s.hardware.gpu.peak_fp8_flops = 0;
  expect_problem(s, "training.precision", "precision fp8 needs a hardware profile with peak_fp8_dense_TFLOPs");
}

// --fp8-recipe: only with FP8; mxfp8 is Blackwell's; blockwise needs the profile's measured
// block-scaled GEMM term; fp8_block is no storage type.
TEST(Validate, Fp8RecipeRules) {
  Scenario s = base();
  s.hardware.efficiency.gemm_fp8_block = 0;
  s.training.fp8_recipe = Fp8Recipe::kTensorwise;
  expect_problem(s, "training.fp8_recipe", "applies to FP8 training");
  s.training.precision = Precision::kFp8;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.training.fp8_recipe = Fp8Recipe::kMxfp8;
  expect_problem(s, "training.fp8_recipe", "runs on Blackwell (sm_100 and newer) only");
  s.training.fp8_recipe = Fp8Recipe::kBlockwise;
  expect_problem(s, "training.fp8_recipe", "needs efficiency.gemm_fp8_block in the hardware profile");
  s.hardware.efficiency.gemm_fp8_block = 0.5;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.training.exp_avg_dtype = DType::kFp8Block;
  expect_problem(s, "training.exp_avg_dtype", "fp8_block is a GEMM operand type");
}

// --fp8-param-gather: FP8 weights need FP8 training and the distributed optimizer (Megatron's
// validate_args asserts the latter).
void shard_optimizer(Scenario& s, bool on) {
  s.parallel.use_distributed_optimizer = on;
  s.parallel.data_parallel_sharding_strategy = on ? DpSharding::kOptim : DpSharding::kNoShard;
}
void expect_valid(const Scenario& s) {
  for (const auto& p : validate_scenario(s)) ADD_FAILURE() << p.key << ": " << p.message;
}

TEST(Validate, Fp8ParamGatherRules) {
  Scenario s = base();
  shard_optimizer(s, true);
  s.training.fp8_param_gather = true;
  expect_problem(s, "training.fp8_param_gather", "applies to FP8 training");
  s.training.precision = Precision::kFp8;
  expect_valid(s);
  shard_optimizer(s, false);
  expect_problem(s, "training.fp8_param_gather", "gathers FP8 weights in the distributed optimizer");
}

// store_param_remainders: fp32 master weights split against bf16 weights, in a sharded optimizer,
// without FP8 weights and, in FP8, with the delayed recipe only (Megatron keeps the master weights
// itself for current scaling).
TEST(Validate, ParamRemainderRules) {
  Scenario s = base();
  shard_optimizer(s, true);
  s.training.store_param_remainders = true;
  expect_valid(s);
  s.training.main_params_dtype = DType::kBf16;
  expect_problem(s, "training.store_param_remainders", "needs training.main_params_dtype fp32");
  s.training.main_params_dtype = DType::kFp32;
  s.training.precision = Precision::kFp8;
  s.training.fp8_param_gather = true;
  expect_problem(s, "training.store_param_remainders", "fp8_param_gather keeps FP8 weights");
  s.training.fp8_param_gather = false;
  s.training.fp8_recipe = Fp8Recipe::kTensorwise;
  expect_problem(s, "training.store_param_remainders", "needs the delayed recipe");
  s.training.fp8_recipe = Fp8Recipe::kDelayed;
  expect_valid(s);
  shard_optimizer(s, false);
  expect_problem(s, "training.store_param_remainders", "a sharded optimizer's storage");
}

// Unfused attention cannot run context parallelism (TE's get_attention_backend disables it
// under CP; Megatron's local DotProductAttention asserts context_parallel_size == 1).
TEST(Validate, UnfusedAttentionRefusesContextParallelism) {
  Scenario s = base();
  s.training.attention_backend = AttentionBackend::kUnfused;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.parallel.context_parallel_size = 2;
  s.num_gpus *= 2;
  expect_problem(s, "training.attention_backend", "attention_backend unfused cannot split the sequence");
  s.training.attention_backend = AttentionBackend::kFused;
  EXPECT_TRUE(validate_scenario(s).empty());
}

// FlashAttention-2 runs CP and packed documents like the fused kernel, and needs the
// profile's measured FlashAttention-2 terms.
TEST(Validate, FlashAttention2NeedsItsProfileTerms) {
  Scenario s = base();
  s.training.attention_backend = AttentionBackend::kFlash2;
  s.hardware.efficiency.attention_flash2_fwd = 0.4;
  s.hardware.efficiency.attention_flash2_bwd = 0;
  expect_problem(s, "training.attention_backend",
                 "attention_backend flash2 needs efficiency.attention_flash2_fwd and _bwd");
  s.hardware.efficiency.attention_flash2_bwd = 0.3;
  s.parallel.context_parallel_size = 2;
  s.num_gpus *= 2;
  s.training.document_length = 256;
  EXPECT_TRUE(validate_scenario(s).empty());
}

TEST(Validate, PackedDocumentRules) {
  Scenario s = base();
  s.training.document_length = s.training.seq_length + 1;
  expect_problem(s, "training.document_length", "must be between 0 (one document per sequence) and seq_length");
  s.training.document_length = 256;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.training.attention_backend = AttentionBackend::kUnfused;
  expect_problem(s, "training.document_length", "attention_backend unfused masks the whole sequence");
  s.training.attention_backend = AttentionBackend::kFused;
  s.parallel.context_parallel_size = 2;
  s.num_gpus *= 2;
  s.training.document_length = 3;
  expect_problem(s, "training.document_length", "must be at least 2 * context_parallel_size (4)");
}

TEST(Validate, LoraRules) {
  Scenario s = base();
  s.training.lora_rank = 16;
  expect_problem(s, "training.lora_rank", "lora_rank applies to peft: lora only");
  s.training.peft = Peft::kLora;
  EXPECT_TRUE(validate_scenario(s).empty());
  s.training.lora_rank = 0;
  expect_problem(s, "training.lora_rank", "peft lora needs lora_rank > 0");
  s.training.lora_rank = 3;
  s.parallel.tensor_model_parallel_size = 2;
  expect_problem(s, "training.lora_rank", "must be a multiple of tensor_model_parallel_size (2)");
  s.parallel.tensor_model_parallel_size = 1;
  s.training.lora_rank = 16;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  expect_problem(s, "parallel.data_parallel_sharding_strategy", "LoRA with Megatron-FSDP sharding");
}

TEST(Validate, MlaUpProjRecomputeNeedsMla) {
  Scenario s = base();
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeMlaUpProj;
  expect_problem(s, "parallel.recompute_modules", "mla_up_proj in recompute_modules is only supported with multi_latent_attention");
}

// The loader shows a layout problem at the position of its key in the file.
TEST(Validate, RenderedAtTheKeyInTheFile) {
  EXPECT_EQ(error_of(load_text(base_with("global_batch_size: 16", "global_batch_size: 6"))),
            "test.yaml:13:3: training.global_batch_size: global_batch_size (6) is not divisible by micro_batch_size "
            "(1) times data_parallel_size (4)");
  EXPECT_EQ(error_of(load_text(base_with("tensor_model_parallel_size: 2", "tensor_model_parallel_size: 3"))),
            "test.yaml:15:3: parallel.tensor_model_parallel_size: world size (8) is not divisible by "
            "tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size (3 * 1 * 1 = 3) "
            "(and 2 more: model.num_attention_heads, model.num_query_groups)");
  // A derived key is shown at the key it derives from: etp = tp here.
  EXPECT_THAT(error_of(load_text(base_with("  num_attention_heads: 16", "  num_attention_heads: 16\n  num_experts: 8"),
                                 {"expert_model_parallel_size=8"})),
              testing::StartsWith("--set expert_model_parallel_size=8: parallel.expert_model_parallel_size: world size "
                                  "(8) is not divisible by "
                                  "expert_tensor_parallel_size * expert_model_parallel_size"));
}

}  // namespace
}  // namespace lcm::io::test
