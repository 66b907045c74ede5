// The incremental estimator (incremental.hpp): model function results cached by their
// keys (cache_key.hpp), composed by compose_step_time like step_time() itself.
//
//   structure   stage_layers, gpu_params, count_flops and the per-stage layer and
//               recompute counts of the schedule (structure_key), with the stage classes:
//               ranks with equal inputs share one;
//   memory      estimate_memory (memory_key), the last few;
//   topology    mesh_topology (topology_key);
//   layer ops   the dense / MoE / MTP layer op lists (layer_ops_key);
//   edge ops    each stage identity's embedding / head / pipeline send-recv lists
//               (edge_ops_key), per identity (first, last, parameters);
//   step ops    each stage identity's once-per-step ops (step_ops_key);
//   timings     each op list timed once per pass_time_key (the topology of the groups it
//               uses, the overlap switches); the stage passes once per (structure, layer
//               timing, edge timing).
// One build_schedule fills whatever lists the selected scenario misses.
#include "lcm/model/incremental.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "key_map.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/timing.hpp"
#include "step_compose.hpp"

namespace lcm {

void copy_layout_inputs(const Scenario& from, Scenario& to) {
  to.parallel = from.parallel;
  to.training.micro_batch_size = from.training.micro_batch_size;
  to.model.moe_token_dispatcher_type = from.model.moe_token_dispatcher_type;
}

bool same_scope(const Scenario& a, const Scenario& b) {
  Scenario x = a;
  copy_layout_inputs(b, x);
  return x == b;
}

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Per structure: stage layers, parameters, FLOPs and the stage classes.
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

bool same_identity(bool first, bool last, const GpuParams& p, const Structure::Class& c) {
  return first == c.first && last == c.last && same_bits(p.dense, c.params.dense) &&
         same_bits(p.expert, c.params.expert);
}

// Ranks q < r whose stage lists are equal by construction: same first / last position,
// same layers and parameters.
bool same_rank_inputs(const Structure& s, size_t q, size_t r) {
  const size_t n = s.layers.size();
  const StageLayers &a = s.layers[q], &b = s.layers[r];
  return (q == 0) == (r == 0) && (q + 1 == n) == (r + 1 == n) && a.num_layers == b.num_layers &&
         a.num_moe_layers == b.num_moe_layers && a.has_embedding == b.has_embedding &&
         a.has_output == b.has_output && a.num_mtp_layers == b.num_mtp_layers &&
         a.num_recomputed_layers == b.num_recomputed_layers &&
         a.num_recomputed_moe_layers == b.num_recomputed_moe_layers && same_bits(s.params[q].dense, s.params[r].dense) &&
         same_bits(s.params[q].expert, s.params[r].expert);
}

// Timings of an entry's op lists, one per pass_time_key. The entry remembers the last
// (topology, switches) it was asked for: consecutive layouts mostly ask for the same.
template <class Timed>
struct Timings {
  std::deque<Timed> timed;  // stable addresses
  const MeshTopology* last_topo = nullptr;
  PassTimeSwitches last_switches{};
  const Timed* last = nullptr;
};

// The dense / MoE / MTP layer op lists, and their times.
struct LayerEntry {
  bool filled = false;
  LayerOps dense, moe, mtp;
  uint32_t uses = 0;  // comm_uses of the lists
  struct Timed {
    PassTimeKey key;
    LayerTimes dense, moe, mtp;
  };
  Timings<Timed> timings;
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
  uint32_t uses = 0;
  struct Timed {
    PassTimeKey key;
    std::vector<Times> times;  // per identity
  };
  Timings<Timed> timings;
  int identity_of(const Structure::Class& c) const {
    for (size_t i = 0; i < identities.size(); ++i)
      if (same_identity(identities[i].first, identities[i].last, identities[i].params, c)) return static_cast<int>(i);
    return -1;
  }
  // Identities are only appended and a structure's classes are fixed once it has them, so
  // a structure once covered stays covered: the last one is remembered.
  mutable const Structure* covered = nullptr;
  bool covers(const Structure& s) const {
    if (covered == &s) return true;
    for (const Structure::Class& c : s.classes)
      if (identity_of(c) < 0) return false;
    if (s.has_classes) covered = &s;
    return true;
  }
};
using EdgeEntry = StageListsEntry<std::array<std::vector<Op>, 4>, std::array<PassTime, 4>>;  // pre_fwd..pre_bwd
using StepEntry = StageListsEntry<std::vector<Op>, std::vector<StepOpTime>>;

// A small memo of the last results of a function, by key (round robin).
template <class Key, class V, size_t N>
struct Recent {
  std::array<Key, N> keys{};
  std::array<V, N> values{};
  size_t used = 0, next = 0;
  V* find(const Key& k) {
    // Newest first: the last insert is the likeliest hit.
    for (size_t j = 0; j < used; ++j) {
      const size_t i = (next + N - 1 - j) % N;
      if (key_equal(keys[i], k)) return &values[i];
    }
    return nullptr;
  }
  V& insert(const Key& k) {
    const size_t i = next;
    next = (next + 1) % N;
    used = std::max(used, i + 1);
    keys[i] = k;
    return values[i];
  }
  void clear() { used = next = 0; }
};

// The value of `key` in `map`, made by make() when new, through the memo of the last keys.
template <class Key, class V, size_t N, class Make>
V* lookup(Recent<Key, V*, N>& recent, KeyMap<Key, std::unique_ptr<V>>& map, const Key& key, Make&& make) {
  if (V** hit = recent.find(key)) return *hit;
  auto& slot = map[key];
  if (!slot) slot = make();
  return recent.insert(key) = slot.get();
}

}  // namespace

