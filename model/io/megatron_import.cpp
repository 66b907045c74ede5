// Megatron-LM flags -> Scenario: flag classification, typed flag access, the model mapping
// and the public import functions. Defaults are Megatron-LM's argparse/TransformerConfig
// defaults @ d98e8a64 wherever a flag is absent (docs/scenario-format.md, "Megatron import").
#include <algorithm>
#include <charconv>
#include <climits>
#include <set>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "megatron_flags.hpp"
#include "megatron_importer.hpp"

namespace lcm::io {

namespace {

constexpr std::string_view kMapped[] = {
    // model
    "num-layers", "encoder-num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads", "num-query-groups",
    "group-query-attention", "kv-channels", "max-position-embeddings", "position-embedding-type",
    "use-rotary-position-embeddings", "no-position-embedding", "rotary-base", "rotary-seq-len-interpolation-factor",
    "use-rope-scaling", "rope-scaling-factor", "rotary-scaling-factor", "yarn-original-max-position-embeddings",
    "rope-type", "make-vocab-size-divisible-by", "padded-vocab-size", "no-pad-vocab-size", "disable-pad-vocab-size",
    "vocab-size", "tokenizer-type", "tokenizer-model", "swiglu", "squared-relu", "quick-geglu", "disable-bias-linear",
    "add-qkv-bias", "qk-layernorm", "normalization", "untie-embeddings-and-output-weights", "num-experts",
    "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size", "moe-layer-freq",
    "moe-expert-capacity-factor", "moe-pad-expert-input-to-capacity", "moe-token-dispatcher-type",
    "moe-flex-dispatcher-backend", "moe-enable-deepep",
    "moe-router-score-function", "moe-router-num-groups", "moe-router-group-topk", "moe-router-enable-expert-bias",
    "moe-dispatch-fwd-dtype", "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-head-dim",
    "qk-pos-emb-head-dim", "v-head-dim", "mtp-num-layers", "hidden-dropout", "attention-dropout", "window-size",
    "window-attn-skip-freq",
    // training
    "seq-length", "encoder-seq-length", "micro-batch-size", "global-batch-size", "step-batch-size-schedule", "bf16",
    "fp16", "fp8-format", "fp8-recipe", "attention-backend", "transformer-impl", "use-flash-attn", "cross-entropy-loss-fusion",
    "cross-entropy-fusion-impl", "grad-reduce-in-bf16",
    "accumulate-allreduce-grads-in-fp32", "main-grads-dtype", "main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype",
    "use-precision-aware-optimizer", "megatron-fsdp-main-params-dtype", "megatron-fsdp-main-grads-dtype",
    // parallel
    "tensor-model-parallel-size", "sequence-parallel", "pipeline-model-parallel-size",
    "num-layers-per-virtual-pipeline-stage", "num-virtual-stages-per-pipeline-rank", "pipeline-model-parallel-layout",
    "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers", "account-for-embedding-in-pipeline-split",
    "account-for-loss-in-pipeline-split", "context-parallel-size", "cp-comm-type", "hierarchical-context-parallel-sizes",
    "expert-model-parallel-size", "expert-tensor-parallel-size", "use-distributed-optimizer", "use-megatron-fsdp",
    "megatron-fsdp-version", "data-parallel-sharding-strategy", "use-torch-fsdp2", "recompute-granularity",
    "recompute-method", "recompute-num-layers", "recompute-modules", "recompute-activations", "moe-layer-recompute",
    "use-tp-pp-dp-mapping", "overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap",
    "overlap-moe-expert-parallel-comm", "cuda-graph-impl", "cuda-graph-modules", "cuda-graph-scope",
    "enable-cuda-graph", "external-cuda-graph",
};

bool is_mapped(std::string_view name) { return std::find(std::begin(kMapped), std::end(kMapped), name) != std::end(kMapped); }

bool is_false_text(std::string_view v) { return v == "false" || v == "False" || v == "FALSE" || v == "0"; }
bool is_true_text(std::string_view v) { return v.empty() || v == "true" || v == "True" || v == "TRUE" || v == "1"; }

}  // namespace

std::span<const std::string_view> mapped_megatron_flags() { return kMapped; }

std::string flag_for_key(const std::string& dotted) {
  static const std::map<std::string, std::string> special = {
      {"parallel.num_layers_in_first_pipeline_stage", "--decoder-first-pipeline-num-layers"},
      {"parallel.num_layers_in_last_pipeline_stage", "--decoder-last-pipeline-num-layers"},
      {"model.add_bias_linear", "--disable-bias-linear"},
      {"training.precision", "--bf16/--fp8-format"},
      {"training.grad_reduce_in_fp32", "--grad-reduce-in-bf16"},
      {"parallel.rank_order", "--use-tp-pp-dp-mapping"},
      {"parallel.moe_fp8_dispatch", "--moe-dispatch-fwd-dtype"},
      {"hardware.num_gpus", "GPU count (--gpus)"},
      {"hardware.profile", "hardware profile (--hw)"},
  };
  if (const auto it = special.find(dotted); it != special.end()) return it->second;
  std::string key = dotted.substr(dotted.rfind('.') + 1);
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

MegatronImporter::MegatronImporter(const std::vector<MegatronFlag>& flags, int num_gpus, const HardwareSpec& hardware,
                                   const std::string& name, const Loc& document)
    : num_gpus_(num_gpus), hardware_(hardware), name_(name), document_(document) {
  for (const MegatronFlag& f : flags) by_name_[f.name] = &f;  // argparse: the last occurrence wins
}

const MegatronFlag* MegatronImporter::get(std::string_view flag) const {
  const auto it = by_name_.find(flag);
  return it == by_name_.end() ? nullptr : it->second;
}

void MegatronImporter::fail(std::string_view flag, std::string message) const {
  const MegatronFlag* f = get(flag);
  const Loc loc = f ? Loc{f->file, f->line, f->column} : document_;
  throw Fail{error_at(loc, "--" + std::string(flag), std::move(message))};
}

void MegatronImporter::fail_missing(std::string_view flag, std::string message) const {
  throw Fail{error_at(document_, "--" + std::string(flag), std::move(message))};
}

bool MegatronImporter::on(std::string_view flag) {
  const MegatronFlag* f = get(flag);
  if (!f) return false;
  if (is_true_text(f->value)) return true;
  if (is_false_text(f->value)) return false;
  fail(flag, fmt::format("--{} takes no value (true/false in a model_config.yaml), got '{}'", flag, f->value));
}

std::optional<std::string> MegatronImporter::text(std::string_view flag) {
  const MegatronFlag* f = get(flag);
  if (!f) return std::nullopt;
  if (f->value.find('$') != std::string::npos)
    fail(flag, fmt::format("value '{}' is an unexpanded shell variable; substitute it before importing", f->value));
  if (f->value.empty()) fail(flag, fmt::format("--{} needs a value", flag));
  return f->value;
}

std::optional<int64_t> MegatronImporter::integer(std::string_view flag, int64_t min) {
  const auto t = text(flag);
  if (!t) return std::nullopt;
  if (*t == "None") return std::nullopt;
  // Bounded by int so that no value is truncated on its way to validate_scenario, which
  // checks lcm's caps (lcm/model/limits.hpp) at the flag.
  auto r = read_int(YAML::Node(*t), min, INT_MAX);
  if (failed(r)) fail(flag, why(r));
  return std::get<0>(r);
}

std::optional<double> MegatronImporter::real(std::string_view flag, double min, bool exclusive) {
  const auto t = text(flag);
  if (!t) return std::nullopt;
  if (*t == "None") return std::nullopt;
  auto r = read_double(YAML::Node(*t), min, exclusive);
  if (failed(r)) fail(flag, why(r));
  return std::get<0>(r);
}

void MegatronImporter::from(const std::string& dotted, std::string_view flag) {
  out_.draft.present.insert(dotted);
  if (const MegatronFlag* f = get(flag)) {
    out_.where.keys[dotted] = Loc{f->file, f->line, f->column};
    out_.where.display[dotted] =
        flag.starts_with(kEnvFlagPrefix)       ? fmt::format("{}={}", flag.substr(kEnvFlagPrefix.size()), f->value)
        : flag.starts_with(kBridgeFieldPrefix) ? fmt::format("{}: {}", flag.substr(kBridgeFieldPrefix.size()), f->value)
                                               : "--" + std::string(flag);
  }
}

void MegatronImporter::classify() {
  static const std::vector<std::string> all = [] {  // did-you-mean candidates, built once
    std::vector<std::string> v;
    for (const MegatronFlagName& n : megatron_flag_names()) v.emplace_back(n.name);
    return v;
  }();
  std::set<std::string> seen;
  for (const auto& [name, f] : by_name_) {
    // env flags and Megatron-Bridge fields: read by map_training
    if (is_mapped(name) || name.starts_with(kEnvFlagPrefix) || name.starts_with(kBridgeFieldPrefix)) continue;
    const MegatronFlagName* known = find_megatron_flag(name);
    if (const FlagRule* rule = find_flag_rule(name)) {
      const bool bare = known && !known->takes_value;
      const bool active = bare ? !is_false_text(f->value) : !(f->value.empty() || is_neutral(*rule, f->value));
      if (!active) {
        out_.ignored.push_back("--" + name);
        continue;
      }
      if (rule->role == FlagRole::kUnsupported) fail(name, fmt::format("not supported by lcm: {}", rule->why));
      note(bare ? fmt::format("--{}: {}", name, rule->why) : fmt::format("--{} {}: {}", name, f->value, rule->why));
      continue;
    }
    if (known) {
      out_.ignored.push_back("--" + name);
      continue;
    }
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    std::string msg = fmt::format("unknown Megatron-LM flag '--{}'", name);
    if (dashed != name && find_megatron_flag(dashed)) msg += fmt::format("; did you mean '--{}'?", dashed);
    else if (const std::string c = closest(name, all); !c.empty()) msg += fmt::format("; did you mean '--{}'?", c);
    fail(name, msg);
  }
}

// ---- model ----------------------------------------------------------------------------

void MegatronImporter::map_model() {
  ModelSpec& m = out_.draft.s.model;
  m.name = name_;
  if (get("num-layers")) {
    m.num_layers = static_cast<int>(*integer("num-layers", 1));
    from("model.num_layers", "num-layers");
  } else if (get("encoder-num-layers")) {
    m.num_layers = static_cast<int>(*integer("encoder-num-layers", 1));
    from("model.num_layers", "encoder-num-layers");
  } else {
    fail_missing("num-layers", "missing --num-layers (Megatron requires it)");
  }
  if (!get("hidden-size")) fail_missing("hidden-size", "missing --hidden-size (Megatron requires it)");
  m.hidden_size = *integer("hidden-size", 1);
  from("model.hidden_size", "hidden-size");
  if (!get("num-attention-heads")) fail_missing("num-attention-heads", "missing --num-attention-heads (Megatron requires it)");
  m.num_attention_heads = static_cast<int>(*integer("num-attention-heads", 1));
  from("model.num_attention_heads", "num-attention-heads");

  // Activation: --swiglu (SiLU GLU) and --quick-geglu are gated; --squared-relu is not.
  const bool swiglu = on("swiglu");
  m.swiglu = swiglu || on("quick-geglu");
  if (swiglu && (on("squared-relu") || on("quick-geglu")))
    fail("swiglu", "--swiglu cannot be combined with --squared-relu or --quick-geglu (Megatron asserts)");
  from("model.swiglu", swiglu ? "swiglu" : "quick-geglu");
  if (on("squared-relu")) {
    m.activation = Activation::kSquaredRelu;
    from("model.activation", "squared-relu");
  } else if (on("quick-geglu")) {
    m.activation = Activation::kQuickGelu;
    from("model.activation", "quick-geglu");
  }
  if (const auto f = integer("ffn-hidden-size", 1)) {
    m.ffn_hidden_size = *f;
    from("model.ffn_hidden_size", "ffn-hidden-size");
  } else {  // arguments.py validate_args: 4h, or int(4h*2/3 / 64) * 64 with --swiglu
    m.ffn_hidden_size = swiglu ? static_cast<int64_t>(4.0 * m.hidden_size * 2 / 3 / 64) * 64 : 4 * m.hidden_size;
    from("model.ffn_hidden_size", "hidden-size");
  }
  const bool gqa = on("group-query-attention");
  if (gqa) {
    m.num_query_groups = static_cast<int>(integer("num-query-groups", 1).value_or(1));  // Megatron default 1
    from("model.num_query_groups", get("num-query-groups") ? "num-query-groups" : "group-query-attention");
  } else if (get("num-query-groups")) {
    note("--num-query-groups is ignored without --group-query-attention (as in Megatron): multi-head attention");
  }
  if (const auto kv = integer("kv-channels", 1)) {
    m.kv_channels = *kv;
    from("model.kv_channels", "kv-channels");
  }
  m.add_bias_linear = !on("disable-bias-linear");
  from("model.add_bias_linear", "disable-bias-linear");
  m.add_qkv_bias = on("add-qkv-bias") || m.add_bias_linear;  // validate_args: add_bias_linear implies QKV bias
  from("model.add_qkv_bias", "add-qkv-bias");
  m.qk_layernorm = on("qk-layernorm");
  m.untie_embeddings_and_output_weights = on("untie-embeddings-and-output-weights");
  if (const auto n = text("normalization")) {
    const auto v = parse_normalization(*n);
    if (!v) fail("normalization", fmt::format("expected LayerNorm or RMSNorm, got '{}'", *n));
    m.normalization = *v;
    from("model.normalization", "normalization");
  }
  if (on("multi-latent-attention")) {
    if (gqa) fail("multi-latent-attention", "Group query attention is mutually exclusive with multi latent attention.");
    m.multi_latent_attention = true;
    // Megatron argparse defaults (TransformerConfig fields): q_lora_rank None, kv_lora_rank 32,
    // qk_head_dim 128, qk_pos_emb_head_dim 64, v_head_dim 128.
    m.q_lora_rank = integer("q-lora-rank", 1).value_or(0);
    m.kv_lora_rank = integer("kv-lora-rank", 1).value_or(32);
    m.qk_head_dim = integer("qk-head-dim", 1).value_or(128);
    m.qk_pos_emb_head_dim = integer("qk-pos-emb-head-dim", 1).value_or(64);
    m.v_head_dim = integer("v-head-dim", 1).value_or(128);
    from("model.multi_latent_attention", "multi-latent-attention");
  }
  m.mtp_num_layers = static_cast<int>(integer("mtp-num-layers", 0).value_or(0));
  from("model.mtp_num_layers", "mtp-num-layers");
  // Dropout keeps 1-byte masks (memory only); Megatron's defaults are 0.1.
  m.hidden_dropout = real("hidden-dropout", 0, false).value_or(0.1);
  from("model.hidden_dropout", "hidden-dropout");
  m.attention_dropout = real("attention-dropout", 0, false).value_or(0.1);
  from("model.attention_dropout", "attention-dropout");
  map_window();
  map_position_embedding();
  map_vocab();
  map_moe();
}

// --window-size L,R (Megatron's tuple_type) and --window-attn-skip-freq N: sliding-window
// attention. Only causal windows (R = 0) are modelled; L < 0 is no window. A list pattern of
// --window-attn-skip-freq is not modelled.
void MegatronImporter::map_window() {
  ModelSpec& m = out_.draft.s.model;
  if (const auto w = text("window-size")) {
    std::string v = *w;
    std::erase_if(v, [](char c) { return c == '(' || c == ')' || c == ' '; });
    const size_t comma = v.find(',');
    int64_t left = 0, right = -1;
    const bool parsed = comma != std::string::npos &&
                        std::from_chars(v.data(), v.data() + comma, left).ec == std::errc() &&
                        std::from_chars(v.data() + comma + 1, v.data() + v.size(), right).ec == std::errc();
    if (!parsed) {
      fail("window-size", fmt::format("expected L,R (keys before and after each query), got '{}'", *w));
      return;
    }
    if (right != 0) {
      fail("window-size", fmt::format("only causal windows (R = 0) are modelled, got {},{}", left, right));
      return;
    }
    if (left == 0) {
      fail("window-size", "a window of 0 keys before each query leaves only the query itself; expected L >= 1 or -1");
      return;
    }
    m.window_size = left < 0 ? 0 : left;
    from("model.window_size", "window-size");
  }
  if (const auto f = text("window-attn-skip-freq")) {
    if (f->find('[') != std::string::npos) {
      fail("window-attn-skip-freq", fmt::format("a per-layer pattern ('{}') is not modelled; expected an integer N >= 1", *f));
      return;
    }
    m.window_attn_skip_freq = static_cast<int>(integer("window-attn-skip-freq", 1).value_or(0));
    from("model.window_attn_skip_freq", "window-attn-skip-freq");
  }
}

void MegatronImporter::map_position_embedding() {
  ModelSpec& m = out_.draft.s.model;
  std::string pet = text("position-embedding-type").value_or("learned_absolute");
  if (on("use-rotary-position-embeddings")) pet = "rope";
  if (pet == "rope" || pet == "mrope" || pet == "yarn") m.position_embedding_type = PositionEmbedding::kRope;
  else if (pet == "learned_absolute") m.position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  else if (pet == "none") m.position_embedding_type = PositionEmbedding::kNone;
  else if (pet == "relative") fail("position-embedding-type", "relative (T5-style) position embeddings are not modelled");
  else fail("position-embedding-type", fmt::format("expected learned_absolute, rope, yarn, mrope or none, got '{}'", pet));
  from("model.position_embedding_type", get("position-embedding-type") ? "position-embedding-type" : "use-rotary-position-embeddings");
  if (on("no-position-embedding") && pet != "rope")
    fail("no-position-embedding", "--no-position-embedding is deprecated, use --position-embedding-type");
  // Megatron requires --max-position-embeddings; flag subsets (e.g. tables of CI runs) often
  // omit it, so it is then taken as --seq-length (map_training) with a note.
  if (get("max-position-embeddings")) {
    m.max_position_embeddings = *integer("max-position-embeddings", 1);
    from("model.max_position_embeddings", "max-position-embeddings");
  }
  m.rotary_base = real("rotary-base", 0, true).value_or(10000.0);
  from("model.rotary_base", "rotary-base");

  RopeScaling& rs = m.rope_scaling;
  auto set_scaling = [&](RopeScalingType t, double factor, int64_t original, std::string_view flag) {
    rs = RopeScaling{t, factor, original};
    for (const char* k : {"model.rope_scaling", "model.rope_scaling.type", "model.rope_scaling.factor",
                          "model.rope_scaling.original_max_position_embeddings"})
      from(k, flag);
  };
  const auto rope_type = text("rope-type");
  if (m.multi_latent_attention) {  // MLATransformerConfig: rope_type yarn, original 4096, factor from args
    const std::string rt = rope_type.value_or("yarn");
    if (rt == "yarn") set_scaling(RopeScalingType::kYarn, real("rotary-scaling-factor", 0, true).value_or(1.0), 4096,
                                  get("rotary-scaling-factor") ? "rotary-scaling-factor" : "multi-latent-attention");
    else if (rt != "rope") fail("rope-type", fmt::format("expected rope or yarn, got '{}'", rt));
    return;
  }
  if (rope_type && *rope_type != "rope")
    fail("rope-type", fmt::format("Common attention only support rope_type=\"rope\", but got {}.", *rope_type));
  if (pet == "yarn") {  // _apply_yarn_config_from_args defaults: factor 1.0, original 4096
    set_scaling(RopeScalingType::kYarn, real("rotary-scaling-factor", 0, true).value_or(1.0),
                integer("yarn-original-max-position-embeddings", 1).value_or(4096), "position-embedding-type");
  } else if (on("use-rope-scaling")) {  // RotaryEmbedding._apply_scaling: original 8192
    set_scaling(RopeScalingType::kLlama3, real("rope-scaling-factor", 0, true).value_or(8.0), 8192, "use-rope-scaling");
  } else if (const auto f = real("rotary-seq-len-interpolation-factor", 0, true)) {
    set_scaling(RopeScalingType::kLinear, *f, m.max_position_embeddings, "rotary-seq-len-interpolation-factor");
  }
}

void MegatronImporter::map_vocab() {
  ModelSpec& m = out_.draft.s.model;
  m.make_vocab_size_divisible_by = static_cast<int>(integer("make-vocab-size-divisible-by", 1).value_or(128));
  from("model.make_vocab_size_divisible_by", "make-vocab-size-divisible-by");
  if (on("no-pad-vocab-size") || on("disable-pad-vocab-size")) {
    m.make_vocab_size_divisible_by = 1;
    note("--no-pad-vocab-size: vocabulary modelled unpadded (make_vocab_size_divisible_by 1)");
  }
  from("model.vocab_size", "vocab-size");
  if (const auto padded = integer("padded-vocab-size", 1)) {
    m.vocab_size = *padded;
    m.make_vocab_size_divisible_by = 1;
    from("model.vocab_size", "padded-vocab-size");
    return;
  }
  if (const auto v = integer("vocab-size", 1)) {
    m.vocab_size = *v;
    return;
  }
  // pretrain_gpt.py passes args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}.
  const std::string type = text("tokenizer-type").value_or("GPT2BPETokenizer");
  const MegatronFlag* model_flag = get("tokenizer-model");
  const std::string model_file = model_flag ? model_flag->value.substr(model_flag->value.rfind('/') + 1) : "";
  if (type == "GPT2BPETokenizer") {
    m.vocab_size = 50257;  // GPT-2 BPE vocabulary (gpt2-vocab.json)
  } else if (type == "TikTokenizer") {
    m.vocab_size = 131072;  // DEFAULT_TIKTOKEN_MAX_VOCAB = 2**17 (core/tokenizers/.../tiktoken_tokenizer.py)
  } else if (type == "Llama2Tokenizer") {
    m.vocab_size = 32000;  // the Llama 2 SentencePiece model
    note("vocab_size 32000 assumed for Llama2Tokenizer (the Llama 2 tokenizer.model); pass --vocab-size if different");
  } else if (model_file == "nemotron_2_256k.model") {
    m.vocab_size = 256000;  // Nemotron-4 SentencePiece model (256K vocabulary)
    note("vocab_size 256000 assumed for nemotron_2_256k.model; pass --vocab-size if different");
  } else {
    fail(get("tokenizer-type") ? "tokenizer-type" : "tokenizer-model",
         fmt::format("the vocabulary size of {} comes from its model file ({}); add --vocab-size N", type,
                     model_file.empty() ? "none given" : model_file));
  }
  from("model.vocab_size", "tokenizer-type");
}

void MegatronImporter::map_moe() {
  ModelSpec& m = out_.draft.s.model;
  m.num_experts = static_cast<int>(integer("num-experts", 0).value_or(0));
  from("model.num_experts", "num-experts");
  m.moe_router_topk = static_cast<int>(integer("moe-router-topk", 1).value_or(2));
  from("model.moe_router_topk", "moe-router-topk");
  if (const auto f = integer("moe-ffn-hidden-size", 1)) {
    m.moe_ffn_hidden_size = *f;
    from("model.moe_ffn_hidden_size", "moe-ffn-hidden-size");
  }
  m.moe_shared_expert_intermediate_size = integer("moe-shared-expert-intermediate-size", 1).value_or(0);
  if (const auto freq = text("moe-layer-freq")) {
    if (freq->find('[') == std::string::npos) {
      auto r = read_int(YAML::Node(*freq), 1);
      if (failed(r)) fail("moe-layer-freq", why(r));
      out_.draft.moe_layer_freq = std::get<0>(r);
    } else {
      auto r = eval_list_pattern(*freq);
      if (failed(r)) fail("moe-layer-freq", why(r));
      for (int v : std::get<0>(r))
        if (v != 0 && v != 1) fail("moe-layer-freq", "the pattern must contain only 0 and 1");
      out_.draft.moe_layer_freq = std::get<0>(r);
    }
    from("model.moe_layer_freq", "moe-layer-freq");
  }
  if (const auto cf = real("moe-expert-capacity-factor", 0, true)) m.moe_expert_capacity_factor = *cf;
  m.moe_pad_expert_input_to_capacity = on("moe-pad-expert-input-to-capacity");
  const std::string disp = text("moe-token-dispatcher-type").value_or("allgather");  // TransformerConfig default
  const auto d = parse_dispatcher(disp);
  if (!d) fail("moe-token-dispatcher-type", fmt::format("expected allgather, alltoall or flex, got '{}'", disp));
  m.moe_token_dispatcher_type = *d;
  // The flex dispatcher's backend (TransformerConfig: "deepep" by default; the deprecated
  // --moe-enable-deepep forces deepep and needs flex).
  const std::string backend = text("moe-flex-dispatcher-backend").value_or("deepep");
  const auto fb = parse_flex_backend(backend);
  if (!fb) fail("moe-flex-dispatcher-backend", fmt::format("expected deepep or hybridep, got '{}'", backend));
  m.moe_flex_dispatcher_backend = *fb;
  if (on("moe-enable-deepep")) {
    if (m.moe_token_dispatcher_type != Dispatcher::kFlex)
      fail("moe-enable-deepep", "DeepEP needs --moe-token-dispatcher-type flex");
    if (m.moe_flex_dispatcher_backend != FlexBackend::kDeepEp)
      fail("moe-enable-deepep", "only one backend: --moe-flex-dispatcher-backend is hybridep");
    m.moe_flex_dispatcher_backend = FlexBackend::kDeepEp;
  }
  const std::string score = text("moe-router-score-function").value_or("softmax");
  const auto sc = parse_router_score(score);
  if (!sc) fail("moe-router-score-function", fmt::format("expected softmax or sigmoid, got '{}'", score));
  m.moe_router_score_function = *sc;
  m.moe_router_num_groups = static_cast<int>(integer("moe-router-num-groups", 1).value_or(0));
  m.moe_router_group_topk = static_cast<int>(integer("moe-router-group-topk", 1).value_or(0));
  from("model.moe_router_num_groups", "moe-router-num-groups");
  from("model.moe_router_group_topk", "moe-router-group-topk");
  m.moe_router_enable_expert_bias = on("moe-router-enable-expert-bias");
  if (const auto dt = text("moe-dispatch-fwd-dtype")) {
    if (*dt != "bf16" && *dt != "mxfp8") fail("moe-dispatch-fwd-dtype", fmt::format("expected bf16 or mxfp8, got '{}'", *dt));
    out_.draft.s.parallel.moe_fp8_dispatch = *dt == "mxfp8";
  }
}

// ---- driver and public API ------------------------------------------------------------

Result<MegatronDraft> MegatronImporter::run() {
  try {
    Scenario& s = out_.draft.s;
    out_.where.document = document_;
    for (const FieldSpec& f : scenario_fields()) {
      const std::string k = dotted_key(f.section, f.key);
      out_.where.display[k] = flag_for_key(k);
    }
    if (num_gpus_ <= 0) throw Fail{error_at(document_, "num_gpus", "the GPU count must be positive")};
    s.name = name_;
    s.num_gpus = num_gpus_;
    s.hardware = hardware_;
    out_.draft.hardware_profile = hardware_.name;
    for (const char* k : {"name", "hardware.profile", "hardware.num_gpus"}) out_.draft.present.insert(k);
    classify();
    map_model();
    map_training();
    map_parallel();
    return std::move(out_);
  } catch (const Fail& f) {
    return f.error;
  }
}

Result<MegatronDraft> megatron_to_draft(const std::vector<MegatronFlag>& flags, int num_gpus, const HardwareSpec& hardware,
                                        const std::string& name, const Loc& document) {
  return MegatronImporter(flags, num_gpus, hardware, name, document).run();
}

Result<MegatronImportReport> import_megatron_report(const std::vector<MegatronFlag>& flags, int num_gpus,
                                                    const HardwareSpec& hardware, const std::string& name) {
  const std::string file = flags.empty() ? std::string("<megatron>") : flags.front().file;
  try {
    auto md = megatron_to_draft(flags, num_gpus, hardware, name, Loc{file, 0, 0});
    if (!md) return md.error();
    MegatronDraft& m = md.value();
    if (auto e = finish_draft(m.draft, m.where)) return *e;
    if (auto e = check_layout(m.draft.s, m.where)) return *e;
    return MegatronImportReport{std::move(m.draft.s), std::move(m.notes), std::move(m.ignored)};
  } catch (const std::exception& e) {  // any library exception becomes an input error
    return ConfigError{file, 0, 0, "", std::string("cannot import: ") + e.what()};
  }
}

Result<Scenario> import_megatron(const std::vector<MegatronFlag>& flags, int num_gpus, const HardwareSpec& hardware,
                                 const std::string& name) {
  auto r = import_megatron_report(flags, num_gpus, hardware, name);
  if (!r) return r.error();
  return std::move(r.value().scenario);
}

}  // namespace lcm::io
