// Reference attention kernels (declared in attention_ref.cuh).
#include "lcm/executor/attention_ref.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "lcm/executor/error.hpp"

namespace lcm::exec::kernels {
namespace {

constexpr int kThreads = 256;  // also the score chunk; head dims up to 256
constexpr int kMaxD = 256;

using bf16 = __nv_bfloat16;

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

__device__ __forceinline__ int64_t q_off(const AttnRefDesc& p, int64_t b, int64_t h, int64_t i) {
  return ((b * p.s + i) * p.hq + h) * p.d;
}
__device__ __forceinline__ int64_t kv_off(const AttnRefDesc& p, int64_t b, int64_t h, int64_t j) {
  return ((b * p.s + j) * p.hkv + h) * p.d;
}
__device__ __forceinline__ int64_t stat_off(const AttnRefDesc& p, int64_t b, int64_t h, int64_t i) {
  return (b * p.hq + h) * p.s + i;
}

// sum_t a[t] g[t] (and sum_t |a[t] g[t]|) for a row a in shared memory and a bf16 row g
// in global memory, 8 elements (16 bytes) per load; d % 8 == 0.
__device__ __forceinline__ float dot_row(const float* a, const bf16* g, int d) {
  float acc = 0.0f;
  for (int t = 0; t < d; t += 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(g + t);
    const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc = fmaf(a[t + u], __bfloat162float(e[u]), acc);
  }
  return acc;
}
__device__ __forceinline__ void dot_row_abs(const float* a, const bf16* g, int d, float& dot, float& abs_sum) {
  float acc = 0.0f, aa = 0.0f;
  for (int t = 0; t < d; t += 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(g + t);
    const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const float x = a[t + u] * __bfloat162float(e[u]);
      acc += x;
      aa += fabsf(x);
    }
  }
  dot = acc;
  abs_sum = aa;
}

// Block-wide sum of two floats; every thread gets the result.
__device__ float2 block_sum2(float a, float b) {
  __shared__ float2 warp_part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, o);
    b += __shfl_down_sync(0xffffffffu, b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // warp_part may still be read by a previous call
  if (lane == 0) warp_part[warp] = make_float2(a, b);
  __syncthreads();
  float2 r = make_float2(0.0f, 0.0f);
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
    r.x += warp_part[w].x;
    r.y += warp_part[w].y;
  }
  return r;
}

// Combines running (max, sum of exp(x - max)) pairs.
__device__ __forceinline__ void lse_combine(float& m, float& l, float m2, float l2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    l = l2;
    return;
  }
  const float mx = fmaxf(m, m2);
  l = l * expf(m - mx) + l2 * expf(m2 - mx);
  m = mx;
}

__device__ float block_lse(float m, float l) {
  __shared__ float2 warp_part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_down_sync(0xffffffffu, m, o);
    const float l2 = __shfl_down_sync(0xffffffffu, l, o);
    lse_combine(m, l, m2, l2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_part[warp] = make_float2(m, l);
  __syncthreads();
  float M = -INFINITY, L = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) lse_combine(M, L, warp_part[w].x, warp_part[w].y);
  return M + logf(L);
}

