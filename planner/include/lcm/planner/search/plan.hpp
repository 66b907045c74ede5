// The layout planner: every Megatron layout of a scenario's model and job on N GPUs,
// checked against Megatron's rules (validate_scenario), dropped when it does not fit
// HBM (estimate_memory), ranked by step time (the op schedule and step_time).
//
// A layout is the set of knobs the planner chooses (Layout); everything else (model,
// sequence length, global batch, precision, hardware, overlap switches) is the
// scenario's. Each layout's metrics equal those of a fresh `estimate()` of the scenario
// with that layout applied (apply_layout): the search shares sub-results between
// layouts (op-list times per layer kind, stage structure, memory) but composes them with
// the model's own functions (model/step_time.hpp), so the numbers are bit-identical.
// docs/planner.md describes the search space, the sharing and the outputs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/uncertainty.hpp"
#include "lcm/planner/search/constraints.hpp"

namespace lcm::plan {

// The knobs of one layout. Data-parallel sizes are derived (dp = N / (tp*cp*pp)).
struct Layout {
  int tp = 1;
  int cp = 1;
  CpCommType cp_comm = CpCommType::kP2P;  // p2p when cp == 1
  int cp_a2a = 0;                         // a2a+p2p: hierarchical sizes {cp_a2a, cp / cp_a2a}
  int pp = 1;
  int first_stage_layers = 0;  // uneven pipeline split (0: even); Megatron
  int last_stage_layers = 0;   // --decoder-first/last-pipeline-num-layers
  int vl = 0;                  // layers per virtual pipeline stage (0: no interleaving)
  // The base scenario's custom pipeline layout (parallel.pipeline_model_parallel_layout) is
  // kept; it fixes the stages (vp = stages / pp) and the layer placement, so first/last/vl
  // are 0. The search tries it for every pp dividing its stage count; layout_of sets it.
  bool custom_pipeline = false;
  int ep = 1;
  int etp = 1;
  int mbs = 1;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;  // full: uniform, 1 layer
  DpSharding sharding = DpSharding::kNoShard;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  bool pp_before_dp = false;  // rank order tp-cp-ep-pp-dp (Megatron --use-tp-pp-dp-mapping)

  bool operator==(const Layout&) const = default;
};

// Canonical total order (tp, cp, pp, ... in field order): ties in step time and memory
// are broken by it, so results do not depend on thread scheduling.
bool layout_less(const Layout& a, const Layout& b);

// The scenario with the layout applied. Besides the layout's own fields it sets
// sequence_parallel (on when tp > 1), use_distributed_optimizer (sharding != no_shard),
// recompute method uniform with 1 layer for full recompute, and the scenario's overlap
// switches where Megatron allows them: tp_comm_overlap needs tp > 1;
// overlap_param_gather needs a sharded optimizer; overlap_moe_expert_parallel_comm needs
// ep > 1, a non-allgather dispatcher, no full recompute and pp == 1 or interleaving.
Scenario apply_layout(const Scenario& base, const Layout& l);
// Writes only the fields apply_layout sets (no allocation once `out` is a copy of base).
void apply_layout_into(const Scenario& base, const Layout& l, Scenario& out);
// The part of apply_layout_into that depends on Layout::sharding (the rest unchanged):
// for layouts that differ only in it.
void apply_sharding_into(const Scenario& base, DpSharding sharding, Scenario& out);
// The layout a scenario is in (inverse of apply_layout on the knobs above).
Layout layout_of(const Scenario& s);

// One argument as a POSIX shell word: as is when it holds only characters no shell treats
// specially, else in single quotes ("Et|(tt|)*30mL" -> "'Et|(tt|)*30mL'").
std::string shell_word(const std::string& arg);

// "tp2 cp4(p2p) pp2 vp2 ep8 etp1 dp4 mbs1 sel optim alltoall" (dp/vp derived for `num_gpus`).
std::string layout_string(const Layout& l, const Scenario& base);
// The inverse of layout_string, token by token in any order: tpN, cpN[(p2p|a2a|allgather|
// a2aX+p2pY)], ppN[(firstA,lastB)], vpN, epN, etpN, dpN (checked against the GPUs), mbsN,
// no-rc|sel|full, a sharding (no_shard, optim, ...), a dispatcher, order=tp-cp-ep-pp-dp.
// Knobs not named keep the scenario's own (layout_of(base)). Only the notation is checked
// here; validate_scenario(apply_layout(base, l)) checks the layout. The error message
// names the token.
bool parse_layout_string(const std::string& text, const Scenario& base, Layout& out, std::string& error);
// Megatron-LM flags that define the layout (sizes always, other knobs when they differ
// from Megatron's defaults), ready to paste: "--tensor-model-parallel-size 2 ...".
std::vector<std::string> megatron_flags(const Scenario& s);

// Metrics of one valid layout: the Estimate fields the planner ranks and reports.
struct Metrics {
  double step_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble = 0;
  double pipeline = 0;
  double dp_exposed = 0;
  double optimizer = 0;
  double host_idle = 0;  // StepTime::host_idle (issue 12, host-bound regime)
  double straggler = 0;  // StepTime::straggler (issue 12, the slowest GPU)
  std::array<double, kNumCommDims> exposed_comm{};  // StepTime::exposed_comm
  std::array<double, kNumOpClasses> compute{};      // StepTime::compute
  int bottleneck_stage = 0;
  double peak_bytes = 0;            // Memory::peak_bytes (worst stage)
  double allocated_peak_bytes = 0;  // Memory::allocated_peak_bytes
  int worst_stage = 0;              // Memory::worst_stage
  bool fits = true;                 // Memory::fits: the band's top fits HBM
  bool may_fit = true;              // Memory::may_fit: the band's bottom fits (tight: may_fit && !fits)
  double hbm_bytes = 0;
  double peak_high_bytes = 0;  // Memory::peak_high_bytes: the band's top, the number `fits` compares with HBM
  double peak_low_bytes = 0;   // Memory::peak_low_bytes: the band's bottom (`may_fit`)
  double miss_bytes = 0;  // peak_high_bytes - HBM (> 0 when it does not fit for certain)
  int miss_stage = 0;     // Memory::verdict_stage: the stage of peak_high_bytes
};

struct Outcome {
  // kTight: the memory band straddles HBM (Memory::may_fit but not fits): the model cannot
  // say whether it fits; ranked apart from the layouts that fit (PlanResult::tight).
  enum class Status : uint8_t { kInvalid, kOutOfMemory, kTight, kFits };
  Status status = Status::kInvalid;
  Metrics metrics;                // kOutOfMemory, kFits (time fields when has_time)
  bool has_time = false;          // the search times out-of-memory layouts only near HBM
  std::vector<Problem> problems;  // kInvalid: validate_scenario of the layout
};

// Evaluates layouts of one base scenario, sharing sub-results between calls. Not
// thread-safe: one per thread. Every outcome equals validate_scenario + estimate() of
// apply_layout(base, l).
class Evaluator {
 public:
  explicit Evaluator(const Scenario& base);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;
  Outcome evaluate(const Layout& l);

