// The typed op contract of the cost model: which operations a training step is made of
// (OpId), which Comm item a communication op counts in (CommItemId), the shape of each
// kind of op (GEMM, grouped GEMM, attention, memory-bound, collective) and the Op record
// the schedule, the time model, the predicted trace, calibration and the executor share.
//
// Names exist in exactly one place: the id <-> name tables below. An op's full stable
// name is prefix + base + pass suffix (op_name()); parse_op_name() reads it back, so
// measured points (lcm-exec, calibrate) and predicted ops meet by id, never by string.
// docs/op-schedule.md lists every op.
//
// Layers of model/ (lowest first). A header (and its .cpp) includes only model headers of
// its own layer or below, never io/; the
// check is tests/model/layering_check.sh (CTest `model_layering`).
//   0  specs.hpp    limits.hpp        input value structs and enums; caps on sizes
//   1  ops.hpp                        op ids, names, shapes, Op (this file)
//   1  mem_category.hpp               device-memory categories of a measured run
//   1  pipeline_layout.hpp            Megatron's custom pipeline layout text
//   1  pipeline_schedule.hpp          Megatron's pipeline schedules simulated pass by pass
//   2  mesh.hpp                       the derived mesh, validation, stage split, rank order
//   3  resolve.hpp  capacity.hpp      per-rank shapes and defaults; expert capacity
//   3  expert_load.hpp                expert loads of a routing distribution, busiest EP rank
//   4  params.hpp   flops.hpp         parameter and FLOP counts
//   5  comm.hpp     schedule.hpp      communication items; the op schedule (one generator)
//   5  memory.hpp   timing.hpp        memory per stage; time of one op, group topology
//   6  step_time.hpp calibration.hpp  step time from the schedule; fitting a profile
//   6  cache_key.hpp                  the cache keys of the incremental estimator's functions
//   7  estimate.hpp  incremental.hpp every breakdown of one layout; the planner's cached evaluation
//   7  uncertainty.hpp                error bands of a step time and the memory spread
//   8  routing.hpp  scaling.hpp       routing statistics and capacity sweeps; scaling table
//   io/ (loader, enums, Megatron import) sits on top and may include any of them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm {

// ---------------------------------------------------------------------------------
// Kinds, passes, streams, communication dimensions.
// ---------------------------------------------------------------------------------
enum class OpKind : uint8_t {
  kGemm,         // C[m x n] = A[m x k] · B[k x n]; `groups` > 1: grouped GEMM (experts)
  kAttention,    // fused attention core (QKᵀ, softmax, PV) forward or backward
  kMemoryBound,  // norms, activations, router top-k, permutation, optimizer: `bytes` moved
  kCollective,   // NCCL collective on a parallel group
  kSendRecv,     // pipeline point-to-point
};

enum class Pass : uint8_t { kFwd, kBwd, kRecompute, kStep };
// Backward GEMMs come in two: input gradient (dgrad) and weight gradient (wgrad).
enum class GemmPart : uint8_t { kNone, kDgrad, kWgrad };

// Where an op runs: compute, or the communication stream of one parallel dimension.
enum class Stream : uint8_t { kCompute, kTp, kCp, kEp, kDp, kPp };
inline constexpr int kNumStreams = 6;

enum class CommDim : uint8_t { kTp, kCp, kEp, kPp, kDp, kEdp, kEmb };
inline constexpr int kNumCommDims = 7;
enum class Collective : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};

constexpr const char* to_string(CommDim d) {
  switch (d) {
    case CommDim::kTp: return "tp";
    case CommDim::kCp: return "cp";
    case CommDim::kEp: return "ep";
    case CommDim::kPp: return "pp";
    case CommDim::kDp: return "dp";
    case CommDim::kEdp: return "edp";
    case CommDim::kEmb: return "emb";
  }
  return "?";
}
constexpr const char* to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSendRecv: return "send_recv";
  }
  return "?";
}

