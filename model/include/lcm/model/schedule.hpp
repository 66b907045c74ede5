// The per-op schedule of one training step: the contract between prediction and
// measurement. For each rank class (pipeline stage) it lists, in execution order, the
// operations of one micro-batch — GEMMs with their shapes, attention cores, memory-bound
// ops with their bytes, collectives with group, kind and bytes, pipeline send/recv — for
// forward, backward and recompute, plus the once-per-step ops (gradient reduction,
// parameter gather, optimizer). Identical layers share one op list with a repeat count.
//
// Ops are typed (ops.hpp): an OpId, a pass and a shape. Their stable names are prefix +
// base + pass suffix, built by op_name() from the one name table. Per-layer ops carry the
// prefix "L." ("L.attn.qkv.fwd", "L.moe.dispatch.a2a.fwd", "L.mlp.fc1.bwd.wgrad"), MTP
// blocks "MTP."; the executor and predicted traces use exactly these names, so predicted
// and measured times line up. The backward of a forward op keeps its id (".bwd"):
// "L.attn.sp.allgather.bwd" is that all-gather's conjugate reduce-scatter.
// docs/op-schedule.md lists them all.
//
// The schedule is the one home of communication volumes: every collective and send/recv
// carries its group, kind, message size, calls and the Comm item (CommItemId) it counts in, and
// estimate_comm (comm.hpp) is their sum over the busiest stage, from the same generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

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

// Whether the dispatcher copies its per-expert token counts to the host in the forward
// (a device-to-host synchronisation per MoE layer per forward and recompute; Megatron-LM
// megatron/core/transformer/moe/token_dispatcher.py, fused_a2a.py): the allgather
// dispatcher always (tokens_per_expert .cpu()); alltoall unless the counts are static
// (moe_pad_expert_input_to_capacity: drop_and_pad); flex with DeepEP always (its normal
// kernels hand the received counts to the CPU as a list); flex with HybridEP unless padded
// to capacity (num_permuted_tokens known: non_blocking). The backward reuses the splits.
inline bool dispatcher_syncs(const ModelSpec& md) {
  switch (md.moe_token_dispatcher_type) {
    case Dispatcher::kAllGather: return true;
    case Dispatcher::kAllToAll: return !md.moe_pad_expert_input_to_capacity;
    case Dispatcher::kFlex:
      return md.moe_flex_dispatcher_backend == FlexBackend::kDeepEp || !md.moe_pad_expert_input_to_capacity;
  }
  return true;
}

}  // namespace lcm
