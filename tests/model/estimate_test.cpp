// The entry point composes the breakdowns consistently (identities that must hold for
// any scenario), checked on a dense and an MoE layout with pipeline stages.
#include <gtest/gtest.h>

#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/estimate.hpp"

namespace lcm {
namespace {

Scenario moe_pp_scenario() {
  Scenario s;
  s.name = "estimate-test";
  s.model = testing::mixtral_8x7b();
  s.training.seq_length = 32768;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 64;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.context_parallel_size = 2;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.num_gpus = 64;
  s.hardware = testing::test_h100();
  s.hardware.allowances.cuda_context = 0.5 * (1 << 30);
  s.hardware.allowances.fragmentation_fraction = 0.05;
  return s;
}

TEST(Estimate, ComposesTheBreakdowns) {
  const Scenario s = moe_pp_scenario();
  ASSERT_TRUE(validate_scenario(s).empty());
  const Estimate e = estimate(s);
  EXPECT_EQ(e.mesh.dp, 4);
  EXPECT_EQ(e.mesh.edp, 2);
  ASSERT_EQ(e.stage_layers.size(), 4u);
  ASSERT_EQ(e.memory.stages.size(), 4u);
  ASSERT_EQ(e.gpu_params.size(), 4u);

  int layers = 0;
  for (const StageLayers& l : e.stage_layers) layers += l.num_layers;
  EXPECT_EQ(layers, 32);

  // Peak figures are the maxima over stages; allocated <= peak; the range brackets it.
  double peak = 0, alloc = 0;
  for (const StageMemory& m : e.memory.stages) {
    peak = std::max(peak, m.peak);
    alloc = std::max(alloc, m.allocated);
    EXPECT_LE(m.allocated, m.peak);
    EXPECT_LE(m.peak_low, m.peak);
    EXPECT_GE(m.peak_high, m.peak);
  }
  EXPECT_DOUBLE_EQ(e.memory.peak_bytes, peak);
  EXPECT_DOUBLE_EQ(e.memory.allocated_peak_bytes, alloc);
  EXPECT_DOUBLE_EQ(e.memory.peak_bytes, e.memory.stages[static_cast<size_t>(e.memory.worst_stage)].peak);

  // FLOPs: per GPU share times world is the step; the headline follows the convention.
  EXPECT_NEAR(e.flops.per_gpu_per_step * s.num_gpus, e.flops.per_step, 1e-6 * e.flops.per_step);
  EXPECT_DOUBLE_EQ(e.flops.per_step, e.flops.model_flops);
  EXPECT_DOUBLE_EQ(e.flops.model_flops, e.flops.fwd.total() + e.flops.bwd.total());

  // Communication totals add up.
  double sum = 0;
  for (int i = 0; i < e.comm.num_items; ++i) sum += e.comm.items[static_cast<size_t>(i)].sent_bytes;
  EXPECT_NEAR(sum, e.comm.total_sent_bytes, 1e-9 * sum);
  double by_dim = 0;
  for (double v : e.comm.sent_bytes_by_dim) by_dim += v;
  EXPECT_NEAR(by_dim, e.comm.total_sent_bytes, 1e-9 * sum);
}

TEST(Estimate, HardwareFlopsConventionIncludesRecompute) {
  Scenario s = moe_pp_scenario();
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  s.flop_convention.include_recompute = true;
  const Estimate e = estimate(s);
  EXPECT_GT(e.flops.recompute.total(), 0.0);
  EXPECT_DOUBLE_EQ(e.flops.per_step, e.flops.hardware_flops);
  EXPECT_DOUBLE_EQ(e.flops.hardware_flops, e.flops.model_flops + e.flops.recompute.total());
}

}  // namespace
}  // namespace lcm
