// The layout evaluator (see evaluator_impl.hpp for what is shared and why it is exact).
#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

#include "evaluator_impl.hpp"
#include "plan_internal.hpp"

namespace lcm::plan {

namespace {

int64_t bits(double x) {
  int64_t v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

bool same_topology(const GroupTopology& a, const GroupTopology& b) {
  return a.size == b.size && a.nodes == b.nodes && a.per_node == b.per_node;
}

uint32_t dims_of(const std::vector<Op>& ops) {
  uint32_t mask = 0;
  for (const Op& op : ops)
    if (is_comm(op)) mask |= 1u << static_cast<unsigned>(op.coll.dim);
  return mask;
}

uint32_t dims_of(const LayerOps& l) { return dims_of(l.fwd) | dims_of(l.recompute) | dims_of(l.bwd); }

TimingKey timing_key(const MeshTopology& t, uint32_t mask, const ParallelSpec& par) {
  TimingKey k;
  for (size_t d = 0; d < kNumCommDims; ++d)
    if (mask & (1u << d)) k.topo[d] = t.dim[d];
  k.tp_comm_overlap = par.tp_comm_overlap;
  k.overlap_moe = par.overlap_moe_expert_parallel_comm;
  return k;
}

bool matches(const TimingKey& k, const MeshTopology& t, uint32_t mask, const ParallelSpec& par) {
  if (k.tp_comm_overlap != par.tp_comm_overlap || k.overlap_moe != par.overlap_moe_expert_parallel_comm) return false;
  for (size_t d = 0; d < kNumCommDims; ++d)
    if ((mask & (1u << d)) && !same_topology(k.topo[d], t.dim[d])) return false;
  return true;
}

bool same_identity(bool first, bool last, const GpuParams& p, const Structure::Class& c) {
  return first == c.first && last == c.last && bits(p.dense) == bits(c.params.dense) &&
         bits(p.expert) == bits(c.params.expert);
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
         a.num_recomputed_moe_layers == b.num_recomputed_moe_layers && bits(s.params[q].dense) == bits(s.params[r].dense) &&
         bits(s.params[q].expert) == bits(s.params[r].expert);
}

}  // namespace

template <class Lists, class Times>
int StageListsEntry<Lists, Times>::identity_of(const Structure::Class& c) const {
  for (size_t i = 0; i < identities.size(); ++i)
    if (same_identity(identities[i].first, identities[i].last, identities[i].params, c)) return static_cast<int>(i);
  return -1;
}

template <class Lists, class Times>
bool StageListsEntry<Lists, Times>::covers(const Structure& s) const {
  for (const Structure::Class& c : s.classes)
    if (identity_of(c) < 0) return false;
  return true;
}

Evaluator::Impl::Impl(const Scenario& b) : base(b), work(b) {}

void Evaluator::Impl::trim() {
  structures_.clear();
  topologies_.clear();
  layers_.clear();
  edges_.clear();
  steps_.clear();
  last_ = Last{};
}

const LayerEntry::Timed& Evaluator::Impl::timed(LayerEntry& e, const MeshTopology& topo) {
  const ParallelSpec& par = work.parallel;
  for (const LayerEntry::Timed& t : e.timed)
    if (matches(t.key, topo, e.dims, par)) return t;
  const HardwareSpec& hw = work.hardware;
  LayerEntry::Timed& t = e.timed.emplace_back();
  t.key = timing_key(topo, e.dims, par);
  t.dense = layer_times(e.dense, par, topo, hw);
  t.moe = layer_times(e.moe, par, topo, hw);
  t.mtp = layer_times(e.mtp, par, topo, hw);
  return t;
}

template <class Entry, class TimeOne>
const typename Entry::Timed& Evaluator::Impl::timed(Entry& e, const MeshTopology& topo, TimeOne&& time_one) {
  const ParallelSpec& par = work.parallel;
  // Entries gain identities over time; a timing covers the identities it was made for.
  for (const typename Entry::Timed& t : e.timed)
    if (t.times.size() == e.identities.size() && matches(t.key, topo, e.dims, par)) return t;
  typename Entry::Timed& t = e.timed.emplace_back();
  t.key = timing_key(topo, e.dims, par);
  for (const auto& id : e.identities) t.times.push_back(time_one(id.lists, par, topo, work.hardware));
  return t;
}

// One build_schedule for the current layout fills what is missing: the structure's stage
// classes, the layer lists, the stage identities of the edge and step entries. It builds
// only the parts it fills, and the stage lists only for one rank per distinct (first,
// last, layers, parameters): each rank's lists depend on nothing else.
void Evaluator::Impl::fill(const Mesh& m, Structure& structure, LayerEntry* layer, EdgeEntry* edges, StepEntry* steps) {
  const bool need_edges = !structure.has_classes || (edges && !edges->covers(structure));
  const bool need_steps = !structure.has_classes || (steps && !steps->covers(structure));
  if (layer && !need_edges && !need_steps) {
    // Only the layer lists are missing, and they do not depend on how the layers are
    // split over stages: build them from all layers on one stage (cheaper for deep
    // pipelines: no per-stage edge and step ops).
    StageLayers all;
    for (const StageLayers& sl : structure.layers) {
      all.num_layers += sl.num_layers;
      all.num_moe_layers += sl.num_moe_layers;
      all.num_mtp_layers += sl.num_mtp_layers;
      all.num_recomputed_layers += sl.num_recomputed_layers;
      all.num_recomputed_moe_layers += sl.num_recomputed_moe_layers;
    }
    all.has_embedding = all.has_output = true;
    Schedule sch = build_schedule(work, m, {all}, {structure.params.front()},
                                  ScheduleParts{.layer_ops = true, .edge_ops = false, .step_ops = false});
    ++schedules_built;
    layer->dims = dims_of(sch.dense) | dims_of(sch.moe) | dims_of(sch.mtp);
    layer->dense = std::move(sch.dense);
    layer->moe = std::move(sch.moe);
    layer->mtp = std::move(sch.mtp);
    return;
  }
  // Layer lists already cached (layer == nullptr): build only the stage lists.
  Schedule sch = build_schedule(
      work, m, structure.layers, structure.params,
      ScheduleParts{.layer_ops = layer != nullptr, .edge_ops = need_edges, .step_ops = need_steps, .ranks = &structure.reps});
  ++schedules_built;
  const size_t n = sch.stages.size();
  if (!structure.has_classes) {
    structure.classes.clear();
    structure.stage_class.assign(n, 0);
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
      c.params = structure.params[r];
      int found = -1;
      for (size_t k = 0; k < structure.classes.size() && found < 0; ++k) {
        const Structure::Class& o = structure.classes[k];
        if (same_identity(o.first, o.last, o.params, c) && o.dense == c.dense &&
            o.dense_recomputed == c.dense_recomputed && o.moe == c.moe && o.moe_recomputed == c.moe_recomputed &&
            o.mtp == c.mtp && o.mtp_recomputed == c.mtp_recomputed)
          found = static_cast<int>(k);
      }
      if (found < 0) {
        // A class's first rank is the first of its (first, last, layers, parameters)
        // group, so its lists were built.
        assert(structure.reps[r]);
        found = static_cast<int>(structure.classes.size());
        structure.classes.push_back(c);
      }
      structure.stage_class[r] = found;
    }
    structure.has_classes = true;
  }
  if (layer) {
    layer->dims = dims_of(sch.dense) | dims_of(sch.moe) | dims_of(sch.mtp);
    layer->dense = std::move(sch.dense);
    layer->moe = std::move(sch.moe);
    layer->mtp = std::move(sch.mtp);
  }
  for (const Structure::Class& c : structure.classes) {
    StageSchedule& st = sch.stages[static_cast<size_t>(c.rank)];
    if (need_edges && edges && edges->identity_of(c) < 0) {
      edges->identities.push_back({c.first, c.last, c.params,
                                   {std::move(st.pre_fwd), std::move(st.post_fwd), std::move(st.post_bwd),
                                    std::move(st.pre_bwd)}});
      for (const auto& l : edges->identities.back().lists) edges->dims |= dims_of(l);
    }
    if (need_steps && steps && steps->identity_of(c) < 0) {
      steps->dims |= dims_of(st.step);
      steps->identities.push_back({c.first, c.last, c.params, std::move(st.step)});
    }
  }
}

int Evaluator::Impl::validate_each(Layout& l, const DpSharding* shardings, int count, ShardingResult* results) {
  l.sharding = shardings[0];
  apply_layout_into(base, l, work);
  // The layout's rules once; only the sharding rules per sharding (validate_layout reads
  // no sharding knob, so this equals validate_scenario for each sharding). validate_layout
  // reads no rank order either: layouts that differ only in it share its result.
  // validate_sharding reads only the sharding knobs, which apply_layout sets from the
  // sharding and the base: one result per sharding for the whole search.
  Layout key = l;
  key.sharding = DpSharding::kNoShard;
  key.pp_before_dp = false;
  if (!last_.has_validation || !(last_.validation_key == key)) {
    last_.validation = validate_layout(work);
    last_.validation_key = key;
    last_.has_validation = true;
  }
  const LayoutValidation& layout = last_.validation;
  int first_valid = -1;
  for (int i = 0; i < count; ++i) {
    ShardingResult& r = results[i];
    l.sharding = shardings[i];
    apply_sharding_into(base, l.sharding, work);
    r.problems = layout.problems;
    if (layout.sizes_ok) {
      const size_t s = static_cast<size_t>(l.sharding);
      if (!sharding_checked_[s]) {
        sharding_problems_[s] = validate_sharding(work);
        sharding_checked_[s] = true;
      }
      r.problems.insert(r.problems.end(), sharding_problems_[s].begin(), sharding_problems_[s].end());
    }
    ++validations;
    r.timed = false;
    r.bounded = false;
    r.status = r.problems.empty() ? Outcome::Status::kFits : Outcome::Status::kInvalid;
    if (r.problems.empty() && first_valid < 0) first_valid = i;
  }
  return first_valid;
}

Structure& Evaluator::Impl::structure_of(const Layout& l, const Mesh& m) {
  const IntKey<9> k{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp,
                     static_cast<int>(l.recompute)}};
  if (!last_.structure || !(last_.structure_key == k)) {
    auto& slot = structures_[k];
    if (!slot) {
      slot = std::make_unique<Structure>();
      slot->layers = stage_layers(work, m);
      slot->params = gpu_params(work, m, slot->layers);
      slot->flops = count_flops(work, m);
      const size_t n = slot->layers.size();
      slot->reps.assign(n, 1);
      for (size_t r = 1; r < n; ++r)
        for (size_t q = 0; q < r && slot->reps[r]; ++q)
          if (slot->reps[q] && same_rank_inputs(*slot, q, r)) slot->reps[r] = 0;
    }
    last_.structure = slot.get();
    last_.structure_key = k;
  }
  return *last_.structure;
}

