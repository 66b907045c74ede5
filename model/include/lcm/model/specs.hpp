// Input specs of the cost model: plain value structs, no I/O, no behaviour.
//
// A Scenario is the four orthogonal specs together: the model (architecture), the
// training job (sequence, batch, precision), the parallel layout (mesh and memory
// knobs) and the hardware (GPU profile plus cluster size). Field names are
// Megatron-Core's names, so YAML keys and `--set KEY=VALUE` overrides use exactly
// these spellings (docs/scenario-format.md lists every key).
//
// Units: counts are plain integers; bandwidths in bytes/s, times in seconds, memory
// in bytes, compute in FLOP/s. YAML carries unit-suffixed keys (`_GBps`, `_TFLOPs`,
// `_us`, `_GiB`) and the loader converts once, so nothing below holds a GB or a µs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace lcm {

// ---------------------------------------------------------------------------------
// Enumerations. Strings exist only in the YAML <-> enum table (model/io/enums.cpp).
// ---------------------------------------------------------------------------------
enum class Normalization { kLayerNorm, kRMSNorm };
// The MLP's elementwise function where it is not Megatron's default for the gate setting
// (GeLU; SiLU with swiglu): squared ReLU (--squared-relu, no gate: Nemotron-4) or quick-GELU
// (--quick-geglu, gated: GPT-OSS). lcm's costs depend on the gate only; the name is kept so
// that exports launch the same model.
enum class Activation { kDefault, kSquaredRelu, kQuickGelu };
enum class PositionEmbedding { kRope, kLearnedAbsolute, kNone };
enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn, kDynamicNtk };
enum class Precision { kBf16, kFp8 };
// kFp8Block: an FP8 GEMM under block scaling (Fp8Recipe::kBlockwise); a GEMM operand type, not
// a storage type (1 byte per element, like kFp8).
enum class DType { kFp32, kBf16, kFp8, kFp8Block };
inline constexpr bool is_fp8(DType d) { return d == DType::kFp8 || d == DType::kFp8Block; }
// Bytes per element of a tensor (or GEMM operand) of the type.
inline constexpr double dtype_bytes(DType d) { return is_fp8(d) ? 1.0 : d == DType::kBf16 ? 2.0 : 4.0; }
// Megatron --fp8-recipe: how Transformer Engine scales FP8 tensors. delayed (Megatron's default):
// a per-tensor scale from the amax history; tensorwise: per-tensor current scaling (an amax pass
// over each tensor before its cast); blockwise: a scale per 1x128 activation and 128x128 weight
// block (DeepSeek-V3's scheme; other cuBLASLt kernels, efficiency.gemm_fp8_block); mxfp8:
// Blackwell's microscaling (not on Hopper).
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8 };
// Parameter-efficient fine-tuning (Megatron-Bridge / NeMo `peft`): none (every weight trains)
// or LoRA (the base model frozen; low-rank adapters on the target linears train).
enum class Peft { kNone, kLora };
// LoRA target linears (Megatron-Bridge LoRA.target_modules names), as a bit set. fc1 / fc2
// adapt dense MLPs, shared experts and routed experts (one adapter per expert).
enum LoraTarget : uint32_t {
  kLoraQkv = 1u << 0,   // linear_qkv (column-parallel)
  kLoraProj = 1u << 1,  // linear_proj (row-parallel)
  kLoraFc1 = 1u << 2,   // linear_fc1 (column-parallel)
  kLoraFc2 = 1u << 3,   // linear_fc2 (row-parallel)
};
inline constexpr uint32_t kLoraAllTargets = kLoraQkv | kLoraProj | kLoraFc1 | kLoraFc2;
enum class RouterScore { kSoftmax, kSigmoid };
enum class Dispatcher { kAllGather, kAllToAll, kFlex };
// The flex dispatcher's fused all-to-all (Megatron --moe-flex-dispatcher-backend).
enum class FlexBackend { kDeepEp, kHybridEp };
enum class CpCommType { kP2P, kAllGather, kA2A, kA2AP2P };
// Megatron's data_parallel_sharding_strategy: no_shard = DDP, optim = ZeRO-1
// (== use_distributed_optimizer), optim_grads = ZeRO-2, optim_grads_params = ZeRO-3 / FSDP.
enum class DpSharding { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };
enum class RecomputeGranularity { kNone, kSelective, kFull };
enum class RecomputeMethod { kUniform, kBlock };
// fused = cuDNN's fused attention (Transformer Engine's choice on Hopper); flash2 = FlashAttention-2
// (the flash-attn package: TE with NVTE_FUSED_ATTN=0, Megatron --attention-backend flash); both
// never store the s^2 scores and differ only in speed. unfused = the s^2 kernels.
enum class AttentionBackend { kFused, kUnfused, kFlash2 };
// Megatron --cross-entropy-fusion-impl: native (megatron/core/fusions/fused_cross_entropy.py)
// or te (Transformer Engine's Triton parallel_cross_entropy).
enum class CrossEntropyFusionImpl { kNative, kTe };

