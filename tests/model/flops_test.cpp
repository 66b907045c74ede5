// FLOPs per step: Megatron's num_floating_point_operations reproduced exactly, the
// causal / recompute conventions, and the per-layer forward counts.
//
// The expected Megatron values are computed here by an independent transcription of
// megatron/training/training.py::num_floating_point_operations (d98e8a64), arranged as
// Megatron arranges it (per-token bracket times tokens plus the s^2 core term), not by
// calling lcm code. One case (Llama3-8B) is also pinned to a literal number.
#include <gtest/gtest.h>

#include "../common/test_models.hpp"

#include <cmath>

#include "lcm/model/flops.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm {
namespace {

double rel(double x, double ref) { return std::abs(x / ref - 1.0); }
constexpr double kExact = 1e-12;  // "equal" for sums of ~1e17 in double

// ---------------------------------------------------------------------------------
// Scenarios.
// ---------------------------------------------------------------------------------
Scenario llama3_8b(int64_t seq, int gbs) {
  Scenario s;
  s.model = testing::llama3_8b();
  s.training.seq_length = seq;
  s.training.global_batch_size = gbs;
  s.parallel.tensor_model_parallel_size = 2;  // 128256 is a multiple of 128*2: no padding
  s.num_gpus = 16;
  return s;
}

Scenario mixtral_8x7b(int64_t seq, int gbs) {
  Scenario s = llama3_8b(seq, gbs);
  s.model = testing::mixtral_8x7b();
  s.parallel.expert_model_parallel_size = 8;
  s.num_gpus = 64;
  return s;
}

Scenario deepseek_v3_like(int64_t seq, int gbs) {
  Scenario s;
  s.model = testing::deepseek_v3();
  s.training.seq_length = seq;
  s.training.global_batch_size = gbs;
  s.parallel.tensor_model_parallel_size = 8;  // pads 129280 to 130048 (multiple of 1024)
  s.parallel.expert_model_parallel_size = 8;
  s.num_gpus = 64;
  return s;
}

// ---------------------------------------------------------------------------------
// Independent transcriptions of Megatron's transformer_flops() (BSHD).
// ---------------------------------------------------------------------------------
struct GqaArgs {
  double L, h, f, a, g, dh, V, s, B;
  double E = 0, k = 0, fe = 0, fs = 0;  // all layers MoE when E > 0
  bool swiglu = true;
};

double megatron_gqa(const GqaArgs& x) {
  const double r = x.swiglu ? 3 : 2;
  const double L_moe = x.E > 0 ? x.L : 0;
  const double L_dense = x.L - L_moe;
  const double per_token =
      6 * x.h * (x.f * r * L_dense + x.fe * x.k * r * L_moe + x.fs * r * L_moe) +
      6 * (x.h * (x.a * x.dh + 2 * x.g * x.dh) + x.a * x.dh * x.h) * x.L +  // QKV + out proj
      6 * x.h * x.V;                                                         // logits
  const double core = 6 * x.a * x.dh / 2 * 2 * x.L;  // causal /2, QK^T and PV *2
  return x.B * x.s * per_token + x.B * x.s * x.s * core;
}

// DeepSeek-V3-like: 3 dense + 58 MoE layers, MTP depth 1 of the MoE kind.
double megatron_deepseek(double s, double B, double V) {
  const double h = 7168, a = 128, rq = 1536, rkv = 512, dn = 128, dr = 64, dv = 128;
  const double f = 18432, fe = 2048, fs = 2048, k = 8, mtp = 1;
  const double dense = 3, moe = 58 + mtp, layers = 61 + mtp;
  const double q = rq * (h + a * (dn + dr) + 1);
  const double kv = rkv * (h + a * (dn + dv) + 1) + h * dr;
  const double attn = 6 * (q + kv + a * dv * h);
  const double per_token = 6 * h * (f * 3 * dense + fe * k * 3 * moe + fs * 3 * moe) +
                           attn * layers + 6 * mtp * (3 * h + 2 * h * h) + 6 * h * V * (1 + mtp);
  const double core = 6 * (a * (dn + dr) / 2 + a * dv / 2) * layers;
  return B * s * per_token + B * s * s * core;
}

double router_fb(const Flops& x) { return x.fwd.router + x.bwd.router; }

// ---------------------------------------------------------------------------------
// Megatron's count.
// ---------------------------------------------------------------------------------
TEST(Flops, MegatronLlama3_8B) {
  const Scenario s = llama3_8b(8192, 128);
  const Mesh m = derive_mesh(s);
  const Flops f = count_flops(s, m);
  const double expected = megatron_gqa({.L = 32, .h = 4096, .f = 14336, .a = 32, .g = 8,
                                        .dh = 128, .V = 128256, .s = 8192, .B = 128});
  EXPECT_LT(rel(f.megatron_flops, expected), kExact);
  // Calculator check. T = 128*8192 = 1,048,576 tokens. Per token, per 6:
  //   MLP    4096*14336*3*32            = 5,637,144,576
  //   attn  (4096*(4096+2048) + 4096^2)*32 = 1,342,177,280
  //   logits 4096*128256                 =   525,336,576   -> 7,504,658,432
  //   linear 6*T*7,504,658,432           = 47,215,228,319,956,992
  //   core   128*8192^2*6*32*128*32      =  6,755,399,441,055,744
  //   total                              = 53,970,627,761,012,736 (5.397e16 per step)
  EXPECT_LT(rel(f.megatron_flops, 53'970'627'761'012'736.0), kExact);
  // Dense, causal, no recompute: lcm's model FLOPs are Megatron's.
  EXPECT_LT(rel(f.model_flops, f.megatron_flops), kExact);
  EXPECT_DOUBLE_EQ(f.per_step, f.model_flops);
  EXPECT_DOUBLE_EQ(f.fwd.router, 0);
}

TEST(Flops, MegatronMixtral8x7B) {
  const Scenario s = mixtral_8x7b(4096, 256);
  const Mesh m = derive_mesh(s);
  const Flops f = count_flops(s, m);
  const double expected =
      megatron_gqa({.L = 32, .h = 4096, .f = 14336, .a = 32, .g = 8, .dh = 128, .V = 32000,
                    .s = 4096, .B = 256, .E = 8, .k = 2, .fe = 14336});
  EXPECT_LT(rel(f.megatron_flops, expected), kExact);
  // The router GEMM (2*T*h*E per MoE layer forward) is counted, but not by Megatron.
  const double tokens = 256.0 * 4096;
  EXPECT_DOUBLE_EQ(f.fwd.router, 2 * tokens * 4096 * 8 * 32);
  EXPECT_DOUBLE_EQ(f.bwd.router, 2 * f.fwd.router);
  EXPECT_LT(rel(f.model_flops - router_fb(f), f.megatron_flops), kExact);
  // Routed experts: top-2 of 8, SwiGLU.
  EXPECT_DOUBLE_EQ(f.fwd.routed_experts, 2 * tokens * 3 * 4096 * 14336 * 2 * 32);
  EXPECT_DOUBLE_EQ(f.fwd.dense_mlp, 0);
}

TEST(Flops, MegatronDeepSeekV3LikeMlaMoeMtp) {
  const Scenario s = deepseek_v3_like(4096, 64);
  const Mesh m = derive_mesh(s);
  ASSERT_EQ(m.padded_vocab, 130048);  // Megatron's logits run over the padded vocabulary
  const Flops f = count_flops(s, m);
  EXPECT_LT(rel(f.megatron_flops, megatron_deepseek(4096, 64, 130048)), kExact);
  EXPECT_GT(rel(f.megatron_flops, megatron_deepseek(4096, 64, 129280)), 1e-6);
  EXPECT_LT(rel(f.model_flops - router_fb(f), f.megatron_flops), kExact);
  // MTP: a MoE layer's work + eh_proj + the 3h norm term, and a second logits head.
  const double tokens = 64.0 * 4096, h = 7168;
  EXPECT_DOUBLE_EQ(f.fwd.logits, 2 * tokens * h * 130048 * 2);
  const LayerFlops moe = layer_forward_flops(s.model, 4096, true, true);
  EXPECT_LT(rel(f.fwd.mtp,
                64 * (moe.attn_proj + moe.attn_core + moe.mlp) + 2 * tokens * (2 * h * h + 3 * h)),
            kExact);
  EXPECT_DOUBLE_EQ(f.fwd.router, 2 * tokens * h * 256 * (58 + 1));
  EXPECT_DOUBLE_EQ(f.fwd.dense_mlp, 2 * tokens * 3 * h * 18432 * 3);
}

// ---------------------------------------------------------------------------------
// Conventions.
// ---------------------------------------------------------------------------------
TEST(Flops, CausalVersusFullAttention) {
  Scenario s = llama3_8b(8192, 128);
  const Flops causal = count_flops(s, derive_mesh(s));
  s.flop_convention.causal_halved = false;
  const Flops full = count_flops(s, derive_mesh(s));
  // Non-causal adds exactly the causal core once more: 6*B*s^2*L*a*d_h.
  EXPECT_LT(rel(full.model_flops - causal.model_flops, 6.0 * 128 * 8192 * 8192 * 32 * 32 * 128),
            1e-12);
  EXPECT_DOUBLE_EQ(full.fwd.attn_core, 2 * causal.fwd.attn_core);
  EXPECT_DOUBLE_EQ(full.megatron_flops, causal.megatron_flops);  // always Megatron's causal form

  // MLA + MTP: 3*B*s^2*(L+mtp)*a*(d_n+d_r+d_v).
  Scenario d = deepseek_v3_like(4096, 64);
  const Flops dc = count_flops(d, derive_mesh(d));
  d.flop_convention.causal_halved = false;
  const Flops dn = count_flops(d, derive_mesh(d));
  EXPECT_LT(rel(dn.model_flops - dc.model_flops, 3.0 * 64 * 4096 * 4096 * 62 * 128 * 320), 1e-9);
}

// Sliding-window attention (Megatron --window-size W,0 --window-attn-skip-freq N), hand-derived.
// Query i attends min(i, W) + 1 keys; in the continuum that makes a causal square s^2 / 2, a
// window covers W s - W^2 / 2 pairs: at s = 8192, W = 1024: 8388608 - 524288 = 7864320 pairs,
// 0.1171875 of s^2 (0.234375 of the causal half).
TEST(Flops, SlidingWindowAttention) {
  EXPECT_DOUBLE_EQ(windowed_pair_fraction(1024, 8192), 7864320.0 / (8192.0 * 8192.0));
  EXPECT_DOUBLE_EQ(windowed_pair_fraction(8192, 8192), 0.5);  // the window covers the sequence
  EXPECT_DOUBLE_EQ(windowed_pair_fraction(0, 8192), 0.5);

  // Which layers are windowed: layer l (1-based) unless N divides it.
  ModelSpec m = llama3_8b(1, 1).model;  // 32 dense layers
  EXPECT_DOUBLE_EQ(windowed_layer_share(m, false), 0.0);  // no window
  m.window_size = 1024;
  EXPECT_DOUBLE_EQ(windowed_layer_share(m, false), 1.0);  // N = 0: every layer
  m.window_attn_skip_freq = 2;                            // GPT-OSS: layers 2, 4, ... full
  EXPECT_DOUBLE_EQ(windowed_layer_share(m, false), 0.5);
  m.window_attn_skip_freq = 3;  // layers 3, 6, ..., 30 full: 10 of 32
  EXPECT_DOUBLE_EQ(windowed_layer_share(m, false), 22.0 / 32.0);
  // By layer kind: 3 dense layers then 5 MoE layers, N = 2: dense 1, 3 windowed (2 of 3); MoE
  // 4..8: 5 and 7 windowed (2 of 5).
  ModelSpec moe = mixtral_8x7b(1, 1).model;
  moe.num_layers = 8;
  moe.moe_layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};
  moe.window_size = 128;
  moe.window_attn_skip_freq = 2;
  EXPECT_DOUBLE_EQ(windowed_layer_share(moe, false), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(windowed_layer_share(moe, true), 2.0 / 5.0);

  // The step's attention core: every layer windowed at W = 1024, s = 8192 does 0.234375 of the
  // causal core's FLOPs; half the layers windowed, (1 + 0.234375) / 2 of it. Nothing else moves.
  Scenario s = llama3_8b(8192, 128);
  const Flops causal = count_flops(s, derive_mesh(s));
  s.model.window_size = 1024;
  const Flops all = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(all.fwd.attn_core, 0.234375 * causal.fwd.attn_core);
  EXPECT_DOUBLE_EQ(all.fwd.attn_proj, causal.fwd.attn_proj);
  EXPECT_DOUBLE_EQ(all.model_flops - causal.model_flops, 3 * (all.fwd.attn_core - causal.fwd.attn_core));
  s.model.window_attn_skip_freq = 2;
  EXPECT_DOUBLE_EQ(count_flops(s, derive_mesh(s)).fwd.attn_core, 0.5 * (1 + 0.234375) * causal.fwd.attn_core);
  // The non-causal convention doubles a windowed layer's pairs as it doubles the causal half.
  s.flop_convention.causal_halved = false;
  EXPECT_DOUBLE_EQ(count_flops(s, derive_mesh(s)).fwd.attn_core, (1 + 0.234375) * causal.fwd.attn_core);

  // One fused attention op (the schedule's): 1 x 8192 x 8192, 32 / 8 heads, d 128, half its
  // layers windowed: 2 x pairs x 32 x (128 + 128), pairs = (8192^2 / 2 + 7864320) / 2.
  AttentionShape a{1, 8192, 8192, 32, 8, 128, 128, true, 0.5};
  a.window = 1024;
  a.windowed_share = 0.5;
  EXPECT_DOUBLE_EQ(attention_core_flops(a), 2.0 * (0.5 * 8192.0 * 8192.0 * 0.5 + 0.5 * 7864320.0) * 32 * 256);
  EXPECT_DOUBLE_EQ(attention_windowed_view(a).work_fraction, 7864320.0 / (8192.0 * 8192.0));
  EXPECT_DOUBLE_EQ(attention_full_view(a).work_fraction, 0.5);
  EXPECT_EQ(attention_full_view(a).window, 0);
}

// Packed documents (training.document_length, THD): attention runs per document. Hand-derived:
// s = 8192 in documents of 1024 tokens is 8 squares of 1024^2, 1/8 of the one 8192^2 square;
// a mean of 200 tokens in 4096 rounds to 20 documents of 204 tokens (4096 / 20 = 204.8, whole
// tokens). Only the core moves, and Megatron's sum of L_i^2 (B s span) moves with it.
TEST(Flops, PackedDocumentsAttendPerDocument) {
  TrainingSpec t;
  t.seq_length = 4096;
  EXPECT_EQ(attention_span(t).docs, 1);
  EXPECT_EQ(attention_span(t).span, 4096);
  t.document_length = 200;
  EXPECT_EQ(attention_span(t).docs, 20);
  EXPECT_EQ(attention_span(t).span, 204);
  t.document_length = 4096;  // one document fills the sequence
  EXPECT_EQ(attention_span(t).docs, 1);
  t.document_length = 3000;  // 1.37 rounds to one document
  EXPECT_EQ(attention_span(t).docs, 1);
  EXPECT_EQ(attention_span(t).span, 4096);

  Scenario s = llama3_8b(8192, 128);
  const Flops whole = count_flops(s, derive_mesh(s));
  s.training.document_length = 1024;
  const Flops packed = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(packed.fwd.attn_core, whole.fwd.attn_core / 8);
  EXPECT_DOUBLE_EQ(packed.bwd.attn_core, whole.bwd.attn_core / 8);
  EXPECT_DOUBLE_EQ(packed.fwd.attn_proj, whole.fwd.attn_proj);
  EXPECT_DOUBLE_EQ(packed.fwd.dense_mlp, whole.fwd.dense_mlp);
  // Megatron's core term 3 * 2 * sum(L_i^2) * (a d_h / 2 * 2) * L: 6 B s (s - 1024) a d_h L less.
  EXPECT_LT(rel(whole.megatron_flops - packed.megatron_flops, 6.0 * 128 * 8192 * (8192 - 1024) * 32 * 128 * 32), 1e-12);
}

TEST(Flops, FullUniformRecomputeIsFourThirdsOnLayerGemms) {
  Scenario s = llama3_8b(8192, 128);
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  const Flops f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.attn_proj, f.fwd.attn_proj);
  EXPECT_DOUBLE_EQ(f.recompute.attn_core, f.fwd.attn_core);
  EXPECT_DOUBLE_EQ(f.recompute.dense_mlp, f.fwd.dense_mlp);
  EXPECT_DOUBLE_EQ(f.recompute.logits, 0);  // the head is not inside a checkpointed layer
  const double mlp_model = f.fwd.dense_mlp + f.bwd.dense_mlp;
  EXPECT_DOUBLE_EQ((mlp_model + f.recompute.dense_mlp) / mlp_model, 4.0 / 3.0);
  const double ratio = f.hardware_flops / f.model_flops;
  EXPECT_GT(ratio, 1.30);
  EXPECT_LT(ratio, 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(f.per_step, f.model_flops);  // model FLOPs by default
  s.flop_convention.include_recompute = true;
  const Flops hw = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(hw.per_step, hw.hardware_flops);
  EXPECT_DOUBLE_EQ(hw.megatron_flops, f.megatron_flops);
}

TEST(Flops, FullBlockRecomputeFirstLayersOfEachChunk) {
  Scenario s = llama3_8b(4096, 64);
  s.parallel.pipeline_model_parallel_size = 4;  // 8 layers per stage
  s.num_gpus = 64;
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  s.parallel.recompute_num_layers = 3;
  Flops f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.attn_proj, f.fwd.attn_proj * 12 / 32);  // 3 of 8, 4 stages
  EXPECT_DOUBLE_EQ(f.recompute.dense_mlp, f.fwd.dense_mlp * 12 / 32);
  s.parallel.recompute_num_layers = 9;  // more than a stage holds: the whole stage, once
  f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.attn_proj, f.fwd.attn_proj);
  s.parallel.recompute_num_layers = 3;

  // Interleaved: pp 2 x vp 4 chunks of 4 layers; block applies per chunk: 8 x 3 = 24.
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.num_layers_per_virtual_pipeline_stage = 4;
  const Mesh m = derive_mesh(s);
  ASSERT_EQ(m.vp, 4);
  f = count_flops(s, m);
  EXPECT_DOUBLE_EQ(f.recompute.attn_proj, f.fwd.attn_proj * 24 / 32);

  s.parallel.recompute_num_layers = 9;  // more than a chunk holds: the whole chunk
  f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.attn_proj, f.fwd.attn_proj);
}