__global__ void __launch_bounds__(kThreads) ref_fwd_kernel(AttnRefDesc p, const bf16* __restrict__ Q,
                                                           const bf16* __restrict__ K, const bf16* __restrict__ V,
                                                           const bf16* __restrict__ dO, const int32_t* rows,
                                                           float* O, float* Omag, float* lse, float* dsum,
                                                           float* dabs) {
  __shared__ float qs[kMaxD];
  __shared__ float ps[kThreads];
  const int r = blockIdx.x, tid = threadIdx.x;
  const int b = rows[3 * r], h = rows[3 * r + 1], i = rows[3 * r + 2];
  const int hk = h / (p.hq / p.hkv);
  const int d = p.d;
  for (int t = tid; t < d; t += blockDim.x) qs[t] = __bfloat162float(Q[q_off(p, b, h, i) + t]);
  __syncthreads();
  const int jend = p.causal ? i + 1 : p.s;
  const int jstart = p.causal && p.window > 0 ? max(0, i - p.window) : 0;  // a sliding window's first key

  float m = -INFINITY, l = 0.0f;
  for (int j = jstart + tid; j < jend; j += blockDim.x) {
    const float x = p.scale * dot_row(qs, K + kv_off(p, b, hk, j), d);
    lse_combine(m, l, x, 1.0f);
  }
  const float row_lse = block_lse(m, l);

  float acc = 0.0f, mag = 0.0f;
  for (int j0 = jstart; j0 < jend; j0 += blockDim.x) {
    const int j = j0 + tid;
    ps[tid] = j < jend ? expf(p.scale * dot_row(qs, K + kv_off(p, b, hk, j), d) - row_lse) : 0.0f;
    __syncthreads();
    if (tid < d) {
      const int cnt = min(static_cast<int>(blockDim.x), jend - j0);
      const bf16* vcol = V + kv_off(p, b, hk, j0) + tid;
      const int64_t vstride = static_cast<int64_t>(p.hkv) * d;
      for (int jj = 0; jj < cnt; ++jj) {
        const float vv = __bfloat162float(vcol[jj * vstride]);
        acc = fmaf(ps[jj], vv, acc);
        mag = fmaf(ps[jj], fabsf(vv), mag);
      }
    }
    __syncthreads();
  }
  if (tid < d) {
    O[static_cast<int64_t>(r) * d + tid] = acc;
    Omag[static_cast<int64_t>(r) * d + tid] = mag;
  }
  if (tid == 0) lse[r] = row_lse;
  if (dO != nullptr) {
    const float g = tid < d ? __bfloat162float(dO[q_off(p, b, h, i) + tid]) : 0.0f;
    const float2 s = block_sum2(g * acc, fabsf(g * acc));
    if (tid == 0) {
      dsum[r] = s.x;
      dabs[r] = s.y;
    }
  }
}

__global__ void __launch_bounds__(kThreads) ref_dq_kernel(AttnRefDesc p, const bf16* __restrict__ Q,
                                                          const bf16* __restrict__ K, const bf16* __restrict__ V,
                                                          const bf16* __restrict__ dO, const int32_t* rows,
                                                          const float* lse, const float* dsum, const float* dabs,
                                                          float* dQ, float* dQmag) {
  __shared__ float qs[kMaxD], gs[kMaxD];
  __shared__ float ds_s[kThreads], dm_s[kThreads];
  const int r = blockIdx.x, tid = threadIdx.x;
  const int b = rows[3 * r], h = rows[3 * r + 1], i = rows[3 * r + 2];
  const int hk = h / (p.hq / p.hkv);
  const int d = p.d;
  for (int t = tid; t < d; t += blockDim.x) {
    qs[t] = __bfloat162float(Q[q_off(p, b, h, i) + t]);
    gs[t] = __bfloat162float(dO[q_off(p, b, h, i) + t]);
  }
  __syncthreads();
  const float L = lse[r], D = dsum[r], Da = dabs[r];
  const int jend = p.causal ? i + 1 : p.s;
  const int jstart = p.causal && p.window > 0 ? max(0, i - p.window) : 0;
  float acc = 0.0f, mag = 0.0f;
  for (int j0 = jstart; j0 < jend; j0 += blockDim.x) {
    const int j = j0 + tid;
    float ds = 0.0f, dm = 0.0f;
    if (j < jend) {
      const float pr = expf(p.scale * dot_row(qs, K + kv_off(p, b, hk, j), d) - L);
      float dp, dpa;
      dot_row_abs(gs, V + kv_off(p, b, hk, j), d, dp, dpa);
      ds = pr * (dp - D);
      dm = pr * (dpa + Da);
    }
    ds_s[tid] = ds;
    dm_s[tid] = dm;
    __syncthreads();
    if (tid < d) {
      const int cnt = min(static_cast<int>(blockDim.x), jend - j0);
      const bf16* kcol = K + kv_off(p, b, hk, j0) + tid;
      const int64_t kstride = static_cast<int64_t>(p.hkv) * d;
      for (int jj = 0; jj < cnt; ++jj) {
        const float kk = __bfloat162float(kcol[jj * kstride]);
        acc = fmaf(ds_s[jj], kk, acc);
        mag = fmaf(dm_s[jj], fabsf(kk), mag);
      }
    }
    __syncthreads();
  }
  if (tid < d) {
    dQ[static_cast<int64_t>(r) * d + tid] = p.scale * acc;
    dQmag[static_cast<int64_t>(r) * d + tid] = p.scale * mag;
  }
}