// ---------------------------------------------------------------------------------
// Op ids: one per op base of the schedule (schedule_gen.hpp emits them; the section
// comments follow docs/op-schedule.md §4), plus the ops only the executor times.
// ---------------------------------------------------------------------------------
enum class OpId : uint8_t {
  kNone,  // an op without a schedule identity (a calibration point, a synthetic test op)
  // Attention block (§4.1), FP8 casts of its GEMMs (§4.1a).
  kAttnNorm, kAttnSpAllGather, kAttnTpCopy, kAttnQkv, kAttnQDown, kAttnKvDown, kAttnQUp, kAttnQ,
  kAttnKvUp, kAttnQkNorm, kAttnRope, kAttnCpA2AQ, kAttnCpA2AK, kAttnCpA2AV, kAttnCpKvP2p, kAttnCpKAllGather,
  kAttnCpVAllGather, kAttnCore, kAttnCpMerge, kAttnCpA2AO, kAttnCpVRegather, kAttnCpKRegather, kAttnProj,
  kAttnSpReduceScatter, kAttnTpAllReduce, kAttnBda,
  kAttnQkvFp8Cast, kAttnProjFp8Cast, kAttnQFp8Cast, kAttnQDownFp8Cast, kAttnKvDownFp8Cast,
  kAttnQUpFp8Cast, kAttnKvUpFp8Cast,
  // Dense MLP (§4.2).
  kMlpNorm, kMlpSpAllGather, kMlpTpCopy, kMlpFc1, kMlpAct, kMlpFc2, kMlpSpReduceScatter,
  kMlpTpAllReduce, kMlpBda, kMlpFc1Fp8Cast, kMlpFc2Fp8Cast,
  // MoE block (§4.3). kMoeDispatchCounts: the executor's exchange of per-expert token
  // counts before the dispatch (the schedule has no such op; it is latency only).
  kMoeRouter, kMoeTopk, kMoePermute, kMoeDispatchCounts, kMoeDispatchA2A, kMoeDispatchEtpAllGather,
  kMoeDispatchAllGather, kMoeExpertsFc1, kMoeExpertsAct, kMoeExpertsFc2, kMoeCombineEtpReduceScatter,
  kMoeCombineReduceScatter, kMoeCombineA2A, kMoeUnpermute, kMoeSharedSpAllGather, kMoeSharedTpCopy,
  kMoeSharedFc1, kMoeSharedAct, kMoeSharedFc2, kMoeSharedSpReduceScatter, kMoeSharedTpAllReduce,
  kMoeExpertsFc1Fp8Cast, kMoeExpertsFc2Fp8Cast, kMoeSharedFc1Fp8Cast, kMoeSharedFc2Fp8Cast,
  // LoRA adapters (§4.1b): per target linear its input's SP all-gather (column-parallel) or the
  // low-rank all-reduce (row-parallel), A, B, and the scaled add into the base output.
  kAttnQkvLoraSpAllGather, kAttnQkvLoraA, kAttnQkvLoraB, kAttnQkvLoraAdd,
  kAttnProjLoraA, kAttnProjLoraTpAllReduce, kAttnProjLoraB, kAttnProjLoraAdd,
  kMlpFc1LoraSpAllGather, kMlpFc1LoraA, kMlpFc1LoraB, kMlpFc1LoraAdd,
  kMlpFc2LoraA, kMlpFc2LoraTpAllReduce, kMlpFc2LoraB, kMlpFc2LoraAdd,
  kMoeSharedFc1LoraSpAllGather, kMoeSharedFc1LoraA, kMoeSharedFc1LoraB, kMoeSharedFc1LoraAdd,
  kMoeSharedFc2LoraA, kMoeSharedFc2LoraTpAllReduce, kMoeSharedFc2LoraB, kMoeSharedFc2LoraAdd,
  kMoeExpertsFc1LoraA, kMoeExpertsFc1LoraB, kMoeExpertsFc1LoraAdd,
  kMoeExpertsFc2LoraA, kMoeExpertsFc2LoraB, kMoeExpertsFc2LoraAdd,
  // Embedding and head (first and last stage).
  kEmbed, kEmbedSpReduceScatter, kEmbedTpAllReduce, kFinalNorm, kLogitsSpAllGather, kLogitsTpCopy,
  kLogits, kLoss, kLossTpAllReduce,
  // MTP depth.
  kMtpEmbed, kMtpEmbedSpReduceScatter, kMtpEmbedTpAllReduce, kMtpEhProjSpAllGather, kMtpEhProjTpCopy,
  kMtpEhProj, kMtpEhProjSpReduceScatter, kMtpEhProjTpAllReduce, kMtpNorm, kMtpSpAllGather, kMtpTpCopy,
  kMtpLogits, kMtpLoss,
  // Pipeline send/recv.
  kPpRecv, kPpSend, kPpRecvGrad, kPpSendGrad,
  // Once per step.
  kDpGradsAllReduce, kDpGradsReduceScatter, kDpParamsAllGather, kDpParamsAllGatherBwd,
  kEdpGradsAllReduce, kEdpGradsReduceScatter, kEdpParamsAllGather, kEdpParamsAllGatherBwd,
  kTpGradsAllReduce, kEmbGradsAllReduce, kOptimizerStep,
  kCount
};
inline constexpr size_t kNumOpIds = static_cast<size_t>(OpId::kCount);

// The Comm item (CommItem, comm.hpp) a communication op's bytes count in.
// docs/communication-model.md §9 lists the items, docs/op-schedule.md the ops feeding each.
enum class CommItemId : uint8_t {
  kNone,  // a compute op, or communication Comm leaves out (pipeline receives, the loss all-reduce)
  kTpAllReduce, kTpAllReduceMla, kTpSpAllGather, kTpSpReduceScatter, kTpSpAllGatherMla,
  kTpSpReduceScatterMla, kTpEmbeddingAllReduce, kTpEmbeddingReduceScatter, kTpEmbeddingAllGather,
  kTpOutputAllReduce, kTpOutputAllGather, kTpOutputReduceScatter, kTpAllReduceGrads,
  kCpP2pKv, kCpAllGatherKv, kCpReduceScatterDkv, kCpA2A,
  kEpA2ADispatch, kEpA2ACombine, kEpA2ABwd, kEtpAllGatherDispatch, kEtpReduceScatterCombine,
  kEpAllGatherDispatch, kEpReduceScatterCombine,
  kPpSendRecv,
  kDpAllReduceGrads, kDpReduceScatterGrads, kDpAllGatherParams,
  kEdpAllReduceGrads, kEdpReduceScatterGrads, kEdpAllGatherParams,
  kEmbAllReduceGrads,
  kCount
};
inline constexpr size_t kNumCommItemIds = static_cast<size_t>(CommItemId::kCount);

