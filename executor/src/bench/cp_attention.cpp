// `lcm-exec bench cp-attention`: ring attention over the CP group of --layout with
// load-balanced causal chunks (cp_attention.hpp, cp_ring.hpp). Per shape: forward and
// backward with the ring's communication overlapped, then the same steps without it
// (compute only); exposed communication = total - compute-only. Per-step compute and
// per-message communication times go to the summary and the trace. Per shape: setup
// (buffer sets, data), timing (warm-up, ring passes, compute-only passes), check (against
// single-GPU attention), records, trace and print.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "infra/run_context.hpp"
#include "kernels/cp_ring.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;
constexpr int kCommTid = 2;
constexpr int64_t kFullRefMaxSeq = 4096;

std::vector<double> medians(const std::vector<std::vector<double>>& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(compute_stats(x).median_us);
  return out;
}

// What every point shares: the CP group and the two streams.
struct CpRun {
  Group g = Group::kCp;
  int cp = 1, cp_rank = 0;
  std::vector<int> cp_ranks;
  std::vector<int> peers;
  Comms* comms = nullptr;
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr, commst = nullptr;
  double timeout_s = 0;

  // Drains the comm stream, then the compute stream (through the communicator with more
  // than one rank).
  void wait(const std::string& what, const std::function<std::string()>& detail = {}) const {
    for (cudaStream_t s : {commst, compute}) wait_group_stream(comms, s, timeout_s, what, detail);
  }
};

// One point's state through its phases.
struct CpPointRun {
  const AttentionPoint* shape = nullptr;
  AttentionProblem full;  // the whole sequence; b = 1, causal (options.cpp)
  std::string st;         // "BxSxHQxHKVxD.cpN"
  std::string kp;         // key prefix of its records
  std::string op;
  int sets = 1;
  bool full_ref = false;  // full reference (else sampled rows)
};

struct CpTiming {
  int warm_done = 0;
  int reps = 0;
  int last = 0;  // the buffer set of the last repetition (the one checked)
  double base_us = 0;
  Clocks clocks;  // right after the timed loops and the check pass
};

// Pass times of the timed loops: the ring (communication overlapped) and compute only;
// exposed communication = ring - compute only (us).
struct CpTimes {
  CpPassTimes fw, bw, fc, bc;
  TimeStats tf, tb, tfc, tbc;
  double exp_f = 0, exp_b = 0;
};

// Setup of the run: the communicator of --group (cp by default) and the streams.
CpRun setup_run(RunContext& ctx) {
  const Options& o = ctx.opt;
  CpRun run;
  run.g = o.group;
  run.timeout_s = o.timeout_s;
  GroupComm gc = open_group(ctx, run.g);
  run.comms = gc.comms;
  run.comm = gc.comm;
  run.cp_rank = gc.rank;
  run.cp_ranks = std::move(gc.ranks);
  run.cp = static_cast<int>(run.cp_ranks.size());
  run.peers = std::move(gc.peers);
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&run.compute, cudaStreamNonBlocking));
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&run.commst, cudaStreamNonBlocking));
  return run;
}

// Setup of a point: buffer sets (fewer if memory is short, leaving room for the check) and
// data. False, with the reason printed, when some rank cannot run it.
bool setup_point(RunContext& ctx, const CpRun& run, CpRing& ring, CpPointRun& pt) {
  const Options& o = ctx.opt;
  const AttentionProblem& full = pt.full;
  const int cp = run.cp;
  size_t free_b = 0, total_b = 0;
  LCM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double local_set = CpRing::device_bytes(full, cp, 2) - CpRing::device_bytes(full, cp, 1);
  int sets = rotation_sets(local_set, ctx.rotate_bytes(), 8);
  const double verify_bytes = full.set_bytes() + static_cast<double>(full.q_elems()) * 4 + 1e9;
  while (sets > 1 && CpRing::device_bytes(full, cp, sets) + verify_bytes > 0.85 * static_cast<double>(free_b)) --sets;
  pt.sets = sets;
  const bool fits = CpRing::device_bytes(full, cp, sets) + verify_bytes <= 0.9 * static_cast<double>(free_b);
  if (fits) ring.setup(full, sets, o.seed + static_cast<uint64_t>(ctx.point_index) * 16);
  const bool ok_here = fits && ring.supported();
  if (allreduce_sum(ok_here ? 1 : 0) != ctx.world) {
    if (ctx.rank == 0)
      std::printf("  %-24s %-24s  (skipped: %s)\n", pt.shape->label.c_str(), pt.st.c_str(),
                  !fits ? "does not fit in memory" : !ok_here ? ring.unsupported_reason().c_str() : "not supported on another rank");
    return false;
  }
  return true;
}

