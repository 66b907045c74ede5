// Time model on hand-computed cases (issue: time model and planner, "Done means").
#include <gtest/gtest.h>

#include <cmath>

#include "../common/test_hardware.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"

namespace lcm {
namespace {

const HardwareSpec hw = testing::test_h100();

// 8192^3 bf16: 2·8192³ FLOPs at 989.4 TFLOP/s x 0.8 x (8192/8256)³ (saturation in m, n and
// k with gemm_dim_half = 64); 8192 is a whole number of 128 x 256 tiles, so no edge waste,
// and there is no wave term. FP8: its own peak fraction (gemm_fp8) of the FP8 peak, and the
// k half-point doubles (the k loop runs twice as fast per clock): (8192/8320) in k.
TEST(TimingGemm, OneLargeGemm) {
  const GemmShape g{8192, 8192, 8192, 1};
  const double shape = 8192.0 / 8256.0;
  const double eff = 0.8 * shape * shape * shape;
  const double expected = 2.0 * 8192.0 * 8192.0 * 8192.0 / (989.4e12 * eff);
  EXPECT_NEAR(gemm_efficiency(g, hw), eff, 1e-12);
  EXPECT_NEAR(gemm_time(g, DType::kBf16, hw), expected, 1e-12);
  const double eff8 = hw.efficiency.gemm_fp8 * shape * shape * (8192.0 / 8320.0);
  EXPECT_NEAR(gemm_time(g, DType::kFp8, hw), 2.0 * 8192.0 * 8192.0 * 8192.0 / (1978.9e12 * eff8), 1e-12);
}

// Block-scaled FP8 (--fp8-recipe blockwise): the same shape curve and FP8 peak at its own peak
// fraction, gemm_fp8_block: 8192^3 runs at 0.45 / 0.6 of the per-tensor rate, so it takes
// 0.6 / 0.45 of the time (no roofline in the test profile, no fixed time at this size).
TEST(TimingGemm, BlockScaledFp8TakesItsOwnPeakFraction) {
  HardwareSpec h = hw;
  h.efficiency.gemm_fp8 = 0.6;
  h.efficiency.gemm_fp8_block = 0.45;
  const GemmShape g{8192, 8192, 8192, 1};
  const double shape = 8192.0 / 8256.0;
  const double eff = 0.45 * shape * shape * (8192.0 / 8320.0);
  EXPECT_NEAR(gemm_time(g, DType::kFp8Block, h), 2.0 * 8192.0 * 8192.0 * 8192.0 / (1978.9e12 * eff), 1e-12);
  EXPECT_NEAR(gemm_time(g, DType::kFp8Block, h) / gemm_time(g, DType::kFp8, h), 0.6 / 0.45, 1e-12);
}

// A partial edge tile costs a full one: m = 8192 + 1 rows run as 65 tiles of 128.
TEST(TimingGemm, EdgeTileCostsAFullTile) {
  const GemmShape g{8193, 8192, 8192, 1};
  const double eff = 0.8 * (8193.0 / 8257.0) * (8192.0 / 8256.0) * (8192.0 / 8256.0) * (8193.0 / (65.0 * 128.0));
  EXPECT_NEAR(gemm_efficiency(g, hw), eff, 1e-12);
}

// A skinny GEMM (K = 128) loses to the shape curve: 128/(128+64) = 2/3 on K alone.
TEST(TimingGemm, SkinnyGemmIsSlowerPerFlop) {
  const GemmShape big{8192, 8192, 8192, 1}, skinny{8192, 8192, 128, 1};
  const double per_flop_big = gemm_time(big, DType::kBf16, hw) / (8192.0 * 8192 * 8192);
  const double per_flop_skinny = gemm_time(skinny, DType::kBf16, hw) / (8192.0 * 8192 * 128);
  EXPECT_NEAR(per_flop_skinny / per_flop_big, (8192.0 / 8256.0) / (128.0 / 192.0), 1e-9);
}

// ---- Small-op regime (issue 12) ----------------------------------------------------------
// test_h100: 989.4 TFLOP/s BF16, HBM 3.35 TB/s x 0.85 = 2.8475e12 B/s, gemm_dim_half 64,
// tiles 128 x 256, kernel_fixed 0.

// 64 x 4096 x 4096 BF16. Compute: eff = 0.8 x (64/128) x (4096/4160)^2 x edge(64 of 128 =
// 0.5) = 0.19389; t_c = 2 x 64 x 4096^2 / (989.4e12 x 0.19389) = 11.1942 us. Memory: A 64 x
// 4096, B 4096 x 4096, C 64 x 4096, 2 bytes each = 34 603 008 B / 2.8475e12 = 12.1521 us.
// p = 2: sqrt(11.1942^2 + 12.1521^2) = 16.5222 us; p = 1: the sum 23.3463 us; p = 64: the
// larger, 12.1521 us (x 2^(1/64) at most); p = 0: the compute time alone.
TEST(TimingGemm, MemoryRooflineIsASmoothMaximum) {
  HardwareSpec h = hw;
  const GemmShape g{64, 4096, 4096, 1};
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 11.1942e-6, 1e-10);
  h.efficiency.gemm_roofline_exponent = 2;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 16.5222e-6, 1e-10);
  h.efficiency.gemm_roofline_exponent = 1;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 23.3463e-6, 1e-10);
  h.efficiency.gemm_roofline_exponent = 64;
  EXPECT_GT(gemm_time(g, DType::kBf16, h), 12.1521e-6);
  EXPECT_LT(gemm_time(g, DType::kBf16, h), 12.1521e-6 * 1.0002);
  // FP8 moves A and B at 1 byte: (64 x 4096 + 4096^2) + 2 x 64 x 4096 = 17 301 504 + 524 288
  // = 17 563 648 B -> 6.1681 us, below its compute time.
  h.efficiency.gemm_roofline_exponent = 64;
  const double fp8 = gemm_time(g, DType::kFp8, h);
  h.efficiency.gemm_roofline_exponent = 0;
  EXPECT_NEAR(fp8, gemm_time(g, DType::kFp8, h), 1e-9);
}

// An accumulating GEMM with an FP32 C (beta 1: a weight gradient into fp32 main grads, c_bytes
// 8) reads and writes C in its epilogue, after the k loop: the C traffic follows the roofline of the k loop
// instead of hiding under it. 4096 x 4096 x 512 (a 4096 x 4096 weight's gradient over 512
// tokens). Compute: eff = 0.8 x (4096/4160)^2 x (512/576) = 0.689399 (whole tiles), t_c =
// 2 x 4096^2 x 512 / (989.4e12 x 0.689399) = 25.1870 us; A and B, 2 x 4096 x 512 x 2 B =
// 8 388 608 B = 2.9460 us, under it (p = 64: the maximum within 1e-9); C, 4096^2 x 8 B =
// 134 217 728 B = 47.1353 us, on top: 72.3223 us. (Session 10's rule, the write inside the
// maximum and only the read after it, gave 50.0965 us, and still does for a BF16 C of 4 B:
// max(25.1870, 2.9460 + 11.7838) + 11.7838 = 36.9708 us.) Without the memory roofline (p = 0)
// C moves nothing.
TEST(TimingGemm, AccumulatingGemmMovesCAfterItsKLoop) {
  HardwareSpec h = hw;
  GemmShape g{4096, 4096, 512, 1};
  g.c_bytes = 8.0;
  h.efficiency.gemm_roofline_exponent = 64;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 72.3223e-6, 1e-10);
  g.c_bytes = 4.0;  // a BF16 C read and written: the write inside the maximum, the read after
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 36.9708e-6, 1e-10);
  g.c_bytes = 2.0;  // a BF16 C written: inside the maximum, under the 25.1870 us of compute
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 25.1870e-6, 1e-10);
  g.c_bytes = 8.0;
  h.efficiency.gemm_roofline_exponent = 0;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 25.1870e-6, 1e-10);
}

