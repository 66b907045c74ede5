// Communication volumes per GPU per step, against hand-derived numbers.
//
// Unless a test says otherwise: 4 dense layers, h = 1024, 16 heads of 64, s = 8192, b = 1,
// one micro-batch per step, bf16 activations. One "act" = b*(s/c)*h*2 B = 16 MiB at c = 1.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/timing.hpp"
#include "schedule_gen.hpp"  // model/src: dispatcher_syncs, bwd_ops

namespace lcm {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Scenario dense_scenario() {
  Scenario s;
  ModelSpec& md = s.model;
  md.name = "dense4";
  md.num_layers = 4;
  md.hidden_size = 1024;
  md.ffn_hidden_size = 4096;
  md.num_attention_heads = 16;
  md.num_query_groups = 16;
  md.kv_channels = 64;
  md.vocab_size = 32000;
  md.add_bias_linear = false;
  md.normalization = Normalization::kRMSNorm;
  md.position_embedding_type = PositionEmbedding::kRope;
  s.training.seq_length = 8192;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = 1;
  s.num_gpus = 1;
  return s;
}

Scenario moe_scenario() {
  Scenario s = dense_scenario();
  s.model.name = "moe4";
  s.model.num_experts = 8;
  s.model.moe_router_topk = 2;
  s.model.moe_ffn_hidden_size = 512;
  return s;
}

// Sets the layout and the batch so that there is exactly one micro-batch per step.
void layout(Scenario& s, int tp, int cp, int pp, int world, int ep = 1, int etp = 0) {
  s.parallel.tensor_model_parallel_size = tp;
  s.parallel.context_parallel_size = cp;
  s.parallel.pipeline_model_parallel_size = pp;
  s.parallel.expert_model_parallel_size = ep;
  s.parallel.expert_tensor_parallel_size = etp;
  s.num_gpus = world;
  s.training.global_batch_size = world / (tp * cp * pp) * s.training.micro_batch_size;
}

Comm run(const Scenario& s) {
  const Mesh m = derive_mesh(s);
  return estimate_comm(s, m, stage_layers(s, m));
}

const CommItem* find(const Comm& c, const char* what) {
  for (int i = 0; i < c.num_items; ++i) {
    if (std::strcmp(to_string(c.items[static_cast<size_t>(i)].id), what) == 0) {
      return &c.items[static_cast<size_t>(i)];
    }
  }
  return nullptr;
}
double sent(const Comm& c, const char* what) {
  const CommItem* it = find(c, what);
  return it != nullptr ? it->sent_bytes : 0.0;
}
double calls(const Comm& c, const char* what) {
  const CommItem* it = find(c, what);
  return it != nullptr ? it->calls : 0.0;
}
double dim(const Comm& c, CommDim d) { return c.sent_bytes_by_dim[static_cast<size_t>(d)]; }

// Every item is internally consistent and the sums add up.
void expect_consistent(const Comm& c) {
  std::array<double, kNumCommDims> by_dim{};
  double total = 0;
  for (int i = 0; i < c.num_items; ++i) {
    const CommItem& it = c.items[static_cast<size_t>(i)];
    EXPECT_GT(it.group_size, 1) << to_string(it.id);
    EXPECT_GT(it.calls, 0.0) << to_string(it.id);
    EXPECT_NEAR(it.sent_bytes, it.calls * bus_factor(it.kind, it.group_size) * it.message_bytes,
                1e-9 * it.sent_bytes)
        << to_string(it.id);
    for (int j = 0; j < i; ++j) {
      EXPECT_NE(it.id, c.items[static_cast<size_t>(j)].id);
    }
    by_dim[static_cast<size_t>(it.dim)] += it.sent_bytes;
    total += it.sent_bytes;
  }
  for (int d = 0; d < kNumCommDims; ++d) {
    EXPECT_DOUBLE_EQ(c.sent_bytes_by_dim[static_cast<size_t>(d)], by_dim[static_cast<size_t>(d)]);
  }
  EXPECT_DOUBLE_EQ(c.total_sent_bytes, total);
}

// ---------------------------------------------------------------------------------
// nccl-tests conventions
// ---------------------------------------------------------------------------------
TEST(CommBusFactor, MatchesNcclTestsTable) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllToAll, 1), 0.0);
}

TEST(CommBusFactor, SentBytesPerCallIsBusFactorTimesTotalSize) {
  // AG / RS: S is the gathered total, each rank sends (n-1)/n of it.
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kAllGather, 4, 1000.0), 750.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kReduceScatter, 4, 1000.0), 750.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kAllReduce, 4, 1000.0), 1500.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kAllToAll, 8, 800.0), 700.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kSendRecv, 2, 1000.0), 1000.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kSendRecv, 1, 1000.0), 0.0);
  EXPECT_DOUBLE_EQ(sent_bytes_per_call(Collective::kAllReduce, 1, 1000.0), 0.0);
}

// ---------------------------------------------------------------------------------
// Tensor parallel
// ---------------------------------------------------------------------------------
TEST(CommTp, AllReduceWithoutSequenceParallel) {
  Scenario s = dense_scenario();
  layout(s, 2, 1, 1, 2);
  const Comm c = run(s);
  expect_consistent(c);
  // 4 layers x (2 AR fwd + 2 AR bwd), S = 16 MiB, AR over 2 sends S per call.
  const CommItem* ar = find(c, "tp.allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->kind, Collective::kAllReduce);
  EXPECT_EQ(ar->group_size, 2);
  EXPECT_DOUBLE_EQ(ar->message_bytes, 16 * kMiB);
  EXPECT_DOUBLE_EQ(ar->calls, 16.0);
  EXPECT_DOUBLE_EQ(ar->sent_bytes, 256 * kMiB);  // = 4 layers x 8(t-1)/t*bsh x 2 (fwd+bwd)
  EXPECT_DOUBLE_EQ(sent(c, "tp.embedding.allreduce"), 16 * kMiB);  // fwd, first stage
  EXPECT_DOUBLE_EQ(sent(c, "tp.output.allreduce"), 16 * kMiB);     // bwd, last stage
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kTp), 288 * kMiB);
  EXPECT_DOUBLE_EQ(c.total_sent_bytes, 288 * kMiB);
  EXPECT_EQ(find(c, "tp.sp.allgather"), nullptr);
}

