// `lcm-exec bench collectives`: the CollOp table and the sweep over sizes.
//
// Per (collective, size) point: setup (nccl-tests' counts, buffer sets, seeded inputs),
// timing (warm-up, then the timed loop behind a stream gate), check (every receive buffer
// the loop wrote, bit-exact on the device), record and print.
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

// What every point of the run shares: the group, its communicator, the element type.
struct CollRun {
  Comms* comms = nullptr;
  const GroupSplit* split = nullptr;
  ncclComm_t comm = nullptr;
  int n = 1;   // group size
  int me = 0;  // rank in the group
  std::string gname;
  int tid = 0;
  std::vector<int> peers;
  kernels::ElemType et = kernels::ElemType::kF32;
  ncclDataType_t nt = ncclFloat;
  size_t es = 4;
  int warmup = 0;
};

// One point's state through its phases.
struct CollPointRun {
  const CollOp* c = nullptr;
  CollArgs a;
  size_t size = 0;  // bytes, nccl-tests' size
  std::string key, op;
  size_t send_n = 0, recv_n = 0;
  int sets = 1, reps = 0;
  uint64_t seed = 0;
  Buffers buf;
};

// The collectives of --ops in the order given (empty: the whole table).
std::vector<const CollOp*> selected_ops(const Options& o) {
  std::vector<const CollOp*> ops;
  for (const CollOp& c : kOps)
    if (o.collectives.empty()) ops.push_back(&c);
  for (Collective kind : o.collectives)
    for (const CollOp& c : kOps)
      if (c.kind == kind) ops.push_back(&c);
  return ops;
}

// Setup of the run: the communicator of --group and the element type of -d.
CollRun setup_run(RunContext& ctx) {
  const Options& o = ctx.opt;
  CollRun run;
  const bool bf16 = o.coll_dtype == CollDType::kBf16;
  run.et = bf16 ? kernels::ElemType::kBf16 : kernels::ElemType::kF32;
  run.nt = bf16 ? ncclBfloat16 : ncclFloat;
  run.es = kernels::elem_size(run.et);
  ctx.comms = std::make_unique<Comms>(ctx.layout, ctx.rank, o.timeout_s, std::vector<Group>{o.group});
  run.comms = ctx.comms.get();
  run.split = &run.comms->split(o.group);
  run.comm = run.comms->get(o.group);
  run.n = static_cast<int>(run.split->ranks.size());
  run.me = run.split->key;
  run.gname = to_string(o.group);
  run.tid = group_tid(o.group);
  run.peers = peers_of(run.split->ranks, ctx.rank);
  return run;
}

// Setup of a point: nccl-tests' counts for `bytes`; false when the size rounds to nothing.
bool size_point(const CollRun& run, cudaStream_t stream, const CollOp* c, int64_t bytes, CollPointRun& pt) {
  CollArgs& a = pt.a;
  a.total = static_cast<size_t>(bytes) / run.es;
  if (c->divisible) a.total = a.total / static_cast<size_t>(run.n) * static_cast<size_t>(run.n);
  if (a.total == 0) return false;
  a.chunk = a.total / static_cast<size_t>(run.n);
  a.type = run.nt;
  a.elem_bytes = run.es;
  a.comm = run.comm;
  a.nranks = run.n;
  a.rank = run.me;
  a.stream = stream;
  pt.c = c;
  pt.size = a.total * run.es;
  pt.key = std::string("collectives/") + c->name + "/" + run.gname + "/" + kernels::to_string(run.et) + "/" +
           std::to_string(pt.size);
  return true;
}

// Setup: the buffer sets, send buffers filled with each rank's seeded input.
void setup_point(RunContext& ctx, const CollRun& run, cudaStream_t stream, CollPointRun& pt) {
  const Options& o = ctx.opt;
  const BenchFamily& fam = bench_family(Family::kCollectives);
  pt.send_n = pt.c->send_count(pt.a);
  pt.recv_n = pt.c->recv_count(pt.a);
  pt.sets = rotation_sets(static_cast<double>((pt.send_n + pt.recv_n) * run.es), ctx.rotate_bytes());
  pt.reps = std::max(ctx.iters(fam.default_iters), pt.sets);
  pt.seed = o.seed * 1000003ull + static_cast<uint64_t>(ctx.point_index) * 4099ull;
  for (int s = 0; s < pt.sets; ++s) {
    void* sp = nullptr;
    void* rp = nullptr;
    LCM_CUDA_CHECK(cudaMalloc(&sp, pt.send_n * run.es));
    LCM_CUDA_CHECK(cudaMalloc(&rp, pt.recv_n * run.es));
    pt.buf.send.push_back(sp);
    pt.buf.recv.push_back(rp);
    kernels::fill_coll_input(sp, run.et, pt.send_n, pt.seed + static_cast<uint64_t>(s), run.me, stream);
  }
}