struct IncrementalEstimator::Impl {
  explicit Impl(const Scenario& base) : s(base) {}

  Scenario s;  // the base with the selected layout inputs
  Mesh m;
  uint64_t schedules_built = 0;

  // The selection's pieces (select() resets them).
  Structure* structure = nullptr;
  const MeshTopology* topo = nullptr;
  LayerEntry* layer = nullptr;
  EdgeEntry* edges = nullptr;
  StepEntry* steps = nullptr;
  bool composed = false;
  double lower_bound = 0;

  void reset_selection() {
    structure = nullptr;
    topo = nullptr;
    layer = nullptr;
    edges = nullptr;
    steps = nullptr;
    composed = false;
    keys.structure = keys.lists = keys.step = keys.memory_base = false;
  }
  // After a change of the sharding knobs only: what reads them is dropped; the keys that
  // read none, and the pieces found by them, are kept.
  void reset_sharding() {
    steps = nullptr;
    composed = false;
    keys.step = false;
#ifndef NDEBUG
    assert(!keys.structure || key_equal(keys.structure_k, structure_key(s, m)));
    assert(!keys.memory_base || key_equal(keys.memory_base_k, memory_base_key(s, m)));
    assert(!keys.lists || (key_equal(keys.topology_k, topology_key(s, m)) && key_equal(keys.layer_k, layer_ops_key(s, m)) &&
                           key_equal(keys.edge_k, edge_ops_key(s, m))));
#endif
  }
  Structure& structure_of();
  void prepare_lists();
  void fill();
  void compose();
  template <class Entry, class TimeAll>
  const typename Entry::Timed& timed(Entry& e, bool (*complete)(const Entry&, const typename Entry::Timed&),
                                     TimeAll&& time_all);

