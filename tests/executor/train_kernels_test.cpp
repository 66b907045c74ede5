// Host tests of the training kernels' pieces that need no GPU: RoPE frequencies of each
// scaling against hand-derived values, the initialiser's statistics and its polynomial
// log / sin / cos, the CPU references against hand-worked small cases, every backward
// reference against central finite differences of its forward, and the comparison helper
// the GPU tests use (a planted error must fail it).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/reference.hpp"
#include "lcm/model/specs.hpp"
#include "train/init_normal.cuh"
#include "train_check.hpp"

namespace lcm::exec::train {
namespace {

using testing::compare;

// ---- RoPE frequencies -------------------------------------------------------------------
TEST(TrainRope, UnscaledIsBasePowers) {
  RopeParams p;  // base 10000
  float ms = 0;
  const std::vector<float> f = rope_inv_freq(p, 8, &ms);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.1f);  // 10000^(-2/8)
  EXPECT_FLOAT_EQ(f[2], 0.01f);
  EXPECT_FLOAT_EQ(f[3], 0.001f);
  EXPECT_EQ(ms, 1.0f);
}

TEST(TrainRope, LinearDividesEveryFrequency) {
  RopeParams p;
  p.type = 1;
  p.factor = 4;
  const std::vector<float> f = rope_inv_freq(p, 8, nullptr);
  EXPECT_FLOAT_EQ(f[0], 0.25f);
  EXPECT_FLOAT_EQ(f[3], 0.00025f);
}

// Llama 3.1: base 500000, head 128, factor 8, low 1, high 4, original 8192. Wavelength of
// pair i: 2 pi 500000^(i/64); high-frequency bound 8192/4 = 2048, low 8192/1 = 8192.
TEST(TrainRope, Llama3Factor8Head128) {
  RopeParams p;
  p.base = 500000;
  p.type = 2;
  p.factor = 8;
  p.original_max_position = 8192;
  const std::vector<float> f = rope_inv_freq(p, 128, nullptr);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);                      // wavelen 2 pi: kept
  EXPECT_FLOAT_EQ(f[28], 0.0032114459947525913f);   // wavelen 1956.5 < 2048: kept
  EXPECT_FLOAT_EQ(f[35], 0.0007644969883171747f / 8);  // wavelen 8218.7 > 8192: divided by 8
  // i = 32: f = 1/707.107, wavelen 4442.88, smooth = (8192/4442.88 - 1)/3 = 0.281290,
  // f ((1 - smooth)/8 + smooth) = 0.000524846.
  EXPECT_NEAR(f[32], 0.000524846161, 1e-9);
  EXPECT_NEAR(f[29], 0.002166570763, 1e-9);
  EXPECT_FLOAT_EQ(f[63], 3.068925988914511e-07f);
}

// DeepSeek-V3: rope dim 64, base 10000, factor 40, original 4096, beta_fast 32, beta_slow 1.
// Correction range: 64 ln(4096 / (32 2 pi)) / (2 ln 10000) = 10.47 -> 10, 64 ln(4096 / 2 pi) /
// (2 ln 10000) = 22.51 -> 23. Pairs <= 10 keep their frequency, >= 23 are divided by 40, in
// between the ramp (i - 10) / 13 mixes them.
TEST(TrainRope, YarnDeepSeekV3) {
  RopeParams p;
  p.type = 3;
  p.factor = 40;
  p.original_max_position = 4096;
  p.mscale = 1.0;
  p.mscale_all_dim = 1.0;
  float ms = 0;
  const std::vector<float> f = rope_inv_freq(p, 64, &ms);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[10], 0.056234132519034905f);  // 10^-1.25
  EXPECT_FLOAT_EQ(f[16], 0.0055f);                // 0.01 (6/13 / 40 + 7/13)
  EXPECT_FLOAT_EQ(f[23], 3.33380358040831e-05f);  // 10^-2.875 / 40
  EXPECT_FLOAT_EQ(f[31], 3.3338035804083097e-06f);
  EXPECT_FLOAT_EQ(ms, 1.0f);  // mscale / mscale_all_dim = 1
  p.mscale_all_dim = 0;       // Megatron's default: 0.1 ln 40 + 1
  rope_inv_freq(p, 64, &ms);
  EXPECT_FLOAT_EQ(ms, 1.3688879454113936f);
}

