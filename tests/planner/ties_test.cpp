// Error-band ties of the planner (plan::rank_ties, docs/planner.md "Ranking and
// explanations"): groups whose band overlaps the fastest's are ties, ordered by the high
// end of their band; the others keep their step-time order. Hand-derived on synthetic groups.
#include <cmath>

#include <gtest/gtest.h>

#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {
namespace {

// A group whose whole step is GEMM compute or exposed TP communication.
Ranked group(int tp, double step_s, bool comm) {
  Ranked r;
  r.layout.tp = tp;
  r.metrics.step_s = step_s;
  if (comm) r.metrics.exposed_comm[static_cast<size_t>(CommDim::kTp)] = step_s;
  else r.metrics.compute[static_cast<size_t>(OpClass::kGemm)] = step_s;
  return r;
}

TEST(RankTies, OverlappingBandsAreTiesRankedByTheirHighEnd) {
  Scenario base;
  OpUncertainty& u = base.hardware.uncertainty;
  u.present = true;  // GEMMs exact; communication ln-band [-0.5, 0.5]
  u.nvlink = u.nic = RelativeBand{std::expm1(-0.5), std::expm1(0.5)};
  // Composition (stored, session 40: -4.59% .. +10.77%): m_c = 0.0276495, s_c = 0.0746363.
  //  all comm: s = sqrt(0.25 + s_c^2) = 0.5055399, band [-0.3799098, +0.7043595]
  //  all GEMM: band [-0.0459, +0.1077]
  //  A 1.00 s, comm: 0.6201 .. 1.7044 s   (the fastest: ties are against its high end 1.7044)
  //  E 1.02 s, comm: 0.6325 .. 1.7384 s   tie
  //  B 1.05 s, GEMM: 1.0018 .. 1.1631 s   tie
  //  D 1.78 s, GEMM: 1.6983 .. 1.9717 s   tie (1.6983 <= 1.7044)
  //  C 2.15 s, GEMM: 2.0513 .. 2.3816 s   not a tie
  std::vector<Ranked> ranked{group(1, 1.00, true), group(16, 1.02, true), group(2, 1.05, false), group(4, 1.78, false),
                             group(8, 2.15, false)};
  EXPECT_EQ(rank_ties(ranked, base), 4);
  // A stays #1; the other ties by the band's high end: B (1.1631) before E (1.7384), though
  // E is faster, then D (1.9717); then C.
  ASSERT_EQ(ranked.size(), 5u);
  EXPECT_EQ(ranked[0].layout.tp, 1);
  EXPECT_EQ(ranked[1].layout.tp, 2);
  EXPECT_EQ(ranked[2].layout.tp, 16);
  EXPECT_EQ(ranked[3].layout.tp, 4);
  EXPECT_EQ(ranked[4].layout.tp, 8);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ranked[static_cast<size_t>(i)].tie) << i;
  EXPECT_FALSE(ranked[4].tie);
  EXPECT_NEAR(ranked[0].band.low, -0.3799098, 1e-6);
  EXPECT_NEAR(ranked[0].band.high, 0.7043595, 1e-6);
  EXPECT_NEAR(ranked[1].band.high, 0.1077, 1e-12);
}

TEST(RankTies, ABandThatStartsAboveTheFastestsIsNoTie) {
  Scenario base;  // no op residuals: every band is the composition spread, -4.59% .. +10.77%
  // Fastest 1 s: high end 1.1077 s. 1.16 s starts at 1.16 x 0.9541 = 1.106756 s: a tie; 1.17 s
  // starts at 1.116297 s: not.
  std::vector<Ranked> ranked{group(1, 1.00, false), group(2, 1.16, false), group(4, 1.17, false)};
  EXPECT_EQ(rank_ties(ranked, base), 2);
  EXPECT_TRUE(ranked[1].tie);
  EXPECT_FALSE(ranked[2].tie);
  // With equal relative bands the high end orders like the step time: the order is kept.
  EXPECT_EQ(ranked[0].layout.tp, 1);
  EXPECT_EQ(ranked[1].layout.tp, 2);
}

}  // namespace
}  // namespace lcm::plan
