// Planning helpers shared by the plan and sweep subcommands.
#include "plan_common.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "lcm/model/uncertainty.hpp"
#include "progress.hpp"

namespace lcm::cli {

namespace {

// The knobs the planner searches (Megatron-Core names, as --set takes them).
constexpr const char* kSearchedKeys[] = {
    "tensor_model_parallel_size", "sequence_parallel", "pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage", "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "context_parallel_size", "cp_comm_type", "hierarchical_context_parallel_sizes", "expert_model_parallel_size",
    "expert_tensor_parallel_size", "use_distributed_optimizer", "data_parallel_sharding_strategy",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "rank_order", "micro_batch_size",
    "moe_token_dispatcher_type"};

// A layout every model admits on one GPU: what a failed load retries with.
const std::vector<io::Override>& trivial_layout() {
  static const std::vector<io::Override> v = {{"tensor_model_parallel_size", "1"},
                                                {"sequence_parallel", "false"},
                                                {"pipeline_model_parallel_size", "1"},
                                                {"num_layers_per_virtual_pipeline_stage", "null"},
                                                {"num_layers_in_first_pipeline_stage", "null"},
                                                {"num_layers_in_last_pipeline_stage", "null"},
                                                {"context_parallel_size", "1"},
                                                {"cp_comm_type", "p2p"},
                                                {"hierarchical_context_parallel_sizes", "[]"},
                                                {"expert_model_parallel_size", "1"},
                                                {"expert_tensor_parallel_size", "1"},
                                                {"micro_batch_size", "1"},
                                                {"recompute_granularity", "none"},
                                                {"recompute_num_layers", "null"},
                                                {"tp_comm_overlap", "false"},
                                                {"overlap_moe_expert_parallel_comm", "false"}};
  return v;
}

}  // namespace

void add_plan_options(CLI::App& cmd, PlanArgs& a, bool with_top) {
  if (with_top) {
    cmd.add_option("--top", a.top, "Layouts in the decision table")->check(in_range(1, 1000))->capture_default_str();
    cmd.add_option("--why-not", a.why_not, "Out-of-memory layouts in the why-not table")
        ->check(in_range(0, 100))
        ->capture_default_str();
  }
  cmd.add_option("--threads", a.threads, "Search threads (0: every core)")->check(in_range(0, 1024))->capture_default_str();
  cmd.add_flag("-q,--quiet", a.quiet, "No progress bar on stderr");
}

void add_constraint_options(CLI::App& cmd, PlanArgs& a) {
  cmd.add_option("--fix", a.fixes,
                 "Search only layouts with this knob value: tp=8, pp=2, cp=1, ep=8, etp=1, mbs=1, sharding=optim, "
                 "recompute=sel, cp_comm=p2p, dispatcher=alltoall (repeatable)");
  cmd.add_option("--exclude", a.excludes,
                 "Leave a knob value out of the search: zero3 (optim_grads_params), a2a, full, allgather needs "
                 "cp_comm= or dispatcher=, tp=1 (repeatable)");
  cmd.add_option("--max", a.maxes, "Cap a size knob: pp=8 (tp, cp, pp, ep, etp, mbs; repeatable)");
  cmd.add_option("--headroom", a.headroom,
                 "A layout fits only if it needs at most HBM x (1 - P/100): --headroom 10% (default none: the "
                 "memory model's error band decides fits, tight or out of memory: docs/planner.md)");
  cmd.add_option("--tie", a.tie, "Near-tie tolerance on step time (default 2%): --tie 5%");
}

bool parse_constraints(PlanArgs& a) {
  std::string error;
  auto bad = [&](const std::string& option, const std::string& text) {
    std::cerr << "lcm: " << option << " " << text << ": " << error << "\n";
    return false;
  };
  for (const std::string& f : a.fixes)
    if (!a.constraints.add_fix(f, error)) return bad("--fix", f);
  for (const std::string& m : a.maxes)
    if (!a.constraints.add_max(m, error)) return bad("--max", m);
  for (const std::string& e : a.excludes)
    if (!a.constraints.add_exclude(e, error)) return bad("--exclude", e);
  if (!a.headroom.empty() && !a.constraints.set_headroom(a.headroom, error)) return bad("--headroom", a.headroom);
  if (a.headroom.empty()) a.constraints.use_default_headroom();
  if (!a.tie.empty()) {
    if (!plan::parse_percent(a.tie, a.near_tie, error)) return bad("--tie", a.tie);
    a.constraints.given.push_back("tie " + a.tie);
  }
  if (!a.constraints.check(error)) {
    std::cerr << "lcm: plan: " << error << "\n";
    return false;
  }
  return true;
}

std::optional<Scenario> load_for_planning(const ScenarioOptions& so, const std::vector<io::Override>& extra, int gpus,
                                          std::string* own_error) {
  if (own_error) own_error->clear();
  io::LoadOptions lo;
  for (const std::string& s : so.sets) {
    auto ov = io::parse_override(s);
    if (!ov) {
      std::cerr << "lcm: " << ov.error().str() << "\n";
      return std::nullopt;
    }
    lo.overrides.push_back(ov.value());
  }
  lo.overrides.insert(lo.overrides.end(), extra.begin(), extra.end());
  lo.num_gpus = gpus > 0 ? gpus : so.gpus;
  lo.hardware = so.hw;
  lo.replace_scenario_job = true;
  std::vector<std::string> notes;
  lo.notes = &notes;
  auto r = io::load_scenario(so.path, lo);
  if (!r) {
    // Maybe only the scenario's own layout broke; the planner replaces it anyway. Retry
    // with the trivial layout on the scenario's GPUs, then (when the GPU count to plan
    // for is given) on one GPU.
    io::LoadOptions retry = lo;
    retry.overrides.insert(retry.overrides.end(), trivial_layout().begin(), trivial_layout().end());
    notes.clear();
    auto r2 = io::load_scenario(so.path, retry);
    if (!r2 && gpus > 0) {
      notes.clear();
      retry.overrides.push_back({"num_gpus", "1"});
      r2 = io::load_scenario(so.path, retry);
    }
    if (r2) {
      if (own_error) *own_error = r.error().str();
      r = std::move(r2);
    }
  }
  if (!r) {
    std::cerr << "lcm: " << r.error().str() << "\n";
    return std::nullopt;
  }
  for (const std::string& n : notes) std::cerr << "lcm: note: " << n << "\n";
  Scenario s = std::move(r).value();
  if (gpus > 0) s.num_gpus = gpus;
  return s;
}

std::string key_base(const std::string& key) {
  return key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
}

bool is_searched_key(const std::string& key) {
  const std::string base = key_base(key);
  return std::find(std::begin(kSearchedKeys), std::end(kSearchedKeys), base) != std::end(kSearchedKeys);
}

void note_searched_keys(const ScenarioOptions& so) {
  for (const std::string& set : so.sets) {
    const std::string key = set.substr(0, set.find('='));
    if (is_searched_key(key))
      std::cerr << "lcm: note: --set " << key << ": the planner chooses " << key_base(key) << " itself; the value is ignored\n";
  }
}

plan::PlanResult run_search(const Scenario& s, const PlanArgs& a, const std::string& label) {
  plan::PlanOptions o;
  o.top_k = a.top;
  o.why_not = a.why_not;
  o.threads = a.threads;
  o.constraints = a.constraints;
  o.near_tie = a.near_tie;
  ProgressBar bar(std::cerr, label, !a.quiet && stderr_is_terminal());
  o.progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); };
  plan::PlanResult r = plan::search(s, o);
  bar.finish();
  return r;
}

}  // namespace lcm::cli
