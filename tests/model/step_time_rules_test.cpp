// The composition rules of the step time (model/src/step_time.cpp), one test each, on
// synthetic op lists and stage inputs small enough to derive by hand (issue 12, "Fidelity").
// docs/time-model.md, "Composition rules", lists each rule with its formula and the test
// that pins it.
//
// Op times come from a "unit" hardware profile on which every op costs a round number of
// milliseconds: all efficiencies 1, no saturation curves, no latencies, so
//   GEMM m x 1 x 1          2m FLOPs at 2e3 FLOP/s      = m ms
//   memory-bound, B bytes   B / 1e3 B/s                 = B ms
//   attention, F FLOPs      F / 2e3 FLOP/s (s_kv = 1)   = F/2 ms
//   collective of S bytes   S · busfactor / 1e3 B/s     (ring: all-reduce 2(n-1)/n,
//                           all-gather / reduce-scatter (n-1)/n; all-to-all (n-1)/n on one
//                           node; send/recv 1)
// The builders below invert these, and UnitHardwareOpTimes checks them.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "lcm/model/pipeline_schedule.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"
#include "step_compose.hpp"  // model/src: compose_step_time, stage_microbatch_time

namespace lcm {
namespace {

constexpr double kMs = 1e-3;
constexpr double kTol = 1e-12;  // seconds; every value below is a few ms

size_t at(CommDim d) { return static_cast<size_t>(d); }
size_t at(OpClass c) { return static_cast<size_t>(c); }

HardwareSpec unit_hw() {
  HardwareSpec hw;
  hw.name = "unit";
  hw.gpu.peak_bf16_flops = 2e3;
  hw.gpu.peak_fp8_flops = 4e3;
  hw.gpu.hbm_bw = 1e3;
  hw.gpu.num_sms = 132;
  hw.interconnect.gpus_per_node = 8;
  hw.interconnect.nvlink_bw = 1e3;
  hw.interconnect.nic_bw = 1e3;
  hw.interconnect.nvlink_latency = 0;
  hw.interconnect.nic_latency = 0;
  EfficiencySpec& e = hw.efficiency;
  e.gemm = e.gemm_fp8 = e.attention_fwd = e.attention_bwd = e.hbm = e.hbm_elementwise = e.nvlink = e.nic = 1;
  e.gemm_dim_half = 0;
  e.gemm_tile_m = e.gemm_tile_n = 1;
  e.attention_seq_half = 0;
  e.nvlink_half_bytes = e.nic_half_bytes = 0;
  e.kernel_fixed = 0;
  e.collective_base = 0;
  return hw;
}

// Every group on one node with up to 8 ranks (op_time narrows it to the op's group size).
MeshTopology one_node() {
  MeshTopology t;
  for (GroupTopology& g : t.dim) g = GroupTopology{8, 1, 8};
  t.expert_tp = t.expert_tp_ep = GroupTopology{8, 1, 8};
  return t;
}

Op gemm(int64_t ms, int calls = 1) {
  Op o;
  o.kind = OpKind::kGemm;
  o.gemm = GemmShape{ms, 1, 1};
  o.calls = calls;
  return o;
}

Op mem(double ms, int calls = 1) {
  Op o;
  o.kind = OpKind::kMemoryBound;
  o.mem.bytes = ms;
  o.calls = calls;
  return o;
}

Op attn(double ms) {
  Op o;
  o.kind = OpKind::kAttention;
  o.attn.seq_kv = 1;
  o.flops = 2 * ms;
  return o;
}

// One call of `kind` over n ranks on one node taking `ms`: S = ms / busfactor.
Op coll(Collective kind, CommDim dim, int n, double ms, bool overlappable = false, int calls = 1) {
  Op o;
  o.kind = kind == Collective::kSendRecv ? OpKind::kSendRecv : OpKind::kCollective;
  o.coll.kind = kind;
  o.coll.dim = dim;
  o.coll.group_size = n;
  const double bus = kind == Collective::kAllReduce  ? 2.0 * (n - 1) / n
                     : kind == Collective::kSendRecv ? 1.0
                                                     : (n - 1.0) / n;
  o.coll.message_bytes = ms / bus;
  o.overlappable = overlappable;
  o.calls = calls;
  return o;
}

PassTime pass(const std::vector<Op>& ops, bool tp_overlap = false, bool ep_overlap = false) {
  ParallelSpec par;
  par.tp_comm_overlap = tp_overlap;
  par.overlap_moe_expert_parallel_comm = ep_overlap;
  return pass_time(ops, par, one_node(), unit_hw());
}

// A hand-made PassTime: compute per class plus communication of one dimension.
PassTime timed(double gemm_ms, double attn_ms = 0, double mem_ms = 0) {
  PassTime p;
  p.compute = {gemm_ms * kMs, attn_ms * kMs, mem_ms * kMs};
  p.total = (gemm_ms + attn_ms + mem_ms) * kMs;
  return p;
}
PassTime with_comm(PassTime p, CommDim d, double exposed_ms, double hidden_ms) {
  p.exposed[at(d)] += exposed_ms * kMs;
  p.hidden[at(d)] += hidden_ms * kMs;
  p.total += exposed_ms * kMs;
  return p;
}

StepOpTime step_op(double ms, StepOpRole role, int calls = 1) { return StepOpTime{ms * kMs, role, calls}; }

// The step terms summed: they must add up to the step.
double terms_sum(const StepTime& t) {
  double sum = 0;
  for (const StepTerm& term : step_terms(t)) sum += term.seconds;
  return sum;
}

// Stage inputs whose edge lists carry the given pass times (owned here, so pointers stay valid).
struct Stage {
  PassTime pre_fwd, post_fwd, post_bwd, pre_bwd;
  std::vector<StepOpTime> step;
  StageInputs in;
  StageInputs& link() {
    in.pre_fwd = &pre_fwd;
    in.post_fwd = &post_fwd;
    in.post_bwd = &post_bwd;
    in.pre_bwd = &pre_bwd;
    in.step = step.data();
    in.num_step = static_cast<int>(step.size());
    return in;
  }
};

// A stage whose forward and backward are its edge lists alone: F and B ms of GEMM.
Stage edge_stage(double f_ms, double b_ms, std::vector<StepOpTime> step = {}) {
  Stage s;
  s.pre_fwd = timed(f_ms);
  s.pre_bwd = timed(b_ms);
  s.step = std::move(step);
  return s;
}

struct Composer {
  LayerTimes dense, moe, mtp;
  std::vector<Stage> stages;
  std::vector<int> stage_input;  // empty: rank r uses stages[r]
  int vp = 1, m = 1;
  std::vector<StageInputs> linked;

  StepInputs inputs() {
    linked.clear();
    for (Stage& s : stages) linked.push_back(s.link());
    if (stage_input.empty())
      for (int r = 0; r < static_cast<int>(stages.size()); ++r) stage_input.push_back(r);
    StepInputs in;
    in.dense = &dense;
    in.moe = &moe;
    in.mtp = &mtp;
    in.stages = linked.data();
    in.stage_input = stage_input.data();
    in.num_ranks = static_cast<int>(stage_input.size());
    in.vp = vp;
    in.num_micro_batches = m;
    return in;
  }
  StepTime compose(const Scenario& s = scenario(), const Flops& f = Flops{}) {
    return compose_step_time(s, inputs(), f, true);
  }
  StageTime microbatch(int stage) {
    const StepInputs in = inputs();
    return stage_microbatch_time(linked[static_cast<size_t>(stage)], in);
  }
  static Scenario scenario() {
    Scenario s;
    s.hardware = unit_hw();
    s.num_gpus = 8;
    s.training.global_batch_size = 8;
    s.training.seq_length = 1024;
    return s;
  }
};

// ---------------------------------------------------------------------------------
// The fixture: the builders give the op times the comments below rely on.
// ---------------------------------------------------------------------------------
TEST(StepTimeRules, UnitHardwareOpTimes) {
  const HardwareSpec hw = unit_hw();
  const MeshTopology t = one_node();
  EXPECT_NEAR(op_time(gemm(3), t, hw), 3 * kMs, kTol);
  EXPECT_NEAR(op_time(mem(1.5), t, hw), 1.5 * kMs, kTol);
  EXPECT_NEAR(op_time(attn(2.5), t, hw), 2.5 * kMs, kTol);
  EXPECT_NEAR(op_time(coll(Collective::kAllReduce, CommDim::kTp, 4, 6), t, hw), 6 * kMs, kTol);
  EXPECT_NEAR(op_time(coll(Collective::kReduceScatter, CommDim::kTp, 4, 6), t, hw), 6 * kMs, kTol);
  EXPECT_NEAR(op_time(coll(Collective::kAllGather, CommDim::kTp, 4, 3), t, hw), 3 * kMs, kTol);
  EXPECT_NEAR(op_time(coll(Collective::kAllToAll, CommDim::kEp, 4, 3), t, hw), 3 * kMs, kTol);
  EXPECT_NEAR(op_time(coll(Collective::kSendRecv, CommDim::kPp, 2, 0.5), t, hw), 0.5 * kMs, kTol);
}

// ---------------------------------------------------------------------------------
// pass_time: one op list.
// ---------------------------------------------------------------------------------

// Rule: a pass is the sum of op_time x calls, compute per class (GEMM / attention / the
// rest memory-bound), communication exposed per dimension when no overlap rule applies
// (TP without tp_comm_overlap, EP without overlap_moe_expert_parallel_comm, CP other than
// the ring, PP).
//   GEMM 3 ms x 2 calls = 6, attention 2, memory 1.5 -> compute 9.5
//   TP all-reduce 6, PP send 0.5, EP all-to-all 2, CP all-to-all 1 -> exposed 9.5
//   total = 19 ms, nothing hidden.
TEST(StepTimeRules, PassSumsOpTimesTimesCallsPerClass) {
  const PassTime p =
      pass({gemm(3, 2), attn(2), mem(1.5), coll(Collective::kAllReduce, CommDim::kTp, 4, 6),
            coll(Collective::kSendRecv, CommDim::kPp, 2, 0.5), coll(Collective::kAllToAll, CommDim::kEp, 4, 2),
            coll(Collective::kAllToAll, CommDim::kCp, 2, 1)});
  EXPECT_NEAR(p.compute[at(OpClass::kGemm)], 6 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kAttention)], 2 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kMemoryBound)], 1.5 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kTp)], 6 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kPp)], 0.5 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kEp)], 2 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kCp)], 1 * kMs, kTol);
  for (double h : p.hidden) EXPECT_EQ(h, 0.0);
  EXPECT_NEAR(p.total, 19 * kMs, kTol);
  EXPECT_TRUE(pass({}) == PassTime{});
}

