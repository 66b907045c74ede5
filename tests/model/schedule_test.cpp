// The op schedule: stable names, GEMM shapes, and agreement with the FLOP model (the
// schedule's model FLOPs, summed over ops, layers, micro-batches and ranks, equal
// count_flops' model FLOPs: both describe the same step), and the fold that makes
// estimate_comm: the schedule's communication ops, summed per Comm item over the busiest
// stage, are estimate_comm's items.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "../common/built_schedule.hpp"
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

using testing::Built;
using testing::build;

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

// Llama 3 8B on 16 GPUs with TP 2 + SP and CP 2.
Scenario llama_tp2_sp_cp2() {
  Scenario s = base(testing::llama3_8b(), 16);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 2;
  return s;
}

TEST(Schedule, DenseFlopsMatchTheFlopModel) {
  Scenario s = llama_tp2_sp_cp2();
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

// Packed documents: the attention op runs docs x mbs sequences of span tokens (CP splits each
// document), and the schedule's FLOPs still equal count_flops'. 8192 tokens in documents of
// 1024 with CP 2: 8 documents, seq_q 512, seq_kv 1024.
TEST(Schedule, PackedDocumentsShapeTheAttentionOp) {
  Scenario s = llama_tp2_sp_cp2();
  s.training.document_length = 1024;
  const Built b = build(s);
  EXPECT_NEAR(schedule_model_flops(b) / count_flops(s, b.mesh).model_flops, 1.0, 1e-9);
  const Op* core = nullptr;
  for (const Op& o : b.sched.dense.fwd)
    if (o.id == OpId::kAttnCore) core = &o;
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->attn.batch, 8);
  EXPECT_EQ(core->attn.seq_q, 512);
  EXPECT_EQ(core->attn.seq_kv, 1024);
}

// The CP ring runs one attention kernel per step on the KV block the rank holds then
// (Transformer Engine's p2p CP): the op records that block, s / cp keys, as the forward's L2
// working set (timing.cpp); a2a+p2p's ring holds s / p2p-ranks; all-gather and a2a CP run one
// kernel over the whole sequence (0 = seq_kv).
TEST(Schedule, CpRingKernelsHoldOneKvBlock) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 4;
  const auto core_of = [&](CpCommType type, std::vector<int> sizes) {
    s.parallel.cp_comm_type = type;
    s.parallel.hierarchical_context_parallel_sizes = std::move(sizes);
    const Built b = build(s);
    for (const Op& o : b.sched.dense.fwd)
      if (o.id == OpId::kAttnCore) return o.attn;
    ADD_FAILURE() << "no attention core";
    return AttentionShape{};
  };
  const int64_t seq = s.training.seq_length;
  const AttentionShape p2p = core_of(CpCommType::kP2P, {});
  EXPECT_EQ(p2p.seq_kv, seq);
  EXPECT_EQ(p2p.kv_block, seq / 4);
  EXPECT_EQ(core_of(CpCommType::kA2AP2P, {2, 2}).kv_block, seq / 2);
  EXPECT_EQ(core_of(CpCommType::kAllGather, {}).kv_block, 0);
  EXPECT_EQ(core_of(CpCommType::kA2A, {}).kv_block, 0);
  s.parallel.context_parallel_size = 1;
  EXPECT_EQ(core_of(CpCommType::kP2P, {}).kv_block, 0);
}

// The CP ring's merges (attn.cp.merge, hand-derived): Llama 3 8B at TP 2 (16 query heads, 4 KV
// heads of d 128 per rank: Q and O 2048 elements per token, K + V 1024), CP 4 p2p, T = mbs x s / 4
// tokens per rank. n = 4 steps, 4 calls: forward O (2 + 6 x 4) + 4 KV = 57344 B per token,
// backward Q (6 x 4 - 2) + KV (6 x 4 + 2) = 71680 B; a2a+p2p {2, 2}: n = 2, 32768 and 34816 B.
// All-gather and a2a CP, and no CP, merge nothing.
TEST(Schedule, CpRingMergesTheStepsPartialResults) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 4;
  const double tokens = static_cast<double>(s.training.micro_batch_size * s.training.seq_length) / 4;
  const auto merge_of = [&](CpCommType type, std::vector<int> sizes, Pass pass) -> std::optional<Op> {
    s.parallel.cp_comm_type = type;
    s.parallel.hierarchical_context_parallel_sizes = std::move(sizes);
    const Built b = build(s);
    for (const Op& o : pass == Pass::kFwd ? b.sched.dense.fwd : b.sched.dense.bwd)
      if (o.id == OpId::kAttnCpMerge) return o;
    return std::nullopt;
  };
  const auto fwd = merge_of(CpCommType::kP2P, {}, Pass::kFwd);
  ASSERT_TRUE(fwd.has_value());
  EXPECT_EQ(fwd->kind, OpKind::kMemoryBound);
  EXPECT_EQ(fwd->calls, 4);
  EXPECT_DOUBLE_EQ(fwd->mem.bytes * 4, tokens * 57344);
  const auto bwd = merge_of(CpCommType::kP2P, {}, Pass::kBwd);
  ASSERT_TRUE(bwd.has_value());
  EXPECT_EQ(bwd->calls, 4);
  EXPECT_DOUBLE_EQ(bwd->mem.bytes * 4, tokens * 71680);
  const auto hier = merge_of(CpCommType::kA2AP2P, {2, 2}, Pass::kFwd);
  ASSERT_TRUE(hier.has_value());
  EXPECT_EQ(hier->calls, 2);
  EXPECT_DOUBLE_EQ(hier->mem.bytes * 2, tokens * 32768);
  EXPECT_DOUBLE_EQ(merge_of(CpCommType::kA2AP2P, {2, 2}, Pass::kBwd)->mem.bytes * 2, tokens * 34816);
  EXPECT_FALSE(merge_of(CpCommType::kAllGather, {}, Pass::kFwd).has_value());
  EXPECT_FALSE(merge_of(CpCommType::kA2A, {}, Pass::kFwd).has_value());
  s.parallel.context_parallel_size = 1;
  EXPECT_FALSE(merge_of(CpCommType::kP2P, {}, Pass::kFwd).has_value());
}

