// The benchmark table and shared helpers (see run_context.hpp).
#include "infra/run_context.hpp"

#include <mpi.h>

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

}  // namespace lcm::exec