TEST(CommTp, SequenceParallelSplitsEachAllReduceIntoAgAndRsOfEqualTotal) {
  Scenario s = dense_scenario();
  layout(s, 2, 1, 1, 2);
  const double without_sp = run(s).sent_bytes_by_dim[static_cast<size_t>(CommDim::kTp)];
  s.parallel.sequence_parallel = true;
  const Comm c = run(s);
  expect_consistent(c);
  EXPECT_EQ(find(c, "tp.allreduce"), nullptr);
  // 4 layers x (2 AG + 2 RS) fwd and the same bwd, plus in bwd the re-gather of each
  // column-parallel input for its weight gradient (2 AG per layer); each call sends
  // (t-1)/t * 16 MiB = 8 MiB.
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.allgather"), 16.0 + 8.0);
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.reducescatter"), 16.0);
  EXPECT_DOUBLE_EQ(sent(c, "tp.sp.allgather"), 192 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "tp.sp.reducescatter"), 128 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "tp.embedding.reducescatter"), 8 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "tp.embedding.allgather"), 8 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "tp.output.allgather"), 16 * kMiB);  // fwd + wgrad re-gather
  EXPECT_DOUBLE_EQ(sent(c, "tp.output.reducescatter"), 8 * kMiB);
  // SP moves the all-reduce volume as AG + RS, plus the backward re-gathers (8 layer
  // inputs + the output layer's, 9 x 8 MiB), and the once-per-step all-reduce of the
  // TP-replicated parameters' fp32 grads: 2 RMSNorms x 4 layers + the final norm = 9 h.
  const double grad_sync = 9.0 * 1024.0 * 4.0;
  const CommItem* g = find(c, "tp.allreduce.grads");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->kind, Collective::kAllReduce);
  EXPECT_DOUBLE_EQ(g->calls, 1.0);
  EXPECT_DOUBLE_EQ(g->sent_bytes, grad_sync);  // AR over 2 sends S
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kTp), (288 + 72) * kMiB + grad_sync);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kTp) - grad_sync - 72 * kMiB, without_sp);
}

TEST(CommTp, FourWayTpTotalsAgreeWithAndWithoutSp) {
  Scenario s = dense_scenario();
  layout(s, 4, 1, 1, 4);
  const Comm ar = run(s);
  // 18 all-reduces of 16 MiB, each 2*3/4*16 = 24 MiB.
  EXPECT_DOUBLE_EQ(dim(ar, CommDim::kTp), 18 * 24 * kMiB);
  s.parallel.sequence_parallel = true;
  const Comm sp = run(s);
  const double grad_sync = 1.5 * 9.0 * 1024.0 * 4.0;  // 2(t-1)/t x 9h fp32 norm grads
  EXPECT_DOUBLE_EQ(sent(sp, "tp.allreduce.grads"), grad_sync);
  // AG + RS carry the all-reduce volume; the 9 backward re-gathers add 9 x 12 MiB.
  EXPECT_DOUBLE_EQ(dim(sp, CommDim::kTp) - grad_sync, (36 + 9) * 12 * kMiB);
  EXPECT_DOUBLE_EQ(dim(sp, CommDim::kTp) - grad_sync - 9 * 12 * kMiB, dim(ar, CommDim::kTp));
}

TEST(CommTp, FullRecomputeRepeatsForwardCollectives) {
  Scenario s = dense_scenario();
  layout(s, 2, 1, 1, 2);
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  EXPECT_DOUBLE_EQ(calls(run(s), "tp.allreduce"), 16.0 + 8.0);  // + 2 fwd AR per layer
  s.parallel.sequence_parallel = true;
  const Comm sp = run(s);
  EXPECT_DOUBLE_EQ(calls(sp, "tp.sp.allgather"), 16.0 + 8.0 + 8.0);  // + wgrad re-gathers
  EXPECT_DOUBLE_EQ(calls(sp, "tp.sp.reducescatter"), 16.0 + 8.0);
  // Block method: first recompute_num_layers layers of the stage only (1 of 4).
  s.parallel.sequence_parallel = false;
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  EXPECT_DOUBLE_EQ(calls(run(s), "tp.allreduce"), 16.0 + 2.0);
}

TEST(CommTp, BlockRecomputeCountsTheFirstLayersOfEachModelChunk) {
  Scenario s = dense_scenario();
  s.model.num_layers = 8;
  layout(s, 2, 1, 2, 4);
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;  // vp = 2: 2 chunks of 2 per rank
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  s.parallel.recompute_num_layers = 1;
  // Stage 0: 4 layers x 4 AR + 1 recomputed layer per chunk x 2 chunks x 2 fwd AR.
  EXPECT_DOUBLE_EQ(calls(run(s), "tp.allreduce"), 16.0 + 4.0);
}

TEST(CommTp, FullRecomputeOfMoeLayersRepeatsAttentionAndSharedExpert) {
  Scenario s = moe_scenario();
  s.model.moe_shared_expert_intermediate_size = 1024;
  layout(s, 2, 1, 1, 2, /*ep=*/2, /*etp=*/1);
  s.parallel.sequence_parallel = true;
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  const Comm c = run(s);
  // Per layer: attention + shared expert, each AG + RS fwd, RS + AG bwd plus the input
  // re-gather for the weight gradient, AG + RS recompute.
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.allgather"), 4.0 * 2.0 * 4.0);  // layers x blocks x 4
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.reducescatter"), 24.0);
  EXPECT_DOUBLE_EQ(calls(c, "ep.a2a.dispatch"), 8.0);
}

TEST(CommTp, SelectiveMlpRecomputeRepeatsMlpCollectivesOnly) {
  Scenario s = dense_scenario();
  layout(s, 2, 1, 1, 2);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn;  // no TP collective inside core attention
  EXPECT_DOUBLE_EQ(calls(run(s), "tp.allreduce"), 16.0);
  s.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  EXPECT_DOUBLE_EQ(calls(run(s), "tp.allreduce"), 16.0 + 4.0);
}

TEST(CommTp, MoeLayersKeepAttentionAndSharedExpertCollectivesOnTp) {
  Scenario s = moe_scenario();
  layout(s, 2, 1, 1, 2, /*ep=*/2, /*etp=*/1);
  s.parallel.sequence_parallel = true;
  // Routed experts talk over EP/ETP: only the attention block stays on TP.
  Comm c = run(s);
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.allgather"), 8.0 + 4.0);  // + the QKV input re-gather
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.reducescatter"), 8.0);
  EXPECT_EQ(find(c, "etp.allgather.dispatch"), nullptr);  // etp = 1
  // A shared expert is a TP-sharded MLP: one more AG + RS fwd, RS + AG bwd and the fc1
  // input re-gather per layer.
  s.model.moe_shared_expert_intermediate_size = 1024;
  c = run(s);
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.allgather"), 16.0 + 8.0);
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.reducescatter"), 16.0);
}

