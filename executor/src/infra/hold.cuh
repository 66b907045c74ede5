// A gate that holds a stream until the host opens it, so that a timed loop of many short
// ops is enqueued completely before the GPU starts on it: per-repetition events then time
// the ops back to back on the GPU, not the host's enqueue rate (which, for a non-blocking
// NCCL communicator, is tens of microseconds per call and swamped collectives below
// ~32 MiB; docs/executor.md "Methodology"). The gate opens by itself after `max_hold_s`,
// so a host that never opens it cannot hang the GPU.
#pragma once

#include <cuda_runtime_api.h>

namespace lcm::exec {

class StreamGate {
 public:
  StreamGate();
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  void close(cudaStream_t s, double max_hold_s = 5.0);  // enqueues the waiting kernel
  void open();                                          // lets it finish
  bool timed_out() const;                               // the last hold ended by itself

 private:
  volatile int* host_flag_ = nullptr;  // pinned, mapped: [0] open, [1] timed out
  int* dev_flag_ = nullptr;
};

}  // namespace lcm::exec
