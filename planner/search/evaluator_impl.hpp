// The planner's layout evaluator (internal to planner/search): validate_scenario, memory
// and step time of one layout, with the sub-results that layouts share cached.
//
// Every cached piece is the output of a model function (stage_layers, gpu_params,
// count_flops, estimate_memory, build_schedule, mesh_topology, pass_time, layer_times,
// step_op_times, stage_microbatch_time); times are composed by compose_step_time(), the function
// step_time() itself is made of, so equal inputs give bit-identical results. A piece is
// reused by the layouts whose inputs to its function are equal; the keys below list the
// knobs each function reads in the current model. tests/planner/plan_equality_test.cpp
// checks a sample of searched layouts against a fresh validate_scenario + estimate(), so
// a model change that adds an input shows up there (then add the knob to the key).
//   validation  validate_layout per layout without sharding and rank order (it reads
//               neither), validate_sharding per sharding (it reads only those knobs);
//   structure   stage_layers, gpu_params, count_flops and the per-stage layer and
//               recompute counts of the schedule: tp cp pp split vp ep etp recompute;
//   memory      estimate_memory: the layout without rank order and dispatcher, plus the
//               effective overlap switches;
//   topology    mesh_topology: tp cp pp ep etp, rank order;
//   layer ops   the dense / MoE / MTP layer op lists: tp cp cp-comm ep etp micro-batch
//               recompute dispatcher;
//   edge ops    each stage's embedding / head / pipeline send-recv lists: tp cp pp split
//               vp ep etp micro-batch, per stage identity (first, last, parameters);
//   step ops    each stage's once-per-step ops: tp cp pp split ep etp micro-batch
//               sharding, per stage identity;
//   timings     op lists timed once per (topology of the dimensions they use, overlap
//               switches); stage passes once per (structure, layer timing, edge timing).
// Layouts whose step time provably cannot enter the search's tables are not composed
// (evaluate_shardings' bounds; docs/planner.md).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "lcm/model/memory.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

// A fixed-size key of integers with a hash.
template <size_t N>
struct IntKey {
  std::array<int32_t, N> v{};
  bool operator==(const IntKey& o) const {
    int32_t diff = 0;
    for (size_t i = 0; i < N; ++i) diff |= v[i] ^ o.v[i];
    return diff == 0;
  }
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

// Open-addressing hash map from IntKey to V (linear probing, no erase): memo tables that
// only grow until clear(). Values move when the table grows; keep them behind pointers.
template <size_t N, class V>
class IntMap {
 public:
  // The value for `k`, default-constructed when new.
  V& operator[](const IntKey<N>& k) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = IntKeyHash<N>{}(k) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = k;
        ++size_;
        return s.value;
      }
      if (s.key == k) return s.value;
    }
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }

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
      if (s.used) (*this)[s.key] = std::move(s.value);
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
  // Per rank: 1 for the first rank of each (first, last, layers, parameters) group, whose
  // stage lists a schedule build fills (ScheduleParts::ranks).
  std::vector<char> reps;
};

// The dense / MoE / MTP layer op lists, and their times.
struct LayerEntry {
  LayerOps dense, moe, mtp;
  uint32_t dims = 0;  // communication dimensions the lists use (bit per CommDim)
  struct Timed {
    TimingKey key;
    LayerTimes dense, moe, mtp;
  };
  std::deque<Timed> timed;  // stable addresses
};

// Op lists per stage identity (first stage, last stage, parameters held), and their times.
template <class Lists, class Times>
struct StageListsEntry {
  struct Identity {
    bool first = false, last = false;
    GpuParams params;
    Lists lists;
  };
  std::vector<Identity> identities;
  uint32_t dims = 0;
  struct Timed {
    TimingKey key;
    std::vector<Times> times;  // per identity
  };
  std::deque<Timed> timed;
  int identity_of(const Structure::Class& c) const;
  bool covers(const Structure& s) const;
};
using EdgeEntry = StageListsEntry<std::array<std::vector<Op>, 4>, std::array<PassTime, 4>>;  // pre_fwd..pre_bwd
using StepEntry = StageListsEntry<std::vector<Op>, std::vector<StepOpTime>>;

