// The op contract's name tables (ops.hpp): one name per id, names unique, lookups both
// ways, full names read back, and the MoE GEMM shapes the schedule, calibration and the
// executor share.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lcm/model/ops.hpp"

namespace lcm {
namespace {

TEST(OpNames, EveryIdHasOneUniqueName) {
  std::set<std::string> names;
  for (size_t i = 1; i < kNumOpIds; ++i) {
    const auto id = static_cast<OpId>(i);
    const std::string n = to_string(id);
    EXPECT_FALSE(n.empty()) << i;
    EXPECT_TRUE(names.insert(n).second) << n;
    EXPECT_EQ(op_id_named(n), id) << n;
  }
  EXPECT_EQ(names.size(), kNumOpIds - 1);
  EXPECT_FALSE(op_id_named("").has_value());
  EXPECT_FALSE(op_id_named("attn.qkv.fwd").has_value());
  EXPECT_STREQ(to_string(OpId::kAttnQkv), "attn.qkv");
  EXPECT_STREQ(to_string(OpId::kMoeExpertsFc1Fp8Cast), "moe.experts.fc1.fp8cast");
  EXPECT_STREQ(to_string(OpId::kDpParamsAllGatherBwd), "dp.params.allgather.bwd");
}

TEST(OpNames, EveryCommItemHasOneUniqueName) {
  std::set<std::string> names;
  for (size_t i = 1; i < kNumCommItemIds; ++i) {
    const auto id = static_cast<CommItemId>(i);
    const std::string n = to_string(id);
    EXPECT_TRUE(names.insert(n).second) << n;
    EXPECT_EQ(comm_item_named(n), id) << n;
  }
  EXPECT_EQ(names.size(), 32u);  // docs/communication-model.md §9
  EXPECT_STREQ(to_string(CommItemId::kTpSpAllGather), "tp.sp.allgather");
  EXPECT_STREQ(to_string(CommItemId::kEmbAllReduceGrads), "emb.allreduce.grads");
  EXPECT_FALSE(comm_item_named("tp.sp").has_value());
}

TEST(OpNames, FullNamesReadBack) {
  const auto wgrad = parse_op_name("L.moe.experts.fc1.bwd.wgrad");
  ASSERT_TRUE(wgrad);
  EXPECT_STREQ(wgrad->prefix, kLayerPrefix);
  EXPECT_EQ(wgrad->id, OpId::kMoeExpertsFc1);
  EXPECT_EQ(wgrad->pass, Pass::kBwd);
  EXPECT_EQ(wgrad->part, GemmPart::kWgrad);

  const auto rc = parse_op_name("L.attn.core.recompute");
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->id, OpId::kAttnCore);
  EXPECT_EQ(rc->pass, Pass::kRecompute);
  EXPECT_EQ(rc->part, GemmPart::kNone);

  const auto mtp = parse_op_name("MTP.mtp.eh_proj.fwd");
  ASSERT_TRUE(mtp);
  EXPECT_STREQ(mtp->prefix, kMtpPrefix);
  EXPECT_EQ(mtp->id, OpId::kMtpEhProj);

  // A step op has no suffix, even where its base ends in ".bwd".
  const auto step = parse_op_name("dp.params.allgather.bwd");
  ASSERT_TRUE(step);
  EXPECT_STREQ(step->prefix, "");
  EXPECT_EQ(step->id, OpId::kDpParamsAllGatherBwd);
  EXPECT_EQ(step->pass, Pass::kStep);
  const auto grad = parse_op_name("pp.send.grad.bwd");
  ASSERT_TRUE(grad);
  EXPECT_EQ(grad->id, OpId::kPpSendGrad);
  EXPECT_EQ(grad->pass, Pass::kBwd);

  for (const char* bad : {"", "L.", "L.attn.qkv", "L.nope.fwd", "L.attn.qkv.bwd.xgrad", "X.attn.qkv.fwd"})
    EXPECT_FALSE(parse_op_name(bad).has_value()) << bad;
  EXPECT_EQ(op_name(OpId::kAttnQkv, Pass::kBwd, GemmPart::kDgrad, kLayerPrefix), "L.attn.qkv.bwd.dgrad");
  EXPECT_EQ(op_name(OpId::kOptimizerStep, Pass::kStep, GemmPart::kNone, ""), "optimizer.step");
}

// Mixtral 8x7B expert GEMMs (h 4096, f 14336, SwiGLU) on 8192 token copies, 2 local experts;
// the router 4096 tokens x 8 experts. Backward: dgrad (m, k, n), wgrad (k, n, m) split over
// the experts' tokens.
TEST(OpShapes, MoeGemms) {
  const GemmShape fc1 = moe_fc1_shape(8192, 4096, 14336, true, 2);
  EXPECT_EQ(fc1.m, 8192);
  EXPECT_EQ(fc1.n, 28672);
  EXPECT_EQ(fc1.k, 4096);
  EXPECT_EQ(fc1.groups, 2);
  const GemmShape fc2 = moe_fc2_shape(8192, 4096, 14336 / 2.0, 2);  // ETP 2
  EXPECT_EQ(fc2.n, 4096);
  EXPECT_EQ(fc2.k, 7168);
  const GemmShape router = moe_router_shape(4096, 4096, 8);
  EXPECT_EQ(router.m, 4096);
  EXPECT_EQ(router.n, 8);
  EXPECT_EQ(router.k, 4096);
  EXPECT_EQ(router.groups, 1);
  const GemmShape dg = gemm_in_pass(fc1, GemmPart::kDgrad), wg = gemm_in_pass(fc1, GemmPart::kWgrad);
  EXPECT_EQ(dg.n, 4096);
  EXPECT_EQ(dg.k, 28672);
  EXPECT_FALSE(dg.split_k);
  EXPECT_EQ(wg.m, 4096);
  EXPECT_EQ(wg.n, 28672);
  EXPECT_EQ(wg.k, 8192);
  EXPECT_TRUE(wg.split_k);
  EXPECT_EQ(gemm_in_pass(fc1, GemmPart::kNone).n, 28672);
}

}  // namespace
}  // namespace lcm
