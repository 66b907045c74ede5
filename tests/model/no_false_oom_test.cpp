// No false out-of-memory verdicts on published runs (issue 12, point (c)): every training run
// of the published H100 tables ran on 80 GB H100s, so the planner must accept its layout.
//
// The runs: the Megatron-Bridge, NeMo 24.07 and Megatron-Core weak-scaling rows as
// tests/model/perf_validation_test.cpp builds them, and the Megatron-LM CI rows with a GPU
// count as tests/model/megatron_ci_memory_test.cpp imports them (published_scenarios.hpp).
// The verdict is the planner's own: lcm::plan::search over the run's scenario with every
// knob fixed to the run's layout (the defaults of `lcm plan`: SearchConstraints::use_default_headroom, no
// headroom: the memory band decides), and the outcome of exactly that layout: fits or tight (the band
// straddles HBM; the planner keeps it in its May-fit table) is kept, out of memory is flagged. docs/validation-memory.md lists the rows and any
// row still flagged with the reason. A second test (PlannerOnPublishedLayouts, at the end) asks
// the planner, with every knob free, to keep NVIDIA's tuned dense layouts among its ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/planner/search/plan.hpp"
#include "published_scenarios.hpp"

namespace {

using lcm::plan::Layout;
using lcm::plan::Outcome;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Runs still flagged, each with its reason (docs/validation-memory.md, "No false
// out-of-memory", lists them with their terms). Matched as a substring of the run's id; the
// test fails on any other flagged run and on a listed run that now fits (so the list shrinks).
struct KnownFlagged {
  const char* id;
  const char* reason;
};
// The NeMo 24.07 rows carry the recipes of NVIDIA/NeMo-Framework-Launcher tag 24.07: the
// training YAMLs (no recompute) and the H100 FP8 example scripts that add
// `+training.model.optim.grad_sync_dtype=bf16` (examples/training/gpt/h100/*_fp8_*.sh,
// llama/h100/*_fp8.sh), and the SFT recipe's bf16 optimizer (conf/peft/llama/sft.yaml);
// perf_validation_test.cpp, recipe_for. Session 12 had read only the YAMLs (fp32 grad sync)
// and flagged five of these rows; with the scripts' bf16 gradients four were kept. GPT3-20B
// (tp 2, mbs 2, 64 GPUs) stayed flagged, 1.1 GiB over HBM at the band's bottom, until session
// 42 took the fragmentation term out of that bottom (the caching allocator releases its cached
// free blocks and retries before it fails; model/src/memory.cpp): it is tight now (band
// 74.4-89.7 GiB). A development-set change, written after that verdict was known.
const std::vector<KnownFlagged> kKnownFlagged = {
    // Out of memory even at the bottom of the memory band ((peak - fragmentation) x (1 - 4.10%) > 79.6 GiB).
    // The rows that only the band's top misses (Llama 3.1 405B, Llama 3 70B pre-training and
    // SFT, NeMo's Llama 2 7B and Llama 3 70B) are tight, kept by the planner (session 12).
    // (The Qwen3-30B-A3B pp2 vp24 mbs2 rows of 25.09 and 25.11 were listed here until session 19:
    // with the presets' bf16 gradient reduction, read from every release's configs, they are
    // tight, 84.7 GiB at the band's top.)
    // (25.11's GPT-OSS 120B was listed until session 43 at the table's mbs 4: 4 x 14.6 GiB of
    // activations on stage 0. The row's gbs 512, mbs 4, dp 16 and ga 2 contradict each other, and
    // the release's code (Megatron-Bridge v0.2.0 gpt_oss/workload_base_configs.py) sets mbs 1;
    // perf_validation_test.cpp's kBridgeCorrections takes it, and the run fits, 64.3 GiB at the
    // band's top. A development-set change, made after the verdict was known.)
    // (dgxc-benchmarking v25.04's Llama 3.1 405B FP8 on 512 GPUs and Nemotron-4 15B FP8 on 16, flagged
    // at that table's score, session 40, fit since NeMo 2.0's FP8 weights are modelled:
    // training.fp8_param_gather.)
    // (gpt3_mcore_tp2_pp2_ep2_etp2_te_4experts2parallel, whose CSV sizes are tp 4 with etp 2,
    // was listed until session 25 as outside the planner's space; etp now takes every divisor
    // of tp, and the run fits, 5.3 GiB at the band's top.)
};

const KnownFlagged* known_flagged(const std::string& id) {
  for (const KnownFlagged& k : kKnownFlagged)
    if (id.find(k.id) != std::string::npos) return &k;
  return nullptr;
}

struct Verdict {
  bool found = false;  // the run's layout was among the search's outcomes
  Outcome outcome;
  double budget = 0;  // HBM x (1 - headroom) the search compared with
  std::string error;
};

// The memory terms of the stage the verdict read (GiB), for the rows that do not fit.
std::string breakdown(const lcm::Scenario& s, int stage) {
  const lcm::Scenario a = lcm::plan::apply_layout(s, lcm::plan::layout_of(s));
  const lcm::Mesh m = lcm::derive_mesh(a);
  const auto layers = lcm::stage_layers(a, m);
  const lcm::Memory mem = lcm::estimate_memory(a, m, layers, lcm::gpu_params(a, m, layers));
  const lcm::StageMemory& st = mem.stages[static_cast<size_t>(std::min<int>(stage, static_cast<int>(mem.stages.size()) - 1))];
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "stage %d: weights %.1f grads %.1f main %.1f optim %.1f fsdp %.1f fp8 %.1f act %.1f (%.2f/mb x %.2f) "
                "logits %.1f transient %.1f comm %.1f ws %.1f; allocated %.1f peak %.1f high %.1f",
                st.stage, st.weights / kGiB, st.grads / kGiB, st.main_params / kGiB, st.optimizer_states / kGiB,
                st.fsdp_gather_buffers / kGiB, st.fp8_weight_cache / kGiB, st.activations / kGiB,
                st.activations_per_microbatch / kGiB, st.in_flight_microbatches, st.logits_and_loss / kGiB,
                st.transient_peak / kGiB, st.comm_buffers / kGiB, st.workspaces / kGiB, st.allocated / kGiB,
                st.peak / kGiB, st.peak_high / kGiB);
  return buf;
}

// search() with the knobs of `s` fixed: the space then holds the run's layout (and the
// interleaving / split / order variants the constraints cannot fix). Layouts are matched by
// their layout_string, which leaves out what a dense model does not have (ep, etp, dispatcher).
Verdict planner_verdict(const lcm::Scenario& s) {
  using lcm::to_string;
  const Layout l = lcm::plan::layout_of(s);
  lcm::plan::PlanOptions opts;
  opts.constraints.use_default_headroom();  // as `lcm plan` without --headroom
  opts.threads = 1;
  opts.sample_every = 1;
  opts.why_not = 0;
  Verdict v;
  std::vector<std::string> fixes = {"tp=" + std::to_string(l.tp), "cp=" + std::to_string(l.cp),
                                    "pp=" + std::to_string(l.pp), "mbs=" + std::to_string(l.mbs),
                                    "sharding=" + std::string(to_string(l.sharding)),
                                    "recompute=" + std::string(to_string(l.recompute))};
  if (l.cp > 1) fixes.push_back("cp_comm=" + std::string(to_string(l.cp_comm)));
  if (lcm::has_moe(s.model)) {  // a dense model's space has no expert knobs
    fixes.push_back("ep=" + std::to_string(l.ep));
    fixes.push_back("etp=" + std::to_string(l.etp));
    fixes.push_back("dispatcher=" + std::string(to_string(l.dispatcher)));
  }
  for (const std::string& f : fixes) {
    if (!opts.constraints.add_fix(f, v.error)) return v;
  }
  const lcm::plan::PlanResult r = lcm::plan::search(s, opts);
  v.budget = r.hbm_budget_bytes;
  const std::string want = lcm::plan::layout_string(l, s);
  std::string seen;
  for (const auto& [layout, outcome] : r.samples) {
    const std::string got = lcm::plan::layout_string(layout, s);
    if (seen.size() < 400) seen += (seen.empty() ? "" : "; ") + got;
    if (got == want) {
      v.found = true;
      v.outcome = outcome;
    }
  }
  if (!v.found) {
    v.error = "the run's layout is not in the planner's space; it has: " + (seen.empty() ? "nothing" : seen);
    for (const auto& rej : r.rejections) v.error += " [rejected " + std::to_string(rej.count) + ": " + rej.message + "]";
  }
  return v;
}

TEST(NoFalseOom, EveryPublishedRunFitsItsRecordedGpu) {
  std::vector<lcm::test::PublishedScenario> runs = lcm::test::published_h100_scenarios();
  const auto ci = lcm::test::published_ci_scenarios();
  runs.insert(runs.end(), ci.begin(), ci.end());
  ASSERT_GE(runs.size(), 60u) << "too few published runs built";

  std::printf("\n| table | run | layout | needs GiB (peak_high) | budget GiB | verdict |\n|---|---|---|---:|---:|---|\n");
  int fits = 0, tight = 0, flagged = 0;
  for (const auto& run : runs) {
    const Verdict v = planner_verdict(run.scenario);
    const Layout l = lcm::plan::layout_of(run.scenario);
    std::string verdict;
    if (!v.found) {
      verdict = "not evaluated: " + v.error;
    } else if (v.outcome.status == Outcome::Status::kInvalid) {
      verdict = "invalid: " + (v.outcome.problems.empty() ? std::string() : v.outcome.problems.front().message);
    } else {
      verdict = v.outcome.status == Outcome::Status::kFits    ? "fits"
                : v.outcome.status == Outcome::Status::kTight ? "tight (may fit: the memory band straddles HBM)"
                                                              : "OUT OF MEMORY (" +
                                                                    breakdown(run.scenario, v.outcome.metrics.miss_stage) + ")";
    }
    std::printf("| %s | %s | %s | %.1f | %.1f | %s |\n", run.table.c_str(), run.id.c_str(),
                lcm::plan::layout_string(l, run.scenario).c_str(), v.outcome.metrics.peak_high_bytes / kGiB,
                v.budget / kGiB, verdict.c_str());
    const KnownFlagged* known = known_flagged(run.id);
    // Tight is not a false out-of-memory verdict: the planner keeps the layout (its May-fit
    // table) and says the model cannot tell.
    const bool kept = v.found && (v.outcome.status == Outcome::Status::kFits || v.outcome.status == Outcome::Status::kTight);
    if (kept) {
      ++fits;
      tight += v.outcome.status == Outcome::Status::kTight;
      if (known) ADD_FAILURE() << run.id << " is kept now: take it off kKnownFlagged (" << known->reason << ")";
    } else {
      ++flagged;
      if (known) {
        std::printf("  known: %s\n", known->reason);
      } else {
        ADD_FAILURE() << run.table << " " << run.id << ": " << verdict;
      }
    }
  }
  std::printf("%d of %zu published runs fit or are tight (%d tight); %d flagged\n", fits, runs.size(), tight, flagged);
}

}  // namespace