// ---------------------------------------------------------------------------------
// The name tables: the only place op bases and item names are spelled.
// ---------------------------------------------------------------------------------
template <class Id>
struct IdName {
  Id id;
  const char* name;
};

inline constexpr std::array<IdName<OpId>, kNumOpIds> kOpNames{{
    {OpId::kNone, ""},
    {OpId::kAttnNorm, "attn.norm"},
    {OpId::kAttnSpAllGather, "attn.sp.allgather"},
    {OpId::kAttnTpCopy, "attn.tp.copy"},
    {OpId::kAttnQkv, "attn.qkv"},
    {OpId::kAttnQDown, "attn.q_down"},
    {OpId::kAttnKvDown, "attn.kv_down"},
    {OpId::kAttnQUp, "attn.q_up"},
    {OpId::kAttnQ, "attn.q"},
    {OpId::kAttnKvUp, "attn.kv_up"},
    {OpId::kAttnQkNorm, "attn.qk_norm"},
    {OpId::kAttnRope, "attn.rope"},
    {OpId::kAttnCpA2AQ, "attn.cp.a2a.q"},
    {OpId::kAttnCpA2AK, "attn.cp.a2a.k"},
    {OpId::kAttnCpA2AV, "attn.cp.a2a.v"},
    {OpId::kAttnCpKvP2p, "attn.cp.kv.p2p"},
    {OpId::kAttnCpKAllGather, "attn.cp.k.allgather"},
    {OpId::kAttnCpVAllGather, "attn.cp.v.allgather"},
    {OpId::kAttnCore, "attn.core"},
    {OpId::kAttnCpMerge, "attn.cp.merge"},
    {OpId::kAttnCpA2AO, "attn.cp.a2a.o"},
    {OpId::kAttnCpVRegather, "attn.cp.v.regather"},
    {OpId::kAttnCpKRegather, "attn.cp.k.regather"},
    {OpId::kAttnProj, "attn.proj"},
    {OpId::kAttnSpReduceScatter, "attn.sp.reducescatter"},
    {OpId::kAttnTpAllReduce, "attn.tp.allreduce"},
    {OpId::kAttnBda, "attn.bda"},
    {OpId::kAttnQkvFp8Cast, "attn.qkv.fp8cast"},
    {OpId::kAttnProjFp8Cast, "attn.proj.fp8cast"},
    {OpId::kAttnQFp8Cast, "attn.q.fp8cast"},
    {OpId::kAttnQDownFp8Cast, "attn.q_down.fp8cast"},
    {OpId::kAttnKvDownFp8Cast, "attn.kv_down.fp8cast"},
    {OpId::kAttnQUpFp8Cast, "attn.q_up.fp8cast"},
    {OpId::kAttnKvUpFp8Cast, "attn.kv_up.fp8cast"},
    {OpId::kMlpNorm, "mlp.norm"},
    {OpId::kMlpSpAllGather, "mlp.sp.allgather"},
    {OpId::kMlpTpCopy, "mlp.tp.copy"},
    {OpId::kMlpFc1, "mlp.fc1"},
    {OpId::kMlpAct, "mlp.act"},
    {OpId::kMlpFc2, "mlp.fc2"},
    {OpId::kMlpSpReduceScatter, "mlp.sp.reducescatter"},
    {OpId::kMlpTpAllReduce, "mlp.tp.allreduce"},
    {OpId::kMlpBda, "mlp.bda"},
    {OpId::kMlpFc1Fp8Cast, "mlp.fc1.fp8cast"},
    {OpId::kMlpFc2Fp8Cast, "mlp.fc2.fp8cast"},
    {OpId::kMoeRouter, "moe.router"},
    {OpId::kMoeTopk, "moe.topk"},
    {OpId::kMoePermute, "moe.permute"},
    {OpId::kMoeDispatchCounts, "moe.dispatch.counts"},
    {OpId::kMoeDispatchA2A, "moe.dispatch.a2a"},
    {OpId::kMoeDispatchEtpAllGather, "moe.dispatch.etp.allgather"},
    {OpId::kMoeDispatchAllGather, "moe.dispatch.allgather"},
    {OpId::kMoeExpertsFc1, "moe.experts.fc1"},
    {OpId::kMoeExpertsAct, "moe.experts.act"},
    {OpId::kMoeExpertsFc2, "moe.experts.fc2"},
    {OpId::kMoeCombineEtpReduceScatter, "moe.combine.etp.reducescatter"},
    {OpId::kMoeCombineReduceScatter, "moe.combine.reducescatter"},
    {OpId::kMoeCombineA2A, "moe.combine.a2a"},
    {OpId::kMoeUnpermute, "moe.unpermute"},
    {OpId::kMoeSharedSpAllGather, "moe.shared.sp.allgather"},
    {OpId::kMoeSharedTpCopy, "moe.shared.tp.copy"},
    {OpId::kMoeSharedFc1, "moe.shared.fc1"},
    {OpId::kMoeSharedAct, "moe.shared.act"},
    {OpId::kMoeSharedFc2, "moe.shared.fc2"},
    {OpId::kMoeSharedSpReduceScatter, "moe.shared.sp.reducescatter"},
    {OpId::kMoeSharedTpAllReduce, "moe.shared.tp.allreduce"},
    {OpId::kMoeExpertsFc1Fp8Cast, "moe.experts.fc1.fp8cast"},
    {OpId::kMoeExpertsFc2Fp8Cast, "moe.experts.fc2.fp8cast"},
    {OpId::kMoeSharedFc1Fp8Cast, "moe.shared.fc1.fp8cast"},
    {OpId::kMoeSharedFc2Fp8Cast, "moe.shared.fc2.fp8cast"},
    {OpId::kAttnQkvLoraSpAllGather, "attn.qkv.lora.sp.allgather"},
    {OpId::kAttnQkvLoraA, "attn.qkv.lora_a"},
    {OpId::kAttnQkvLoraB, "attn.qkv.lora_b"},
    {OpId::kAttnQkvLoraAdd, "attn.qkv.lora_add"},
    {OpId::kAttnProjLoraA, "attn.proj.lora_a"},
    {OpId::kAttnProjLoraTpAllReduce, "attn.proj.lora.tp.allreduce"},
    {OpId::kAttnProjLoraB, "attn.proj.lora_b"},
    {OpId::kAttnProjLoraAdd, "attn.proj.lora_add"},
    {OpId::kMlpFc1LoraSpAllGather, "mlp.fc1.lora.sp.allgather"},
    {OpId::kMlpFc1LoraA, "mlp.fc1.lora_a"},
    {OpId::kMlpFc1LoraB, "mlp.fc1.lora_b"},
    {OpId::kMlpFc1LoraAdd, "mlp.fc1.lora_add"},
    {OpId::kMlpFc2LoraA, "mlp.fc2.lora_a"},
    {OpId::kMlpFc2LoraTpAllReduce, "mlp.fc2.lora.tp.allreduce"},
    {OpId::kMlpFc2LoraB, "mlp.fc2.lora_b"},
    {OpId::kMlpFc2LoraAdd, "mlp.fc2.lora_add"},
    {OpId::kMoeSharedFc1LoraSpAllGather, "moe.shared.fc1.lora.sp.allgather"},
    {OpId::kMoeSharedFc1LoraA, "moe.shared.fc1.lora_a"},
    {OpId::kMoeSharedFc1LoraB, "moe.shared.fc1.lora_b"},
    {OpId::kMoeSharedFc1LoraAdd, "moe.shared.fc1.lora_add"},
    {OpId::kMoeSharedFc2LoraA, "moe.shared.fc2.lora_a"},
    {OpId::kMoeSharedFc2LoraTpAllReduce, "moe.shared.fc2.lora.tp.allreduce"},
    {OpId::kMoeSharedFc2LoraB, "moe.shared.fc2.lora_b"},
    {OpId::kMoeSharedFc2LoraAdd, "moe.shared.fc2.lora_add"},
    {OpId::kMoeExpertsFc1LoraA, "moe.experts.fc1.lora_a"},
    {OpId::kMoeExpertsFc1LoraB, "moe.experts.fc1.lora_b"},
    {OpId::kMoeExpertsFc1LoraAdd, "moe.experts.fc1.lora_add"},
    {OpId::kMoeExpertsFc2LoraA, "moe.experts.fc2.lora_a"},
    {OpId::kMoeExpertsFc2LoraB, "moe.experts.fc2.lora_b"},
    {OpId::kMoeExpertsFc2LoraAdd, "moe.experts.fc2.lora_add"},
    {OpId::kEmbed, "embed"},
    {OpId::kEmbedSpReduceScatter, "embed.sp.reducescatter"},
    {OpId::kEmbedTpAllReduce, "embed.tp.allreduce"},
    {OpId::kFinalNorm, "final.norm"},
    {OpId::kLogitsSpAllGather, "logits.sp.allgather"},
    {OpId::kLogitsTpCopy, "logits.tp.copy"},
    {OpId::kLogits, "logits"},
    {OpId::kLoss, "loss"},
    {OpId::kLossTpAllReduce, "loss.tp.allreduce"},
    {OpId::kMtpEmbed, "mtp.embed"},
    {OpId::kMtpEmbedSpReduceScatter, "mtp.embed.sp.reducescatter"},
    {OpId::kMtpEmbedTpAllReduce, "mtp.embed.tp.allreduce"},
    {OpId::kMtpEhProjSpAllGather, "mtp.eh_proj.sp.allgather"},
    {OpId::kMtpEhProjTpCopy, "mtp.eh_proj.tp.copy"},
    {OpId::kMtpEhProj, "mtp.eh_proj"},
    {OpId::kMtpEhProjSpReduceScatter, "mtp.eh_proj.sp.reducescatter"},
    {OpId::kMtpEhProjTpAllReduce, "mtp.eh_proj.tp.allreduce"},
    {OpId::kMtpNorm, "mtp.norm"},
    {OpId::kMtpSpAllGather, "mtp.sp.allgather"},
    {OpId::kMtpTpCopy, "mtp.tp.copy"},
    {OpId::kMtpLogits, "mtp.logits"},
    {OpId::kMtpLoss, "mtp.loss"},
    {OpId::kPpRecv, "pp.recv"},
    {OpId::kPpSend, "pp.send"},
    {OpId::kPpRecvGrad, "pp.recv.grad"},
    {OpId::kPpSendGrad, "pp.send.grad"},
    {OpId::kDpGradsAllReduce, "dp.grads.allreduce"},
    {OpId::kDpGradsReduceScatter, "dp.grads.reducescatter"},
    {OpId::kDpParamsAllGather, "dp.params.allgather"},
    {OpId::kDpParamsAllGatherBwd, "dp.params.allgather.bwd"},
    {OpId::kEdpGradsAllReduce, "edp.grads.allreduce"},
    {OpId::kEdpGradsReduceScatter, "edp.grads.reducescatter"},
    {OpId::kEdpParamsAllGather, "edp.params.allgather"},
    {OpId::kEdpParamsAllGatherBwd, "edp.params.allgather.bwd"},
    {OpId::kTpGradsAllReduce, "tp.grads.allreduce"},
    {OpId::kEmbGradsAllReduce, "emb.grads.allreduce"},
    {OpId::kOptimizerStep, "optimizer.step"},
}};