// An accumulating BF16 C that outgrows L2 (the router's input gradient, K = 8 experts): L2 holds
// l2 / 2 (25 MiB here) of C, the rest of C's read misses (miss = 1 - 25 MiB / C), and with
// gemm_accumulate_miss_bw f = 0.75 C's read and write take (1 - miss) / rate + miss / (f rate)
// per byte: the rate times 1 / ((1 - miss) + miss / f). p = 64 (the maximum);
// rate = hbm_bw x hbm = 2.8475e12 B/s; A and B are 8 x (m + n) x 2 B.
// - 8192 x 4096 x 8: C = 64 MiB, miss 39/64 = 0.609375, share 1 / 1.203125 = 0.831169: write
//   67 108 864 B = 28.3545 us + operands 196 608 B = 0.0690 us = 28.4239 us inside the maximum
//   (compute 6.2483 us: eff 0.8 x (8192/8256)(4096/4160)(8/72)); the read after it, 28.3545 us:
//   56.7787 us (47.2043 us at f = 1, the full rate).
// - 4800 x 4096 x 8: C = 37.5 MiB, miss 1/3, share 0.9: 15.3935 us inside and 15.3435 us after:
//   30.7370 us (27.6683 at f = 1).
// - 4096 x 2048 x 8: C = 16 MiB fits in half of L2: 11.8183 us whatever f.
// A BF16 C written once (c_bytes 2) and an FP32 C accumulated (8) do not take the term.
TEST(TimingGemm, AccumulatingBf16CPastL2RunsAtTheMissRate) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 64;
  auto t = [&](int64_t m, int64_t n, double c_bytes) {
    GemmShape g{m, n, 8, 1};
    g.c_bytes = c_bytes;
    return gemm_time(g, DType::kBf16, h);
  };
  EXPECT_NEAR(t(8192, 4096, 4), 47.2043e-6, 1e-10);
  EXPECT_NEAR(t(4800, 4096, 4), 27.6683e-6, 1e-10);
  const double c2 = t(8192, 4096, 2), c8 = t(8192, 4096, 8);
  h.efficiency.gemm_accumulate_miss_bw = 0.75;
  EXPECT_NEAR(t(8192, 4096, 4), 56.7787e-6, 1e-10);
  EXPECT_NEAR(t(4800, 4096, 4), 30.7370e-6, 1e-10);
  EXPECT_NEAR(t(4096, 2048, 4), 11.8183e-6, 1e-10);
  EXPECT_DOUBLE_EQ(t(8192, 4096, 2), c2);
  EXPECT_DOUBLE_EQ(t(8192, 4096, 8), c8);
  // Without an L2 size the term has nothing to miss.
  h.gpu.l2_bytes = 0;
  EXPECT_NEAR(t(8192, 4096, 4), 47.2043e-6, 1e-10);
}

// The memory stream's SM fill (gemm_fill_bw_exponent f): with fewer output tiles than SMs the
// operand traffic moves at the rate x (tiles / num_sms)^f. 2048 x 64 x 16384 on 64 x 64 tiles:
// 32 tiles of the test H100's 132 SMs. Memory-bound: A 67 108 864 B + B 2 097 152 B + C 262 144 B
// = 24.3962 us at 2.8475e12 B/s against 11.2 us of compute (eff 0.8 x (2048/2112)(64/128)
// (16384/16448)); p = 64 (the maximum). f = 0.5 stretches it by (132 / 32)^0.5 = 2.0310 to
// 49.5489 us. 16384 x 64 x 4096 has 256 tiles (all SMs busy): unchanged.
TEST(TimingGemm, FewTilesSlowTheMemoryStream) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 64;
  h.efficiency.gemm_tile_m = h.efficiency.gemm_tile_n = 64;
  const GemmShape few{2048, 64, 16384, 1}, many{16384, 64, 4096, 1};
  EXPECT_NEAR(gemm_time(few, DType::kBf16, h), 24.3962e-6, 1e-10);
  const double many_off = gemm_time(many, DType::kBf16, h);
  h.efficiency.gemm_fill_bw_exponent = 0.5;
  EXPECT_NEAR(gemm_time(few, DType::kBf16, h), 49.5489e-6, 1e-10);
  EXPECT_DOUBLE_EQ(gemm_time(many, DType::kBf16, h), many_off);
}

// Split-K (gemm_split_k_chunk c): a GEMM with fewer output tiles than SMs splits its k over
// clamp(k / c, 1, num_sms / tiles) CTAs per tile; both SM-fill terms count the CTAs, and each
// split past the first writes and reads back an FP32 partial C (8 B per element) at the filled
// rate. The memory-bound 2048 x 64 x 16384 above (32 tiles, f = 0.5, 49.5489 us unsplit):
// - c = 4096: 4 splits, 128 CTAs: operands at 2.8475e12 x sqrt(128 / 132) B/s, 24.3962 us /
//   0.984732 = 24.7745 us, plus 3 x 2048 x 64 x 8 B = 1.1219 us: 25.8963 us;
// - k = 65536 with the same c: 16 splits wanted, capped at 132 / 32 = 4.125 (all SMs busy):
//   A + B + C = 277 086 208 B at the full rate, 97.3086 us, plus 3.125 x 1 048 576 B = 1.1508 us:
//   98.4594 us;
// - k no longer than c (c = 16384) and a GEMM with every SM busy (256 tiles) are not split.
TEST(TimingGemm, SplitKFillsTheSmsOfAFewTileLongReduction) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 64;
  h.efficiency.gemm_tile_m = h.efficiency.gemm_tile_n = 64;
  h.efficiency.gemm_fill_bw_exponent = 0.5;
  const GemmShape few{2048, 64, 16384, 1}, longer{2048, 64, 65536, 1}, many{16384, 64, 4096, 1};
  const double many_off = gemm_time(many, DType::kBf16, h);
  h.efficiency.gemm_split_k_chunk = 4096;
  EXPECT_NEAR(gemm_time(few, DType::kBf16, h), 25.8963e-6, 1e-10);
  EXPECT_NEAR(gemm_time(longer, DType::kBf16, h), 98.4594e-6, 1e-10);
  EXPECT_DOUBLE_EQ(gemm_time(many, DType::kBf16, h), many_off);
  h.efficiency.gemm_split_k_chunk = 16384;
  EXPECT_NEAR(gemm_time(few, DType::kBf16, h), 49.5489e-6, 1e-10);
}

// The fallback tile (gemm_tile_small): each of m and n takes the lesser edge waste of its tile
// and the small one. Compute only (no memory roofline), test H100 tiles 128 x 256:
// - m = 160: 160 / 256 = 0.625 on 128-row tiles, 160 / 192 = 0.8333 on 64-row ones: the time
//   x 0.625 / 0.8333 = 0.75;
// - n = 320: 320 / 512 = 0.625 on 256-wide tiles, 320 / 320 = 1 on 64-wide ones: x 0.625;
// - 4096 x 4096 (whole tiles either way): unchanged.
TEST(TimingGemm, FallbackTileTakesTheLesserEdgeWaste) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 0;
  const GemmShape narrow_m{160, 4096, 4096, 1}, narrow_n{4096, 320, 4096, 1}, whole{4096, 4096, 4096, 1};
  const double m0 = gemm_time(narrow_m, DType::kBf16, h), n0 = gemm_time(narrow_n, DType::kBf16, h),
               w0 = gemm_time(whole, DType::kBf16, h);
  h.efficiency.gemm_tile_small = 64;
  EXPECT_NEAR(gemm_time(narrow_m, DType::kBf16, h) / m0, 0.75, 1e-12);
  EXPECT_NEAR(gemm_time(narrow_n, DType::kBf16, h) / n0, 0.625, 1e-12);
  EXPECT_DOUBLE_EQ(gemm_time(whole, DType::kBf16, h), w0);
}

