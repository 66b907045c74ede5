// Overrides, derived defaults and layout validation shared by every scenario input.
#include "loader_core.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/resolve.hpp"

namespace lcm::io {

namespace {

// A derived key's problem is shown at the key it is derived from when it was not written.
const std::map<std::string, std::string>& implied_by() {
  static const std::map<std::string, std::string> m = {
      {"model.num_query_groups", "model.num_attention_heads"},
      {"model.kv_channels", "model.hidden_size"},
      {"model.moe_ffn_hidden_size", "model.ffn_hidden_size"},
      {"model.add_qkv_bias", "model.add_bias_linear"},
      {"model.moe_layer_pattern", "model.moe_layer_freq"},
      {"parallel.expert_tensor_parallel_size", "parallel.tensor_model_parallel_size"},
      {"parallel.data_parallel_sharding_strategy", "parallel.use_distributed_optimizer"},
      {"parallel.use_distributed_optimizer", "parallel.data_parallel_sharding_strategy"},
  };
  return m;
}

std::string section_of(const std::string& dotted) {
  const size_t dot = dotted.find('.');
  return dot == std::string::npos ? std::string() : dotted.substr(0, dot);
}

}  // namespace

ConfigError error_for_key(const KeyLocations& where, const std::string& dotted, std::string message) {
  auto shown = [&](const std::string& k) {
    const auto it = where.display.find(k);
    return it != where.display.end() ? it->second : k;
  };
  // The key itself, or its parent for sub-keys (model.rope_scaling.factor -> model.rope_scaling).
  for (std::string k = dotted; !k.empty();) {
    if (const auto it = where.keys.find(k); it != where.keys.end())
      return error_at(it->second, shown(dotted == k ? k : dotted), std::move(message));
    const size_t dot = k.rfind('.');
    if (dot == std::string::npos || section_of(k) == k.substr(0, dot)) break;
    k = k.substr(0, dot);
  }
  if (const auto it = implied_by().find(dotted); it != implied_by().end()) {
    if (const auto w = where.keys.find(it->second); w != where.keys.end())
      return error_at(w->second, shown(dotted),
                      std::move(message) + fmt::format(" (derived from {})", shown(it->second)));
  }
  if (const auto it = where.sections.find(section_of(dotted)); it != where.sections.end())
    return error_at(it->second, shown(dotted), std::move(message));
  return error_at(where.document, shown(dotted), std::move(message));
}

// ---- overrides ------------------------------------------------------------------------

namespace {

// Text after a flow collection's closing bracket ("[1]*32", a Megatron pattern): yaml-cpp
// would read the list and drop the rest without a word.
bool trailing_after_flow(const std::string& value) {
  if (value.empty() || (value[0] != '[' && value[0] != '{')) return false;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return value.find_first_not_of(" \t", i + 1) != std::string::npos;
    }
  }
  return false;
}

YAML::Node value_node(const std::string& value) {
  if (trailing_after_flow(value)) return YAML::Node(value);
  try {
    YAML::Node n = YAML::Load(value);
    if (n.IsDefined()) return n;
  } catch (...) {
    // Not YAML (e.g. "a2a+p2p" is fine, but "[1,2" is not): treat as a plain string.
  }
  return YAML::Node(value);
}

std::vector<std::string> all_dotted_keys() {
  std::vector<std::string> out;
  for (const FieldSpec& f : scenario_fields()) {
    out.push_back(dotted_key(f.section, f.key));
    if (f.section != Section::kTop) out.emplace_back(f.key);
  }
  for (std::string_view sub : kRopeScalingKeys) out.push_back("model.rope_scaling." + std::string(sub));
  return out;
}

}  // namespace