inline constexpr std::array<IdName<CommItemId>, kNumCommItemIds> kCommItemNames{{
    {CommItemId::kNone, ""},
    {CommItemId::kTpAllReduce, "tp.allreduce"},
    {CommItemId::kTpAllReduceMla, "tp.allreduce.mla"},
    {CommItemId::kTpSpAllGather, "tp.sp.allgather"},
    {CommItemId::kTpSpReduceScatter, "tp.sp.reducescatter"},
    {CommItemId::kTpSpAllGatherMla, "tp.sp.allgather.mla"},
    {CommItemId::kTpSpReduceScatterMla, "tp.sp.reducescatter.mla"},
    {CommItemId::kTpEmbeddingAllReduce, "tp.embedding.allreduce"},
    {CommItemId::kTpEmbeddingReduceScatter, "tp.embedding.reducescatter"},
    {CommItemId::kTpEmbeddingAllGather, "tp.embedding.allgather"},
    {CommItemId::kTpOutputAllReduce, "tp.output.allreduce"},
    {CommItemId::kTpOutputAllGather, "tp.output.allgather"},
    {CommItemId::kTpOutputReduceScatter, "tp.output.reducescatter"},
    {CommItemId::kTpAllReduceGrads, "tp.allreduce.grads"},
    {CommItemId::kCpP2pKv, "cp.p2p.kv"},
    {CommItemId::kCpAllGatherKv, "cp.allgather.kv"},
    {CommItemId::kCpReduceScatterDkv, "cp.reducescatter.dkv"},
    {CommItemId::kCpA2A, "cp.a2a"},
    {CommItemId::kEpA2ADispatch, "ep.a2a.dispatch"},
    {CommItemId::kEpA2ACombine, "ep.a2a.combine"},
    {CommItemId::kEpA2ABwd, "ep.a2a.bwd"},
    {CommItemId::kEtpAllGatherDispatch, "etp.allgather.dispatch"},
    {CommItemId::kEtpReduceScatterCombine, "etp.reducescatter.combine"},
    {CommItemId::kEpAllGatherDispatch, "ep.allgather.dispatch"},
    {CommItemId::kEpReduceScatterCombine, "ep.reducescatter.combine"},
    {CommItemId::kPpSendRecv, "pp.sendrecv"},
    {CommItemId::kDpAllReduceGrads, "dp.allreduce.grads"},
    {CommItemId::kDpReduceScatterGrads, "dp.reducescatter.grads"},
    {CommItemId::kDpAllGatherParams, "dp.allgather.params"},
    {CommItemId::kEdpAllReduceGrads, "edp.allreduce.grads"},
    {CommItemId::kEdpReduceScatterGrads, "edp.reducescatter.grads"},
    {CommItemId::kEdpAllGatherParams, "edp.allgather.params"},
    {CommItemId::kEmbAllReduceGrads, "emb.allreduce.grads"},
}};

