// `lcm export`: a scenario's layout as a Megatron-LM launch script, a Megatron-Bridge
// override YAML or a TorchTitan TOML job config (export_job.hpp). The files are written
// with fmt; the matching importers live in model/io (megatron_cmdline.cpp reads the
// script's argument arrays, job_import.cpp the YAML and the TOML).
#include "export_job.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::cli {

namespace {

// Thrown inside this file only: the layout cannot be expressed in the target.
struct Unexpressible {
  std::string message;
};
[[noreturn]] void cannot(std::string message) { throw Unexpressible{std::move(message)}; }

std::string num(int64_t v) { return fmt::format("{}", v); }
std::string real(double v) { return fmt::format("{}", v); }  // shortest round-trip form

// Megatron's AttnBackend for lcm's backend: auto runs cuDNN's fused attention on Hopper, flash
// Transformer Engine's FlashAttention backend (flash-attn), unfused the s x s kernels.
std::string megatron_attention_backend(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::kUnfused: return "unfused";
    case AttentionBackend::kFlash2: return "flash";
    case AttentionBackend::kFused: break;
  }
  return "auto";
}

constexpr Dim kDefaultOrder[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kDp, Dim::kPp};
constexpr Dim kPpDpOrder[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kPp, Dim::kDp};
bool order_is(const ParallelSpec& p, const Dim (&o)[kNumOrderDims]) {
  return std::equal(std::begin(o), std::end(o), p.order);
}

int data_parallel(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  return s.num_gpus / (p.tensor_model_parallel_size * p.context_parallel_size * p.pipeline_model_parallel_size);
}
int num_nodes(const Scenario& s) {
  const int per = s.hardware.interconnect.gpus_per_node;
  return (s.num_gpus + per - 1) / per;
}
int gpus_per_node(const Scenario& s) { return std::min(s.num_gpus, s.hardware.interconnect.gpus_per_node); }

// moe_layer_pattern as Megatron's --moe-layer-freq: 1 (every layer) or the run-length list
// "([0]*3+[1]*58)" that Megatron evaluates.
std::string moe_layer_freq(const ModelSpec& m) {
  const auto& p = m.moe_layer_pattern;
  if (p.empty() || std::all_of(p.begin(), p.end(), [](uint8_t v) { return v == 1; })) return "1";
  std::vector<std::string> runs;
  for (size_t i = 0; i < p.size();) {
    size_t j = i;
    while (j < p.size() && p[j] == p[i]) ++j;
    runs.push_back(fmt::format("[{}]*{}", p[i], j - i));
    i = j;
  }
  return fmt::format("({})", fmt::join(runs, "+"));
}

bool is_gqa(const ModelSpec& m) {
  return !m.multi_latent_attention && m.num_query_groups > 0 && m.num_query_groups != m.num_attention_heads;
}

// Model knobs every target writes alike; the ones Megatron itself cannot express stop here.
void check_model(const Scenario& s) {
  const ModelSpec& m = s.model;
  if (m.add_bias_linear && !m.add_qkv_bias)
    cannot(
        "add_bias_linear without add_qkv_bias: Megatron gives the QKV projection a bias whenever linear layers "
        "have one");
  const RopeScaling& r = m.rope_scaling;
  if (r.type == RopeScalingType::kDynamicNtk) cannot("rope_scaling dynamic_ntk has no Megatron-LM flag");
  if (m.multi_latent_attention) {
    if (r.type != RopeScalingType::kNone && r.type != RopeScalingType::kYarn)
      cannot(fmt::format("rope_scaling {} with multi-latent attention: Megatron's MLA takes rope or yarn",
                         to_string(r.type)));
    if (r.type == RopeScalingType::kYarn && r.original_max_position_embeddings != 4096)
      cannot(
          fmt::format("yarn original_max_position_embeddings {} with multi-latent attention: Megatron-LM's MLA "
                      "fixes it at 4096 (no flag)",
                      r.original_max_position_embeddings));
  } else if (r.type == RopeScalingType::kLlama3 && r.original_max_position_embeddings != 8192) {
    cannot(fmt::format("llama3 rope scaling with original_max_position_embeddings {}: Megatron-LM fixes it at 8192",
                       r.original_max_position_embeddings));
  } else if (r.type == RopeScalingType::kLinear && r.original_max_position_embeddings != m.max_position_embeddings) {
    cannot("linear rope scaling whose original_max_position_embeddings differs from max_position_embeddings");
  }
}

std::string header(const Scenario& s, const ExportSource& src, const char* target, const char* comment) {
  std::string h;
  auto line = [&](const std::string& text) { h += fmt::format("{} {}\n", comment, text); };
  line(fmt::format("{} job for scenario '{}' ({}), written by `lcm export`.", target, s.name, src.scenario));
  if (!src.layout.empty()) line(fmt::format("Layout: {}", src.layout));
  line(fmt::format("Layout (lcm notation): {}", plan::layout_string(plan::layout_of(s), s)));
  line(fmt::format("Cluster: {} GPUs ({}), {} node(s) of {}; data parallel {}.", s.num_gpus, s.hardware.name,
                   num_nodes(s), gpus_per_node(s), data_parallel(s)));
  return h;
}

// ---- Megatron-LM ---------------------------------------------------------------------

// One bash array of arguments, one flag (and its values) per line.
struct ArgBlock {
  std::string name;
  std::string comment;
  std::vector<std::pair<std::string, std::string>> lines;  // text, trailing comment
  void add(const std::string& flag, const std::string& value = {}, const std::string& note = {}) {
    lines.emplace_back(value.empty() ? flag : flag + " " + value, note);
  }
  std::string render() const {
    std::string out;
    if (!comment.empty()) out += "# " + comment + "\n";
    out += name + "=(\n";
    for (const auto& [text, note] : lines) out += "    " + text + (note.empty() ? "" : "  # " + note) + "\n";
    return out + ")\n";
  }
};

