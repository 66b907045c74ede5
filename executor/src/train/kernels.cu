// Dense kernels of the training runner (declared in lcm/executor/train/kernels.hpp).
//
// Memory-bound throughout: bf16 rows move in 16-byte vectors (8 values) wherever the row
// length is a multiple of 8 and the pointers are 16-byte aligned, scalar otherwise; row-wise
// ops (RMSNorm, cross-entropy, embedding) take one block per row and reduce with warp
// shuffles; everything accumulates in fp32 (sum_squares in fp64). No floating-point atomics:
// every reduction has a fixed order, so a step is bit-identical from run to run (the
// runner's resume guarantee).
#include "lcm/executor/train/kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <cmath>
#include <cstdint>
#include <string>

#include "lcm/executor/error.hpp"
#include "train/init_normal.cuh"

namespace lcm::exec::train {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // grid-stride loops: enough blocks to fill an H100/H200

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, kMaxBlocks));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---- vector helpers ----------------------------------------------------------------
__device__ __forceinline__ void load8(const bf16* p, float* f) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 t = __bfloat1622float2(h[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}

__device__ __forceinline__ void store8(bf16* p, const float* f) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__device__ __forceinline__ float at(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, returned to every thread (blockDim.x a multiple of 32, <= 1024).
template <class T>
__device__ T block_sum(T v) {
  __shared__ T part[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[wid] = v;
  __syncthreads();
  T s = lane < nw ? part[lane] : T(0);
  return warp_sum(s);
}

// ---- init and casts -------------------------------------------------------------------
__global__ void init_kernel(float* master, int64_t n, float std, float value, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    master[i] = detail::init_at(seed, i, std, value);
}

template <bool kVec>
__global__ void cast_bf16_kernel(const float* in, bf16* out, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n8 = n / 8;
    for (int64_t i = t0; i < n8; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(in)[2 * i], b = reinterpret_cast<const float4*>(in)[2 * i + 1];
      const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      store8(out + 8 * i, f);
    }
    done = n8 * 8;
  }
  for (int64_t i = done + t0; i < n; i += stride) out[i] = __float2bfloat16_rn(in[i]);
}

template <bool kVec>
__global__ void cast_f32_kernel(const bf16* in, float* out, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n8 = n / 8;
    for (int64_t i = t0; i < n8; i += stride) {
      float f[8];
      load8(in + 8 * i, f);
      reinterpret_cast<float4*>(out)[2 * i] = make_float4(f[0], f[1], f[2], f[3]);
      reinterpret_cast<float4*>(out)[2 * i + 1] = make_float4(f[4], f[5], f[6], f[7]);
    }
    done = n8 * 8;
  }
  for (int64_t i = done + t0; i < n; i += stride) out[i] = __bfloat162float(in[i]);
}

template <bool kVec>
__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n8 = n / 8;
    for (int64_t i = t0; i < n8; i += stride) {
      float x[8], y[8];
      load8(a + 8 * i, x);
      load8(b + 8 * i, y);
#pragma unroll
      for (int k = 0; k < 8; ++k) x[k] += y[k];
      store8(out + 8 * i, x);
    }
    done = n8 * 8;
  }
  for (int64_t i = done + t0; i < n; i += stride) out[i] = __float2bfloat16_rn(at(a, i) + at(b, i));
}

// ---- embedding ---------------------------------------------------------------------------
template <bool kVec>
__global__ void embedding_fwd_kernel(const int32_t* tokens, const bf16* table, bf16* out, int64_t h) {
  const int64_t r = blockIdx.x;
  const bf16* src = table + static_cast<int64_t>(tokens[r]) * h;
  bf16* dst = out + r * h;
  if constexpr (kVec) {
    for (int64_t c = threadIdx.x; c < h / 8; c += blockDim.x)
      reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
  } else {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dst[c] = src[c];
  }
}

// The backward in a fixed order: rows sorted by token id (a stable radix sort keeps equal
// ids in row order); block (i, y) owns the columns y of token keys[i] when i starts a run of
// equal ids, sums the run's rows in row order in fp32 and adds the sum to dtable once. No
// atomics, so the result is bit-identical from run to run.
__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    v[i] = static_cast<int32_t>(i);
}

constexpr int kEmbedBwdThreads = 128;

template <bool kVec>
__global__ void embedding_bwd_sorted_kernel(const int32_t* keys, const int32_t* rows, const bf16* dout, float* dtable,
                                            int64_t n, int64_t h) {
  const int64_t i = blockIdx.x;
  const int32_t key = keys[i];
  if (i > 0 && keys[i - 1] == key) return;
  float* dst = dtable + static_cast<int64_t>(key) * h;
  const int64_t cg = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;  // column group (8 columns) or column
  if constexpr (kVec) {
    if (8 * cg >= h) return;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n && keys[j] == key; ++j) {
      float f[8];
      load8(dout + static_cast<int64_t>(rows[j]) * h + 8 * cg, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] += f[k];
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) dst[8 * cg + k] += acc[k];
  } else {
    if (cg >= h) return;
    float acc = 0;
    for (int64_t j = i; j < n && keys[j] == key; ++j) acc += at(dout, static_cast<int64_t>(rows[j]) * h + cg);
    dst[cg] += acc;
  }
}

