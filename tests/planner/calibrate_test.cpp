// `lcm calibrate`: the least-squares fit recovers known parameters, the readers parse
// lcm-exec summaries and nccl-tests logs, the profile editor keeps comments, and the
// committed calibration (hwprofiles/h200-sxm.calibrated.yaml) is what the fit of the
// committed H200 measurements gives and predicts >= 90% of them within 10%.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lcm/model/calibration.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/calibrate/measurements.hpp"
#include "lcm/planner/report/calibration_report.hpp"
#include "plan_test_util.hpp"

namespace lcm {
namespace {

using plantest::lcm;
using plantest::slurp;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSrc = LCM_SOURCE_DIR;
// Points of the committed H200 measurements that hwprofiles/h200-sxm.calibrated.yaml
// predicts within 10% (docs/calibration.md); a model change that lowers it must say why.
// 316 points since the development sets joined the inputs (heldout/, issue 12; session10/,
// the MoE runs re-measured): 287 in-sample (90.8%) after session 15's router rule (284 before);
// 351 points since session 15's short-k GEMMs joined (session15/): 321 in-sample (91.5%); 893
// since session 16's inputs (the second to sixth held-out sets, development sets since their
// scores) and its small-op terms: 812 (90.9%), 817 (91.5%) with the 64-wide fallback tile;
// 825 (92.4%) with session 17's LL protocol alternative for small ring collectives, 829
// (92.8%) with its half-L2 K/V sweep, 840 (94.1%) with session 22's split-K chunk; 1534 since
// session 22's inputs (the mixed held-out sets 7-9, 13 and 14, development sets since their
// scores): 1431 (93.3%), 1433 (93.4%) with session 31's die-level L2 slowdown of long
// forwards; the first 200 (the 9 original files) at 179 or more.
constexpr int kCommittedWithin10 = 1433;
constexpr int kCommittedPoints = 1534;

HardwareSpec h200() {
  auto r = io::load_hardware_profile(kSrc + "/hwprofiles/h200-sxm.yaml");
  EXPECT_TRUE(r.ok()) << r.error().str();
  return r.value();
}

MeasuredOp gemm(int64_t m, int64_t n, int64_t k, DType dt = DType::kBf16) {
  MeasuredOp p;
  p.op.kind = OpKind::kGemm;
  p.op.dtype = dt;
  p.op.gemm = GemmShape{m, n, k, 1};
  p.name = "gemm";
  return p;
}
MeasuredOp attention(int64_t s, int64_t d, bool bwd) {
  MeasuredOp p;
  p.op.kind = OpKind::kAttention;
  p.op.pass = bwd ? Pass::kBwd : Pass::kFwd;
  p.op.attn = AttentionShape{1, s, s, 32, 8, d, d, true, 0.5};
  p.name = "attn";
  return p;
}
MeasuredOp copy(double bytes) {
  MeasuredOp p;
  p.op.kind = OpKind::kMemoryBound;
  p.op.mem.bytes = bytes;
  p.op.mem.copy = true;  // lcm-exec's copies stream at efficiency.hbm
  p.name = "copy";
  return p;
}
MeasuredOp coll(Collective c, double bytes, int n) {
  MeasuredOp p;
  p.op.kind = c == Collective::kSendRecv ? OpKind::kSendRecv : OpKind::kCollective;
  p.op.coll.kind = c;
  p.op.coll.group_size = n;
  p.op.coll.message_bytes = bytes;
  p.topo = GroupTopology{n, 1, n};
  p.name = "coll";
  return p;
}

// Hand-made ground truth, away from the shipped profile in every fitted parameter.
HardwareSpec known_truth() {
  HardwareSpec truth = h200();
  truth.efficiency.gemm = 0.70;
  truth.efficiency.gemm_dim_half = 110;
  truth.efficiency.gemm_tile_m = 128;
  truth.efficiency.gemm_tile_n = 256;
  truth.efficiency.gemm_fp8 = 0.55;
  truth.efficiency.attention_fwd = 0.60;
  truth.efficiency.attention_bwd = 0.48;
  truth.efficiency.attention_seq_half = 700;
  truth.efficiency.attention_head_dim_half = 60;
  truth.efficiency.attention_bwd_wide_dim_exponent = 1.2;
  truth.efficiency.hbm = 0.85;
  truth.efficiency.kernel_fixed = 2.5e-6;
  truth.efficiency.gemm_roofline_exponent = 3.0;  // small-op regime (issue 12)
  truth.efficiency.memory_fixed = 3.5e-6;
  truth.efficiency.attention_cta_tail = 0.3;
  truth.efficiency.gemm_sm_fill_exponent = 0.4;
  truth.efficiency.gemm_c_write_exposed = 0.4;  // exposed C store (session 15)
  truth.efficiency.gemm_fill_bw_exponent = 0.3;  // memory stream's SM fill (session 16)
  truth.host.exec_gemm_enqueue = 6e-6;           // lcm-exec's host floor per GEMM (session 16)
  truth.efficiency.nvlink = 0.75;
  truth.efficiency.nvlink_half_bytes = 12.0 * 1024 * 1024;
  return truth;
}

// Points of every class with shapes that determine known_truth()'s parameters (no times).
std::vector<MeasuredOp> synthetic_points() {
  std::vector<MeasuredOp> pts;
  // m and n off the 64-multiples tell the output-tile sizes apart.
  for (int64_t m : {192, 1000, 4096, 8192})
    for (int64_t n : {320, 1024, 6144})
      for (int64_t k : {128, 4096}) pts.push_back(gemm(m, n, k));
  // Wide outputs over short and long k loops: the exposed share of the C store.
  for (int64_t k : {256, 1024, 4096}) pts.push_back(gemm(16384, 6144, k));
  for (int64_t m : {512, 4096}) pts.push_back(gemm(m, 8192, 8192, DType::kFp8));
  // Router and skinny GEMMs (N = experts; M = a few tokens): memory-bound, they set the
  // roofline exponent and the fixed time per compute kernel.
  for (int64_t n : {8, 64, 256}) pts.push_back(gemm(8192, n, 4096));
  for (int64_t m : {64, 256}) pts.push_back(gemm(m, 4096, 4096));
  // Few output tiles over a long k (router weight gradients): the memory stream's SM fill.
  for (int64_t m : {1024, 2048, 4096}) pts.push_back(gemm(m, 64, 16384));
  // GEMMs shorter than lcm-exec's host enqueue, alone and 16 to a group: its floor.
  for (int64_t d : {128, 256, 512}) pts.push_back(gemm(d, d, d));
  {
    MeasuredOp g = gemm(16 * 256, 256, 256);
    g.op.gemm.groups = 16;
    pts.push_back(g);
  }
  for (int64_t s : {1024, 4096, 16384, 65536})
    for (int64_t d : {64, 128, 192})
      for (bool b : {false, true}) pts.push_back(attention(s, d, b));
  for (double b = 1 << 20; b <= 4.0 * (1 << 30); b *= 4) pts.push_back(copy(b));
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kAllToAll})
    for (double b = 1 << 16; b <= (1 << 30); b *= 8) pts.push_back(coll(c, b, 2));
  return pts;
}

