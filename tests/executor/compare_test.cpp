// The one result comparer (compare.hpp): hand-made arrays with hand-computed tolerances,
// planted errors, non-finite values and the relative L2 bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lcm/executor/compare.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {
namespace {

TEST(Compare, ToleranceMixesRelativeMagnitudeAndAbsoluteTerms) {
  const Tolerance t{.rel = 0.25, .ref_floor = 0, .mag_rel = 0.5, .abs = 1.0};
  EXPECT_DOUBLE_EQ(t.at(8.0, 0.0), 3.0);    // 0.25 x 8 + 1
  EXPECT_DOUBLE_EQ(t.at(-8.0, 4.0), 5.0);   // 0.25 x |-8| + 0.5 x 4 + 1
  const Tolerance lse{.rel = 2e-3, .ref_floor = 1.0};
  EXPECT_DOUBLE_EQ(lse.at(0.1, 0.0), 2e-3);   // |ref| counts as 1
  EXPECT_DOUBLE_EQ(lse.at(-10.0, 0.0), 2e-2);
}

TEST(Compare, AcceptsErrorsWithinToleranceAndReportsTheWorst) {
  // Tolerance 2^-7 (|ref| + mag): 0.0625 for ref 4, mag 4; 0.015625 for ref 2, mag 0.
  const std::vector<float> ref{4.0f, 2.0f, -1.0f, 0.0f};
  const std::vector<float> mag{4.0f, 0.0f, 1.0f, 0.0f};
  const std::vector<float> got{4.05f, 2.0078125f, -1.0f, 0.0f};
  const Tolerance t{.rel = 1.0 / 128, .mag_rel = 1.0 / 128, .rel_l2_limit = 1e-2};
  const Comparison c = compare(got, ref, mag, t);
  EXPECT_EQ(c.checked, 4);
  EXPECT_EQ(c.wrong, 0);
  EXPECT_EQ(c.worst_index, 0);                       // 0.05 / 0.0625 = 0.8 beats 0.0078125 / 0.015625 = 0.5
  const double e0 = static_cast<double>(4.05f) - 4.0;  // 0.05 to 2e-7
  EXPECT_NEAR(c.max_err_ratio, e0 / 0.0625, 1e-12);
  EXPECT_FLOAT_EQ(static_cast<float>(c.worst_got), 4.05f);
  EXPECT_DOUBLE_EQ(c.worst_ref, 4.0);
  // ||err|| / ||ref||: sqrt(0.05^2 + 2^-14) / sqrt(16 + 4 + 1) = 0.0111.
  EXPECT_NEAR(c.rel_l2, std::sqrt((e0 * e0 + std::pow(2.0, -14)) / 21.0), 1e-12);
  EXPECT_FALSE(c.ok());  // every element passes, the L2 bound (1e-2) does not
  EXPECT_EQ(c.failures(), 1);
}

TEST(Compare, CatchesAPlantedError) {
  std::vector<float> ref(64), got(64);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = got[i] = static_cast<float>(i) - 20.0f;
  const Tolerance t{.rel = 1.0 / 128, .abs = 1e-6, .rel_l2_limit = 1e-2};
  EXPECT_TRUE(compare(got, ref, {}, t).ok());
  got[37] += 0.5f;  // ref 17: tolerance 17 / 128 = 0.133
  const Comparison c = compare(got, ref, {}, t);
  EXPECT_EQ(c.wrong, 1);
  EXPECT_EQ(c.worst_index, 37);
  EXPECT_NEAR(c.max_err_ratio, 0.5 / (17.0 / 128 + 1e-6), 1e-9);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.failures(), 1);
}

TEST(Compare, NonFiniteValuesFailAndAreTheWorst) {
  const std::vector<float> ref{1.0f, 2.0f, 3.0f};
  std::vector<float> got = ref;
  got[1] = std::numeric_limits<float>::quiet_NaN();
  got[2] = 3.5f;
  const Comparison c = compare(got, ref, {}, Tolerance{.rel = 1e-3});
  EXPECT_EQ(c.wrong, 2);
  EXPECT_EQ(c.worst_index, 1);
  EXPECT_TRUE(std::isinf(c.max_err_ratio));
  EXPECT_TRUE(std::isinf(c.rel_l2));
  EXPECT_FALSE(c.ok());
  // A scan that found non-finite values elsewhere fails the comparison on its own.
  Comparison scanned = compare(ref, ref, {}, Tolerance{.rel = 1e-3});
  EXPECT_TRUE(scanned.ok());
  scanned.nonfinite = 3;
  EXPECT_FALSE(scanned.ok());
  EXPECT_EQ(scanned.failures(), 3);
}

TEST(Compare, MergeAddsCountsAndKeepsTheWorst) {
  const std::vector<float> ref{1.0f, 1.0f};
  const Tolerance t{.rel = 0.5, .rel_l2_limit = 1.0};
  Comparison a = compare(std::vector<float>{1.25f, 1.0f}, ref, {}, t);  // ratio 0.5 at 0
  const Comparison b = compare(std::vector<float>{1.0f, 2.0f}, ref, {}, t);  // ratio 2 at 1
  a.merge(b);
  EXPECT_EQ(a.checked, 4);
  EXPECT_EQ(a.wrong, 1);
  EXPECT_DOUBLE_EQ(a.max_err_ratio, 2.0);
  EXPECT_EQ(a.worst_index, 1);
  EXPECT_DOUBLE_EQ(a.worst_got, 2.0);
  EXPECT_DOUBLE_EQ(a.rel_l2, std::sqrt(1.0 / 2.0));
  EXPECT_EQ(a.nonfinite, -1);  // neither was scanned
}

TEST(Compare, FromDeviceSums) {
  const Comparison c = Comparison::from_sums(100, 0, 0, 1e-6, 1.0, 2e-3);
  EXPECT_DOUBLE_EQ(c.rel_l2, 1e-3);
  EXPECT_TRUE(c.ok());
  EXPECT_FALSE(Comparison::from_sums(100, 0, 0, 1e-4, 0.0, 2e-3).ok());  // error against an all-zero reference
  EXPECT_EQ(Comparison::from_sums(100, 2, 1, 0, 1, 2e-3).failures(), 3);
}

TEST(Compare, SizeMismatchIsAnError) {
  const std::vector<float> a{1.0f, 2.0f}, b{1.0f};
  EXPECT_THROW(compare(a, b, {}, Tolerance{}), ExecError);
  EXPECT_THROW(compare(a, a, b, Tolerance{}), ExecError);
}

}  // namespace
}  // namespace lcm::exec