TEST(TrainRope, ParamsFromScenario) {
  RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 40;
  s.original_max_position_embeddings = 4096;
  const RopeParams p = rope_params(10000, s);
  EXPECT_EQ(p.type, 3);
  EXPECT_EQ(p.factor, 40);
  EXPECT_EQ(p.original_max_position, 4096);
  EXPECT_EQ(p.beta_fast, 32);
  EXPECT_EQ(p.beta_slow, 1);
  s.type = RopeScalingType::kLlama3;
  s.factor = 8;
  s.original_max_position_embeddings = 8192;
  const RopeParams q = rope_params(500000, s);
  EXPECT_EQ(q.type, 2);
  EXPECT_EQ(q.base, 500000);
  EXPECT_EQ(q.low_freq_factor, 1);
  EXPECT_EQ(q.high_freq_factor, 4);
  EXPECT_EQ(rope_params(10000, RopeScaling{}).type, 0);
  s.original_max_position_embeddings = 0;
  EXPECT_THROW(rope_params(10000, s), ExecError);
  s.type = RopeScalingType::kDynamicNtk;
  s.original_max_position_embeddings = 4096;
  EXPECT_THROW(rope_params(10000, s), ExecError);
}

// ---- initialiser -----------------------------------------------------------------------
TEST(TrainInit, PolynomialLogAndSinCosMatchLibm) {
  for (float u : {1.0f, 0.5f, 0.70710677f, 0.9999999f, 1e-7f, 5.9604645e-8f, 0.3f, 0.123456f}) {
    EXPECT_NEAR(detail::log_unit(u), std::log(static_cast<double>(u)), 2e-6 * std::fabs(std::log(u)) + 1e-7) << u;
  }
  for (int k = 0; k < 4096; ++k) {
    const float t = static_cast<float>(k * 4096 + 123) * 5.9604644775390625e-8f;
    float c, s;
    detail::sincos_turn(t, &c, &s);
    EXPECT_NEAR(c, std::cos(2 * std::numbers::pi * t), 2e-7) << t;
    EXPECT_NEAR(s, std::sin(2 * std::numbers::pi * t), 2e-7) << t;
  }
}

TEST(TrainInit, NormalStatistics) {
  const int64_t n = 400000;
  double sum = 0, sq = 0, quart = 0;
  int64_t within1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = init_value(1234, i, 1.0f, 0.0f);
    sum += v;
    sq += v * v;
    quart += v * v * v * v;
    within1 += std::fabs(v) < 1.0 ? 1 : 0;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(static_cast<double>(n)));  // 5 sigma
  EXPECT_NEAR(var, 1.0, 5.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(quart / n, 3.0, 0.05);  // kurtosis of a normal
  EXPECT_NEAR(static_cast<double>(within1) / n, 0.682689, 0.004);
}

TEST(TrainInit, DeterministicScaledAndConstant) {
  EXPECT_EQ(init_value(7, 12345, 0.02f, 0.0f), init_value(7, 12345, 0.02f, 0.0f));
  EXPECT_NE(init_value(7, 12345, 1.0f, 0.0f), init_value(8, 12345, 1.0f, 0.0f));
  EXPECT_NE(init_value(7, 12344, 1.0f, 0.0f), init_value(7, 12345, 1.0f, 0.0f));
  EXPECT_FLOAT_EQ(init_value(7, 99, 0.02f, 0.0f), 0.02f * init_value(7, 99, 1.0f, 0.0f));
  EXPECT_EQ(init_value(7, 99, 0.0f, 1.0f), 1.0f);  // norm weights
  EXPECT_EQ(init_value(7, 99, 0.0f, 0.0f), 0.0f);
}

// ---- references against hand-worked cases ----------------------------------------------
TEST(TrainReference, RmsNorm2x4) {
  const std::vector<float> x = {1, 2, 3, 4, 2, -2, 2, -2}, w = {1, 0.5f, 2, -1};
  std::vector<float> y(8), rstd(2);
  ref::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), 2, 4, 0.0f);
  const float r0 = 0.3651483716701107f;  // 1 / sqrt(30 / 4)
  EXPECT_FLOAT_EQ(rstd[0], r0);
  EXPECT_FLOAT_EQ(rstd[1], 0.5f);  // 1 / sqrt(16 / 4)
  const std::vector<float> want = {r0, r0, 6 * r0, -4 * r0, 1, -0.5f, 2, 1};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
  // Backward with dy = 0 on row 0 and 1 on row 1: dy w = [1, .5, 2, -1], mean(dy w x) = 7/4,
  // dx = 0.5 ([1, .5, 2, -1] - x 0.25 7/4) = [.0625, .6875, .5625, -.0625]; dw = x rstd = [1, -1, 1, -1].
  const std::vector<float> dy = {0, 0, 0, 0, 1, 1, 1, 1};
  std::vector<float> dx(8), dw = {10, 10, 10, 10};
  ref::rmsnorm_bwd(x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data(), 2, 4);
  const std::vector<float> wdx = {0, 0, 0, 0, 0.0625f, 0.6875f, 0.5625f, -0.0625f};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(dx[i], wdx[i], 1e-7) << i;
  const std::vector<float> wdw = {11, 9, 11, 9};  // accumulated onto 10
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(dw[i], wdw[i]) << i;
}

