// `lcm-exec bench moe`: one MoE layer, forward and backward, per (capacity factor, routing
// skew) point; per-phase CUDA-event times under the model's op names, the dropped-token rate
// and the per-expert loads (moe.hpp, moe_layer.hpp, docs/executor.md). Per point: setup
// (problem from the typed --moe options, buffer sets, data), timing (warm-up, timed loop),
// check (against the host reference), routing statistics, records, trace and print.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"
#include "kernels/moe_layer.hpp"
#include "lcm/executor/results.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;
constexpr int64_t kFullCheckMaxTokens = 512;

// What every point shares: the EP group and the stream.
struct MoeRun {
  int ep = 1;
  int ep_rank = 0;
  std::vector<int> ep_ranks;
  std::vector<int> peers;
  Comms* comms = nullptr;
  ncclComm_t ep_comm = nullptr;
  cudaStream_t stream = nullptr;
  double timeout_s = 0;

  // Drains the stream (through the EP communicator with more than one rank).
  void wait(const std::string& what, const std::function<std::string()>& detail = {}) const {
    wait_group_stream(comms, stream, timeout_s, what, detail);
  }
};

// One point's state through its phases.
struct MoePointRun {
  MoeProblem p;
  std::string pt;          // MoeProblem::point_text()
  std::string key_prefix;  // of its records
  std::string op;
  int sets = 1;
  bool full = false;       // full check (else sampled tokens)
};

struct MoeTiming {
  int warm_done = 0;
  int reps = 0;
  double base_us = 0;
  Clocks clocks;  // right after the timed loop
  std::vector<std::unique_ptr<EventSeries>> ev;  // one per MoePhase
  std::unique_ptr<EventSeries> evf, evb;         // the whole forward and backward pass
};

// Loads and drops: the last repetition's routing of rank 0's group, and every rank's.
struct MoeRouting {
  std::vector<int64_t> loads;  // rank 0: assignments per expert, before drops
  int64_t total = 0, drop = 0;
  std::vector<double> drop_rates, recv_rows;  // per rank
  std::vector<double> summed;                 // loads summed over ranks
  double mean_drop = 0;
  double expected = 0;  // the model's expected drop fraction
  std::string loads_file;
  double drop_fraction() const { return total > 0 ? static_cast<double>(drop) / total : 0.0; }
};

// The point's records: one per phase (the all-to-all phases only with ep > 1), then the
// whole passes and the sums of their phases.
struct MoeRecords {
  std::vector<PointRecord> phases;
  PointRecord rf, rb;    // first to last event of the forward, backward pass
  PointRecord rs1, rs2;  // sums of the forward, backward phase times
  PointRecord rt;        // fwd+bwd (last: its key marks the point finished for --resume)
};

// Setup of the run: the EP communicator, the stream.
MoeRun setup_run(RunContext& ctx) {
  const Options& o = ctx.opt;
  MoeRun run;
  run.ep = ctx.layout.mesh.ep;
  run.timeout_s = o.timeout_s;
  GroupComm gc = open_group(ctx, Group::kEp);
  run.comms = gc.comms;
  run.ep_comm = gc.comm;
  run.ep_rank = gc.rank;
  run.ep_ranks = std::move(gc.ranks);
  run.peers = std::move(gc.peers);
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&run.stream, cudaStreamNonBlocking));
  return run;
}

// The problem of one (capacity factor, skew) point from the typed --moe options.
MoeProblem problem_of(const MoeOptions& m, int ep, double cf, const RoutingSkew& skew) {
  MoeProblem p;
  p.tokens = m.tokens;
  p.hidden = m.hidden;
  p.ffn = m.ffn;
  p.experts = m.experts;
  p.topk = m.topk;
  p.ep = ep;
  p.groups = m.groups;
  p.topk_groups = m.topk_groups;
  p.score = m.score;
  p.policy = m.drop_policy;
  p.cf = cf;
  p.skew = skew;
  p.validate();
  return p;
}

