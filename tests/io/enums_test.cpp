// The string <-> enum table: canonical spellings round-trip, aliases parse, rank orders.
#include <gtest/gtest.h>

#include "lcm/model/io/enums.hpp"

namespace lcm {
namespace {

TEST(Enums, CanonicalSpellingsRoundTrip) {
  for (auto v : {Normalization::kLayerNorm, Normalization::kRMSNorm}) EXPECT_EQ(parse_normalization(to_string(v)), v);
  for (auto v : {PositionEmbedding::kRope, PositionEmbedding::kLearnedAbsolute, PositionEmbedding::kNone})
    EXPECT_EQ(parse_position_embedding(to_string(v)), v);
  for (auto v : {RopeScalingType::kNone, RopeScalingType::kLinear, RopeScalingType::kLlama3, RopeScalingType::kYarn,
                 RopeScalingType::kDynamicNtk})
    EXPECT_EQ(parse_rope_scaling_type(to_string(v)), v);
  for (auto v : {Precision::kBf16, Precision::kFp8}) EXPECT_EQ(parse_precision(to_string(v)), v);
  for (auto v : {DType::kFp32, DType::kBf16, DType::kFp8}) EXPECT_EQ(parse_dtype(to_string(v)), v);
  for (auto v : {RouterScore::kSoftmax, RouterScore::kSigmoid}) EXPECT_EQ(parse_router_score(to_string(v)), v);
  for (auto v : {Dispatcher::kAllGather, Dispatcher::kAllToAll, Dispatcher::kFlex}) EXPECT_EQ(parse_dispatcher(to_string(v)), v);
  for (auto v : {CpCommType::kP2P, CpCommType::kAllGather, CpCommType::kA2A, CpCommType::kA2AP2P})
    EXPECT_EQ(parse_cp_comm_type(to_string(v)), v);
  for (auto v : {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads, DpSharding::kOptimGradsParams})
    EXPECT_EQ(parse_dp_sharding(to_string(v)), v);
  for (auto v : {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull})
    EXPECT_EQ(parse_recompute_granularity(to_string(v)), v);
  for (auto v : {RecomputeMethod::kUniform, RecomputeMethod::kBlock}) EXPECT_EQ(parse_recompute_method(to_string(v)), v);
  for (auto v : {AttentionBackend::kFused, AttentionBackend::kUnfused, AttentionBackend::kFlash2})
    EXPECT_EQ(parse_attention_backend(to_string(v)), v);
  for (auto v : {CrossEntropyFusionImpl::kNative, CrossEntropyFusionImpl::kTe})
    EXPECT_EQ(parse_cross_entropy_fusion_impl(to_string(v)), v);
}

TEST(Enums, MegatronSpellingsAndAliases) {
  EXPECT_EQ(to_string(Normalization::kRMSNorm), "RMSNorm");
  EXPECT_EQ(to_string(DpSharding::kOptimGradsParams), "optim_grads_params");
  EXPECT_EQ(to_string(CpCommType::kAllGather), "all_gather");
  EXPECT_EQ(parse_cp_comm_type("allgather"), CpCommType::kAllGather);
  EXPECT_EQ(to_string(CpCommType::kA2AP2P), "a2a+p2p");
  EXPECT_EQ(parse_attention_backend("flash"), AttentionBackend::kFlash2);  // TE's flash-attn backend
  EXPECT_EQ(parse_attention_backend("cudnn"), AttentionBackend::kFused);
  EXPECT_EQ(parse_attention_backend("auto"), AttentionBackend::kFused);
  EXPECT_EQ(parse_attention_backend("local"), AttentionBackend::kUnfused);
  EXPECT_FALSE(parse_normalization("rmsnorm").has_value());
  EXPECT_FALSE(parse_dispatcher("all2all").has_value());
}

TEST(Enums, RecomputeModules) {
  const char* names[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};
  uint32_t all = 0;
  for (const char* n : names) {
    const auto m = parse_recompute_module(n);
    ASSERT_TRUE(m.has_value()) << n;
    EXPECT_EQ(to_string(*m), n);
    all |= *m;
  }
  EXPECT_EQ(recompute_module_names(all).size(), 7u);
  EXPECT_EQ(recompute_module_names(kRecomputeMoeAct | kRecomputeCoreAttn), (std::vector<std::string>{"core_attn", "moe_act"}));
  EXPECT_FALSE(parse_recompute_module("attention").has_value());
}

TEST(Enums, RankOrder) {
  const auto o = parse_rank_order("tp-cp-ep-pp-dp");
  ASSERT_TRUE(o.has_value());
  Dim arr[kNumOrderDims];
  std::copy(o->begin(), o->end(), arr);
  EXPECT_EQ(rank_order_to_string(arr), "tp-cp-ep-pp-dp");
  EXPECT_TRUE(parse_rank_order("pp-dp-ep-cp-tp").has_value());
  EXPECT_FALSE(parse_rank_order("tp-cp-ep-dp").has_value());
  EXPECT_FALSE(parse_rank_order("tp-tp-ep-dp-pp").has_value());
  EXPECT_FALSE(parse_rank_order("tp-cp-ep-dp-pp-tp").has_value());
  EXPECT_FALSE(parse_rank_order("tp-cp-xp-dp-pp").has_value());
  EXPECT_FALSE(parse_rank_order("").has_value());
}

// Megatron-Bridge's FP8 recipe names (training/mixed_precision.py) both ways.
TEST(Enums, BridgeFp8RecipeNames) {
  EXPECT_EQ(bridge_mixed_precision(Fp8Recipe::kDelayed), "bf16_with_fp8_delayed_scaling_mixed");
  EXPECT_EQ(bridge_mixed_precision(Fp8Recipe::kTensorwise), "bf16_with_fp8_current_scaling_mixed");
  EXPECT_EQ(bridge_mixed_precision(Fp8Recipe::kBlockwise), "bf16_with_fp8_subchannel_scaling_mixed");
  EXPECT_EQ(bridge_mixed_precision(Fp8Recipe::kMxfp8), "bf16_with_mxfp8_mixed");
  for (Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8})
    EXPECT_EQ(bridge_fp8_recipe(bridge_mixed_precision(r)), r) << to_string(r);
  EXPECT_EQ(bridge_fp8_recipe("fp16_with_fp8_current_scaling_mixed"), Fp8Recipe::kTensorwise);
  EXPECT_FALSE(bridge_fp8_recipe("bf16_mixed").has_value());
  EXPECT_FALSE(bridge_fp8_recipe("with_fp8_delayed_scaling_mixed").has_value());  // the prefix is required
}

}  // namespace
}  // namespace lcm
