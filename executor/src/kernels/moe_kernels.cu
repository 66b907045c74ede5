// MoE kernels of lcm-exec (launchers declared in moe_kernels.cuh).
#include "kernels/moe_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "lcm/executor/error.hpp"
#include "kernels/moe_pattern.hpp"
#include "lcm/executor/pattern.hpp"

namespace lcm::exec::kernels {
namespace {

constexpr int kChunk = 1024;  // entries per chunk of the rank passes
constexpr int kMaxTopk = 16;
constexpr int kMaxGroups = 64;

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

int blocks_for(size_t n, int threads, size_t cap = 65535u * 16u) {
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + threads - 1) / threads, cap)));
}

__device__ __forceinline__ float bf(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }

__global__ void fill_scaled_kernel(__nv_bfloat16* p, size_t n, uint64_t seed, uint64_t base, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = __float2bfloat16_rn(pattern::uniform_pm1(seed, base + i) * scale);
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void router_topk_kernel(RouterDesc d, float* logits, int32_t* idx, float* w, int32_t* eid) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= d.tokens) return;
  const int E = d.experts, k = d.topk;
  float* l = logits + static_cast<size_t>(t) * E;
  if (d.log_w)
    for (int e = 0; e < E; ++e)
      l[e] += d.log_w[e] + pattern::routing_gumbel(d.seed, d.token_base + static_cast<uint64_t>(t), static_cast<uint32_t>(e));
  const auto key = [&](int e) { return d.sigmoid ? sigmoidf(l[e]) : l[e]; };
  uint64_t gmask = ~0ull;  // allowed groups
  int per = E;
  if (d.groups > 0) {
    per = E / d.groups;
    const int m = k / d.topk_groups;
    float gs[kMaxGroups];
    for (int g = 0; g < d.groups; ++g) {
      float top[kMaxTopk];
      int nt = 0;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const float v = key(e);
        if (nt < m) {
          int i = nt++;
          while (i > 0 && top[i - 1] < v) { top[i] = top[i - 1]; --i; }
          top[i] = v;
        } else if (v > top[m - 1]) {
          int i = m - 1;
          while (i > 0 && top[i - 1] < v) { top[i] = top[i - 1]; --i; }
          top[i] = v;
        }
      }
      float sum = 0;
      for (int i = 0; i < m; ++i) sum += top[i];
      gs[g] = sum;
    }
    gmask = 0;
    for (int i = 0; i < d.topk_groups; ++i) {
      int best = -1;
      for (int g = 0; g < d.groups; ++g)
        if (!((gmask >> g) & 1ull) && (best < 0 || gs[g] > gs[best])) best = g;
      gmask |= 1ull << best;
    }
  }
  int sel[kMaxTopk];
  float selkey[kMaxTopk];
  for (int i = 0; i < k; ++i) {
    int best = -1;
    float bk = 0;
    for (int e = 0; e < E; ++e) {
      if (d.groups > 0 && !((gmask >> (e / per)) & 1ull)) continue;
      bool taken = false;
      for (int j = 0; j < i; ++j) taken = taken || sel[j] == e;
      if (taken) continue;
      const float v = key(e);
      if (best < 0 || v > bk) { best = e; bk = v; }
    }
    sel[i] = best;
    selkey[i] = bk;
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
    for (int i = 0; i < k; ++i) sum += selkey[i];
    for (int i = 0; i < k; ++i) w[o + i] = k > 1 ? selkey[i] / sum : selkey[i];
  }
  for (int i = 0; i < k; ++i) {
    idx[o + i] = sel[i];
    eid[o + i] = sel[i];
  }
}

__global__ void chunk_count_kernel(const int32_t* eid, int64_t n, int E, int32_t* chunk_counts) {
  extern __shared__ int32_t cnt[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk;
  for (int i = threadIdx.x; i < kChunk; i += blockDim.x) {
    const int64_t a = base + i;
    if (a < n) {
      const int32_t e = eid[a];
      if (e >= 0) atomicAdd(&cnt[e], 1);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) chunk_counts[static_cast<size_t>(blockIdx.x) * E + e] = cnt[e];
}

__global__ void chunk_scan_kernel(int32_t* chunk_counts, int64_t chunks, int E, int32_t* totals) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t run = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int32_t v = chunk_counts[c * E + e];
      chunk_counts[c * E + e] = run;
      run += v;
    }
    totals[e] = run;
  }
}

