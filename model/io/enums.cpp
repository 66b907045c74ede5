// The string <-> enum tables (Megatron-Core spellings). Nothing else in lcm spells an
// enum value; see lcm/model/io/enums.hpp.
#include "lcm/model/io/enums.hpp"

#include <utility>

#include "enum_tables.hpp"

namespace lcm::io {

namespace {

// First entry of each value = canonical spelling; later entries with the same value = aliases
// (kept adjacent so spelling_list() can show them).
constexpr Spelling<Normalization> kNormalization[] = {
    {"LayerNorm", Normalization::kLayerNorm},
    {"RMSNorm", Normalization::kRMSNorm},
};
constexpr Spelling<Activation> kActivation[] = {
    {"default", Activation::kDefault},
    {"squared_relu", Activation::kSquaredRelu},
    {"quick_gelu", Activation::kQuickGelu},
};
constexpr Spelling<PositionEmbedding> kPositionEmbedding[] = {
    {"rope", PositionEmbedding::kRope},
    {"learned_absolute", PositionEmbedding::kLearnedAbsolute},
    {"none", PositionEmbedding::kNone},
};
constexpr Spelling<RopeScalingType> kRopeScalingType[] = {
    {"none", RopeScalingType::kNone},         {"linear", RopeScalingType::kLinear},
    {"llama3", RopeScalingType::kLlama3},     {"yarn", RopeScalingType::kYarn},
    {"dynamic_ntk", RopeScalingType::kDynamicNtk},
};
constexpr Spelling<Precision> kPrecision[] = {
    {"bf16", Precision::kBf16},
    {"fp8", Precision::kFp8},
};
constexpr Spelling<DType> kDType[] = {
    {"fp32", DType::kFp32},
    {"bf16", DType::kBf16},
    {"fp8", DType::kFp8},
    {"fp8_block", DType::kFp8Block},
};
constexpr Spelling<RouterScore> kRouterScore[] = {
    {"softmax", RouterScore::kSoftmax},
    {"sigmoid", RouterScore::kSigmoid},
};
constexpr Spelling<Dispatcher> kDispatcher[] = {
    {"allgather", Dispatcher::kAllGather},
    {"alltoall", Dispatcher::kAllToAll},
    {"flex", Dispatcher::kFlex},
};
constexpr Spelling<FlexBackend> kFlexBackend[] = {
    {"deepep", FlexBackend::kDeepEp},
    {"hybridep", FlexBackend::kHybridEp},
};
// Megatron-Core spells it "all_gather" (TransformerConfig.cp_comm_type); the Megatron-LM
// --cp-comm-type help text says "allgather".
constexpr Spelling<CpCommType> kCpCommType[] = {
    {"p2p", CpCommType::kP2P},
    {"all_gather", CpCommType::kAllGather},
    {"allgather", CpCommType::kAllGather},
    {"a2a", CpCommType::kA2A},
    {"a2a+p2p", CpCommType::kA2AP2P},
};
constexpr Spelling<DpSharding> kDpSharding[] = {
    {"no_shard", DpSharding::kNoShard},
    {"optim", DpSharding::kOptim},
    {"optim_grads", DpSharding::kOptimGrads},
    {"optim_grads_params", DpSharding::kOptimGradsParams},
};
constexpr Spelling<RecomputeGranularity> kRecomputeGranularity[] = {
    {"none", RecomputeGranularity::kNone},
    {"selective", RecomputeGranularity::kSelective},
    {"full", RecomputeGranularity::kFull},
};
constexpr Spelling<RecomputeMethod> kRecomputeMethod[] = {
    {"uniform", RecomputeMethod::kUniform},
    {"block", RecomputeMethod::kBlock},
};
// Megatron AttnBackend: flash, fused, unfused, local, auto. fused/auto run cuDNN's fused
// attention on Hopper (lcm: fused); flash runs Transformer Engine's FlashAttention backend, the
// flash-attn package's FlashAttention-2 (lcm: flash2); unfused/local materialise the s x s
// scores (lcm: unfused).
constexpr Spelling<AttentionBackend> kAttentionBackend[] = {
    {"fused", AttentionBackend::kFused},
    {"auto", AttentionBackend::kFused},
    {"cudnn", AttentionBackend::kFused},
    {"flash2", AttentionBackend::kFlash2},
    {"flash", AttentionBackend::kFlash2},
    {"unfused", AttentionBackend::kUnfused},
    {"local", AttentionBackend::kUnfused},
};
constexpr Spelling<Fp8Recipe> kFp8Recipe[] = {
    {"delayed", Fp8Recipe::kDelayed},
    {"tensorwise", Fp8Recipe::kTensorwise},
    {"blockwise", Fp8Recipe::kBlockwise},
    {"mxfp8", Fp8Recipe::kMxfp8},
};
constexpr Spelling<Peft> kPeft[] = {
    {"none", Peft::kNone},
    {"lora", Peft::kLora},
};
// Megatron-Bridge LoRA.target_modules names (NeMo 1.0: attention_qkv, attention_dense, mlp_fc1,
// mlp_fc2, read as the same four).
constexpr Spelling<LoraTarget> kLoraTarget[] = {
    {"linear_qkv", kLoraQkv}, {"attention_qkv", kLoraQkv}, {"linear_proj", kLoraProj}, {"attention_dense", kLoraProj},
    {"linear_fc1", kLoraFc1}, {"mlp_fc1", kLoraFc1},       {"linear_fc2", kLoraFc2},   {"mlp_fc2", kLoraFc2},
};
constexpr Spelling<CrossEntropyFusionImpl> kCrossEntropyFusionImpl[] = {
    {"native", CrossEntropyFusionImpl::kNative},
    {"te", CrossEntropyFusionImpl::kTe},
};
constexpr Spelling<Dim> kDim[] = {
    {"tp", Dim::kTp}, {"cp", Dim::kCp}, {"ep", Dim::kEp}, {"dp", Dim::kDp}, {"pp", Dim::kPp},
};
// Megatron --recompute-modules choices that lcm models (TransformerConfig.recompute_modules).
constexpr Spelling<RecomputeModule> kRecomputeModule[] = {
    {"core_attn", kRecomputeCoreAttn},
    {"moe_act", kRecomputeMoeAct},
    {"layernorm", kRecomputeLayernorm},
    {"mla_up_proj", kRecomputeMlaUpProj},
    {"mlp", kRecomputeMlp},
    {"moe", kRecomputeMoe},
    {"shared_experts", kRecomputeSharedExperts},
};

constexpr Spelling<CudaGraphImpl> kCudaGraphImpl[] = {
    {"none", CudaGraphImpl::kNone},
    {"local", CudaGraphImpl::kLocal},
    {"transformer_engine", CudaGraphImpl::kTransformerEngine},
    {"full_iteration", CudaGraphImpl::kFullIteration},
};
// Megatron CudaGraphModule names (megatron/core/transformer/enums.py) that lcm models; mamba
// layers are not expressible.
constexpr Spelling<CudaGraphModule> kCudaGraphModule[] = {
    {"attn", kCudaGraphAttn},
    {"mlp", kCudaGraphMlp},
    {"moe", kCudaGraphMoe},
    {"moe_router", kCudaGraphMoeRouter},
    {"moe_preprocess", kCudaGraphMoePreprocess},
};

template <class E, size_t N>
std::string_view name_of(const Spelling<E> (&table)[N], E v) {
  for (const auto& sp : table)
    if (sp.value == v) return sp.name;
  return "?";
}

}  // namespace

#define LCM_ENUM_TABLE(E, table) \
  template <>                    \
  std::span<const Spelling<E>> spellings<E>() { return table; }
LCM_ENUM_TABLE(Normalization, kNormalization)
LCM_ENUM_TABLE(Activation, kActivation)
LCM_ENUM_TABLE(PositionEmbedding, kPositionEmbedding)
LCM_ENUM_TABLE(RopeScalingType, kRopeScalingType)
LCM_ENUM_TABLE(Precision, kPrecision)
LCM_ENUM_TABLE(DType, kDType)
LCM_ENUM_TABLE(RouterScore, kRouterScore)
LCM_ENUM_TABLE(Dispatcher, kDispatcher)
LCM_ENUM_TABLE(FlexBackend, kFlexBackend)
LCM_ENUM_TABLE(CpCommType, kCpCommType)
LCM_ENUM_TABLE(DpSharding, kDpSharding)
LCM_ENUM_TABLE(RecomputeGranularity, kRecomputeGranularity)
LCM_ENUM_TABLE(RecomputeMethod, kRecomputeMethod)
LCM_ENUM_TABLE(AttentionBackend, kAttentionBackend)
LCM_ENUM_TABLE(CrossEntropyFusionImpl, kCrossEntropyFusionImpl)
LCM_ENUM_TABLE(Fp8Recipe, kFp8Recipe)
LCM_ENUM_TABLE(Peft, kPeft)
LCM_ENUM_TABLE(LoraTarget, kLoraTarget)
LCM_ENUM_TABLE(Dim, kDim)
LCM_ENUM_TABLE(RecomputeModule, kRecomputeModule)
LCM_ENUM_TABLE(CudaGraphImpl, kCudaGraphImpl)
LCM_ENUM_TABLE(CudaGraphModule, kCudaGraphModule)
#undef LCM_ENUM_TABLE

}  // namespace lcm::io