// Rule: the CP ring exchange (overlappable CP) hides under the attention core only:
// exposed max(0, ring - attention), hidden min(ring, attention); other CP collectives stay
// exposed, GEMM time does not hide the ring.
//   ring 1.5 ms x 2 calls = 3, attention 2, GEMM 5, CP all-to-all 1:
//   hidden cp = min(3, 2) = 2; exposed cp = 1 + (3 - 2) = 2; total = 5 + 2 + 2 = 9 ms.
//   ring 1 ms x 2 = 2 under attention 2: all hidden, total = 5 + 2 + 1 = 8 ms.
TEST(StepTimeRules, CpRingHidesUnderAttentionOnly) {
  const Op ring = coll(Collective::kSendRecv, CommDim::kCp, 2, 1.5, true, 2);
  const Op a2a = coll(Collective::kAllToAll, CommDim::kCp, 2, 1);
  const PassTime p = pass({ring, attn(2), gemm(5), a2a});
  EXPECT_NEAR(p.hidden[at(CommDim::kCp)], 2 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kCp)], 2 * kMs, kTol);
  EXPECT_NEAR(p.total, 9 * kMs, kTol);
  const PassTime q = pass({coll(Collective::kSendRecv, CommDim::kCp, 2, 1, true, 2), attn(2), gemm(5), a2a});
  EXPECT_NEAR(q.hidden[at(CommDim::kCp)], 2 * kMs, kTol);
  EXPECT_NEAR(q.exposed[at(CommDim::kCp)], 1 * kMs, kTol);
  EXPECT_NEAR(q.total, 8 * kMs, kTol);
  // The ring hides on the CP stream without SM contention: the GEMMs are not charged.
  EXPECT_NEAR(q.compute[at(OpClass::kGemm)], 5 * kMs, kTol);
}

// Rule: with tp_comm_overlap, TP collectives hide under the list's GEMMs except the last
// pipelined chunk (1/tp) of each reduce-scatter / all-reduce; an all-gather hides entirely.
//   tp = 4: all-gather 3, reduce-scatter 6, all-reduce 6 -> TP 15 ms;
//   last chunks 6/4 + 6/4 = 3; GEMM 20 is enough: hidden = min(20, 15 - 3) = 12, exposed 3.
//   SM contention 16/132 x 12 = 16/11 ms on the GEMMs:
//   total = 20 + 5 + 16/11 + 3 = 28 + 16/11 ms.
TEST(StepTimeRules, TpOverlapLeavesLastChunkExposed) {
  const std::vector<Op> comm = {coll(Collective::kAllGather, CommDim::kTp, 4, 3),
                                coll(Collective::kReduceScatter, CommDim::kTp, 4, 6),
                                coll(Collective::kAllReduce, CommDim::kTp, 4, 6)};
  std::vector<Op> ops = comm;
  ops.push_back(gemm(20));
  ops.push_back(attn(5));
  const PassTime p = pass(ops, true);
  EXPECT_NEAR(p.exposed[at(CommDim::kTp)], 3 * kMs, kTol);
  EXPECT_NEAR(p.hidden[at(CommDim::kTp)], 12 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kGemm)], (20 + 16.0 / 11) * kMs, kTol);
  EXPECT_NEAR(p.total, (28 + 16.0 / 11) * kMs, kTol);
  // An all-gather alone has no last chunk: 3 ms all hidden under GEMM 20.
  const PassTime ag = pass({comm[0], gemm(20)}, true);
  EXPECT_NEAR(ag.exposed[at(CommDim::kTp)], 0, kTol);
  EXPECT_NEAR(ag.hidden[at(CommDim::kTp)], 3 * kMs, kTol);
  // Without the switch all 15 ms are exposed and nothing is charged: 20 + 5 + 15 = 40 ms.
  const PassTime off = pass(ops, false);
  EXPECT_NEAR(off.exposed[at(CommDim::kTp)], 15 * kMs, kTol);
  EXPECT_NEAR(off.total, 40 * kMs, kTol);
}

// Rule: the TP budget is the list's GEMM time, not attention or memory-bound time.
//   Same 15 ms of TP (last chunks 3) under GEMM 8, attention 10, memory 2:
//   hidden = min(8, 12) = 8, exposed 7; contention 16/132 x 8 = 32/33 ms;
//   total = 8 + 10 + 2 + 32/33 + 7 = 27 + 32/33 ms.
TEST(StepTimeRules, TpOverlapBudgetIsGemmTime) {
  const PassTime p =
      pass({coll(Collective::kAllGather, CommDim::kTp, 4, 3), coll(Collective::kReduceScatter, CommDim::kTp, 4, 6),
            coll(Collective::kAllReduce, CommDim::kTp, 4, 6), gemm(8), attn(10), mem(2)},
           true);
  EXPECT_NEAR(p.hidden[at(CommDim::kTp)], 8 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kTp)], 7 * kMs, kTol);
  EXPECT_NEAR(p.total, (27 + 32.0 / 33) * kMs, kTol);
}

// Rule: with overlap_moe_expert_parallel_comm, EP all-to-alls hide under all of the
// list's compute (GEMM, attention, memory-bound); the switch leaves TP alone.
//   EP 3 + 3 = 6 ms under compute 2 + 1 + 1 = 4: hidden 4, exposed 2;
//   TP all-reduce 1 stays exposed; contention 16/132 x 4 = 16/33 ms;
//   total = 4 + 16/33 + 2 + 1 = 7 + 16/33 ms.
//   EP 3 ms under compute 4: all hidden; total = 4 + 16/132 x 3 = 4 + 4/11 ms.
TEST(StepTimeRules, EpOverlapHidesUnderAllCompute) {
  const Op a2a = coll(Collective::kAllToAll, CommDim::kEp, 4, 3);
  const PassTime p =
      pass({a2a, gemm(2), attn(1), mem(1), a2a, coll(Collective::kAllReduce, CommDim::kTp, 2, 1)}, false, true);
  EXPECT_NEAR(p.hidden[at(CommDim::kEp)], 4 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kEp)], 2 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kTp)], 1 * kMs, kTol);
  EXPECT_NEAR(p.total, (7 + 16.0 / 33) * kMs, kTol);
  const PassTime q = pass({a2a, gemm(2), attn(1), mem(1)}, false, true);
  EXPECT_NEAR(q.hidden[at(CommDim::kEp)], 3 * kMs, kTol);
  EXPECT_NEAR(q.exposed[at(CommDim::kEp)], 0, kTol);
  EXPECT_NEAR(q.total, (4 + 4.0 / 11) * kMs, kTol);
  // Without the switch: 3 ms exposed, nothing charged, total 7 ms.
  EXPECT_NEAR(pass({a2a, gemm(2), attn(1), mem(1)}).total, 7 * kMs, kTol);
}

// Rule: hidden TP and EP time charges 16/132 of itself to the GEMM class (SM contention);
// hidden CP time (the ring) is not charged, and nothing goes to attention / memory-bound.
//   GEMM 20, attention 2; TP reduce-scatter 8 (tp 4, last chunk 2): hidden min(20, 6) = 6,
//   exposed 2; EP all-to-all 5 under compute 22: hidden 5; CP ring 1 under attention 2.
//   contention = 16/132 x (6 + 5) = 4/3 ms; GEMM = 20 + 4/3; attention 2;
//   total = 22 + 4/3 + 2 = 25 + 1/3 ms.
TEST(StepTimeRules, HiddenTpAndEpChargeSmContentionToGemms) {
  const PassTime p =
      pass({gemm(20), attn(2), coll(Collective::kReduceScatter, CommDim::kTp, 4, 8),
            coll(Collective::kAllToAll, CommDim::kEp, 4, 5), coll(Collective::kSendRecv, CommDim::kCp, 2, 1, true)},
           true, true);
  EXPECT_NEAR(p.hidden[at(CommDim::kTp)], 6 * kMs, kTol);
  EXPECT_NEAR(p.hidden[at(CommDim::kEp)], 5 * kMs, kTol);
  EXPECT_NEAR(p.hidden[at(CommDim::kCp)], 1 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kGemm)], (20 + 4.0 / 3) * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kAttention)], 2 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kMemoryBound)], 0, kTol);
  EXPECT_NEAR(p.total, (25 + 1.0 / 3) * kMs, kTol);
}

// Rule: every compute kernel pays kernel_fixed on top of its roofline time (a grouped GEMM
// once per group, an op with calls once per call); a collective pays collective_base per
// call instead, and communication never pays kernel_fixed.
//   kernel_fixed 0.25 ms, collective_base 0.1 ms:
//   GEMM 3 -> 3.25; grouped GEMM 8 rows in 4 groups (8 ms) -> 8 + 4 x 0.25 = 9;
//   attention 2 -> 2.25; memory 1 x 3 calls -> 3 x 1.25 = 3.75;
//   TP all-reduce 2 x 2 calls -> 2 x 2.1 = 4.2 (exposed);
//   total = 3.25 + 9 + 2.25 + 3.75 + 4.2 = 22.45 ms; GEMM class 12.25.
TEST(StepTimeRules, KernelFixedTimePerKernel) {
  HardwareSpec hw = unit_hw();
  hw.efficiency.kernel_fixed = 0.25 * kMs;
  hw.efficiency.collective_base = 0.1 * kMs;
  Op grouped = gemm(8);
  grouped.gemm.groups = 4;
  Op ar = coll(Collective::kAllReduce, CommDim::kTp, 2, 2);
  ar.calls = 2;
  const PassTime p = pass_time({gemm(3), grouped, attn(2), mem(1, 3), ar}, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(p.compute[at(OpClass::kGemm)], 12.25 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kAttention)], 2.25 * kMs, kTol);
  EXPECT_NEAR(p.compute[at(OpClass::kMemoryBound)], 3.75 * kMs, kTol);
  EXPECT_NEAR(p.exposed[at(CommDim::kTp)], 4.2 * kMs, kTol);
  EXPECT_NEAR(p.total, 22.45 * kMs, kTol);
}