// ---- RMSNorm ---------------------------------------------------------------------------------
template <bool kVec>
__global__ void rmsnorm_fwd_kernel(const bf16* x, const bf16* w, bf16* y, float* rstd, int64_t h, float eps) {
  const int64_t r = blockIdx.x;
  const bf16* xr = x + r * h;
  bf16* yr = y + r * h;
  float ss = 0;
  if constexpr (kVec) {
    for (int64_t c = threadIdx.x; c < h / 8; c += blockDim.x) {
      float f[8];
      load8(xr + 8 * c, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
    }
  } else {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) ss += at(xr, c) * at(xr, c);
  }
  ss = block_sum(ss);
  const float rs = 1.0f / sqrtf(ss / static_cast<float>(h) + eps);
  if (threadIdx.x == 0) rstd[r] = rs;
  if constexpr (kVec) {
    for (int64_t c = threadIdx.x; c < h / 8; c += blockDim.x) {
      float f[8], g[8];
      load8(xr + 8 * c, f);
      load8(w + 8 * c, g);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = f[k] * rs * g[k];
      store8(yr + 8 * c, f);
    }
  } else {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) yr[c] = __float2bfloat16_rn(at(xr, c) * rs * at(w, c));
  }
}

template <bool kVec>
__global__ void rmsnorm_dx_kernel(const bf16* x, const bf16* w, const float* rstd, const bf16* dy, bf16* dx, int64_t h) {
  const int64_t r = blockIdx.x;
  const bf16 *xr = x + r * h, *gr = dy + r * h;
  bf16* dr = dx + r * h;
  const float rs = rstd[r];
  float dot = 0;
  if constexpr (kVec) {
    for (int64_t c = threadIdx.x; c < h / 8; c += blockDim.x) {
      float a[8], g[8], ww[8];
      load8(xr + 8 * c, a);
      load8(gr + 8 * c, g);
      load8(w + 8 * c, ww);
#pragma unroll
      for (int k = 0; k < 8; ++k) dot += g[k] * ww[k] * a[k];
    }
  } else {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dot += at(gr, c) * at(w, c) * at(xr, c);
  }
  dot = block_sum(dot);
  const float coef = rs * rs * dot / static_cast<float>(h);
  if constexpr (kVec) {
    for (int64_t c = threadIdx.x; c < h / 8; c += blockDim.x) {
      float a[8], g[8], ww[8];
      load8(xr + 8 * c, a);
      load8(gr + 8 * c, g);
      load8(w + 8 * c, ww);
#pragma unroll
      for (int k = 0; k < 8; ++k) a[k] = rs * (g[k] * ww[k] - a[k] * coef);
      store8(dr + 8 * c, a);
    }
  } else {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
      dr[c] = __float2bfloat16_rn(rs * (at(gr, c) * at(w, c) - at(xr, c) * coef));
  }
}

// dw partial sums: block (column tile, row chunk); thread = column (coalesced along a row).
__global__ void rmsnorm_dw_partial_kernel(const bf16* x, const float* rstd, const bf16* dy, float* partial, int64_t rows,
                                          int64_t h, int64_t rows_per_chunk) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= h) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk, r1 = std::min(rows, r0 + rows_per_chunk);
  float acc = 0;
  for (int64_t r = r0; r < r1; ++r) acc += at(dy, r * h + c) * at(x, r * h + c) * rstd[r];
  partial[blockIdx.y * h + c] = acc;
}

__global__ void rmsnorm_dw_reduce_kernel(const float* partial, int64_t chunks, int64_t h, float* dw) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= h) return;
  float acc = 0;
  for (int64_t k = 0; k < chunks; ++k) acc += partial[k * h + c];
  dw[c] += acc;
}

// ---- RoPE ----------------------------------------------------------------------------------------
__global__ void rope_table_kernel(const float* inv_freq, float* cos_tab, float* sin_tab, int64_t seq, int64_t half,
                                  float mscale) {
  const int64_t n = seq * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float ang = static_cast<float>(i / half) * inv_freq[i % half];  // fp32 product, as HF / Megatron
    float sn, cs;
    sincosf(ang, &sn, &cs);
    cos_tab[i] = cs * mscale;
    sin_tab[i] = sn * mscale;
  }
}

template <bool kInverse>
__global__ void rope_kernel(bf16* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq,
                            int64_t heads, int64_t head_dim, int64_t half) {
  const int64_t n = rows * heads * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = i % half, rh = i / half, r = rh / heads;
    const int64_t t = (r % seq) * half + p;
    const float c = cos_tab[t], s = kInverse ? -sin_tab[t] : sin_tab[t];
    bf16* v = x + rh * head_dim;
    const float a = at(v, p), b = at(v, p + half);
    v[p] = __float2bfloat16_rn(a * c - b * s);
    v[p + half] = __float2bfloat16_rn(b * c + a * s);
  }
}

