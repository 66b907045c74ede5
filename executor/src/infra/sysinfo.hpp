// What the numbers were measured on: GPU, driver, CUDA / NCCL / cuBLASLt / MPI versions,
// clocks, and the NCCL_* environment. NVML is opened with dlopen when present, so the
// binary needs no driver library to start (CI runs the test binaries without a GPU).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lcm::exec {

struct DeviceInfo {
  int device = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  double l2_bytes = 0;
  double hbm_bytes = 0;
};

struct Clocks {  // MHz; -1 where NVML is unavailable
  int sm_mhz = -1, mem_mhz = -1;
  int sm_max_mhz = -1, mem_max_mhz = -1;
  int temperature_c = -1;
  int power_limit_w = -1;
};

struct SystemInfo {
  std::string hostname;
  DeviceInfo device;
  std::string driver_version;  // NVML, e.g. "580.159.04"; empty when unavailable
  int cuda_driver_version = 0;  // cudaDriverGetVersion, e.g. 13000
  int cuda_runtime_version = 0;
  int nccl_version = 0;         // ncclGetVersion, e.g. 22803
  size_t cublaslt_version = 0;
  std::string mpi_library;
  Clocks clocks;
  nlohmann::json nccl_env = nlohmann::json::object();  // inherited NCCL_* variables
};

DeviceInfo query_device(int device);
Clocks query_clocks(const std::string& pci_bus_id);

// SM clock and board power sampled by a host thread every `period` while a run goes on (NVML;
// a power-capped GPU lowers its clock under sustained load, which short benchmarks never
// see). `window(t0, t1)` gives the medians of the samples taken between two instants; -1
// where NVML is absent or no sample fell in the window. Starts on construction, stops on
// destruction.
class ClockSampler {
 public:
  using Clock = std::chrono::steady_clock;
  struct Window {
    double sm_mhz = -1, power_w = -1;
  };
  explicit ClockSampler(const std::string& pci_bus_id, std::chrono::milliseconds period = std::chrono::milliseconds(10));
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;
  Window window(Clock::time_point t0, Clock::time_point t1) const;

 private:
  struct Sample {
    Clock::time_point t;
    double sm_mhz, power_w;
  };
  mutable std::mutex mu_;
  std::vector<Sample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};
SystemInfo query_system(int device);
nlohmann::json to_json(const SystemInfo& s);
nlohmann::json to_json(const Clocks& c);
std::string version_string(int nccl_code);  // 22803 -> "2.28.3"

}  // namespace lcm::exec