// overlaps_compute (the predicted trace's placement) agrees with pass_time's rules.
TEST(StepTimeRules, OverlapsComputeMatchesPassRules) {
  ParallelSpec off, on;
  on.tp_comm_overlap = on.overlap_moe_expert_parallel_comm = true;
  const Op ring = coll(Collective::kSendRecv, CommDim::kCp, 2, 1, true);
  const Op tp = coll(Collective::kReduceScatter, CommDim::kTp, 4, 1);
  const Op ep = coll(Collective::kAllToAll, CommDim::kEp, 4, 1);
  const Op pp = coll(Collective::kSendRecv, CommDim::kPp, 2, 1, true);
  EXPECT_TRUE(overlaps_compute(ring, off));
  EXPECT_FALSE(overlaps_compute(coll(Collective::kAllToAll, CommDim::kCp, 2, 1), on));
  EXPECT_FALSE(overlaps_compute(tp, off));
  EXPECT_TRUE(overlaps_compute(tp, on));
  EXPECT_FALSE(overlaps_compute(ep, off));
  EXPECT_TRUE(overlaps_compute(ep, on));
  EXPECT_FALSE(overlaps_compute(pp, on));
  EXPECT_FALSE(overlaps_compute(gemm(1), on));
}

// ---------------------------------------------------------------------------------
// stage_microbatch_time: one pipeline rank, one micro-batch.
// ---------------------------------------------------------------------------------

// Rule: the forward is pre_fwd + dense x dense.fwd + moe x moe.fwd + mtp x mtp.fwd +
// post_fwd; the backward is post_bwd + recomputed layers' recompute + every layer's
// backward + pre_bwd (recompute counts in the backward).
//   dense fwd/rec/bwd 1/0.5/2, moe 3/1.5/6, mtp 4/2/8 ms; edges 0.25, 0.75, 1.25, 0.125;
//   counts dense 2 (1 recomputed), moe 3 (2 recomputed), mtp 2 (1 recomputed):
//   F = 0.25 + 2x1 + 3x3 + 2x4 + 0.75 = 20 ms
//   B = 1.25 + 1x2 + 2x8 + 2x1.5 + 3x6 + 1x0.5 + 2x2 + 0.125 = 44.875 ms
//   compute by class: the dense lists are attention, the rest GEMM:
//   attention = 2x1 + 0.5 + 2x2 = 6.5, GEMM = 20 + 44.875 - 6.5 = 58.375 ms.
TEST(StepTimeRules, StageSumsItsListsInExecutionOrder) {
  Composer c;
  c.m = 4;
  c.dense = {timed(0, 1), timed(0, 0.5), timed(0, 2)};
  c.moe = {timed(3), timed(1.5), timed(6)};
  c.mtp = {timed(4), timed(2), timed(8)};
  Stage s;
  s.pre_fwd = timed(0.25);
  s.post_fwd = timed(0.75);
  s.post_bwd = timed(1.25);
  s.pre_bwd = timed(0.125);
  s.in.dense = 2;
  s.in.dense_recomputed = 1;
  s.in.moe = 3;
  s.in.moe_recomputed = 2;
  s.in.mtp = 2;
  s.in.mtp_recomputed = 1;
  c.stages = {s};
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.fwd, 20 * kMs, kTol);
  EXPECT_NEAR(t.bwd, 44.875 * kMs, kTol);
  EXPECT_NEAR(t.compute[at(OpClass::kAttention)], 6.5 * kMs, kTol);
  EXPECT_NEAR(t.compute[at(OpClass::kGemm)], 58.375 * kMs, kTol);
  // m = 4, one stage: the step is 4 x (20 + 44.875) = 259.5 ms.
  EXPECT_NEAR(c.compose().step_s, 259.5 * kMs, 1e-11);
}

// Rule: with interleaving (vp > 1) pipeline send/recv is hidden (--overlap-p2p-comm).
//   pre_fwd: PP receive 1 ms; post_fwd: GEMM 1 + PP send 0.5; a dense layer: GEMM 2 fwd,
//   4 bwd; post_bwd: PP 0.5; pre_bwd: PP 1 + GEMM 1.
//   vp = 1: F = 1 + 2 + 1.5 = 4.5, B = 0.5 + 4 + 2 = 6.5, exposed PP 3.
//   vp = 2: F = 3, B = 5, exposed PP 0, hidden PP 3.
TEST(StepTimeRules, InterleavingHidesPipelineP2p) {
  Composer c;
  c.m = 4;
  c.dense = {timed(2), {}, timed(4)};
  Stage s;
  s.pre_fwd = with_comm({}, CommDim::kPp, 1, 0);
  s.post_fwd = with_comm(timed(1), CommDim::kPp, 0.5, 0);
  s.post_bwd = with_comm({}, CommDim::kPp, 0.5, 0);
  s.pre_bwd = with_comm(timed(1), CommDim::kPp, 1, 0);
  s.in.dense = 1;
  c.stages = {s};
  const StageTime t1 = c.microbatch(0);
  EXPECT_NEAR(t1.fwd, 4.5 * kMs, kTol);
  EXPECT_NEAR(t1.bwd, 6.5 * kMs, kTol);
  EXPECT_NEAR(t1.exposed_comm[at(CommDim::kPp)], 3 * kMs, kTol);
  EXPECT_NEAR(t1.hidden_comm[at(CommDim::kPp)], 0, kTol);
  c.vp = 2;
  const StageTime t2 = c.microbatch(0);
  EXPECT_NEAR(t2.fwd, 3 * kMs, kTol);
  EXPECT_NEAR(t2.bwd, 5 * kMs, kTol);
  EXPECT_NEAR(t2.exposed_comm[at(CommDim::kPp)], 0, kTol);
  EXPECT_NEAR(t2.hidden_comm[at(CommDim::kPp)], 3 * kMs, kTol);
}

// Rule: hidden EP all-to-all time pairs one micro-batch's forward with another's backward;
// the step's first forward and last backward have no partner, so 1/m of each pass's hidden
// EP time is exposed per micro-batch (forward and backward separately).
//   moe fwd: compute 4, EP hidden 2; moe bwd: compute 8, EP hidden 3 + exposed 1; 2 layers.
//   m = 4: F: hidden 4 -> 1 exposed, 3 hidden; F = 8 + 1 = 9 ms.
//          B: hidden 6 -> 1.5 exposed; exposed 2 + 1.5 = 3.5, hidden 4.5; B = 16 + 3.5 = 19.5 ms.
//   m = 1: nothing is paired: F = 8 + 4 = 12, B = 16 + 2 + 6 = 24 ms.
TEST(StepTimeRules, UnpairedEpAllToAllsAreExposed) {
  Composer c;
  c.moe = {with_comm(timed(4), CommDim::kEp, 0, 2), {}, with_comm(timed(8), CommDim::kEp, 1, 3)};
  Stage s;
  s.in.moe = 2;
  c.stages = {s};
  c.m = 4;
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.fwd, 9 * kMs, kTol);
  EXPECT_NEAR(t.bwd, 19.5 * kMs, kTol);
  EXPECT_NEAR(t.exposed_comm[at(CommDim::kEp)], (1 + 3.5) * kMs, kTol);
  EXPECT_NEAR(t.hidden_comm[at(CommDim::kEp)], (3 + 4.5) * kMs, kTol);
  c.m = 1;
  const StageTime t1 = c.microbatch(0);
  EXPECT_NEAR(t1.fwd, 12 * kMs, kTol);
  EXPECT_NEAR(t1.bwd, 24 * kMs, kTol);
  EXPECT_NEAR(t1.hidden_comm[at(CommDim::kEp)], 0, kTol);
}

// ---------------------------------------------------------------------------------
// Once-per-step ops: roles, the DP overlap window, the optimizer.
// ---------------------------------------------------------------------------------

// Rule: a step op's time is op_time x calls; memory-bound ops are the optimizer,
// non-overlappable collectives are exposed, overlappable all-gathers hide under the
// forward except ZeRO-3's re-gather for the backward (dp / edp.params.allgather.bwd),
// which hides under the backward with the other overlappable collectives.
//   DP reduce-scatter over 2 ranks, 1.5 ms x 4 calls = 6 ms.
TEST(StepTimeRules, StepOpRoles) {
  const std::vector<StepOpTime> t = step_op_times({mem(2), coll(Collective::kAllReduce, CommDim::kDp, 2, 3),
                                                   coll(Collective::kReduceScatter, CommDim::kDp, 2, 1.5, true, 4),
                                                   coll(Collective::kAllGather, CommDim::kEdp, 2, 1, true),
                                                   coll(Collective::kAllReduce, CommDim::kEmb, 2, 0.5, true)},
                                                  one_node(), unit_hw());
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].role, StepOpRole::kOptimizer);
  EXPECT_EQ(t[1].role, StepOpRole::kExposed);
  EXPECT_EQ(t[2].role, StepOpRole::kUnderBackward);
  EXPECT_EQ(t[3].role, StepOpRole::kUnderForward);
  EXPECT_EQ(t[4].role, StepOpRole::kUnderBackward);
  EXPECT_NEAR(t[0].time, 2 * kMs, kTol);
  EXPECT_NEAR(t[1].time, 3 * kMs, kTol);
  EXPECT_NEAR(t[2].time, 6 * kMs, kTol);
  EXPECT_EQ(t[2].calls, 4);
  EXPECT_NEAR(t[3].time, 1 * kMs, kTol);
  Op dp_regather = coll(Collective::kAllGather, CommDim::kDp, 2, 1, true, 4);
  dp_regather.id = OpId::kDpParamsAllGatherBwd;
  Op edp_regather = coll(Collective::kAllGather, CommDim::kEdp, 2, 1, true, 4);
  edp_regather.id = OpId::kEdpParamsAllGatherBwd;
  Op dp_gather = dp_regather;
  dp_gather.id = OpId::kDpParamsAllGather;
  const std::vector<StepOpTime> z = step_op_times({dp_regather, edp_regather, dp_gather}, one_node(), unit_hw());
  EXPECT_EQ(z[0].role, StepOpRole::kUnderBackward);
  EXPECT_EQ(z[1].role, StepOpRole::kUnderBackward);
  EXPECT_EQ(z[2].role, StepOpRole::kUnderForward);
}

