// The layout evaluator (see evaluator_impl.hpp for what is shared and why it is exact).
#include <bit>
#include <cassert>
#include <cstring>

#include "evaluator_impl.hpp"
#include "lcm/model/estimate.hpp"
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
    if (op.kind == OpKind::kCollective || op.kind == OpKind::kSendRecv) mask |= 1u << static_cast<unsigned>(op.coll.dim);
  return mask;
}

uint32_t dims_of(const LayerOps& l) { return dims_of(l.fwd) | dims_of(l.recompute) | dims_of(l.bwd); }

// The topology of the dimensions in `mask` (others left default).
std::array<GroupTopology, kNumCommDims> masked(const MeshTopology& t, uint32_t mask) {
  std::array<GroupTopology, kNumCommDims> out{};
  for (size_t d = 0; d < kNumCommDims; ++d)
    if (mask & (1u << d)) out[d] = t.dim[d];
  return out;
}

TimingKey timing_key(const MeshTopology& t, uint32_t mask, const ParallelSpec& par) {
  TimingKey k;
  k.topo = masked(t, mask);
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

}  // namespace

void memory_metrics(const Memory& mem, Metrics& m) {
  m.peak_bytes = mem.peak_bytes;
  m.allocated_peak_bytes = mem.allocated_peak_bytes;
  m.worst_stage = mem.worst_stage;
  m.fits = mem.fits;
  m.hbm_bytes = mem.hbm_bytes;
  m.miss_bytes = 0;
  m.miss_stage = 0;
  for (size_t r = 0; r < mem.stages.size(); ++r) {
    const double miss = mem.stages[r].peak_high - mem.hbm_bytes;
    if (r == 0 || miss > m.miss_bytes) {
      m.miss_bytes = miss;
      m.miss_stage = mem.stages[r].stage;
    }
  }
}

void time_metrics(const StepTime& t, Metrics& m) {
  m.step_s = t.step_s;
  m.tokens_per_s_per_gpu = t.tokens_per_s_per_gpu;
  m.mfu = t.mfu;
  m.hfu = t.hfu;
  m.bubble = t.bubble;
  m.pipeline = t.pipeline;
  m.dp_exposed = t.dp_exposed;
  m.optimizer = t.optimizer;
  m.exposed_comm = t.exposed_comm;
  m.compute = t.compute;
  m.bottleneck_stage = t.bottleneck_stage;
}

Metrics metrics_of_estimate(const Scenario& s) {
  const Estimate e = estimate(s, EstimateOptions{.with_time = true});
  Metrics m;
  time_metrics(e.time, m);
  memory_metrics(e.memory, m);
  return m;
}

Evaluator::Impl::Impl(const Scenario& b) : base(b), work(b) {}

void Evaluator::Impl::trim() {
  validation.clear();
  problem_sets.clear();
  layers.clear();
  stages.clear();
  structures.clear();
  topologies.clear();
  last_structure = nullptr;
  last_stage = nullptr;
  last_verdict = -2;
  memory.valid = false;
}

int StageEntry::identity_of(const Structure::Class& c) const {
  for (size_t i = 0; i < identities.size(); ++i) {
    const Lists& x = identities[i];
    if (x.first == c.first && x.last == c.last && bits(x.params.dense) == bits(c.params.dense) &&
        bits(x.params.expert) == bits(c.params.expert))
      return static_cast<int>(i);
  }
  return -1;
}

const LayerEntry::Timed& Evaluator::Impl::timed(LayerEntry& e, const MeshTopology& topo) {
  const ParallelSpec& par = work.parallel;
  for (const LayerEntry::Timed& t : e.timed)
    if (matches(t.key, topo, e.dims, par)) return t;
  const HardwareSpec& hw = work.hardware;
  LayerEntry::Timed t;
  t.key = timing_key(topo, e.dims, par);
  t.dense = layer_times(e.dense, par, topo, hw);
  t.moe = layer_times(e.moe, par, topo, hw);
  t.mtp = layer_times(e.mtp, par, topo, hw);
  e.timed.push_back(std::move(t));
  return e.timed.back();
}

const StageEntry::Timed& Evaluator::Impl::timed(StageEntry& e, const MeshTopology& topo) {
  const ParallelSpec& par = work.parallel;
  for (const StageEntry::Timed& t : e.timed)
    if (matches(t.key, topo, e.dims, par)) return t;
  const HardwareSpec& hw = work.hardware;
  StageEntry::Timed t;
  t.key = timing_key(topo, e.dims, par);
  for (const StageEntry::Lists& c : e.identities) {
    t.edges.push_back({pass_time(c.edges[0], par, topo, hw), pass_time(c.edges[1], par, topo, hw),
                       pass_time(c.edges[2], par, topo, hw), pass_time(c.edges[3], par, topo, hw)});
    t.step.push_back(step_op_times(c.step, topo, hw));
  }
  e.timed.push_back(std::move(t));
  return e.timed.back();
}