// Timing: warm-up, receive buffers poisoned, then the whole timed loop enqueued behind the
// closed gate and released, so the events time the collectives back to back on the GPU,
// free of the host's per-call enqueue time (hold.cuh). Returns the trace time of the loop's
// start. A rank that never reaches the op is named on timeout (ArrivalProbe).
double time_point(RunContext& ctx, const CollRun& run, StreamGate& gate, cudaStream_t stream, CollPointRun& pt,
                  EventSeries& ev) {
  Comms& comms = *run.comms;
  const CollOp* c = pt.c;
  const std::string& op = pt.op;
  const std::string op_warm = op + " (warm-up)";
  const auto launch = [&](int s, const std::string& what) {
    pt.a.send = pt.buf.send[static_cast<size_t>(s)];
    pt.a.recv = pt.buf.recv[static_cast<size_t>(s)];
    comms.complete_call(c->launch(pt.a), run.comm, what);
  };
  for (int i = 0; i < run.warmup; ++i) launch(i % pt.sets, op_warm);
  comms.wait_stream(stream, op_warm);
  for (int s = 0; s < pt.sets; ++s)
    LCM_CUDA_CHECK(cudaMemsetAsync(pt.buf.recv[static_cast<size_t>(s)], 0xff, pt.recv_n * run.es, stream));
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));

  ArrivalProbe probe(run.peers, 100 + ctx.point_index % 30000);
  probe.post();
  LCM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  ctx.inject_before_timed_loop(op);
  probe.arrive();
  const double base_us = ctx.now_us();
  gate.close(stream);
  ev.record_base(stream);
  for (int i = 0; i < pt.reps; ++i) {
    ev.record_start(i, stream);
    launch(i % pt.sets, op);
    ev.record_end(i, stream);
  }
  gate.open();
  const std::string what = op + " [" + c->name + ", " + std::to_string(pt.size) + " B, comm " + run.gname +
                           " ranks " + ranks_text(run.split->ranks) + "]";
  comms.wait_stream(stream, what, [&] {
    std::string d = std::to_string(ev.completed()) + " of " + std::to_string(pt.reps) + " repetitions finished";
    const std::string miss = missing_ranks_text(probe);
    if (!miss.empty())
      d += "; " + miss;
    else
      d += "; every rank of the group reached this op (stall inside NCCL or the transport)";
    return d;
  });
  probe.finish();
  if (gate.timed_out())
    std::fprintf(stderr, "lcm-exec: rank %d: %s: the enqueue of the timed loop outlasted the stream gate (5 s); "
                 "the first repetitions include host time\n", ctx.rank, what.c_str());
  return base_us;
}

// Check: every receive buffer the timed loop wrote, against the pattern the collective must
// leave there (kernels::count_wrong_coll, bit-exact).
Comparison check_point(RunContext& ctx, const CollRun& run, cudaStream_t stream, const CollPointRun& pt) {
  if (ctx.inject_corrupt()) {
    const float bad = 1000.0f;
    LCM_CUDA_CHECK(cudaMemcpy(pt.buf.recv[0], &bad, 4, cudaMemcpyHostToDevice));  // float, or two bf16 halves
  }
  const int used = std::min(pt.sets, pt.reps);
  const int64_t wrong = count_on_device(stream, [&](unsigned long long* counter) {
    for (int s = 0; s < used; ++s) {
      kernels::CollPattern pat;
      pat.type = run.et;
      pat.seed = pt.seed + static_cast<uint64_t>(s);
      pat.nranks = run.n;
      pat.rank = run.me;
      pat.peer = (run.me - 1 + run.n) % run.n;
      pat.chunk = pt.a.chunk;
      kernels::count_wrong_coll(pt.buf.recv[static_cast<size_t>(s)], pt.recv_n, pt.c->check, pat, counter, stream);
    }
  });
  return exact_comparison(static_cast<int64_t>(pt.recv_n) * used, wrong);
}