// ---- fused QKV split (+ RoPE) ------------------------------------------------------------------------
// Work item: (row, head slot of the fused row, chunk j of W channels in the first half of the
// head): channels [W j, W j + W) and their rotary partners half + [W j, W j + W). Q and K slots
// turn when `rotate` (the rope_kernel arithmetic, kInverse for the backward), V slots copy.
template <int W, bool kJoin>
__global__ void qkv_rope_kernel(const bf16* qkv_in, const bf16* q_in, const bf16* k_in, const bf16* v_in, bf16* qkv_out,
                                bf16* q_out, bf16* k_out, bf16* v_out, const float* cos_tab, const float* sin_tab,
                                int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t d, bool rotate) {
  const int64_t heads = hq + 2 * hkv, half = d / 2, per = half / W;
  const int64_t n = rows * heads * per;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = i % per, rh = i / per, slot = rh % heads, r = rh / heads;
    const int64_t fused = (r * heads + slot) * d;
    const int64_t split = slot < hq ? (r * hq + slot) * d
                                    : (slot < hq + hkv ? (r * hkv + slot - hq) * d : (r * hkv + slot - hq - hkv) * d);
    const bf16* src = kJoin ? (slot < hq ? q_in : slot < hq + hkv ? k_in : v_in) + split : qkv_in + fused;
    bf16* dst = kJoin ? qkv_out + fused : (slot < hq ? q_out : slot < hq + hkv ? k_out : v_out) + split;
    const int64_t c0 = W * j;
    float a[W], b[W];
    if constexpr (W == 8) {
      load8(src + c0, a);
      load8(src + half + c0, b);
    } else {
      a[0] = at(src, c0);
      b[0] = at(src, half + c0);
    }
    if (rotate && slot < hq + hkv) {
      const int64_t t = (r % seq) * half + c0;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float c = cos_tab[t + k], sn = kJoin ? -sin_tab[t + k] : sin_tab[t + k];
        const float x = a[k], y = b[k];
        a[k] = x * c - y * sn;
        b[k] = y * c + x * sn;
      }
    }
    if constexpr (W == 8) {
      store8(dst + c0, a);
      store8(dst + half + c0, b);
    } else {
      dst[c0] = __float2bfloat16_rn(a[0]);
      dst[half + c0] = __float2bfloat16_rn(b[0]);
    }
  }
}

// ---- MLA ---------------------------------------------------------------------------------------------
// W elements per work item: 8 (16-byte copies; every segment a multiple of 8 and the pointers
// 16-byte aligned) or 1.
template <int W>
__device__ __forceinline__ void copy_w(const bf16* src, bf16* dst) {
  if constexpr (W == 8) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  else *dst = *src;
}

// One item per W channels of K (dq) and V (dv) of a (row, head).
template <int W>
__global__ void mla_assemble_kv_kernel(const bf16* kvu, const bf16* kpe, bf16* k, bf16* v, int64_t rows, int64_t heads,
                                       int64_t dn, int64_t dr, int64_t dv) {
  const int64_t dq = dn + dr, du = dn + dv, cq = dq / W, per = cq + dv / W;
  const int64_t n = rows * heads * per;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t rh = i / per, c = i % per, r = rh / heads;
    if (c < cq) {
      const int64_t e = c * W;
      copy_w<W>(e < dn ? kvu + rh * du + e : kpe + r * dr + (e - dn), k + rh * dq + e);
    } else {
      const int64_t e = (c - cq) * W;
      copy_w<W>(kvu + rh * du + dn + e, v + rh * dv + e);
    }
  }
}

// dkvu: one item per W elements; dkpe: one item per (row, W channels), summing the heads in
// order in fp32.
template <int W>
__global__ void mla_split_kv_grad_kernel(const bf16* dk, const bf16* dvi, bf16* dkvu, bf16* dkpe, int64_t rows,
                                         int64_t heads, int64_t dn, int64_t dr, int64_t dv) {
  const int64_t dq = dn + dr, du = dn + dv, cu = du / W;
  const int64_t n_u = rows * heads * cu, n = n_u + rows * (dr / W);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    if (i < n_u) {
      const int64_t rh = i / cu, e = (i % cu) * W;
      copy_w<W>(e < dn ? dk + rh * dq + e : dvi + rh * dv + (e - dn), dkvu + rh * du + e);
    } else {
      const int64_t j = i - n_u, r = j / (dr / W), e = (j % (dr / W)) * W;
      float acc[W] = {};
      for (int64_t h = 0; h < heads; ++h) {
        const bf16* src = dk + (r * heads + h) * dq + dn + e;
        if constexpr (W == 8) {
          float f[8];
          load8(src, f);
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[q] += f[q];
        } else {
          acc[0] += at(src, 0);
        }
      }
      bf16* dst = dkpe + r * dr + e;
      if constexpr (W == 8) store8(dst, acc);
      else dst[0] = __float2bfloat16_rn(acc[0]);
    }
  }
}

