// Time of each op of the schedule on a hardware profile, and the topology of each
// parallel group (how many nodes it spans, how many of its ranks share a node), which
// follows from the rank order.
//
// Compute: roofline with efficiency curves. GEMM efficiency falls for small or skinny
// shapes; a GEMM is also bounded by the HBM time of its operands (smooth maximum), and a
// grouped GEMM is priced expert by expert from its per-expert loads; attention efficiency
// grows with the sequence (per head dim), few CTAs leave a tail, and a forward whose K/V
// outgrow L2 streams them from HBM; memory-bound ops run at a fraction of HBM bandwidth
// plus their own fixed time.
// Collectives: alpha-beta per algorithm (ring for all-reduce / all-gather / reduce-scatter,
// pairwise for all-to-all), NVLink inside a node, the NIC across nodes, nccl-tests
// bus-bandwidth conventions, size-dependent efficiency. All times in seconds.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

struct GroupTopology {
  int size = 1;      // ranks in the group
  int nodes = 1;     // nodes the group spans
  int per_node = 1;  // ranks of the group on one node
  bool operator==(const GroupTopology&) const = default;
};

// Topology of each communication dimension's group (indexed by CommDim), for rank 0's
// groups under the scenario's rank order. DP is the dense gradient group (dp x cp).
struct MeshTopology {
  std::array<GroupTopology, kNumCommDims> dim{};
  GroupTopology expert_tp;     // the expert-TP (ETP) group of the expert grid
  GroupTopology expert_tp_ep;  // ETP x EP block (allgather dispatcher)
  const GroupTopology& operator[](CommDim d) const { return dim[static_cast<size_t>(d)]; }
  bool operator==(const MeshTopology&) const = default;
};
MeshTopology mesh_topology(const Scenario& s, const Mesh& m);
// Cache key (cache_key.hpp) of mesh_topology: the mesh sizes and the rank order.
struct TopologyKey {
  ShardKey shards;
  int32_t pp = 0, dp = 0, edp = 0;
  std::array<int32_t, kNumOrderDims> order{};
  bool operator==(const TopologyKey&) const = default;
};
TopologyKey topology_key(const Scenario& s, const Mesh& m);
// Topology of a group from the node of each of its ranks (any ids, one per rank).
GroupTopology group_topology(const std::vector<int>& node_of_rank);

// Query rows one fused-attention CTA computes (FlashAttention-3 / cuDNN forward tiles on
// Hopper): the unit of attention_time's CTA tail and K/V streaming terms.
inline constexpr int64_t kAttentionBlockQ = 128;
// Fused attention runs head dims in whole tiles of this width (cuDNN on Hopper: a d = 96 kernel
// takes d = 128's time); timing.cpp prices a head dim padded up to it.
inline constexpr int64_t kAttentionHeadDimTile = 64;
// FlashAttention-2 (the flash-attn package) compiles a kernel per head dim in steps of 32 (32 ..
// 256): timing.cpp pads a flash2 head dim up to this width instead.
inline constexpr int64_t kFlash2HeadDimTile = 32;

// Time of one op (one call; Op::calls repetitions are the caller's to multiply).
double gemm_time(const GemmShape& g, DType dtype, const HardwareSpec& hw);
double gemm_efficiency(const GemmShape& g, const HardwareSpec& hw);
double attention_time(const AttentionShape& a, double flops, bool backward, const HardwareSpec& hw);
// Bytes of one KV head's K and V (bf16) that one kernel of the op streams: the forward's L2
// working set in attention_time. The CP ring's kernels hold one block (kv_block keys); `keys` > 0
// caps the count further (a sliding-window CTA's keys).
double attention_kv_head_bytes(const AttentionShape& a, double keys = 0);
// A memory-bound op: a copy at efficiency.hbm, any other kernel at efficiency.hbm_elementwise.
double memory_time(const MemoryShape& m, const HardwareSpec& hw);
double collective_time(const CollectiveShape& c, const GroupTopology& topo, const HardwareSpec& hw);
double op_time(const Op& op, const MeshTopology& topo, const HardwareSpec& hw);

}  // namespace lcm
