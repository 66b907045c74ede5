// Time model on hand-computed cases (issue: time model and planner, "Done means").
#include <gtest/gtest.h>

#include <cmath>

#include "../common/test_hardware.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"

namespace lcm {
namespace {

const HardwareSpec hw = testing::test_h100();

// 8192^3 bf16: 2·8192³ FLOPs at 989.4 TFLOP/s x 0.8 x (8192/8256)³ (saturation in m, n and
// k with gemm_dim_half = 64); 8192 is a whole number of 128 x 256 tiles, so no edge waste,
// and there is no wave term. FP8: its own peak fraction (gemm_fp8) of the FP8 peak, and the
// k half-point doubles (the k loop runs twice as fast per clock): (8192/8320) in k.
TEST(TimingGemm, OneLargeGemm) {
  const GemmShape g{8192, 8192, 8192, 1};
  const double shape = 8192.0 / 8256.0;
  const double eff = 0.8 * shape * shape * shape;
  const double expected = 2.0 * 8192.0 * 8192.0 * 8192.0 / (989.4e12 * eff);
  EXPECT_NEAR(gemm_efficiency(g, hw), eff, 1e-12);
  EXPECT_NEAR(gemm_time(g, DType::kBf16, hw), expected, 1e-12);
  const double eff8 = hw.efficiency.gemm_fp8 * shape * shape * (8192.0 / 8320.0);
  EXPECT_NEAR(gemm_time(g, DType::kFp8, hw), 2.0 * 8192.0 * 8192.0 * 8192.0 / (1978.9e12 * eff8), 1e-12);
}

// A partial edge tile costs a full one: m = 8192 + 1 rows run as 65 tiles of 128.
TEST(TimingGemm, EdgeTileCostsAFullTile) {
  const GemmShape g{8193, 8192, 8192, 1};
  const double eff = 0.8 * (8193.0 / 8257.0) * (8192.0 / 8256.0) * (8192.0 / 8256.0) * (8193.0 / (65.0 * 128.0));
  EXPECT_NEAR(gemm_efficiency(g, hw), eff, 1e-12);
}

// A skinny GEMM (K = 128) loses to the shape curve: 128/(128+64) = 2/3 on K alone.
TEST(TimingGemm, SkinnyGemmIsSlowerPerFlop) {
  const GemmShape big{8192, 8192, 8192, 1}, skinny{8192, 8192, 128, 1};
  const double per_flop_big = gemm_time(big, DType::kBf16, hw) / (8192.0 * 8192 * 8192);
  const double per_flop_skinny = gemm_time(skinny, DType::kBf16, hw) / (8192.0 * 8192 * 128);
  EXPECT_NEAR(per_flop_skinny / per_flop_big, (8192.0 / 8256.0) / (128.0 / 192.0), 1e-9);
}

// Ring all-reduce of 1 GiB over 8 GPUs: inside one node (NVLink) vs one GPU on each of 8
// nodes (NIC-bound). t = 2(n-1)·alpha + 2(n-1)/n · S / busbw.
TEST(TimingCollective, RingAllReduceNodeVsNodes) {
  const double S = 1024.0 * 1024 * 1024;
  const CollectiveShape ar{Collective::kAllReduce, CommDim::kDp, 8, S};
  const double nvl = 450e9 * 0.82 * S / (S + 8.0 * (1 << 20));
  const double nic = 50e9 * 0.92 * S / (S + 4.0 * (1 << 20));
  const double intra = 14 * 5e-6 + 2.0 * 7 / 8 * S / nvl;
  const double inter = 14 * 10e-6 + 2.0 * 7 / 8 * S / nic;
  EXPECT_NEAR(collective_time(ar, GroupTopology{8, 1, 8}, hw), intra, 1e-12);
  EXPECT_NEAR(collective_time(ar, GroupTopology{8, 8, 1}, hw), inter, 1e-12);
  EXPECT_GT(inter / intra, 7.0);  // 8x less bandwidth per GPU across nodes
  // 2 nodes x 8 GPUs: each node drives 8 NICs, so bandwidth is min(NVLink, 8 NICs).
  const CollectiveShape ar16{Collective::kAllReduce, CommDim::kDp, 16, S};
  const double bw16 = std::min(nvl, 8 * nic);
  EXPECT_NEAR(collective_time(ar16, GroupTopology{16, 2, 8}, hw), 30 * 10e-6 + 2.0 * 15 / 16 * S / bw16, 1e-12);
}

// All-to-all of S bytes per rank over 16 ranks on 2 nodes: 7/16 of S over NVLink, 8/16
// through the rank's own NIC, concurrently; the NIC share dominates.
TEST(TimingCollective, AllToAllCrossingNodes) {
  const double S = 256.0 * 1024 * 1024;
  const CollectiveShape a2a{Collective::kAllToAll, CommDim::kEp, 16, S};
  const double nvl = 450e9 * 0.82 * S / (S + 8.0 * (1 << 20));
  const double nic = 50e9 * 0.92 * S / (S + 4.0 * (1 << 20));
  const double expected = 10e-6 + std::max(S * 7 / 16 / nvl, S * 8 / 16 / nic);
  EXPECT_NEAR(collective_time(a2a, GroupTopology{16, 2, 8}, hw), expected, 1e-12);
  const CollectiveShape a2a8{Collective::kAllToAll, CommDim::kEp, 8, S};
  EXPECT_NEAR(collective_time(a2a8, GroupTopology{8, 1, 8}, hw), 5e-6 + S * 7 / 8 / nvl, 1e-12);
}

// ---------------------------------------------------------------------------------
// Pipeline schedule and CP overlap on synthetic schedules whose op times are known:
// a memory-bound op of B bytes takes B / (3.35e12 · 0.85) s.
// ---------------------------------------------------------------------------------
constexpr double kHbm = 3.35e12 * 0.85;

Op mem(double seconds, Pass pass) {
  Op o;
  o.kind = OpKind::kMemoryBound;
  o.pass = pass;
  o.mem.bytes = seconds * kHbm;
  return o;
}

Scenario pipeline_scenario(int pp, int micro_batches) {
  Scenario s;
  s.hardware = hw;
  s.num_gpus = pp;
  s.training.global_batch_size = micro_batches;
  s.training.seq_length = 1024;
  s.parallel.pipeline_model_parallel_size = pp;
  return s;
}

Schedule uniform_schedule(int pp, int vp, int m, double f, double b) {
  Schedule sch;
  sch.num_micro_batches = m;
  sch.vp = vp;
  sch.dense.fwd = {mem(f, Pass::kFwd)};
  sch.dense.bwd = {mem(b, Pass::kBwd)};
  for (int r = 0; r < pp; ++r) {
    StageSchedule st;
    st.stage = r;
    st.dense = 1;
    sch.stages.push_back(st);
  }
  return sch;
}

TEST(StepTime, OneFOneBBubble) {
  // p = 4, m = 8, F = 1 ms, B = 2 ms: (m + p - 1)(F + B) = 33 ms, bubble (p-1)(F+B) = 9 ms.
  const Scenario s = pipeline_scenario(4, 8);
  Mesh m;
  m.world = 4;
  m.pp = 4;
  m.num_micro_batches = 8;
  const StepTime t = step_time(s, m, uniform_schedule(4, 1, 8, 1e-3, 2e-3), Flops{});
  EXPECT_NEAR(t.pipeline, 33e-3, 1e-9);
  EXPECT_NEAR(t.bubble, 9e-3, 1e-9);
  EXPECT_NEAR(t.bubble / t.pipeline, 3.0 / 11.0, 1e-9);  // (p-1)/(m+p-1)
}

TEST(StepTime, InterleavedBubbleShrinksByVp) {
  // Same work split into vp = 2 chunks per rank: bubble (p-1)(F+B)/vp = 4.5 ms.
  const Scenario s = pipeline_scenario(4, 8);
  Mesh m;
  m.world = 4;
  m.pp = 4;
  m.vp = 2;
  m.num_micro_batches = 8;
  const StepTime t = step_time(s, m, uniform_schedule(4, 2, 8, 1e-3, 2e-3), Flops{});
  EXPECT_NEAR(t.bubble, 4.5e-3, 1e-9);
  EXPECT_NEAR(t.pipeline, 24e-3 + 4.5e-3, 1e-9);
}

// CP ring: c-1 KV exchanges run under the attention core. With attention 2 ms and the
// ring 1.5 ms all of it hides; with a ring of 3 ms, 1 ms is exposed.
Op attention_op(double seconds) {
  Op a;
  a.id = OpId::kAttnCore;
  a.kind = OpKind::kAttention;
  a.attn.seq_kv = 3584;
  a.attn.work_fraction = 1.0;
  const double eff = 0.65 * 3584.0 / (3584.0 + 512.0);  // attention_seq_half = 512
  a.flops = seconds * 989.4e12 * eff;
  return a;
}

// A CP p2p of one neighbour inside a node: t = alpha + S / (peak · S/(S+half))
// = alpha + (S + half)/peak, so S = (t - alpha)·peak - half.
Op ring_op(double seconds) {
  Op r;
  r.id = OpId::kAttnCpKvP2p;
  r.kind = OpKind::kSendRecv;
  r.overlappable = true;
  r.coll = CollectiveShape{Collective::kSendRecv, CommDim::kCp, 2, 0};
  r.coll.message_bytes = (seconds - 5e-6) * 450e9 * 0.82 - 8.0 * (1 << 20);
  return r;
}

TEST(StepTime, CpRingHiddenVsExposed) {
  Scenario s = pipeline_scenario(1, 1);
  s.num_gpus = 2;
  s.parallel.context_parallel_size = 2;
  Mesh m;
  m.world = 2;
  m.cp = 2;  // the CP pair shares a node: the ring runs over NVLink
  m.num_micro_batches = 1;
  Schedule hidden = uniform_schedule(1, 1, 1, 0, 0), exposed = hidden;
  hidden.dense.fwd = {ring_op(1.5e-3), attention_op(2e-3)};
  exposed.dense.fwd = {ring_op(3e-3), attention_op(2e-3)};
  const StepTime th = step_time(s, m, hidden, Flops{});
  const StepTime te = step_time(s, m, exposed, Flops{});
  const size_t cp = static_cast<size_t>(CommDim::kCp);
  EXPECT_NEAR(th.step_s, 2e-3, 1e-9);
  EXPECT_NEAR(th.stages[0].hidden_comm[cp], 1.5e-3, 1e-9);
  EXPECT_NEAR(th.stages[0].exposed_comm[cp], 0.0, 1e-12);
  EXPECT_NEAR(te.step_s, 3e-3, 1e-9);
  EXPECT_NEAR(te.stages[0].exposed_comm[cp], 1e-3, 1e-9);
}

}  // namespace
}  // namespace lcm