// ---- SwiGLU ----------------------------------------------------------------------------------------
__device__ __forceinline__ float sigm(float g) { return 1.0f / (1.0f + expf(-g)); }

template <bool kVec>
__global__ void swiglu_fwd_kernel(const bf16* hin, bf16* a, int64_t rows, int64_t f) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if constexpr (kVec) {
    const int64_t n8 = rows * f / 8;
    for (int64_t i = t0; i < n8; i += stride) {
      const int64_t r = (8 * i) / f, c = (8 * i) % f;
      float g[8], u[8];
      load8(hin + r * 2 * f + c, g);
      load8(hin + r * 2 * f + f + c, u);
#pragma unroll
      for (int k = 0; k < 8; ++k) g[k] = g[k] * sigm(g[k]) * u[k];
      store8(a + 8 * i, g);
    }
  } else {
    for (int64_t i = t0; i < rows * f; i += stride) {
      const int64_t r = i / f, c = i % f;
      const float g = at(hin, r * 2 * f + c), u = at(hin, r * 2 * f + f + c);
      a[i] = __float2bfloat16_rn(g * sigm(g) * u);
    }
  }
}

template <bool kVec>
__global__ void swiglu_bwd_kernel(const bf16* hin, const bf16* da, bf16* dh, int64_t rows, int64_t f) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if constexpr (kVec) {
    const int64_t n8 = rows * f / 8;
    for (int64_t i = t0; i < n8; i += stride) {
      const int64_t r = (8 * i) / f, c = (8 * i) % f;
      float g[8], u[8], d[8], dg[8], du[8];
      load8(hin + r * 2 * f + c, g);
      load8(hin + r * 2 * f + f + c, u);
      load8(da + 8 * i, d);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float sg = sigm(g[k]);
        dg[k] = d[k] * u[k] * sg * (1.0f + g[k] * (1.0f - sg));
        du[k] = d[k] * g[k] * sg;
      }
      store8(dh + r * 2 * f + c, dg);
      store8(dh + r * 2 * f + f + c, du);
    }
  } else {
    for (int64_t i = t0; i < rows * f; i += stride) {
      const int64_t r = i / f, c = i % f;
      const float g = at(hin, r * 2 * f + c), u = at(hin, r * 2 * f + f + c), d = at(da, i);
      const float sg = sigm(g);
      dh[r * 2 * f + c] = __float2bfloat16_rn(d * u * sg * (1.0f + g * (1.0f - sg)));
      dh[r * 2 * f + f + c] = __float2bfloat16_rn(d * g * sg);
    }
  }
}

// ---- cross-entropy -----------------------------------------------------------------------------------
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ __forceinline__ void ms_add(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.0f;  // a.m = -inf: 0 * 0 + 1
    a.m = v;
  } else {
    a.s += expf(v - a.m);
  }
}

// One block per row: pass 1 online max / sum of exp over the row, pass 2 the gradient.
template <bool kVec>
__global__ void cross_entropy_kernel(const bf16* logits, const int32_t* labels, float* loss, bf16* dlogits,
                                     int64_t vocab, int64_t ld, float grad_scale) {
  const int64_t r = blockIdx.x;
  const bf16* x = logits + r * ld;
  bf16* g = dlogits + r * ld;
  const int32_t label = labels[r];
  const int64_t vvec = kVec ? vocab / 8 * 8 : 0;
  if (label < 0) {
    for (int64_t c = threadIdx.x; c < ld; c += blockDim.x) g[c] = __float2bfloat16_rn(0.0f);
    if (threadIdx.x == 0) loss[r] = 0.0f;
    return;
  }
  MaxSum st{-INFINITY, 0.0f};
  if constexpr (kVec) {
    for (int64_t c = 8 * threadIdx.x; c < vvec; c += 8 * blockDim.x) {
      float f[8];
      load8(x + c, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) ms_add(st, f[k]);
    }
  }
  for (int64_t c = vvec + threadIdx.x; c < vocab; c += blockDim.x) ms_add(st, at(x, c));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)};
    st = ms_merge(st, other);
  }
  __shared__ MaxSum part[32];
  __shared__ float s_lse;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0) part[wid] = st;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum tot = part[0];
    for (int i = 1; i < static_cast<int>(blockDim.x >> 5); ++i) tot = ms_merge(tot, part[i]);
    s_lse = tot.m + logf(tot.s);
    loss[r] = s_lse - at(x, label);
  }
  __syncthreads();
  const float lse = s_lse;
  if constexpr (kVec) {
    for (int64_t c = 8 * threadIdx.x; c < vvec; c += 8 * blockDim.x) {
      float f[8];
      load8(x + c, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = (expf(f[k] - lse) - (c + k == label ? 1.0f : 0.0f)) * grad_scale;
      store8(g + c, f);
    }
  }
  for (int64_t c = vvec + threadIdx.x; c < vocab; c += blockDim.x)
    g[c] = __float2bfloat16_rn((expf(at(x, c) - lse) - (c == label ? 1.0f : 0.0f)) * grad_scale);
  for (int64_t c = vocab + threadIdx.x; c < ld; c += blockDim.x) g[c] = __float2bfloat16_rn(0.0f);
}

