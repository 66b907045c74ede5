// Megatron-LM import: command-line splitting, model_config.yaml reading, flag mapping with
// Megatron's defaults, notes for flags lcm does not model, and errors at the flag.
#include <fstream>
#include <sstream>

#include "io_test_util.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::io::test {
namespace {

using testing::HasSubstr;
using testing::StartsWith;

HardwareSpec h100() {
  auto r = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  EXPECT_TRUE(r.ok());
  return r.ok() ? r.value() : HardwareSpec{};
}

// A small valid GPT job on 8 GPUs; tests append flags.
const std::string kMinimal =
    "--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
    "--max-position-embeddings 1024 --micro-batch-size 1 --bf16 ";

Result<MegatronImportReport> import_line(const std::string& line, int gpus = 8) {
  auto flags = parse_megatron_command_line(line, "run.sh");
  if (!flags.ok()) return flags.error();
  return import_megatron_report(flags.value(), gpus, h100(), "job");
}

Scenario imported(const std::string& line, int gpus = 8) {
  auto r = import_line(line, gpus);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.value().scenario : Scenario{};
}

std::string import_error(const std::string& line, int gpus = 8) {
  auto r = import_line(line, gpus);
  EXPECT_FALSE(r.ok()) << "expected an import error for: " << line;
  return r.ok() ? std::string() : r.error().str();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- command line -------------------------------------------------------------------------

TEST(MegatronCommandLine, LauncherQuotesContinuationsAndEquals) {
  const std::string text =
      "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \\\n"
      "    --tensor-model-parallel-size=2 \\\n"
      "    --data-path '/data/my corpus' \"/data/b\" \\\n"
      "    --recompute-modules core_attn moe_act  # trailing comment\n"
      "    --termination-id -1 --bf16\n";
  auto r = parse_megatron_command_line(text, "run.sh");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const auto& f = r.value();
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].name, "tensor-model-parallel-size");
  EXPECT_EQ(f[0].value, "2");
  EXPECT_EQ(f[0].line, 2);
  EXPECT_EQ(f[0].column, 5);
  EXPECT_EQ(f[1].name, "data-path");
  EXPECT_EQ(f[1].value, "/data/my corpus /data/b");
  EXPECT_EQ(f[2].value, "core_attn moe_act");
  EXPECT_EQ(f[3].value, "-1");
  EXPECT_EQ(f[4].name, "bf16");
  EXPECT_EQ(f[4].value, "");
  EXPECT_EQ(f[4].line, 5);
}

TEST(MegatronCommandLine, PythonPrefixAndBareFlags) {
  auto r = parse_megatron_command_line("python pretrain_gpt.py --swiglu --num-layers 2", "cmd");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_EQ(r.value()[0].name, "swiglu");
  auto bare = parse_megatron_command_line("--num-layers 2 --swiglu", "cmd");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare.value().size(), 2u);
}

TEST(MegatronCommandLine, Errors) {
  EXPECT_EQ(parse_megatron_command_line("--num-layers '2", "cmd").error().str(), "cmd:1:14: unterminated single quote");
  EXPECT_THAT(parse_megatron_command_line("srun something", "cmd").error().str(),
              StartsWith("cmd:1:1: expected Megatron flags (--flag value ...)"));
  EXPECT_EQ(parse_megatron_command_line("--bf16 yes", "cmd").error().str(),
            "cmd:1:8: unexpected argument 'yes' (not a --flag, and --bf16 takes no value)");
}

TEST(MegatronModelConfig, ReadsModelArgsWithPositionsAndMergeKeys) {
  const std::string text =
      "ENV_VARS:\n  NCCL_ALGO: Ring\nBASE: &BASE\n  --num-layers: 2\n  --log-interval: 1\n"
      "MODEL_ARGS:\n  <<: *BASE\n  --num-layers: 4\n  --use-distributed-optimizer: true\n"
      "  --recompute-modules: [core_attn moe_act]\n  --cp-comm-type: [p2p, a2a]\n";
  auto r = parse_megatron_model_config(text, "model_config.yaml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const auto& f = r.value();
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0].name, "num-layers");  // merged first, the explicit one later wins
  EXPECT_EQ(f[0].value, "2");
  EXPECT_EQ(f[2].name, "num-layers");
  EXPECT_EQ(f[2].value, "4");
  EXPECT_EQ(f[2].line, 8);
  EXPECT_EQ(f[2].column, 3);
  EXPECT_EQ(f[3].value, "true");
  EXPECT_EQ(f[4].value, "core_attn moe_act");
  EXPECT_EQ(f[5].value, "p2p a2a");
  EXPECT_EQ(parse_megatron_model_config("MODEL_ARGS:\n  num-layers: 2\n", "m.yaml").error().str(),
            "m.yaml:2:3: num-layers: MODEL_ARGS keys are Megatron flags spelled with leading dashes, e.g. --num-layers");
  EXPECT_THAT(parse_megatron_model_config("ENV_VARS: {}\n", "m.yaml").error().str(), HasSubstr("no MODEL_ARGS block"));
}