// Rule (DP overlap window): an overlappable step collective of time T hides
// min(T - T/L, window) with L = max(1, dense + moe) layers on the rank (the last bucket,
// one layer's share, stays exposed) and window = (B for gradients, F for parameters) x calls;
// the rest is exposed. Optimizer and non-overlappable ops add in full.
//   3 dense + 1 MoE layer (L = 4); F = 3 x 0.5 + 0.5 = 2, B = 3 x 1 + 2 = 5 ms; m = 4.
//   optimizer 0.7                                         -> optimizer 0.7
//   exposed 0.3                                           -> exposed 0.3
//   grads 8, 1 call:   tail 2, hidden min(6, 5) = 5       -> exposed 3
//   params 4, 1 call:  tail 1, hidden min(3, 2) = 2       -> exposed 2
//   grads 8, 4 calls:  tail 2, hidden min(6, 4 x 5) = 6   -> exposed 2
//   params 2, 1 call:  tail 0.5, hidden min(1.5, 2) = 1.5 -> exposed 0.5
//   dp_exposed = 7.8, dp_hidden = 14.5; step = 4 x 7 + 7.8 + 0.7 = 36.5 ms.
TEST(StepTimeRules, DpOverlapWindowAndLastBucket) {
  Composer c;
  c.m = 4;
  c.dense = {timed(0.5), {}, timed(1)};
  c.moe = {timed(0.5), {}, timed(2)};
  Stage s;
  s.in.dense = 3;
  s.in.moe = 1;
  s.step = {step_op(0.7, StepOpRole::kOptimizer),      step_op(0.3, StepOpRole::kExposed),
            step_op(8, StepOpRole::kUnderBackward),    step_op(4, StepOpRole::kUnderForward),
            step_op(8, StepOpRole::kUnderBackward, 4), step_op(2, StepOpRole::kUnderForward)};
  c.stages = {s};
  const StepTime t = c.compose();
  EXPECT_NEAR(t.optimizer, 0.7 * kMs, kTol);
  EXPECT_NEAR(t.dp_exposed, 7.8 * kMs, kTol);
  EXPECT_NEAR(t.dp_hidden, 14.5 * kMs, kTol);
  EXPECT_NEAR(t.exposed_comm[at(CommDim::kDp)], 7.8 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 36.5 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].step_exposed, 7.8 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].step_hidden, 14.5 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].optimizer, 0.7 * kMs, kTol);
  // A rank without transformer layers (L = max(1, 0) = 1): its whole 4 ms is the last
  // bucket, exposed under any window. Edge lists F = 2, B = 5, m = 1: step = 7 + 4 = 11 ms.
  Composer e;
  e.stages = {edge_stage(2, 5, {step_op(4, StepOpRole::kUnderBackward)})};
  EXPECT_NEAR(e.compose().dp_exposed, 4 * kMs, kTol);
  EXPECT_NEAR(e.compose().step_s, 11 * kMs, kTol);
}

// ---------------------------------------------------------------------------------
// compose_step_time: pipeline, bottleneck, step totals.
// ---------------------------------------------------------------------------------

// Rule (pipeline): pipeline = Megatron's 1F1B / interleaved schedule run pass by pass over
// the ranks' chunk times (pipeline_makespan, pinned by tests/model/pipeline_schedule_test.cpp);
// bubble = pipeline - m x (F + B)_bottleneck.
//   Stages F/B = 1/2, 3/6, 2/4 ms (1, 3, 2 layers of F 1 + B 2), m = 8, vp = 1: rank 1 is the
//   bottleneck (fb 9). It starts after rank 0's first forward (1), runs 8 x 9 = 72 with one
//   wait: after its one warm-up forward (3) it needs rank 2's first forward + backward (6),
//   3 more; rank 0's last backward (2) ends the step: 1 + 72 + 3 + 2 = 78 ms, bubble 6 (the
//   closed form m fb_max + sum of the others, 81, charges ranks 0 and 2 in full).
//   vp = 3 (each rank's chunks equal, the synthetic scenario places no layers): simulated
//   73 ms, bubble 1 (the closed form 72 + 9/3 = 75).
TEST(StepTimeRules, PipelineOfUnequalStages) {
  Composer c;
  c.m = 8;
  c.dense = {timed(1), {}, timed(2)};
  c.stages.resize(3);
  c.stages[0].in.dense = 1;
  c.stages[1].in.dense = 3;
  c.stages[2].in.dense = 2;
  const StepTime t = c.compose();
  EXPECT_EQ(t.bottleneck_stage, 1);
  EXPECT_NEAR(t.pipeline, 78 * kMs, kTol);
  EXPECT_NEAR(t.bubble, 6 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 78 * kMs, kTol);
  c.vp = 3;
  const StepTime v = c.compose();
  EXPECT_NEAR(v.pipeline, 73 * kMs, 1e-9);
  EXPECT_NEAR(v.bubble, 1 * kMs, 1e-9);
}

// Rule (bottleneck): the bottleneck rank maximises fb + (dp_exposed + optimizer) / m (the
// first of equal ranks); its fb is the pipeline's steady-state slot and its DP / optimizer
// time is added to the step.
//   A: fb 4 + 6 = 10, nothing per step -> score 10; B: fb 3 + 6 = 9, exposed 5 -> 9 + 5/2 = 11.5.
//   m = 2: bottleneck B (rank 1); the schedule: rank 0 F0 0-4, F1 4-8; rank 1 F0 4-7, B0 7-13,
//   F1 13-16, B1 16-22; rank 0 B0 13-19, B1 22-28: pipeline 28; step = 28 + 5 = 33 ms.
//   (docs/time-model.md writes max_r(F_r + B_r) for the slot; here that would be A's 10.)
TEST(StepTimeRules, BottleneckMaximisesScore) {
  Composer c;
  c.m = 2;
  c.stages = {edge_stage(4, 6), edge_stage(3, 6, {step_op(5, StepOpRole::kExposed)})};
  const StepTime t = c.compose();
  EXPECT_EQ(t.bottleneck_stage, 1);
  EXPECT_NEAR(t.pipeline, 28 * kMs, kTol);
  EXPECT_NEAR(t.dp_exposed, 5 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 33 * kMs, kTol);
  // Exposed 1 ms instead: B's score 9.5 < 10, A is the bottleneck and B's DP time is not
  // added: step = the same 28 ms pipeline.
  c.stages[1].step = {step_op(1, StepOpRole::kExposed)};
  const StepTime a = c.compose();
  EXPECT_EQ(a.bottleneck_stage, 0);
  EXPECT_NEAR(a.step_s, 28 * kMs, kTol);
  // Equal scores: the first rank is the bottleneck (its stage entry carries the DP time).
  // Ranks F/B 4/6 and 5/6: the critical path F0 4 + rank 1's F0 B0 F1 B1 (5 + 6 + 5 + 6) +
  // rank 0's B1 6 = 32; step = 32 + optimizer 2 = 34 ms.
  Composer tie;
  tie.m = 2;
  tie.stages = {edge_stage(4, 6, {step_op(2, StepOpRole::kOptimizer)}), edge_stage(5, 6)};
  const StepTime e = tie.compose();
  EXPECT_EQ(e.bottleneck_stage, 0);
  EXPECT_NEAR(e.optimizer, 2 * kMs, kTol);
  EXPECT_NEAR(e.step_s, 34 * kMs, kTol);
}

// Rules (step totals): step = pipeline + dp_exposed + optimizer of the bottleneck; compute
// and exposed communication per step are m x the bottleneck's per micro-batch, DP plus
// dp_exposed; the step terms sum to the step; throughput, MFU and HFU follow from it.
//   Two equal ranks sharing one input, vp = 2, m = 4; a dense layer x 2:
//   fwd: GEMM 1, attention 0.5, memory 0.25, TP exposed 0.25 (+ 0.5 hidden) = 2 ms;
//   bwd: GEMM 2, attention 1, memory 0.5, TP exposed 0.5 = 4 ms; fb = 2 x 6 = 12 ms.
//   step ops: optimizer 1.5, exposed DP 0.5.
//   pipeline = 4 x 12 + (24 - 12) / 2 = 54, bubble 6; step = 54 + 0.5 + 1.5 = 56 ms.
//   compute GEMM 4 x 2 x 3 = 24, attention 12, memory 6; TP 4 x 2 x 0.75 = 6; DP 0.5:
//   24 + 12 + 6 + 6 + 0.5 + 6 + 1.5 = 56.
//   gbs 14 x seq 1024 = 14336 tokens / 0.056 s = 256000 tokens/s, / 8 GPUs = 32000;
//   model FLOPs 448 / (0.056 s x 8) = 1000 FLOP/s per GPU = 1e-9 TFLOP/s, MFU 1000 / 2e3 = 0.5;
//   hardware FLOPs 672 -> HFU 0.75.
// The two-rank, two-chunk pipeline above (also StepWaitsForTheSlowestGpu's).
Composer totals_composer() {
  Composer c;
  c.m = 4;
  c.vp = 2;
  c.dense = {
      with_comm(timed(1, 0.5, 0.25), CommDim::kTp, 0.25, 0.5), {}, with_comm(timed(2, 1, 0.5), CommDim::kTp, 0.5, 0)};
  Stage s;
  s.in.dense = 2;
  s.step = {step_op(1.5, StepOpRole::kOptimizer), step_op(0.5, StepOpRole::kExposed)};
  c.stages = {s};
  c.stage_input = {0, 0};
  return c;
}

