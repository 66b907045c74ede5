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
