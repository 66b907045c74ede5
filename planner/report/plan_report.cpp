// Rendering of plan::PlanResult (lcm plan) and of sweeps of plans (lcm sweep).
#include "lcm/planner/report/plan_report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "lcm/planner/report/band.hpp"
#include "plan_format.hpp"

namespace lcm::report {

namespace {

using nlohmann::ordered_json;
using plan::Layout;
using plan::Metrics;



// The communication dimensions the decision table shows (DP includes EDP and the
// embedding sync: StepTime puts every step collective there).
constexpr std::pair<const char*, CommDim> kShownDims[] = {
    {"tp", CommDim::kTp}, {"cp", CommDim::kCp}, {"ep", CommDim::kEp}, {"pp", CommDim::kPp}, {"dp", CommDim::kDp}};

ordered_json layout_json(const Scenario& base, const Layout& l) {
  const Scenario s = plan::apply_layout(base, l);
  const Mesh m = derive_mesh(s);
  const ParallelSpec& p = s.parallel;
  ordered_json j;
  j["tensor_model_parallel_size"] = l.tp;
  j["sequence_parallel"] = p.sequence_parallel;
  j["context_parallel_size"] = l.cp;
  j["cp_comm_type"] = std::string(to_string(p.cp_comm_type));
  j["hierarchical_context_parallel_sizes"] = p.hierarchical_context_parallel_sizes;
  j["pipeline_model_parallel_size"] = l.pp;
  j["num_layers_in_first_pipeline_stage"] = l.first_stage_layers;
  j["num_layers_in_last_pipeline_stage"] = l.last_stage_layers;
  j["num_layers_per_virtual_pipeline_stage"] = l.vl;
  j["pipeline_model_parallel_layout"] =
      p.pipeline_layout.empty() ? ordered_json(nullptr) : ordered_json(pipeline_layout_text(p.pipeline_layout));
  j["virtual_pipeline_model_parallel_size"] = m.vp;
  j["expert_model_parallel_size"] = m.ep;
  j["expert_tensor_parallel_size"] = m.etp;
  j["data_parallel_size"] = m.dp;
  j["expert_data_parallel_size"] = m.edp;
  j["micro_batch_size"] = l.mbs;
  j["num_micro_batches"] = m.num_micro_batches;
  j["recompute_granularity"] = std::string(to_string(p.recompute_granularity));
  if (p.recompute_granularity == RecomputeGranularity::kFull) {
    j["recompute_method"] = std::string(to_string(p.recompute_method));
    j["recompute_num_layers"] = p.recompute_num_layers;
  }
  if (p.recompute_granularity == RecomputeGranularity::kSelective)
    j["recompute_modules"] = recompute_module_names(p.recompute_modules);
  j["data_parallel_sharding_strategy"] = std::string(to_string(p.data_parallel_sharding_strategy));
  j["use_distributed_optimizer"] = p.use_distributed_optimizer;
  if (has_moe(base.model))
    j["moe_token_dispatcher_type"] = std::string(to_string(s.model.moe_token_dispatcher_type));
  j["rank_order"] = rank_order_to_string(p.order);
  j["tp_comm_overlap"] = p.tp_comm_overlap;
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  j["overlap_moe_expert_parallel_comm"] = p.overlap_moe_expert_parallel_comm;
  return j;
}

ordered_json metrics_json(const Metrics& m, bool with_time) {
  ordered_json j;
  if (with_time) {
    j["step_s"] = m.step_s;
    j["tokens_per_s_per_gpu"] = m.tokens_per_s_per_gpu;
    j["mfu"] = m.mfu;
    j["hfu"] = m.hfu;
    j["bubble_s"] = m.bubble;
    j["pipeline_s"] = m.pipeline;
    j["dp_exposed_s"] = m.dp_exposed;
    j["optimizer_s"] = m.optimizer;
    j["straggler_s"] = m.straggler;
    ordered_json ex, compute;
    for (const StepTerm& term : plan::step_terms(m)) {
      if (term.group == StepTermGroup::kExposedComm) ex[term.key] = term.seconds;
      if (term.group == StepTermGroup::kCompute) compute[term.key] = term.seconds;
    }
    j["exposed_comm_s"] = ex;
    j["compute_s"] = compute;
    j["bottleneck_stage"] = m.bottleneck_stage;
  }
  j["peak_bytes"] = m.peak_bytes;
  j["peak_gib"] = m.peak_bytes / kGiB;
  j["peak_high_bytes"] = m.peak_high_bytes;
  j["needs_gib"] = m.peak_high_bytes / kGiB;
  j["verdict_stage"] = m.miss_stage;
  j["worst_stage"] = m.worst_stage;
  j["allocated_peak_bytes"] = m.allocated_peak_bytes;
  j["hbm_bytes"] = m.hbm_bytes;
  j["peak_low_bytes"] = m.peak_low_bytes;
  j["fits"] = m.fits;
  j["may_fit"] = m.may_fit;
  j["tight"] = m.may_fit && !m.fits;
  if (!m.fits) {
    j["miss_bytes"] = m.miss_bytes;
    j["miss_stage"] = m.miss_stage;
  }
  return j;
}

std::string oom_reason(const Metrics& m) {
  if (m.may_fit)
    return fmt::format("tight: its memory band {:.2f}-{:.2f} GiB straddles HBM {:.2f} GiB (stage {})",
                       m.peak_low_bytes / kGiB, m.peak_high_bytes / kGiB, m.hbm_bytes / kGiB, m.miss_stage);
  return fmt::format("out of memory by {:.2f} GiB on stage {} (needs {:.2f} GiB of {:.2f}; the band's bottom, {:.2f} "
                     "GiB, does not fit either)",
                     m.miss_bytes / kGiB, m.miss_stage, m.peak_high_bytes / kGiB, m.hbm_bytes / kGiB,
                     m.peak_low_bytes / kGiB);
}

// "#1: identical predictions with dispatcher alltoall -> allgather; ..." (or "").
std::string equivalents_note(const Scenario& base, const plan::Ranked& g, int rank) {
  if (g.num_equivalent == 0) return "";
  std::vector<std::string> diffs;
  for (const Layout& e : g.equivalent)
    for (const std::string& d : plan::layout_differences(g.layout, e, base))
      if (std::find(diffs.begin(), diffs.end(), d) == diffs.end()) diffs.push_back(d);
  std::string out = fmt::format("#{}: {} more layout{} with the same predicted step time and memory (", rank,
                                g.num_equivalent, g.num_equivalent == 1 ? "" : "s");
  for (size_t i = 0; i < diffs.size(); ++i) out += (i ? "; " : "") + diffs[i];
  return out + ")";
}

std::string near_tie_note(const plan::NearTie& t) {
  std::string what;
  for (size_t i = 0; i < t.differences.size(); ++i) what += (i ? ", " : "") + t.differences[i];
  if (what.empty()) what = "no knob";
  if (t.relative <= 0)
    return fmt::format("#{} ties #1 on step time ({}); it needs {:+.2f} GiB", t.rank, what,
                       t.memory_delta_bytes / kGiB);
  std::string why;
  if (!t.term.empty()) why = fmt::format("{} {:+.3f} s", t.term, t.term_delta_s);
  if (!t.gain_term.empty()) why += fmt::format("{}{} {:+.3f} s", why.empty() ? "" : ", against ", t.gain_term, t.gain_delta_s);
  return fmt::format("#{} is {:.2f}% slower than #1 ({}): {}; needs {:+.2f} GiB", t.rank, 100.0 * t.relative, what,
                     why.empty() ? "no cost term differs" : why, t.memory_delta_bytes / kGiB);
}

// The line under a ranking that says which groups are error-band ties and what that means.
std::string ties_note(const plan::PlanResult& r) {
  if (r.ranked.size() < 2) return "";
  if (r.ties <= 1)
    return "no ties: every other layout's error band starts above the fastest's (its step time is slower beyond the "
           "model's error)";
  return fmt::format(
      "tie: #1-#{} have error bands overlapping the fastest layout's, so their order is within the model's error (not "
      "a ranking to 0.1%); #1 is the fastest, the other ties are ordered by the high end of their band (the best worst "
      "case), then step time",
      r.ties);
}

// Which HBM budget and headroom decided "fits" (out-of-memory explanations).
std::string headroom_note(const plan::PlanResult& r) {
  if (r.constraints.headroom <= 0)
    return "fits: needs GiB (the memory band's top) <= HBM; tight: only the band's bottom is (the model cannot say; "
           "the May-fit table); no headroom";
  return fmt::format("fits: needs GiB <= HBM x (1 - {:.1f}%) = {} GiB; headroom {}", 100.0 * r.constraints.headroom,
                     fmt_bytes_gib(r.hbm_budget_bytes),
                     r.constraints.headroom_source.empty() ? std::string("given") : r.constraints.headroom_source);
}

std::string scenario_title(const Scenario& base) {
  std::string t = fmt::format("{} on {} x {}, seq {}, global batch {}", base.model.name.empty() ? base.name : base.model.name,
                              base.num_gpus, base.hardware.name, base.training.seq_length, base.training.global_batch_size);
  // Skewed routing changes which layouts win (the busiest EP rank): say it was assumed.
  if (base.model.moe_routing_skew > 0) t += fmt::format(", routing skew zipf:{}", base.model.moe_routing_skew);
  return t;
}

}  // namespace

std::string megatron_command(const Scenario& s) {
  std::string out;
  for (const std::string& f : plan::megatron_flags(s)) out += (out.empty() ? "" : " ") + plan::shell_word(f);
  return out;
}

std::string plan_failure(const Scenario& base, const plan::PlanResult& r) {
  if (!r.ranked.empty()) return "";
  if (r.counts.valid == 0) {
    // A rule every candidate breaks (the GPU count itself, say) is the reason, whatever else they break.
    for (const plan::Rejection& x : r.rejections)
      if (x.count == r.counts.enumerated && x.count > 0)
        return fmt::format("no valid layout for {} GPUs: every one of the {} candidates breaks {}: {}", base.num_gpus,
                           r.counts.enumerated, x.key, x.message);
    const plan::Rejection* t = plan::tightest_constraint(r);
    if (!t && !r.constraints.empty()) {
      std::string given;
      for (const std::string& g : r.constraints.given) given += (given.empty() ? "" : ", ") + g;
      return fmt::format("no layout to try for {} GPUs under the constraints ({})", base.num_gpus, given);
    }
    if (!t) return fmt::format("no layout to try for {} GPUs", base.num_gpus);
    return fmt::format(
        "no valid layout for {} GPUs: all {} candidates break a Megatron rule; the tightest is {}: {} "
        "(it alone rules out {} candidates, e.g. {})",
        base.num_gpus, r.counts.enumerated, t->key, t->message, t->sole_count, plan::layout_string(t->example, base));
  }
  if (!r.tight.empty()) {
    const plan::Ranked& t = r.tight.front();
    return fmt::format(
        "nothing fits for certain on {} GPUs: {} valid layouts are tight (their memory band straddles HBM); the "
        "fastest, {}, needs {:.2f}-{:.2f} GiB of {:.2f} (the May-fit table)",
        base.num_gpus, r.counts.tight, plan::layout_string(t.layout, base), t.metrics.peak_low_bytes / kGiB,
        t.metrics.peak_high_bytes / kGiB, t.metrics.hbm_bytes / kGiB);
  }
  if (r.has_closest_miss) {
    const Metrics& m = r.closest_miss_metrics;
    const std::string budget =
        r.constraints.headroom > 0
            ? fmt::format("{:.2f} GiB per GPU (HBM {:.2f} GiB less the {:.2f}% headroom)", m.hbm_bytes / kGiB,
                          base.hardware.gpu.hbm_bytes / kGiB, 100.0 * r.constraints.headroom)
            : fmt::format("{:.2f} GiB of HBM per GPU", m.hbm_bytes / kGiB);
    // Unfused attention keeps the s x s probabilities and rules out CP: name the knob.
    const std::string unfused =
        base.training.attention_backend == AttentionBackend::kUnfused
            ? "; training.attention_backend is unfused, which keeps every layer's seq x seq probabilities and "
              "cannot use context parallelism (--set attention_backend=fused lifts both)"
            : "";
    return fmt::format(
        "nothing fits in {} on {} GPUs: of {} valid layouts the closest, {}, needs {:.2f} GiB on "
        "pipeline stage {} (misses by {:.2f} GiB){}",
        budget, base.num_gpus, r.counts.valid, plan::layout_string(r.closest_miss, base),
        m.peak_high_bytes / kGiB, m.miss_stage, m.miss_bytes / kGiB, unfused);
  }
  return fmt::format("no layout fits on {} GPUs", base.num_gpus);
}

std::string reference_rank(const Scenario& base, const plan::PlanResult& r, const Scenario& ref,
                           const std::string& label) {
  const plan::Layout own = plan::layout_of(ref);
  const std::string name = fmt::format("{} ({})", label, plan::layout_string(own, base));
  const std::vector<Problem> problems = validate_scenario(ref);
  if (!problems.empty())
    return fmt::format("{}: not valid on {} GPUs: {}: {}", name, base.num_gpus, problems.front().key,
                       problems.front().message);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const plan::Ranked& g = r.ranked[i];
    if (g.layout == own || std::find(g.equivalent.begin(), g.equivalent.end(), own) != g.equivalent.end())
      return fmt::format("{}: #{} of the table", name, i + 1);
  }
  const Metrics m = plan::metrics_of_estimate(ref);
  if (!m.fits) return fmt::format("{}: {}", name, oom_reason(m));
  if (r.ranked.empty()) return fmt::format("{}: step {} s", name, sec(m.step_s));
  const double best = r.ranked.front().metrics.step_s;
  const auto faster = std::count_if(r.ranked.begin(), r.ranked.end(),
                                    [&](const plan::Ranked& g) { return g.metrics.step_s <= m.step_s; });
  const std::string where = static_cast<size_t>(faster) < r.ranked.size()
                                ? fmt::format("would rank #{}", faster + 1)
                                : fmt::format("below the top {}", r.ranked.size());
  return fmt::format("{}: {} (step {} s, {:.1f}% slower than #1; needs {} GiB)", name, where, sec(m.step_s),
                     100.0 * (m.step_s / best - 1.0), fmt_bytes_gib(m.peak_high_bytes));
}