TEST(CommTp, MlaEntersThroughCompressedLatents) {
  Scenario s = dense_scenario();
  s.model.multi_latent_attention = true;
  s.model.q_lora_rank = 384;
  s.model.kv_lora_rank = 256;
  s.model.qk_head_dim = 64;
  s.model.qk_pos_emb_head_dim = 64;
  s.model.v_head_dim = 64;
  layout(s, 2, 1, 1, 2);
  s.parallel.sequence_parallel = true;
  Comm c = run(s);
  expect_consistent(c);
  // Latent AG: 8192 tokens x (384 + 256 + 64) x 2 B = 11 MiB, sent 5.5 MiB, fwd and the
  // up projections' weight-gradient re-gather in bwd.
  const CommItem* lat = find(c, "tp.sp.allgather.mla");
  ASSERT_NE(lat, nullptr);
  EXPECT_DOUBLE_EQ(lat->message_bytes, 11 * kMiB);
  EXPECT_DOUBLE_EQ(lat->calls, 8.0);
  EXPECT_DOUBLE_EQ(lat->sent_bytes, 44 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "tp.sp.reducescatter.mla"), 22 * kMiB);  // its bwd
  // h-wide: MLP enter (fwd AG) + attention and MLP exits (bwd AG) + the fc1 input
  // re-gather = 4 per layer.
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.allgather"), 16.0);
  EXPECT_DOUBLE_EQ(calls(c, "tp.sp.reducescatter"), 12.0);
  // Replicated over TP and summed once per step (fp32): the duplicated down projections
  // h x (384 + 256 + 64), 2 RMSNorms per layer and the final norm.
  EXPECT_DOUBLE_EQ(sent(c, "tp.allreduce.grads"), (4.0 * (1024.0 * 704 + 2 * 1024) + 1024) * 4.0);
  s.parallel.sequence_parallel = false;
  c = run(s);
  EXPECT_DOUBLE_EQ(sent(c, "tp.allreduce.mla"), 44 * kMiB);  // bwd AR, 4 x 11 MiB
  EXPECT_DOUBLE_EQ(calls(c, "tp.allreduce"), 12.0);
}

TEST(CommTp, MtpBlockAddsLayerEmbeddingOutputAndProjection) {
  Scenario s = dense_scenario();
  s.model.mtp_num_layers = 1;
  layout(s, 2, 1, 1, 2);
  const Comm c = run(s);
  expect_consistent(c);
  // 5 attention + 5 MLP blocks (AR fwd + AR bwd each), eh_proj: AR fwd (16 MiB) + AR bwd
  // of its 2h-wide input (32 MiB).
  const CommItem* ar = find(c, "tp.allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_DOUBLE_EQ(ar->calls, 22.0);
  EXPECT_DOUBLE_EQ(ar->sent_bytes, (21 * 16 + 32) * kMiB);
  EXPECT_DOUBLE_EQ(calls(c, "tp.embedding.allreduce"), 2.0);
  EXPECT_DOUBLE_EQ(calls(c, "tp.output.allreduce"), 2.0);
}

TEST(CommTp, NoTpItemsWithoutTp) {
  Scenario s = dense_scenario();
  const Comm c = run(s);
  EXPECT_EQ(c.num_items, 0);
  EXPECT_DOUBLE_EQ(c.total_sent_bytes, 0.0);
}

// ---------------------------------------------------------------------------------
// Context parallel
// ---------------------------------------------------------------------------------
TEST(CommCp, P2PRingVolumeScalesWithKvHeads) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;  // GQA, g/a = 1/4
  layout(s, 1, 2, 1, 2);
  const Comm gqa = run(s);
  expect_consistent(gqa);
  // KV block: 2 * (s/c) * g * d_h * 2 B = 2 * 4096 * 4 * 64 * 2 = 4 MiB.
  // Per layer: (c-1) blocks fwd, 2(c-1) bwd (KV again + dKV).
  const CommItem* p2p = find(gqa, "cp.p2p.kv");
  ASSERT_NE(p2p, nullptr);
  EXPECT_EQ(p2p->kind, Collective::kSendRecv);
  EXPECT_EQ(p2p->group_size, 2);
  EXPECT_DOUBLE_EQ(p2p->message_bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(p2p->calls, 12.0);
  EXPECT_DOUBLE_EQ(p2p->sent_bytes, 48 * kMiB);
  EXPECT_DOUBLE_EQ(dim(gqa, CommDim::kCp), 48 * kMiB);

  s.model.num_query_groups = 16;  // MHA
  const Comm mha = run(s);
  EXPECT_DOUBLE_EQ(dim(mha, CommDim::kCp), 192 * kMiB);
  EXPECT_DOUBLE_EQ(dim(gqa, CommDim::kCp) / dim(mha, CommDim::kCp), 4.0 / 16.0);
}

TEST(CommCp, P2PRingOverFourRanks) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 1, 4, 1, 4);
  const Comm c = run(s);
  // (s/c) = 2048: block 2 MiB, 3 x (c-1) = 9 sends per layer.
  EXPECT_DOUBLE_EQ(calls(c, "cp.p2p.kv"), 36.0);
  EXPECT_DOUBLE_EQ(sent(c, "cp.p2p.kv"), 72 * kMiB);
}

TEST(CommCp, TensorParallelSplitsKvHeads) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 2, 2, 1, 4);
  EXPECT_DOUBLE_EQ(sent(run(s), "cp.p2p.kv"), 24 * kMiB);  // g/t = 2 KV heads per rank
}

TEST(CommCp, CoreAttentionRecomputeRepeatsTheForwardRing) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 1, 2, 1, 2);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn;
  EXPECT_DOUBLE_EQ(calls(run(s), "cp.p2p.kv"), 12.0 + 4.0);
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  EXPECT_DOUBLE_EQ(calls(run(s), "cp.p2p.kv"), 12.0 + 4.0);
}

TEST(CommCp, MlaSendsKAndVOfEveryHead) {
  Scenario s = dense_scenario();
  s.model.multi_latent_attention = true;
  s.model.num_query_groups = 1;  // ignored by MLA
  s.model.q_lora_rank = 384;
  s.model.kv_lora_rank = 256;
  s.model.qk_head_dim = 128;
  s.model.qk_pos_emb_head_dim = 64;
  s.model.v_head_dim = 128;
  layout(s, 1, 2, 1, 2);
  // K: 16 x (128 + 64), V: 16 x 128 per token -> 5120 x 4096 tokens x 2 B = 40 MiB.
  const Comm c = run(s);
  EXPECT_DOUBLE_EQ(find(c, "cp.p2p.kv")->message_bytes, 40 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "cp.p2p.kv"), 12 * 40 * kMiB);
}

TEST(CommCp, AllGatherGathersKvTwiceAndReduceScattersDkv) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 1, 2, 1, 2);
  s.parallel.cp_comm_type = CpCommType::kAllGather;
  const Comm c = run(s);
  expect_consistent(c);
  // Full K (or V): s * g * d_h * 2 B = 8192 * 256 * 2 = 4 MiB; each rank sends half.
  // Per layer: AG K, V fwd and again bwd (TE keeps only the local KV), RS dK, dV bwd.
  const CommItem* ag = find(c, "cp.allgather.kv");
  ASSERT_NE(ag, nullptr);
  EXPECT_DOUBLE_EQ(ag->message_bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(ag->calls, 16.0);
  EXPECT_DOUBLE_EQ(ag->sent_bytes, 32 * kMiB);
  EXPECT_DOUBLE_EQ(calls(c, "cp.reducescatter.dkv"), 8.0);
  EXPECT_DOUBLE_EQ(sent(c, "cp.reducescatter.dkv"), 16 * kMiB);
  EXPECT_EQ(find(c, "cp.p2p.kv"), nullptr);
}