// attention_dropout marks the fused attention op (its random numbers are priced by the
// profile's dropout rates, timing.cpp); hidden dropout alone does not.
TEST(Schedule, AttentionDropoutMarksTheKernel) {
  Scenario s = base(testing::llama3_8b(), 8);
  const auto core = [&]() {
    for (const Op& o : build(s).sched.dense.fwd)
      if (o.id == OpId::kAttnCore) return o.attn;
    ADD_FAILURE() << "no attention core";
    return AttentionShape{};
  };
  s.model.attention_dropout = 0;
  s.model.hidden_dropout = 0.1;
  EXPECT_FALSE(core().dropout);
  s.model.attention_dropout = 0.1;
  EXPECT_TRUE(core().dropout);
}

// attention_backend unfused: the core op stands for the unfused kernels, which compute the
// whole score matrix: twice the causal FLOPs executed forward, 2x that backward (four GEMMs, no
// recomputed scores), the model FLOPs unchanged. Llama 3 8B at 8K, TP 1: 32 heads x 8192^2 x
// (128 + 128) x 2 = 1.099511627776e12 FLOPs forward.
TEST(Schedule, UnfusedAttentionComputesTheWholeMatrix) {
  Scenario s = base(testing::llama3_8b(), 8);
  const auto core = [&](bool bwd) {
    const Built b = build(s);
    for (const Op& o : bwd ? b.sched.dense.bwd : b.sched.dense.fwd)
      if (o.id == OpId::kAttnCore) return o;
    ADD_FAILURE() << "no attention core";
    return Op{};
  };
  const Op fused = core(false);
  EXPECT_FALSE(fused.attn.unfused);
  EXPECT_DOUBLE_EQ(fused.attn.work_fraction, 0.5);
  s.training.attention_backend = AttentionBackend::kUnfused;
  const Op f = core(false), b = core(true);
  EXPECT_TRUE(f.attn.unfused);
  EXPECT_DOUBLE_EQ(f.attn.work_fraction, 1.0);
  EXPECT_DOUBLE_EQ(f.flops, 1.099511627776e12 * s.training.micro_batch_size);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * fused.flops);
  EXPECT_DOUBLE_EQ(f.model_flops, fused.model_flops);
  EXPECT_DOUBLE_EQ(b.flops, 2.0 * f.flops);
  EXPECT_DOUBLE_EQ(b.model_flops, 2.0 * f.model_flops);
}

// The residual stream's gradients (docs/op-schedule.md §3): a residual add's backward is the
// dropout mask multiply (5 B per element) and the bias gradient sum (2 B), nothing at dropout 0
// without a bias; a pre-norm's backward is twice its forward (8 B) plus the fork's gradient sum
// (read two, write one: 6 B); the final norm reads no fork (8 B). Llama 3 8B, TP 2 + SP at 8K:
// 4096 tokens x 4096 per rank.
TEST(Schedule, ResidualStreamGradients) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.model.hidden_dropout = 0;  // Megatron-Core's default is 0.1; Llama recipes set 0
  const double el = 4096.0 * 4096.0;
  const auto bwd = [&](const Built& b, OpId id) -> const Op* {
    for (const Op& o : b.sched.dense.bwd)
      if (o.id == id) return &o;
    return nullptr;
  };
  {
    const Built b = build(s);
    EXPECT_EQ(bwd(b, OpId::kAttnBda), nullptr);
    EXPECT_EQ(bwd(b, OpId::kMlpBda), nullptr);
    ASSERT_NE(bwd(b, OpId::kAttnNorm), nullptr);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kAttnNorm)->mem.bytes, 14.0 * el);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kMlpNorm)->mem.bytes, 14.0 * el);
    double final_norm = -1;
    for (const Op& o : b.sched.stages.back().post_bwd)
      if (o.id == OpId::kFinalNorm) final_norm = o.mem.bytes;
    EXPECT_DOUBLE_EQ(final_norm, 8.0 * el);
  }
  const auto fwd = [&](const Built& b, OpId id) {
    for (const Op& o : b.sched.dense.fwd)
      if (o.id == id) return o.mem.bytes;
    ADD_FAILURE() << "no forward op";
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(fwd(build(s), OpId::kAttnBda), 6.0 * el);  // read two, write one
  s.model.hidden_dropout = 0.1;
  {
    const Built b = build(s);
    ASSERT_NE(bwd(b, OpId::kAttnBda), nullptr);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kAttnBda)->mem.bytes, 5.0 * el);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kMlpBda)->mem.bytes, 5.0 * el);
    EXPECT_DOUBLE_EQ(fwd(b, OpId::kAttnBda), 7.0 * el);  // and the 1-byte mask
    EXPECT_DOUBLE_EQ(fwd(b, OpId::kMlpBda), 7.0 * el);
  }
  s.model.add_bias_linear = true;
  {
    const Built b = build(s);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kMlpBda)->mem.bytes, 7.0 * el);
  }
  s.model.hidden_dropout = 0;
  {
    const Built b = build(s);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kAttnBda)->mem.bytes, 2.0 * el);
    EXPECT_DOUBLE_EQ(bwd(b, OpId::kAttnNorm)->mem.bytes, 14.0 * el);
  }
}

