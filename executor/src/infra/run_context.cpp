// The benchmark table and the helpers the families share (see run_context.hpp).
#include "infra/run_context.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <thread>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

constexpr BenchFamily kFamilies[] = {
    {Family::kGemm, "gemm", "cuBLASLt GEMM, bf16 and fp8 e4m3 (TFLOP/s)", 10, 50, 0.5, run_gemm_bench},
    {Family::kCollectives, "collectives", "NCCL collectives on a layout group (algbw, busbw)", 5, 20, 0.0,
     run_collectives_bench},
    {Family::kMembw, "membw", "device-to-device copy bandwidth (GB/s)", 5, 20, 0.0, run_membw_bench},
    {Family::kAttention, "attention", "cuDNN fused causal GQA attention, forward and backward (TFLOP/s)", 1, 20, 0.5,
     run_attention_bench},
    {Family::kMoe, "moe", "MoE layer: router, top-k, permutation, EP all-to-all, expert GEMMs, fwd and bwd (per phase)",
     2, 20, 0.5, run_moe_bench},
    {Family::kCpAttention, "cp-attention",
     "ring attention over the CP group, load-balanced causal chunks, fwd and bwd (exposed communication)", 1, 20, 0.5,
     run_cp_attention_bench},
};

}  // namespace

std::span<const BenchFamily> bench_families() { return kFamilies; }

const BenchFamily& bench_family(Family f) {
  for (const BenchFamily& b : kFamilies)
    if (b.family == f) return b;
  throw ExecError("unknown benchmark family");
}

double RunContext::now_us() const {
  const double t = static_cast<double>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  return t - origin_us;
}

double RunContext::rotate_bytes() const { return rotation_bytes(device.l2_bytes, opt.rotate_bytes); }

