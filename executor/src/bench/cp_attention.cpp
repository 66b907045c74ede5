// `lcm-exec bench cp-attention`: ring attention over the CP group of --layout with
// load-balanced causal chunks (cp_attention.hpp, cp_ring.hpp). Per shape: forward and
// backward with the ring's communication overlapped, then the same steps without it
// (compute only); exposed communication = total - compute-only. Per-step compute and
// per-message communication times go to the summary and the trace.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "infra/run_context.hpp"
#include "kernels/cp_ring.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;
constexpr int kCommTid = 2;
constexpr int kMinReps = 5;
constexpr int64_t kFullRefMaxSeq = 4096;

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::vector<double> medians(const std::vector<std::vector<double>>& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(compute_stats(x).median_us);
  return out;
}

}  // namespace

void run_cp_attention_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kCpAttention);
  const Layout& layout = ctx.layout;
  const Group g = o.group;
  int cp = 1, cp_rank = 0;
  std::vector<int> cp_ranks{ctx.rank};
  Comms* comms = nullptr;
  ncclComm_t comm = nullptr;
  if (ctx.world > 1) {
    ctx.comms = std::make_unique<Comms>(layout, ctx.rank, o.timeout_s, std::vector<Group>{g});
    comms = ctx.comms.get();
    comm = comms->get(g);
    cp_rank = comms->split(g).key;
    cp_ranks = comms->split(g).ranks;
    cp = static_cast<int>(cp_ranks.size());
  }
  cudaStream_t compute = nullptr, commst = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&commst, cudaStreamNonBlocking));
  if (ctx.trace) {
    ctx.trace->thread_name(kComputeTid, "compute stream (cuDNN)");
    ctx.trace->thread_name(kCommTid, "nccl " + std::string(to_string(g)) + " [" + ranks_text(cp_ranks) + "] (comm stream)");
  }
  auto ring_owner = std::make_unique<CpRing>(compute, commst, comms, comm, cp, cp_rank, o.timeout_s);
  CpRing& ring = *ring_owner;
  const int warmup = ctx.warmup(fam.default_warmup);
  const double warmup_s = ctx.warmup_seconds(fam.default_warmup_s);
  const int iters = ctx.iters(fam.default_iters);
  std::vector<int> peers;
  for (int r : cp_ranks)
    if (r != ctx.rank) peers.push_back(r);
  const auto wait = [&](const std::string& what, const std::function<std::string()>& detail = {}) {
    for (cudaStream_t s : {commst, compute}) {
      if (comms) comms->wait_stream(s, what, detail);
      else wait_stream(s, o.timeout_s, what);
    }
  };

  if (ctx.rank == 0) {
    std::printf("# lcm-exec bench cp-attention: %d rank(s), group %s of %d [ranks %s], %s, cuDNN %s, bf16, causal, "
                "load-balanced chunks (rank r: chunks r and 2cp-1-r), warm-up >= %d reps and >= %.0f ms\n",
                ctx.world, to_string(g), cp, ranks_text(cp_ranks).c_str(), ctx.device.name.c_str(),
                cudnn_version_string(cudnn_runtime_version()).c_str(), warmup, warmup_s * 1000);
    std::fflush(stdout);
  }
  for (const AttentionPoint& shape : o.attn_points) {
    const AttentionProblem full = AttentionProblem::of(shape.shape, o.attn_scale);  // b = 1, causal (options.cpp)
    full.validate();
    CpLayout{full.s, cp, cp_rank}.validate();
    const std::string st = full.shape_text() + ".cp" + std::to_string(cp);
    const std::string kp = "cp-attention/" + st + "/";
    if (ctx.skip.count(kp + "L.attn.cp.ring.fwd+bwd")) {
      if (ctx.rank == 0) std::printf("  %-24s %-24s  (resumed: already measured)\n", shape.label.c_str(), st.c_str());
      continue;
    }
    const std::string op = "bench.cp-attention." + st;
    size_t free_b = 0, total_b = 0;
    LCM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double local_set = CpRing::device_bytes(full, cp, 2) - CpRing::device_bytes(full, cp, 1);
    int sets = rotation_sets(local_set, ctx.rotate_bytes(), 8);
    const double verify_bytes = full.set_bytes() + static_cast<double>(full.q_elems()) * 4 + 1e9;
    while (sets > 1 && CpRing::device_bytes(full, cp, sets) + verify_bytes > 0.85 * static_cast<double>(free_b)) --sets;
    const bool fits = CpRing::device_bytes(full, cp, sets) + verify_bytes <= 0.9 * static_cast<double>(free_b);
    if (fits) ring.setup(full, sets, o.seed + static_cast<uint64_t>(ctx.point_index) * 16);
    const bool ok_here = fits && ring.supported();
    if (allreduce_sum(ok_here ? 1 : 0) != ctx.world) {
      if (ctx.rank == 0)
        std::printf("  %-24s %-24s  (skipped: %s)\n", shape.label.c_str(), st.c_str(),
                    !fits ? "does not fit in memory" : !ok_here ? ring.unsupported_reason().c_str() : "not supported on another rank");
      continue;
    }

    // Warm-up (with communication): forward + backward until warmup_s.
    int warm_done = 0;
    double rep_s = 0;
    const auto tw = std::chrono::steady_clock::now();
    while (true) {
      const bool more = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count() < warmup_s;
      if (allreduce_sum(warm_done < warmup || more ? 1 : 0) == 0) break;
      const auto tb = std::chrono::steady_clock::now();
      ring.forward(warm_done % sets, true);
      ring.backward(warm_done % sets, true);
      wait(op + " (warm-up)");
      rep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count();
      ++warm_done;
    }
    int reps = iters;
    if (o.point_ms > 0 && rep_s > 0) reps = std::min(iters, std::max(kMinReps, static_cast<int>(o.point_ms / 1000.0 / rep_s)));
    reps = std::max(static_cast<int>(allreduce_sum(reps) / ctx.world), sets);
    ring.begin_timing(reps);
    ring.poison_outputs();

    ArrivalProbe probe(peers, 300 + ctx.point_index % 30000);
    probe.post();
    LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    ctx.inject_before_timed_loop(op);
    probe.arrive();
    LCM_CUDA_CHECK(cudaStreamSynchronize(compute));
    const double base_us = ctx.now_us();
    ring.record_base(compute);  // one origin for the compute and the comm events
    for (int rep = 0; rep < reps; ++rep) {
      ring.forward(rep % sets, true, rep);
      ring.backward(rep % sets, true, rep);
    }
    const std::string what = op + " [ring attention, comm " + std::string(to_string(g)) + " ranks " + ranks_text(cp_ranks) + "]";
    wait(what, [&] {
      const std::vector<int> miss = probe.missing();
      return miss.empty() ? std::string("every rank of the group reached this op")
                          : "rank(s) " + ranks_text(miss) + " never reached this op (stalled or dead)";
    });
    probe.finish();
    const int last = (reps - 1) % sets;
    // Compute only: the same steps on the local K, V, no communication.
    if (cp > 1) {
      for (int rep = 0; rep < reps; ++rep) {
        ring.forward(rep % sets, false, rep);
        ring.backward(rep % sets, false, rep);
      }
      wait(op + " (compute only)");
      // the outputs of the last ring pass are overwritten: run it once more, untimed, for the check
      ring.forward(last, true);
      ring.backward(last, true);
      wait(op + " (check pass)");
    }
    const Clocks clocks = query_clocks(ctx.device.pci_bus_id);
    if (ctx.inject_corrupt()) ring.corrupt_dq(last, 0, 1.0e4f);
    const bool full_ref = check_full(o.check, full.s, kFullRefMaxSeq);
    const CpCheck chk = ring.verify(last, full_ref, o.seed + static_cast<uint64_t>(ctx.point_index));
    const int64_t wrong = allreduce_sum(chk.wrong()), checked = allreduce_sum(chk.checked());

    const CpPassTimes fw = ring.times(false, true), bw = ring.times(true, true);
    const CpPassTimes fc = cp > 1 ? ring.times(false, false) : fw, bc = cp > 1 ? ring.times(true, false) : bw;
    const TimeStats tf = compute_stats(fw.total_us), tb = compute_stats(bw.total_us);
    const TimeStats tfc = compute_stats(fc.total_us), tbc = compute_stats(bc.total_us);
    std::vector<double> tt(fw.total_us.size());
    for (size_t i = 0; i < tt.size(); ++i) tt[i] = fw.total_us[i] + bw.total_us[i];
    const auto msgs = [](const CpPassTimes& t) {
      std::vector<double> all;
      for (const auto& m : t.comm_us) all.insert(all.end(), m.begin(), m.end());
      return all;
    };
    const double kv_bytes = static_cast<double>(full.s / cp * full.hkv * full.d) * 2 * 2;  // K and V of 2c rows
    std::vector<std::string> kinds;
    for (int i = 0; i < cp; ++i) kinds.push_back(to_string(ring.layout().step_kind(i)));
    const nlohmann::json shape_json = {{"b", 1}, {"s", full.s}, {"hq", full.hq}, {"hkv", full.hkv}, {"d", full.d},
                                       {"cp", cp}, {"chunk", ring.layout().chunk()}, {"local_rows", ring.layout().local_rows()},
                                       {"global_rows_of_local_chunks", {ring.layout().global_row(0), ring.layout().global_row(ring.layout().chunk())}},
                                       {"step_kinds", kinds}, {"kv_message_bytes", kv_bytes},
                                       {"fwd_flops_per_rank", full.fwd_flops() / cp}};
    const nlohmann::json check_json = to_json(chk);
    const nlohmann::json steps = {
        {"fwd", {{"compute_us", medians(fw.compute_us)}, {"comm_us", medians(fw.comm_us)},
                 {"compute_only_step_us", medians(fc.compute_us)}}},
        {"bwd", {{"compute_us", medians(bw.compute_us)}, {"comm_us", medians(bw.comm_us)},
                 {"compute_only_step_us", medians(bc.compute_us)},
                 {"comm_order", "kv for steps 0..cp-2, then dK/dV after steps 0..cp-1"}}}};
    const double exp_f = tf.median_us - tfc.median_us, exp_b = tb.median_us - tbc.median_us;
    const auto record = [&](const std::string& name, const TimeStats& t, bool is_comm, double flops) {
      PointRecord rec;
      rec.key = kp + name;
      rec.family = "cp-attention";
      rec.op = name;
      rec.dtype = "bf16";
      rec.shape = full.shape_text();
      rec.label = shape.label + ".cp" + std::to_string(cp);
      rec.group = is_comm ? to_string(g) : "";
      rec.group_size = cp;
      rec.size_bytes = is_comm ? static_cast<int64_t>(kv_bytes) : 0;
      rec.warmup = warm_done;
      rec.reps = reps;
      rec.buffers = sets;
      rec.time = t;
      rec.tflops = flops > 0 && t.median_us > 0 ? flops / (t.median_us * 1e-6) / 1e12 : 0;
      rec.per_rank_median_us = allgather_double(t.median_us);
      rec.wrong = wrong;
      rec.checked = checked;
      rec.correct = wrong == 0;
      rec.extra = {{"cp_attention", shape_json}, {"steps", steps},
                   {"exposed_comm_us", {{"fwd", exp_f}, {"bwd", exp_b}, {"fwd+bwd", exp_f + exp_b}}},
                   {"compute_only_us", {{"fwd", tfc.median_us}, {"bwd", tbc.median_us}}},
                   {"check_mode", full_ref ? "full reference" : "sampled reference"}, {"check", check_json},
                   {"clocks_after", to_json(clocks)}, {"cudnn", ring.describe()}};
      return rec;
    };
    const double ff = full.fwd_flops() / cp, fb = full.bwd_flops() / cp;
    std::vector<PointRecord> recs;
    recs.push_back(record("L.attn.core.fwd", tfc, false, ff));
    recs.back().extra["note"] = "compute only: the ring's steps on local K, V without communication";
    recs.push_back(record("L.attn.core.bwd", tbc, false, fb));
    recs.back().extra["note"] = "compute only: the ring's steps on local K, V without communication";
    if (cp > 1) {
      recs.push_back(record("L.attn.cp.kv.p2p.fwd", compute_stats(msgs(fw)), true, 0));
      recs.back().extra["note"] = "one K+V exchange (ncclSend/ncclRecv to the next rank, from the previous), cp-1 per pass";
      recs.push_back(record("L.attn.cp.kv.p2p.bwd", compute_stats(msgs(bw)), true, 0));
      recs.back().extra["note"] = "one exchange of K+V (cp-1 per pass) or of the dK+dV sums (cp per pass), overlapped";
    }
    recs.push_back(record("L.attn.cp.ring.fwd", tf, false, ff));
    recs.push_back(record("L.attn.cp.ring.bwd", tb, false, fb));
    recs.push_back(record("L.attn.cp.ring.fwd+bwd", compute_stats(tt), false, ff + fb));
    for (PointRecord& r : recs)
      if (r.op.find(".ring.") != std::string::npos)
        r.extra["note"] = "the whole ring pass with communication overlapped (first to last event on the compute stream)";
    // Trace: per step compute and per message communication events of the ring passes.
    // Trace: per step compute and per message communication events of the timed ring passes.
    for (bool bwd : {false, true}) {
      const char* pass = bwd ? "bwd" : "fwd";
      const auto cs = ring.compute_series(bwd, true);
      for (size_t i = 0; i < cs.size(); ++i)
        trace_repetitions(ctx, std::string("L.attn.core.") + pass, "attention", kComputeTid, base_us, *cs[i],
                          {{"step", i}, {"kind", kinds[i]}, {"shape", st}});
      const auto ms = ring.comm_series(bwd, true);
      for (size_t i = 0; i < ms.size(); ++i)
        trace_repetitions(ctx, std::string("L.attn.cp.kv.p2p.") + pass, "nccl", kCommTid, base_us, *ms[i],
                          {{"message", i}, {"Collective name", "send_recv"}, {"Group size", cp},
                           {"Process Group Name", to_string(g)}, {"Process Group Ranks", cp_ranks}, {"Rank", cp_rank},
                           {"bytes", kv_bytes}, {"shape", st}});
    }
    if (ctx.rank == 0) {
      std::printf("  %-24s %-24s bufs %d reps %d  fwd ring %8.1f us (compute only %8.1f, exposed comm %7.1f)  bwd ring "
                  "%8.1f us (compute only %8.1f, exposed comm %7.1f)  %s\n",
                  shape.label.c_str(), st.c_str(), sets, reps, tf.median_us, tfc.median_us, exp_f, tb.median_us,
                  tbc.median_us, exp_b, wrong == 0 ? "OK" : "WRONG");
      const auto v = [](const std::vector<double>& x) {
        std::string s;
        for (double d : x) s += (s.empty() ? "" : " ") + std::to_string(static_cast<int64_t>(std::lround(d)));
        return s;
      };
      std::printf("#   per step (us, median): fwd compute [%s] comm [%s]; bwd compute [%s] comm [%s]\n",
                  v(medians(fw.compute_us)).c_str(), v(medians(fw.comm_us)).c_str(), v(medians(bw.compute_us)).c_str(),
                  v(medians(bw.comm_us)).c_str());
      if (wrong != 0) std::printf("#   check: %s\n", check_json.dump().c_str());
      std::fflush(stdout);
    }
    for (size_t i = 0; i + 1 < recs.size(); ++i)
      if (ctx.sink) ctx.sink->add(recs[i]);
    ctx.finish_point(recs.back());
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(compute));
  LCM_CUDA_CHECK(cudaStreamSynchronize(commst));
  ring_owner.reset();
  cudaStreamDestroy(compute);
  cudaStreamDestroy(commst);
}

}  // namespace lcm::exec
