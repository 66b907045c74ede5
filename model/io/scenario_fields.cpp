// The scenario-file schema table (see scenario_fields.hpp and docs/scenario-format.md).
#include "scenario_fields.hpp"

#include <climits>

#include <fmt/format.h>

#include "enum_tables.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/pipeline_layout.hpp"

namespace lcm::io {

std::string_view section_name(Section s) {
  switch (s) {
    case Section::kTop: return "";
    case Section::kModel: return "model";
    case Section::kTraining: return "training";
    case Section::kParallel: return "parallel";
    case Section::kHardware: return "hardware";
    case Section::kFlopConvention: return "flop_convention";
  }
  return "";
}

std::optional<Section> parse_section(std::string_view name) {
  for (Section s : kAllSections)
    if (s != Section::kTop && section_name(s) == name) return s;
  return std::nullopt;
}

std::string dotted_key(Section section, std::string_view key) {
  if (section == Section::kTop) return std::string(key);
  return fmt::format("{}.{}", section_name(section), key);
}

namespace {

Scenario& mut(const Scenario& s) { return const_cast<Scenario&>(s); }

std::string real_text(double v) { return fmt::format("{}", v); }

// An integer in [min, max]; `max` is the key's cap (lcm/model/limits.hpp).
template <class Acc>
FieldSpec integer(Section sec, std::string_view key, Acc acc, int64_t min, int64_t max, bool required = false) {
  using T = std::remove_reference_t<decltype(acc(std::declval<Scenario&>()))>;
  static_assert(sizeof(T) >= sizeof(int));
  return {sec, key, required,
          [acc, min, max](const YAML::Node& n, ScenarioDraft& d) -> std::string {
            auto r = read_capped_int(n, min, max);
            if (failed(r)) return why(r);
            acc(d.s) = static_cast<T>(std::get<0>(r));
            return {};
          },
          [acc](const Scenario& s) { return YAML::Node(static_cast<int64_t>(acc(mut(s)))); }};
}

// null/omitted = 0 (feature off); otherwise an integer >= 1.
template <class Acc>
FieldSpec optional_count(Section sec, std::string_view key, Acc acc, int64_t max) {
  using T = std::remove_reference_t<decltype(acc(std::declval<Scenario&>()))>;
  return {sec, key, false,
          [acc, max](const YAML::Node& n, ScenarioDraft& d) -> std::string {
            if (n.IsNull()) return acc(d.s) = 0, std::string();
            auto r = read_capped_int(n, 1, max);
            if (failed(r)) return why(r) + " (or null for none)";
            acc(d.s) = static_cast<T>(std::get<0>(r));
            return {};
          },
          [acc](const Scenario& s) {
            const auto v = acc(mut(s));
            return v > 0 ? YAML::Node(static_cast<int64_t>(v)) : YAML::Node(YAML::NodeType::Null);
          }};
}

template <class Acc>
FieldSpec real(Section sec, std::string_view key, Acc acc, double min, bool exclusive) {
  return {sec, key, false,
          [acc, min, exclusive](const YAML::Node& n, ScenarioDraft& d) -> std::string {
            auto r = read_double(n, min, exclusive);
            if (failed(r)) return why(r);
            acc(d.s) = std::get<0>(r);
            return {};
          },
          [acc](const Scenario& s) { return YAML::Node(real_text(acc(mut(s)))); }};
}

template <class Acc>
FieldSpec boolean(Section sec, std::string_view key, Acc acc) {
  return {sec, key, false,
          [acc](const YAML::Node& n, ScenarioDraft& d) -> std::string {
            auto r = read_bool(n);
            if (failed(r)) return why(r);
            acc(d.s) = std::get<0>(r);
            return {};
          },
          [acc](const Scenario& s) { return YAML::Node(static_cast<bool>(acc(mut(s)))); }};
}

template <class Acc>
FieldSpec enumeration(Section sec, std::string_view key, Acc acc) {
  using E = std::remove_reference_t<decltype(acc(std::declval<Scenario&>()))>;
  return {sec, key, false,
          [acc](const YAML::Node& n, ScenarioDraft& d) -> std::string {
            auto r = read_string(n);
            if (failed(r)) return why(r) + "; expected one of: " + spelling_list<E>();
            const auto v = parse_enum<E>(std::get<0>(r));
            if (!v) return fmt::format("expected one of: {}; got '{}'", spelling_list<E>(), std::get<0>(r));
            acc(d.s) = *v;
            return {};
          },
          [acc](const Scenario& s) { return YAML::Node(std::string(to_string(acc(mut(s))))); },
          [] {
            std::vector<std::string> out;
            const auto table = spellings<E>();
            for (size_t i = 0; i < table.size(); ++i)
              if (i == 0 || table[i - 1].value != table[i].value) out.emplace_back(table[i].name);
            return out;
          }};
}

std::string parse_rope_scaling(const YAML::Node& n, ScenarioDraft& d) {
  if (!n.IsMap())
    return fmt::format("expected a mapping {{type: llama3|yarn|linear|dynamic_ntk|none, factor: F, "
                       "original_max_position_embeddings: N}}, got {}",
                       describe(n));
  RopeScaling& rs = d.s.model.rope_scaling;
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const std::string sub = kv.first.Scalar();
    std::string err;
    if (!seen.insert(sub).second) {
      err = fmt::format("{}: duplicate key", sub);
    } else if (sub == "type") {
      auto r = read_string(kv.second);
      const auto t = failed(r) ? std::nullopt : parse_enum<RopeScalingType>(std::get<0>(r));
      if (!t) err = fmt::format("type: expected one of: {}; got {}", spelling_list<RopeScalingType>(), describe(kv.second));
      else rs.type = *t;
    } else if (sub == "factor") {
      auto r = read_double(kv.second, 0.0, true);
      if (failed(r)) err = "factor: " + why(r);
      else rs.factor = std::get<0>(r);
    } else if (sub == "original_max_position_embeddings") {
      auto r = read_capped_int(kv.second, 1, limits::kSeqLength);
      if (failed(r)) err = "original_max_position_embeddings: " + why(r);
      else rs.original_max_position_embeddings = std::get<0>(r);
    } else {
      std::vector<std::string> keys(std::begin(kRopeScalingKeys), std::end(kRopeScalingKeys));
      err = unknown_message("key", sub, keys);
    }
    if (!err.empty()) return err;
  }
  return {};
}

// window_size: Megatron's (left, right) pair [W, 0], or W alone; null or [-1, 0] = no window.
// Only causal windows (right bound 0) are modelled.
std::string parse_window_size(const YAML::Node& n, ScenarioDraft& d) {
  const std::string expected = "expected a window of W >= 1 tokens before each query: W or [W, 0] (or null for none)";
  int64_t& w = d.s.model.window_size;
  if (n.IsNull()) return w = 0, std::string();
  if (n.IsSequence()) {
    if (n.size() != 2) return fmt::format("{}, got a list of {}", expected, n.size());
    auto left = read_int(n[0], -1, limits::kSeqLength);
    if (failed(left)) return expected + "; left bound: " + why(left);
    auto right = read_int(n[1], 0);
    if (failed(right)) return expected + "; right bound: " + why(right);
    if (std::get<0>(right) != 0)
      return fmt::format("only causal windows are modelled (right bound 0), got [{}, {}]", std::get<0>(left),
                         std::get<0>(right));
    if (std::get<0>(left) == 0) return expected + ", got [0, 0]";
    w = std::get<0>(left) < 0 ? 0 : std::get<0>(left);
    return {};
  }
  auto r = read_capped_int(n, 1, limits::kSeqLength);
  if (failed(r)) return expected + "; " + why(r);
  w = std::get<0>(r);
  return {};
}

YAML::Node emit_window_size(const Scenario& s) {
  if (s.model.window_size <= 0) return YAML::Node(YAML::NodeType::Null);
  YAML::Node n(YAML::NodeType::Sequence);
  n.push_back(s.model.window_size);
  n.push_back(0);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

YAML::Node emit_rope_scaling(const Scenario& s) {
  YAML::Node n(YAML::NodeType::Map);
  const RopeScaling& rs = s.model.rope_scaling;
  n["type"] = std::string(to_string(rs.type));
  if (rs.type != RopeScalingType::kNone || rs.factor != 1.0) n["factor"] = real_text(rs.factor);
  if (rs.original_max_position_embeddings > 0) n["original_max_position_embeddings"] = rs.original_max_position_embeddings;
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

std::string parse_moe_layer_freq(const YAML::Node& n, ScenarioDraft& d) {
  const std::string expected =
      "expected an integer N >= 1 (layer i is MoE iff i % N == 0), a list of 0/1 per layer, or a "
      "Megatron pattern string like \"([0]*3+[1]*58)\"";
  if (n.IsSequence()) {
    std::vector<int> v;
    for (const auto& e : n) {
      auto r = read_int(e, 0, 1);
      if (failed(r)) return expected + "; list element: " + why(r);
      v.push_back(static_cast<int>(std::get<0>(r)));
    }
    d.moe_layer_freq = std::move(v);
    return {};
  }
  if (!n.IsScalar()) return expected + ", got " + describe(n);
  const std::string& text = n.Scalar();
  if (text.find('[') == std::string::npos) {
    auto r = read_int(n, 1);
    if (failed(r)) return expected + ", got " + describe(n);
    d.moe_layer_freq = std::get<0>(r);
    return {};
  }
  auto r = eval_list_pattern(text);
  if (failed(r)) return why(r);
  for (int v : std::get<0>(r))
    if (v != 0 && v != 1) return fmt::format("moe_layer_freq pattern '{}' must contain only 0 and 1", text);
  d.moe_layer_freq = std::get<0>(r);
  return {};
}

YAML::Node emit_moe_layer_freq(const Scenario& s) {
  const auto& p = s.model.moe_layer_pattern;
  if (p.empty()) return YAML::Node(1);
  return YAML::Node(list_pattern_string(p));
}

// A list of module names, as YAML (`[a, b]`) or in Megatron's CLI form ("a b", "a,b").
std::string read_name_list(const YAML::Node& n, std::vector<std::string>& names) {
  if (n.IsSequence()) {
    for (const auto& e : n) {
      auto r = read_string(e);
      if (failed(r)) return "list element: " + why(r);
      names.push_back(std::get<0>(r));
    }
  } else if (n.IsScalar()) {  // Megatron CLI form: "core_attn moe_act"
    std::string cur;
    for (char c : n.Scalar() + " ") {
      if (c == ' ' || c == ',' || c == '[' || c == ']') {
        if (!cur.empty()) names.push_back(cur), cur.clear();
      } else {
        cur += c;
      }
    }
  } else {
    return "expected a list of module names, got " + describe(n);
  }
  return {};
}

// A list of names of a bit-set enum E into `bits`; `what` names an entry in the error.
template <class E>
std::string read_name_bits(const YAML::Node& n, const char* what, uint32_t& bits) {
  std::vector<std::string> names;
  if (std::string e = read_name_list(n, names); !e.empty()) return e;
  bits = 0;
  for (const std::string& name : names) {
    const auto v = parse_enum<E>(name);
    if (!v) return fmt::format("unknown {} '{}'; expected any of: {}", what, name, spelling_list<E>());
    bits |= *v;
  }
  return {};
}

std::string parse_recompute_modules(const YAML::Node& n, ScenarioDraft& d) {
  uint32_t bits = 0;
  if (std::string e = read_name_bits<RecomputeModule>(n, "recompute module", bits); !e.empty()) return e;
  d.s.parallel.recompute_modules = bits;
  return {};
}

// Megatron --cuda-graph-modules: an empty list (or Megatron's deprecated "full") is the whole
// layer. The deprecated "full_iteration" entry is Megatron's cuda_graph_impl: full_iteration.
std::string parse_cuda_graph_modules(const YAML::Node& n, ScenarioDraft& d) {
  std::vector<std::string> names;
  if (std::string e = read_name_list(n, names); !e.empty()) return e;
  uint32_t bits = 0;
  for (const std::string& name : names) {
    if (name == "full" && names.size() == 1) break;
    if (name == "full_iteration")
      return "'full_iteration' is not a module: set cuda_graph_impl: full_iteration (Megatron's replacement for this "
             "deprecated scope) and leave cuda_graph_modules empty";
    const auto m = parse_cuda_graph_module(name);
    if (!m)
      return fmt::format("unknown CUDA graph module '{}'; expected any of: {} (an empty list captures the whole layer)",
                         name, spelling_list<CudaGraphModule>());
    bits |= *m;
  }
  d.s.parallel.cuda_graph_modules = bits;
  return {};
}

YAML::Node emit_cuda_graph_modules(const Scenario& s) {
  if (s.parallel.cuda_graph_impl == CudaGraphImpl::kNone && s.parallel.cuda_graph_modules == 0)
    return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node n(YAML::NodeType::Sequence);
  for (const std::string& name : cuda_graph_module_names(s.parallel.cuda_graph_modules)) n.push_back(name);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

std::string parse_lora_targets(const YAML::Node& n, ScenarioDraft& d) {
  uint32_t bits = 0;
  if (std::string e = read_name_bits<LoraTarget>(n, "LoRA target", bits); !e.empty()) return e;
  if (bits == 0) return "expected at least one LoRA target (linear_qkv, linear_proj, linear_fc1, linear_fc2)";
  d.s.training.lora_targets = bits;
  return {};
}

YAML::Node emit_lora_targets(const Scenario& s) {
  if (s.training.peft == Peft::kNone && s.training.lora_targets == kLoraAllTargets)
    return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node n(YAML::NodeType::Sequence);
  for (const std::string& name : lora_target_names(s.training.lora_targets)) n.push_back(name);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

YAML::Node emit_recompute_modules(const Scenario& s) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const std::string& name : recompute_module_names(s.parallel.recompute_modules)) n.push_back(name);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

std::string parse_hcp_sizes(const YAML::Node& n, ScenarioDraft& d) {
  if (!n.IsSequence()) return "expected a list of integers [a2a_size, p2p_size], got " + describe(n);
  std::vector<int> v;
  int64_t product = 1;
  for (const auto& e : n) {
    auto r = read_capped_int(e, 1, limits::kNumGpus);
    if (failed(r)) return "list element: " + why(r);
    product *= std::get<0>(r);
    if (product > limits::kNumGpus)
      return fmt::format("the sizes multiply to more than {} (lcm's cap on parallel sizes)", limits::kNumGpus);
    v.push_back(static_cast<int>(std::get<0>(r)));
  }
  d.s.parallel.hierarchical_context_parallel_sizes = std::move(v);
  return {};
}

YAML::Node emit_hcp_sizes(const Scenario& s) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (int v : s.parallel.hierarchical_context_parallel_sizes) n.push_back(v);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

std::string parse_rank_order_field(const YAML::Node& n, ScenarioDraft& d) {
  const std::string expected = "expected a permutation of tp, cp, ep, dp, pp joined by '-', e.g. tp-cp-ep-dp-pp";
  if (!n.IsScalar()) return expected + ", got " + describe(n);
  const auto order = parse_rank_order(n.Scalar());
  if (!order) return expected + ", got '" + n.Scalar() + "'";
  for (int i = 0; i < kNumOrderDims; ++i) d.s.parallel.order[i] = (*order)[i];
  return {};
}

std::vector<FieldSpec> build() {
  using S = Scenario;
  namespace L = limits;
  constexpr Section M = Section::kModel, T = Section::kTraining, P = Section::kParallel, H = Section::kHardware,
                    F = Section::kFlopConvention;
  std::vector<FieldSpec> f;
  f.push_back({Section::kTop, "name", true,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 auto r = read_string(n);
                 if (failed(r)) return why(r);
                 d.s.name = std::get<0>(r);
                 return {};
               },
               [](const S& s) { return YAML::Node(s.name); }});
  // ---- model ----
  f.push_back({M, "name", false,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 auto r = read_string(n);
                 if (failed(r)) return why(r);
                 d.s.model.name = std::get<0>(r);
                 return {};
               },
               [](const S& s) { return YAML::Node(s.model.name); }});
  f.push_back(integer(M, "num_layers", [](S& s) -> auto& { return s.model.num_layers; }, 1, L::kNumLayers, true));
  f.push_back(integer(M, "hidden_size", [](S& s) -> auto& { return s.model.hidden_size; }, 1, L::kHiddenSize, true));
  f.push_back(integer(M, "ffn_hidden_size", [](S& s) -> auto& { return s.model.ffn_hidden_size; }, 0, L::kFfnHiddenSize));
  f.push_back(integer(M, "num_attention_heads", [](S& s) -> auto& { return s.model.num_attention_heads; }, 1, L::kAttentionHeads, true));
  f.push_back(integer(M, "num_query_groups", [](S& s) -> auto& { return s.model.num_query_groups; }, 1, L::kAttentionHeads));
  f.push_back(integer(M, "kv_channels", [](S& s) -> auto& { return s.model.kv_channels; }, 1, L::kHeadDim));
  f.push_back(integer(M, "vocab_size", [](S& s) -> auto& { return s.model.vocab_size; }, 1, L::kVocabSize, true));
  f.push_back(integer(M, "make_vocab_size_divisible_by",
                      [](S& s) -> auto& { return s.model.make_vocab_size_divisible_by; }, 1, L::kVocabSize));
  f.push_back(boolean(M, "untie_embeddings_and_output_weights",
                      [](S& s) -> auto& { return s.model.untie_embeddings_and_output_weights; }));
  f.push_back(boolean(M, "swiglu", [](S& s) -> auto& { return s.model.swiglu; }));
  {
    // Written only when not Megatron's default for the gate (GeLU; SiLU with swiglu).
    FieldSpec act = enumeration(M, "activation", [](S& s) -> auto& { return s.model.activation; });
    act.emit = [](const S& s) {
      return s.model.activation == Activation::kDefault ? YAML::Node(YAML::NodeType::Undefined)
                                                        : YAML::Node(std::string(to_string(s.model.activation)));
    };
    f.push_back(std::move(act));
  }
  f.push_back(boolean(M, "add_bias_linear", [](S& s) -> auto& { return s.model.add_bias_linear; }));
  f.push_back(boolean(M, "add_qkv_bias", [](S& s) -> auto& { return s.model.add_qkv_bias; }));
  f.push_back(boolean(M, "qk_layernorm", [](S& s) -> auto& { return s.model.qk_layernorm; }));
  f.push_back(enumeration(M, "normalization", [](S& s) -> auto& { return s.model.normalization; }));
  f.push_back(enumeration(M, "position_embedding_type",
                          [](S& s) -> auto& { return s.model.position_embedding_type; }));
  f.push_back(optional_count(M, "max_position_embeddings", [](S& s) -> auto& { return s.model.max_position_embeddings; }, L::kSeqLength));
  f.push_back(real(M, "rotary_base", [](S& s) -> auto& { return s.model.rotary_base; }, 0.0, true));
  f.push_back({M, "rope_scaling", false, parse_rope_scaling, emit_rope_scaling});
  f.push_back({M, "window_size", false, parse_window_size, emit_window_size});
  f.push_back(optional_count(M, "window_attn_skip_freq", [](S& s) -> auto& { return s.model.window_attn_skip_freq; },
                             L::kNumLayers));
  f.push_back(integer(M, "num_experts", [](S& s) -> auto& { return s.model.num_experts; }, 0, L::kNumExperts));
  f.push_back(integer(M, "moe_router_topk", [](S& s) -> auto& { return s.model.moe_router_topk; }, 1, L::kNumExperts));
  f.push_back(integer(M, "moe_ffn_hidden_size", [](S& s) -> auto& { return s.model.moe_ffn_hidden_size; }, 0, L::kFfnHiddenSize));
  f.push_back(integer(M, "moe_shared_expert_intermediate_size",
                      [](S& s) -> auto& { return s.model.moe_shared_expert_intermediate_size; }, 0, L::kFfnHiddenSize));
  f.push_back({M, "moe_layer_freq", false, parse_moe_layer_freq, emit_moe_layer_freq});
  f.push_back({M, "moe_expert_capacity_factor", false,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 if (n.IsNull()) return d.s.model.moe_expert_capacity_factor = 0.0, std::string();
                 auto r = read_double(n, 0.0, true);
                 if (failed(r)) return why(r) + " (or null for dropless)";
                 d.s.model.moe_expert_capacity_factor = std::get<0>(r);
                 return {};
               },
               [](const S& s) {
                 const double v = s.model.moe_expert_capacity_factor;
                 return v > 0 ? YAML::Node(real_text(v)) : YAML::Node(YAML::NodeType::Null);
               }});
  f.push_back(boolean(M, "moe_pad_expert_input_to_capacity",
                      [](S& s) -> auto& { return s.model.moe_pad_expert_input_to_capacity; }));
  f.push_back(enumeration(M, "moe_token_dispatcher_type",
                          [](S& s) -> auto& { return s.model.moe_token_dispatcher_type; }));
  f.push_back(enumeration(M, "moe_flex_dispatcher_backend",
                          [](S& s) -> auto& { return s.model.moe_flex_dispatcher_backend; }));
  f.push_back(enumeration(M, "moe_router_score_function",
                          [](S& s) -> auto& { return s.model.moe_router_score_function; }));
  f.push_back(integer(M, "moe_router_num_groups", [](S& s) -> auto& { return s.model.moe_router_num_groups; }, 0, L::kNumExperts));
  f.push_back(integer(M, "moe_router_group_topk", [](S& s) -> auto& { return s.model.moe_router_group_topk; }, 0, L::kNumExperts));
  f.push_back(boolean(M, "moe_router_enable_expert_bias",
                      [](S& s) -> auto& { return s.model.moe_router_enable_expert_bias; }));
  // balanced | zipf:S (the syntax of `lcm capacity --skew`); S small enough that E^-S does not
  // underflow for any expert count the caps allow.
  f.push_back({M, "moe_routing_skew", false,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 const std::string expected = "expected balanced or zipf:S with 0 <= S <= 64 (e.g. zipf:1.2)";
                 if (!n.IsScalar()) return fmt::format("{}, got {}", expected, describe(n));
                 const std::string v = n.Scalar();
                 if (v == "balanced") return d.s.model.moe_routing_skew = 0.0, std::string();
                 if (v.rfind("zipf:", 0) != 0) return fmt::format("'{}': {}", v, expected);
                 const YAML::Node num(v.substr(5));
                 auto r = read_double(num, 0.0, false);
                 if (failed(r) || std::get<0>(r) > 64.0) return fmt::format("'{}': {}", v, expected);
                 d.s.model.moe_routing_skew = std::get<0>(r);
                 return {};
               },
               [](const S& s) {
                 const double v = s.model.moe_routing_skew;
                 return YAML::Node(v > 0 ? "zipf:" + real_text(v) : std::string("balanced"));
               },
               [] { return std::vector<std::string>{"balanced", "zipf:0.5", "zipf:1.2"}; }});
  f.push_back(boolean(M, "multi_latent_attention", [](S& s) -> auto& { return s.model.multi_latent_attention; }));
  f.push_back(integer(M, "q_lora_rank", [](S& s) -> auto& { return s.model.q_lora_rank; }, 0, L::kHeadDim));
  f.push_back(integer(M, "kv_lora_rank", [](S& s) -> auto& { return s.model.kv_lora_rank; }, 0, L::kHeadDim));
  f.push_back(integer(M, "qk_head_dim", [](S& s) -> auto& { return s.model.qk_head_dim; }, 0, L::kHeadDim));
  f.push_back(integer(M, "qk_pos_emb_head_dim", [](S& s) -> auto& { return s.model.qk_pos_emb_head_dim; }, 0, L::kHeadDim));
  f.push_back(integer(M, "v_head_dim", [](S& s) -> auto& { return s.model.v_head_dim; }, 0, L::kHeadDim));
  f.push_back(integer(M, "mtp_num_layers", [](S& s) -> auto& { return s.model.mtp_num_layers; }, 0, L::kMtpLayers));
  f.push_back(real(M, "hidden_dropout", [](S& s) -> auto& { return s.model.hidden_dropout; }, 0.0, false));
  f.push_back(real(M, "attention_dropout", [](S& s) -> auto& { return s.model.attention_dropout; }, 0.0, false));
  // ---- training ----
  f.push_back({T, "seq_length", true,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 auto r = read_size_with_suffix(n, 1, L::kSeqLength);
                 if (failed(r)) return why(r);
                 d.s.training.seq_length = std::get<0>(r);
                 return {};
               },
               [](const S& s) { return YAML::Node(s.training.seq_length); }});
  f.push_back(integer(T, "document_length", [](S& s) -> auto& { return s.training.document_length; }, 0, L::kSeqLength));
  f.push_back(enumeration(T, "peft", [](S& s) -> auto& { return s.training.peft; }));
  f.push_back(integer(T, "lora_rank", [](S& s) -> auto& { return s.training.lora_rank; }, 0, L::kHiddenSize));
  f.push_back({T, "lora_target_modules", false, parse_lora_targets, emit_lora_targets});
  f.push_back(integer(T, "micro_batch_size", [](S& s) -> auto& { return s.training.micro_batch_size; }, 1, L::kMicroBatchSize, true));
  f.push_back(integer(T, "global_batch_size", [](S& s) -> auto& { return s.training.global_batch_size; }, 1, L::kGlobalBatchSize, true));
  f.push_back(enumeration(T, "precision", [](S& s) -> auto& { return s.training.precision; }));
  f.push_back(enumeration(T, "fp8_recipe", [](S& s) -> auto& { return s.training.fp8_recipe; }));
  f.push_back(boolean(
      T, "fp8_param_gather", [](S & s) -> auto& { return s.training.fp8_param_gather; }));
  f.push_back(enumeration(T, "attention_backend", [](S& s) -> auto& { return s.training.attention_backend; }));
  f.push_back(boolean(T, "cross_entropy_loss_fusion", [](S& s) -> auto& { return s.training.cross_entropy_loss_fusion; }));
  f.push_back(enumeration(T, "cross_entropy_fusion_impl",
                          [](S& s) -> auto& { return s.training.cross_entropy_fusion_impl; }));
  f.push_back(boolean(T, "grad_reduce_in_fp32", [](S& s) -> auto& { return s.training.grad_reduce_in_fp32; }));
  f.push_back(enumeration(T, "main_params_dtype", [](S& s) -> auto& { return s.training.main_params_dtype; }));
  f.push_back(boolean(
      T, "store_param_remainders", [](S & s) -> auto& { return s.training.store_param_remainders; }));
  f.push_back(enumeration(T, "exp_avg_dtype", [](S& s) -> auto& { return s.training.exp_avg_dtype; }));
  f.push_back(enumeration(T, "exp_avg_sq_dtype", [](S& s) -> auto& { return s.training.exp_avg_sq_dtype; }));
  // ---- parallel ----
  f.push_back(integer(P, "tensor_model_parallel_size",
                      [](S& s) -> auto& { return s.parallel.tensor_model_parallel_size; }, 1, L::kNumGpus));
  f.push_back(boolean(P, "sequence_parallel", [](S& s) -> auto& { return s.parallel.sequence_parallel; }));
  f.push_back(integer(P, "pipeline_model_parallel_size",
                      [](S& s) -> auto& { return s.parallel.pipeline_model_parallel_size; }, 1, L::kNumGpus));
  f.push_back(optional_count(P, "num_layers_per_virtual_pipeline_stage",
                             [](S& s) -> auto& { return s.parallel.num_layers_per_virtual_pipeline_stage; }, L::kNumLayers));
  f.push_back(optional_count(P, "num_layers_in_first_pipeline_stage",
                             [](S& s) -> auto& { return s.parallel.num_layers_in_first_pipeline_stage; }, L::kNumLayers));
  f.push_back(optional_count(P, "num_layers_in_last_pipeline_stage",
                             [](S& s) -> auto& { return s.parallel.num_layers_in_last_pipeline_stage; }, L::kNumLayers));
  f.push_back(optional_count(P, "microbatch_group_size_per_virtual_pipeline_stage",
                             [](S& s) -> auto& { return s.parallel.microbatch_group_size_per_vp_stage; },
                             L::kGlobalBatchSize));
  f.push_back({P, "pipeline_model_parallel_layout", false,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 if (n.IsNull()) {
                   d.s.parallel.pipeline_layout.clear();
                   return {};
                 }
                 auto r = read_string(n);
                 if (failed(r) || std::get<0>(r).empty())
                   return "expected a Megatron pipeline layout such as \"Et|(tt|)*30mL\" (stages separated by '|'; E "
                          "embedding, t transformer layer, m MTP layer, L loss), got " +
                          describe(n);
                 ExpandedPipelineLayout e = expand_pipeline_layout(std::get<0>(r));
                 if (!e.error.empty()) return "expected a Megatron pipeline layout: " + e.error;
                 d.s.parallel.pipeline_layout = std::move(e.stages);
                 return {};
               },
               [](const Scenario& s) {
                 return s.parallel.pipeline_layout.empty()
                            ? YAML::Node(YAML::NodeType::Undefined)
                            : YAML::Node(pipeline_layout_text(s.parallel.pipeline_layout));
               }});
  f.push_back(boolean(P, "account_for_embedding_in_pipeline_split",
                      [](S& s) -> auto& { return s.parallel.account_for_embedding_in_pipeline_split; }));
  f.push_back(boolean(P, "account_for_loss_in_pipeline_split",
                      [](S& s) -> auto& { return s.parallel.account_for_loss_in_pipeline_split; }));
  f.push_back(integer(P, "context_parallel_size", [](S& s) -> auto& { return s.parallel.context_parallel_size; }, 1, L::kNumGpus));
  f.push_back(enumeration(P, "cp_comm_type", [](S& s) -> auto& { return s.parallel.cp_comm_type; }));
  f.push_back({P, "hierarchical_context_parallel_sizes", false, parse_hcp_sizes, emit_hcp_sizes});
  f.push_back(integer(P, "expert_model_parallel_size",
                      [](S& s) -> auto& { return s.parallel.expert_model_parallel_size; }, 1, L::kNumGpus));
  f.push_back(integer(P, "expert_tensor_parallel_size",
                      [](S& s) -> auto& { return s.parallel.expert_tensor_parallel_size; }, 1, L::kNumGpus));
  f.push_back(boolean(P, "use_distributed_optimizer",
                      [](S& s) -> auto& { return s.parallel.use_distributed_optimizer; }));
  f.push_back(enumeration(P, "data_parallel_sharding_strategy",
                          [](S& s) -> auto& { return s.parallel.data_parallel_sharding_strategy; }));
  f.push_back(enumeration(P, "recompute_granularity", [](S& s) -> auto& { return s.parallel.recompute_granularity; }));
  f.push_back(enumeration(P, "recompute_method", [](S& s) -> auto& { return s.parallel.recompute_method; }));
  f.push_back(optional_count(P, "recompute_num_layers", [](S& s) -> auto& { return s.parallel.recompute_num_layers; }, L::kNumLayers));
  f.push_back({P, "recompute_modules", false, parse_recompute_modules, emit_recompute_modules});
  f.push_back({P, "rank_order", false, parse_rank_order_field,
               [](const S& s) { return YAML::Node(rank_order_to_string(s.parallel.order)); }});
  f.push_back(boolean(P, "overlap_grad_reduce", [](S& s) -> auto& { return s.parallel.overlap_grad_reduce; }));
  f.push_back(boolean(P, "overlap_param_gather", [](S& s) -> auto& { return s.parallel.overlap_param_gather; }));
  f.push_back(boolean(P, "tp_comm_overlap", [](S& s) -> auto& { return s.parallel.tp_comm_overlap; }));
  f.push_back(boolean(P, "overlap_moe_expert_parallel_comm",
                      [](S& s) -> auto& { return s.parallel.overlap_moe_expert_parallel_comm; }));
  f.push_back(boolean(P, "moe_fp8_dispatch", [](S& s) -> auto& { return s.parallel.moe_fp8_dispatch; }));
  {
    FieldSpec impl = enumeration(P, "cuda_graph_impl", [](S& s) -> auto& { return s.parallel.cuda_graph_impl; });
    impl.emit = [](const S& s) {
      return s.parallel.cuda_graph_impl == CudaGraphImpl::kNone
                 ? YAML::Node(YAML::NodeType::Undefined)
                 : YAML::Node(std::string(to_string(s.parallel.cuda_graph_impl)));
    };
    f.push_back(std::move(impl));
  }
  f.push_back({P, "cuda_graph_modules", false, parse_cuda_graph_modules, emit_cuda_graph_modules});
  // ---- hardware (the profile itself is resolved by the loader; not emitted from here) ----
  f.push_back({H, "profile", true,
               [](const YAML::Node& n, ScenarioDraft& d) -> std::string {
                 auto r = read_string(n);
                 if (failed(r) || std::get<0>(r).empty())
                   return "expected a profile name (e.g. h200-sxm) or a path to a profile YAML, got " + describe(n);
                 d.hardware_profile = std::get<0>(r);
                 return {};
               },
               {}});
  f.push_back(integer(H, "num_gpus", [](S& s) -> auto& { return s.num_gpus; }, 1, L::kNumGpus, true));
  // ---- flop_convention ----
  f.push_back(boolean(F, "causal_halved", [](S& s) -> auto& { return s.flop_convention.causal_halved; }));
  f.push_back(boolean(F, "include_recompute", [](S& s) -> auto& { return s.flop_convention.include_recompute; }));
  return f;
}

}  // namespace