TEST(CommCp, UlyssesA2AMovesQkvoWithKvScaledByGroups) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 1, 2, 1, 2);
  s.parallel.cp_comm_type = CpCommType::kA2A;
  const Comm gqa = run(s);
  expect_consistent(gqa);
  // Per layer fwd: Q 8 MiB, K 2 MiB, V 2 MiB, O 8 MiB, each sends (c-1)/c; bwd the same.
  const CommItem* a2a = find(gqa, "cp.a2a");
  ASSERT_NE(a2a, nullptr);
  EXPECT_EQ(a2a->kind, Collective::kAllToAll);
  EXPECT_DOUBLE_EQ(a2a->calls, 32.0);
  EXPECT_DOUBLE_EQ(a2a->message_bytes, 5 * kMiB);  // mean of 8, 2, 2, 8
  EXPECT_DOUBLE_EQ(a2a->sent_bytes, 80 * kMiB);
  s.model.num_query_groups = 16;
  // MHA: 4 * (s/c) * h * 2 B * (c-1)/c = 16 MiB per layer per pass (DeepSpeed-Ulysses 4Nh/P).
  EXPECT_DOUBLE_EQ(sent(run(s), "cp.a2a"), 4 * 2 * 16 * kMiB);
}

TEST(CommCp, HierarchicalA2AThenP2P) {
  Scenario s = dense_scenario();
  s.model.num_query_groups = 4;
  layout(s, 1, 4, 1, 4);
  s.parallel.cp_comm_type = CpCommType::kA2AP2P;
  s.parallel.hierarchical_context_parallel_sizes = {2, 2};
  const Comm c = run(s);
  expect_consistent(c);
  // a2a over 2 ranks on s/4 = 2048 tokens: Q 4, K 1, V 1, O 4 MiB, half sent, fwd + bwd.
  EXPECT_EQ(find(c, "cp.a2a")->group_size, 2);
  EXPECT_DOUBLE_EQ(sent(c, "cp.a2a"), 4 * 10 * kMiB);
  // ring over 2 ranks: block (s/2)*(g/2)*d_h*2 elements = 2 MiB, 3 sends per layer.
  EXPECT_EQ(find(c, "cp.p2p.kv")->group_size, 2);
  EXPECT_DOUBLE_EQ(find(c, "cp.p2p.kv")->message_bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "cp.p2p.kv"), 24 * kMiB);
}

// ---------------------------------------------------------------------------------
// Expert parallel
// ---------------------------------------------------------------------------------
Scenario ep_scenario() {
  Scenario s = moe_scenario();
  s.training.seq_length = 4096;  // T = 4096 tokens per rank, k = 2 copies each
  layout(s, 1, 1, 1, 4, /*ep=*/4, /*etp=*/1);
  return s;
}

TEST(CommEp, AllToAllDispatchAndCombineForwardAndBackward) {
  const Comm c = run(ep_scenario());
  expect_consistent(c);
  // T*k*h*2 B = 8192 * 1024 * 2 = 16 MiB per a2a; remote share (e-1)/e = 3/4.
  const CommItem* d = find(c, "ep.a2a.dispatch");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kind, Collective::kAllToAll);
  EXPECT_EQ(d->group_size, 4);
  EXPECT_DOUBLE_EQ(d->message_bytes, 16 * kMiB);
  EXPECT_DOUBLE_EQ(d->calls, 4.0);
  EXPECT_DOUBLE_EQ(d->sent_bytes, 48 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.combine"), 48 * kMiB);
  EXPECT_DOUBLE_EQ(calls(c, "ep.a2a.bwd"), 8.0);
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.bwd"), 96 * kMiB);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kEp), 192 * kMiB);  // 4 a2a x 4 layers x 12 MiB
}

TEST(CommEp, CapacityPaddingSendsAllSlots) {
  Scenario s = ep_scenario();
  s.model.moe_expert_capacity_factor = 1.25;
  // Dropping without padding under balanced routing: nothing dropped at CF >= 1.
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 192 * kMiB);
  // Padding: C = ceil(4096 * 2 / 8 * 1.25) = 1280 slots per expert, E*C = 10240 > T*k = 8192.
  s.model.moe_pad_expert_input_to_capacity = true;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 240 * kMiB);
  // CF = 0.5: C = 512, E*C = 4096 slots, with or without padding.
  s.model.moe_expert_capacity_factor = 0.5;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 96 * kMiB);
  s.model.moe_pad_expert_input_to_capacity = false;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 96 * kMiB);
}

TEST(CommEp, Fp8DispatchHalvesForwardDispatchOnly) {
  Scenario s = ep_scenario();
  s.parallel.moe_fp8_dispatch = true;
  const Comm c = run(s);
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.dispatch"), 24 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.combine"), 48 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.bwd"), 96 * kMiB);
}

TEST(CommEp, SequenceParallelShardsTokensBeforeDispatch) {
  Scenario s = ep_scenario();
  layout(s, 2, 1, 1, 8, /*ep=*/4, /*etp=*/1);
  s.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 96 * kMiB);  // T = s/t = 2048
}

TEST(CommEp, ExpertTensorParallelGathersReceivedTokens) {
  Scenario s = ep_scenario();
  layout(s, 2, 1, 1, 4, /*ep=*/2, /*etp=*/2);
  s.parallel.sequence_parallel = true;
  const Comm c = run(s);
  expect_consistent(c);
  // T = 2048, 4096 copies = 8 MiB per a2a over 2 EP ranks (4 MiB sent) x 16 calls.
  EXPECT_DOUBLE_EQ(sent(c, "ep.a2a.dispatch") + sent(c, "ep.a2a.combine") + sent(c, "ep.a2a.bwd"),
                   64 * kMiB);
  // ETP: AG of 2 x 8 MiB before the experts, RS after; fwd + bwd per layer.
  const CommItem* ag = find(c, "etp.allgather.dispatch");
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->group_size, 2);
  EXPECT_DOUBLE_EQ(ag->message_bytes, 16 * kMiB);
  EXPECT_DOUBLE_EQ(ag->calls, 8.0);
  EXPECT_DOUBLE_EQ(ag->sent_bytes, 64 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "etp.reducescatter.combine"), 64 * kMiB);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kEp), 192 * kMiB);
}

TEST(CommEp, FullRecomputeRepeatsForwardDispatchAndCombine) {
  Scenario s = ep_scenario();
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  const Comm c = run(s);
  EXPECT_DOUBLE_EQ(calls(c, "ep.a2a.dispatch"), 8.0);
  EXPECT_DOUBLE_EQ(calls(c, "ep.a2a.combine"), 8.0);
  EXPECT_DOUBLE_EQ(calls(c, "ep.a2a.bwd"), 8.0);
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeMoe;
  EXPECT_DOUBLE_EQ(calls(run(s), "ep.a2a.dispatch"), 8.0);
}

