// Kernels of the training MoE block (moe_block_kernels.cuh).
#include "train/moe_block_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train::moe {
namespace {

constexpr int kMaxTopk = 16;
constexpr int kMaxGroups = 64;
constexpr int kRouteThreads = 128;

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ float row_lse(const float* l, int E) {
  float m = -INFINITY;
  for (int e = 0; e < E; ++e) m = fmaxf(m, l[e]);
  float s = 0;
  for (int e = 0; e < E; ++e) s += expf(l[e] - m);
  return m + logf(s);
}

__global__ void zero_stats_kernel(int E, int32_t* count) {
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (count) count[e] = 0;
}

// Sum over the block in a fixed order (butterfly shuffles, then warp 0 adds the warps' sums
// in order); the result is valid in thread 0. blockDim.x == kRouteThreads.
__device__ float block_sum_fixed(float v, float* warp_part) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // warp_part may still be read by the previous call
  if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kRouteThreads / 32; ++w) s += warp_part[w];
  return s;
}

// Routing, one token per thread. The aux and z statistics go to per-block partials
// (psum_part[block][E], z_part[block]) reduced in a fixed order, then stats_finalize sums the
// blocks in order: no floating-point atomics, bit-identical from run to run. The counts are
// integer atomics (exact in any order).
__global__ void route_kernel(RouteDesc d, const float* logits, const bf16* bias, int32_t* idx, float* w, int32_t* eid,
                             int32_t* aux_count, float* psum_part, float* z_part) {
  extern __shared__ int s_count[];  // [E]
  __shared__ float warp_part[kRouteThreads / 32];
  const int E = d.experts, k = d.topk;
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = t < d.tokens;
  const float* l = logits + static_cast<size_t>(live ? t : 0) * E;
  float lse = 0, S = 0;  // the token's logsumexp; the sum of its sigmoid scores (aux, sigmoid)
  if (live) {
    const auto key = [&](int e) {
      return d.sigmoid ? sigm(l[e]) + (bias ? __bfloat162float(bias[e]) : 0.0f) : l[e];
    };
    uint64_t gmask = ~0ull;
    int per = E;
    if (d.groups > 0) {
      per = E / d.groups;
      const int m = k / d.group_topk;
      float gs[kMaxGroups];
      for (int g = 0; g < d.groups; ++g) {
        float top[kMaxTopk];
        int nt = 0;
        for (int e = g * per; e < (g + 1) * per; ++e) {
          const float v = key(e);
          int i;
          if (nt < m) {
            i = nt++;
          } else if (v > top[m - 1]) {
            i = m - 1;
          } else {
            continue;
          }
          while (i > 0 && top[i - 1] < v) {
            top[i] = top[i - 1];
            --i;
          }
          top[i] = v;
        }
        float sum = 0;
        for (int i = 0; i < m; ++i) sum += top[i];
        gs[g] = sum;
      }
      gmask = 0;
      for (int i = 0; i < d.group_topk; ++i) {
        int best = -1;
        for (int g = 0; g < d.groups; ++g)
          if (!((gmask >> g) & 1ull) && (best < 0 || gs[g] > gs[best])) best = g;
        gmask |= 1ull << best;
      }
    }
    int sel[kMaxTopk];
    for (int i = 0; i < k; ++i) {
      int best = -1;
      float bk = 0;
      for (int e = 0; e < E; ++e) {
        if (d.groups > 0 && !((gmask >> (e / per)) & 1ull)) continue;
        bool taken = false;
        for (int j = 0; j < i; ++j) taken = taken || sel[j] == e;
        if (taken) continue;
        const float v = key(e);
        if (best < 0 || v > bk) {
          best = e;
          bk = v;
        }
      }
      sel[i] = best;
    }
    const size_t o = static_cast<size_t>(t) * k;
    if (!d.sigmoid) {
      float mx = -INFINITY;
      for (int i = 0; i < k; ++i) mx = fmaxf(mx, l[sel[i]]);
      float sum = 0;
      for (int i = 0; i < k; ++i) sum += expf(l[sel[i]] - mx);
      for (int i = 0; i < k; ++i) w[o + i] = expf(l[sel[i]] - mx) / sum;
    } else {
      float sum = 0;
      for (int i = 0; i < k; ++i) sum += sigm(l[sel[i]]);
      for (int i = 0; i < k; ++i) w[o + i] = k > 1 ? sigm(l[sel[i]]) / (sum + 1e-20f) : sigm(l[sel[i]]);
    }
    for (int i = 0; i < k; ++i) {
      idx[o + i] = sel[i];
      eid[o + i] = sel[i];
    }
    if (d.aux || d.z) lse = row_lse(l, E);
    if (d.aux) {
      // The plain top-k of the scores is the top-k of the logits (both scores are monotone).
      int top[kMaxTopk];
      for (int i = 0; i < k; ++i) {
        int best = -1;
        for (int e = 0; e < E; ++e) {
          bool taken = false;
          for (int j = 0; j < i; ++j) taken = taken || top[j] == e;
          if (!taken && (best < 0 || l[e] > l[best])) best = e;
        }
        top[i] = best;
        atomicAdd(&s_count[best], 1);
      }
      if (d.sigmoid)
        for (int e = 0; e < E; ++e) S += sigm(l[e]);
    }
  }
  if (d.z) {
    const float z = block_sum_fixed(live ? lse * lse : 0.0f, warp_part);
    if (threadIdx.x == 0) z_part[blockIdx.x] = z;
  }
  if (d.aux)
    for (int e = 0; e < E; ++e) {
      float p = 0;
      if (live) p = d.sigmoid ? sigm(l[e]) / (S + 1e-20f) : expf(l[e] - lse);
      const float sum = block_sum_fixed(p, warp_part);
      if (threadIdx.x == 0) psum_part[static_cast<size_t>(blockIdx.x) * E + e] = sum;
    }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (d.aux && s_count[e]) atomicAdd(&aux_count[e], s_count[e]);
}

