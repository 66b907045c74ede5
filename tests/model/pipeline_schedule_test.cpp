// The pipeline schedule simulation (model/src/pipeline_schedule.cpp): Megatron-Core's 1F1B
// and interleaved 1F1B orders run pass by pass. Hand-derived small cases, the closed form it
// must reproduce with equal chunks (Narayanan et al. 2021, docs/time-model.md), and its lower
// bound (the planner prunes with it) on random chunk times.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "lcm/model/pipeline_schedule.hpp"

namespace lcm {
namespace {

// m x fb_max + (sum_r fb_r - fb_max) / vp over the ranks' summed chunks.
double closed_form(int pp, int vp, int m, const std::vector<ChunkPass>& c) {
  double max_fb = 0, sum_fb = 0;
  for (int r = 0; r < pp; ++r) {
    double fb = 0;
    for (int j = 0; j < vp; ++j) fb += c[static_cast<size_t>(r * vp + j)].fwd + c[static_cast<size_t>(r * vp + j)].bwd;
    max_fb = std::max(max_fb, fb);
    sum_fb += fb;
  }
  return m * max_fb + (sum_fb - max_fb) / vp;
}

// With every chunk alike (F 1 / vp, B 2 / vp per rank) the schedule is the closed form
// m (F + B) + (pp - 1)(F + B) / vp, for every pp, vp and micro-batch count Megatron accepts
// (interleaving: a multiple of pp; without it any m, fewer than pp included).
TEST(PipelineSchedule, EqualChunksGiveTheClosedForm) {
  int checked = 0;
  for (int pp : {1, 2, 3, 4, 8, 16})
    for (int vp : {1, 2, 3, 4, 8})
      for (int m = 1; m <= 64; ++m) {
        if (pp == 1 && vp > 1) continue;
        if (vp > 1 && m % pp != 0) continue;
        const std::vector<ChunkPass> c(static_cast<size_t>(pp * vp), {1.0 / vp, 2.0 / vp});
        const double expected = m * 3.0 + (pp - 1) * 3.0 / vp;
        ASSERT_NEAR(pipeline_makespan(pp, vp, m, c), expected, 1e-9) << "pp " << pp << " vp " << vp << " m " << m;
        ASSERT_NEAR(pipeline_makespan_lower_bound(pp, vp, m, c), expected, 1e-9);
        ++checked;
      }
  EXPECT_GT(checked, 500);
}

// So does every micro-batch group Megatron accepts (pp <= group <= m, m mod group 0 or >= pp):
// the group changes the order of the passes, not the equal-chunk makespan.
TEST(PipelineSchedule, EqualChunksWithAnyValidGroup) {
  int checked = 0;
  for (int pp : {2, 3, 4})
    for (int vp : {2, 3})
      for (int m = pp; m <= 24; ++m)
        for (int group = pp; group <= m; ++group) {
          if (m % group != 0 && m % group < pp) continue;
          const std::vector<ChunkPass> c(static_cast<size_t>(pp * vp), {1.0 / vp, 2.0 / vp});
          ASSERT_NEAR(pipeline_makespan(pp, vp, m, c, group), m * 3.0 + (pp - 1) * 3.0 / vp, 1e-9)
              << "pp " << pp << " vp " << vp << " m " << m << " group " << group;
          ++checked;
        }
  EXPECT_GT(checked, 300);
}

// One rank: its passes back to back.
TEST(PipelineSchedule, OneRankRunsItsPassesBackToBack) {
  const std::vector<ChunkPass> c = {{1.5, 2.5}};
  EXPECT_DOUBLE_EQ(pipeline_makespan(1, 1, 7, c), 28.0);
}

// 1F1B, pp 2, m 2; rank 0 F/B 1/2, rank 1 2/4. Rank 0 warms up one forward:
//   rank 0 F0 0-1, F1 1-2; rank 1 F0 1-3, B0 3-7, F1 7-9, B1 9-13;
//   rank 0 B0 7-9, B1 13-15: 15 (= the closed form 2 x 6 + 3).
TEST(PipelineSchedule, OneFOneBHandDerived) {
  const std::vector<ChunkPass> c = {{1, 2}, {2, 4}};
  EXPECT_DOUBLE_EQ(pipeline_makespan(2, 1, 2, c), 15.0);
  EXPECT_DOUBLE_EQ(closed_form(2, 1, 2, c), 15.0);
}

// A heavy stage in the middle: the ranks after it fill in under its warm-up forwards.
// pp 3, m 8, F/B 1/2, 3/6, 2/4: rank 1 starts at 1, runs 72, waits once for rank 2's first
// forward + backward (6) less its one warm-up forward (3), and rank 0's last backward (2)
// ends the step: 1 + 72 + 3 + 2 = 78, where the closed form says 81.
TEST(PipelineSchedule, HeavyMiddleStageHandDerived) {
  const std::vector<ChunkPass> c = {{1, 2}, {3, 6}, {2, 4}};
  EXPECT_DOUBLE_EQ(pipeline_makespan(3, 1, 8, c), 78.0);
  EXPECT_DOUBLE_EQ(closed_form(3, 1, 8, c), 81.0);
}

// Interleaved, pp 2, vp 2, m 2, F = B per chunk: rank 0 chunks 1, 2; rank 1 chunks 1, 2.
// Virtual stages s0 = rank 0 chunk 0, s1 = rank 1 chunk 0, s2 = rank 0 chunk 1, s3 = rank 1
// chunk 1. Table (0,c0) (1,c0) (0,c1) (1,c1); rank 0 warms up (2-0-1) x 2 + 2 = 4 (all its
// forwards), rank 1 two. Rank 0: F(0,c0) 0-1, F(1,c0) 1-2, F(0,c1) 2-4, F(1,c1) 4-6.
// Rank 1: F(0,c0) 1-2, F(1,c0) 2-3, F(0,c1) 4-6, B(0,c1) 6-8, F(1,c1) 8-10, B(1,c1) 10-12.
// Rank 0: B(0,c1) 8-10, B(1,c1) 12-14. Rank 1: B(0,c0) 12-13, B(1,c0) 14-15.
// Rank 0: B(0,c0) 14-15, B(1,c0) 15-16: 16. The closed form (both ranks fb 6): 2 x 6 + 6 / 2 = 15:
// the heavier second chunks do not overlap as the equal-chunk rule assumes.
TEST(PipelineSchedule, InterleavedUnevenChunksHandDerived) {
  const std::vector<ChunkPass> c = {{1, 1}, {2, 2}, {1, 1}, {2, 2}};
  EXPECT_DOUBLE_EQ(pipeline_makespan(2, 2, 2, c), 16.0);
  EXPECT_DOUBLE_EQ(closed_form(2, 2, 2, c), 15.0);
  // The bound: rank 1 after rank 0's chunk 0 (1 + 1): 2 + 2 x 6 = 14.
  EXPECT_DOUBLE_EQ(pipeline_makespan_lower_bound(2, 2, 2, c), 14.0);
}

// On random chunk times the bound never exceeds the simulation, and the simulation lies
// between the busiest rank's work and all the work done one pass at a time.
TEST(PipelineSchedule, LowerBoundHoldsOnRandomChunks) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto uniform = [&state] {  // splitmix64 -> [0.1, 3)
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return 0.1 + 2.9 * static_cast<double>(z >> 11) / static_cast<double>(1ull << 53);
  };
  int strict = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int pp = 2 + trial % 7, vp = 1 + (trial / 7) % 4, m = pp * (1 + trial % 5);
    std::vector<ChunkPass> c(static_cast<size_t>(pp * vp));
    double busiest = 0, all = 0;
    for (int r = 0; r < pp; ++r) {
      double fb = 0;
      for (int j = 0; j < vp; ++j) {
        ChunkPass& x = c[static_cast<size_t>(r * vp + j)];
        x = {uniform(), uniform()};
        fb += x.fwd + x.bwd;
      }
      busiest = std::max(busiest, m * fb);
      all += m * fb;
    }
    const double sim = pipeline_makespan(pp, vp, m, c);
    const double bound = pipeline_makespan_lower_bound(pp, vp, m, c);
    ASSERT_LE(bound, sim * (1 + 1e-12)) << "trial " << trial;
    ASSERT_GE(bound, busiest * (1 - 1e-12));
    ASSERT_LE(sim, all * (1 + 1e-12));
    strict += bound < sim * (1 - 1e-9);
  }
  EXPECT_GT(strict, 100);  // uneven chunks: the bound is a bound, not the value
}