// Setup of a point: buffer sets (fewer if memory is short) and data. False, with the reason
// printed, when some rank has not the memory.
bool setup_point(RunContext& ctx, MoeLayer& layer, MoePointRun& pt) {
  const MoeProblem& p = pt.p;
  size_t free_b = 0, total_b = 0;
  LCM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  int sets = rotation_sets(p.set_bytes(), ctx.rotate_bytes(), 8);
  while (sets > 1 && MoeLayer::device_bytes(p, sets) > 0.85 * static_cast<double>(free_b)) --sets;
  pt.sets = sets;
  const bool fits = MoeLayer::device_bytes(p, sets) <= 0.9 * static_cast<double>(free_b);
  const int fit_all = static_cast<int>(allreduce_sum(fits ? 1 : 0));
  if (fit_all != ctx.world) {
    if (ctx.rank == 0)
      std::printf("  %s  (skipped: needs %.1f GiB per rank, %.1f GiB free)\n", pt.pt.c_str(),
                  MoeLayer::device_bytes(p, sets) / 1073741824.0, static_cast<double>(free_b) / 1073741824.0);
    return false;
  }
  layer.setup(p, sets, ctx.opt.seed);
  return true;
}

// Timing: the warm-up (forward + backward, the ranks agreeing, until `warmup` repetitions
// and warmup_s have passed; its last repetition sizes the timed loop under --point-ms, one
// count for every rank), outputs poisoned, then the timed loop: per repetition the forward
// and the backward pass, an event pair around each pass and each phase.
MoeTiming time_point(RunContext& ctx, const MoeRun& run, MoeLayer& layer, const MoePointRun& pt) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kMoe);
  const std::string& op = pt.op;
  const int sets = pt.sets;
  const cudaStream_t stream = run.stream;
  MoeTiming t;
  const int warmup = ctx.warmup(fam.default_warmup);
  const Warmup w = warm_up_together(warmup, ctx.warmup_seconds(fam.default_warmup_s), [&](int i) {
    layer.forward(i % sets);
    layer.backward(i % sets);
    run.wait(op + " (warm-up)");
  });
  t.warm_done = w.done;
  const int reps = reps_for_point(ctx.iters(fam.default_iters), o.point_ms, w.rep_s);
  t.reps = static_cast<int>(allreduce_sum(reps) / ctx.world);  // one count for every rank
  t.reps = std::max(t.reps, sets);
  layer.poison_outputs();

  for (int i = 0; i < kMoePhases; ++i) t.ev.push_back(std::make_unique<EventSeries>(t.reps));
  t.evf = std::make_unique<EventSeries>(t.reps);
  t.evb = std::make_unique<EventSeries>(t.reps);
  EventSeries& evf = *t.evf;
  EventSeries& evb = *t.evb;
  ArrivalProbe probe(run.peers, 200 + ctx.point_index % 30000);
  probe.post();
  LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  ctx.inject_before_timed_loop(op);
  probe.arrive();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  t.base_us = ctx.now_us();
  for (auto& e : t.ev) e->record_base(stream);
  evf.record_base(stream);
  int rep = 0;
  const PhaseHook hook = [&](MoePhase ph, bool start) {
    EventSeries& e = *t.ev[static_cast<size_t>(ph)];
    if (start) e.record_start(rep, stream);
    else e.record_end(rep, stream);
  };
  for (rep = 0; rep < t.reps; ++rep) {
    evf.record_start(rep, stream);
    layer.forward(rep % sets, hook);
    evf.record_end(rep, stream);
    evb.record_start(rep, stream);
    layer.backward(rep % sets, hook);
    evb.record_end(rep, stream);
  }
  const std::string what = op + " [MoE layer, ep group ranks " + ranks_text(run.ep_ranks) + "]";
  run.wait(what, [&] {
    std::string d = std::to_string(evb.completed()) + " of " + std::to_string(t.reps) + " repetitions finished";
    const std::string miss = missing_ranks_text(probe);
    if (!miss.empty()) d += "; " + miss;
    return d;
  });
  probe.finish();
  t.clocks = query_clocks(ctx.device.pci_bus_id);
  return t;
}