ArgBlock megatron_model_args(const Scenario& s) {
  const ModelSpec& m = s.model;
  ArgBlock b{"MODEL_ARGS", fmt::format("{}: architecture", m.name), {}};
  b.add("--num-layers", num(m.num_layers));
  b.add("--hidden-size", num(m.hidden_size));
  b.add("--ffn-hidden-size", num(m.ffn_hidden_size));
  b.add("--num-attention-heads", num(m.num_attention_heads));
  if (is_gqa(m)) {
    b.add("--group-query-attention");
    b.add("--num-query-groups", num(m.num_query_groups));
  }
  if (m.kv_channels > 0 && !m.multi_latent_attention) b.add("--kv-channels", num(m.kv_channels));
  b.add("--seq-length", num(s.training.seq_length));
  b.add("--max-position-embeddings",
        num(m.max_position_embeddings > 0 ? m.max_position_embeddings : s.training.seq_length));
  const RopeScaling& r = m.rope_scaling;
  const bool yarn = r.type == RopeScalingType::kYarn;
  const bool rope = m.position_embedding_type == PositionEmbedding::kRope;
  b.add("--position-embedding-type", rope && yarn && !m.multi_latent_attention
                                         ? std::string("yarn")
                                         : std::string(to_string(m.position_embedding_type)));
  if (rope) b.add("--rotary-base", real(m.rotary_base));
  if (m.multi_latent_attention) {
    b.add("--rope-type", yarn ? "yarn" : "rope");
    if (yarn) b.add("--rotary-scaling-factor", real(r.factor), "yarn, original 4096 (Megatron's MLA)");
  } else if (yarn) {
    b.add("--rotary-scaling-factor", real(r.factor));
    b.add("--yarn-original-max-position-embeddings", num(r.original_max_position_embeddings));
  } else if (r.type == RopeScalingType::kLlama3) {
    b.add("--use-rope-scaling");
    b.add("--rope-scaling-factor", real(r.factor), "Llama 3 scaling, original 8192");
  } else if (r.type == RopeScalingType::kLinear) {
    b.add("--rotary-seq-len-interpolation-factor", real(r.factor));
  }
  b.add("--normalization", std::string(to_string(m.normalization)));
  if (m.activation == Activation::kQuickGelu) b.add("--quick-geglu", {}, "gated quick-GELU");
  else if (m.activation == Activation::kSquaredRelu) b.add("--squared-relu", {}, "no gate");
  else if (m.swiglu) b.add("--swiglu");
  if (!m.add_bias_linear) b.add("--disable-bias-linear");
  if (m.add_qkv_bias && !m.add_bias_linear) b.add("--add-qkv-bias");
  if (m.qk_layernorm) b.add("--qk-layernorm");
  if (m.window_size > 0) b.add("--window-size", num(m.window_size) + ",0", "sliding window (causal)");
  if (m.window_size > 0 && m.window_attn_skip_freq > 0)
    b.add("--window-attn-skip-freq", num(m.window_attn_skip_freq), "every Nth layer full attention");
  if (m.untie_embeddings_and_output_weights) b.add("--untie-embeddings-and-output-weights");
  b.add("--hidden-dropout", real(m.hidden_dropout));
  b.add("--attention-dropout", real(m.attention_dropout));
  b.add("--make-vocab-size-divisible-by", num(m.make_vocab_size_divisible_by));
  // The tokenizer is the user's; NullTokenizer gives the embedding the scenario's size.
  b.add("--tokenizer-type", "NullTokenizer", "placeholder: set your tokenizer (and drop --vocab-size if it has one)");
  b.add("--vocab-size", num(m.vocab_size), "the scenario's vocabulary (NullTokenizer: ids 0..N-1)");
  if (m.multi_latent_attention) {
    b.add("--multi-latent-attention");
    if (m.q_lora_rank > 0) b.add("--q-lora-rank", num(m.q_lora_rank));
    b.add("--kv-lora-rank", num(m.kv_lora_rank));
    b.add("--qk-head-dim", num(m.qk_head_dim));
    b.add("--qk-pos-emb-head-dim", num(m.qk_pos_emb_head_dim));
    b.add("--v-head-dim", num(m.v_head_dim));
  }
  if (m.mtp_num_layers > 0) b.add("--mtp-num-layers", num(m.mtp_num_layers));
  if (has_moe(m)) {
    b.add("--num-experts", num(m.num_experts));
    b.add("--moe-router-topk", num(m.moe_router_topk));
    if (m.moe_ffn_hidden_size > 0) b.add("--moe-ffn-hidden-size", num(m.moe_ffn_hidden_size));
    if (m.moe_shared_expert_intermediate_size > 0)
      b.add("--moe-shared-expert-intermediate-size", num(m.moe_shared_expert_intermediate_size));
    b.add("--moe-layer-freq", fmt::format("'{}'", moe_layer_freq(m)));
    b.add("--moe-router-score-function", std::string(to_string(m.moe_router_score_function)));
    if (m.moe_router_num_groups > 0) b.add("--moe-router-num-groups", num(m.moe_router_num_groups));
    if (m.moe_router_group_topk > 0) b.add("--moe-router-group-topk", num(m.moe_router_group_topk));
    if (m.moe_router_enable_expert_bias) b.add("--moe-router-enable-expert-bias");
    if (m.moe_expert_capacity_factor > 0) {
      b.add("--moe-expert-capacity-factor", real(m.moe_expert_capacity_factor));
      b.add("--moe-token-drop-policy", "probs", "Megatron's default; lcm does not model which tokens drop");
      if (m.moe_pad_expert_input_to_capacity) b.add("--moe-pad-expert-input-to-capacity");
    }
    b.add("--moe-grouped-gemm", {}, "lcm times the experts as grouped GEMMs");
  }
  return b;
}