// Transformer Engine's attention environment (NVTE_FUSED_ATTN, NVTE_FLASH_ATTN) under
// --attention-backend auto: a functional test's ENV_VARS and a script's assignments (`export`,
// a prefix of the launcher, the last one winning; comments are not assignments). NVTE_FUSED_ATTN=0
// runs the flash-attn package (flash2), both 0 TE's unfused kernels; an explicit backend sets the
// variables itself and wins.
TEST(MegatronImport, AttentionEnvironmentPicksTheBackend) {
  auto yaml = [](const std::string& env, const std::string& more = "") {
    auto f =
        parse_megatron_model_config(env +
                                        "MODEL_ARGS:\n  --num-layers: 4\n  --hidden-size: 512\n"
                                        "  --num-attention-heads: 8\n  --seq-length: 1024\n"
                                        "  --max-position-embeddings: 1024\n  --micro-batch-size: 1\n  --bf16: true\n" +
                                        more,
                                    "model_config.yaml");
    EXPECT_TRUE(f.ok()) << f.error().str();
    return import_megatron_report(f.value(), 8, h100(), "job");
  };
  const auto backend = [&](const std::string& env) {
    const auto r = yaml(env);
    EXPECT_TRUE(r.ok()) << env << ": " << (r.ok() ? "" : r.error().str());
    return r.ok() ? r.value().scenario.training.attention_backend : AttentionBackend::kFused;
  };
  EXPECT_EQ(backend("ENV_VARS:\n  NVTE_FUSED_ATTN: 0\n  NCCL_ALGO: Ring\n"), AttentionBackend::kFlash2);
  EXPECT_EQ(backend("ENV_VARS:\n  NVTE_FUSED_ATTN: 1\n"), AttentionBackend::kFused);
  EXPECT_EQ(backend("ENV_VARS:\n  NVTE_FUSED_ATTN: 0\n  NVTE_FLASH_ATTN: 0\n"), AttentionBackend::kUnfused);
  // A rule the environment's backend breaks is reported at the variable.
  const auto cp = yaml("ENV_VARS:\n  NVTE_FUSED_ATTN: 0\n  NVTE_FLASH_ATTN: 0\n", "  --context-parallel-size: 2\n");
  ASSERT_FALSE(cp.ok());
  EXPECT_THAT(cp.error().str(), HasSubstr("model_config.yaml:2:3: NVTE_FUSED_ATTN=0: "));
  const std::string launch = "torchrun --nproc-per-node 8 pretrain_gpt.py " + kMinimal;
  EXPECT_EQ(imported("NVTE_FUSED_ATTN=0 " + launch).training.attention_backend, AttentionBackend::kFlash2);
  EXPECT_EQ(imported("export NVTE_FUSED_ATTN=\"0\"\n" + launch).training.attention_backend, AttentionBackend::kFlash2);
  EXPECT_EQ(imported("export NVTE_FUSED_ATTN=0\nexport NVTE_FUSED_ATTN=1\n" + launch).training.attention_backend,
            AttentionBackend::kFused);
  EXPECT_EQ(imported("# NVTE_FUSED_ATTN=0\n" + launch).training.attention_backend, AttentionBackend::kFused);
  EXPECT_EQ(imported("MY_NVTE_FUSED_ATTN=0 " + launch).training.attention_backend, AttentionBackend::kFused);
  EXPECT_EQ(imported("NVTE_FUSED_ATTN=0 " + launch + "--attention-backend fused").training.attention_backend,
            AttentionBackend::kFused);
}

// ---- mapping and Megatron defaults ---------------------------------------------------------

TEST(MegatronImport, MegatronDefaultsWhenFlagsAreAbsent) {
  const Scenario s = imported(kMinimal);
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.num_layers, 4);
  EXPECT_EQ(m.ffn_hidden_size, 2048);  // 4 * hidden
  EXPECT_EQ(m.num_query_groups, 8);    // no --group-query-attention: MHA
  EXPECT_EQ(m.kv_channels, 64);        // hidden / heads
  EXPECT_EQ(m.vocab_size, 50257);      // pretrain_gpt's default GPT2BPETokenizer
  EXPECT_EQ(m.make_vocab_size_divisible_by, 128);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_TRUE(m.add_qkv_bias);
  EXPECT_FALSE(m.untie_embeddings_and_output_weights);
  EXPECT_FALSE(m.swiglu);
  EXPECT_EQ(m.normalization, Normalization::kLayerNorm);
  EXPECT_EQ(m.position_embedding_type, PositionEmbedding::kLearnedAbsolute);
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_DOUBLE_EQ(m.rotary_base, 10000);
  EXPECT_EQ(m.moe_token_dispatcher_type, Dispatcher::kAllGather);  // TransformerConfig default
  EXPECT_EQ(s.training.global_batch_size, 8);                      // micro_batch_size * dp
  EXPECT_EQ(s.training.precision, Precision::kBf16);
  EXPECT_EQ(s.training.attention_backend, AttentionBackend::kFused);  // AttnBackend.auto
  EXPECT_TRUE(s.training.grad_reduce_in_fp32);
  EXPECT_EQ(s.parallel.tensor_model_parallel_size, 1);
  EXPECT_EQ(s.parallel.expert_tensor_parallel_size, 1);
  EXPECT_EQ(s.parallel.recompute_granularity, RecomputeGranularity::kNone);
  EXPECT_EQ(s.parallel.data_parallel_sharding_strategy, DpSharding::kNoShard);
  EXPECT_EQ(s.num_gpus, 8);
  EXPECT_EQ(s.name, "job");
}

TEST(MegatronImport, LlamaStyleModel) {
  const Scenario s = imported(
      kMinimal + "--swiglu --disable-bias-linear --normalization RMSNorm --group-query-attention "
                 "--num-query-groups 2 --position-embedding-type rope --rotary-base 500000 --use-rope-scaling "
                 "--untie-embeddings-and-output-weights --vocab-size 128256 --qk-layernorm --kv-channels 128");
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.ffn_hidden_size, 1344);  // int(4h * 2/3 / 64) * 64 with --swiglu
  EXPECT_TRUE(m.swiglu);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.add_qkv_bias);
  EXPECT_EQ(m.normalization, Normalization::kRMSNorm);
  EXPECT_EQ(m.num_query_groups, 2);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_TRUE(m.untie_embeddings_and_output_weights);
  EXPECT_TRUE(m.qk_layernorm);
  EXPECT_EQ(m.position_embedding_type, PositionEmbedding::kRope);
  EXPECT_DOUBLE_EQ(m.rotary_base, 500000);
  EXPECT_EQ(m.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 8.0);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(MegatronImport, NumQueryGroupsNeedsGroupQueryAttention) {
  auto r = import_line(kMinimal + "--num-query-groups 2");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().scenario.model.num_query_groups, 8);
  EXPECT_THAT(r.value().notes, testing::Contains(HasSubstr("--num-query-groups is ignored without --group-query-attention")));
  EXPECT_EQ(imported(kMinimal + "--group-query-attention").model.num_query_groups, 1);  // Megatron default 1
}

