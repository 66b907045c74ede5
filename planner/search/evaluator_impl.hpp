// The planner's layout evaluator (internal to planner/search): validate_scenario, memory
// and step time of one layout. Validation is shared where its rules read nothing that
// differs; memory and step time come from the model's incremental estimator
// (lcm/model/incremental.hpp), which shares every model function's result between the
// layouts whose inputs to that function are equal (each function's cache key is declared
// next to it in model/). The planner keeps no list of what each function reads.
// Layouts whose step time provably cannot enter the search's tables are not composed
// (evaluate_shardings' bounds; docs/planner.md).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lcm/model/incremental.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

// The result of one layout: for valid ones `metrics` (the step-time fields only when
// `timed`), for invalid ones `problems`.
struct ShardingResult {
  Outcome::Status status = Outcome::Status::kInvalid;
  bool timed = false;
  // Timed, but only bounded: its step time provably exceeds the bound it was evaluated
  // against (evaluate_shardings), so `metrics` has no step-time fields.
  bool bounded = false;
  Metrics metrics;
  std::vector<Problem> problems;
};

struct Evaluator::Impl {
  explicit Impl(const Scenario& base);

  // The layouts `layout` with each of `shardings` (its own sharding is ignored): they
  // differ only in their step collectives and memory and share the rest of the work.
  // Out-of-memory layouts get a time only when the bottom of their memory band misses HBM
  // by at most time_miss_bytes (tight ones always). A layout that fits (is tight, misses HBM) whose step time is
  // provably above fit_bound (tight_bound, miss_bound) is not composed: `bounded` (a lower
  // bound from the pipeline passes, which the step collectives and optimizer only add to).
  void evaluate_shardings(const Layout& layout, const DpSharding* shardings, int count, ShardingResult* results,
                          double time_miss_bytes = 1e300, double fit_bound = kNoBound, double miss_bound = kNoBound,
                          double tight_bound = kNoBound);
  static constexpr double kNoBound = 1e300;

  // Drop the caches that grow with the search.
  void trim() { estimator_.clear(); }
  uint64_t schedules_built() const { return estimator_.schedules_built(); }  // build_schedule calls

  Scenario base;
  Scenario work;  // base with the current layout applied
  uint64_t validations = 0;  // validate_scenario calls

 private:
  int validate_each(Layout& l, const DpSharding* shardings, int count, ShardingResult* results);

  IncrementalEstimator estimator_;
  // validate_sharding per sharding (it reads only the sharding knobs).
  std::array<bool, 4> sharding_checked_{};
  std::array<std::vector<Problem>, 4> sharding_problems_;
  // validate_layout of the previous layout (without its sharding and rank order).
  bool has_validation_ = false;
  Layout validation_key_;
  LayoutValidation validation_;
};

}  // namespace lcm::plan
