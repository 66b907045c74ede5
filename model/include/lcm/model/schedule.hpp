// The per-op schedule of one training step: the contract between prediction and
// measurement. For each rank class (pipeline stage) it lists, in execution order, the
// operations of one micro-batch — GEMMs with their shapes, attention cores, memory-bound
// ops with their bytes, collectives with group, kind and bytes, pipeline send/recv — for
// forward, backward and recompute, plus the once-per-step ops (gradient reduction,
// parameter gather, optimizer). Identical layers share one op list with a repeat count.
//
// Op names are stable strings: prefix + base + pass suffix, built by op_name(). Per-layer
// ops carry the prefix "L." ("L.attn.qkv.fwd", "L.moe.dispatch.a2a.fwd",
// "L.mlp.fc1.bwd.wgrad"), MTP blocks "MTP."; the executor and predicted traces use
// exactly these names, so predicted and measured times line up by name. The backward of a
// forward op keeps its name (".bwd"): "L.attn.sp.allgather.bwd" is that all-gather's
// conjugate reduce-scatter. docs/op-schedule.md lists them all.
//
// The schedule is the one home of communication volumes: every collective and send/recv
// carries its group, kind, message size, calls and the Comm item it counts in, and
// estimate_comm (comm.hpp) is their sum over the busiest stage, from the same generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

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

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int groups = 1;  // grouped GEMM: `groups` GEMMs of m/groups x n x k (balanced)
  // The groups split k instead of m: the weight gradient of a grouped GEMM, where each
  // expert's dW = A_e^T dC_e reduces over that expert's tokens (groups GEMMs of m x n x k/groups).
  bool split_k = false;
  bool operator==(const GemmShape&) const = default;
};

// The backward GEMMs of a forward C[m x n] = A[m x k] B[k x n]: the input gradient
// dA[m x k] = dC[m x n] B^T and the weight gradient dB[k x n] = A^T dC (same groups).
inline GemmShape dgrad_shape(const GemmShape& g) { return GemmShape{g.m, g.k, g.n, g.groups, false}; }
inline GemmShape wgrad_shape(const GemmShape& g) { return GemmShape{g.k, g.n, g.m, g.groups, g.groups > 1}; }

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
  bool operator==(const AttentionShape&) const = default;
};

// The group of a collective within its dimension: the dimension's own group, or, on dim
// ep, the expert-TP group (ETP all-gather / reduce-scatter of the alltoall dispatcher) or
// the expert TPxEP group (allgather and flex dispatchers; the EP group when etp = 1).
enum class CommGroup : uint8_t { kDim, kExpertTp, kExpertTpEp };

struct CollectiveShape {
  Collective kind = Collective::kAllReduce;
  CommDim dim = CommDim::kTp;
  int group_size = 1;
  double message_bytes = 0;  // nccl-tests size S of one call
  CommGroup group = CommGroup::kDim;
  bool operator==(const CollectiveShape&) const = default;
};

struct Op {
  const char* base = "";  // e.g. "attn.qkv"; see op_name()
  OpKind kind = OpKind::kGemm;
  Pass pass = Pass::kFwd;
  GemmPart part = GemmPart::kNone;
  Stream stream = Stream::kCompute;
  DType dtype = DType::kBf16;
  GemmShape gemm;
  AttentionShape attn;
  CollectiveShape coll;
  double bytes = 0;     // memory-bound ops: bytes read + written
  double flops = 0;     // executed FLOPs (attention backward includes its recomputation of P)
  double model_flops = 0;  // FLOPs counted by the model-FLOP convention (0 for recompute)
  int calls = 1;              // back-to-back repetitions inside one micro-batch (CP ring steps,
                              // pipeline sends of the stage's vp chunks); step ops: per step
                              // (Megatron-FSDP reduce-scatters every micro-batch: calls = m)
  bool overlappable = false;  // communication that can run under compute of the same pass
  // Communication ops: the estimate_comm item (comm.hpp, comm_item::*) this op's bytes are
  // counted in. nullptr for compute ops and for the communication Comm leaves out:
  // pipeline receives (the neighbour's send) and the vocab-parallel cross-entropy
  // all-reduce (docs/communication-model.md §8). An op's backward counterpart may count in
  // another item (an SP all-gather's backward is a reduce-scatter).
  const char* item = nullptr;
  bool operator==(const Op&) const = default;
};

// Full stable name: prefix + base + suffix (".fwd", ".recompute", ".bwd", ".bwd.dgrad",
// ".bwd.wgrad"; step ops have none), e.g. op_name(op, "L.") == "L.attn.qkv.bwd.wgrad".
std::string op_name(const Op& op, const char* prefix);