ArgBlock megatron_training_args(const Scenario& s) {
  const TrainingSpec& t = s.training;
  if (t.peft != Peft::kNone)
    cannot("peft lora: Megatron-LM's pretrain_gpt.py has no LoRA; export to nemo (Megatron-Bridge's peft) instead");
  if (t.document_length > 0)
    cannot(fmt::format(
        "document_length {}: packed sequences (THD, per-document attention) come from the data pipeline, and "
        "Megatron-LM's pretrain_gpt.py flags have none (--reset-attention-mask masks the whole sequence); "
        "export to nemo (Megatron-Bridge dataset.packed_sequence_specs) instead",
        t.document_length));
  ArgBlock b{"TRAINING_ARGS", "Batch and precision", {}};
  b.add("--global-batch-size", num(t.global_batch_size));
  b.add("--bf16");
  if (t.precision == Precision::kFp8) {
    b.add("--fp8-format", "hybrid", "FP8 GEMMs (E4M3 forward, E5M2 backward)");
    b.add("--fp8-recipe", std::string(to_string(t.fp8_recipe)));
    if (t.fp8_param_gather) b.add("--fp8-param-gather", "", "FP8 weights, gathered in FP8, as estimated");
  }
  b.add("--attention-backend", megatron_attention_backend(t.attention_backend),
        t.attention_backend == AttentionBackend::kUnfused  ? "materialises the s x s scores, as estimated"
        : t.attention_backend == AttentionBackend::kFlash2 ? "FlashAttention-2 (flash-attn), as estimated"
                                                           : "cuDNN fused attention, as estimated");
  if (t.cross_entropy_loss_fusion) {
    b.add("--cross-entropy-loss-fusion");
    b.add("--cross-entropy-fusion-impl", std::string(to_string(t.cross_entropy_fusion_impl)));
  }
  if (!t.grad_reduce_in_fp32) b.add("--grad-reduce-in-bf16");
  if (t.main_params_dtype != DType::kFp32 || t.exp_avg_dtype != DType::kFp32 || t.exp_avg_sq_dtype != DType::kFp32 ||
      t.store_param_remainders) {
    // Megatron has no flag for store_param_remainders: its precision-aware optimizer always keeps
    // eligible fp32 master weights as 16-bit remainders (Transformer Engine >= 2.1).
    b.add("--use-precision-aware-optimizer", "",
          t.store_param_remainders ? "fp32 master weights kept as 16-bit remainders (TE >= 2.1), as estimated"
          : t.param_remainders_possible()
              ? "TE >= 2.1 keeps the fp32 master weights as 16-bit remainders: 2 B per parameter of the optimizer "
                "shard below the estimate (training.store_param_remainders)"
              : "");
    b.add("--main-params-dtype", std::string(to_string(t.main_params_dtype)));
    b.add("--exp-avg-dtype", std::string(to_string(t.exp_avg_dtype)));
    b.add("--exp-avg-sq-dtype", std::string(to_string(t.exp_avg_sq_dtype)));
  }
  return b;
}

ArgBlock megatron_parallel_args(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  if (!order_is(p, kDefaultOrder) && !order_is(p, kPpDpOrder))
    cannot(
        fmt::format("rank order {}: Megatron-LM's flags give tp-cp-ep-dp-pp or (--use-tp-pp-dp-mapping) "
                    "tp-cp-ep-pp-dp only",
                    rank_order_to_string(p.order)));
  if (p.data_parallel_sharding_strategy == DpSharding::kNoShard && p.use_distributed_optimizer)
    cannot(
        "use_distributed_optimizer with data_parallel_sharding_strategy no_shard: Megatron's distributed "
        "optimizer shards the optimizer state (optim)");
  ArgBlock b{"PARALLEL_ARGS", "Parallel layout, recompute and overlap (plan::megatron_flags)", {}};
  const std::vector<std::string> flags = plan::megatron_flags(s);
  for (size_t i = 0; i < flags.size();) {
    std::string flag = flags[i++], value;
    while (i < flags.size() && flags[i].rfind("--", 0) != 0)
      value += (value.empty() ? "" : " ") + plan::shell_word(flags[i++]);
    b.add(flag, value);
  }
  if (p.moe_fp8_dispatch) b.add("--moe-dispatch-fwd-dtype", "mxfp8", "1-byte dispatch payload");
  return b;
}

std::string megatron_script(const Scenario& s, const ExportSource& src) {
  const ArgBlock model = megatron_model_args(s), training = megatron_training_args(s),
                 parallel = megatron_parallel_args(s);
  const ParallelSpec& p = s.parallel;
  const bool fsdp = p.data_parallel_sharding_strategy == DpSharding::kOptimGrads ||
                    p.data_parallel_sharding_strategy == DpSharding::kOptimGradsParams;
  std::string out = "#!/usr/bin/env bash\n";
  out += header(s, src, "Megatron-LM pretrain_gpt.py", "#");
  out +=
      "#\n"
      "# Run:  bash THIS_FILE                 (torchrun on this node; set NODE_RANK and MASTER_ADDR per node)\n"
      "#       LAUNCHER=srun sbatch THIS_FILE (one torchrun per node through srun)\n"
      "# Data: --mock-data unless DATA_PATH is set (a Megatron indexed dataset prefix).\n"
      "# Import back: lcm import megatron THIS_FILE --gpus N --hw PROFILE\n"
      "set -euo pipefail\n\n";
  out += fmt::format(
      "MEGATRON_LM_DIR=${{MEGATRON_LM_DIR:-$PWD}}  # a Megatron-LM checkout\n"
      "NNODES=${{NNODES:-{}}}\n"
      "GPUS_PER_NODE=${{GPUS_PER_NODE:-{}}}\n"
      "NODE_RANK=${{NODE_RANK:-0}}\n"
      "MASTER_ADDR=${{MASTER_ADDR:-localhost}}\n"
      "MASTER_PORT=${{MASTER_PORT:-6000}}\n"
      "DATA_PATH=${{DATA_PATH:-}}\n",
      num_nodes(s), gpus_per_node(s));
  if (fsdp) {
    out +=
        "# Megatron-FSDP needs more than one CUDA connection (docs/reference/conventions.md).\n"
        "export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-8}\n\n";
  } else {
    out +=
        "# One CUDA connection keeps TP/CP communication ahead of compute on Hopper.\n"
        "export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}\n\n";
  }
  out += model.render() + "\n" + training.render() + "\n" + parallel.render() + "\n";
  ArgBlock hp{"RUN_ARGS", "Schedule, logging and load balancing: not part of lcm's estimate; set your recipe's", {}};
  hp.add("--train-iters", "${TRAIN_ITERS:-100}");
  hp.add("--lr", "${LR:-3e-4}");
  hp.add("--min-lr", "${MIN_LR:-3e-5}");
  hp.add("--lr-decay-style", "cosine");
  hp.add("--lr-warmup-iters", "${LR_WARMUP_ITERS:-10}");
  hp.add("--log-interval", "1");
  hp.add("--eval-iters", "0");
  if (has_moe(s.model)) {
    hp.add("--moe-router-load-balancing-type", "${MOE_LB_TYPE:-aux_loss}");
    hp.add("--moe-aux-loss-coeff", "${MOE_AUX_LOSS_COEFF:-1e-2}");
  }
  out += hp.render() + "\n";
  out +=
      "DATA_ARGS=(--mock-data)\n"
      "if [[ -n \"$DATA_PATH\" ]]; then DATA_ARGS=(--data-path \"$DATA_PATH\" --split 99,1,0); fi\n\n"
      "# Flags of your own, appended last (Megatron's parser keeps the last value), e.g.\n"
      "#   EXTRA_ARGS=\"--transformer-impl local\" on a machine without Transformer Engine.\n"
      "EXTRA=()\n"
      "if [[ -n \"${EXTRA_ARGS:-}\" ]]; then read -r -a EXTRA <<< \"$EXTRA_ARGS\"; fi\n\n";
  const std::string args =
      "    \"$MEGATRON_LM_DIR/pretrain_gpt.py\" \"${MODEL_ARGS[@]}\" \"${TRAINING_ARGS[@]}\" \"${PARALLEL_ARGS[@]}\" "
      "\\\n    \"${RUN_ARGS[@]}\" \"${DATA_ARGS[@]}\" \"${EXTRA[@]}\"\n";
  out +=
      "if [[ \"${LAUNCHER:-torchrun}\" == srun ]]; then\n"
      "  MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
      "  srun --nodes \"$NNODES\" --ntasks-per-node 1 --gpus-per-node \"$GPUS_PER_NODE\" \\\n"
      "    torchrun --nnodes \"$NNODES\" --nproc-per-node \"$GPUS_PER_NODE\" --rdzv-backend c10d \\\n"
      "    --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" --rdzv-id \"${SLURM_JOB_ID:-lcm}\" \\\n" +
      args +
      "else\n"
      "  torchrun --nnodes \"$NNODES\" --node-rank \"$NODE_RANK\" --nproc-per-node \"$GPUS_PER_NODE\" \\\n"
      "    --master-addr \"$MASTER_ADDR\" --master-port \"$MASTER_PORT\" \\\n" +
      args + "fi\n";
  return out;
}