__global__ void __launch_bounds__(kThreads) ref_dkv_kernel(AttnRefDesc p, const bf16* __restrict__ Q,
                                                           const bf16* __restrict__ K, const bf16* __restrict__ V,
                                                           const bf16* __restrict__ dO, const int32_t* rows,
                                                           const float* lse_all, const float* dsum_all,
                                                           const float* dabs_all, float* dK, float* dKmag, float* dV,
                                                           float* dVmag) {
  __shared__ float ks[kMaxD], vs[kMaxD];
  __shared__ float p_s[kThreads], ds_s[kThreads], dm_s[kThreads];
  const int r = blockIdx.x, tid = threadIdx.x;
  const int b = rows[3 * r], hk = rows[3 * r + 1], j = rows[3 * r + 2];
  const int G = p.hq / p.hkv;
  const int d = p.d;
  for (int t = tid; t < d; t += blockDim.x) {
    ks[t] = __bfloat162float(K[kv_off(p, b, hk, j) + t]);
    vs[t] = __bfloat162float(V[kv_off(p, b, hk, j) + t]);
  }
  __syncthreads();
  float acck = 0.0f, magk = 0.0f, accv = 0.0f, magv = 0.0f;
  const int istart = p.causal ? j : 0;
  const int iend = p.causal && p.window > 0 ? min(p.s, j + p.window + 1) : p.s;  // queries whose window holds j
  const int64_t qstride = static_cast<int64_t>(p.hq) * d;
  for (int g = 0; g < G; ++g) {
    const int h = hk * G + g;
    for (int i0 = istart; i0 < iend; i0 += blockDim.x) {
      const int i = i0 + tid;
      float pr = 0.0f, ds = 0.0f, dm = 0.0f;
      if (i < iend) {
        const int64_t so = stat_off(p, b, h, i);
        pr = expf(p.scale * dot_row(ks, Q + q_off(p, b, h, i), d) - lse_all[so]);
        float dp, dpa;
        dot_row_abs(vs, dO + q_off(p, b, h, i), d, dp, dpa);
        ds = pr * (dp - dsum_all[so]);
        dm = pr * (dpa + dabs_all[so]);
      }
      p_s[tid] = pr;
      ds_s[tid] = ds;
      dm_s[tid] = dm;
      __syncthreads();
      if (tid < d) {
        const int cnt = min(static_cast<int>(blockDim.x), iend - i0);
        const bf16* qcol = Q + q_off(p, b, h, i0) + tid;
        const bf16* gcol = dO + q_off(p, b, h, i0) + tid;
        for (int ii = 0; ii < cnt; ++ii) {
          const float qv = __bfloat162float(qcol[ii * qstride]);
          const float gv = __bfloat162float(gcol[ii * qstride]);
          accv = fmaf(p_s[ii], gv, accv);
          magv = fmaf(p_s[ii], fabsf(gv), magv);
          acck = fmaf(ds_s[ii], qv, acck);
          magk = fmaf(dm_s[ii], fabsf(qv), magk);
        }
      }
      __syncthreads();
    }
  }
  if (tid < d) {
    const int64_t o = static_cast<int64_t>(r) * d + tid;
    dK[o] = p.scale * acck;
    dKmag[o] = p.scale * magk;
    dV[o] = accv;
    dVmag[o] = magv;
  }
}

__global__ void scatter_f32_kernel(const float* src, const int64_t* idx, size_t n, float* dst) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n; j += size_t{gridDim.x} * blockDim.x)
    dst[idx[j]] = src[j];
}

