// Host tests of `lcm-exec bench attention`: the FLOP convention, the shape syntax, the row
// sampling and the checker (a planted wrong value, a NaN and a norm error are found).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "lcm/executor/attention.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/options.hpp"

namespace lcm::exec {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "lcm-exec");
  return parse_args(static_cast<int>(args.size()), args.data());
}

TEST(Attention, FlopConventionIsFlashAttentions) {
  AttentionProblem p;
  p.b = 1;
  p.s = 16384;
  p.hq = 32;
  p.hkv = 8;
  p.d = 128;
  const double full = 4.0 * 16384.0 * 16384.0 * 32 * 128;
  EXPECT_DOUBLE_EQ(p.fwd_flops(), full / 2);  // causal
  EXPECT_DOUBLE_EQ(p.bwd_flops(), 2.5 * full / 2);
  p.causal = false;
  EXPECT_DOUBLE_EQ(p.fwd_flops(), full);
  EXPECT_EQ(p.group(), 4);
  EXPECT_FLOAT_EQ(p.softmax_scale(), 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(p.shape_text(), "1x16384x32x8x128");
  // BSHD: consecutive heads of one token are adjacent, then tokens.
  EXPECT_EQ(p.q_offset(0, 1, 0, 0), 128);
  EXPECT_EQ(p.q_offset(0, 0, 1, 0), 32 * 128);
  EXPECT_EQ(p.kv_offset(0, 0, 1, 0), 8 * 128);
  EXPECT_EQ(p.q_strides()[2], 32 * 128);
  p.hkv = 5;
  EXPECT_THROW(p.validate(), UsageError);
}

TEST(Attention, ShapesAndOptions) {
  const auto shapes = parse_attn_shapes("1x16Kx32x8x128,2x1000x4x4x64");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].shape.seq_q, 16384);
  EXPECT_EQ(shapes[0].shape.seq_kv, 16384);
  EXPECT_EQ(shapes[0].shape.heads_q, 32);
  EXPECT_EQ(shapes[0].shape.heads_kv, 8);
  EXPECT_EQ(shapes[0].shape.head_dim_qk, 128);
  EXPECT_EQ(shapes[0].shape.head_dim_v, 128);
  EXPECT_EQ(shapes[0].label, "gqa32/8.d128.s16k");
  EXPECT_EQ(shapes[1].shape.batch, 2);
  EXPECT_EQ(shapes[1].label, "mha4.d64.s1000.b2");
  EXPECT_THROW(parse_attn_shapes("1x4096x32x5x128"), UsageError);  // HQ not a multiple of HKV
  EXPECT_THROW(parse_attn_shapes("1x4096x32x8x100"), UsageError);  // D not a multiple of 8
  EXPECT_THROW(parse_attn_shapes("1x4096x32x8"), UsageError);
  const auto sweep = attn_sweep_shapes();
  ASSERT_EQ(sweep.size(), 12u);
  EXPECT_EQ(sweep.front().shape.seq_q, 4096);
  EXPECT_EQ(sweep[5].shape.seq_q, 131072);
  const Options o = parse({"bench", "attention", "--shapes", "1x2048x8x2x64", "--check", "full", "--scale", "0.5",
                           "--point-ms", "100", "--no-causal", "--algos", "3"});
  EXPECT_EQ(o.family, Family::kAttention);
  ASSERT_EQ(o.attn_points.size(), 1u);
  EXPECT_EQ(o.check, CheckMode::kFull);
  EXPECT_DOUBLE_EQ(o.attn_scale, 0.5);
  EXPECT_DOUBLE_EQ(o.point_ms, 100);
  EXPECT_FALSE(o.attn_points[0].shape.causal);
  EXPECT_DOUBLE_EQ(o.attn_points[0].shape.work_fraction, 1.0);
  // The problem the runner gets is the model's shape; its FLOPs are the model's.
  const AttentionProblem p = AttentionProblem::of(o.attn_points[0].shape, o.attn_scale);
  EXPECT_EQ(p.s, 2048);
  EXPECT_EQ(p.hkv, 2);
  EXPECT_FALSE(p.causal);
  EXPECT_FLOAT_EQ(p.softmax_scale(), 0.5f);
  EXPECT_DOUBLE_EQ(p.fwd_flops(), 4.0 * 2048 * 2048 * 8 * 64);  // 4 b s^2 h_q d, not causal
  EXPECT_EQ(o.algos, 3);
  EXPECT_EQ(parse({"bench", "attention"}).attn_points.size(), 12u);  // the sweep by default
  EXPECT_THROW(parse({"bench", "attention", "--check", "some"}), UsageError);
}

// --window W: every query attends the W keys before it. GPT-OSS's geometry at 4096 tokens,
// window 128: 128 x 4096 - 128^2 / 2 = 516096 pairs per head (the model's continuum count),
// 2 x 516096 x 64 heads x (64 + 64) FLOPs forward; the key and label carry the window, the
// problem the runner gets has it, and the model op it is scored against is windowed alone.
TEST(Attention, SlidingWindowOption) {
  const Options o = parse({"bench", "attention", "--shapes", "1x4096x64x8x64", "--window", "128"});
  ASSERT_EQ(o.attn_points.size(), 1u);
  EXPECT_EQ(o.attn_points[0].label, "gqa64/8.d64.s4k.w128");
  EXPECT_EQ(o.attn_points[0].shape.window, 128);
  EXPECT_DOUBLE_EQ(o.attn_points[0].shape.windowed_share, 1.0);
  const AttentionProblem p = AttentionProblem::of(o.attn_points[0].shape, 0);
  EXPECT_EQ(p.window, 128);
  EXPECT_EQ(p.shape_text(), "1x4096x64x8x64w128");
  EXPECT_DOUBLE_EQ(p.fwd_flops(), 2.0 * 516096.0 * 64 * 128);
  EXPECT_DOUBLE_EQ(p.bwd_flops(), 2.5 * 2.0 * 516096.0 * 64 * 128);
  EXPECT_EQ(p.shape().window, 128);
  EXPECT_THROW(parse({"bench", "attention", "--window", "-1"}), UsageError);
  EXPECT_THROW(parse({"bench", "attention", "--window", "128", "--no-causal"}), UsageError);
  EXPECT_THROW(parse({"bench", "cp-attention", "--window", "128"}), UsageError);
  // A schedule op that mixes windowed and full layers is not one kernel.
  AttentionShape mixed = o.attn_points[0].shape;
  mixed.windowed_share = 0.5;
  EXPECT_THROW(AttentionProblem::of(mixed, 0), UsageError);
}

