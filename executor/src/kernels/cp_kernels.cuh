// Kernels of `lcm-exec bench cp-attention` (cp_ring.hpp): the load-balanced input fill, the
// log-sum-exp merge of partial outputs, row-range accumulation, and the comparison with the
// single-GPU attention. Launchers enqueue on the given stream and throw ExecError on a
// launch error. Row-major [rows, row_elems] tensors (BSHD with b = 1: row = token); LSE and
// statistics are [heads, stride] fp32.
//
// defines: fill_cp_rows, cp_merge, cp_finalize, cp_rows_to_f32, cp_add_rows_bf16,
//          cp_f32_to_bf16, CpCompare, cp_compare_rows, cp_compare_lse, cp_sum_squares_rows
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lcm::exec::kernels {

// dst local row i (2c rows) = bf16(uniform_pm1(seed, global(i) * row_elems + e)) with
// global(i) = i < c ? g0 + i : g1 + i - c: the rank's two chunks of the full sequence.
void fill_cp_rows(void* dst, int64_t c, int64_t row_elems, uint64_t seed, int64_t g0, int64_t g1, cudaStream_t s);

// Rows [q0, q0 + rows) of the running output: lse = log(exp(lse_acc) + exp(lse_step)),
// o_acc = o_acc exp(lse_acc - lse) + o_step exp(lse_step - lse); init: o_acc = o_step.
// o_* [2c, heads, d]; lse_acc [heads, stride]; lse_step compact [heads, rows] (row r at
// r - q0); o_step bf16, the rest fp32.
void cp_merge(float* o_acc, float* lse_acc, const void* o_step, const float* lse_step, int64_t q0, int64_t rows,
              int64_t heads, int64_t d, int64_t stride, bool init, cudaStream_t s);
// o (bf16) = o_acc over all rows.
void cp_finalize(const float* o_acc, void* o, size_t n, cudaStream_t s);
// acc[r0 .. r0 + rows) (=, or += unless init) bf16 src rows, row_elems per row (fp32 acc).
void cp_rows_to_f32(float* acc, const void* src, int64_t r0, int64_t rows, int64_t row_elems, bool init, cudaStream_t s);
// dst rows (=, or +=) src rows, both bf16, summed in fp32.
void cp_add_rows_bf16(void* dst, const void* src, int64_t r0, int64_t rows, int64_t row_elems, bool init,
                      cudaStream_t s);
void cp_f32_to_bf16(const float* src, void* dst, size_t n, cudaStream_t s);

// Comparison of local rows (2c of them) with the full-sequence tensor's global rows.
struct CpCompare {
  unsigned long long wrong = 0, nonfinite = 0;
  double err2 = 0, ref2 = 0;
};
// Sum of ref^2 over the rows the rank holds (to scale the absolute tolerance); d_out: one double.
void cp_sum_squares_rows(const void* ref, int64_t c, int64_t row_elems, int64_t g0, int64_t g1, double* d_out,
                         cudaStream_t s);
// got bf16 [2c, row_elems]; ref bf16 [S, row_elems]; wrong when |got - ref| > rtol |ref| + atol.
void cp_compare_rows(const void* got, const void* ref, int64_t c, int64_t row_elems, int64_t g0, int64_t g1,
                     float rtol, float atol, CpCompare* d_out, cudaStream_t s);
// got fp32 [heads, 2c], ref fp32 [heads, S].
void cp_compare_lse(const float* got, const float* ref, int64_t c, int64_t heads, int64_t seq, int64_t g0, int64_t g1,
                    float rtol, float atol, CpCompare* d_out, cudaStream_t s);

}  // namespace lcm::exec::kernels
