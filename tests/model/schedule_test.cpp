// The op schedule: stable names, GEMM shapes, and agreement with the FLOP model (the
// schedule's model FLOPs, summed over ops, layers, micro-batches and ranks, equal
// count_flops' model FLOPs: both describe the same step).
#include <gtest/gtest.h>

#include <set>

#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm {
namespace {

Scenario base(const ModelSpec& model, int gpus) {
  Scenario s;
  s.name = "schedule-test";
  s.model = model;
  s.hardware = testing::test_h100();
  s.num_gpus = gpus;
  s.training.seq_length = 8192;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 32;
  return s;
}

struct Built {
  Mesh mesh;
  std::vector<StageLayers> layers;
  Schedule sched;
};

Built build(const Scenario& s) {
  EXPECT_TRUE(validate_scenario(s).empty());
  Built b;
  b.mesh = derive_mesh(s);
  b.layers = stage_layers(s, b.mesh);
  b.sched = build_schedule(s, b.mesh, b.layers, gpu_params(s, b.mesh, b.layers));
  return b;
}

double list_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const Op& o : ops) f += o.model_flops * o.calls;
  return f;
}

// Model FLOPs of the whole step from the schedule: every rank of a stage does 1/(tp·cp)
// of the stage's work for its micro-batches; dp pipelines run side by side.
double schedule_model_flops(const Built& b) {
  double per_pipeline = 0;
  const Schedule& sc = b.sched;
  for (const StageSchedule& st : sc.stages) {
    double mb = list_flops(st.pre_fwd) + list_flops(st.post_fwd) + list_flops(st.post_bwd) + list_flops(st.pre_bwd);
    mb += st.dense * (list_flops(sc.dense.fwd) + list_flops(sc.dense.bwd));
    mb += st.moe * (list_flops(sc.moe.fwd) + list_flops(sc.moe.bwd));
    mb += st.mtp * (list_flops(sc.mtp.fwd) + list_flops(sc.mtp.bwd));
    per_pipeline += mb * sc.num_micro_batches;
  }
  return per_pipeline * b.mesh.tp * b.mesh.cp * b.mesh.dp;
}

TEST(Schedule, DenseFlopsMatchTheFlopModel) {
  Scenario s = base(testing::llama3_8b(), 16);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 2;
  s.parallel.pipeline_model_parallel_size = 2;
  const Built b = build(s);
  const Flops f = count_flops(s, b.mesh);
  EXPECT_NEAR(schedule_model_flops(b) / f.model_flops, 1.0, 1e-9);
}

TEST(Schedule, MoeFlopsMatchTheFlopModel) {
  Scenario s = base(testing::mixtral_8x7b(), 32);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  const Built b = build(s);
  const Flops f = count_flops(s, b.mesh);
  EXPECT_NEAR(schedule_model_flops(b) / f.model_flops, 1.0, 1e-9);
}

TEST(Schedule, NonCausalConventionDoublesAttentionModelFlopsOnly) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.flop_convention.causal_halved = false;
  const Built b = build(s);
  const Flops f = count_flops(s, b.mesh);
  EXPECT_NEAR(schedule_model_flops(b) / f.model_flops, 1.0, 1e-9);
}

TEST(Schedule, StableNamesAndShapes) {
  Scenario s = base(testing::mixtral_8x7b(), 16);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  const Built b = build(s);
  ASSERT_EQ(b.sched.stages.size(), 1u);
  const StageSchedule& st = b.sched.stages[0];
  EXPECT_EQ(st.moe, 32);
  EXPECT_EQ(st.dense, 0);
  EXPECT_TRUE(b.sched.dense.empty());
  std::set<std::string> names;
  for (const Op& o : b.sched.moe.fwd) EXPECT_TRUE(names.insert(op_name(o, "L.")).second) << op_name(o, "L.");
  for (const Op& o : b.sched.moe.bwd) EXPECT_TRUE(names.insert(op_name(o, "L.")).second) << op_name(o, "L.");
  for (const char* n : {"L.attn.qkv.fwd", "L.attn.core.fwd", "L.attn.sp.allgather.fwd", "L.moe.dispatch.a2a.fwd",
                        "L.moe.experts.fc1.fwd", "L.moe.combine.a2a.fwd", "L.moe.experts.fc1.bwd.wgrad",
                        "L.attn.qkv.bwd.dgrad", "L.attn.core.bwd", "L.attn.sp.reducescatter.bwd"})
    EXPECT_TRUE(names.count(n)) << n;
  // QKV: M = tokens (8192), N = (32 + 2·8)·128 / tp 2 = 3072, K = 4096.
  for (const Op& o : b.sched.moe.fwd) {
    if (op_name(o, "L.") == "L.attn.qkv.fwd") {
      EXPECT_EQ(o.gemm.m, 8192);
      EXPECT_EQ(o.gemm.n, 3072);
      EXPECT_EQ(o.gemm.k, 4096);
    }
    if (op_name(o, "L.") == "L.moe.experts.fc1.fwd") {
      // SP tokens 4096 per rank x top-2 = 8192 rows over 1 local expert; N = 2·14336.
      EXPECT_EQ(o.gemm.m, 8192);
      EXPECT_EQ(o.gemm.n, 28672);
      EXPECT_EQ(o.gemm.groups, 1);
    }
    if (op_name(o, "L.") == "L.moe.dispatch.a2a.fwd") {
      EXPECT_EQ(o.coll.group_size, 8);
      EXPECT_DOUBLE_EQ(o.coll.message_bytes, 4096.0 * 2 * 4096 * 2);  // T_r·k·h·2 B
    }
  }
}

}  // namespace
}  // namespace lcm