  struct Impl;  // planner/search/evaluator_impl.hpp (the search drives it directly)

 private:
  std::unique_ptr<Impl> impl_;
};

// Metrics of a full estimate (the reference the evaluator must equal).
Metrics metrics_of_estimate(const Scenario& s);

// The named step-time terms of a layout's metrics (model/step_time.hpp).
inline std::array<StepTerm, kNumStepTerms> step_terms(const Metrics& m) {
  return lcm::step_terms(m.compute, m.exposed_comm, m.bubble, m.host_idle, m.straggler, m.optimizer);
}

// The error band of a layout's step time (model/uncertainty.hpp), from its metrics'
// step terms and the base scenario's precision and hardware profile.
inline StepBand step_band(const Metrics& m, const Scenario& base) {
  return lcm::step_band(m.compute, m.exposed_comm, m.bubble, m.optimizer, base.training.precision == Precision::kFp8,
                        base.hardware.uncertainty);
}

// ---------------------------------------------------------------------------------
// Search.
// ---------------------------------------------------------------------------------
struct PlanOptions {
  int top_k = 10;          // ranked groups to keep
  int why_not = 5;         // out-of-memory layouts to keep for the why-not table
  int threads = 0;         // 0: std::thread::hardware_concurrency()
  double near_tie = 0.02;  // relative step-time gap reported as a near-tie (`lcm plan --tie`)
  // Knob values the space leaves out, and the HBM headroom a layout must leave to fit
  // (`lcm plan --fix/--exclude/--max/--headroom`).
  SearchConstraints constraints;
  // Out-of-memory layouts are timed (for the why-not table) when they miss HBM by at most
  // this fraction of it; the others are rejected on memory alone.
  double time_miss_fraction = 0.10;
  // Called from the calling thread about every 100 ms while the search runs.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Tests: keep every n-th evaluated layout (0: none) with its outcome (and compose every
  // step time: no bounding below).
  uint64_t sample_every = 0;
  // Skip composing the step time of a layout whose lower bound (its pipeline passes) is
  // above every time the decision and why-not tables still take; the result is the same
  // either way (tests/planner/plan_logic_test.cpp), `timed` counts such layouts too.
  bool bound = true;
  // Set (from any thread) to stop the search: the workers finish the mesh they are on and
  // return; the result so far comes back with PlanResult::cancelled. Null: run to the end.
  const std::atomic<bool>* stop = nullptr;
};

struct Ranked {
  Layout layout;
  Metrics metrics;
  // Layouts with bit-identical step time and peak memory (e.g. dispatchers the time model
  // does not tell apart), in canonical order, at most 16.
  std::vector<Layout> equivalent;
  uint64_t num_equivalent = 0;
  StepBand band;  // the step time's error band (step_band)
  bool tie = false;  // its band overlaps the fastest group's: the order among ties is within the model's error
};

struct Rejection {
  std::string key;      // validate_scenario problem key ("model.num_attention_heads")
  std::string message;  // of the example
  Layout example;
  uint64_t count = 0;       // rejected candidates with a problem on this key
  uint64_t sole_count = 0;  // ... where it is the only key (relaxing it would admit them)
};

// A ranked layout whose step time is within the near-tie threshold of the best, and what
// separates the two. Cost terms are the step's additive parts (step_terms,
// model/step_time.hpp): GEMM / attention / memory-bound compute, exposed communication
// per dimension (EDP and embedding included), pipeline bubble, optimizer.
struct NearTie {
  int rank = 0;            // 1-based rank of the near-tied group (vs rank 1)
  double relative = 0;     // step_s / best - 1
  std::vector<std::string> differences;  // knobs that differ: "cp_comm_type p2p -> a2a"
  std::string term;        // the term (StepTerm::phrase) that grows most against the best ("" if none grows)
  double term_delta_s = 0; // its growth (this - best), seconds per step
  std::string gain_term;   // the term that shrinks most ("" if none shrinks)
  double gain_delta_s = 0; // its change (negative), seconds per step
  double memory_delta_bytes = 0;  // memory needed (Metrics::peak_high_bytes), this - best
};

struct PlanCounts {
  uint64_t enumerated = 0;  // candidates generated (a mesh rejected before expansion counts once)
  uint64_t valid = 0;       // passed validate_scenario
  uint64_t fit = 0;         // valid and fits HBM (the memory band's top)
  uint64_t tight = 0;       // valid, the memory band straddles HBM
  uint64_t evaluated = 0;   // candidates with a result (== enumerated)
  // Work behind them (what the sharing saves): model calls made by the search.
  uint64_t validations = 0;      // validate_scenario
  uint64_t schedules_built = 0;  // build_schedule
  uint64_t timed = 0;            // layouts composed into a step time
};

struct PlanResult {
  int num_gpus = 0;
  PlanCounts counts;
  double seconds = 0;  // wall time of the search
  int threads = 1;
  double time_miss_fraction = 0;  // PlanOptions::time_miss_fraction of the search
  double near_tie = 0;            // PlanOptions::near_tie of the search
  SearchConstraints constraints;  // PlanOptions::constraints of the search
  double hbm_budget_bytes = 0;    // HBM x (1 - headroom): what `fits` compares the memory needed with
  std::vector<Ranked> ranked;           // best first
  std::vector<Ranked> tight;            // fastest layouts whose memory band straddles HBM, best first
  std::vector<Ranked> out_of_memory;    // fastest layouts that do not fit, best first
  std::vector<Rejection> rejections;    // by count, most first
  std::vector<NearTie> near_ties;
  int ties = 0;  // ranked groups flagged Ranked::tie (the fastest included; 1: no tie)
  bool has_closest_miss = false;        // nothing fits: the layout missing HBM by the least
  Layout closest_miss;
  Metrics closest_miss_metrics;
  std::vector<std::pair<Layout, Outcome>> samples;  // PlanOptions::sample_every
  bool cancelled = false;  // stopped through PlanOptions::stop: counts and tables are partial
};

// Precondition: `base` loads (its model and job are valid); base.num_gpus is N. The base
// scenario's own layout is ignored. With a headroom constraint the search runs on the
// scenario with its HBM reduced to the budget (Metrics::hbm_bytes, fits, miss_bytes are
// against the budget).
PlanResult search(const Scenario& base, const PlanOptions& opts = {});

// The divisors of n, ascending (the values a parallel degree of n ranks can take).
std::vector<int> divisors(int n);

// Error-band ties (docs/planner.md, "Ranking and explanations"): sets each group's band;
// the groups whose band overlaps the fastest group's (low end at most the fastest's high
// end: the measured times could be in either order) are ties. The fastest stays #1; the
// other ties follow it, ordered by the secondary key, the high end of the band
// (step_s x (1 + high): the best worst case), then step time, then canonical layout order;
// the other groups follow by step time. `ranked` must be sorted by step time. Returns the
// number of ties (the fastest included).
int rank_ties(std::vector<Ranked>& ranked, const Scenario& base);

// The groups of `ranked` (best first) within `threshold` (relative) of the best step
// time, with what separates each from the best.
std::vector<NearTie> near_ties(const std::vector<Ranked>& ranked, double threshold, const Scenario& base);

// The rejection that blocks the most candidates on its own (the tightest constraint);
// null when there are none.
const Rejection* tightest_constraint(const PlanResult& r);

// Knob-by-knob differences of `b` against `a` ("pp 2 -> 4").
std::vector<std::string> layout_differences(const Layout& a, const Layout& b, const Scenario& base);

}  // namespace lcm::plan
