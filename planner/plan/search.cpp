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
#include "lcm/model/io/enums.hpp"

namespace lcm::plan {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

int64_t bits(double x) {
  int64_t v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

// ---------------------------------------------------------------------------------
// The search space.
// ---------------------------------------------------------------------------------

struct PipelineSplit {
  int pp = 1, first = 0, last = 0;
};

int accounted_layers(const Scenario& s) {
  return s.model.num_layers + (s.parallel.account_for_embedding_in_pipeline_split ? 1 : 0) +
         (s.parallel.account_for_loss_in_pipeline_split ? 1 : 0);
}

// Pipeline sizes dividing `ranks`: the even split, and where the layers do not divide
// evenly also uneven first/last stages with equal middle stages (first >= last: the last
// stage carries the output layer).
std::vector<PipelineSplit> pipeline_splits(const Scenario& base, int ranks) {
  const int L = base.model.num_layers, n = accounted_layers(base);
  std::vector<PipelineSplit> out;
  for (int pp : divisors(ranks)) {
    if (pp > n) break;
    out.push_back({pp, 0, 0});
    if (pp == 1 || n % pp == 0) continue;
    std::vector<PipelineSplit> uneven;
    if (pp == 2) {
      uneven.push_back({2, (L + 1) / 2, L / 2});
    } else {
      for (int mid : {L / pp, L / pp + 1}) {
        const int rest = L - (pp - 2) * mid;
        if (mid < 1 || rest < 2) continue;
        uneven.push_back({pp, (rest + 1) / 2, rest / 2});
      }
    }
    for (const PipelineSplit& u : uneven) {
      const bool dup = std::any_of(out.begin(), out.end(), [&](const PipelineSplit& o) {
        return o.pp == u.pp && o.first == u.first && o.last == u.last;
      });
      if (!dup && u.last >= 1) out.push_back(u);
    }
  }
  return out;
}

// The deep knobs of one mesh.
struct MeshSpec {
  Layout mesh;  // tp, cp, pp (+split), ep, etp set; the rest default
  std::vector<int> vls;
  std::vector<int> mbss;
  std::vector<std::pair<CpCommType, int>> cp_comms;
  std::vector<DpSharding> shardings;
  std::vector<Dispatcher> dispatchers;
  bool two_orders = false;
  uint64_t leaves = 0;
};

struct Item {
  std::vector<MeshSpec> meshes;
  uint64_t leaves = 0;
};

struct Space {
  std::vector<RecomputeGranularity> recomputes{RecomputeGranularity::kNone, RecomputeGranularity::kSelective,
                                               RecomputeGranularity::kFull};
  std::vector<DpSharding> shardings{DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads,
                                    DpSharding::kOptimGradsParams};
  std::vector<Dispatcher> dispatchers;
  double time_miss_bytes = 0;  // out-of-memory layouts missing HBM by more are not timed
};

// CP communication: p2p ring, all-gather, all-to-all (Ulysses), and the hierarchical
// a2a+p2p with the all-to-all inside a node (the largest divisor of cp whose ranks share
// a node under tp-cp-... ordering) and the ring across nodes.
std::vector<std::pair<CpCommType, int>> cp_comms(int cp, int tp, int gpus_per_node) {
  if (cp <= 1) return {{CpCommType::kP2P, 0}};
  std::vector<std::pair<CpCommType, int>> out{{CpCommType::kP2P, 0}, {CpCommType::kAllGather, 0}, {CpCommType::kA2A, 0}};
  int inner = 1;
  for (int a : divisors(cp))
    if (a * tp <= gpus_per_node) inner = a;
  if (inner > 1 && inner < cp) out.push_back({CpCommType::kA2AP2P, inner});
  return out;
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
        oom(static_cast<size_t>(std::max(0, o.why_not)) * 8 + 8) {}
  PlanCounts counts;
  Best top;
  Best oom;
  bool has_miss = false;
  Entry closest;
  Rejections rejections;
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
    acc.rejections.add(problems, l);
  } else {
    ++acc.counts.valid;
    if (st == Outcome::Status::kFits) {
      ++acc.counts.fit;
      if (acc.top.would_take(m.step_s)) acc.top.offer(l, m);
    } else {
      if (timed && acc.oom.would_take(m.step_s)) acc.oom.offer(l, m);
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
void run_item(const Item& item, const Space& space, Evaluator::Impl& ev, Accum& acc, std::atomic<uint64_t>& done,
              uint64_t sample_every) {
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
                ev.evaluate_shardings(l, ms.shardings.data(), n, results.data(), space.time_miss_bytes);
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

// The separating cost term of two layouts' metrics (largest absolute difference).
std::pair<std::string, double> separating_term(const Metrics& best, const Metrics& m) {
  const std::pair<const char*, double> terms[] = {
      {"GEMM compute", m.compute[0] - best.compute[0]},
      {"attention compute", m.compute[1] - best.compute[1]},
      {"memory-bound ops", m.compute[2] - best.compute[2]},
      {"exposed TP communication", m.exposed_comm[0] - best.exposed_comm[0]},
      {"exposed CP communication", m.exposed_comm[1] - best.exposed_comm[1]},
      {"exposed EP communication", m.exposed_comm[2] - best.exposed_comm[2]},
      {"exposed PP communication", m.exposed_comm[3] - best.exposed_comm[3]},
      {"exposed DP communication", m.exposed_comm[4] - best.exposed_comm[4]},
      {"pipeline bubble", m.bubble - best.bubble},
      {"optimizer step", m.optimizer - best.optimizer},
  };
  std::pair<std::string, double> out{"", 0.0};
  for (const auto& [name, d] : terms)
    if (std::fabs(d) > std::fabs(out.second)) out = {name, d};
  return out;
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
    out.push_back(Ranked{e.layout, e.metrics, {}, 0});
  }
  return out;
}

}  // namespace

PlanResult search(const Scenario& base_in, const PlanOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  Scenario base = base_in;
  const int N = base.num_gpus;
  const bool moe = base.model.num_experts > 0;
  PlanResult result;
  result.num_gpus = N;

  Space space;
  if (moe) space.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kFlex};
  else space.dispatchers = {base.model.moe_token_dispatcher_type};
  space.time_miss_bytes = opts.time_miss_fraction * base.hardware.gpu.hbm_bytes;

  // Meshes, grouped by (tp, cp, ep, etp); each checked once with the most permissive deep
  // knobs (no interleaving, micro-batch 1, no recompute, p2p, distributed optimizer):
  // a mesh those knobs cannot make valid counts as one rejected candidate.
  Rejections mesh_rejections;
  uint64_t mesh_rejected = 0, mesh_validations = 0;
  std::vector<Item> items;
  const int gpn = std::max(1, base.hardware.interconnect.gpus_per_node);
  std::vector<int> tps;
  for (int t : divisors(gpn))
    if (N > 0 && N % t == 0) tps.push_back(t);
  const std::vector<int> eps = moe ? divisors(base.model.num_experts) : std::vector<int>{1};
  for (int tp : tps) {
    for (int cp : divisors(N / tp)) {
      const std::vector<PipelineSplit> splits = pipeline_splits(base, N / (tp * cp));
      for (int ep : eps) {
        std::vector<int> etps = moe ? std::vector<int>{1} : std::vector<int>{tp};
        if (moe && tp > 1) etps.push_back(tp);
        for (int etp : etps) {
          Item item;
          for (const PipelineSplit& sp : splits) {
            MeshSpec ms;
            Layout& l = ms.mesh;
            l.tp = tp;
            l.cp = cp;
            l.pp = sp.pp;
            l.first_stage_layers = sp.first;
            l.last_stage_layers = sp.last;
            l.ep = ep;
            l.etp = etp;
            l.sharding = DpSharding::kOptim;
            l.dispatcher = space.dispatchers.front();
            const std::vector<Problem> problems = validate_scenario(apply_layout(base, l));
            ++mesh_validations;
            if (!problems.empty()) {
              mesh_rejections.add(problems, l);
              ++mesh_rejected;
              continue;
            }
            const int dp = N / (tp * cp * sp.pp);
            const int edp = N / (etp * ep * sp.pp);
            ms.vls = {0};
            if (sp.pp > 1 && sp.first == 0 && sp.last == 0) {
              const int per_rank = accounted_layers(base) / sp.pp;
              for (int d : divisors(per_rank))
                if (d < per_rank) ms.vls.push_back(d);
            }
            const int per_dp = base.training.global_batch_size / dp;
            for (int b = 1; b <= per_dp; b *= 2)
              if (per_dp % b == 0) ms.mbss.push_back(b);
            ms.two_orders = sp.pp > 1 && (dp > 1 || edp > 1);
            ms.cp_comms = cp_comms(cp, tp, gpn);
            // Without a data-parallel group the sharding strategies are the same layout;
            // without expert communication (ep = etp = 1) so are the dispatchers.
            ms.shardings = dp * cp > 1 || (moe && edp > 1) ? space.shardings : std::vector<DpSharding>{DpSharding::kNoShard};
            ms.dispatchers = ep * etp > 1 ? space.dispatchers : std::vector<Dispatcher>{space.dispatchers.front()};
            ms.leaves = static_cast<uint64_t>(ms.vls.size()) * space.recomputes.size() * ms.mbss.size() *
                        ms.cp_comms.size() * ms.shardings.size() * ms.dispatchers.size() * (ms.two_orders ? 2 : 1);
            item.leaves += ms.leaves;
            item.meshes.push_back(std::move(ms));
          }
          if (!item.meshes.empty()) items.push_back(std::move(item));
        }
      }
    }
  }
  // Largest items first: the threads finish together.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.leaves > b.leaves; });
  uint64_t total = mesh_rejected;
  for (const Item& it : items) total += it.leaves;

  int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(1, items.size()))));
  result.threads = threads;
  std::atomic<uint64_t> done{mesh_rejected};
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
      const size_t i = next.fetch_add(1);
      if (i >= items.size()) break;
      run_item(items[i], space, ev, acc, done, opts.sample_every);
    }
    acc.counts.validations += ev.validations;
    acc.counts.schedules_built += ev.schedules_built;
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  if (opts.progress) {
    // The calling thread reports progress; worker 0 runs on a thread of its own.
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

  // Merge (deterministic: every order below is total).
  Rejections rejections = mesh_rejections;
  std::vector<Entry> top, oom;
  bool has_miss = false;
  Entry closest;
  result.counts.enumerated = mesh_rejected;
  result.counts.evaluated = mesh_rejected;
  result.counts.validations = mesh_validations;
  for (const auto& a : accs) {
    result.counts.enumerated += a->counts.enumerated;
    result.counts.valid += a->counts.valid;
    result.counts.fit += a->counts.fit;
    result.counts.evaluated += a->counts.evaluated;
    result.counts.validations += a->counts.validations;
    result.counts.schedules_built += a->counts.schedules_built;
    result.counts.timed += a->counts.timed;
    top.insert(top.end(), a->top.entries().begin(), a->top.entries().end());
    oom.insert(oom.end(), a->oom.entries().begin(), a->oom.entries().end());
    rejections.merge(a->rejections);
    if (a->has_miss && (!has_miss || miss_less(a->closest, closest))) {
      closest = a->closest;
      has_miss = true;
    }
    result.samples.insert(result.samples.end(), a->samples.begin(), a->samples.end());
  }
  result.ranked = group(std::move(top), static_cast<size_t>(std::max(1, opts.top_k)));
  result.out_of_memory = group(std::move(oom), static_cast<size_t>(std::max(0, opts.why_not)));
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
  if (!result.ranked.empty()) {
    const Ranked& best = result.ranked.front();
    for (size_t i = 1; i < result.ranked.size(); ++i) {
      const Ranked& g = result.ranked[i];
      const double rel = g.metrics.step_s / best.metrics.step_s - 1.0;
      if (rel > opts.near_tie) break;
      NearTie nt;
      nt.rank = static_cast<int>(i) + 1;
      nt.relative = rel;
      nt.differences = layout_differences(best.layout, g.layout, base);
      const auto [term, delta] = separating_term(best.metrics, g.metrics);
      nt.term = term;
      nt.term_delta_s = delta;
      nt.memory_delta_bytes = g.metrics.peak_bytes - best.metrics.peak_bytes;
      result.near_ties.push_back(std::move(nt));
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opts.progress) opts.progress(total, total);
  return result;
}

const Rejection* tightest_constraint(const PlanResult& r) {
  const Rejection* best = nullptr;
  for (const Rejection& x : r.rejections)
    if (!best || x.sole_count > best->sole_count || (x.sole_count == best->sole_count && x.count > best->count))
      best = &x;
  return best;
}

}  // namespace lcm::plan