// Every measured time is the model's time on `truth`, so a fit from the shipped profile
// must find `truth` again.
TEST(Calibrate, RecoversKnownParameters) {
  const HardwareSpec truth = known_truth();
  std::vector<MeasuredOp> pts = synthetic_points();
  for (MeasuredOp& p : pts) p.measured_s = predict_time(p, truth);

  const Calibration cal = calibrate(pts, h200());
  const EfficiencySpec& e = cal.fitted.efficiency;
  EXPECT_NEAR(e.gemm, 0.70, 0.005);
  EXPECT_NEAR(e.gemm_dim_half, 110, 3);
  EXPECT_EQ(e.gemm_tile_m, 128);
  EXPECT_EQ(e.gemm_tile_n, 256);
  EXPECT_NEAR(e.gemm_fp8, 0.55, 0.005);
  EXPECT_NEAR(e.attention_fwd, 0.60, 0.005);
  EXPECT_NEAR(e.attention_bwd, 0.48, 0.005);
  EXPECT_NEAR(e.attention_seq_half, 700, 15);
  EXPECT_NEAR(e.attention_head_dim_half, 60, 2);
  EXPECT_NEAR(e.attention_bwd_wide_dim_exponent, 1.2, 0.02);
  EXPECT_NEAR(e.hbm, 0.85, 0.005);
  EXPECT_NEAR(e.kernel_fixed, 2.5e-6, 0.05e-6);
  EXPECT_NEAR(e.gemm_roofline_exponent, 3.0, 0.05);
  EXPECT_NEAR(e.memory_fixed, 3.5e-6, 0.05e-6);
  EXPECT_NEAR(e.attention_cta_tail, 0.3, 0.01);
  EXPECT_NEAR(e.gemm_sm_fill_exponent, 0.4, 0.01);
  EXPECT_NEAR(e.gemm_c_write_exposed, 0.4, 0.01);
  EXPECT_NEAR(e.gemm_fill_bw_exponent, 0.3, 0.01);
  EXPECT_NEAR(cal.fitted.host.exec_gemm_enqueue, 6e-6, 0.05e-6);
  EXPECT_NEAR(e.nvlink, 0.75, 0.005);
  EXPECT_NEAR(e.nvlink_half_bytes / (1024 * 1024), 12, 0.3);
  EXPECT_EQ(cal.fitted.interconnect.nvlink_latency, h200().interconnect.nvlink_latency);  // kept
  EXPECT_EQ(cal.total_within_10, static_cast<int>(pts.size()));
  for (const PointResult& r : cal.points) EXPECT_LT(std::abs(r.error_after()), 0.01) << r.point->name;
  // The NIC class has no points: its parameters are kept and it says so.
  const ClassFit& nic = cal.classes[static_cast<size_t>(CalibClass::kNic)];
  EXPECT_FALSE(nic.fitted);
  EXPECT_EQ(cal.fitted.efficiency.nic, h200().efficiency.nic);
  EXPECT_THAT(nic.note, HasSubstr("no measurements"));
}

TEST(Calibrate, ReadsExecSummary) {
  const std::string text = R"({
    "benchmark": "collectives", "devices": ["#  Rank   0 Pid 11 on nodeA device  0 [0] H200",
                                            "#  Rank   1 Pid 12 on nodeB device  0 [0] H200"],
    "points": [
      {"family": "gemm", "key": "gemm/bf16/4096x6144x4096", "op": "bench.gemm.x", "shape": "4096x6144x4096",
       "dtype": "bf16", "correct": true, "time_us": {"median": 302.5, "p10": 300.0, "p90": 306.05}},
      {"family": "gemm", "key": "gemm/fp8_e4m3/1x2x3", "shape": "1x2x3", "dtype": "fp8_e4m3", "correct": true,
       "time_us": {"median": 2.0}},
      {"family": "attention", "key": "attention/bwd/1x8192x32x8x128", "op": "L.attn.core.bwd", "correct": true,
       "extra": {"attention": {"b": 1, "s": 8192, "hq": 32, "hkv": 8, "d": 128, "causal": true}},
       "time_us": {"median": 2873.34}},
      {"family": "attention", "key": "attention/fwd+bwd/1x8192x32x8x128", "correct": true,
       "extra": {"attention": {"b": 1, "s": 8192, "hq": 32, "hkv": 8, "d": 128}}, "time_us": {"median": 3835.0}},
      {"family": "collectives", "key": "collectives/all_gather/dp/float/1048576", "collective": "all_gather",
       "size": 1048576, "group_size": 2, "extra": {"ranks": [0, 1]}, "correct": true, "time_us": {"median": 10.0}},
      {"family": "collectives", "key": "bad", "collective": "all_reduce", "size": 1024, "group_size": 2,
       "correct": false, "time_us": {"median": 10.0}},
      {"family": "membw", "key": "membw/memcpy/1048576", "size": 1048576, "correct": true, "time_us": {"median": 5.0}},
      {"family": "moe", "key": "moe/x", "op": "L.moe.experts.fc1.fwd", "correct": true, "time_us": {"median": 50.0},
       "model_op": {"kind": "gemm", "m": 4096, "n": 2048, "k": 1024, "groups": 8, "dtype": "bf16"}},
      {"family": "moe", "key": "moe/y", "op": "L.moe.router.fwd", "correct": true, "time_us": {"median": 5.0}}
    ]})";
  std::vector<std::string> skipped;
  auto r = calib::parse_exec_summary(text, "s.json", 8, &skipped);
  ASSERT_TRUE(r.ok()) << r.error().str();
  const auto& p = r.value();
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0].op.kind, OpKind::kGemm);
  EXPECT_EQ(p[0].op.gemm.m, 4096);
  EXPECT_EQ(p[0].op.gemm.n, 6144);
  EXPECT_EQ(p[0].op.gemm.k, 4096);
  EXPECT_DOUBLE_EQ(p[0].measured_s, 302.5e-6);
  EXPECT_NEAR(p[0].spread, 6.05 / 302.5, 1e-12);
  EXPECT_EQ(p[1].op.dtype, DType::kFp8);
  EXPECT_EQ(p[2].op.pass, Pass::kBwd);
  EXPECT_EQ(p[2].op.attn.seq_kv, 8192);
  EXPECT_DOUBLE_EQ(p[2].op.attn.work_fraction, 0.5);
  EXPECT_EQ(p[3].op.coll.kind, Collective::kAllGather);
  EXPECT_DOUBLE_EQ(p[3].op.coll.message_bytes, 1048576);
  EXPECT_EQ(p[3].topo.nodes, 2);  // ranks 0 and 1 on different hosts
  EXPECT_EQ(p[3].topo.per_node, 1);
  EXPECT_DOUBLE_EQ(p[4].op.mem.bytes, 2.0 * 1048576);  // a copy reads and writes
  EXPECT_TRUE(p[4].op.mem.copy);                          // ... at efficiency.hbm, not hbm_elementwise
  EXPECT_EQ(p[5].op.gemm.groups, 8);
  EXPECT_EQ(p[5].name, "L.moe.experts.fc1.fwd");
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_THAT(skipped[0], HasSubstr("forward+backward"));
  EXPECT_THAT(skipped[1], HasSubstr("correctness check failed"));
  EXPECT_THAT(skipped[2], HasSubstr("moe point without extra.moe"));

  auto bad = calib::parse_exec_summary("{\"points\": 3}", "x.json", 8, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().str(), HasSubstr("not an lcm-exec summary"));
}

// An explicit memory model op is a step's memory-bound kernel (efficiency.hbm_elementwise)
// unless it says it is a copy (efficiency.hbm, the rate the memory class fits).
TEST(Calibrate, ExplicitMemoryOpIsAKernelUnlessItSaysCopy) {
  const std::string text = R"({"benchmark": "x", "points": [
    {"family": "x", "key": "a", "correct": true, "time_us": {"median": 10}, "model_op": {"kind": "memory", "bytes": 4096}},
    {"family": "x", "key": "b", "correct": true, "time_us": {"median": 10},
     "model_op": {"kind": "memory", "bytes": 4096, "copy": true}}]})";
  auto r = calib::parse_exec_summary(text, "m.json", 8, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_FALSE(r.value()[0].op.mem.copy);
  EXPECT_TRUE(r.value()[1].op.mem.copy);
}

// An explicit attention op says whether it is the unfused kernels (training.attention_backend
// unfused) or FlashAttention-2's (flash2) and whether dropout is on; each defaults to false, and
// a non-boolean is an error.
TEST(Calibrate, ExplicitAttentionOpCarriesUnfusedAndDropout) {
  const std::string text = R"({"benchmark": "x", "points": [
    {"family": "x", "key": "a", "correct": true, "time_us": {"median": 10},
     "model_op": {"kind": "attention", "b": 1, "s_q": 1024, "s_kv": 1024, "hq": 8, "hkv": 2, "d": 128, "pass": "bwd"}},
    {"family": "x", "key": "b", "correct": true, "time_us": {"median": 10},
     "model_op": {"kind": "attention", "b": 1, "s_q": 1024, "s_kv": 1024, "hq": 8, "hkv": 2, "d": 128,
                  "work_fraction": 0.5, "unfused": true, "dropout": true}},
    {"family": "x", "key": "c", "correct": true, "time_us": {"median": 10},
     "model_op": {"kind": "attention", "b": 1, "s_q": 1024, "s_kv": 1024, "hq": 8, "hkv": 2, "d": 128, "flash2": true}}]})";
  auto r = calib::parse_exec_summary(text, "a.json", 8, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_TRUE(r.value()[2].op.attn.flash2);
  EXPECT_FALSE(r.value()[2].op.attn.unfused);
  EXPECT_FALSE(r.value()[0].op.attn.flash2);
  EXPECT_FALSE(r.value()[0].op.attn.unfused);
  EXPECT_FALSE(r.value()[0].op.attn.dropout);
  EXPECT_EQ(r.value()[0].op.pass, Pass::kBwd);
  EXPECT_TRUE(r.value()[1].op.attn.unfused);
  EXPECT_TRUE(r.value()[1].op.attn.dropout);
  EXPECT_TRUE(r.value()[1].op.attn.causal);
  auto bad = calib::parse_exec_summary(R"({"benchmark":"x","points":[{"key":"k","correct":true,"time_us":{"median":1},)"
                                       R"("model_op":{"kind":"attention","b":1,"s_q":8,"s_kv":8,"hq":1,"d":8,"unfused":1}}]})",
                                       "f.json", 8, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().str(), "f.json: k: unfused: expected true or false, got 1");
}

