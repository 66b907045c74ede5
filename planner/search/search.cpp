// The search: enumerate layouts, evaluate them on all cores, keep the best, explain the
// rejections. See docs/planner.md for the search space.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <array>
#include <thread>

#include <fmt/format.h>

#include "evaluator_impl.hpp"
#include "space.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::plan {

namespace {

int64_t bits(double x) {
  int64_t v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

// ---------------------------------------------------------------------------------
// Per-thread accumulation.
// ---------------------------------------------------------------------------------

struct Entry {
  Layout layout;
  Metrics metrics;
};

bool rank_less(const Entry& a, const Entry& b) {
  if (a.metrics.step_s != b.metrics.step_s) return a.metrics.step_s < b.metrics.step_s;
  if (a.metrics.peak_bytes != b.metrics.peak_bytes) return a.metrics.peak_bytes < b.metrics.peak_bytes;
  return layout_less(a.layout, b.layout);
}

bool miss_less(const Entry& a, const Entry& b) {
  if (a.metrics.miss_bytes != b.metrics.miss_bytes) return a.metrics.miss_bytes < b.metrics.miss_bytes;
  return rank_less(a, b);
}

// The `cap` best entries (by rank_less) seen so far.
class Best {
 public:
  explicit Best(size_t cap) : cap_(cap) {}
  void offer(const Layout& l, const Metrics& m) {
    if (cap_ == 0) return;
    Entry e{l, m};
    if (heap_.size() < cap_) {
      heap_.push_back(e);
      std::push_heap(heap_.begin(), heap_.end(), rank_less);
    } else if (rank_less(e, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), rank_less);
      heap_.back() = e;
      std::push_heap(heap_.begin(), heap_.end(), rank_less);
    }
  }
  bool would_take(double step_s) const { return heap_.size() < cap_ || step_s <= heap_.front().metrics.step_s; }
  bool full() const { return cap_ == 0 || heap_.size() >= cap_; }
  // Step times above this are never taken again (the largest kept one only decreases).
  double bound() const {
    if (!full()) return Evaluator::Impl::kNoBound;
    return cap_ == 0 ? -Evaluator::Impl::kNoBound : heap_.front().metrics.step_s;
  }
  const std::vector<Entry>& entries() const { return heap_; }

 private:
  size_t cap_;
  std::vector<Entry> heap_;
};

struct Rejections {
  std::map<std::string, Rejection> by_key;