TEST(CommEp, AllGatherDispatcherGathersOverTpTimesEp) {
  Scenario s = ep_scenario();
  s.model.moe_token_dispatcher_type = Dispatcher::kAllGather;
  Comm c = run(s);
  expect_consistent(c);
  // Gathered: 4 ranks x 4096 tokens x 1024 x 2 B = 32 MiB, each rank sends 3/4.
  const CommItem* ag = find(c, "ep.allgather.dispatch");
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->group_size, 4);
  EXPECT_DOUBLE_EQ(ag->message_bytes, 32 * kMiB);
  EXPECT_DOUBLE_EQ(ag->calls, 8.0);  // fwd dispatch + bwd of combine, 4 layers
  EXPECT_DOUBLE_EQ(ag->sent_bytes, 192 * kMiB);
  EXPECT_DOUBLE_EQ(sent(c, "ep.reducescatter.combine"), 192 * kMiB);
  EXPECT_EQ(find(c, "ep.a2a.dispatch"), nullptr);

  layout(s, 2, 1, 1, 4, /*ep=*/2, /*etp=*/2);
  s.parallel.sequence_parallel = true;
  c = run(s);
  // TPxEP group of 4 ranks, T = 2048: 16 MiB gathered, 12 MiB sent per call; no ETP items.
  EXPECT_EQ(find(c, "ep.allgather.dispatch")->group_size, 4);
  EXPECT_DOUBLE_EQ(sent(c, "ep.allgather.dispatch"), 96 * kMiB);
  EXPECT_EQ(find(c, "etp.allgather.dispatch"), nullptr);
}

TEST(CommEp, FlexSendsATokenOncePerDestinationRank) {
  Scenario s = ep_scenario();
  s.model.moe_token_dispatcher_type = Dispatcher::kFlex;
  // 2 experts per rank, k = 2: P(rank hit) = 1 - C(6,2)/C(8,2) = 13/28; 4 * 13/28 = 13/7
  // copies per token instead of 2.
  const Comm c = run(s);
  EXPECT_NEAR(find(c, "ep.a2a.dispatch")->message_bytes, 16 * kMiB * 13.0 / 14.0, 1e-6);
  EXPECT_NEAR(dim(c, CommDim::kEp), 192 * kMiB * 13.0 / 14.0, 1e-3);
  // One expert per rank: no duplicate destinations, same volume as the a2a dispatcher.
  s.model.num_experts = 4;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kEp), 192 * kMiB);
}

// ---------------------------------------------------------------------------------
// Pipeline parallel
// ---------------------------------------------------------------------------------
Scenario pp_scenario(int layers, int pp, int micro_batches) {
  Scenario s = dense_scenario();
  s.model.num_layers = layers;
  s.training.seq_length = 4096;  // activation b*s*h*2 B = 8 MiB
  layout(s, 1, 1, pp, pp);
  s.training.global_batch_size = micro_batches;
  return s;
}

TEST(CommPp, FirstStageSendsActivationsOnly) {
  const Comm c = run(pp_scenario(8, 4, 8));
  expect_consistent(c);
  EXPECT_EQ(c.stage, 0);  // 2 layers everywhere: the first wins the tie
  const CommItem* p = find(c, "pp.sendrecv");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, Collective::kSendRecv);
  EXPECT_DOUBLE_EQ(p->message_bytes, 8 * kMiB);
  EXPECT_DOUBLE_EQ(p->calls, 8.0);  // one send per micro-batch, 8 micro-batches
  EXPECT_DOUBLE_EQ(p->sent_bytes, 64 * kMiB);
}

TEST(CommPp, MiddleStageSendsBothWays) {
  Scenario s = pp_scenario(7, 4, 8);
  s.parallel.num_layers_in_first_pipeline_stage = 1;  // {1, 2, 2, 2}
  const Comm c = run(s);
  EXPECT_EQ(c.stage, 1);
  EXPECT_DOUBLE_EQ(calls(c, "pp.sendrecv"), 16.0);
  EXPECT_DOUBLE_EQ(sent(c, "pp.sendrecv"), 128 * kMiB);
}

TEST(CommPp, InterleavingMultipliesByVirtualStages) {
  Scenario s = pp_scenario(16, 4, 8);
  s.parallel.num_layers_per_virtual_pipeline_stage = 2;  // vp = 2
  const Comm c = run(s);
  EXPECT_EQ(c.stage, 0);
  // 2 chunks x (fwd + bwd) minus the first chunk's missing backward send.
  EXPECT_DOUBLE_EQ(calls(c, "pp.sendrecv"), 8.0 * 3.0);
  EXPECT_DOUBLE_EQ(sent(c, "pp.sendrecv"), 24 * 8 * kMiB);
}

TEST(CommPp, SequenceAndContextParallelShrinkTheMessage) {
  Scenario s = pp_scenario(8, 4, 8);
  layout(s, 2, 1, 4, 8);
  s.training.global_batch_size = 8;
  s.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(find(run(s), "pp.sendrecv")->message_bytes, 4 * kMiB);
  layout(s, 1, 2, 4, 8);
  s.training.global_batch_size = 8;
  EXPECT_DOUBLE_EQ(find(run(s), "pp.sendrecv")->message_bytes, 4 * kMiB);
}

TEST(CommPp, BusiestStageIsTheOneWithMostLayers) {
  Scenario s = pp_scenario(6, 4, 4);
  s.parallel.num_layers_in_first_pipeline_stage = 1;
  s.parallel.num_layers_in_last_pipeline_stage = 1;  // {1, 2, 2, 1}
  EXPECT_EQ(run(s).stage, 1);
  s.parallel.num_layers_in_first_pipeline_stage = 0;
  s.parallel.num_layers_in_last_pipeline_stage = 3;  // {1, 1, 1, 3}
  const Comm last = run(s);
  EXPECT_EQ(last.stage, 3);
  EXPECT_DOUBLE_EQ(calls(last, "pp.sendrecv"), 4.0);  // gradients back only, 4 micro-batches
}

// ---------------------------------------------------------------------------------
// Data parallel
// ---------------------------------------------------------------------------------

// 2 layers, h = 256, f = 1024, 4 heads of 64, V = 1000 -> 1024 padded, tied, RMSNorm, no
// biases, one GPU per model replica. Psi = V*h + L*(4h^2 + 2hf) + (2L+1)*h = 1836288.
Scenario dp_scenario() {
  Scenario s = dense_scenario();
  s.model.num_layers = 2;
  s.model.hidden_size = 256;
  s.model.ffn_hidden_size = 1024;
  s.model.num_attention_heads = 4;
  s.model.num_query_groups = 4;
  s.model.vocab_size = 1000;
  s.training.seq_length = 1024;
  layout(s, 1, 1, 1, 4);  // dp = 4
  return s;
}
constexpr double kPsi = 1836288.0;