// Check: the last repetition's buffer set against the host reference (MoeLayer::verify, the
// one comparer).
MoeCheck check_point(RunContext& ctx, MoeLayer& layer, const MoePointRun& pt, const MoeTiming& t) {
  if (ctx.inject_corrupt()) layer.corrupt_output(0, 0, 1.0e4f);
  const int last = (t.reps - 1) % pt.sets;
  return layer.verify(last, pt.full, ctx.opt.seed + static_cast<uint64_t>(ctx.point_index));
}

// Loads and drops of the last repetition (every rank takes part: allgathers, an allreduce).
MoeRouting routing_of(const MoeLayer& layer, const MoeProblem& p) {
  MoeRouting r;
  const std::vector<int32_t>& counts = layer.counts();
  const std::vector<int32_t>& kept = layer.kept();
  r.loads.assign(counts.begin(), counts.end());
  for (size_t e = 0; e < counts.size(); ++e) {
    r.total += counts[e];
    r.drop += counts[e] - kept[e];
  }
  r.drop_rates = allgather_double(r.drop_fraction());
  r.recv_rows = allgather_double(static_cast<double>(layer.received_rows()));
  std::vector<double> all_loads(counts.size());
  for (size_t e = 0; e < counts.size(); ++e) all_loads[e] = static_cast<double>(counts[e]);
  r.summed.resize(all_loads.size());
  LCM_MPI_CHECK(MPI_Allreduce(all_loads.data(), r.summed.data(), static_cast<int>(all_loads.size()), MPI_DOUBLE,
                              MPI_SUM, MPI_COMM_WORLD));
  for (double d : r.drop_rates) r.mean_drop += d / static_cast<double>(r.drop_rates.size());
  r.expected = expected_drop_fraction(p);
  return r;
}

// Rank 0, with --out: rank 0's loads in the format `lcm capacity --loads` reads. Returns the
// file name ("" when none is written).
std::string write_loads_file(const RunContext& ctx, const MoePointRun& pt, const MoeRouting& r) {
  const Options& o = ctx.opt;
  std::string loads_file;
  if (ctx.rank == 0 && !o.out_dir.empty()) {
    loads_file = "loads_" + pt.pt + ".txt";
    for (char& c : loads_file)
      if (c == '/' || c == ':') c = '_';
    write_file_atomic(o.out_dir + "/" + loads_file,
                      format_loads(r.loads, "lcm-exec bench moe " + pt.pt + ", rank 0: assignments per expert of one "
                                            "routing group of " + std::to_string(pt.p.tokens) + " tokens x top-" +
                                            std::to_string(pt.p.topk) + " (before drops), last repetition\n"
                                            "read with: lcm capacity --loads FILE"));
  }
  return loads_file;
}

