// The project's own attention kernels: a simple, obviously-correct causal GQA attention
// (forward with log-sum-exp, and the three gradients) that lcm-exec checks cuDNN against.
// One thread block per output row, fp32 arithmetic on the bf16 inputs, no tensor cores and
// no tiling beyond a shared-memory chunk of scores: slow, but independent of cuDNN's
// algorithm. Each kernel also returns the magnitude term of its sum (sum of the absolute
// values of the terms) that the checker's tolerance scales with (attention.hpp).
//
// Tensors are bf16 in the BSHD layout of attention.hpp; rows are given as int32 triples
// (b, h, i) in device memory; outputs are compact, row r's d values at [r * d, (r + 1) * d).
// All launchers enqueue on the stream and throw ExecError on a launch error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lcm::exec::kernels {

struct AttnRefDesc {
  int32_t b = 1, s = 1, hq = 1, hkv = 1, d = 64;
  float scale = 0.125f;
  int32_t causal = 1;
  int32_t window = 0;  // causal only: query i attends keys i - window .. i; 0 = all of i's prefix
};

// Forward of query rows (b, h_q, i): o = softmax(scale q k^T) v, o_mag = sum_j p_j |v_j|,
// lse = log sum_j exp(scale q.k_j). With dout: dsum = dout . o and dabs = sum |dout o|, the
// row terms the backward needs (dsum, dabs may be null otherwise).
void attention_ref_fwd(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                       const int32_t* rows, int n, float* o, float* o_mag, float* lse, float* dsum, float* dabs,
                       cudaStream_t s);

// dQ of query rows, given each row's lse, dsum, dabs (compact, n each).
void attention_ref_dq(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                      const int32_t* rows, int n, const float* lse, const float* dsum, const float* dabs, float* dq,
                      float* dq_mag, cudaStream_t s);

// dK and dV of key rows (b, h_kv, j), summed over the query heads of the group; lse_all,
// dsum_all, dabs_all are indexed [b][h_q][s] and must hold every query row the key row
// depends on (i >= j when causal).
void attention_ref_dkv(const AttnRefDesc& p, const void* q, const void* k, const void* v, const void* dout,
                       const int32_t* rows, int n, const float* lse_all, const float* dsum_all,
                       const float* dabs_all, float* dk, float* dk_mag, float* dv, float* dv_mag, cudaStream_t s);

// dst[idx[j]] = src[j], j in [0, n).
void scatter_f32(const float* src, const int64_t* idx, size_t n, float* dst, cudaStream_t s);
// out[j] = p[idx[j]] for an fp32 array p.
void gather_f32(const float* p, const int64_t* idx, size_t n, float* out, cudaStream_t s);
// *count += number of non-finite elements (NaN, inf) of a bf16 or fp32 array.
void count_nonfinite_bf16(const void* p, size_t n, unsigned long long* count, cudaStream_t s);
void count_nonfinite_f32(const float* p, size_t n, unsigned long long* count, cudaStream_t s);

}  // namespace lcm::exec::kernels
