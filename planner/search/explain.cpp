// What separates near-tied layouts, and which rule blocks the most candidates.
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

std::vector<NearTie> near_ties(const std::vector<Ranked>& ranked, double threshold, const Scenario& base) {
  std::vector<NearTie> out;
  if (ranked.empty()) return out;
  const Metrics& b = ranked.front().metrics;
  for (size_t i = 1; i < ranked.size(); ++i) {
    const Metrics& m = ranked[i].metrics;
    const double rel = m.step_s / b.step_s - 1.0;
    if (rel > threshold) continue;  // ties (rank_ties) may put a slower group before a faster one
    NearTie nt;
    nt.rank = static_cast<int>(i) + 1;
    nt.relative = rel;
    nt.differences = layout_differences(ranked.front().layout, ranked[i].layout, base);
    // The step's named terms (model/step_time.hpp), this layout's against the best's.
    const auto mt = step_terms(m);
    const auto bt = step_terms(b);
    for (size_t t = 0; t < mt.size(); ++t) {
      const double d = mt[t].seconds - bt[t].seconds;
      if (d > nt.term_delta_s) {
        nt.term = mt[t].phrase;
        nt.term_delta_s = d;
      }
      if (d < nt.gain_delta_s) {
        nt.gain_term = mt[t].phrase;
        nt.gain_delta_s = d;
      }
    }
    nt.memory_delta_bytes = m.peak_high_bytes - b.peak_high_bytes;
    out.push_back(std::move(nt));
  }
  return out;
}

int rank_ties(std::vector<Ranked>& ranked, const Scenario& base) {
  if (ranked.empty()) return 0;
  for (Ranked& r : ranked) {
    r.band = step_band(r.metrics, base);
    r.tie = false;
  }
  const Ranked& fastest = ranked.front();
  const double fastest_high = fastest.metrics.step_s * (1.0 + fastest.band.high);
  int ties = 0;
  for (Ranked& r : ranked)
    if (r.metrics.step_s * (1.0 + r.band.low) <= fastest_high) {
      r.tie = true;
      ++ties;
    }
  auto pessimistic = [](const Ranked& r) { return r.metrics.step_s * (1.0 + r.band.high); };
  // The fastest stays #1 (it defines the ties, and a larger --top must not change it); the
  // other ties follow it by the secondary key.
  std::stable_sort(ranked.begin() + 1, ranked.end(), [&](const Ranked& a, const Ranked& b) {
    if (a.tie != b.tie) return a.tie;
    if (!a.tie) return false;  // the others keep their order (step time)
    if (pessimistic(a) != pessimistic(b)) return pessimistic(a) < pessimistic(b);
    if (a.metrics.step_s != b.metrics.step_s) return a.metrics.step_s < b.metrics.step_s;
    return layout_less(a.layout, b.layout);
  });
  return ties;
}

const Rejection* tightest_constraint(const PlanResult& r) {
  const Rejection* best = nullptr;
  for (const Rejection& x : r.rejections)
    if (!best || x.sole_count > best->sole_count || (x.sole_count == best->sole_count && x.count > best->count))
      best = &x;
  return best;
}

}  // namespace lcm::plan
