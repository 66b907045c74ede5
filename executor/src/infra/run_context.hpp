// The benchmark table of lcm-exec and what every benchmark shares.
//
// Like nccl-tests' struct testColl, each benchmark family is one row of a table (name,
// defaults, run function); main() looks the family up and never switches on it. Rows:
// gemm, collectives, membw, attention (cuDNN fused attention), moe (the MoE layer with
// its EP all-to-all), cp-attention (ring attention over the CP group); inside `collectives`, each collective is a row of its own CollOp table
// (bench/collectives.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "infra/comms.hpp"
#include "lcm/executor/compare.hpp"
#include "lcm/executor/options.hpp"
#include "lcm/executor/results.hpp"
#include "infra/sysinfo.hpp"
#include "lcm/executor/timing.hpp"

namespace lcm::exec {

struct RunContext {
  const Options& opt;
  int rank = 0;
  int world = 1;
  Layout layout;                  // --layout resolved against the world size (main, before CUDA)
  DeviceInfo device;
  double origin_us = 0;           // system_clock time of the run's start on rank 0 (µs)
  ResultSink* sink = nullptr;     // rank 0 only
  TraceWriter* trace = nullptr;   // every rank
  std::string trace_path;         // empty without --out
  std::set<std::string> skip;     // --resume: keys already measured and correct
  std::unique_ptr<Comms> comms;   // collectives; main() aborts it on failure
  int point_index = 0;            // measured points so far (--inject point=P)
  int wrong_points = 0;           // points whose correctness check failed

  explicit RunContext(const Options& o) : opt(o) {}
  double now_us() const;          // trace time: µs since origin_us
  int warmup(int family_default) const { return opt.warmup >= 0 ? opt.warmup : family_default; }
  double warmup_seconds(double family_default) const { return opt.warmup_s >= 0 ? opt.warmup_s : family_default; }
  int iters(int family_default) const { return opt.iters > 0 ? opt.iters : family_default; }
  double rotate_bytes() const;
  // Fault injection for the current point on this rank: stall sleeps, kill raises SIGKILL.
  void inject_before_timed_loop(const std::string& op) const;
  bool inject_corrupt() const;
  // Adds the finished point: rank 0 prints nothing here (families print their own rows),
  // records it and rewrites the summary; every rank rewrites its trace.
  void finish_point(PointRecord& p);
};

struct BenchFamily {
  Family family;
  const char* name;
  const char* what;
  int default_warmup;
  int default_iters;
  double default_warmup_s;  // minimum warm-up time
  void (*run)(RunContext&);
};

std::span<const BenchFamily> bench_families();
const BenchFamily& bench_family(Family f);

// Benchmark entry points (one file each).
void run_gemm_bench(RunContext& ctx);
void run_collectives_bench(RunContext& ctx);
void run_membw_bench(RunContext& ctx);
void run_attention_bench(RunContext& ctx);  // bench/attention.cpp; bench/attention_without_cudnn.cpp reports that cuDNN was not found
void run_moe_bench(RunContext& ctx);        // bench/moe.cpp
void run_cp_attention_bench(RunContext& ctx);  // bench/cp_attention.cpp (needs cuDNN, as attention)

// MPI helpers over MPI_COMM_WORLD.
std::vector<double> allgather_double(double v);
int64_t allreduce_sum(int64_t v);
std::vector<double> allreduce_mean(const std::vector<double>& v);  // element-wise over ranks
std::set<std::string> broadcast_keys(const std::set<std::string>& keys);  // from rank 0

// Trace events for the timed repetitions of one point.
void trace_repetitions(RunContext& ctx, const std::string& name, const char* cat, int tid, double base_us,
                       const EventSeries& ev, const nlohmann::json& args);

// What several families share in their setup, timing and check phases (bench/*.cpp).

// Element-wise a[i] + b[i]: the fwd+bwd time of each repetition.
std::vector<double> sum_series(const std::vector<double>& a, const std::vector<double>& b);
// "0 1 2 3": a group's ranks as the tables and failure messages print them.
std::string ranks_text(const std::vector<int>& ranks);
// The ranks of a group other than `self` (an ArrivalProbe's peers).
std::vector<int> peers_of(const std::vector<int>& group_ranks, int self);
// "rank(s) 2 3 never reached this op (stalled or dead)"; empty when every peer has arrived.
std::string missing_ranks_text(ArrivalProbe& probe);
// The communicator of one group for a family that also runs on a single rank: with more
// than one rank in the world, ctx.comms is created with `g` (main() aborts it on failure);
// alone, no communicator and the group is this rank.
struct GroupComm {
  Comms* comms = nullptr;  // null on a single rank
  ncclComm_t comm = nullptr;
  int rank = 0;            // in the group
  std::vector<int> ranks;  // the group's global ranks
  std::vector<int> peers;  // peers_of(ranks, ctx.rank)
};
GroupComm open_group(RunContext& ctx, Group g);
// Drains `s` through the group's communicator when there is one (polling it, `detail` on
// failure), else as a plain stream (single rank).
void wait_group_stream(Comms* comms, cudaStream_t s, double timeout_s, const std::string& what,
                       const std::function<std::string()>& detail = {});

// A warm-up: repetitions done, and the time of one repetition in its last batch (seconds).
struct Warmup {
  int done = 0;
  double rep_s = 0;
};
// One rank alone: batches of max(warmup, 1) repetitions (rep(i) enqueues repetition i, wait()
// drains the stream), repeated until `warmup` repetitions and `warmup_s` seconds have passed
// (power-limited clocks settle).
Warmup warm_up(int warmup, double warmup_s, const std::function<void(int)>& rep, const std::function<void()>& wait);
// Ranks that communicate: one repetition at a time (rep(i) enqueues and drains it) while any
// rank still needs repetitions or time; the ranks agree on each step (an allreduce).
Warmup warm_up_together(int warmup, double warmup_s, const std::function<void(int)>& rep);
// Timed repetitions under --point-ms: `iters`, or fewer, but at least 5, when the timed loop
// would run past point_ms at rep_s seconds a repetition (rep_s 0: unknown, `iters`).
int reps_for_point(int iters, double point_ms, double rep_s);

// A bit-exact check counted on the device: `count` enqueues counting kernels on `s` that add
// to the zeroed device counter; returns the count once `s` has drained.
int64_t count_on_device(cudaStream_t s, const std::function<void(unsigned long long* counter)>& count);
// Its result as the one comparer's record: `checked` elements, `wrong` of them different, no
// tolerance and no L2 term (failures() == wrong).
Comparison exact_comparison(int64_t checked, int64_t wrong);

}  // namespace lcm::exec