// ---- optimizer -----------------------------------------------------------------------------------------
// Sum of squares in a fixed order: each block's grid-stride share reduced by block_sum
// (fixed shuffle tree) into partial[blockIdx.x]; one block then sums the partials (the
// grid's size depends on n only) and adds the total to *acc. No atomics: bit-identical runs.
template <bool kVec>
__global__ void sum_squares_partial_kernel(const float* g, int64_t n, double* partial) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  double s = 0;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t i = t0; i < n4; i += stride) {
      const float4 v = reinterpret_cast<const float4*>(g)[i];
      s += static_cast<double>(v.x * v.x + v.y * v.y) + static_cast<double>(v.z * v.z + v.w * v.w);
    }
    done = n4 * 4;
  }
  for (int64_t i = done + t0; i < n; i += stride) s += static_cast<double>(g[i]) * g[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_squares_final_kernel(const double* partial, int blocks, double* acc) {
  double s = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *acc += s;
}

struct AdamScalars {
  float beta1, beta2, eps, decay;  // decay = 1 - lr wd
  float step_size, bc2_sqrt;       // lr / (1 - b1^t), sqrt(1 - b2^t)
};

__device__ __forceinline__ float adam_one(float& p, float& m, float& v, float g, const AdamScalars& a) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
  p = p * a.decay;
  p = p - a.step_size * (m / denom);
  return p;
}

template <bool kVec>
__global__ void adamw_kernel(float* master, bf16* model, float* m, float* v, const float* grad, int64_t n,
                             AdamScalars a, const float* grad_scale) {
  const float sc = grad_scale ? *grad_scale : 1.0f;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, t0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t done = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t i = t0; i < n4; i += stride) {
      float4 p = reinterpret_cast<float4*>(master)[i], mm = reinterpret_cast<float4*>(m)[i],
             vv = reinterpret_cast<float4*>(v)[i];
      const float4 g = reinterpret_cast<const float4*>(grad)[i];
      adam_one(p.x, mm.x, vv.x, g.x * sc, a);
      adam_one(p.y, mm.y, vv.y, g.y * sc, a);
      adam_one(p.z, mm.z, vv.z, g.z * sc, a);
      adam_one(p.w, mm.w, vv.w, g.w * sc, a);
      reinterpret_cast<float4*>(master)[i] = p;
      reinterpret_cast<float4*>(m)[i] = mm;
      reinterpret_cast<float4*>(v)[i] = vv;
      __nv_bfloat162 lo = __floats2bfloat162_rn(p.x, p.y), hi = __floats2bfloat162_rn(p.z, p.w);
      uint2 u;
      u.x = *reinterpret_cast<uint32_t*>(&lo);
      u.y = *reinterpret_cast<uint32_t*>(&hi);
      reinterpret_cast<uint2*>(model)[i] = u;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + t0; i < n; i += stride) {
    float p = master[i], mm = m[i], vv = v[i];
    adam_one(p, mm, vv, grad[i] * sc, a);
    master[i] = p;
    m[i] = mm;
    v[i] = vv;
    model[i] = __float2bfloat16_rn(p);
  }
}

__global__ void clip_kernel(const double* sumsq, float max_norm, float* scale, float* norm) {
  const double nrm = sqrt(*sumsq);
  *norm = static_cast<float>(nrm);
  *scale = max_norm > 0 ? static_cast<float>(fmin(1.0, max_norm / (nrm + 1e-6))) : 1.0f;
}

}  // namespace

// ---- launchers ---------------------------------------------------------------------------------------------
float init_value(uint64_t seed, int64_t i, float std, float value) { return detail::init_at(seed, i, std, value); }

void init_params(float* master, int64_t n, float std, float value, uint64_t seed, cudaStream_t s) {
  if (n <= 0) return;
  init_kernel<<<blocks_for(n), kThreads, 0, s>>>(master, n, std, value, seed);
  check_launch("init_kernel");
}

void cast_to_bf16(const float* in, bf16* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (aligned16(in) && aligned16(out)) cast_bf16_kernel<true><<<blocks_for(n / 8 + 1), kThreads, 0, s>>>(in, out, n);
  else cast_bf16_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  check_launch("cast_bf16_kernel");
}

void cast_to_f32(const bf16* in, float* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (aligned16(in) && aligned16(out)) cast_f32_kernel<true><<<blocks_for(n / 8 + 1), kThreads, 0, s>>>(in, out, n);
  else cast_f32_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  check_launch("cast_f32_kernel");
}

void add(const bf16* a, const bf16* b, bf16* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (aligned16(a) && aligned16(b) && aligned16(out))
    add_kernel<true><<<blocks_for(n / 8 + 1), kThreads, 0, s>>>(a, b, out, n);
  else
    add_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  check_launch("add_kernel");
}

void add_inplace(bf16* acc, const bf16* b, int64_t n, cudaStream_t s) { add(acc, b, acc, n, s); }