// The exposed C store: gemm_c_write_exposed e of a BF16 C written once follows the roofline
// maximum. 4096 x 4096 x 512 on the test H100 (p = 64): compute 25.1870 us, A and B 2.9460 us,
// C 4096^2 x 2 B = 11.7838 us (hbm_bw x hbm = 2.8475e12 B/s). e = 0: all of C inside the
// maximum, 25.1870 us; e = 0.5: half after, 25.1870 + 5.8919 = 31.0789 us; e = 1: all after,
// 36.9708 us. The share does not depend on k: at k = 4096 the same e adds the same 5.8919 us.
TEST(TimingGemm, ExposedShareOfTheCStoreFollowsTheMaximum) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 64;
  const GemmShape g{4096, 4096, 512, 1};
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 25.1870e-6, 1e-10);
  HardwareSpec off = h;
  h.efficiency.gemm_c_write_exposed = 0.5;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 31.0789e-6, 1e-10);
  const GemmShape long_k{4096, 4096, 4096, 1};
  EXPECT_NEAR(gemm_time(long_k, DType::kBf16, h) - gemm_time(long_k, DType::kBf16, off), 5.8919e-6, 1e-10);
  h.efficiency.gemm_c_write_exposed = 1.0;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 36.9708e-6, 1e-10);
  // An accumulating C (4 or 8 B) keeps its own rule.
  GemmShape acc = g;
  acc.c_bytes = 8.0;
  EXPECT_DOUBLE_EQ(gemm_time(acc, DType::kBf16, h), gemm_time(acc, DType::kBf16, off));
}

// The router's input gradient adds into the tokens' dX (C read and written): its dgrad shape
// carries c_bytes 4, its forward and weight gradient do not; other GEMMs' dgrads write once.
TEST(TimingGemm, RouterInputGradientAccumulates) {
  const GemmShape r = moe_router_shape(8192, 4096, 8);
  EXPECT_EQ(r.c_bytes, 2.0);
  EXPECT_EQ(dgrad_shape(r).c_bytes, 4.0);
  EXPECT_EQ(dgrad_shape(r).m, 8192);
  EXPECT_EQ(dgrad_shape(r).n, 4096);
  EXPECT_EQ(dgrad_shape(r).k, 8);
  EXPECT_EQ(wgrad_shape(r).c_bytes, r.grad_c_bytes);
  EXPECT_EQ(dgrad_shape(moe_fc2_shape(4096, 4096, 14336, 8)).c_bytes, 2.0);
}

// SM fill: 512 x 512 x 4096 has 4 x 2 = 8 output tiles of 128 x 256 for 132 SMs; with g = 0.5
// its efficiency is x sqrt(8 / 132) = 0.246183, so the time is 1 / 0.246183 = 4.06202 x that
// without the term. 8192^3 has 64 x 32 = 2048 tiles: unchanged.
TEST(TimingGemm, FewTilesLeaveSmsIdle) {
  HardwareSpec h = hw;
  const GemmShape small{512, 512, 4096, 1}, big{8192, 8192, 8192, 1};
  const double t_small = gemm_time(small, DType::kBf16, h), t_big = gemm_time(big, DType::kBf16, h);
  h.efficiency.gemm_sm_fill_exponent = 0.5;
  EXPECT_NEAR(gemm_time(small, DType::kBf16, h) / t_small, 4.06202, 1e-5);
  EXPECT_DOUBLE_EQ(gemm_time(big, DType::kBf16, h), t_big);
}

// A grouped GEMM of 16 experts, m = 8192 tokens, n = 4096, k = 2048, p = 2 (hand values of one
// expert's sqrt(t_c^2 + t_m^2), t_c as above with edge tiles of 128 rows):
//   512 rows:    t_c 12.7873 us, t_m  8.1014 us -> 15.1376 us; x 16 = 242.201 us (balanced);
//   1433.6 rows: t_c 35.6217 us (edge 1433.6 / 1536), t_m 12.0784 us -> 37.6137 us;
//   204.8 rows:  t_c  7.4592 us (edge 204.8 / 256),   t_m  6.7757 us -> 10.0772 us.
// Loads 7:1 (4 experts x 7, 12 x 1 of 40 shares): 4 x 37.6137 + 12 x 10.0772 = 271.382 us, 12%
// above the even split, which equal loads reproduce to float rounding.
TEST(TimingGemm, GroupedGemmPricesEachExpertsLoad) {
  HardwareSpec h = hw;
  h.efficiency.gemm_roofline_exponent = 2;
  GemmShape g{8192, 4096, 2048, 16};
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 242.201e-6, 1e-9);
  g.loads = expert_load_shares(std::vector<double>(16, 3.0));
  EXPECT_FALSE(g.loads.even());
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 242.201e-6, 1e-9);
  std::vector<double> loads(16, 1.0);
  for (int e : {2, 5, 9, 14}) loads[static_cast<size_t>(e)] = 7.0;  // order does not matter
  g.loads = expert_load_shares(loads);
  EXPECT_FLOAT_EQ(g.loads.share[0], 7.0f / 40);
  EXPECT_FLOAT_EQ(g.loads.share[15], 1.0f / 40);
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 271.382e-6, 1e-9);
  // The weight gradient splits k by the same loads: dW of the experts = 4 GEMMs of
  // 2048 x 4096 x 1433.6 and 12 of 2048 x 4096 x 204.8.
  const GemmShape w = wgrad_shape(g);
  EXPECT_TRUE(w.split_k);
  EXPECT_EQ(w.loads, g.loads);
  // Fixed time per kernel: one per expert either way.
  h.efficiency.kernel_fixed = 5e-6;
  EXPECT_NEAR(gemm_time(g, DType::kBf16, h), 271.382e-6 + 16 * 5e-6, 1e-9);
}

// The fixed times of a grouped GEMM of 16 experts: the first GEMM pays kernel_fixed (5 us),
// each of the 15 queued behind it grouped_gemm_fixed (3 us): 5 + 45 = 50 us on top of the same
// compute time as above; a one-GEMM op pays kernel_fixed only, and 0 falls back to it.
TEST(TimingGemm, GroupedGemmQueuedKernelsPayTheBackToBackFixedTime) {
  HardwareSpec h = hw;
  h.efficiency.kernel_fixed = 5e-6;
  const GemmShape g{16 * 512, 4096, 4096, 16};
  const double with_kernel_fixed = gemm_time(g, DType::kBf16, h);
  h.efficiency.grouped_gemm_fixed = 3e-6;
  EXPECT_NEAR(with_kernel_fixed - gemm_time(g, DType::kBf16, h), 15 * 2e-6, 1e-12);
  const GemmShape one{512, 4096, 4096, 1};
  HardwareSpec off = h;
  off.efficiency.grouped_gemm_fixed = 0;
  EXPECT_DOUBLE_EQ(gemm_time(one, DType::kBf16, h), gemm_time(one, DType::kBf16, off));
  // Its weight gradient (groups split k) pays the same: 5 + 15 x 3 us.
  const GemmShape w = wgrad_shape(g);
  EXPECT_NEAR(gemm_time(w, DType::kBf16, off) - gemm_time(w, DType::kBf16, h), 15 * 2e-6, 1e-12);
}

