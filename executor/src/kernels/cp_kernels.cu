// Ring-attention kernels (launchers declared in cp_kernels.cuh).
#include "kernels/cp_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "lcm/executor/error.hpp"
#include "lcm/executor/pattern.hpp"

namespace lcm::exec::kernels {
namespace {

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), what, __FILE__, __LINE__);
}

int grid(size_t n) { return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + 255) / 256, 132 * 16))); }

__device__ __forceinline__ int64_t global_row(int64_t i, int64_t c, int64_t g0, int64_t g1) {
  return i < c ? g0 + i : g1 + (i - c);
}

__global__ void fill_cp_rows_kernel(__nv_bfloat16* dst, int64_t c, int64_t re, uint64_t seed, int64_t g0, int64_t g1) {
  const int64_t n = 2 * c * re;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / re, e = i % re;
    dst[i] = __float2bfloat16_rn(pattern::uniform_pm1(seed, static_cast<uint64_t>(global_row(r, c, g0, g1) * re + e)));
  }
}

__global__ void merge_kernel(float* o_acc, float* lse_acc, const __nv_bfloat16* o_step, const float* lse_step,
                             int64_t q0, int64_t rows, int64_t heads, int64_t d, int64_t stride, bool init) {
  const int64_t n = rows * heads * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = q0 + i / (heads * d), h = (i / d) % heads;
    const int64_t oi = r * heads * d + i % (heads * d);
    const float b = lse_step[h * rows + (r - q0)];  // compact [heads, rows] per step
    const float ov = __bfloat162float(o_step[oi]);
    if (init) {
      o_acc[oi] = ov;
    } else {
      const float a = lse_acc[h * stride + r];
      const float m = fmaxf(a, b);
      const float l = m + logf(expf(a - m) + expf(b - m));
      o_acc[oi] = o_acc[oi] * expf(a - l) + ov * expf(b - l);
    }
  }
}

__global__ void merge_lse_kernel(float* lse_acc, const float* lse_step, int64_t q0, int64_t rows, int64_t heads,
                                 int64_t stride, bool init) {
  const int64_t n = rows * heads;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t h = i / rows, r = q0 + i % rows;
    const float b = lse_step[h * rows + (r - q0)];
    if (init) {
      lse_acc[h * stride + r] = b;
    } else {
      const float a = lse_acc[h * stride + r];
      const float m = fmaxf(a, b);
      lse_acc[h * stride + r] = m + logf(expf(a - m) + expf(b - m));
    }
  }
}

__global__ void f32_to_bf16_kernel(const float* src, __nv_bfloat16* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void rows_to_f32_kernel(float* acc, const __nv_bfloat16* src, int64_t off, int64_t n, bool init) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = __bfloat162float(src[off + i]);
    acc[off + i] = init ? v : acc[off + i] + v;
  }
}

__global__ void add_rows_bf16_kernel(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t off, int64_t n, bool init) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = __bfloat162float(src[off + i]);
    dst[off + i] = __float2bfloat16_rn(init ? v : __bfloat162float(dst[off + i]) + v);
  }
}

__global__ void sum_squares_kernel(const __nv_bfloat16* ref, int64_t c, int64_t re, int64_t g0, int64_t g1, double* out) {
  const int64_t n = 2 * c * re;
  double acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = __bfloat162float(ref[global_row(i / re, c, g0, g1) * re + i % re]);
    acc += static_cast<double>(v) * v;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

__device__ void compare_one(float g, float r, float rtol, float atol, unsigned long long& wrong,
                            unsigned long long& nonfinite, double& e2, double& r2) {
  const float err = fabsf(g - r);
  if (!isfinite(g)) ++nonfinite;
  if (!(err <= rtol * fabsf(r) + atol)) ++wrong;
  e2 += isfinite(err) ? static_cast<double>(err) * err : 1e30;
  r2 += static_cast<double>(r) * r;
}

__device__ void reduce_compare(CpCompare* out, unsigned long long wrong, unsigned long long nonfinite, double e2,
                               double r2) {
  for (int o = 16; o > 0; o >>= 1) {
    wrong += __shfl_down_sync(0xffffffffu, wrong, o);
    nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, o);
    e2 += __shfl_down_sync(0xffffffffu, e2, o);
    r2 += __shfl_down_sync(0xffffffffu, r2, o);
  }
  if ((threadIdx.x & 31) == 0) {
    if (wrong) atomicAdd(&out->wrong, wrong);
    if (nonfinite) atomicAdd(&out->nonfinite, nonfinite);
    atomicAdd(&out->err2, e2);
    atomicAdd(&out->ref2, r2);
  }
}

