// Layouts: applying one to a scenario, naming it, and writing it as Megatron flags.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

namespace {

auto tie_of(const Layout& l) {
  return std::make_tuple(l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.custom_pipeline, l.ep,
                         l.etp, l.mbs,
                         static_cast<int>(l.recompute), static_cast<int>(l.sharding), static_cast<int>(l.cp_comm),
                         l.cp_a2a, static_cast<int>(l.dispatcher), l.pp_before_dp);
}

constexpr Dim kDefaultOrder[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kDp, Dim::kPp};
constexpr Dim kPpDpOrder[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kPp, Dim::kDp};

int layers_per_rank(const Scenario& s, int pp) {
  const int n = s.model.num_layers + (s.parallel.account_for_embedding_in_pipeline_split ? 1 : 0) +
                (s.parallel.account_for_loss_in_pipeline_split ? 1 : 0);
  return pp > 0 ? n / pp : n;
}

std::string cp_comm_name(const Layout& l) {
  if (l.cp_comm == CpCommType::kA2AP2P) return fmt::format("a2a{}+p2p{}", l.cp_a2a, l.cp_a2a > 0 ? l.cp / l.cp_a2a : 0);
  return std::string(to_string(l.cp_comm));
}

std::string recompute_name(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::kNone: return "no-rc";
    case RecomputeGranularity::kSelective: return "sel";
    case RecomputeGranularity::kFull: return "full";
  }
  return "?";
}

}  // namespace

bool layout_less(const Layout& a, const Layout& b) { return tie_of(a) < tie_of(b); }

void apply_layout_into(const Scenario& base, const Layout& l, Scenario& out) {
  const ParallelSpec& b = base.parallel;
  ParallelSpec& p = out.parallel;
  const bool uneven = l.first_stage_layers > 0 || l.last_stage_layers > 0 || l.custom_pipeline;
  if (!l.custom_pipeline) p.pipeline_layout.clear();
  else if (p.pipeline_layout != b.pipeline_layout) p.pipeline_layout = b.pipeline_layout;
  p.tensor_model_parallel_size = l.tp;
  p.sequence_parallel = l.tp > 1;
  p.pipeline_model_parallel_size = l.pp;
  p.num_layers_per_virtual_pipeline_stage = l.vl;
  p.num_layers_in_first_pipeline_stage = l.first_stage_layers;
  p.num_layers_in_last_pipeline_stage = l.last_stage_layers;
  p.account_for_embedding_in_pipeline_split = !uneven && b.account_for_embedding_in_pipeline_split;
  p.account_for_loss_in_pipeline_split = !uneven && b.account_for_loss_in_pipeline_split;
  p.context_parallel_size = l.cp;
  p.cp_comm_type = l.cp > 1 ? l.cp_comm : CpCommType::kP2P;
  if (l.cp > 1 && l.cp_comm == CpCommType::kA2AP2P && l.cp_a2a > 0) {
    p.hierarchical_context_parallel_sizes.resize(2);
    p.hierarchical_context_parallel_sizes[0] = l.cp_a2a;
    p.hierarchical_context_parallel_sizes[1] = l.cp / l.cp_a2a;
  } else {
    p.hierarchical_context_parallel_sizes.clear();
  }
  p.expert_model_parallel_size = l.ep;
  p.expert_tensor_parallel_size = l.etp;
  apply_sharding_into(base, l.sharding, out);
  p.recompute_granularity = l.recompute;
  p.recompute_method = RecomputeMethod::kUniform;
  p.recompute_num_layers = l.recompute == RecomputeGranularity::kFull ? 1 : 0;
  p.recompute_modules = b.recompute_modules;
  std::copy(std::begin(l.pp_before_dp ? kPpDpOrder : kDefaultOrder), std::end(l.pp_before_dp ? kPpDpOrder : kDefaultOrder),
            p.order);
  p.overlap_grad_reduce = b.overlap_grad_reduce;
  p.tp_comm_overlap = b.tp_comm_overlap && l.tp > 1;
  p.overlap_moe_expert_parallel_comm = b.overlap_moe_expert_parallel_comm && l.ep > 1 &&
                                       l.dispatcher != Dispatcher::kAllGather &&
                                       l.recompute != RecomputeGranularity::kFull &&
                                       (l.pp == 1 || l.vl > 0 ||
                                        (l.custom_pipeline && static_cast<int>(b.pipeline_layout.size()) > l.pp));
  p.moe_fp8_dispatch = b.moe_fp8_dispatch;
  p.cuda_graph_impl = b.cuda_graph_impl;
  p.cuda_graph_modules = b.cuda_graph_modules;
  out.model.moe_token_dispatcher_type = has_moe(base.model) ? l.dispatcher : base.model.moe_token_dispatcher_type;
  out.training.micro_batch_size = l.mbs;
  out.num_gpus = base.num_gpus;
}