// The memory and step-op slots are by sharding; the rest of their key is the layout's.
void Evaluator::Impl::select_slots(const Layout& l) {
  const int cpc = l.cp > 1 ? static_cast<int>(l.cp_comm) : 0;
  const int a2a = l.cp > 1 && l.cp_comm == CpCommType::kA2AP2P ? l.cp_a2a : 0;
  const IntKey<13> mk{{l.tp, l.cp, cpc, a2a, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs,
                       static_cast<int>(l.recompute), work.parallel.overlap_moe_expert_parallel_comm ? 1 : 0}};
  if (!(last_.memory_key == mk)) {
    last_.memory_key = mk;
    last_.memory_valid = {};
  }
  const IntKey<9> tk{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.ep, l.etp, l.mbs, 0}};
  if (!(last_.step_key == tk)) {
    last_.step_key = tk;
    last_.steps = {};
  }
}

const Metrics& Evaluator::Impl::memory_of(size_t sharding, const Mesh& m, const Structure& structure) {
  if (!last_.memory_valid[sharding]) {
    estimate_memory(work, m, structure.layers, structure.params, memory_);
    memory_metrics(memory_, last_.memory[sharding]);
    last_.memory_valid[sharding] = true;
  }
  return last_.memory[sharding];
}

// Topology, layer and edge entries of the layout (any sharding); their timings and the
// stage inputs except the step ops come later, in compose_inputs.
void Evaluator::Impl::share(const Layout& l, const Mesh& m, Shared& sh) {
  auto& topo_slot = topologies_[IntKey<7>{{m.tp, m.cp, m.pp, m.ep, m.etp, l.pp_before_dp ? 1 : 0, 0}}];
  if (!topo_slot) topo_slot = std::make_unique<MeshTopology>(mesh_topology(work, m));
  sh.topo = topo_slot.get();
  const int cpc = l.cp > 1 ? static_cast<int>(l.cp_comm) : 0;
  const int a2a = l.cp > 1 && l.cp_comm == CpCommType::kA2AP2P ? l.cp_a2a : 0;
  const int disp = has_moe(base.model) ? static_cast<int>(l.dispatcher) : -1;
  auto& layer_slot =
      layers_[IntKey<9>{{l.tp, l.cp, cpc, a2a, l.ep, l.etp, l.mbs, static_cast<int>(l.recompute), disp}}];
  if (!layer_slot) {
    layer_slot = std::make_unique<LayerEntry>();
    sh.new_layer = layer_slot.get();
  }
  sh.layer = layer_slot.get();
  const IntKey<10> ek{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs, 0}};
  if (!last_.edges || !(last_.edge_key == ek)) {
    auto& slot = edges_[ek];
    if (!slot) slot = std::make_unique<EdgeEntry>();
    last_.edges = slot.get();
    last_.edge_key = ek;
  }
  sh.edges = last_.edges;
}

