// `lcm-exec bench membw`: device-to-device copy bandwidth, cudaMemcpyAsync and a 16-byte
// vector copy kernel; GB/s counts bytes read plus bytes written (2 x size), 1e9.
//
// Per (method, size) point: setup (buffer pairs, seeded sources), timing (warm-up, then the
// timed loop behind a stream gate), check (every destination the loop wrote, bit-exact on
// the device), record and print.
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

// One point's state through its phases.
struct MembwPointRun {
  const Method* m = nullptr;
  size_t bytes = 0;
  std::string key, op;
  int sets = 1, reps = 0, warmup = 0;
  uint64_t seed = 0;
  std::vector<Pair> pairs;  // one per buffer set

  void free_all() {
    for (Pair& p : pairs) {
      cudaFree(p.src);
      cudaFree(p.dst);
    }
  }
};

// The methods of --methods (empty: both), in table order.
std::vector<const Method*> selected_methods(const Options& o) {
  std::vector<const Method*> methods;
  for (const Method& m : kMethods)
    if (o.copy_methods.empty() ||
        std::find(o.copy_methods.begin(), o.copy_methods.end(), m.method) != o.copy_methods.end())
      methods.push_back(&m);
  return methods;
}

// Setup: one source / destination pair per buffer set, sources filled with the seeded words.
void setup_point(cudaStream_t stream, MembwPointRun& pt) {
  for (int s = 0; s < pt.sets; ++s) {
    Pair& p = pt.pairs[static_cast<size_t>(s)];
    LCM_CUDA_CHECK(cudaMalloc(&p.src, pt.bytes));
    LCM_CUDA_CHECK(cudaMalloc(&p.dst, pt.bytes));
    kernels::fill_words(static_cast<uint32_t*>(p.src), pt.bytes / 4, pt.seed + static_cast<uint64_t>(s), stream);
  }
}

// Timing: `warmup` copies, the destinations cleared, then the timed loop enqueued behind
// the closed gate (GPU time only, hold.cuh), one event pair per repetition. Returns the
// trace time of the loop's start.
double time_point(RunContext& ctx, StreamGate& gate, cudaStream_t stream, const MembwPointRun& pt, EventSeries& ev) {
  const Options& o = ctx.opt;
  const size_t bytes = pt.bytes;
  for (int i = 0; i < pt.warmup; ++i)
    pt.m->copy(pt.pairs[static_cast<size_t>(i % pt.sets)].dst, pt.pairs[static_cast<size_t>(i % pt.sets)].src, bytes,
               stream);
  for (const Pair& p : pt.pairs) LCM_CUDA_CHECK(cudaMemsetAsync(p.dst, 0, bytes, stream));
  wait_stream(stream, o.timeout_s, pt.op + " (warm-up)");
  ctx.inject_before_timed_loop(pt.op);

  const double base_us = ctx.now_us();
  gate.close(stream);  // enqueue every repetition first: GPU time only (hold.cuh)
  ev.record_base(stream);
  for (int i = 0; i < pt.reps; ++i) {
    const Pair& p = pt.pairs[static_cast<size_t>(i % pt.sets)];
    ev.record_start(i, stream);
    pt.m->copy(p.dst, p.src, bytes, stream);
    ev.record_end(i, stream);
  }
  gate.open();
  wait_stream(stream, o.timeout_s, pt.op);
  return base_us;
}

// Check: every destination the timed loop wrote holds its source's seeded words.
Comparison check_point(RunContext& ctx, cudaStream_t stream, const MembwPointRun& pt) {
  if (ctx.inject_corrupt()) LCM_CUDA_CHECK(cudaMemset(pt.pairs[0].dst, 0x5a, 4));
  const int used = std::min(pt.sets, pt.reps);
  const int64_t wrong = count_on_device(stream, [&](unsigned long long* counter) {
    for (int s = 0; s < used; ++s)
      kernels::count_wrong_words(static_cast<const uint32_t*>(pt.pairs[static_cast<size_t>(s)].dst), pt.bytes / 4,
                                 pt.seed + static_cast<uint64_t>(s), counter, stream);
  });
  return exact_comparison(static_cast<int64_t>(pt.bytes / 4) * used, wrong);
}

