// `lcm-exec bench attention`: cuDNN fused causal GQA attention, forward and backward, over
// --shapes (see attention.hpp, cudnn_attention.hpp, attention_runner.hpp).
//
// Every repetition runs the forward and then the backward of one buffer set, the way a
// training step does (the backward reads that forward's O and statistics), with a pair of
// CUDA events around each; a point yields three records: fwd, bwd and fwd+bwd (the sum of
// the two per repetition), each with the statistics of its own times. Per point: setup
// (buffer sets, data, cuDNN plans), timing (warm-up, timed loop), check (every output of
// every buffer set used, against the fp32 reference), records and print.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <initializer_list>
#include <memory>

#include "lcm/executor/attention_runner.hpp"
#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;

// Fastest of the finalized plans of one direction: 2 warm-up and 5 timed runs each.
int pick_fastest(AttentionRunner& r, bool backward, cudaStream_t s, double timeout_s, const std::string& op) {
  CudnnAttention& a = r.cudnn();
  const int n = backward ? a.num_bwd_plans() : a.num_fwd_plans();
  int best = 0;
  double best_us = 1e300;
  for (int i = 0; i < n; ++i) {
    if (backward) a.select_bwd(i);
    else a.select_fwd(i);
    r.rebind();
    for (int k = 0; k < 2; ++k) {
      r.forward(0);
      if (backward) r.backward(0);
    }
    EventSeries ev(5);
    for (int k = 0; k < 5; ++k) {
      if (backward) r.forward(0);
      ev.record_start(k, s);
      if (backward) r.backward(0);
      else r.forward(0);
      ev.record_end(k, s);
    }
    wait_stream(s, timeout_s, op + " (plan search)");
    const double us = compute_stats(ev.durations_us()).median_us;
    if (us < best_us) {
      best_us = us;
      best = i;
    }
  }
  if (backward) a.select_bwd(best);
  else a.select_fwd(best);
  r.rebind();
  return best;
}

// One point's state through its phases.
struct AttnPointRun {
  const AttentionPoint* shape = nullptr;
  AttentionProblem p;
  std::string st;          // "BxSxHQxHKVxD"
  std::string kf, kb, kt;  // keys of the fwd, bwd and fwd+bwd records
  std::string op;
  int sets = 1;
  bool full = false;       // full check (else sampled rows)
  nlohmann::json plan;     // the cuDNN plans chosen
};

struct AttnTiming {
  int warm_done = 0;
  int reps = 0;
  double base_us = 0;
  Clocks clocks;  // right after the timed loop
  std::unique_ptr<EventSeries> evf, evb;
};

// Setup: buffer sets (rotate through >= max(100 MB, 2 x L2); fewer if memory is short), data
// and the cuDNN plans. False, with the reason printed, when some rank cannot run the point
// (the run goes on with the next one).
bool setup_point(RunContext& ctx, AttentionRunner& runner, cudaStream_t stream, AttnPointRun& pt) {
  const Options& o = ctx.opt;
  const AttentionProblem& p = pt.p;
  size_t free_b = 0, total_b = 0;
  LCM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double extra = static_cast<double>(p.q_elems()) * 4 + static_cast<double>(p.stat_elems()) * 4 + 512e6;
  int sets = rotation_sets(p.set_bytes(), ctx.rotate_bytes(), 16);
  while (sets > 1 && sets * p.set_bytes() + extra > 0.85 * static_cast<double>(free_b)) --sets;
  pt.sets = sets;
  const bool fits = p.set_bytes() + extra <= 0.9 * static_cast<double>(free_b);
  if (fits) runner.setup(p, sets, o.seed + static_cast<uint64_t>(ctx.point_index), o.algos);
  const bool ok_here = fits && runner.supported();
  const int supported = static_cast<int>(allreduce_sum(ok_here ? 1 : 0));
  if (supported != ctx.world) {
    if (ctx.rank == 0) {
      const std::string why = !fits ? "needs " + std::to_string((p.set_bytes() + extra) / 1073741824.0) +
                                          " GiB, " + std::to_string(free_b / 1073741824.0) + " GiB free"
                                    : !ok_here ? runner.unsupported_reason() : "not supported on another rank";
      std::printf("  %-24s %-20s  (skipped: %s)\n", pt.shape->label.c_str(), pt.st.c_str(), why.c_str());
      std::fflush(stdout);
    }
    return false;
  }
  if (o.algos > 1) {
    pick_fastest(runner, false, stream, o.timeout_s, pt.op);
    pick_fastest(runner, true, stream, o.timeout_s, pt.op);
  }
  pt.plan = runner.cudnn().describe();
  return true;
}

