// Memory model: the published closed forms it must reproduce (Korthikanti et al. 2022
// Table 2, Megatron's bytes per parameter, ZeRO stages, docs/reference/formulas.md §3.3 in-flight counts)
// and the behaviour of each term. docs/memory-model.md derives every number used here.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"

namespace lcm {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The paper's GPT configuration: LayerNorm, GeLU MLP of 4h, MHA, unfused attention,
// dropout on (1-byte masks), bf16 activations. s <= 4096 keeps Megatron's fused softmax
// kernel, which saves bf16 probabilities as the paper assumes.
Scenario gpt_paper(int tp, bool sp) {
  Scenario s;
  s.name = "korthikanti";
  ModelSpec& m = s.model;
  m.num_layers = 48;
  m.hidden_size = 6144;
  m.ffn_hidden_size = 4 * 6144;
  m.num_attention_heads = 64;
  m.num_query_groups = 64;
  m.kv_channels = 96;
  m.vocab_size = 51200;
  m.swiglu = false;
  m.normalization = Normalization::kLayerNorm;
  m.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  m.max_position_embeddings = 2048;
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  s.training.seq_length = 2048;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 8;
  s.training.attention_backend = AttentionBackend::kUnfused;
  s.parallel.tensor_model_parallel_size = tp;
  s.parallel.sequence_parallel = sp;
  s.num_gpus = tp;
  s.hardware.gpu.hbm_bytes = 80e9;
  return s;
}

double sbh(const Scenario& s) {
  return static_cast<double>(s.training.seq_length) * s.training.micro_batch_size *
         static_cast<double>(s.model.hidden_size);
}

double per_layer(const Scenario& s) {
  return layer_activation_bytes(s, derive_mesh(s), false).total();
}

void expect_rel(double got, double want, double rel = 1e-12) {
  EXPECT_NEAR(got, want, std::fabs(want) * rel) << "got " << got << " want " << want;
}

// ---- Korthikanti et al. 2022, Table 2 (bytes per layer).
TEST(MemoryKorthikanti, NoParallelism) {
  const Scenario s = gpt_paper(1, false);
  const double a = 64, h = 6144, sq = 2048;
  expect_rel(per_layer(s), sbh(s) * (34.0 + 5.0 * a * sq / h));
}

TEST(MemoryKorthikanti, TensorParallelOnly) {
  const Scenario s = gpt_paper(8, false);
  const double a = 64, h = 6144, sq = 2048, t = 8;
  expect_rel(per_layer(s), sbh(s) * (10.0 + 24.0 / t + 5.0 * a * sq / (h * t)));
}

TEST(MemoryKorthikanti, TensorPlusSequenceParallel) {
  const Scenario s = gpt_paper(8, true);
  const double a = 64, h = 6144, sq = 2048, t = 8;
  expect_rel(per_layer(s), sbh(s) / t * (34.0 + 5.0 * a * sq / h));
}

TEST(MemoryKorthikanti, TensorParallelSelectiveRecompute) {
  Scenario s = gpt_paper(8, false);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn;
  expect_rel(per_layer(s), sbh(s) * (10.0 + 24.0 / 8.0));
}

TEST(MemoryKorthikanti, TensorSequenceParallelSelectiveRecompute) {
  Scenario s = gpt_paper(8, true);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn;
  expect_rel(per_layer(s), 34.0 * sbh(s) / 8.0);
}

TEST(MemoryKorthikanti, FullRecomputeKeepsLayerInput) {
  Scenario s = gpt_paper(8, false);
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_num_layers = 1;
  expect_rel(per_layer(s), 2.0 * sbh(s));
  s.parallel.sequence_parallel = true;
  expect_rel(per_layer(s), 2.0 * sbh(s) / 8.0);
}

// ---- Where the generalised accounting departs from the paper.
TEST(MemoryLayer, FusedAttentionDropsScoreTermsKeepsLse) {
  Scenario s = gpt_paper(1, false);
  s.training.attention_backend = AttentionBackend::kFused;
  const double a = 64, sq = 2048;
  // 34 sbh plus the fp32 log-sum-exp (4 bytes per head and token); no s^2 term.
  expect_rel(per_layer(s), 34.0 * sbh(s) + 4.0 * a * sq);
}

TEST(MemoryLayer, DropoutOffRemovesMasksAndDroppedProbabilities) {
  Scenario s = gpt_paper(1, false);
  s.model.hidden_dropout = 0.0;
  s.model.attention_dropout = 0.0;
  const double a = 64, h = 6144, sq = 2048;
  // Two 1-byte hidden masks and 3 a s^2 b (mask + dropped-out copy) disappear.
  expect_rel(per_layer(s), sbh(s) * (32.0 + 2.0 * a * sq / h));
}

TEST(MemoryLayer, GqaStoresOnlyGroupKeysAndValues) {
  Scenario mha = gpt_paper(1, false);
  Scenario gqa = mha;
  gqa.model.num_query_groups = 8;
  const double T = 2048, dh = 96, a = 64, g = 8;
  // K and V: 2 s b g d_h bytes each instead of 2 s b a d_h.
  expect_rel(per_layer(mha) - per_layer(gqa), 2.0 * 2.0 * T * (a - g) * dh);
}

TEST(MemoryLayer, SwigluMlp) {
  Scenario s = gpt_paper(1, false);
  s.model.swiglu = true;
  s.model.ffn_hidden_size = 16384;
  s.model.hidden_dropout = 0.0;
  const Mesh m = derive_mesh(s);
  const double T = 2048, h = 6144, f = 16384;
  // fc1 input 2Th, fc1 output 2*2Tf, SwiGLU output 2Tf.
  expect_rel(layer_activation_bytes(s, m, false).mlp, 2.0 * T * h + 4.0 * T * f + 2.0 * T * f);
}

TEST(MemoryLayer, LongSequenceUnfusedSoftmaxKeepsFp32Probabilities) {
  Scenario s = gpt_paper(1, false);
  s.model.attention_dropout = 0.0;
  s.model.hidden_dropout = 0.0;
  const double a = 64, h = 6144;
  s.training.seq_length = 8192;  // beyond the fused softmax kernel (sk <= 4096)
  const double sq = 8192;
  // fp32 probabilities (4) plus their bf16 cast (2) per score element.
  expect_rel(per_layer(s), sbh(s) * (32.0 + 6.0 * a * sq / h));
}

TEST(MemoryLayer, ContextParallelDividesPerTokenTerms) {
  Scenario s = gpt_paper(1, false);
  s.training.attention_backend = AttentionBackend::kFused;
  const double base = per_layer(s);
  s.parallel.context_parallel_size = 4;
  s.num_gpus = 4;
  expect_rel(per_layer(s), base / 4.0);
}

Scenario moe_model() {
  Scenario s;
  ModelSpec& m = s.model;
  m.num_layers = 8;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.vocab_size = 32000;
  m.swiglu = true;
  m.add_bias_linear = false;
  m.normalization = Normalization::kRMSNorm;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 14336;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.expert_model_parallel_size = 4;
  s.parallel.expert_tensor_parallel_size = 1;
  s.num_gpus = 8;
  s.hardware.gpu.hbm_bytes = 80e9;
  return s;
}

TEST(MemoryLayer, MoeExpertTermsScaleWithTopK) {
  Scenario s = moe_model();
  const Mesh m = derive_mesh(s);
  const double Ts = 4096.0 / 2, h = 4096, fe = 14336, E = 8;
  const double k2 = layer_activation_bytes(s, m, true).mlp;
  s.model.moe_router_topk = 4;
  const double k4 = layer_activation_bytes(s, m, true).mlp;
  // Per extra token copy: permuted input 2h, fc1 output 2*2fe, SwiGLU output 2fe, fp32 prob.
  expect_rel(k4 - k2, 2.0 * Ts * (2.0 * h + 4.0 * fe + 2.0 * fe + 4.0));
  // Whole block at k=2: norm output 2Ts h + router 11 Ts E + expert terms.
  expect_rel(k2, 2.0 * Ts * h + 11.0 * Ts * E + 2.0 * Ts * (2.0 * h + 6.0 * fe + 4.0));
}

TEST(MemoryLayer, MoeSelectiveModules) {
  Scenario s = moe_model();
  const Mesh m = derive_mesh(s);
  const double Ts = 2048, fe = 14336, k = 2;
  const double none = layer_activation_bytes(s, m, true).mlp;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeMoeAct;
  expect_rel(none - layer_activation_bytes(s, m, true).mlp, 2.0 * Ts * k * fe);
  s.parallel.recompute_modules = kRecomputeMoe;
  expect_rel(layer_activation_bytes(s, m, true).mlp, 2.0 * Ts * 4096);
}

// ---- FP8 and selective recompute: the bytes each module saves for backward, per the code
// (docs/memory-model.md "FP8 on Hopper"). Dense: the SwiGLU GQA model of moe_model() with its
// MoE layers read as dense (ffn 14336), tp 2 with SP, s = 4096, b = 1, dropout 0:
//   T = 4096 tokens, Ts = 2048, h = 4096, a = 32, g = 8, d_h = 128, f = 14336, t = 2.
// BF16 (TE LayerNormLinear / Linear save their bf16 inputs; fused attention saves Q, K, V, O):
//   norms          2 inputs x 2 Ts h              = 4 Ts h
//   attention      qkv ln_out 2 Ts h + Q,K,V 2T(a+2g)d_h/t + O 2T a d_h/t + LSE 4 (a/t) s
//   mlp            fc1 ln_out 2 Ts h + fc1 out 2T(2f)/t + fc2 in 2T f/t
// FP8 (linear.py / layernorm_linear.py keep only the 1-byte FP8 copy of a linear's input;
// O stays the bf16 tensor the kernel saves, linear_proj saving the original,
// attention.py set_save_original_input):
//   attention      qkv ln_out 1 Ts h, the rest as BF16
//   mlp            fc1 ln_out 1 Ts h + fc1 out 2T(2f)/t (bf16, bias_swiglu's saved input) + fc2 in 1 T f/t
// `mlp` recompute (transformer_layer.py: checkpoint(self.mlp, pre_mlp_layernorm_output); the
// fused norm makes that the residual, already in `norms`): mlp = 0 in both precisions.
namespace fp8 {
constexpr double T = 4096, Ts = 2048, h = 4096, a = 32, g = 8, dh = 128, f = 14336, t = 2;
constexpr double kAttnRest = 2.0 * T * (a + 2 * g) * dh / t + 2.0 * T * a * dh / t + 4.0 * (a / t) * T;
}  // namespace fp8

TEST(MemoryFp8, DenseLayerSavedBytesBf16AndFp8) {
  using namespace fp8;
  Scenario s = moe_model();
  const Mesh m = derive_mesh(s);
  const LayerActivation bf16 = layer_activation_bytes(s, m, false);
  expect_rel(bf16.norms, 4.0 * Ts * h);
  expect_rel(bf16.attention, 2.0 * Ts * h + kAttnRest);
  expect_rel(bf16.mlp, 2.0 * Ts * h + 2.0 * T * 2 * f / t + 2.0 * T * f / t);
  s.training.precision = Precision::kFp8;
  const LayerActivation f8 = layer_activation_bytes(s, m, false);
  expect_rel(f8.norms, 4.0 * Ts * h);
  expect_rel(f8.attention, 1.0 * Ts * h + kAttnRest);
  expect_rel(f8.mlp, 1.0 * Ts * h + 2.0 * T * 2 * f / t + 1.0 * T * f / t);
  // The FP8 layer saves Ts h (qkv ln_out) + Ts h (fc1 ln_out) + T f / t (fc2 input) bytes less.
  expect_rel(bf16.total() - f8.total(), 2.0 * Ts * h + T * f / t);
}

TEST(MemoryFp8, MlpRecomputeKeepsOnlyTheCheckpointInput) {
  using namespace fp8;
  for (const Precision p : {Precision::kBf16, Precision::kFp8}) {
    Scenario s = moe_model();
    s.training.precision = p;
    const Mesh m = derive_mesh(s);
    const LayerActivation none = layer_activation_bytes(s, m, false);
    s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
    s.parallel.recompute_modules = kRecomputeMlp;
    const LayerActivation rc = layer_activation_bytes(s, m, false);
    EXPECT_EQ(rc.mlp, 0.0);
    expect_rel(rc.norms, none.norms);
    expect_rel(rc.attention, none.attention);
    // The saving: BF16 2Ts h + 6T f/t = 16.78 MB + 176.2 MB; FP8 Ts h + 5T f/t = 8.39 MB + 146.8 MB.
    const double lb = p == Precision::kFp8 ? 1.0 : 2.0;
    expect_rel(none.mlp - rc.mlp, lb * Ts * h + 4.0 * T * f / t + lb * T * f / t);
  }
  // FP8 MLP recompute saves 5/6 of what the BF16 one saves on the fc1/fc2 terms (and half the
  // ln_out): 155.2 MB against 193.0 MB per layer here.
}

// MoE (moe_model(): E = 8, k = 2, f_e = 14336 SwiGLU, ep 4, etp 1, tp 2 SP): N = Ts k = 4096
// token copies on the rank. BF16 block: pre-MLP norm output 2 Ts h + router 11 Ts E + expert
// input 2 N h + fc1 out 2 N 2f_e + act out 2 N f_e + probs 4 N.
// FP8: the GroupedLinear inputs are FP8 copies (grouped_linear.py): expert input 1 N h, fc2
// input 1 N f_e; fc1 out stays bf16 (weighted_bias_swiglu saves its input). `moe_act` drops the
// fc2 input in both: BF16 the discarded checkpoint output (experts.py CheckpointWithoutOutput),
// FP8 the original input fc2 is set to save (set_save_original_input(self.linear_fc2)).
TEST(MemoryFp8, MoeBlockSavedBytesWithAndWithoutMoeAct) {
  const double Ts = 2048, h = 4096, E = 8, fe = 14336, N = 2048.0 * 2;
  const double common = 2.0 * Ts * h + 11.0 * Ts * E + 2.0 * N * 2 * fe + 4.0 * N;
  Scenario s = moe_model();
  const Mesh m = derive_mesh(s);
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 2.0 * N * h + 2.0 * N * fe);
  s.training.precision = Precision::kFp8;
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 1.0 * N * h + 1.0 * N * fe);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeMoeAct;
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 1.0 * N * h);
  s.training.precision = Precision::kBf16;
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 2.0 * N * h);
}

