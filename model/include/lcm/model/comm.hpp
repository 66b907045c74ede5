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
#include "lcm/model/ops.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

// nccl-tests bus-bandwidth factor: busbw = algbw * bus_factor(kind, n).
double bus_factor(Collective kind, int n);
// Bytes one rank sends for one call of `kind` on a message of S bytes over n ranks (ring).
double sent_bytes_per_call(Collective kind, int n, double message_bytes);

// ---------------------------------------------------------------------------------
// Node de-duplication of the flex dispatcher (DeepEP / HybridEP; docs/communication-model.md,
// "Node de-duplication"). Routing is uniform top-k, experts spread evenly over the group.
// ---------------------------------------------------------------------------------
// P(a holder of `held` of `experts` experts gets >= 1 of a token's k experts):
// 1 - C(experts - held, k) / C(experts, k).
double hit_probability(double experts, double held, int k);
// P(a given node of `nodes` holds >= 1 of a token's experts), with group-limited routing when
// NodeDedup::groups > 0 (the k experts drawn from group_topk of `groups` equal groups).
double node_hit_probability(const NodeDedup& d, int nodes);
// Expected distinct nodes a token goes to (its own included): nodes x node_hit_probability.
double expected_destination_nodes(const NodeDedup& d, int nodes);
// What one rank moves for one call of a de-duplicated all-to-all on a group spanning `nodes`
// nodes with `per_node` ranks each: a copy per destination node through its NIC (S / dest_ranks
// bytes a token), and every copy but its own and the RDMA receiver's over NVLink (forwarding).
struct DedupTraffic {
  double nvlink_bytes = 0;
  double nic_bytes = 0;
};
DedupTraffic dedup_traffic(const CollectiveShape& c, int nodes, int per_node);

struct CommItem {
  CommDim dim = CommDim::kTp;
  Collective kind = Collective::kAllReduce;
  CommItemId id = CommItemId::kNone;  // its stable short name: to_string(id), e.g. "tp.sp.allgather"
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