// Timing: the warm-up (forward + backward with communication, the ranks agreeing, until
// `warmup` repetitions and warmup_s have passed; its last repetition sizes the timed loop
// under --point-ms, one count for every rank), outputs poisoned, the timed ring passes, then
// with cp > 1 the same steps without communication (compute only) and one more, untimed ring
// pass of the last buffer set for the check (the compute-only passes overwrite its outputs).
CpTiming time_point(RunContext& ctx, const CpRun& run, CpRing& ring, const CpPointRun& pt) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kCpAttention);
  const std::string& op = pt.op;
  const int sets = pt.sets;
  CpTiming t;
  const int warmup = ctx.warmup(fam.default_warmup);
  const Warmup w = warm_up_together(warmup, ctx.warmup_seconds(fam.default_warmup_s), [&](int i) {
    ring.forward(i % sets, true);
    ring.backward(i % sets, true);
    run.wait(op + " (warm-up)");
  });
  t.warm_done = w.done;
  const int reps = reps_for_point(ctx.iters(fam.default_iters), o.point_ms, w.rep_s);
  t.reps = std::max(static_cast<int>(allreduce_sum(reps) / ctx.world), sets);
  ring.begin_timing(t.reps);
  ring.poison_outputs();

  ArrivalProbe probe(run.peers, 300 + ctx.point_index % 30000);
  probe.post();
  LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  ctx.inject_before_timed_loop(op);
  probe.arrive();
  LCM_CUDA_CHECK(cudaStreamSynchronize(run.compute));
  t.base_us = ctx.now_us();
  ring.record_base(run.compute);  // one origin for the compute and the comm events
  for (int rep = 0; rep < t.reps; ++rep) {
    ring.forward(rep % sets, true, rep);
    ring.backward(rep % sets, true, rep);
  }
  const std::string what =
      op + " [ring attention, comm " + std::string(to_string(run.g)) + " ranks " + ranks_text(run.cp_ranks) + "]";
  run.wait(what, [&] {
    const std::string miss = missing_ranks_text(probe);
    return miss.empty() ? std::string("every rank of the group reached this op") : miss;
  });
  probe.finish();
  t.last = (t.reps - 1) % sets;
  // Compute only: the same steps on the local K, V, no communication.
  if (run.cp > 1) {
    for (int rep = 0; rep < t.reps; ++rep) {
      ring.forward(rep % sets, false, rep);
      ring.backward(rep % sets, false, rep);
    }
    run.wait(op + " (compute only)");
    // the outputs of the last ring pass are overwritten: run it once more, untimed, for the check
    ring.forward(t.last, true);
    ring.backward(t.last, true);
    run.wait(op + " (check pass)");
  }
  t.clocks = query_clocks(ctx.device.pci_bus_id);
  return t;
}

// Check: the last buffer set's outputs against single-GPU attention (CpRing::verify, the one
// comparer).
CpCheck check_point(RunContext& ctx, CpRing& ring, const CpPointRun& pt, const CpTiming& t) {
  if (ctx.inject_corrupt()) ring.corrupt_dq(t.last, 0, 1.0e4f);
  return ring.verify(t.last, pt.full_ref, ctx.opt.seed + static_cast<uint64_t>(ctx.point_index));
}