// A non-gated expert activation keeps its bf16 output for the probability multiply
// (experts.py bias_act_func: activation_func(x) * permuted_probs) besides fc2's input: BF16
// 2 + 2 B, FP8 2 + 1 B per element of N f_e; the fc1 output is N f_e wide.
TEST(MemoryFp8, NonGatedExpertKeepsActivationOutputForProbs) {
  const double Ts = 2048, h = 4096, E = 8, fe = 14336, N = 4096;
  Scenario s = moe_model();
  s.model.swiglu = false;
  const Mesh m = derive_mesh(s);
  const double common = 2.0 * Ts * h + 11.0 * Ts * E + 2.0 * N * fe + 4.0 * N;
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 2.0 * N * h + 4.0 * N * fe);
  s.training.precision = Precision::kFp8;
  expect_rel(layer_activation_bytes(s, m, true).mlp, common + 1.0 * N * h + 3.0 * N * fe);
}

// The whole stage: FP8 changes the per-micro-batch activations by exactly the per-layer
// differences above (8 dense-or-MoE layers, no embedding dropout, the output layer's input
// bf16), and the memory key tells the two precisions apart.
TEST(MemoryFp8, StageActivationsAndKey) {
  Scenario s = moe_model();
  s.model.num_experts = 0;
  s.model.moe_ffn_hidden_size = 0;
  s.parallel.expert_model_parallel_size = 1;
  const Mesh m = derive_mesh(s);
  const auto layers = stage_layers(s, m);
  const auto params = gpu_params(s, m, layers);
  const double bf16 = estimate_memory(s, m, layers, params).stages[0].activations_per_microbatch;
  const MemoryBaseKey kb = memory_base_key(s, m);
  s.training.precision = Precision::kFp8;
  const double f8 = estimate_memory(s, m, layers, params).stages[0].activations_per_microbatch;
  expect_rel(bf16 - f8, 8.0 * (2.0 * fp8::Ts * fp8::h + fp8::T * fp8::f / fp8::t));
  EXPECT_FALSE(memory_base_key(s, m) == kb);
}