// Backward bytes of the activation and RoPE (docs/op-schedule.md §3). Llama 3 8B, TP 2 + SP at
// 8K: the MLP sees all 8192 tokens and 14336 / 2 = 7168 columns. SwiGLU reads the fc1 output
// (2 x 7168) and writes 7168 forward (3 x 2 B per column); backward reads the fc1 output and
// the gradient and writes the fc1 output's gradient (5 x 2 B). RoPE rotates Q and K, (32 + 8)
// / 2 heads of 128, read and write, the same both ways.
TEST(Schedule, ActivationAndRopeBackwardBytes) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  const Built b = build(s);
  const auto bytes = [&](const std::vector<Op>& ops, OpId id) {
    for (const Op& o : ops)
      if (o.id == id) return o.mem.bytes;
    ADD_FAILURE() << "no op";
    return 0.0;
  };
  const double act = 8192.0 * 7168.0;
  EXPECT_DOUBLE_EQ(bytes(b.sched.dense.fwd, OpId::kMlpAct), 6.0 * act);
  EXPECT_DOUBLE_EQ(bytes(b.sched.dense.bwd, OpId::kMlpAct), 10.0 * act);
  const double rope = 4.0 * 8192.0 * 20.0 * 128.0;
  EXPECT_DOUBLE_EQ(bytes(b.sched.dense.fwd, OpId::kAttnRope), rope);
  EXPECT_DOUBLE_EQ(bytes(b.sched.dense.bwd, OpId::kAttnRope), rope);
  // A non-gated activation (GeLU): forward 2 x 2 B, backward 3 x 2 B per column.
  s.model.swiglu = false;
  const Built g = build(s);
  EXPECT_DOUBLE_EQ(bytes(g.sched.dense.fwd, OpId::kMlpAct), 4.0 * act);
  EXPECT_DOUBLE_EQ(bytes(g.sched.dense.bwd, OpId::kMlpAct), 6.0 * act);
}

// FP8: each layer GEMM's operands are cast (docs/op-schedule.md §4.1a). attn.proj's input
// T x (a·d/t) is cast in forward (4 B/element) and its output gradient T x h in backward;
// QKV's input comes from the norm in FP8 (forward 0 bytes), its gradient is cast. BF16 has
// no casts.
// Mixtral 8x7B on 16 GPUs, TP 2 + SP, EP 8 (the FP8 cast tests' layout), and an op by name.
Scenario mixtral_tp2_ep8() {
  Scenario s = base(testing::mixtral_8x7b(), 16);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  return s;
}
const Op* find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& o : ops)
    if (op_name(o, "L.") == name) return &o;
  return nullptr;
}

// LoRA: the frozen base runs no weight gradients and the adapters' A and B GEMMs run forward,
// dgrad and wgrad; summed over the step the schedule's model FLOPs still equal count_flops'
// (whose backward is 1x forward on the base GEMMs). Dense with TP + SP + CP, and MoE with
// adapters on the routed experts (grouped) and ETP 2.
TEST(Schedule, LoraFlopsMatchTheFlopModel) {
  Scenario d = llama_tp2_sp_cp2();
  d.training.peft = Peft::kLora;
  d.training.lora_rank = 16;
  Built b = build(d);
  EXPECT_NEAR(schedule_model_flops(b) / count_flops(d, b.mesh).model_flops, 1.0, 1e-9);
  const Flops full = count_flops(llama_tp2_sp_cp2(), b.mesh), lora = count_flops(d, b.mesh);
  EXPECT_DOUBLE_EQ(lora.bwd.dense_mlp, full.fwd.dense_mlp);  // dgrad only
  EXPECT_DOUBLE_EQ(lora.bwd.attn_core, full.bwd.attn_core);
  // Adapters per token and layer, forward: 2 r (in + out) on qkv (4096 -> 6144), proj, fc1
  // (4096 -> 2 x 14336) and fc2; backward twice that.
  const double per_token = 2.0 * 16 * ((4096 + 6144) + (4096 + 4096) + (4096 + 28672) + (14336 + 4096));
  EXPECT_DOUBLE_EQ(lora.fwd.lora_adapters, per_token * 32 * 8192.0 * 32);
  EXPECT_DOUBLE_EQ(lora.bwd.lora_adapters, 2 * lora.fwd.lora_adapters);
  const Op* wgrad = nullptr;
  for (const Op& o : b.sched.dense.bwd)
    if (o.id == OpId::kMlpFc1 && o.part == GemmPart::kWgrad) wgrad = &o;
  EXPECT_EQ(wgrad, nullptr);

  Scenario moe = mixtral_tp2_ep8();
  moe.parallel.expert_tensor_parallel_size = 2;
  moe.training.peft = Peft::kLora;
  moe.training.lora_rank = 8;
  b = build(moe);
  EXPECT_NEAR(schedule_model_flops(b) / count_flops(moe, b.mesh).model_flops, 1.0, 1e-9);
}

