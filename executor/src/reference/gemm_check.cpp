// The CPU checker of `bench gemm` (see gemm.hpp): inputs regenerated from (seed, index), a
// float64 dot product per checked output element, the one result comparer (compare.hpp).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "lcm/executor/compare.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/executor/pattern.hpp"

namespace lcm::exec {

namespace {

double scale_of(GemmDType t) {
  // Block-scaled runs hold the per-tensor scales in every block, so the product is the same.
  return t != GemmDType::kBf16 ? static_cast<double>(kFp8ScaleA) * static_cast<double>(kFp8ScaleB) : 1.0;
}

}  // namespace

float gemm_input_value(GemmDType t, uint64_t seed, uint64_t index) {
  const float u = pattern::uniform_pm1(seed, index);
  if (t == GemmDType::kBf16) return __bfloat162float(__float2bfloat16_rn(u));
  return static_cast<float>(__nv_fp8_e4m3(u));
}

SampleGrid sample_grid(const GemmProblem& p, uint64_t seed) {
  SampleGrid g;
  const bool small = static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) <= 134217728.0;
  const auto pick = [&](int64_t extent, std::vector<int64_t>& out, uint64_t salt) {
    if (small || extent <= 32) {
      for (int64_t i = 0; i < extent; ++i) out.push_back(i);
      return;
    }
    std::mt19937_64 rng(seed ^ salt);
    out = {0, extent - 1};
    while (out.size() < 32) {
      const int64_t v = static_cast<int64_t>(rng() % static_cast<uint64_t>(extent));
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  };
  pick(p.m, g.rows, 0x726f7773ull);
  pick(p.n, g.cols, 0x636f6c73ull);
  return g;
}

Comparison check_gemm(const GemmProblem& p, uint64_t seed_a, uint64_t seed_b, const SampleGrid& g,
                      const std::vector<float>& got, const GemmReduction& reduction) {
  const size_t K = static_cast<size_t>(p.k);
  const uint64_t lda = static_cast<uint64_t>(p.lda()), ldb = static_cast<uint64_t>(p.ldb());
  // Materialise the sampled rows of A and columns of B once (storage index: row x ld + column).
  std::vector<float> arow(g.rows.size() * K), bcol(g.cols.size() * K);
  for (size_t r = 0; r < g.rows.size(); ++r)
    for (size_t k = 0; k < K; ++k)
      arow[r * K + k] = gemm_input_value(p.dtype, seed_a, static_cast<uint64_t>(g.rows[r]) * lda + k);
  for (size_t q = 0; q < g.cols.size(); ++q)
    for (size_t k = 0; k < K; ++k) {
      const uint64_t j = static_cast<uint64_t>(g.cols[q]);
      // bf16: B row-major [k, ldb]; fp8: W row-major [n, ldb].
      const uint64_t idx = p.dtype == GemmDType::kBf16 ? k * ldb + j : j * ldb + k;
      bcol[q * K + k] = gemm_input_value(p.dtype, seed_b, idx);
    }
  const double scale = scale_of(p.dtype);
  // Accumulation term: fp32 accumulation for bf16 (2^-16 of sum |a b| is far above it);
  // Hopper's fp8 MMA accumulates with about 14 significant bits before cuBLASLt promotes
  // the partial sums (DeepSeek-V3 report, section 3.3.2), so fp8 gets 2^-13. Measured on
  // H200 (128x256x512): with 2^-16, 2 of 32768 fp8 elements exceeded by up to 9%.
  const double acc = p.dtype == GemmDType::kBf16 ? 1.0 / 65536.0 : 1.0 / 8192.0;
  // Tolerance per element: |ref| / 128 (bf16 output rounding is at most |ref| / 256) plus
  // sum_k |a_k b_k| x acc; relative L2 error at most 1e-2.
  Comparer cmp(Tolerance{.rel = 1.0 / 128, .mag_rel = acc, .rel_l2_limit = 1e-2});
  // Split-K partials rounded to bf16 (see gemm.hpp): 2^-8 x sum_s (|P_s| + |R_s|), carried in
  // the magnitude term (scaled by 2^-8 / acc, as the comparer multiplies it by acc).
  const size_t splits = reduction.partials_in_output_type ? static_cast<size_t>(std::max(reduction.splitk, 1)) : 1;
  const size_t chunk = (K + splits - 1) / splits;
  const double partial_weight = (1.0 / 256) / acc;
  for (size_t r = 0; r < g.rows.size(); ++r) {
    for (size_t q = 0; q < g.cols.size(); ++q) {
      double dot = 0, abs_sum = 0, partial = 0, rounding = 0;
      const float* a = &arow[r * K];
      const float* b = &bcol[q * K];
      for (size_t k = 0; k < K; ++k) {
        const double prod = static_cast<double>(a[k]) * static_cast<double>(b[k]);
        dot += prod;
        partial += prod;
        abs_sum += std::fabs(prod);
        if (splits > 1 && (k + 1 == K || (k + 1) % chunk == 0)) {
          rounding += std::fabs(partial) + std::fabs(dot);
          partial = 0;
        }
      }
      cmp.add(static_cast<double>(got[r * g.cols.size() + q]), dot * scale,
              (abs_sum + partial_weight * rounding) * scale, g.rows[r] * p.n + g.cols[q]);
    }
  }
  return cmp.result();
}

}  // namespace lcm::exec