namespace lcm {

using io::name_of;
using io::parse_enum;

std::string_view to_string(Normalization v) { return name_of(io::kNormalization, v); }
std::string_view to_string(Activation v) { return name_of(io::kActivation, v); }
std::string_view to_string(PositionEmbedding v) { return name_of(io::kPositionEmbedding, v); }
std::string_view to_string(RopeScalingType v) { return name_of(io::kRopeScalingType, v); }
std::string_view to_string(Precision v) { return name_of(io::kPrecision, v); }
std::string_view to_string(DType v) { return name_of(io::kDType, v); }
std::string_view to_string(RouterScore v) { return name_of(io::kRouterScore, v); }
std::string_view to_string(Dispatcher v) { return name_of(io::kDispatcher, v); }
std::string_view to_string(FlexBackend v) { return name_of(io::kFlexBackend, v); }
std::string_view to_string(CpCommType v) { return name_of(io::kCpCommType, v); }
std::string_view to_string(DpSharding v) { return name_of(io::kDpSharding, v); }
std::string_view to_string(RecomputeGranularity v) { return name_of(io::kRecomputeGranularity, v); }
std::string_view to_string(RecomputeMethod v) { return name_of(io::kRecomputeMethod, v); }
std::string_view to_string(AttentionBackend v) { return name_of(io::kAttentionBackend, v); }
std::string_view to_string(CrossEntropyFusionImpl v) { return name_of(io::kCrossEntropyFusionImpl, v); }
std::string_view to_string(Fp8Recipe v) { return name_of(io::kFp8Recipe, v); }
std::string_view to_string(Peft v) { return name_of(io::kPeft, v); }
std::string_view to_string(Dim v) { return name_of(io::kDim, v); }
std::string_view to_string(CudaGraphImpl v) { return name_of(io::kCudaGraphImpl, v); }
std::string_view to_string(RecomputeModule m) { return name_of(io::kRecomputeModule, m); }

std::optional<Normalization> parse_normalization(std::string_view s) { return parse_enum<Normalization>(s); }
std::optional<PositionEmbedding> parse_position_embedding(std::string_view s) {
  return parse_enum<PositionEmbedding>(s);
}
std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view s) {
  return parse_enum<RopeScalingType>(s);
}
std::optional<Precision> parse_precision(std::string_view s) { return parse_enum<Precision>(s); }
std::optional<DType> parse_dtype(std::string_view s) { return parse_enum<DType>(s); }
std::optional<RouterScore> parse_router_score(std::string_view s) { return parse_enum<RouterScore>(s); }
std::optional<Dispatcher> parse_dispatcher(std::string_view s) { return parse_enum<Dispatcher>(s); }
std::optional<FlexBackend> parse_flex_backend(std::string_view s) { return parse_enum<FlexBackend>(s); }
std::optional<CpCommType> parse_cp_comm_type(std::string_view s) { return parse_enum<CpCommType>(s); }
std::optional<DpSharding> parse_dp_sharding(std::string_view s) { return parse_enum<DpSharding>(s); }
std::optional<RecomputeGranularity> parse_recompute_granularity(std::string_view s) {
  return parse_enum<RecomputeGranularity>(s);
}
std::optional<RecomputeMethod> parse_recompute_method(std::string_view s) {
  return parse_enum<RecomputeMethod>(s);
}
std::optional<AttentionBackend> parse_attention_backend(std::string_view s) {
  return parse_enum<AttentionBackend>(s);
}
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s) { return parse_enum<Fp8Recipe>(s); }