__global__ void chunk_rank_kernel(const int32_t* eid, int64_t n, int E, const int32_t* chunk_off, int32_t* pos) {
  __shared__ int32_t ids[kChunk];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int i = threadIdx.x;
  ids[i] = base + i < n ? eid[base + i] : -1;
  __syncthreads();
  if (base + i >= n) return;
  const int32_t e = ids[i];
  if (e < 0) {
    pos[base + i] = -1;
    return;
  }
  int32_t before = 0;
  for (int j = 0; j < i; ++j) before += ids[j] == e ? 1 : 0;
  pos[base + i] = chunk_off[static_cast<size_t>(blockIdx.x) * E + e] + before;
}

__global__ void offsets_kernel(const int32_t* totals, int E, int64_t cap, int32_t* kept, int32_t* offset) {
  if (threadIdx.x != 0) return;
  int32_t run = 0;
  for (int e = 0; e < E; ++e) {
    const int32_t k = cap < 0 ? totals[e] : static_cast<int32_t>(min(static_cast<int64_t>(totals[e]), cap));
    kept[e] = k;
    offset[e] = run;
    run += k;
  }
}

// Radix select of the cap-th largest weight per expert (positive floats: bit order = value order).
__global__ void probs_threshold_kernel(const int32_t* idx, const float* w, int64_t n, const int32_t* counts, int64_t cap,
                                       uint32_t* thr, int32_t* need) {
  const int e = blockIdx.x;
  if (counts[e] <= cap) {
    if (threadIdx.x == 0) {
      thr[e] = 0;
      need[e] = -1;
    }
    return;
  }
  __shared__ int32_t hist[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int64_t s_want;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_want = cap;
  }
  for (int pass = 3; pass >= 0; --pass) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int64_t a = threadIdx.x; a < n; a += blockDim.x) {
      if (idx[a] != e) continue;
      const uint32_t bits = __float_as_uint(w[a]);
      if ((bits & mask) == prefix) atomicAdd(&hist[(bits >> (8 * pass)) & 0xffu], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t want = s_want, acc = 0;
      int b = 255;
      for (; b > 0; --b) {
        if (acc + hist[b] >= want) break;
        acc += hist[b];
      }
      s_want = want - acc;
      s_prefix = prefix | (static_cast<uint32_t>(b) << (8 * pass));
      s_mask = mask | (0xffu << (8 * pass));
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    thr[e] = s_prefix;
    need[e] = static_cast<int32_t>(s_want);
  }
}

__global__ void mark_ties_kernel(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                                 int32_t* tie) {
  for (int64_t a = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; a < n; a += int64_t{gridDim.x} * blockDim.x) {
    const int32_t e = idx[a];
    tie[a] = need[e] >= 0 && __float_as_uint(w[a]) == thr[e] ? e : -1;
  }
}

__global__ void keep_probs_kernel(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                                  const int32_t* tie_pos, int32_t* eid_kept) {
  for (int64_t a = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; a < n; a += int64_t{gridDim.x} * blockDim.x) {
    const int32_t e = idx[a];
    const uint32_t bits = __float_as_uint(w[a]);
    const bool keep = need[e] < 0 || bits > thr[e] || (bits == thr[e] && tie_pos[a] < need[e]);
    eid_kept[a] = keep ? e : -1;
  }
}

__global__ void keep_position_kernel(const int32_t* idx, const int32_t* pos, int64_t n, int64_t cap, int32_t* eid_kept) {
  for (int64_t a = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; a < n; a += int64_t{gridDim.x} * blockDim.x)
    eid_kept[a] = pos[a] < cap ? idx[a] : -1;
}

__global__ void scatter_kernel(const uint4* x, int64_t vec, const int32_t* eid_kept, const int32_t* pos,
                               const int32_t* offset, int topk, int32_t* row_of, uint4* send) {
  const int64_t a = blockIdx.x;
  const int32_t e = eid_kept[a];
  const int32_t row = e >= 0 ? offset[e] + pos[a] : -1;
  if (threadIdx.x == 0) row_of[a] = row;
  if (row < 0) return;
  const uint4* src = x + (a / topk) * vec;
  uint4* dst = send + static_cast<int64_t>(row) * vec;
  for (int64_t i = threadIdx.x; i < vec; i += blockDim.x) dst[i] = src[i];
}

