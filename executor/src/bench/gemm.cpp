// `lcm-exec bench gemm`: cuBLASLt GEMMs over --shapes and --dtype (see gemm.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/gemm.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;

// Times each heuristic candidate briefly (3 warm-up + 10 timed) and returns the fastest.
int pick_fastest_algo(GemmRunner& r, cudaStream_t s, double timeout_s, const std::string& op) {
  int best = 0;
  double best_us = 1e300;
  for (int a = 0; a < r.num_algos(); ++a) {
    r.select_algo(a);
    for (int i = 0; i < 3; ++i) r.enqueue(i % r.sets());
    EventSeries ev(10);
    for (int i = 0; i < 10; ++i) {
      ev.record_start(i, s);
      r.enqueue(i % r.sets());
      ev.record_end(i, s);
    }
    wait_stream(s, timeout_s, op + " (algorithm search)");
    const double us = compute_stats(ev.durations_us()).median_us;
    if (us < best_us) {
      best_us = us;
      best = a;
    }
  }
  return best;
}

// One point's state through its four phases.
struct GemmPointRun {
  GemmProblem p;
  const GemmPoint* point = nullptr;
  std::string shape;  // "MxNxK"
  std::string key, op;
  int sets = 1;
};

struct GemmTiming {
  int warm_done = 0;
  int reps = 0;
  double base_us = 0;
  Clocks clocks;  // right after the timed loop
};

// Setup: buffers, data and the algorithm. False, with the reason printed, when some rank
// cannot run the point (the run goes on with the next one).
bool setup_point(RunContext& ctx, GemmRunner& runner, cudaStream_t stream, GemmPointRun& pt) {
  const Options& o = ctx.opt;
  pt.sets = rotation_sets(pt.p.set_bytes(), ctx.rotate_bytes(), 64);
  runner.setup(pt.p, pt.sets, o.seed + static_cast<uint64_t>(ctx.point_index), o.algos);
  const int supported = static_cast<int>(allreduce_sum(runner.supported() ? 1 : 0));
  if (supported != ctx.world) {
    if (ctx.rank == 0)
      std::printf("  %-30s %-9s %22s  (skipped: %s)\n", pt.point->label.c_str(), to_string(pt.p.dtype), pt.shape.c_str(),
                  runner.supported() ? "not supported on another rank" : runner.unsupported_reason().c_str());
    return false;
  }
  if (o.algos > 1) runner.select_algo(pick_fastest_algo(runner, stream, o.timeout_s, pt.op));
  return true;
}

// Timing: `warmup` repetitions, repeated until warmup_s has passed (the clocks settle where
// the power limit holds them for a sustained run), then the timed loop, one event pair per
// repetition (ev holds one per repetition), rotating through the buffer sets.
GemmTiming time_point(RunContext& ctx, GemmRunner& runner, cudaStream_t stream, const GemmPointRun& pt, int reps,
                      EventSeries& ev) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kGemm);
  const int warmup = ctx.warmup(fam.default_warmup);
  const double warmup_s = ctx.warmup_seconds(fam.default_warmup_s);
  GemmTiming t;
  t.reps = reps;
  t.warm_done = warm_up(
      warmup, warmup_s, [&](int i) { runner.enqueue(i % pt.sets); },
      [&] { wait_stream(stream, o.timeout_s, pt.op + " (warm-up)"); }).done;
  ctx.inject_before_timed_loop(pt.op);
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  t.base_us = ctx.now_us();
  ev.record_base(stream);
  for (int i = 0; i < t.reps; ++i) {
    ev.record_start(i, stream);
    runner.enqueue(i % pt.sets);
    ev.record_end(i, stream);
  }
  wait_stream(stream, o.timeout_s, pt.op);
  t.clocks = query_clocks(ctx.device.pci_bus_id);
  return t;
}

// Check: every buffer set the timed loop used, against the CPU reference.
Comparison check_point(RunContext& ctx, GemmRunner& runner, const GemmPointRun& pt, int reps, int64_t& failures) {
  if (ctx.inject_corrupt()) runner.corrupt_output(0, 0, 0, 1.0e4f);
  Comparison total;
  failures = 0;
  for (int s = 0; s < std::min(pt.sets, reps); ++s) {
    const Comparison c = runner.verify(s, ctx.opt.seed + static_cast<uint64_t>(s));
    failures += c.failures();
    total.merge(c);
  }
  return total;
}