// Megatron --recompute-modules, as a bit set.
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeMoeAct = 1u << 1,
  kRecomputeLayernorm = 1u << 2,
  kRecomputeMlaUpProj = 1u << 3,
  kRecomputeMlp = 1u << 4,
  kRecomputeMoe = 1u << 5,
  kRecomputeSharedExperts = 1u << 6,
};

// Megatron --cuda-graph-impl (TransformerConfig.cuda_graph_impl): per-layer graphs of
// Megatron's own CudaGraphManager (local) or Transformer Engine's make_graphed_callables
// (transformer_engine), or one graph of the whole forward-backward (full_iteration).
enum class CudaGraphImpl { kNone, kLocal, kTransformerEngine, kFullIteration };
// Megatron --cuda-graph-modules (formerly --cuda-graph-scope; CudaGraphModule): the parts of
// each layer a per-layer implementation captures, as a bit set. Empty = the whole layer.
enum CudaGraphModule : uint32_t {
  kCudaGraphAttn = 1u << 0,           // input norm, attention, its bias-dropout-add
  kCudaGraphMlp = 1u << 1,            // a dense layer's MLP
  kCudaGraphMoe = 1u << 2,            // a whole MoE block (drop-and-pad MoE only)
  kCudaGraphMoeRouter = 1u << 3,      // pre-MLP norm, router, top-k (and non-overlapped shared experts)
  kCudaGraphMoePreprocess = 1u << 4,  // the dispatcher's preprocessing / permutation (needs moe_router)
};

// Parallel dimensions, in the vocabulary of Megatron's rank order string "tp-cp-ep-dp-pp".
enum class Dim : uint8_t { kTp, kCp, kEp, kDp, kPp };
inline constexpr int kNumOrderDims = 5;

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;

  bool operator==(const RopeScaling&) const = default;
};

// ---------------------------------------------------------------------------------
// Model architecture.
// ---------------------------------------------------------------------------------
struct ModelSpec {
  std::string name;
  int num_layers = 0;
  int64_t hidden_size = 0;
  int64_t ffn_hidden_size = 0;      // dense MLP width
  int num_attention_heads = 0;
  int num_query_groups = 0;         // GQA groups; == heads for MHA
  int64_t kv_channels = 0;          // head dim; hidden/heads when not given
  int64_t vocab_size = 0;           // tokenizer vocabulary (unpadded)
  int make_vocab_size_divisible_by = 128;
  bool untie_embeddings_and_output_weights = false;
  bool swiglu = false;              // gated linear unit in MLPs and experts
  Activation activation = Activation::kDefault;
  bool add_bias_linear = true;      // Megatron-Core default; Llama-style models set false
  bool add_qkv_bias = false;
  bool qk_layernorm = false;
  Normalization normalization = Normalization::kLayerNorm;
  PositionEmbedding position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  int64_t max_position_embeddings = 0;  // learned absolute only
  double rotary_base = 10000.0;
  RopeScaling rope_scaling;
  // Sliding-window attention (Megatron --window-size W,0 and --window-attn-skip-freq N): in a
  // windowed layer query i attends keys i-W .. i. With N > 0 every layer whose 1-based number
  // is a multiple of N keeps full causal attention (GPT-OSS: N = 2, half the layers); N = 0:
  // every layer is windowed. window_size 0 = no window.
  int64_t window_size = 0;
  int window_attn_skip_freq = 0;