namespace detail {
// Entry i of a table names id i (so lookups by id are an index).
template <class Table>
constexpr bool ids_in_order(const Table& t) {
  for (size_t i = 0; i < t.size(); ++i)
    if (static_cast<size_t>(t[i].id) != i) return false;
  return true;
}
template <class Id, size_t N>
constexpr std::optional<Id> id_named(const std::array<IdName<Id>, N>& t, std::string_view name) {
  for (const auto& e : t)
    if (name == e.name) return e.id;
  return std::nullopt;
}
}  // namespace detail
static_assert(detail::ids_in_order(kOpNames), "kOpNames must list OpId in declaration order");
static_assert(detail::ids_in_order(kCommItemNames), "kCommItemNames must list CommItemId in declaration order");

// Base name of an op ("attn.qkv"; "" for kNone) and of a Comm item ("tp.sp.allgather").
constexpr const char* to_string(OpId id) { return kOpNames[static_cast<size_t>(id)].name; }
constexpr const char* to_string(CommItemId id) { return kCommItemNames[static_cast<size_t>(id)].name; }
// The id of a base or item name; nullopt for a name the tables do not hold (and for "").
constexpr std::optional<OpId> op_id_named(std::string_view base) {
  if (base.empty()) return std::nullopt;
  return detail::id_named(kOpNames, base);
}
constexpr std::optional<CommItemId> comm_item_named(std::string_view name) {
  if (name.empty()) return std::nullopt;
  return detail::id_named(kCommItemNames, name);
}