StepEntry& Evaluator::Impl::steps_of(const Layout& l, size_t sharding) {
  if (!last_.steps[sharding]) {
    auto& slot = steps_[IntKey<10>{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.ep, l.etp, l.mbs,
                                    static_cast<int>(sharding), 0}}];
    if (!slot) slot = std::make_unique<StepEntry>();
    last_.steps[sharding] = slot.get();
  }
  return *last_.steps[sharding];
}

// Timings of the shared op lists and the stage inputs of every class but their step ops.
void Evaluator::Impl::compose_inputs(const Mesh& m, Structure& structure, Shared& sh) {
  const size_t nc = structure.classes.size();
  if (inputs_.size() < nc) inputs_.resize(nc);
  StageInputs* in = inputs_.data();
  sh.lt = &timed(*sh.layer, *sh.topo);
  sh.et = &timed(*sh.edges, *sh.topo,
                 [](const auto& lists, const ParallelSpec& par, const MeshTopology& t, const HardwareSpec& hw) {
                   return std::array<PassTime, 4>{pass_time(lists[0], par, t, hw), pass_time(lists[1], par, t, hw),
                                                  pass_time(lists[2], par, t, hw), pass_time(lists[3], par, t, hw)};
                 });
  for (size_t k = 0; k < nc; ++k) {
    const Structure::Class& c = structure.classes[k];
    StageInputs& x = in[k];
    x.dense = c.dense;
    x.dense_recomputed = c.dense_recomputed;
    x.moe = c.moe;
    x.moe_recomputed = c.moe_recomputed;
    x.mtp = c.mtp;
    x.mtp_recomputed = c.mtp_recomputed;
    const int e = sh.edges->identity_of(c);
    assert(e >= 0);
    const auto& edge_times = sh.et->times[static_cast<size_t>(e)];
    x.pre_fwd = &edge_times[0];
    x.post_fwd = &edge_times[1];
    x.post_bwd = &edge_times[2];
    x.pre_bwd = &edge_times[3];
    x.microbatch_time = nullptr;
  }
  StepInputs& si = sh.si;
  si.dense = &sh.lt->dense;
  si.moe = &sh.lt->moe;
  si.mtp = &sh.lt->mtp;
  si.stages = in;
  si.stage_input = structure.stage_class.data();
  si.num_ranks = m.pp;
  si.vp = m.vp;
  si.num_micro_batches = m.num_micro_batches;
  // The micro-batch times of each class do not depend on the step ops: shared by the
  // shardings (and by the next layouts while the inputs stay the same).
  const void* pk[3] = {&structure, sh.lt, sh.et};
  if (!std::equal(pk, pk + 3, last_.passes_key) || last_.passes.size() != nc) {
    std::copy(pk, pk + 3, last_.passes_key);
    last_.passes.resize(nc);
    for (size_t k = 0; k < nc; ++k) last_.passes[k] = stage_microbatch_time(in[k], si);
    double fb_max = 0, fb_sum = 0;
    for (int r = 0; r < m.pp; ++r) {
      const StageTime& t = last_.passes[static_cast<size_t>(structure.stage_class[static_cast<size_t>(r)])];
      fb_max = std::max(fb_max, t.fwd + t.bwd);
      fb_sum += t.fwd + t.bwd;
    }
    last_.passes_fb_max = fb_max;
    last_.passes_fb_sum = fb_sum;
  }
  // compose_step_time: step = m * fb(b) + (sum fb - fb(b)) / vp + dp_exposed(b) + opt(b)
  // for the bottleneck rank b, which maximises fb + (dp_exposed + opt) / m with
  // dp_exposed, opt >= 0; so step >= m * max fb + (sum fb - max fb) / vp. The margin
  // covers rounding (sums in another order).
  const double mb = std::max(1, m.num_micro_batches);
  sh.lower_bound = (mb * last_.passes_fb_max + (last_.passes_fb_sum - last_.passes_fb_max) / std::max(1, m.vp)) *
                   (1.0 - 1e-9);
  for (size_t k = 0; k < nc; ++k) in[k].microbatch_time = &last_.passes[k];
  sh.composed = true;
}