__global__ void swiglu_fwd_kernel(const __nv_bfloat16* h1, __nv_bfloat16* a, int64_t rows, int64_t f) {
  const int64_t n = rows * f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / f, c = i % f;
    const float g = bf(h1, r * 2 * f + c), u = bf(h1, r * 2 * f + f + c);
    a[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void swiglu_bwd_kernel(const __nv_bfloat16* h1, const __nv_bfloat16* da, __nv_bfloat16* dh1, int64_t rows,
                                  int64_t f) {
  const int64_t n = rows * f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / f, c = i % f;
    const float g = bf(h1, r * 2 * f + c), u = bf(h1, r * 2 * f + f + c), d = bf(da, i);
    const float sg = 1.0f / (1.0f + expf(-g));
    dh1[r * 2 * f + c] = __float2bfloat16_rn(d * u * sg * (1.0f + g * (1.0f - sg)));
    dh1[r * 2 * f + f + c] = __float2bfloat16_rn(d * g * sg);
  }
}

__global__ void unpermute_fwd_kernel(const __nv_bfloat16* back, const int32_t* row_of, const float* w, int topk,
                                     int64_t h, __nv_bfloat16* y) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < topk; ++j) {
      const int32_t row = row_of[t * topk + j];
      if (row >= 0) acc += w[t * topk + j] * bf(back, static_cast<int64_t>(row) * h + c);
    }
    y[t * h + c] = __float2bfloat16_rn(acc);
  }
}

__device__ float block_sum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[wid] = v;
  __syncthreads();
  float s = 0;
  if (threadIdx.x == 0)
    for (int i = 0; i < (blockDim.x + 31) / 32; ++i) s += part[i];
  return s;
}

__global__ void unpermute_bwd_kernel(const __nv_bfloat16* dout, const __nv_bfloat16* back, const int32_t* row_of,
                                     const float* w, int topk, int64_t h, __nv_bfloat16* dyperm, float* dprob) {
  const int64_t a = blockIdx.x, t = a / topk;
  const int32_t row = row_of[a];
  if (row < 0) {
    if (threadIdx.x == 0) dprob[a] = 0;
    return;
  }
  const float wa = w[a];
  float dot = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = bf(dout, t * h + c);
    dyperm[static_cast<int64_t>(row) * h + c] = __float2bfloat16_rn(wa * g);
    dot += g * bf(back, static_cast<int64_t>(row) * h + c);
  }
  const float s = block_sum(dot);
  if (threadIdx.x == 0) dprob[a] = s;
}

__global__ void permute_bwd_kernel(const __nv_bfloat16* dxperm, const int32_t* row_of, int topk, int64_t h,
                                   __nv_bfloat16* dx) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < topk; ++j) {
      const int32_t row = row_of[t * topk + j];
      if (row >= 0) acc += bf(dxperm, static_cast<int64_t>(row) * h + c);
    }
    dx[t * h + c] = __float2bfloat16_rn(acc);
  }
}

__global__ void topk_bwd_kernel(RouterDesc d, const float* logits, const int32_t* idx, const float* w,
                                const float* dprob, __nv_bfloat16* dl) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= d.tokens) return;
  const int E = d.experts, k = d.topk;
  const size_t o = static_cast<size_t>(t) * k;
  __nv_bfloat16* row = dl + static_cast<size_t>(t) * E;
  for (int e = 0; e < E; ++e) row[e] = __float2bfloat16_rn(0.0f);
  float dot = 0;
  for (int j = 0; j < k; ++j) dot += w[o + j] * dprob[o + j];
  if (!d.sigmoid) {
    for (int j = 0; j < k; ++j) row[idx[o + j]] = __float2bfloat16_rn(w[o + j] * (dprob[o + j] - dot));
  } else {
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += sigmoidf(logits[static_cast<size_t>(t) * E + idx[o + j]]);
    for (int j = 0; j < k; ++j) {
      const float sj = sigmoidf(logits[static_cast<size_t>(t) * E + idx[o + j]]);
      const float g = k > 1 ? (dprob[o + j] - dot) / sum : dprob[o + j];
      row[idx[o + j]] = __float2bfloat16_rn(sj * (1.0f - sj) * g);
    }
  }
}