// ---------------------------------------------------------------------------------
// Shapes.
// ---------------------------------------------------------------------------------
// How a grouped GEMM's tokens fall on its experts: the experts sorted by load (largest
// first) and cut into kExpertLoadBuckets buckets of equal expert count (bucket b holds sorted
// experts [b*G/B, (b+1)*G/B)); share[b] is the fraction of the group's tokens its experts
// receive. All zero: an even split (balanced routing). Compact so that Op stays small and
// equal shapes (cache keys) stay equal results.
inline constexpr int kExpertLoadBuckets = 16;
struct ExpertLoadShares {
  std::array<float, kExpertLoadBuckets> share{};
  bool even() const {
    for (float s : share)
      if (s != 0.0f) return false;
    return true;
  }
  bool operator==(const ExpertLoadShares&) const = default;
};
// The buckets of per-expert loads (token counts, or any non-negative weights; size = the
// GEMM's groups). A zero or empty total gives an even split.
ExpertLoadShares expert_load_shares(const std::vector<double>& loads);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int groups = 1;  // grouped GEMM: `groups` GEMMs splitting m (or k, split_k) by `loads`
  // The groups split k instead of m: the weight gradient of a grouped GEMM, where each
  // expert's dW = A_e^T dC_e reduces over that expert's tokens (groups GEMMs of m x n x k/groups).
  bool split_k = false;
  ExpertLoadShares loads{};  // per-expert token shares; even by default (m / groups each)
  // Bytes each element of C moves: 2, a bf16 result written; above 2, an accumulating GEMM
  // (beta 1) that reads and writes C in equal parts (timing.cpp adds that traffic after the
  // roofline of the k loop: the epilogue loads and stores C after it). grad_c_bytes is what the C of
  // this GEMM's weight gradient moves (wgrad_shape gives it to that GEMM): a gradient
  // accumulated into the main grads reads and writes them (Megatron's gradient-accumulation
  // fusion: the wgrad GEMM runs with beta 1 into main_grad), 2 x 4 B with fp32 main grads.
  double c_bytes = 2.0;
  double grad_c_bytes = 2.0;
  // What the C of this GEMM's input gradient moves (dgrad_shape gives it to that GEMM): 4 when
  // the input gradient is added to a gradient already there (the router's: the tokens' dX
  // also gets the experts' path; lcm-exec runs that GEMM with beta 1, autograd adds it).
  double dgrad_c_bytes = 2.0;
  bool operator==(const GemmShape&) const = default;
};

// The backward GEMMs of a forward C[m x n] = A[m x k] B[k x n]: the input gradient
// dA[m x k] = dC[m x n] B^T and the weight gradient dB[k x n] = A^T dC (same groups and loads).
inline GemmShape dgrad_shape(const GemmShape& g) {
  return GemmShape{g.m, g.k, g.n, g.groups, false, g.loads, g.dgrad_c_bytes};
}
inline GemmShape wgrad_shape(const GemmShape& g) {
  return GemmShape{g.k, g.n, g.m, g.groups, g.groups > 1, g.loads, g.grad_c_bytes, g.grad_c_bytes};
}
// The GEMM of a forward shape in a pass / part: forward and recompute as is, backward dgrad
// or wgrad.
inline GemmShape gemm_in_pass(const GemmShape& fwd, GemmPart part) {
  return part == GemmPart::kDgrad ? dgrad_shape(fwd) : part == GemmPart::kWgrad ? wgrad_shape(fwd) : fwd;
}

// The forward GEMMs of an MoE layer on one rank (moe/experts.py, router.py), from the
// tokens they see: the router h -> E over `tokens`, the experts' fc1 h -> f (2f gated) and
// fc2 f -> h over `expert_rows` token copies in `local_experts` groups. `ffn` is the
// expert width on this rank (after ETP; whole columns are kept). The schedule and
// calibration take the shapes from here.
inline GemmShape moe_router_shape(int64_t tokens, int64_t hidden, int64_t experts) {
  GemmShape g{tokens, experts, hidden, 1};
  g.dgrad_c_bytes = 4.0;  // its input gradient adds into the tokens' dX (C read and written)
  return g;
}
inline GemmShape moe_fc1_shape(int64_t expert_rows, int64_t hidden, double ffn, bool gated, int local_experts) {
  return GemmShape{expert_rows, static_cast<int64_t>((gated ? 2.0 : 1.0) * ffn), hidden, local_experts};
}
inline GemmShape moe_fc2_shape(int64_t expert_rows, int64_t hidden, double ffn, int local_experts) {
  return GemmShape{expert_rows, hidden, static_cast<int64_t>(ffn), local_experts};
}

struct AttentionShape {
  int64_t batch = 0;
  int64_t seq_q = 0;       // query tokens on this rank
  int64_t seq_kv = 0;      // key/value tokens attended to (whole sequence under CP)
  int64_t heads_q = 0;     // on this rank (after TP)
  int64_t heads_kv = 0;
  int64_t head_dim_qk = 0;
  int64_t head_dim_v = 0;
  bool causal = true;
  double work_fraction = 1.0;  // fraction of the seq_q x seq_kv score matrix computed
  // Sliding-window attention (ModelSpec::window_size): in `windowed_share` of the layers this
  // op stands for, each query attends the `window` keys before it (and itself) instead of
  // work_fraction of the matrix; the other layers attend in full. One op prices the mix: its
  // FLOPs and time are the two views' weighted by the share (attention_windowed_view). 0 = none.
  int64_t window = 0;
  double windowed_share = 0;
  // Keys of one KV head that one kernel of this op streams: the CP ring (p2p, and a2a+p2p's
  // ring) runs one kernel per step on the KV block it holds then, seq_kv / ring size keys
  // (TE context_parallel.py); the L2 working set of the forward (timing.cpp). 0 = seq_kv.
  int64_t kv_block = 0;
  // attention_dropout > 0: the kernel masks its probabilities with random numbers it draws
  // (EfficiencySpec::attention_dropout_fwd_rate / _bwd_rate).
  bool dropout = false;
  // training.attention_backend unfused: not one fused kernel but the sequence of kernels that
  // materialises the seq_q x seq_kv scores (unfused_attention_traffic below; timing.cpp).
  bool unfused = false;
  // training.attention_backend flash2: FlashAttention-2's kernel (EfficiencySpec::attention_flash2_*).
  bool flash2 = false;
  bool operator==(const AttentionShape&) const = default;
};