ordered_json plan_json(const Scenario& base, const plan::PlanResult& r) {
  ordered_json j;
  j["schema_version"] = kPlanSchemaVersion;
  j["scenario"] = ordered_json{{"name", base.name},
                               {"model", base.model.name},
                               {"hardware", base.hardware.name},
                               {"seq_length", base.training.seq_length},
                               {"global_batch_size", base.training.global_batch_size},
                               {"precision", std::string(to_string(base.training.precision))}};
  j["num_gpus"] = r.num_gpus;
  j["counts"] = ordered_json{{"enumerated", r.counts.enumerated}, {"valid", r.counts.valid},
                             {"fit", r.counts.fit},               {"tight", r.counts.tight},
                             {"evaluated", r.counts.evaluated},
                             {"timed", r.counts.timed},           {"schedules_built", r.counts.schedules_built},
                             {"seconds", r.seconds},              {"threads", r.threads}};
  {
    // The search constraints (`lcm plan --fix/--exclude/--max/--headroom/--tie`), as given.
    const plan::SearchConstraints& c = r.constraints;
    ordered_json given = ordered_json::array();
    for (const std::string& g : c.given) given.push_back(g);
    j["constraints"] = ordered_json{{"given", given},
                                    {"headroom", c.headroom},
                                    {"headroom_source", c.headroom_source},
                                    {"hbm_budget_bytes", r.hbm_budget_bytes},
                                    {"near_tie", r.near_tie}};
  }
  ordered_json ranked = ordered_json::array();
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const plan::Ranked& g = r.ranked[i];
    ordered_json e;
    e["rank"] = i + 1;
    e["layout_string"] = plan::layout_string(g.layout, base);
    e["layout"] = layout_json(base, g.layout);
    e["metrics"] = metrics_json(g.metrics, true);
    e["band"] = band_json(g.band, g.metrics.step_s, g.metrics.tokens_per_s_per_gpu, g.metrics.mfu, g.metrics.hfu,
                          base.hardware.uncertainty);
    e["tie"] = g.tie;
    ordered_json eq = ordered_json::array();
    for (const Layout& l : g.equivalent) eq.push_back(plan::layout_string(l, base));
    e["equivalent"] = eq;
    e["num_equivalent"] = g.num_equivalent;
    ranked.push_back(e);
  }
  j["ranked"] = ranked;
  ordered_json tight = ordered_json::array();
  for (const plan::Ranked& g : r.tight) {
    ordered_json e;
    e["layout_string"] = plan::layout_string(g.layout, base);
    e["layout"] = layout_json(base, g.layout);
    e["message"] = oom_reason(g.metrics);
    e["metrics"] = metrics_json(g.metrics, true);
    tight.push_back(e);
  }
  j["tight"] = tight;
  ordered_json why = ordered_json::array();
  for (const plan::Ranked& g : r.out_of_memory) {
    ordered_json e;
    e["reason"] = "out_of_memory";
    e["message"] = oom_reason(g.metrics);
    e["layout_string"] = plan::layout_string(g.layout, base);
    e["layout"] = layout_json(base, g.layout);
    e["metrics"] = metrics_json(g.metrics, true);
    why.push_back(e);
  }
  for (const plan::Rejection& x : r.rejections) {
    ordered_json e;
    e["reason"] = "invalid";
    e["key"] = x.key;
    e["message"] = x.message;
    e["count"] = x.count;
    e["sole_count"] = x.sole_count;
    e["layout_string"] = plan::layout_string(x.example, base);
    e["layout"] = layout_json(base, x.example);
    why.push_back(e);
  }
  j["why_not"] = why;
  ordered_json ties = ordered_json::array();
  for (const plan::NearTie& t : r.near_ties)
    ties.push_back(ordered_json{{"rank", t.rank},
                                {"relative", t.relative},
                                {"differences", t.differences},
                                {"term", t.term},
                                {"term_delta_s", t.term_delta_s},
                                {"gain_term", t.gain_term},
                                {"gain_delta_s", t.gain_delta_s},
                                {"memory_delta_bytes", t.memory_delta_bytes}});
  j["near_ties"] = ties;
  j["ties"] = ordered_json{{"count", r.ties},
                           {"rule",
                            "a ranked group is a tie when the low end of its step-time band is at most the "
                            "high end of the fastest group's band"},
                           {"secondary_key", "after #1 (the fastest): step_s_high (the band's high end), then step_s"},
                           {"note", ties_note(r)}};
  if (!r.ranked.empty()) {
    const Scenario best = plan::apply_layout(base, r.ranked.front().layout);
    j["megatron_flags"] = plan::megatron_flags(best);
    j["megatron_command"] = megatron_command(best);
  } else {
    j["megatron_flags"] = ordered_json::array();
    j["megatron_command"] = nullptr;
    j["failure"] = plan_failure(base, r);
  }
  return j;
}