  // Mixture of experts (num_experts == 0: dense model).
  int num_experts = 0;
  int moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;
  int64_t moe_shared_expert_intermediate_size = 0;  // total shared width (all shared experts)
  std::vector<uint8_t> moe_layer_pattern;  // per layer: 1 = MoE layer; empty = all MoE when num_experts > 0
  double moe_expert_capacity_factor = 0.0; // <= 0: dropless
  bool moe_pad_expert_input_to_capacity = false;
  Dispatcher moe_token_dispatcher_type = Dispatcher::kAllToAll;
  FlexBackend moe_flex_dispatcher_backend = FlexBackend::kDeepEp;  // flex only (Megatron's default)
  RouterScore moe_router_score_function = RouterScore::kSoftmax;
  int moe_router_num_groups = 0;
  int moe_router_group_topk = 0;
  bool moe_router_enable_expert_bias = false;
  // Routing skew, not a Megatron knob (lcm's model.moe_routing_skew: balanced | zipf:S): the
  // Zipf exponent S of expert popularity. 0 = balanced (every expert T*k/E copies). Prices the
  // busiest EP rank's expert GEMMs, all-to-all and activations (expert_load.hpp, routed_load).
  double moe_routing_skew = 0.0;

  // Multi-latent attention (DeepSeek-V2/V3).
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;          // 0: no LoRA on Q
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 0;
  int64_t qk_pos_emb_head_dim = 0;
  int64_t v_head_dim = 0;

  int mtp_num_layers = 0;           // multi-token prediction depth

  // Dropout probabilities (Megatron-Core TransformerConfig names and defaults). Memory only:
  // p > 0 keeps a 1-byte mask per element at each dropout site (embedding, after attention,
  // after the MLP) and, in unfused attention, a mask plus a dropped-out bf16 copy of the
  // attention probabilities. Modern LLM recipes (Llama, Mixtral, DeepSeek) set both to 0.
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;

  bool operator==(const ModelSpec&) const = default;
};

// ---------------------------------------------------------------------------------
// Training job.
// ---------------------------------------------------------------------------------
struct TrainingSpec {
  int64_t seq_length = 0;
  // Packed sequences: the mean length of the documents packed into one sequence, each
  // attending only to itself (Transformer Engine's THD format, cu_seqlens). 0: one document
  // per sequence. The schedule prices round(seq_length / document_length) equal documents
  // (attention_span(), docs/op-schedule.md).
  int64_t document_length = 0;
  // LoRA (peft: lora): the frozen base runs forward and input gradients only; adapters of rank
  // lora_rank on lora_targets train (docs/op-schedule.md, "LoRA"). lora_rank is required then.
  Peft peft = Peft::kNone;
  int64_t lora_rank = 0;
  uint32_t lora_targets = kLoraAllTargets;
  int micro_batch_size = 1;
  int global_batch_size = 1;
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with precision fp8
  // Megatron --fp8-param-gather (NeMo's fp8_params): Transformer Engine keeps the linear layers'
  // weights in FP8 (1 B, with the transpose Hopper's GEMMs need) instead of bf16 weights plus
  // cached FP8 copies, and the distributed optimizer all-gathers them in FP8. FP8 training with
  // a sharded optimizer only.
  bool fp8_param_gather = false;
  AttentionBackend attention_backend = AttentionBackend::kFused;
  // Megatron --cross-entropy-loss-fusion (default off) and --cross-entropy-fusion-impl
  // (default native). Memory only: the loss buffers on the last stage (docs/memory-model.md).
  bool cross_entropy_loss_fusion = false;
  CrossEntropyFusionImpl cross_entropy_fusion_impl = CrossEntropyFusionImpl::kNative;
  // Optimizer state dtypes (Megatron --use-precision-aware-optimizer knobs).
  bool grad_reduce_in_fp32 = true;  // fp32 main grads (Megatron's default with bf16)
  DType main_params_dtype = DType::kFp32;
  // The optimizer keeps only the low 16 bits of each fp32 master weight; the bf16 weight holds
  // the high 16, so a master weight costs 2 B instead of 4. Apex's DistributedFusedAdam does it
  // in NeMo 1.0 (a bf16 O2 model with an fp32 optimizer and no fp8_params: megatron_base_model.py
  // store_param_remainders, since 2022); Megatron's --use-precision-aware-optimizer does it through
  // Transformer Engine's FusedAdam (OptimizerConfig.store_param_remainders, default on, TE >= 2.1).
  // fp32 master weights of bf16 weights, with a sharded optimizer, only.
  bool store_param_remainders = false;
  // Whether the weights can hold the high 16 bits of fp32 master weights: fp32 masters of bf16
  // weights (no fp8_param_gather), in FP8 only with the delayed recipe (for current scaling
  // Megatron keeps whole fp32 masters: use_precision_aware_optimizer_no_fp8_or_ds_fp8).
  bool param_remainders_possible() const {
    return main_params_dtype == DType::kFp32 && !fp8_param_gather &&
           (precision != Precision::kFp8 || fp8_recipe == Fp8Recipe::kDelayed);
  }
  DType exp_avg_dtype = DType::kFp32;
  DType exp_avg_sq_dtype = DType::kFp32;