// Unfused attention (training.attention_backend unfused): Megatron-Core's DotProductAttention
// (megatron/core/transformer/dot_product_attention.py) and Transformer Engine's
// UnfusedDotProductAttention compute the whole seq_q x seq_kv score matrix of every head in
// batched GEMMs and run the softmax over it in memory-bound kernels (a causal mask only masks):
//   forward:  [GQA: K, V repeated to every query head] S = Q K^T (baddbmm) -> scale-mask-softmax
//             -> [dropout] -> O = P V (bmm) -> O permuted to [s, b, h d] (a copy)
//   backward: dO permuted; dP = dO V^T, dV = P^T dO; [dropout]; softmax backward; dQ = dS K,
//             dK = dS^T Q; [GQA: dK, dV summed over the repeated heads]
// Megatron's FusedScaleMaskSoftmax runs one kernel for 16 < seq_kv <= kFusedSoftmaxMaxKeys (bf16
// scores in, bf16 probabilities out; the backward reads the probabilities and their gradient
// and writes the scores' gradient). Above it the torch fallback runs in fp32 (fused_softmax.py
// forward_torch_softmax, attention_softmax_in_fp32 = True): .float(), masked_fill_, softmax,
// .bfloat16(), and their four backward kernels. Bytes per score element:
//   fused kernel   forward 2 + 2 = 4                         backward 2 + 2 + 2 = 6
//   torch fp32     forward (2+4) + (4+1+4) + (4+4) + (4+2) = 29   backward (2+4) + (4+4+4) + (4+1+4) + (4+2) = 33
//   dropout        forward 2 + 2 + 1 (its bool mask) = 5       backward 2 + 1 + 2 = 5
// The memory model saves what these kernels keep (memory.cpp). Transformer Engine's own softmax
// kernel reaches seq_kv 16384; lcm has no knob for the implementation and takes Megatron's limit.
inline constexpr int64_t kFusedSoftmaxMaxKeys = 4096;
struct UnfusedAttentionTraffic {
  double score_bytes = 0;  // memory-bound bytes per score element (softmax, dropout)
  double other_bytes = 0;  // the output permute copy and GQA's K/V repeat (or its gradient's sum)
  int gemms = 0;           // batched GEMM kernels
  int elementwise = 0;     // memory-bound kernels
};
inline UnfusedAttentionTraffic unfused_attention_traffic(const AttentionShape& a, bool backward) {
  UnfusedAttentionTraffic t;
  const bool fused_softmax = a.seq_kv <= kFusedSoftmaxMaxKeys;
  t.score_bytes = fused_softmax ? (backward ? 6.0 : 4.0) : (backward ? 33.0 : 29.0);
  t.elementwise = fused_softmax ? 1 : 4;
  if (a.dropout) {
    t.score_bytes += 5.0;
    t.elementwise += 1;
  }
  t.gemms = backward ? 4 : 2;
  const double b = static_cast<double>(a.batch);
  // O (or dO) read and written once by the permute copy.
  t.other_bytes = 2.0 * 2.0 * b * static_cast<double>(a.heads_q * a.seq_q * a.head_dim_v);
  t.elementwise += 1;
  if (a.heads_q > a.heads_kv && a.heads_kv > 0) {
    // repeat_interleave of K and V (forward: read heads_kv, write heads_q heads; backward: the
    // gradient's sum, read heads_q, write heads_kv).
    const double heads = static_cast<double>(a.heads_q + a.heads_kv);
    t.other_bytes += 2.0 * b * static_cast<double>(a.seq_kv) * heads * static_cast<double>(a.head_dim_qk + a.head_dim_v);
    t.elementwise += 2;
  }
  return t;
}

// One rank's attention sequence under the p2p CP ring of `ring` ranks over `seq` tokens
// (Transformer Engine's load-balanced chunks: the sequence cut in 2·ring, rank r holding chunks r
// and 2·ring-1-r): seq / ring causal queries over all seq keys, half that matrix, and the KV
// block one ring step's kernel holds, seq / ring keys (none without a ring). The schedule's op
// and lcm calibrate's reading of `bench cp-attention` both take it from here.
inline void set_cp_ring_sequence(AttentionShape& a, int64_t seq, int64_t ring) {
  a.seq_q = seq / ring;
  a.seq_kv = seq;
  a.causal = true;
  a.work_fraction = 0.5;
  a.kv_block = ring > 1 ? seq / ring : 0;
}

// A memory-bound op: bytes read plus bytes written.
struct MemoryShape {
  double bytes = 0;
  // Parameter tensors the op walks one by one on the host (the optimizer step: the tensors of
  // the rank's optimizer shard); 0 for the others.
  double tensors = 0;
  // A plain copy (cudaMemcpy, a copy kernel: lcm-exec's `bench membw`) streams at
  // efficiency.hbm; the step's memory-bound kernels (false) at efficiency.hbm_elementwise.
  bool copy = false;
  bool operator==(const MemoryShape&) const = default;
};