void RunContext::inject_before_timed_loop(const std::string& op) const {
  const Inject& in = opt.inject;
  if (in.rank != rank || in.point != point_index) return;
  if (in.kind == Inject::Kind::kStall) {
    const double s = in.seconds > 0 ? in.seconds : 3.0 * opt.timeout_s;
    std::fprintf(stderr, "lcm-exec: rank %d: --inject stall: sleeping %.0f s before %s\n", rank, s, op.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
  } else if (in.kind == Inject::Kind::kKill) {
    std::fprintf(stderr, "lcm-exec: rank %d: --inject kill: SIGKILL before %s\n", rank, op.c_str());
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
}

bool RunContext::inject_corrupt() const {
  return opt.inject.kind == Inject::Kind::kCorrupt && opt.inject.rank == rank && opt.inject.point == point_index;
}

void RunContext::finish_point(PointRecord& p) {
  if (!p.correct) ++wrong_points;
  if (sink) sink->add(p);
  if (trace && !trace_path.empty()) trace->write(trace_path);
  ++point_index;
}

std::vector<double> allgather_double(double v) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<double> out(static_cast<size_t>(world));
  LCM_MPI_CHECK(MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return out;
}

int64_t allreduce_sum(int64_t v) {
  long long in = v, out = 0;
  LCM_MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

std::vector<double> allreduce_mean(const std::vector<double>& v) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<double> out(v.size());
  LCM_MPI_CHECK(MPI_Allreduce(v.data(), out.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  for (double& x : out) x /= world;
  return out;
}

std::set<std::string> broadcast_keys(const std::set<std::string>& keys) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string joined;
  if (rank == 0)
    for (const std::string& k : keys) joined += k + "\n";
  long long len = static_cast<long long>(joined.size());
  LCM_MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  joined.resize(static_cast<size_t>(len));
  if (len > 0) LCM_MPI_CHECK(MPI_Bcast(joined.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD));
  std::set<std::string> out;
  std::istringstream in(joined);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.insert(line);
  return out;
}

void trace_repetitions(RunContext& ctx, const std::string& name, const char* cat, int tid, double base_us,
                       const EventSeries& ev, const nlohmann::json& args) {
  if (!ctx.trace) return;
  const std::vector<double> starts = ev.starts_us();
  const std::vector<double> durs = ev.durations_us();
  for (size_t i = 0; i < starts.size(); ++i) {
    nlohmann::json a = args;
    a["iteration"] = i;
    ctx.trace->complete(name, cat, tid, base_us + starts[i], durs[i], std::move(a));
  }
}

std::vector<double> sum_series(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::vector<int> peers_of(const std::vector<int>& group_ranks, int self) {
  std::vector<int> peers;
  for (int r : group_ranks)
    if (r != self) peers.push_back(r);
  return peers;
}

std::string missing_ranks_text(ArrivalProbe& probe) {
  const std::vector<int> miss = probe.missing();
  return miss.empty() ? std::string() : "rank(s) " + ranks_text(miss) + " never reached this op (stalled or dead)";
}

GroupComm open_group(RunContext& ctx, Group g) {
  GroupComm gc;
  gc.ranks = {ctx.rank};
  if (ctx.world > 1) {
    ctx.comms = std::make_unique<Comms>(ctx.layout, ctx.rank, ctx.opt.timeout_s, std::vector<Group>{g});
    gc.comms = ctx.comms.get();
    gc.comm = gc.comms->get(g);
    gc.rank = gc.comms->split(g).key;
    gc.ranks = gc.comms->split(g).ranks;
  }
  gc.peers = peers_of(gc.ranks, ctx.rank);
  return gc;
}

void wait_group_stream(Comms* comms, cudaStream_t s, double timeout_s, const std::string& what,
                       const std::function<std::string()>& detail) {
  if (comms) comms->wait_stream(s, what, detail);
  else wait_stream(s, timeout_s, what);
}


Warmup warm_up(int warmup, double warmup_s, const std::function<void(int)>& rep, const std::function<void()>& wait) {
  Warmup w;
  const auto tw = std::chrono::steady_clock::now();
  while (w.done < warmup || seconds_since(tw) < warmup_s) {
    const auto tb = std::chrono::steady_clock::now();
    const int batch = std::max(warmup, 1);
    for (int i = 0; i < batch; ++i) rep(w.done++);
    wait();
    w.rep_s = seconds_since(tb) / batch;
  }
  return w;
}

Warmup warm_up_together(int warmup, double warmup_s, const std::function<void(int)>& rep) {
  Warmup w;
  const auto tw = std::chrono::steady_clock::now();
  while (true) {
    const bool more_time = seconds_since(tw) < warmup_s;
    if (allreduce_sum(w.done < warmup || more_time ? 1 : 0) == 0) break;  // ranks agree
    const auto tb = std::chrono::steady_clock::now();
    rep(w.done);
    w.rep_s = seconds_since(tb);
    ++w.done;
  }
  return w;
}

int reps_for_point(int iters, double point_ms, double rep_s) {
  constexpr int kMinReps = 5;
  if (point_ms <= 0 || rep_s <= 0) return iters;
  return std::min(iters, std::max(kMinReps, static_cast<int>(point_ms / 1000.0 / rep_s)));
}

int64_t count_on_device(cudaStream_t s, const std::function<void(unsigned long long* counter)>& count) {
  unsigned long long* d_wrong = nullptr;
  LCM_CUDA_CHECK(cudaMalloc(&d_wrong, sizeof *d_wrong));
  LCM_CUDA_CHECK(cudaMemsetAsync(d_wrong, 0, sizeof *d_wrong, s));
  count(d_wrong);
  unsigned long long wrong = 0;
  LCM_CUDA_CHECK(cudaMemcpyAsync(&wrong, d_wrong, sizeof wrong, cudaMemcpyDeviceToHost, s));
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaFree(d_wrong);
  return static_cast<int64_t>(wrong);
}

Comparison exact_comparison(int64_t checked, int64_t wrong) {
  return Comparison::from_sums(checked, wrong, -1, 0.0, 0.0, 0.0);
}

}  // namespace lcm::exec
