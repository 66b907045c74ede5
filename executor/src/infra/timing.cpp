// CUDA-event timing, statistics and buffer rotation (see timing.hpp).
#include "lcm/executor/timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

TimeStats compute_stats(std::vector<double> v) {
  TimeStats s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median_us = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min_us = v.front();
  s.max_us = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_us = sum / static_cast<double>(n);
  double var = 0;
  for (double x : v) var += (x - s.mean_us) * (x - s.mean_us);
  s.stdev_us = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  const auto pct = [&](double p) {  // linear interpolation between closest ranks
    const double pos = p * static_cast<double>(n - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, n - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p10_us = pct(0.10);
  s.p90_us = pct(0.90);
  return s;
}

EventSeries::EventSeries(int n) : start_(static_cast<size_t>(n)), end_(static_cast<size_t>(n)) {
  LCM_CUDA_CHECK(cudaEventCreate(&base_));
  for (int i = 0; i < n; ++i) {
    LCM_CUDA_CHECK(cudaEventCreate(&start_[static_cast<size_t>(i)]));
    LCM_CUDA_CHECK(cudaEventCreate(&end_[static_cast<size_t>(i)]));
  }
}

EventSeries::~EventSeries() {
  for (cudaEvent_t e : start_) cudaEventDestroy(e);
  for (cudaEvent_t e : end_) cudaEventDestroy(e);
  if (base_) cudaEventDestroy(base_);
}

void EventSeries::record_base(cudaStream_t s) { LCM_CUDA_CHECK(cudaEventRecord(base_, s)); }
void EventSeries::record_start(int i, cudaStream_t s) { LCM_CUDA_CHECK(cudaEventRecord(start_[static_cast<size_t>(i)], s)); }
void EventSeries::record_end(int i, cudaStream_t s) { LCM_CUDA_CHECK(cudaEventRecord(end_[static_cast<size_t>(i)], s)); }

int EventSeries::completed() const {
  int done = 0;
  for (cudaEvent_t e : end_) done += cudaEventQuery(e) == cudaSuccess ? 1 : 0;
  return done;
}

std::vector<double> EventSeries::durations_us() const {
  std::vector<double> out(start_.size());
  for (size_t i = 0; i < start_.size(); ++i) {
    float ms = 0;
    LCM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_[i], end_[i]));
    out[i] = 1000.0 * static_cast<double>(ms);
  }
  return out;
}

std::vector<double> EventSeries::starts_us() const {
  std::vector<double> out(start_.size());
  for (size_t i = 0; i < start_.size(); ++i) {
    float ms = 0;
    LCM_CUDA_CHECK(cudaEventElapsedTime(&ms, base_, start_[i]));
    out[i] = 1000.0 * static_cast<double>(ms);
  }
  return out;
}

int rotation_sets(double set_bytes, double rotate_bytes, int max_sets) {
  if (set_bytes <= 0) return 1;
  const double sets = std::ceil(rotate_bytes / set_bytes);
  return static_cast<int>(std::clamp(sets, 1.0, static_cast<double>(max_sets)));
}

double rotation_bytes(double l2_bytes, double override_bytes) {
  if (override_bytes > 0) return override_bytes;
  return std::max(100e6, 2.0 * l2_bytes);
}

}  // namespace lcm::exec