double dp_psi(const Scenario& s) {
  const Mesh m = derive_mesh(s);
  return gpu_params(s, m, stage_layers(s, m))[0].dense;
}

TEST(CommDp, ParameterCountOfTheDpScenario) { EXPECT_DOUBLE_EQ(dp_psi(dp_scenario()), kPsi); }

TEST(CommDp, DdpAllReducesFp32MainGrads) {
  const Scenario s = dp_scenario();
  const double psi = dp_psi(s);
  const Comm c = run(s);
  expect_consistent(c);
  const CommItem* ar = find(c, "dp.allreduce.grads");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->group_size, 4);
  EXPECT_DOUBLE_EQ(ar->message_bytes, 4.0 * psi);
  EXPECT_DOUBLE_EQ(ar->calls, 1.0);
  EXPECT_DOUBLE_EQ(ar->sent_bytes, 2.0 * 0.75 * 4.0 * psi);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kDp), 6.0 * psi);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kEdp), 0.0);
}

// --fp8-param-gather: the distributed optimizer gathers the FP8 linear weights in FP8 (1 B), the
// (tied) word embedding in bf16: 2 x 1024 x 256 + 1 x (1836288 - 262144) = 2098432 B, of which
// each of the 4 ranks sends 3/4; the gradients are reduce-scattered as before.
TEST(CommDp, Fp8ParamGatherGathersFp8Weights) {
  Scenario s = dp_scenario();
  s.parallel.use_distributed_optimizer = true;
  s.training.precision = Precision::kFp8;
  s.training.fp8_param_gather = true;
  ASSERT_FALSE(s.model.untie_embeddings_and_output_weights);
  const double psi = dp_psi(s);
  const double vh = static_cast<double>(derive_mesh(s).padded_vocab) * 256.0;
  EXPECT_DOUBLE_EQ(vh, 262144.0);
  const Comm c = run(s);
  expect_consistent(c);
  EXPECT_DOUBLE_EQ(sent(c, "dp.allgather.params"), 0.75 * 2098432.0);
  EXPECT_DOUBLE_EQ(sent(c, "dp.allgather.params"), 0.75 * (2.0 * vh + (psi - vh)));
  EXPECT_DOUBLE_EQ(sent(c, "dp.reducescatter.grads"), 0.75 * 4.0 * psi);
}

TEST(CommDp, DistributedOptimizerReduceScattersGradsAndGathersBf16Params) {
  Scenario s = dp_scenario();
  s.parallel.use_distributed_optimizer = true;
  const double psi = dp_psi(s);
  const Comm c = run(s);
  expect_consistent(c);
  EXPECT_DOUBLE_EQ(sent(c, "dp.reducescatter.grads"), 0.75 * 4.0 * psi);
  EXPECT_DOUBLE_EQ(sent(c, "dp.allgather.params"), 0.75 * 2.0 * psi);
  EXPECT_EQ(find(c, "dp.allreduce.grads"), nullptr);
  // The same through data_parallel_sharding_strategy = optim.
  s.parallel.use_distributed_optimizer = false;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), 4.5 * psi);
}

TEST(CommDp, DdpDistOptFsdpRatiosAreTwoTwoThree) {
  Scenario s = dp_scenario();
  s.training.grad_reduce_in_fp32 = false;  // bf16 grads: all terms 2 B per parameter
  const double unit = 0.75 * kPsi * 2.0;    // (d-1)/d * Psi * bytes
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), 2.0 * unit);
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), 2.0 * unit);
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGrads;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), 2.0 * unit);
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  const Comm fsdp = run(s);
  EXPECT_DOUBLE_EQ(dim(fsdp, CommDim::kDp), 3.0 * unit);
  EXPECT_DOUBLE_EQ(calls(fsdp, "dp.allgather.params"), 2.0);  // fwd + bwd
}

TEST(CommDp, Fp32GradsMakeDdpAndFsdpEqualAndDistOptCheaper) {
  Scenario s = dp_scenario();
  const double unit = 0.75 * kPsi;  // (d-1)/d * Psi, bytes spelled out below
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), unit * 2 * 4);  // AR of fp32
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), unit * (4 + 2));  // RS fp32 + AG bf16
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  EXPECT_DOUBLE_EQ(dim(run(s), CommDim::kDp), unit * (4 + 2 + 2));  // RS + 2 AG
}

TEST(CommDp, ShardedGradsReduceEveryMicroBatch) {
  Scenario s = dp_scenario();
  s.training.global_batch_size = 16;  // 4 micro-batches per step
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  EXPECT_DOUBLE_EQ(calls(run(s), "dp.reducescatter.grads"), 1.0);
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGrads;
  Comm c = run(s);
  EXPECT_DOUBLE_EQ(calls(c, "dp.reducescatter.grads"), 4.0);
  EXPECT_DOUBLE_EQ(calls(c, "dp.allgather.params"), 1.0);
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  c = run(s);
  EXPECT_DOUBLE_EQ(calls(c, "dp.reducescatter.grads"), 4.0);
  EXPECT_DOUBLE_EQ(calls(c, "dp.allgather.params"), 8.0);
}

TEST(CommDp, ContextParallelJoinsTheDenseGradientGroup) {
  Scenario s = dp_scenario();
  layout(s, 1, 2, 1, 4);  // dp = 2, cp = 2: dense grads over 4 ranks
  EXPECT_EQ(find(run(s), "dp.allreduce.grads")->group_size, 4);
}

TEST(CommDp, ExpertParamsReduceOverExpertDataParallel) {
  Scenario s = dp_scenario();
  s.model.num_experts = 4;
  s.model.moe_router_topk = 2;
  s.model.moe_ffn_hidden_size = 512;
  layout(s, 1, 1, 1, 4, /*ep=*/2, /*etp=*/1);  // dp = 4, edp = 2
  const Mesh m = derive_mesh(s);
  const GpuParams p = gpu_params(s, m, stage_layers(s, m))[0];
  // 2 layers x 2 local experts x 2*h*f_e = 1048576 expert parameters per GPU.
  EXPECT_DOUBLE_EQ(p.expert, 1048576.0);
  const Comm c = run(s);
  expect_consistent(c);
  const CommItem* e = find(c, "edp.allreduce.grads");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dim, CommDim::kEdp);
  EXPECT_EQ(e->group_size, 2);
  EXPECT_DOUBLE_EQ(e->sent_bytes, 2.0 * 0.5 * 4.0 * p.expert);
  EXPECT_EQ(find(c, "dp.allreduce.grads")->group_size, 4);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kDp), 2.0 * 0.75 * 4.0 * p.dense);
}

