// `lcm-exec bench collectives`: the CollOp table and the sweep over sizes.
#include "lcm/executor/collectives.hpp"
#include "infra/hold.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

size_t same(const CollArgs& a) { return a.total; }
size_t chunk(const CollArgs& a) { return a.chunk; }

ncclResult_t launch_all_reduce(const CollArgs& a) {
  return ncclAllReduce(a.send, a.recv, a.total, a.type, ncclSum, a.comm, a.stream);
}
ncclResult_t launch_all_gather(const CollArgs& a) {
  return ncclAllGather(a.send, a.recv, a.chunk, a.type, a.comm, a.stream);
}
ncclResult_t launch_reduce_scatter(const CollArgs& a) {
  return ncclReduceScatter(a.send, a.recv, a.chunk, a.type, ncclSum, a.comm, a.stream);
}
// Grouped ncclSend/ncclRecv, block r of the send buffer to rank r (torch's all_to_all_single).
ncclResult_t launch_all_to_all(const CollArgs& a) {
  ncclResult_t first = ncclGroupStart();
  const size_t block = a.chunk * a.elem_bytes;
  for (int r = 0; r < a.nranks && first == ncclSuccess; ++r) {
    first = ncclSend(static_cast<const char*>(a.send) + static_cast<size_t>(r) * block, a.chunk, a.type, r, a.comm, a.stream);
    if (first == ncclSuccess)
      first = ncclRecv(static_cast<char*>(a.recv) + static_cast<size_t>(r) * block, a.chunk, a.type, r, a.comm, a.stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}
// Ring exchange as nccl-tests' sendrecv: send to rank+1, receive from rank-1.
ncclResult_t launch_send_recv(const CollArgs& a) {
  ncclResult_t first = ncclGroupStart();
  if (first == ncclSuccess) first = ncclSend(a.send, a.total, a.type, (a.rank + 1) % a.nranks, a.comm, a.stream);
  if (first == ncclSuccess)
    first = ncclRecv(a.recv, a.total, a.type, (a.rank - 1 + a.nranks) % a.nranks, a.comm, a.stream);
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

constexpr CollOp kOps[] = {
    {"all_reduce", "allreduce", Collective::kAllReduce, "sum", kernels::CollCheck::kAllReduce, false, same, same,
     launch_all_reduce},
    {"all_gather", "allgather", Collective::kAllGather, "none", kernels::CollCheck::kAllGather, true, chunk, same,
     launch_all_gather},
    {"reduce_scatter", "reducescatter", Collective::kReduceScatter, "sum", kernels::CollCheck::kReduceScatter, true,
     same, chunk, launch_reduce_scatter},
    {"all_to_all", "alltoall", Collective::kAllToAll, "none", kernels::CollCheck::kAllToAll, true, same, same,
     launch_all_to_all},
    {"send_recv", "sendrecv", Collective::kSendRecv, "none", kernels::CollCheck::kSendRecv, false, same, same,
     launch_send_recv},
};

int group_tid(Group g) { return 10 + static_cast<int>(g); }

struct Buffers {
  std::vector<void*> send, recv;
  ~Buffers() {
    // While a failure unwinds, a collective may still be running on these buffers, and
    // cudaFree would wait for it forever; the process is about to exit, so leave them.
    if (std::uncaught_exceptions() > 0) return;
    for (void* p : send) cudaFree(p);
    for (void* p : recv) cudaFree(p);
  }
};

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

std::span<const CollOp> coll_ops() { return kOps; }

const CollOp* find_coll_op(std::string_view name) {
  for (const CollOp& c : kOps)
    if (name == c.name || name == c.trace_name) return &c;
  return nullptr;
}

void run_collectives_bench(RunContext& ctx) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kCollectives);
  const Layout& layout = ctx.layout;
  std::vector<const CollOp*> ops;
  for (const CollOp& c : kOps)
    if (o.collectives.empty()) ops.push_back(&c);
  for (Collective kind : o.collectives)
    for (const CollOp& c : kOps)
      if (c.kind == kind) ops.push_back(&c);
  const bool bf16 = o.coll_dtype == CollDType::kBf16;
  const kernels::ElemType et = bf16 ? kernels::ElemType::kBf16 : kernels::ElemType::kF32;
  const ncclDataType_t nt = bf16 ? ncclBfloat16 : ncclFloat;
  const size_t es = kernels::elem_size(et);

  ctx.comms = std::make_unique<Comms>(layout, ctx.rank, o.timeout_s, std::vector<Group>{o.group});
  Comms& comms = *ctx.comms;
  const GroupSplit& split = comms.split(o.group);
  const ncclComm_t comm = comms.get(o.group);
  const int n = static_cast<int>(split.ranks.size());
  const int me = split.key;
  const std::string gname = to_string(o.group);
  const int tid = group_tid(o.group);
  if (ctx.trace) ctx.trace->thread_name(tid, "nccl " + gname + " [" + ranks_text(split.ranks) + "]");
  std::vector<int> peers;
  for (int r : split.ranks)
    if (r != ctx.rank) peers.push_back(r);

  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  StreamGate gate;
  const int warmup = ctx.warmup(fam.default_warmup);
  if (ctx.rank == 0)
    std::printf("# lcm-exec bench collectives: layout '%s' (tp %d cp %d dp %d pp %d ep %d etp %d edp %d), group %s of %d "
                "rank(s), %s, warmup %d, iters %d, median of per-iteration times averaged over ranks\n",
                o.layout.text.c_str(), layout.mesh.tp, layout.mesh.cp, layout.mesh.dp, layout.mesh.pp, layout.mesh.ep,
                layout.mesh.etp, layout.mesh.edp, gname.c_str(), n, kernels::to_string(et), warmup,
                ctx.iters(fam.default_iters));

  for (const CollOp* c : ops) {
    const std::string op = std::string("bench.") + c->trace_name + "." + gname;
    if (ctx.rank == 0) {
      std::printf("# %s on %s [ranks %s]\n", c->name, gname.c_str(), ranks_text(split.ranks).c_str());
      std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root", "time",
                  "algbw", "busbw", "#wrong");
      std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                  "(GB/s)", "");
    }
    for (int64_t bytes : sweep_sizes(o.sweep)) {
      CollArgs a;
      a.total = static_cast<size_t>(bytes) / es;
      if (c->divisible) a.total = a.total / static_cast<size_t>(n) * static_cast<size_t>(n);
      if (a.total == 0) continue;
      a.chunk = a.total / static_cast<size_t>(n);
      a.type = nt;
      a.elem_bytes = es;
      a.comm = comm;
      a.nranks = n;
      a.rank = me;
      a.stream = stream;
      const size_t size = a.total * es;
      const std::string key = std::string("collectives/") + c->name + "/" + gname + "/" + kernels::to_string(et) + "/" +
                              std::to_string(size);
      if (ctx.skip.count(key)) {
        if (ctx.rank == 0) std::printf("  %10zu  (resumed: already measured)\n", size);
        continue;
      }
      const size_t send_n = c->send_count(a), recv_n = c->recv_count(a);
      const int sets = rotation_sets(static_cast<double>((send_n + recv_n) * es), ctx.rotate_bytes());
      const int reps = std::max(ctx.iters(fam.default_iters), sets);
      const uint64_t seed = o.seed * 1000003ull + static_cast<uint64_t>(ctx.point_index) * 4099ull;

      Buffers buf;
      for (int s = 0; s < sets; ++s) {
        void* sp = nullptr;
        void* rp = nullptr;
        LCM_CUDA_CHECK(cudaMalloc(&sp, send_n * es));
        LCM_CUDA_CHECK(cudaMalloc(&rp, recv_n * es));
        buf.send.push_back(sp);
        buf.recv.push_back(rp);
        kernels::fill_coll_input(sp, et, send_n, seed + static_cast<uint64_t>(s), me, stream);
      }
      const std::string op_warm = op + " (warm-up)";
      const auto launch = [&](int s, const std::string& what) {
        a.send = buf.send[static_cast<size_t>(s)];
        a.recv = buf.recv[static_cast<size_t>(s)];
        comms.complete_call(c->launch(a), comm, what);
      };
      for (int i = 0; i < warmup; ++i) launch(i % sets, op_warm);
      comms.wait_stream(stream, op_warm);
      for (int s = 0; s < sets; ++s) LCM_CUDA_CHECK(cudaMemsetAsync(buf.recv[static_cast<size_t>(s)], 0xff, recv_n * es, stream));
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));

      ArrivalProbe probe(peers, 100 + ctx.point_index % 30000);
      probe.post();
      LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      ctx.inject_before_timed_loop(op);
      probe.arrive();
      EventSeries ev(reps);
      const double base_us = ctx.now_us();
      // The whole timed loop is enqueued behind a closed gate, then released: the events
      // time the collectives back to back on the GPU, free of the host's per-call enqueue
      // time (hold.cuh).
      gate.close(stream);
      ev.record_base(stream);
      for (int i = 0; i < reps; ++i) {
        ev.record_start(i, stream);
        launch(i % sets, op);
        ev.record_end(i, stream);
      }
      gate.open();
      const std::string what = op + " [" + c->name + ", " + std::to_string(size) + " B, comm " + gname + " ranks " +
                               ranks_text(split.ranks) + "]";
      comms.wait_stream(stream, what, [&] {
        std::string d = std::to_string(ev.completed()) + " of " + std::to_string(reps) + " repetitions finished";
        const std::vector<int> miss = probe.missing();
        if (!miss.empty())
          d += "; rank(s) " + ranks_text(miss) + " never reached this op (stalled or dead)";
        else
          d += "; every rank of the group reached this op (stall inside NCCL or the transport)";
        return d;
      });
      probe.finish();
      if (gate.timed_out())
        std::fprintf(stderr, "lcm-exec: rank %d: %s: the enqueue of the timed loop outlasted the stream gate (5 s); "
                     "the first repetitions include host time\n", ctx.rank, what.c_str());

      if (ctx.inject_corrupt()) {
        const float bad = 1000.0f;
        LCM_CUDA_CHECK(cudaMemcpy(buf.recv[0], &bad, 4, cudaMemcpyHostToDevice));  // float, or two bf16 halves
      }
      unsigned long long* d_wrong = nullptr;
      LCM_CUDA_CHECK(cudaMalloc(&d_wrong, sizeof *d_wrong));
      LCM_CUDA_CHECK(cudaMemsetAsync(d_wrong, 0, sizeof *d_wrong, stream));
      const int used = std::min(sets, reps);
      for (int s = 0; s < used; ++s) {
        kernels::CollPattern pat;
        pat.type = et;
        pat.seed = seed + static_cast<uint64_t>(s);
        pat.nranks = n;
        pat.rank = me;
        pat.peer = (me - 1 + n) % n;
        pat.chunk = a.chunk;
        kernels::count_wrong_coll(buf.recv[static_cast<size_t>(s)], recv_n, c->check, pat, d_wrong, stream);
      }
      unsigned long long wrong = 0;
      LCM_CUDA_CHECK(cudaMemcpyAsync(&wrong, d_wrong, sizeof wrong, cudaMemcpyDeviceToHost, stream));
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaFree(d_wrong);

      const std::vector<double> mine = ev.durations_us();
      const std::vector<double> avg = allreduce_mean(mine);  // per iteration, over ranks (nccl-tests -a 1)
      PointRecord rec;
      rec.key = key;
      rec.family = "collectives";
      rec.op = op;
      rec.dtype = kernels::to_string(et);
      rec.collective = c->name;
      rec.group = gname;
      rec.group_size = n;
      rec.size_bytes = static_cast<int64_t>(size);
      rec.count = static_cast<int64_t>(a.total);
      rec.redop = c->redop;
      rec.root = -1;
      rec.warmup = warmup;
      rec.reps = reps;
      rec.buffers = sets;
      rec.time = compute_stats(avg);
      rec.algbw = static_cast<double>(size) / 1e9 / (rec.time.median_us * 1e-6);
      rec.busbw = rec.algbw * bus_factor(c->kind, n);
      rec.per_rank_median_us = allgather_double(compute_stats(mine).median_us);
      rec.wrong = allreduce_sum(static_cast<int64_t>(wrong));
      rec.checked = allreduce_sum(static_cast<int64_t>(recv_n) * used);
      rec.correct = rec.wrong == 0;
      rec.extra = {{"ranks", split.ranks}, {"layout", o.layout.text}, {"in_place", false}};
      trace_repetitions(ctx, op, "nccl", tid, base_us, ev,
                        {{"Collective name", c->name},
                         {"In msg nelems", send_n},
                         {"Out msg nelems", recv_n},
                         {"Group size", n},
                         {"dtype", rec.dtype},
                         {"Process Group Name", gname},
                         {"Process Group Ranks", split.ranks},
                         {"Rank", me},
                         {"size", size}});
      if (ctx.rank == 0)
        std::printf("  %10zu %12zu %8s %6s %6d %9.2f %7.2f %7.2f %6lld\n", size, a.total, rec.dtype.c_str(), c->redop,
                    -1, rec.time.median_us, rec.algbw, rec.busbw, static_cast<long long>(rec.wrong));
      std::fflush(stdout);
      ctx.finish_point(rec);
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
