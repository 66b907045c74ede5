// The GPU tests' guard: empty when a GPU is usable, else why not; LCM_REQUIRE_GPU() skips
// the calling test with that reason (GTEST_SKIP), so the suite passes where no GPU is found.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace lcm::test {

inline std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return "";
}

}  // namespace lcm::test

#define LCM_REQUIRE_GPU()                                            \
  do {                                                               \
    const std::string lcm_why_ = ::lcm::test::no_gpu_reason();       \
    if (!lcm_why_.empty()) GTEST_SKIP() << "no GPU: " << lcm_why_;   \
  } while (0)