// ---------------------------------------------------------------------------------
// Tied embedding gradient sync
// ---------------------------------------------------------------------------------
TEST(CommEmb, TiedEmbeddingSyncOnlyWithPipelineParallel) {
  Scenario s = dense_scenario();  // tied, V = 32000 (already a multiple of 128)
  EXPECT_EQ(find(run(s), "emb.allreduce.grads"), nullptr);  // pp = 1
  layout(s, 1, 1, 2, 2);
  Comm c = run(s);
  expect_consistent(c);
  const CommItem* e = find(c, "emb.allreduce.grads");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->group_size, 2);
  EXPECT_DOUBLE_EQ(e->message_bytes, 32000.0 * 1024.0 * 4.0);  // fp32 main grad
  EXPECT_DOUBLE_EQ(e->sent_bytes, 32000.0 * 1024.0 * 4.0);
  EXPECT_DOUBLE_EQ(dim(c, CommDim::kEmb), e->sent_bytes);
  s.training.grad_reduce_in_fp32 = false;
  EXPECT_DOUBLE_EQ(sent(run(s), "emb.allreduce.grads"), 32000.0 * 1024.0 * 2.0);
  s.model.untie_embeddings_and_output_weights = true;
  EXPECT_EQ(find(run(s), "emb.allreduce.grads"), nullptr);
  s.model.mtp_num_layers = 1;  // MTP needs the embedding on the last stage
  c = run(s);
  EXPECT_EQ(c.stage, 1);
  EXPECT_NE(find(c, "emb.allreduce.grads"), nullptr);
}

TEST(CommEmb, TensorParallelShardsTheEmbedding) {
  Scenario s = dense_scenario();
  layout(s, 2, 1, 2, 4);
  EXPECT_DOUBLE_EQ(sent(run(s), "emb.allreduce.grads"), 32000.0 * 1024.0 / 2.0 * 4.0);
}

TEST(CommEmb, MiddleStageHoldsNoEmbedding) {
  Scenario s = dense_scenario();
  s.model.num_layers = 5;
  layout(s, 2, 1, 3, 6);
  s.parallel.num_layers_in_first_pipeline_stage = 1;
  s.parallel.num_layers_in_last_pipeline_stage = 2;  // {1, 2, 2}: busiest is stage 1
  const Comm c = run(s);
  EXPECT_EQ(c.stage, 1);
  EXPECT_EQ(find(c, "emb.allreduce.grads"), nullptr);
  EXPECT_EQ(find(c, "tp.embedding.allreduce"), nullptr);
  EXPECT_EQ(find(c, "tp.output.allreduce"), nullptr);
  EXPECT_DOUBLE_EQ(calls(c, "tp.allreduce"), 8.0);  // 2 layers x 4
}

// ---------------------------------------------------------------------------------
// Whole scenarios: every term at once stays within the fixed item array and adds up.
// ---------------------------------------------------------------------------------
TEST(CommScenario, DeepSeekLikeLayoutHasEveryFamily) {
  Scenario s = moe_scenario();
  ModelSpec& md = s.model;
  md.num_layers = 8;
  md.moe_layer_pattern = {0, 1, 1, 1, 1, 1, 1, 1};
  md.num_experts = 16;
  md.moe_router_topk = 4;
  md.moe_shared_expert_intermediate_size = 512;
  md.multi_latent_attention = true;
  md.q_lora_rank = 384;
  md.kv_lora_rank = 256;
  md.qk_head_dim = 64;
  md.qk_pos_emb_head_dim = 32;
  md.v_head_dim = 64;
  md.mtp_num_layers = 1;
  md.untie_embeddings_and_output_weights = true;
  ParallelSpec& par = s.parallel;
  par.sequence_parallel = true;
  par.cp_comm_type = CpCommType::kA2AP2P;
  par.hierarchical_context_parallel_sizes = {2, 2};
  par.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  par.recompute_granularity = RecomputeGranularity::kSelective;
  par.recompute_modules = kRecomputeCoreAttn | kRecomputeMlaUpProj | kRecomputeMoe;
  layout(s, 2, 4, 2, 32, /*ep=*/4, /*etp=*/2);  // dp = 2, edp = 2
  s.training.global_batch_size = 8;               // 4 micro-batches
  const Comm c = run(s);
  expect_consistent(c);
  EXPECT_EQ(c.stage, 1);  // 4 + 4 layers, MTP on the last stage
  const char* expected[] = {
      "tp.sp.allgather", "tp.sp.reducescatter", "tp.sp.allgather.mla",
      "tp.sp.reducescatter.mla", "tp.embedding.reducescatter", "tp.embedding.allgather",
      "tp.output.allgather", "tp.output.reducescatter", "tp.allreduce.grads", "cp.a2a",
      "cp.p2p.kv", "ep.a2a.dispatch", "ep.a2a.combine", "ep.a2a.bwd", "etp.allgather.dispatch",
      "etp.reducescatter.combine", "pp.sendrecv", "dp.reducescatter.grads",
      "dp.allgather.params", "edp.reducescatter.grads", "edp.allgather.params",
      "emb.allreduce.grads"};
  EXPECT_EQ(c.num_items, 22);
  EXPECT_LE(c.num_items, Comm::kMaxItems);
  for (const char* name : expected) EXPECT_NE(find(c, name), nullptr) << name;
  for (CommDim d : {CommDim::kTp, CommDim::kCp, CommDim::kEp, CommDim::kPp, CommDim::kDp,
                    CommDim::kEdp, CommDim::kEmb}) {
    EXPECT_GT(dim(c, d), 0.0) << static_cast<int>(d);
  }
}

// ---------------------------------------------------------------------------------
// Node de-duplication of the flex dispatcher (DeepEP / HybridEP): expected destination nodes
// against hand-computed values and a brute-force enumeration of uniform routing.
// ---------------------------------------------------------------------------------

// Brute force: every equally likely routing of one token, the mean number of distinct nodes.
// Experts e live on node e / (experts / nodes); groups are experts / groups consecutive experts.
double enumerate_nodes(int experts, int k, int nodes, int groups = 0, int group_topk = 0) {
  const int per_node = experts / nodes;
  double sum = 0, count = 0;
  // Every k-subset of `allowed` experts (bit masks), then its distinct nodes.
  auto subsets = [&](uint32_t allowed) {
    for (uint32_t mask = 0; mask < (1u << experts); ++mask) {
      if ((mask & ~allowed) != 0 || std::popcount(mask) != k) continue;
      uint32_t hit = 0;
      for (int e = 0; e < experts; ++e)
        if (mask & (1u << e)) hit |= 1u << (e / per_node);
      sum += std::popcount(hit);
      count += 1;
    }
  };
  if (groups == 0) {
    subsets((1u << experts) - 1);
    return sum / count;
  }
  // Group-limited: every group_topk-subset of groups equally likely, then k experts among them
  // (each group choice has the same number of expert subsets, so a flat mean is exact).
  const int per_group = experts / groups;
  for (uint32_t gmask = 0; gmask < (1u << groups); ++gmask) {
    if (std::popcount(gmask) != group_topk) continue;
    uint32_t allowed = 0;
    for (int g = 0; g < groups; ++g)
      if (gmask & (1u << g)) allowed |= ((1u << per_group) - 1) << (g * per_group);
    subsets(allowed);
  }
  return sum / count;
}