void embedding_fwd(const int32_t* tokens, const bf16* table, bf16* out, int64_t rows, int64_t h, cudaStream_t s) {
  if (rows <= 0 || h <= 0) return;
  if (h % 8 == 0 && aligned16(table) && aligned16(out))
    embedding_fwd_kernel<true><<<static_cast<unsigned>(rows), 128, 0, s>>>(tokens, table, out, h);
  else
    embedding_fwd_kernel<false><<<static_cast<unsigned>(rows), 128, 0, s>>>(tokens, table, out, h);
  check_launch("embedding_fwd_kernel");
}

void embedding_bwd(const int32_t* tokens, const bf16* dout, float* dtable, int64_t rows, int64_t h, cudaStream_t s) {
  if (rows <= 0 || h <= 0) return;
  if (rows > INT32_MAX) throw ExecError("embedding_bwd: more than 2^31 rows");
  const int n = static_cast<int>(rows);
  // Scratch: sorted keys, row indices before and after the sort, then CUB's temporary storage.
  size_t temp = 0;
  LCM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, tokens, static_cast<int32_t*>(nullptr),
                                                 static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                                 n, 0, 32, s));
  const size_t ids = (static_cast<size_t>(n) * 4 + 255) / 256 * 256;
  char* scratch = nullptr;
  LCM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), 3 * ids + temp, s));
  int32_t* keys = reinterpret_cast<int32_t*>(scratch);
  int32_t* order = reinterpret_cast<int32_t*>(scratch + ids);
  int32_t* sorted_rows = reinterpret_cast<int32_t*>(scratch + 2 * ids);
  iota_kernel<<<blocks_for(rows), kThreads, 0, s>>>(order, rows);
  check_launch("iota_kernel");
  LCM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch + 3 * ids, temp, tokens, keys, order, sorted_rows, n, 0, 32, s));
  const bool vec = h % 8 == 0 && aligned16(dout);
  const int64_t groups = vec ? h / 8 : h;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((groups + kEmbedBwdThreads - 1) / kEmbedBwdThreads));
  if (vec)
    embedding_bwd_sorted_kernel<true><<<grid, kEmbedBwdThreads, 0, s>>>(keys, sorted_rows, dout, dtable, rows, h);
  else
    embedding_bwd_sorted_kernel<false><<<grid, kEmbedBwdThreads, 0, s>>>(keys, sorted_rows, dout, dtable, rows, h);
  check_launch("embedding_bwd_sorted_kernel");
  LCM_CUDA_CHECK(cudaFreeAsync(scratch, s));
}

namespace {
int row_threads(int64_t h, bool vec) {  // one block per row: enough threads for the row, 64..512
  const int64_t work = vec ? h / 8 : h;
  return static_cast<int>(std::clamp<int64_t>((work + 31) / 32 * 32, 64, 512));
}
}  // namespace

void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, float* rstd, int64_t rows, int64_t h, float eps,
                 cudaStream_t s) {
  if (rows <= 0) return;
  const bool vec = h % 8 == 0 && aligned16(x) && aligned16(w) && aligned16(y);
  const int th = row_threads(h, vec);
  if (vec) rmsnorm_fwd_kernel<true><<<static_cast<unsigned>(rows), th, 0, s>>>(x, w, y, rstd, h, eps);
  else rmsnorm_fwd_kernel<false><<<static_cast<unsigned>(rows), th, 0, s>>>(x, w, y, rstd, h, eps);
  check_launch("rmsnorm_fwd_kernel");
}

void rmsnorm_bwd(const bf16* x, const bf16* w, const float* rstd, const bf16* dy, bf16* dx, float* dw, int64_t rows,
                 int64_t h, cudaStream_t s) {
  if (rows <= 0) return;
  const bool vec = h % 8 == 0 && aligned16(x) && aligned16(w) && aligned16(dy) && aligned16(dx);
  const int th = row_threads(h, vec);
  if (vec) rmsnorm_dx_kernel<true><<<static_cast<unsigned>(rows), th, 0, s>>>(x, w, rstd, dy, dx, h);
  else rmsnorm_dx_kernel<false><<<static_cast<unsigned>(rows), th, 0, s>>>(x, w, rstd, dy, dx, h);
  check_launch("rmsnorm_dx_kernel");
  // dw: per-chunk partial sums (at most 256 chunks of >= 32 rows), then one add per column.
  const int64_t chunks = std::clamp<int64_t>(rows / 32, 1, 256), per = (rows + chunks - 1) / chunks;
  float* partial = nullptr;
  LCM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), static_cast<size_t>(chunks * h) * 4, s));
  const dim3 grid(static_cast<unsigned>((h + 255) / 256), static_cast<unsigned>(chunks));
  rmsnorm_dw_partial_kernel<<<grid, 256, 0, s>>>(x, rstd, dy, partial, rows, h, per);
  check_launch("rmsnorm_dw_partial_kernel");
  rmsnorm_dw_reduce_kernel<<<static_cast<unsigned>((h + 255) / 256), 256, 0, s>>>(partial, chunks, h, dw);
  check_launch("rmsnorm_dw_reduce_kernel");
  LCM_CUDA_CHECK(cudaFreeAsync(partial, s));
}

