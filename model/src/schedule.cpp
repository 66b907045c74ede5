// Per-op schedule of one training step (see schedule.hpp). Shapes follow Megatron-Core's
// modules (TE backend): column-parallel QKV / fc1, row-parallel out-proj / fc2, SP
// all-gather before and reduce-scatter after each TP region, vocab-parallel embedding and
// output layer, the MoE dispatchers (alltoall, allgather, flex), TE's CP implementations.
// The ops come from one generator (schedule_gen.hpp), which estimate_comm folds too.
// Sources: docs/reference/formulas.md §2-§4, docs/communication-model.md.
#include "lcm/model/schedule.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "schedule_gen.hpp"

namespace lcm {

std::string op_name(const Op& op, const char* prefix) {
  std::string n = prefix;
  n += op.base;
  switch (op.pass) {
    case Pass::kFwd: n += ".fwd"; break;
    case Pass::kRecompute: n += ".recompute"; break;
    case Pass::kBwd:
      n += ".bwd";
      if (op.part == GemmPart::kDgrad) n += ".dgrad";
      if (op.part == GemmPart::kWgrad) n += ".wgrad";
      break;
    case Pass::kStep: break;
  }
  return n;
}

namespace {

using sched::Elem;

// Collects a block's elements straight into its op lists: the forward list in execution
// order, the recompute list (forward ops rerun before the backward), and the backward list,
// built reversed (each element's backward ops pushed last-first) and turned round at the end.
class Collect {
 public:
  Collect(LayerOps& l, const sched::RecomputeSel& rc) : l_(l), rc_(rc) {}
  void operator()(const Elem& e) {
    sched::fwd_op(e, [&](const Op& o) { l_.fwd.push_back(o); });
    sched::recompute_op(e, rc_, [&](const Op& o) { l_.recompute.push_back(o); });
    const auto first = static_cast<std::ptrdiff_t>(l_.bwd.size());
    sched::bwd_ops(e, [&](const Op& o) { l_.bwd.push_back(o); });
    std::reverse(l_.bwd.begin() + first, l_.bwd.end());
  }