CpTimes pass_times(const CpRing& ring, int cp) {
  CpTimes x;
  x.fw = ring.times(false, true);
  x.bw = ring.times(true, true);
  x.fc = cp > 1 ? ring.times(false, false) : x.fw;
  x.bc = cp > 1 ? ring.times(true, false) : x.bw;
  x.tf = compute_stats(x.fw.total_us);
  x.tb = compute_stats(x.bw.total_us);
  x.tfc = compute_stats(x.fc.total_us);
  x.tbc = compute_stats(x.bc.total_us);
  x.exp_f = x.tf.median_us - x.tfc.median_us;
  x.exp_b = x.tb.median_us - x.tbc.median_us;
  return x;
}

// The kind of each ring step (diagonal, lower, ...), as the records and the trace name them.
std::vector<std::string> step_kinds(const CpRing& ring, int cp) {
  std::vector<std::string> kinds;
  for (int i = 0; i < cp; ++i) kinds.push_back(to_string(ring.layout().step_kind(i)));
  return kinds;
}

double kv_message_bytes(const AttentionProblem& full, int cp) {
  return static_cast<double>(full.s / cp * full.hkv * full.d) * 2 * 2;  // K and V of 2c rows
}

// The point's records: compute only fwd and bwd, per message communication (cp > 1), the
// ring fwd, bwd and fwd+bwd (last: its key marks the point finished for --resume).
std::vector<PointRecord> make_records(const CpRun& run, const CpRing& ring, const CpPointRun& pt, const CpTiming& t,
                                      const CpTimes& x, const CpCheck& chk) {
  const AttentionProblem& full = pt.full;
  const int cp = run.cp;
  const int64_t wrong = allreduce_sum(chk.wrong()), checked = allreduce_sum(chk.checked());
  std::vector<double> tt = sum_series(x.fw.total_us, x.bw.total_us);
  const auto msgs = [](const CpPassTimes& p) {
    std::vector<double> all;
    for (const auto& m : p.comm_us) all.insert(all.end(), m.begin(), m.end());
    return all;
  };
  const double kv_bytes = kv_message_bytes(full, cp);
  const std::vector<std::string> kinds = step_kinds(ring, cp);
  const nlohmann::json shape_json = {{"b", 1}, {"s", full.s}, {"hq", full.hq}, {"hkv", full.hkv}, {"d", full.d},
                                     {"cp", cp}, {"chunk", ring.layout().chunk()}, {"local_rows", ring.layout().local_rows()},
                                     {"global_rows_of_local_chunks", {ring.layout().global_row(0), ring.layout().global_row(ring.layout().chunk())}},
                                     {"step_kinds", kinds}, {"kv_message_bytes", kv_bytes},
                                     {"fwd_flops_per_rank", full.fwd_flops() / cp}};
  const nlohmann::json check_json = to_json(chk);
  const nlohmann::json steps = {
      {"fwd", {{"compute_us", medians(x.fw.compute_us)}, {"comm_us", medians(x.fw.comm_us)},
               {"compute_only_step_us", medians(x.fc.compute_us)}}},
      {"bwd", {{"compute_us", medians(x.bw.compute_us)}, {"comm_us", medians(x.bw.comm_us)},
               {"compute_only_step_us", medians(x.bc.compute_us)},
               {"comm_order", "kv for steps 0..cp-2, then dK/dV after steps 0..cp-1"}}}};
  const auto record = [&](const std::string& name, const TimeStats& ts, bool is_comm, double flops) {
    PointRecord rec;
    rec.key = pt.kp + name;
    rec.family = "cp-attention";
    rec.op = name;
    rec.dtype = "bf16";
    rec.shape = full.shape_text();
    rec.label = pt.shape->label + ".cp" + std::to_string(cp);
    rec.group = is_comm ? to_string(run.g) : "";
    rec.group_size = cp;
    rec.size_bytes = is_comm ? static_cast<int64_t>(kv_bytes) : 0;
    rec.warmup = t.warm_done;
    rec.reps = t.reps;
    rec.buffers = pt.sets;
    rec.time = ts;
    rec.tflops = flops > 0 && ts.median_us > 0 ? flops / (ts.median_us * 1e-6) / 1e12 : 0;
    rec.per_rank_median_us = allgather_double(ts.median_us);
    rec.wrong = wrong;
    rec.checked = checked;
    rec.correct = wrong == 0;
    rec.extra = {{"cp_attention", shape_json}, {"steps", steps},
                 {"exposed_comm_us", {{"fwd", x.exp_f}, {"bwd", x.exp_b}, {"fwd+bwd", x.exp_f + x.exp_b}}},
                 {"compute_only_us", {{"fwd", x.tfc.median_us}, {"bwd", x.tbc.median_us}}},
                 {"check_mode", pt.full_ref ? "full reference" : "sampled reference"}, {"check", check_json},
                 {"clocks_after", to_json(t.clocks)}, {"cudnn", ring.describe()}};
    return rec;
  };
  const double ff = full.fwd_flops() / cp, fb = full.bwd_flops() / cp;
  std::vector<PointRecord> recs;
  recs.push_back(record("L.attn.core.fwd", x.tfc, false, ff));
  recs.back().extra["note"] = "compute only: the ring's steps on local K, V without communication";
  recs.push_back(record("L.attn.core.bwd", x.tbc, false, fb));
  recs.back().extra["note"] = "compute only: the ring's steps on local K, V without communication";
  if (cp > 1) {
    recs.push_back(record("L.attn.cp.kv.p2p.fwd", compute_stats(msgs(x.fw)), true, 0));
    recs.back().extra["note"] = "one K+V exchange (ncclSend/ncclRecv to the next rank, from the previous), cp-1 per pass";
    recs.push_back(record("L.attn.cp.kv.p2p.bwd", compute_stats(msgs(x.bw)), true, 0));
    recs.back().extra["note"] = "one exchange of K+V (cp-1 per pass) or of the dK+dV sums (cp per pass), overlapped";
  }
  recs.push_back(record("L.attn.cp.ring.fwd", x.tf, false, ff));
  recs.push_back(record("L.attn.cp.ring.bwd", x.tb, false, fb));
  recs.push_back(record("L.attn.cp.ring.fwd+bwd", compute_stats(tt), false, ff + fb));
  for (PointRecord& r : recs)
    if (r.op.find(".ring.") != std::string::npos)
      r.extra["note"] = "the whole ring pass with communication overlapped (first to last event on the compute stream)";
  return recs;
}