// MoE pattern + MTP under full recompute: which layers, and MTP only with uniform.
TEST(Flops, FullRecomputeMoePatternAndMtp) {
  Scenario s = deepseek_v3_like(4096, 64);
  s.model.num_layers = 8;
  s.model.moe_layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};
  s.parallel.pipeline_model_parallel_size = 2;  // layers 0-3 | 4-7
  s.num_gpus = 128;
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  s.parallel.recompute_num_layers = 2;  // layers 0,1 (dense) and 4,5 (MoE)
  const Mesh m = derive_mesh(s);
  Flops f = count_flops(s, m);
  const LayerFlops dense = layer_forward_flops(s.model, 4096, false, true);
  const LayerFlops moe = layer_forward_flops(s.model, 4096, true, true);
  EXPECT_LT(rel(f.recompute.dense_mlp, 64 * 2 * dense.mlp), kExact);
  EXPECT_LT(rel(f.recompute.routed_experts + f.recompute.shared_experts, 64 * 2 * moe.mlp), kExact);
  EXPECT_LT(rel(f.recompute.attn_proj, 64 * 4 * dense.attn_proj), kExact);
  EXPECT_DOUBLE_EQ(f.recompute.router, f.fwd.router * 2 / 6);  // 2 of 5 MoE layers + MTP
  EXPECT_DOUBLE_EQ(f.recompute.mtp, 0);  // block recompute skips MTP (Megatron warns)

  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  f = count_flops(s, m);
  EXPECT_DOUBLE_EQ(f.recompute.mtp, f.fwd.mtp);
  EXPECT_DOUBLE_EQ(f.recompute.router, f.fwd.router);
  EXPECT_DOUBLE_EQ(f.recompute.total(), f.fwd.total() - f.fwd.logits);
}