TEST(Attention, SampleCoversWhatTheCheckNeeds) {
  AttentionProblem p;
  p.b = 2;
  p.s = 4096;
  p.hq = 8;
  p.hkv = 2;
  p.d = 64;
  const AttnSample full = attention_sample(p, true, 1);
  EXPECT_EQ(full.q_rows.size(), static_cast<size_t>(p.b * p.hq * p.s));
  EXPECT_EQ(full.kv_rows.size(), static_cast<size_t>(p.b * p.hkv * p.s));
  EXPECT_EQ(full.kv_first_query, 0);
  const AttnSample smp = attention_sample(p, false, 1);
  EXPECT_EQ(smp.q_rows.size(), static_cast<size_t>(p.b * p.hq * 16));
  EXPECT_EQ(smp.kv_rows.size(), static_cast<size_t>(p.b * p.hkv * 8));
  std::set<int> first_rows;
  for (const AttnRow& r : smp.q_rows)
    if (r.b == 1 && r.h == 7) first_rows.insert(r.i);
  EXPECT_TRUE(first_rows.count(0) && first_rows.count(1) && first_rows.count(4095));
  bool last_key = false;
  for (const AttnRow& r : smp.kv_rows) {
    EXPECT_GE(r.i, p.s - 128);
    EXPECT_LT(r.h, p.hkv);
    last_key |= r.i == p.s - 1;
  }
  EXPECT_TRUE(last_key);
  EXPECT_GE(smp.kv_first_query, p.s - 128);
  // Deterministic in the seed, different across seeds.
  const AttnSample again = attention_sample(p, false, 1), other = attention_sample(p, false, 2);
  EXPECT_EQ(again.q_rows[5].i, smp.q_rows[5].i);
  bool differs = false;
  for (size_t i = 0; i < smp.q_rows.size(); ++i) differs |= other.q_rows[i].i != smp.q_rows[i].i;
  EXPECT_TRUE(differs);
}

TEST(Attention, CheckerFindsPlantedErrorsAndNaN) {
  std::vector<float> ref(1000), mag(1000), got(1000);
  for (size_t i = 0; i < ref.size(); ++i) {
    ref[i] = std::sin(static_cast<float>(i)) * 0.3f;
    mag[i] = 0.5f;
    // A bf16-like rounding error: within tolerance.
    got[i] = ref[i] * (1.0f + 1.0f / 512.0f);
  }
  Comparison c = check_attention_values(got, ref, mag, 1e-2);
  EXPECT_EQ(c.checked, 1000);
  EXPECT_EQ(c.wrong, 0);
  EXPECT_TRUE(c.ok());
  EXPECT_LT(c.max_err_ratio, 1.0);
  got[17] = ref[17] + 0.1f;  // (0.3 + 0.5) / 128 < 0.1
  c = check_attention_values(got, ref, mag, 1e-2);
  EXPECT_EQ(c.wrong, 1);
  EXPECT_FALSE(c.ok());
  got[17] = std::numeric_limits<float>::quiet_NaN();
  c = check_attention_values(got, ref, mag, 1e-2);
  EXPECT_EQ(c.wrong, 1);
  EXPECT_FALSE(c.ok());
  // Every element inside its tolerance but a systematic error over the norm limit.
  for (size_t i = 0; i < ref.size(); ++i) got[i] = ref[i] * 1.02f;
  c = check_attention_values(got, ref, std::vector<float>(1000, 5.0f), 1e-2);
  EXPECT_EQ(c.wrong, 0);
  EXPECT_FALSE(c.ok());
  // An output with non-finite elements elsewhere fails even if the sampled ones match.
  c = check_attention_values(ref, ref, mag, 1e-2);
  c.nonfinite = 3;
  EXPECT_FALSE(c.ok());
  // LSE: 2e-3 x max(1, |ref|) per element, 2e-3 on the norm.
  std::vector<float> lse{0.5f, 10.0f, -3.0f}, lse_got{0.5015f, 10.015f, -3.0f};
  EXPECT_TRUE(check_attention_lse(lse_got, lse).ok());
  lse_got[1] = 10.03f;
  EXPECT_EQ(check_attention_lse(lse_got, lse).wrong, 1);
  // Merging keeps counts and the worst values.
  AttnCheckSet a, b;
  a[AttnOut::kDq] = check_attention_values(ref, ref, mag, 2e-2);
  a[AttnOut::kDq].nonfinite = 0;
  b[AttnOut::kDq] = check_attention_values(got, ref, mag, 2e-2);
  b[AttnOut::kDq].nonfinite = 2;
  a.merge(b);
  EXPECT_EQ(a[AttnOut::kDq].checked, 2000);
  EXPECT_EQ(a[AttnOut::kDq].nonfinite, 2);
  EXPECT_FALSE(a.bwd_ok());
  EXPECT_STREQ(to_string(AttnOut::kDk), "dK");
}

}  // namespace
}  // namespace lcm::exec