// ---- Megatron-Bridge (NeMo 2) ---------------------------------------------------------

struct YamlSection {
  std::string name;
  std::vector<std::string> lines;
  void add(const std::string& key, const std::string& value, const std::string& note = {}) {
    lines.push_back(fmt::format("  {}: {}{}", key, value, note.empty() ? "" : "  # " + note));
  }
  void comment(const std::string& text) { lines.push_back("  # " + text); }
  std::string render() const { return name + ":\n" + fmt::format("{}\n", fmt::join(lines, "\n")); }
};
std::string yes(bool b) { return b ? "true" : "false"; }
std::string quoted(std::string_view s) { return fmt::format("\"{}\"", s); }

std::string nemo_yaml(const Scenario& s, const ExportSource& src) {
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ParallelSpec& p = s.parallel;
  if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute && m.max_position_embeddings != t.seq_length)
    cannot(
        fmt::format("learned absolute position embeddings for {} positions at seq_length {}: Megatron-Bridge's "
                    "GPTModelProvider sizes the table by seq_length",
                    m.max_position_embeddings, t.seq_length));
  if (!order_is(p, kDefaultOrder))
    cannot(fmt::format("rank order {}: Megatron-Bridge initialises the default tp-cp-ep-dp-pp order",
                       rank_order_to_string(p.order)));
  if (p.data_parallel_sharding_strategy == DpSharding::kNoShard && p.use_distributed_optimizer)
    cannot("use_distributed_optimizer with data_parallel_sharding_strategy no_shard");
  YamlSection model{"model", {}};
  model.comment(fmt::format("{}: architecture (GPTModelProvider / TransformerConfig fields)", m.name));
  model.add("num_layers", num(m.num_layers));
  model.add("hidden_size", num(m.hidden_size));
  model.add("ffn_hidden_size", num(m.ffn_hidden_size));
  model.add("num_attention_heads", num(m.num_attention_heads));
  if (!m.multi_latent_attention)
    model.add("num_query_groups", num(m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads));
  if (m.kv_channels > 0 && !m.multi_latent_attention) model.add("kv_channels", num(m.kv_channels));
  model.add("seq_length", num(t.seq_length));
  model.add("vocab_size", num(m.vocab_size), "the scenario's; the recipe's tokenizer must match");
  model.add("make_vocab_size_divisible_by", num(m.make_vocab_size_divisible_by));
  model.add("share_embeddings_and_output_weights", yes(!m.untie_embeddings_and_output_weights));
  model.add("gated_linear_unit", yes(m.swiglu),
            m.activation == Activation::kQuickGelu   ? "gated quick-GELU: the recipe's activation_func must be quick_gelu"
            : m.activation == Activation::kSquaredRelu ? "no gate: the recipe's activation_func must be squared_relu"
            : m.swiglu                                ? "SwiGLU with the recipe's activation_func (silu)"
                                                      : "");
  model.add("add_bias_linear", yes(m.add_bias_linear));
  model.add("add_qkv_bias", yes(m.add_qkv_bias));
  model.add("qk_layernorm", yes(m.qk_layernorm));
  if (m.window_size > 0) model.add("window_size", "[" + num(m.window_size) + ", 0]", "sliding window (causal)");
  if (m.window_size > 0 && m.window_attn_skip_freq > 0) model.add("window_attn_skip_freq", num(m.window_attn_skip_freq));
  model.add("normalization", std::string(to_string(m.normalization)));
  const RopeScaling& r = m.rope_scaling;
  const bool yarn = r.type == RopeScalingType::kYarn;
  const bool rope = m.position_embedding_type == PositionEmbedding::kRope;
  model.add("position_embedding_type", rope && yarn && !m.multi_latent_attention
                                           ? std::string("yarn")
                                           : std::string(to_string(m.position_embedding_type)));
  if (rope) model.add("rotary_base", real(m.rotary_base));
  if (m.multi_latent_attention) {
    model.add("rope_type", yarn ? "yarn" : "rope");
    if (yarn) model.add("rotary_scaling_factor", real(r.factor));
    if (yarn) model.add("original_max_position_embeddings", num(r.original_max_position_embeddings));
  } else if (yarn) {
    model.add("yarn_rotary_scaling_factor", real(r.factor));
    model.add("yarn_original_max_position_embeddings", num(r.original_max_position_embeddings));
  } else if (r.type == RopeScalingType::kLlama3) {
    model.add("rope_scaling", "true", "Llama 3 scaling, original 8192");
    model.add("rope_scaling_factor", real(r.factor));
  } else if (r.type == RopeScalingType::kLinear) {
    model.add("seq_len_interpolation_factor", real(r.factor));
  }
  model.add("hidden_dropout", real(m.hidden_dropout));
  model.add("attention_dropout", real(m.attention_dropout));
  if (m.multi_latent_attention) {
    model.add("multi_latent_attention", "true");
    model.add("q_lora_rank", m.q_lora_rank > 0 ? num(m.q_lora_rank) : "null");
    model.add("kv_lora_rank", num(m.kv_lora_rank));
    model.add("qk_head_dim", num(m.qk_head_dim));
    model.add("qk_pos_emb_head_dim", num(m.qk_pos_emb_head_dim));
    model.add("v_head_dim", num(m.v_head_dim));
  }
  if (m.mtp_num_layers > 0) model.add("mtp_num_layers", num(m.mtp_num_layers));
  if (has_moe(m)) {
    model.add("num_moe_experts", num(m.num_experts));
    model.add("moe_router_topk", num(m.moe_router_topk));
    if (m.moe_ffn_hidden_size > 0) model.add("moe_ffn_hidden_size", num(m.moe_ffn_hidden_size));
    if (m.moe_shared_expert_intermediate_size > 0)
      model.add("moe_shared_expert_intermediate_size", num(m.moe_shared_expert_intermediate_size));
    const std::string freq = moe_layer_freq(m);
    if (freq == "1") {
      model.add("moe_layer_freq", "1");
    } else {
      std::vector<int> pat(m.moe_layer_pattern.begin(), m.moe_layer_pattern.end());
      model.add("moe_layer_freq", fmt::format("[{}]", fmt::join(pat, ", ")), freq);
    }
    model.add("moe_router_score_function", std::string(to_string(m.moe_router_score_function)));
    if (m.moe_router_num_groups > 0) model.add("moe_router_num_groups", num(m.moe_router_num_groups));
    if (m.moe_router_group_topk > 0) model.add("moe_router_group_topk", num(m.moe_router_group_topk));
    model.add("moe_router_enable_expert_bias", yes(m.moe_router_enable_expert_bias));
    model.add("moe_expert_capacity_factor",
              m.moe_expert_capacity_factor > 0 ? real(m.moe_expert_capacity_factor) : "null",
              m.moe_expert_capacity_factor > 0 ? "drop policy: the recipe's (default probs)" : "dropless");
    model.add("moe_pad_expert_input_to_capacity", yes(m.moe_pad_expert_input_to_capacity));
    model.add("moe_token_dispatcher_type", std::string(to_string(m.moe_token_dispatcher_type)));
    if (m.moe_token_dispatcher_type == Dispatcher::kFlex)  // issue 12: DeepEP / HybridEP
      model.add("moe_flex_dispatcher_backend", std::string(to_string(m.moe_flex_dispatcher_backend)));
    model.add("moe_grouped_gemm", "true");
    model.comment("moe_router_load_balancing_type / moe_aux_loss_coeff: the recipe's (no effect on lcm's estimate)");
    if (m.moe_routing_skew > 0)
      model.comment(fmt::format("lcm priced routing skew zipf:{} (moe_routing_skew: what the data and router do, not a knob)",
                                m.moe_routing_skew));
  }
  model.comment("parallel layout");
  model.add("tensor_model_parallel_size", num(p.tensor_model_parallel_size));
  model.add("sequence_parallel", yes(p.sequence_parallel && p.tensor_model_parallel_size > 1));
  model.add("pipeline_model_parallel_size", num(p.pipeline_model_parallel_size));
  if (p.num_layers_per_virtual_pipeline_stage > 0) {
    const int per_rank =
        (m.num_layers + p.account_for_embedding_in_pipeline_split + p.account_for_loss_in_pipeline_split) /
        p.pipeline_model_parallel_size;
    model.add("virtual_pipeline_model_parallel_size", num(per_rank / p.num_layers_per_virtual_pipeline_stage),
              fmt::format("{} layers per virtual stage", p.num_layers_per_virtual_pipeline_stage));
  }
  if (!p.pipeline_layout.empty())
    model.add("pipeline_model_parallel_layout", "\"" + pipeline_layout_text(p.pipeline_layout) + "\"",
              fmt::format("{} stages: pp {} x vp {}", p.pipeline_layout.size(), p.pipeline_model_parallel_size,
                          p.pipeline_layout.size() / static_cast<size_t>(p.pipeline_model_parallel_size)));
  if (p.microbatch_group_size_per_vp_stage > 0)
    model.add("microbatch_group_size_per_vp_stage", num(p.microbatch_group_size_per_vp_stage),
              "micro-batches per model chunk in a row");
  if (p.num_layers_in_first_pipeline_stage > 0)
    model.add("num_layers_in_first_pipeline_stage", num(p.num_layers_in_first_pipeline_stage));
  if (p.num_layers_in_last_pipeline_stage > 0)
    model.add("num_layers_in_last_pipeline_stage", num(p.num_layers_in_last_pipeline_stage));
  model.add("account_for_embedding_in_pipeline_split", yes(p.account_for_embedding_in_pipeline_split));
  model.add("account_for_loss_in_pipeline_split", yes(p.account_for_loss_in_pipeline_split));
  model.add("context_parallel_size", num(p.context_parallel_size));
  if (p.context_parallel_size > 1) {
    model.add("cp_comm_type", std::string(to_string(p.cp_comm_type)));
    if (p.hierarchical_context_parallel_sizes.size() == 2)
      model.add("hierarchical_context_parallel_sizes",
                fmt::format("[{}]", fmt::join(p.hierarchical_context_parallel_sizes, ", ")));
  }
  if (has_moe(m)) {
    model.add("expert_model_parallel_size", num(p.expert_model_parallel_size));
    model.add("expert_tensor_parallel_size",
              num(p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : p.tensor_model_parallel_size));
    if (p.moe_fp8_dispatch) model.add("moe_dispatch_fwd_dtype", "mxfp8");
  }
  if (p.recompute_granularity == RecomputeGranularity::kNone) {
    model.add("recompute_granularity", "null");
  } else {
    model.add("recompute_granularity", std::string(to_string(p.recompute_granularity)));
    if (p.recompute_granularity == RecomputeGranularity::kFull) {
      model.add("recompute_method", std::string(to_string(p.recompute_method)));
      model.add("recompute_num_layers", num(p.recompute_num_layers));
    } else {
      model.add("recompute_modules", fmt::format("[{}]", fmt::join(recompute_module_names(p.recompute_modules), ", ")));
    }
  }
  model.add("tp_comm_overlap", yes(p.tp_comm_overlap));
  model.add("overlap_moe_expert_parallel_comm", yes(p.overlap_moe_expert_parallel_comm));
  if (p.cuda_graph_impl != CudaGraphImpl::kNone) {
    model.add("cuda_graph_impl", std::string(to_string(p.cuda_graph_impl)));
    if (p.cuda_graph_modules != 0)
      model.add("cuda_graph_scope", fmt::format("[{}]", fmt::join(cuda_graph_module_names(p.cuda_graph_modules), ", ")));
  }
  model.add("attention_backend", megatron_attention_backend(t.attention_backend));
  // Megatron-Bridge's GPTModelProvider defaults the fusion on: always written.
  model.add("cross_entropy_loss_fusion", yes(t.cross_entropy_loss_fusion));
  model.add("cross_entropy_fusion_impl", std::string(to_string(t.cross_entropy_fusion_impl)));

  YamlSection train{"train", {}};
  train.add("micro_batch_size", num(t.micro_batch_size));
  train.add("global_batch_size", num(t.global_batch_size));
  YamlSection dataset{"dataset", {}};
  dataset.add("seq_length", num(t.seq_length), "= model.seq_length");
  if (t.document_length > 0) {
    // A nested mapping (PackedSequenceSpecs): written as raw lines under the section.
    dataset.lines.push_back("  packed_sequence_specs:");
    dataset.lines.push_back(fmt::format(
        "    packed_sequence_size: {}  # lcm priced documents of {} tokens on average (the dataset decides it)",
        t.seq_length, t.document_length));
    const int cp = s.parallel.context_parallel_size;
    dataset.lines.push_back(cp > 1 ? fmt::format("    pad_seq_to_mult: {}  # 2 x CP with context parallelism", 2 * cp)
                                   : std::string("    pad_seq_to_mult: 1"));
  }
  const bool fsdp = p.data_parallel_sharding_strategy == DpSharding::kOptimGrads ||
                    p.data_parallel_sharding_strategy == DpSharding::kOptimGradsParams;
  YamlSection ddp{"ddp", {}};
  ddp.add("use_distributed_optimizer", yes(p.use_distributed_optimizer));
  ddp.add("use_megatron_fsdp", yes(fsdp));
  if (fsdp) ddp.add("data_parallel_sharding_strategy", std::string(to_string(p.data_parallel_sharding_strategy)));
  ddp.add("overlap_grad_reduce", yes(p.overlap_grad_reduce));
  ddp.add("overlap_param_gather", yes(p.overlap_param_gather));
  ddp.add("grad_reduce_in_fp32", yes(t.grad_reduce_in_fp32));
  if (t.precision == Precision::kFp8 && t.fp8_param_gather) ddp.add("fp8_param_gather", "true", "FP8 weights");
  YamlSection optimizer{"optimizer", {}};
  optimizer.add("use_distributed_optimizer", yes(p.use_distributed_optimizer));
  const bool aware = t.main_params_dtype != DType::kFp32 || t.exp_avg_dtype != DType::kFp32 ||
                     t.exp_avg_sq_dtype != DType::kFp32 || t.store_param_remainders;
  optimizer.add("use_precision_aware_optimizer", yes(aware));
  if (aware) {
    optimizer.add("main_params_dtype", quoted(to_string(t.main_params_dtype)));
    optimizer.add("exp_avg_dtype", quoted(to_string(t.exp_avg_dtype)));
    optimizer.add("exp_avg_sq_dtype", quoted(to_string(t.exp_avg_sq_dtype)));
    if (t.main_params_dtype == DType::kFp32)
      optimizer.add("store_param_remainders", yes(t.store_param_remainders),
                    t.store_param_remainders ? "fp32 master weights as 16-bit remainders (TE >= 2.1)" : "");
  }
  std::string out = header(s, src, "Megatron-Bridge (NeMo 2) ConfigContainer override", "#");
  out += fmt::format(
      "#\n"
      "# Apply over a pretraining recipe's ConfigContainer, e.g. with Megatron-Bridge's\n"
      "#   examples/recipes/*/pretrain_*.py --config-file THIS_FILE   (OmegaConf merge onto the recipe)\n"
      "# launched on {} node(s) x {} GPUs (torchrun --nnodes {} --nproc-per-node {}).\n"
      "# Import back: lcm import nemo THIS_FILE --gpus {} --hw {}\n",
      num_nodes(s), gpus_per_node(s), num_nodes(s), gpus_per_node(s), s.num_gpus, s.hardware.name);
  out += model.render() + train.render() + dataset.render() + ddp.render() + optimizer.render();
  if (t.peft == Peft::kLora) {
    YamlSection peft{"peft", {}};
    peft.add("_target_", "megatron.bridge.peft.lora.LoRA");
    peft.add("dim", num(t.lora_rank));
    peft.add("alpha", num(t.lora_rank), "no effect on the estimate");
    peft.add("target_modules", fmt::format("[{}]", fmt::join(lora_target_names(t.lora_targets), ", ")));
    out += peft.render();
  }
  const bool fp8 = t.precision == Precision::kFp8;
  if (fp8 && t.fp8_recipe == Fp8Recipe::kTensorwise)
    out += "# note: this recipe keeps the first and the last layer in BF16 (first_last_layers_bf16), which lcm\n"
           "# prices as FP8 like the others\n";
  out += fmt::format("mixed_precision: {}\n", fp8 ? bridge_mixed_precision(t.fp8_recipe) : "bf16_mixed");
  return out;
}

