// Scaling table and the attention-vs-MLP crossover (hand-derived closed forms).
#include <gtest/gtest.h>

#include <cmath>

#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/scaling.hpp"

namespace lcm {
namespace {

Scenario scenario_for(const ModelSpec& m) {
  Scenario s;
  s.name = "scaling-test";
  s.model = m;
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 8;
  s.parallel.sequence_parallel = true;
  s.num_gpus = 8;
  s.hardware = testing::test_h100();
  return s;
}

// Dense SwiGLU layer, causal halving: attention core 2·s²·a·d_h vs MLP 2·s·3·h·f, so
// s* = 3·h·f / (a·d_h). Llama3-8B: 3·4096·14336 / (32·128) = 43008.
TEST(ScalingCrossover, DenseLlama3_8B) {
  const Crossover x = attention_mlp_crossover(testing::llama3_8b(), /*causal_halved=*/true);
  EXPECT_NEAR(x.dense_seq, 43008.0, 1e-6);
  EXPECT_EQ(x.moe_seq, 0.0);
  const Crossover full = attention_mlp_crossover(testing::llama3_8b(), /*causal_halved=*/false);
  EXPECT_NEAR(full.dense_seq, 21504.0, 1e-6);
}

// MoE layer: the MLP term uses the active experts, k·f_e (no shared experts in Mixtral):
// s* = 3·4096·(2·14336) / (32·128) = 86016.
// Sliding windows: with half the layers windowed (W = 4096) attention per layer is
// K (s^2/2 + W s - W^2/2) / 2 against the MLP's m s, where m / K = 21504 (the causal crossover
// 43008 = 2 m / K): s^2 - 4 (21504 - W / 2) s - W^2 = 0, s = (77824 + sqrt(77824^2 + 4 W^2)) / 2
// = 78039.35. Every layer windowed at W = 4096 never crosses (per token 2 W = 8192 pairs' worth
// against 43008): 0.
TEST(ScalingCrossover, SlidingWindowLayers) {
  ModelSpec m = testing::llama3_8b();
  m.window_size = 4096;
  m.window_attn_skip_freq = 2;
  const double s = (77824.0 + std::sqrt(77824.0 * 77824.0 + 4.0 * 4096.0 * 4096.0)) / 2;
  EXPECT_EQ(attention_mlp_crossover(m, true).dense_seq, std::ceil(s));
  m.window_attn_skip_freq = 0;
  EXPECT_EQ(attention_mlp_crossover(m, true).dense_seq, 0.0);
}

TEST(ScalingCrossover, MoeMixtral) {
  const Crossover x = attention_mlp_crossover(testing::mixtral_8x7b(), true);
  EXPECT_NEAR(x.moe_seq, 86016.0, 1e-6);
  EXPECT_EQ(x.dense_seq, 0.0);
}

TEST(ScalingTable, RowsFollowTheCrossover) {
  const Scenario s = scenario_for(testing::llama3_8b());
  const auto rows = scaling_table(s, {4096, 32768, 131072, 1048576});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_FALSE(rows[0].attention_dominates);
  EXPECT_FALSE(rows[1].attention_dominates);
  EXPECT_TRUE(rows[2].attention_dominates);
  EXPECT_TRUE(rows[3].attention_dominates);
  // Attention core grows with s², projections and MLP with s, per sequence.
  EXPECT_NEAR(rows[1].layer_attn_core / rows[0].layer_attn_core, 64.0, 1e-9);
  EXPECT_NEAR(rows[1].layer_mlp / rows[0].layer_mlp, 8.0, 1e-9);
  EXPECT_NEAR(rows[1].layer_attn_proj / rows[0].layer_attn_proj, 8.0, 1e-9);
  // At the crossover length the two are equal; at 4K attention is 4096/43008 of the MLP.
  EXPECT_NEAR(rows[0].layer_attn_core / rows[0].layer_mlp, 4096.0 / 43008.0, 1e-9);
  for (const ScalingRow& r : rows) {
    EXPECT_TRUE(r.layout_valid);
    EXPECT_GT(r.activation_bytes, 0.0);
  }
  // Activations grow with the sequence (fused attention: roughly linearly).
  EXPECT_GT(rows[3].activation_bytes_per_layer, 200.0 * rows[0].activation_bytes_per_layer);
}

TEST(ScalingTable, InvalidLayoutIsReportedNotComputed) {
  Scenario s = scenario_for(testing::llama3_8b());
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.context_parallel_size = 8;  // needs seq divisible by 16
  const auto rows = scaling_table(s, {4096, 4104});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].layout_valid);
  EXPECT_FALSE(rows[1].layout_valid);
  EXPECT_GT(rows[1].step_flops, rows[0].step_flops);  // FLOPs still reported
}

}  // namespace
}  // namespace lcm
