// Parameter counts: published model sizes, hand-derived exact counts per component, and the
// per-GPU split under TP / PP / EP / ETP.
//
// Vocabulary convention: the published checks pass the unpadded Hugging Face vocabulary
// (129280, 128256, 32000, 151936). Each is already a multiple of 128, so it is also
// Megatron's padded vocabulary at TP = 1; at larger TP Megatron pads further (e.g.
// DeepSeek-V3 at TP 8: 130048), which the published numbers do not include.
#include <gtest/gtest.h>

#include "../common/test_models.hpp"

#include <numeric>

#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"

namespace lcm {
namespace {

// ---------------------------------------------------------------------------------
// Published architectures (validation/model_architectures.csv; NeMo configs).
// ---------------------------------------------------------------------------------
using testing::deepseek_v3;
using testing::llama31_70b;
using testing::llama3_8b;
using testing::mixtral_8x22b;
using testing::mixtral_8x7b;
using testing::qwen3_235b_a22b;
using testing::qwen3_30b_a3b;

ParamCounts published(const ModelSpec& m) { return count_params(m, m.vocab_size); }

// |x/ref - 1|
double rel(double x, double ref) { return std::abs(x / ref - 1.0); }

TEST(Params, Llama3_8B) {
  const ParamCounts p = published(llama3_8b());
  // 8.03B published. Hand count: emb+head 2*128256*4096 = 1,050,673,152; per layer attention
  // 4096*128*(64+16) = 41,943,040, MLP 3*4096*14336 = 176,160,768, norms 8192 -> x32 =
  // 6,979,584,000; final norm 4096.
  EXPECT_DOUBLE_EQ(p.total.main(), 8'030'261'248.0);
  EXPECT_NEAR(p.total.main() / 1e9, 8.03, 0.005);
  EXPECT_DOUBLE_EQ(p.active.main(), p.total.main());  // dense: all parameters active
  EXPECT_DOUBLE_EQ(p.total.mtp, 0.0);
}

TEST(Params, Llama31_70B) {
  const ParamCounts p = published(llama31_70b());
  EXPECT_DOUBLE_EQ(p.total.main(), 70'553'706'496.0);
  EXPECT_NEAR(p.total.main() / 1e9, 70.6, 0.05);  // published 70.6B
}

TEST(Params, Mixtral8x7B) {
  const ParamCounts p = published(mixtral_8x7b());
  EXPECT_DOUBLE_EQ(p.total.main(), 46'702'792'704.0);
  EXPECT_DOUBLE_EQ(p.active.main(), 12'879'925'248.0);
  EXPECT_NEAR(p.total.main() / 1e9, 46.7, 0.05);   // published 46.7B
  EXPECT_NEAR(p.active.main() / 1e9, 12.9, 0.05);  // published 12.9B
  // Router 4096*8 per layer, no bias (add_bias_linear false).
  EXPECT_DOUBLE_EQ(p.total.router, 32.0 * 4096 * 8);
  EXPECT_DOUBLE_EQ(p.active.routed_experts, p.total.routed_experts * 2 / 8);
}

TEST(Params, Mixtral8x22B) {
  const ParamCounts p = published(mixtral_8x22b());
  EXPECT_LT(rel(p.total.main(), 141e9), 0.01);  // 140.62B
  EXPECT_LT(rel(p.active.main(), 39e9), 0.01);  // 39.15B
  EXPECT_DOUBLE_EQ(p.total.main(), 140'620'634'112.0);
  EXPECT_DOUBLE_EQ(p.active.main(), 39'152'031'744.0);
}

TEST(Params, Qwen3_30B_A3B) {
  const ParamCounts p = published(qwen3_30b_a3b());
  EXPECT_DOUBLE_EQ(p.total.main(), 30'532'122'624.0);
  EXPECT_DOUBLE_EQ(p.active.main(), 3'353'032'704.0);
  EXPECT_NEAR(p.total.main() / 1e9, 30.5, 0.05);  // published 30.5B
  EXPECT_LT(rel(p.active.main(), 3.35e9), 0.01);  // published "3.3B" (truncated)
  EXPECT_GE(p.active.main(), 3.3e9);
  EXPECT_LT(p.active.main(), 3.4e9);
  // a*d_h = 4096 != h = 2048: attention 2048*128*(64+8) + qk-norms 2*128 per layer.
  EXPECT_DOUBLE_EQ(p.total.attention, 48.0 * (2048.0 * 128 * 72 + 256));
}

TEST(Params, Qwen3_235B_A22B) {
  const ParamCounts p = published(qwen3_235b_a22b());
  EXPECT_LT(rel(p.total.main(), 235e9), 0.01);  // 235.09B
  EXPECT_LT(rel(p.active.main(), 22e9), 0.01);  // 22.19B
  EXPECT_DOUBLE_EQ(p.total.main(), 235'093'634'560.0);
  EXPECT_DOUBLE_EQ(p.active.main(), 22'190'763'520.0);
}

TEST(Params, DeepSeekV3) {
  const ParamCounts p = published(deepseek_v3());
  // Published 671B total, 37B active (README); exact active is 37.55B.
  EXPECT_LT(rel(p.total.main(), 671e9), 0.01);
  EXPECT_LT(rel(p.active.main(), 37.5e9), 0.01);
  EXPECT_DOUBLE_EQ(p.total.main(), 671'026'404'352.0);
  EXPECT_DOUBLE_EQ(p.active.main(), 37'552'282'624.0);
  // One MLA layer (docs/reference/formulas.md §1.2, the +1 being the RMSNorms):
  //   q  1536*(7168 + 128*192 + 1)         =  48,760,320
  //   kv  512*(7168 + 128*256 + 1) + 7168*64 = 20,447,744 + 458,752
  //   out 128*128*7168                       = 117,440,512      -> 187,107,328
  const double mla_layer = p.total.attention / 61;
  EXPECT_DOUBLE_EQ(mla_layer, 187'107'328.0);
  EXPECT_NEAR(mla_layer / 1e6, 187.1, 0.05);
  // MTP depth 1: one MoE layer (187,107,328 + norms 2*7168 + router 7168*256
  // + experts 256*3*7168*2048 + shared 3*7168*2048 = 11,507,286,016)
  // + eh_proj 2*7168^2 + enorm/hnorm/final norm 3*7168 = 11,610,067,968.
  EXPECT_DOUBLE_EQ(p.total.mtp, 11'610'067'968.0);
  EXPECT_DOUBLE_EQ(p.total.total(), p.total.main() + p.total.mtp);
  // The aux-loss-free expert bias is a buffer: the router is h*E only.
  EXPECT_DOUBLE_EQ(p.total.router, 58.0 * 7168 * 256);
  // 3 dense layers with f = 18432.
  EXPECT_DOUBLE_EQ(p.total.dense_mlp, 3.0 * 3 * 7168 * 18432);
}

// ---------------------------------------------------------------------------------
// Tiny model, every component hand-derived.
//   h=8, a=2, g=1, d_h=4, f=16, E=4, k=2, f_e=6, f_s=10, V=32, 3 layers [dense, MoE, MoE],
//   LayerNorm, add_bias_linear, qk_layernorm, SwiGLU, untied, learned positions (16), MTP 1.
// ---------------------------------------------------------------------------------
ModelSpec tiny() {
  ModelSpec m;
  m.num_layers = 3;
  m.hidden_size = 8;
  m.ffn_hidden_size = 16;
  m.num_attention_heads = 2;
  m.num_query_groups = 1;
  m.kv_channels = 4;
  m.vocab_size = 32;
  m.make_vocab_size_divisible_by = 8;
  m.untie_embeddings_and_output_weights = true;
  m.swiglu = true;
  m.add_bias_linear = true;
  m.qk_layernorm = true;
  m.normalization = Normalization::kLayerNorm;
  m.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  m.max_position_embeddings = 16;
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 6;
  m.moe_shared_expert_intermediate_size = 10;
  m.moe_layer_pattern = {0, 1, 1};
  m.mtp_num_layers = 1;
  return m;
}

TEST(Params, TinyEveryComponent) {
  const ParamCounts p = count_params(tiny(), 32);
  // embedding 32*8 + 16*8 (positions)
  EXPECT_DOUBLE_EQ(p.total.embedding, 384);
  // attention: 8*4*(2*2+2*1)=192, QKV bias (2+2)*4=16, out bias 8, qk LayerNorm 2*(4+4)=16
  EXPECT_DOUBLE_EQ(p.total.attention, 3 * 232);
  // dense MLP: 3*8*16 = 384, biases 2*16 + 8 = 40
  EXPECT_DOUBLE_EQ(p.total.dense_mlp, 424);
  // router 8*4 + 4 bias, two MoE layers
  EXPECT_DOUBLE_EQ(p.total.router, 72);
  // routed: per expert 3*8*6 + 2*6 + 8 = 164; 4 experts; 2 layers
  EXPECT_DOUBLE_EQ(p.total.routed_experts, 1312);
  EXPECT_DOUBLE_EQ(p.active.routed_experts, 656);  // top-2 of 4
  // shared: 3*8*10 + 2*10 + 8 = 268 per MoE layer
  EXPECT_DOUBLE_EQ(p.total.shared_experts, 536);
  // norms: 2 LayerNorms (2*8) per layer + final
  EXPECT_DOUBLE_EQ(p.total.norms, 3 * 32 + 16);
  EXPECT_DOUBLE_EQ(p.total.output_layer, 256);
  // MTP (last layer is MoE): 232 + 32 + 36 + 656 + 268 = 1224, eh_proj 2*8*8, 3 LayerNorms 48
  EXPECT_DOUBLE_EQ(p.total.mtp, 1400);
  EXPECT_DOUBLE_EQ(p.active.mtp, 1400 - 328);
  EXPECT_DOUBLE_EQ(p.total.main(), 3792);
  EXPECT_DOUBLE_EQ(p.total.total(), 5192);
  EXPECT_DOUBLE_EQ(p.active.main(), 3792 - 656);
}

TEST(Params, TinyRmsNormQkvBiasOnlyGeluTied) {
  ModelSpec m = tiny();
  m.normalization = Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.add_qkv_bias = true;
  m.swiglu = false;
  m.untie_embeddings_and_output_weights = false;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.mtp_num_layers = 0;
  const ParamCounts p = count_params(m, 32);
  EXPECT_DOUBLE_EQ(p.total.embedding, 256);
  EXPECT_DOUBLE_EQ(p.total.output_layer, 0);
  // 192 + QKV bias 16 (no out bias) + qk RMSNorm 2*4
  EXPECT_DOUBLE_EQ(p.total.attention, 3 * 216);
  EXPECT_DOUBLE_EQ(p.total.dense_mlp, 2 * 8 * 16);
  EXPECT_DOUBLE_EQ(p.total.router, 2 * 32);
  EXPECT_DOUBLE_EQ(p.total.routed_experts, 2 * 4 * 2 * 8 * 6);
  EXPECT_DOUBLE_EQ(p.total.shared_experts, 2 * 2 * 8 * 10);
  EXPECT_DOUBLE_EQ(p.total.norms, 3 * 16 + 8);
  EXPECT_DOUBLE_EQ(p.total.mtp, 0);
}

ModelSpec tiny_mla() {
  ModelSpec m = tiny();
  m.hidden_size = 16;
  m.normalization = Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.multi_latent_attention = true;
  m.q_lora_rank = 4;
  m.kv_lora_rank = 6;
  m.qk_head_dim = 3;
  m.qk_pos_emb_head_dim = 2;
  m.v_head_dim = 5;
  return m;
}

TEST(Params, TinyMla) {
  ModelSpec m = tiny_mla();
  // q_down 16*4 + q_up 4*2*5 + q_norm 4 + kv_down 16*(6+2) + kv_up 6*2*8 + kv_norm 6 + out 2*5*16
  EXPECT_DOUBLE_EQ(count_params(m, 32).total.attention, 3 * 498);
  m.qk_layernorm = false;  // the norms exist only with qk_layernorm
  EXPECT_DOUBLE_EQ(count_params(m, 32).total.attention, 3 * 488);
  m.q_lora_rank = 0;  // no q-LoRA: q_proj 16*2*5 = 160 replaces 64 + 40
  EXPECT_DOUBLE_EQ(count_params(m, 32).total.attention, 3 * (488 - 104 + 160));
}

TEST(Params, PaddedVocabUsedForEmbeddingAndHead) {
  const ModelSpec m = deepseek_v3();
  const double pad = static_cast<double>(padded_vocab_size(m.vocab_size, 128, 8));
  EXPECT_DOUBLE_EQ(pad, 130048);
  const ParamCounts p = count_params(m, static_cast<int64_t>(pad));
  EXPECT_DOUBLE_EQ(p.total.embedding, pad * 7168);
  EXPECT_DOUBLE_EQ(p.total.output_layer, pad * 7168);
}

// ---------------------------------------------------------------------------------
// Per-GPU parameters.
// ---------------------------------------------------------------------------------
Scenario tiny_pp4(bool tied, int mtp) {
  Scenario s;
  s.model = tiny();
  s.model.num_layers = 8;
  s.model.moe_layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};  // dense first 3 layers
  s.model.untie_embeddings_and_output_weights = !tied;
  s.model.mtp_num_layers = mtp;
  s.training.seq_length = 16;
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.expert_model_parallel_size = 2;
  s.parallel.expert_tensor_parallel_size = 1;
  s.num_gpus = 16;
  return s;
}

// Per GPU at tp=2, ep=2, etp=1 (V=32 stays 32: divisible_by 8 x tp 2 = 16):
//   dense layer: attention (192+16)/2 + 8 + 16 = 128, norms 32, MLP (384+32)/2 + 8 = 216 -> 376
//   MoE layer, dense part: 128 + 32 + router 36 + shared (240+20)/2 + 8 = 138 -> 334
//   MoE layer, experts: 4*(144+12)/(2*1) + 4*8/2 = 312 + 16 = 328
//   embedding: 32*8/2 + positions 16*8 = 256; head 32*8/2 = 128; final norm 16
//   MTP: MoE dense part 334 + eh_proj 128/2 + 3 norms 48 = 446, experts 328
TEST(Params, GpuParamsPp4DenseFirstUntiedWithMtp) {
  const Scenario s = tiny_pp4(false, 1);
  const Mesh m = derive_mesh(s);
  ASSERT_EQ(m.padded_vocab, 32);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  ASSERT_EQ(g.size(), 4u);
  EXPECT_DOUBLE_EQ(g[0].dense, 2 * 376 + 256);  // layers 0,1 dense + embedding
  EXPECT_DOUBLE_EQ(g[0].expert, 0);
  EXPECT_DOUBLE_EQ(g[1].dense, 376 + 334);  // layer 2 dense, layer 3 MoE
  EXPECT_DOUBLE_EQ(g[1].expert, 328);
  EXPECT_DOUBLE_EQ(g[2].dense, 2 * 334);
  EXPECT_DOUBLE_EQ(g[2].expert, 2 * 328);
  // layers 6,7 + final norm + head + MTP + the MTP stage's embedding copy
  EXPECT_DOUBLE_EQ(g[3].dense, 2 * 334 + 16 + 128 + 446 + 256);
  EXPECT_DOUBLE_EQ(g[3].expert, 3 * 328);
  EXPECT_DOUBLE_EQ(g[3].total(), g[3].dense + g[3].expert);
}

TEST(Params, GpuParamsPp4TiedNoMtp) {
  const Scenario s = tiny_pp4(true, 0);
  const Mesh m = derive_mesh(s);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  EXPECT_DOUBLE_EQ(g[0].dense, 2 * 376 + 256);
  // Tied, pp > 1: the last stage keeps its own word-embedding copy for the head (no positions).
  EXPECT_DOUBLE_EQ(g[3].dense, 2 * 334 + 16 + 128);
  EXPECT_DOUBLE_EQ(g[3].expert, 2 * 328);
}

TEST(Params, GpuParamsExpertTensorParallel) {
  Scenario s = tiny_pp4(false, 0);
  s.parallel.expert_tensor_parallel_size = 2;  // fc1 shards over ep*etp, fc2 bias over ep
  const Mesh m = derive_mesh(s);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  EXPECT_DOUBLE_EQ(g[2].expert, 2 * (4.0 * 156 / 4 + 4.0 * 8 / 2));
}

TEST(Params, GpuParamsMlaDownProjectionsReplicated) {
  Scenario s;
  s.model = tiny_mla();
  s.model.mtp_num_layers = 0;
  s.model.untie_embeddings_and_output_weights = false;
  s.model.position_embedding_type = PositionEmbedding::kRope;
  s.model.num_experts = 0;
  s.model.moe_layer_pattern.clear();
  s.model.num_layers = 1;
  s.training.seq_length = 16;
  s.parallel.tensor_model_parallel_size = 2;
  s.num_gpus = 2;
  const Mesh m = derive_mesh(s);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  ASSERT_EQ(g.size(), 1u);
  // attention: (q_up 40 + kv_up 96 + out 160)/2 + q_down 64 + kv_down 128 + norms 10 = 350
  // norms 2*16 + final 16; MLP 3*16*16/2 = 384; embedding 32*16/2 = 256 (tied, pp=1: no copy)
  EXPECT_DOUBLE_EQ(g[0].dense, 350 + 48 + 384 + 256);
  EXPECT_DOUBLE_EQ(g[0].expert, 0);
}

// With tp = ep = etp = 1 and no MTP, the stages together hold exactly the model.
TEST(Params, GpuParamsSumToModelWithoutSharding) {
  for (bool tied : {false, true}) {
    Scenario s = tiny_pp4(tied, 0);
    s.parallel.tensor_model_parallel_size = 1;
    s.parallel.expert_model_parallel_size = 1;
    s.parallel.pipeline_model_parallel_size = 1;
    s.num_gpus = 1;
    const Mesh m = derive_mesh(s);
    const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
    const ParamCounts p = count_params(s.model, m.padded_vocab);
    EXPECT_DOUBLE_EQ(g[0].total(), p.total.total());
    EXPECT_DOUBLE_EQ(g[0].expert, p.total.routed_experts);
  }
  // pp = 4, untied: the stages partition the model.
  Scenario s = tiny_pp4(false, 0);
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.expert_model_parallel_size = 1;
  s.num_gpus = 4;
  const Mesh m = derive_mesh(s);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  const double sum = std::accumulate(g.begin(), g.end(), 0.0,
                                     [](double acc, const GpuParams& x) { return acc + x.total(); });
  EXPECT_DOUBLE_EQ(sum, count_params(s.model, m.padded_vocab).total.total());
}

// DeepSeek-V3 on 512 GPUs, tp 1, pp 8 (first stage 7 layers, last 6, six middle stages of 8),
// ep 64: routed experts per GPU = MoE layers on the stage x E/64 experts.
TEST(Params, GpuParamsDeepSeekExpertShard) {
  Scenario s;
  s.model = deepseek_v3();
  s.training.seq_length = 4096;
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.pipeline_model_parallel_size = 8;
  s.parallel.num_layers_in_first_pipeline_stage = 7;
  s.parallel.num_layers_in_last_pipeline_stage = 6;
  s.parallel.expert_model_parallel_size = 64;
  s.parallel.expert_tensor_parallel_size = 1;
  s.num_gpus = 512;
  const Mesh m = derive_mesh(s);
  const std::vector<StageLayers> st = stage_layers(s, m);
  ASSERT_EQ(st[0].num_layers, 7);
  ASSERT_EQ(st[0].num_moe_layers, 4);
  const std::vector<GpuParams> g = gpu_params(s, m, st);
  const double expert_layer = 256.0 * 3 * 7168 * 2048;  // no biases
  EXPECT_DOUBLE_EQ(g[0].expert, 4 * expert_layer / 64);
  EXPECT_DOUBLE_EQ(g[7].expert, (6 + 1) * expert_layer / 64);  // + MTP's MoE layer
}

// ---------------------------------------------------------------------------------
// Parameter tensors per GPU: the counts Megatron-LM's gradient buckets listed (one line per
// tensor) in the host runs' logs (validation/measured/h200/megatron_host/, sets 4 and 7).
// ---------------------------------------------------------------------------------
Scenario host_run_model(int layers, int experts) {  // scenario_dense.yaml / scenario_moe.yaml
  Scenario s;
  ModelSpec& m = s.model = testing::llama_like(layers, 256, 768, 4, 2);  // RMSNorm, SwiGLU, no biases, untied
  m.kv_channels = 64;
  m.vocab_size = 1024;
  m.qk_layernorm = true;
  if (experts > 0) {
    m.num_experts = experts;
    m.moe_router_topk = 2;
    m.moe_ffn_hidden_size = 128;
  }
  s.training.seq_length = 256;
  s.training.global_batch_size = 1;
  s.num_gpus = 1;
  return s;
}

double tensors_on_gpu0(const Scenario& s) {
  const Mesh m = derive_mesh(s);
  const GpuParams g = gpu_params(s, m, stage_layers(s, m))[0];
  return g.dense_tensors + g.expert_tensors;
}

TEST(Params, TensorCountsMatchMegatronsBucketListings) {
  // Set 7: RMSNorm, QK layernorm, no biases, untied: 3 + 8 L (19, 83, 323 listed).
  EXPECT_DOUBLE_EQ(tensors_on_gpu0(host_run_model(2, 0)), 19);
  EXPECT_DOUBLE_EQ(tensors_on_gpu0(host_run_model(10, 0)), 83);
  EXPECT_DOUBLE_EQ(tensors_on_gpu0(host_run_model(40, 0)), 323);
  // Set 7, MoE with 32 experts: 3 + (6 + router + 2 x 32) x 10 = 713 listed.
  EXPECT_DOUBLE_EQ(tensors_on_gpu0(host_run_model(10, 32)), 713);
  // Set 4, the CI GPT model: LayerNorm (weight, bias), biases, learned positions, tied:
  // 12 per layer + word and position embeddings + final norm's 2 = 148 listed.
  Scenario ci = host_run_model(12, 0);
  ModelSpec& m = ci.model;
  m.hidden_size = 512;
  m.ffn_hidden_size = 2048;
  m.num_attention_heads = m.num_query_groups = 8;
  m.vocab_size = 50257;
  m.untie_embeddings_and_output_weights = false;
  m.swiglu = false;
  m.add_bias_linear = true;
  m.qk_layernorm = false;
  m.normalization = Normalization::kLayerNorm;
  m.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  m.max_position_embeddings = 1024;
  ci.training.seq_length = 1024;
  EXPECT_DOUBLE_EQ(tensors_on_gpu0(ci), 148);
}

// The tiny pp4 model's tensors (tiny(): LayerNorm, QKV and linear biases, qk LayerNorm,
// SwiGLU; EP 2 holds 2 of the 4 experts):
//   dense layer: attention qkv w+b, proj w+b, q/k norms 2 x 2 = 8; norms 4; MLP 4 -> 16
//   MoE layer: 8 + 4 + router w+b 2 + shared expert 4 = 18 dense; experts 4 x 4 / 2 = 8
//   embedding: word + positions 2; final norm 2; head 1; MTP: 18 + eh_proj 1 + 3 norms x 2
TEST(Params, GpuTensorsPerStageHandDerived) {
  const Scenario s = tiny_pp4(false, 1);
  const Mesh m = derive_mesh(s);
  const std::vector<GpuParams> g = gpu_params(s, m, stage_layers(s, m));
  EXPECT_DOUBLE_EQ(g[0].dense_tensors, 2 * 16 + 2);
  EXPECT_DOUBLE_EQ(g[0].expert_tensors, 0);
  EXPECT_DOUBLE_EQ(g[1].dense_tensors, 16 + 18);
  EXPECT_DOUBLE_EQ(g[1].expert_tensors, 8);
  EXPECT_DOUBLE_EQ(g[3].dense_tensors, 2 * 18 + 2 + 1 + (18 + 1 + 6) + 2);  // + the MTP stage's embedding, positions
  EXPECT_DOUBLE_EQ(g[3].expert_tensors, 3 * 8);
}

}  // namespace
}  // namespace lcm
