// `lcm-exec bench membw`: device-to-device copy bandwidth, cudaMemcpyAsync and a 16-byte
// vector copy kernel; GB/s counts bytes read plus bytes written (2 x size), 1e9.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"
#include "infra/hold.cuh"
#include "lcm/executor/kernels.cuh"

namespace lcm::exec {

namespace {

constexpr int kCopyTid = 2;

struct Method {
  CopyMethod method;
  void (*copy)(void* dst, const void* src, size_t bytes, cudaStream_t s);
};

void copy_memcpy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  LCM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}
void copy_kernel(void* dst, const void* src, size_t bytes, cudaStream_t s) { kernels::copy_vec16(dst, src, bytes, s); }

constexpr Method kMethods[] = {{CopyMethod::kMemcpy, copy_memcpy}, {CopyMethod::kKernel, copy_kernel}};

struct Pair {
  void* src = nullptr;
  void* dst = nullptr;
};

}  // namespace

void run_membw_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kMembw);
  std::vector<const Method*> methods;
  for (const Method& m : kMethods)
    if (o.copy_methods.empty() ||
        std::find(o.copy_methods.begin(), o.copy_methods.end(), m.method) != o.copy_methods.end())
      methods.push_back(&m);
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  StreamGate gate;
  if (ctx.trace) ctx.trace->thread_name(kCopyTid, "copy stream");
  const int warmup = ctx.warmup(fam.default_warmup);
  if (ctx.rank == 0) {
    std::printf("# lcm-exec bench membw: %d rank(s), %s; GB/s = (read + write bytes) / median time\n", ctx.world,
                ctx.device.name.c_str());
    std::printf("# %-7s %12s %5s %4s %10s %10s %10s %9s %7s\n", "method", "size(B)", "reps", "bufs", "median_us",
                "min_us", "max_us", "GB/s", "#wrong");
  }
  for (const Method* m : methods) {
    for (int64_t requested : sweep_sizes(o.sweep)) {
      const size_t bytes = static_cast<size_t>(requested) / 16 * 16;
      if (bytes == 0) continue;
      const std::string key = std::string("membw/") + to_string(m->method) + "/" + std::to_string(bytes);
      const std::string op = std::string("bench.membw.") + to_string(m->method);
      if (ctx.skip.count(key)) continue;
      const int sets = rotation_sets(2.0 * static_cast<double>(bytes), ctx.rotate_bytes());
      const int reps = std::max(ctx.iters(fam.default_iters), sets);
      const uint64_t seed = o.seed * 1000003ull + static_cast<uint64_t>(ctx.point_index) * 4099ull;
      std::vector<Pair> pairs(static_cast<size_t>(sets));
      const auto free_all = [&] {
        for (Pair& p : pairs) {
          cudaFree(p.src);
          cudaFree(p.dst);
        }
      };
      try {
        for (int s = 0; s < sets; ++s) {
          Pair& p = pairs[static_cast<size_t>(s)];
          LCM_CUDA_CHECK(cudaMalloc(&p.src, bytes));
          LCM_CUDA_CHECK(cudaMalloc(&p.dst, bytes));
          kernels::fill_words(static_cast<uint32_t*>(p.src), bytes / 4, seed + static_cast<uint64_t>(s), stream);
        }
        for (int i = 0; i < warmup; ++i) m->copy(pairs[static_cast<size_t>(i % sets)].dst, pairs[static_cast<size_t>(i % sets)].src, bytes, stream);
        for (Pair& p : pairs) LCM_CUDA_CHECK(cudaMemsetAsync(p.dst, 0, bytes, stream));
        wait_stream(stream, o.timeout_s, op + " (warm-up)");
        ctx.inject_before_timed_loop(op);

        EventSeries ev(reps);
        const double base_us = ctx.now_us();
        gate.close(stream);  // enqueue every repetition first: GPU time only (hold.cuh)
        ev.record_base(stream);
        for (int i = 0; i < reps; ++i) {
          const Pair& p = pairs[static_cast<size_t>(i % sets)];
          ev.record_start(i, stream);
          m->copy(p.dst, p.src, bytes, stream);
          ev.record_end(i, stream);
        }
        gate.open();
        wait_stream(stream, o.timeout_s, op);

        if (ctx.inject_corrupt()) LCM_CUDA_CHECK(cudaMemset(pairs[0].dst, 0x5a, 4));
        unsigned long long* d_wrong = nullptr;
        LCM_CUDA_CHECK(cudaMalloc(&d_wrong, sizeof *d_wrong));
        LCM_CUDA_CHECK(cudaMemsetAsync(d_wrong, 0, sizeof *d_wrong, stream));
        const int used = std::min(sets, reps);
        for (int s = 0; s < used; ++s)
          kernels::count_wrong_words(static_cast<const uint32_t*>(pairs[static_cast<size_t>(s)].dst), bytes / 4,
                                     seed + static_cast<uint64_t>(s), d_wrong, stream);
        unsigned long long wrong = 0;
        LCM_CUDA_CHECK(cudaMemcpyAsync(&wrong, d_wrong, sizeof wrong, cudaMemcpyDeviceToHost, stream));
        LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
        cudaFree(d_wrong);

        const TimeStats t = compute_stats(ev.durations_us());
        PointRecord rec;
        rec.key = key;
        rec.family = "membw";
        rec.op = op;
        rec.dtype = "bytes";
        rec.label = to_string(m->method);
        rec.size_bytes = static_cast<int64_t>(bytes);
        rec.warmup = warmup;
        rec.reps = reps;
        rec.buffers = sets;
        rec.time = t;
        rec.gbps = 2.0 * static_cast<double>(bytes) / 1e9 / (t.median_us * 1e-6);
        rec.per_rank_median_us = allgather_double(t.median_us);
        rec.wrong = allreduce_sum(static_cast<int64_t>(wrong));
        rec.checked = allreduce_sum(static_cast<int64_t>(bytes / 4) * used);
        rec.correct = rec.wrong == 0;
        trace_repetitions(ctx, op, "copy", kCopyTid, base_us, ev, {{"size", bytes}, {"method", to_string(m->method)}});
        if (ctx.rank == 0)
          std::printf("  %-7s %12zu %5d %4d %10.2f %10.2f %10.2f %9.1f %7lld\n", to_string(m->method), bytes, reps, sets, t.median_us,
                      t.min_us, t.max_us, rec.gbps, static_cast<long long>(rec.wrong));
        std::fflush(stdout);
        free_all();
        ctx.finish_point(rec);
      } catch (const CommFailure&) {
        throw;  // a copy may still be running (timeout): cudaFree would wait for it
      } catch (...) {
        free_all();
        throw;
      }
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