std::vector<Table> plan_tables(const Scenario& base, const plan::PlanResult& r) {
  std::vector<Table> out;
  Table d;
  d.title = fmt::format(
      "Best layouts: {} ({} candidates, {} valid, {} fit HBM, {} tight; searched in {:.2f} s on {} thread{})",
      scenario_title(base), r.counts.enumerated, r.counts.valid, r.counts.fit, r.counts.tight, r.seconds, r.threads,
      r.threads == 1 ? "" : "s");
  if (!r.constraints.empty()) {
    std::string given;
    for (const std::string& g : r.constraints.given) given += (given.empty() ? "" : ", ") + g;
    d.title += fmt::format(" [constraints: {}]", given);
  }
  if (r.constraints.headroom > 0)
    d.title += fmt::format(" [HBM budget {} GiB: headroom {:.1f}%]", fmt_bytes_gib(r.hbm_budget_bytes),
                           100.0 * r.constraints.headroom);
  d.header = {"#", "tie", "layout", "step s", "step band s", "tok/s/GPU", "MFU %", "MFU band %", kNeedsHeader};
  for (const auto& [name, dim] : kShownDims) d.header.push_back(fmt::format("exp {} s", name));
  d.header.push_back("bubble s");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const plan::Ranked& g = r.ranked[i];
    const Metrics& m = g.metrics;
    const Range st = time_range(m.step_s, g.band), mfu = rate_range(m.mfu, g.band);
    std::vector<std::string> row{fmt::format("{}", i + 1),
                                 g.tie && r.ties > 1 ? "tie" : "",
                                 plan::layout_string(g.layout, base),
                                 sec(m.step_s),
                                 fmt::format("{}-{}", sec(st.low), sec(st.high)),
                                 fmt::format("{:.0f}", m.tokens_per_s_per_gpu),
                                 pct(m.mfu),
                                 fmt::format("{}-{}", pct(mfu.low), pct(mfu.high)),
                                 fmt_bytes_gib(m.peak_high_bytes)};
    for (const auto& [name, dim] : kShownDims) row.push_back(sec(m.exposed_comm[static_cast<size_t>(dim)]));
    row.push_back(sec(m.bubble));
    d.rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const std::string n = equivalents_note(base, r.ranked[i], static_cast<int>(i) + 1);
    if (!n.empty()) d.notes.push_back(n);
  }
  constexpr size_t kTieNotes = 5;
  for (size_t i = 0; i < r.near_ties.size() && i < kTieNotes; ++i) {
    const plan::NearTie& t = r.near_ties[i];
    const bool tie = r.ties > 1 && t.rank >= 1 && r.ranked[static_cast<size_t>(t.rank - 1)].tie;
    d.notes.push_back(near_tie_note(t) + (tie ? " (within the error band: a tie, not a ranking)" : ""));
  }
  if (r.near_ties.size() > kTieNotes)
    d.notes.push_back(fmt::format("... {} more near-ties (the JSON output lists them all)", r.near_ties.size() - kTieNotes));
  if (const std::string t = ties_note(r); !t.empty()) d.notes.push_back(t);
  d.notes.push_back(band_note(base.hardware.uncertainty));
  d.notes.push_back(kNeedsNote);
  d.notes.push_back(headroom_note(r));
  d.notes.push_back(
      "exp X s: communication of dimension X not hidden under compute, per step, on the bottleneck stage (dp includes "
      "EDP and embedding sync)");
  out.push_back(std::move(d));

  if (!r.tight.empty()) {
    Table t;
    t.title = "May fit: the fastest tight layouts (the memory band straddles HBM)";
    t.header = {"layout", "step s", "vs #1", "memory band GiB", "HBM GiB", "stage"};
    const double best = r.ranked.empty() ? 0.0 : r.ranked.front().metrics.step_s;
    for (const plan::Ranked& g : r.tight) {
      const Metrics& m = g.metrics;
      t.rows.push_back({plan::layout_string(g.layout, base), sec(m.step_s),
                        best > 0 ? fmt::format("{:+.1f}%", 100.0 * (m.step_s / best - 1.0)) : std::string("-"),
                        fmt::format("{}-{}", fmt_bytes_gib(m.peak_low_bytes), fmt_bytes_gib(m.peak_high_bytes)),
                        fmt_bytes_gib(m.hbm_bytes), fmt::format("{}", m.miss_stage)});
    }
    t.notes.push_back(
        "tight: the 10th-90th percentile band of the measured peak (the memory model's own residuals, a development "
        "set; its bottom without the allocator's fragmentation, which PyTorch releases and retries under pressure) "
        "straddles HBM, so the model cannot say whether the layout fits; not ranked with the layouts that fit. Try "
        "one with a short run, or leave a margin with --headroom");
    out.push_back(std::move(t));
  }

  Table w;
  w.title = "Why not: the most promising rejected layouts";
  w.header = {"layout", "step s", "rejected because"};
  const double best = r.ranked.empty() ? 0.0 : r.ranked.front().metrics.step_s;
  for (const plan::Ranked& g : r.out_of_memory) {
    std::string why = oom_reason(g.metrics);
    if (best > 0 && g.metrics.step_s < best) why += fmt::format("; {:.1f}% faster than #1", 100.0 * (1 - g.metrics.step_s / best));
    w.rows.push_back({plan::layout_string(g.layout, base), sec(g.metrics.step_s), why});
  }
  for (size_t i = 0; i < r.rejections.size() && i < 8; ++i) {
    const plan::Rejection& x = r.rejections[i];
    w.rows.push_back({plan::layout_string(x.example, base), "-",
                      fmt::format("{} ({} candidates break {})", x.message, x.count, x.key)});
  }
  if (w.rows.empty()) w.rows.push_back({"-", "-", "every candidate is valid and fits"});
  w.notes.push_back(fmt::format(
      "out-of-memory layouts are timed when their memory band's bottom misses HBM by at most {:.0f}% (the near misses); "
      "invalid ones name the "
      "Megatron rule they break, with one example",
      100.0 * r.time_miss_fraction));
  w.notes.push_back(headroom_note(r));
  out.push_back(std::move(w));

  if (!r.ranked.empty()) {
    Table f;
    f.title = "Megatron-LM flags of #1";
    f.header = {"flags"};
    f.rows.push_back({megatron_command(plan::apply_layout(base, r.ranked.front().layout))});
    f.align_numbers = false;
    out.push_back(std::move(f));
  }
  return out;
}

