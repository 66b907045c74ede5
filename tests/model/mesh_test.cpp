// Mesh derivation, Megatron's rank order, and the layer-to-stage assignment.
//
// Expected rank groups come from Megatron-LM's RankGenerator (parallel_state.py): the first
// name of the order string varies fastest, so with "tp-cp-ep-dp-pp" the TP group is a run
// of consecutive ranks and PP has the largest stride.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "lcm/model/mesh.hpp"

namespace lcm {
namespace {

Scenario base(int layers, int world) {
  Scenario s;
  s.model.name = "m";
  s.model.num_layers = layers;
  s.model.hidden_size = 1024;
  s.model.ffn_hidden_size = 4096;
  s.model.num_attention_heads = 16;
  s.model.num_query_groups = 16;
  s.model.kv_channels = 64;
  s.model.vocab_size = 32000;
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = world;
  s.num_gpus = world;
  return s;
}

Mesh mesh(int tp, int cp, int pp, int world, int ep = 1, int etp = 0, int experts = 0) {
  Scenario s = base(8, world);
  s.model.num_experts = experts;
  s.parallel.tensor_model_parallel_size = tp;
  s.parallel.context_parallel_size = cp;
  s.parallel.pipeline_model_parallel_size = pp;
  s.parallel.expert_model_parallel_size = ep;
  s.parallel.expert_tensor_parallel_size = etp;
  return derive_mesh(s);
}

int product(const RankGrid& g) {
  return std::accumulate(g.size.begin(), g.size.end(), 1, [](int a, int b) { return a * b; });
}

constexpr int idx(Dim d) { return static_cast<int>(d); }

void expect_round_trip(const RankGrid& g, int world) {
  ASSERT_EQ(product(g), world);
  for (int r = 0; r < world; ++r) {
    const std::array<int, kNumOrderDims> c = coords_of(g, r);
    for (int d = 0; d < kNumOrderDims; ++d) {
      EXPECT_GE(c[static_cast<size_t>(d)], 0);
      EXPECT_LT(c[static_cast<size_t>(d)], g.size[static_cast<size_t>(d)]);
    }
    EXPECT_EQ(rank_of(g, c), r);
    EXPECT_EQ(coords_of(g, rank_of(g, c)), c);
    // Every group contains the rank itself, and the groups along a dim partition the world.
    for (int d = 0; d < kNumOrderDims; ++d) {
      const std::vector<int> grp = group_ranks(g, static_cast<Dim>(d), r);
      EXPECT_EQ(static_cast<int>(grp.size()), g.size[static_cast<size_t>(d)]);
      EXPECT_EQ(grp[static_cast<size_t>(c[static_cast<size_t>(d)])], r);
    }
  }
}

// ---------------------------------------------------------------------------------
// Rank order
// ---------------------------------------------------------------------------------
TEST(MeshRankOrder, CoordinatesRoundTripForEveryRank) {
  ParallelSpec par;
  const Mesh dense = mesh(2, 2, 2, 32);  // dp = 4
  expect_round_trip(dense_grid(dense, par), 32);
  const Mesh moe = mesh(2, 2, 2, 32, /*ep=*/4, /*etp=*/1, /*experts=*/8);  // edp = 4
  expect_round_trip(expert_grid(moe, par), 32);
  par.order[0] = Dim::kPp;  // a custom order: pp-cp-ep-dp-tp
  par.order[4] = Dim::kTp;
  expect_round_trip(dense_grid(dense, par), 32);
  expect_round_trip(expert_grid(moe, par), 32);
}

TEST(MeshRankOrder, GridSizesMultiplyToWorld) {
  ParallelSpec par;
  const Mesh m = mesh(4, 2, 4, 256, /*ep=*/8, /*etp=*/2, /*experts=*/64);
  EXPECT_EQ(m.dp, 8);
  EXPECT_EQ(m.edp, 4);
  EXPECT_EQ(product(dense_grid(m, par)), 256);
  EXPECT_EQ(product(expert_grid(m, par)), 256);
  EXPECT_EQ(dense_grid(m, par).size[idx(Dim::kEp)], 1);
  EXPECT_EQ(expert_grid(m, par).size[idx(Dim::kCp)], 1);
}

TEST(MeshRankOrder, DefaultOrderPutsTpOnConsecutiveRanks) {
  ParallelSpec par;  // tp-cp-ep-dp-pp
  const RankGrid g = dense_grid(mesh(2, 2, 1, 8), par);  // tp 2, cp 2, dp 2
  EXPECT_EQ(group_ranks(g, Dim::kTp, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(group_ranks(g, Dim::kCp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 0), (std::vector<int>{0, 4}));
  EXPECT_EQ(group_ranks(g, Dim::kTp, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_ranks(g, Dim::kCp, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(coords_of(g, 6), (std::array<int, kNumOrderDims>{0, 1, 0, 1, 0}));
}

TEST(MeshRankOrder, MegatronDocstringExampleSixteenGpus) {
  // initialize_model_parallel docstring: 16 GPUs, TP 2, PP 4 (so DP 2).
  ParallelSpec par;
  const RankGrid g = dense_grid(mesh(2, 1, 4, 16), par);
  EXPECT_EQ(group_ranks(g, Dim::kTp, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(group_ranks(g, Dim::kTp, 14), (std::vector<int>{14, 15}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 13), (std::vector<int>{13, 15}));
  EXPECT_EQ(group_ranks(g, Dim::kPp, 0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(group_ranks(g, Dim::kPp, 3), (std::vector<int>{3, 7, 11, 15}));
}

TEST(MeshRankOrder, ExpertGridFoldsEpOverConsecutiveRanks) {
  ParallelSpec par;
  // tp = 1, dp = 8 for attention; etp = 1, ep = 4, edp = 2 for experts.
  const Mesh m = mesh(1, 1, 1, 8, /*ep=*/4, /*etp=*/1, /*experts=*/8);
  EXPECT_EQ(m.edp, 2);
  const RankGrid g = expert_grid(m, par);
  EXPECT_EQ(group_ranks(g, Dim::kEp, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(group_ranks(g, Dim::kEp, 6), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 0), (std::vector<int>{0, 4}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 3), (std::vector<int>{3, 7}));
}

TEST(MeshRankOrder, ExpertTensorGroupMatchesAttentionTpWhenEtpEqualsTp) {
  ParallelSpec par;
  const Mesh m = mesh(2, 1, 1, 8, /*ep=*/2, /*etp=*/0, /*experts=*/8);  // etp = tp = 2
  EXPECT_EQ(m.etp, 2);
  EXPECT_EQ(m.edp, 2);
  const RankGrid dense = dense_grid(m, par);
  const RankGrid expert = expert_grid(m, par);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(group_ranks(expert, Dim::kTp, r), group_ranks(dense, Dim::kTp, r));
  }
  EXPECT_EQ(group_ranks(expert, Dim::kEp, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(group_ranks(expert, Dim::kDp, 1), (std::vector<int>{1, 5}));
}

TEST(MeshRankOrder, TpPpDpMappingOrder) {
  // --use-tp-pp-dp-mapping: "tp-cp-ep-pp-dp".
  ParallelSpec par;
  par.order[3] = Dim::kPp;
  par.order[4] = Dim::kDp;
  const RankGrid g = dense_grid(mesh(2, 1, 2, 8), par);  // tp 2, pp 2, dp 2
  EXPECT_EQ(group_ranks(g, Dim::kPp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 0), (std::vector<int>{0, 4}));
  EXPECT_EQ(group_ranks(g, Dim::kPp, 5), (std::vector<int>{5, 7}));
}

TEST(MeshRankOrder, MegatronMaskedGroupExampleTpDpPp) {
  // generate_masked_orthogonal_rank_groups docstring: order tp-dp-pp with sizes 2, 3, 4:
  // dp_group[0] = [0, 2, 4], dp_group[7] = [19, 21, 23].
  RankGrid g;
  g.size[idx(Dim::kTp)] = 2;
  g.size[idx(Dim::kDp)] = 3;
  g.size[idx(Dim::kPp)] = 4;
  g.order = {Dim::kTp, Dim::kDp, Dim::kPp, Dim::kCp, Dim::kEp};
  expect_round_trip(g, 24);
  EXPECT_EQ(group_ranks(g, Dim::kDp, 0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(group_ranks(g, Dim::kDp, 19), (std::vector<int>{19, 21, 23}));
  EXPECT_EQ(group_ranks(g, Dim::kPp, 1), (std::vector<int>{1, 7, 13, 19}));
}

// ---------------------------------------------------------------------------------
// derive_mesh
// ---------------------------------------------------------------------------------
TEST(MeshDerive, DataParallelSizesMicroBatchesAndVocab) {
  Scenario s = base(32, 64);
  s.model.num_experts = 16;
  s.model.vocab_size = 50257;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.context_parallel_size = 2;
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  s.parallel.sequence_parallel = true;
  s.training.micro_batch_size = 2;
  s.training.global_batch_size = 64;
  Mesh m = derive_mesh(s);
  EXPECT_EQ(m.world, 64);
  EXPECT_EQ(m.dp, 4);                   // 64 / (2 * 2 * 4)
  EXPECT_EQ(m.etp, 2);                  // defaults to tp
  EXPECT_EQ(m.ep, 8);
  EXPECT_EQ(m.edp, 1);                  // 64 / (2 * 8 * 4)
  EXPECT_EQ(m.vp, 4);                   // 32 / 4 = 8 layers per rank, 2 per virtual stage
  EXPECT_EQ(m.num_micro_batches, 8);    // 64 / (2 * 4)
  EXPECT_EQ(m.padded_vocab, 50432);     // multiple of 128 * 2
  EXPECT_TRUE(m.sp);
  s.parallel.expert_tensor_parallel_size = 1;
  m = derive_mesh(s);
  EXPECT_EQ(m.etp, 1);
  EXPECT_EQ(m.edp, 2);
}

TEST(MeshDerive, DenseModelHasNoExpertParallelism) {
  Scenario s = base(8, 16);
  s.parallel.tensor_model_parallel_size = 4;
  s.parallel.expert_model_parallel_size = 4;  // ignored without experts
  const Mesh m = derive_mesh(s);
  EXPECT_EQ(m.ep, 1);
  EXPECT_EQ(m.dp, 4);
  EXPECT_EQ(m.edp, 4);  // world / (etp * pp): the same ranks as DP
  EXPECT_EQ(m.vp, 1);
  EXPECT_FALSE(m.sp);
}

TEST(MeshDerive, SequenceParallelNeedsTp) {
  Scenario s = base(8, 8);
  s.parallel.sequence_parallel = true;
  EXPECT_FALSE(derive_mesh(s).sp);
  s.parallel.tensor_model_parallel_size = 2;
  EXPECT_TRUE(derive_mesh(s).sp);
}

TEST(MeshDerive, VirtualStagesCountEmbeddingAndLossSlots) {
  Scenario s = base(30, 4);
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  EXPECT_EQ(derive_mesh(s).vp, 4);  // (30 + 2) / 4 = 8 slots per rank
}

TEST(MeshDerive, PaddedVocab) {
  EXPECT_EQ(padded_vocab_size(50257, 128, 1), 50304);
  EXPECT_EQ(padded_vocab_size(32000, 128, 8), 32768);
  EXPECT_EQ(padded_vocab_size(128256, 128, 8), 129024);
  EXPECT_EQ(padded_vocab_size(32000, 128, 1), 32000);
}

// ---------------------------------------------------------------------------------
// stage_layers
// ---------------------------------------------------------------------------------
std::vector<StageLayers> split(Scenario s, int pp) {
  s.num_gpus = pp;
  s.training.global_batch_size = 1;
  s.parallel.pipeline_model_parallel_size = pp;
  return stage_layers(s, derive_mesh(s));
}

std::vector<int> counts(const std::vector<StageLayers>& st) {
  std::vector<int> out;
  for (const StageLayers& x : st) out.push_back(x.num_layers);
  return out;
}
std::vector<int> moe_counts(const std::vector<StageLayers>& st) {
  std::vector<int> out;
  for (const StageLayers& x : st) out.push_back(x.num_moe_layers);
  return out;
}

TEST(MeshStages, EvenSplitWithEmbeddingOutputAndMtp) {
  Scenario s = base(8, 4);
  s.model.mtp_num_layers = 1;
  const std::vector<StageLayers> st = split(s, 4);
  EXPECT_EQ(counts(st), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_TRUE(st[0].has_embedding);
  EXPECT_FALSE(st[1].has_embedding);
  EXPECT_TRUE(st[3].has_output);
  EXPECT_FALSE(st[2].has_output);
  EXPECT_EQ(st[3].num_mtp_layers, 1);
  EXPECT_EQ(st[0].num_mtp_layers, 0);
  const std::vector<StageLayers> one = split(s, 1);
  EXPECT_TRUE(one[0].has_embedding && one[0].has_output);
  EXPECT_EQ(one[0].num_layers, 8);
}

TEST(MeshStages, UnevenFirstAndLast) {
  Scenario s = base(10, 4);
  s.parallel.num_layers_in_first_pipeline_stage = 1;
  s.parallel.num_layers_in_last_pipeline_stage = 1;
  EXPECT_EQ(counts(split(s, 4)), (std::vector<int>{1, 4, 4, 1}));
  s = base(7, 4);
  s.parallel.num_layers_in_first_pipeline_stage = 1;
  EXPECT_EQ(counts(split(s, 4)), (std::vector<int>{1, 2, 2, 2}));
  s = base(8, 2);
  s.parallel.num_layers_in_first_pipeline_stage = 3;
  s.parallel.num_layers_in_last_pipeline_stage = 5;
  EXPECT_EQ(counts(split(s, 2)), (std::vector<int>{3, 5}));
}

TEST(MeshStages, EmbeddingAndLossAccounting) {
  Scenario s = base(14, 4);
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(counts(split(s, 4)), (std::vector<int>{3, 4, 4, 3}));
  s = base(15, 4);
  s.parallel.account_for_embedding_in_pipeline_split = true;
  EXPECT_EQ(counts(split(s, 4)), (std::vector<int>{3, 4, 4, 4}));
}

TEST(MeshStages, InterleavedChunksFollowModelOrder) {
  // 8 layers, 2 ranks, 2 layers per virtual stage: rank 0 holds [0,1] and [4,5],
  // rank 1 holds [2,3] and [6,7] (the transformer_block.py comment's example).
  Scenario s = base(8, 2);
  s.model.num_experts = 8;
  s.model.moe_layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  const std::vector<StageLayers> st = split(s, 2);
  EXPECT_EQ(counts(st), (std::vector<int>{4, 4}));
  EXPECT_EQ(moe_counts(st), (std::vector<int>{2, 3}));  // {4,5} vs {3,6,7}
}

TEST(MeshStages, InterleavedWithEmbeddingSlot) {
  // 7 layers + embedding slot = 8 slots, 2 ranks, 2 per chunk. Megatron offsets
  // (get_transformer_layer_offset): rank 0 gets layer 0 and [3,4]; rank 1 [1,2] and [5,6].
  Scenario s = base(7, 2);
  s.model.num_experts = 8;
  s.model.moe_layer_pattern = {1, 1, 0, 0, 1, 0, 0};
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;
  const std::vector<StageLayers> st = split(s, 2);
  EXPECT_EQ(counts(st), (std::vector<int>{3, 4}));
  EXPECT_EQ(moe_counts(st), (std::vector<int>{2, 1}));
}

TEST(MeshStages, MegatronCiSixLayersFourStagesTwoVirtualWithEmbeddingAndLoss) {
  // Megatron's functional test gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split:
  // 6 layers + embedding + loss = 8 slots, 2 per rank, 1 per virtual stage. By hand from
  // get_transformer_layer_offset (offset = vp_stage * 8/2 + rank * 1, minus 1 except on
  // rank 0's first chunk) and get_num_layers_to_build (1, minus the embedding on rank 0's
  // first chunk and the loss on rank 3's last): rank 0 runs [] and [3], rank 1 [0] and
  // [4], rank 2 [1] and [5], rank 3 [2] and [].
  Scenario s = base(6, 4);
  s.parallel.account_for_embedding_in_pipeline_split = true;
  s.parallel.account_for_loss_in_pipeline_split = true;
  s.parallel.num_layers_per_virtual_pipeline_stage = 1;
  s.num_gpus = 4;
  s.training.global_batch_size = 4;
  s.parallel.pipeline_model_parallel_size = 4;
  const Mesh m = derive_mesh(s);
  EXPECT_EQ(m.vp, 2);
  EXPECT_EQ(stage_layer_indices(s, m), (std::vector<std::vector<int>>{{3}, {0, 4}, {1, 5}, {2}}));
  EXPECT_EQ(counts(stage_layers(s, m)), (std::vector<int>{1, 2, 2, 1}));
}

TEST(MeshStages, DeepSeekLikeDenseFirstThree) {
  Scenario s = base(61, 4);
  s.model.num_experts = 256;
  s.model.moe_layer_pattern.assign(61, 1);
  for (int i = 0; i < 3; ++i) s.model.moe_layer_pattern[static_cast<size_t>(i)] = 0;
  s.model.mtp_num_layers = 1;
  s.parallel.num_layers_in_first_pipeline_stage = 16;
  s.parallel.num_layers_in_last_pipeline_stage = 15;
  const std::vector<StageLayers> st = split(s, 4);
  EXPECT_EQ(counts(st), (std::vector<int>{16, 15, 15, 15}));
  EXPECT_EQ(moe_counts(st), (std::vector<int>{13, 15, 15, 15}));
  EXPECT_EQ(st[3].num_mtp_layers, 1);
}

TEST(MeshStages, LayersAreConservedAcrossLayouts) {
  struct Case {
    int layers, pp, first, last, per_vstage;
    bool emb, loss;
  };
  const Case cases[] = {{24, 4, 0, 0, 0, false, false}, {24, 4, 0, 0, 3, false, false},
                        {22, 4, 0, 0, 0, true, true},   {22, 4, 0, 0, 2, true, true},
                        {30, 4, 6, 6, 0, false, false}, {61, 8, 5, 0, 0, false, false}};
  for (const Case& c : cases) {
    Scenario s = base(c.layers, c.pp);
    s.parallel.num_layers_in_first_pipeline_stage = c.first;
    s.parallel.num_layers_in_last_pipeline_stage = c.last;
    s.parallel.num_layers_per_virtual_pipeline_stage = c.per_vstage;
    s.parallel.account_for_embedding_in_pipeline_split = c.emb;
    s.parallel.account_for_loss_in_pipeline_split = c.loss;
    const std::vector<StageLayers> st = split(s, c.pp);
    int total = 0;
    for (const StageLayers& x : st) total += x.num_layers;
    EXPECT_EQ(total, c.layers) << c.layers << " layers on " << c.pp << " stages";
  }
}

TEST(MeshStages, RecomputedLayersPerStage) {
  Scenario s = base(8, 2);
  s.model.num_experts = 8;
  s.model.moe_layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};
  std::vector<StageLayers> st = split(s, 2);
  EXPECT_EQ(st[0].num_recomputed_layers, 0);  // no full recompute
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  st = split(s, 2);
  EXPECT_EQ(st[0].num_recomputed_layers, 4);  // uniform: every layer
  EXPECT_EQ(st[1].num_recomputed_moe_layers, 4);
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  st = split(s, 2);  // block: layer 0 on rank 0, layer 4 on rank 1
  EXPECT_EQ(st[0].num_recomputed_layers, 1);
  EXPECT_EQ(st[0].num_recomputed_moe_layers, 0);
  EXPECT_EQ(st[1].num_recomputed_layers, 1);
  EXPECT_EQ(st[1].num_recomputed_moe_layers, 1);
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;  // chunks [0,1][4,5] and [2,3][6,7]
  st = split(s, 2);  // block applies per chunk: layers 0, 4 and 2, 6
  EXPECT_EQ(st[0].num_recomputed_layers, 2);
  EXPECT_EQ(st[0].num_recomputed_moe_layers, 1);
  EXPECT_EQ(st[1].num_recomputed_layers, 2);
  EXPECT_EQ(st[1].num_recomputed_moe_layers, 1);
  s.parallel.recompute_num_layers = 2;
  st = split(s, 2);
  EXPECT_EQ(st[0].num_recomputed_layers, 4);
  EXPECT_EQ(st[1].num_recomputed_moe_layers, 3);
}

TEST(MeshStages, IsMoeLayer) {
  ModelSpec md;
  md.num_layers = 4;
  EXPECT_FALSE(is_moe_layer(md, 0));
  md.num_experts = 8;
  EXPECT_TRUE(is_moe_layer(md, 3));  // empty pattern: every layer
  md.moe_layer_pattern = {0, 1, 0, 1};
  EXPECT_FALSE(is_moe_layer(md, 0));
  EXPECT_TRUE(is_moe_layer(md, 1));
}

}  // namespace
}  // namespace lcm