  bool operator==(const TrainingSpec&) const = default;
};

// What one attention kernel sees of a sequence: `docs` documents of `span` tokens each.
// Without packing (document_length 0, or >= seq_length) one document of seq_length tokens;
// with it round(seq_length / document_length) equal documents of seq_length / docs tokens
// (whole tokens), the mean length the scenario states. Used by the op schedule's attention
// ops and by the FLOP count, so both price the same per-document squares.
struct AttentionSpan {
  int64_t docs = 1;
  int64_t span = 0;
};
inline AttentionSpan attention_span(const TrainingSpec& t) {
  if (t.document_length <= 0 || t.document_length >= t.seq_length) return {1, t.seq_length};
  const int64_t docs = std::max<int64_t>(
      1, (t.seq_length + t.document_length / 2) / t.document_length);  // round to nearest
  return {docs, t.seq_length / docs};
}

// ---------------------------------------------------------------------------------
// Parallel layout. Data-parallel sizes are derived (see mesh.hpp), never configured.
// ---------------------------------------------------------------------------------
struct ParallelSpec {
  int tensor_model_parallel_size = 1;
  bool sequence_parallel = false;
  int pipeline_model_parallel_size = 1;
  int num_layers_per_virtual_pipeline_stage = 0;  // 0: no interleaving
  int num_layers_in_first_pipeline_stage = 0;     // 0: even split
  int num_layers_in_last_pipeline_stage = 0;
  // Megatron --microbatch-group-size-per-virtual-pipeline-stage: with interleaving, how many
  // consecutive micro-batches run through one model chunk before the next; 0: pp (Megatron's
  // default). Megatron needs pp <= it <= micro-batches, the remainder 0 or >= pp.
  int microbatch_group_size_per_vp_stage = 0;
  // Megatron --pipeline-model-parallel-layout, expanded (pipeline_layout.hpp): one string of
  // E / t / m / L per (virtual) stage, stage s on rank s % pp; empty: none. Sets the virtual
  // stages itself (pp x vp stages); excludes the three knobs above and the two below.
  std::vector<std::string> pipeline_layout;
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  int context_parallel_size = 1;
  CpCommType cp_comm_type = CpCommType::kP2P;
  std::vector<int> hierarchical_context_parallel_sizes;  // a2a+p2p only: {a2a, p2p}
  int expert_model_parallel_size = 1;
  int expert_tensor_parallel_size = 0;  // 0: same as tensor_model_parallel_size
  bool use_distributed_optimizer = false;
  DpSharding data_parallel_sharding_strategy = DpSharding::kNoShard;
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int recompute_num_layers = 0;
  uint32_t recompute_modules = kRecomputeCoreAttn;  // Megatron default for selective
  // Rank order, fastest-varying first (Megatron default "tp-cp-ep-dp-pp").
  Dim order[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kDp, Dim::kPp};
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool tp_comm_overlap = false;
  bool overlap_moe_expert_parallel_comm = false;
  bool moe_fp8_dispatch = false;  // 1-byte dispatch payload (DeepSeek-V3 style)
  // CUDA graphs: captured kernels cost the host no enqueue and their modules no Python; each
  // captured region costs one graph launch per pass (step_time.cpp, layer_times).
  CudaGraphImpl cuda_graph_impl = CudaGraphImpl::kNone;
  uint32_t cuda_graph_modules = 0;  // CudaGraphModule bits; 0 = whole layer (local / transformer_engine)

  bool operator==(const ParallelSpec&) const = default;
};

// ---------------------------------------------------------------------------------
// Hardware: one GPU type in nodes of gpus_per_node behind NVSwitch, nodes on a NIC fabric.
// ---------------------------------------------------------------------------------
struct GpuSpec {
  std::string name;
  double peak_bf16_flops = 0;      // dense, FLOP/s
  double peak_fp8_flops = 0;       // dense, FLOP/s
  double hbm_bytes = 0;            // capacity, bytes
  double hbm_bw = 0;               // bytes/s
  int num_sms = 0;
  double l2_bytes = 0;