// Trace: per step compute and per message communication events of the timed ring passes.
void trace_point(RunContext& ctx, const CpRun& run, const CpRing& ring, const CpPointRun& pt, const CpTiming& t) {
  const int cp = run.cp;
  const std::vector<std::string> kinds = step_kinds(ring, cp);
  const double kv_bytes = kv_message_bytes(pt.full, cp);
  for (bool bwd : {false, true}) {
    const char* pass = bwd ? "bwd" : "fwd";
    const auto cs = ring.compute_series(bwd, true);
    for (size_t i = 0; i < cs.size(); ++i)
      trace_repetitions(ctx, std::string("L.attn.core.") + pass, "attention", kComputeTid, t.base_us, *cs[i],
                        {{"step", i}, {"kind", kinds[i]}, {"shape", pt.st}});
    const auto ms = ring.comm_series(bwd, true);
    for (size_t i = 0; i < ms.size(); ++i)
      trace_repetitions(ctx, std::string("L.attn.cp.kv.p2p.") + pass, "nccl", kCommTid, t.base_us, *ms[i],
                        {{"message", i}, {"Collective name", "send_recv"}, {"Group size", cp},
                         {"Process Group Name", to_string(run.g)}, {"Process Group Ranks", run.cp_ranks},
                         {"Rank", run.cp_rank}, {"bytes", kv_bytes}, {"shape", pt.st}});
  }
}

// Print (rank 0): the header once; per point its row, the per-step medians and, when the
// check failed, the comparison.
void print_header(const RunContext& ctx, const CpRun& run) {
  const BenchFamily& fam = bench_family(Family::kCpAttention);
  std::printf("# lcm-exec bench cp-attention: %d rank(s), group %s of %d [ranks %s], %s, cuDNN %s, bf16, causal, "
              "load-balanced chunks (rank r: chunks r and 2cp-1-r), warm-up >= %d reps and >= %.0f ms\n",
              ctx.world, to_string(run.g), run.cp, ranks_text(run.cp_ranks).c_str(), ctx.device.name.c_str(),
              cudnn_version_string(cudnn_runtime_version()).c_str(), ctx.warmup(fam.default_warmup),
              ctx.warmup_seconds(fam.default_warmup_s) * 1000);
  std::fflush(stdout);
}

