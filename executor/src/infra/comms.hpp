// NCCL communicators of an lcm-exec run, bootstrapped through MPI, all non-blocking
// (ncclConfig_t.blocking = 0) so the host can always reach ncclCommAbort.
//
// Every wait is the nccl-tests testStreamSynchronize pattern (docs/reference/reliability.md §3.1): spin
// on cudaStreamQuery, check ncclCommGetAsyncError on every communicator, and once the
// deadline (--timeout) passes or NCCL reports an error, throw CommFailure naming the rank and
// the op; main() writes the finished results, then aborts every communicator. ArrivalProbe names the peers that never reached
// the op (the flight-recorder idea of docs/reference/reliability.md §3.10: "name the first rank whose seq
// lags").
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lcm/executor/layout.hpp"

namespace lcm::exec {

class CommFailure : public std::runtime_error {
 public:
  CommFailure(const std::string& message, std::string op, bool timeout)
      : std::runtime_error(message), op_(std::move(op)), timeout_(timeout) {}
  const std::string& op() const { return op_; }
  bool timeout() const { return timeout_; }

 private:
  std::string op_;
  bool timeout_;
};

// Waits for a stream with no communicator involved (GEMM, copies); throws CommFailure on
// timeout, ExecError on a CUDA error.
void wait_stream(cudaStream_t s, double timeout_s, const std::string& what);

class Comms {
 public:
  // World communicator from an MPI-broadcast unique id, then ncclCommSplit for every group
  // of the layout with more than one rank, plus `extra` (even when it has one rank).
  // Colors and keys come from group_split(), i.e. lcm::group_ranks.
  Comms(const Layout& layout, int rank, double timeout_s, const std::vector<Group>& extra);
  ~Comms();
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;

  bool has(Group g) const;
  ncclComm_t get(Group g) const;
  const GroupSplit& split(Group g) const;
  int rank() const { return rank_; }
  double timeout_s() const { return timeout_s_; }

  // After an NCCL call on `comm` returned `r`: throw on error, poll while ncclInProgress.
  void complete_call(ncclResult_t r, ncclComm_t comm, const std::string& what);
  // Drains `s` while polling every communicator. `detail` is called on failure and its
  // text is appended to the message (progress, peers that never arrived).
  void wait_stream(cudaStream_t s, const std::string& what, const std::function<std::string()>& detail = {});
  void abort_all() noexcept;
  // abort_all(), but if it has not returned after a grace period (10 s) the process exits
  // with code 5: ncclCommAbort can block while a stalled peer is still alive.
  void abort_all_bounded() noexcept;
  void finalize();  // ncclCommFinalize (polled) + ncclCommDestroy, sub-communicators first

 private:
  struct Entry {
    Group group;
    GroupSplit split;
    ncclComm_t comm = nullptr;
  };
  void create(const Layout& layout, const std::vector<Group>& extra);
  // Prints the failure and throws CommFailure; aborting is left to the owner, after it has
  // written what is finished.
  [[noreturn]] void fail(const std::string& what, const std::string& why, bool timeout,
                         const std::function<std::string()>& detail = {});
  int rank_;
  double timeout_s_;
  std::vector<Entry> comms_;  // [0] = world
  bool finalized_ = false;
};

// Point-to-point "I reached op P" messages among the ranks of a group, outside the timed
// region: post() before the barrier, arrive() right before the first timed enqueue.
class ArrivalProbe {
 public:
  ArrivalProbe(std::vector<int> peers, int tag);  // peers: global ranks, self excluded
  ~ArrivalProbe();
  ArrivalProbe(const ArrivalProbe&) = delete;
  ArrivalProbe& operator=(const ArrivalProbe&) = delete;
  void post();
  void arrive();
  std::vector<int> missing();  // peers whose message has not come
  void finish();               // waits for every message (call once the op completed)

 private:
  std::vector<int> peers_;
  int tag_;
  std::vector<int> recv_buf_, send_buf_;
  std::vector<MPI_Request> recv_req_, send_req_;
  std::vector<bool> arrived_;
  bool done_ = false;
};

}  // namespace lcm::exec