  KeyMap<StructureKey, std::unique_ptr<Structure>> structures;
  KeyMap<TopologyKey, std::unique_ptr<MeshTopology>> topologies;
  KeyMap<LayerOpsKey, std::unique_ptr<LayerEntry>> layers;
  KeyMap<EdgeOpsKey, std::unique_ptr<EdgeEntry>> edge_entries;
  KeyMap<StepOpsKey, std::unique_ptr<StepEntry>> step_entries;
  Recent<StructureKey, Structure*, 1> last_structure;
  Recent<TopologyKey, MeshTopology*, 2> last_topology;
  Recent<LayerOpsKey, LayerEntry*, 1> last_layer;
  Recent<EdgeOpsKey, EdgeEntry*, 1> last_edges;
  Recent<StepOpsKey, StepEntry*, 4> last_steps;  // layouts differing in their sharding
  // The memo of estimate_memory by memory_key: per base key (the last two), its
  // memory_without_state and the full result of each sharding asked for, in the slot of
  // the key's (sharding, distributed_optimizer).
  static constexpr size_t kShardingSlots = 8;
  struct MemoryEntry {
    Memory base;
    std::array<Memory, kShardingSlots> full;
    std::array<bool, kShardingSlots> filled{};
  };
  Recent<MemoryBaseKey, MemoryEntry, 2> memory_entries;
  KeyMap<ShardKey, double> zero3_units;            // zero3_unit_params, once asked for (0: not yet)

  // The selection's keys, each computed once (select() resets them).
  // select_sharding keeps those that read no sharding knob: structure, lists and memory
  // base (tests/model/cache_key_test.cpp checks that they read none).
  struct SelectedKeys {
    bool structure = false, lists = false, step = false, memory_base = false;
    MemoryBaseKey memory_base_k;
    StructureKey structure_k;
    TopologyKey topology_k;
    LayerOpsKey layer_k;
    EdgeOpsKey edge_k;
    StepOpsKey step_k;
  } keys;
  const StructureKey& selected_structure_key() {
    if (!keys.structure) {
      keys.structure_k = structure_key(s, m);
      keys.structure = true;
    }
    return keys.structure_k;
  }
  // The keys of the shared lists: topology, layer and edge ops.
  void select_list_keys() {
    if (keys.lists) return;
    keys.topology_k = topology_key(s, m);
    keys.layer_k = layer_ops_key(s, m);
    keys.edge_k = edge_ops_key(s, m);
    keys.lists = true;
  }
  const MemoryBaseKey& selected_memory_base_key() {
    if (!keys.memory_base) {
      keys.memory_base_k = memory_base_key(selected_structure_key(), s, m);
      keys.memory_base = true;
    }
    return keys.memory_base_k;
  }
  const StepOpsKey& selected_step_key() {
    if (!keys.step) {
      keys.step_k = step_ops_key(s, m);
      keys.step = true;
    }
    return keys.step_k;
  }

  // Stage inputs and micro-batch times of each structure class, for (structure, layer
  // timing, edge timing).
  struct Passes {
    const Structure* structure = nullptr;
    const LayerEntry::Timed* layer = nullptr;
    const EdgeEntry::Timed* edges = nullptr;
    int vp = 0, num_micro_batches = 0;
    bool operator==(const Passes&) const = default;
  } passes_key;
  // What the last full compose() read: the keys of its pieces and of their timing, so a
  // selection with equal keys (e.g. another sharding of the same layout) reuses it whole.
  struct ComposeKey {
    StructureKey structure;
    TopologyKey topology;
    LayerOpsKey layer;
    EdgeOpsKey edges;
    PassTimeSwitches switches;
    int32_t vp = 0, num_micro_batches = 0;
  };
  ComposeKey compose_key{};
  bool has_compose = false;
  Structure* c_structure = nullptr;
  const MeshTopology* c_topo = nullptr;
  LayerEntry* c_layer = nullptr;
  EdgeEntry* c_edges = nullptr;
  std::vector<StageInputs> inputs;  // per structure class
  std::vector<StageTime> passes;    // per structure class
  StepInputs step_inputs;
  double passes_lower_bound = 0;  // of the pipeline term, from the cached passes
};