 private:
  LayerOps& l_;
  const sched::RecomputeSel& rc_;
};

// `fwd_capacity`: ops expected in the forward list (a layer's ~48; the stage edges' few).
template <class Gen>
LayerOps build(const sched::RecomputeSel& rc, Gen&& gen, size_t fwd_capacity = 48) {
  LayerOps l;
  l.fwd.reserve(fwd_capacity);
  if (rc.full || rc.modules != 0) l.recompute.reserve(fwd_capacity);
  l.bwd.reserve(fwd_capacity * 5 / 3);
  Collect c(l, rc);
  gen(c);
  std::reverse(l.bwd.begin(), l.bwd.end());
  return l;
}

}  // namespace

LayerOpsKey layer_ops_key(const Scenario& s, const Mesh& m) {
  const ParallelSpec& p = s.parallel;
  const auto& hs = p.hierarchical_context_parallel_sizes;
  const bool hierarchical = p.cp_comm_type == CpCommType::kA2AP2P && hs.size() == 2;
  return {.shards = shard_key(m),
          .micro_batch_size = s.training.micro_batch_size,
          .cp_comm_type = static_cast<int32_t>(p.cp_comm_type),
          .cp_a2a = hierarchical ? hs[0] : 0,
          .cp_p2p = hierarchical ? hs[1] : 0,
          .recompute_granularity = static_cast<int32_t>(p.recompute_granularity),
          .recompute_method = static_cast<int32_t>(p.recompute_method),
          .recompute_modules = static_cast<int32_t>(p.recompute_modules),
          .dispatcher = static_cast<int32_t>(s.model.moe_token_dispatcher_type),
          .fp8_dispatch = p.moe_fp8_dispatch};
}

EdgeOpsKey edge_ops_key(const Scenario& s, const Mesh& m) {
  return {.shards = shard_key(m), .split = pipeline_split_key(s, m), .micro_batch_size = s.training.micro_batch_size};
}

StepOpsKey step_ops_key(const Scenario& s, const Mesh& m) {
  const ParallelSpec& p = s.parallel;
  return {.shards = shard_key(m),
          .pp = m.pp,
          .dp = m.dp,
          .edp = m.edp,
          .micro_batch_size = s.training.micro_batch_size,
          .num_micro_batches = m.num_micro_batches,
          .first_stage_layers = p.num_layers_in_first_pipeline_stage,
          .last_stage_layers = p.num_layers_in_last_pipeline_stage,
          .sharding = static_cast<int32_t>(p.data_parallel_sharding_strategy),
          .distributed_optimizer = p.use_distributed_optimizer,
          .overlap_grad_reduce = p.overlap_grad_reduce,
          .overlap_param_gather = p.overlap_param_gather};
}

Schedule build_schedule(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                        const std::vector<GpuParams>& params, const ScheduleParts& parts) {
  const sched::Ctx x = sched::make_ctx(s, m);
  const ParallelSpec& par = s.parallel;
  Schedule out;
  out.num_micro_batches = m.num_micro_batches;
  out.vp = m.vp;
  int dense_layers = 0, moe_layers = 0, mtp_layers = 0;
  for (const StageLayers& sl : layers) {
    dense_layers += sl.num_layers - sl.num_moe_layers;
    moe_layers += sl.num_moe_layers;
    mtp_layers += sl.num_mtp_layers;
  }
  const sched::RecomputeSel layer_rc = sched::layer_recompute(par);
  if (parts.layer_ops) {
    if (dense_layers > 0) out.dense = build(layer_rc, [&](Collect& c) { sched::emit_layer(x, false, c); });
    if (moe_layers > 0) out.moe = build(layer_rc, [&](Collect& c) { sched::emit_layer(x, true, c); });
    if (mtp_layers > 0) out.mtp = build(sched::mtp_recompute(par), [&](Collect& c) { sched::emit_mtp(x, c); });
  }

  // TP-replicated parameters (SP grad sync) need the parameter count at tp = 1.
  std::vector<GpuParams> params_tp1;
  if (parts.step_ops && m.sp && m.tp > 1) params_tp1 = sched::gpu_params_at_tp1(s, m, layers);

  out.stages.reserve(layers.size());
  for (size_t r = 0; r < layers.size(); ++r) {
    const StageLayers& sl = layers[r];
    StageSchedule st;
    st.stage = static_cast<int>(r);
    st.dense = sl.num_layers - sl.num_moe_layers;
    st.moe = sl.num_moe_layers;
    st.mtp = sl.num_mtp_layers;
    const sched::RecomputeCounts rc = sched::recompute_counts(par, sl);
    // Without the layer lists the counts are the policy's (a count against an empty
    // recompute list adds nothing to any time).
    st.dense_recomputed = parts.layer_ops && out.dense.recompute.empty() ? 0 : rc.dense;
    st.moe_recomputed = parts.layer_ops && out.moe.recompute.empty() ? 0 : rc.moe;
    st.mtp_recomputed = parts.layer_ops && out.mtp.recompute.empty() ? 0 : rc.mtp;
    const bool first = r == 0, last = r + 1 == layers.size();
    if (parts.ranks && !(*parts.ranks)[r]) {
      out.stages.push_back(std::move(st));
      continue;
    }
    if (parts.edge_ops) {
      if (first) {
        LayerOps e = build({}, [&](Collect& c) { sched::emit_stage_embedding(x, c); }, 8);
        st.pre_fwd = std::move(e.fwd);
        st.pre_bwd = std::move(e.bwd);
      }
      if (last) {
        LayerOps h = build({}, [&](Collect& c) { sched::emit_stage_head(x, c); }, 8);
        st.post_fwd = std::move(h.fwd);
        st.post_bwd = std::move(h.bwd);
      }
      sched::emit_pp(x, first, last, [&](sched::StageList list, const Op& o) {
        switch (list) {
          case sched::StageList::kPreFwd: st.pre_fwd.push_back(o); break;
          case sched::StageList::kPostFwd: st.post_fwd.push_back(o); break;
          case sched::StageList::kPostBwd: st.post_bwd.insert(st.post_bwd.begin(), o); break;  // before the head's bwd
          case sched::StageList::kPreBwd: st.pre_bwd.push_back(o); break;
        }
      });
    }
    if (parts.step_ops) {
      const double replicated =
          params_tp1.empty() ? 0.0 : sched::tp_replicated_params(m, params[r].dense, params_tp1[r].dense);
      sched::emit_step(x, first, last, params[r], replicated, [&](const Op& o) { st.step.push_back(o); });
    }
    out.stages.push_back(std::move(st));
  }
  return out;
}

}  // namespace lcm