TEST(StepTimeRules, StepTotalsTermsAndThroughput) {
  Composer c = totals_composer();
  Scenario sc = Composer::scenario();
  sc.training.global_batch_size = 14;
  Flops f;
  f.model_flops = 448;
  f.hardware_flops = 672;
  const StepTime t = c.compose(sc, f);
  EXPECT_NEAR(t.pipeline, 54 * kMs, kTol);
  EXPECT_NEAR(t.bubble, 6 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 56 * kMs, kTol);
  EXPECT_NEAR(t.compute[at(OpClass::kGemm)], 24 * kMs, kTol);
  EXPECT_NEAR(t.compute[at(OpClass::kAttention)], 12 * kMs, kTol);
  EXPECT_NEAR(t.compute[at(OpClass::kMemoryBound)], 6 * kMs, kTol);
  EXPECT_NEAR(t.exposed_comm[at(CommDim::kTp)], 6 * kMs, kTol);
  EXPECT_NEAR(t.exposed_comm[at(CommDim::kDp)], 0.5 * kMs, kTol);
  EXPECT_NEAR(terms_sum(t), t.step_s, kTol);
  EXPECT_NEAR(t.tokens_per_s, 256000, 1e-6);
  EXPECT_NEAR(t.tokens_per_s_per_gpu, 32000, 1e-6);
  EXPECT_NEAR(t.model_tflops_per_gpu, 1e-9, 1e-18);
  EXPECT_NEAR(t.mfu, 0.5, 1e-12);
  EXPECT_NEAR(t.hfu, 0.75, 1e-12);
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_EQ(t.stages[1].stage, 1);
}

// Rule (the slowest GPU, session 40): the step waits for its slowest GPU, the tensor-core time
// (GEMM at the precision's spread, attention at the BF16 one) times E[max of n standard normals].
//   E[max of n], Blom: Phi^-1((n - 0.375) / (n + 0.25)): n = 2: Phi^-1(0.72222) = 0.5894558;
//   n = 8: Phi^-1(0.92424) = 1.4342002 (exact 1.4236); n = 2048: Phi^-1(0.99970) = 3.4270053
//   (exact 3.4418); n = 1: 0.
//   compute GEMM 10, attention 2, memory-bound 3 s; spreads 0.02 (BF16) and 0.05 (FP8):
//   BF16 step, 8 GPUs: (10 + 2) x 0.02 x 1.4342002 = 0.3442080 s;
//   FP8 step, 8 GPUs: (10 x 0.05 + 2 x 0.02) x 1.4342002 = 0.7744681 s.
//   In a composed step (StepTotalsTermsAndThroughput's, 8 GPUs, GEMM 24 and attention 12 ms):
//   36 ms x 0.02 x 1.4342002 = 1.0326241 ms on top of its 56 ms, and a term of its own.
TEST(StepTimeRules, StepWaitsForTheSlowestGpu) {
  EXPECT_EQ(expected_max_standard_normal(1), 0.0);
  EXPECT_EQ(expected_max_standard_normal(0), 0.0);
  EXPECT_NEAR(expected_max_standard_normal(2), 0.5894558, 1e-7);
  EXPECT_NEAR(expected_max_standard_normal(8), 1.4342002, 1e-7);
  EXPECT_NEAR(expected_max_standard_normal(2048), 3.4270053, 1e-7);
  EfficiencySpec e;
  e.gpu_speed_spread = 0.02;
  e.gpu_speed_spread_fp8 = 0.05;
  const std::array<double, kNumOpClasses> compute{10, 2, 3};
  EXPECT_NEAR(slowest_gpu_wait(compute, false, 8, e), 0.3442080, 1e-7);
  EXPECT_NEAR(slowest_gpu_wait(compute, true, 8, e), 0.7744681, 1e-7);
  EXPECT_EQ(slowest_gpu_wait(compute, true, 1, e), 0.0);
  EXPECT_EQ(slowest_gpu_wait(compute, false, 8, EfficiencySpec{}), 0.0);  // spreads 0: GPUs alike

  Composer c = totals_composer();
  Scenario sc = Composer::scenario();
  sc.hardware.efficiency.gpu_speed_spread = 0.02;
  sc.hardware.efficiency.gpu_speed_spread_fp8 = 0.05;
  const StepTime t = c.compose(sc);
  EXPECT_NEAR(t.straggler, 1.0326241 * kMs, 1e-10);
  EXPECT_NEAR(t.step_s, 56 * kMs + t.straggler, kTol);
  EXPECT_NEAR(terms_sum(t), t.step_s, kTol);
  bool named = false;
  for (const StepTerm& term : step_terms(t))
    if (std::string(term.key) == "straggler") {
      named = true;
      EXPECT_EQ(term.group, StepTermGroup::kBubble);
      EXPECT_EQ(term.seconds, t.straggler);
    }
  EXPECT_TRUE(named);
}

// Rule: ranks sharing a stage input share its result, but every rank runs in the pipeline
// (five ranks, not two distinct inputs).
//   stage_input {0, 1, 1, 1, 0}: F/B 1/1 and 1/2 ms, max fb 3 (rank 1); m = 4: the five-rank
//   schedule takes 21 ms (pipeline_makespan); two ranks would take 4 x 3 + 2 = 14.
TEST(StepTimeRules, RanksSharingAnInputEachCount) {
  Composer c;
  c.m = 4;
  c.stages = {edge_stage(1, 1), edge_stage(1, 2)};
  c.stage_input = {0, 1, 1, 1, 0};
  const StepTime t = c.compose();
  EXPECT_EQ(t.bottleneck_stage, 1);
  const std::vector<ChunkPass> five = {{kMs, kMs}, {kMs, 2 * kMs}, {kMs, 2 * kMs}, {kMs, 2 * kMs}, {kMs, kMs}};
  EXPECT_NEAR(pipeline_makespan(5, 1, 4, five), 21 * kMs, kTol);
  EXPECT_NEAR(t.pipeline, 21 * kMs, kTol);
  ASSERT_EQ(t.stages.size(), 5u);
  EXPECT_EQ(t.stages[4].stage, 4);
  EXPECT_NEAR(t.stages[4].fwd + t.stages[4].bwd, 2 * kMs, kTol);
  EXPECT_NEAR(t.stages[3].fwd + t.stages[3].bwd, 3 * kMs, kTol);
}

// Rule: more distinct stage inputs than the result cache holds (8) give the same step: the
// bottleneck's result survives the later ranks.
//   10 ranks, fb = 1..8, 20, 9 ms: bottleneck rank 8 (the first beyond the cache);
//   m = 2: rank 8 starts after the first forward crosses ranks 0-7 (36 / 2), runs 2 x 20 and
//   its last backward crosses them again (36 / 2); rank 9's F0 + B0 (9) fits under rank 8's
//   warm-up forward (10): pipeline = 18 + 40 + 18 = 76 ms.
TEST(StepTimeRules, ManyDistinctStagesKeepTheBottleneck) {
  Composer c;
  c.m = 2;
  for (double fb : {1, 2, 3, 4, 5, 6, 7, 8, 20, 9}) c.stages.push_back(edge_stage(fb / 2, fb / 2));
  const StepTime t = c.compose();
  EXPECT_EQ(t.bottleneck_stage, 8);
  EXPECT_NEAR(t.pipeline, 76 * kMs, kTol);
  ASSERT_EQ(t.stages.size(), 10u);
  EXPECT_NEAR(t.stages[9].fwd, 4.5 * kMs, kTol);
  EXPECT_EQ(t.stages[9].stage, 9);
}

// Rule: a stage's precomputed micro-batch time (StageInputs::microbatch_time, the
// planner's cache) replaces its passes, and the DP window uses its B.
//   precomputed F 5, B 7 (the edge lists say F 1, B 1); grads 3 ms under the backward; m = 1.
//   no layers (L = 1): tail 3, all exposed: step = 12 + 3 = 15 ms.
//   2 layers (the layer lists are empty): tail 1.5, hidden min(1.5, 7) = 1.5: step = 13.5 ms
//   (from the passes: fb 2, hidden min(1.5, 1) = 1, step 2 + 2 = 4 ms).
TEST(StepTimeRules, PrecomputedMicrobatchTimeIsUsed) {
  Composer c;
  c.stages = {edge_stage(1, 1, {step_op(3, StepOpRole::kUnderBackward)})};
  c.stages[0].in.dense = 0;
  StageTime pre;
  pre.fwd = 5 * kMs;
  pre.bwd = 7 * kMs;
  c.stages[0].in.microbatch_time = &pre;
  EXPECT_NEAR(c.compose().step_s, 15 * kMs, kTol);
  c.stages[0].in.dense = 2;
  EXPECT_NEAR(c.compose().step_s, 13.5 * kMs, kTol);
}

// ---------------------------------------------------------------------------------
// step_time(): the pieces wired together on a synthetic schedule.
// ---------------------------------------------------------------------------------

