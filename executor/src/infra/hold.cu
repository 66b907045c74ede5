// StreamGate (hold.cuh): a one-thread kernel spins on a flag in mapped host memory.
#include "infra/hold.cuh"

#include <exception>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

__global__ void hold_kernel(volatile int* flag, unsigned long long max_ns) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (flag[0] == 0) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > max_ns) {
      flag[1] = 1;
      return;
    }
    __nanosleep(200);
  }
}

}  // namespace

StreamGate::StreamGate() {
  void* p = nullptr;
  LCM_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  host_flag_ = static_cast<volatile int*>(p);
  host_flag_[0] = 1;
  host_flag_[1] = 0;
  void* d = nullptr;
  LCM_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
  dev_flag_ = static_cast<int*>(d);
}

StreamGate::~StreamGate() {
  if (!host_flag_) return;
  host_flag_[0] = 1;
  // cudaFreeHost waits for the device. While an exception unwinds (a timed-out collective
  // whose kernel waits for a dead peer until main() aborts the communicators) it would wait
  // forever, so the pinned flag is left to the exiting process.
  if (std::uncaught_exceptions() == 0) cudaFreeHost(const_cast<int*>(host_flag_));
}

void StreamGate::close(cudaStream_t s, double max_hold_s) {
  host_flag_[0] = 0;
  host_flag_[1] = 0;
  __sync_synchronize();
  hold_kernel<<<1, 1, 0, s>>>(dev_flag_, static_cast<unsigned long long>(max_hold_s * 1e9));
  LCM_CUDA_CHECK(cudaGetLastError());
}

void StreamGate::open() {
  __sync_synchronize();
  host_flag_[0] = 1;
  __sync_synchronize();
}

bool StreamGate::timed_out() const { return host_flag_[1] != 0; }

}  // namespace lcm::exec