  bool operator==(const GpuSpec&) const = default;
};

struct InterconnectSpec {
  int gpus_per_node = 8;
  double nvlink_bw = 0;            // per GPU per direction, bytes/s
  double nvlink_latency = 0;       // s, per ring step, NCCL's Simple protocol
  // Per ring step over NVLink with NCCL's low-latency (LL) protocol, which NCCL picks for
  // small ring collectives (timing.cpp); used only where efficiency.nvlink_ll > 0.
  double nvlink_ll_latency = 0;    // s
  double nic_bw = 0;               // per GPU per direction, bytes/s
  double nic_latency = 0;          // s

  bool operator==(const InterconnectSpec&) const = default;
};

// Achievable fractions of peak; starting values are documented in hwprofiles/ and
// fitted by `lcm calibrate`.
struct EfficiencySpec {
  double gemm = 0.8;               // large-GEMM fraction of the dense BF16 peak
  double gemm_fp8 = 0.6;           // large-GEMM fraction of the dense FP8 peak
  // The same for block-scaled FP8 GEMMs (Fp8Recipe::kBlockwise; shape curve, tiles and fixed
  // time shared); 0: not measured for this GPU, and a blockwise scenario is refused.
  double gemm_fp8_block = 0;
  double attention_fwd = 0.65;
  double attention_bwd = 0.5;
  double hbm = 0.85;               // fraction of HBM bandwidth a copy or a GEMM's operand stream reaches
  // Fraction of HBM bandwidth a training step's memory-bound kernels reach (norms, activations,
  // permutations, the optimizer): below a plain copy's (hbm).
  double hbm_elementwise = 0.70;
  double nvlink = 0.82;            // busbw fraction of nvlink_bw for large messages
  double nic = 0.92;               // busbw fraction of nic_bw for large messages
  // Shape and size curves of the time model (timing.cpp). A GEMM dimension d runs at
  // d / (d + gemm_dim_half) of the large-GEMM efficiency (k's half-point doubles for FP8);
  // partial output tiles of gemm_tile_m x gemm_tile_n cost a full tile. Attention runs at
  // s_kv / (s_kv + attention_seq_half) of its peak fraction. A collective of S bytes runs
  // at S / (S + half_bytes) of its peak bus bandwidth.
  double gemm_dim_half = 64;
  int gemm_tile_m = 128;
  int gemm_tile_n = 256;
  double attention_seq_half = 512;
  // FlashAttention-2 (training.attention_backend flash2): its own asymptotic fractions and
  // half-point in place of attention_fwd / _bwd / _seq_half, and its own head-dim rule (below);
  // the CTA tail, L2 and dropout terms are shared with the fused kernel. 0 = the profile has none
  // (validation refuses flash2 then).
  double attention_flash2_fwd = 0;
  double attention_flash2_bwd = 0;
  double attention_flash2_seq_half = 0;
  // FlashAttention-2 at a head dim other than 128 (padded to 32-wide kernels): its efficiency
  // relative to d 128's, forward and backward; 1 = one rate for every head dim. Neither the fused
  // kernel's head-dimension curve nor its backward wide-dim exponent applies to flash2.
  double attention_flash2_other_head_dim = 1;
  // The spread of GPUs' sustained speed under the power limit (issue 12, "slowest GPU"): the
  // standard deviation, relative, of one GPU's speed against its peers' on BF16 tensor-core work
  // (GEMMs and fused attention) and on an FP8 run's GEMMs. A synchronous step waits for its
  // slowest GPU (step_time.hpp, slowest_gpu_wait). 0 = every GPU alike (optional keys).
  double gpu_speed_spread = 0;
  double gpu_speed_spread_fp8 = 0;
  bool has_flash2_terms() const { return attention_flash2_fwd > 0 && attention_flash2_bwd > 0; }
  double nvlink_half_bytes = 8.0 * 1024 * 1024;
  double nic_half_bytes = 4.0 * 1024 * 1024;
  // Head-dimension curve of attention, normalised at head dim 128 (where attention_fwd /
  // _bwd are quoted): efficiency x [d / (d + h)] / [128 / (128 + h)], d the mean of the
  // QK and V head dims; 0 = no head-dim dependence.
  double attention_head_dim_half = 0;
  // Backward kernels with head dims above 128 run smaller tiles (the dQ/dK/dV
  // accumulators outgrow the register file): backward efficiency x (128 / d)^p for
  // d > 128. 0 = off.
  double attention_bwd_wide_dim_exponent = 0;
  // Fixed GPU time of every compute kernel (GEMM, attention, memory-bound op) on top of
  // its roofline time: launch, ramp-up and tail of a kernel running back to back on a
  // stream. Seconds; 0 = none.
  double kernel_fixed = 0;
  // NCCL's fixed cost of one collective call (its base latency), on top of the per-step
  // latencies of the interconnect. Seconds; 0 = none.
  double collective_base = 0;
  // Large-message bus bandwidth over NVLink of the other collectives relative to the
  // all-reduce's (`nvlink` above): NCCL runs them with different algorithms and channel
  // counts. 1 = the same.
  double nvlink_allgather_scale = 1;  // all-gather and reduce-scatter
  double nvlink_alltoall_scale = 1;
  double nvlink_sendrecv_scale = 1;
  // Shape of NCCL's bandwidth ramp over NVLink: busbw = peak x (S / (S + half))^g. 1 = the
  // plain hyperbola; g < 1 ramps more slowly (NCCL's bandwidth still grows from 64 MiB to
  // 1 GiB on H200).
  double nvlink_ramp_exponent = 1;
  // Bus bandwidth of NCCL's low-latency (LL) protocol over NVLink as a fraction of
  // nvlink_bw: LL sends 8-byte lines of 4 data bytes and 4 flag bytes, with no pipeline to
  // fill, so small ring collectives (all-reduce, all-gather, reduce-scatter in one node)
  // take the lesser of the Simple-protocol time and collective_base + steps x
  // nvlink_ll_latency + bus bytes / (nvlink_bw x nvlink_ll), as NCCL's tuner picks the
  // faster protocol. 0 = no LL alternative.
  double nvlink_ll = 0;
  // --- Small-op regime (issue 12; timing.cpp, docs/time-model.md) ---
  // GEMM memory roofline: A, B (at the dtype's width) and C (bf16) moved at hbm_bw x hbm,
  // combined with the compute time as a smooth maximum (t_c^p + t_m^p)^(1/p): p = 1 adds
  // them (no overlap of loads and math), p -> infinity is the hard roofline maximum. 0 = no
  // memory term (compute roofline only).
  double gemm_roofline_exponent = 0;
  // Fixed GPU time of a memory-bound kernel (copy, norm, activation) in place of
  // kernel_fixed: a copy has no pipeline prologue or epilogue to fill. Seconds; 0 = kernel_fixed.
  double memory_fixed = 0;
  // Fixed GPU time of each GEMM after the first of a grouped GEMM (one GEMM per expert
  // launched back to back on one stream, as Transformer Engine's GroupedLinear and lcm-exec
  // run them): the next kernel's launch is already queued, so only the inter-kernel gap and
  // the tile ramp-up and drain remain of kernel_fixed, which is the time of a GEMM measured
  // alone. Seconds; 0 = kernel_fixed.
  double grouped_gemm_fixed = 0;
  // Fused attention: the share of the longest CTA's time (128 query rows over the keys it
  // attends) left exposed after the even share of the work: greedy scheduling of unequal
  // causal CTAs ends with a tail when there are few CTAs per SM. 0 = off.
  double attention_cta_tail = 0;
  // Sliding-window attention: keys each query row's kernel processes beyond its window (the key
  // tiles a 128-query block touches, partly masked), in tokens; the windowed kernel runs at the
  // causal curve's efficiency for W + this keys per row (timing.cpp). 0 = none.
  double attention_window_extra = 0;
  // Causal forward attention whose K and V of one KV head (s_kv x (d_qk + d_v) x 2 bytes)
  // outgrow L2: its time x (1 + attention_l2_miss_slowdown x miss), the miss share rising
  // linearly from 0 at attention_l2_miss_start x l2_bytes to 1 at attention_l2_miss_full x
  // l2_bytes (timing.cpp). A property of the die, not of HBM: the H100 and the H200 lose the
  // same ~15 % (validation/measured/h100/attention_l2/DECLARATION.md). 0 = off.
  double attention_l2_miss_slowdown = 0;
  double attention_l2_miss_start = 0;
  double attention_l2_miss_full = 0;
  // Fused attention with dropout (ModelSpec::attention_dropout > 0): the kernel draws a random
  // number for every score element it computes (Philox, on the CUDA cores) and masks with it,
  // the backward again from the same seed. That adds elements / rate to the kernel's time, at
  // these rates (score elements per second, forward and backward; timing.cpp). The added time
  // does not scale with the head dim or the kernel's FLOP rate (validation/measured/h100/dropout/).
  // 0 = not measured: dropout priced free.
  double attention_dropout_fwd_rate = 0;
  double attention_dropout_bwd_rate = 0;
  // GEMM SM fill: with fewer output tiles (gemm_tile_m x gemm_tile_n) than SMs, efficiency x
  // (tiles / num_sms)^g (split-K recovers part of the idle SMs, so g < 1). 0 = off.
  double gemm_sm_fill_exponent = 0;
  // Accumulating BF16 GEMM (C read and written, GemmShape::c_bytes 4: the router's input
  // gradient added to the tokens' gradient): L2 still holds about l2_bytes / 2 of the C the op
  // before wrote; the rest of C's read misses (miss share 1 - (l2_bytes / 2) / C), and the
  // missing part's traffic runs at this fraction of hbm_bw x hbm (timing.cpp,
  // c_bandwidth_share). 1 = off.
  double gemm_accumulate_miss_bw = 1;
  // Share of a GEMM's BF16 C write (c_bytes 2) that follows the roofline maximum instead of
  // hiding under it: each output tile's epilogue stores C after its k loop, and a persistent
  // kernel overlaps only part of that store with the next tile's math. 0 = all hidden.
  double gemm_c_write_exposed = 0;
  // SM fill of a GEMM's memory stream: with fewer output tiles than SMs, the GEMM's operand
  // traffic runs at hbm_bw x hbm x (tiles / num_sms)^f (each CTA's loads come from its own SM;
  // split-K recovers part of the idle SMs, so f < 1). 0 = off.
  double gemm_fill_bw_exponent = 0;
  // The smallest output-tile edge cuBLASLt falls back to (elements): a dimension's edge waste is
  // the lesser of gemm_tile_m / _n's and this tile's (Hopper's WGMMA covers 64 rows per
  // warpgroup; a kernel of 64-wide tiles wastes less on m = 160 or n = 320). 0 = off.
  double gemm_tile_small = 0;
  // Split-K of a GEMM with fewer output tiles than SMs (elements of k per split): cuBLASLt
  // splits a long reduction over several CTAs per output tile (split-K / stream-K), so a few-tile
  // GEMM over a long k fills min(num_sms, tiles x k / this) CTAs in the two SM-fill terms above,
  // and writes and reads back one FP32 partial C per extra split. 0 = off (no split counted).
  double gemm_split_k_chunk = 0;

