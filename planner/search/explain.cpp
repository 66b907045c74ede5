// What separates near-tied layouts, and which rule blocks the most candidates.
#include "lcm/planner/plan.hpp"

namespace lcm::plan {

std::vector<NearTie> near_ties(const std::vector<Ranked>& ranked, double threshold, const Scenario& base) {
  std::vector<NearTie> out;
  if (ranked.empty()) return out;
  const Metrics& b = ranked.front().metrics;
  for (size_t i = 1; i < ranked.size(); ++i) {
    const Metrics& m = ranked[i].metrics;
    const double rel = m.step_s / b.step_s - 1.0;
    if (rel > threshold) break;
    NearTie nt;
    nt.rank = static_cast<int>(i) + 1;
    nt.relative = rel;
    nt.differences = layout_differences(ranked.front().layout, ranked[i].layout, base);
    const std::pair<const char*, double> terms[] = {
        {"GEMM compute", m.compute[0] - b.compute[0]},
        {"attention compute", m.compute[1] - b.compute[1]},
        {"memory-bound ops", m.compute[2] - b.compute[2]},
        {"exposed TP communication", m.exposed_comm[0] - b.exposed_comm[0]},
        {"exposed CP communication", m.exposed_comm[1] - b.exposed_comm[1]},
        {"exposed EP communication", m.exposed_comm[2] - b.exposed_comm[2]},
        {"exposed PP communication", m.exposed_comm[3] - b.exposed_comm[3]},
        {"exposed DP communication", m.exposed_comm[4] - b.exposed_comm[4]},
        {"pipeline bubble", m.bubble - b.bubble},
        {"optimizer step", m.optimizer - b.optimizer},
    };
    for (const auto& [name, d] : terms) {
      if (d > nt.term_delta_s) {
        nt.term = name;
        nt.term_delta_s = d;
      }
      if (d < nt.gain_delta_s) {
        nt.gain_term = name;
        nt.gain_delta_s = d;
      }
    }
    nt.memory_delta_bytes = m.peak_bytes - b.peak_bytes;
    out.push_back(std::move(nt));
  }
  return out;
}

const Rejection* tightest_constraint(const PlanResult& r) {
  const Rejection* best = nullptr;
  for (const Rejection& x : r.rejections)
    if (!best || x.sole_count > best->sole_count || (x.sole_count == best->sole_count && x.count > best->count))
      best = &x;
  return best;
}

}  // namespace lcm::plan