PointRecord make_record(const GemmRunner& runner, const GemmPointRun& pt, const GemmTiming& t, const EventSeries& ev,
                        const Comparison& total, int64_t failures) {
  const TimeStats mine = compute_stats(ev.durations_us());
  PointRecord rec;
  rec.key = pt.key;
  rec.family = "gemm";
  rec.op = pt.op;
  rec.dtype = to_string(pt.p.dtype);
  rec.shape = pt.shape;
  rec.label = pt.point->label;
  rec.size_bytes = static_cast<int64_t>(pt.p.set_bytes());
  rec.warmup = t.warm_done;
  rec.reps = t.reps;
  rec.buffers = pt.sets;
  rec.time = mine;
  rec.tflops = pt.p.flops() / (mine.median_us * 1e-6) / 1e12;
  rec.per_rank_median_us = allgather_double(mine.median_us);
  rec.wrong = allreduce_sum(failures);
  rec.checked = allreduce_sum(total.checked);
  rec.correct = rec.wrong == 0;
  rec.extra = {{"algo", runner.algo_json(runner.selected_algo())},
               {"algos_considered", runner.num_algos()},
               {"leading_dims", {{"a", pt.p.lda()}, {"b", pt.p.ldb()}, {"d", pt.p.ldd()}}},
               {"max_err_over_tolerance", total.max_err_ratio},
               {"rel_l2_error", total.rel_l2},
               {"check", to_json(total)},
               {"clocks_after", to_json(t.clocks)},
               {"layout", pt.p.dtype == GemmDType::kBf16       ? "NN (torch.matmul)"
                     : pt.p.dtype == GemmDType::kFp8E4M3 ? "TN (torch._scaled_mm)"
                                                         : "TN, 1x128 activation / 128x128 weight block scales"}};
  return rec;
}

// Print: the header once, then one row per point (rank 0).
void print_header(const RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kGemm);
  std::printf("# lcm-exec bench gemm: %d rank(s), %s, cuBLASLt heuristic (%d candidate(s)), workspace %lld MiB, "
              "warm-up >= %d reps and >= %.0f ms\n",
              ctx.world, ctx.device.name.c_str(), o.algos, static_cast<long long>(o.workspace_bytes >> 20),
              ctx.warmup(fam.default_warmup), ctx.warmup_seconds(fam.default_warmup_s) * 1000);
  std::printf("# %-30s %-9s %22s %5s %4s %10s %10s %10s %9s %7s %s\n", "label", "dtype", "MxNxK", "reps", "bufs",
              "median_us", "min_us", "max_us", "TFLOP/s", "#wrong", "check");
}

void print_row(const PointRecord& rec) {
  std::printf("  %-30s %-9s %22s %5d %4d %10.1f %10.1f %10.1f %9.1f %7lld %s\n", rec.label.c_str(), rec.dtype.c_str(),
              rec.shape.c_str(), rec.reps, rec.buffers, rec.time.median_us, rec.time.min_us, rec.time.max_us, rec.tflops,
              static_cast<long long>(rec.wrong), rec.correct ? "OK" : "WRONG");
}

}  // namespace

void run_gemm_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (ctx.trace) ctx.trace->thread_name(kComputeTid, "compute stream (cuBLASLt)");
  GemmRunner runner(stream, o.workspace_bytes);
  if (ctx.rank == 0) print_header(ctx);
  for (GemmDType dt : o.gemm_dtypes) {
    for (const GemmPoint& point : o.gemm_points) {
      GemmPointRun pt;
      pt.p = GemmProblem{point.shape.m, point.shape.n, point.shape.k, dt};
      pt.point = &point;
      pt.shape = point.text();
      pt.key = std::string("gemm/") + to_string(dt) + "/" + pt.shape;
      pt.op = "bench.gemm." + pt.shape;
      if (ctx.skip.count(pt.key)) {
        if (ctx.rank == 0)
          std::printf("  %-30s %-9s %22s  (resumed: already measured)\n", point.label.c_str(), to_string(dt), pt.shape.c_str());
        continue;
      }
      if (!setup_point(ctx, runner, stream, pt)) continue;
      const int reps = std::max(ctx.iters(bench_family(Family::kGemm).default_iters), pt.sets);
      EventSeries ev(reps);
      const GemmTiming t = time_point(ctx, runner, stream, pt, reps, ev);
      int64_t failures = 0;
      const Comparison total = check_point(ctx, runner, pt, t.reps, failures);
      PointRecord rec = make_record(runner, pt, t, ev, total, failures);
      trace_repetitions(ctx, pt.op, "gemm", kComputeTid, t.base_us, ev,
                        {{"dtype", rec.dtype}, {"m", pt.p.m}, {"n", pt.p.n}, {"k", pt.p.k}, {"label", point.label}});
      if (ctx.rank == 0) print_row(rec);
      std::fflush(stdout);
      ctx.finish_point(rec);
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