// psum[e] = sum over blocks b in order of psum_part[b][e]; *zsum likewise.
__global__ void stats_finalize_kernel(RouteDesc d, int blocks, const float* psum_part, const float* z_part, float* psum,
                                      float* zsum) {
  for (int e = threadIdx.x; e < d.experts; e += blockDim.x) {
    if (!d.aux) break;
    float s = 0;
    for (int b = 0; b < blocks; ++b) s += psum_part[static_cast<size_t>(b) * d.experts + e];
    psum[e] = s;
  }
  if (threadIdx.x == 0 && d.z) {
    float s = 0;
    for (int b = 0; b < blocks; ++b) s += z_part[b];
    *zsum = s;
  }
}

__global__ void loss_finalize_kernel(RouteDesc d, const int32_t* count, const float* psum, const float* zsum,
                                     float aux_coeff, float z_coeff, float* out) {
  const double T = d.tokens;
  double add = 0;
  if (d.aux) {
    double acc = 0;
    for (int e = 0; e < d.experts; ++e) acc += static_cast<double>(psum[e]) * count[e];
    add += aux_coeff * acc * d.experts / (static_cast<double>(d.topk) * T * T);
  }
  if (d.z) add += static_cast<double>(z_coeff) * *zsum / T;
  *out += static_cast<float>(add);
}

__global__ void router_bwd_kernel(RouteDesc d, const float* logits, const int32_t* idx, const float* w,
                                  const float* dprob, const int32_t* count, float aux_g, float z_g, bf16* dl) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= d.tokens) return;
  const int E = d.experts, k = d.topk;
  const float* l = logits + static_cast<size_t>(t) * E;
  const size_t o = static_cast<size_t>(t) * k;
  const float lse = (d.aux || d.z) ? row_lse(l, E) : 0.0f;
  // Aux scores' normaliser and the dot product of their gradient.
  float S = 0, adot = 0;
  if (d.aux) {
    if (!d.sigmoid) {
      for (int e = 0; e < E; ++e) adot += expf(l[e] - lse) * aux_g * count[e];
    } else {
      for (int e = 0; e < E; ++e) S += sigm(l[e]);
      for (int e = 0; e < E; ++e) adot += sigm(l[e]) / (S + 1e-20f) * aux_g * count[e];
    }
  }
  // Gate weights' gradient: dot of w and dprob, selected sigmoid sum.
  float gdot = 0, gsum = 0;
  for (int j = 0; j < k; ++j) gdot += w[o + j] * dprob[o + j];
  if (d.sigmoid)
    for (int j = 0; j < k; ++j) gsum += sigm(l[idx[o + j]]);
  for (int e = 0; e < E; ++e) {
    float g = 0;
    if (d.aux) {
      const float dp = aux_g * count[e];
      if (!d.sigmoid) {
        g += expf(l[e] - lse) * (dp - adot);
      } else {
        const float se = sigm(l[e]);
        g += se * (1.0f - se) * (dp - adot) / (S + 1e-20f);
      }
    }
    if (d.z) g += z_g * lse * expf(l[e] - lse);
    for (int j = 0; j < k; ++j) {
      if (idx[o + j] != e) continue;
      if (!d.sigmoid) {
        g += w[o + j] * (dprob[o + j] - gdot);
      } else {
        const float se = sigm(l[e]);
        g += se * (1.0f - se) * (k > 1 ? (dprob[o + j] - gdot) / (gsum + 1e-20f) : dprob[o + j]);
      }
    }
    dl[static_cast<size_t>(t) * E + e] = __float2bfloat16_rn(g);
  }
}