// Rule: step_time times each stage's edge lists (embedding / head / pipeline p2p), the
// layer lists and the step ops, and composes them with the mesh's vp and micro-batches.
//   pp = 2, dp = 2 on one node; m = 2. dense layer GEMM 1 / 2; MTP GEMM 3 / rec 3 / bwd 6.
//   rank 0: 1 dense; embedding 1 (bwd 0.5); PP send 0.25, PP recv-grad 0.25;
//           step: DP reduce-scatter 3 (overlappable, L = 1: all exposed), optimizer 0.5.
//           F = 1 + 1 + 0.25 = 2.25, B = 0.25 + 2 + 0.5 = 2.75; fb 5; score 5 + 3.5/2 = 6.75.
//   rank 1: 1 dense, 1 MTP (recomputed); PP recv 0.25, head GEMM 2 (bwd 4), PP send-grad 0.25;
//           step: optimizer 1. F = 0.25 + 1 + 3 + 2 = 6.25, B = 4 + 3 + 6 + 2 + 0.25 = 15.25;
//           fb 21.5; score 22 -> bottleneck.
//   pipeline = 2 x 21.5 + 5 = 48 (bubble 5); step = 48 + 0 + 1 = 49 ms; exposed PP 2 x 0.5 = 1.
//   vp = 2: p2p hidden: rank 0 F 2, B 2.5; rank 1 F 6, B 15. The synthetic scenario places no
//   layers, so each rank's dense layer splits evenly over its two chunks; the embedding goes
//   to chunk 0, the MTP layer and the head to the last chunk:
//     rank 0: chunk 0 F 0.5 + 1 = 1.5, B 1 + 0.5 = 1.5; chunk 1 F 0.5, B 1;
//     rank 1: chunk 0 F 0.5, B 1; chunk 1 F 0.5 + 3 + 2 = 5.5, B 1 + 9 + 4 = 14.
//   The interleaved schedule (table (0,c0) (1,c0) (0,c1) (1,c1); rank 0 warms up all four
//   forwards, rank 1 two): rank 1's chunk-1 passes F0 3.5-9, B0 9-23, F1 23-28.5,
//   B1 28.5-42.5; then rank 0 B(1,c1) 42.5-43.5, rank 1 B(0,c0) 42.5-43.5 and B(1,c0)
//   43.5-44.5, rank 0 B(0,c0) 43.5-45 and B(1,c0) 45-46.5: pipeline 46.5, step 47.5 ms (the
//   closed form 42 + 4.5 / 2 = 44.25 assumes the head's work spreads over the chunks).
TEST(StepTimeRules, StepTimeComposesASyntheticSchedule) {
  Scenario s = Composer::scenario();
  s.num_gpus = 4;
  Mesh m;
  m.world = 4;
  m.pp = 2;
  m.dp = 2;
  m.num_micro_batches = 2;
  const Op p2p = coll(Collective::kSendRecv, CommDim::kPp, 2, 0.25);
  Schedule sch;
  sch.num_micro_batches = 2;
  sch.dense = {{gemm(1)}, {}, {gemm(2)}};
  sch.mtp = {{gemm(3)}, {gemm(3)}, {gemm(6)}};
  StageSchedule first, last;
  first.stage = 0;
  first.dense = 1;
  first.pre_fwd = {mem(1)};
  first.post_fwd = {p2p};
  first.post_bwd = {p2p};
  first.pre_bwd = {mem(0.5)};
  first.step = {coll(Collective::kReduceScatter, CommDim::kDp, 2, 3, true), mem(0.5)};
  last.stage = 1;
  last.dense = 1;
  last.mtp = last.mtp_recomputed = 1;
  last.pre_fwd = {p2p};
  last.post_fwd = {gemm(2)};
  last.post_bwd = {gemm(4)};
  last.pre_bwd = {p2p};
  last.step = {mem(1)};
  sch.stages = {first, last};
  const StepTime t = step_time(s, m, sch, Flops{});
  EXPECT_EQ(t.bottleneck_stage, 1);
  EXPECT_NEAR(t.pipeline, 48 * kMs, kTol);
  EXPECT_NEAR(t.bubble, 5 * kMs, kTol);
  EXPECT_NEAR(t.optimizer, 1 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 49 * kMs, kTol);
  EXPECT_NEAR(t.exposed_comm[at(CommDim::kPp)], 1 * kMs, kTol);
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_NEAR(t.stages[0].fwd, 2.25 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].bwd, 2.75 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].step_exposed, 3 * kMs, kTol);
  EXPECT_NEAR(t.stages[0].optimizer, 0.5 * kMs, kTol);
  EXPECT_NEAR(t.stages[1].fwd, 6.25 * kMs, kTol);
  EXPECT_NEAR(t.stages[1].bwd, 15.25 * kMs, kTol);
  m.vp = 2;
  const StepTime v = step_time(s, m, sch, Flops{});
  EXPECT_NEAR(v.pipeline, 46.5 * kMs, kTol);
  EXPECT_NEAR(v.step_s, 47.5 * kMs, kTol);
}

// ---------------------------------------------------------------------------------
// Host-bound regime (docs/time-model.md, "Host-bound regime"): the host enqueues every
// kernel, the GPU cannot run ahead of it, synchronisations empty the host's lead.
// ---------------------------------------------------------------------------------
HardwareSpec host_hw(double launch_ms, double sync_ms = 0, double latency_ms = 0, double layer_ms = 0) {
  HardwareSpec hw = unit_hw();
  hw.host.kernel_launch = launch_ms * kMs;
  hw.host.sync = sync_ms * kMs;
  hw.host.launch_latency = latency_ms * kMs;
  hw.host.layer_overhead_fwd = hw.host.layer_overhead_bwd = layer_ms * kMs;
  return hw;
}