void rope_table(const float* inv_freq_dev, float* cos_tab, float* sin_tab, int64_t seq, int64_t half, float mscale,
                cudaStream_t s) {
  if (seq <= 0 || half <= 0) return;
  rope_table_kernel<<<blocks_for(seq * half), kThreads, 0, s>>>(inv_freq_dev, cos_tab, sin_tab, seq, half, mscale);
  check_launch("rope_table_kernel");
}

void rope_fwd(bf16* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim, cudaStream_t s) {
  if (rows <= 0 || rot_dim < 2) return;
  rope_kernel<false><<<blocks_for(rows * heads * (rot_dim / 2)), kThreads, 0, s>>>(x, cos_tab, sin_tab, rows, seq,
                                                                                   heads, head_dim, rot_dim / 2);
  check_launch("rope_kernel");
}

namespace {
template <bool kJoin>
void qkv_rope_launch(const bf16* qkv_in, const bf16* q_in, const bf16* k_in, const bf16* v_in, bf16* qkv_out,
                     bf16* q_out, bf16* k_out, bf16* v_out, const float* cos_tab, const float* sin_tab, int64_t rows,
                     int64_t seq, int64_t hq, int64_t hkv, int64_t d, bool rotate, cudaStream_t s) {
  if (rows <= 0) return;
  // 16-byte vectors when every head's halves start 16-byte aligned.
  const bool vec = d % 16 == 0 && aligned16(qkv_in ? qkv_in : qkv_out) && aligned16(q_in ? q_in : q_out) &&
                   aligned16(k_in ? k_in : k_out) && aligned16(v_in ? v_in : v_out);
  const int64_t items = rows * (hq + 2 * hkv) * (d / 2);
  if (vec)
    qkv_rope_kernel<8, kJoin><<<blocks_for(items / 8), kThreads, 0, s>>>(qkv_in, q_in, k_in, v_in, qkv_out, q_out, k_out,
                                                                         v_out, cos_tab, sin_tab, rows, seq, hq, hkv, d,
                                                                         rotate);
  else
    qkv_rope_kernel<1, kJoin><<<blocks_for(items), kThreads, 0, s>>>(qkv_in, q_in, k_in, v_in, qkv_out, q_out, k_out,
                                                                     v_out, cos_tab, sin_tab, rows, seq, hq, hkv, d,
                                                                     rotate);
  check_launch("qkv_rope_kernel");
}
}  // namespace

void qkv_split_rope(const bf16* qkv, bf16* q, bf16* k, bf16* v, const float* cos_tab, const float* sin_tab,
                    int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim, bool rotate, cudaStream_t s) {
  qkv_rope_launch<false>(qkv, nullptr, nullptr, nullptr, nullptr, q, k, v, cos_tab, sin_tab, rows, seq, hq, hkv,
                         head_dim, rotate, s);
}

void qkv_join_rope(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, const float* cos_tab,
                   const float* sin_tab, int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim,
                   bool rotate, cudaStream_t s) {
  qkv_rope_launch<true>(nullptr, dq, dk, dv, dqkv, nullptr, nullptr, nullptr, cos_tab, sin_tab, rows, seq, hq, hkv,
                        head_dim, rotate, s);
}

void mla_assemble_kv(const bf16* kvu, const bf16* kpe, bf16* k, bf16* v, int64_t rows, int64_t heads, int64_t dn,
                     int64_t dr, int64_t dv, cudaStream_t s) {
  if (rows <= 0 || heads <= 0) return;
  const bool vec = dn % 8 == 0 && dr % 8 == 0 && dv % 8 == 0 && aligned16(kvu) && aligned16(kpe) && aligned16(k) &&
                   aligned16(v);
  const int64_t elems = rows * heads * (dn + dr + dv);
  if (vec)
    mla_assemble_kv_kernel<8><<<blocks_for(elems / 8), kThreads, 0, s>>>(kvu, kpe, k, v, rows, heads, dn, dr, dv);
  else
    mla_assemble_kv_kernel<1><<<blocks_for(elems), kThreads, 0, s>>>(kvu, kpe, k, v, rows, heads, dn, dr, dv);
  check_launch("mla_assemble_kv_kernel");
}

void mla_split_kv_grad(const bf16* dk, const bf16* dv_in, bf16* dkvu, bf16* dkpe, int64_t rows, int64_t heads,
                       int64_t dn, int64_t dr, int64_t dv, cudaStream_t s) {
  if (rows <= 0 || heads <= 0) return;
  const bool vec = dn % 8 == 0 && dr % 8 == 0 && dv % 8 == 0 && aligned16(dk) && aligned16(dv_in) && aligned16(dkvu) &&
                   aligned16(dkpe);
  const int64_t items = rows * heads * (dn + dv) + rows * dr;
  if (vec)
    mla_split_kv_grad_kernel<8><<<blocks_for(items / 8), kThreads, 0, s>>>(dk, dv_in, dkvu, dkpe, rows, heads, dn, dr, dv);
  else
    mla_split_kv_grad_kernel<1><<<blocks_for(items), kThreads, 0, s>>>(dk, dv_in, dkvu, dkpe, rows, heads, dn, dr, dv);
  check_launch("mla_split_kv_grad_kernel");
}