PointRecord make_record(const MembwPointRun& pt, const EventSeries& ev, const Comparison& chk) {
  const TimeStats t = compute_stats(ev.durations_us());
  PointRecord rec;
  rec.key = pt.key;
  rec.family = "membw";
  rec.op = pt.op;
  rec.dtype = "bytes";
  rec.label = to_string(pt.m->method);
  rec.size_bytes = static_cast<int64_t>(pt.bytes);
  rec.warmup = pt.warmup;
  rec.reps = pt.reps;
  rec.buffers = pt.sets;
  rec.time = t;
  rec.gbps = 2.0 * static_cast<double>(pt.bytes) / 1e9 / (t.median_us * 1e-6);
  rec.per_rank_median_us = allgather_double(t.median_us);
  rec.wrong = allreduce_sum(chk.failures());
  rec.checked = allreduce_sum(chk.checked);
  rec.correct = rec.wrong == 0;
  return rec;
}

// Print: the header once, then one row per point (rank 0).
void print_header(const RunContext& ctx) {
  std::printf("# lcm-exec bench membw: %d rank(s), %s; GB/s = (read + write bytes) / median time\n", ctx.world,
              ctx.device.name.c_str());
  std::printf("# %-7s %12s %5s %4s %10s %10s %10s %9s %7s\n", "method", "size(B)", "reps", "bufs", "median_us",
              "min_us", "max_us", "GB/s", "#wrong");
}

void print_row(const MembwPointRun& pt, const PointRecord& rec) {
  std::printf("  %-7s %12zu %5d %4d %10.2f %10.2f %10.2f %9.1f %7lld\n", to_string(pt.m->method), pt.bytes, pt.reps,
              pt.sets, rec.time.median_us, rec.time.min_us, rec.time.max_us, rec.gbps,
              static_cast<long long>(rec.wrong));
}

}  // namespace

void run_membw_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kMembw);
  const std::vector<const Method*> methods = selected_methods(o);
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  StreamGate gate;
  if (ctx.trace) ctx.trace->thread_name(kCopyTid, "copy stream");
  const int warmup = ctx.warmup(fam.default_warmup);
  if (ctx.rank == 0) print_header(ctx);
  for (const Method* m : methods) {
    for (int64_t requested : sweep_sizes(o.sweep)) {
      MembwPointRun pt;
      pt.m = m;
      pt.bytes = static_cast<size_t>(requested) / 16 * 16;
      if (pt.bytes == 0) continue;
      pt.key = std::string("membw/") + to_string(m->method) + "/" + std::to_string(pt.bytes);
      pt.op = std::string("bench.membw.") + to_string(m->method);
      if (ctx.skip.count(pt.key)) continue;
      pt.sets = rotation_sets(2.0 * static_cast<double>(pt.bytes), ctx.rotate_bytes());
      pt.reps = std::max(ctx.iters(fam.default_iters), pt.sets);
      pt.warmup = warmup;
      pt.seed = o.seed * 1000003ull + static_cast<uint64_t>(ctx.point_index) * 4099ull;
      pt.pairs.resize(static_cast<size_t>(pt.sets));
      try {
        setup_point(stream, pt);
        EventSeries ev(pt.reps);
        const double base_us = time_point(ctx, gate, stream, pt, ev);
        const Comparison chk = check_point(ctx, stream, pt);
        PointRecord rec = make_record(pt, ev, chk);
        trace_repetitions(ctx, pt.op, "copy", kCopyTid, base_us, ev,
                          {{"size", pt.bytes}, {"method", to_string(m->method)}});
        if (ctx.rank == 0) print_row(pt, rec);
        std::fflush(stdout);
        pt.free_all();
        ctx.finish_point(rec);
      } catch (const CommFailure&) {
        throw;  // a copy may still be running (timeout): cudaFree would wait for it
      } catch (...) {
        pt.free_all();
        throw;
      }
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