TEST(Schedule, Fp8GemmsCarryTheirCasts) {
  Scenario s = mixtral_tp2_ep8();
  {
    const Built bf16 = build(s);
    for (const Op& o : bf16.sched.moe.fwd) EXPECT_EQ(std::string(to_string(o.id)).find("fp8cast"), std::string::npos) << to_string(o.id);
  }
  s.training.precision = Precision::kFp8;
  const Built b = build(s);
  const double T = 8192, h = 4096, proj_k = 32 * 128 / 2.0, qkv_n = 3072;
  const Op* proj_f = find(b.sched.moe.fwd, "L.attn.proj.fp8cast.fwd");
  const Op* proj_b = find(b.sched.moe.bwd, "L.attn.proj.fp8cast.bwd");
  const Op* qkv_f = find(b.sched.moe.fwd, "L.attn.qkv.fp8cast.fwd");
  const Op* qkv_b = find(b.sched.moe.bwd, "L.attn.qkv.fp8cast.bwd");
  ASSERT_TRUE(proj_f && proj_b && qkv_f && qkv_b);
  EXPECT_DOUBLE_EQ(proj_f->mem.bytes, 4 * T * proj_k);
  EXPECT_DOUBLE_EQ(proj_b->mem.bytes, 4 * T * h);
  // QKV's input comes from LayerNormLinear's fused norm in FP8: no cast, only the transpose
  // the weight gradient needs (read 1, write 1 B per element).
  EXPECT_DOUBLE_EQ(qkv_f->mem.bytes, 2 * T * h);
  EXPECT_DOUBLE_EQ(qkv_b->mem.bytes, 4 * T * qkv_n);
  // That norm writes FP8 (read 2, write 1 B per element of its SP shard, T / tp tokens), and SP
  // all-gathers its output in FP8, forward and for the weight gradient; the input gradient's
  // reduce-scatter stays bf16. The MoE layer's pre-MLP norm is a plain TENorm (bf16 out).
  const double shard = T / 2 * h;
  const Op* attn_norm = find(b.sched.moe.fwd, "L.attn.norm.fwd");
  const Op* attn_norm_b = find(b.sched.moe.bwd, "L.attn.norm.bwd");
  const Op* mlp_norm = find(b.sched.moe.fwd, "L.mlp.norm.fwd");
  ASSERT_TRUE(attn_norm && attn_norm_b && mlp_norm);
  EXPECT_DOUBLE_EQ(attn_norm->mem.bytes, 3 * shard);
  EXPECT_DOUBLE_EQ(attn_norm_b->mem.bytes, 14 * shard);  // x, dy read, dx written, the fork's add
  EXPECT_DOUBLE_EQ(mlp_norm->mem.bytes, 4 * shard);
  int gathers = 0;
  for (const auto* list : {&b.sched.moe.fwd, &b.sched.moe.bwd})
    for (const Op& o : *list) {
      if (o.id != OpId::kAttnSpAllGather) continue;  // the TP enter (its backward: the reduce-scatter)
      const bool gather = o.coll.kind == Collective::kAllGather;
      gathers += gather;
      EXPECT_DOUBLE_EQ(o.coll.message_bytes, (gather ? 1.0 : 2.0) * T * h) << op_name(o, "L.");
    }
  EXPECT_EQ(gathers, 2);  // forward, and again in backward for the weight gradient
  // LoRA's frozen base: no weight gradient, its norm output also feeds the adapter in bf16.
  s.training.peft = Peft::kLora;
  s.training.lora_rank = 8;
  const Built lora = build(s);
  const Op* lora_qkv = find(lora.sched.moe.fwd, "L.attn.qkv.fp8cast.fwd");
  const Op* lora_norm = find(lora.sched.moe.fwd, "L.attn.norm.fwd");
  ASSERT_TRUE(lora_qkv && lora_norm);
  EXPECT_DOUBLE_EQ(lora_qkv->mem.bytes, 0);
  EXPECT_DOUBLE_EQ(lora_norm->mem.bytes, 4 * shard);
  // Experts: both FC1 (permuted bf16 tokens) and FC2 inputs are cast.
  const Op* e1 = find(b.sched.moe.fwd, "L.moe.experts.fc1.fp8cast.fwd");
  ASSERT_TRUE(e1);
  EXPECT_DOUBLE_EQ(e1->mem.bytes, 4 * 8192.0 * h);
  // Behind an FP8 dispatch the tokens arrive quantized: FC1's input cast moves nothing under
  // delayed scaling (no amax pass); FC2's input is cast as before.
  Scenario fp8_dispatch = s;
  fp8_dispatch.training.peft = Peft::kNone;
  fp8_dispatch.training.lora_rank = TrainingSpec{}.lora_rank;
  fp8_dispatch.parallel.moe_fp8_dispatch = true;
  const Built d = build(fp8_dispatch);
  const Op* d1 = find(d.sched.moe.fwd, "L.moe.experts.fc1.fp8cast.fwd");
  const Op* d2 = find(d.sched.moe.fwd, "L.moe.experts.fc2.fp8cast.fwd");
  const Op* e2 = find(b.sched.moe.fwd, "L.moe.experts.fc2.fp8cast.fwd");
  ASSERT_TRUE(d1 && d2 && e2);
  EXPECT_DOUBLE_EQ(d1->mem.bytes, 0);
  EXPECT_DOUBLE_EQ(d2->mem.bytes, e2->mem.bytes);
  // The casts come right before their GEMM.
  for (size_t i = 0; i + 1 < b.sched.moe.fwd.size(); ++i)
    if (std::string(to_string(b.sched.moe.fwd[i].id)).ends_with(".fp8cast"))
      EXPECT_EQ(std::string(to_string(b.sched.moe.fwd[i].id)), std::string(to_string(b.sched.moe.fwd[i + 1].id)) + ".fp8cast");
}