// Host time of a list: kernels x kernel_launch (a grouped GEMM one kernel per group, every
// call counted), syncs x (sync + launch latency) of GPU idle; layer_times adds the per-layer
// Python overhead to each non-empty pass.
//   ops: GEMM 2 ms (1 kernel), grouped GEMM 4 groups x 2 calls (8 kernels), memory 1 ms with
//   one sync: 10 kernels x 0.5 ms = 5 ms of host; 1 sync x (2 + 1) ms = 3 ms idle.
TEST(StepTimeRules, HostTimeCountsKernelsAndSyncs) {
  Op grouped = gemm(1, 2);
  grouped.gemm.groups = 4;
  Op synced = mem(1);
  synced.host_syncs = 1;
  EXPECT_EQ(host_kernels(grouped), 8);
  const std::vector<Op> ops{gemm(2), grouped, synced};
  const HardwareSpec hw = host_hw(0.5, 2, 1, 7);
  const PassTime p = pass_time(ops, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(p.host, 5 * kMs, kTol);
  EXPECT_EQ(p.syncs, 1);
  EXPECT_NEAR(p.sync_idle, 3 * kMs, kTol);
  // The GPU time is unchanged by the host terms.
  EXPECT_NEAR(p.total, pass_time(ops, ParallelSpec{}, one_node(), unit_hw()).total, kTol);
  LayerOps l;
  l.fwd = ops;
  const LayerTimes t = layer_times(l, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(t.fwd.host, 12 * kMs, kTol);  // 5 + 7 ms of Python
  EXPECT_NEAR(t.bwd.host, 0, kTol);         // an empty pass runs no module
}

// The per-layer Python differs by pass and by layer kind: a forward and a full recompute take
// layer_overhead_fwd, a backward layer_overhead_bwd; a list that routes tokens (it holds the
// router) adds the MoE layer's own per pass.
//   dense list (GEMM 2 ms, 1 kernel x 0.5 ms): fwd 0.5 + 3 = 3.5, recompute 3.5, bwd 0.5 + 5 = 5.5 ms
//   MoE list (the same + a router GEMM, 2 kernels): fwd 1 + 3 + 2 = 6, bwd 1 + 5 + 4 = 10 ms
TEST(StepTimeRules, LayerPythonByPassAndLayerKind) {
  HardwareSpec hw = host_hw(0.5);
  hw.host.layer_overhead_fwd = 3 * kMs;
  hw.host.layer_overhead_bwd = 5 * kMs;
  hw.host.moe_overhead_fwd = 2 * kMs;
  hw.host.moe_overhead_bwd = 4 * kMs;
  LayerOps dense;
  dense.fwd = dense.recompute = dense.bwd = {gemm(2)};
  const LayerTimes d = layer_times(dense, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(d.fwd.host, 3.5 * kMs, kTol);
  EXPECT_NEAR(d.recompute.host, 3.5 * kMs, kTol);
  EXPECT_NEAR(d.bwd.host, 5.5 * kMs, kTol);
  Op router = gemm(1);
  router.id = OpId::kMoeRouter;
  LayerOps moe;
  moe.fwd = moe.bwd = {gemm(2), router};
  const LayerTimes m = layer_times(moe, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(m.fwd.host, 6 * kMs, kTol);
  EXPECT_NEAR(m.recompute.host, 0, kTol);  // no recompute list: no pass
  EXPECT_NEAR(m.bwd.host, 10 * kMs, kTol);
  // A selective recompute re-runs only its modules: the dense Python in proportion to its
  // kernels (1 of the forward's 2: 0.5 x 3 ms), the MoE part only when it re-runs the router.
  //   recompute {GEMM}: 0.5 + 1.5 = 2 ms;  recompute {GEMM, router} (full): 1 + 3 + 2 = 6 ms
  moe.recompute = {gemm(2)};
  EXPECT_NEAR(layer_times(moe, ParallelSpec{}, one_node(), hw).recompute.host, 2 * kMs, kTol);
  moe.recompute = moe.fwd;
  EXPECT_NEAR(layer_times(moe, ParallelSpec{}, one_node(), hw).recompute.host, 6 * kMs, kTol);
}

// CUDA graphs (ParallelSpec::cuda_graph_impl / cuda_graph_modules) take the captured kernels'
// enqueue and the captured modules' Python off the host: the layer's Python in proportion to
// the captured share of the layer's kernels, the MoE part in proportion to the captured share
// of the MoE block's kernels; each pass with captured ops pays one graph launch (kernel_launch,
// plus graph_replay, the replay's own host time: 0 here, then 0.25 ms).
// Kernels 0.5 ms each; layer Python 3 / 5 ms (fwd / bwd); MoE Python 2 / 4 ms.
//   MoE list: attn.qkv GEMM, attn.core, mlp.norm (pre-MLP norm), router GEMM, topk, permute
//   (1 sync), experts fc1 (grouped, 4 groups) = 10 kernels, 4 of them in the MoE block
//   besides the experts' (router, topk, permute + 4 expert kernels = 7 MoE kernels).
//   eager forward: 10 x 0.5 + 3 + 2 = 10 ms.
//   modules [moe_router, moe_preprocess]: captured = norm, router, topk, permute = 4 kernels,
//     3 of the 7 MoE kernels: host = (10 - 4 + 1) x 0.5 + 3 x (1 - 4/10) + 2 x (1 - 3/7)
//     = 3.5 + 1.8 + 8/7 = 6.442857 ms; the sync stays (Megatron syncs outside the graph).
//   modules [attn]: qkv + core = 2 kernels, 0 MoE: (10 - 2 + 1) x 0.5 + 3 x 0.8 + 2 = 8.9 ms.
//   full_iteration: no enqueue, no Python, no sync: 0 ms.
TEST(StepTimeRules, CudaGraphsTakeCapturedKernelsAndPythonOffTheHost) {
  HardwareSpec hw = host_hw(0.5, 2, 1);
  hw.host.layer_overhead_fwd = 3 * kMs;
  hw.host.layer_overhead_bwd = 5 * kMs;
  hw.host.moe_overhead_fwd = 2 * kMs;
  hw.host.moe_overhead_bwd = 4 * kMs;
  auto with = [](Op o, OpId id) {
    o.id = id;
    return o;
  };
  Op experts = with(gemm(1), OpId::kMoeExpertsFc1);
  experts.gemm.groups = 4;
  Op permute = with(mem(1), OpId::kMoePermute);
  permute.host_syncs = 1;
  LayerOps l;
  l.fwd = {with(gemm(2), OpId::kAttnQkv),  with(mem(1), OpId::kAttnCore),  with(mem(1), OpId::kMlpNorm),
           with(gemm(1), OpId::kMoeRouter), with(mem(1), OpId::kMoeTopk), permute, experts};
  ParallelSpec eager;
  const LayerTimes e = layer_times(l, eager, one_node(), hw);
  EXPECT_NEAR(e.fwd.host, 10 * kMs, kTol);
  ParallelSpec router = eager;
  router.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
  router.cuda_graph_modules = kCudaGraphMoeRouter | kCudaGraphMoePreprocess;
  const LayerTimes r = layer_times(l, router, one_node(), hw);
  EXPECT_NEAR(r.fwd.host, (3.5 + 1.8 + 8.0 / 7.0) * kMs, kTol);
  EXPECT_NEAR(r.fwd.kernels, 7, 1e-12);
  EXPECT_EQ(r.fwd.syncs, 1);
  EXPECT_NEAR(r.fwd.total, e.fwd.total, kTol);  // graphs change the host, not the GPU time
  ParallelSpec attn = router;
  attn.cuda_graph_modules = kCudaGraphAttn;
  EXPECT_NEAR(layer_times(l, attn, one_node(), hw).fwd.host, 8.9 * kMs, kTol);
  ParallelSpec full = eager;
  full.cuda_graph_impl = CudaGraphImpl::kFullIteration;
  const LayerTimes f = layer_times(l, full, one_node(), hw);
  EXPECT_NEAR(f.fwd.host, 0, kTol);
  EXPECT_EQ(f.fwd.syncs, 0);
  EXPECT_NEAR(f.fwd.sync_idle, 0, kTol);
  // Which module captures what: the pre-MLP norm goes with the router in an MoE layer and
  // with the MLP in a dense one; moe captures the whole block, mlp only dense layers.
  EXPECT_TRUE(graph_captures(OpId::kMlpNorm, true, router));
  EXPECT_FALSE(graph_captures(OpId::kMlpNorm, false, router));
  EXPECT_FALSE(graph_captures(OpId::kMoeExpertsFc1, true, router));
  ParallelSpec moe_block = router;
  moe_block.cuda_graph_modules = kCudaGraphMoe;
  EXPECT_TRUE(graph_captures(OpId::kMoeExpertsFc1, true, moe_block));
  EXPECT_TRUE(graph_captures(OpId::kMlpBda, true, moe_block));
  EXPECT_FALSE(graph_captures(OpId::kAttnQkv, true, moe_block));
  ParallelSpec whole = router;
  whole.cuda_graph_modules = 0;  // the whole layer
  EXPECT_TRUE(graph_captures(OpId::kAttnQkv, false, whole));
  EXPECT_FALSE(graph_captures(OpId::kAttnQkv, false, eager));
  // A dense layer captured whole: one launch, no Python. Backward: 1 kernel -> 1 launch.
  LayerOps d;
  d.fwd = d.bwd = {with(gemm(2), OpId::kMlpFc1), with(mem(1), OpId::kMlpAct)};
  const LayerTimes w = layer_times(d, whole, one_node(), hw);
  EXPECT_NEAR(w.fwd.host, 0.5 * kMs, kTol);
  EXPECT_NEAR(w.bwd.host, 0.5 * kMs, kTol);
  // The replay's own host time (HostSpec::graph_replay) comes on top of the launch, per pass.
  hw.host.graph_replay = 0.25 * kMs;
  EXPECT_NEAR(layer_times(d, whole, one_node(), hw).fwd.host, 0.75 * kMs, kTol);
  EXPECT_NEAR(layer_times(l, router, one_node(), hw).fwd.host, (3.75 + 1.8 + 8.0 / 7.0) * kMs, kTol);
  EXPECT_NEAR(layer_times(l, full, one_node(), hw).fwd.host, 0, kTol);  // no per-layer replay
  hw.host.graph_replay = 0;
  // The edges: a full-iteration graph also replays the embedding and loss, with their Python.
  hw.host.microbatch_overhead = 8 * kMs;
  Op embed = with(mem(1), OpId::kEmbed);
  Op recv = with(mem(1), OpId::kPpRecv);
  recv.host_syncs = 1;
  const std::vector<Op> pre_fwd{recv, embed}, none{};
  EXPECT_NEAR(edge_times({&pre_fwd, &none, &none, &none}, whole, one_node(), hw)[0].host, 5 * kMs, kTol);
  const std::array<PassTime, 4> fe = edge_times({&pre_fwd, &none, &none, &none}, full, one_node(), hw);
  EXPECT_NEAR(fe[0].host, 0, kTol);
  EXPECT_EQ(fe[0].syncs, 0);
}

// The Python per micro-batch outside the layers (HostSpec::microbatch_overhead: batch fetch,
// embedding, output layer, loss, the schedule's calls): half on the forward edge list that
// holds the embedding, half on the one that holds the loss; the backward edges and lists
// holding neither take none. Kernels as before (0.5 ms each).
//   overhead 8 ms, embedding list {embed (1 ms)}: 0.5 + 4 = 4.5 ms; loss list {logits GEMM,
//   loss}: 1 + 4 = 5 ms; a pipeline stage's receive list (no embedding): 0.5 ms; backward
//   edges: kernels only.
TEST(StepTimeRules, MicroBatchPythonOnTheEmbeddingAndLossStages) {
  HardwareSpec hw = host_hw(0.5);
  hw.host.microbatch_overhead = 8 * kMs;
  Op embed = mem(1);
  embed.id = OpId::kEmbed;
  Op logits = gemm(2);
  logits.id = OpId::kLogits;
  Op loss = mem(1);
  loss.id = OpId::kLoss;
  const std::vector<Op> pre_fwd{embed}, post_fwd{logits, loss}, post_bwd{mem(1)}, pre_bwd{mem(2)};
  const std::array<PassTime, 4> t =
      edge_times({&pre_fwd, &post_fwd, &post_bwd, &pre_bwd}, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(t[0].host, 4.5 * kMs, kTol);
  EXPECT_NEAR(t[1].host, 5 * kMs, kTol);
  EXPECT_NEAR(t[2].host, 0.5 * kMs, kTol);
  EXPECT_NEAR(t[3].host, 0.5 * kMs, kTol);
  // GPU time is unchanged.
  EXPECT_NEAR(t[1].total, pass_time(post_fwd, ParallelSpec{}, one_node(), hw).total, kTol);
  // A middle pipeline stage (p2p lists, no embedding, no loss) pays none of it.
  Op recv = mem(1);
  recv.id = OpId::kPpRecv;
  const std::vector<Op> mid{recv}, empty{};
  const std::array<PassTime, 4> m = edge_times({&mid, &empty, &empty, &mid}, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(m[0].host, 0.5 * kMs, kTol);
  EXPECT_NEAR(m[1].host, 0, kTol);
}

// A pass with syncs: the pass timed as (GPU total, host, syncs, sync idle).
PassTime host_pass(double gpu_ms, double host_ms, int syncs = 0, double sync_idle_ms = 0) {
  PassTime p = timed(gpu_ms);
  p.host = host_ms * kMs;
  p.syncs = syncs;
  p.sync_idle = sync_idle_ms * kMs;
  return p;
}

// Host time dominates, no synchronisation: the micro-batch is one segment with the rest of
// the step; per micro-batch the GPU waits host - GPU.
//   dense fwd: GPU 10, host 20; bwd: GPU 20, host 16 (the host gets 4 ms ahead again).
//   segment = max(30, 36) = 36: idle 6 ms, counted in the backward (the segment's end).
TEST(StepTimeRules, HostBoundSegmentTakesHostTime) {
  Composer c;
  c.dense.fwd = host_pass(10, 20);
  c.dense.bwd = host_pass(20, 16);
  c.stages.push_back(edge_stage(0, 0));
  c.stages[0].in.dense = 1;
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.host_idle, 6 * kMs, kTol);
  EXPECT_NEAR(t.fwd, 10 * kMs, kTol);
  EXPECT_NEAR(t.bwd, 26 * kMs, kTol);
}

// GPU time dominates: the host's lead hides its enqueue time entirely.
//   fwd: GPU 10, host 6; bwd: GPU 20, host 12: max(30, 18) = 30, no idle.
TEST(StepTimeRules, GpuBoundSegmentHidesTheHost) {
  Composer c;
  c.dense.fwd = host_pass(10, 6);
  c.dense.bwd = host_pass(20, 12);
  c.stages.push_back(edge_stage(0, 0));
  c.stages[0].in.dense = 1;
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.host_idle, 0, kTol);
  EXPECT_NEAR(t.fwd + t.bwd, 30 * kMs, kTol);
}

// Synchronisations cut segments and idle the GPU for their round trip.
//   dense fwd (GPU 4, host 2, no sync) then 3 MoE fwd layers (GPU 2, host 4, 1 sync each,
//   sync idle 0.75 ms); backward lists GPU 3 / host 1 per layer, no sync.
//   forward: the first MoE layer closes the open segment (dense + MoE: GPU 6, host 6) - it is
//   the micro-batch's first segment, kept open to join the last; the two other MoE layers are
//   segments of their own: 2 x max(0, 4 - 2) = 4 ms; syncs 3 x 0.75 = 2.25 ms: forward idle 6.25.
//   backward: dense + 3 MoE bwd = GPU 12, host 4 open; joined with the first segment:
//   max(0, (4 + 6) - (12 + 6)) = 0. Micro-batch idle 6.25 ms; F = 4 + 6 + 6.25 = 16.25 ms.
TEST(StepTimeRules, SyncsCutSegmentsAndIdleTheGpu) {
  Composer c;
  c.dense.fwd = host_pass(4, 2);
  c.moe.fwd = host_pass(2, 4, 1, 0.75);
  c.dense.bwd = host_pass(3, 1);
  c.moe.bwd = host_pass(3, 1);
  c.stages.push_back(edge_stage(0, 0));
  c.stages[0].in.dense = 1;
  c.stages[0].in.moe = 3;
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.host_idle, 6.25 * kMs, kTol);
  EXPECT_NEAR(t.fwd, 16.25 * kMs, kTol);
  EXPECT_NEAR(t.bwd, 12 * kMs, kTol);
  // The joined segment: a host-heavy backward (host 16 over GPU 12) plus the first segment
  // (6, 6): max(0, 22 - 18) = 4 ms more, in the backward.
  c.dense.bwd = host_pass(3, 4);
  c.moe.bwd = host_pass(3, 4);
  const StageTime u = c.microbatch(0);
  EXPECT_NEAR(u.bwd, 16 * kMs, kTol);
  EXPECT_NEAR(u.host_idle, 10.25 * kMs, kTol);
}

// A GPU-bound segment between two synchronisations adds nothing (only host > GPU idles).
//   pre_fwd: a pipeline receive with a sync (GPU 1, host 0, idle 0.5) closes the first segment
//   (1, 0); dense fwd (GPU 4, host 1) + MoE fwd with a sync (GPU 2, host 4) form the next:
//   max(0, 5 - 6) = 0; two syncs x 0.5 ms = 1 ms of idle, all in the forward.
TEST(StepTimeRules, GpuBoundSegmentBetweenSyncsDoesNotIdle) {
  Composer c;
  c.dense.fwd = host_pass(4, 1);
  c.moe.fwd = host_pass(2, 4, 1, 0.5);
  c.stages.push_back(edge_stage(0, 0));
  c.stages[0].pre_fwd = host_pass(1, 0, 1, 0.5);
  c.stages[0].in.dense = 1;
  c.stages[0].in.moe = 1;
  const StageTime t = c.microbatch(0);
  EXPECT_NEAR(t.host_idle, 1 * kMs, kTol);
  EXPECT_NEAR(t.fwd, 8 * kMs, kTol);
}

// One pass run by itself (a layer benchmark): max(GPU, host) plus its syncs' idle.
//   GPU 3, host 5, one sync idling 0.25 ms -> 5.25 ms; GPU 3, host 1, no sync -> 3 ms;
//   GPU 3, host 1, two syncs of 0.5 ms -> 4 ms.
TEST(StepTimeRules, StandalonePassWaitsForTheHost) {
  EXPECT_NEAR(standalone_pass_seconds(host_pass(3, 5, 1, 0.25)), 5.25 * kMs, kTol);
  EXPECT_NEAR(standalone_pass_seconds(host_pass(3, 1)), 3 * kMs, kTol);
  EXPECT_NEAR(standalone_pass_seconds(host_pass(3, 1, 2, 1)), 4 * kMs, kTol);
}

// A pass timed by itself starts on an idle GPU, so what precedes its synchronisation is a
// segment of its own (session 35): GPU 5 ms of which 0.5 before the sync, host 4 ms of which 2
// before it, sync idle 0.25 ms: max(0.5, 2) + max(4.5, 2) + 0.25 = 6.75 ms, where one segment
// gives max(5, 4) + 0.25 = 5.25 ms. A GPU-bound start hides its host part: GPU 3 of 5 before
// the sync, host 2 of 4 -> max(3, 2) + max(2, 2) + 0.25 = 5.25 ms.
TEST(StepTimeRules, StandalonePassSplitsAtItsSynchronisation) {
  PassTime p = host_pass(5, 4, 1, 0.25);
  p.pre_sync_gpu = 0.5 * kMs;
  p.pre_sync_host = 2 * kMs;
  EXPECT_NEAR(standalone_pass_seconds(p), 6.75 * kMs, kTol);
  p.pre_sync_gpu = 3 * kMs;
  EXPECT_NEAR(standalone_pass_seconds(p), 5.25 * kMs, kTol);
}

// pass_time fills the part before the first synchronising op (inclusive): its GPU time and
// its kernels' enqueue; nothing without a synchronisation.
//   memory 1 ms, memory 2 ms that syncs, memory 4 ms; 0.5 ms per kernel: before the sync
//   GPU 3 ms and host 1 ms, of 7 ms and 1.5 ms.
TEST(StepTimeRules, PassTimeSumsTheOpsBeforeTheFirstSync) {
  const HardwareSpec hw = host_hw(0.5);
  Op synced = mem(2);
  synced.host_syncs = 1;
  const PassTime none = pass_time({mem(1), mem(2), mem(4)}, ParallelSpec{}, one_node(), hw);
  EXPECT_EQ(none.pre_sync_gpu, 0.0);
  EXPECT_EQ(none.pre_sync_host, 0.0);
  const PassTime p = pass_time({mem(1), synced, mem(4)}, ParallelSpec{}, one_node(), hw);
  EXPECT_NEAR(p.pre_sync_gpu, 3 * kMs, kTol);
  EXPECT_NEAR(p.pre_sync_host, 1 * kMs, kTol);
  EXPECT_NEAR(p.total, 7 * kMs, kTol);
  EXPECT_NEAR(p.host, 1.5 * kMs, kTol);
}

// One stage, m = 2, a host-bound dense list (forward GPU 10 / host 20 ms), sync 2 ms, launch
// latency 1 ms, `iteration_ms` of the loop's Python per step and the given step ops (the two
// tests below).
StepTime host_bound_step(double iteration_ms, std::vector<StepOpTime> step = {}) {
  Composer c;
  c.m = 2;
  c.dense.fwd = host_pass(10, 20);
  c.stages.push_back(edge_stage(0, 0, std::move(step)));
  c.stages[0].in.dense = 1;
  Scenario s = Composer::scenario();
  s.hardware = host_hw(0, 2, 1);
  s.hardware.host.iteration_overhead = iteration_ms * kMs;
  return c.compose(s);
}

// Rule (optimizer step on the host): the step's optimizer op costs the larger of its GPU time
// (bytes / HBM) and its tensors x host.optimizer_tensor; the training loop's Python
// (host.iteration_overhead) joins the closing sync once per step, the GPU idle meanwhile.
//   optimizer op 2 ms of bytes, 30 tensors at 0.1 ms -> 3 ms (host-bound); at 0.05 ms -> 2 ms.
//   Step of StepHostTermAndClosingSync below (43 ms, host idle 23 ms) + 4 ms of loop Python
//   -> 47 ms, host idle 27 ms. With an optimizer op of 3 ms, 1 ms of it the GPU waiting on the
//   host instead: optimizer term 2 ms, host idle 23 + 1 = 24 ms, step 43 + 3 = 46 ms.
TEST(StepTimeRules, OptimizerTensorsAndIterationPythonOnTheHost) {
  Op opt = mem(2);
  opt.mem.tensors = 30;
  HardwareSpec hw = unit_hw();
  hw.host.optimizer_tensor = 0.1 * kMs;
  EXPECT_NEAR(step_op_times({opt}, one_node(), hw)[0].time, 3 * kMs, kTol);
  EXPECT_NEAR(step_op_times({opt}, one_node(), hw)[0].host_wait, 1 * kMs, kTol);
  hw.host.optimizer_tensor = 0.05 * kMs;
  EXPECT_NEAR(step_op_times({opt}, one_node(), hw)[0].time, 2 * kMs, kTol);
  EXPECT_EQ(step_op_times({opt}, one_node(), hw)[0].host_wait, 0.0);
  opt.mem.tensors = 0;  // ops without tensors keep their GPU time
  hw.host.optimizer_tensor = 1 * kMs;
  EXPECT_NEAR(step_op_times({opt}, one_node(), hw)[0].time, 2 * kMs, kTol);

  const StepTime t = host_bound_step(4);
  EXPECT_NEAR(t.host_idle, 27 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 47 * kMs, kTol);
  EXPECT_NEAR(terms_sum(t), t.step_s, kTol);
  StepOpTime waiting = step_op(3, StepOpRole::kOptimizer);
  waiting.host_wait = 1 * kMs;
  const StepTime w = host_bound_step(0, {waiting});
  EXPECT_NEAR(w.optimizer, 2 * kMs, kTol);
  EXPECT_NEAR(w.host_idle, 24 * kMs, kTol);
  EXPECT_NEAR(w.step_s, 46 * kMs, kTol);
  EXPECT_NEAR(terms_sum(w), w.step_s, kTol);
}

// The step: m micro-batches of the bottleneck's idle, plus the step's closing sync (sync +
// launch latency); the host term is one of the step terms and they still sum to the step.
//   one stage, m = 2, host-bound dense list: fwd GPU 10 / host 20, per micro-batch idle 10;
//   step sync 2 + 1 = 3 ms: host term 2 x 10 + 3 = 23 ms; step = 2 x 20 + 3 = 43 ms.
TEST(StepTimeRules, StepHostTermAndClosingSync) {
  const StepTime t = host_bound_step(0);
  EXPECT_NEAR(t.host_idle, 23 * kMs, kTol);
  EXPECT_NEAR(t.step_s, 43 * kMs, kTol);
  EXPECT_NEAR(terms_sum(t), t.step_s, kTol);
}

}  // namespace
}  // namespace lcm