// The group of a collective within its dimension: the dimension's own group, or, on dim
// ep, the expert-TP group (ETP all-gather / reduce-scatter of the alltoall dispatcher) or
// the expert TPxEP group (allgather and flex dispatchers; the EP group when etp = 1).
enum class CommGroup : uint8_t { kDim, kExpertTp, kExpertTpEp };

// DeepEP / HybridEP (the flex dispatcher): a token crosses the NIC once per destination node
// and is forwarded over NVLink inside it (docs/communication-model.md, "Node
// de-duplication"). dest_ranks == 0: a plain all-to-all.
struct NodeDedup {
  double dest_ranks = 0;  // expected destination ranks of the group per token (S = tokens x this x bytes)
  int experts = 0, topk = 0;
  int groups = 0, group_topk = 0;  // group-limited routing (moe_router_num_groups / _group_topk); 0: none
  bool operator==(const NodeDedup&) const = default;
};

struct CollectiveShape {
  Collective kind = Collective::kAllReduce;
  CommDim dim = CommDim::kTp;
  int group_size = 1;
  double message_bytes = 0;  // nccl-tests size S of one call
  CommGroup group = CommGroup::kDim;
  NodeDedup dedup{};  // all-to-all of the flex dispatcher only
  bool operator==(const CollectiveShape&) const = default;
};

// ---------------------------------------------------------------------------------
// One op of the schedule.
// ---------------------------------------------------------------------------------
struct Op {
  OpId id = OpId::kNone;  // its base name: to_string(id), e.g. "attn.qkv"; see op_name()
  OpKind kind = OpKind::kGemm;
  Pass pass = Pass::kFwd;
  GemmPart part = GemmPart::kNone;
  Stream stream = Stream::kCompute;
  DType dtype = DType::kBf16;
  GemmShape gemm;
  AttentionShape attn;
  CollectiveShape coll;
  MemoryShape mem;         // memory-bound ops
  double flops = 0;        // executed FLOPs (attention backward includes its recomputation of P)
  double model_flops = 0;  // FLOPs counted by the model-FLOP convention (0 for recompute)
  int calls = 1;              // back-to-back repetitions inside one micro-batch (CP ring steps,
                              // pipeline sends of the stage's vp chunks); step ops: per step
                              // (Megatron-FSDP reduce-scatters every micro-batch: calls = m)
  bool overlappable = false;  // communication that can run under compute of the same pass
  // Communication ops: the estimate_comm item this op's bytes are counted in. kNone for
  // compute ops and for the communication Comm leaves out: pipeline receives (the
  // neighbour's send) and the vocab-parallel cross-entropy all-reduce
  // (docs/communication-model.md §8). An op's backward counterpart may count in another
  // item (an SP all-gather's backward is a reduce-scatter).
  CommItemId item = CommItemId::kNone;
  // Device-to-host synchronisations per call (docs/time-model.md, "Host-bound regime"): the
  // token dispatcher's per-expert counts in the forward (and recompute), the pipeline receive
  // without interleaving (batch_p2p_sync).
  int host_syncs = 0;
  // GEMMs of a frozen weight (LoRA's base model): the backward runs dgrad only.
  bool frozen_weight = false;
  bool operator==(const Op&) const = default;
};

inline bool is_comm(const Op& o) { return o.kind == OpKind::kCollective || o.kind == OpKind::kSendRecv; }

// Kernels the host enqueues for one op (all its calls): one per call, a grouped GEMM one per
// group (Transformer Engine's GroupedLinear runs one cuBLAS GEMM per expert).
// Unfused attention enqueues its GEMMs and memory-bound kernels (unfused_attention_traffic).
inline int host_kernels(const Op& o) {
  if (o.kind == OpKind::kAttention && o.attn.unfused) {
    const UnfusedAttentionTraffic t = unfused_attention_traffic(o.attn, o.pass == Pass::kBwd);
    return std::max(1, o.calls) * (t.gemms + t.elementwise);
  }
  return std::max(1, o.calls) * (o.kind == OpKind::kGemm ? std::max(1, o.gemm.groups) : 1);
}

// Name prefixes: per-layer ops of transformer layers ("L.attn.qkv.fwd") and of MTP depths
// ("MTP.mtp.eh_proj.fwd"); stage-edge and step ops have none.
inline constexpr const char* kLayerPrefix = "L.";
inline constexpr const char* kMtpPrefix = "MTP.";

// Full stable name: prefix + base + suffix (".fwd", ".recompute", ".bwd", ".bwd.dgrad",
// ".bwd.wgrad"; step ops have none), e.g. op_name(op, "L.") == "L.attn.qkv.bwd.wgrad".
std::string op_name(const Op& op, const char* prefix);
std::string op_name(OpId id, Pass pass, GemmPart part, const char* prefix);

// A full name read back: op_name(parsed.id, parsed.pass, parsed.part, parsed.prefix) is
// the name. nullopt when the base is not in the table or the suffix is not one of those.
struct OpName {
  const char* prefix = "";  // "", kLayerPrefix or kMtpPrefix
  OpId id = OpId::kNone;
  Pass pass = Pass::kFwd;
  GemmPart part = GemmPart::kNone;
};
std::optional<OpName> parse_op_name(std::string_view name);

}  // namespace lcm