// `bench moe` phases become the model's ops by name: expert GEMMs grouped over the local
// experts with this rank's received rows, their backward by dgrad_shape / wgrad_shape, the
// all-to-alls on the EP group with the rows this rank sends.
TEST(Calibrate, ReadsMoePhasesAsModelOps) {
  const std::string text = R"({"benchmark": "moe", "points": [
    {"family": "moe", "key": "m/fc1", "op": "L.moe.experts.fc1.fwd", "correct": true, "time_us": {"median": 5000},
     "extra": {"moe": {"tokens": 8192, "hidden": 4096, "ffn": 14336, "experts": 8, "topk": 2, "ep": 2, "local_experts": 4},
               "routing": {"received_rows_per_rank": [16406, 16362], "dropped_fraction_rank0": 0.25}, "ep_ranks": [0, 1]}},
    {"family": "moe", "key": "m/fc2w", "op": "L.moe.experts.fc2.bwd.wgrad", "correct": true, "time_us": {"median": 2800},
     "extra": {"moe": {"tokens": 8192, "hidden": 4096, "ffn": 14336, "experts": 8, "topk": 2, "ep": 2, "local_experts": 4},
               "routing": {"received_rows_per_rank": [16406, 16362]}}},
    {"family": "moe", "key": "m/a2a", "op": "L.moe.dispatch.a2a.fwd", "correct": true, "time_us": {"median": 600},
     "extra": {"moe": {"tokens": 8192, "hidden": 4096, "ffn": 14336, "experts": 8, "topk": 2, "ep": 2, "local_experts": 4},
               "routing": {"received_rows_per_rank": [16406, 16362], "dropped_fraction_rank0": 0.25}, "ep_ranks": [0, 1]}},
    {"family": "moe", "key": "m/act", "op": "L.moe.experts.act.fwd", "correct": true, "time_us": {"median": 900},
     "extra": {"moe": {"tokens": 8192, "hidden": 4096, "ffn": 14336, "experts": 8, "topk": 2, "ep": 2, "local_experts": 4}}},
    {"family": "moe", "key": "m/layer", "op": "L.moe.layer.fwd", "correct": true, "time_us": {"median": 10000}}]})";
  std::vector<std::string> skipped;
  auto r = calib::parse_exec_summary(text, "moe.json", 8, &skipped);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r.value().size(), 3u);
  const MeasuredOp& fc1 = r.value()[0];
  EXPECT_EQ(fc1.op.kind, OpKind::kGemm);
  EXPECT_EQ(fc1.op.gemm.m, 16406);       // rank 0's received rows
  EXPECT_EQ(fc1.op.gemm.n, 2 * 14336);   // SwiGLU gate and up
  EXPECT_EQ(fc1.op.gemm.k, 4096);
  EXPECT_EQ(fc1.op.gemm.groups, 4);
  const MeasuredOp& w = r.value()[1];
  EXPECT_EQ(w.op.pass, Pass::kBwd);
  EXPECT_EQ(w.op.gemm.m, 14336);         // dW2 = A^T dC: f x h, reducing over the tokens
  EXPECT_EQ(w.op.gemm.n, 4096);
  EXPECT_EQ(w.op.gemm.k, 16406);
  EXPECT_TRUE(w.op.gemm.split_k);
  const MeasuredOp& a = r.value()[2];
  EXPECT_EQ(a.op.coll.kind, Collective::kAllToAll);
  EXPECT_DOUBLE_EQ(a.op.coll.message_bytes, 8192.0 * 2 * 0.75 * 4096 * 2);  // kept rows x h x bf16
  EXPECT_EQ(a.topo.size, 2);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[0], HasSubstr("memory-bound phases"));
  EXPECT_THAT(skipped[1], HasSubstr("whole-layer total"));
}

// `bench cp-attention`'s compute-only steps (the committed 2 x H200 CP 2 ring) are the op the
// schedule builds for a CP rank of the p2p ring: s/2 queries over s keys, causal, the KV block
// of a step s/2; the ring totals and messages are skipped (validation/measured/h200/cp_ring/).
TEST(CalibrateInput, CpRingComputeStepsAreTheSchedulesOp) {
  std::vector<std::string> skipped;
  auto r = calib::parse_exec_summary(slurp(kSrc + "/validation/measured/h200/cp_attention_cp2.json"), "cp.json", 8,
                                     &skipped);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r.value().size(), 6u);
  const int64_t seqs[] = {8192, 32768, 131072};
  for (size_t i = 0; i < 6; ++i) {
    const MeasuredOp& m = r.value()[i];
    const int64_t s = seqs[i / 2];
    EXPECT_EQ(m.op.kind, OpKind::kAttention);
    EXPECT_EQ(m.op.pass, i % 2 == 0 ? Pass::kFwd : Pass::kBwd) << i;
    EXPECT_EQ(m.op.attn.seq_q, s / 2);
    EXPECT_EQ(m.op.attn.seq_kv, s);
    EXPECT_EQ(m.op.attn.kv_block, s / 2);
    EXPECT_EQ(m.op.attn.heads_q, 32);
    EXPECT_EQ(m.op.attn.heads_kv, 8);
    EXPECT_EQ(m.op.attn.head_dim_qk, 128);
    EXPECT_DOUBLE_EQ(m.op.attn.work_fraction, 0.5);
  }
  EXPECT_NEAR(r.value()[4].measured_s, 115464.28680419922e-6, 1e-12);  // 128K forward, rank 0
  ASSERT_EQ(skipped.size(), 15u);
  for (const std::string& s : skipped) EXPECT_THAT(s, HasSubstr("a CP ring total or message"));
}

// A grouped GEMM's weight gradient splits the tokens (k), not the rows: 128 experts' dW of
// 2048 x 7168 over 256 tokens each run at the efficiency of 2048 x 7168 x 256 GEMMs, plus
// the fixed time of one kernel for the first expert and the back-to-back fixed time
// (grouped_gemm_fixed) for each of the other 127.
TEST(Calibrate, GroupedWeightGradientSplitsTheTokens) {
  const HardwareSpec hw = h200();
  ASSERT_GT(hw.efficiency.grouped_gemm_fixed, 0);
  ASSERT_NE(hw.efficiency.grouped_gemm_fixed, hw.efficiency.kernel_fixed);
  const GemmShape fwd{32768, 7168, 2048, 128};
  const GemmShape w = wgrad_shape(fwd);
  EXPECT_TRUE(w.split_k);
  const GemmShape one{2048, 7168, 256, 1};
  EXPECT_NEAR(gemm_time(w, DType::kBf16, hw),
              128 * (gemm_time(one, DType::kBf16, hw) - hw.efficiency.kernel_fixed) + hw.efficiency.kernel_fixed +
                  127 * hw.efficiency.grouped_gemm_fixed,
              1e-12);
}