MoeRecords make_records(const MoeRun& run, const MoePointRun& pt, const MoeTiming& t, const MoeRouting& r,
                        const MoeCheck& chk) {
  const MoeProblem& p = pt.p;
  const int64_t wrong = allreduce_sum(chk.wrong());
  const int64_t checked = allreduce_sum(chk.checked());
  const nlohmann::json moe_json = {
      {"tokens", p.tokens}, {"hidden", p.hidden}, {"ffn", p.ffn}, {"experts", p.experts}, {"topk", p.topk},
      {"ep", p.ep}, {"local_experts", p.local_experts()}, {"groups", p.groups}, {"topk_groups", p.topk_groups},
      {"score", std::string(to_string(p.score))}, {"capacity_factor", p.cf > 0 ? nlohmann::json(p.cf) : nlohmann::json("none")},
      {"capacity", p.capacity()}, {"drop_policy", to_string(p.policy)}, {"skew", p.skew.text()},
      {"activation", "swiglu"}, {"dtype", "bf16"}};
  const nlohmann::json routing_json = {
      {"dropped_fraction_rank0", r.drop_fraction()},
      {"dropped_fraction_per_rank", r.drop_rates},
      {"dropped_fraction_mean", r.mean_drop},
      {"expected_dropped_fraction_model", std::isnan(r.expected) ? nlohmann::json(nullptr) : nlohmann::json(r.expected)},
      {"loads_rank0", r.loads},
      {"loads_all_ranks", r.summed},
      {"received_rows_per_rank", r.recv_rows},
      {"loads_file", r.loads_file}};
  const nlohmann::json check_json = to_json(chk);
  const auto record = [&](const std::string& name, const TimeStats& ts, bool comm) {
    PointRecord rec;
    rec.key = pt.key_prefix + name;
    rec.family = "moe";
    rec.op = name;
    rec.dtype = "bf16";
    rec.shape = p.config_text();
    rec.label = pt.pt;
    rec.group = comm ? "ep" : "";
    rec.group_size = run.ep;
    rec.warmup = t.warm_done;
    rec.reps = t.reps;
    rec.buffers = pt.sets;
    rec.time = ts;
    rec.per_rank_median_us = allgather_double(ts.median_us);
    rec.wrong = wrong;
    rec.checked = checked;
    rec.correct = wrong == 0;
    rec.extra = {{"moe", moe_json}, {"routing", routing_json}, {"check_mode", pt.full ? "full" : "sampled"},
                 {"check", check_json}, {"clocks_after", to_json(t.clocks)}, {"ep_ranks", run.ep_ranks}};
    return rec;
  };
  MoeRecords out;
  std::vector<double> fwd_sum(static_cast<size_t>(t.reps), 0.0), bwd_sum(static_cast<size_t>(t.reps), 0.0);
  for (int i = 0; i < kMoePhases; ++i) {
    const MoePhase ph = static_cast<MoePhase>(i);
    if (is_comm(ph) && run.ep == 1) continue;
    const std::vector<double> d = t.ev[static_cast<size_t>(i)]->durations_us();
    for (size_t k = 0; k < d.size(); ++k) (is_forward(ph) ? fwd_sum : bwd_sum)[k] += d[k];
    out.phases.push_back(record(op_name(ph), compute_stats(d), is_comm(ph)));
  }
  const std::vector<double> df = t.evf->durations_us(), db = t.evb->durations_us();
  const std::vector<double> dt = sum_series(df, db);
  out.rf = record("L.moe.layer.fwd", compute_stats(df), false);
  out.rb = record("L.moe.layer.bwd", compute_stats(db), false);
  out.rs1 = record("L.moe.phases.fwd", compute_stats(fwd_sum), false);
  out.rs2 = record("L.moe.phases.bwd", compute_stats(bwd_sum), false);
  out.rt = record("L.moe.layer.fwd+bwd", compute_stats(dt), false);
  for (PointRecord* rec : {&out.rf, &out.rb, &out.rs1, &out.rs2, &out.rt})
    rec->extra["note"] = rec->op.find("phases") != std::string::npos
                             ? "sum of the per-phase event times (host gaps excluded)"
                             : "first to last event of the pass, host gaps (the dispatch's host sync) included";
  return out;
}

// Trace: the timed repetitions of every phase recorded.
void trace_point(RunContext& ctx, const MoeRun& run, const MoePointRun& pt, const MoeTiming& t) {
  for (int i = 0; i < kMoePhases; ++i) {
    const MoePhase ph = static_cast<MoePhase>(i);
    if (is_comm(ph) && run.ep == 1) continue;
    trace_repetitions(ctx, op_name(ph), is_comm(ph) ? "nccl" : "moe", kComputeTid, t.base_us,
                      *t.ev[static_cast<size_t>(i)], {{"point", pt.pt}});
  }
}

// Print (rank 0): the header once; per point a header line, one row per phase, the passes
// and their phase sums, and the check.
void print_header(const RunContext& ctx, const MoeRun& run) {
  const BenchFamily& fam = bench_family(Family::kMoe);
  std::printf("# lcm-exec bench moe: %d rank(s), EP group of %d [ranks %s], %s, bf16, SwiGLU experts, warm-up >= %d "
              "reps and >= %.0f ms\n",
              ctx.world, run.ep, ranks_text(run.ep_ranks).c_str(), ctx.device.name.c_str(),
              ctx.warmup(fam.default_warmup), ctx.warmup_seconds(fam.default_warmup_s) * 1000);
  std::fflush(stdout);
}