Structure& IncrementalEstimator::Impl::structure_of() {
  if (structure) return *structure;
  structure = lookup(last_structure, structures, selected_structure_key(), [&] {
    auto x = std::make_unique<Structure>();
    x->layers = stage_layers(s, m);
    x->params = gpu_params(s, m, x->layers);
    x->flops = count_flops(s, m);
    const size_t n = x->layers.size();
    x->reps.assign(n, 1);
    for (size_t r = 1; r < n; ++r)
      for (size_t q = 0; q < r && x->reps[r]; ++q)
        if (x->reps[q] && same_rank_inputs(*x, q, r)) x->reps[r] = 0;
    return x;
  });
  return *structure;
}

// Topology and the layer, edge and step entries of the selection, their missing lists
// filled by one schedule build.
void IncrementalEstimator::Impl::prepare_lists() {
  if (steps) return;
  Structure& st = structure_of();
  select_list_keys();
  topo = lookup(last_topology, topologies, keys.topology_k,
                [&] { return std::make_unique<MeshTopology>(mesh_topology(s, m)); });
  layer = lookup(last_layer, layers, keys.layer_k, [] { return std::make_unique<LayerEntry>(); });
  edges = lookup(last_edges, edge_entries, keys.edge_k, [] { return std::make_unique<EdgeEntry>(); });
  steps = lookup(last_steps, step_entries, selected_step_key(), [] { return std::make_unique<StepEntry>(); });
  if (!layer->filled || !st.has_classes || !edges->covers(st) || !steps->covers(st)) fill();
}

// One schedule build for what the selection misses: the layer lists when new, the stage
// lists of the stage identities its entries lack, the stage classes when new.
void IncrementalEstimator::Impl::fill() {
  Structure& sc = *structure;
  LayerEntry* new_layer = layer->filled ? nullptr : layer;
  const bool need_edges = !edges->covers(sc) || !sc.has_classes;
  const bool need_steps = !steps->covers(sc) || !sc.has_classes;
  auto take_layers = [&](Schedule& sch) {
    new_layer->uses = comm_uses(sch.dense) | comm_uses(sch.moe) | comm_uses(sch.mtp);
    new_layer->dense = std::move(sch.dense);
    new_layer->moe = std::move(sch.moe);
    new_layer->mtp = std::move(sch.mtp);
    new_layer->filled = true;
  };
  if (new_layer && !need_edges && !need_steps) {
    // Only the layer lists: one stage with every layer (the lists do not depend on the
    // split; a layer kind's list is built when some stage runs such a layer).
    StageLayers all;
    for (const StageLayers& sl : sc.layers) {
      all.num_layers += sl.num_layers;
      all.num_moe_layers += sl.num_moe_layers;
      all.num_mtp_layers += sl.num_mtp_layers;
      all.num_recomputed_layers += sl.num_recomputed_layers;
      all.num_recomputed_moe_layers += sl.num_recomputed_moe_layers;
    }
    all.has_embedding = all.has_output = true;
    Schedule sch = build_schedule(s, m, {all}, {sc.params.front()},
                                  ScheduleParts{.layer_ops = true, .edge_ops = false, .step_ops = false});
    ++schedules_built;
    take_layers(sch);
    return;
  }
  // Layer lists already cached (new_layer == nullptr): build only the stage lists.
  Schedule sch = build_schedule(s, m, sc.layers, sc.params,
                                ScheduleParts{.layer_ops = new_layer != nullptr,
                                              .edge_ops = need_edges,
                                              .step_ops = need_steps,
                                              .ranks = &sc.reps});
  ++schedules_built;
  const size_t n = sch.stages.size();
  if (!sc.has_classes) {
    sc.classes.clear();
    sc.stage_class.assign(n, 0);
    for (size_t r = 0; r < n; ++r) {
      const StageSchedule& st = sch.stages[r];
      Structure::Class c;
      c.rank = static_cast<int>(r);
      c.first = r == 0;
      c.last = r + 1 == n;
      c.dense = st.dense;
      c.dense_recomputed = st.dense_recomputed;
      c.moe = st.moe;
      c.moe_recomputed = st.moe_recomputed;
      c.mtp = st.mtp;
      c.mtp_recomputed = st.mtp_recomputed;
      c.params = sc.params[r];
      int found = -1;
      for (size_t k = 0; k < sc.classes.size() && found < 0; ++k) {
        const Structure::Class& o = sc.classes[k];
        if (same_identity(o.first, o.last, o.params, c) && o.dense == c.dense &&
            o.dense_recomputed == c.dense_recomputed && o.moe == c.moe && o.moe_recomputed == c.moe_recomputed &&
            o.mtp == c.mtp && o.mtp_recomputed == c.mtp_recomputed)
          found = static_cast<int>(k);
      }
      if (found < 0) {
        // A class's first rank is the first of its (first, last, layers, parameters)
        // group, so its lists were built.
        assert(sc.reps[r]);
        found = static_cast<int>(sc.classes.size());
        sc.classes.push_back(c);
      }
      sc.stage_class[r] = found;
    }
    sc.has_classes = true;
  }
  if (new_layer) take_layers(sch);
  for (const Structure::Class& c : sc.classes) {
    StageSchedule& st = sch.stages[static_cast<size_t>(c.rank)];
    if (need_edges && edges->identity_of(c) < 0) {
      edges->identities.push_back({c.first, c.last, c.params,
                                   {std::move(st.pre_fwd), std::move(st.post_fwd), std::move(st.post_bwd),
                                    std::move(st.pre_bwd)}});
      for (const auto& l : edges->identities.back().lists) edges->uses |= comm_uses(l);
    }
    if (need_steps && steps->identity_of(c) < 0) {
      steps->uses |= comm_uses(st.step);
      steps->identities.push_back({c.first, c.last, c.params, std::move(st.step)});
    }
  }
}