TEST(TrainReference, CrossEntropyKnownLogSumExp) {
  // Row 0: logits ln 1..4, sum of exp 10, label 2: loss ln(10/3), gradient (p - onehot) * 0.5.
  // Row 1: label -1: ignored. Padded columns 4, 5 (ld 6) get 0.
  const float l2 = std::log(2.0f), l3 = std::log(3.0f), l4 = std::log(4.0f);
  const std::vector<float> logits = {0, l2, l3, l4, 99, 99, 5, 1, 2, 3, 99, 99};
  const std::vector<int32_t> labels = {2, -1};
  std::vector<float> loss(2), g(12, 7.0f);
  ref::cross_entropy_fwd_bwd(logits.data(), labels.data(), loss.data(), g.data(), 2, 4, 6, 0.5f);
  EXPECT_NEAR(loss[0], 1.2039728043259361, 1e-6);
  EXPECT_EQ(loss[1], 0.0f);
  const std::vector<float> want = {0.05f, 0.1f, -0.35f, 0.2f, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(g[i], want[i], 1e-7) << i;
}

TEST(TrainReference, AdamWTwoStepsByHand) {
  // p = 1, lr 0.1, wd 0.1, b1 .9, b2 .95. Step 1 (g = .5): m = .05, v = .0125, m^ = .5,
  // sqrt(v^) = .5, p = 1 * 0.99 - 0.1 * 1 = 0.89 (to eps). Step 2 (g = -1): m = -.055,
  // v = .061875, m^ = -.289474, sqrt(v^) = .796628, p = .89 * .99 + .1 * .363374 = .9174374.
  AdamParams a;
  a.lr = 0.1f;
  a.weight_decay = 0.1f;
  float p = 1, model = 0, m = 0, v = 0, g = 0.5f;
  ref::adamw_step(&p, &model, &m, &v, &g, 1, a, nullptr);
  EXPECT_NEAR(p, 0.89f, 1e-6);
  EXPECT_NEAR(m, 0.05f, 1e-7);  // (1 - 0.9f) is 0.10000002 in float
  EXPECT_NEAR(v, 0.0125f, 1e-8);
  a.step = 2;
  g = -2.0f;
  const float half = 0.5f;  // the clip coefficient scales g to -1
  ref::adamw_step(&p, &model, &m, &v, &g, 1, a, &half);
  EXPECT_NEAR(p, 0.917437394591593, 2e-6);
  EXPECT_EQ(model, ref::bf16_round(p));
  EXPECT_EQ(model, 0.91796875f);  // bf16 neighbours: 0.9140625, 0.91796875
}

TEST(TrainReference, ClipCoefficient) {
  const double sumsq = 16;
  float scale = 0, norm = 0;
  ref::clip_coefficient(&sumsq, 1.0f, &scale, &norm);
  EXPECT_EQ(norm, 4.0f);
  EXPECT_FLOAT_EQ(scale, static_cast<float>(1.0 / (4.0 + 1e-6)));
  ref::clip_coefficient(&sumsq, 10.0f, &scale, &norm);
  EXPECT_EQ(scale, 1.0f);
  ref::clip_coefficient(&sumsq, 0.0f, &scale, &norm);  // no clipping configured
  EXPECT_EQ(scale, 1.0f);
}

TEST(TrainReference, SwigluRopeEmbeddingByHand) {
  // g = 1, u = 2: a = 2 sigmoid(1) = 1.46212; da = 1: dg = u s (1 + g (1 - s)) = 1.85534, du = silu(1).
  const std::vector<float> h = {1, 2};
  std::vector<float> a(1), dh(2);
  const std::vector<float> da = {1};
  ref::swiglu_fwd(h.data(), a.data(), 1, 1);
  EXPECT_NEAR(a[0], 1.4621171572600098, 1e-6);
  ref::swiglu_bwd(h.data(), da.data(), dh.data(), 1, 1);
  EXPECT_NEAR(dh[0], 1.8553410237429737, 1e-6);
  EXPECT_NEAR(dh[1], 0.7310585786300049, 1e-6);
  // RoPE: one head of 4 channels, rot_dim 2 (pair (0, 1)), position 1, frequency 1: (1, 0) -> (cos 1, sin 1).
  const std::vector<float> inv = {1.0f};
  std::vector<float> cs(2), sn(2);
  ref::rope_table(inv.data(), cs.data(), sn.data(), 2, 1, 1.0f);
  std::vector<float> x = {1, 0, 5, 6, 1, 0, 5, 6};  // rows 0 (position 0) and 1 (position 1)
  ref::rope_fwd(x.data(), cs.data(), sn.data(), 2, 2, 1, 4, 2);
  EXPECT_FLOAT_EQ(x[0], 1.0f);
  EXPECT_FLOAT_EQ(x[1], 0.0f);
  EXPECT_NEAR(x[4], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[5], std::sin(1.0), 1e-7);
  EXPECT_EQ(x[6], 5.0f);  // channels past rot_dim pass through
  ref::rope_bwd(x.data(), cs.data(), sn.data(), 2, 2, 1, 4, 2);  // the inverse rotation
  EXPECT_NEAR(x[4], 1.0, 1e-7);
  EXPECT_NEAR(x[5], 0.0, 1e-7);
  // Embedding: rows pick table rows; the backward adds dout rows (token 1 twice).
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};
  const std::vector<int32_t> tok = {1, 2, 1};
  std::vector<float> out(6), dt(6, 0.0f);
  ref::embedding_fwd(tok.data(), table.data(), out.data(), 3, 2);
  EXPECT_EQ(out, (std::vector<float>{10, 11, 20, 21, 10, 11}));
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
  ref::embedding_bwd(tok.data(), dout.data(), dt.data(), 3, 2);
  EXPECT_EQ(dt, (std::vector<float>{0, 0, 6, 8, 3, 4}));
}