  bool operator==(const EfficiencySpec&) const = default;
};

// Memory the framework does not see as allocated tensors (nvidia-smi minus max-allocated).
struct MemoryAllowances {
  double cuda_context = 0;         // bytes
  double nccl_per_communicator = 0;
  double cublas_workspace = 0;
  double fragmentation_fraction = 0;  // of allocated peak

  bool operator==(const MemoryAllowances&) const = default;
};

// A relative error interval: the measured value lies in predicted x [1 + low, 1 + high]
// for the central 80 % of a residual set (its 10th and 90th percentiles of
// measured / predicted - 1). model/uncertainty.hpp combines them (docs/time-model.md,
// "Error bands").
struct RelativeBand {
  double low = 0, high = 0;
  bool operator==(const RelativeBand&) const = default;
};

// A spread stored as data with its source (the error bands: model/src/uncertainty.cpp for the
// step time's composition term, model/src/memory.cpp for the memory model's).
struct SpreadData {
  RelativeBand band;  // 10th and 90th percentiles of measured / predicted - 1
  int rows = 0;
  const char* source = "";
  bool development_set = false;  // the rows were used to develop the model (not held out)
};

// The time model's op-level residual spreads on this hardware, per calibration class
// (hwprofiles `uncertainty:`, written by `lcm calibrate` from its cross-validated
// residuals). present == false: the profile has none (the band is the composition term only).
struct OpUncertainty {
  bool present = false;
  RelativeBand gemm_bf16, gemm_fp8, attention, memory, nvlink, nic;
  int points = 0;      // residuals the bands come from
  std::string source;  // where they come from (command, inputs, held-out or in-sample)
  bool operator==(const OpUncertainty&) const = default;
};

