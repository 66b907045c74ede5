// validate_scenario: Megatron-LM's layout rules (megatron/training/arguments.py
// validate_args, TransformerConfig / ModelParallelConfig __post_init__ @ d98e8a64) plus
// lcm's sanity ranges. Pure: each Problem names the scenario key ("parallel.xxx") and says
// what was expected, in Megatron's wording where Megatron has one; the loader attaches the
// file position of the key.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "lcm/model/limits.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm {

namespace {

// Collects the broken rules. The message is formatted only when its rule is broken:
// validate_scenario runs for every candidate layout of the planner's search.
class Checker {
 public:
  template <class... Args>
  void operator()(bool ok, const char* key, fmt::format_string<Args...> message, Args&&... args) {
    if (!ok) problems.push_back(Problem{key, fmt::format(message, std::forward<Args>(args)...)});
  }
  std::vector<Problem> problems;
};

bool any_moe_layer(const ModelSpec& m) {
  if (!has_moe(m)) return false;
  if (m.moe_layer_pattern.empty()) return true;
  return std::find(m.moe_layer_pattern.begin(), m.moe_layer_pattern.end(), 1) != m.moe_layer_pattern.end();
}

// A layer with a dense MLP: every layer without experts, the pattern's 0s with them.
bool any_dense_layer(const ModelSpec& m) {
  if (!has_moe(m)) return true;
  return std::find(m.moe_layer_pattern.begin(), m.moe_layer_pattern.end(), 0) != m.moe_layer_pattern.end();
}

// lcm's caps (lcm/model/limits.hpp). The loader reads every key against its cap already;
// this covers scenarios built in code and by the Megatron importer.
void check_caps(const Scenario& s, Checker& check) {
  namespace L = limits;
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ParallelSpec& p = s.parallel;
  const struct {
    const char* key;
    int64_t value;
    int64_t cap;
  } caps[] = {
      {"model.num_layers", m.num_layers, L::kNumLayers},
      {"model.hidden_size", m.hidden_size, L::kHiddenSize},
      {"model.ffn_hidden_size", m.ffn_hidden_size, L::kFfnHiddenSize},
      {"model.num_attention_heads", m.num_attention_heads, L::kAttentionHeads},
      {"model.num_query_groups", m.num_query_groups, L::kAttentionHeads},
      {"model.kv_channels", m.kv_channels, L::kHeadDim},
      {"model.vocab_size", m.vocab_size, L::kVocabSize},
      {"model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, L::kVocabSize},
      {"model.max_position_embeddings", m.max_position_embeddings, L::kSeqLength},
      {"model.rope_scaling.original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings,
       L::kSeqLength},
      {"model.num_experts", m.num_experts, L::kNumExperts},
      {"model.moe_ffn_hidden_size", m.moe_ffn_hidden_size, L::kFfnHiddenSize},
      {"model.moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size, L::kFfnHiddenSize},
      {"model.moe_router_num_groups", m.moe_router_num_groups, L::kNumExperts},
      {"model.q_lora_rank", m.q_lora_rank, L::kHeadDim},
      {"model.kv_lora_rank", m.kv_lora_rank, L::kHeadDim},
      {"model.qk_head_dim", m.qk_head_dim, L::kHeadDim},
      {"model.qk_pos_emb_head_dim", m.qk_pos_emb_head_dim, L::kHeadDim},
      {"model.v_head_dim", m.v_head_dim, L::kHeadDim},
      {"model.mtp_num_layers", m.mtp_num_layers, L::kMtpLayers},
      {"training.seq_length", t.seq_length, L::kSeqLength},
      {"training.micro_batch_size", t.micro_batch_size, L::kMicroBatchSize},
      {"training.global_batch_size", t.global_batch_size, L::kGlobalBatchSize},
      {"hardware.num_gpus", s.num_gpus, L::kNumGpus},
      {"parallel.tensor_model_parallel_size", p.tensor_model_parallel_size, L::kNumGpus},
      {"parallel.pipeline_model_parallel_size", p.pipeline_model_parallel_size, L::kNumGpus},
      {"parallel.context_parallel_size", p.context_parallel_size, L::kNumGpus},
      {"parallel.expert_model_parallel_size", p.expert_model_parallel_size, L::kNumGpus},
      {"parallel.expert_tensor_parallel_size", p.expert_tensor_parallel_size, L::kNumGpus},
  };
  // One scan first: the planner validates every candidate, and they are within the caps.
  if (std::all_of(std::begin(caps), std::end(caps), [](const auto& c) { return c.value <= c.cap; })) return;
  for (const auto& c : caps)
    check(c.value <= c.cap, c.key, "{} is above lcm's cap of {} for this key (docs/scenario-format.md#caps)", c.value,
          c.cap);
}

void check_sizes(const Scenario& s, Checker& check) {
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ParallelSpec& p = s.parallel;
  check(s.num_gpus > 0, "hardware.num_gpus", "num_gpus must be positive, got {}", s.num_gpus);
  check(m.num_layers > 0, "model.num_layers", "num_layers must be positive");
  check(m.hidden_size > 0, "model.hidden_size", "hidden_size must be positive");
  check(m.num_attention_heads > 0, "model.num_attention_heads", "num_attention_heads must be positive");
  check(m.num_query_groups > 0, "model.num_query_groups", "num_query_groups must be positive");
  check(m.kv_channels > 0, "model.kv_channels", "kv_channels must be positive");
  check(m.vocab_size > 0, "model.vocab_size", "vocab_size must be positive");
  check(m.make_vocab_size_divisible_by > 0, "model.make_vocab_size_divisible_by",
        "make_vocab_size_divisible_by must be positive");
  check(m.num_experts >= 0, "model.num_experts", "num_experts must be non-negative");
  check(!any_dense_layer(m) || m.ffn_hidden_size > 0, "model.ffn_hidden_size",
        "ffn_hidden_size must be positive (the model has dense MLP layers)");
  check(t.seq_length > 0, "training.seq_length", "seq_length must be positive");
  check(t.micro_batch_size > 0, "training.micro_batch_size", "micro_batch_size must be positive");
  check(t.peft != Peft::kLora || t.lora_rank > 0, "training.lora_rank",
        "peft lora needs lora_rank > 0 (Megatron-Bridge LoRA.dim, NeMo adapter_dim; both default to 32)");
  check(t.peft != Peft::kNone || t.lora_rank == 0, "training.lora_rank",
        "lora_rank applies to peft: lora only (peft is none)");
  check(t.peft != Peft::kLora || !m.multi_latent_attention || (t.lora_targets & (kLoraQkv | kLoraProj)) == 0,
        "training.lora_target_modules",
        "LoRA on multi-latent attention's projections is not modelled: target linear_fc1 / linear_fc2 only");
  check(t.document_length >= 0 && t.document_length <= t.seq_length, "training.document_length",
        "document_length ({}) must be between 0 (one document per sequence) and seq_length ({})", t.document_length,
        t.seq_length);
  check(t.document_length == 0 || t.attention_backend != AttentionBackend::kUnfused, "training.document_length",
        "packed documents (document_length > 0) run per-document attention in the fused kernel (THD); "
        "attention_backend unfused masks the whole sequence instead");
  check(p.context_parallel_size <= 1 || t.attention_backend != AttentionBackend::kUnfused, "training.attention_backend",
        "context parallelism runs in fused attention (cuDNN / FlashAttention): attention_backend unfused cannot "
        "split the sequence (Transformer Engine disables its unfused attention under context parallelism; Megatron's local "
        "attention has none)");
  check(t.global_batch_size > 0, "training.global_batch_size", "global_batch_size must be positive");
  check(p.tensor_model_parallel_size > 0, "parallel.tensor_model_parallel_size", "tensor_model_parallel_size must be positive");
  check(p.pipeline_model_parallel_size > 0, "parallel.pipeline_model_parallel_size",
        "pipeline_model_parallel_size must be positive");
  check(p.context_parallel_size > 0, "parallel.context_parallel_size", "context_parallel_size must be positive");
  check(p.expert_model_parallel_size > 0, "parallel.expert_model_parallel_size", "expert_model_parallel_size must be positive");
  check(p.expert_tensor_parallel_size >= 0, "parallel.expert_tensor_parallel_size",
        "expert_tensor_parallel_size must be positive (0: same as tensor_model_parallel_size)");
  check(p.num_layers_per_virtual_pipeline_stage >= 0 && p.num_layers_in_first_pipeline_stage >= 0 &&
            p.num_layers_in_last_pipeline_stage >= 0,
        "parallel.pipeline_model_parallel_size", "pipeline stage layer counts must be non-negative");
  const HardwareSpec& hw = s.hardware;
  check(hw.gpu.peak_bf16_flops > 0 && hw.gpu.hbm_bytes > 0 && hw.gpu.hbm_bw > 0 && hw.interconnect.gpus_per_node > 0 &&
            hw.interconnect.nvlink_bw > 0 && hw.interconnect.nic_bw > 0,
        "hardware.profile", "the hardware profile has no peak FLOP/s, HBM size/bandwidth or link bandwidths");
  check(t.precision != Precision::kFp8 || hw.gpu.peak_fp8_flops > 0, "training.precision",
        "precision fp8 needs a hardware profile with peak_fp8_dense_TFLOPs ({} has none)", hw.name);
  check(t.fp8_recipe == Fp8Recipe::kDelayed || t.precision == Precision::kFp8, "training.fp8_recipe",
        "fp8_recipe (other than the default, delayed) applies to FP8 training: set training.precision fp8 "
        "(Megatron ignores --fp8-recipe without --fp8-format)");
  check(!t.fp8_param_gather || t.precision == Precision::kFp8, "training.fp8_param_gather",
        "fp8_param_gather keeps FP8 weights and applies to FP8 training: set training.precision fp8");
  check(!t.store_param_remainders || t.main_params_dtype == DType::kFp32, "training.store_param_remainders",
        "store_param_remainders splits fp32 master weights: it needs training.main_params_dtype fp32");
  check(!t.store_param_remainders || !t.fp8_param_gather, "training.store_param_remainders",
        "store_param_remainders needs bf16 weights to hold the high 16 bits; fp8_param_gather keeps FP8 weights "
        "(NeMo then stores full fp32 master weights): turn one off");
  check(!t.store_param_remainders || t.precision != Precision::kFp8 || t.fp8_recipe == Fp8Recipe::kDelayed,
        "training.store_param_remainders",
        "store_param_remainders with FP8 needs the delayed recipe: for current-scaling recipes Megatron keeps "
        "the fp32 master weights itself (use_precision_aware_optimizer_no_fp8_or_ds_fp8)");
  check(t.precision != Precision::kFp8 || t.fp8_recipe != Fp8Recipe::kMxfp8, "training.fp8_recipe",
        "mxfp8 (32-element microscaling) runs on Blackwell (sm_100 and newer) only; lcm's profiles are Hopper: "
        "use delayed, tensorwise or blockwise");
  check(t.precision != Precision::kFp8 || t.fp8_recipe != Fp8Recipe::kBlockwise || hw.efficiency.gemm_fp8_block > 0,
        "training.fp8_recipe",
        "fp8_recipe blockwise needs efficiency.gemm_fp8_block in the hardware profile ({} has none): measure "
        "`lcm-exec bench gemm --dtype fp8_block` and fit it with `lcm calibrate`",
        hw.name);
  check(t.attention_backend != AttentionBackend::kFlash2 || hw.efficiency.has_flash2_terms(),
        "training.attention_backend",
        "attention_backend flash2 needs efficiency.attention_flash2_fwd and _bwd in the hardware profile ({} has "
        "none): measure FlashAttention-2 (scripts/probe_kernels.py --only attention) and set them, or use fused",
        hw.name);
  for (const auto& [key, d] : {std::pair{"training.main_params_dtype", t.main_params_dtype},
                               std::pair{"training.exp_avg_dtype", t.exp_avg_dtype},
                               std::pair{"training.exp_avg_sq_dtype", t.exp_avg_sq_dtype}})
    check(d != DType::kFp8Block, key, "fp8_block is a GEMM operand type, not a storage type: use fp32, bf16 or fp8");
}

void check_world(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const int world = s.num_gpus, tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size,
            cp = p.context_parallel_size, ep = p.expert_model_parallel_size;
  const int etp = p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : tp;
  const int gpn = s.hardware.interconnect.gpus_per_node;
  if (gpn > 0)
    check(world % gpn == 0 || world < gpn, "hardware.num_gpus",
          "num_gpus ({}) must be a multiple of gpus_per_node ({}) of {}, or fewer than one node", world, gpn,
          s.hardware.name);
  const int64_t model_size = int64_t{tp} * pp * cp;  // sizes are capped at 2^20: no overflow
  const bool world_ok = world % model_size == 0;
  // Blame the first factor (tp, then pp, then cp) that breaks the divisibility.
  const char* world_key = world % tp != 0             ? "parallel.tensor_model_parallel_size"
                          : world % (int64_t{tp} * pp) != 0 ? "parallel.pipeline_model_parallel_size"
                                                      : "parallel.context_parallel_size";
  check(world_ok, world_key,
        "world size ({}) is not divisible by tensor_model_parallel_size * pipeline_model_parallel_size * "
        "context_parallel_size ({} * {} * {} = {})",
        world, tp, pp, cp, model_size);
  const int64_t expert_size = int64_t{etp} * ep * pp;
  const char* expert_key = world % etp != 0 ? "parallel.expert_tensor_parallel_size" : "parallel.expert_model_parallel_size";
  // With ep 1 and etp == tp the expert grid divides the world whenever the dense grid does.
  check(world % expert_size == 0 || (!world_ok && ep == 1 && etp == tp), expert_key,
        "world size ({}) is not divisible by expert_tensor_parallel_size * expert_model_parallel_size * "
        "pipeline_model_parallel_size ({} * {} * {} = {})",
        world, etp, ep, pp, expert_size);
  if (world_ok) {
    const auto dp = static_cast<int>(world / model_size);
    check(t.global_batch_size % (static_cast<int64_t>(t.micro_batch_size) * dp) == 0, "training.global_batch_size",
          "global_batch_size ({}) is not divisible by micro_batch_size ({}) times data_parallel_size ({})",
          t.global_batch_size, t.micro_batch_size, dp);
    // Megatron-Core's interleaved schedule walks micro-batches in groups of
    // microbatch_group_size_per_vp_stage N (default pp): pp <= N <= micro-batches, and the
    // remainder of the micro-batches over N is 0 or at least pp (otherwise it raises).
    const ParallelSpec& par = s.parallel;
    const int slots = s.model.num_layers + (par.account_for_embedding_in_pipeline_split ? 1 : 0) +
                      (par.account_for_loss_in_pipeline_split ? 1 : 0);
    const int per_stage_layers = par.num_layers_per_virtual_pipeline_stage;
    const bool interleaved =
        pp > 1 && (static_cast<int>(par.pipeline_layout.size()) > pp ||
                   (par.pipeline_layout.empty() && per_stage_layers > 0 && slots / pp > per_stage_layers));
    const int64_t per_pipeline = static_cast<int64_t>(t.micro_batch_size) * dp;
    if (interleaved && per_pipeline > 0 && t.global_batch_size % per_pipeline == 0) {
      const int64_t micro_batches = t.global_batch_size / per_pipeline;
      const int group = par.microbatch_group_size_per_vp_stage;
      if (group == 0) {
        check(micro_batches % pp == 0, "training.global_batch_size",
              "with an interleaved (virtual) pipeline the number of micro-batches ({} = global_batch_size {} / "
              "(micro_batch_size {} * data_parallel_size {})) must be a multiple of pipeline_model_parallel_size ({}){}",
              micro_batches, t.global_batch_size, t.micro_batch_size, dp, pp,
              micro_batches > pp ? " (or set microbatch_group_size_per_virtual_pipeline_stage)" : "");
      } else if (group < pp || group > micro_batches) {
        check(false, "parallel.microbatch_group_size_per_virtual_pipeline_stage",
              "The number of contiguous micro-batches in a virtual pipeline stage ({}) should range in [PP={}, M={}]",
              group, pp, micro_batches);
      } else {
        const int64_t rest = micro_batches % group;
        check(rest == 0 || rest >= pp, "parallel.microbatch_group_size_per_virtual_pipeline_stage",
              "The remainder of M ({} micro-batches) divided by N ({}, the micro-batches per virtual pipeline "
              "stage) should be 0, or larger than or equal to the pipeline-parallel size ({}), but it is {}",
              micro_batches, group, pp, rest);
      }
    }
  }
  check(m.num_attention_heads % tp == 0, "model.num_attention_heads",
        "num_attention_heads ({}) must be a multiple of tensor_model_parallel_size ({})", m.num_attention_heads, tp);
  if (!m.multi_latent_attention) {
    const int g = m.num_query_groups;
    check(g % tp == 0 || tp % g == 0, "model.num_query_groups",
          "num_query_groups ({}) must be a multiple or divisor of tensor_model_parallel_size ({})", g, tp);
    check(m.num_attention_heads % g == 0, "model.num_query_groups",
          "num_attention_heads ({}) must be a multiple of num_query_groups ({})", m.num_attention_heads, g);
  }
  if (t.peft == Peft::kLora && t.lora_rank > 0) {
    check(t.lora_rank % tp == 0, "training.lora_rank",
          "lora_rank ({}) must be a multiple of tensor_model_parallel_size ({}): a column-parallel adapter shards "
          "its rank over TP",
          t.lora_rank, tp);
    if (m.num_experts > 0 && (t.lora_targets & (kLoraFc1 | kLoraFc2)))
      check(t.lora_rank % etp == 0, "training.lora_rank",
            "lora_rank ({}) must be a multiple of expert_tensor_parallel_size ({}) with adapters on the experts",
            t.lora_rank, etp);
  }
  if (cp > 1 && t.document_length > 0)
    check(t.document_length >= 2 * cp, "training.document_length",
          "document_length ({}) must be at least 2 * context_parallel_size ({}): each packed document is split "
          "into 2 * CP load-balanced chunks",
          t.document_length, 2 * cp);
  if (cp > 1)
    check(t.seq_length % (2 * cp) == 0, "training.seq_length",
          "seq_length ({}) should be a multiple of 2 * context_parallel_size ({}) if "
          "context_parallel_size > 1",
          t.seq_length, 2 * cp);
}

// A custom layout (--pipeline-model-parallel-layout): Megatron-Core's checks
// (TransformerConfig.__post_init__, PipelineParallelLayerLayout.validate_layer_layout) and
// lcm's one restriction: the MTP layers sit on the last pipeline rank, with the loss.
void check_pipeline_layout(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const std::vector<std::string>& st = p.pipeline_layout;
  const int pp = p.pipeline_model_parallel_size;
  const char* key = "parallel.pipeline_model_parallel_layout";
  check(p.num_layers_in_first_pipeline_stage == 0 && p.num_layers_in_last_pipeline_stage == 0 &&
            p.num_layers_per_virtual_pipeline_stage == 0 && !p.account_for_embedding_in_pipeline_split &&
            !p.account_for_loss_in_pipeline_split,
        key,
        "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments "
        "(num_layers_in_first/last_pipeline_stage, num_layers_per_virtual_pipeline_stage, "
        "account_for_embedding/loss_in_pipeline_split)");
  const int n = static_cast<int>(st.size());
  if (n > static_cast<int>(limits::kNumLayers)) {  // as many virtual stages as num_layers_per_virtual_pipeline_stage allows
    check(false, key, "pipeline_model_parallel_layout has {} stages; lcm's cap is {}", n, limits::kNumLayers);
    return;
  }
  if (n % pp != 0) {
    check(false, key, "pipeline_model_parallel_layout has {} stages, not divisible by pipeline_model_parallel_size {}", n,
          pp);
    return;
  }
  check(pp > 1 || n == 1, key, "an interleaved (virtual) pipeline schedule needs pipeline_model_parallel_size > 1 ({} stages on 1 rank)", n);
  auto count = [&](char c) {
    int k = 0;
    for (const std::string& x : st) k += static_cast<int>(std::count(x.begin(), x.end(), c));
    return k;
  };
  check(!st.front().empty() && st.front().front() == 'E', key, "the first layer must be the embedding (E), got '{}'",
        st.front().empty() ? std::string("an empty stage") : st.front().substr(0, 1));
  check(!st.back().empty() && st.back().back() == 'L', key, "the last layer must be the loss (L), got '{}'",
        st.back().empty() ? std::string("an empty stage") : st.back().substr(st.back().size() - 1));
  check(count('E') == 1, key, "the embedding (E) must be specified exactly once, got {}", count('E'));
  check(count('L') == 1, key, "the loss (L) must be specified exactly once, got {}", count('L'));
  check(count('t') == s.model.num_layers, key, "the layout places {} transformer layers (t) but num_layers is {}",
        count('t'), s.model.num_layers);
  check(count('m') == s.model.mtp_num_layers, key, "the layout places {} MTP layers (m) but mtp_num_layers is {}",
        count('m'), s.model.mtp_num_layers);
  bool mtp_seen = false, decoder_after_mtp = false;
  for (const std::string& x : st)
    for (char c : x) {
      mtp_seen = mtp_seen || c == 'm';
      decoder_after_mtp = decoder_after_mtp || (mtp_seen && c == 't');
    }
  check(!decoder_after_mtp, key, "decoder layers (t) must be placed before MTP layers (m)");
  const std::string& last = st.back();
  check(count('m') == static_cast<int>(std::count(last.begin(), last.end(), 'm')), key,
        "lcm models the MTP layers on the last pipeline rank's last virtual stage, with the loss (L): put every 'm' "
        "in the last stage");
}

void check_pipeline(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const int L = s.model.num_layers, pp = p.pipeline_model_parallel_size;
  const int first = p.num_layers_in_first_pipeline_stage, last = p.num_layers_in_last_pipeline_stage;
  const int vl = p.num_layers_per_virtual_pipeline_stage;
  if (pp <= 0 || L <= 0) return;
  if (!p.pipeline_layout.empty()) {
    check_pipeline_layout(s, check);
    return;
  }
  if (first > 0 || last > 0) {
    // Megatron-Core TransformerConfig.__post_init__ raises on the combination.
    check(!p.account_for_embedding_in_pipeline_split && !p.account_for_loss_in_pipeline_split,
          p.account_for_embedding_in_pipeline_split ? "parallel.account_for_embedding_in_pipeline_split"
                                                    : "parallel.account_for_loss_in_pipeline_split",
          "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set at the same time "
          "with account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split");
    const int middle_layers = L - first - last;
    const int middle_stages = pp - (first > 0) - (last > 0);
    check(middle_layers >= 0 && (middle_layers > 0) == (middle_stages > 0),
          first > 0 ? "parallel.num_layers_in_first_pipeline_stage" : "parallel.num_layers_in_last_pipeline_stage",
          "Mismatch: {} middle layers remaining but {} middle PP stages available (num_layers {}, "
          "first stage {}, last stage {}, pipeline_model_parallel_size {})",
          middle_layers, middle_stages, L, first, last, pp);
    if (middle_stages > 0 && middle_layers > 0)
      check(middle_layers % middle_stages == 0, "model.num_layers",
            "number of layers at middle stage: {} must be divisible by the middle pipeline model "
            "parallel size {}",
            middle_layers, middle_stages);
    check(vl == 0, "parallel.num_layers_per_virtual_pipeline_stage",
          "num_layers_per_virtual_pipeline_stage cannot be combined with num_layers_in_first/last_pipeline_stage "
          "(Megatron needs --num-virtual-stages-per-pipeline-rank there, which lcm does not model)");
    return;
  }
  const int n = L + (p.account_for_embedding_in_pipeline_split ? 1 : 0) + (p.account_for_loss_in_pipeline_split ? 1 : 0);
  if (n % pp != 0) {
    const std::string what = n == L ? fmt::format("{}", L) : fmt::format("{} (num_layers {} + embedding/loss)", n, L);
    check(false, "model.num_layers", "number of layers ({}) should be divisible by the pipeline-model-parallel size ({})",
          what, pp);
  }
  if (vl > 0) {
    check(pp > 1, "parallel.num_layers_per_virtual_pipeline_stage",
          "an interleaved (virtual) pipeline schedule needs pipeline_model_parallel_size > 1");
    if (n % pp == 0)
      check((n / pp) % vl == 0, "parallel.num_layers_per_virtual_pipeline_stage",
            "number of layers per pipeline stage ({}) must be divisible by number of layers per virtual "
            "pipeline stage ({})",
            n / pp, vl);
  }
}

void check_context_parallel(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const int cp = p.context_parallel_size, tp = p.tensor_model_parallel_size;
  const auto& h = p.hierarchical_context_parallel_sizes;
  if (!h.empty()) {
    const int64_t prod = std::accumulate(h.begin(), h.end(), int64_t{1}, std::multiplies<int64_t>());
    check(prod == cp, "parallel.hierarchical_context_parallel_sizes",
          "context_parallel_size ({}) must equal the product of hierarchical_context_parallel_sizes ({})", cp, prod);
  }
  if (cp <= 1 || tp <= 0) return;
  const int heads_per_tp = s.model.num_attention_heads / tp;
  if (p.cp_comm_type == CpCommType::kA2A)
    check(heads_per_tp % cp == 0, "parallel.cp_comm_type",
          "cp_comm_type a2a scatters heads over the CP group: attention heads per TP rank ({}) must be "
          "divisible by context_parallel_size ({})",
          heads_per_tp, cp);
  if (p.cp_comm_type == CpCommType::kA2AP2P) {
    check(h.size() == 2, "parallel.hierarchical_context_parallel_sizes",
          "hierarchical_context_parallel_sizes [a2a_size, p2p_size] must be set when a2a+p2p is used in cp comm");
    if (h.size() == 2 && h[0] > 0)
      check(heads_per_tp % h[0] == 0, "parallel.cp_comm_type",
            "cp_comm_type a2a+p2p: attention heads per TP rank ({}) must be divisible by the a2a size ({})",
            heads_per_tp, h[0]);
  }
}

void check_moe(const Scenario& s, Checker& check) {
  const ModelSpec& m = s.model;
  const ParallelSpec& p = s.parallel;
  const int ep = p.expert_model_parallel_size, tp = p.tensor_model_parallel_size;
  if (!m.moe_layer_pattern.empty()) {
    check(static_cast<int>(m.moe_layer_pattern.size()) == m.num_layers, "model.moe_layer_freq",
          "moe_layer_freq lists {} layers but num_layers is {}", m.moe_layer_pattern.size(), m.num_layers);
    const bool marks_moe = std::find(m.moe_layer_pattern.begin(), m.moe_layer_pattern.end(), 1) != m.moe_layer_pattern.end();
    check(!marks_moe || has_moe(m), "model.moe_layer_freq", "moe_layer_freq marks MoE layers but num_experts is 0");
  }
  if (ep > 1) {
    check(has_moe(m), "parallel.expert_model_parallel_size",
          "num_experts must be non None to use expert model parallelism");
    if (has_moe(m))
      check(m.num_experts % ep == 0, "model.num_experts",
            "Number of experts ({}) should be a multiple of expert_model_parallel_size ({})", m.num_experts, ep);
    if (tp > 1)
      check(p.sequence_parallel, "parallel.sequence_parallel",
            "When using expert parallelism and tensor parallelism for training, sequence parallelism must be used");
  }
  check(m.moe_routing_skew >= 0 && m.moe_routing_skew <= 64, "model.moe_routing_skew",
        "moe_routing_skew must be a Zipf exponent in [0, 64] (zipf:S)");
  check(m.moe_routing_skew == 0 || has_moe(m), "model.moe_routing_skew", "moe_routing_skew needs num_experts (an MoE model)");
  if (!has_moe(m)) return;
  check(m.moe_router_topk >= 1 && m.moe_router_topk <= m.num_experts, "model.moe_router_topk",
        "moe_router_topk ({}) must be between 1 and num_experts ({})", m.moe_router_topk, m.num_experts);
  check(m.moe_ffn_hidden_size > 0 || !any_moe_layer(m), "model.moe_ffn_hidden_size", "moe_ffn_hidden_size must be positive");
  if (m.moe_router_num_groups > 0) {
    check(m.num_experts % m.moe_router_num_groups == 0, "model.moe_router_num_groups",
          "num_experts ({}) must be divisible by moe_router_num_groups ({})", m.num_experts, m.moe_router_num_groups);
    check(m.moe_router_group_topk >= 1 && m.moe_router_group_topk <= m.moe_router_num_groups,
          "model.moe_router_group_topk", "moe_router_group_topk ({}) must be between 1 and moe_router_num_groups ({})",
          m.moe_router_group_topk, m.moe_router_num_groups);
  } else {
    check(m.moe_router_group_topk == 0, "model.moe_router_group_topk",
          "moe_router_group_topk needs moe_router_num_groups (group-limited routing)");
  }
  check(m.hidden_dropout >= 0 && m.hidden_dropout < 1, "model.hidden_dropout", "hidden_dropout must be in [0, 1)");
  check(m.attention_dropout >= 0 && m.attention_dropout < 1, "model.attention_dropout",
        "attention_dropout must be in [0, 1)");
  check(!m.moe_pad_expert_input_to_capacity || m.moe_expert_capacity_factor > 0, "model.moe_pad_expert_input_to_capacity",
        "moe_pad_expert_input_to_capacity requires moe_expert_capacity_factor");
  if (p.overlap_moe_expert_parallel_comm) {
    check(ep > 1, "parallel.overlap_moe_expert_parallel_comm",
          "overlap_moe_expert_parallel_comm is only supported with expert model parallelism");
    check(m.moe_token_dispatcher_type != Dispatcher::kAllGather, "parallel.overlap_moe_expert_parallel_comm",
          "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher");
    check(p.recompute_granularity != RecomputeGranularity::kFull, "parallel.overlap_moe_expert_parallel_comm",
          "disable full recomputation when enabling overlap_moe_expert_parallel_comm");
    check(p.pipeline_model_parallel_size == 1 || p.num_layers_per_virtual_pipeline_stage > 0 ||
              static_cast<int>(p.pipeline_layout.size()) > p.pipeline_model_parallel_size,
          "parallel.overlap_moe_expert_parallel_comm",
          "If enabling EP A2A overlap, virtual pipeline stages must be specified when pipeline_model_parallel_size > 1");
  }
}

void check_attention_and_embeddings(const Scenario& s, Checker& check) {
  const ModelSpec& m = s.model;
  if (m.multi_latent_attention) {
    check(m.kv_lora_rank > 0 && m.qk_head_dim > 0 && m.qk_pos_emb_head_dim > 0 && m.v_head_dim > 0,
          "model.multi_latent_attention",
          "multi_latent_attention needs kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim (all > 0)");
    check(m.num_query_groups == m.num_attention_heads, "model.num_query_groups",
          "Group query attention is mutually exclusive with multi latent attention");
  }
  if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute)
    check(m.max_position_embeddings >= s.training.seq_length, "model.max_position_embeddings",
          "max_position_embeddings ({}) must be greater than or equal to seq_length ({}) with "
          "learned_absolute position embeddings",
          m.max_position_embeddings, s.training.seq_length);
  if (m.rope_scaling.type != RopeScalingType::kNone)
    check(m.position_embedding_type == PositionEmbedding::kRope || m.multi_latent_attention, "model.rope_scaling",
          "rope_scaling needs position_embedding_type: rope (or multi_latent_attention)");
  // Transformer Engine runs sliding-window attention under CP with the a2a and all-gather
  // implementations only (context_parallel.py: "No support for SWA with cp_comm_type p2p,
  // a2a+p2p").
  if (m.window_size > 0 && s.parallel.context_parallel_size > 1)
    check(s.parallel.cp_comm_type == CpCommType::kA2A || s.parallel.cp_comm_type == CpCommType::kAllGather,
          "parallel.cp_comm_type",
          "sliding-window attention (model.window_size {}) runs under context parallelism with cp_comm_type a2a or "
          "all_gather only, got {}",
          m.window_size, s.parallel.cp_comm_type == CpCommType::kP2P ? "p2p" : "a2a+p2p");
  if (m.window_attn_skip_freq > 0)
    check(m.window_size > 0, "model.window_attn_skip_freq", "window_attn_skip_freq needs model.window_size");
  // Megatron's flags: --squared-relu has no gate (it asserts against --swiglu), --quick-geglu is
  // gated (it sets gated_linear_unit).
  if (m.activation == Activation::kSquaredRelu)
    check(!m.swiglu, "model.activation", "squared_relu is not gated (Megatron --squared-relu): set model.swiglu false");
  if (m.activation == Activation::kQuickGelu)
    check(m.swiglu, "model.activation", "quick_gelu is gated (Megatron --quick-geglu): set model.swiglu true");
  if (m.mtp_num_layers > 0)
    check(m.position_embedding_type != PositionEmbedding::kLearnedAbsolute, "model.mtp_num_layers",
          "Multi-Token Prediction (MTP) is not supported with learned_absolute position embedding type");
}

void check_recompute_and_overlap(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const int pp = std::max(1, p.pipeline_model_parallel_size);
  const int per_rank = (s.model.num_layers + pp - 1) / pp;
  if (p.recompute_granularity == RecomputeGranularity::kFull) {
    check(p.recompute_num_layers >= 1 && p.recompute_num_layers <= per_rank, "parallel.recompute_num_layers",
          "When using recompute_granularity: full recompute_num_layers must be between 1 and "
          "num_layers_per_pipeline_rank: {}",
          per_rank);
  } else {
    check(p.recompute_num_layers == 0, "parallel.recompute_num_layers",
          "recompute_num_layers ({}) applies only to recompute_granularity: full", p.recompute_num_layers);
  }
  if (p.recompute_granularity == RecomputeGranularity::kSelective)
    check(!(p.recompute_modules & kRecomputeMlaUpProj) || s.model.multi_latent_attention, "parallel.recompute_modules",
          "mla_up_proj in recompute_modules is only supported with multi_latent_attention");
  check(!p.tp_comm_overlap || (p.sequence_parallel && p.tensor_model_parallel_size > 1), "parallel.tp_comm_overlap",
        "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled (with "
        "tensor_model_parallel_size > 1)");
}

// CUDA graphs: Megatron-LM's rules (TransformerConfig.__post_init__, megatron/core/transformer/
// transformer_config.py, and transformer_layer.py), plus lcm's: a graph cannot hold a
// device-to-host synchronisation, so capturing a whole MoE block needs static token counts.
void check_cuda_graphs(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  const ModelSpec& m = s.model;
  const uint32_t mods = p.cuda_graph_modules;
  const char* key = "parallel.cuda_graph_modules";
  if (p.cuda_graph_impl == CudaGraphImpl::kNone) {
    check(mods == 0, key, "cuda_graph_modules has no effect without cuda_graph_impl (local or transformer_engine)");
    return;
  }
  const bool moe = has_moe(m);
  const bool full = p.cuda_graph_impl == CudaGraphImpl::kFullIteration;
  const bool whole_layer = !full && mods == 0;
  const bool static_moe = !moe || !dispatcher_syncs(m);
  if (full) {
    check(mods == 0, key, "cuda_graph_modules must be empty when cuda_graph_impl is full_iteration");
    check(static_moe, "parallel.cuda_graph_impl",
          "a full_iteration graph cannot hold the token dispatcher's device-to-host copy of its per-expert counts: set "
          "moe_pad_expert_input_to_capacity with moe_expert_capacity_factor (alltoall, or flex with hybridep)");
  } else {
    check(!(mods & kCudaGraphMoe) || !(mods & kCudaGraphMoeRouter), key,
          "cuda_graph_modules must not contain both moe and moe_router.");
    check(!(mods & kCudaGraphMoePreprocess) || (mods & kCudaGraphMoeRouter), key,
          "moe_preprocess cuda graph is only supported with moe_router cuda graph.");
    if (!moe) {
      check(!(mods & (kCudaGraphMoe | kCudaGraphMoeRouter | kCudaGraphMoePreprocess)), key,
            "moe cuda graph is only supported for MoE.");
    } else {
      check(any_dense_layer(m) || !(mods & kCudaGraphMlp), key,
            "mlp cuda graph is only supported for dense layers, but not found in the model.");
      check(!(mods & kCudaGraphMoe) || (m.moe_expert_capacity_factor > 0 && m.moe_pad_expert_input_to_capacity), key,
            "moe cuda graph is only supported with drop-padding MoE.");
      check(!(mods & kCudaGraphMoePreprocess) ||
                !(m.moe_token_dispatcher_type == Dispatcher::kAllToAll && m.moe_expert_capacity_factor > 0),
            key, "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the "
                 "preprocess step.");
      check(!whole_layer || static_moe, key,
            "an empty cuda_graph_modules captures whole layers, and an MoE layer's dispatcher copies its per-expert "
            "counts to the host: list the modules to capture (e.g. [attn, moe_router, moe_preprocess]) or pad to "
            "capacity");
    }
    check(!(whole_layer || (moe && (mods & kCudaGraphMoe))) || !p.overlap_moe_expert_parallel_comm,
          "parallel.overlap_moe_expert_parallel_comm",
          "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part.");
    if (p.cuda_graph_impl == CudaGraphImpl::kTransformerEngine &&
        p.recompute_granularity == RecomputeGranularity::kSelective && (p.recompute_modules & kRecomputeMoe))
      check(!(mods & kCudaGraphMoeRouter), key,
            "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl transformer_engine.");
  }
  check(p.recompute_granularity != RecomputeGranularity::kFull || full, "parallel.recompute_granularity",
        "full recompute is only supported with full iteration CUDA graph.");
}

// The only rules that read the data-parallel sharding knobs (data_parallel_sharding_strategy,
// use_distributed_optimizer, overlap_param_gather); they run last (validate_sharding).
void check_sharding(const Scenario& s, Checker& check) {
  const ParallelSpec& p = s.parallel;
  if (p.overlap_param_gather) {
    check(p.use_distributed_optimizer || p.data_parallel_sharding_strategy != DpSharding::kNoShard,
          "parallel.overlap_param_gather", "overlap_param_gather only supported with distributed optimizer or megatron fsdp");
    check(p.overlap_grad_reduce, "parallel.overlap_param_gather", "Must use overlap_param_gather with overlap_grad_reduce");
  }
  // --fp8-param-gather (a training knob, checked here because it reads only the sharding knobs).
  check(!s.training.fp8_param_gather || p.use_distributed_optimizer ||
            p.data_parallel_sharding_strategy != DpSharding::kNoShard,
        "training.fp8_param_gather",
        "fp8_param_gather gathers FP8 weights in the distributed optimizer: set parallel.use_distributed_optimizer "
        "(or a Megatron-FSDP sharding strategy), as Megatron requires");
  check(!s.training.store_param_remainders || p.use_distributed_optimizer ||
            p.data_parallel_sharding_strategy != DpSharding::kNoShard,
        "training.store_param_remainders",
        "store_param_remainders is a sharded optimizer's storage (Apex's DistributedFusedAdam, Megatron's "
        "precision-aware distributed optimizer): set parallel.use_distributed_optimizer");
  check(!(p.use_distributed_optimizer && p.data_parallel_sharding_strategy == DpSharding::kNoShard),
        "parallel.data_parallel_sharding_strategy",
        "use_distributed_optimizer shards the optimizer state; data_parallel_sharding_strategy cannot be no_shard");
  check(s.training.peft != Peft::kLora || (p.data_parallel_sharding_strategy != DpSharding::kOptimGrads &&
                                           p.data_parallel_sharding_strategy != DpSharding::kOptimGradsParams),
        "parallel.data_parallel_sharding_strategy",
        "LoRA with Megatron-FSDP sharding (optim_grads, optim_grads_params) is not modelled: use no_shard or optim");
}

}  // namespace

LayoutValidation validate_layout(const Scenario& s) {
  Checker check;
  check_caps(s, check);
  check_sizes(s, check);
  if (!check.problems.empty()) return LayoutValidation{std::move(check.problems), false};  // later rules divide by these sizes
  check_world(s, check);
  check_pipeline(s, check);
  check_context_parallel(s, check);
  check_moe(s, check);
  check_attention_and_embeddings(s, check);
  check_recompute_and_overlap(s, check);
  check_cuda_graphs(s, check);
  return LayoutValidation{std::move(check.problems), true};
}

std::vector<Problem> validate_sharding(const Scenario& s) {
  Checker check;
  check_sharding(s, check);
  return std::move(check.problems);
}

std::vector<Problem> validate_scenario(const Scenario& s) {
  LayoutValidation v = validate_layout(s);
  if (!v.sizes_ok) return std::move(v.problems);
  std::vector<Problem> sharding = validate_sharding(s);
  v.problems.insert(v.problems.end(), std::make_move_iterator(sharding.begin()), std::make_move_iterator(sharding.end()));
  return std::move(v.problems);
}

}  // namespace lcm