const std::vector<FieldSpec>& scenario_fields() {
  static const std::vector<FieldSpec> fields = build();
  return fields;
}

const std::vector<FieldAlias>& field_aliases() {
  static const std::vector<FieldAlias> v = {
      {"virtual_pipeline_model_parallel_size", "parallel.num_layers_per_virtual_pipeline_stage",
       AliasKind::kVirtualStages},
      {"decoder_first_pipeline_num_layers", "parallel.num_layers_in_first_pipeline_stage", AliasKind::kRename},
      {"decoder_last_pipeline_num_layers", "parallel.num_layers_in_last_pipeline_stage", AliasKind::kRename},
      {"recompute_activations", "parallel.recompute_granularity", AliasKind::kRecomputeActivations},
      {"cuda_graph_scope", "parallel.cuda_graph_modules", AliasKind::kRename},  // Megatron's former name
  };
  return v;
}

const FieldAlias* find_alias(std::string_view name) {
  for (const FieldAlias& a : field_aliases()) {
    if (name == a.name) return &a;
    const std::string_view sec = a.key.substr(0, a.key.find('.') + 1);
    if (name.starts_with(sec) && name.substr(sec.size()) == a.name) return &a;
  }
  return nullptr;
}

const FieldSpec* find_field(Section section, std::string_view key) {
  for (const FieldSpec& f : scenario_fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

std::vector<const FieldSpec*> fields_named(std::string_view key) {
  std::vector<const FieldSpec*> out;
  for (const FieldSpec& f : scenario_fields())
    if (f.key == key) out.push_back(&f);
  return out;
}

std::vector<std::string> section_keys(Section section) {
  std::vector<std::string> out;
  for (const FieldSpec& f : scenario_fields())
    if (f.section == section) out.emplace_back(f.key);
  if (section == Section::kTop)
    for (Section s : kAllSections)
      if (s != Section::kTop) out.emplace_back(section_name(s));
  return out;
}

std::string expand_moe_layer_freq(ScenarioDraft& d) {
  ModelSpec& m = d.s.model;
  if (std::holds_alternative<std::monostate>(d.moe_layer_freq)) return {};
  if (const auto* n = std::get_if<int64_t>(&d.moe_layer_freq)) {
    m.moe_layer_pattern.clear();
    if (*n == 1) return {};
    for (int i = 0; i < m.num_layers; ++i) m.moe_layer_pattern.push_back(i % *n == 0 ? 1 : 0);
    return {};
  }
  const auto& list = std::get<std::vector<int>>(d.moe_layer_freq);
  if (static_cast<int64_t>(list.size()) != m.num_layers)
    return fmt::format("moe_layer_freq lists {} layers but num_layers is {}", list.size(), m.num_layers);
  m.moe_layer_pattern.assign(list.begin(), list.end());
  return {};
}

}  // namespace lcm::io