TEST(Flops, SelectiveRecomputeModules) {
  Scenario s = mixtral_8x7b(4096, 64);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn;
  Flops f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.total(), f.fwd.attn_core);

  s.parallel.recompute_modules = kRecomputeMoeAct | kRecomputeLayernorm;
  f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.total(), 0);  // elementwise only

  s.parallel.recompute_modules = kRecomputeMoe;
  f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.total(), f.fwd.routed_experts + f.fwd.router);

  s.parallel.recompute_modules = kRecomputeMlp;  // no dense MLPs in Mixtral
  f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.recompute.total(), 0);

  Scenario l = llama3_8b(4096, 64);
  l.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  l.parallel.recompute_modules = kRecomputeMlp | kRecomputeCoreAttn;
  f = count_flops(l, derive_mesh(l));
  EXPECT_DOUBLE_EQ(f.recompute.total(), f.fwd.dense_mlp + f.fwd.attn_core);

  // DeepSeek-like: shared experts and MLA up projections, MTP layer included.
  Scenario d = deepseek_v3_like(4096, 64);
  d.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  d.parallel.recompute_modules = kRecomputeSharedExperts | kRecomputeMlaUpProj;
  f = count_flops(d, derive_mesh(d));
  const double tokens = 64.0 * 4096;
  const double up = 2 * tokens * (1536.0 * 128 * 192 + 512.0 * 128 * 256);  // q_up + kv_up
  EXPECT_LT(rel(f.recompute.attn_proj, 61 * up), kExact);
  EXPECT_DOUBLE_EQ(f.recompute.shared_experts, f.fwd.shared_experts);
  EXPECT_LT(rel(f.recompute.mtp, up + 2 * tokens * 3 * 7168 * 2048), kExact);
  EXPECT_DOUBLE_EQ(f.recompute.routed_experts, 0);
}

