// Non-blocking NCCL communicators, polled waits and abort (see comms.hpp).
#include "infra/comms.hpp"

#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "lcm/executor/error.hpp"
#include "lcm/executor/timing.hpp"

namespace lcm::exec {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kAbortGraceSeconds = 10;

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string host_gpu() {
  char host[128] = {};
  gethostname(host, sizeof host - 1);
  int dev = -1;
  cudaGetDevice(&dev);
  return std::string(host) + " gpu" + std::to_string(dev);
}

}  // namespace

void wait_stream(cudaStream_t s, double timeout_s, const std::string& what) {
  const auto t0 = Clock::now();
  while (true) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) throw_cuda_error(static_cast<int>(e), what.c_str(), __FILE__, __LINE__);
    if (seconds_since(t0) > timeout_s) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      throw CommFailure("rank " + std::to_string(rank) + " (" + host_gpu() + "): " + what + " did not finish within " +
                            fmt_seconds(timeout_s) + " (timeout)",
                        what, true);
    }
    std::this_thread::yield();
  }
}

Comms::Comms(const Layout& layout, int rank, double timeout_s, const std::vector<Group>& extra)
    : rank_(rank), timeout_s_(timeout_s) {
  try {
    create(layout, extra);
  } catch (const CommFailure&) {
    abort_all_bounded();  // no owner will exist to do it
    throw;
  }
}

void Comms::create(const Layout& layout, const std::vector<Group>& extra) {
  const int rank = rank_;
  ncclUniqueId id{};
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) throw ExecError("ncclGetUniqueId failed");
  LCM_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));

  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "lcm.world";
  Entry world{Group::kWorld, group_split(layout, Group::kWorld, rank), nullptr};
  const ncclResult_t r = ncclCommInitRankConfig(&world.comm, layout.world, id, rank, &cfg);
  comms_.push_back(world);
  complete_call(r, comms_[0].comm, "ncclCommInitRankConfig(world)");

  // The same groups in the same order on every rank: the layout and `extra` are global.
  for (Group g : kAllGroups) {
    if (g == Group::kWorld) continue;
    bool wanted = group_size(layout, g) > 1;
    for (Group e : extra) wanted = wanted || e == g;
    if (!wanted) continue;
    Entry sub{g, group_split(layout, g, rank), nullptr};
    ncclConfig_t sub_cfg = NCCL_CONFIG_INITIALIZER;
    sub_cfg.blocking = 0;
    const std::string name = std::string("lcm.") + to_string(g);
    sub_cfg.commName = name.c_str();
    const std::string what = std::string("ncclCommSplit(") + to_string(g) + ")";
    // Non-blocking split: NCCL leaves *newcomm NULL until the split has completed and then
    // writes it from its init thread, so `child` must outlive the wait; progress and errors
    // show on the parent meanwhile.
    ncclComm_t child = nullptr;
    const ncclResult_t rs = ncclCommSplit(comms_[0].comm, sub.split.color, sub.split.key, &child, &sub_cfg);
    complete_call(rs, comms_[0].comm, what);
    const auto t0 = Clock::now();
    while ((sub.comm = __atomic_load_n(&child, __ATOMIC_ACQUIRE)) == nullptr) {
      ncclResult_t st = ncclSuccess;
      if (ncclCommGetAsyncError(comms_[0].comm, &st) != ncclSuccess || (st != ncclSuccess && st != ncclInProgress))
        fail(what, std::string("failed: ") + ncclGetErrorString(st) + " (" + ncclGetLastError(nullptr) + ")", false);
      if (seconds_since(t0) > timeout_s_) fail(what, "did not complete within " + fmt_seconds(timeout_s_) + " (timeout)", true);
      std::this_thread::yield();
    }
    comms_.push_back(sub);
    complete_call(ncclSuccess, comms_.back().comm, what);
  }
}

Comms::~Comms() {
  if (!finalized_) abort_all();
}

bool Comms::has(Group g) const {
  for (const Entry& e : comms_)
    if (e.group == g) return true;
  return false;
}

ncclComm_t Comms::get(Group g) const {
  for (const Entry& e : comms_)
    if (e.group == g) return e.comm;
  throw ExecError(std::string("no communicator for group ") + to_string(g));
}

const GroupSplit& Comms::split(Group g) const {
  for (const Entry& e : comms_)
    if (e.group == g) return e.split;
  throw ExecError(std::string("no communicator for group ") + to_string(g));
}

void Comms::fail(const std::string& what, const std::string& why, bool timeout,
                 const std::function<std::string()>& detail) {
  std::string msg = "rank " + std::to_string(rank_) + " (" + host_gpu() + "): " + what + " " + why;
  if (detail) {
    const std::string d = detail();
    if (!d.empty()) msg += "; " + d;
  }
  // Say what happened at once; the caller writes the finished results, then aborts every
  // communicator (abort_all_bounded), which can itself hang on a peer that is still alive.
  std::fprintf(stderr, "lcm-exec: %s\n", msg.c_str());
  std::fflush(stderr);
  throw CommFailure(msg, what, timeout);
}