// The recipe sets the cast's bytes per element (docs/op-schedule.md §4.1a): delayed 4 (read
// 2, write the FP8 copy and its transpose, 1 + 1); tensorwise 2 more for the amax pass;
// blockwise a 4-byte scale per 128 elements of each copy (4 + 8/128) and its GEMMs in
// DType::kFp8Block. The norm-fed QKV input: delayed transposes the norm's FP8 output (2);
// tensorwise and blockwise run the norm unfused (bf16, the amax from the norm kernel) and then
// one cast-transpose (4; 4 + 8/128), and only delayed writes the norm's output in FP8.
TEST(Schedule, Fp8RecipeSetsTheCastBytesAndTheGemmType) {
  Scenario s = mixtral_tp2_ep8();
  s.training.precision = Precision::kFp8;
  s.hardware.efficiency.gemm_fp8_block = 0.5;
  const double T = 8192, h = 4096, proj_k = 32 * 128 / 2.0;
  struct Case {
    Fp8Recipe recipe;
    double cast, fused;
    DType gemm;
  };
  for (const Case& c :
       {Case{Fp8Recipe::kDelayed, 4.0, 2.0, DType::kFp8}, Case{Fp8Recipe::kTensorwise, 6.0, 4.0, DType::kFp8},
        Case{Fp8Recipe::kBlockwise, 4.0 + 8.0 / 128.0, 4.0 + 8.0 / 128.0, DType::kFp8Block}}) {
    s.training.fp8_recipe = c.recipe;
    const Built b = build(s);
    const Op* proj_f = find(b.sched.moe.fwd, "L.attn.proj.fp8cast.fwd");
    const Op* proj_b = find(b.sched.moe.bwd, "L.attn.proj.fp8cast.bwd");
    const Op* qkv_f = find(b.sched.moe.fwd, "L.attn.qkv.fp8cast.fwd");
    const Op* qkv = find(b.sched.moe.fwd, "L.attn.qkv.fwd");
    ASSERT_TRUE(proj_f && proj_b && qkv_f && qkv);
    EXPECT_DOUBLE_EQ(proj_f->mem.bytes, c.cast * T * proj_k);
    EXPECT_DOUBLE_EQ(proj_b->mem.bytes, c.cast * T * h);
    EXPECT_DOUBLE_EQ(qkv_f->mem.bytes, c.fused * T * h);
    EXPECT_EQ(qkv->dtype, c.gemm);
    const Op* norm = find(b.sched.moe.fwd, "L.attn.norm.fwd");
    ASSERT_TRUE(norm);
    EXPECT_DOUBLE_EQ(norm->mem.bytes, (c.recipe == Fp8Recipe::kDelayed ? 3.0 : 4.0) * T / 2 * h);
  }
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

// ---------------------------------------------------------------------------------
// The schedule is the one home of communication volumes: summing its collectives per
// Comm item over the busiest stage (per-layer lists times layers and micro-batches,
// recompute lists times recomputed layers, step ops once) gives estimate_comm's items.
// ---------------------------------------------------------------------------------
struct ItemSum {
  CommDim dim = CommDim::kTp;
  Collective kind = Collective::kAllReduce;
  int group = 0;
  double calls = 0, sent = 0;
};

std::map<CommItemId, ItemSum> schedule_items(const Schedule& sc, int stage) {
  std::map<CommItemId, ItemSum> out;
  auto add = [&](const std::vector<Op>& ops, double times, const char* prefix) {
    for (const Op& o : ops) {
      if (!is_comm(o)) {
        EXPECT_EQ(o.item, CommItemId::kNone) << op_name(o, prefix);
        continue;
      }
      if (o.item == CommItemId::kNone) {
        // Only receives (the neighbour's send) and the cross-entropy all-reduce are
        // deliberately outside Comm (communication-model.md §5, §8).
        const std::string n = op_name(o, prefix);
        EXPECT_TRUE(n.rfind("pp.recv", 0) == 0 || n.find("loss.tp.allreduce.fwd") != std::string::npos) << n;
        continue;
      }
      if (o.coll.group_size <= 1 || times * o.calls <= 0) continue;
      ItemSum& it = out[o.item];
      if (it.group == 0) {
        it.dim = o.coll.dim;
        it.kind = o.coll.kind;
        it.group = o.coll.group_size;
      }
      EXPECT_EQ(it.dim, o.coll.dim) << op_name(o, prefix);
      EXPECT_EQ(it.kind, o.coll.kind) << op_name(o, prefix);
      EXPECT_EQ(it.group, o.coll.group_size) << op_name(o, prefix);
      it.calls += times * o.calls;
      it.sent += times * o.calls * sent_bytes_per_call(o.coll.kind, o.coll.group_size, o.coll.message_bytes);
    }
  };
  const StageSchedule& st = sc.stages[static_cast<size_t>(stage)];
  const double m = sc.num_micro_batches;
  for (const auto* l : {&st.pre_fwd, &st.post_fwd, &st.post_bwd, &st.pre_bwd}) add(*l, m, "");
  auto layer = [&](const LayerOps& l, int n, int recomputed, const char* prefix) {
    add(l.fwd, m * n, prefix);
    add(l.recompute, m * recomputed, prefix);
    add(l.bwd, m * n, prefix);
  };
  layer(sc.dense, st.dense, st.dense_recomputed, "L.");
  layer(sc.moe, st.moe, st.moe_recomputed, "L.");
  layer(sc.mtp, st.mtp, st.mtp_recomputed, "MTP.");
  add(st.step, 1, "");
  return out;
}

void expect_fold_matches(const Scenario& s, int min_items) {
  SCOPED_TRACE(s.name);
  const Built b = build(s);
  const Comm c = estimate_comm(s, b.mesh, b.layers);
  const std::map<CommItemId, ItemSum> sum = schedule_items(b.sched, c.stage);
  EXPECT_GE(c.num_items, min_items);
  EXPECT_EQ(sum.size(), static_cast<size_t>(c.num_items));
  double total = 0;
  for (int i = 0; i < c.num_items; ++i) {
    const CommItem& it = c.items[static_cast<size_t>(i)];
    const auto f = sum.find(it.id);
    ASSERT_NE(f, sum.end()) << to_string(it.id);
    EXPECT_EQ(f->second.dim, it.dim) << to_string(it.id);
    EXPECT_EQ(f->second.kind, it.kind) << to_string(it.id);
    EXPECT_EQ(f->second.group, it.group_size) << to_string(it.id);
    EXPECT_NEAR(f->second.calls, it.calls, 1e-12 * it.calls) << to_string(it.id);
    EXPECT_NEAR(f->second.sent, it.sent_bytes, 1e-12 * it.sent_bytes) << to_string(it.id);
    total += f->second.sent;
  }
  EXPECT_NEAR(total, c.total_sent_bytes, 1e-12 * c.total_sent_bytes);
}

// A small DeepSeek-like model: MLA, MoE with a shared expert, one MTP depth.
ModelSpec deepseek_like() {
  ModelSpec md = testing::mixtral_8x7b();
  md.name = "deepseek-like";
  md.num_layers = 8;
  md.hidden_size = 2048;
  md.num_attention_heads = 16;
  md.num_query_groups = 16;
  md.kv_channels = 128;
  md.moe_layer_pattern = {0, 1, 1, 1, 1, 1, 1, 1};
  md.num_experts = 16;
  md.moe_router_topk = 4;
  md.moe_ffn_hidden_size = 1024;
  md.moe_shared_expert_intermediate_size = 1024;
  md.multi_latent_attention = true;
  md.q_lora_rank = 512;
  md.kv_lora_rank = 256;
  md.qk_head_dim = 128;
  md.qk_pos_emb_head_dim = 64;
  md.v_head_dim = 128;
  md.mtp_num_layers = 1;
  return md;
}

TEST(ScheduleComm, DenseTpSpCpP2pPipeline) {
  Scenario s = base(testing::llama3_8b(), 16);
  s.name = "dense tp2 sp cp2 p2p pp2";
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 2;
  s.parallel.pipeline_model_parallel_size = 2;
  expect_fold_matches(s, 8);
  s.name = "dense, ddp, no sp, full block recompute";
  s.parallel.sequence_parallel = false;
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kBlock;
  s.parallel.recompute_num_layers = 3;
  expect_fold_matches(s, 4);
}

TEST(ScheduleComm, InterleavedPipelineAndDistributedOptimizer) {
  Scenario s = base(testing::llama3_8b(), 16);
  s.name = "pp4 vp2 zero1";
  s.parallel.tensor_model_parallel_size = 4;
  s.parallel.sequence_parallel = true;
  s.parallel.pipeline_model_parallel_size = 4;
  s.parallel.num_layers_per_virtual_pipeline_stage = 4;
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  expect_fold_matches(s, 6);
}

TEST(ScheduleComm, ContextParallelVariants) {
  Scenario s = base(testing::llama3_8b(), 8);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 4;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  for (CpCommType type : {CpCommType::kP2P, CpCommType::kAllGather, CpCommType::kA2A, CpCommType::kA2AP2P}) {
    s.parallel.cp_comm_type = type;
    s.parallel.hierarchical_context_parallel_sizes.clear();
    if (type == CpCommType::kA2AP2P) s.parallel.hierarchical_context_parallel_sizes = {2, 2};
    s.name = "cp4 type " + std::to_string(static_cast<int>(type));
    expect_fold_matches(s, 3);
  }
}

TEST(ScheduleComm, MoeTpEpEtpAndShardingStrategies) {
  Scenario s = base(testing::mixtral_8x7b(), 32);
  s.training.global_batch_size = 16;  // 4 micro-batches per pipeline
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.expert_model_parallel_size = 4;
  s.parallel.expert_tensor_parallel_size = 2;
  s.model.moe_expert_capacity_factor = 1.25;
  s.model.moe_pad_expert_input_to_capacity = true;
  s.parallel.moe_fp8_dispatch = true;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMoe;
  for (DpSharding how : {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads,
                         DpSharding::kOptimGradsParams}) {
    s.parallel.data_parallel_sharding_strategy = how;
    s.name = "moe tp2 ep4 etp2 sharding " + std::to_string(static_cast<int>(how));
    expect_fold_matches(s, 10);
  }
  s.parallel.data_parallel_sharding_strategy = DpSharding::kNoShard;
  for (Dispatcher d : {Dispatcher::kAllGather, Dispatcher::kFlex}) {
    s.model.moe_token_dispatcher_type = d;
    s.name = "moe dispatcher " + std::to_string(static_cast<int>(d));
    expect_fold_matches(s, 8);
  }
}

TEST(ScheduleComm, MlaMoeMtpOnTheBusiestStage) {
  Scenario s = base(deepseek_like(), 32);
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 2;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.expert_model_parallel_size = 4;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlaUpProj | kRecomputeMoe;
  s.name = "mla moe mtp selective";
  {
    const Built b = build(s);
    EXPECT_EQ(estimate_comm(s, b.mesh, b.layers).stage, 1);  // 4 + 4 layers, MTP on the last
    EXPECT_EQ(b.sched.stages[1].mtp_recomputed, 1);
  }
  expect_fold_matches(s, 18);
  s.name = "mla moe mtp full uniform";
  s.parallel.recompute_granularity = RecomputeGranularity::kFull;
  s.parallel.recompute_method = RecomputeMethod::kUniform;
  s.parallel.recompute_num_layers = 1;
  expect_fold_matches(s, 18);
  s.name = "mla moe mtp no sp";
  s.parallel.tensor_model_parallel_size = 1;
  s.parallel.sequence_parallel = false;
  s.parallel.expert_model_parallel_size = 8;
  expect_fold_matches(s, 8);
}

// Op names and passes of the communication the comm model derives (docs/op-schedule.md).
TEST(ScheduleComm, CollectivesSitInTheirPasses) {
  Scenario s = base(testing::llama3_8b(), 4);
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.context_parallel_size = 2;
  s.parallel.cp_comm_type = CpCommType::kAllGather;
  Built b = build(s);  // no SP: identity copies forward, all-reduces backward
  std::map<std::string, const Op*> ops;
  auto index = [&](const LayerOps& l) {
    ops.clear();
    for (const auto* v : {&l.fwd, &l.bwd})
      for (const Op& o : *v) ops[op_name(o, "L.")] = &o;
  };
  auto item_of = [&](const char* n) {
    const auto it = ops.find(n);
    return it == ops.end() ? std::string("(none)") : std::string(it->second->item != CommItemId::kNone ? to_string(it->second->item) : "(null)");
  };
  index(b.sched.dense);
  EXPECT_EQ(item_of("L.attn.tp.allreduce.fwd"), "tp.allreduce");
  EXPECT_EQ(item_of("L.attn.tp.allreduce.bwd"), "(none)");  // g's backward is an identity
  EXPECT_EQ(item_of("L.attn.tp.copy.bwd"), "tp.allreduce");  // f's backward all-reduces
  EXPECT_EQ(item_of("L.attn.tp.copy.fwd"), "(none)");
  EXPECT_EQ(item_of("L.mlp.tp.copy.bwd"), "tp.allreduce");
  // CP all-gather: K, V gathered forward and again backward; dK, dV reduce-scattered.
  EXPECT_EQ(item_of("L.attn.cp.k.allgather.fwd"), "cp.allgather.kv");
  EXPECT_EQ(item_of("L.attn.cp.k.regather.bwd"), "cp.allgather.kv");
  EXPECT_EQ(item_of("L.attn.cp.k.allgather.bwd"), "cp.reducescatter.dkv");
  EXPECT_EQ(ops.at("L.attn.cp.k.allgather.bwd")->coll.kind, Collective::kReduceScatter);
  // The backward re-gather comes before the core's backward, the reduce-scatter after.
  const std::vector<Op>& bwd = b.sched.dense.bwd;
  auto pos = [&](const char* n) {
    for (size_t i = 0; i < bwd.size(); ++i)
      if (op_name(bwd[i], "L.") == n) return static_cast<int>(i);
    return -1;
  };
  EXPECT_LT(pos("L.attn.cp.k.regather.bwd"), pos("L.attn.core.bwd"));
  EXPECT_GT(pos("L.attn.cp.k.allgather.bwd"), pos("L.attn.core.bwd"));
  // ETP gathers the dispatched tokens with or without SP, on the EP dimension.
  Scenario moe = base(testing::mixtral_8x7b(), 8);
  moe.parallel.expert_model_parallel_size = 4;
  moe.parallel.expert_tensor_parallel_size = 2;
  const Built bm = build(moe);
  index(bm.sched.moe);
  EXPECT_EQ(item_of("L.moe.dispatch.etp.allgather.fwd"), "etp.allgather.dispatch");
  EXPECT_EQ(item_of("L.moe.dispatch.etp.allgather.bwd"), "etp.reducescatter.combine");
  EXPECT_EQ(item_of("L.moe.combine.etp.reducescatter.fwd"), "etp.reducescatter.combine");
  EXPECT_EQ(ops.at("L.moe.dispatch.etp.allgather.fwd")->coll.dim, CommDim::kEp);
  EXPECT_EQ(item_of("L.moe.dispatch.a2a.fwd"), "ep.a2a.dispatch");
  EXPECT_EQ(item_of("L.moe.dispatch.a2a.bwd"), "ep.a2a.bwd");
  EXPECT_EQ(item_of("L.moe.combine.a2a.bwd"), "ep.a2a.bwd");
  // The head: the output layer's copy all-reduces its input grad backward; the cross
  // entropy all-reduces forward only.
  const StageSchedule& st = b.sched.stages[0];
  std::set<std::string> head;
  for (const auto* l : {&st.post_fwd, &st.post_bwd})
    for (const Op& o : *l) head.insert(op_name(o, ""));
  EXPECT_TRUE(head.count("logits.tp.copy.bwd"));
  EXPECT_TRUE(head.count("loss.tp.allreduce.fwd"));
  EXPECT_FALSE(head.count("loss.tp.allreduce.bwd"));
}

// Every op of a schedule is typed: its full name reads back (parse_op_name) as the same
// id, pass and part, and each name is one of the table's. Covers MLA, MoE with shared
// experts, MTP, CP a2a, PP sends, FSDP step ops and FP8 casts.
void expect_names_parse_back(const Scenario& s) {
  SCOPED_TRACE(s.name);
  const Built b = build(s);
  int checked = 0;
  auto check = [&](const std::vector<Op>& ops, const char* prefix) {
    for (const Op& o : ops) {
      ASSERT_NE(o.id, OpId::kNone);
      const std::string name = op_name(o, prefix);
      const std::optional<OpName> n = parse_op_name(name);
      ASSERT_TRUE(n.has_value()) << name;
      EXPECT_EQ(n->id, o.id) << name;
      EXPECT_EQ(n->pass, o.pass) << name;
      EXPECT_EQ(n->part, o.part) << name;
      EXPECT_STREQ(n->prefix, prefix) << name;
      EXPECT_EQ(op_name(n->id, n->pass, n->part, n->prefix), name);
      ++checked;
    }
  };
  for (const LayerOps* l : {&b.sched.dense, &b.sched.moe})
    for (const auto* v : {&l->fwd, &l->recompute, &l->bwd}) check(*v, kLayerPrefix);
  for (const auto* v : {&b.sched.mtp.fwd, &b.sched.mtp.recompute, &b.sched.mtp.bwd}) check(*v, kMtpPrefix);
  for (const StageSchedule& st : b.sched.stages)
    for (const auto* v : {&st.pre_fwd, &st.post_fwd, &st.post_bwd, &st.pre_bwd, &st.step}) check(*v, "");
  EXPECT_GT(checked, 100);
}

TEST(ScheduleNames, EveryOpParsesBackToItsId) {
  Scenario s = base(deepseek_like(), 32);
  s.name = "mla moe mtp fsdp";
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = 2;
  s.parallel.cp_comm_type = CpCommType::kA2A;
  s.parallel.pipeline_model_parallel_size = 2;
  s.parallel.expert_model_parallel_size = 4;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlaUpProj | kRecomputeMoe;
  expect_names_parse_back(s);
  s.name = "mla moe mtp fp8";
  s.training.precision = Precision::kFp8;
  expect_names_parse_back(s);
}

}  // namespace
}  // namespace lcm
