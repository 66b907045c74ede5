// Per-item and per-dimension communication of one layout (see comm_breakdown.hpp).
#include "lcm/planner/search/comm_breakdown.hpp"

#include "lcm/model/schedule.hpp"

namespace lcm::plan {

CommBreakdown comm_breakdown(const Scenario& s) {
  CommBreakdown out;
  out.estimate = estimate(s, EstimateOptions{.with_time = true});
  const Estimate& e = out.estimate;
  const Mesh& m = e.mesh;
  out.topology = mesh_topology(s, m);
  out.stage = e.comm.stage;
  const Schedule sched = build_schedule(s, m, e.stage_layers, e.gpu_params);
  const StageSchedule& st = sched.stages[static_cast<size_t>(out.stage)];
  const double mb = m.num_micro_batches;

  for (int i = 0; i < e.comm.num_items; ++i) out.items.push_back({e.comm.items[static_cast<size_t>(i)], 0.0});
  std::array<double, kNumCommDims> dim_time{}, dim_step_time{};
  // Time of `times` executions of each op of a list, by item (its CommItemId, as
  // estimate_comm matches them) and by dimension.
  auto add = [&](const std::vector<Op>& ops, double times, bool step) {
    if (times <= 0) return;
    for (const Op& op : ops) {
      if (!is_comm(op)) continue;
      const double t = op_time(op, out.topology, s.hardware) * op.calls * times;
      if (step) {
        out.step_time_s += t;
        dim_step_time[static_cast<size_t>(op.coll.dim)] += t;
      } else {
        dim_time[static_cast<size_t>(op.coll.dim)] += t;
      }
      bool found = false;
      for (CommItemTime& it : out.items)
        if (op.item != CommItemId::kNone && it.item.id == op.item) {
          it.time_s += t;
          found = true;
          break;
        }
      if (found) continue;
      const std::string name = op_name(op, "");
      bool merged = false;
      for (UncountedComm& u : out.uncounted)
        if (u.op == name) {
          u.time_s += t;
          merged = true;
        }
      if (!merged) out.uncounted.push_back({name, op.coll.dim, op.coll.kind, op.coll.group_size, t});
    }
  };
  auto add_layer = [&](const LayerOps& l, int layers, int recomputed) {
    add(l.fwd, mb * layers, false);
    add(l.recompute, mb * recomputed, false);
    add(l.bwd, mb * layers, false);
  };
  add_layer(sched.dense, st.dense, st.dense_recomputed);
  add_layer(sched.moe, st.moe, st.moe_recomputed);
  add_layer(sched.mtp, st.mtp, st.mtp_recomputed);
  for (const std::vector<Op>* l : {&st.pre_fwd, &st.post_fwd, &st.post_bwd, &st.pre_bwd}) add(*l, mb, false);
  add(st.step, 1.0, true);

  const StageTime& t = e.time.stages[static_cast<size_t>(out.stage)];
  for (int d = 0; d < kNumCommDims; ++d) {
    const size_t i = static_cast<size_t>(d);
    DimComm dc;
    dc.dim = static_cast<CommDim>(d);
    dc.group = out.topology.dim[i];
    dc.sent_bytes = e.comm.sent_bytes_by_dim[i];
    dc.time_s = dim_time[i];
    dc.exposed_s = mb * t.exposed_comm[i];
    dc.hidden_s = mb * t.hidden_comm[i];
    dc.step_time_s = dim_step_time[i];
    out.dims.push_back(dc);
  }
  out.step_exposed_s = t.step_exposed;
  out.step_hidden_s = t.step_hidden;
  return out;
}

}  // namespace lcm::plan
