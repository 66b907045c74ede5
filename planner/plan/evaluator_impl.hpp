// The planner's layout evaluator (internal to planner/plan): validate_scenario, memory
// and step time of one layout, with the sub-results layouts share cached.
//
// Every cached piece is the output of a model function (validate_scenario, stage_layers,
// gpu_params, count_flops, estimate_memory, build_schedule, mesh_topology, pass_time,
// layer_times, step_op_times); times are composed by compose_step_time(), the function
// step_time() itself is made of. A piece is reused for the layouts whose inputs to that
// function are equal. The keys below list those inputs (the knobs the function reads in
// the current model); tests/planner/plan_equality_test.cpp checks a sample of searched
// layouts against a fresh validate_scenario + estimate(), so a model change that adds an
// input shows up there. Keys (besides the scenario's fixed fields):
//   validation  the layout without its rank order; the dispatcher only under EP overlap
//               (the one rule that reads it); sharding only as sharded / not sharded;
//   structure   stage_layers, gpu_params, count_flops and the per-stage layer and
//               recompute counts: tp cp pp split vp ep etp recompute;
//   memory      estimate_memory: the layout without rank order and dispatcher (plus the
//               overlap switches it reads);
//   topology    mesh_topology: tp cp pp ep etp and the rank order;
//   layer ops   the op lists of the dense / MoE / MTP layer: tp cp cp-comm ep etp
//               micro-batch recompute dispatcher; timed once per (topology of the
//               dimensions they use, overlap switches);
//   stage ops   the first/last/middle stage edges and the step ops of each stage class:
//               tp cp pp split vp ep etp micro-batch recompute sharding; timed once per
//               (topology of the dimensions they use, overlap switches).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "lcm/model/memory.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"
#include "lcm/planner/plan.hpp"

namespace lcm::plan {

// A fixed-size key of integers with a hash.
template <size_t N>
struct IntKey {
  std::array<int32_t, N> v{};
  bool operator==(const IntKey&) const = default;
};
template <size_t N>
struct IntKeyHash {
  size_t operator()(const IntKey<N>& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int32_t x : k.v) {
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(x)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdull;
    }
    return static_cast<size_t>(h ^ (h >> 33));
  }
};
// Open-addressing hash map from IntKey to V (linear probing, no erase): the evaluator's
// memo tables, which only grow until clear().
template <size_t N, class V>
class IntMap {
 public:
  // The value for `k`, default-constructed when new.
  V& operator[](const IntKey<N>& k) { return *find_or_insert(k).first; }
  // Pointer to the value and whether it was inserted.
  std::pair<V*, bool> find_or_insert(const IntKey<N>& k) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = IntKeyHash<N>{}(k) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = k;
        ++size_;
        return {&s.value, true};
      }
      if (s.key == k) return {&s.value, false};
    }
  }
  V* find(const IntKey<N>& k) {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = IntKeyHash<N>{}(k) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == k) return &s.value;
    }
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    IntKey<N> key;
    V value{};
    bool used = false;
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.clear();
    slots_.resize(old.empty() ? 64 : old.size() * 2);
    size_ = 0;
    for (Slot& s : old)
      if (s.used) *find_or_insert(s.key).first = std::move(s.value);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// The inputs of a timing besides the op lists: the topology of the dimensions the lists
// use and the overlap switches pass_time reads.
struct TimingKey {
  std::array<GroupTopology, kNumCommDims> topo{};  // only the used dimensions are set
  bool tp_comm_overlap = false;
  bool overlap_moe = false;
};

// The op lists of one layer kind each, and their times.
struct LayerEntry {
  LayerOps dense, moe, mtp;
  uint32_t dims = 0;  // communication dimensions the lists use (bit per CommDim)
  struct Timed {
    TimingKey key;
    LayerTimes dense, moe, mtp;
  };
  std::vector<Timed> timed;
};

// Per (mesh, vp, recompute): stage layers, parameters, FLOPs and the stage classes.
struct Structure {
  std::vector<StageLayers> layers;
  std::vector<GpuParams> params;
  Flops flops;
  bool has_classes = false;  // filled from the first schedule built for it
  struct Class {
    int rank = 0;  // a rank of this class
    bool first = false, last = false;
    int dense = 0, dense_recomputed = 0, moe = 0, moe_recomputed = 0, mtp = 0, mtp_recomputed = 0;
    GpuParams params;
  };
  std::vector<Class> classes;    // ranks with equal inputs share a class
  std::vector<int> stage_class;  // per rank
};

// The stage-edge and step op lists of each stage identity (first, last, parameters), and
// their times.
struct StageEntry {
  struct Lists {
    bool first = false, last = false;
    GpuParams params;
    std::array<std::vector<Op>, 4> edges;  // pre_fwd, post_fwd, post_bwd, pre_bwd
    std::vector<Op> step;
  };
  std::vector<Lists> identities;
  uint32_t dims = 0;
  struct Timed {
    TimingKey key;
    std::vector<std::array<PassTime, 4>> edges;  // per identity
    std::vector<std::vector<StepOpTime>> step;   // per identity
  };
  std::vector<Timed> timed;
  // The identity of a structure class (-1: not in this entry).
  int identity_of(const Structure::Class& c) const;
};

struct MemorySummary {
  IntKey<16> key;
  bool valid = false;
  Metrics m;  // memory fields only
};

struct Evaluator::Impl {
  explicit Impl(const Scenario& base);

  // One layout. For valid layouts fills `metrics` (the step-time fields only when the
  // layout fits HBM or misses it by at most `time_miss_bytes`; `timed` says which); for
  // invalid ones sets `problem_set` (index into problem_sets).
  Outcome::Status evaluate(const Layout& l, Metrics& metrics, int& problem_set, bool& timed,
                           double time_miss_bytes = 1e300);

  Scenario base;
  Scenario work;  // base with the current layout applied

  IntMap<18, int> validation;  // -> index into problem_sets, -1 when valid
  IntKey<18> last_validation_key;
  int last_verdict = -2;  // -2: none
  std::vector<std::vector<Problem>> problem_sets;

  MemorySummary memory;
  IntMap<9, std::unique_ptr<Structure>> structures;
  IntMap<7, std::unique_ptr<MeshTopology>> topologies;
  IntMap<9, std::unique_ptr<LayerEntry>> layers;
  IntMap<10, std::unique_ptr<StageEntry>> stages;
  // The entries of the previous layout (most layouts share them with their predecessor).
  Structure* last_structure = nullptr;
  IntKey<9> last_structure_key;
  StageEntry* last_stage = nullptr;
  IntKey<10> last_stage_key;

  uint64_t schedules_built = 0;  // build_schedule calls (cache fills)
  uint64_t validations = 0;      // validate_scenario calls

  // Drop the caches that grow with the search.
  void trim();

 private:
  void fill(const Mesh& m, Structure& structure, LayerEntry* layer_entry, StageEntry* stage_entry);
  const LayerEntry::Timed& timed(LayerEntry& e, const MeshTopology& topo);
  const StageEntry::Timed& timed(StageEntry& e, const MeshTopology& topo);
};

}  // namespace lcm::plan
