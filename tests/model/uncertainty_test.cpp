// Error bands (model/uncertainty.hpp, docs/time-model.md "Error bands"): hand-derived band
// of a synthetic step, the composition-only band, the default headroom from the stored
// memory spread, and the quantile the calibration bands use.
#include <cmath>

#include <gtest/gtest.h>

#include "lcm/model/uncertainty.hpp"

namespace lcm {
namespace {

// A band given in log space: ln(1 + low) = lo, ln(1 + high) = hi.
RelativeBand log_band(double lo, double hi) { return {std::expm1(lo), std::expm1(hi)}; }

// Op bands chosen in log space (centre m, half-width s):
//   gemm_bf16 [-0.1, 0.1] (m 0, s 0.1), gemm_fp8 [-0.2, 0] (m -0.1, s 0.1),
//   attention [0, 0.2] (m 0.1, s 0.1), memory [-0.3, 0.1] (m -0.1, s 0.2),
//   nvlink [-0.05, 0.05], nic [-0.1, 0.3]: communication takes [-0.1, 0.3] (m 0.1, s 0.2).
OpUncertainty synthetic_ops() {
  OpUncertainty u;
  u.present = true;
  u.gemm_bf16 = log_band(-0.1, 0.1);
  u.gemm_fp8 = log_band(-0.2, 0.0);
  u.attention = log_band(0.0, 0.2);
  u.memory = log_band(-0.3, 0.1);
  u.nvlink = log_band(-0.05, 0.05);
  u.nic = log_band(-0.1, 0.3);
  return u;
}

// The synthetic step: compute GEMM 4 s, attention 2 s, memory-bound 1 s (C = 7), bubble
// 0.7 s (1 + B/C = 1.1), optimizer 0.3 s, exposed TP 1.5 s + DP 0.5 s (E = 2): T = 10 s.
// Weights: GEMM 4.4/10, attention 2.2/10, memory (1.1 + 0.3)/10, comm 2/10.
constexpr std::array<double, kNumOpClasses> kCompute{4.0, 2.0, 1.0};
std::array<double, kNumCommDims> exposed() {
  std::array<double, kNumCommDims> e{};
  e[static_cast<size_t>(CommDim::kTp)] = 1.5;
  e[static_cast<size_t>(CommDim::kDp)] = 0.5;
  return e;
}

TEST(StepBand, HandDerived) {
  const StepBand b = step_band(kCompute, exposed(), 0.7, 0.3, false, synthetic_ops());
  // m_op = 0.44 x 0 + 0.22 x 0.1 + 0.14 x (-0.1) + 0.2 x 0.1 = 0.028
  // s_op = 0.44 x 0.1 + 0.22 x 0.1 + 0.14 x 0.2 + 0.2 x 0.2 = 0.134
  EXPECT_TRUE(b.op_present);
  EXPECT_NEAR(b.op_center, 0.028, 1e-12);
  EXPECT_NEAR(b.op_half, 0.134, 1e-12);
  // Composition (stored spread -4.59% / +10.77%, session 40): m_c = (ln 0.9541 + ln 1.1077) / 2
  // = 0.0276495, s_c = (ln 1.1077 - ln 0.9541) / 2 = 0.0746363.
  EXPECT_NEAR(b.comp_center, 0.0276495, 1e-6);
  EXPECT_NEAR(b.comp_half, 0.0746363, 1e-6);
  // m = 0.0556495, s = sqrt(0.134^2 + 0.0746363^2) = 0.1533838:
  // low = exp(-0.0977343) - 1 = -0.0931101, high = exp(0.2090333) - 1 = 0.2324860.
  EXPECT_NEAR(b.low, -0.0931101, 1e-6);
  EXPECT_NEAR(b.high, 0.2324860, 1e-6);
  // A 10 s prediction: 9.069 .. 12.325 s; an MFU of 40%: 32.45% .. 44.11%.
  EXPECT_NEAR(time_range(10.0, b).low, 9.068899, 1e-5);
  EXPECT_NEAR(time_range(10.0, b).high, 12.324860, 1e-5);
  EXPECT_NEAR(rate_range(0.40, b).low, 0.3245473, 1e-7);  // 0.40 / 1.2324860
  EXPECT_NEAR(rate_range(0.40, b).high, 0.4410679, 1e-7);  // 0.40 / 0.9068899
}

TEST(StepBand, Fp8GemmsTakeTheFp8Band) {
  const StepBand b = step_band(kCompute, exposed(), 0.7, 0.3, true, synthetic_ops());
  // Only the GEMM term changes: 0.44 x (-0.1) instead of 0: m_op = -0.016, s_op unchanged.
  EXPECT_NEAR(b.op_center, -0.016, 1e-12);
  EXPECT_NEAR(b.op_half, 0.134, 1e-12);
  // m = 0.0116495, s = 0.1533838: low = exp(-0.1417343) - 1, high = exp(0.1650333) - 1.
  EXPECT_NEAR(b.low, -0.1321481, 1e-6);
  EXPECT_NEAR(b.high, 0.1794323, 1e-6);
}

TEST(StepBand, WithoutOpResidualsTheBandIsTheCompositionSpread) {
  const StepBand b = step_band(kCompute, exposed(), 0.7, 0.3, false, OpUncertainty{});
  EXPECT_FALSE(b.op_present);
  EXPECT_EQ(b.op_center, 0.0);
  EXPECT_EQ(b.op_half, 0.0);
  EXPECT_NEAR(b.low, -0.0459, 1e-12);
  EXPECT_NEAR(b.high, 0.1077, 1e-12);
  EXPECT_TRUE(composition_spread().development_set);
  EXPECT_EQ(composition_spread().rows, 316);
}

TEST(MemorySpread, TheStoredSpreadIsTheBandOfEveryMemoryVerdict) {
  // 10th and 90th percentiles of measured / predicted - 1 over the 44 CI rows: -4.10% and
  // +6.44%; StageMemory::peak_low / peak_high are the peak times 1 + each (memory_test.cpp,
  // MemoryTotals.AllowancesAndFit, checks the verdicts against them).
  EXPECT_EQ(memory_spread().rows, 44);
  EXPECT_DOUBLE_EQ(memory_spread().band.low, -0.0410);
  EXPECT_DOUBLE_EQ(memory_spread().band.high, 0.0644);
  EXPECT_TRUE(memory_spread().development_set);
}

TEST(Quantile, LinearInterpolationBetweenOrderStatistics) {
  // 11 values 0..10 (shuffled): the 10th percentile is 1, the 90th 9; 5 values: 0.4 x 1 = 0.4.
  EXPECT_DOUBLE_EQ(quantile({5, 3, 9, 0, 10, 1, 7, 2, 8, 6, 4}, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(quantile({5, 3, 9, 0, 10, 1, 7, 2, 8, 6, 4}, 0.9), 9.0);
  EXPECT_DOUBLE_EQ(quantile({0, 1, 2, 3, 4}, 0.1), 0.4);
  EXPECT_DOUBLE_EQ(quantile({}, 0.5), 0.0);
}

}  // namespace
}  // namespace lcm