TEST(Calibrate, ReadsNcclTestsLog) {
  const std::string log =
      "# nccl-tests version 2.17.1 nccl-headers=22803 nccl-library=22803\n"
      "# Collective test starting: all_reduce_perf\n"
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#\n# Using devices\n"
      "#  Rank  0 Group  0 Pid  100 on      hostA device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  101 on      hostA device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  2 Group  0 Pid  200 on      hostB device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  3 Group  0 Pid  201 on      hostB device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n"
      "#\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
      "     1048576        262144     float     sum      -1    45.10   23.25   34.88      0    44.90   23.35   35.03      0\n"
      "     2097152        524288     float     sum      -1    60.00   34.95   52.43      3    59.00   35.54   53.32      0\n"
      "     4194304       1048576     float     sum      -1   101.20   41.45   62.17      0   100.80   41.61   62.42      0\n"
      "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 49.2\n";
  auto r = calib::parse_nccl_tests_log(log, "ar.txt", 8);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r.value().size(), 2u);  // the row with #wrong = 3 is not a measurement
  const MeasuredOp& a = r.value()[0];
  EXPECT_EQ(a.op.coll.kind, Collective::kAllReduce);
  EXPECT_EQ(a.op.coll.group_size, 4);
  EXPECT_EQ(a.topo.nodes, 2);
  EXPECT_EQ(a.topo.per_node, 2);
  EXPECT_DOUBLE_EQ(a.op.coll.message_bytes, 1048576);
  EXPECT_DOUBLE_EQ(a.measured_s, 45.10e-6);  // out-of-place time
  EXPECT_DOUBLE_EQ(r.value()[1].measured_s, 101.20e-6);
  auto none = calib::parse_nccl_tests_log("hello\n", "x.txt", 8);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().str(), HasSubstr("not an nccl-tests log"));
}

TEST(Calibrate, ProfileEditKeepsCommentsAndReloads) {
  const std::string path = kSrc + "/hwprofiles/h200-sxm.yaml";
  const std::string text = slurp(path);
  HardwareSpec hw = h200();
  hw.efficiency.gemm = 0.6543;
  hw.interconnect.nvlink_latency = 7.25e-6;
  hw.efficiency.kernel_fixed = 2.1e-6;
  auto r = io::edit_hardware_profile(text, path, hw,
                                     {{"efficiency.gemm", "fitted"}, {"nvlink_latency_us", ""},
                                      {"efficiency.kernel_fixed_us", "fitted too"}});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_THAT(r.value(), HasSubstr("  # fitted\n  gemm: 0.6543\n"));
  EXPECT_THAT(r.value(), HasSubstr("\nnvlink_latency_us: 7.25\n"));
  EXPECT_THAT(r.value(), HasSubstr("  kernel_fixed_us: 2.1\n"));
  // Every comment line of the original is still there.
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.find('#') == 0) {
      EXPECT_THAT(r.value(), HasSubstr(l));
    }
  }
  auto back = io::load_hardware_profile_text(r.value(), "edited");
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back.value().efficiency.gemm, 0.6543);
  EXPECT_DOUBLE_EQ(back.value().interconnect.nvlink_latency, 7.25e-6);
  auto bad = io::edit_hardware_profile(text, path, hw, {{"efficiency.gemmm", ""}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().str(), HasSubstr("efficiency.gemmm: not a hardware profile key"));
}

// An optional key the profile lacks (efficiency.gemm_fp8_block: block-scaled FP8 unmeasured in
// h200-sxm.yaml, which loads with 0) is added after the block's last key, with its comment.
TEST(Calibrate, ProfileEditAddsAnOptionalKeyItLacks) {
  const std::string path = kSrc + "/hwprofiles/h200-sxm.yaml";
  const std::string text = slurp(path);
  ASSERT_EQ(text.find("gemm_fp8_block"), std::string::npos);
  HardwareSpec hw = h200();
  EXPECT_EQ(hw.efficiency.gemm_fp8_block, 0);
  hw.efficiency.gemm_fp8_block = 0.4321;
  auto r = io::edit_hardware_profile(text, path, hw, {{"efficiency.gemm_fp8_block", "fitted"}});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_THAT(r.value(), HasSubstr("  # fitted\n  gemm_fp8_block: 0.4321\n"));
  auto back = io::load_hardware_profile_text(r.value(), "edited");
  ASSERT_TRUE(back.ok()) << back.error().str();
  EXPECT_DOUBLE_EQ(back.value().efficiency.gemm_fp8_block, 0.4321);
  EXPECT_DOUBLE_EQ(back.value().efficiency.gemm_fp8, hw.efficiency.gemm_fp8);
}

// A block-scaled point ("fp8_block" in an lcm-exec summary) is its own class: a fit on such
// points moves efficiency.gemm_fp8_block and leaves the per-tensor term alone.
TEST(Calibrate, BlockScaledGemmsFitTheirOwnTerm) {
  MeasuredOp m;
  m.op.kind = OpKind::kGemm;
  m.op.dtype = DType::kFp8Block;
  EXPECT_EQ(calib_class(m), CalibClass::kGemmFp8Block);
  EXPECT_STREQ(to_string(CalibClass::kGemmFp8Block), "gemm_fp8_block");
  HardwareSpec start = h200();
  start.efficiency.gemm_fp8_block = 0.5;
  HardwareSpec truth = start;
  truth.efficiency.gemm_fp8_block = 0.4;
  std::vector<MeasuredOp> pts;
  for (int64_t d : {2048, 4096, 8192}) {
    MeasuredOp p = m;
    p.key = "gemm/fp8_block/" + std::to_string(d);
    p.op.gemm = GemmShape{d, d, d, 1};
    p.measured_s = predict_time(p, truth);
    pts.push_back(p);
  }
  const Calibration cal = calibrate(pts, start);
  EXPECT_NEAR(cal.fitted.efficiency.gemm_fp8_block, 0.4, 1e-3);
  EXPECT_DOUBLE_EQ(cal.fitted.efficiency.gemm_fp8, start.efficiency.gemm_fp8);
}

// Writing the uncertainty block replaces the old one with its two-line comment: applied twice
// (and to the calibrated profile, which has one) the comment appears once.
TEST(Calibrate, UncertaintyBlockIsReplacedWithItsComment) {
  OpUncertainty u;
  u.present = true;
  u.source = "test";
  u.points = 7;
  u.gemm_bf16 = RelativeBand{-0.1, 0.2};
  for (const std::string name : {"h200-sxm.yaml", "h200-sxm.calibrated.yaml"}) {
    const std::string path = kSrc + "/hwprofiles/" + name;
    auto once = io::set_profile_uncertainty(slurp(path), path, u);
    ASSERT_TRUE(once.ok()) << once.error().str();
    auto twice = io::set_profile_uncertainty(once.value(), path, u);
    ASSERT_TRUE(twice.ok()) << twice.error().str();
    EXPECT_EQ(twice.value(), once.value()) << name;
    const std::string& t = twice.value();
    const std::string head = "# uncertainty: the time model's op-level error";
    const size_t first = t.find(head);
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(t.find(head, first + 1), std::string::npos) << name << ": the comment appears twice";
    EXPECT_EQ(t.find("\nuncertainty:"), t.rfind("\nuncertainty:")) << name;
  }
}

// The committed inputs of the H200 calibration, one path per line (relative to the source).
std::vector<std::string> committed_inputs() {
  std::vector<std::string> out;
  std::istringstream in(slurp(kSrc + "/validation/measured/h200/calibration_inputs.txt"));
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] != '#') out.push_back(kSrc + "/" + l);
  return out;
}

calib::Measurements committed_measurements() {
  calib::Measurements ms;
  for (const std::string& f : committed_inputs()) {
    auto r = calib::read_measurements(f, 8, ms);
    EXPECT_TRUE(r.ok()) << r.error().str();
  }
  return ms;
}