void Comms::abort_all_bounded() noexcept {
  static std::atomic<bool> aborted{false};
  std::fprintf(stderr, "lcm-exec: rank %d: aborting all NCCL communicators\n", rank_);
  std::fflush(stderr);
  std::thread([rank = rank_] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
    if (!aborted.load()) {
      std::fprintf(stderr, "lcm-exec: rank %d: ncclCommAbort did not return within %d s; exiting with code %d\n", rank,
                   kAbortGraceSeconds, kExitCommFailure);
      std::fflush(stderr);
      std::_Exit(kExitCommFailure);
    }
  }).detach();
  abort_all();
  aborted.store(true);
  std::fprintf(stderr, "lcm-exec: rank %d: communicators aborted\n", rank_);
  std::fflush(stderr);
}

void Comms::complete_call(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  if (r != ncclSuccess && r != ncclInProgress)
    fail(what, std::string("failed: ") + ncclGetErrorString(r) + " (" + ncclGetLastError(comm) + ")", false);
  const auto t0 = Clock::now();
  while (true) {
    ncclResult_t st = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &st);
    if (q != ncclSuccess) fail(what, std::string("ncclCommGetAsyncError failed: ") + ncclGetErrorString(q), false);
    if (st == ncclSuccess) return;
    if (st != ncclInProgress)
      fail(what, std::string("failed: ") + ncclGetErrorString(st) + " (" + ncclGetLastError(comm) + ")", false);
    if (seconds_since(t0) > timeout_s_) fail(what, "did not complete within " + fmt_seconds(timeout_s_) + " (timeout)", true);
    std::this_thread::yield();
  }
}

void Comms::wait_stream(cudaStream_t s, const std::string& what, const std::function<std::string()>& detail) {
  const auto t0 = Clock::now();
  while (true) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) fail(what, std::string("CUDA error: ") + cudaGetErrorString(e), false, detail);
    for (const Entry& c : comms_) {
      ncclResult_t st = ncclSuccess;
      if (ncclCommGetAsyncError(c.comm, &st) != ncclSuccess || (st != ncclSuccess && st != ncclInProgress))
        fail(what,
             std::string("NCCL error on comm ") + to_string(c.group) + ": " + ncclGetErrorString(st) + " (" +
                 ncclGetLastError(c.comm) + ")",
             false, detail);
    }
    if (seconds_since(t0) > timeout_s_)
      fail(what, "did not finish within " + fmt_seconds(timeout_s_) + " (timeout)", true, detail);
    std::this_thread::yield();
  }
}

void Comms::abort_all() noexcept {
  for (auto it = comms_.rbegin(); it != comms_.rend(); ++it) {
    if (it->comm) ncclCommAbort(it->comm);
    it->comm = nullptr;
  }
  finalized_ = true;
}

void Comms::finalize() {
  for (auto it = comms_.rbegin(); it != comms_.rend(); ++it) {
    const std::string what = std::string("ncclCommFinalize(") + to_string(it->group) + ")";
    complete_call(ncclCommFinalize(it->comm), it->comm, what);
  }
  for (auto it = comms_.rbegin(); it != comms_.rend(); ++it) {
    ncclCommDestroy(it->comm);
    it->comm = nullptr;
  }
  finalized_ = true;
}

ArrivalProbe::ArrivalProbe(std::vector<int> peers, int tag)
    : peers_(std::move(peers)),
      tag_(tag),
      recv_buf_(peers_.size(), -1),
      send_buf_(peers_.size(), tag),
      recv_req_(peers_.size(), MPI_REQUEST_NULL),
      send_req_(peers_.size(), MPI_REQUEST_NULL),
      arrived_(peers_.size(), false) {}

ArrivalProbe::~ArrivalProbe() {
  if (done_) return;
  // Only reached when the op failed; the process is about to abort, so leave requests.
}

void ArrivalProbe::post() {
  for (size_t i = 0; i < peers_.size(); ++i)
    LCM_MPI_CHECK(MPI_Irecv(&recv_buf_[i], 1, MPI_INT, peers_[i], tag_, MPI_COMM_WORLD, &recv_req_[i]));
}

void ArrivalProbe::arrive() {
  for (size_t i = 0; i < peers_.size(); ++i)
    LCM_MPI_CHECK(MPI_Isend(&send_buf_[i], 1, MPI_INT, peers_[i], tag_, MPI_COMM_WORLD, &send_req_[i]));
}

std::vector<int> ArrivalProbe::missing() {
  std::vector<int> out;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (!arrived_[i]) {
      int flag = 0;
      MPI_Test(&recv_req_[i], &flag, MPI_STATUS_IGNORE);
      arrived_[i] = flag != 0;
    }
    if (!arrived_[i]) out.push_back(peers_[i]);
  }
  return out;
}

void ArrivalProbe::finish() {
  LCM_MPI_CHECK(MPI_Waitall(static_cast<int>(recv_req_.size()), recv_req_.data(), MPI_STATUSES_IGNORE));
  LCM_MPI_CHECK(MPI_Waitall(static_cast<int>(send_req_.size()), send_req_.data(), MPI_STATUSES_IGNORE));
  done_ = true;
}

}  // namespace lcm::exec