__global__ void count_wrong_permute_kernel(const uint16_t* x, const uint16_t* send, const int32_t* row_of, int topk,
                                           int64_t h, unsigned long long* wrong) {
  const int64_t a = blockIdx.x;
  const int32_t row = row_of[a];
  unsigned long long bad = 0;
  if (row >= 0)
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
      bad += x[(a / topk) * h + c] != send[static_cast<int64_t>(row) * h + c] ? 1 : 0;
  for (int o = 16; o > 0; o >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, o);
  if ((threadIdx.x & 31) == 0 && bad) atomicAdd(wrong, bad);
}

__global__ void ref_rowmat_kernel(const float* in, int64_t K, const __nv_bfloat16* W, int64_t N, bool trans, float* out,
                                  float* mag) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t r = blockIdx.y;
  if (j >= N) return;
  const float* x = in + r * K;
  float acc = 0, am = 0;
  for (int64_t i = 0; i < K; ++i) {
    const float p = x[i] * bf(W, trans ? j * K + i : i * N + j);
    acc += p;
    am += fabsf(p);
  }
  out[r * N + j] = acc;
  if (mag) mag[r * N + j] = am;
}

}  // namespace

void fill_bf16_scaled(void* p, size_t n, uint64_t seed, uint64_t base, float scale, cudaStream_t s) {
  if (n == 0) return;
  fill_scaled_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, base, scale);
  check_launch("fill_scaled_kernel");
}

void moe_router_topk(const RouterDesc& d, float* logits, int32_t* idx, float* w, int32_t* eid, cudaStream_t s) {
  if (d.topk > kMaxTopk || d.groups > kMaxGroups) throw ExecError("moe_router_topk: topk <= 16 and groups <= 64");
  router_topk_kernel<<<blocks_for(static_cast<size_t>(d.tokens), 64), 64, 0, s>>>(d, logits, idx, w, eid);
  check_launch("router_topk_kernel");
}

int64_t moe_rank_chunks(int64_t n) { return (n + kChunk - 1) / kChunk; }

void moe_rank(const int32_t* eid, int64_t n, int experts, int32_t* chunk_counts, int32_t* totals, int32_t* pos,
              cudaStream_t s) {
  const int64_t chunks = moe_rank_chunks(n);
  chunk_count_kernel<<<static_cast<unsigned>(chunks), 256, static_cast<size_t>(experts) * 4, s>>>(eid, n, experts,
                                                                                                 chunk_counts);
  check_launch("chunk_count_kernel");
  chunk_scan_kernel<<<1, 1024, 0, s>>>(chunk_counts, chunks, experts, totals);
  check_launch("chunk_scan_kernel");
  chunk_rank_kernel<<<static_cast<unsigned>(chunks), kChunk, 0, s>>>(eid, n, experts, chunk_counts, pos);
  check_launch("chunk_rank_kernel");
}

void moe_offsets(const int32_t* totals, int experts, int64_t cap, int32_t* kept, int32_t* offset, cudaStream_t s) {
  offsets_kernel<<<1, 32, 0, s>>>(totals, experts, cap, kept, offset);
  check_launch("offsets_kernel");
}

void moe_probs_threshold(const int32_t* idx, const float* w, int64_t n, const int32_t* counts, int experts,
                         int64_t cap, uint32_t* thr, int32_t* need, cudaStream_t s) {
  probs_threshold_kernel<<<static_cast<unsigned>(experts), 256, 0, s>>>(idx, w, n, counts, cap, thr, need);
  check_launch("probs_threshold_kernel");
}

void moe_mark_ties(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                   int32_t* tie, cudaStream_t s) {
  mark_ties_kernel<<<blocks_for(static_cast<size_t>(n), 256, 132 * 8), 256, 0, s>>>(idx, w, n, thr, need, tie);
  check_launch("mark_ties_kernel");
}

void moe_keep_probs(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                    const int32_t* tie_pos, int32_t* eid_kept, cudaStream_t s) {
  keep_probs_kernel<<<blocks_for(static_cast<size_t>(n), 256, 132 * 8), 256, 0, s>>>(idx, w, n, thr, need, tie_pos,
                                                                                     eid_kept);
  check_launch("keep_probs_kernel");
}

void moe_keep_position(const int32_t* idx, const int32_t* pos, int64_t n, int64_t cap, int32_t* eid_kept,
                       cudaStream_t s) {
  keep_position_kernel<<<blocks_for(static_cast<size_t>(n), 256, 132 * 8), 256, 0, s>>>(idx, pos, n, cap, eid_kept);
  check_launch("keep_position_kernel");
}

