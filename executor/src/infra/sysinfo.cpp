// System information and NVML clocks (see sysinfo.hpp).
#include "infra/sysinfo.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>

#include "lcm/executor/error.hpp"
#include "lcm/executor/timing.hpp"

extern char** environ;

namespace lcm::exec {
namespace {

// The few NVML entry points used, declared here (the toolkit image has no nvml.h).
using NvmlDevice = void*;
struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*by_pci)(const char*, NvmlDevice*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;
  int (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml n = [] {
    Nvml v;
    v.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v.lib) return v;
    const auto sym = [&](const char* name) { return dlsym(v.lib, name); };
    v.init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
    v.by_pci = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    v.clock = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
    v.max_clock = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(sym("nvmlDeviceGetMaxClockInfo"));
    v.driver = reinterpret_cast<int (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion"));
    v.temperature = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(sym("nvmlDeviceGetTemperature"));
    v.power_limit = reinterpret_cast<int (*)(NvmlDevice, unsigned*)>(sym("nvmlDeviceGetPowerManagementLimit"));
    v.power_usage = reinterpret_cast<int (*)(NvmlDevice, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
    v.ok = v.init && v.by_pci && v.clock && v.max_clock && v.driver && v.init() == 0;
    return v;
  }();
  return n;
}

constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

}  // namespace

std::string version_string(int code) {
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

DeviceInfo query_device(int device) {
  DeviceInfo d;
  d.device = device;
  cudaDeviceProp p{};
  LCM_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = static_cast<double>(p.l2CacheSize);
  d.hbm_bytes = static_cast<double>(p.totalGlobalMem);
  char bus[64] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) d.pci_bus_id = bus;
  return d;
}

Clocks query_clocks(const std::string& pci_bus_id) {
  Clocks c;
  const Nvml& n = nvml();
  NvmlDevice dev = nullptr;
  if (!n.ok || n.by_pci(pci_bus_id.c_str(), &dev) != 0) return c;
  unsigned v = 0;
  if (n.clock(dev, kClockSm, &v) == 0) c.sm_mhz = static_cast<int>(v);
  if (n.clock(dev, kClockMem, &v) == 0) c.mem_mhz = static_cast<int>(v);
  if (n.max_clock(dev, kClockSm, &v) == 0) c.sm_max_mhz = static_cast<int>(v);
  if (n.max_clock(dev, kClockMem, &v) == 0) c.mem_max_mhz = static_cast<int>(v);
  if (n.temperature && n.temperature(dev, kTemperatureGpu, &v) == 0) c.temperature_c = static_cast<int>(v);
  if (n.power_limit && n.power_limit(dev, &v) == 0) c.power_limit_w = static_cast<int>(v / 1000);
  return c;
}

ClockSampler::ClockSampler(const std::string& pci_bus_id, std::chrono::milliseconds period) {
  const Nvml& n = nvml();
  NvmlDevice dev = nullptr;
  if (!n.ok || n.by_pci(pci_bus_id.c_str(), &dev) != 0) return;
  samples_.reserve(1 << 16);
  const Nvml* lib = &n;
  thread_ = std::thread([this, dev, period, lib] {
    while (!stop_.load(std::memory_order_relaxed)) {
      unsigned mhz = 0, mw = 0;
      const bool c = lib->clock(dev, kClockSm, &mhz) == 0;
      const bool p = lib->power_usage && lib->power_usage(dev, &mw) == 0;
      if (c) {
        const std::lock_guard<std::mutex> lock(mu_);
        if (samples_.size() < (size_t{1} << 22))  // ~11 hours at 10 ms
          samples_.push_back({Clock::now(), static_cast<double>(mhz), p ? mw / 1000.0 : -1.0});
      }
      std::this_thread::sleep_for(period);
    }
  });
}

ClockSampler::~ClockSampler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

ClockSampler::Window ClockSampler::window(Clock::time_point t0, Clock::time_point t1) const {
  std::vector<double> mhz, w;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    for (const Sample& s : samples_) {
      if (s.t < t0 || s.t > t1) continue;
      mhz.push_back(s.sm_mhz);
      if (s.power_w >= 0) w.push_back(s.power_w);
    }
  }
  auto median = [](std::vector<double> v) { return v.empty() ? -1.0 : compute_stats(std::move(v)).median_us; };
  return {median(std::move(mhz)), median(std::move(w))};
}

SystemInfo query_system(int device) {
  SystemInfo s;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) s.hostname = host;
  s.device = query_device(device);
  LCM_CUDA_CHECK(cudaDriverGetVersion(&s.cuda_driver_version));
  LCM_CUDA_CHECK(cudaRuntimeGetVersion(&s.cuda_runtime_version));
  if (ncclGetVersion(&s.nccl_version) != ncclSuccess) s.nccl_version = 0;
  s.cublaslt_version = cublasLtGetVersion();
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
    s.mpi_library = std::string(mpi, static_cast<size_t>(len));
    const size_t nl = s.mpi_library.find_first_of(",\n");
    if (nl != std::string::npos) s.mpi_library.resize(nl);
  }
  const Nvml& n = nvml();
  if (n.ok) {
    char drv[96] = {};
    if (n.driver(drv, sizeof drv) == 0) s.driver_version = drv;
  }
  s.clocks = query_clocks(s.device.pci_bus_id);
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq) s.nccl_env[std::string(*e, static_cast<size_t>(eq - *e))] = std::string(eq + 1);
  }
  return s;
}

nlohmann::json to_json(const Clocks& c) {
  return {{"sm_mhz", c.sm_mhz},         {"mem_mhz", c.mem_mhz},          {"sm_max_mhz", c.sm_max_mhz},
          {"mem_max_mhz", c.mem_max_mhz}, {"temperature_c", c.temperature_c}, {"power_limit_w", c.power_limit_w}};
}

nlohmann::json to_json(const SystemInfo& s) {
  const size_t lt = s.cublaslt_version;  // MAJOR*10000 + MINOR*100 + PATCH
  return {
      {"hostname", s.hostname},
      {"gpu_name", s.device.name},
      {"pci_bus_id", s.device.pci_bus_id},
      {"compute_capability", std::to_string(s.device.cc_major) + "." + std::to_string(s.device.cc_minor)},
      {"sm_count", s.device.sm_count},
      {"l2_bytes", s.device.l2_bytes},
      {"hbm_bytes", s.device.hbm_bytes},
      {"driver_version", s.driver_version},
      {"cuda_driver_version", s.cuda_driver_version},
      {"cuda_runtime_version", s.cuda_runtime_version},
      {"nccl_version", version_string(s.nccl_version)},
      {"nccl_headers", version_string(NCCL_VERSION_CODE)},
      {"cublaslt_version", std::to_string(lt / 10000) + "." + std::to_string(lt / 100 % 100) + "." + std::to_string(lt % 100)},
      {"mpi_library", s.mpi_library},
      {"clocks", to_json(s.clocks)},
      {"nccl_env", s.nccl_env},
  };
}

}  // namespace lcm::exec