TEST(MegatronImport, MoeAndMlaWithMegatronDefaults) {
  const Scenario s = imported(
      kMinimal + "--num-experts 8 --moe-router-topk 2 --moe-layer-freq ([0]*1+[1]*3) --moe-ffn-hidden-size 256 "
                 "--moe-shared-expert-intermediate-size 512 --moe-token-dispatcher-type alltoall "
                 "--moe-router-score-function sigmoid --moe-router-num-groups 4 --moe-router-group-topk 2 "
                 "--moe-router-enable-expert-bias --expert-model-parallel-size 8 --multi-latent-attention "
                 "--position-embedding-type rope --mtp-num-layers 1 --moe-expert-capacity-factor 1.5",
      8);
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.moe_layer_pattern, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(m.moe_ffn_hidden_size, 256);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 512);
  EXPECT_EQ(m.moe_token_dispatcher_type, Dispatcher::kAllToAll);
  EXPECT_EQ(m.moe_router_score_function, RouterScore::kSigmoid);
  EXPECT_EQ(m.moe_router_num_groups, 4);
  EXPECT_EQ(m.moe_router_group_topk, 2);
  EXPECT_TRUE(m.moe_router_enable_expert_bias);
  EXPECT_DOUBLE_EQ(m.moe_expert_capacity_factor, 1.5);
  EXPECT_TRUE(m.multi_latent_attention);
  EXPECT_EQ(m.q_lora_rank, 0);  // Megatron argparse defaults: q_lora_rank None
  EXPECT_EQ(m.kv_lora_rank, 32);
  EXPECT_EQ(m.qk_head_dim, 128);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.rope_scaling.type, RopeScalingType::kYarn);  // MLATransformerConfig rope_type yarn
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_EQ(s.parallel.expert_model_parallel_size, 8);
  EXPECT_EQ(imported(kMinimal + "--num-experts 4 --moe-layer-freq 2").model.moe_layer_pattern,
            (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(MegatronImport, Vocabulary) {
  EXPECT_EQ(imported(kMinimal + "--tokenizer-type NullTokenizer --vocab-size 131073").model.vocab_size, 131073);
  EXPECT_EQ(imported(kMinimal + "--tokenizer-type TikTokenizer --tokenizer-model /t.json").model.vocab_size, 131072);
  EXPECT_EQ(imported(kMinimal + "--tokenizer-type Llama2Tokenizer --tokenizer-model /t.model").model.vocab_size, 32000);
  EXPECT_EQ(imported(kMinimal + "--tokenizer-type GPTSentencePieceTokenizer --tokenizer-model /u/nemotron_2_256k.model")
                .model.vocab_size,
            256000);
  const Scenario padded = imported(kMinimal + "--padded-vocab-size 201088");
  EXPECT_EQ(padded.model.vocab_size, 201088);
  EXPECT_EQ(padded.model.make_vocab_size_divisible_by, 1);
  EXPECT_EQ(import_error(kMinimal + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model Qwen/Qwen3-8B"),
            "run.sh:1:135: --tokenizer-type: the vocabulary size of HuggingFaceTokenizer comes from its model file "
            "(Qwen3-8B); add --vocab-size N");
  EXPECT_THAT(import_error(kMinimal + "--tokenizer-type NullTokenizer"), HasSubstr("add --vocab-size N"));
}

TEST(MegatronImport, PrecisionAndAttentionBackend) {
  EXPECT_EQ(imported(kMinimal + "--fp8-format hybrid").training.precision, Precision::kFp8);
  EXPECT_EQ(imported(kMinimal + "--fp8-format hybrid").training.fp8_recipe, Fp8Recipe::kDelayed);  // Megatron's default
  // h100-sxm carries the block-scaled GEMM term measured on an H100 (session 29): the recipe imports.
  EXPECT_EQ(imported(kMinimal + "--fp8-format hybrid --fp8-recipe blockwise").training.fp8_recipe,
            Fp8Recipe::kBlockwise);
  // A profile without that term (h200-sxm.yaml, the uncalibrated starting profile) refuses it.
  {
    auto flags = parse_megatron_command_line(kMinimal + "--fp8-format hybrid --fp8-recipe blockwise", "run.sh");
    ASSERT_TRUE(flags.ok());
    auto h200 = load_hardware_profile(profile_dir() + "/h200-sxm.yaml");
    ASSERT_TRUE(h200.ok());
    ASSERT_EQ(h200.value().efficiency.gemm_fp8_block, 0);
    auto r = import_megatron_report(flags.value(), 8, h200.value(), "job");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().str(),
                HasSubstr("--fp8-recipe: fp8_recipe blockwise needs efficiency.gemm_fp8_block in the hardware profile"));
  }
  EXPECT_THAT(import_error(kMinimal + "--fp8-format hybrid --fp8-recipe mxfp8"), HasSubstr("runs on Blackwell"));
  EXPECT_EQ(imported(kMinimal + "--fp8-format e4m3 --fp8-recipe tensorwise").training.fp8_recipe, Fp8Recipe::kTensorwise);
  // Without --fp8-format Megatron ignores the recipe, and so does the import.
  EXPECT_EQ(imported(kMinimal + "--fp8-recipe blockwise").training.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_THAT(import_error(kMinimal + "--fp8-format hybrid --fp8-recipe fp4"),
              HasSubstr("--fp8-recipe: expected delayed, tensorwise, blockwise or mxfp8, got 'fp4'"));
  EXPECT_EQ(imported(kMinimal + "--attention-backend unfused").training.attention_backend, AttentionBackend::kUnfused);
  EXPECT_EQ(imported(kMinimal + "--transformer-impl local").training.attention_backend, AttentionBackend::kUnfused);
  EXPECT_EQ(imported(kMinimal + "--attention-backend flash").training.attention_backend, AttentionBackend::kFlash2);
  EXPECT_EQ(imported(kMinimal + "--attention-backend fused").training.attention_backend, AttentionBackend::kFused);
  EXPECT_FALSE(imported(kMinimal + "--grad-reduce-in-bf16").training.grad_reduce_in_fp32);
  const Scenario pa = imported(kMinimal + "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16");
  EXPECT_EQ(pa.training.exp_avg_dtype, DType::kBf16);
  EXPECT_EQ(pa.training.main_params_dtype, DType::kFp32);
  EXPECT_THAT(import_error(kMinimal + "--exp-avg-dtype bf16"),
              HasSubstr("exp-avg-dtype can only be fp32 when not using precision-aware optimizer"));
  std::string fp32 = kMinimal;
  fp32.erase(fp32.find("--bf16"));
  EXPECT_THAT(import_error(fp32), HasSubstr("--bf16: Megatron trains in fp32 without --bf16 or --fp16"));
  auto fp16 = import_line(fp32 + "--fp16");
  ASSERT_TRUE(fp16.ok());
  EXPECT_THAT(fp16.value().notes, testing::Contains(HasSubstr("--fp16 modelled as bf16")));
}

TEST(MegatronImport, CrossEntropyFusion) {
  const Scenario off = imported(kMinimal);
  EXPECT_FALSE(off.training.cross_entropy_loss_fusion);  // Megatron's default
  EXPECT_EQ(off.training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kNative);
  const Scenario native = imported(kMinimal + "--cross-entropy-loss-fusion");
  EXPECT_TRUE(native.training.cross_entropy_loss_fusion);
  EXPECT_EQ(native.training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kNative);
  const Scenario te = imported(kMinimal + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te");
  EXPECT_EQ(te.training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe);
  EXPECT_THAT(import_error(kMinimal + "--cross-entropy-fusion-impl triton"),
              HasSubstr("--cross-entropy-fusion-impl: expected native or te, got 'triton'"));
}

TEST(MegatronImport, Fp8ParamGather) {
  EXPECT_FALSE(imported(kMinimal).training.fp8_param_gather);  // Megatron's default
  const Scenario s = imported(kMinimal + "--fp8-format hybrid --fp8-param-gather --use-distributed-optimizer");
  EXPECT_TRUE(s.training.fp8_param_gather);
  EXPECT_EQ(s.training.precision, Precision::kFp8);
}

// The precision-aware optimizer with fp32 master weights stores them as 16-bit remainders
// (Megatron's OptimizerConfig.store_param_remainders, on by default; Transformer Engine >= 2.1),
// except where Megatron keeps them itself: FP8 weights or a current-scaling recipe.
TEST(MegatronImport, PrecisionAwareOptimizerStoresParamRemainders) {
  EXPECT_FALSE(imported(kMinimal + "--use-distributed-optimizer").training.store_param_remainders);
  const std::string aware = kMinimal + "--use-distributed-optimizer --use-precision-aware-optimizer ";
  EXPECT_TRUE(imported(aware).training.store_param_remainders);
  EXPECT_TRUE(imported(aware + "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16").training.store_param_remainders);
  EXPECT_TRUE(imported(aware + "--fp8-format hybrid").training.store_param_remainders);  // delayed
  EXPECT_FALSE(imported(aware + "--fp8-format hybrid --fp8-recipe tensorwise").training.store_param_remainders);
  EXPECT_FALSE(imported(aware + "--fp8-format hybrid --fp8-param-gather").training.store_param_remainders);
}

TEST(MegatronImport, ParallelLayoutAndSharding) {
  const Scenario s = imported(kMinimal +
                                  "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 "
                                  "--num-virtual-stages-per-pipeline-rank 2 --context-parallel-size 2 --cp-comm-type a2a "
                                  "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                                  "--use-tp-pp-dp-mapping --global-batch-size 4",
                              16);
  const ParallelSpec& p = s.parallel;
  EXPECT_EQ(p.tensor_model_parallel_size, 2);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.num_layers_per_virtual_pipeline_stage, 1);  // 4 layers / pp 2 / 2 virtual stages
  EXPECT_EQ(p.context_parallel_size, 2);
  EXPECT_EQ(p.cp_comm_type, CpCommType::kA2A);
  EXPECT_EQ(p.expert_tensor_parallel_size, 2);  // defaults to tp
  EXPECT_TRUE(p.use_distributed_optimizer);
  EXPECT_EQ(p.data_parallel_sharding_strategy, DpSharding::kOptim);
  EXPECT_TRUE(p.overlap_grad_reduce && p.overlap_param_gather);
  EXPECT_EQ(rank_order_to_string(p.order), "tp-cp-ep-pp-dp");
  const Scenario fsdp = imported(kMinimal + "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params");
  EXPECT_EQ(fsdp.parallel.data_parallel_sharding_strategy, DpSharding::kOptimGradsParams);
  EXPECT_TRUE(fsdp.parallel.use_distributed_optimizer);  // Megatron-FSDP v1 runs the DistributedOptimizer
  const Scenario uneven = imported(kMinimal + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 "
                                              "--decoder-last-pipeline-num-layers 1 --num-layers 5");
  EXPECT_EQ(uneven.parallel.num_layers_in_first_pipeline_stage, 2);
  EXPECT_EQ(uneven.parallel.num_layers_in_last_pipeline_stage, 1);
}

TEST(MegatronImport, Recompute) {
  const Scenario full = imported(kMinimal + "--recompute-granularity full --recompute-method block --recompute-num-layers 2");
  EXPECT_EQ(full.parallel.recompute_granularity, RecomputeGranularity::kFull);
  EXPECT_EQ(full.parallel.recompute_method, RecomputeMethod::kBlock);
  EXPECT_EQ(full.parallel.recompute_num_layers, 2);
  const Scenario sel = imported(kMinimal + "--recompute-activations");
  EXPECT_EQ(sel.parallel.recompute_granularity, RecomputeGranularity::kSelective);
  EXPECT_EQ(sel.parallel.recompute_modules, static_cast<uint32_t>(kRecomputeCoreAttn));
  const Scenario mods = imported(kMinimal + "--recompute-granularity selective --recompute-modules [layernorm mlp]");
  EXPECT_EQ(mods.parallel.recompute_modules, static_cast<uint32_t>(kRecomputeLayernorm | kRecomputeMlp));
  EXPECT_THAT(import_error(kMinimal + "--recompute-granularity full --recompute-num-layers 1"),
              HasSubstr("recompute_method must be \"block\" or \"uniform\""));
  EXPECT_THAT(import_error(kMinimal + "--recompute-granularity selective --recompute-method uniform"),
              HasSubstr("recompute method is not yet supported for selective recomputing granularity"));
}

TEST(MegatronImport, PipelineLayoutIsModelledAsWritten) {
  // First 2, middle 3, last 2: the layout's own stages, no note.
  auto exact = import_line(kMinimal + "--num-layers 10 --pipeline-model-parallel-size 4 "
                                      "--pipeline-model-parallel-layout Ett|ttt|ttt|ttL");
  ASSERT_TRUE(exact.ok()) << exact.error().str();
  EXPECT_EQ(exact.value().scenario.parallel.pipeline_layout, (std::vector<std::string>{"Ett", "ttt", "ttt", "ttL"}));
  EXPECT_EQ(exact.value().scenario.parallel.num_layers_in_first_pipeline_stage, 0);
  EXPECT_TRUE(exact.value().notes.empty());
  // Interleaved: 4 stages on 2 ranks = 2 virtual stages per rank (micro-batches a multiple
  // of pp: 8 / (1 x dp 4) = 2).
  auto vp = import_line(kMinimal + "--num-layers 8 --pipeline-model-parallel-size 2 --global-batch-size 8 "
                                   "--pipeline-model-parallel-layout E(tt|)*3ttL");
  ASSERT_TRUE(vp.ok()) << vp.error().str();
  EXPECT_EQ(vp.value().scenario.parallel.pipeline_layout, (std::vector<std::string>{"Ett", "tt", "tt", "ttL"}));
  EXPECT_EQ(derive_mesh(vp.value().scenario).vp, 2);
  // Uneven virtual stages with MTP (the DeepSeek-V3 proxy's): 8 stages on 4 ranks, rank r
  // holding stages r and r + 4: [2+2, 2+2, 2+1, 2+1] layers, the MTP layer on the last rank.
  auto uneven = import_line(kMinimal + "--num-layers 14 --pipeline-model-parallel-size 4 --global-batch-size 8 "
                                       "--pipeline-model-parallel-layout Et*2|(tt|)*5t|tmL --mtp-num-layers 1 "
                                       "--position-embedding-type rope");
  ASSERT_TRUE(uneven.ok()) << uneven.error().str();
  const Scenario& u = uneven.value().scenario;
  EXPECT_EQ(u.parallel.pipeline_layout,
            (std::vector<std::string>{"Ett", "tt", "tt", "tt", "tt", "tt", "t", "tmL"}));
  const Mesh m = derive_mesh(u);
  EXPECT_EQ(m.vp, 2);
  const std::vector<StageLayers> st = stage_layers(u, m);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[0].num_layers, 4);
  EXPECT_EQ(st[1].num_layers, 4);
  EXPECT_EQ(st[2].num_layers, 3);
  EXPECT_EQ(st[3].num_layers, 3);
  EXPECT_EQ(st[3].num_mtp_layers, 1);
  EXPECT_EQ(stage_layer_indices(u, m)[2], (std::vector<int>{4, 5, 12}));  // stages 2 and 6
  EXPECT_THAT(uneven.value().notes, testing::Not(testing::Contains(HasSubstr("pipeline-model-parallel-layout"))));
  // --decoder-first/last-pipeline-num-layers with --num-virtual-stages-per-pipeline-rank:
  // each rank's layers split evenly over its chunks (Megatron's get_num_layers_to_build).
  auto uv = import_line(kMinimal + "--num-layers 12 --pipeline-model-parallel-size 4 --global-batch-size 8 "
                                   "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2 "
                                   "--num-virtual-stages-per-pipeline-rank 2");
  ASSERT_TRUE(uv.ok()) << uv.error().str();
  EXPECT_EQ(uv.value().scenario.parallel.pipeline_layout,
            (std::vector<std::string>{"Et", "tt", "tt", "t", "t", "tt", "tt", "tL"}));
  EXPECT_THAT(import_error(kMinimal + "--num-layers 12 --pipeline-model-parallel-size 4 "
                                      "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 3 "
                                      "--num-virtual-stages-per-pipeline-rank 2"),
              HasSubstr("must split evenly into 2 virtual stages"));
  // Megatron's interleaved schedule raises unless the micro-batches are a multiple of pp.
  EXPECT_THAT(import_error(kMinimal + "--num-layers 8 --pipeline-model-parallel-size 2 "
                                      "--pipeline-model-parallel-layout E(tt|)*3ttL"),
              HasSubstr("the number of micro-batches (1 = global_batch_size 4 / (micro_batch_size 1 * "
                        "data_parallel_size 4)) must be a multiple of pipeline_model_parallel_size (2)"));
  // --microbatch-group-size-per-virtual-pipeline-stage N: pp <= N <= micro-batches, and the
  // remainder 0 or >= pp. 5 micro-batches (20 / dp 4) on pp 2: N 3 leaves 2, N 4 leaves 1.
  const std::string grouped = kMinimal + "--num-layers 8 --pipeline-model-parallel-size 2 --global-batch-size 20 "
                                         "--pipeline-model-parallel-layout E(tt|)*3ttL ";
  auto g3 = import_line(grouped + "--microbatch-group-size-per-virtual-pipeline-stage 3");
  ASSERT_TRUE(g3.ok()) << g3.error().str();
  EXPECT_EQ(g3.value().scenario.parallel.microbatch_group_size_per_vp_stage, 3);
  EXPECT_THAT(import_error(grouped + "--microbatch-group-size-per-virtual-pipeline-stage 4"),
              HasSubstr("The remainder of M (5 micro-batches) divided by N (4, the micro-batches per virtual "
                        "pipeline stage) should be 0, or larger than or equal to the pipeline-parallel size (2), but "
                        "it is 1"));
  EXPECT_THAT(import_error(grouped + "--microbatch-group-size-per-virtual-pipeline-stage 6"),
              HasSubstr("should range in [PP=2, M=5]"));
  EXPECT_THAT(import_error(kMinimal + "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et|tL"),
              HasSubstr("the layout places 2 transformer layers (t) but num_layers is 4"));
  EXPECT_THAT(import_error(kMinimal + "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et|t+tL"),
              HasSubstr("'+' is not a layer character"));
}

// --window-size L,R and --window-attn-skip-freq N map to the model's sliding window; only
// causal windows (R = 0) and an integer N are modelled, and they are no longer "ignored".
TEST(MegatronImport, SlidingWindowAttention) {
  auto r = import_line(kMinimal + "--window-size 127,0 --window-attn-skip-freq 2");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().scenario.model.window_size, 127);
  EXPECT_EQ(r.value().scenario.model.window_attn_skip_freq, 2);
  EXPECT_TRUE(r.value().notes.empty());
  EXPECT_THAT(r.value().ignored_flags, testing::Not(testing::Contains("--window-size")));
  EXPECT_EQ(imported(kMinimal + "--window-size -1,0").model.window_size, 0);  // Megatron: no window
  EXPECT_THAT(import_error(kMinimal + "--window-size 127,4"),
              HasSubstr("--window-size: only causal windows (R = 0) are modelled, got 127,4"));
  EXPECT_THAT(import_error(kMinimal + "--window-size 127"), HasSubstr("--window-size: expected L,R"));
  EXPECT_THAT(import_error(kMinimal + "--window-size 128,0 --window-attn-skip-freq [1,0,1,0]"),
              HasSubstr("--window-attn-skip-freq: a per-layer pattern ('[1,0,1,0]') is not modelled"));
}

// CUDA graphs: --cuda-graph-impl and --cuda-graph-modules (or the deprecated --cuda-graph-scope,
// --enable-cuda-graph = local, --external-cuda-graph = transformer_engine, scope full_iteration =
// the impl). The local implementation captures the router and the preprocessing together.
TEST(MegatronImport, CudaGraphFlags) {
  const std::string moe = kMinimal + "--num-experts 8 --moe-router-topk 2 ";
  const Scenario te = imported(moe + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router moe_preprocess");
  EXPECT_EQ(te.parallel.cuda_graph_impl, CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(te.parallel.cuda_graph_modules, kCudaGraphMoeRouter | kCudaGraphMoePreprocess);
  const Scenario local = imported(moe + "--cuda-graph-impl local --cuda-graph-modules attn moe_router");
  EXPECT_EQ(local.parallel.cuda_graph_modules, kCudaGraphAttn | kCudaGraphMoeRouter | kCudaGraphMoePreprocess);
  const Scenario legacy = imported(kMinimal + "--enable-cuda-graph");
  EXPECT_EQ(legacy.parallel.cuda_graph_impl, CudaGraphImpl::kLocal);
  EXPECT_EQ(legacy.parallel.cuda_graph_modules, 0u);
  EXPECT_EQ(imported(kMinimal + "--external-cuda-graph --cuda-graph-scope full").parallel.cuda_graph_impl,
            CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(imported(kMinimal + "--cuda-graph-scope full_iteration").parallel.cuda_graph_impl,
            CudaGraphImpl::kFullIteration);
  EXPECT_EQ(imported(kMinimal).parallel.cuda_graph_impl, CudaGraphImpl::kNone);
  EXPECT_EQ(imported(kMinimal + "--cuda-graph-modules attn").parallel.cuda_graph_modules, 0u);  // no impl: no effect
  EXPECT_THAT(import_error(kMinimal + "--enable-cuda-graph --cuda-graph-impl local"),
              HasSubstr("Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl."));
  EXPECT_THAT(import_error(kMinimal + "--cuda-graph-impl local --cuda-graph-scope attn --cuda-graph-modules attn"),
              HasSubstr("cuda_graph_scope and cuda_graph_modules cannot be set together."));
  EXPECT_THAT(import_error(kMinimal + "--cuda-graph-impl graphs"), HasSubstr("Invalid cuda graph implementation: graphs"));
  EXPECT_THAT(import_error(kMinimal + "--cuda-graph-impl local --cuda-graph-modules full attn"),
              HasSubstr("full scope cannot be used with other scopes."));
  EXPECT_THAT(import_error(kMinimal + "--cuda-graph-impl local --cuda-graph-modules router"),
              HasSubstr("'router' is not a CUDA graph module"));
}

// --squared-relu (no gate) and --quick-geglu (gated) name the MLP's function: the gate sets the
// costs, the name is kept for exports; --swiglu with either is Megatron's assertion.
TEST(MegatronImport, ActivationFlags) {
  const Scenario sq = imported(kMinimal + "--squared-relu");
  EXPECT_FALSE(sq.model.swiglu);
  EXPECT_EQ(sq.model.activation, Activation::kSquaredRelu);
  const Scenario qg = imported(kMinimal + "--quick-geglu");
  EXPECT_TRUE(qg.model.swiglu);
  EXPECT_EQ(qg.model.activation, Activation::kQuickGelu);
  const Scenario sw = imported(kMinimal + "--swiglu");
  EXPECT_TRUE(sw.model.swiglu);
  EXPECT_EQ(sw.model.activation, Activation::kDefault);
  EXPECT_EQ(imported(kMinimal).model.activation, Activation::kDefault);
  EXPECT_THAT(import_error(kMinimal + "--swiglu --squared-relu"),
              HasSubstr("--swiglu cannot be combined with --squared-relu or --quick-geglu"));
}

TEST(MegatronImport, IgnoredNotedRejectedAndUnknownFlags) {
  auto r = import_line(kMinimal + "--lr 1e-4 --data-path $DATA --log-interval 1 --attention-output-gate --optimizer adam");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_THAT(r.value().ignored_flags, testing::IsSupersetOf({"--lr", "--data-path", "--log-interval", "--optimizer"}));
  ASSERT_EQ(r.value().notes.size(), 1u);
  EXPECT_THAT(r.value().notes[0], StartsWith("--attention-output-gate"));
  EXPECT_THAT(r.value().notes[0], HasSubstr("the attention output gate (an extra h x heads*kv_channels weight per layer) is not counted"));
  EXPECT_THAT(import_error(kMinimal + "--hybrid-layer-pattern M*M*"),
              HasSubstr("--hybrid-layer-pattern: not supported by lcm: hybrid Mamba/attention models are not modelled"));
  EXPECT_EQ(import_error(kMinimal + "--tensor-model-paralel-size 2"),
            "run.sh:1:135: --tensor-model-paralel-size: unknown Megatron-LM flag '--tensor-model-paralel-size'; did "
            "you mean '--tensor-model-parallel-size'?");
  EXPECT_THAT(import_error(kMinimal + "--tensor_model_parallel_size 2"),
              HasSubstr("did you mean '--tensor-model-parallel-size'?"));
  EXPECT_EQ(import_error(kMinimal + "--num-experts $NUM_EXPERTS"),
            "run.sh:1:135: --num-experts: value '$NUM_EXPERTS' is an unexpanded shell variable; substitute it before "
            "importing");
  EXPECT_THAT(import_error(kMinimal + "--batch-size 4"), HasSubstr("use --micro-batch-size instead"));
}

TEST(MegatronImport, MissingRequiredAndBadValues) {
  EXPECT_EQ(import_error("--hidden-size 512 --bf16"), "run.sh: --num-layers: missing --num-layers (Megatron requires it)");
  EXPECT_THAT(import_error(kMinimal + "--tensor-model-parallel-size two"),
              HasSubstr("--tensor-model-parallel-size: expected an integer in [1, 2147483647], got 'two'"));
  EXPECT_THAT(import_error(kMinimal + "--normalization LayerNorm2"), HasSubstr("expected LayerNorm or RMSNorm"));
  EXPECT_THAT(import_error(kMinimal + "--seq-length 2048"),
              HasSubstr("--max-position-embeddings: max_position_embeddings (1024) must be greater than or equal to "
                        "seq_length (2048)."));
}

TEST(MegatronImport, MaxPositionEmbeddingsTakenFromSeqLengthWithANote) {
  auto r = import_line("--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 2048 "
                       "--micro-batch-size 1 --bf16");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().scenario.model.max_position_embeddings, 2048);
  EXPECT_THAT(r.value().notes, testing::Contains(HasSubstr("--max-position-embeddings not given")));
}

TEST(MegatronImport, LayoutProblemsPointAtTheFlag) {
  EXPECT_EQ(import_error(kMinimal + "--tensor-model-parallel-size 3"),
            "run.sh:1:135: --tensor-model-parallel-size: world size (8) is not divisible by tensor_model_parallel_size "
            "* pipeline_model_parallel_size * context_parallel_size (3 * 1 * 1 = 3) (and 2 more: "
            "model.num_attention_heads, model.num_query_groups)");
  // A rule about a key that no flag set is shown with its Megatron spelling.
  EXPECT_THAT(import_error(kMinimal + "--global-batch-size 6"),
              HasSubstr("--global-batch-size: global_batch_size (6) is not divisible by micro_batch_size (1) times "
                        "data_parallel_size (8)"));
}

// ---- functional-test model_config.yaml fixtures (tests/data/megatron) ---------------------

Result<MegatronImportReport> import_fixture(const std::string& name, int gpus) {
  const std::string path = data_dir() + "/megatron/" + name + ".yaml";
  auto flags = parse_megatron_model_config(read(path), path);
  if (!flags.ok()) return flags.error();
  return import_megatron_report(flags.value(), gpus, h100(), name);
}

TEST(MegatronFixtures, EveryFixtureImports) {
  for (const auto& [name, gpus] : std::vector<std::pair<std::string, int>>{
           {"gpt3_mcore_te_tp1_pp4_vp1", 8},
           {"gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline", 8},
           {"gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split", 8},
           {"gpt3_mcore_te_tp1_pp2_cp4_a2a_p2p_nondeterministic", 8},
           {"gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed", 8},
           {"gpt3_mcore_te_tp2_pp2_ep4_etp1_mtp_resume_torch_dist_fp8", 8},
           {"mixtral_8x7b_tp1pp4ep8vpp8_release", 32},
           {"deepseekv3_proxy_flex_tp1pp4emp16etp1cp1_release", 64}}) {
    auto r = import_fixture(name, gpus);
    EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().str());
  }
}

TEST(MegatronFixtures, GptVirtualPipeline) {
  auto r = import_fixture("gpt3_mcore_te_tp1_pp4_vp1", 8);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value().scenario;
  EXPECT_EQ(s.model.num_layers, 12);
  EXPECT_EQ(s.model.hidden_size, 512);
  EXPECT_EQ(s.model.ffn_hidden_size, 2048);
  EXPECT_EQ(s.model.vocab_size, 50257);  // --vocab-file gpt2 vocab.json, GPT2BPETokenizer
  EXPECT_EQ(s.model.position_embedding_type, PositionEmbedding::kLearnedAbsolute);
  EXPECT_EQ(s.training.micro_batch_size, 4);
  EXPECT_EQ(s.training.global_batch_size, 32);
  EXPECT_EQ(s.training.attention_backend, AttentionBackend::kUnfused);
  EXPECT_EQ(s.parallel.pipeline_model_parallel_size, 4);
  EXPECT_EQ(s.parallel.num_layers_per_virtual_pipeline_stage, 1);
  EXPECT_TRUE(r.value().notes.empty());
}

TEST(MegatronFixtures, AccountForEmbeddingAndLossWithVirtualStages) {
  auto r = import_fixture("gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split", 8);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const ParallelSpec& p = r.value().scenario.parallel;
  EXPECT_TRUE(p.account_for_embedding_in_pipeline_split && p.account_for_loss_in_pipeline_split);
  EXPECT_EQ(p.num_layers_per_virtual_pipeline_stage, 1);  // (6 + 2) / 4 ranks / 2 virtual stages
}

TEST(MegatronFixtures, HierarchicalContextParallel) {
  auto r = import_fixture("gpt3_mcore_te_tp1_pp2_cp4_a2a_p2p_nondeterministic", 8);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const ParallelSpec& p = r.value().scenario.parallel;
  EXPECT_EQ(p.context_parallel_size, 4);
  EXPECT_EQ(p.cp_comm_type, CpCommType::kA2AP2P);
  EXPECT_EQ(p.hierarchical_context_parallel_sizes, (std::vector<int>{2, 2}));
}

TEST(MegatronFixtures, DeepSeekV3Proxy) {
  auto r = import_fixture("deepseekv3_proxy_flex_tp1pp4emp16etp1cp1_release", 64);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value().scenario;
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.num_layers, 14);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.vocab_size, 256000);
  EXPECT_EQ(m.make_vocab_size_divisible_by, 3232);
  EXPECT_TRUE(m.multi_latent_attention);
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.num_experts, 64);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.moe_layer_pattern, (std::vector<uint8_t>{0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 2048);
  EXPECT_EQ(m.moe_token_dispatcher_type, Dispatcher::kFlex);
  EXPECT_EQ(m.moe_router_score_function, RouterScore::kSigmoid);
  EXPECT_EQ(m.moe_router_num_groups, 8);
  EXPECT_EQ(m.moe_router_group_topk, 4);
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_EQ(m.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(s.parallel.expert_model_parallel_size, 16);
  EXPECT_EQ(s.parallel.expert_tensor_parallel_size, 1);
  EXPECT_TRUE(s.parallel.use_distributed_optimizer);
  EXPECT_THAT(r.value().notes, testing::Contains(HasSubstr("nemotron_2_256k.model")));
  EXPECT_EQ(s.parallel.pipeline_layout, (std::vector<std::string>{"Ett", "tt", "tt", "tt", "tt", "tt", "t", "tmL"}));
}

TEST(MegatronFixtures, Mixtral8x7bRelease) {
  auto r = import_fixture("mixtral_8x7b_tp1pp4ep8vpp8_release", 32);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Scenario& s = r.value().scenario;
  EXPECT_EQ(s.model.num_layers, 32);
  EXPECT_EQ(s.model.num_experts, 8);
  EXPECT_EQ(s.model.moe_router_topk, 2);
  EXPECT_EQ(s.parallel.pipeline_model_parallel_size, 4);
  EXPECT_EQ(s.parallel.expert_model_parallel_size, 8);
  EXPECT_EQ(s.parallel.num_layers_per_virtual_pipeline_stage, 1);
}

TEST(MegatronFixtures, ErrorsPointIntoTheModelConfig) {
  const std::string path = data_dir() + "/megatron/gpt3_mcore_te_tp1_pp4_vp1.yaml";
  auto flags = parse_megatron_model_config(read(path), path);
  ASSERT_TRUE(flags.ok());
  auto r = import_megatron(flags.value(), 6, h100(), "x");  // 6 GPUs: not divisible by pp 4
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), StartsWith(path + ":43:3: --pipeline-model-parallel-size: world size (6) is not divisible"));
}

}  // namespace
}  // namespace lcm::io::test