namespace {
// Megatron-Bridge's FP8 mixed-precision recipes (training/mixed_precision.py), less their
// bf16_ / fp16_ prefix.
constexpr std::pair<Fp8Recipe, std::string_view> kBridgeFp8Recipes[] = {
    {Fp8Recipe::kDelayed, "with_fp8_delayed_scaling_mixed"},
    {Fp8Recipe::kTensorwise, "with_fp8_current_scaling_mixed"},
    {Fp8Recipe::kBlockwise, "with_fp8_subchannel_scaling_mixed"},
    {Fp8Recipe::kMxfp8, "with_mxfp8_mixed"},
};
}  // namespace

std::string bridge_mixed_precision(Fp8Recipe r) {
  for (const auto& [recipe, suffix] : kBridgeFp8Recipes)
    if (recipe == r) return "bf16_" + std::string(suffix);
  return "bf16_mixed";
}

std::optional<Fp8Recipe> bridge_fp8_recipe(std::string_view name) {
  for (const auto& [recipe, suffix] : kBridgeFp8Recipes)
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return recipe;
  return std::nullopt;
}
std::optional<CrossEntropyFusionImpl> parse_cross_entropy_fusion_impl(std::string_view s) {
  return parse_enum<CrossEntropyFusionImpl>(s);
}
std::optional<Dim> parse_dim(std::string_view s) { return parse_enum<Dim>(s); }
std::optional<RecomputeModule> parse_recompute_module(std::string_view s) {
  return parse_enum<RecomputeModule>(s);
}

