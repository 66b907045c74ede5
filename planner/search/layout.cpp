// Layouts: applying one to a scenario, naming it, and writing it as Megatron flags.
#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

namespace {

auto tie_of(const Layout& l) {
  return std::make_tuple(l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs,
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
  const bool uneven = l.first_stage_layers > 0 || l.last_stage_layers > 0;
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
                                       l.recompute != RecomputeGranularity::kFull && (l.pp == 1 || l.vl > 0);
  p.moe_fp8_dispatch = b.moe_fp8_dispatch;
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
  if (l.vl > 0) out += fmt::format(" vp{}", layers_per_rank(base, l.pp) / l.vl);
  if (has_moe(base.model)) out += fmt::format(" ep{} etp{}", l.ep, l.etp);
  out += fmt::format(" dp{} mbs{} {} {}", dp, l.mbs, recompute_name(l.recompute), to_string(l.sharding));
  if (has_moe(base.model)) out += fmt::format(" {}", to_string(l.dispatcher));
  if (l.pp_before_dp) out += " order=tp-cp-ep-pp-dp";
  return out;
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
  if (p.num_layers_per_virtual_pipeline_stage > 0)
    add("--num-layers-per-virtual-pipeline-stage", num(p.num_layers_per_virtual_pipeline_stage));
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