namespace {

// The planner against layouts NVIDIA tuned on real H100s (issue 12: the planner's ranking is
// only as good as the model's error): NVIDIA/dgxc-benchmarking's dense workloads (Llama 3.1
// 8B / 70B / 405B, Nemotron-4 15B / 340B, GPT-3 175B; BF16 and FP8), each at its smallest run of
// the whole model.
// `lcm::plan::search` with every knob free must keep the published layout within the error
// band of its fastest layout (a tie: the measured times could be in either order) or call it
// tight (the memory band straddles HBM: the May-fit table). A model change that made lcm
// think it knows a clearly faster layout than NVIDIA's fails here. Grok-1 (MoE) is left out:
// its published layout shards experts over TP (ETP 4), and the planner's fastest layouts with
// ETP 1 are 23-35 % faster (docs/validation-performance.md, "The planner against NVIDIA's
// tuned layouts"), a difference the row's stack could not try.
TEST(PlannerOnPublishedLayouts, NvidiasDenseLayoutsAreTiesWithTheFastest) {
  std::vector<lcm::test::PublishedScenario> runs;
  for (const auto& run : lcm::test::published_h100_scenarios()) {
    if (run.table != "dgxc" || lcm::has_moe(run.scenario.model)) continue;
    // "Model PRECISION NGPU": of each model and precision, the smallest run of the whole model
    // (Llama 3.1 405B's 32-192 GPU rows cut it to 7-42 layers).
    const std::string key = run.id.substr(0, run.id.rfind(' '));
    auto same =
        std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.id.substr(0, r.id.rfind(' ')) == key; });
    const auto depth_then_size = [](const lcm::Scenario& a, const lcm::Scenario& b) {
      return a.model.num_layers != b.model.num_layers ? a.model.num_layers > b.model.num_layers
                                                      : a.num_gpus < b.num_gpus;
    };
    if (same == runs.end()) runs.push_back(run);
    else if (depth_then_size(run.scenario, same->scenario)) *same = run;
  }
  ASSERT_EQ(runs.size(), 12u);
  std::printf(
      "\n| run | planner's fastest | its step s (band top) | published layout | step s (band bottom) | verdict |\n"
      "|---|---|---:|---|---:|---|\n");
  int ties = 0, tight = 0;
  for (const auto& run : runs) {
    lcm::plan::PlanOptions opts;
    opts.constraints.use_default_headroom();
    opts.threads = 1;
    opts.why_not = 0;
    const lcm::plan::PlanResult r = lcm::plan::search(run.scenario, opts);
    ASSERT_FALSE(r.ranked.empty()) << run.id;
    const Verdict v = planner_verdict(run.scenario);
    ASSERT_TRUE(v.found) << run.id << ": " << v.error;
    const bool is_tight = v.outcome.status == Outcome::Status::kTight;
    // The planner's own tie rule (rank_ties) on its fastest group and the published layout.
    std::vector<lcm::plan::Ranked> pair(2);
    pair[0] = r.ranked.front();
    pair[1].layout = lcm::plan::layout_of(run.scenario);
    pair[1].metrics = v.outcome.metrics;
    lcm::plan::rank_ties(pair, run.scenario);
    const double best_high = pair[0].metrics.step_s * (1 + pair[0].band.high);
    const double low = pair[1].metrics.step_s * (1 + pair[1].band.low);
    const bool tie = v.outcome.status == Outcome::Status::kFits && pair[1].tie;
    ties += tie ? 1 : 0;
    tight += is_tight ? 1 : 0;
    std::printf("| %s | %s | %.3f (%.3f) | %s | %.3f (%.3f) | %s |\n", run.id.c_str(),
                lcm::plan::layout_string(pair[0].layout, run.scenario).c_str(), pair[0].metrics.step_s, best_high,
                lcm::plan::layout_string(pair[1].layout, run.scenario).c_str(), pair[1].metrics.step_s, low,
                tie ? "tie" : is_tight ? "tight" : "NOT A TIE");
    EXPECT_TRUE(tie || is_tight) << run.id << ": the published layout's band starts at " << low
                                 << " s, above the fastest layout's band top " << best_high << " s";
  }
  std::printf("%d of %zu published dense layouts are ties with the planner's fastest, %d tight\n", ties, runs.size(),
              tight);
}

}  // namespace