void apply_sharding_into(const Scenario& base, DpSharding sharding, Scenario& out) {
  ParallelSpec& p = out.parallel;
  p.data_parallel_sharding_strategy = sharding;
  p.use_distributed_optimizer = sharding != DpSharding::kNoShard;
  p.overlap_param_gather = base.parallel.overlap_param_gather && base.parallel.overlap_grad_reduce &&
                           sharding != DpSharding::kNoShard;
}

Scenario apply_layout(const Scenario& base, const Layout& l) {
  Scenario s = base;
  apply_layout_into(base, l, s);
  return s;
}

Layout layout_of(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  Layout l;
  l.tp = p.tensor_model_parallel_size;
  l.cp = p.context_parallel_size;
  l.cp_comm = l.cp > 1 ? p.cp_comm_type : CpCommType::kP2P;
  l.cp_a2a = l.cp_comm == CpCommType::kA2AP2P && p.hierarchical_context_parallel_sizes.size() == 2
                 ? p.hierarchical_context_parallel_sizes[0]
                 : 0;
  l.pp = p.pipeline_model_parallel_size;
  l.first_stage_layers = p.num_layers_in_first_pipeline_stage;
  l.last_stage_layers = p.num_layers_in_last_pipeline_stage;
  l.vl = p.num_layers_per_virtual_pipeline_stage;
  l.custom_pipeline = !p.pipeline_layout.empty();
  l.ep = has_moe(s.model) ? p.expert_model_parallel_size : 1;
  l.etp = p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : p.tensor_model_parallel_size;
  l.mbs = s.training.micro_batch_size;
  l.recompute = p.recompute_granularity;
  l.sharding = p.data_parallel_sharding_strategy;
  if (l.sharding == DpSharding::kNoShard && p.use_distributed_optimizer) l.sharding = DpSharding::kOptim;
  l.dispatcher = s.model.moe_token_dispatcher_type;
  l.pp_before_dp = std::equal(std::begin(kPpDpOrder), std::end(kPpDpOrder), std::begin(p.order));
  return l;
}

std::string layout_string(const Layout& l, const Scenario& base) {
  const int model = l.tp * l.cp * l.pp;
  const int dp = model > 0 ? base.num_gpus / model : 0;
  std::string out = fmt::format("tp{} cp{}", l.tp, l.cp);
  if (l.cp > 1) out += fmt::format("({})", cp_comm_name(l));
  out += fmt::format(" pp{}", l.pp);
  if (l.first_stage_layers > 0 || l.last_stage_layers > 0)
    out += fmt::format("(first{},last{})", l.first_stage_layers, l.last_stage_layers);
  if (l.custom_pipeline) {
    out += "(layout)";
    const int vp = l.pp > 0 ? static_cast<int>(base.parallel.pipeline_layout.size()) / l.pp : 0;
    if (vp > 1) out += fmt::format(" vp{}", vp);
  }
  if (l.vl > 0) out += fmt::format(" vp{}", layers_per_rank(base, l.pp) / l.vl);
  if (has_moe(base.model)) out += fmt::format(" ep{} etp{}", l.ep, l.etp);
  out += fmt::format(" dp{} mbs{} {} {}", dp, l.mbs, recompute_name(l.recompute), to_string(l.sharding));
  if (has_moe(base.model)) out += fmt::format(" {}", to_string(l.dispatcher));
  if (l.pp_before_dp) out += " order=tp-cp-ep-pp-dp";
  return out;
}