TEST(MemoryLayer, CapacityPaddingScalesExpertTokens) {
  Scenario s = moe_model();
  const Mesh m = derive_mesh(s);
  const double dropless = layer_activation_bytes(s, m, true).mlp;
  s.model.moe_expert_capacity_factor = 1.5;
  s.model.moe_pad_expert_input_to_capacity = true;
  const double padded = layer_activation_bytes(s, m, true).mlp;
  const double Ts = 2048, h = 4096, E = 8;
  const double fixed = 2.0 * Ts * h + 11.0 * Ts * E;  // norm output and router: not padded
  expect_rel(padded - fixed, 1.5 * (dropless - fixed));
}

TEST(MemoryLayer, MlaUpProjectionRecompute) {
  Scenario s = moe_model();
  ModelSpec& md = s.model;
  md.multi_latent_attention = true;
  md.num_attention_heads = 32;
  md.q_lora_rank = 1536;
  md.kv_lora_rank = 512;
  md.qk_head_dim = 128;
  md.qk_pos_emb_head_dim = 64;
  md.v_head_dim = 128;
  const Mesh m = derive_mesh(s);
  const double T = 4096, t = 2, a = 32;
  const double full = layer_activation_bytes(s, m, false).attention;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeMlaUpProj;
  // Query and key (a (d_n + d_r) each) and the kv_up output (a (d_n + d_v)) are recomputed.
  expect_rel(full - layer_activation_bytes(s, m, false).attention,
             2.0 * T * a * ((128 + 64) * 2.0 + (128 + 128)) / t);
  // The separate input norm's output is recomputed with `layernorm`.
  s.parallel.recompute_modules = kRecomputeMlaUpProj | kRecomputeLayernorm;
  const double Ts = T / t, h = 4096;
  expect_rel(full - layer_activation_bytes(s, m, false).attention,
             2.0 * T * a * ((128 + 64) * 2.0 + (128 + 128)) / t + 2.0 * Ts * h);
}