TEST(Calibrate, CommittedH200CalibrationPredictsNinetyPercentWithinTenPercent) {
  const calib::Measurements ms = committed_measurements();
  ASSERT_GE(ms.points.size(), 150u);
  auto cal_hw = io::load_hardware_profile(kSrc + "/hwprofiles/h200-sxm.calibrated.yaml");
  ASSERT_TRUE(cal_hw.ok()) << cal_hw.error().str();
  const auto rows = compare(ms.points, cal_hw.value());
  ASSERT_EQ(static_cast<int>(rows.size()), kCommittedPoints);
  int within = 0, within_original = 0, original = 0;
  for (const PointResult& r : rows) {
    const bool ok = std::abs(r.error_after()) <= 0.10;
    within += ok;
    if (r.point->source.find("/heldout") != std::string::npos ||
        r.point->source.find("/session10/") != std::string::npos ||
        r.point->source.find("/session15/") != std::string::npos)
      continue;
    ++original;
    within_original += ok;
  }
  // The 200 points of the original inputs: 180 within 10% before session 10, 179 since the
  // grouped GEMMs' back-to-back fixed time and the re-measured MoE runs refitted the peak
  // fraction (0.7178 -> 0.7023): 4096x4096x14336 went from +8.7% to +11.2%.
  EXPECT_EQ(original, 200);
  EXPECT_GE(within_original, 179) << within_original << " of " << original;
  // The recorded figure (docs/calibration.md); a model change that moves it must update it.
  EXPECT_GE(within, kCommittedWithin10) << "of " << rows.size();

  // The committed profile is what `lcm calibrate` fits from the shipped profile.
  const Calibration fit = calibrate(ms.points, h200());
  const EfficiencySpec& a = fit.fitted.efficiency;
  const EfficiencySpec& b = cal_hw.value().efficiency;
  auto rel = [](double x, double y) { return std::abs(x - y) / std::max(std::abs(y), 1e-30); };
  EXPECT_LT(rel(a.gemm, b.gemm), 1e-3);
  EXPECT_LT(rel(a.gemm_fp8, b.gemm_fp8), 1e-3);
  EXPECT_LT(rel(a.attention_fwd, b.attention_fwd), 1e-3);
  EXPECT_LT(rel(a.attention_bwd, b.attention_bwd), 1e-3);
  EXPECT_LT(rel(a.hbm, b.hbm), 1e-3);
  EXPECT_LT(rel(a.nvlink, b.nvlink), 1e-3);
  EXPECT_EQ(a.gemm_tile_m, b.gemm_tile_m);
  EXPECT_EQ(a.gemm_tile_n, b.gemm_tile_n);
}

TEST(Calibrate, CommandLine) {
  const std::string out = testing::TempDir() + "/cal_profile.yaml";
  // The list form: @LIST names the inputs, relative to the repository root above it.
  auto r = lcm("calibrate --profile h200-sxm -o '" + out + "' @validation/measured/h200/calibration_inputs.txt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Fit per op class"));
  EXPECT_THAT(r.out, HasSubstr("efficiency.gemm"));
  auto reloaded = io::load_hardware_profile(out);
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().str();
  EXPECT_THAT(slurp(out), HasSubstr("lcm calibrate:"));

  const std::string list = testing::TempDir() + "/bad_list.txt";
  std::ofstream(list) << "# inputs\nvalidation/measured/h200/membw_gated.json\nno/such.json\n";
  auto bad_list = lcm("calibrate --compare --profile h200-sxm '@" + list + "'");
  EXPECT_EQ(bad_list.code, 2);
  EXPECT_THAT(bad_list.err, HasSubstr(list + ":3: no/such.json: no such file or directory"));

  auto missing = lcm("calibrate --profile h200-sxm -o /tmp/x.yaml no/such/dir");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("no/such/dir: no such file or directory"));
  EXPECT_EQ(plantest::lines(missing.err).size(), 1u);
  auto no_out = lcm("calibrate --profile h200-sxm validation/measured/h200/membw.json");
  EXPECT_EQ(no_out.code, 2);
  EXPECT_THAT(no_out.err, HasSubstr("-o FILE"));
  auto cmp = lcm("calibrate --compare --profile h200-sxm --format csv validation/measured/h200/membw.json");
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  EXPECT_THAT(cmp.out, HasSubstr("op,class,shape,measured us,predicted us,error"));
}

// --compare's summary by family (comparison_family_table): an MoE layer's router GEMMs and its
// grouped expert GEMMs apart from the other GEMMs of their class; errors by hand.
TEST(CalibrateReport, ComparisonFamiliesSplitRouterAndExpertGemms) {
  auto point = [](const std::string& name, double measured_us) {
    MeasuredOp m;
    m.name = name;
    m.op.kind = OpKind::kGemm;
    m.measured_s = measured_us * 1e-6;
    return m;
  };
  const std::vector<MeasuredOp> ms = {point("bench.gemm.a", 100), point("L.moe.router.fwd", 50),
                                      point("L.moe.experts.fc1.fwd", 1000), point("bench.gemm.b", 100),
                                      point("L.moe.experts.fc2.fwd", 200)};
  const double predicted_us[] = {105, 40, 1090, 80, 230};  // +5, -20, +9, -20, +15 %
  std::vector<PointResult> rows;
  for (size_t i = 0; i < ms.size(); ++i)
    rows.push_back({.point = &ms[i], .cls = CalibClass::kGemmBf16, .predicted_after_s = predicted_us[i] * 1e-6});
  const report::Table t = report::comparison_family_table(rows);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0],
            (std::vector<std::string>{"gemm_bf16", "2", "1/2 (50.0%)", "-20.0% .. +5.0%", "12.5%", "-7.5%"}));
  EXPECT_EQ(t.rows[1],
            (std::vector<std::string>{"moe router GEMMs", "1", "0/1 (0.0%)", "-20.0% .. -20.0%", "20.0%", "-20.0%"}));
  EXPECT_EQ(t.rows[2], (std::vector<std::string>{"moe grouped expert GEMMs", "2", "1/2 (50.0%)", "+9.0% .. +15.0%",
                                                 "12.0%", "+12.0%"}));
  // The CLI prints it under the per-point table (not in CSV, which stays one table).
  auto md = lcm(
      "calibrate --compare --profile h100-sxm --format md validation/measured/h100/heldout19/moe_mixtral_t9k_ep1.json");
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_THAT(md.out, HasSubstr("| moe router GEMMs | 6 |"));
  EXPECT_THAT(md.out, HasSubstr("| moe grouped expert GEMMs | 12 |"));
}

// Summaries of another part: calibrate warns (stderr and the report) and still runs. The H200
// summaries say 132 SMs and 150109880320 B (139.8 GiB); h100-sxm has 132 SMs and 81559 MiB
// (79.6 GiB): HBM 76 % larger, past the 5 % tolerance. h200-sxm.calibrated (143771 MiB) is
// within it (0.4 %), so no warning there.
TEST(Calibrate, WarnsWhenTheMeasurementsAreOfAnotherGpu) {
  const std::string file = "validation/measured/h200/heldout16/gemm_fp8.json";
  auto other = lcm("calibrate --compare --profile h100-sxm " + file);
  ASSERT_EQ(other.code, 0) << other.err;
  const std::string warning =
      "1 file measured on another GPU than profile h100-sxm describes: NVIDIA H200 (132 SMs, 139.8 GiB) against 132 "
      "SMs and 79.6 GiB (e.g. " + file + ")";
  EXPECT_THAT(other.err, HasSubstr("lcm: calibrate: warning: " + warning));
  EXPECT_THAT(other.out, HasSubstr("WARNING: " + warning));
  auto same = lcm("calibrate --compare --profile h200-sxm.calibrated " + file);
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_THAT(same.err, Not(HasSubstr("another GPU")));
  EXPECT_THAT(same.out, Not(HasSubstr("WARNING")));

  // The check itself: SM count exactly, HBM within 5 %; one line per distinct GPU.
  calib::Measurements ms;
  ms.gpus = {{"a.json", "GPU A", 132, 80.0 * 1073741824.0},
             {"b.json", "GPU A", 132, 80.0 * 1073741824.0},
             {"c.json", "GPU B", 114, 80.0 * 1073741824.0},
             {"d.json", "GPU C", 132, 83.9 * 1073741824.0}};
  HardwareSpec hw;
  hw.name = "p";
  hw.gpu.num_sms = 132;
  hw.gpu.hbm_bytes = 80.0 * 1073741824.0;
  EXPECT_THAT(calib::gpu_mismatches(ms, hw),
              ::testing::ElementsAre(
                  "1 file measured on another GPU than profile p describes: GPU B (114 SMs, 80.0 GiB) against 132 "
                  "SMs and 80.0 GiB (e.g. c.json)"));
  ms.gpus.push_back({"e.json", "GPU D", 132, 84.1 * 1073741824.0});  // 5.1 % above
  ms.gpus.push_back({"f.json", "GPU D", 132, 84.1 * 1073741824.0});
  EXPECT_EQ(calib::gpu_mismatches(ms, hw).size(), 2u);
  EXPECT_THAT(calib::gpu_mismatches(ms, hw)[1], HasSubstr("2 files measured on another GPU"));
}