namespace {

Loc override_loc(const Override& ov) {
  return Loc{ov.origin.empty() ? fmt::format("--set {}={}", ov.key, ov.value) : ov.origin, 0, 0};
}

// Megatron names (field_aliases) rewritten to lcm's keys; virtual stage counts come back in
// `vp` (converted once the layer count and pipeline size are final).
Result<std::vector<Override>> rewrite_aliases(const std::vector<Override>& overrides,
                                              std::vector<std::pair<Override, YAML::Node>>& vp) {
  std::vector<Override> out;
  for (const Override& ov : overrides) {
    const FieldAlias* a = find_alias(ov.key);
    if (!a) {
      out.push_back(ov);
      continue;
    }
    const Loc loc = override_loc(ov);
    const std::string origin = loc.file;
    switch (a->kind) {
      case AliasKind::kRename: out.push_back({std::string(a->key), ov.value, origin}); break;
      case AliasKind::kVirtualStages: vp.emplace_back(ov, value_node(ov.value)); break;
      case AliasKind::kRecomputeActivations: {
        const YAML::Node n = value_node(ov.value);
        bool on = false;
        if (!n.IsScalar() || !YAML::convert<bool>::decode(n, on))
          return error_at(loc, ov.key, "expected true or false");
        out.push_back({std::string(a->key), on ? "selective" : "none", origin});
        break;
      }
    }
  }
  return out;
}

}  // namespace