// Timing: the warm-up (warm_up: batches until `warmup` repetitions and warmup_s have passed;
// the last batch's time per repetition sizes the timed loop under --point-ms), outputs
// poisoned, then the timed loop: each repetition the forward and then the backward of one
// buffer set, a pair of events around each.
AttnTiming time_point(RunContext& ctx, AttentionRunner& runner, cudaStream_t stream, const AttnPointRun& pt) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kAttention);
  const int sets = pt.sets;
  AttnTiming t;
  const Warmup w = warm_up(
      ctx.warmup(fam.default_warmup), ctx.warmup_seconds(fam.default_warmup_s),
      [&](int i) {
        runner.forward(i % sets);
        runner.backward(i % sets);
      },
      [&] { wait_stream(stream, o.timeout_s, pt.op + " (warm-up)"); });
  t.warm_done = w.done;
  t.reps = std::max(reps_for_point(ctx.iters(fam.default_iters), o.point_ms, w.rep_s), sets);
  runner.poison_outputs();  // an output the timed loop leaves unwritten fails the check
  ctx.inject_before_timed_loop(pt.op);

  t.evf = std::make_unique<EventSeries>(t.reps);
  t.evb = std::make_unique<EventSeries>(t.reps);
  EventSeries& evf = *t.evf;
  EventSeries& evb = *t.evb;
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  t.base_us = ctx.now_us();
  evf.record_base(stream);
  evb.record_base(stream);
  for (int i = 0; i < t.reps; ++i) {
    evf.record_start(i, stream);
    runner.forward(i % sets);
    evf.record_end(i, stream);
    evb.record_start(i, stream);
    runner.backward(i % sets);
    evb.record_end(i, stream);
  }
  wait_stream(stream, o.timeout_s, pt.op);
  t.clocks = query_clocks(ctx.device.pci_bus_id);
  return t;
}

// Check: O, LSE, dQ, dK and dV of every buffer set the timed loop used, against the fp32
// reference (AttentionRunner::verify, the one comparer).
AttnCheckSet check_point(RunContext& ctx, AttentionRunner& runner, const AttnPointRun& pt, int reps) {
  if (ctx.inject_corrupt()) runner.corrupt(0, AttnOut::kDq, 0, 0, pt.p.s - 1, 0, 1.0e4f);
  AttnCheckSet chk;
  for (int s = 0; s < std::min(pt.sets, reps); ++s)
    chk.merge(runner.verify(s, pt.full, ctx.opt.seed + static_cast<uint64_t>(s)));
  return chk;
}