// One build_schedule for the current layout fills what is missing: the layer lists, the
// structure's stage classes, the stage lists.
void Evaluator::Impl::fill(const Mesh& m, Structure& structure, LayerEntry* layer_entry, StageEntry* stage_entry) {
  const Schedule sch = build_schedule(work, m, structure.layers, structure.params);
  ++schedules_built;
  const size_t n = sch.stages.size();
  if (layer_entry) {
    layer_entry->dense = sch.dense;
    layer_entry->moe = sch.moe;
    layer_entry->mtp = sch.mtp;
    layer_entry->dims = dims_of(sch.dense) | dims_of(sch.moe) | dims_of(sch.mtp);
  }
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
        if (o.first == c.first && o.last == c.last && o.dense == c.dense && o.dense_recomputed == c.dense_recomputed &&
            o.moe == c.moe && o.moe_recomputed == c.moe_recomputed && o.mtp == c.mtp &&
            o.mtp_recomputed == c.mtp_recomputed && bits(o.params.dense) == bits(c.params.dense) &&
            bits(o.params.expert) == bits(c.params.expert))
          found = static_cast<int>(k);
      }
      if (found < 0) {
        found = static_cast<int>(structure.classes.size());
        structure.classes.push_back(c);
      }
      structure.stage_class[r] = found;
    }
    structure.has_classes = true;
  }
  if (stage_entry) {
    stage_entry->identities.clear();
    stage_entry->dims = 0;
    for (const Structure::Class& c : structure.classes) {
      if (stage_entry->identity_of(c) >= 0) continue;
      const StageSchedule& st = sch.stages[static_cast<size_t>(c.rank)];
      StageEntry::Lists lists{c.first, c.last, c.params, {st.pre_fwd, st.post_fwd, st.post_bwd, st.pre_bwd}, st.step};
      for (const auto& l : lists.edges) stage_entry->dims |= dims_of(l);
      stage_entry->dims |= dims_of(lists.step);
      stage_entry->identities.push_back(std::move(lists));
    }
  }
}

