// lcm-exec: measures the real hardware lcm plans for (docs/executor.md).
//
//   mpirun -np N lcm-exec bench <gemm|collectives|membw> [options]
//
// One MPI rank per GPU (the local rank picks the device). Only this file exits: on a
// collective timeout or NCCL error the stalled rank and op are printed, the finished points
// and the trace are written, every communicator is aborted, and the job ends non-zero.
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>

#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/options.hpp"
#include "lcm/executor/results.hpp"
#include "infra/sysinfo.hpp"
#ifdef LCM_EXEC_HAVE_TRAIN
#include <cstdlib>
#include <string_view>

#include "lcm/executor/train/runner.hpp"
#endif

using namespace lcm::exec;

namespace {

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// nccl-tests' "# Using devices" lines, gathered on rank 0.
std::vector<std::string> gather_device_lines(int rank, int world, int device, const SystemInfo& sys) {
  char line[256];
  std::snprintf(line, sizeof line, "#  Rank %3d Pid %7d on %12s device %2d [%s] %s", rank, static_cast<int>(getpid()),
                sys.hostname.c_str(), device, sys.device.pci_bus_id.c_str(), sys.device.name.c_str());
  std::vector<char> all(rank == 0 ? 256 * static_cast<size_t>(world) : 0);
  MPI_Gather(line, 256, MPI_CHAR, all.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; rank == 0 && r < world; ++r) out.emplace_back(&all[static_cast<size_t>(r) * 256]);
  return out;
}

[[noreturn]] void fail_and_abort(RunContext& ctx, int code, const std::string& kind, const std::string& message,
                                 const std::string& op, bool printed) {
  if (printed)  // Comms printed the message when it detected the failure
    std::fprintf(stderr, "lcm-exec: rank %d: FAILED (%s); exit code %d\n", ctx.rank, kind.c_str(), code);
  else
    std::fprintf(stderr, "lcm-exec: FAILED (%s): %s; exit code %d\n", kind.c_str(), message.c_str(), code);
  std::fflush(stderr);
  std::fflush(stdout);
  // Write what is finished first: aborting a communicator can block on a live, stalled peer.
  try {
    if (ctx.trace) {
      ctx.trace->instant("abort", "lcm", 0, ctx.now_us(), {{"kind", kind}, {"op", op}, {"message", message}});
      if (!ctx.trace_path.empty()) ctx.trace->write(ctx.trace_path);
    }
    if (ctx.sink)
      ctx.sink->set_status("failed", {{"rank", ctx.rank}, {"kind", kind}, {"op", op}, {"message", message}, {"exit_code", code}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lcm-exec: rank %d: could not write results after the failure: %s\n", ctx.rank, e.what());
  }
  if (ctx.comms) ctx.comms->abort_all_bounded();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#ifdef LCM_EXEC_HAVE_TRAIN
// `lcm-exec train`: one process per GPU (no MPI yet: groups of size 1). The GPUs at hand are
// the launcher's world size (1 without a launcher); everything the command line and the
// scenario can get wrong is refused (exit 2) before CUDA starts.
int train_main(int argc, char** argv) {
  namespace tr = lcm::exec::train;
  tr::TrainOptions o;
  tr::TrainPlan plan;
  try {
    o = tr::parse_train_args(argc, argv);
    if (o.help) {
      std::fputs(tr::train_usage().c_str(), stdout);
      return kExitOk;
    }
    int gpus = 1;
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
      if (const char* e = std::getenv(v)) gpus = std::max(1, std::atoi(e));
    plan = tr::plan_training(o, gpus);
    if (o.dry_run) {
      for (const tr::OpTag& t : tr::dry_run_tags(plan))
        std::printf("%s layer=%d micro_batch=%d\n",
                    lcm::op_name(t.id, t.pass, t.part, t.layer >= 0 ? lcm::kLayerPrefix : "").c_str(), t.layer,
                    t.micro_batch);
      return kExitOk;
    }
    return tr::run_train(o, plan);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "lcm-exec: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lcm-exec: train: FAILED: %s\n", e.what());
    return kExitRuntime;
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef LCM_EXEC_HAVE_TRAIN
  if (argc >= 2 && std::string_view(argv[1]) == "train") return train_main(argc, argv);
#endif
  Options opt;
  try {
    opt = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "lcm-exec: %s\n", e.what());
    return kExitUsage;
  }
  if (opt.help) {
    std::fputs(usage().c_str(), stdout);
    return kExitOk;
  }

  MPI_Init(&argc, &argv);
  RunContext ctx(opt);
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.world);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ctx.rank, MPI_INFO_NULL, &local);
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  // Everything the command line can get wrong is rejected here, before CUDA or NCCL start,
  // so bad input gives its one-line message and exit code 2 even without a GPU.
  try {
    ctx.layout = validate_for_world(opt, ctx.world);
  } catch (const UsageError& e) {
    if (ctx.rank == 0) std::fprintf(stderr, "lcm-exec: %s\n", e.what());
    MPI_Finalize();
    return kExitUsage;
  }

  int ndev = 0;
  const cudaError_t de = cudaGetDeviceCount(&ndev);
  if (de != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "lcm-exec: rank %d: no CUDA device (%s)\n", ctx.rank,
                 de != cudaSuccess ? cudaGetErrorString(de) : "0 devices");
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
  const int device = local_rank % ndev;

  const BenchFamily& family = bench_family(opt.family);
  std::unique_ptr<ResultSink> sink;
  std::unique_ptr<TraceWriter> trace;
  try {
    LCM_CUDA_CHECK(cudaSetDevice(device));
    LCM_CUDA_CHECK(cudaFree(nullptr));  // create the context before anything is timed
    const SystemInfo sys = query_system(device);
    ctx.device = sys.device;
    double origin = static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::system_clock::now().time_since_epoch()).count());
    MPI_Bcast(&origin, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    ctx.origin_us = origin;
    const std::vector<std::string> devices = gather_device_lines(ctx.rank, ctx.world, device, sys);

    trace = std::make_unique<TraceWriter>(ctx.rank, ctx.world,
                                          "rank " + std::to_string(ctx.rank) + " (" + sys.hostname + ":gpu" + std::to_string(device) + ")");
    trace->set_other("command_line", opt.command_line);
    trace->set_other("origin_unix_us", origin);
    trace->set_other("gpu", sys.device.name);
    ctx.trace = trace.get();
    if (!opt.out_dir.empty()) {
      std::filesystem::create_directories(opt.out_dir);  // every rank: the directory may not be shared
      ctx.trace_path = opt.out_dir + "/trace_rank" + std::to_string(ctx.rank) + ".json";
    }

    std::set<std::string> done;
    if (ctx.rank == 0) {
      nlohmann::json run = {
          {"schema_version", 1},
          {"tool", "lcm-exec"},
          {"version", LCM_VERSION},
          {"benchmark", family.name},
          {"command_line", opt.command_line},
          {"start_time", iso_now()},
          {"world_size", ctx.world},
          {"system", to_json(sys)},
          {"devices", devices},
          {"config", {{"warmup", ctx.warmup(family.default_warmup)},
                      {"warmup_s", ctx.warmup_seconds(family.default_warmup_s)},
                      {"iters", ctx.iters(family.default_iters)},
                      {"timeout_s", opt.timeout_s},
                      {"seed", opt.seed},
                      {"rotate_bytes", ctx.rotate_bytes()},
                      {"layout", opt.layout.text},
                      {"group", to_string(opt.group)}}},
      };
      sink = std::make_unique<ResultSink>(opt.out_dir, run);
      if (opt.resume) done = sink->load_resume();
      ctx.sink = sink.get();
      std::printf("# lcm-exec %s: %s | %s | driver %s | CUDA runtime %d | NCCL %s | cuBLASLt %zu | %s\n", LCM_VERSION,
                  family.name, sys.device.name.c_str(), sys.driver_version.c_str(), sys.cuda_runtime_version,
                  version_string(sys.nccl_version).c_str(), sys.cublaslt_version, sys.mpi_library.c_str());
      std::printf("# Using devices\n");
      for (const std::string& l : devices) std::printf("%s\n", l.c_str());
      for (const auto& [k, v] : sys.nccl_env.items())
        std::fprintf(stderr, "lcm-exec: inherited %s=%s\n", k.c_str(), v.get<std::string>().c_str());
      std::fflush(stdout);
    }
    ctx.skip = broadcast_keys(done);
    family.run(ctx);
    if (ctx.comms) ctx.comms->finalize();
  } catch (const CommFailure& f) {
    fail_and_abort(ctx, kExitCommFailure, f.timeout() ? "timeout" : "nccl error", f.what(), f.op(), ctx.comms != nullptr);
  } catch (const UsageError& e) {
    if (ctx.rank == 0) std::fprintf(stderr, "lcm-exec: %s\n", e.what());
    if (ctx.comms) ctx.comms->abort_all();
    MPI_Finalize();
    return kExitUsage;
  } catch (const std::exception& e) {
    fail_and_abort(ctx, kExitRuntime, "runtime error", "rank " + std::to_string(ctx.rank) + ": " + e.what(), "", false);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (sink) {
    sink->set_status(ctx.wrong_points ? "wrong_results" : "ok");
    std::printf("# %zu point(s), %d with wrong results%s%s\n", sink->points().size(), ctx.wrong_points,
                opt.out_dir.empty() ? "" : ", results in ", opt.out_dir.c_str());
  }
  if (trace && !ctx.trace_path.empty()) trace->write(ctx.trace_path);
  MPI_Finalize();
  return ctx.wrong_points ? kExitWrongResults : kExitOk;
}