namespace {

// "tp4" -> 4 when `tok` is `prefix` followed by a positive integer (and nothing else).
bool sized(std::string_view tok, std::string_view prefix, int& v) {
  if (!tok.starts_with(prefix) || tok.size() == prefix.size()) return false;
  const char* b = tok.data() + prefix.size();
  const char* e = tok.data() + tok.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  return ec == std::errc() && p == e && v > 0;
}

// "(first3,last2)" after pp: the uneven split.
bool parse_split(std::string_view arg, Layout& l) {
  const size_t comma = arg.find(',');
  if (comma == std::string_view::npos) return false;
  int first = 0, last = 0;
  const std::string_view a = arg.substr(0, comma), b = arg.substr(comma + 1);
  auto num = [](std::string_view t, std::string_view prefix, int& v) {
    if (!t.starts_with(prefix)) return false;
    const auto [p, ec] = std::from_chars(t.data() + prefix.size(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && v >= 0;
  };
  if (!num(a, "first", first) || !num(b, "last", last)) return false;
  l.first_stage_layers = first;
  l.last_stage_layers = last;
  return true;
}

// "p2p", "a2a", "allgather", "a2a2+p2p4".
bool parse_cp_comm(std::string_view arg, int cp, Layout& l) {
  if (const auto t = parse_cp_comm_type(arg); t && *t != CpCommType::kA2AP2P) {
    l.cp_comm = *t;
    l.cp_a2a = 0;
    return true;
  }
  const size_t plus = arg.find('+');
  int a2a = 0, p2p = 0;
  if (plus == std::string_view::npos || !sized(arg.substr(0, plus), "a2a", a2a) ||
      !sized(arg.substr(plus + 1), "p2p", p2p) || a2a * p2p != cp)
    return false;
  l.cp_comm = CpCommType::kA2AP2P;
  l.cp_a2a = a2a;
  return true;
}

}  // namespace

bool parse_layout_string(const std::string& text, const Scenario& base, Layout& out, std::string& error) {
  Layout l = layout_of(base);
  const bool moe = has_moe(base.model);
  bool etp_given = false;
  int vp = 0, dp = 0;
  std::string cp_arg;
  std::istringstream in(text);
  std::vector<std::string> seen;
  for (std::string tok; in >> tok;) {
    // The knob a token sets, for duplicates: "tp", "cp", ..., "recompute", "sharding".
    std::string knob;
    std::string_view t = tok;
    std::string_view arg;
    if (const size_t open = t.find('('); open != std::string_view::npos) {
      if (!t.ends_with(")")) {
        error = fmt::format("'{}': unbalanced parenthesis", tok);
        return false;
      }
      arg = t.substr(open + 1, t.size() - open - 2);
      t = t.substr(0, open);
    }
    int v = 0;
    auto plain = [&](const char* name) {
      if (arg.empty()) return true;
      error = fmt::format("'{}': {} takes no parenthesis", tok, name);
      return false;
    };
    if (sized(t, "tp", v)) {
      knob = "tp";
      if (!plain("tp")) return false;
      l.tp = v;
    } else if (sized(t, "cp", v)) {
      knob = "cp";
      l.cp = v;
      cp_arg = std::string(arg);
    } else if (sized(t, "pp", v)) {
      knob = "pp";
      l.pp = v;
      l.first_stage_layers = l.last_stage_layers = 0;
      l.custom_pipeline = arg == "layout";
      if (l.custom_pipeline && base.parallel.pipeline_layout.empty()) {
        error = fmt::format("'{}': the scenario has no pipeline_model_parallel_layout to keep", tok);
        return false;
      }
      if (!arg.empty() && !l.custom_pipeline && !parse_split(arg, l)) {
        error = fmt::format("'{}': expected pp{}(firstA,lastB), the layers of the first and last stage, or pp{}(layout), "
                            "the scenario's pipeline_model_parallel_layout",
                            tok, v, v);
        return false;
      }
    } else if (sized(t, "vp", v)) {
      knob = "vp";
      if (!plain("vp")) return false;
      vp = v;
    } else if (sized(t, "etp", v)) {
      knob = "etp";
      if (!plain("etp")) return false;
      l.etp = v;
      etp_given = true;
    } else if (sized(t, "ep", v)) {
      knob = "ep";
      if (!plain("ep")) return false;
      l.ep = v;
    } else if (sized(t, "dp", v)) {
      knob = "dp";
      if (!plain("dp")) return false;
      dp = v;
    } else if (sized(t, "mbs", v)) {
      knob = "mbs";
      if (!plain("mbs")) return false;
      l.mbs = v;
    } else if (!arg.empty()) {
      error = fmt::format("'{}': only cp and pp take a parenthesis", tok);
      return false;
    } else if (t == "no-rc" || t == "sel" || t == "full") {
      knob = "recompute";
      l.recompute = t == "no-rc" ? RecomputeGranularity::kNone
                    : t == "sel" ? RecomputeGranularity::kSelective
                                 : RecomputeGranularity::kFull;
    } else if (const auto sh = parse_dp_sharding(t)) {
      knob = "sharding";
      l.sharding = *sh;
    } else if (const auto d = parse_dispatcher(t)) {
      knob = "dispatcher";
      if (!moe) {
        error = fmt::format("'{}': {} has no experts, so no token dispatcher", tok, base.model.name);
        return false;
      }
      l.dispatcher = *d;
    } else if (t.starts_with("order=")) {
      knob = "order";
      const auto o = parse_rank_order(t.substr(6));
      if (!o || (!std::equal(o->begin(), o->end(), std::begin(kPpDpOrder)) &&
                 !std::equal(o->begin(), o->end(), std::begin(kDefaultOrder)))) {
        error = fmt::format("'{}': the rank order is tp-cp-ep-dp-pp or tp-cp-ep-pp-dp", tok);
        return false;
      }
      l.pp_before_dp = std::equal(o->begin(), o->end(), std::begin(kPpDpOrder));
    } else {
      error = fmt::format("'{}' is not a layout token (tpN cpN[(p2p|a2a|allgather|a2aX+p2pY)] ppN[(firstA,lastB)|(layout)] vpN "
                          "epN etpN dpN mbsN, no-rc|sel|full, a sharding, a dispatcher, order=...)",
                          tok);
      return false;
    }
    if (std::find(seen.begin(), seen.end(), knob) != seen.end()) {
      error = fmt::format("'{}': {} is given twice", tok, knob);
      return false;
    }
    seen.push_back(knob);
    if (!moe && (knob == "ep" || knob == "etp") && v != 1 && !(knob == "etp" && v == l.tp)) {
      error = fmt::format("'{}': {} has no experts, so no expert parallelism", tok, base.model.name);
      return false;
    }
  }
  if (seen.empty()) {
    error = "empty layout (e.g. \"tp2 cp4(p2p) pp2 dp4 mbs1 sel optim\")";
    return false;
  }
  if (l.cp == 1) {
    l.cp_comm = CpCommType::kP2P;
    l.cp_a2a = 0;
  } else if (!cp_arg.empty() && !parse_cp_comm(cp_arg, l.cp, l)) {
    error = fmt::format("'cp{}({})': expected p2p, a2a, allgather or a2aX+p2pY with X*Y = {}", l.cp, cp_arg, l.cp);
    return false;
  }
  if (!moe) {
    l.ep = 1;
    l.etp = l.tp;
  } else if (!etp_given && l.etp != 1 && l.etp != l.tp) {
    l.etp = l.tp;
  }
  l.vl = 0;
  if (l.custom_pipeline) {
    // The layout fixes the virtual stages: a vp token may only repeat them.
    const int stages = static_cast<int>(base.parallel.pipeline_layout.size());
    if (stages % l.pp != 0 || (vp > 0 && vp != stages / l.pp)) {
      error = fmt::format("pp{}(layout): the scenario's pipeline_model_parallel_layout has {} stages{}", l.pp, stages,
                          stages % l.pp != 0 ? fmt::format(", not a multiple of pp{}", l.pp)
                                             : fmt::format(" = pp{} x vp{}, not vp{}", l.pp, stages / l.pp, vp));
      return false;
    }
  } else if (vp > 0) {
    const int per_rank = layers_per_rank(base, l.pp);
    if (per_rank % vp != 0 || per_rank / vp == 0) {
      error = fmt::format("'vp{}': {} layers per pipeline rank (pp{}) do not split into {} virtual stages", vp, per_rank,
                          l.pp, vp);
      return false;
    }
    l.vl = per_rank / vp;
  }
  const int model = l.tp * l.cp * l.pp;
  if (dp > 0 && (base.num_gpus % model != 0 || base.num_gpus / model != dp)) {
    error = fmt::format("'dp{}': dp is derived: {} GPUs / (tp{} x cp{} x pp{}) = {}", dp, base.num_gpus, l.tp, l.cp,
                        l.pp, base.num_gpus % model == 0 ? fmt::format("{}", base.num_gpus / model)
                                                         : fmt::format("{:.3g} (not whole)", double(base.num_gpus) / model));
    return false;
  }
  out = l;
  return true;
}

std::string shell_word(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./:=,+@%").find(c) != std::string_view::npos;
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> megatron_flags(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  std::vector<std::string> f;
  auto add = [&](std::string flag, std::string value = {}) {
    f.push_back(std::move(flag));
    if (!value.empty()) f.push_back(std::move(value));
  };
  auto num = [](auto v) { return fmt::format("{}", v); };
  add("--tensor-model-parallel-size", num(p.tensor_model_parallel_size));
  if (p.sequence_parallel && p.tensor_model_parallel_size > 1) add("--sequence-parallel");
  add("--pipeline-model-parallel-size", num(p.pipeline_model_parallel_size));
  if (!p.pipeline_layout.empty()) add("--pipeline-model-parallel-layout", pipeline_layout_text(p.pipeline_layout));
  if (p.num_layers_per_virtual_pipeline_stage > 0)
    add("--num-layers-per-virtual-pipeline-stage", num(p.num_layers_per_virtual_pipeline_stage));
  if (p.microbatch_group_size_per_vp_stage > 0)
    add("--microbatch-group-size-per-virtual-pipeline-stage", num(p.microbatch_group_size_per_vp_stage));
  if (p.num_layers_in_first_pipeline_stage > 0)
    add("--decoder-first-pipeline-num-layers", num(p.num_layers_in_first_pipeline_stage));
  if (p.num_layers_in_last_pipeline_stage > 0)
    add("--decoder-last-pipeline-num-layers", num(p.num_layers_in_last_pipeline_stage));
  if (p.account_for_embedding_in_pipeline_split) add("--account-for-embedding-in-pipeline-split");
  if (p.account_for_loss_in_pipeline_split) add("--account-for-loss-in-pipeline-split");
  add("--context-parallel-size", num(p.context_parallel_size));
  if (p.context_parallel_size > 1) {
    add("--cp-comm-type", std::string(to_string(p.cp_comm_type)));
    if (p.hierarchical_context_parallel_sizes.size() == 2) {
      add("--hierarchical-context-parallel-sizes", num(p.hierarchical_context_parallel_sizes[0]));
      f.push_back(num(p.hierarchical_context_parallel_sizes[1]));
    }
  }
  if (has_moe(s.model)) {
    add("--expert-model-parallel-size", num(p.expert_model_parallel_size));
    add("--expert-tensor-parallel-size",
        num(p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : p.tensor_model_parallel_size));
    add("--moe-token-dispatcher-type", std::string(to_string(s.model.moe_token_dispatcher_type)));
    if (s.model.moe_token_dispatcher_type == Dispatcher::kFlex)  // issue 12: DeepEP / HybridEP
      add("--moe-flex-dispatcher-backend", std::string(to_string(s.model.moe_flex_dispatcher_backend)));
  }
  add("--micro-batch-size", num(s.training.micro_batch_size));
  switch (p.data_parallel_sharding_strategy) {
    case DpSharding::kNoShard:
      if (p.use_distributed_optimizer) add("--use-distributed-optimizer");
      break;
    case DpSharding::kOptim: add("--use-distributed-optimizer"); break;
    case DpSharding::kOptimGrads:
    case DpSharding::kOptimGradsParams:
      add("--use-megatron-fsdp");
      add("--data-parallel-sharding-strategy", std::string(to_string(p.data_parallel_sharding_strategy)));
      break;
  }
  if (p.recompute_granularity == RecomputeGranularity::kSelective) {
    add("--recompute-granularity", "selective");
    if (p.recompute_modules != kRecomputeCoreAttn) {
      f.push_back("--recompute-modules");
      for (const std::string& m : recompute_module_names(p.recompute_modules)) f.push_back(m);
    }
  } else if (p.recompute_granularity == RecomputeGranularity::kFull) {
    add("--recompute-granularity", "full");
    add("--recompute-method", std::string(to_string(p.recompute_method)));
    add("--recompute-num-layers", num(p.recompute_num_layers));
  }
  if (std::equal(std::begin(kPpDpOrder), std::end(kPpDpOrder), std::begin(p.order))) add("--use-tp-pp-dp-mapping");
  if (p.overlap_grad_reduce) add("--overlap-grad-reduce");
  if (p.overlap_param_gather) add("--overlap-param-gather");
  if (p.tp_comm_overlap) add("--tp-comm-overlap");
  if (p.overlap_moe_expert_parallel_comm) add("--overlap-moe-expert-parallel-comm");
  if (p.cuda_graph_impl != CudaGraphImpl::kNone) {
    add("--cuda-graph-impl", std::string(to_string(p.cuda_graph_impl)));
    if (p.cuda_graph_modules != 0) {
      f.push_back("--cuda-graph-modules");
      for (const std::string& m : cuda_graph_module_names(p.cuda_graph_modules)) f.push_back(m);
    }
  }
  return f;
}

std::vector<std::string> layout_differences(const Layout& a, const Layout& b, const Scenario& base) {
  std::vector<std::string> out;
  auto diff = [&](const char* name, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(fmt::format("{} {} -> {}", name, x, y));
  };
  auto n = [](int v) { return fmt::format("{}", v); };
  const Scenario sa = apply_layout(base, a), sb = apply_layout(base, b);
  diff("tp", n(a.tp), n(b.tp));
  diff("cp", n(a.cp), n(b.cp));
  if (a.cp > 1 || b.cp > 1) diff("cp_comm_type", cp_comm_name(a), cp_comm_name(b));
  diff("pp", n(a.pp), n(b.pp));
  diff("pipeline split", fmt::format("{}/{}", a.first_stage_layers, a.last_stage_layers),
       fmt::format("{}/{}", b.first_stage_layers, b.last_stage_layers));
  diff("vp", n(a.vl > 0 ? layers_per_rank(base, a.pp) / a.vl : 1), n(b.vl > 0 ? layers_per_rank(base, b.pp) / b.vl : 1));
  if (has_moe(base.model)) {
    diff("ep", n(a.ep), n(b.ep));
    diff("etp", n(a.etp), n(b.etp));
  }
  diff("mbs", n(a.mbs), n(b.mbs));
  diff("recompute", std::string(to_string(a.recompute)), std::string(to_string(b.recompute)));
  diff("sharding", std::string(to_string(a.sharding)), std::string(to_string(b.sharding)));
  if (has_moe(base.model)) diff("dispatcher", std::string(to_string(a.dispatcher)), std::string(to_string(b.dispatcher)));
  diff("rank order", rank_order_to_string(sa.parallel.order), rank_order_to_string(sb.parallel.order));
  return out;
}

}  // namespace lcm::plan