// A copy of 1 MiB: 1 048 576 B / 2.8475e12 = 0.368244 us plus memory_fixed (4 us), or
// kernel_fixed (5 us) where memory_fixed is 0.
TEST(TimingMemory, CopyHasItsOwnFixedTime) {
  HardwareSpec h = hw;
  h.efficiency.kernel_fixed = 5e-6;
  const MemoryShape copy{.bytes = 1048576.0, .copy = true};
  EXPECT_NEAR(memory_time(copy, h), 5.368244e-6, 1e-11);
  h.efficiency.memory_fixed = 4e-6;
  EXPECT_NEAR(memory_time(copy, h), 4.368244e-6, 1e-11);
  EXPECT_NEAR(gemm_time(GemmShape{8192, 8192, 8192, 1}, DType::kBf16, h) - 5e-6,
              gemm_time(GemmShape{8192, 8192, 8192, 1}, DType::kBf16, hw), 1e-12);
}

// A step's elementwise kernel streams at hbm_elementwise, a copy at hbm (session 23's split).
// 1 MiB at 3.35e12 x 0.70 = 2.345e12 B/s: 0.447154 us; at 0.85 (the copy): 0.368244 us; each
// plus memory_fixed (4 us). The copy rate does not move the kernel, nor the kernel rate the copy.
TEST(TimingMemory, ElementwiseKernelsRunAtTheirOwnRate) {
  HardwareSpec h = hw;
  h.efficiency.memory_fixed = 4e-6;
  h.efficiency.hbm_elementwise = 0.70;
  const MemoryShape kernel{.bytes = 1048576.0};
  const MemoryShape copy{.bytes = 1048576.0, .copy = true};
  EXPECT_NEAR(memory_time(kernel, h), 4.447154e-6, 1e-11);
  EXPECT_NEAR(memory_time(copy, h), 4.368244e-6, 1e-11);
  HardwareSpec faster_copies = h;
  faster_copies.efficiency.hbm = 0.95;
  EXPECT_DOUBLE_EQ(memory_time(kernel, faster_copies), memory_time(kernel, h));
  HardwareSpec faster_kernels = h;
  faster_kernels.efficiency.hbm_elementwise = 0.95;
  EXPECT_DOUBLE_EQ(memory_time(copy, faster_kernels), memory_time(copy, h));
  // The schedule's memory-bound ops are kernels: op_time prices them at hbm_elementwise (the
  // hand value above), and a copy op at hbm.
  Op op;
  op.kind = OpKind::kMemoryBound;
  op.mem = kernel;
  EXPECT_NEAR(op_time(op, MeshTopology{}, h), 4.447154e-6, 1e-11);
  op.mem = copy;
  EXPECT_NEAR(op_time(op, MeshTopology{}, h), 4.368244e-6, 1e-11);
}