// The point's three records: fwd, bwd and fwd+bwd (the sum of the two per repetition), each
// with the statistics of its own times.
std::array<PointRecord, 3> make_records(const AttnPointRun& pt, const AttnTiming& t, const AttnCheckSet& chk) {
  const AttentionProblem& p = pt.p;
  const std::vector<double> df = t.evf->durations_us(), db = t.evb->durations_us();
  const std::vector<double> dt = sum_series(df, db);
  const TimeStats tf = compute_stats(df), tb = compute_stats(db), tt = compute_stats(dt);

  const nlohmann::json shape_json = {{"b", p.b},           {"s", p.s},         {"hq", p.hq},
                                     {"hkv", p.hkv},       {"d", p.d},         {"causal", p.causal},
                                     {"window", p.window},
                                     {"scale", p.softmax_scale()},            {"layout", "BSHD"},
                                     {"fwd_flops", p.fwd_flops()},            {"bwd_flops", p.bwd_flops()}};
  const nlohmann::json check_json = to_json(chk);
  const auto record = [&](const char* pass, const std::string& key, const char* model_op, const TimeStats& ts,
                          double flops, std::initializer_list<AttnOut> outs) {
    PointRecord rec;
    rec.key = key;
    rec.family = "attention";
    rec.op = model_op;
    rec.dtype = "bf16";
    rec.shape = pt.st;
    rec.label = pt.shape->label;
    rec.size_bytes = static_cast<int64_t>(p.set_bytes());
    rec.warmup = t.warm_done;
    rec.reps = t.reps;
    rec.buffers = pt.sets;
    rec.time = ts;
    rec.tflops = flops / (ts.median_us * 1e-6) / 1e12;
    rec.per_rank_median_us = allgather_double(ts.median_us);
    int64_t wrong = 0, checked = 0;
    for (AttnOut x : outs) {
      wrong += chk[x].failures();
      checked += chk[x].checked;
    }
    rec.wrong = allreduce_sum(wrong);
    rec.checked = allreduce_sum(checked);
    rec.correct = rec.wrong == 0;
    rec.extra = {{"pass", pass},
                 {"attention", shape_json},
                 {"cudnn", pt.plan},
                 {"check_mode", pt.full ? "full" : "sampled"},
                 {"check", check_json},
                 {"clocks_after", to_json(t.clocks)},
                 {"flop_convention", "fwd 4 b s^2 h_q d / 2 (causal); bwd 2.5 x fwd"}};
    return rec;
  };
  return {record("fwd", pt.kf, "L.attn.core.fwd", tf, p.fwd_flops(), {AttnOut::kO, AttnOut::kLse}),
          record("bwd", pt.kb, "L.attn.core.bwd", tb, p.bwd_flops(), {AttnOut::kDq, AttnOut::kDk, AttnOut::kDv}),
          record("fwd+bwd", pt.kt, "L.attn.core.fwd+bwd", tt, p.fwd_flops() + p.bwd_flops(),
                 {AttnOut::kO, AttnOut::kLse, AttnOut::kDq, AttnOut::kDk, AttnOut::kDv})};
}

// Print (rank 0): the header once; per point the plans chosen, then its row (and each
// output's comparison when the check failed).
void print_header(const RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kAttention);
  std::printf("# lcm-exec bench attention: %d rank(s), %s, cuDNN %s (headers %s), bf16, BSHD, causal %s, "
              "warm-up >= %d reps and >= %.0f ms, check %s\n",
              ctx.world, ctx.device.name.c_str(), cudnn_version_string(cudnn_runtime_version()).c_str(),
              cudnn_version_string(cudnn_header_version()).c_str(), (o.attn_points.empty() || o.attn_points.front().shape.causal) ? "yes" : "no",
              ctx.warmup(fam.default_warmup), ctx.warmup_seconds(fam.default_warmup_s) * 1000, to_string(o.check));
  std::printf("# %-24s %-20s %4s %4s %10s %10s %8s %8s %9s %7s %s\n", "label", "BxSxHQxHKVxD", "bufs", "reps",
              "fwd_ms", "bwd_ms", "fwd_TF", "bwd_TF", "total_TF", "#wrong", "check");
  std::fflush(stdout);
}

