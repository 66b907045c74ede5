// Megatron's custom pipeline layout (--pipeline-model-parallel-layout): expansion as
// Megatron-Core's PipelineParallelLayerLayout.parse_str_to_list, the text written back,
// Megatron's uneven + interleaved split as a layout, the checks, and what the estimate makes
// of a layout (pipeline_layout.hpp, mesh.cpp, validate.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/pipeline_layout.hpp"

namespace lcm {
namespace {

using Stages = std::vector<std::string>;

Stages repeat(const std::string& st, int n) { return Stages(static_cast<size_t>(n), st); }

Stages cat(std::initializer_list<Stages> parts) {
  Stages out;
  for (const Stages& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(PipelineLayout, ExpandsAsMegatronsParser) {
  // parse_str_to_list's docstring: "Ettt|(tt|)*29,m|L" -> [E,t,t,t] + [t,t]*29 + [m], [L].
  ExpandedPipelineLayout e = expand_pipeline_layout("Ettt|(tt|)*29,m|L");
  ASSERT_TRUE(e.error.empty()) << e.error;
  EXPECT_EQ(e.stages, cat({{"Ettt"}, repeat("tt", 29), {"m", "L"}}));
  // The patterns' own examples: xy(ab|cd|ef)*2,pq with layer letters; (|ab)*2,cd; x*n.
  EXPECT_EQ(expand_pipeline_layout("Et(tt|t|mm)*2,tL").stages, (Stages{"Ettt", "t", "mmtt", "t", "mmtL"}));
  EXPECT_EQ(expand_pipeline_layout("E(|tt)*2,tL").stages, (Stages{"E", "tt", "tttL"}));
  EXPECT_EQ(expand_pipeline_layout("Et*3|t*2L").stages, (Stages{"Ettt", "ttL"}));
  // DeepSeek-V3 on pp 8 x vp 4.
  EXPECT_EQ(expand_pipeline_layout("Et|(tt|)*30mL").stages, cat({{"Et"}, repeat("tt", 30), {"mL"}}));
  // Empty stages are stages.
  EXPECT_EQ(expand_pipeline_layout("E|tt|tt|L").stages, (Stages{"E", "tt", "tt", "L"}));
}

TEST(PipelineLayout, RefusesWhatMegatronRefuses) {
  EXPECT_THAT(expand_pipeline_layout("Et|tx|L").error, ::testing::HasSubstr("'x' is not a layer character"));
  EXPECT_THAT(expand_pipeline_layout("Et| tL").error, ::testing::HasSubstr("a space is not a layer character"));
  // Nested groups do not unroll in Megatron either: the parentheses stay and are refused.
  EXPECT_THAT(expand_pipeline_layout("E((t|)*2)*2L").error, ::testing::HasSubstr("'(' is not a layer character"));
  EXPECT_THAT(expand_pipeline_layout("Et*99999999L").error, ::testing::HasSubstr("too large"));
}

TEST(PipelineLayout, TextParsesBackToTheSameStages) {
  const std::vector<Stages> layouts = {
      cat({{"Et"}, repeat("tt", 30), {"mL"}}),
      {"Ettt", "tt", "tt", "ttmL"},
      {"E", "tt", "tt", "L"},
      {"E", "", "", "tL"},
      {"Ettttttt", "tttttttt", "tttttttt", "ttttttmL"},
      {"EttL"},
  };
  for (const Stages& st : layouts) {
    const std::string text = pipeline_layout_text(st);
    const ExpandedPipelineLayout back = expand_pipeline_layout(text);
    EXPECT_TRUE(back.error.empty()) << text << ": " << back.error;
    EXPECT_EQ(back.stages, st) << text;
  }
  EXPECT_EQ(pipeline_layout_text(cat({{"Et"}, repeat("tt", 30), {"mL"}})), "Et|(tt|)*30mL");
  EXPECT_EQ(pipeline_layout_text({"Ettttttt", "tttttttt", "tttttttt", "ttttttmL"}), "Ettttttt|(t*8|)*2ttttttmL");
}

TEST(PipelineLayout, UnevenInterleavedSplitsEachRankOverItsChunks) {
  // 12 layers, pp 4, first 2, last 2 -> [2, 4, 4, 2]; vp 2 -> chunks [1, 2, 2, 1] twice.
  EXPECT_EQ(uneven_interleaved_layout(12, 4, 2, 2, 2, 0), (Stages{"Et", "tt", "tt", "t", "t", "tt", "tt", "tL"}));
  // Only a first stage: 13 layers, pp 3, first 1 -> [1, 6, 6]; vp 1 keeps one stage per rank.
  EXPECT_EQ(uneven_interleaved_layout(13, 3, 1, 1, 0, 1), (Stages{"Et", "tttttt", "ttttttmL"}));
  // A rank whose layers do not split into vp chunks (Megatron asserts): none.
  EXPECT_TRUE(uneven_interleaved_layout(12, 4, 2, 3, 3, 0).empty());
  EXPECT_EQ(layout_layers_per_rank({"Et", "tt", "tt", "t", "t", "tt", "tt", "tL"}, 4), (std::vector<int>{2, 4, 4, 2}));
}

Scenario dsv3(const Stages& layout) {
  Scenario s;
  s.name = "dsv3";
  s.model = testing::deepseek_v3();  // 61 layers, 3 dense, 1 MTP layer
  s.training.seq_length = 4096;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 256;
  s.num_gpus = 256;
  s.parallel.pipeline_model_parallel_size = 8;
  s.parallel.expert_model_parallel_size = 32;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.parallel.pipeline_layout = layout;
  s.hardware = testing::test_h100();
  return s;
}

TEST(PipelineLayout, StagesFollowTheLayoutRankByRank) {
  // Megatron-Bridge's DeepSeek-V3 layout: 32 stages on 8 ranks (vp 4); rank r holds stages
  // r, r + 8, r + 16, r + 24. Rank 0: layer 0 (stage 0) and 2 layers in each later chunk;
  // rank 7: 2 + 2 + 2 layers and the MTP layer with the loss.
  const Scenario s = dsv3(cat({{"Et"}, repeat("tt", 30), {"mL"}}));
  EXPECT_TRUE(validate_scenario(s).empty());
  const Mesh m = derive_mesh(s);
  EXPECT_EQ(m.vp, 4);
  const std::vector<StageLayers> st = stage_layers(s, m);
  std::vector<int> layers, moe;
  for (const StageLayers& x : st) layers.push_back(x.num_layers), moe.push_back(x.num_moe_layers);
  EXPECT_EQ(layers, (std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6}));
  // Layers 0-2 are dense: layer 0 on rank 0 (stage 0), layers 1-2 on rank 1 (stage 1).
  EXPECT_EQ(moe, (std::vector<int>{6, 6, 8, 8, 8, 8, 8, 6}));
  EXPECT_TRUE(st[0].has_embedding);
  EXPECT_TRUE(st[7].has_output);
  EXPECT_EQ(st[7].num_mtp_layers, 1);
  // Rank 0 runs its chunks in order: stage 0 = layer 0, stage 8 = layers 15-16, ...
  EXPECT_EQ(stage_layer_indices(s, m)[0], (std::vector<int>{0, 15, 16, 31, 32, 47, 48}));
}

TEST(PipelineLayout, ALayoutOfTheFirstLastSplitEstimatesTheSame) {
  // first 7 / last 6 on pp 8 without interleaving, written as a layout: the same stages,
  // the same estimate bit for bit.
  Scenario split = dsv3({});
  split.parallel.num_layers_in_first_pipeline_stage = 7;
  split.parallel.num_layers_in_last_pipeline_stage = 6;
  const Scenario layout = dsv3(cat({{"Et*7"}, repeat("tttttttt", 6), {"ttttttmL"}}));
  Scenario expanded = layout;
  expanded.parallel.pipeline_layout = expand_pipeline_layout("Et*7|(t*8|)*6t*6mL").stages;
  ASSERT_TRUE(validate_scenario(split).empty());
  ASSERT_TRUE(validate_scenario(expanded).empty()) << validate_scenario(expanded).front().message;
  const Estimate a = estimate(split), b = estimate(expanded);
  EXPECT_EQ(a.stage_layers, b.stage_layers);
  EXPECT_EQ(a.time.step_s, b.time.step_s);
  EXPECT_EQ(a.memory.peak_bytes, b.memory.peak_bytes);
  // Interleaving the same model (vp 4) shrinks the bubble.
  const Estimate c = estimate(dsv3(cat({{"Et"}, repeat("tt", 30), {"mL"}})));
  EXPECT_LT(c.time.bubble, a.time.bubble);
}

TEST(PipelineLayout, ChecksAsMegatronAndLcmsMtpPlacement) {
  auto problem = [](const Scenario& s) {
    const std::vector<Problem> p = validate_scenario(s);
    return p.empty() ? std::string() : p.front().key + ": " + p.front().message;
  };
  const Stages good = cat({{"Et"}, repeat("tt", 30), {"mL"}});
  Scenario s = dsv3(cat({{"Et"}, repeat("tt", 29), {"mL"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("31 stages, not divisible by pipeline_model_parallel_size 8"));
  s = dsv3(cat({{"t"}, repeat("tt", 30), {"EmL"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("the first layer must be the embedding (E)"));
  s = dsv3(cat({{"Et"}, repeat("tt", 30), {"m"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("the last layer must be the loss (L)"));
  s = dsv3(cat({{"Ett"}, repeat("tt", 30), {"mL"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("places 62 transformer layers (t) but num_layers is 61"));
  s = dsv3(cat({{"Et"}, repeat("tt", 30), {"L"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("places 0 MTP layers (m) but mtp_num_layers is 1"));
  s = dsv3(cat({{"Et"}, repeat("tt", 29), {"tm", "tL"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("decoder layers (t) must be placed before MTP layers (m)"));
  s = dsv3(cat({{"Et"}, repeat("tt", 29), {"ttm", "L"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("lcm models the MTP layers on the last pipeline rank"));
  s = dsv3(good);
  s.parallel.num_layers_in_first_pipeline_stage = 7;
  EXPECT_THAT(problem(s), ::testing::HasSubstr("cannot be set with other pipeline layout arguments"));
  s = dsv3(cat({{"Et"}, repeat("tt", 30), repeat("", 1024), {"mL"}}));
  EXPECT_THAT(problem(s), ::testing::HasSubstr("has 1056 stages; lcm's cap is 1024"));
  s = dsv3(good);
  EXPECT_EQ(problem(s), "");
}

}  // namespace
}  // namespace lcm