// ---- finite differences of the references ---------------------------------------------
// L = sum_i R_i y_i(x) for fixed random R; the analytic gradient (the backward with dy = R)
// must match (L(x + h e_j) - L(x - h e_j)) / 2h for every input element j.
std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

template <class F>
double loss_of(const F& fwd, const std::vector<float>& r) {
  const std::vector<float> y = fwd();
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(r[i]) * y[i];
  return l;
}

// Central difference of L over each element of `in` (perturbed in place), vs `analytic`.
template <class F>
void expect_fd(std::vector<float>& in, const std::vector<float>& analytic, const F& fwd, const std::vector<float>& r,
               float h, double tol, const char* what) {
  ASSERT_EQ(in.size(), analytic.size()) << what;
  for (size_t j = 0; j < in.size(); ++j) {
    const float keep = in[j];
    in[j] = keep + h;
    const double lp = loss_of(fwd, r);
    in[j] = keep - h;
    const double lm = loss_of(fwd, r);
    in[j] = keep;
    const double fd = (lp - lm) / (2.0 * h);
    EXPECT_NEAR(analytic[j], fd, tol * (1 + std::fabs(fd))) << what << " element " << j;
  }
}

TEST(TrainReferenceGradients, RmsNorm) {
  const int64_t rows = 3, h = 5;
  std::vector<float> x = randn(rows * h, 1), w = randn(h, 2);
  const std::vector<float> r = randn(rows * h, 3);
  std::vector<float> y(rows * h), rstd(rows), dx(rows * h), dw(h, 0.0f);
  ref::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), rows, h, 1e-5f);
  ref::rmsnorm_bwd(x.data(), w.data(), rstd.data(), r.data(), dx.data(), dw.data(), rows, h);
  const auto fwd = [&] {
    std::vector<float> yy(rows * h), rs(rows);
    ref::rmsnorm_fwd(x.data(), w.data(), yy.data(), rs.data(), rows, h, 1e-5f);
    return yy;
  };
  expect_fd(x, dx, fwd, r, 1e-2f, 2e-3, "rmsnorm dx");
  expect_fd(w, dw, fwd, r, 1e-2f, 2e-3, "rmsnorm dw");
}

TEST(TrainReferenceGradients, Swiglu) {
  const int64_t rows = 3, f = 4;
  std::vector<float> hin = randn(rows * 2 * f, 4);
  const std::vector<float> r = randn(rows * f, 5);
  std::vector<float> dh(rows * 2 * f);
  ref::swiglu_bwd(hin.data(), r.data(), dh.data(), rows, f);
  const auto fwd = [&] {
    std::vector<float> a(rows * f);
    ref::swiglu_fwd(hin.data(), a.data(), rows, f);
    return a;
  };
  expect_fd(hin, dh, fwd, r, 1e-2f, 2e-3, "swiglu dh");
}