void print_plan(AttentionRunner& runner, const AttnPointRun& pt) {
  const nlohmann::json& plan = pt.plan;
  std::printf("#   %s: cuDNN engine fwd %lld (heuristic #%d), bwd %lld (heuristic #%d), graph '%s', "
              "workspace %.0f MiB, plans built in %.2f s\n",
              pt.st.c_str(), static_cast<long long>(plan["forward"].value("engine_global_index", -1)),
              plan["forward"].value("heuristic_index", -1),
              static_cast<long long>(plan["backward"].value("engine_global_index", -1)),
              plan["backward"].value("heuristic_index", -1), plan["forward"].value("graph_variant", "").c_str(),
              static_cast<double>(runner.cudnn().workspace_bytes()) / 1048576.0, runner.cudnn().build_seconds());
  std::fflush(stdout);
}

void print_row(const AttnPointRun& pt, int reps, const std::array<PointRecord, 3>& recs, const AttnCheckSet& chk) {
  const PointRecord& rf = recs[0];
  const PointRecord& rb = recs[1];
  const PointRecord& rt = recs[2];
  std::printf("  %-24s %-20s %4d %4d %10.3f %10.3f %8.1f %8.1f %9.1f %7lld %s\n", pt.shape->label.c_str(),
              pt.st.c_str(), pt.sets, reps, rf.time.median_us / 1000, rb.time.median_us / 1000, rf.tflops, rb.tflops,
              rt.tflops, static_cast<long long>(rt.wrong), rt.correct ? "OK" : "WRONG");
  if (!rt.correct) {
    for (int i = 0; i < kAttnOuts; ++i) {
      const Comparison& c = chk.out[static_cast<size_t>(i)];
      std::printf("#     %-3s checked %lld wrong %lld nonfinite %lld max err/tol %.3g rel L2 %.3g (limit %.0e)\n",
                  to_string(static_cast<AttnOut>(i)), static_cast<long long>(c.checked),
                  static_cast<long long>(c.wrong), static_cast<long long>(c.nonfinite), c.max_err_ratio, c.rel_l2,
                  c.rel_l2_limit);
    }
  }
  std::fflush(stdout);
}

}  // namespace

void run_attention_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (ctx.trace) ctx.trace->thread_name(kComputeTid, "compute stream (cuDNN)");
  auto runner_owner = std::make_unique<AttentionRunner>(stream);
  AttentionRunner& runner = *runner_owner;

  if (ctx.rank == 0) print_header(ctx);
  for (const AttentionPoint& shape : o.attn_points) {
    AttnPointRun pt;
    pt.shape = &shape;
    pt.p = AttentionProblem::of(shape.shape, o.attn_scale);
    pt.p.validate();
    pt.st = pt.p.shape_text();
    pt.kf = "attention/fwd/" + pt.st;
    pt.kb = "attention/bwd/" + pt.st;
    pt.kt = "attention/fwd+bwd/" + pt.st;
    if (ctx.skip.count(pt.kf) && ctx.skip.count(pt.kb) && ctx.skip.count(pt.kt)) {
      if (ctx.rank == 0) std::printf("  %-24s %-20s  (resumed: already measured)\n", shape.label.c_str(), pt.st.c_str());
      continue;
    }
    pt.op = "bench.attention." + pt.st;
    pt.full = check_full(o.check, pt.p.s, kAttnFullCheckMaxSeq);
    if (!setup_point(ctx, runner, stream, pt)) continue;
    if (ctx.rank == 0) print_plan(runner, pt);

    const AttnTiming t = time_point(ctx, runner, stream, pt);
    const AttnCheckSet chk = check_point(ctx, runner, pt, t.reps);
    std::array<PointRecord, 3> recs = make_records(pt, t, chk);
    const nlohmann::json targs = {{"shape", pt.st}, {"label", shape.label}, {"dtype", "bf16"}};
    trace_repetitions(ctx, "L.attn.core.fwd", "attention", kComputeTid, t.base_us, *t.evf, targs);
    trace_repetitions(ctx, "L.attn.core.bwd", "attention", kComputeTid, t.base_us, *t.evb, targs);
    if (ctx.rank == 0) print_row(pt, t.reps, recs, chk);
    for (PointRecord& rec : recs) ctx.finish_point(rec);
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  runner_owner.reset();
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