void print_point(const MoePointRun& pt, const MoeTiming& t, const MoeRouting& r, const MoeRecords& recs,
                 const MoeCheck& chk) {
  const MoeProblem& p = pt.p;
  std::printf("# %s: %d buffer set(s), %d reps, capacity %lld, dropped %.4f (rank 0; mean over ranks %.4f; model "
              "expects %.4f), check %s\n#   %-32s %10s %10s %10s\n",
              pt.pt.c_str(), pt.sets, t.reps, static_cast<long long>(p.capacity()), r.drop_fraction(), r.mean_drop,
              r.expected, pt.full ? "full" : "sampled", "op", "median_us", "p10_us", "p90_us");
  const auto row = [](const PointRecord& rec) {
    std::printf("    %-32s %10.1f %10.1f %10.1f\n", rec.op.c_str(), rec.time.median_us, rec.time.p10_us,
                rec.time.p90_us);
  };
  for (const PointRecord& rec : recs.phases) row(rec);
  for (const PointRecord* rec : {&recs.rs1, &recs.rf, &recs.rs2, &recs.rb, &recs.rt}) row(*rec);
  const int64_t wrong = recs.rt.wrong;
  std::printf("#   check: %s (%lld wrong of %lld checked)\n", wrong == 0 ? "OK" : "WRONG", static_cast<long long>(wrong),
              static_cast<long long>(recs.rt.checked));
  if (wrong != 0) std::printf("#   %s\n", to_json(chk).dump().c_str());
  std::fflush(stdout);
}

}  // namespace

void run_moe_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const MoeRun run = setup_run(ctx);
  if (ctx.trace) ctx.trace->thread_name(kComputeTid, "compute stream (MoE layer; NCCL ep all-to-all on it)");
  auto layer_owner =
      std::make_unique<MoeLayer>(run.stream, run.comms, run.ep_comm, run.ep_rank, ctx.rank, o.timeout_s);
  MoeLayer& layer = *layer_owner;

  if (ctx.rank == 0) print_header(ctx, run);
  for (double cf : o.moe.capacity_factors) {
    for (const RoutingSkew& skew : o.moe.skews) {
      MoePointRun pt;
      pt.p = problem_of(o.moe, run.ep, cf, skew);
      pt.pt = pt.p.point_text();
      pt.key_prefix = "moe/" + pt.pt + "/";
      if (ctx.skip.count(pt.key_prefix + "L.moe.layer.fwd+bwd")) {
        if (ctx.rank == 0) std::printf("  %s  (resumed: already measured)\n", pt.pt.c_str());
        continue;
      }
      pt.op = "bench.moe." + pt.pt;
      pt.full = check_full(o.check, pt.p.tokens, kFullCheckMaxTokens);
      if (!setup_point(ctx, layer, pt)) continue;

      const MoeTiming t = time_point(ctx, run, layer, pt);
      const MoeCheck chk = check_point(ctx, layer, pt, t);
      MoeRouting routing = routing_of(layer, pt.p);
      routing.loads_file = write_loads_file(ctx, pt, routing);
      MoeRecords recs = make_records(run, pt, t, routing, chk);
      trace_point(ctx, run, pt, t);
      if (ctx.rank == 0) print_point(pt, t, routing, recs, chk);
      for (const PointRecord& rec : recs.phases)
        if (ctx.sink) ctx.sink->add(rec);
      for (const PointRecord* rec : {&recs.rf, &recs.rb, &recs.rs1, &recs.rs2})
        if (ctx.sink) ctx.sink->add(*rec);
      ctx.finish_point(recs.rt);  // last: its key marks the point finished for --resume
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(run.stream));
  layer_owner.reset();
  cudaStreamDestroy(run.stream);
}

}  // namespace lcm::exec