void Evaluator::Impl::evaluate_shardings(const Layout& layout, const DpSharding* shardings, int count,
                                         ShardingResult* results, double time_miss_bytes, double fit_bound,
                                         double miss_bound) {
  Layout l = layout;
  // 1. Megatron's rules, per layout.
  const int first_valid = validate_each(l, shardings, count, results);
  if (first_valid < 0) return;
  l.sharding = shardings[first_valid];
  apply_sharding_into(base, l.sharding, work);

  // What the shardings share (none of it reads the sharding strategy).
  const Mesh m = derive_mesh(work);
  Structure& structure = structure_of(l, m);
  select_slots(l);
  Shared sh;
  for (int i = first_valid; i < count; ++i) {
    ShardingResult& r = results[i];
    if (r.status == Outcome::Status::kInvalid) continue;
    const size_t s = static_cast<size_t>(shardings[i]);
    if (l.sharding != shardings[i]) {
      l.sharding = shardings[i];
      apply_sharding_into(base, l.sharding, work);
    }
    // 2. Memory.
    const Metrics& mem = memory_of(s, m, structure);
    Metrics& out = r.metrics;
    out.peak_bytes = mem.peak_bytes;
    out.allocated_peak_bytes = mem.allocated_peak_bytes;
    out.worst_stage = mem.worst_stage;
    out.fits = mem.fits;
    out.hbm_bytes = mem.hbm_bytes;
    out.miss_bytes = mem.miss_bytes;
    out.miss_stage = mem.miss_stage;
    r.status = mem.fits ? Outcome::Status::kFits : Outcome::Status::kOutOfMemory;
    if (!mem.fits && mem.miss_bytes > time_miss_bytes) continue;

    // 3. Op lists (one schedule fills what is missing), timings, composition.
    if (!sh.topo) share(l, m, sh);
    StepEntry& steps = steps_of(l, s);
    if (sh.new_layer || !structure.has_classes || !sh.edges->covers(structure) || !steps.covers(structure)) {
      fill(m, structure, sh.new_layer, sh.edges, &steps);
      sh.new_layer = nullptr;
    }
    if (!sh.composed) compose_inputs(m, structure, sh);
    r.timed = true;
    if (sh.lower_bound > (mem.fits ? fit_bound : miss_bound)) {
      r.bounded = true;
      continue;
    }
    const StepEntry::Timed& st =
        timed(steps, *sh.topo, [](const auto& lists, const ParallelSpec&, const MeshTopology& t, const HardwareSpec& hw) {
          return step_op_times(lists, t, hw);
        });
    for (size_t k = 0; k < structure.classes.size(); ++k) {
      const int id = steps.identity_of(structure.classes[k]);
      assert(id >= 0);
      inputs_[k].step = st.times[static_cast<size_t>(id)].data();
      inputs_[k].num_step = static_cast<int>(st.times[static_cast<size_t>(id)].size());
    }
    time_metrics(compose_step_time(work, sh.si, structure.flops, false), out);
  }
}

Evaluator::Evaluator(const Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
Evaluator::~Evaluator() = default;

Outcome Evaluator::evaluate(const Layout& l) {
  ShardingResult r;
  impl_->evaluate_shardings(l, &l.sharding, 1, &r);
  Outcome o;
  o.status = r.status;
  o.has_time = r.timed;
  if (r.status == Outcome::Status::kInvalid) o.problems = std::move(r.problems);
  else o.metrics = r.metrics;
  return o;
}

}  // namespace lcm::plan