// Host side of a step (PyTorch eager + Megatron-Core): the CPU enqueues every kernel, and
// the GPU cannot run ahead of it; a device-to-host synchronisation empties the host's lead
// (docs/time-model.md, "Host-bound regime"). Seconds; 0 = none (the GPU is never waiting).
struct HostSpec {
  double kernel_launch = 0;   // host time per kernel enqueued (framework dispatch + cudaLaunchKernel)
  double launch_latency = 0;  // from enqueue to start of a kernel on an idle GPU
  double sync = 0;            // one device-to-host synchronisation round trip (.item(), .cpu(), event sync)
  // Python per transformer layer per pass beyond its kernels' enqueue (module calls, hooks,
  // autocast, the framework's bookkeeping): a forward and a backward. A recompute pass takes the
  // forward's in proportion to the kernels it re-runs (step_time.cpp, layer_times).
  double layer_overhead_fwd = 0;
  double layer_overhead_bwd = 0;
  // An MoE layer's extra Python beyond a dense layer's (router, token dispatcher, expert module)
  // and beyond its kernels, per forward and per backward.
  double moe_overhead_fwd = 0;
  double moe_overhead_bwd = 0;
  // The part of an MoE layer's forward Python (layer entry, router, the token dispatcher's
  // preprocessing and first permutation) that runs before the dispatcher's device-to-host
  // synchronisation, beyond the kernels lcm counts there: a pass timed by itself cannot hide it
  // under earlier GPU work (standalone_pass_seconds). Optional; 0 = the pass is one segment.
  double moe_presync_fwd = 0;
  // Python per micro-batch outside the layers, forward + backward, beyond its kernels: the
  // batch fetch, the embedding, the output layer, the loss and the schedule's per-micro-batch
  // calls. Half is charged to the stage holding the embedding, half to the stage holding the
  // loss (the same stage without pipelining; step_time.cpp, edge_times).
  double microbatch_overhead = 0;
  // Host time of replaying one CUDA graph beyond its cudaGraphLaunch (kernel_launch): the
  // framework's Python around the replay (input copies into the static buffers, bookkeeping),
  // per captured region per pass (step_time.cpp, apply_graphs). 0 = free.
  double graph_replay = 0;
  // The optimizer step's host time per parameter tensor whose optimizer shard the rank holds
  // (Megatron's distributed optimizer walks its tensors in Python: main-grad views, the copy of
  // the updated main parameters back, the norm and Adam's per-tensor work where they are not
  // fused). The step costs the larger of this x tensors and its GPU time (step_time.cpp,
  // step_op_times). 0 = free.
  double optimizer_tensor = 0;
  // Host time per iteration outside the passes and the optimizer step: the training loop's
  // Python, the learning-rate scheduler, logging and timers (charged once per step, the GPU
  // idle meanwhile; beyond `sync` and `launch_latency`, which the step's closing sync costs).
  double iteration_overhead = 0;
  // lcm-exec's host time per cuBLASLt GEMM it enqueues in its (ungated) benchmark loops: a
  // measurement floor, not a training cost. Calibration predicts such a measured GEMM as the
  // larger of its GPU time and this x its kernels (model/calibration.hpp, predict_time); the
  // step time uses kernel_launch above. 0 = no floor.
  double exec_gemm_enqueue = 0;

  bool operator==(const HostSpec&) const = default;
};

struct HardwareSpec {
  std::string name;
  GpuSpec gpu;
  InterconnectSpec interconnect;
  EfficiencySpec efficiency;
  MemoryAllowances allowances;
  OpUncertainty uncertainty;
  HostSpec host;

  bool operator==(const HardwareSpec&) const = default;
};

// Published FLOP numbers use different conventions; the convention is explicit.
struct FlopConvention {
  bool causal_halved = true;       // count causal attention as half of the full s^2 work
  bool include_recompute = false;  // false: model FLOPs; true: hardware FLOPs

  bool operator==(const FlopConvention&) const = default;
};

// The one test for a mixture-of-experts model (num_experts == 0: dense).
inline bool has_moe(const ModelSpec& m) { return m.num_experts > 0; }

struct Scenario {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  ParallelSpec parallel;
  HardwareSpec hardware;
  int num_gpus = 0;
  FlopConvention flop_convention;

  bool operator==(const Scenario&) const = default;
};

}  // namespace lcm