__global__ void compare_rows_kernel(const __nv_bfloat16* got, const __nv_bfloat16* ref, int64_t c, int64_t re, int64_t g0,
                                    int64_t g1, float rtol, float atol, CpCompare* out) {
  const int64_t n = 2 * c * re;
  unsigned long long wrong = 0, nonfinite = 0;
  double e2 = 0, r2 = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    compare_one(__bfloat162float(got[i]), __bfloat162float(ref[global_row(i / re, c, g0, g1) * re + i % re]), rtol, atol,
                wrong, nonfinite, e2, r2);
  reduce_compare(out, wrong, nonfinite, e2, r2);
}

__global__ void compare_lse_kernel(const float* got, const float* ref, int64_t c, int64_t heads, int64_t seq, int64_t g0,
                                   int64_t g1, float rtol, float atol, CpCompare* out) {
  const int64_t n = heads * 2 * c;
  unsigned long long wrong = 0, nonfinite = 0;
  double e2 = 0, r2 = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t h = i / (2 * c), r = i % (2 * c);
    compare_one(got[i], ref[h * seq + global_row(r, c, g0, g1)], rtol, atol, wrong, nonfinite, e2, r2);
  }
  reduce_compare(out, wrong, nonfinite, e2, r2);
}

}  // namespace

void fill_cp_rows(void* dst, int64_t c, int64_t row_elems, uint64_t seed, int64_t g0, int64_t g1, cudaStream_t s) {
  fill_cp_rows_kernel<<<grid(static_cast<size_t>(2 * c * row_elems)), 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), c,
                                                                                  row_elems, seed, g0, g1);
  check_launch("fill_cp_rows_kernel");
}

void cp_merge(float* o_acc, float* lse_acc, const void* o_step, const float* lse_step, int64_t q0, int64_t rows,
              int64_t heads, int64_t d, int64_t stride, bool init, cudaStream_t s) {
  // o first (it reads the old lse), then the lse.
  merge_kernel<<<grid(static_cast<size_t>(rows * heads * d)), 256, 0, s>>>(
      o_acc, lse_acc, static_cast<const __nv_bfloat16*>(o_step), lse_step, q0, rows, heads, d, stride, init);
  check_launch("merge_kernel");
  merge_lse_kernel<<<grid(static_cast<size_t>(rows * heads)), 256, 0, s>>>(lse_acc, lse_step, q0, rows, heads, stride,
                                                                           init);
  check_launch("merge_lse_kernel");
}

void cp_finalize(const float* o_acc, void* o, size_t n, cudaStream_t s) { cp_f32_to_bf16(o_acc, o, n, s); }

void cp_rows_to_f32(float* acc, const void* src, int64_t r0, int64_t rows, int64_t row_elems, bool init, cudaStream_t s) {
  rows_to_f32_kernel<<<grid(static_cast<size_t>(rows * row_elems)), 256, 0, s>>>(
      acc, static_cast<const __nv_bfloat16*>(src), r0 * row_elems, rows * row_elems, init);
  check_launch("rows_to_f32_kernel");
}

void cp_add_rows_bf16(void* dst, const void* src, int64_t r0, int64_t rows, int64_t row_elems, bool init,
                      cudaStream_t s) {
  add_rows_bf16_kernel<<<grid(static_cast<size_t>(rows * row_elems)), 256, 0, s>>>(
      static_cast<__nv_bfloat16*>(dst), static_cast<const __nv_bfloat16*>(src), r0 * row_elems, rows * row_elems, init);
  check_launch("add_rows_bf16_kernel");
}

void cp_f32_to_bf16(const float* src, void* dst, size_t n, cudaStream_t s) {
  f32_to_bf16_kernel<<<grid(n), 256, 0, s>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  check_launch("f32_to_bf16_kernel");
}

void cp_sum_squares_rows(const void* ref, int64_t c, int64_t row_elems, int64_t g0, int64_t g1, double* d_out,
                         cudaStream_t s) {
  sum_squares_kernel<<<grid(static_cast<size_t>(2 * c * row_elems)), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(ref), c, row_elems, g0, g1, d_out);
  check_launch("sum_squares_kernel");
}

void cp_compare_rows(const void* got, const void* ref, int64_t c, int64_t row_elems, int64_t g0, int64_t g1,
                     float rtol, float atol, CpCompare* d_out, cudaStream_t s) {
  compare_rows_kernel<<<grid(static_cast<size_t>(2 * c * row_elems)), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(got), static_cast<const __nv_bfloat16*>(ref), c, row_elems, g0, g1, rtol, atol,
      d_out);
  check_launch("compare_rows_kernel");
}

void cp_compare_lse(const float* got, const float* ref, int64_t c, int64_t heads, int64_t seq, int64_t g0, int64_t g1,
                    float rtol, float atol, CpCompare* d_out, cudaStream_t s) {
  compare_lse_kernel<<<grid(static_cast<size_t>(heads * 2 * c)), 256, 0, s>>>(got, ref, c, heads, seq, g0, g1, rtol,
                                                                              atol, d_out);
  check_launch("compare_lse_kernel");
}

}  // namespace lcm::exec::kernels
