// The parameter initialiser's numbers, shared by the device kernel (init_params) and the host
// (init_value): a counter-based hash of (seed, pair) gives two 24-bit uniforms, Box-Muller
// turns them into a standard normal pair (element 2p takes r cos, 2p + 1 takes r sin).
//
// Bit-identical on host and device: only IEEE-rounded float +, *, / and sqrt, each rounded
// on its own (no fma contraction: __fmul_rn / __fadd_rn on the device, a volatile store on
// the host), and log / sin / cos written out as polynomials in those operations instead of
// the libraries' (CUDA's logf and glibc's differ in the last bit).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace lcm::exec::train::detail {

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fdiv(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float fsqrt(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ uint32_t fbits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float bitsf(uint32_t u) { return __uint_as_float(u); }
#define LCM_INIT_FN __device__ __forceinline__
#else
inline float fmul(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float fadd(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float fdiv(float a, float b) {
  volatile float r = a / b;
  return r;
}
inline float fsqrt(float a) { return std::sqrt(a); }  // IEEE correctly rounded
inline uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
#define LCM_INIT_FN inline
#endif

LCM_INIT_FN uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// ln(u) for u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
// s = (m - 1) / (m + 1), |s| < 0.172, atanh by its series to s^13 (error < 1e-11 relative).
LCM_INIT_FN float log_unit(float u) {
  const uint32_t b = fbits(u);
  int e = static_cast<int>((b >> 23) & 0xffu) - 127;
  float m = bitsf((b & 0x7fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 1.41421356f) {
    m = fmul(m, 0.5f);
    e += 1;
  }
  const float s = fdiv(fadd(m, -1.0f), fadd(m, 1.0f)), s2 = fmul(s, s);
  float p = 1.0f / 13.0f;
  p = fadd(fmul(p, s2), 1.0f / 11.0f);
  p = fadd(fmul(p, s2), 1.0f / 9.0f);
  p = fadd(fmul(p, s2), 1.0f / 7.0f);
  p = fadd(fmul(p, s2), 1.0f / 5.0f);
  p = fadd(fmul(p, s2), 1.0f / 3.0f);
  p = fadd(fmul(p, s2), 1.0f);
  const float lnm = fmul(fmul(2.0f, s), p);
  return fadd(fmul(static_cast<float>(e), 0.693147180559945f), lnm);
}

// cos and sin of 2 pi t for t = k 2^-24 in [0, 1): quadrant q = round(4t), x = (4t - q) pi/2
// in [-pi/4, pi/4] (4t - q is exact), Taylor polynomials to x^12 / x^13.
LCM_INIT_FN void sincos_turn(float t, float* c, float* s) {
  const float t4 = fmul(t, 4.0f);
  const float qf = static_cast<float>(static_cast<int>(fadd(t4, 0.5f)));
  const int q = static_cast<int>(qf) & 3;
  const float x = fmul(fadd(t4, -qf), 1.57079632679490f), x2 = fmul(x, x);
  float sp = 1.0f / 6227020800.0f;  // 1/13!
  sp = fadd(fmul(sp, x2), -1.0f / 39916800.0f);
  sp = fadd(fmul(sp, x2), 1.0f / 362880.0f);
  sp = fadd(fmul(sp, x2), -1.0f / 5040.0f);
  sp = fadd(fmul(sp, x2), 1.0f / 120.0f);
  sp = fadd(fmul(sp, x2), -1.0f / 6.0f);
  sp = fadd(fmul(sp, x2), 1.0f);
  const float sx = fmul(x, sp);
  float cp = 1.0f / 479001600.0f;  // 1/12!
  cp = fadd(fmul(cp, x2), -1.0f / 3628800.0f);
  cp = fadd(fmul(cp, x2), 1.0f / 40320.0f);
  cp = fadd(fmul(cp, x2), -1.0f / 720.0f);
  cp = fadd(fmul(cp, x2), 1.0f / 24.0f);
  cp = fadd(fmul(cp, x2), -0.5f);
  const float cx = fadd(fmul(cp, x2), 1.0f);
  switch (q) {
    case 0: *c = cx; *s = sx; break;
    case 1: *c = -sx; *s = cx; break;
    case 2: *c = -cx; *s = -sx; break;
    default: *c = sx; *s = -cx; break;
  }
}

// Standard normal number i of stream `seed`.
LCM_INIT_FN float normal_at(uint64_t seed, int64_t i) {
  const uint64_t pair = static_cast<uint64_t>(i) >> 1;
  const uint64_t h = mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (pair * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
  const float u1 = static_cast<float>((h >> 40) + 1) * 5.9604644775390625e-8f;  // (0, 1]
  const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * 5.9604644775390625e-8f;  // [0, 1)
  const float r = fsqrt(fmul(-2.0f, log_unit(u1)));
  float c, s;
  sincos_turn(u2, &c, &s);
  return fmul(r, (i & 1) ? s : c);
}

LCM_INIT_FN float init_at(uint64_t seed, int64_t i, float std, float value) {
  return std == 0.0f ? value : fmul(std, normal_at(seed, i));
}

#undef LCM_INIT_FN

}  // namespace lcm::exec::train::detail