TEST(TrainReferenceGradients, Rope) {
  const int64_t rows = 4, seq = 2, heads = 2, hd = 6, rot = 4;
  const std::vector<float> inv = {1.0f, 0.3f};
  std::vector<float> cs(seq * 2), sn(seq * 2);
  ref::rope_table(inv.data(), cs.data(), sn.data(), seq, 2, 1.25f);  // mscale != 1
  std::vector<float> x = randn(rows * heads * hd, 6);
  const std::vector<float> r = randn(x.size(), 7);
  std::vector<float> dx = r;
  ref::rope_bwd(dx.data(), cs.data(), sn.data(), rows, seq, heads, hd, rot);
  const auto fwd = [&] {
    std::vector<float> y = x;
    ref::rope_fwd(y.data(), cs.data(), sn.data(), rows, seq, heads, hd, rot);
    return y;
  };
  expect_fd(x, dx, fwd, r, 1e-2f, 2e-3, "rope dx");
}

TEST(TrainReferenceGradients, CrossEntropy) {
  const int64_t rows = 3, vocab = 7, ld = 8;
  std::vector<float> logits = randn(rows * ld, 8, 2.0f);
  const std::vector<int32_t> labels = {3, -1, 6};
  std::vector<float> loss(rows), g(rows * ld);
  ref::cross_entropy_fwd_bwd(logits.data(), labels.data(), loss.data(), g.data(), rows, vocab, ld, 1.0f);
  const std::vector<float> r(rows, 1.0f);  // L = sum of the losses
  const auto fwd = [&] {
    std::vector<float> l(rows), gg(rows * ld);
    ref::cross_entropy_fwd_bwd(logits.data(), labels.data(), l.data(), gg.data(), rows, vocab, ld, 1.0f);
    return l;
  };
  expect_fd(logits, g, fwd, r, 1e-2f, 2e-3, "cross-entropy dlogits");
}

TEST(TrainReferenceGradients, Embedding) {
  const int64_t rows = 4, h = 3, vocab = 5;
  std::vector<float> table = randn(vocab * h, 9);
  const std::vector<int32_t> tok = {4, 0, 4, 2};
  const std::vector<float> r = randn(rows * h, 10);
  std::vector<float> dt(vocab * h, 0.0f);
  ref::embedding_bwd(tok.data(), r.data(), dt.data(), rows, h);
  const auto fwd = [&] {
    std::vector<float> y(rows * h);
    ref::embedding_fwd(tok.data(), table.data(), y.data(), rows, h);
    return y;
  };
  expect_fd(table, dt, fwd, r, 1e-2f, 2e-3, "embedding dtable");
}

// ---- the comparison helper bites ---------------------------------------------------------
TEST(TrainCheck, PlantedErrorFails) {
  const std::vector<float> ref = randn(1000, 11);
  std::vector<float> got(ref.size());
  ref::cast_to_bf16(ref.data(), got.data(), static_cast<int64_t>(ref.size()));
  EXPECT_TRUE(compare(got, ref, 1.0 / 256, 0).ok());  // bf16 rounding: within 2^-9 relative
  EXPECT_FALSE(compare(got, ref, 1.0 / 1024, 0).ok());  // but not within 2^-10 everywhere
  got[417] += 0.05f * (1 + std::fabs(got[417]));
  const testing::Check c = compare(got, ref, 1.0 / 256, 1e-3);
  EXPECT_EQ(c.failures, 1);
  EXPECT_EQ(c.worst, 417);
  got[417] = std::nanf("");
  EXPECT_FALSE(compare(got, ref, 1.0 / 256, 1e-3).ok());
}

TEST(TrainCheck, Bf16RoundingIsNearestEven) {
  EXPECT_EQ(ref::bf16_round(1.0f), 1.0f);
  EXPECT_EQ(ref::bf16_round(1.00390625f), 1.0f);         // halfway between 1 and 1 + 2^-7: to even
  EXPECT_EQ(ref::bf16_round(1.01171875f), 1.015625f);    // halfway, odd below: up
  EXPECT_EQ(ref::bf16_round(1.0040f), 1.0078125f);       // above halfway
  EXPECT_EQ(ref::bf16_round(-3.0f), -3.0f);
}

}  // namespace
}  // namespace lcm::exec::train