__global__ void padded_offsets_kernel(int E, int64_t cap, int32_t* offset) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) offset[e] = static_cast<int32_t>(e * cap);
}

__global__ void permute_bwd_kernel(const bf16* dxperm, const int32_t* row_of, int topk, int64_t h, bf16* dx,
                                   bool accumulate) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = accumulate ? __bfloat162float(dx[t * h + c]) : 0.0f;
    for (int j = 0; j < topk; ++j) {
      const int32_t row = row_of[t * topk + j];
      if (row >= 0) acc += __bfloat162float(dxperm[static_cast<int64_t>(row) * h + c]);
    }
    dx[t * h + c] = __float2bfloat16_rn(acc);
  }
}

}  // namespace

void route(const RouteDesc& d, const float* logits, const bf16* bias, int32_t* idx, float* w, int32_t* eid,
           int32_t* aux_count, float* aux_psum, float* zsum, cudaStream_t s) {
  if (d.topk > kMaxTopk || d.groups > kMaxGroups) throw ExecError("moe route: topk <= 16 and groups <= 64");
  if (d.tokens <= 0) return;
  if (d.aux) {
    zero_stats_kernel<<<1, 256, 0, s>>>(d.experts, aux_count);
    check_launch("zero_stats_kernel");
  }
  const int blocks = (d.tokens + kRouteThreads - 1) / kRouteThreads;
  float* part = nullptr;  // psum partials [blocks][E], then z partials [blocks]
  if (d.aux || d.z)
    LCM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&part),
                                   static_cast<size_t>(blocks) * (static_cast<size_t>(d.experts) + 1) * 4, s));
  float* z_part = part ? part + static_cast<size_t>(blocks) * d.experts : nullptr;
  const size_t shmem = static_cast<size_t>(d.experts) * 4;
  route_kernel<<<static_cast<unsigned>(blocks), kRouteThreads, shmem, s>>>(d, logits, bias, idx, w, eid, aux_count,
                                                                           part, z_part);
  check_launch("route_kernel");
  if (part) {
    stats_finalize_kernel<<<1, 256, 0, s>>>(d, blocks, part, z_part, aux_psum, zsum);
    check_launch("stats_finalize_kernel");
    LCM_CUDA_CHECK(cudaFreeAsync(part, s));
  }
}

void loss_finalize(const RouteDesc& d, const int32_t* aux_count, const float* aux_psum, const float* zsum,
                   float aux_coeff, float z_coeff, float* out, cudaStream_t s) {
  if (!d.aux && !d.z) return;
  loss_finalize_kernel<<<1, 1, 0, s>>>(d, aux_count, aux_psum, zsum, aux_coeff, z_coeff, out);
  check_launch("loss_finalize_kernel");
}

void router_bwd(const RouteDesc& d, const float* logits, const int32_t* idx, const float* w, const float* dprob,
                const int32_t* aux_count, float aux_g, float z_g, bf16* dlogits, cudaStream_t s) {
  if (d.tokens <= 0) return;
  router_bwd_kernel<<<static_cast<unsigned>((d.tokens + 127) / 128), 128, 0, s>>>(d, logits, idx, w, dprob, aux_count,
                                                                                  aux_g, z_g, dlogits);
  check_launch("router_bwd_kernel");
}

void padded_offsets(int experts, int64_t cap, int32_t* offset, cudaStream_t s) {
  padded_offsets_kernel<<<1, 256, 0, s>>>(experts, cap, offset);
  check_launch("padded_offsets_kernel");
}

void permute_bwd(const bf16* dxperm, const int32_t* row_of, int64_t tokens, int topk, int64_t hidden, bf16* dx,
                 bool accumulate, cudaStream_t s) {
  if (tokens <= 0) return;
  permute_bwd_kernel<<<static_cast<unsigned>(tokens), 128, 0, s>>>(dxperm, row_of, topk, hidden, dx, accumulate);
  check_launch("permute_bwd_kernel (train)");
}

}  // namespace lcm::exec::train::moe