void moe_scatter(const void* x, int64_t hidden, const int32_t* eid_kept, const int32_t* pos, const int32_t* offset,
                 int64_t n, int topk, int32_t* row_of, void* send, cudaStream_t s) {
  if (hidden % 8 != 0) throw ExecError("moe_scatter: hidden must be a multiple of 8");
  if (n == 0) return;
  scatter_kernel<<<static_cast<unsigned>(n), 128, 0, s>>>(static_cast<const uint4*>(x), hidden / 8, eid_kept, pos,
                                                          offset, topk, row_of, static_cast<uint4*>(send));
  check_launch("scatter_kernel");
}

void moe_swiglu_fwd(const void* h1, void* a, int64_t rows, int64_t ffn, cudaStream_t s) {
  if (rows <= 0) return;
  swiglu_fwd_kernel<<<blocks_for(static_cast<size_t>(rows * ffn), 256, 132 * 16), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(h1), static_cast<__nv_bfloat16*>(a), rows, ffn);
  check_launch("swiglu_fwd_kernel");
}

void moe_swiglu_bwd(const void* h1, const void* da, void* dh1, int64_t rows, int64_t ffn, cudaStream_t s) {
  if (rows <= 0) return;
  swiglu_bwd_kernel<<<blocks_for(static_cast<size_t>(rows * ffn), 256, 132 * 16), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(h1), static_cast<const __nv_bfloat16*>(da), static_cast<__nv_bfloat16*>(dh1),
      rows, ffn);
  check_launch("swiglu_bwd_kernel");
}

void moe_unpermute_fwd(const void* back, const int32_t* row_of, const float* w, int64_t tokens, int topk,
                       int64_t hidden, void* y, cudaStream_t s) {
  if (tokens == 0) return;
  unpermute_fwd_kernel<<<static_cast<unsigned>(tokens), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(back), row_of,
                                                                     w, topk, hidden, static_cast<__nv_bfloat16*>(y));
  check_launch("unpermute_fwd_kernel");
}

void moe_unpermute_bwd(const void* dout, const void* back, const int32_t* row_of, const float* w, int64_t tokens,
                       int topk, int64_t hidden, void* dyperm, float* dprob, cudaStream_t s) {
  if (tokens == 0) return;
  unpermute_bwd_kernel<<<static_cast<unsigned>(tokens * topk), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(dout), static_cast<const __nv_bfloat16*>(back), row_of, w, topk, hidden,
      static_cast<__nv_bfloat16*>(dyperm), dprob);
  check_launch("unpermute_bwd_kernel");
}

void moe_permute_bwd(const void* dxperm, const int32_t* row_of, int64_t tokens, int topk, int64_t hidden, void* dx,
                     cudaStream_t s) {
  if (tokens == 0) return;
  permute_bwd_kernel<<<static_cast<unsigned>(tokens), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(dxperm), row_of,
                                                                   topk, hidden, static_cast<__nv_bfloat16*>(dx));
  check_launch("permute_bwd_kernel");
}

void moe_topk_bwd(const RouterDesc& d, const float* logits, const int32_t* idx, const float* w, const float* dprob,
                  void* dlogits, cudaStream_t s) {
  topk_bwd_kernel<<<blocks_for(static_cast<size_t>(d.tokens), 64), 64, 0, s>>>(d, logits, idx, w, dprob,
                                                                              static_cast<__nv_bfloat16*>(dlogits));
  check_launch("topk_bwd_kernel");
}

void moe_count_wrong_permute(const void* x, const void* send, const int32_t* row_of, int64_t tokens, int topk,
                             int64_t hidden, unsigned long long* wrong, cudaStream_t s) {
  if (tokens == 0) return;
  count_wrong_permute_kernel<<<static_cast<unsigned>(tokens * topk), 256, 0, s>>>(
      static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(send), row_of, topk, hidden, wrong);
  check_launch("count_wrong_permute_kernel");
}

void ref_rowmat(const float* in, int rows, int64_t K, const void* W, int64_t N, bool trans, float* out, float* mag,
                cudaStream_t s) {
  if (rows <= 0) return;
  const dim3 grid(static_cast<unsigned>((N + 127) / 128), static_cast<unsigned>(rows));
  ref_rowmat_kernel<<<grid, 128, 0, s>>>(in, K, static_cast<const __nv_bfloat16*>(W), N, trans, out, mag);
  check_launch("ref_rowmat_kernel");
}

}  // namespace lcm::exec::kernels