// Training FLOPs per token ~ 6 N (N without the input embedding, with the head) + 6 L a d_h s.
TEST(Flops, SixNRuleOfThumbShortSequence) {
  const Scenario s = llama3_8b(2048, 256);
  const Flops f = count_flops(s, derive_mesh(s));
  const double tokens = 256.0 * 2048;
  const double n = 8'030'261'248.0 - 128256.0 * 4096;  // Llama3-8B without the input embedding
  EXPECT_LT(rel(f.model_flops / tokens, 6 * n), 0.05);
  EXPECT_GT(f.model_flops / tokens, 6 * n);
  // With the attention term the only gap is the norm weights (~3.5e-5).
  EXPECT_LT(rel(f.model_flops / tokens, 6 * n + 6.0 * 32 * 32 * 128 * 2048), 1e-4);
}

TEST(Flops, ContextParallelKeepsTotalsAndPerGpuDividesWorld) {
  Scenario s = llama3_8b(131072, 16);
  const Flops base = count_flops(s, derive_mesh(s));
  s.parallel.context_parallel_size = 8;
  s.num_gpus = 128;
  const Flops cp = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(cp.model_flops, base.model_flops);
  EXPECT_DOUBLE_EQ(cp.megatron_flops, base.megatron_flops);
  EXPECT_DOUBLE_EQ(cp.per_gpu_per_step, cp.per_step / 128);
  EXPECT_DOUBLE_EQ(base.per_gpu_per_step, base.per_step / 16);
  // At 128K the attention core dominates the layer GEMMs.
  EXPECT_GT(base.fwd.attn_core, base.fwd.attn_proj + base.fwd.dense_mlp);
}