// ---- Model state: bytes per parameter.
struct OneStage {
  Scenario s;
  Mesh m;
  std::vector<StageLayers> layers;
  std::vector<GpuParams> params;
};

OneStage one_stage(int num_gpus, double dense, double expert) {
  OneStage o;
  o.s = gpt_paper(1, false);
  o.s.num_gpus = num_gpus;
  o.s.training.global_batch_size = num_gpus;
  o.m = derive_mesh(o.s);
  o.layers = stage_layers(o.s, o.m);
  o.params = {GpuParams::all_trainable(dense, expert)};
  return o;
}

double state_bytes(const StageMemory& st) {
  return st.weights + st.grads + st.main_params + st.optimizer_states;
}

TEST(MemoryState, EighteenBytesPerParamWithoutDistributedOptimizer) {
  const OneStage o = one_stage(8, 1e9, 0);
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 18.0);
  EXPECT_EQ(mem.stages[0].fsdp_gather_buffers, 0.0);
}

TEST(MemoryState, SixPlusTwelveOverDWithDistributedOptimizer) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.parallel.use_distributed_optimizer = true;
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 6.0 + 12.0 / 8.0);
}

// store_param_remainders (Apex's DistributedFusedAdam in NeMo 1.0, Megatron's precision-aware
// optimizer on Transformer Engine >= 2.1): the fp32 master weight's high 16 bits are the bf16
// weight, so the shard keeps 2 B of it, not 4: 1e9 parameters on dp 8 = 6 + (2 + 8) / 8 B each,
// 0.25 GB of master weights less than the 6 + 12 / 8 above.
TEST(MemoryState, ParamRemaindersHalveTheMasterWeights) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.parallel.use_distributed_optimizer = true;
  o.s.training.store_param_remainders = true;
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(mem.stages[0].main_params, 2.0 * 1e9 / 8.0);
  expect_rel(mem.stages[0].optimizer_states, 8.0 * 1e9 / 8.0);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 6.0 + 10.0 / 8.0);
}