// The timing of an entry's lists under the selection's topology and switches.
// `complete(e, t)`: t covers the entry as it is now (entries gain identities over time).
template <class Entry, class TimeAll>
const typename Entry::Timed& IncrementalEstimator::Impl::timed(Entry& e,
                                                                bool (*complete)(const Entry&,
                                                                                 const typename Entry::Timed&),
                                                                TimeAll&& time_all) {
  auto& tm = e.timings;
  const PassTimeSwitches sw = pass_time_switches(s.parallel);
  if (tm.last && tm.last_topo == topo && tm.last_switches == sw && complete(e, *tm.last)) return *tm.last;
  const PassTimeKey k = pass_time_key(e.uses, s.parallel, *topo);
  const typename Entry::Timed* found = nullptr;
  for (const auto& t : tm.timed)
    if (t.key == k && complete(e, t)) {
      found = &t;
      break;
    }
  if (!found) {
    auto& t = tm.timed.emplace_back();
    t.key = k;
    time_all(e, t);
    found = &t;
  }
  tm.last = found;
  tm.last_topo = topo;
  tm.last_switches = sw;
  return *found;
}

// Timings of the shared op lists, the stage inputs of every class but their step ops,
// the micro-batch times of the classes and the lower bound.
void IncrementalEstimator::Impl::compose() {
  if (composed) return;
  select_list_keys();
  const ComposeKey ck{selected_structure_key(), keys.topology_k, keys.layer_k, keys.edge_k,
                      pass_time_switches(s.parallel), m.vp, m.num_micro_batches};
  if (has_compose && key_equal(ck, compose_key)) {
    // Same structure, lists and timings as the last compose: only the step entry may differ.
    structure = c_structure;
    topo = c_topo;
    layer = c_layer;
    edges = c_edges;
    steps = lookup(last_steps, step_entries, selected_step_key(), [] { return std::make_unique<StepEntry>(); });
    if (!steps->covers(*structure)) fill();
    composed = true;
    return;
  }
  prepare_lists();
  const Structure& st = *structure;
  const HardwareSpec& hw = s.hardware;
  const ParallelSpec& par = s.parallel;
  const MeshTopology& t = *topo;
  const LayerEntry::Timed& lt = timed(
      *layer, +[](const LayerEntry&, const LayerEntry::Timed&) { return true; },
      [&](const LayerEntry& e, LayerEntry::Timed& out) {
        out.dense = layer_times(e.dense, par, t, hw);
        out.moe = layer_times(e.moe, par, t, hw);
        out.mtp = layer_times(e.mtp, par, t, hw);
      });
  const EdgeEntry::Timed& et = timed(
      *edges, +[](const EdgeEntry& e, const EdgeEntry::Timed& x) { return x.times.size() == e.identities.size(); },
      [&](const EdgeEntry& e, EdgeEntry::Timed& out) {
        for (const auto& id : e.identities) {
          const auto& l = id.lists;
          out.times.push_back(edge_times({&l[0], &l[1], &l[2], &l[3]}, par, t, hw));
        }
      });
  const size_t nc = st.classes.size();
  const Passes pk{&st, &lt, &et, m.vp, m.num_micro_batches};
  if (!(pk == passes_key) || passes.size() != nc) {
    passes_key = pk;
    inputs.resize(nc);
    for (size_t k = 0; k < nc; ++k) {
      const Structure::Class& c = st.classes[k];
      StageInputs& x = inputs[k];
      copy_layer_counts(c, x);
      const int e = edges->identity_of(c);
      assert(e >= 0);
      const auto& edge_times = et.times[static_cast<size_t>(e)];
      x.pre_fwd = &edge_times[0];
      x.post_fwd = &edge_times[1];
      x.post_bwd = &edge_times[2];
      x.pre_bwd = &edge_times[3];
      x.microbatch_time = nullptr;
    }
    StepInputs& si = step_inputs;
    si.dense = &lt.dense;
    si.moe = &lt.moe;
    si.mtp = &lt.mtp;
    si.stages = inputs.data();
    si.stage_input = st.stage_class.data();
    si.num_ranks = m.pp;
    si.vp = m.vp;
    si.num_micro_batches = m.num_micro_batches;
    passes.resize(nc);
    for (size_t k = 0; k < nc; ++k) passes[k] = stage_microbatch_time(inputs[k], si);
    // compose_step_time: step = pipeline + dp_exposed(b) + opt(b) + closing sync for the
    // bottleneck rank b, dp_exposed, opt >= 0, and the pipeline is at least
    // pipeline_makespan_lower_bound of the same chunk passes (one rank: m x its fwd + bwd).
    // The margin covers rounding (sums in another order).
    const double mb = std::max(1, m.num_micro_batches);
    double bound = 0;
    if (m.pp > 1) {
      std::vector<std::array<double, 2>> rank_fb(static_cast<size_t>(m.pp));
      for (int r = 0; r < m.pp; ++r) {
        const StageTime& x = passes[static_cast<size_t>(st.stage_class[static_cast<size_t>(r)])];
        rank_fb[static_cast<size_t>(r)] = {x.fwd, x.bwd};
      }
      bound = pipeline_makespan_lower_bound(m.pp, std::max(1, m.vp), m.num_micro_batches,
                                            pipeline_chunk_passes(s, si, rank_fb));
    } else {
      bound = mb * (passes[0].fwd + passes[0].bwd);
    }
    passes_lower_bound = bound * (1.0 - 1e-9);
    for (size_t k = 0; k < nc; ++k) inputs[k].microbatch_time = &passes[k];
  }
  lower_bound = passes_lower_bound;
  composed = true;
  compose_key = ck;
  has_compose = true;
  c_structure = structure;
  c_topo = topo;
  c_layer = layer;
  c_edges = edges;
}

