// Fill, check, gather and copy kernels of lcm-exec (launchers declared in kernels.cuh).
#include "lcm/executor/kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "lcm/executor/error.hpp"
#include "lcm/executor/pattern.hpp"

namespace lcm::exec::kernels {
namespace {

constexpr int kThreads = 256;

int grid_for(size_t n, int per_sm = 8) {
  static int sms = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132;
    return v;
  }();
  const size_t want = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, static_cast<size_t>(sms) * per_sm)));
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

__device__ __forceinline__ float load_as_float(const void* p, ElemType t, size_t i) {
  switch (t) {
    case ElemType::kF32: return static_cast<const float*>(p)[i];
    case ElemType::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ElemType::kFp8E4M3: return float(static_cast<const __nv_fp8_e4m3*>(p)[i]);
  }
  return 0.0f;
}

__device__ __forceinline__ void store_from_float(void* p, ElemType t, size_t i, float v) {
  switch (t) {
    case ElemType::kF32: static_cast<float*>(p)[i] = v; break;
    case ElemType::kBf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case ElemType::kFp8E4M3: static_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(v); break;
  }
}

// One atomic per warp.
__device__ __forceinline__ void add_count(unsigned long long* total, unsigned long long mine) {
  for (int o = 16; o > 0; o >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, o);
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicAdd(total, mine);
}

__global__ void fill_uniform_kernel(void* p, ElemType t, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    store_from_float(p, t, i, pattern::uniform_pm1(seed, i));
}

__global__ void gather_bf16_kernel(const __nv_bfloat16* p, const int64_t* idx, size_t n, float* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n; j += size_t{gridDim.x} * blockDim.x)
    out[j] = __bfloat162float(p[idx[j]]);
}

__global__ void fill_words_kernel(uint32_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = pattern::word_value(seed, i);
}

__global__ void count_wrong_words_kernel(const uint32_t* p, size_t n, uint64_t seed, unsigned long long* wrong) {
  unsigned long long bad = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  for (; i < n; i += stride) bad += p[i] != pattern::word_value(seed, i) ? 1 : 0;
  add_count(wrong, bad);
}

// Grid-stride copy with four independent 16-byte loads in flight per thread before the
// stores. Measured on H200 (docs/executor.md): 3.94 TB/s at 4 GiB against cudaMemcpyAsync's
// 4.30; streaming hints (__ldcs/__stcs, 3.94) and per-block contiguous tiles (3.86) did not
// close the gap.
__global__ void copy_vec16_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void fill_coll_kernel(void* p, ElemType t, size_t n, uint64_t seed, int rank) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    store_from_float(p, t, i, static_cast<float>(pattern::coll_value(seed, rank, i)));
}

__device__ __forceinline__ int expected_coll(CollCheck op, const CollPattern& c, size_t i) {
  switch (op) {
    case CollCheck::kAllReduce: {
      int sum = 0;
      for (int r = 0; r < c.nranks; ++r) sum += pattern::coll_value(c.seed, r, i);
      return sum;
    }
    case CollCheck::kAllGather:
      return pattern::coll_value(c.seed, static_cast<int>(i / c.chunk), i % c.chunk);
    case CollCheck::kReduceScatter: {
      int sum = 0;
      for (int r = 0; r < c.nranks; ++r) sum += pattern::coll_value(c.seed, r, c.rank * c.chunk + i);
      return sum;
    }
    case CollCheck::kAllToAll:
      return pattern::coll_value(c.seed, static_cast<int>(i / c.chunk), c.rank * c.chunk + i % c.chunk);
    case CollCheck::kSendRecv:
      return pattern::coll_value(c.seed, c.peer, i);
  }
  return 0;
}

__global__ void count_wrong_coll_kernel(const void* p, size_t n, CollCheck op, CollPattern c,
                                        unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float got = load_as_float(p, c.type, i);
    bad += got == static_cast<float>(expected_coll(op, c, i)) ? 0 : 1;  // NaN counts as wrong
  }
  add_count(wrong, bad);
}

}  // namespace

size_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::kF32: return 4;
    case ElemType::kBf16: return 2;
    case ElemType::kFp8E4M3: return 1;
  }
  return 1;
}

const char* to_string(ElemType t) {
  switch (t) {
    case ElemType::kF32: return "float";
    case ElemType::kBf16: return "bfloat16";
    case ElemType::kFp8E4M3: return "f8e4m3";
  }
  return "?";
}

void fill_uniform(void* p, ElemType t, size_t n, uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  fill_uniform_kernel<<<grid_for(n, 16), kThreads, 0, s>>>(p, t, n, seed);
  check_launch("fill_uniform_kernel");
}

void gather_bf16(const void* p, const int64_t* idx, size_t n, float* out, cudaStream_t s) {
  if (n == 0) return;
  gather_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(p), idx, n, out);
  check_launch("gather_bf16_kernel");
}

void fill_words(uint32_t* p, size_t n, uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  fill_words_kernel<<<grid_for(n, 16), kThreads, 0, s>>>(p, n, seed);
  check_launch("fill_words_kernel");
}

void count_wrong_words(const uint32_t* p, size_t n, uint64_t seed, unsigned long long* wrong, cudaStream_t s) {
  if (n == 0) return;
  count_wrong_words_kernel<<<grid_for(n, 16), kThreads, 0, s>>>(p, n, seed, wrong);
  check_launch("count_wrong_words_kernel");
}

void copy_vec16(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  const size_t n = bytes / 16;
  if (n == 0) return;
  copy_vec16_kernel<<<grid_for(n, 8), kThreads, 0, s>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), n);
  check_launch("copy_vec16_kernel");
}

void fill_coll_input(void* p, ElemType t, size_t n, uint64_t seed, int rank, cudaStream_t s) {
  if (n == 0) return;
  fill_coll_kernel<<<grid_for(n, 16), kThreads, 0, s>>>(p, t, n, seed, rank);
  check_launch("fill_coll_kernel");
}

void count_wrong_coll(const void* p, size_t n, CollCheck op, const CollPattern& pat,
                      unsigned long long* wrong, cudaStream_t s) {
  if (n == 0) return;
  count_wrong_coll_kernel<<<grid_for(n, 16), kThreads, 0, s>>>(p, n, op, pat, wrong);
  check_launch("count_wrong_coll_kernel");
}

}  // namespace lcm::exec::kernels