// Causal attention forward, b 1, s 4096, 8 heads, d 128: 4 x 8 x 4096^2 x 128 x 0.5 = 34.36
// GFLOP at 0.65 x 2048 / (2048 + 512) = 0.52 of 989.4 TFLOP/s: t = 66.7843 us. 8 x 32 = 256
// CTAs of 128 query rows; the longest attends all 4096 keys: 128 x 4096 of the 8 x 4096 x
// 2048 scores, on one of 132 SMs: 66.7843 x 132 x 128 / 16384 = 68.8713 us. Tail 0.5:
// 66.7843 + 34.4357 = 101.2200 us. One head of 128 tokens is one CTA doing all the work on
// one SM, at 1/132 of the GPU-wide rate: the makespan is that CTA, 132x the even time.
TEST(TimingAttention, FewCtasLeaveATail) {
  HardwareSpec h = hw;
  const AttentionShape a{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  const double flops = 4.0 * 8 * 4096.0 * 4096.0 * 128 * 0.5;
  EXPECT_NEAR(attention_time(a, flops, false, h), 66.7843e-6, 1e-10);
  h.efficiency.attention_cta_tail = 0.5;
  EXPECT_NEAR(attention_time(a, flops, false, h), 101.2200e-6, 1e-10);
  const AttentionShape one{1, 128, 128, 1, 1, 128, 128, true, 0.5};
  const double f1 = 4.0 * 128 * 128 * 128 * 0.5;
  h.efficiency.attention_cta_tail = 0;
  const double even = attention_time(one, f1, false, h);
  h.efficiency.attention_cta_tail = 0.5;
  EXPECT_NEAR(attention_time(one, f1, false, h), 132 * even, 1e-15);
}

// FlashAttention-2 (hand-derived): its own fractions and half-point, no head-dimension curve.
// Non-causal 1 x 4096 x 8 heads, d 128: forward 0.4 x 4096 / (4096 + 256) = 0.376471 of
// 989.4 TFLOP/s for 4 x 8 x 4096^2 x 128 = 68.719e9 FLOPs: 184.492 us; backward at 0.3 x
// 4096 / 4352 = 0.282353 (2.5x the FLOPs): 614.972 us. At d 64 (half the FLOPs) it is half the
// time, where the fused kernel's curve (h 50: 64/114 over 128/178 = 0.7807) slows d 64 down.
// `hw` with FlashAttention-2 fractions 0.4 / 0.3 and half-point 256 tokens.
HardwareSpec with_flash2_terms() {
  HardwareSpec h = hw;
  h.efficiency.attention_flash2_fwd = 0.4;
  h.efficiency.attention_flash2_bwd = 0.3;
  h.efficiency.attention_flash2_seq_half = 256;
  return h;
}

TEST(TimingAttention, FlashAttention2TakesItsOwnFractions) {
  HardwareSpec h = with_flash2_terms();
  h.efficiency.attention_head_dim_half = 50;
  AttentionShape a{1, 4096, 4096, 8, 8, 128, 128, false, 1.0};
  a.flash2 = true;
  const double flops = 4.0 * 8 * 4096.0 * 4096.0 * 128;
  EXPECT_NEAR(attention_time(a, flops, false, h), flops / (989.4e12 * 0.4 * 4096.0 / 4352.0), 1e-12);
  EXPECT_NEAR(attention_time(a, flops, false, h), 184.492e-6, 1e-9);
  EXPECT_NEAR(attention_time(a, kAttentionBackwardFlopFactor * flops, true, h), 614.972e-6, 1e-9);
  AttentionShape d64 = a;
  d64.head_dim_qk = d64.head_dim_v = 64;
  EXPECT_NEAR(attention_time(d64, flops / 2, false, h), 0.5 * attention_time(a, flops, false, h), 1e-15);
  d64.flash2 = false;  // the fused kernel: its own fraction and the head-dimension curve
  const double fused = (flops / 2) / (989.4e12 * 0.65 * 4096.0 / 4608.0 * (64.0 / 114.0) / (128.0 / 178.0));
  EXPECT_NEAR(attention_time(d64, flops / 2, false, h), fused, 1e-12);
}

// FlashAttention-2's head-dim rule (hand-derived, session 39): every head dim but 128 runs at
// attention_flash2_other_head_dim of d 128's efficiency, both passes, in 32-wide kernels, and the
// fused kernel's backward wide-dim exponent does not apply. With the factor 0.88, the shape
// above at d 64 (half the FLOPs) takes 0.5 / 0.88 = 0.568182 of d 128's time; d 96 (0.75 of the
// FLOPs, no padding to 128) 0.75 / 0.88 = 0.852273; the d-192 backward (1.5x the FLOPs) 1.5 /
// 0.88 = 1.704545 of d 128's backward, where exponent 1.5 on the fused kernel would have given
// 1.5 / (128 / 192)^1.5 = 2.755676. The fused kernel pads d 96 to 128 (its time: d 128's).
TEST(TimingAttention, FlashAttention2HeadDimRule) {
  HardwareSpec h = with_flash2_terms();
  h.efficiency.attention_flash2_other_head_dim = 0.88;
  h.efficiency.attention_head_dim_half = 0;
  h.efficiency.attention_bwd_wide_dim_exponent = 1.5;
  h.efficiency.kernel_fixed = 0;
  h.efficiency.attention_cta_tail = 0;
  h.efficiency.attention_l2_miss_slowdown = 0;
  auto shape = [](int64_t d, bool flash2) {
    AttentionShape a{1, 4096, 4096, 8, 8, d, d, false, 1.0};
    a.flash2 = flash2;
    return a;
  };
  const double flops = 4.0 * 8 * 4096.0 * 4096.0 * 128;  // at d 128
  const double f128 = attention_time(shape(128, true), flops, false, h);
  const double b128 = attention_time(shape(128, true), 2.5 * flops, true, h);
  EXPECT_NEAR(attention_time(shape(64, true), flops * 0.5, false, h) / f128, 0.568182, 1e-6);
  EXPECT_NEAR(attention_time(shape(96, true), flops * 0.75, false, h) / f128, 0.852273, 1e-6);
  EXPECT_NEAR(attention_time(shape(192, true), 2.5 * flops * 1.5, true, h) / b128, 1.704545, 1e-6);
  const double fused128 = attention_time(shape(128, false), 2.5 * flops, true, h);
  EXPECT_NEAR(attention_time(shape(192, false), 2.5 * flops * 1.5, true, h) / fused128, 2.755676, 1e-6);
  EXPECT_NEAR(attention_time(shape(96, false), flops * 0.75, false, h),
              attention_time(shape(128, false), flops, false, h), 1e-15);
}

// Forward beyond L2 (50 MiB): one KV head's K and V are W = 2 x s x 256 B at d 128. With
// slowdown 0.2 and the ramp from 0.5 to 1.5 x L2: s = 262144 (W = 128 MiB = 2.56 x L2) misses
// fully, 1.2 x the compute time 5.630e14 FLOP / (989.4e12 x 0.65 x 131072 / 131584) = 0.878775 s
// = 1.054530 s; s = 98304 (48 MiB, 0.96 x L2): miss (0.96 - 0.5) / 1 = 0.46, 1.092 x 0.124379 =
// 0.135822 s; s = 65536 (0.64 x L2): miss 0.14, 1.028 x 0.055565 = 0.057120 s; s = 16384
// (0.16 x L2) and every backward: compute alone. The term does not depend on the HBM bandwidth
// (the H100 and the H200 lose the same share), and slowdown 0 turns it off.
TEST(TimingAttention, ForwardBeyondL2SlowsByAShare) {
  HardwareSpec h = hw;
  h.efficiency.attention_l2_miss_slowdown = 0.2;
  h.efficiency.attention_l2_miss_start = 0.5;
  h.efficiency.attention_l2_miss_full = 1.5;
  auto time = [&](int64_t s, bool bwd, const HardwareSpec& x) {
    const AttentionShape a{1, s, s, 32, 8, 128, 128, true, 0.5};
    const double flops = 4.0 * 32 * static_cast<double>(s) * static_cast<double>(s) * 128 * 0.5;
    return attention_time(a, bwd ? 2.5 * flops : flops, bwd, x);
  };
  auto compute = [](double s, double eff) { return 4.0 * 32 * s * s * 128 * 0.5 / (989.4e12 * eff * (s / 2) / (s / 2 + 512)); };
  EXPECT_NEAR(time(262144, false, h), 1.054530, 1e-6);
  EXPECT_NEAR(time(98304, false, h), 0.135822, 1e-6);
  EXPECT_NEAR(time(65536, false, h), 0.057120, 1e-6);
  EXPECT_NEAR(time(16384, false, h), compute(16384, 0.65), 1e-12);
  EXPECT_NEAR(time(262144, true, h), 2.5 * compute(262144, 0.5), 1e-9);
  HardwareSpec slow_hbm = h;
  slow_hbm.gpu.hbm_bw *= 0.5;
  EXPECT_DOUBLE_EQ(time(262144, false, slow_hbm), time(262144, false, h));
  HardwareSpec off = h;
  off.efficiency.attention_l2_miss_slowdown = 0;
  EXPECT_NEAR(time(262144, false, off), compute(262144, 0.65), 1e-9);
  // Under the CP ring (8 ranks) each step's kernel streams one rank's KV block: 32768 keys x
  // 256 x 2 B = 16 MiB per head, below the ramp's start (25 MiB): no slowdown; the same op
  // priced over all 262144 keys (one kernel) slows by the full 20 %.
  AttentionShape ring{1, 32768, 262144, 32, 8, 128, 128, true, 0.5};
  const double ring_flops = 4.0 * 32 * 32768.0 * 262144.0 * 128 * 0.5;
  ring.kv_block = 32768;
  EXPECT_DOUBLE_EQ(attention_time(ring, ring_flops, false, h), attention_time(ring, ring_flops, false, off));
  ring.kv_block = 0;
  EXPECT_NEAR(attention_time(ring, ring_flops, false, h) - h.efficiency.kernel_fixed,
              1.2 * (attention_time(ring, ring_flops, false, off) - h.efficiency.kernel_fixed), 1e-12);
  // A ramp of zero width is a step at its start.
  HardwareSpec step = h;
  step.efficiency.attention_l2_miss_full = 0.5;
  EXPECT_NEAR(time(65536, false, step), 1.2 * compute(65536, 0.65), 1e-9);
}

// Attention dropout: one random number per score element the kernel computes, at its own rate.
// b 1, s 4096, 8 heads, causal: 8 x 4096^2 / 2 = 67,108,864 elements; at 1e12 per second
// forward that adds 67.1089 us to FewCtasLeaveATail's 66.7843 us (133.8932 us); at 2e12 backward
// 33.5544 us. Without the flag, or with a profile that has no rate, the time is unchanged. A
// CP-ring op adds each step's elements (the diagonal step's half block and the others' halves):
// the same elements as the op's s/n x s x 1/2.
TEST(TimingAttention, DropoutAddsItsRandomNumbers) {
  HardwareSpec h = hw;
  AttentionShape a{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  const double flops = 4.0 * 8 * 4096.0 * 4096.0 * 128 * 0.5;
  const double fwd = attention_time(a, flops, false, h),
               bwd = attention_time(a, kAttentionBackwardFlopFactor * flops, true, h);
  a.dropout = true;
  EXPECT_DOUBLE_EQ(attention_time(a, flops, false, h), fwd);  // no rate in the profile: priced free
  h.efficiency.attention_dropout_fwd_rate = 1e12;
  h.efficiency.attention_dropout_bwd_rate = 2e12;
  EXPECT_NEAR(attention_time(a, flops, false, h), 133.8932e-6, 1e-10);
  EXPECT_NEAR(attention_time(a, kAttentionBackwardFlopFactor * flops, true, h) - bwd, 33.5544e-6, 1e-10);
  a.dropout = false;
  EXPECT_DOUBLE_EQ(attention_time(a, flops, false, h), fwd);
  // Ring of 4 over 16384 tokens: 4096 queries x 16384 keys x 1/2 = 33,554,432 elements per head.
  AttentionShape ring{1, 4096, 16384, 8, 8, 128, 128, true, 0.5};
  ring.kv_block = 4096;
  const double ring_flops = 4.0 * 8 * 4096.0 * 16384.0 * 128 * 0.5;
  const double plain = attention_time(ring, ring_flops, false, h);
  ring.dropout = true;
  EXPECT_NEAR(attention_time(ring, ring_flops, false, h) - plain, 8 * 33554432.0 / 1e12, 1e-12);
}

// Unfused attention (hand-derived; ops.hpp unfused_attention_traffic): 8 heads of 1024 tokens,
// head dim 128, on HBM at 1 TB/s x 1.0 with a 5 us fixed time per memory-bound kernel. Forward:
// S = Q K^T and O = P V as GEMMs of 8 x 1024 stacked rows, the fused softmax's 4 B per score over
// 8 x 1024^2 scores (33,554,432 B) and the output permute (2 x 2 B x 8 x 1024 x 128 = 4,194,304 B):
// 37.748736 us + 2 kernels x 5 us. Backward: four GEMMs, 6 B per score (50,331,648 B) plus the
// permute: 54.525952 us + 10 us. The flops argument is not used: the kernels are.
TEST(TimingAttention, UnfusedAttentionIsItsKernels) {
  HardwareSpec h = hw;
  h.gpu.hbm_bw = 1e12;
  h.efficiency.hbm_elementwise = 1.0;
  h.efficiency.memory_fixed = 5e-6;
  AttentionShape a{1, 1024, 1024, 8, 8, 128, 128, true, 1.0};
  a.unfused = true;
  const auto g = [&](int64_t m, int64_t n, int64_t k) { return gemm_time(GemmShape{m, n, k}, DType::kBf16, h); };
  EXPECT_NEAR(attention_time(a, 1.0, false, h), g(8192, 1024, 128) + g(8192, 128, 1024) + 37.748736e-6 + 10e-6, 1e-12);
  EXPECT_NEAR(attention_time(a, 1.0, true, h),
              g(8192, 1024, 128) + g(8192, 128, 1024) + g(8192, 128, 1024) + g(8192, 128, 1024) + 54.525952e-6 + 10e-6,
              1e-12);
  Op op;
  op.kind = OpKind::kAttention;
  op.attn = a;
  EXPECT_EQ(host_kernels(op), 4);  // 2 GEMMs, the softmax, the permute
  // Past 4096 keys the torch fp32 softmax (4 kernels, 29 B forward / 33 B backward per score),
  // with dropout (5 B and one kernel more each way) and GQA (8 query heads on 2 KV heads: K and
  // V repeated: 2 B x 8192 x (8 + 2) heads read and written x (128 + 128) = 41,943,040 B, two kernels).
  AttentionShape l{1, 8192, 8192, 8, 2, 128, 128, true, 1.0};
  l.unfused = true;
  l.dropout = true;
  const double scores = 8.0 * 8192 * 8192, permute = 4.0 * 8 * 8192 * 128, repeat = 41943040.0;
  EXPECT_NEAR(attention_time(l, 1.0, false, h),
              g(65536, 8192, 128) + g(65536, 128, 8192) + (34.0 * scores + permute + repeat) / 1e12 + 8 * 5e-6, 1e-12);
  EXPECT_NEAR(attention_time(l, 1.0, true, h),
              g(65536, 8192, 128) + 3 * g(65536, 128, 8192) + (38.0 * scores + permute + repeat) / 1e12 + 8 * 5e-6,
              1e-12);
  op.attn = l;
  op.pass = Pass::kBwd;
  op.calls = 2;
  EXPECT_EQ(host_kernels(op), 2 * (4 + 8));
}

// The CP ring (hand-derived): a rank of a ring of 4 over 16384 tokens holds 4096 queries and
// runs 4 kernels on 4096-key blocks, 8 heads, d 128 (4096 FLOPs per pair): step 0 causal (4096
// x 4096 / 2 pairs, 2048 keys per query: 0.65 x 2048 / 2560 = 0.52 of the peak); the 3 others
// 4096 x 2048 pairs, unmasked, the slower of all queries over half the block (2048 keys: 0.52)
// and half the queries over the block (4096 keys: 0.65 x 4096 / 4608 = 0.5778), each with the
// fixed time. One kernel over all 16384 keys (8192 per query: 0.65 x 8192 / 8704) was faster.
TEST(TimingAttention, CpRingRunsOneKernelPerStep) {
  HardwareSpec h = hw;
  h.efficiency.kernel_fixed = 5e-6;
  AttentionShape a{1, 4096, 16384, 8, 8, 128, 128, true, 0.5};
  a.kv_block = 4096;
  const double pair = 2.0 * 8 * 256;
  const double total = pair * 4096.0 * 16384.0 * 0.5, step = pair * 4096.0 * 2048.0;
  const double expected = 4.0 * (step / (989.4e12 * 0.52) + 5e-6);
  EXPECT_NEAR(attention_time(a, total, false, h), expected, 1e-12);
  // The backward: the same steps at attention_bwd (0.5 x 2048 / 2560 = 0.4), 2.5x the FLOPs.
  EXPECT_NEAR(attention_time(a, 2.5 * total, true, h), 4.0 * (2.5 * step / (989.4e12 * 0.4) + 5e-6), 1e-12);
  a.kv_block = 0;
  EXPECT_NEAR(attention_time(a, total, false, h), total / (989.4e12 * 0.65 * 8192.0 / 8704.0) + 5e-6, 1e-12);
  // A ring of one block (kv_block = s_kv) is the one kernel.
  AttentionShape one{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  const double f1 = pair * 4096.0 * 4096.0 * 0.5;
  const double t1 = attention_time(one, f1, false, h);
  one.kv_block = 4096;
  EXPECT_DOUBLE_EQ(attention_time(one, f1, false, h), t1);
}

// Sliding-window attention (hand-derived): 1 x 4096 x 4096, 8 heads, d 128, window 512. A
// windowed layer does 512 x 4096 - 512^2 / 2 = 1966080 pairs (0.1171875 of s^2): a query row
// attends 480 keys on average, so the kernel runs at 0.65 x 480 / (480 + 512) of the peak, a
// causal layer at 0.65 x 2048 / 2560. An op whose layers are half windowed takes the mean of
// the two kernels' times, each with its fixed time.
TEST(TimingAttention, SlidingWindowMixesWindowedAndFullLayers) {
  HardwareSpec h = hw;
  h.efficiency.attention_cta_tail = 0;
  const double fixed = h.efficiency.kernel_fixed;
  AttentionShape a{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  const double f_full = 2.0 * 4096.0 * 4096.0 * 0.5 * 8 * 256, f_win = 2.0 * 1966080.0 * 8 * 256;
  const double t_full = f_full / (989.4e12 * 0.65 * 2048.0 / 2560.0) + fixed;
  const double t_win = f_win / (989.4e12 * 0.65 * 480.0 / 992.0) + fixed;
  EXPECT_NEAR(attention_time(a, f_full, false, h), t_full, 1e-15);
  a.window = 512;
  a.windowed_share = 1.0;
  EXPECT_NEAR(attention_time(a, f_win, false, h), t_win, 1e-15);
  a.windowed_share = 0.5;
  EXPECT_NEAR(attention_time(a, 0.5 * (f_full + f_win), false, h), 0.5 * (t_full + t_win), 1e-15);
  // The backward at 2.5x the FLOPs per pair: both populations at attention_bwd.
  const double b_full = 2.5 * f_full / (989.4e12 * 0.5 * 2048.0 / 2560.0) + fixed;
  const double b_win = 2.5 * f_win / (989.4e12 * 0.5 * 480.0 / 992.0) + fixed;
  EXPECT_NEAR(attention_time(a, 2.5 * 0.5 * (f_full + f_win), true, h), 0.5 * (b_full + b_win), 1e-15);
  // CTA tail of a windowed kernel: its longest CTA (128 queries) attends the window plus its own
  // block, 640 of 4096 keys; its share of one of 8 heads' work is 128 x 640 / (4096 x 480) / 8 =
  // 1 / 192, so on one of 132 SMs it takes 132 / 192 = 0.6875 of the even time: with a tail of
  // 0.5 the kernel takes 1.34375 x its even compute time.
  h.efficiency.attention_cta_tail = 0.5;
  a.windowed_share = 1.0;
  EXPECT_NEAR(attention_time(a, f_win, false, h), 1.34375 * (t_win - fixed) + fixed, 1e-15);
}

// The windowed kernel processes attention_window_extra E keys per row beyond its window (the
// key tiles its 128-query blocks touch): with E = 192 the shape above (window 512, s 4096) runs
// as the causal kernel over work 0.1171875 + 192 / 4096 = 0.1640625, kv = 672 keys per row, at
// 0.65 x 672 / (672 + 512) of the peak, for 0.1640625 / 0.1171875 = 1.4 x the op's FLOPs. A
// window that covers the sequence is the causal kernel, E or not. At s = 262144 (K/V of one
// head 128 MiB, past L2) a windowed forward does not stream K/V from HBM: its CTAs share the
// keys of the window in L2, so its time is compute alone.
TEST(TimingAttention, WindowedKernelProcessesExtraKeys) {
  HardwareSpec h = hw;
  h.efficiency.attention_cta_tail = 0;
  h.efficiency.attention_window_extra = 192;
  const double fixed = h.efficiency.kernel_fixed;
  AttentionShape a{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  a.window = 512;
  a.windowed_share = 1.0;
  const double f_win = 2.0 * 1966080.0 * 8 * 256, f_exec = 2.0 * 4096.0 * 4096.0 * 0.1640625 * 8 * 256;
  EXPECT_NEAR(attention_time(a, f_win, false, h), f_exec / (989.4e12 * 0.65 * 672.0 / 1184.0) + fixed, 1e-15);
  a.window = 4096;  // covers the sequence: the causal kernel
  const double f_full = 2.0 * 4096.0 * 4096.0 * 0.5 * 8 * 256;
  EXPECT_NEAR(attention_time(a, f_full, false, h), f_full / (989.4e12 * 0.65 * 2048.0 / 2560.0) + fixed, 1e-15);
  AttentionShape l{1, 262144, 262144, 32, 8, 128, 128, true, 0.5};
  l.window = 4096;
  l.windowed_share = 1.0;
  const double wf = (4096.0 * 262144.0 - 0.5 * 4096.0 * 4096.0) / (262144.0 * 262144.0) + 192.0 / 262144.0;
  const double fl = 2.0 * 262144.0 * 262144.0 * wf * 32 * 256;
  const double kv = 262144.0 * wf;
  EXPECT_NEAR(attention_time(l, attention_core_flops(l), false, h), fl / (989.4e12 * 0.65 * kv / (kv + 512)) + fixed, 1e-12);
}

// Head dims run in whole 64-wide tiles: d = 96 is priced as d = 128's kernel (its FLOPs x
// 128 / 96 at d 128's efficiency), so it takes exactly d 128's time; d = 64 and 128 are whole.
TEST(TimingAttention, HeadDimRunsInWholeTiles) {
  HardwareSpec h = hw;
  h.efficiency.attention_head_dim_half = 49.31;  // the H200 fit's curve, so d matters
  const AttentionShape d96{1, 4096, 4096, 8, 8, 96, 96, true, 0.5}, d128{1, 4096, 4096, 8, 8, 128, 128, true, 0.5};
  const double f96 = 4.0 * 8 * 4096.0 * 4096.0 * 96 * 0.5, f128 = f96 * 128.0 / 96.0;
  EXPECT_NEAR(attention_time(d96, f96, false, h), attention_time(d128, f128, false, h), 1e-15);
  EXPECT_NEAR(attention_time(d96, 2.5 * f96, true, h), attention_time(d128, 2.5 * f128, true, h), 1e-15);
  const AttentionShape d64{1, 4096, 4096, 8, 8, 64, 64, true, 0.5};
  const double f64 = f96 * 64.0 / 96.0;
  const double eff64 = 0.65 * 2048.0 / 2560.0 * (64.0 / 113.31) / (128.0 / 177.31);
  EXPECT_NEAR(attention_time(d64, f64, false, h), f64 / (989.4e12 * eff64) + h.efficiency.kernel_fixed, 1e-12);
}

// Ring all-reduce of 1 GiB over 8 GPUs: inside one node (NVLink) vs one GPU on each of 8
// nodes (NIC-bound). t = 2(n-1)·alpha + 2(n-1)/n · S / busbw.
TEST(TimingCollective, RingAllReduceNodeVsNodes) {
  const double S = 1024.0 * 1024 * 1024;
  const CollectiveShape ar{Collective::kAllReduce, CommDim::kDp, 8, S};
  const double nvl = 450e9 * 0.82 * S / (S + 8.0 * (1 << 20));
  const double nic = 50e9 * 0.92 * S / (S + 4.0 * (1 << 20));
  const double intra = 14 * 5e-6 + 2.0 * 7 / 8 * S / nvl;
  const double inter = 14 * 10e-6 + 2.0 * 7 / 8 * S / nic;
  EXPECT_NEAR(collective_time(ar, GroupTopology{8, 1, 8}, hw), intra, 1e-12);
  EXPECT_NEAR(collective_time(ar, GroupTopology{8, 8, 1}, hw), inter, 1e-12);
  EXPECT_GT(inter / intra, 7.0);  // 8x less bandwidth per GPU across nodes
  // 2 nodes x 8 GPUs: each node drives 8 NICs, so bandwidth is min(NVLink, 8 NICs).
  const CollectiveShape ar16{Collective::kAllReduce, CommDim::kDp, 16, S};
  const double bw16 = std::min(nvl, 8 * nic);
  EXPECT_NEAR(collective_time(ar16, GroupTopology{16, 2, 8}, hw), 30 * 10e-6 + 2.0 * 15 / 16 * S / bw16, 1e-12);
}

// NCCL's LL protocol (session 17): inside a node a ring collective takes the lesser of its
// Simple time and collective_base + steps x nvlink_ll_latency + bus bytes / (nvlink_bw x
// nvlink_ll). 256 KiB all-reduce on 8 GPUs, base 8 us, LL 0.2 x 450 = 90 GB/s, 0.6 us/step:
//   Simple: 8 + 14 x 5 + 1.75 x 262144 / (369e9 x 262144 / (262144 + 8 MiB)) = 119.1 us
//   LL:     8 + 14 x 0.6 + 1.75 x 262144 / 90e9                             =  21.5 us
// A 1 GiB all-reduce stays Simple (LL: 20.9 ms of bytes); across nodes, all-to-all and
// nvlink_ll = 0 keep the Simple time.
TEST(TimingCollective, SmallRingCollectiveTakesTheLlProtocol) {
  HardwareSpec h = hw;
  h.efficiency.collective_base = 8e-6;
  h.efficiency.nvlink_ll = 0.2;
  h.interconnect.nvlink_ll_latency = 0.6e-6;
  const double S = 262144;
  const GroupTopology node{8, 1, 8};
  const CollectiveShape ar{Collective::kAllReduce, CommDim::kTp, 8, S};
  EXPECT_NEAR(collective_time(ar, node, h), 8e-6 + 14 * 0.6e-6 + 1.75 * S / 90e9, 1e-12);
  EXPECT_NEAR(collective_time(ar, node, h), 21.5e-6, 0.1e-6);
  const double nvl = 450e9 * 0.82 * S / (S + 8.0 * (1 << 20));
  const double simple = 8e-6 + 14 * 5e-6 + 1.75 * S / nvl;
  // All-gather: n - 1 = 7 steps and 7/8 of S on the bus.
  const CollectiveShape ag{Collective::kAllGather, CommDim::kTp, 8, S};
  EXPECT_NEAR(collective_time(ag, node, h), 8e-6 + 7 * 0.6e-6 + 0.875 * S / 90e9, 1e-12);
  // Large: Simple.
  const double G = 1024.0 * 1024 * 1024;
  const CollectiveShape big{Collective::kAllReduce, CommDim::kDp, 8, G};
  EXPECT_NEAR(collective_time(big, node, h), 8e-6 + 14 * 5e-6 + 1.75 * G / (450e9 * 0.82 * G / (G + 8.0 * (1 << 20))), 1e-12);
  // Across nodes: the NIC ring, no LL alternative (no multi-node measurements).
  const double nic = 50e9 * 0.92 * S / (S + 4.0 * (1 << 20));
  EXPECT_NEAR(collective_time(ar, GroupTopology{8, 8, 1}, h), 8e-6 + 14 * 10e-6 + 1.75 * S / nic, 1e-12);
  // All-to-all keeps Simple.
  const CollectiveShape a2a{Collective::kAllToAll, CommDim::kEp, 8, S};
  EXPECT_NEAR(collective_time(a2a, node, h), 8e-6 + 5e-6 + S * 7 / 8 / nvl, 1e-12);
  // Off: the Simple time.
  h.efficiency.nvlink_ll = 0;
  EXPECT_NEAR(collective_time(ar, node, h), simple, 1e-12);
  EXPECT_NEAR(collective_time(ar, node, h), 119.1e-6, 0.1e-6);
}

// All-to-all of S bytes per rank over 16 ranks on 2 nodes: 7/16 of S over NVLink, 8/16
// through the rank's own NIC, concurrently; the NIC share dominates.
TEST(TimingCollective, AllToAllCrossingNodes) {
  const double S = 256.0 * 1024 * 1024;
  const CollectiveShape a2a{Collective::kAllToAll, CommDim::kEp, 16, S};
  const double nvl = 450e9 * 0.82 * S / (S + 8.0 * (1 << 20));
  const double nic = 50e9 * 0.92 * S / (S + 4.0 * (1 << 20));
  const double expected = 10e-6 + std::max(S * 7 / 16 / nvl, S * 8 / 16 / nic);
  EXPECT_NEAR(collective_time(a2a, GroupTopology{16, 2, 8}, hw), expected, 1e-12);
  const CollectiveShape a2a8{Collective::kAllToAll, CommDim::kEp, 8, S};
  EXPECT_NEAR(collective_time(a2a8, GroupTopology{8, 1, 8}, hw), 5e-6 + S * 7 / 8 / nvl, 1e-12);
}

// ---------------------------------------------------------------------------------
// Pipeline schedule and CP overlap on synthetic schedules whose op times are known:
// a memory-bound op of B bytes takes B / (3.35e12 · 0.85) s.
// ---------------------------------------------------------------------------------
constexpr double kHbm = 3.35e12 * 0.85;

Op mem(double seconds, Pass pass) {
  Op o;
  o.kind = OpKind::kMemoryBound;
  o.pass = pass;
  o.mem.bytes = seconds * kHbm;
  return o;
}

Scenario pipeline_scenario(int pp, int micro_batches) {
  Scenario s;
  s.hardware = hw;
  s.num_gpus = pp;
  s.training.global_batch_size = micro_batches;
  s.training.seq_length = 1024;
  s.parallel.pipeline_model_parallel_size = pp;
  return s;
}

Schedule uniform_schedule(int pp, int vp, int m, double f, double b) {
  Schedule sch;
  sch.num_micro_batches = m;
  sch.vp = vp;
  sch.dense.fwd = {mem(f, Pass::kFwd)};
  sch.dense.bwd = {mem(b, Pass::kBwd)};
  for (int r = 0; r < pp; ++r) {
    StageSchedule st;
    st.stage = r;
    st.dense = 1;
    sch.stages.push_back(st);
  }
  return sch;
}

TEST(StepTime, OneFOneBBubble) {
  // p = 4, m = 8, F = 1 ms, B = 2 ms: (m + p - 1)(F + B) = 33 ms, bubble (p-1)(F+B) = 9 ms.
  const Scenario s = pipeline_scenario(4, 8);
  Mesh m;
  m.world = 4;
  m.pp = 4;
  m.num_micro_batches = 8;
  const StepTime t = step_time(s, m, uniform_schedule(4, 1, 8, 1e-3, 2e-3), Flops{});
  EXPECT_NEAR(t.pipeline, 33e-3, 1e-9);
  EXPECT_NEAR(t.bubble, 9e-3, 1e-9);
  EXPECT_NEAR(t.bubble / t.pipeline, 3.0 / 11.0, 1e-9);  // (p-1)/(m+p-1)
}

TEST(StepTime, InterleavedBubbleShrinksByVp) {
  // Same work split into vp = 2 chunks per rank: bubble (p-1)(F+B)/vp = 4.5 ms.
  const Scenario s = pipeline_scenario(4, 8);
  Mesh m;
  m.world = 4;
  m.pp = 4;
  m.vp = 2;
  m.num_micro_batches = 8;
  const StepTime t = step_time(s, m, uniform_schedule(4, 2, 8, 1e-3, 2e-3), Flops{});
  EXPECT_NEAR(t.bubble, 4.5e-3, 1e-9);
  EXPECT_NEAR(t.pipeline, 24e-3 + 4.5e-3, 1e-9);
}

// CP ring: c-1 KV exchanges run under the attention core. With attention 2 ms and the
// ring 1.5 ms all of it hides; with a ring of 3 ms, 1 ms is exposed.
Op attention_op(double seconds) {
  Op a;
  a.id = OpId::kAttnCore;
  a.kind = OpKind::kAttention;
  a.attn.seq_kv = 3584;
  a.attn.work_fraction = 1.0;
  const double eff = 0.65 * 3584.0 / (3584.0 + 512.0);  // attention_seq_half = 512
  a.flops = seconds * 989.4e12 * eff;
  return a;
}

// A CP p2p of one neighbour inside a node: t = alpha + S / (peak · S/(S+half))
// = alpha + (S + half)/peak, so S = (t - alpha)·peak - half.
Op ring_op(double seconds) {
  Op r;
  r.id = OpId::kAttnCpKvP2p;
  r.kind = OpKind::kSendRecv;
  r.overlappable = true;
  r.coll = CollectiveShape{Collective::kSendRecv, CommDim::kCp, 2, 0};
  r.coll.message_bytes = (seconds - 5e-6) * 450e9 * 0.82 - 8.0 * (1 << 20);
  return r;
}

TEST(StepTime, CpRingHiddenVsExposed) {
  Scenario s = pipeline_scenario(1, 1);
  s.num_gpus = 2;
  s.parallel.context_parallel_size = 2;
  Mesh m;
  m.world = 2;
  m.cp = 2;  // the CP pair shares a node: the ring runs over NVLink
  m.num_micro_batches = 1;
  Schedule hidden = uniform_schedule(1, 1, 1, 0, 0), exposed = hidden;
  hidden.dense.fwd = {ring_op(1.5e-3), attention_op(2e-3)};
  exposed.dense.fwd = {ring_op(3e-3), attention_op(2e-3)};
  const StepTime th = step_time(s, m, hidden, Flops{});
  const StepTime te = step_time(s, m, exposed, Flops{});
  const size_t cp = static_cast<size_t>(CommDim::kCp);
  EXPECT_NEAR(th.step_s, 2e-3, 1e-9);
  EXPECT_NEAR(th.stages[0].hidden_comm[cp], 1.5e-3, 1e-9);
  EXPECT_NEAR(th.stages[0].exposed_comm[cp], 0.0, 1e-12);
  EXPECT_NEAR(te.step_s, 3e-3, 1e-9);
  EXPECT_NEAR(te.stages[0].exposed_comm[cp], 1e-3, 1e-9);
}

}  // namespace
}  // namespace lcm