Outcome::Status Evaluator::Impl::evaluate(const Layout& l, Metrics& out, int& problem_set, bool& is_timed,
                                          double time_miss_bytes) {
  apply_layout_into(base, l, work);
  const ParallelSpec& p = work.parallel;
  const int tpo = p.tp_comm_overlap ? 1 : 0, pgo = p.overlap_param_gather ? 1 : 0,
            moeo = p.overlap_moe_expert_parallel_comm ? 1 : 0;
  const int cpc = l.cp > 1 ? static_cast<int>(l.cp_comm) : 0;
  const int a2a = l.cp > 1 && l.cp_comm == CpCommType::kA2AP2P ? l.cp_a2a : 0;
  const int rc = static_cast<int>(l.recompute);
  const int sh = static_cast<int>(l.sharding);
  const int disp = base.model.num_experts > 0 ? static_cast<int>(l.dispatcher) : -1;
  const int order = l.pp_before_dp ? 1 : 0;
  is_timed = false;

  // 1. Megatron's rules.
  const IntKey<18> vk{{l.tp, l.cp, cpc, a2a, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs,
                       rc, l.sharding == DpSharding::kNoShard ? 0 : 1, moeo ? disp : -1, tpo, pgo, moeo, 0}};
  if (last_verdict == -2 || !(last_validation_key == vk)) {
    auto [verdict, inserted] = validation.find_or_insert(vk);
    if (inserted) {
      *verdict = -1;
      std::vector<Problem> problems = validate_scenario(work);
      ++validations;
      if (!problems.empty()) {
        *verdict = static_cast<int>(problem_sets.size());
        problem_sets.push_back(std::move(problems));
      }
    }
    last_validation_key = vk;
    last_verdict = *verdict;
  }
  if (last_verdict >= 0) {
    problem_set = last_verdict;
    return Outcome::Status::kInvalid;
  }

  const Mesh m = derive_mesh(work);

  // 2. Stage structure: layers, parameters, FLOPs.
  const IntKey<9> sk{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, rc}};
  if (!last_structure || !(last_structure_key == sk)) {
    auto& slot = structures[sk];
    if (!slot) {
      slot = std::make_unique<Structure>();
      slot->layers = stage_layers(work, m);
      slot->params = gpu_params(work, m, slot->layers);
      slot->flops = count_flops(work, m);
    }
    last_structure = slot.get();
    last_structure_key = sk;
  }
  Structure& structure = *last_structure;

  // 3. Memory.
  const IntKey<16> mk{{l.tp, l.cp, cpc, a2a, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs,
                       rc, sh, tpo, pgo, moeo}};
  if (!memory.valid || !(memory.key == mk)) {
    memory.key = mk;
    memory.valid = true;
    memory_metrics(estimate_memory(work, m, structure.layers, structure.params), memory.m);
  }
  const Metrics& mem = memory.m;
  out.peak_bytes = mem.peak_bytes;
  out.allocated_peak_bytes = mem.allocated_peak_bytes;
  out.worst_stage = mem.worst_stage;
  out.fits = mem.fits;
  out.hbm_bytes = mem.hbm_bytes;
  out.miss_bytes = mem.miss_bytes;
  out.miss_stage = mem.miss_stage;
  const Outcome::Status status = mem.fits ? Outcome::Status::kFits : Outcome::Status::kOutOfMemory;
  if (!mem.fits && mem.miss_bytes > time_miss_bytes) return status;

  // 4. Topology of the groups under this rank order.
  auto& topo_slot = topologies[IntKey<7>{{m.tp, m.cp, m.pp, m.ep, m.etp, order, 0}}];
  if (!topo_slot) topo_slot = std::make_unique<MeshTopology>(mesh_topology(work, m));
  const MeshTopology& topo = *topo_slot;

  // 5. Op lists: layer kinds, stage edges and step ops.
  auto& layer_slot = layers[IntKey<9>{{l.tp, l.cp, cpc, a2a, l.ep, l.etp, l.mbs, rc, disp}}];
  LayerEntry* new_layer = nullptr;
  if (!layer_slot) {
    layer_slot = std::make_unique<LayerEntry>();
    new_layer = layer_slot.get();
  }
  LayerEntry& layer_entry = *layer_slot;
  const IntKey<10> gk{{l.tp, l.cp, l.pp, l.first_stage_layers, l.last_stage_layers, l.vl, l.ep, l.etp, l.mbs, sh}};
  StageEntry* new_stage = nullptr;
  if (!last_stage || !(last_stage_key == gk)) {
    auto& slot = stages[gk];
    if (!slot) {
      slot = std::make_unique<StageEntry>();
      new_stage = slot.get();
    }
    last_stage = slot.get();
    last_stage_key = gk;
  }
  if (new_layer || new_stage || !structure.has_classes) fill(m, structure, new_layer, new_stage);
  StageEntry& stage_entry = *last_stage;

  // 6. Compose.
  const LayerEntry::Timed& lt = timed(layer_entry, topo);
  const StageEntry::Timed& st = timed(stage_entry, topo);
  const size_t nc = structure.classes.size();
  StageInputs fixed[8];
  std::vector<StageInputs> many;
  StageInputs* in = fixed;
  if (nc > 8) {
    many.resize(nc);
    in = many.data();
  }
  for (size_t k = 0; k < nc; ++k) {
    const Structure::Class& c = structure.classes[k];
    StageInputs& x = in[k];
    x.dense = c.dense;
    x.dense_recomputed = c.dense_recomputed;
    x.moe = c.moe;
    x.moe_recomputed = c.moe_recomputed;
    x.mtp = c.mtp;
    x.mtp_recomputed = c.mtp_recomputed;
    const int id = stage_entry.identity_of(c);
    assert(id >= 0);
    const size_t i = static_cast<size_t>(id);
    x.pre_fwd = &st.edges[i][0];
    x.post_fwd = &st.edges[i][1];
    x.post_bwd = &st.edges[i][2];
    x.pre_bwd = &st.edges[i][3];
    x.step = st.step[i].data();
    x.num_step = static_cast<int>(st.step[i].size());
  }
  StepInputs si;
  si.dense = &lt.dense;
  si.moe = &lt.moe;
  si.mtp = &lt.mtp;
  si.stages = in;
  si.stage_input = structure.stage_class.data();
  si.num_ranks = m.pp;
  si.vp = m.vp;
  si.num_micro_batches = m.num_micro_batches;
  time_metrics(compose_step_time(work, si, structure.flops, false), out);
  is_timed = true;
  return status;
}

Evaluator::Evaluator(const Scenario& base) : impl_(new Impl(base)) {}
Evaluator::~Evaluator() { delete impl_; }

Outcome Evaluator::evaluate(const Layout& l) {
  Outcome o;
  int set = -1;
  bool timed = false;
  o.status = impl_->evaluate(l, o.metrics, set, timed);
  o.has_time = timed;
  if (o.status == Outcome::Status::kInvalid) {
    o.problems = impl_->problem_sets[static_cast<size_t>(set)];
    o.metrics = Metrics{};
  }
  return o;
}

}  // namespace lcm::plan