// chunk_layers: what each model chunk holds, summing to stage_layers per rank.
TEST(PipelineSchedule, ChunkLayersOfACustomLayout) {
  Scenario s;
  s.model.num_layers = 7;
  s.model.num_experts = 8;
  s.model.moe_layer_pattern = {0, 0, 1, 1, 1, 1, 1};  // two dense layers first
  s.model.mtp_num_layers = 1;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.pipeline_layout = expand_pipeline_layout("Et|ttt|tt|tmL").stages;
  Mesh m;
  m.pp = 2;
  m.vp = 2;
  const std::vector<StageLayers> c = chunk_layers(s, m);
  ASSERT_EQ(c.size(), 4u);
  // Layers are numbered in stage order. Rank 0: stages 0 ("Et": layer 0) and 2 ("tt": layers
  // 4, 5); rank 1: stages 1 ("ttt": layers 1-3) and 3 ("tmL": layer 6, the MTP layer, loss).
  EXPECT_EQ(c[0].num_layers, 1);
  EXPECT_EQ(c[0].num_moe_layers, 0);
  EXPECT_TRUE(c[0].has_embedding);
  EXPECT_EQ(c[1].num_layers, 2);
  EXPECT_EQ(c[1].num_moe_layers, 2);
  EXPECT_EQ(c[2].num_layers, 3);
  EXPECT_EQ(c[2].num_moe_layers, 2);  // layer 1 dense, 2 and 3 MoE
  EXPECT_EQ(c[3].num_layers, 1);
  EXPECT_EQ(c[3].num_moe_layers, 1);
  EXPECT_TRUE(c[3].has_output);
  EXPECT_EQ(c[3].num_mtp_layers, 1);
  const std::vector<StageLayers> ranks = stage_layers(s, m);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(c[static_cast<size_t>(r * 2)].num_layers + c[static_cast<size_t>(r * 2 + 1)].num_layers,
              ranks[static_cast<size_t>(r)].num_layers);
    EXPECT_EQ(c[static_cast<size_t>(r * 2)].num_moe_layers + c[static_cast<size_t>(r * 2 + 1)].num_moe_layers,
              ranks[static_cast<size_t>(r)].num_moe_layers);
  }
}

// A standard interleaved split that accounts for the embedding and the loss as layers:
// 6 layers + 2 on pp 2 with 2 per virtual stage: chunk c = j * pp + r holds the virtual slots
// [2c, 2c + 2), slot 0 the embedding and slot 7 the loss.
TEST(PipelineSchedule, ChunkLayersOfAStandardInterleavedSplit) {
  Scenario s;
  s.model.num_layers = 6;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;
  Mesh m;
  m.pp = 2;
  m.vp = 2;
  const std::vector<StageLayers> c = chunk_layers(s, m);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].num_layers, 1);  // rank 0 chunk 0: embedding, layer 0
  EXPECT_EQ(c[1].num_layers, 2);  // rank 0 chunk 1: layers 3, 4
  EXPECT_EQ(c[2].num_layers, 2);  // rank 1 chunk 0: layers 1, 2
  EXPECT_EQ(c[3].num_layers, 1);  // rank 1 chunk 1: layer 5, loss
}

}  // namespace
}  // namespace lcm