// The result of one layout: for valid ones `metrics` (the step-time fields only when
// `timed`), for invalid ones `problems`.
struct ShardingResult {
  Outcome::Status status = Outcome::Status::kInvalid;
  bool timed = false;
  // Timed, but only bounded: its step time provably exceeds the bound it was evaluated
  // against (evaluate_shardings), so `metrics` has no step-time fields.
  bool bounded = false;
  Metrics metrics;
  std::vector<Problem> problems;
};

struct Evaluator::Impl {
  explicit Impl(const Scenario& base);

  // The layouts `layout` with each of `shardings` (its own sharding is ignored): they
  // differ only in their step collectives and memory and share the rest of the work.
  // Out-of-memory layouts get a time only when they miss HBM by at most time_miss_bytes.
  // A layout that fits (misses HBM) whose step time is provably above fit_bound
  // (miss_bound) is not composed: `bounded` (a lower bound from the pipeline passes, which
  // the step collectives and optimizer only add to).
  void evaluate_shardings(const Layout& layout, const DpSharding* shardings, int count, ShardingResult* results,
                          double time_miss_bytes = 1e300, double fit_bound = kNoBound, double miss_bound = kNoBound);
  static constexpr double kNoBound = 1e300;

  // Drop the caches that grow with the search.
  void trim();

  Scenario base;
  Scenario work;  // base with the current layout applied
  uint64_t schedules_built = 0;  // build_schedule calls (cache fills)
  uint64_t validations = 0;      // validate_scenario calls

 private:
  // The pieces of one layout's time that its sharding variants share.
  struct Shared {
    const MeshTopology* topo = nullptr;
    LayerEntry* layer = nullptr;
    LayerEntry* new_layer = nullptr;  // created for this layout: filled by the next schedule
    EdgeEntry* edges = nullptr;
    const LayerEntry::Timed* lt = nullptr;
    const EdgeEntry::Timed* et = nullptr;
    StepInputs si;
    bool composed = false;
    double lower_bound = 0;  // of the step time of every sharding (compose_inputs)
  };
  int validate_each(Layout& l, const DpSharding* shardings, int count, ShardingResult* results);
  Structure& structure_of(const Layout& l, const Mesh& m);
  void select_slots(const Layout& l);
  const Metrics& memory_of(size_t sharding, const Mesh& m, const Structure& structure);
  void share(const Layout& l, const Mesh& m, Shared& sh);
  StepEntry& steps_of(const Layout& l, size_t sharding);
  void compose_inputs(const Mesh& m, Structure& structure, Shared& sh);
  void fill(const Mesh& m, Structure& structure, LayerEntry* layer, EdgeEntry* edges, StepEntry* steps);
  const LayerEntry::Timed& timed(LayerEntry& e, const MeshTopology& topo);
  template <class Entry, class TimeOne>
  const typename Entry::Timed& timed(Entry& e, const MeshTopology& topo, TimeOne&& time_one);

  std::vector<StageInputs> inputs_;  // scratch, one per structure class
  Memory memory_;                    // scratch
  // validate_sharding per sharding (it reads only the sharding knobs).
  std::array<bool, 4> sharding_checked_{};
  std::array<std::vector<Problem>, 4> sharding_problems_;
  IntMap<9, std::unique_ptr<Structure>> structures_;
  IntMap<7, std::unique_ptr<MeshTopology>> topologies_;
  IntMap<9, std::unique_ptr<LayerEntry>> layers_;
  IntMap<10, std::unique_ptr<EdgeEntry>> edges_;
  IntMap<10, std::unique_ptr<StepEntry>> steps_;

  // The previous layout's pieces (consecutive layouts of the search share most of them).
  struct Last {
    // validate_layout of the previous layout (without its sharding and rank order).
    bool has_validation = false;
    Layout validation_key;
    LayoutValidation validation;
    IntKey<9> structure_key;
    Structure* structure = nullptr;
    IntKey<10> edge_key;
    EdgeEntry* edges = nullptr;
    IntKey<13> memory_key;  // memory key without the sharding: slots by sharding below
    std::array<bool, 4> memory_valid{};
    std::array<Metrics, 4> memory{};  // memory fields only
    IntKey<9> step_key;  // step key without the sharding
    std::array<StepEntry*, 4> steps{};
    // Stage passes of each structure class for (structure, layer timing, edge timing).
    const void* passes_key[3] = {nullptr, nullptr, nullptr};
    std::vector<StageTime> passes;
    double passes_fb_max = 0, passes_fb_sum = 0;  // max and sum over ranks of fwd + bwd
  } last_;
};

}  // namespace lcm::plan
