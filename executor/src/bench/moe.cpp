// `lcm-exec bench moe`: one MoE layer, forward and backward, per (capacity factor, routing
// skew) point; per-phase CUDA-event times under the model's op names, the dropped-token rate
// and the per-expert loads (moe.hpp, moe_layer.hpp, docs/executor.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"
#include "kernels/moe_layer.hpp"
#include "lcm/executor/results.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::exec {

namespace {

constexpr int kComputeTid = 1;
constexpr int kMinReps = 5;
constexpr int64_t kFullCheckMaxTokens = 512;

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

void run_moe_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kMoe);
  const Layout& layout = ctx.layout;
  const int ep = layout.mesh.ep;
  Comms* comms = nullptr;
  ncclComm_t ep_comm = nullptr;
  int ep_rank = 0;
  std::vector<int> ep_ranks{ctx.rank};
  if (ctx.world > 1) {
    ctx.comms = std::make_unique<Comms>(layout, ctx.rank, o.timeout_s, std::vector<Group>{Group::kEp});
    comms = ctx.comms.get();
    ep_comm = comms->get(Group::kEp);
    ep_rank = comms->split(Group::kEp).key;
    ep_ranks = comms->split(Group::kEp).ranks;
  }
  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (ctx.trace) ctx.trace->thread_name(kComputeTid, "compute stream (MoE layer; NCCL ep all-to-all on it)");
  auto layer_owner = std::make_unique<MoeLayer>(stream, comms, ep_comm, ep_rank, ctx.rank, o.timeout_s);
  MoeLayer& layer = *layer_owner;
  const int warmup = ctx.warmup(fam.default_warmup);
  const double warmup_s = ctx.warmup_seconds(fam.default_warmup_s);
  const int iters = ctx.iters(fam.default_iters);
  std::vector<int> peers;
  for (int r : ep_ranks)
    if (r != ctx.rank) peers.push_back(r);

  if (ctx.rank == 0) {
    std::printf("# lcm-exec bench moe: %d rank(s), EP group of %d [ranks %s], %s, bf16, SwiGLU experts, warm-up >= %d "
                "reps and >= %.0f ms\n",
                ctx.world, ep, ranks_text(ep_ranks).c_str(), ctx.device.name.c_str(), warmup, warmup_s * 1000);
    std::fflush(stdout);
  }
  for (double cf : o.moe.capacity_factors) {
    for (const RoutingSkew& skew : o.moe.skews) {
      MoeProblem p;
      p.tokens = o.moe.tokens;
      p.hidden = o.moe.hidden;
      p.ffn = o.moe.ffn;
      p.experts = o.moe.experts;
      p.topk = o.moe.topk;
      p.ep = ep;
      p.groups = o.moe.groups;
      p.topk_groups = o.moe.topk_groups;
      p.score = o.moe.score;
      p.policy = o.moe.drop_policy;
      p.cf = cf;
      p.skew = skew;
      p.validate();
      const std::string pt = p.point_text();
      const std::string key_prefix = "moe/" + pt + "/";
      const std::string last_key = key_prefix + "L.moe.layer.fwd+bwd";
      if (ctx.skip.count(last_key)) {
        if (ctx.rank == 0) std::printf("  %s  (resumed: already measured)\n", pt.c_str());
        continue;
      }
      const std::string op = "bench.moe." + pt;
      size_t free_b = 0, total_b = 0;
      LCM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      int sets = rotation_sets(p.set_bytes(), ctx.rotate_bytes(), 8);
      while (sets > 1 && MoeLayer::device_bytes(p, sets) > 0.85 * static_cast<double>(free_b)) --sets;
      const bool fits = MoeLayer::device_bytes(p, sets) <= 0.9 * static_cast<double>(free_b);
      const int fit_all = static_cast<int>(allreduce_sum(fits ? 1 : 0));
      if (fit_all != ctx.world) {
        if (ctx.rank == 0)
          std::printf("  %s  (skipped: needs %.1f GiB per rank, %.1f GiB free)\n", pt.c_str(),
                      MoeLayer::device_bytes(p, sets) / 1073741824.0, static_cast<double>(free_b) / 1073741824.0);
        continue;
      }
      layer.setup(p, sets, o.seed);

      // Warm-up: forward + backward, repeated until warmup_s has passed.
      int warm_done = 0;
      double rep_s = 0;
      const auto tw = std::chrono::steady_clock::now();
      while (true) {
        const bool more_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count() < warmup_s;
        const int go = static_cast<int>(allreduce_sum(warm_done < warmup || more_time ? 1 : 0));  // ranks agree
        if (go == 0) break;
        const auto tb = std::chrono::steady_clock::now();
        layer.forward(warm_done % sets);
        layer.backward(warm_done % sets);
        if (comms) comms->wait_stream(stream, op + " (warm-up)");
        else wait_stream(stream, o.timeout_s, op + " (warm-up)");
        rep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count();
        ++warm_done;
      }
      int reps = iters;
      if (o.point_ms > 0 && rep_s > 0)
        reps = std::min(iters, std::max(kMinReps, static_cast<int>(o.point_ms / 1000.0 / rep_s)));
      reps = static_cast<int>(allreduce_sum(reps) / ctx.world);  // one count for every rank
      reps = std::max(reps, sets);
      layer.poison_outputs();

      std::vector<std::unique_ptr<EventSeries>> ev;
      for (int i = 0; i < kMoePhases; ++i) ev.push_back(std::make_unique<EventSeries>(reps));
      EventSeries evf(reps), evb(reps);
      ArrivalProbe probe(peers, 200 + ctx.point_index % 30000);
      probe.post();
      LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      ctx.inject_before_timed_loop(op);
      probe.arrive();
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const double base_us = ctx.now_us();
      for (auto& e : ev) e->record_base(stream);
      evf.record_base(stream);
      int rep = 0;
      const PhaseHook hook = [&](MoePhase ph, bool start) {
        EventSeries& e = *ev[static_cast<size_t>(ph)];
        if (start) e.record_start(rep, stream);
        else e.record_end(rep, stream);
      };
      std::vector<double> dropped;
      for (rep = 0; rep < reps; ++rep) {
        evf.record_start(rep, stream);
        layer.forward(rep % sets, hook);
        evf.record_end(rep, stream);
        dropped.push_back(static_cast<double>(layer.dropped()));
        evb.record_start(rep, stream);
        layer.backward(rep % sets, hook);
        evb.record_end(rep, stream);
      }
      const std::string what = op + " [MoE layer, ep group ranks " + ranks_text(ep_ranks) + "]";
      if (comms)
        comms->wait_stream(stream, what, [&] {
          std::string d = std::to_string(evb.completed()) + " of " + std::to_string(reps) + " repetitions finished";
          const std::vector<int> miss = probe.missing();
          if (!miss.empty()) d += "; rank(s) " + ranks_text(miss) + " never reached this op (stalled or dead)";
          return d;
        });
      else
        wait_stream(stream, o.timeout_s, what);
      probe.finish();
      const Clocks clocks = query_clocks(ctx.device.pci_bus_id);

      if (ctx.inject_corrupt()) layer.corrupt_output(0, 0, 1.0e4f);
      const int last = (reps - 1) % sets;
      const bool full = check_full(o.check, p.tokens, kFullCheckMaxTokens);
      const MoeCheck chk = layer.verify(last, full, o.seed + static_cast<uint64_t>(ctx.point_index));

      // Loads and drops (the last repetition's routing of this rank's group; every rank's too).
      const std::vector<int32_t>& counts = layer.counts();
      const std::vector<int32_t>& kept = layer.kept();
      std::vector<int64_t> loads(counts.begin(), counts.end());
      int64_t total = 0, drop = 0;
      for (size_t e = 0; e < counts.size(); ++e) {
        total += counts[e];
        drop += counts[e] - kept[e];
      }
      const std::vector<double> drop_rates = allgather_double(total > 0 ? static_cast<double>(drop) / total : 0.0);
      const std::vector<double> recv_rows = allgather_double(static_cast<double>(layer.received_rows()));
      std::vector<double> all_loads(counts.size());
      for (size_t e = 0; e < counts.size(); ++e) all_loads[e] = static_cast<double>(counts[e]);
      std::vector<double> summed(all_loads.size());
      LCM_MPI_CHECK(MPI_Allreduce(all_loads.data(), summed.data(), static_cast<int>(all_loads.size()), MPI_DOUBLE, MPI_SUM,
                                  MPI_COMM_WORLD));
      double mean_drop = 0;
      for (double d : drop_rates) mean_drop += d / static_cast<double>(drop_rates.size());
      const double expected = expected_drop_fraction(p);
      std::string loads_file;
      if (ctx.rank == 0 && !o.out_dir.empty()) {
        loads_file = "loads_" + pt + ".txt";
        for (char& c : loads_file)
          if (c == '/' || c == ':') c = '_';
        write_file_atomic(o.out_dir + "/" + loads_file,
                          format_loads(loads, "lcm-exec bench moe " + pt + ", rank 0: assignments per expert of one "
                                              "routing group of " + std::to_string(p.tokens) + " tokens x top-" +
                                              std::to_string(p.topk) + " (before drops), last repetition\n"
                                              "read with: lcm capacity --loads FILE"));
      }

      const int64_t wrong = allreduce_sum(chk.wrong());
      const int64_t checked = allreduce_sum(chk.checked());
      const nlohmann::json moe_json = {
          {"tokens", p.tokens}, {"hidden", p.hidden}, {"ffn", p.ffn}, {"experts", p.experts}, {"topk", p.topk},
          {"ep", p.ep}, {"local_experts", p.local_experts()}, {"groups", p.groups}, {"topk_groups", p.topk_groups},
          {"score", std::string(to_string(p.score))}, {"capacity_factor", p.cf > 0 ? nlohmann::json(p.cf) : nlohmann::json("none")},
          {"capacity", p.capacity()}, {"drop_policy", to_string(p.policy)}, {"skew", p.skew.text()},
          {"activation", "swiglu"}, {"dtype", "bf16"}};
      const nlohmann::json routing_json = {
          {"dropped_fraction_rank0", total > 0 ? static_cast<double>(drop) / total : 0.0},
          {"dropped_fraction_per_rank", drop_rates},
          {"dropped_fraction_mean", mean_drop},
          {"expected_dropped_fraction_model", std::isnan(expected) ? nlohmann::json(nullptr) : nlohmann::json(expected)},
          {"loads_rank0", loads},
          {"loads_all_ranks", summed},
          {"received_rows_per_rank", recv_rows},
          {"loads_file", loads_file}};
      const nlohmann::json check_json = to_json(chk);
      const std::string ranks = ranks_text(ep_ranks);
      const auto record = [&](const std::string& name, const TimeStats& t, bool comm) {
        PointRecord rec;
        rec.key = key_prefix + name;
        rec.family = "moe";
        rec.op = name;
        rec.dtype = "bf16";
        rec.shape = p.config_text();
        rec.label = pt;
        rec.group = comm ? "ep" : "";
        rec.group_size = ep;
        rec.warmup = warm_done;
        rec.reps = reps;
        rec.buffers = sets;
        rec.time = t;
        rec.per_rank_median_us = allgather_double(t.median_us);
        rec.wrong = wrong;
        rec.checked = checked;
        rec.correct = wrong == 0;
        rec.extra = {{"moe", moe_json}, {"routing", routing_json}, {"check_mode", full ? "full" : "sampled"},
                     {"check", check_json}, {"clocks_after", to_json(clocks)}, {"ep_ranks", ep_ranks}};
        return rec;
      };
      std::vector<PointRecord> recs;
      TimeStats fwd_sum_stats, bwd_sum_stats;
      std::vector<double> fwd_sum(static_cast<size_t>(reps), 0.0), bwd_sum(static_cast<size_t>(reps), 0.0);
      if (ctx.rank == 0)
        std::printf("# %s: %d buffer set(s), %d reps, capacity %lld, dropped %.4f (rank 0; mean over ranks %.4f; model "
                    "expects %.4f), check %s\n#   %-32s %10s %10s %10s\n",
                    pt.c_str(), sets, reps, static_cast<long long>(p.capacity()),
                    total > 0 ? static_cast<double>(drop) / total : 0.0, mean_drop, expected, full ? "full" : "sampled",
                    "op", "median_us", "p10_us", "p90_us");
      for (int i = 0; i < kMoePhases; ++i) {
        const MoePhase ph = static_cast<MoePhase>(i);
        if (is_comm(ph) && ep == 1) continue;
        const std::vector<double> d = ev[static_cast<size_t>(i)]->durations_us();
        for (size_t r = 0; r < d.size(); ++r) (is_forward(ph) ? fwd_sum : bwd_sum)[r] += d[r];
        recs.push_back(record(op_name(ph), compute_stats(d), is_comm(ph)));
        trace_repetitions(ctx, op_name(ph), is_comm(ph) ? "nccl" : "moe", kComputeTid, base_us, *ev[static_cast<size_t>(i)],
                          {{"point", pt}});
        if (ctx.rank == 0)
          std::printf("    %-32s %10.1f %10.1f %10.1f\n", op_name(ph), recs.back().time.median_us, recs.back().time.p10_us,
                      recs.back().time.p90_us);
      }
      const std::vector<double> df = evf.durations_us(), db = evb.durations_us();
      std::vector<double> dt(df.size());
      for (size_t r = 0; r < df.size(); ++r) dt[r] = df[r] + db[r];
      PointRecord rf = record("L.moe.layer.fwd", compute_stats(df), false);
      PointRecord rb = record("L.moe.layer.bwd", compute_stats(db), false);
      PointRecord rs1 = record("L.moe.phases.fwd", compute_stats(fwd_sum), false);
      PointRecord rs2 = record("L.moe.phases.bwd", compute_stats(bwd_sum), false);
      PointRecord rt = record("L.moe.layer.fwd+bwd", compute_stats(dt), false);
      for (PointRecord* r : {&rf, &rb, &rs1, &rs2, &rt})
        r->extra["note"] = r->op.find("phases") != std::string::npos
                               ? "sum of the per-phase event times (host gaps excluded)"
                               : "first to last event of the pass, host gaps (the dispatch's host sync) included";
      if (ctx.rank == 0) {
        for (const PointRecord* r : {&rs1, &rf, &rs2, &rb, &rt})
          std::printf("    %-32s %10.1f %10.1f %10.1f\n", r->op.c_str(), r->time.median_us, r->time.p10_us, r->time.p90_us);
        std::printf("#   check: %s (%lld wrong of %lld checked)\n", wrong == 0 ? "OK" : "WRONG", static_cast<long long>(wrong),
                    static_cast<long long>(checked));
        if (wrong != 0) std::printf("#   %s\n", check_json.dump().c_str());
        std::fflush(stdout);
      }
      recs.push_back(rf);
      recs.push_back(rb);
      recs.push_back(rs1);
      recs.push_back(rs2);
      recs.push_back(rt);  // last: its key marks the point finished for --resume
      for (size_t i = 0; i + 1 < recs.size(); ++i)
        if (ctx.sink) ctx.sink->add(recs[i]);
      ctx.finish_point(recs.back());
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  layer_owner.reset();
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