// ---- Cross-validation by shape ------------------------------------------------------------

// The committed H200 fit cross-validated over 5 folds (docs/calibration.md): points within
// 10% when each is predicted by the fit that did not see its shape.
constexpr int kCommittedCvWithin10 = 1416;  // of 1534, 5 folds (docs/calibration.md); 1414 before session 31, 818 of 893 before

// Relative noise uniform in [-5%, +5%] from mt19937's raw output (its sequence is fixed by
// the standard, unlike the distributions').
void add_noise(std::vector<MeasuredOp>& pts, const HardwareSpec& truth, uint32_t seed) {
  std::mt19937 rng(seed);
  for (MeasuredOp& p : pts) {
    const double u = (static_cast<double>(rng() % 10001) / 10000.0 * 2.0 - 1.0) * 0.05;
    p.measured_s = predict_time(p, truth) * (1.0 + u);
  }
}

// (a) Data from a known profile with +-5% noise: the model can express the truth, so a
// held-out shape is predicted about as well as a fitted one. By hand: |noise| averages
// 2.5%; a least-squares fit of p parameters to n points absorbs a share p / n of the noise
// variance in-sample and adds about as much held out, so the in-sample error is about
// sqrt(1 - p/n) and the held-out one sqrt(1 + p/n) times the noise. Here p is about 21 (4
// + 2 tiles BF16, 1 FP8, 6 attention, 2 memory, 6 NVLink) for n = 77: 2.5% x 0.85 = 2.1%
// in-sample, 2.5% x 1.13 = 2.8% held out, a ratio of 1.33; every error is the 5% noise
// plus the fit's deviation, so at most an extrapolated extreme size or two leave 10%.
TEST(CalibrateCv, KnownProfileWithNoiseHeldOutMatchesInSample) {
  const HardwareSpec truth = known_truth();
  std::vector<MeasuredOp> pts = synthetic_points();
  add_noise(pts, truth, 12345);
  const Calibration cal = calibrate(pts, h200(), 5);
  const CrossValidation& cv = cal.cv;
  ASSERT_EQ(cv.folds, 5);
  const int n = static_cast<int>(pts.size());
  ASSERT_EQ(n, 87);
  EXPECT_EQ(cv.in_sample.points, n);
  EXPECT_EQ(cv.held_out.points, n);
  EXPECT_EQ(cv.in_sample.within_10, cal.total_within_10);
  EXPECT_EQ(cv.in_sample.within_10, n);
  EXPECT_GE(cv.held_out.within_10, n - 2);
  EXPECT_GT(cv.in_sample.mean_abs, 0.017);
  EXPECT_LT(cv.in_sample.mean_abs, 0.025);
  EXPECT_GT(cv.held_out.mean_abs, 0.025);
  // 0.034 before issue 12; the 5 router / skinny shapes now carry 2 more parameters
  // (gemm_roofline_exponent, kernel_fixed_us), so one held out leaves them less determined:
  // 3.6% measured.
  EXPECT_LT(cv.held_out.mean_abs, 0.038);
  EXPECT_GT(cv.held_out.mean_abs / cv.in_sample.mean_abs, 1.1);
  EXPECT_LT(cv.held_out.mean_abs / cv.in_sample.mean_abs, 1.6);
  EXPECT_GT(cv.in_sample.median_abs, 0.015);
  EXPECT_LT(cv.held_out.median_abs, 0.034);
  for (const PointResult& r : cal.points) EXPECT_GE(r.fold, 0);
  EXPECT_LT(cv.within_drop_pp(), 3.0);
  EXPECT_EQ(report::cv_warning(cal, report::kDefaultCvMaxDropPp), "");

  // Cross-validation does not touch the fit of all points.
  const Calibration plain = calibrate(pts, h200());
  EXPECT_EQ(plain.cv.folds, 0);
  const EfficiencySpec& a = cal.fitted.efficiency;
  const EfficiencySpec& b = plain.fitted.efficiency;
  EXPECT_EQ(a.gemm, b.gemm);
  EXPECT_EQ(a.gemm_dim_half, b.gemm_dim_half);
  EXPECT_EQ(a.gemm_tile_m, b.gemm_tile_m);
  EXPECT_EQ(a.gemm_fp8, b.gemm_fp8);
  EXPECT_EQ(a.attention_fwd, b.attention_fwd);
  EXPECT_EQ(a.attention_bwd, b.attention_bwd);
  EXPECT_EQ(a.attention_seq_half, b.attention_seq_half);
  EXPECT_EQ(a.hbm, b.hbm);
  EXPECT_EQ(a.kernel_fixed, b.kernel_fixed);
  EXPECT_EQ(a.nvlink, b.nvlink);
  EXPECT_EQ(a.nvlink_half_bytes, b.nvlink_half_bytes);
  for (size_t i = 0; i < cal.points.size(); ++i)
    EXPECT_EQ(cal.points[i].predicted_after_s, plain.points[i].predicted_after_s);
}

// (b) Planted overfit: efficiency.gemm_fp8 is seen only through one FP8 shape (20 runs of
// 4096^3). In-sample the fit reproduces it exactly; held out, its fold has no FP8 point,
// so the FP8 points are predicted with the starting 0.604 instead of the true 0.45: about
// 0.45 / 0.604 - 1 = -25.5% (a little less: the fixed time per kernel is the same in both),
// so all 20 miss. The 24 BF16 shapes are the starting profile's own times: 44/44 in-sample,
// 24/44 held out, 45.5 points lower.
std::vector<MeasuredOp> planted_overfit_points() {
  HardwareSpec truth = h200();
  truth.efficiency.gemm_fp8 = 0.45;
  std::vector<MeasuredOp> pts;
  for (int64_t m : {1024, 4096, 8192, 16384})
    for (int64_t n : {2048, 6144, 14336})
      for (int64_t k : {1024, 4096}) pts.push_back(gemm(m, n, k));
  for (int i = 0; i < 20; ++i) pts.push_back(gemm(4096, 4096, 4096, DType::kFp8));
  for (MeasuredOp& p : pts) p.measured_s = predict_time(p, truth);
  return pts;
}

TEST(CalibrateCv, ParameterSeenInOneShapeIsFlagged) {
  const std::vector<MeasuredOp> pts = planted_overfit_points();
  const Calibration cal = calibrate(pts, h200(), 5);
  const CrossValidation& cv = cal.cv;
  EXPECT_EQ(cv.shapes, 25);
  EXPECT_NEAR(cal.fitted.efficiency.gemm_fp8, 0.45, 1e-3);  // in-sample: found exactly
  EXPECT_EQ(cv.in_sample.within_10, 44);
  EXPECT_EQ(cv.held_out.within_10, 24);
  EXPECT_NEAR(cv.within_drop_pp(), 100.0 * 20.0 / 44.0, 1e-9);
  const ClassCv& fp8 = cv.classes[static_cast<size_t>(CalibClass::kGemmFp8)];
  EXPECT_EQ(fp8.shapes, 1);
  EXPECT_EQ(fp8.in_sample.within_10, 20);
  EXPECT_EQ(fp8.held_out.within_10, 0);
  EXPECT_LT(fp8.in_sample.mean_abs, 1e-3);
  EXPECT_GT(fp8.held_out.mean_abs, 0.22);
  EXPECT_LT(fp8.held_out.mean_abs, 0.255);
  for (const PointResult& r : cal.points) {
    if (r.cls == CalibClass::kGemmFp8) {
      EXPECT_LT(r.error_cv(), -0.22);
    }
  }
  const std::string w = report::cv_warning(cal, 10.0);
  EXPECT_EQ(w.rfind("WARNING: ", 0), 0u) << w;
  EXPECT_THAT(w, HasSubstr("24/44 (54.5%) of points within 10% held out vs 44/44 (100.0%) in-sample"));
  EXPECT_THAT(w, HasSubstr("45.5 points lower"));
  EXPECT_THAT(w, HasSubstr("worst held out: gemm_fp8 20/20 -> 0/20 within 10%"));
  EXPECT_EQ(w.find('\n'), std::string::npos);
  EXPECT_EQ(report::cv_warning(cal, 50.0), "");  // the threshold is the caller's
}