IncrementalEstimator::IncrementalEstimator(const Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
IncrementalEstimator::~IncrementalEstimator() = default;

void IncrementalEstimator::select(const Scenario& s, const Mesh& m) {
  Impl& x = *impl_;
  copy_layout_inputs(s, x.s);
  assert(same_scope(s, x.s));
  x.m = m;
  x.reset_selection();
}

void IncrementalEstimator::select_sharding(const Scenario& s) {
  Impl& x = *impl_;
  ParallelSpec& p = x.s.parallel;
  p.data_parallel_sharding_strategy = s.parallel.data_parallel_sharding_strategy;
  p.use_distributed_optimizer = s.parallel.use_distributed_optimizer;
  p.overlap_param_gather = s.parallel.overlap_param_gather;
  assert(x.s == s);  // nothing else differed
  assert(derive_mesh(s).num_micro_batches == x.m.num_micro_batches);
  x.reset_sharding();
}

const Scenario& IncrementalEstimator::scenario() const { return impl_->s; }

const Memory& IncrementalEstimator::memory() {
  Impl& x = *impl_;
  const MemoryBaseKey& bk = x.selected_memory_base_key();
  const MemoryKey k = memory_key(bk, x.s);
  const size_t slot = static_cast<size_t>(k.sharding) * 2 + static_cast<size_t>(k.distributed_optimizer);
  assert(k.sharding >= 0 && k.distributed_optimizer >= 0 && slot < Impl::kShardingSlots);
  Impl::MemoryEntry* e = x.memory_entries.find(bk);
  if (e && e->filled[slot]) return e->full[slot];
  const Structure& st = x.structure_of();
  if (!e) {
    e = &x.memory_entries.insert(bk);
    e->filled.fill(false);
    memory_without_state(x.s, x.m, st.layers, e->base);
  }
  double unit = 0;
  if (shards_parameters(x.s)) {
    double& u = x.zero3_units[zero3_unit_key(x.m)];
    if (u == 0) u = zero3_unit_params(x.s, x.m);
    unit = u;
  }
  Memory& out = e->full[slot];
  out = e->base;
  add_model_state(x.s, x.m, st.layers, st.params, unit, out);
  e->filled[slot] = true;
  return out;
}

double IncrementalEstimator::step_time_lower_bound() {
  impl_->compose();
  return impl_->lower_bound;
}

StepTime IncrementalEstimator::step_time() {
  Impl& x = *impl_;
  x.compose();
  const HardwareSpec& hw = x.s.hardware;
  const MeshTopology& t = *x.topo;
  const StepEntry::Timed& st = x.timed(
      *x.steps, +[](const StepEntry& e, const StepEntry::Timed& y) { return y.times.size() == e.identities.size(); },
      [&](const StepEntry& e, StepEntry::Timed& out) {
        for (const auto& id : e.identities) out.times.push_back(step_op_times(id.lists, t, hw));
      });
  const Structure& structure = *x.structure;
  for (size_t k = 0; k < structure.classes.size(); ++k) {
    const int id = x.steps->identity_of(structure.classes[k]);
    assert(id >= 0);
    x.inputs[k].step = st.times[static_cast<size_t>(id)].data();
    x.inputs[k].num_step = static_cast<int>(st.times[static_cast<size_t>(id)].size());
  }
  return compose_step_time(x.s, x.step_inputs, structure.flops, false);
}

void IncrementalEstimator::clear() {
  Impl& x = *impl_;
  x.structures.clear();
  x.topologies.clear();
  x.layers.clear();
  x.edge_entries.clear();
  x.step_entries.clear();
  x.last_structure.clear();
  x.last_topology.clear();
  x.last_layer.clear();
  x.last_edges.clear();
  x.last_steps.clear();
  x.memory_entries.clear();
  x.zero3_units.clear();
  x.passes_key = {};
  x.has_compose = false;
  x.passes.clear();
  x.inputs.clear();
  x.reset_selection();
}

uint64_t IncrementalEstimator::schedules_built() const { return impl_->schedules_built; }

}  // namespace lcm