PointRecord make_record(const RunContext& ctx, const CollRun& run, const CollPointRun& pt, const EventSeries& ev,
                        const Comparison& chk) {
  const CollOp* c = pt.c;
  const std::vector<double> mine = ev.durations_us();
  const std::vector<double> avg = allreduce_mean(mine);  // per iteration, over ranks (nccl-tests -a 1)
  PointRecord rec;
  rec.key = pt.key;
  rec.family = "collectives";
  rec.op = pt.op;
  rec.dtype = kernels::to_string(run.et);
  rec.collective = c->name;
  rec.group = run.gname;
  rec.group_size = run.n;
  rec.size_bytes = static_cast<int64_t>(pt.size);
  rec.count = static_cast<int64_t>(pt.a.total);
  rec.redop = c->redop;
  rec.root = -1;
  rec.warmup = run.warmup;
  rec.reps = pt.reps;
  rec.buffers = pt.sets;
  rec.time = compute_stats(avg);
  rec.algbw = static_cast<double>(pt.size) / 1e9 / (rec.time.median_us * 1e-6);
  rec.busbw = rec.algbw * bus_factor(c->kind, run.n);
  rec.per_rank_median_us = allgather_double(compute_stats(mine).median_us);
  rec.wrong = allreduce_sum(chk.failures());
  rec.checked = allreduce_sum(chk.checked);
  rec.correct = rec.wrong == 0;
  rec.extra = {{"ranks", run.split->ranks}, {"layout", ctx.opt.layout.text}, {"in_place", false}};
  return rec;
}

// Print: the run's header, a header per collective, one row per size (rank 0).
void print_header(const RunContext& ctx, const CollRun& run) {
  const Options& o = ctx.opt;
  const Layout& layout = ctx.layout;
  std::printf("# lcm-exec bench collectives: layout '%s' (tp %d cp %d dp %d pp %d ep %d etp %d edp %d), group %s of %d "
              "rank(s), %s, warmup %d, iters %d, median of per-iteration times averaged over ranks\n",
              o.layout.text.c_str(), layout.mesh.tp, layout.mesh.cp, layout.mesh.dp, layout.mesh.pp, layout.mesh.ep,
              layout.mesh.etp, layout.mesh.edp, run.gname.c_str(), run.n, kernels::to_string(run.et), run.warmup,
              ctx.iters(bench_family(Family::kCollectives).default_iters));
}

void print_op_header(const CollRun& run, const CollOp* c) {
  std::printf("# %s on %s [ranks %s]\n", c->name, run.gname.c_str(), ranks_text(run.split->ranks).c_str());
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
              "");
}

void print_row(const CollPointRun& pt, const PointRecord& rec) {
  std::printf("  %10zu %12zu %8s %6s %6d %9.2f %7.2f %7.2f %6lld\n", pt.size, pt.a.total, rec.dtype.c_str(),
              pt.c->redop, -1, rec.time.median_us, rec.algbw, rec.busbw, static_cast<long long>(rec.wrong));
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
  const std::vector<const CollOp*> ops = selected_ops(o);
  CollRun run = setup_run(ctx);
  if (ctx.trace) ctx.trace->thread_name(run.tid, "nccl " + run.gname + " [" + ranks_text(run.split->ranks) + "]");

  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  StreamGate gate;
  run.warmup = ctx.warmup(bench_family(Family::kCollectives).default_warmup);
  if (ctx.rank == 0) print_header(ctx, run);

  for (const CollOp* c : ops) {
    const std::string op = std::string("bench.") + c->trace_name + "." + run.gname;
    if (ctx.rank == 0) print_op_header(run, c);
    for (int64_t bytes : sweep_sizes(o.sweep)) {
      CollPointRun pt;
      if (!size_point(run, stream, c, bytes, pt)) continue;
      pt.op = op;
      if (ctx.skip.count(pt.key)) {
        if (ctx.rank == 0) std::printf("  %10zu  (resumed: already measured)\n", pt.size);
        continue;
      }
      setup_point(ctx, run, stream, pt);
      EventSeries ev(pt.reps);
      const double base_us = time_point(ctx, run, gate, stream, pt, ev);
      const Comparison chk = check_point(ctx, run, stream, pt);
      PointRecord rec = make_record(ctx, run, pt, ev, chk);
      trace_repetitions(ctx, op, "nccl", run.tid, base_us, ev,
                        {{"Collective name", c->name},
                         {"In msg nelems", pt.send_n},
                         {"Out msg nelems", pt.recv_n},
                         {"Group size", run.n},
                         {"dtype", rec.dtype},
                         {"Process Group Name", run.gname},
                         {"Process Group Ranks", run.split->ranks},
                         {"Rank", run.me},
                         {"size", pt.size}});
      if (ctx.rank == 0) print_row(pt, rec);
      std::fflush(stdout);
      ctx.finish_point(rec);
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

}  // namespace lcm::exec