__global__ void gather_f32_kernel(const float* p, const int64_t* idx, size_t n, float* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n; j += size_t{gridDim.x} * blockDim.x)
    out[j] = p[idx[j]];
}

__device__ __forceinline__ void add_count(unsigned long long* total, unsigned long long mine) {
  for (int o = 16; o > 0; o >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, o);
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicAdd(total, mine);
}

__global__ void nonfinite_bf16_kernel(const bf16* p, size_t n, unsigned long long* count) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    bad += isfinite(__bfloat162float(p[i])) ? 0 : 1;
  add_count(count, bad);
}

__global__ void nonfinite_f32_kernel(const float* p, size_t n, unsigned long long* count) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    bad += isfinite(p[i]) ? 0 : 1;
  add_count(count, bad);
}

int grid_for(size_t n) {
  const size_t want = (n + 255) / 256;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, 132 * 16)));
}

void check_desc(const AttnRefDesc& p) {
  if (p.d % 8 != 0 || p.d > kMaxD || p.hkv < 1 || p.hq % p.hkv != 0)
    throw ExecError("reference attention: head dim must be a multiple of 8 up to 256 and h_q a multiple of h_kv");
}

}  // namespace

void attention_ref_fwd(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                       const int32_t* rows, int n, float* o, float* o_mag, float* lse, float* dsum, float* dabs,
                       cudaStream_t s) {
  if (n <= 0) return;
  check_desc(p);
  ref_fwd_kernel<<<n, kThreads, 0, s>>>(p, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                                        static_cast<const bf16*>(v), static_cast<const bf16*>(dout), rows, o, o_mag,
                                        lse, dsum, dabs);
  check_launch("ref_fwd_kernel");
}

void attention_ref_dq(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                      const int32_t* rows, int n, const float* lse, const float* dsum, const float* dabs, float* dq,
                      float* dq_mag, cudaStream_t s) {
  if (n <= 0) return;
  check_desc(p);
  ref_dq_kernel<<<n, kThreads, 0, s>>>(p, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                                       static_cast<const bf16*>(v), static_cast<const bf16*>(dout), rows, lse, dsum,
                                       dabs, dq, dq_mag);
  check_launch("ref_dq_kernel");
}

void attention_ref_dkv(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                       const int32_t* rows, int n, const float* lse_all, const float* dsum_all,
                       const float* dabs_all, float* dk, float* dk_mag, float* dv, float* dv_mag, cudaStream_t s) {
  if (n <= 0) return;
  check_desc(p);
  ref_dkv_kernel<<<n, kThreads, 0, s>>>(p, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                                        static_cast<const bf16*>(v), static_cast<const bf16*>(dout), rows, lse_all,
                                        dsum_all, dabs_all, dk, dk_mag, dv, dv_mag);
  check_launch("ref_dkv_kernel");
}

void scatter_f32(const float* src, const int64_t* idx, size_t n, float* dst, cudaStream_t s) {
  if (n == 0) return;
  scatter_f32_kernel<<<grid_for(n), 256, 0, s>>>(src, idx, n, dst);
  check_launch("scatter_f32_kernel");
}

void gather_f32(const float* p, const int64_t* idx, size_t n, float* out, cudaStream_t s) {
  if (n == 0) return;
  gather_f32_kernel<<<grid_for(n), 256, 0, s>>>(p, idx, n, out);
  check_launch("gather_f32_kernel");
}

void count_nonfinite_bf16(const void* p, size_t n, unsigned long long* count, cudaStream_t s) {
  if (n == 0) return;
  nonfinite_bf16_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const bf16*>(p), n, count);
  check_launch("nonfinite_bf16_kernel");
}

void count_nonfinite_f32(const float* p, size_t n, unsigned long long* count, cudaStream_t s) {
  if (n == 0) return;
  nonfinite_f32_kernel<<<grid_for(n), 256, 0, s>>>(p, n, count);
  check_launch("nonfinite_f32_kernel");
}

}  // namespace lcm::exec::kernels