std::optional<CudaGraphImpl> parse_cuda_graph_impl(std::string_view s) { return parse_enum<CudaGraphImpl>(s); }
std::optional<CudaGraphModule> parse_cuda_graph_module(std::string_view s) { return parse_enum<CudaGraphModule>(s); }
std::vector<std::string> cuda_graph_module_names(uint32_t modules) {
  std::vector<std::string> out;
  for (const auto& sp : io::kCudaGraphModule)
    if (modules & sp.value) out.emplace_back(sp.name);
  return out;
}

std::optional<LoraTarget> parse_lora_target(std::string_view s) { return parse_enum<LoraTarget>(s); }
std::vector<std::string> lora_target_names(uint32_t targets) {
  std::vector<std::string> out;
  for (LoraTarget t : {kLoraQkv, kLoraProj, kLoraFc1, kLoraFc2})
    if (targets & t) out.emplace_back(name_of(io::kLoraTarget, t));  // the first (Megatron-Bridge) spelling
  return out;
}

std::vector<std::string> recompute_module_names(uint32_t modules) {
  std::vector<std::string> out;
  for (const auto& sp : io::kRecomputeModule)
    if (modules & sp.value) out.emplace_back(sp.name);
  return out;
}

std::optional<std::array<Dim, kNumOrderDims>> parse_rank_order(std::string_view s) {
  std::array<Dim, kNumOrderDims> order{};
  bool seen[kNumOrderDims] = {};
  int n = 0;
  size_t pos = 0;
  while (true) {
    const size_t dash = s.find('-', pos);
    const std::string_view tok = s.substr(pos, dash == std::string_view::npos ? s.npos : dash - pos);
    const auto d = parse_dim(tok);
    if (!d || n >= kNumOrderDims || seen[static_cast<int>(*d)]) return std::nullopt;
    seen[static_cast<int>(*d)] = true;
    order[n++] = *d;
    if (dash == std::string_view::npos) break;
    pos = dash + 1;
  }
  if (n != kNumOrderDims) return std::nullopt;
  return order;
}

std::string rank_order_to_string(const Dim (&order)[kNumOrderDims]) {
  std::string out;
  for (int i = 0; i < kNumOrderDims; ++i) {
    if (i) out += '-';
    out += to_string(order[i]);
  }
  return out;
}

}  // namespace lcm