void print_row(const CpPointRun& pt, const CpTiming& t, const CpTimes& x, const PointRecord& last,
               const CpCheck& chk) {
  const bool ok = last.wrong == 0;
  std::printf("  %-24s %-24s bufs %d reps %d  fwd ring %8.1f us (compute only %8.1f, exposed comm %7.1f)  bwd ring "
              "%8.1f us (compute only %8.1f, exposed comm %7.1f)  %s\n",
              pt.shape->label.c_str(), pt.st.c_str(), pt.sets, t.reps, x.tf.median_us, x.tfc.median_us, x.exp_f,
              x.tb.median_us, x.tbc.median_us, x.exp_b, ok ? "OK" : "WRONG");
  const auto v = [](const std::vector<double>& xs) {
    std::string s;
    for (double d : xs) s += (s.empty() ? "" : " ") + std::to_string(static_cast<int64_t>(std::lround(d)));
    return s;
  };
  std::printf("#   per step (us, median): fwd compute [%s] comm [%s]; bwd compute [%s] comm [%s]\n",
              v(medians(x.fw.compute_us)).c_str(), v(medians(x.fw.comm_us)).c_str(),
              v(medians(x.bw.compute_us)).c_str(), v(medians(x.bw.comm_us)).c_str());
  if (!ok) std::printf("#   check: %s\n", to_json(chk).dump().c_str());
  std::fflush(stdout);
}

}  // namespace

void run_cp_attention_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  CpRun run = setup_run(ctx);
  if (ctx.trace) {
    ctx.trace->thread_name(kComputeTid, "compute stream (cuDNN)");
    ctx.trace->thread_name(kCommTid, "nccl " + std::string(to_string(run.g)) + " [" + ranks_text(run.cp_ranks) +
                                         "] (comm stream)");
  }
  auto ring_owner =
      std::make_unique<CpRing>(run.compute, run.commst, run.comms, run.comm, run.cp, run.cp_rank, o.timeout_s);
  CpRing& ring = *ring_owner;

  if (ctx.rank == 0) print_header(ctx, run);
  for (const AttentionPoint& shape : o.attn_points) {
    CpPointRun pt;
    pt.shape = &shape;
    pt.full = AttentionProblem::of(shape.shape, o.attn_scale);
    pt.full.validate();
    CpLayout{pt.full.s, run.cp, run.cp_rank}.validate();
    pt.st = pt.full.shape_text() + ".cp" + std::to_string(run.cp);
    pt.kp = "cp-attention/" + pt.st + "/";
    if (ctx.skip.count(pt.kp + "L.attn.cp.ring.fwd+bwd")) {
      if (ctx.rank == 0) std::printf("  %-24s %-24s  (resumed: already measured)\n", shape.label.c_str(), pt.st.c_str());
      continue;
    }
    pt.op = "bench.cp-attention." + pt.st;
    pt.full_ref = check_full(o.check, pt.full.s, kFullRefMaxSeq);
    if (!setup_point(ctx, run, ring, pt)) continue;

    const CpTiming t = time_point(ctx, run, ring, pt);
    const CpCheck chk = check_point(ctx, ring, pt, t);
    const CpTimes x = pass_times(ring, run.cp);
    std::vector<PointRecord> recs = make_records(run, ring, pt, t, x, chk);
    trace_point(ctx, run, ring, pt, t);
    if (ctx.rank == 0) print_row(pt, t, x, recs.back(), chk);
    for (size_t i = 0; i + 1 < recs.size(); ++i)
      if (ctx.sink) ctx.sink->add(recs[i]);
    ctx.finish_point(recs.back());
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(run.compute));
  LCM_CUDA_CHECK(cudaStreamSynchronize(run.commst));
  ring_owner.reset();
  cudaStreamDestroy(run.compute);
  cudaStreamDestroy(run.commst);
}

}  // namespace lcm::exec
