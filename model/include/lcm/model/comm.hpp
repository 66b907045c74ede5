// Communication volume of one training step, per GPU, by parallel dimension and
// collective. Sizes follow nccl-tests' conventions (doc/PERFORMANCE.md): `message_bytes`
// is the size S of the full array a collective works on (for all-gather and
// reduce-scatter the gathered total), and `sent_bytes` is what one rank puts on the
// wire for all calls of the step (ring algorithms; all-to-all sends (n-1)/n of its
// buffer). Sources: docs/reference/formulas.md §4. The volumes themselves are written once, in the op
// schedule's generator (model/src/schedule_gen.hpp); this is their per-item sum.
#pragma once

#include <array>
#include <cstdint>

#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

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

// nccl-tests bus-bandwidth factor: busbw = algbw * bus_factor(kind, n).
double bus_factor(Collective kind, int n);
// Bytes one rank sends for one call of `kind` on a message of S bytes over n ranks (ring).
double sent_bytes_per_call(Collective kind, int n, double message_bytes);

// Item names (CommItem::what), one constant per item. The op schedule tags each
// communication op with the item it is counted in (Op::item in schedule.hpp), always one of
// these constants: estimate_comm matches items by address. docs/communication-model.md §9
// lists the items, docs/op-schedule.md the ops that feed each.
namespace comm_item {
inline constexpr char kTpAllReduce[] = "tp.allreduce";
inline constexpr char kTpAllReduceMla[] = "tp.allreduce.mla";
inline constexpr char kTpSpAllGather[] = "tp.sp.allgather";
inline constexpr char kTpSpReduceScatter[] = "tp.sp.reducescatter";
inline constexpr char kTpSpAllGatherMla[] = "tp.sp.allgather.mla";
inline constexpr char kTpSpReduceScatterMla[] = "tp.sp.reducescatter.mla";
inline constexpr char kTpEmbeddingAllReduce[] = "tp.embedding.allreduce";
inline constexpr char kTpEmbeddingReduceScatter[] = "tp.embedding.reducescatter";
inline constexpr char kTpEmbeddingAllGather[] = "tp.embedding.allgather";
inline constexpr char kTpOutputAllReduce[] = "tp.output.allreduce";
inline constexpr char kTpOutputAllGather[] = "tp.output.allgather";
inline constexpr char kTpOutputReduceScatter[] = "tp.output.reducescatter";
inline constexpr char kTpAllReduceGrads[] = "tp.allreduce.grads";
inline constexpr char kCpP2pKv[] = "cp.p2p.kv";
inline constexpr char kCpAllGatherKv[] = "cp.allgather.kv";
inline constexpr char kCpReduceScatterDkv[] = "cp.reducescatter.dkv";
inline constexpr char kCpA2A[] = "cp.a2a";
inline constexpr char kEpA2ADispatch[] = "ep.a2a.dispatch";
inline constexpr char kEpA2ACombine[] = "ep.a2a.combine";
inline constexpr char kEpA2ABwd[] = "ep.a2a.bwd";
inline constexpr char kEtpAllGatherDispatch[] = "etp.allgather.dispatch";
inline constexpr char kEtpReduceScatterCombine[] = "etp.reducescatter.combine";
inline constexpr char kEpAllGatherDispatch[] = "ep.allgather.dispatch";
inline constexpr char kEpReduceScatterCombine[] = "ep.reducescatter.combine";
inline constexpr char kPpSendRecv[] = "pp.sendrecv";
inline constexpr char kDpAllReduceGrads[] = "dp.allreduce.grads";
inline constexpr char kDpReduceScatterGrads[] = "dp.reducescatter.grads";
inline constexpr char kDpAllGatherParams[] = "dp.allgather.params";
inline constexpr char kEdpAllReduceGrads[] = "edp.allreduce.grads";
inline constexpr char kEdpReduceScatterGrads[] = "edp.reducescatter.grads";
inline constexpr char kEdpAllGatherParams[] = "edp.allgather.params";
inline constexpr char kEmbAllReduceGrads[] = "emb.allreduce.grads";
}  // namespace comm_item

struct CommItem {
  CommDim dim = CommDim::kTp;
  Collective kind = Collective::kAllReduce;
  const char* what = "";     // stable short name, e.g. "tp.sp.allgather"
  int group_size = 1;
  double message_bytes = 0;  // S of one call
  double calls = 0;          // calls per step on this GPU
  double sent_bytes = 0;     // per GPU per step, all calls
};

struct Comm {
  static constexpr int kMaxItems = 24;
  std::array<CommItem, kMaxItems> items{};
  int num_items = 0;
  std::array<double, kNumCommDims> sent_bytes_by_dim{};  // per GPU per step
  double total_sent_bytes = 0;
  int stage = 0;  // the pipeline stage these volumes are for (the busiest one)
};

// Volumes for the busiest pipeline stage (most layers; ties: the first): the fold of that
// stage's communication ops of the op schedule (schedule.hpp), per item. Per-layer and
// stage-boundary ops count once per layer (and per recomputed layer) per micro-batch, step
// ops once with their calls. Allocates nothing of its own (it calls gpu_params when a
// DP, EDP or SP gradient term needs parameter counts).
Comm estimate_comm(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers);

}  // namespace lcm