// The planted case as an lcm-exec summary, through the command line: the warning, and
// with --strict-cv exit code 3 and no profile.
TEST(CalibrateCv, StrictCvRefusesTheOverfitProfile) {
  nlohmann::json points = nlohmann::json::array();
  int i = 0;
  for (const MeasuredOp& p : planted_overfit_points())
    points.push_back({{"family", "gemm"},
                      {"key", fmt::format("gemm/{}/{}", p.op.dtype == DType::kFp8 ? "fp8" : "bf16", i++)},
                      {"op", "bench.gemm"},
                      {"shape", fmt::format("{}x{}x{}", p.op.gemm.m, p.op.gemm.n, p.op.gemm.k)},
                      {"dtype", p.op.dtype == DType::kFp8 ? "fp8_e4m3" : "bf16"},
                      {"correct", true},
                      {"time_us", {{"median", p.measured_s * 1e6}}}});
  const std::string dir = testing::TempDir();
  const std::string summary = dir + "/planted_overfit.json", prof = dir + "/planted_fit.yaml";
  std::ofstream(summary) << nlohmann::json{{"benchmark", "gemm"}, {"points", points}}.dump();
  std::remove(prof.c_str());

  const std::string base = "calibrate '" + summary + "' --profile h200-sxm -o '" + prof + "' ";
  auto warned = lcm(base);
  ASSERT_EQ(warned.code, 0) << warned.err;
  EXPECT_THAT(warned.out, HasSubstr("WARNING: cross-validated fit: 24/44 (54.5%)"));
  EXPECT_THAT(warned.out, HasSubstr("calibrated profile written to"));
  EXPECT_TRUE(std::ifstream(prof).good());
  std::remove(prof.c_str());

  auto strict = lcm(base + "--strict-cv --format json");
  EXPECT_EQ(strict.code, 3) << strict.err;
  EXPECT_FALSE(std::ifstream(prof).good());  // not written
  EXPECT_THAT(strict.err, HasSubstr("WARNING: cross-validated fit"));
  EXPECT_THAT(strict.err, HasSubstr("calibrated profile NOT written"));
  const auto j = nlohmann::json::parse(strict.out);
  EXPECT_EQ(j.at("profile_written"), false);
  EXPECT_EQ(j.at("cross_validation").at("cross_validated").at("within_10"), 24);
  EXPECT_THAT(j.at("cross_validation").at("warning").get<std::string>(), HasSubstr("gemm_fp8 20/20 -> 0/20"));

  // A threshold above the 45.5-point drop passes; --strict-cv without folds is refused.
  auto lenient = lcm(base + "--strict-cv --cv-max-drop 50");
  EXPECT_EQ(lenient.code, 0) << lenient.err;
  EXPECT_TRUE(std::ifstream(prof).good());
  EXPECT_THAT(lenient.out, Not(HasSubstr("WARNING")));
  auto no_folds = lcm(base + "--strict-cv --folds 1");
  EXPECT_EQ(no_folds.code, 2);
  EXPECT_THAT(no_folds.err, HasSubstr("--strict-cv needs cross-validation"));
}

// (c) Folds: every point of one shape in one fold; per class the shapes spread evenly;
// the assignment depends on the shapes only (a shuffled input gives each shape its fold).
void expect_folds_keep_shapes(const std::vector<MeasuredOp>& pts, int k) {
  const std::vector<int> folds = assign_folds(pts, k);
  ASSERT_EQ(folds.size(), pts.size());
  std::map<std::string, int> fold_of;
  std::vector<std::map<int, std::set<std::string>>> shapes_per_fold(kNumCalibClasses);
  for (size_t i = 0; i < pts.size(); ++i) {
    ASSERT_GE(folds[i], 0);
    ASSERT_LT(folds[i], k);
    const std::string key = shape_key(pts[i]);
    const auto [it, fresh] = fold_of.emplace(key, folds[i]);
    EXPECT_EQ(it->second, folds[i]) << key << " in two folds";
    shapes_per_fold[static_cast<size_t>(calib_class(pts[i]))][folds[i]].insert(key);
  }
  for (const auto& cls : shapes_per_fold) {
    size_t lo = SIZE_MAX, hi = 0, total = 0;
    for (int f = 0; f < k; ++f) {
      const size_t n = cls.count(f) ? cls.at(f).size() : 0;
      lo = std::min(lo, n);
      hi = std::max(hi, n);
      total += n;
    }
    if (total) {
      EXPECT_LE(hi - lo, 1u);
    }
  }
  std::vector<MeasuredOp> shuffled = pts;
  std::mt19937 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const std::vector<int> again = assign_folds(shuffled, k);
  for (size_t i = 0; i < shuffled.size(); ++i) EXPECT_EQ(again[i], fold_of.at(shape_key(shuffled[i])));
}

TEST(CalibrateCv, FoldsKeepEveryShapeTogether) {
  // What one shape is: the pass, repetitions and sizes within a power-of-2 bucket share it.
  EXPECT_EQ(shape_key(attention(4096, 128, false)), shape_key(attention(4096, 128, true)));
  EXPECT_NE(shape_key(attention(4096, 128, false)), shape_key(attention(8192, 128, false)));
  EXPECT_NE(shape_key(gemm(4096, 4096, 4096)), shape_key(gemm(4096, 4096, 4096, DType::kFp8)));
  EXPECT_NE(shape_key(gemm(4096, 4096, 4096)), shape_key(gemm(4096, 4096, 4097)));
  EXPECT_EQ(shape_key(coll(Collective::kAllReduce, 1 << 20, 2)), shape_key(coll(Collective::kAllReduce, 1.2e6, 2)));
  EXPECT_NE(shape_key(coll(Collective::kAllReduce, 1 << 20, 2)), shape_key(coll(Collective::kAllReduce, 2 << 20, 2)));
  EXPECT_NE(shape_key(coll(Collective::kAllReduce, 1 << 20, 2)), shape_key(coll(Collective::kAllGather, 1 << 20, 2)));
  EXPECT_NE(shape_key(coll(Collective::kAllReduce, 1 << 20, 2)), shape_key(coll(Collective::kAllReduce, 1 << 20, 4)));
  EXPECT_EQ(shape_key(copy(1 << 20)), shape_key(copy(1.1 * (1 << 20))));
  // Sorted numerically: 1000 before 192... would be the string order without padding.
  EXPECT_LT(shape_key(gemm(192, 64, 64)), shape_key(gemm(1000, 64, 64)));

  for (int k : {2, 3, 5, 7}) expect_folds_keep_shapes(synthetic_points(), k);
  expect_folds_keep_shapes(planted_overfit_points(), 5);
  const calib::Measurements ms = committed_measurements();
  for (int k : {2, 5, 10}) expect_folds_keep_shapes(ms.points, k);
}

// The committed H200 measurements: 1534 points of 952 shapes (720 BF16 and 58 FP8 GEMMs, 85
// attention cores, 14 copy sizes, 75 collectives; the development sets added 1334 points and
// 838 shapes), and the 5-fold figures of docs/calibration.md.
TEST(CalibrateCv, CommittedH200CrossValidated) {
  const calib::Measurements ms = committed_measurements();
  const Calibration cal = calibrate(ms.points, h200(), 5);
  const CrossValidation& cv = cal.cv;
  EXPECT_EQ(cv.shapes, 952);
  const std::map<CalibClass, int> shapes{{CalibClass::kGemmBf16, 720},  {CalibClass::kGemmFp8, 58},
                                         {CalibClass::kAttention, 85}, {CalibClass::kMemory, 14},
                                         {CalibClass::kNvlink, 75},    {CalibClass::kNic, 0},
                                         {CalibClass::kGemmFp8Block, 0}};
  for (const ClassCv& c : cv.classes) EXPECT_EQ(c.shapes, shapes.at(c.cls)) << to_string(c.cls);
  EXPECT_EQ(cv.in_sample.within_10, cal.total_within_10);
  EXPECT_GE(cv.in_sample.within_10, kCommittedWithin10);
  EXPECT_GE(cv.held_out.within_10, kCommittedCvWithin10);
  EXPECT_LE(cv.held_out.within_10, cv.in_sample.within_10);
  EXPECT_EQ(report::cv_warning(cal, report::kDefaultCvMaxDropPp), "");
}