// ---- TorchTitan ------------------------------------------------------------------------

std::string torchtitan_toml(const Scenario& s, const ExportSource& src) {
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ParallelSpec& p = s.parallel;
  const int tp = p.tensor_model_parallel_size, cp = p.context_parallel_size, pp = p.pipeline_model_parallel_size;
  const int dp = data_parallel(s);
  if (!order_is(p, kDefaultOrder))
    cannot(fmt::format("rank order {}: TorchTitan's mesh is [pp, dp_replicate, dp_shard, cp, tp] (tp-cp-dp-pp)",
                       rank_order_to_string(p.order)));
  if (tp > 1 && !p.sequence_parallel)
    cannot("tensor parallelism without sequence parallelism: TorchTitan's TP shards the norms' sequence always");
  const DpSharding sh = p.data_parallel_sharding_strategy;
  if (sh == DpSharding::kOptim || sh == DpSharding::kOptimGrads)
    cannot(
        fmt::format("data_parallel_sharding_strategy {}: TorchTitan has no distributed-optimizer (ZeRO-1/2) "
                    "switch, only DDP (no_shard) or FSDP2 (optim_grads_params)",
                    to_string(sh)));
  if (sh == DpSharding::kNoShard && cp > 1)
    cannot(
        "no_shard with context parallelism: TorchTitan applies FSDP over the dp_shard x cp ranks, so CP shards "
        "the parameters (choose optim_grads_params)");
  if (p.use_distributed_optimizer != (sh != DpSharding::kNoShard))
    cannot("use_distributed_optimizer must follow the sharding (FSDP2 shards the optimizer state)");
  if (!p.overlap_grad_reduce)
    cannot(
        "overlap_grad_reduce false: TorchTitan always overlaps the gradient reduction with backward (DDP "
        "buckets, FSDP2)");
  if (p.overlap_param_gather != (sh == DpSharding::kOptimGradsParams))
    cannot("overlap_param_gather must be true exactly with FSDP2: TorchTitan prefetches its parameter all-gathers");
  if (!t.grad_reduce_in_fp32) cannot("grad_reduce_in_fp32 false: TorchTitan reduces gradients in float32 only");
  if (t.main_params_dtype != DType::kFp32 || t.exp_avg_dtype != DType::kFp32 || t.exp_avg_sq_dtype != DType::kFp32)
    cannot("low-precision optimizer state: TorchTitan keeps float32 master weights and Adam moments");
  if (t.store_param_remainders)
    cannot("store_param_remainders: TorchTitan keeps whole float32 master weights (FSDP2 mixed precision)");
  if (t.attention_backend == AttentionBackend::kUnfused)
    cannot("unfused attention: TorchTitan runs SDPA / flex attention (fused)");
  if (t.peft != Peft::kNone) cannot("peft lora: lcm exports no TorchTitan LoRA; export to nemo instead");
  if (t.document_length > 0)
    cannot(fmt::format("document_length {}: lcm exports no TorchTitan document masking (flex attention's block-causal "
                       "mask); export to nemo instead",
                       t.document_length));
  if (t.precision == Precision::kFp8 && (t.fp8_recipe == Fp8Recipe::kBlockwise || t.fp8_recipe == Fp8Recipe::kMxfp8))
    cannot(fmt::format("fp8_recipe {}: TorchTitan's float8 converter (torchao) scales per tensor or per row",
                       to_string(t.fp8_recipe)));
  if (t.precision == Precision::kFp8 && t.fp8_param_gather)
    cannot(
        "fp8_param_gather: lcm exports no TorchTitan FP8 weights (torchao's float8 all-gather); export to "
        "megatron or nemo instead");
  if (m.window_size > 0) cannot("sliding-window attention: TorchTitan's job config has no window for its models");
  if (m.activation != Activation::kDefault)
    cannot(fmt::format("activation {}: TorchTitan's models run SwiGLU (or GeLU) MLPs", to_string(m.activation)));
  if (t.cross_entropy_loss_fusion && t.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kTe)
    cannot("cross_entropy_fusion_impl te: TorchTitan has no Transformer Engine cross-entropy (its loss keeps the "
           "fp32 logits the estimate leaves out)");
  if (cp > 1 && p.cp_comm_type != CpCommType::kP2P && p.cp_comm_type != CpCommType::kAllGather)
    cannot(
        fmt::format("cp_comm_type {}: TorchTitan's context parallelism is ring attention (p2p rotation or "
                    "all-gather), not Ulysses all-to-all",
                    to_string(p.cp_comm_type)));
  if (p.num_layers_in_first_pipeline_stage > 0 || p.num_layers_in_last_pipeline_stage > 0)
    cannot(
        "uneven first/last pipeline stages: TorchTitan splits by layers per stage (express it with "
        "account_for_embedding/loss or an even split)");
  if (p.microbatch_group_size_per_vp_stage > 0)
    cannot(
        "microbatch_group_size_per_virtual_pipeline_stage: TorchTitan's interleaved schedules group micro-batches "
        "their own way (leave it unset)");
  if (!p.pipeline_layout.empty())
    cannot(
        "pipeline_model_parallel_layout: TorchTitan splits by layers per stage, not by a per-stage layout (express it "
        "with account_for_embedding/loss or an even split)");
  if (p.cuda_graph_impl != CudaGraphImpl::kNone)
    cannot(fmt::format("cuda_graph_impl {}: TorchTitan's training loop has no CUDA graph capture",
                       to_string(p.cuda_graph_impl)));
  if (p.recompute_granularity == RecomputeGranularity::kSelective)
    cannot(
        "selective recompute: TorchTitan's selective modes (op-level SAC, every-Nth layer) recompute other "
        "tensors than Megatron's core_attn; choose none or full");
  if (p.recompute_granularity == RecomputeGranularity::kFull &&
      (p.recompute_method != RecomputeMethod::kUniform || p.recompute_num_layers != 1))
    cannot("full recompute other than uniform over 1 layer: TorchTitan's full AC checkpoints every block");
  if (p.overlap_moe_expert_parallel_comm)
    cannot("overlap_moe_expert_parallel_comm: TorchTitan has no EP overlap switch");
  if (p.moe_fp8_dispatch) cannot("moe_fp8_dispatch: TorchTitan has no FP8 dispatch switch");
  const int ep = has_moe(m) ? p.expert_model_parallel_size : 1;
  const int etp = has_moe(m) ? (p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : tp) : tp;
  if (has_moe(m) && m.moe_token_dispatcher_type == Dispatcher::kAllGather)
    cannot("the allgather token dispatcher: TorchTitan dispatches tokens with all-to-all");
  if (etp != 1 && etp != tp)
    cannot(fmt::format("etp{} with tp{}: TorchTitan's expert TP is 1 or the TP degree", etp, tp));
  const int shard = sh == DpSharding::kOptimGradsParams ? dp : 1, replicate = sh == DpSharding::kNoShard ? dp : 1;
  const int borrow = shard * cp * (etp == 1 ? tp : 1);
  if (ep > 1 && borrow % ep != 0)
    cannot(
        fmt::format("ep{}: TorchTitan's experts borrow their ranks from dp_shard x cp{} = {}, which ep does not "
                    "divide",
                    ep, etp == 1 ? " x tp" : "", borrow));
  const int per_stage =
      p.num_layers_per_virtual_pipeline_stage > 0
          ? p.num_layers_per_virtual_pipeline_stage
          : (m.num_layers + p.account_for_embedding_in_pipeline_split + p.account_for_loss_in_pipeline_split) / pp;

  std::string out = header(s, src, "TorchTitan (TOML JobConfig)", "#");
  out += fmt::format(
      "#\n"
      "# Run: NGPU={} CONFIG_FILE=THIS_FILE ./run_train.sh   (per node; {} node(s): torchrun --nnodes {})\n"
      "# Import back: lcm import torchtitan THIS_FILE --model SCENARIO --gpus {} --hw {}\n"
      "#\n"
      "# The architecture is not part of a TorchTitan TOML: register a flavor named '{}' with\n"
      "#   n_layers={} dim={} ffn/inter_dim={} n_heads={} n_kv_heads={} head_dim={} vocab_size={}\n"
      "#   norm={} swiglu={} rope_theta={} rope_scaling={}x{} (original {})\n",
      gpus_per_node(s), num_nodes(s), num_nodes(s), s.num_gpus, s.hardware.name, m.name, m.num_layers, m.hidden_size,
      m.ffn_hidden_size, m.num_attention_heads, m.num_query_groups, m.kv_channels, m.vocab_size,
      to_string(m.normalization), m.swiglu, m.rotary_base, to_string(m.rope_scaling.type), m.rope_scaling.factor,
      m.rope_scaling.original_max_position_embeddings);
  if (has_moe(m))
    out += fmt::format(
        "#   experts={} top_k={} moe_inter_dim={} shared={} score={} groups={}/{} expert_bias={} "
        "moe_layers='{}' capacity_factor={}\n",
        m.num_experts, m.moe_router_topk, m.moe_ffn_hidden_size, m.moe_shared_expert_intermediate_size,
        to_string(m.moe_router_score_function), m.moe_router_num_groups, m.moe_router_group_topk,
        m.moe_router_enable_expert_bias, moe_layer_freq(m), m.moe_expert_capacity_factor);
  if (m.multi_latent_attention)
    out +=
        fmt::format("#   MLA: q_lora_rank={} kv_lora_rank={} qk_nope_head_dim={} qk_rope_head_dim={} v_head_dim={}\n",
                    m.q_lora_rank, m.kv_lora_rank, m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim);
  if (m.mtp_num_layers > 0) out += fmt::format("#   multi-token prediction layers={}\n", m.mtp_num_layers);
  out += fmt::format("#   dropout hidden={} attention={}\n", m.hidden_dropout, m.attention_dropout);
  out += "\n[job]\n";
  out += fmt::format("description = \"lcm export of {}\"\n", s.name);
  out += "\n[model]\n";
  out += fmt::format("name = \"{}\"  # the model family whose args the flavor uses\n",
                     has_moe(m) ? "deepseek_v3" : "llama3");
  out += fmt::format("flavor = \"{}\"\n", m.name);
  if (t.precision == Precision::kFp8) out += "converters = [\"float8\"]  # FP8 GEMMs (torchao float8 training)\n";
  out += "\n[training]\n";
  out += fmt::format("seq_len = {}\n", t.seq_length);
  const int local = pp > 1 ? t.global_batch_size / dp : t.micro_batch_size;
  out += fmt::format("local_batch_size = {}  # {}\n", local,
                     pp > 1 ? "per data-parallel rank per step, cut into pipeline micro-batches"
                            : "one micro-batch; gradient accumulation up to global_batch_size");
  out += fmt::format("global_batch_size = {}\n", t.global_batch_size);
  out += "mixed_precision_param = \"bfloat16\"\n";
  out += "mixed_precision_reduce = \"float32\"\n";
  out += "\n[parallelism]\n";
  out += fmt::format("data_parallel_replicate_degree = {}\n", replicate);
  out += fmt::format("data_parallel_shard_degree = {}{}\n", shard, cp > 1 ? "  # FSDP over dp_shard x cp" : "");
  if (sh == DpSharding::kOptimGradsParams)
    out += "fsdp_reshard_after_forward = \"always\"  # ZeRO-3: parameters re-gathered for backward\n";
  out += fmt::format("tensor_parallel_degree = {}  # sequence parallel norms with TP (always in TorchTitan)\n", tp);
  if (p.tp_comm_overlap) out += "enable_async_tensor_parallel = true  # needs [compile] enable (below)\n";
  out += fmt::format("pipeline_parallel_degree = {}\n", pp);
  if (pp > 1) {
    const bool interleaved = p.num_layers_per_virtual_pipeline_stage > 0;
    out += fmt::format("pipeline_parallel_schedule = \"{}\"\n", interleaved ? "Interleaved1F1B" : "1F1B");
    out += fmt::format("pipeline_parallel_layers_per_stage = {}\n", per_stage);
    out += fmt::format("pipeline_parallel_first_stage_less_layers = {}  # the embedding counted as a layer\n",
                       p.account_for_embedding_in_pipeline_split ? 1 : 0);
    out +=
        fmt::format("pipeline_parallel_last_stage_less_layers = {}  # the output layer and loss counted as a layer\n",
                    p.account_for_loss_in_pipeline_split ? 1 : 0);
    out += fmt::format("pipeline_parallel_microbatch_size = {}\n", t.micro_batch_size);
  }
  out += fmt::format("context_parallel_degree = {}\n", cp);
  if (cp > 1)
    out += fmt::format("context_parallel_rotate_method = \"{}\"  # lcm cp_comm_type {}\n",
                       p.cp_comm_type == CpCommType::kP2P ? "alltoall" : "allgather", to_string(p.cp_comm_type));
  if (has_moe(m)) {
    out += fmt::format("expert_parallel_degree = {}\n", ep);
    out += fmt::format("expert_tensor_parallel_degree = {}\n", etp);
    out += fmt::format("expert_parallel_comm_backend = \"{}\"  # lcm dispatcher {}\n",
                       m.moe_token_dispatcher_type == Dispatcher::kFlex ? "deepep" : "standard",
                       to_string(m.moe_token_dispatcher_type));
  }
  out += "\n[activation_checkpoint]\n";
  out += fmt::format("mode = \"{}\"\n", p.recompute_granularity == RecomputeGranularity::kFull ? "full" : "none");
  if (p.tp_comm_overlap) out += "\n[compile]\nenable = true\ncomponents = [\"model\"]\n";
  return out;
}

}  // namespace

std::variant<std::string, ExportError> export_job(const Scenario& s, ExportTarget target, const ExportSource& src) {
  try {
    check_model(s);
    switch (target) {
      case ExportTarget::kMegatron: return megatron_script(s, src);
      case ExportTarget::kNemo: return nemo_yaml(s, src);
      case ExportTarget::kTorchTitan: return torchtitan_toml(s, src);
    }
  } catch (const Unexpressible& e) {
    return ExportError{e.message};
  }
  return ExportError{"unknown target"};
}

}  // namespace lcm::cli