void rope_bwd(bf16* dx, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim, cudaStream_t s) {
  if (rows <= 0 || rot_dim < 2) return;
  rope_kernel<true><<<blocks_for(rows * heads * (rot_dim / 2)), kThreads, 0, s>>>(dx, cos_tab, sin_tab, rows, seq,
                                                                                  heads, head_dim, rot_dim / 2);
  check_launch("rope_kernel (backward)");
}

void swiglu_fwd(const bf16* h, bf16* a, int64_t rows, int64_t f, cudaStream_t s) {
  if (rows <= 0 || f <= 0) return;
  if (f % 8 == 0 && aligned16(h) && aligned16(a))
    swiglu_fwd_kernel<true><<<blocks_for(rows * f / 8), kThreads, 0, s>>>(h, a, rows, f);
  else
    swiglu_fwd_kernel<false><<<blocks_for(rows * f), kThreads, 0, s>>>(h, a, rows, f);
  check_launch("swiglu_fwd_kernel");
}

void swiglu_bwd(const bf16* h, const bf16* da, bf16* dh, int64_t rows, int64_t f, cudaStream_t s) {
  if (rows <= 0 || f <= 0) return;
  if (f % 8 == 0 && aligned16(h) && aligned16(da) && aligned16(dh))
    swiglu_bwd_kernel<true><<<blocks_for(rows * f / 8), kThreads, 0, s>>>(h, da, dh, rows, f);
  else
    swiglu_bwd_kernel<false><<<blocks_for(rows * f), kThreads, 0, s>>>(h, da, dh, rows, f);
  check_launch("swiglu_bwd_kernel");
}

void cross_entropy_fwd_bwd(const bf16* logits, const int32_t* labels, float* loss, bf16* dlogits, int64_t rows,
                           int64_t vocab, int64_t ld, float grad_scale, cudaStream_t s) {
  if (rows <= 0) return;
  const bool vec = ld % 8 == 0 && aligned16(logits) && aligned16(dlogits);
  if (vec)
    cross_entropy_kernel<true><<<static_cast<unsigned>(rows), 512, 0, s>>>(logits, labels, loss, dlogits, vocab, ld,
                                                                           grad_scale);
  else
    cross_entropy_kernel<false><<<static_cast<unsigned>(rows), 512, 0, s>>>(logits, labels, loss, dlogits, vocab, ld,
                                                                            grad_scale);
  check_launch("cross_entropy_kernel");
}

void sum_squares(const float* g, int64_t n, double* acc, cudaStream_t s) {
  if (n <= 0) return;
  const bool vec = aligned16(g);
  const unsigned blocks = vec ? blocks_for(n / 4 + 1) : blocks_for(n);
  double* partial = nullptr;
  LCM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), blocks * sizeof(double), s));
  if (vec) sum_squares_partial_kernel<true><<<blocks, kThreads, 0, s>>>(g, n, partial);
  else sum_squares_partial_kernel<false><<<blocks, kThreads, 0, s>>>(g, n, partial);
  check_launch("sum_squares_partial_kernel");
  sum_squares_final_kernel<<<1, kThreads, 0, s>>>(partial, static_cast<int>(blocks), acc);
  check_launch("sum_squares_final_kernel");
  LCM_CUDA_CHECK(cudaFreeAsync(partial, s));
}

void adamw_step(float* master, bf16* model, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamParams& p, const float* grad_scale, cudaStream_t s) {
  if (n <= 0) return;
  const double t = static_cast<double>(p.step);
  const AdamScalars a{p.beta1,
                      p.beta2,
                      p.eps,
                      static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay),
                      static_cast<float>(p.lr / (1.0 - std::pow(static_cast<double>(p.beta1), t))),
                      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(p.beta2), t)))};
  const bool vec = aligned16(master) && aligned16(exp_avg) && aligned16(exp_avg_sq) && aligned16(grad) &&
                   reinterpret_cast<uintptr_t>(model) % 8 == 0;
  if (vec)
    adamw_kernel<true><<<blocks_for(n / 4 + 1), kThreads, 0, s>>>(master, model, exp_avg, exp_avg_sq, grad, n, a,
                                                                  grad_scale);
  else
    adamw_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(master, model, exp_avg, exp_avg_sq, grad, n, a, grad_scale);
  check_launch("adamw_kernel");
}

void clip_coefficient(const double* sumsq, float max_norm, float* scale, float* norm, cudaStream_t s) {
  clip_kernel<<<1, 1, 0, s>>>(sumsq, max_norm, scale, norm);
  check_launch("clip_kernel");
}

}  // namespace lcm::exec::train