std::optional<ConfigError> apply_overrides(const std::vector<Override>& given, ScenarioDraft& d, KeyLocations& where,
                                           std::vector<std::string>* notes) {
  std::vector<std::pair<Override, YAML::Node>> vp;
  auto rewritten = rewrite_aliases(given, vp);
  if (!rewritten) return rewritten.error();
  const std::vector<Override>& overrides = rewritten.value();
  std::set<std::string> overridden;  // dotted keys
  const int tp_before = d.s.parallel.tensor_model_parallel_size;
  const RecomputeGranularity rc_before = d.s.parallel.recompute_granularity;
  for (const Override& ov : overrides) {
    const Loc set_loc = override_loc(ov);
    std::string key = ov.key;
    // Sections and sub-keys: [section.]key[.sub]
    std::vector<std::string> parts;
    for (size_t pos = 0;;) {
      const size_t dot = key.find('.', pos);
      parts.push_back(key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    const FieldSpec* field = nullptr;
    std::string sub;
    size_t i = 0;
    if (const auto sec = parse_section(parts[0]); sec && parts.size() >= 2) {
      field = find_field(*sec, parts[1]);
      i = 2;
    } else {
      const auto named = fields_named(parts[0]);
      if (named.size() > 1) {
        std::string options;
        for (const FieldSpec* f : named) options += (options.empty() ? "" : " or ") + dotted_key(f->section, f->key);
        return error_at(set_loc, ov.key, fmt::format("ambiguous key; write {}", options));
      }
      if (named.size() == 1) field = named[0];
      i = 1;
    }
    if (field && i < parts.size()) {
      if (field->key != "rope_scaling" || i + 1 != parts.size()) field = nullptr;
      else sub = parts[i];
    }
    if (!field) return error_at(set_loc, ov.key, unknown_message("key", ov.key, all_dotted_keys()));
    const std::string dotted = dotted_key(field->section, field->key);
    YAML::Node node = value_node(ov.value);
    if (!sub.empty()) {
      YAML::Node m(YAML::NodeType::Map);
      m[sub] = node;
      node = m;
    }
    if (std::string err = field->parse(node, d); !err.empty())
      return error_at(set_loc, sub.empty() ? dotted : dotted + "." + sub, err);
    d.present.insert(dotted);
    overridden.insert(dotted);
    where.keys[dotted] = set_loc;
    if (field->key == "rope_scaling") {
      for (const auto& kv : node) {
        d.present.insert(dotted + "." + kv.first.Scalar());
        where.keys[dotted + "." + kv.first.Scalar()] = set_loc;
      }
    }
  }

  // Virtual stage counts (Megatron-Core's virtual_pipeline_model_parallel_size) to layers
  // per virtual stage, on the final layer count and pipeline size.
  ParallelSpec& p = d.s.parallel;
  std::vector<std::string> adjusted;
  for (const auto& [ov, node] : vp) {
    const Loc loc = override_loc(ov);
    const std::string key = "parallel.num_layers_per_virtual_pipeline_stage";
    int64_t n = 0;
    if (!node.IsNull() && (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, n) || n < 1))
      return error_at(loc, ov.key, "expected a virtual stage count >= 1 (or null for none)");
    const int64_t layers = d.s.model.num_layers + (p.account_for_embedding_in_pipeline_split ? 1 : 0) +
                           (p.account_for_loss_in_pipeline_split ? 1 : 0);
    const int64_t pp = std::max<int64_t>(1, p.pipeline_model_parallel_size);
    if (n > 0 && (layers % pp != 0 || (layers / pp) % n != 0))
      return error_at(loc, ov.key,
                      fmt::format("{} layers on {} pipeline stages do not split into {} virtual stages of whole layers",
                                  layers, pp, n));
    p.num_layers_per_virtual_pipeline_stage = n > 0 ? static_cast<int>(layers / pp / n) : 0;
    d.present.insert(key);
    overridden.insert(key);
    where.keys[key] = loc;
    adjusted.push_back(fmt::format("num_layers_per_virtual_pipeline_stage={} (from {}={})",
                                   n > 0 ? std::to_string(layers / pp / n) : "null", ov.key, ov.value));
  }

  // Keys that depend on the one an override changed follow it, unless given too.
  auto set_here = [&](const char* k) { return overridden.count(k) > 0; };
  auto follow = [&](const char* k, const char* from) {
    d.present.insert(k);
    where.keys[k] = where.keys[from];
  };
  if (set_here("parallel.tensor_model_parallel_size") && p.tensor_model_parallel_size == 1 && tp_before != 1) {
    if (p.tp_comm_overlap && !set_here("parallel.tp_comm_overlap")) {
      p.tp_comm_overlap = false;
      follow("parallel.tp_comm_overlap", "parallel.tensor_model_parallel_size");
      adjusted.emplace_back("tp_comm_overlap=false (needs tensor_model_parallel_size > 1)");
    }
    if (p.sequence_parallel && !set_here("parallel.sequence_parallel")) {
      p.sequence_parallel = false;
      follow("parallel.sequence_parallel", "parallel.tensor_model_parallel_size");
      adjusted.emplace_back("sequence_parallel=false (needs tensor_model_parallel_size > 1)");
    }
  }
  if (set_here("parallel.recompute_granularity") && p.recompute_granularity != rc_before &&
      !set_here("parallel.recompute_num_layers")) {
    const bool full = p.recompute_granularity == RecomputeGranularity::kFull;
    if (full && p.recompute_num_layers == 0) {
      p.recompute_num_layers = 1;
      follow("parallel.recompute_num_layers", "parallel.recompute_granularity");
      adjusted.emplace_back("recompute_num_layers=1 (full recompute needs a layer count)");
    } else if (!full && p.recompute_num_layers != 0) {
      p.recompute_num_layers = 0;
      follow("parallel.recompute_num_layers", "parallel.recompute_granularity");
      adjusted.emplace_back("recompute_num_layers=null (applies only to full recompute)");
    }
  }
  if (notes && !adjusted.empty())
    notes->push_back(fmt::format("--set also set {}", fmt::join(adjusted, ", ")));
  return std::nullopt;
}

// ---- derived defaults -------------------------------------------------------------------

std::optional<ConfigError> finish_draft(ScenarioDraft& d, const KeyLocations& where) {
  auto given = [&](const char* k) { return d.present.count(k) > 0; };
  ModelSpec& m = d.s.model;
  ParallelSpec& p = d.s.parallel;

  for (const FieldSpec& f : scenario_fields()) {
    const std::string k = dotted_key(f.section, f.key);
    if (f.required && !given(k.c_str()))
      return error_for_key(where, k, fmt::format("missing required key '{}'", f.key));
  }
  if (std::string err = expand_moe_layer_freq(d); !err.empty())
    return error_for_key(where, "model.moe_layer_freq", err);

  const bool has_dense = !has_moe(m) || m.moe_layer_pattern.end() != std::find(m.moe_layer_pattern.begin(),
                                                                                       m.moe_layer_pattern.end(), 0);
  if (has_dense && !given("model.ffn_hidden_size"))
    return error_for_key(where, "model.ffn_hidden_size",
                         !has_moe(m) ? "missing required key 'ffn_hidden_size'"
                                            : "missing required key 'ffn_hidden_size' (width of the dense layers "
                                              "that moe_layer_freq leaves non-MoE)");
  // Unset fields (0) take the defaults of resolve.hpp, the one place they are defined.
  if (!given("model.num_query_groups")) m.num_query_groups = query_groups(m);
  if (!given("model.kv_channels")) {
    if (m.hidden_size % m.num_attention_heads != 0)
      return error_for_key(where, "model.kv_channels",
                           fmt::format("kv_channels not given and hidden_size ({}) is not divisible by "
                                       "num_attention_heads ({}); set kv_channels",
                                       m.hidden_size, m.num_attention_heads));
    m.kv_channels = static_cast<int64_t>(head_dim(m));
  }
  if (has_moe(m) && !given("model.moe_ffn_hidden_size")) {
    if (!given("model.ffn_hidden_size"))
      return error_for_key(where, "model.moe_ffn_hidden_size",
                           "missing required key 'moe_ffn_hidden_size' (expert width; defaults to ffn_hidden_size, "
                           "which is not given either)");
    m.moe_ffn_hidden_size = expert_ffn(m);
  }
  if (!given("model.add_qkv_bias")) m.add_qkv_bias = m.add_bias_linear;  // Megatron validate_args
  if (!given("parallel.expert_tensor_parallel_size")) p.expert_tensor_parallel_size = p.tensor_model_parallel_size;

  const bool udo = given("parallel.use_distributed_optimizer");
  const bool strat = given("parallel.data_parallel_sharding_strategy");
  if (udo && !strat) {
    p.data_parallel_sharding_strategy = p.use_distributed_optimizer ? DpSharding::kOptim : DpSharding::kNoShard;
  } else if (!udo && strat) {
    p.use_distributed_optimizer = p.data_parallel_sharding_strategy != DpSharding::kNoShard;
  } else if (udo && strat) {
    if (p.use_distributed_optimizer && p.data_parallel_sharding_strategy == DpSharding::kNoShard)
      return error_for_key(where, "parallel.data_parallel_sharding_strategy",
                           "no_shard contradicts use_distributed_optimizer: true (which shards the optimizer "
                           "state: optim); use optim, optim_grads or optim_grads_params");
    if (!p.use_distributed_optimizer && p.data_parallel_sharding_strategy == DpSharding::kOptim)
      return error_for_key(where, "parallel.data_parallel_sharding_strategy",
                           "optim is the distributed optimizer; set use_distributed_optimizer: true");
  }

  const RopeScaling& rs = m.rope_scaling;
  if (rs.type != RopeScalingType::kNone) {
    if (!given("model.rope_scaling.factor"))
      return error_for_key(where, "model.rope_scaling.factor",
                           fmt::format("rope_scaling.factor is required when rope_scaling.type is {}",
                                       to_string(rs.type)));
    if (rs.type != RopeScalingType::kLinear && !given("model.rope_scaling.original_max_position_embeddings"))
      return error_for_key(where, "model.rope_scaling.original_max_position_embeddings",
                           fmt::format("rope_scaling.original_max_position_embeddings is required when "
                                       "rope_scaling.type is {}",
                                       to_string(rs.type)));
  }
  return std::nullopt;
}

std::optional<ConfigError> check_layout(const Scenario& s, const KeyLocations& where) {
  const std::vector<Problem> problems = validate_scenario(s);
  if (problems.empty()) return std::nullopt;
  std::string message = problems.front().message;
  if (problems.size() > 1) {
    std::vector<std::string> others;
    for (size_t i = 1; i < problems.size(); ++i) {
      const std::string& k = problems[i].key;
      if (std::find(others.begin(), others.end(), k) == others.end()) others.push_back(k);
    }
    message += fmt::format(" (and {} more: {})", problems.size() - 1, fmt::join(others, ", "));
  }
  return error_for_key(where, problems.front().key, message);
}

}  // namespace lcm::io
