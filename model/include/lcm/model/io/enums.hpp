// The one table between strings and the spec enums (specs.hpp). Spellings are
// Megatron-Core's (`RMSNorm`, `alltoall`, `optim_grads_params`, ...); the YAML loader, the
// YAML writer, the Megatron importer and the reports all go through these functions, so a
// name exists in exactly one place (model/io/enums.cpp).
//
// parse_*: exact spelling or a documented alias (e.g. cp_comm_type `allgather` for
// `all_gather`, attention_backend `flash`/`auto` for `fused`); std::nullopt otherwise.
// to_string: the canonical spelling (what the writer emits).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm {

std::string_view to_string(Normalization v);
std::string_view to_string(Activation v);
std::string_view to_string(PositionEmbedding v);
std::string_view to_string(RopeScalingType v);
std::string_view to_string(Precision v);
std::string_view to_string(DType v);
std::string_view to_string(RouterScore v);
std::string_view to_string(Dispatcher v);
std::string_view to_string(FlexBackend v);
std::string_view to_string(CpCommType v);
std::string_view to_string(DpSharding v);
std::string_view to_string(RecomputeGranularity v);
std::string_view to_string(RecomputeMethod v);
std::string_view to_string(AttentionBackend v);
std::string_view to_string(CrossEntropyFusionImpl v);
std::string_view to_string(Fp8Recipe v);
std::string_view to_string(Peft v);
std::string_view to_string(Dim v);
std::string_view to_string(CudaGraphImpl v);

std::optional<Normalization> parse_normalization(std::string_view s);
std::optional<PositionEmbedding> parse_position_embedding(std::string_view s);
std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view s);
std::optional<Precision> parse_precision(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
std::optional<RouterScore> parse_router_score(std::string_view s);
std::optional<Dispatcher> parse_dispatcher(std::string_view s);
std::optional<FlexBackend> parse_flex_backend(std::string_view s);
std::optional<CpCommType> parse_cp_comm_type(std::string_view s);
std::optional<DpSharding> parse_dp_sharding(std::string_view s);
std::optional<RecomputeGranularity> parse_recompute_granularity(std::string_view s);
std::optional<RecomputeMethod> parse_recompute_method(std::string_view s);
std::optional<AttentionBackend> parse_attention_backend(std::string_view s);
std::optional<CrossEntropyFusionImpl> parse_cross_entropy_fusion_impl(std::string_view s);
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s);
// Megatron-Bridge's mixed_precision recipe name of an FP8 recipe (bf16_with_fp8_*_mixed), and
// the recipe a name (bf16_ or fp16_ prefixed) carries; nullopt: not an FP8 recipe name.
std::string bridge_mixed_precision(Fp8Recipe r);
std::optional<Fp8Recipe> bridge_fp8_recipe(std::string_view name);
std::optional<Dim> parse_dim(std::string_view s);
std::optional<CudaGraphImpl> parse_cuda_graph_impl(std::string_view s);

// One Megatron --recompute-modules name ("core_attn", "moe_act", ...) <-> its bit.
std::optional<RecomputeModule> parse_recompute_module(std::string_view s);
std::string_view to_string(RecomputeModule m);
// The names of the bits set in `modules`, in bit order.
std::vector<std::string> recompute_module_names(uint32_t modules);
std::optional<LoraTarget> parse_lora_target(std::string_view s);
// Megatron-Bridge names of the set targets, in its order.
std::vector<std::string> lora_target_names(uint32_t targets);
// One Megatron --cuda-graph-modules name ("attn", "moe_router", ...) <-> its bit.
std::optional<CudaGraphModule> parse_cuda_graph_module(std::string_view s);
std::vector<std::string> cuda_graph_module_names(uint32_t modules);

// Rank order "tp-cp-ep-dp-pp" (fastest-varying first): any permutation of the five dims.
std::optional<std::array<Dim, kNumOrderDims>> parse_rank_order(std::string_view s);
std::string rank_order_to_string(const Dim (&order)[kNumOrderDims]);

}  // namespace lcm