  void add(const std::vector<Problem>& problems, const Layout& l, uint64_t times = 1) {
    std::vector<const Problem*> distinct;
    for (const Problem& p : problems)
      if (std::none_of(distinct.begin(), distinct.end(), [&](const Problem* d) { return d->key == p.key; }))
        distinct.push_back(&p);
    for (const Problem* p : distinct) add_one(*p, distinct.size() == 1, l, times);
  }
  void add_one(const Problem& p, bool sole, const Layout& l, uint64_t times) {
    Rejection& r = by_key[p.key];
    if (r.count == 0 || layout_less(l, r.example)) {
      r.key = p.key;
      r.example = l;
      r.message = p.message;
    }
    r.count += times;
    if (sole) r.sole_count += times;
  }
  void merge(const Rejections& o) {
    for (const auto& [k, r] : o.by_key) {
      Rejection& t = by_key[k];
      if (t.count == 0 || layout_less(r.example, t.example)) {
        t.key = r.key;
        t.example = r.example;
        t.message = r.message;
      }
      t.count += r.count;
      t.sole_count += r.sole_count;
    }
  }
};

struct Accum {
  Accum(const PlanOptions& o)
      : top(static_cast<size_t>(std::max(1, o.top_k)) * 8 + 16),
        oom(static_cast<size_t>(std::max(0, o.why_not)) * 8 + 8),
        tight(static_cast<size_t>(std::max(0, o.why_not)) * 8 + 8) {}
  PlanCounts counts;
  Best top;
  Best oom;
  Best tight;  // the memory band straddles HBM
  bool has_miss = false;
  Entry closest;
  Rejections rejections;
  // The previous rejection's problems and the entries they feed: consecutive invalid
  // layouts mostly break the same rules (no map lookup then).
  std::vector<Problem> last_problems;
  std::vector<Rejection*> last_entries;
  bool last_sole = false;
  std::vector<std::pair<Layout, Outcome>> samples;
  uint64_t seen = 0;
};

void record(Accum& acc, const Layout& l, const ShardingResult& r, uint64_t sample_every) {
  const Outcome::Status st = r.status;
  const Metrics& m = r.metrics;
  const std::vector<Problem>& problems = r.problems;
  const bool timed = r.timed;
  ++acc.counts.enumerated;
  ++acc.counts.evaluated;
  if (timed) ++acc.counts.timed;
  if (st == Outcome::Status::kInvalid) {
    const bool same = problems.size() == acc.last_problems.size() &&
                      std::equal(problems.begin(), problems.end(), acc.last_problems.begin(),
                                 [](const Problem& a, const Problem& b) { return a.key == b.key && a.message == b.message; });
    if (!same) {
      acc.last_problems = problems;
      acc.last_entries.clear();
      for (const Problem& p : problems) {
        Rejection* e = &acc.rejections.by_key[p.key];
        if (std::find(acc.last_entries.begin(), acc.last_entries.end(), e) != acc.last_entries.end()) continue;
        if (e->count == 0) e->key = p.key;
        acc.last_entries.push_back(e);
      }
      acc.last_sole = acc.last_entries.size() == 1;
    }
    for (Rejection* e : acc.last_entries) {
      if (e->count == 0 || layout_less(l, e->example)) {
        e->example = l;
        for (const Problem& p : problems)
          if (p.key == e->key) {
            e->message = p.message;
            break;
          }
      }
      ++e->count;
      if (acc.last_sole) ++e->sole_count;
    }
  } else {
    ++acc.counts.valid;
    if (st == Outcome::Status::kFits) {
      ++acc.counts.fit;
      if (!r.bounded && acc.top.would_take(m.step_s)) acc.top.offer(l, m);
    } else {
      Best& kept = st == Outcome::Status::kTight ? acc.tight : acc.oom;
      if (st == Outcome::Status::kTight) ++acc.counts.tight;
      if (timed && !r.bounded && kept.would_take(m.step_s)) kept.offer(l, m);
      Entry e{l, m};
      if (!acc.has_miss || miss_less(e, acc.closest)) {
        acc.closest = e;
        acc.has_miss = true;
      }
    }
  }
  if (sample_every > 0 && ++acc.seen % sample_every == 0) {
    Outcome o;
    o.status = st;
    o.has_time = timed;
    if (st == Outcome::Status::kInvalid) o.problems = problems;
    else o.metrics = m;
    acc.samples.emplace_back(l, std::move(o));
  }
}

// Every layout of one item (one tp, cp, ep, etp), through one evaluator.
void run_item(const Item& item, const Space& space, double time_miss_bytes, Evaluator::Impl& ev, Accum& acc,
              std::atomic<uint64_t>& done, uint64_t sample_every, bool bound) {
  // Bounds: a fitting layout slower than every kept one cannot enter the decision table;
  // an out-of-memory one slower than every kept near miss cannot enter the why-not table,
  // and (once something fits) not the closest miss's message either.
  bound = bound && sample_every == 0;
  ev.trim();
  uint64_t pending = 0;
  std::array<ShardingResult, 4> results;
  for (const MeshSpec& ms : item.meshes) {
    Layout l = ms.mesh;
    for (int vl : ms.vls) {
      l.vl = vl;
      for (RecomputeGranularity rc : space.recomputes) {
        l.recompute = rc;
        for (int mbs : ms.mbss) {
          l.mbs = mbs;
          for (const auto& [cpc, a2a] : ms.cp_comms) {
            l.cp_comm = cpc;
            l.cp_a2a = a2a;
            for (Dispatcher d : ms.dispatchers) {
              l.dispatcher = d;
              for (int order = 0; order < (ms.two_orders ? 2 : 1); ++order) {
                l.pp_before_dp = order == 1;
                // Innermost: layouts that differ only in their step collectives share the
                // rest of their step time.
                const int n = static_cast<int>(ms.shardings.size());
                const bool any_fits = bound && acc.top.full();
                ev.evaluate_shardings(l, ms.shardings.data(), n, results.data(), time_miss_bytes,
                                      bound ? acc.top.bound() : Evaluator::Impl::kNoBound,
                                      any_fits ? acc.oom.bound() : Evaluator::Impl::kNoBound,
                                      bound ? acc.tight.bound() : Evaluator::Impl::kNoBound);
                for (int i = 0; i < n; ++i) {
                  l.sharding = ms.shardings[static_cast<size_t>(i)];
                  record(acc, l, results[static_cast<size_t>(i)], sample_every);
                }
                pending += static_cast<uint64_t>(n);
                if (pending >= 4096) {
                  done.fetch_add(pending, std::memory_order_relaxed);
                  pending = 0;
                }
              }
            }
          }
        }
      }
    }
  }
  done.fetch_add(pending, std::memory_order_relaxed);
}

// Sorted entries -> groups of bit-identical (step time, peak memory).
std::vector<Ranked> group(std::vector<Entry> entries, size_t max_groups) {
  std::sort(entries.begin(), entries.end(), rank_less);
  std::vector<Ranked> out;
  for (const Entry& e : entries) {
    if (!out.empty() && bits(out.back().metrics.step_s) == bits(e.metrics.step_s) &&
        bits(out.back().metrics.peak_bytes) == bits(e.metrics.peak_bytes)) {
      Ranked& g = out.back();
      ++g.num_equivalent;
      if (g.equivalent.size() < 16) g.equivalent.push_back(e.layout);
      continue;
    }
    if (out.size() == max_groups) break;
    Ranked g;
    g.layout = e.layout;
    g.metrics = e.metrics;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

namespace {

// Evaluates every item on `threads` threads (the calling thread reports progress when
// asked); one accumulator per thread.
std::vector<std::unique_ptr<Accum>> run_threads(const Scenario& base, const Space& space, const PlanOptions& opts,
                                                int threads, uint64_t already_done) {
  const double time_miss_bytes = opts.time_miss_fraction * base.hardware.gpu.hbm_bytes;
  const uint64_t total = already_done + space.leaves;
  std::atomic<uint64_t> done{already_done};
  std::atomic<size_t> next{0};
  std::vector<std::unique_ptr<Accum>> accs;
  for (int t = 0; t < threads; ++t) accs.push_back(std::make_unique<Accum>(opts));
  std::mutex mu;
  std::condition_variable cv;
  int running = threads;
  auto worker = [&](int t) {
    Evaluator::Impl ev(base);
    Accum& acc = *accs[static_cast<size_t>(t)];
    for (;;) {
      if (opts.stop && opts.stop->load(std::memory_order_relaxed)) break;
      const size_t i = next.fetch_add(1);
      if (i >= space.items.size()) break;
      run_item(space.items[i], space, time_miss_bytes, ev, acc, done, opts.sample_every, opts.bound);
    }
    acc.counts.validations += ev.validations;
    acc.counts.schedules_built += ev.schedules_built();
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  if (opts.progress) {
    pool.emplace_back(worker, 0);
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      opts.progress(done.load(std::memory_order_relaxed), total);
      lock.lock();
    }
  } else {
    worker(0);
  }
  for (std::thread& th : pool) th.join();
  if (opts.progress) opts.progress(total, total);
  return accs;
}

// The threads' accumulators into the result (deterministic: every order below is total).
void merge(const Scenario& base, const PlanOptions& opts, const std::vector<std::unique_ptr<Accum>>& accs,
           Rejections rejections, PlanResult& result) {
  std::vector<Entry> top, oom, tight;
  bool has_miss = false;
  Entry closest;
  for (const auto& a : accs) {
    result.counts.enumerated += a->counts.enumerated;
    result.counts.valid += a->counts.valid;
    result.counts.fit += a->counts.fit;
    result.counts.tight += a->counts.tight;
    result.counts.evaluated += a->counts.evaluated;
    result.counts.validations += a->counts.validations;
    result.counts.schedules_built += a->counts.schedules_built;
    result.counts.timed += a->counts.timed;
    top.insert(top.end(), a->top.entries().begin(), a->top.entries().end());
    oom.insert(oom.end(), a->oom.entries().begin(), a->oom.entries().end());
    tight.insert(tight.end(), a->tight.entries().begin(), a->tight.entries().end());
    rejections.merge(a->rejections);
    if (a->has_miss && (!has_miss || miss_less(a->closest, closest))) {
      closest = a->closest;
      has_miss = true;
    }
    result.samples.insert(result.samples.end(), a->samples.begin(), a->samples.end());
  }
  result.ranked = group(std::move(top), static_cast<size_t>(std::max(1, opts.top_k)));
  result.out_of_memory = group(std::move(oom), static_cast<size_t>(std::max(0, opts.why_not)));
  result.tight = group(std::move(tight), static_cast<size_t>(std::max(0, opts.why_not)));
  result.has_closest_miss = has_miss;
  if (has_miss) {
    result.closest_miss = closest.layout;
    result.closest_miss_metrics = metrics_of_estimate(apply_layout(base, closest.layout));
  }
  for (auto& [k, r] : rejections.by_key) result.rejections.push_back(r);
  std::sort(result.rejections.begin(), result.rejections.end(), [](const Rejection& a, const Rejection& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.key < b.key;
  });
  result.ties = rank_ties(result.ranked, base);
  result.near_ties = near_ties(result.ranked, opts.near_tie, base);
}

}  // namespace

PlanResult search(const Scenario& scenario, const PlanOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  // The headroom: every fits verdict (the model's Memory::fits) against the reduced HBM.
  Scenario budgeted = scenario;
  budgeted.hardware.gpu.hbm_bytes = scenario.hardware.gpu.hbm_bytes * (1.0 - opts.constraints.headroom);
  const Scenario& base = opts.constraints.headroom > 0 ? budgeted : scenario;
  PlanResult result;
  result.num_gpus = base.num_gpus;
  result.time_miss_fraction = opts.time_miss_fraction;
  result.near_tie = opts.near_tie;
  result.constraints = opts.constraints;
  result.hbm_budget_bytes = base.hardware.gpu.hbm_bytes;
  const Space space = enumerate_space(base, opts.constraints);
  Rejections rejections;
  for (const auto& [l, problems] : space.rejected_meshes) rejections.add(problems, l);
  const uint64_t rejected_meshes = space.rejected_meshes.size();
  result.counts.enumerated = result.counts.evaluated = rejected_meshes;
  result.counts.validations = space.meshes_checked;
  int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(1, space.items.size()))));
  result.threads = threads;
  const auto accs = run_threads(base, space, opts, threads, rejected_meshes);
  merge(base, opts, accs, std::move(rejections), result);
  result.cancelled = opts.stop && opts.stop->load();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace lcm::plan