// The ops of one kind of transformer layer for one micro-batch. Every layer of a kind has
// the same shapes, so the schedule holds one list per kind and the stages say how many
// layers of each kind they run (and how many of those recompute before their backward:
// all of them for selective recompute; per recompute_method / recompute_num_layers for
// full recompute).
struct LayerOps {
  std::vector<Op> fwd;
  std::vector<Op> recompute;
  std::vector<Op> bwd;  // execution order
  bool empty() const { return fwd.empty(); }
  bool operator==(const LayerOps&) const = default;
};

struct StageSchedule {
  int stage = 0;
  int dense = 0, dense_recomputed = 0;  // dense-MLP layers on this rank (all chunks)
  int moe = 0, moe_recomputed = 0;      // MoE layers
  int mtp = 0;                          // MTP depths (last stage)
  int mtp_recomputed = 0;               // of which run mtp.recompute before their backward
  std::vector<Op> pre_fwd;   // embedding (first stage) or pipeline receive
  std::vector<Op> post_fwd;  // final norm, logits, loss (last stage) or pipeline send
  std::vector<Op> post_bwd;  // their backward (last stage) or receive of the output grad
  std::vector<Op> pre_bwd;   // embedding backward (first stage) or send of the input grad
  std::vector<Op> step;      // once per step: grad reduce-scatter / all-reduce, param
                             // all-gather, embedding grad sync, optimizer
};

struct Schedule {
  LayerOps dense;  // one dense-MLP transformer layer
  LayerOps moe;    // one MoE transformer layer
  LayerOps mtp;    // one MTP depth (eh_proj, a layer, its head and loss)
  std::vector<StageSchedule> stages;  // index = pipeline rank
  int num_micro_batches = 1;
  int vp = 1;
};

// Precondition: validate_scenario(s) is empty; m = derive_mesh(s).
// What to build. The per-layer op lists do not depend on how layers are split over
// stages; a caller that already holds them (the planner's cache) can skip them and get
// only the per-stage lists and counts.
struct ScheduleParts {
  bool layer_ops = true;
  // The per-stage lists: pre_fwd / post_fwd / post_bwd / pre_bwd (edge_ops) and step
  // (step_ops). Without them the lists stay empty; the per-stage counts are always set.
  bool edge_ops = true;
  bool step_ops = true;
  // Non-null: build the per-stage lists only for the pipeline ranks r with
  // (*ranks)[r] != 0 (size = layers.size()); each rank's lists depend only on its own
  // layers and parameters, so they equal those of a full build.
  const std::vector<char>* ranks = nullptr;
};

Schedule build_schedule(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                        const std::vector<GpuParams>& params, const ScheduleParts& parts = {});

// Cache keys (cache_key.hpp) of the parts of build_schedule.
// The layer op lists (Schedule::dense / moe / mtp): shapes after TP / SP / CP / EP, the
// CP communication, the micro-batch, the recompute policy, the dispatcher.
struct LayerOpsKey {
  ShardKey shards;
  int32_t micro_batch_size = 0;
  int32_t cp_comm_type = 0, cp_a2a = 0, cp_p2p = 0;  // hierarchical sizes when a2a+p2p
  int32_t recompute_granularity = 0, recompute_method = 0, recompute_modules = 0;
  int32_t dispatcher = 0, fp8_dispatch = 0;
  bool operator==(const LayerOpsKey&) const = default;
};
LayerOpsKey layer_ops_key(const Scenario& s, const Mesh& m);
// The stage lists pre_fwd, post_fwd, post_bwd and pre_bwd (embedding, head, pipeline
// send / receive) of a stage, given its identity (first stage, last stage, parameters).
struct EdgeOpsKey {
  ShardKey shards;
  PipelineSplitKey split;
  int32_t micro_batch_size = 0;
  bool operator==(const EdgeOpsKey&) const = default;
};
EdgeOpsKey edge_ops_key(const Scenario& s, const Mesh& m);
// The once-per-step ops (StageSchedule::step) of a stage, given its identity.
struct StepOpsKey {
  ShardKey shards;
  int32_t pp = 0, dp = 0, edp = 0, micro_batch_size = 0, num_micro_batches = 0;
  int32_t first_stage_layers = 0, last_stage_layers = 0;
  int32_t sharding = 0, distributed_optimizer = 0, overlap_grad_reduce = 0, overlap_param_gather = 0;
  bool operator==(const StepOpsKey&) const = default;
};
StepOpsKey step_ops_key(const Scenario& s, const Mesh& m);

}  // namespace lcm
