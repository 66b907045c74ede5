// The closing record of `lcm-exec train` (DIR/summary.json, docs/train-output.md format 1)
// as a value, its JSON writer and reader (the reader is what the round-trip test and
// `lcm compare` style consumers use), and the atomic file write (temp + rename).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lcm/executor/train/allocator.hpp"

namespace lcm::exec::train {

inline constexpr const char* kTrainFormat = "lcm-exec-train/1";

struct StepRecord {
  int step = 0;
  double time_s = 0;
  double loss = 0;
  double grad_norm = 0;
  double aux_loss = 0;  // MoE aux + z losses (0 for dense models)
  int64_t tokens = 0;
  bool warmup = false;
  // Medians of the SM clock (MHz) and board power (W) sampled during the step (NVML, every
  // 10 ms); -1 where NVML is absent or the step was shorter than a sample.
  double sm_clock_mhz = -1;
  double power_w = -1;
  bool operator==(const StepRecord&) const = default;
};

struct OpAggregate {
  std::string name;  // lcm::op_name
  int layer = -1;
  int64_t count = 0;
  double total_s = 0;
  double mean_s() const { return count > 0 ? total_s / static_cast<double>(count) : 0.0; }
  bool operator==(const OpAggregate&) const = default;
};

struct RoutingRecord {
  int layer = 0;
  std::vector<int64_t> load, kept;  // tokens per expert, summed over the measured steps' micro-batches
  double dropped_fraction() const;
  bool operator==(const RoutingRecord&) const = default;
};

// lcm-exec train's own host costs, measured at start (host_costs.hpp; -1: not measured).
struct HostCosts {
  double gemm_enqueue_s = -1;    // one cuBLASLt GEMM enqueued (algorithm cached), median
  double kernel_enqueue_s = -1;  // one elementwise kernel launched, median
  double sync_s = -1;            // a device-to-host round trip after one tiny kernel, median
  bool operator==(const HostCosts&) const = default;
};

struct TrainSummary {
  std::string scenario_path, scenario_name;
  std::vector<std::pair<std::string, std::string>> overrides;
  bool scaled = false;
  int layers_from = 0, layers_to = 0;
  std::string device_name;
  int device_count = 1;
  int cuda_driver = 0;
  int64_t cudnn = 0;
  int64_t seq_length = 0;
  int micro_batch_size = 1, micro_batches = 1;
  std::string recompute = "none";
  std::string precision = "bf16";
  uint64_t seed = 0;
  std::string data = "synthetic";
  std::vector<StepRecord> steps;
  // Derived from `steps` by finish(): the non-warm-up steps' median, min, max.
  double step_time_median = 0, step_time_min = 0, step_time_max = 0;
  int measured_steps = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  // Medians over the measured steps of their SM clock and board power (-1: not sampled).
  double sm_clock_mhz_median = -1;
  double power_w_median = -1;
  HostCosts host;
  double model_flops_per_step = 0;
  double peak_flops = 0;  // the profile's peak bf16 FLOP/s per GPU (MFU's denominator with device_count)
  std::vector<OpAggregate> ops;
  size_t peak_allocated = 0, peak_reserved = 0;
  std::array<size_t, kNumMemCategories> at_peak_by{};
  size_t context_bytes = 0, library_workspace_bytes = 0;
  std::vector<RoutingRecord> routing;
  bool operator==(const TrainSummary&) const = default;

  // Fills step_time_*, measured_steps, tokens_per_s and mfu from steps (the non-warm-up ones;
  // all of them when every step is warm-up), model_flops_per_step and peak_flops.
  void finish();
};

nlohmann::json to_json(const TrainSummary& s);
// Throws std::runtime_error (nlohmann's exceptions) on a document that is not format 1.
TrainSummary summary_from_json(const nlohmann::json& j);

// Writes `text` to `path` through `path.tmp.<pid>` and a rename (a reader never sees half a file).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace lcm::exec::train