TEST(MemoryState, DenseShardsOverDpTimesCpExpertOverEdp) {
  OneStage o = one_stage(8, 0, 0);
  o.s.model.num_experts = 8;
  o.s.model.moe_router_topk = 2;
  o.s.parallel.context_parallel_size = 2;
  o.s.parallel.expert_model_parallel_size = 4;
  o.s.parallel.use_distributed_optimizer = true;
  o.m = derive_mesh(o.s);
  ASSERT_EQ(o.m.dp, 4);
  ASSERT_EQ(o.m.edp, 2);
  o.params = {GpuParams::all_trainable(1e9, 2e9)};
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]), 1e9 * (6.0 + 12.0 / 8.0) + 2e9 * (6.0 + 12.0 / 2.0));
}

TEST(MemoryState, ZeroStages) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGrads;
  Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 2.0 + 16.0 / 8.0);  // ZeRO-2
  o.s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 18.0 / 8.0);  // ZeRO-3
  EXPECT_GT(mem.stages[0].fsdp_gather_buffers, 0.0);
}

TEST(MemoryState, PrecisionAwareOptimizerDtypes) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.training.exp_avg_dtype = DType::kBf16;
  o.s.training.exp_avg_sq_dtype = DType::kBf16;
  o.s.training.grad_reduce_in_fp32 = false;
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(state_bytes(mem.stages[0]) / 1e9, 2.0 + 2.0 + 4.0 + 4.0);
}

TEST(MemoryState, Fp8CachesLinearWeights) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.training.precision = Precision::kFp8;
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  const double vh = static_cast<double>(o.m.padded_vocab) * 6144;  // tied: one copy on pp=1
  expect_rel(mem.stages[0].fp8_weight_cache, 2.0 * (1e9 - vh));
}

// --fp8-param-gather (NeMo's fp8_params): the linear weights are FP8 tensors, 1 B a parameter
// (the embedding stays bf16), and only their column-wise transpose is cached, 1 B: 2 B per linear
// parameter less than bf16 weights with a 2 B FP8 cache.
//   1e9 parameters, vh of them the (tied) embedding: weights 2 vh + 1 (1e9 - vh) = 1e9 + vh;
//   FP8 cache 1e9 - vh. Before: weights 2e9, cache 2 (1e9 - vh).
TEST(MemoryState, Fp8ParamGatherKeepsFp8Weights) {
  OneStage o = one_stage(8, 1e9, 0);
  o.s.training.precision = Precision::kFp8;
  o.s.training.fp8_param_gather = true;
  const Memory mem = estimate_memory(o.s, o.m, o.layers, o.params);
  const double vh = static_cast<double>(o.m.padded_vocab) * 6144;
  expect_rel(mem.stages[0].weights, 1e9 + vh);
  expect_rel(mem.stages[0].fp8_weight_cache, 1e9 - vh);
  o.s.training.fp8_param_gather = false;
  const Memory before = estimate_memory(o.s, o.m, o.layers, o.params);
  expect_rel(before.stages[0].weights + before.stages[0].fp8_weight_cache -
                 (mem.stages[0].weights + mem.stages[0].fp8_weight_cache),
             2.0 * (1e9 - vh));
}

