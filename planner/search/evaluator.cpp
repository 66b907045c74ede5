// The layout evaluator (see evaluator_impl.hpp): Megatron's rules per layout, then memory
// and step time from the model's incremental estimator.
#include "evaluator_impl.hpp"
#include "plan_internal.hpp"

namespace lcm::plan {

Evaluator::Impl::Impl(const Scenario& b) : base(b), work(b), estimator_(b) {}

int Evaluator::Impl::validate_each(Layout& l, const DpSharding* shardings, int count, ShardingResult* results) {
  l.sharding = shardings[0];
  apply_layout_into(base, l, work);
  // The layout's rules once; only the sharding rules per sharding (validate_layout reads
  // no sharding knob, so this equals validate_scenario for each sharding). validate_layout
  // reads no rank order either: layouts that differ only in it share its result.
  // validate_sharding reads only the sharding knobs, which apply_layout sets from the
  // sharding and the base: one result per sharding for the whole search.
  Layout key = l;
  key.sharding = DpSharding::kNoShard;
  key.pp_before_dp = false;
  if (!has_validation_ || !(validation_key_ == key)) {
    validation_ = validate_layout(work);
    validation_key_ = key;
    has_validation_ = true;
  }
  const LayoutValidation& layout = validation_;
  int first_valid = -1;
  for (int i = 0; i < count; ++i) {
    ShardingResult& r = results[i];
    l.sharding = shardings[i];
    apply_sharding_into(base, l.sharding, work);
    if (layout.problems.empty()) r.problems.clear();  // the common case, without vector assignment
    else r.problems = layout.problems;
    if (layout.sizes_ok) {
      const size_t s = static_cast<size_t>(l.sharding);
      if (!sharding_checked_[s]) {
        sharding_problems_[s] = validate_sharding(work);
        sharding_checked_[s] = true;
      }
      r.problems.insert(r.problems.end(), sharding_problems_[s].begin(), sharding_problems_[s].end());
    }
    ++validations;
    r.timed = false;
    r.bounded = false;
    r.status = r.problems.empty() ? Outcome::Status::kFits : Outcome::Status::kInvalid;
    if (r.problems.empty() && first_valid < 0) first_valid = i;
  }
  return first_valid;
}

void Evaluator::Impl::evaluate_shardings(const Layout& layout, const DpSharding* shardings, int count,
                                         ShardingResult* results, double time_miss_bytes, double fit_bound,
                                         double miss_bound, double tight_bound) {
  Layout l = layout;
  // 1. Megatron's rules, per layout.
  const int first_valid = validate_each(l, shardings, count, results);
  if (first_valid < 0) return;
  l.sharding = shardings[first_valid];
  apply_sharding_into(base, l.sharding, work);
  const Mesh m = derive_mesh(work);  // the sharding is not a mesh size
  for (int i = first_valid; i < count; ++i) {
    ShardingResult& r = results[i];
    if (r.status == Outcome::Status::kInvalid) continue;
    if (l.sharding != shardings[i]) {
      l.sharding = shardings[i];
      apply_sharding_into(base, l.sharding, work);
    }
    if (i == first_valid) estimator_.select(work, m);
    else estimator_.select_sharding(work);  // only the sharding knobs differ
    // 2. Memory.
    Metrics& out = r.metrics;
    memory_metrics(estimator_.memory(), out);
    switch (verdict_of(out.fits, out.may_fit)) {  // the model's three memory verdicts
      case MemoryVerdict::kFits: r.status = Outcome::Status::kFits; break;
      case MemoryVerdict::kTight: r.status = Outcome::Status::kTight; break;
      case MemoryVerdict::kOutOfMemory: r.status = Outcome::Status::kOutOfMemory; break;
    }
    // Near misses: the band's bottom misses HBM by at most time_miss_bytes.
    if (!out.may_fit && out.peak_low_bytes - out.hbm_bytes > time_miss_bytes) continue;
    // 3. Step time, unless its lower bound already rules the layout out.
    r.timed = true;
    const double bound = out.fits ? fit_bound : out.may_fit ? tight_bound : miss_bound;
    if (estimator_.step_time_lower_bound() > bound) {
      r.bounded = true;
      continue;
    }
    time_metrics(estimator_.step_time(), out);
  }
}

Evaluator::Evaluator(const Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
Evaluator::~Evaluator() = default;

Outcome Evaluator::evaluate(const Layout& l) {
  ShardingResult r;
  impl_->evaluate_shardings(l, &l.sharding, 1, &r);
  Outcome o;
  o.status = r.status;
  o.has_time = r.timed;
  if (r.status == Outcome::Status::kInvalid) o.problems = std::move(r.problems);
  else o.metrics = r.metrics;
  return o;
}

}  // namespace lcm::plan