// (d) Every format of the report has the in-sample and the cross-validated figures.
TEST(CalibrateCv, EveryReportFormatShowsBoth) {
  const std::string prof = testing::TempDir() + "/cv_formats.yaml";
  const std::string base =
      "calibrate @validation/measured/h200/calibration_inputs.txt --profile h200-sxm -o '" + prof + "' --points ";
  for (const char* f : {"table", "md", "csv"}) {
    auto r = lcm(base + "--format " + f);
    ASSERT_EQ(r.code, 0) << f << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("within 10% in-sample")) << f;
    EXPECT_THAT(r.out, HasSubstr("within 10% CV")) << f;
    EXPECT_THAT(r.out, HasSubstr("median CV")) << f;
    EXPECT_THAT(r.out, HasSubstr("mean in-sample")) << f;
    EXPECT_THAT(r.out, HasSubstr("error CV")) << f;  // --points
  }
  auto csv = lcm(base + "--format csv");
  const auto ls = plantest::lines(csv.out);
  const auto header = std::find(ls.begin(), ls.end(),
                                "class,points,shapes,within 10% in-sample,within 10% CV,median in-sample,median CV,"
                                "mean in-sample,mean CV");
  ASSERT_NE(header, ls.end()) << csv.out;
  // The per-class rows follow, then the total: "all,200,114,185/200 (92.5%),174/200 (87.0%),...".
  const auto all = std::find_if(header, ls.end(), [](const std::string& l) { return l.rfind("all,", 0) == 0; });
  ASSERT_NE(all, ls.end());
  const auto cells = plantest::csv_fields(*all);
  ASSERT_EQ(cells.size(), 9u);
  EXPECT_EQ(cells[1], "1534");
  EXPECT_EQ(cells[2], "952");
  EXPECT_EQ(cells[3], "1433/1534 (93.4%)");
  EXPECT_EQ(cells[4], "1416/1534 (92.3%)");

  auto md = lcm(base + "--format md");
  EXPECT_THAT(md.out, HasSubstr("### Cross-validation: 5 folds by shape"));
  EXPECT_THAT(md.out, HasSubstr("1433 of 1534 points within 10% after the fit (93.4%, in-sample; 1416/1534 (92.3%) "
                                "cross-validated)"));

  auto js = lcm(base + "--format json");
  ASSERT_EQ(js.code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  const auto& cv = j.at("cross_validation");
  EXPECT_EQ(cv.at("folds"), 5);
  EXPECT_EQ(cv.at("in_sample").at("within_10"), 1433);
  EXPECT_EQ(cv.at("cross_validated").at("within_10"), 1416);
  EXPECT_TRUE(cv.at("warning").is_null());
  EXPECT_EQ(cv.at("classes").size(), 7u);  // kNumCalibClasses, empty ones included
  for (const char* k : {"within_10_share", "median_abs_error", "mean_abs_error"}) {
    EXPECT_TRUE(cv.at("classes").at(0).at("in_sample").contains(k)) << k;
    EXPECT_TRUE(cv.at("classes").at(0).at("cross_validated").contains(k)) << k;
  }
  EXPECT_TRUE(j.at("points").at(0).contains("error_cv"));
  EXPECT_TRUE(j.at("points").at(0).contains("fold"));

  // --folds 0: no cross-validation anywhere; --folds with --compare is refused.
  auto off = lcm(base + "--folds 0 --format json");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_TRUE(nlohmann::json::parse(off.out).at("cross_validation").is_null());
  auto off_md = lcm(base + "--folds 1 --format md");
  EXPECT_THAT(off_md.out, Not(HasSubstr("CV")));
  auto cmp = lcm("calibrate --compare @validation/measured/h200/calibration_inputs.txt --profile h200-sxm --folds 3");
  EXPECT_EQ(cmp.code, 2);
}

}  // namespace
}  // namespace lcm

// The fuzzers' findings 4-7 (docs/reliability.md; reproducers now in fuzz/corpus/): a value of
// the wrong JSON type, a number beyond int or a float beyond every integer type made an
// exception escape and abort `lcm calibrate`, or a float-to-int cast overflow (UBSan); each is
// now one input error naming the key and, for a number, the accepted range.
TEST(CalibrateReaders, FuzzFindingsAreInputErrors) {
  const std::string dir = LCM_SOURCE_DIR "/fuzz/corpus/";
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  auto exec_error = [&](const std::string& f) {
    auto r = lcm::calib::parse_exec_summary(slurp(dir + f), f, 8, nullptr);
    EXPECT_FALSE(r.ok()) << f;
    return r.ok() ? std::string() : r.error().str();
  };
  EXPECT_THAT(exec_error("exec_json_fuzz/hand-point_not_an_object.json"),
              ::testing::HasSubstr("malformed lcm-exec summary"));
  EXPECT_EQ(exec_error("exec_json_fuzz/hand-rank_not_a_number.json"),
            "exec_json_fuzz/hand-rank_not_a_number.json: k: ranks: expected an integer in [0, 1048575], got \"a\"");
  EXPECT_EQ(exec_error("exec_json_fuzz/hand-group_size_1e300.json"),
            "exec_json_fuzz/hand-group_size_1e300.json: k: group_size: expected an integer in [0, 1048576], got 1e+300");
  // The other integer fields read from JSON numbers (audit of finding 6).
  const std::string head = R"({"benchmark":"x","points":[{"key":"k","correct":true,"time_us":{"median":1},)";
  const std::pair<std::string, std::string> cases[] = {
      {R"("family":"gemm","model_op":{"kind":"gemm","m":1e300,"n":1,"k":1}}]})",
       "k: m: expected an integer in [0, 16777216], got 1e+300"},
      {R"("family":"x","model_op":{"kind":"attention","b":1,"s_q":-1,"s_kv":1,"hq":1,"d":1}}]})",
       "k: s_q: expected an integer in [0, 16777216], got -1"},
      {R"("family":"x","model_op":{"kind":"collective","collective":"all_reduce","group_size":2.5}}]})",
       "k: group_size: expected an integer in [0, 1048576], got 2.5"},
      {R"("family":"attention","extra":{"attention":{"s":1e19,"hq":1,"d":1}}}]})",
       "k: s: expected an integer in [0, 16777216], got 1e+19"},
      {R"("family":"x","model_op":{"kind":"memory","bytes":1024,"copy":"yes"}}]})",
       "k: copy: expected true or false, got \"yes\""},
      {R"("family":"gemm","shape":"99999999999999999999x1x1"}]})",
       "k: shape: expected MxNxK with dimensions in [0, 16777216], got '99999999999999999999x1x1'"},
      {R"("family":"moe","op":"L.moe.dispatch.a2a.fwd","extra":{"moe":{"tokens":8,"hidden":8,"ffn":8,"experts":8,"topk":2,"ep":2,"local_experts":4},"ep_ranks":[0,1e300]}}]})",
       "k: ep_ranks: expected an integer in [0, 1048575], got 1e+300"},
      {R"("family":"moe","op":"L.moe.experts.fc1.fwd","extra":{"moe":{"tokens":8,"hidden":8,"ffn":8,"experts":1e10,"topk":2,"ep":2,"local_experts":4}}}]})",
       "k: experts: expected an integer in [0, 16384], got 10000000000.0"},
      {R"("family":"moe","op":"L.moe.experts.fc1.fwd","extra":{"moe":{"tokens":8,"hidden":8,"ffn":8,"experts":8,"topk":2,"ep":2,"local_experts":4},"routing":{"received_rows_per_rank":[1e300]}}}]})",
       "k: received_rows_per_rank: expected an integer in [0, 1099511627776], got 1e+300"},
  };
  for (const auto& [point, want] : cases) {
    auto e = lcm::calib::parse_exec_summary(head + point, "f.json", 8, nullptr);
    ASSERT_FALSE(e.ok()) << point;
    EXPECT_EQ(e.error().str(), "f.json: " + want) << point;
  }
  const std::string devices = R"({"benchmark":"x","devices":["#  Rank 2000000 Pid 1 on h device 0"],"points":[]})";
  auto d = lcm::calib::parse_exec_summary(devices, "f.json", 8, nullptr);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().str(), "f.json: devices: Rank: expected a rank in [0, 1048575], got 2000000");

  auto r = lcm::calib::parse_nccl_tests_log(slurp(dir + "nccl_log_fuzz/hand-rank_beyond_int.txt"), "log", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().str(), "log:2: Rank: expected a rank in [0, 1048575], got 99999999999");
}