// ---- Pipeline in-flight micro-batches (docs/reference/formulas.md §3.3).
Scenario pipeline(int p, int vp_layers, int gbs) {
  Scenario s = gpt_paper(1, false);
  s.model.num_layers = 48;
  s.parallel.pipeline_model_parallel_size = p;
  s.parallel.num_layers_per_virtual_pipeline_stage = vp_layers;
  s.num_gpus = p;
  s.training.global_batch_size = gbs;
  return s;
}

std::vector<double> in_flight(const Scenario& s) {
  const Mesh m = derive_mesh(s);
  const auto layers = stage_layers(s, m);
  const std::vector<GpuParams> params(layers.size(), GpuParams::all_trainable(1e6, 0));
  const Memory mem = estimate_memory(s, m, layers, params);
  std::vector<double> out;
  for (const auto& st : mem.stages) out.push_back(st.in_flight_microbatches);
  return out;
}

TEST(MemoryPipeline, OneFOneBHoldsPMinusR) {
  EXPECT_EQ(in_flight(pipeline(4, 0, 16)), (std::vector<double>{4, 3, 2, 1}));
  // Fewer micro-batches than stages: min(p - r, m).
  EXPECT_EQ(in_flight(pipeline(4, 0, 2)), (std::vector<double>{2, 2, 2, 1}));
}

TEST(MemoryPipeline, InterleavedWarmup) {
  // p=4, v=2 (48 layers, 6 per virtual stage), m=16: rank r holds 2(p-r-1)+(v-1)p+1 chunk
  // micro-batches, i.e. (that)/v stage micro-batches.
  const std::vector<double> f = in_flight(pipeline(4, 6, 16));
  EXPECT_DOUBLE_EQ(f[0], 11.0 / 2);
  EXPECT_DOUBLE_EQ(f[3], 5.0 / 2);
  // First stage = L (1 + (p-1)/(p v)) layer-micro-batches: f0 * (L/p) layers.
  EXPECT_DOUBLE_EQ(f[0] * 12, 48.0 * (1.0 + 3.0 / 8.0));
  // All-warmup when the warmup reaches m*v: m=4, v=2 -> 8 chunks on rank 0.
  EXPECT_DOUBLE_EQ(in_flight(pipeline(4, 6, 4))[0], 4.0);
}

TEST(MemoryPipeline, OverlapMoeCommAddsOneChunk) {
  Scenario s = pipeline(4, 6, 16);
  s.parallel.overlap_moe_expert_parallel_comm = true;
  EXPECT_DOUBLE_EQ(in_flight(s)[0], 12.0 / 2);
  // Without a pipeline (Megatron needs interleaving for the overlap when pp > 1), the
  // combined 1F1B pairs forward and backward layer by layer: still one micro-batch.
  Scenario s1 = pipeline(1, 0, 16);
  s1.parallel.overlap_moe_expert_parallel_comm = true;
  EXPECT_DOUBLE_EQ(in_flight(s1)[0], 1.0);
}

TEST(MemoryPipeline, FirstStageHoldsMostActivations) {
  const Scenario s = pipeline(4, 0, 16);
  const Mesh m = derive_mesh(s);
  const auto layers = stage_layers(s, m);
  const std::vector<GpuParams> params(layers.size(), GpuParams::all_trainable(1e6, 0));
  const Memory mem = estimate_memory(s, m, layers, params);
  for (size_t r = 1; r < mem.stages.size(); ++r)
    EXPECT_GT(mem.stages[0].activations, mem.stages[r].activations);
  EXPECT_GT(mem.stages.back().logits_and_loss, 0.0);
  EXPECT_EQ(mem.stages.front().logits_and_loss, 0.0);
}

