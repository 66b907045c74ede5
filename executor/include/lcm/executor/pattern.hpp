// Deterministic data patterns shared by the device fill/check kernels and the host
// reference: the same function of (seed, index) on both sides, so the CPU can recompute
// any input element without copying the matrix back.
//
//   uniform_pm1(seed, i)   float in [-1, 1), 24 random bits, exact in fp32
//   coll_value(seed, r, i) small integer in [-8, 8] for collectives; sums of up to 32
//                          ranks are exact in fp32 and bf16
//   word_value(seed, i)    32-bit word for copy-bandwidth checks
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LCM_HD __host__ __device__ __forceinline__
#else
#define LCM_HD inline
#endif

namespace lcm::exec::pattern {

LCM_HD uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

LCM_HD float uniform_pm1(uint64_t seed, uint64_t i) {
  const uint64_t h = mix64(seed * 0x2545f4914f6cdd1dull ^ i);
  const int32_t u = static_cast<int32_t>(h >> 40) - (1 << 23);  // [-2^23, 2^23)
  return static_cast<float>(u) * (1.0f / 8388608.0f);
}

LCM_HD int coll_value(uint64_t seed, int rank, uint64_t i) {
  const uint64_t h = mix64((seed + 0x51ull * static_cast<uint64_t>(rank + 1)) * 0x9e3779b97f4a7c15ull ^ i);
  return static_cast<int>(h % 17u) - 8;
}

LCM_HD uint32_t word_value(uint64_t seed, uint64_t i) {
  return static_cast<uint32_t>(mix64(seed ^ (i * 0xd1342543de82ef95ull)) >> 16);
}

}  // namespace lcm::exec::pattern