Table plan_csv_table(const Scenario& base, const plan::PlanResult& r) {
  Table t;
  t.header = {"rank", "layout", "tp", "cp", "cp_comm_type", "hierarchical_cp", "pp", "first_stage_layers",
              "last_stage_layers", "vp", "ep", "etp", "dp", "edp", "mbs", "recompute", "sharding", "dispatcher",
              "rank_order", "step_s", "tokens_per_s_per_gpu", "mfu", "hfu", "peak_gib", "needs_gib", "worst_stage"};
  for (const auto& [name, dim] : kShownDims) t.header.push_back(fmt::format("exposed_{}_s", name));
  t.header.push_back("bubble_s");
  t.header.push_back("num_equivalent");
  for (const char* h : {"step_s_low", "step_s_high", "mfu_low", "mfu_high", "tie"}) t.header.push_back(h);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const plan::Ranked& g = r.ranked[i];
    const Layout& l = g.layout;
    const Scenario s = plan::apply_layout(base, l);
    const Mesh m = derive_mesh(s);
    const Metrics& x = g.metrics;
    const auto& h = s.parallel.hierarchical_context_parallel_sizes;
    std::vector<std::string> row{fmt::format("{}", i + 1),
                                 plan::layout_string(l, base),
                                 fmt::format("{}", l.tp),
                                 fmt::format("{}", l.cp),
                                 std::string(to_string(s.parallel.cp_comm_type)),
                                 h.size() == 2 ? fmt::format("{}x{}", h[0], h[1]) : "",
                                 fmt::format("{}", l.pp),
                                 fmt::format("{}", l.first_stage_layers),
                                 fmt::format("{}", l.last_stage_layers),
                                 fmt::format("{}", m.vp),
                                 fmt::format("{}", m.ep),
                                 fmt::format("{}", m.etp),
                                 fmt::format("{}", m.dp),
                                 fmt::format("{}", m.edp),
                                 fmt::format("{}", l.mbs),
                                 std::string(to_string(l.recompute)),
                                 std::string(to_string(l.sharding)),
                                 has_moe(base.model) ? std::string(to_string(l.dispatcher)) : "",
                                 rank_order_to_string(s.parallel.order),
                                 fmt::format("{:.6g}", x.step_s),
                                 fmt::format("{:.6g}", x.tokens_per_s_per_gpu),
                                 fmt::format("{:.6g}", x.mfu),
                                 fmt::format("{:.6g}", x.hfu),
                                 fmt::format("{:.4f}", x.peak_bytes / kGiB),
                                 fmt::format("{:.4f}", x.peak_high_bytes / kGiB),
                                 fmt::format("{}", x.worst_stage)};
    for (const auto& [name, dim] : kShownDims) row.push_back(fmt::format("{:.6g}", x.exposed_comm[static_cast<size_t>(dim)]));
    row.push_back(fmt::format("{:.6g}", x.bubble));
    row.push_back(fmt::format("{}", g.num_equivalent));
    const Range st = time_range(x.step_s, g.band), mfu = rate_range(x.mfu, g.band);
    for (double v : {st.low, st.high, mfu.low, mfu.high}) row.push_back(fmt::format("{:.6g}", v));
    row.push_back(g.tie && r.ties > 1 ? "1" : "0");
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace lcm::report