TEST(Flops, BackwardIsTwiceForward) {
  const Scenario s = deepseek_v3_like(4096, 8);
  const Flops f = count_flops(s, derive_mesh(s));
  EXPECT_DOUBLE_EQ(f.bwd.total(), 2 * f.fwd.total());
  EXPECT_DOUBLE_EQ(f.bwd.attn_core, 2 * f.fwd.attn_core);
  EXPECT_DOUBLE_EQ(f.recompute.total(), 0);
  EXPECT_DOUBLE_EQ(f.hardware_flops, f.model_flops);
}

// ---------------------------------------------------------------------------------
// Per-layer forward counts (scaling table).
// ---------------------------------------------------------------------------------
TEST(Flops, LayerForwardFlops) {
  const ModelSpec llama = llama3_8b(1, 1).model;
  const double s = 8192;
  LayerFlops l = layer_forward_flops(llama, 8192, false, true);
  EXPECT_DOUBLE_EQ(l.attn_proj, 2 * s * (4096.0 * 128 * (32 + 16) + 4096.0 * 4096));
  EXPECT_DOUBLE_EQ(l.attn_core, 2 * s * s * 32 * 128);  // 4 s^2 a d_h, halved
  EXPECT_DOUBLE_EQ(l.mlp, 2 * s * 3 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(layer_forward_flops(llama, 8192, false, false).attn_core, 2 * l.attn_core);
  // At 32K the causal core already exceeds the projections.
  const LayerFlops at_32k = layer_forward_flops(llama, 32768, false, true);
  EXPECT_GT(at_32k.attn_core, at_32k.attn_proj);

  const ModelSpec mixtral = mixtral_8x7b(1, 1).model;
  l = layer_forward_flops(mixtral, 4096, true, true);
  EXPECT_DOUBLE_EQ(l.mlp, 2 * 4096.0 * 3 * 4096 * 14336 * 2);  // top-2 experts

  const ModelSpec ds = deepseek_v3_like(1, 1).model;
  l = layer_forward_flops(ds, 4096, true, true);
  EXPECT_DOUBLE_EQ(l.mlp, 2 * 4096.0 * 3 * 7168 * 2048 * (8 + 1));  // 8 routed + shared
  EXPECT_DOUBLE_EQ(l.attn_core, 4096.0 * 4096 * 128 * (192 + 128));  // 2 s^2 MACs / 2
}

}  // namespace
}  // namespace lcm
