// `lcm-exec bench gemm`: cuBLASLt GEMMs over --shapes and --dtype (see gemm.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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

}  // namespace

void run_gemm_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kGemm);
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (ctx.trace) ctx.trace->thread_name(kComputeTid, "compute stream (cuBLASLt)");
  GemmRunner runner(stream, o.workspace_bytes);
  const int warmup = ctx.warmup(fam.default_warmup);
  const double warmup_s = ctx.warmup_seconds(fam.default_warmup_s);

  if (ctx.rank == 0) {
    std::printf("# lcm-exec bench gemm: %d rank(s), %s, cuBLASLt heuristic (%d candidate(s)), workspace %lld MiB, "
                "warm-up >= %d reps and >= %.0f ms\n",
                ctx.world, ctx.device.name.c_str(), o.algos, static_cast<long long>(o.workspace_bytes >> 20), warmup,
                warmup_s * 1000);
    std::printf("# %-30s %-9s %22s %5s %4s %10s %10s %10s %9s %7s %s\n", "label", "dtype", "MxNxK", "reps", "bufs",
                "median_us", "min_us", "max_us", "TFLOP/s", "#wrong", "check");
  }
  for (GemmDType dt : o.gemm_dtypes) {
    for (const GemmPoint& shape : o.gemm_points) {
      const std::string st = shape.text();
      const std::string key = std::string("gemm/") + to_string(dt) + "/" + st;
      const std::string op = "bench.gemm." + st;
      if (ctx.skip.count(key)) {
        if (ctx.rank == 0) std::printf("  %-30s %-9s %22s  (resumed: already measured)\n", shape.label.c_str(), to_string(dt), st.c_str());
        continue;
      }
      const GemmProblem p{shape.shape.m, shape.shape.n, shape.shape.k, dt};
      const int sets = rotation_sets(p.set_bytes(), ctx.rotate_bytes(), 64);
      runner.setup(p, sets, o.seed + static_cast<uint64_t>(ctx.point_index), o.algos);
      const int supported = static_cast<int>(allreduce_sum(runner.supported() ? 1 : 0));
      if (supported != ctx.world) {
        if (ctx.rank == 0)
          std::printf("  %-30s %-9s %22s  (skipped: %s)\n", shape.label.c_str(), to_string(dt), st.c_str(),
                      runner.supported() ? "not supported on another rank" : runner.unsupported_reason().c_str());
        continue;
      }
      if (o.algos > 1) runner.select_algo(pick_fastest_algo(runner, stream, o.timeout_s, op));
      const int reps = std::max(ctx.iters(fam.default_iters), sets);

      // Warm-up: `warmup` repetitions, repeated until warmup_s has passed, so the clocks
      // have settled where the power limit holds them for a sustained run.
      int warm_done = 0;
      const auto tw = std::chrono::steady_clock::now();
      while (warm_done < warmup ||
             std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count() < warmup_s) {
        for (int i = 0; i < std::max(warmup, 1); ++i) runner.enqueue(warm_done++ % sets);
        wait_stream(stream, o.timeout_s, op + " (warm-up)");
      }
      ctx.inject_before_timed_loop(op);

      EventSeries ev(reps);
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const double base_us = ctx.now_us();
      ev.record_base(stream);
      for (int i = 0; i < reps; ++i) {
        ev.record_start(i, stream);
        runner.enqueue(i % sets);
        ev.record_end(i, stream);
      }
      wait_stream(stream, o.timeout_s, op);
      const Clocks clocks = query_clocks(ctx.device.pci_bus_id);  // right after the timed loop

      if (ctx.inject_corrupt()) runner.corrupt_output(0, 0, 0, 1.0e4f);
      Comparison total;
      int64_t failures = 0;
      for (int s = 0; s < std::min(sets, reps); ++s) {
        const Comparison c = runner.verify(s, o.seed + static_cast<uint64_t>(s));
        failures += c.failures();
        total.merge(c);
      }

      const std::vector<double> durs = ev.durations_us();
      const TimeStats mine = compute_stats(durs);
      PointRecord rec;
      rec.key = key;
      rec.family = "gemm";
      rec.op = op;
      rec.dtype = to_string(dt);
      rec.shape = st;
      rec.label = shape.label;
      rec.size_bytes = static_cast<int64_t>(p.set_bytes());
      rec.warmup = warm_done;
      rec.reps = reps;
      rec.buffers = sets;
      rec.time = mine;
      rec.tflops = p.flops() / (mine.median_us * 1e-6) / 1e12;
      rec.per_rank_median_us = allgather_double(mine.median_us);
      rec.wrong = allreduce_sum(failures);
      rec.checked = allreduce_sum(total.checked);
      rec.correct = rec.wrong == 0;
      rec.extra = {{"algo", runner.algo_json(runner.selected_algo())},
                   {"algos_considered", runner.num_algos()},
                   {"leading_dims", {{"a", p.lda()}, {"b", p.ldb()}, {"d", p.ldd()}}},
                   {"max_err_over_tolerance", total.max_err_ratio},
                   {"rel_l2_error", total.rel_l2},
                   {"check", to_json(total)},
                   {"clocks_after", to_json(clocks)},
                   {"layout", dt == GemmDType::kBf16 ? "NN (torch.matmul)" : "TN (torch._scaled_mm)"}};
      trace_repetitions(ctx, op, "gemm", kComputeTid, base_us, ev,
                        {{"dtype", rec.dtype}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"label", shape.label}});
      if (ctx.rank == 0)
        std::printf("  %-30s %-9s %22s %5d %4d %10.1f %10.1f %10.1f %9.1f %7lld %s\n", shape.label.c_str(),
                    rec.dtype.c_str(), st.c_str(), reps, sets, mine.median_us, mine.min_us, mine.max_us, rec.tflops,
                    static_cast<long long>(rec.wrong), rec.correct ? "OK" : "WRONG");
      std::fflush(stdout);
      ctx.finish_point(rec);
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
