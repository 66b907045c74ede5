#include "lcm/model/pipeline_schedule.hpp"

#include <algorithm>
#include <cassert>
#include <vector>

namespace lcm {

// Interleaved: the schedule table (get_schedule_table) walks micro-batches in groups of
// `group`, every chunk of a group before the next group (a short last group); the k-th
// forward runs table[k], the k-th backward table[k] with its chunk mirrored; warm-up
// (pp - r - 1) * 2 + (vp - 1) * group.
std::vector<PipelinePass> pipeline_rank_order(int pp, int vp, int m, int group, int r) {
  if (group <= 0) group = pp;
  std::vector<std::pair<int, int>> table;  // (micro-batch, chunk)
  table.reserve(static_cast<size_t>(m) * static_cast<size_t>(vp));
  if (vp == 1) {
    for (int mb = 0; mb < m; ++mb) table.emplace_back(mb, 0);
  } else {
    for (int lo = 0; lo < m; lo += group) {
      const int hi = std::min(m, lo + group);
      for (int c = 0; c < vp; ++c)
        for (int mb = lo; mb < hi; ++mb) table.emplace_back(mb, c);
    }
  }
  const int total = static_cast<int>(table.size());
  // (Megatron-Core 0.13+, get_pp_rank_microbatches: no special case for m == pp; a warm-up
  // longer than the passes runs every forward first.)
  const int warm = vp == 1 ? std::min(pp - r - 1, m) : std::min((pp - r - 1) * 2 + (vp - 1) * group, total);
  std::vector<PipelinePass> order;
  order.reserve(2 * static_cast<size_t>(total));
  const auto fwd = [&](int k) { order.push_back({table[k].first, table[k].second, true}); };
  const auto bwd = [&](int k) { order.push_back({table[k].first, vp - 1 - table[k].second, false}); };
  int kf = 0, kb = 0;
  for (; kf < warm; ++kf) fwd(kf);
  while (kf < total) {
    fwd(kf++);
    bwd(kb++);
  }
  while (kb < total) bwd(kb++);
  return order;
}

double pipeline_makespan(int pp, int vp, int m, std::span<const ChunkPass> chunks, int group) {
  assert(pp >= 1 && vp >= 1 && m >= 1);
  if (group <= 0) group = pp;
  assert(chunks.size() == static_cast<size_t>(pp) * static_cast<size_t>(vp));
  const int stages = pp * vp;
  const auto at = [m](int stage, int mb) { return static_cast<size_t>(stage) * static_cast<size_t>(m) + mb; };
  std::vector<double> fwd_done(static_cast<size_t>(stages) * static_cast<size_t>(m), -1.0);
  std::vector<double> bwd_done(fwd_done.size(), -1.0);
  std::vector<std::vector<PipelinePass>> order(static_cast<size_t>(pp));
  size_t left = 0;
  for (int r = 0; r < pp; ++r) {
    order[r] = pipeline_rank_order(pp, vp, m, group, r);
    left += order[r].size();
  }
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::vector<double> free_at(static_cast<size_t>(pp), 0.0);
  while (left > 0) {
    size_t done_now = 0;
    for (int r = 0; r < pp; ++r) {
      const std::vector<PipelinePass>& ord = order[r];
      while (next[r] < ord.size()) {
        const PipelinePass p = ord[next[r]];
        const int s = p.chunk * pp + r;
        const double ready = p.fwd ? (s == 0 ? 0.0 : fwd_done[at(s - 1, p.micro_batch)])
                                   : (s == stages - 1 ? fwd_done[at(s, p.micro_batch)] : bwd_done[at(s + 1, p.micro_batch)]);
        if (ready < 0) break;  // its input is not computed yet: another rank first
        const ChunkPass& t = chunks[static_cast<size_t>(r) * vp + p.chunk];
        const double end = std::max(ready, free_at[r]) + (p.fwd ? t.fwd : t.bwd);
        (p.fwd ? fwd_done : bwd_done)[at(s, p.micro_batch)] = end;
        free_at[r] = end;
        ++next[r];
        ++done_now;
      }
    }
    // Megatron's orders never deadlock; a pass whose input never comes would be a bug here.
    assert(done_now > 0);
    if (done_now == 0) break;
    left -= done_now;
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

double pipeline_makespan_lower_bound(int pp, int vp, int m, std::span<const ChunkPass> chunks) {
  assert(chunks.size() == static_cast<size_t>(pp) * static_cast<size_t>(vp));
  double best = 0, edge = 0;  // edge: chunk 0's forward + backward of the ranks before r
  for (int r = 0; r < pp; ++r) {
    double fb = 0;
    for (int c = 0; c < vp; ++c) {
      const ChunkPass& t = chunks[static_cast<size_t>(r) * vp + c];
      fb += t.fwd + t.bwd;
    }
    best = std::max(best, edge + m * fb);
    const ChunkPass& c0 = chunks[static_cast<size_t>(r) * vp];
    edge += c0.fwd + c0.bwd;
  }
  return best;
}

}  // namespace lcm