// ---- Loss side.
TEST(MemoryLoss, Fp32LogitsAtLongContext) {
  Scenario s = gpt_paper(1, false);
  s.model.vocab_size = 128256;
  s.training.seq_length = 32768;
  s.training.attention_backend = AttentionBackend::kFused;
  const Mesh m = derive_mesh(s);
  ASSERT_EQ(m.padded_vocab, 128256);
  const auto layers = stage_layers(s, m);
  const Memory mem = estimate_memory(s, m, layers, {GpuParams::all_trainable(1e9, 0)});
  // fp32 logits 4 s b V = 15.66 GiB, plus the bf16 logits they are cast from (2 s b V).
  const double fp32_logits = 4.0 * 32768.0 * 128256.0;
  EXPECT_NEAR(fp32_logits / kGiB, 15.66, 0.01);
  expect_rel(mem.stages[0].logits_and_loss, fp32_logits * 6.0 / 4.0);
  // Vocab-parallel: each TP rank holds V/t columns.
  Scenario t8 = s;
  t8.parallel.tensor_model_parallel_size = 8;
  t8.num_gpus = 8;
  const Mesh m8 = derive_mesh(t8);
  const Memory mem8 = estimate_memory(t8, m8, stage_layers(t8, m8), {GpuParams::all_trainable(1e9, 0)});
  expect_rel(mem8.stages[0].logits_and_loss, 6.0 * 32768.0 * m8.padded_vocab / 8.0);
}

TEST(MemoryLoss, MtpKeepsAnotherSoftmaxPerDepth) {
  Scenario s = gpt_paper(1, false);
  s.model.mtp_num_layers = 1;
  const Mesh m = derive_mesh(s);
  const Memory mem = estimate_memory(s, m, stage_layers(s, m), {GpuParams::all_trainable(1e9, 0)});
  expect_rel(mem.stages[0].logits_and_loss, 10.0 * 2048.0 * m.padded_vocab);
}

// Fused cross-entropy (--cross-entropy-loss-fusion), hand-derived for s = 2048, b = 1,
// V = 51200 (already a multiple of 128 t): one logits tensor is 2048 x 51200 elements per
// rank at t = 1, i.e. 200 MiB in bf16.
TEST(MemoryLoss, FusedCrossEntropyBytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  auto loss = [](Scenario s) {
    const Mesh m = derive_mesh(s);
    EXPECT_EQ(m.padded_vocab, 51200);
    return estimate_memory(s, m, stage_layers(s, m), {GpuParams::all_trainable(1e9, 0)}).stages[0].logits_and_loss;
  };
  Scenario s = gpt_paper(1, false);
  // Unfused: bf16 logits + their fp32 copy, 2 + 4 B per logit = 600 MiB.
  EXPECT_DOUBLE_EQ(loss(s), 600.0 * kMiB);
  // Native fusion runs the same in-place program (fp32 copy, softmax saved, bf16 gradient made
  // from it): the same 600 MiB.
  s.training.cross_entropy_loss_fusion = true;
  s.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kNative;
  EXPECT_DOUBLE_EQ(loss(s), 600.0 * kMiB);
  // TE: the gradient is written in place into the bf16 logits, nothing V-wide besides: 200 MiB.
  s.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
  EXPECT_DOUBLE_EQ(loss(s), 200.0 * kMiB);
  // One MTP depth keeps its own in-place bf16 gradient while the main loss runs: 400 MiB
  // (unfused: its fp32 softmax, 600 + 400 = 1000 MiB).
  s.model.mtp_num_layers = 1;
  EXPECT_DOUBLE_EQ(loss(s), 400.0 * kMiB);
  s.training.cross_entropy_loss_fusion = false;  // the impl is read only with the fusion on
  EXPECT_DOUBLE_EQ(loss(s), 1000.0 * kMiB);
  // Vocab-parallel over t = 2: V/t = 25600 columns per rank, half of each.
  Scenario t2 = gpt_paper(2, true);
  t2.training.cross_entropy_loss_fusion = true;
  t2.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
  EXPECT_DOUBLE_EQ(loss(t2), 100.0 * kMiB);
}

// ---- Recompute transient, CP buffers, allowances and totals.
TEST(MemoryTotals, FullRecomputeTransientIsOneLayer) {
  Scenario s = gpt_paper(1, false);
  s.training.attention_backend = AttentionBackend::kFused;
  s.model.vocab_size = 128;  // keep the loss buffers below the recompute transient
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_num_layers = 1;
  const Mesh m = derive_mesh(s);
  const Memory mem = estimate_memory(s, m, stage_layers(s, m), {GpuParams::all_trainable(1e9, 0)});
  Scenario none = s;
  none.parallel.recompute_granularity = RecomputeGranularity::kNone;
  const double layer = layer_activation_bytes(none, m, false).total();
  EXPECT_GT(mem.stages[0].transient_peak + mem.stages[0].logits_and_loss, layer);
  EXPECT_LT(mem.stages[0].transient_peak + mem.stages[0].logits_and_loss, 3.0 * layer);
  // 48 checkpoints of 2 s b h.
  expect_rel(mem.stages[0].activations, 48.0 * 2.0 * sbh(s) + 2.0 * 2.0 * sbh(s) + sbh(s));
}