NodeDedup routing(int experts, int k, int groups = 0, int group_topk = 0) {
  return NodeDedup{.dest_ranks = 1, .experts = experts, .topk = k, .groups = groups, .group_topk = group_topk};
}

// 8 experts, top-2, 4 nodes of 2 experts: P(node hit) = 1 - C(6,2)/C(8,2) = 1 - 15/28 = 13/28;
// expected nodes 4 x 13/28 = 13/7.
TEST(NodeDedup, ExpectedDistinctNodesUniformRouting) {
  EXPECT_NEAR(expected_destination_nodes(routing(8, 2), 4), 13.0 / 7.0, 1e-12);
  EXPECT_NEAR(enumerate_nodes(8, 2, 4), 13.0 / 7.0, 1e-12);
  for (int nodes : {1, 2, 4, 8})
    for (int k : {1, 2, 3, 5})
      EXPECT_NEAR(expected_destination_nodes(routing(8, k), nodes), enumerate_nodes(8, k, nodes), 1e-12)
          << nodes << " nodes, top-" << k;
}

// Group-limited routing caps the nodes. 8 experts in 4 groups of 2, top-2 inside 2 groups:
// on 2 nodes (2 groups each) j chosen groups on a node: P(j=1) = 2x2/6, P(j=2) = 1/6;
// P(hit | j=1) = 1 - C(2,2)/C(4,2) = 5/6, P(hit | j=2) = 1: P(node hit) = 4/6 x 5/6 + 1/6 = 13/18,
// expected nodes 2 x 13/18 = 13/9. On 8 nodes (a group spans 2 nodes): (2/4) x (1 - C(3,2)/C(4,2))
// = 1/2 x 1/2 per node, 8 x 1/4 = 2 nodes.
TEST(NodeDedup, GroupLimitedRoutingCapsTheNodes) {
  EXPECT_NEAR(expected_destination_nodes(routing(8, 2, 4, 2), 2), 13.0 / 9.0, 1e-12);
  EXPECT_NEAR(enumerate_nodes(8, 2, 2, 4, 2), 13.0 / 9.0, 1e-12);
  EXPECT_NEAR(expected_destination_nodes(routing(8, 2, 4, 2), 8), 2.0, 1e-12);
  EXPECT_NEAR(enumerate_nodes(8, 2, 8, 4, 2), 2.0, 1e-12);
  for (int nodes : {2, 4, 8})
    for (auto [groups, gtop, k] : {std::array{4, 2, 2}, std::array{4, 1, 2}, std::array{8, 3, 4}, std::array{2, 1, 3}})
      EXPECT_NEAR(expected_destination_nodes(routing(16, k, groups, gtop), nodes), enumerate_nodes(16, k, nodes, groups, gtop),
                  1e-12)
          << nodes << " nodes, " << groups << " groups, top-" << gtop << " groups, top-" << k;
}

// The de-duplicated all-to-all: 16 ranks on 2 nodes of 8, 16 experts top-2, 4 destination
// ranks per token, S = 4000 B (1000 B a token copy). NIC: one copy per remote node hit,
// 1000 x (2-1) x P(node) = 1000 x (1 - C(8,2)/C(16,2)) = 1000 x 23/30 B; NVLink: S x 7/8 = 3500 B.
// At NVLink 1e4 B/s and NIC 1e3 B/s: max(0.35, 0.7667) s. The plain all-to-all sends S x 8/16 =
// 2000 B through the NIC: 2 s.
TEST(NodeDedup, DedupAllToAllCrossesTheNicOncePerNode) {
  HardwareSpec hw;
  hw.interconnect.nvlink_bw = 1e4;
  hw.interconnect.nic_bw = 1e3;
  hw.interconnect.nvlink_latency = hw.interconnect.nic_latency = 0;
  EfficiencySpec& e = hw.efficiency;
  e.nvlink = e.nic = 1;
  e.nvlink_half_bytes = e.nic_half_bytes = 0;
  e.collective_base = 0;
  CollectiveShape c{Collective::kAllToAll, CommDim::kEp, 16, 4000.0};
  const GroupTopology two_nodes{16, 2, 8};
  EXPECT_NEAR(collective_time(c, two_nodes, hw), 2.0, 1e-12);
  c.dedup = NodeDedup{.dest_ranks = 4, .experts = 16, .topk = 2};
  const DedupTraffic d = dedup_traffic(c, 2, 8);
  EXPECT_NEAR(d.nic_bytes, 1000.0 * 23.0 / 30.0, 1e-9);
  EXPECT_NEAR(d.nvlink_bytes, 3500.0, 1e-9);
  EXPECT_NEAR(collective_time(c, two_nodes, hw), 23.0 / 30.0, 1e-12);
  // Inside one node nothing crosses a NIC: the plain formula, S x 7/8 over NVLink.
  EXPECT_NEAR(collective_time(c, GroupTopology{8, 1, 8}, hw), 0.35 / 2, 1e-12);
}

// Which dispatchers synchronise with the host in the forward (Megatron-LM token_dispatcher.py,
// fused_a2a.py): allgather always; alltoall and HybridEP unless padded to capacity; DeepEP always.
TEST(HostSyncs, DispatcherSyncsPerConfiguration) {
  ModelSpec m;
  m.moe_token_dispatcher_type = Dispatcher::kAllGather;
  EXPECT_TRUE(dispatcher_syncs(m));
  m.moe_token_dispatcher_type = Dispatcher::kAllToAll;
  EXPECT_TRUE(dispatcher_syncs(m));
  m.moe_pad_expert_input_to_capacity = true;
  EXPECT_FALSE(dispatcher_syncs(m));
  m.moe_token_dispatcher_type = Dispatcher::kFlex;
  m.moe_flex_dispatcher_backend = FlexBackend::kDeepEp;
  EXPECT_TRUE(dispatcher_syncs(m));
  m.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  EXPECT_FALSE(dispatcher_syncs(m));
  m.moe_pad_expert_input_to_capacity = false;
  EXPECT_TRUE(dispatcher_syncs(m));
  // The backward reuses the forward's counts: no sync.
  Op permute;
  permute.kind = OpKind::kMemoryBound;
  permute.mem.bytes = 1;
  permute.host_syncs = 1;
  int backward_syncs = -1;
  sched::bwd_ops(sched::compute_el(permute), [&](const Op& o) { backward_syncs = o.host_syncs; });
  EXPECT_EQ(backward_syncs, 0);
}

}  // namespace
}  // namespace lcm
