// Measurement method shared by every benchmark (docs/executor.md "Methodology"):
// per-repetition CUDA events on the stream that runs the op, median/min/max over the
// repetitions, and buffer rotation so the L2 cannot hold the working set.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace lcm::exec {

// Host wall time since `t0`, in seconds (timeouts, warm-up budgets, host enqueue costs).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct TimeStats {
  int n = 0;
  double median_us = 0, min_us = 0, max_us = 0, mean_us = 0;
  double p10_us = 0, p90_us = 0, stdev_us = 0;
};
TimeStats compute_stats(std::vector<double> samples_us);

// Start/stop event pairs, one per repetition, all on one stream. Events are recorded by
// the caller around each op; times are read after the stream has drained.
class EventSeries {
 public:
  explicit EventSeries(int n);
  ~EventSeries();
  EventSeries(const EventSeries&) = delete;
  EventSeries& operator=(const EventSeries&) = delete;

  void record_base(cudaStream_t s);  // the trace's time origin for this point
  void record_start(int i, cudaStream_t s);
  void record_end(int i, cudaStream_t s);
  int completed() const;             // repetitions whose end event has fired
  std::vector<double> durations_us() const;
  std::vector<double> starts_us() const;  // start of each repetition after the base event

 private:
  std::vector<cudaEvent_t> start_, end_;
  cudaEvent_t base_ = nullptr;
};

// Distinct buffer sets to rotate through: ceil(rotate_bytes / set_bytes), at least 1, at
// most max_sets.
int rotation_sets(double set_bytes, double rotate_bytes, int max_sets = 256);
// max(100 MB, 2 x L2) unless overridden (> 0).
double rotation_bytes(double l2_bytes, double override_bytes);

}  // namespace lcm::exec