TEST(MemoryTotals, ContextParallelP2pBuffers) {
  Scenario s = gpt_paper(1, false);
  s.training.attention_backend = AttentionBackend::kFused;
  s.parallel.context_parallel_size = 4;
  s.num_gpus = 4;
  const Mesh m = derive_mesh(s);
  const Memory mem = estimate_memory(s, m, stage_layers(s, m), {GpuParams::all_trainable(1e9, 0)});
  // Two KV blocks (send + receive) of 2 (s/c) b g d_h bf16 values.
  expect_rel(mem.stages[0].comm_buffers, 2.0 * 2.0 * 512.0 * 2.0 * 64 * 96);
  s.parallel.cp_comm_type = CpCommType::kAllGather;
  const Memory ag = estimate_memory(s, m, stage_layers(s, m), {GpuParams::all_trainable(1e9, 0)});
  EXPECT_EQ(ag.stages[0].comm_buffers, 0.0);
}

TEST(MemoryTotals, AllowancesAndFit) {
  Scenario s = moe_model();
  s.hardware.allowances.cuda_context = 0.5 * kGiB;
  s.hardware.allowances.nccl_per_communicator = 100e6;
  s.hardware.allowances.cublas_workspace = 64e6;
  s.hardware.allowances.fragmentation_fraction = 0.05;
  const Mesh m = derive_mesh(s);  // tp 2, dp 4, ep 4, etp 1, edp 2
  const auto layers = stage_layers(s, m);
  const Memory mem = estimate_memory(s, m, layers, {GpuParams::all_trainable(1e9, 1e9)});
  const StageMemory& st = mem.stages[0];
  // tp, dp, ep, etp (1 != tp 2 -> none), edp: 4 communicators.
  EXPECT_DOUBLE_EQ(st.nccl_buffers, 4 * 100e6);
  expect_rel(st.allocated, st.weights + st.grads + st.main_params + st.optimizer_states +
                               st.fsdp_gather_buffers + st.fp8_weight_cache + st.activations +
                               st.logits_and_loss + st.transient_peak + st.comm_buffers +
                               st.workspaces);
  expect_rel(st.fragmentation, 0.05 * st.allocated);
  expect_rel(st.peak, st.allocated + 0.5 * kGiB + 4 * 100e6 + 64e6 + st.fragmentation);
  // The band: the memory model's residual spread, -4.10% / +6.44% (uncertainty.cpp); its
  // bottom without the fragmentation, which the caching allocator gives back under pressure.
  expect_rel(st.peak_low, (st.peak - st.fragmentation) * (1 - 0.0410));
  expect_rel(st.peak_high, st.peak * (1 + 0.0644));
  EXPECT_DOUBLE_EQ(mem.peak_bytes, st.peak);
  EXPECT_DOUBLE_EQ(mem.peak_high_bytes, st.peak_high);
  EXPECT_DOUBLE_EQ(mem.peak_low_bytes, st.peak_low);
  EXPECT_DOUBLE_EQ(mem.allocated_peak_bytes, st.allocated);
  EXPECT_DOUBLE_EQ(mem.hbm_bytes, 80e9);
  EXPECT_TRUE(mem.fits && mem.may_fit);

  // Three verdicts: HBM just above the band's top fits; between its ends, tight (may fit,
  // not fits); just below its bottom, out of memory.
  s.hardware.gpu.hbm_bytes = st.peak_high * 1.001;
  Memory v = estimate_memory(s, m, layers, {GpuParams::all_trainable(1e9, 1e9)});
  EXPECT_TRUE(v.fits && v.may_fit);
  s.hardware.gpu.hbm_bytes = st.peak;
  v = estimate_memory(s, m, layers, {GpuParams::all_trainable(1e9, 1e9)});
  EXPECT_FALSE(v.fits);
  EXPECT_TRUE(v.may_fit);
  s.hardware.gpu.hbm_bytes = st.peak_low * 0.999;
  v = estimate_memory(s, m, layers, {GpuParams::all_trainable(1e9, 1e9)});
  EXPECT_FALSE(v.fits || v.may_fit);
}

TEST(MemoryTotals, WorstStageIsTheLargestPeak) {
  const Scenario s = pipeline(4, 0, 16);
  const Mesh m = derive_mesh(s);
  const auto layers = stage_layers(s, m);
  const std::vector<GpuParams> params(layers.size(), GpuParams::all_trainable(1e6, 0));
  const Memory mem = estimate_memory(s, m, layers, params);
  double best = 0;
  int at = -1;
  for (const auto& st : mem.stages)
    if (st.peak > best) best = st.peak, at = st.stage;
  EXPECT_EQ(mem.worst_stage, at);
  EXPECT_DOUBLE_EQ(mem.peak_bytes, best);
}

}  // namespace
}  // namespace lcm
