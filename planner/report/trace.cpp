// Predicted Chrome trace of one step (see trace.hpp). Only places ops in time: every
// duration comes from the model's op_time(); the pipeline order is 1F1B.
#include "lcm/planner/report/trace.hpp"

#include <algorithm>
#include <cassert>
#include <string>
#include <vector>

#include "lcm/model/pipeline_schedule.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/timing.hpp"

namespace lcm::report {

namespace {

using nlohmann::ordered_json;

constexpr const char* kStreamNames[kNumStreams] = {"compute", "TP", "CP", "EP", "DP", "PP"};

int tid(Stream s) { return static_cast<int>(s); }

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kFwd: return "fwd";
    case Pass::kBwd: return "bwd";
    case Pass::kRecompute: return "recompute";
    case Pass::kStep: return "step";
  }
  return "";
}

// Which layer a per-layer op list runs for: its global transformer layer index ("layer")
// or its MTP depth ("mtp_depth"). Stage-edge and step ops have none (key nullptr).
struct LayerRef {
  const char* key = nullptr;
  int index = 0;
};

// The layers of each kind a pipeline stage runs, in forward order.
struct StageLayerRefs {
  std::vector<LayerRef> dense, moe, mtp;
};

StageLayerRefs layer_refs(const Scenario& s, const std::vector<int>& indices, int mtp_depths) {
  StageLayerRefs out;
  for (int l : indices) (is_moe_layer(s.model, l) ? out.moe : out.dense).push_back({"layer", l});
  for (int d = 0; d < mtp_depths; ++d) out.mtp.push_back({"mtp_depth", d});
  return out;
}

// Collects events for one stage (one pid) and advances its compute cursor.
struct StageWriter {
  const Scenario& s;
  const MeshTopology& topo;
  const TraceOptions& opts;
  ordered_json& events;
  int pid;
  double cursor = 0;  // compute-stream time, seconds
  double stream_free[kNumStreams] = {};  // when each communication stream is next free

  void event(const std::string& name, int thread, double start, double dur, ordered_json args) {
    events.push_back(ordered_json{{"name", name},
                                  {"cat", "predicted"},
                                  {"ph", "X"},
                                  {"ts", start * 1e6},
                                  {"dur", dur * 1e6},
                                  {"pid", pid},
                                  {"tid", thread},
                                  {"args", std::move(args)}});
  }

  // Places one op list. Compute ops run back to back on the compute stream. A collective
  // the model hides (CP ring exchange; TP with tp_comm_overlap; EP with A2A overlap) runs
  // on its stream beside the compute that follows it; other collectives block the compute
  // stream while they run on theirs. `at`: the layer the list belongs to, if any.
  void ops(const std::vector<Op>& list, const char* prefix, int micro_batch, const LayerRef& at = {}) {
    const ParallelSpec& par = s.parallel;
    for (const Op& op : list) {
      const double t = op_time(op, topo, s.hardware) * op.calls;
      if (t <= 0) continue;
      const bool comm = is_comm(op);
      // Overlapped DP step collectives are drawn at the end of the step beside the compute
      // stream (the model hides them under the passes, except their last bucket).
      const bool hidden = overlaps_compute(op, par) || (op.pass == Pass::kStep && op.overlappable);
      ordered_json args;
      if (opts.detail == TraceDetail::kOp) {
        args = ordered_json{{"micro_batch", micro_batch}};
        if (at.key != nullptr) args[at.key] = at.index;
        if (op.kind == OpKind::kGemm)
          args["gemm_mnk"] = {op.gemm.m, op.gemm.n, op.gemm.k}, args["groups"] = op.gemm.groups;
        if (op.flops > 0) args["flops"] = op.flops;
        args["host_kernels"] = host_kernels(op);  // the kernels the host enqueues (host-bound regime)
        if (op.kind == OpKind::kMemoryBound) args["bytes"] = op.mem.bytes;
        if (comm) {
          args["group_size"] = op.coll.group_size;
          args["message_bytes"] = op.coll.message_bytes;
          args["calls"] = op.calls;
          args["overlapped"] = hidden;
        }
      }
      // A stream runs one op at a time: a hidden collective starts when both the compute
      // reaches it and its stream is free; an exposed one also holds the compute stream.
      const size_t sidx = static_cast<size_t>(tid(op.stream));
      const double start = comm ? std::max(cursor, stream_free[sidx]) : cursor;
      if (opts.detail == TraceDetail::kOp) event(op_name(op, prefix), tid(op.stream), start, t, std::move(args));
      if (comm) stream_free[sidx] = start + t;
      if (!hidden) cursor = start + t;
    }
  }

  // One layer kind for one pass, once per entry of `at` (the layers it runs, in order); in
  // layer detail one event per layer.
  void layers(const std::vector<Op>& list, const std::vector<LayerRef>& at, const char* prefix, const char* kind,
              Pass pass, int micro_batch) {
    for (const LayerRef& layer : at) {
      const double start = cursor;
      ops(list, prefix, micro_batch, layer);
      if (opts.detail == TraceDetail::kLayer && cursor > start)
        event(std::string(prefix) + kind + "." + pass_name(pass), tid(Stream::kCompute), start, cursor - start,
              ordered_json{{"micro_batch", micro_batch}, {layer.key, layer.index}});
    }
  }
};

}  // namespace

ordered_json predicted_trace(const Scenario& s, const Estimate& e, const Schedule& sched, const TraceOptions& opts) {
  const MeshTopology topo = mesh_topology(s, e.mesh);
  const int p = static_cast<int>(sched.stages.size());
  int m = std::max(1, sched.num_micro_batches);
  if (opts.max_micro_batches > 0) m = std::min(m, opts.max_micro_batches);

  ordered_json events = ordered_json::array();
  std::vector<StageWriter> writers;
  writers.reserve(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    writers.push_back(StageWriter{s, topo, opts, events, r});
    events.push_back(ordered_json{{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"tid", 0},
                                  {"args", {{"name", "pipeline stage " + std::to_string(r)}}}});
    events.push_back(ordered_json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"tid", 0},
                                  {"args", {{"sort_index", r}}}});
    for (int t = 0; t < kNumStreams; ++t)
      events.push_back(ordered_json{{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", t},
                                    {"args", {{"name", kStreamNames[t]}}}});
  }

  // Event-driven 1F1B: a forward waits for the previous stage's forward of the same
  // micro-batch, a backward for the next stage's backward of it.
  std::vector<std::vector<PipelinePass>> order(static_cast<size_t>(p));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<std::vector<double>> fwd_end(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(m), -1));
  std::vector<std::vector<double>> bwd_end = fwd_end;
  for (int r = 0; r < p; ++r) order[static_cast<size_t>(r)] = pipeline_rank_order(p, 1, m, 0, r);  // whole stages
  // The layers of each stage; the trace draws a stage's dense layers, then its MoE layers,
  // then its MTP depths forward, and the reverse backward.
  const std::vector<std::vector<int>> indices = stage_layer_indices(s, e.mesh);
  std::vector<StageLayerRefs> refs;
  for (int r = 0; r < p; ++r)
    refs.push_back(layer_refs(s, indices[static_cast<size_t>(r)], sched.stages[static_cast<size_t>(r)].mtp));
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      while (next[ri] < order[ri].size()) {
        const PipelinePass pr = order[ri][next[ri]];
        const size_t mb = static_cast<size_t>(pr.micro_batch);
        double ready = 0;
        if (pr.fwd && r > 0) ready = fwd_end[ri - 1][mb];
        if (!pr.fwd && r + 1 < p) ready = bwd_end[ri + 1][mb];
        if (ready < 0) break;  // dependency not scheduled yet
        StageWriter& w = writers[ri];
        w.cursor = std::max(w.cursor, ready);
        const StageSchedule& st = sched.stages[ri];
        const StageLayerRefs& at = refs[ri];
        assert(at.dense.size() == static_cast<size_t>(st.dense) && at.moe.size() == static_cast<size_t>(st.moe));
        if (pr.fwd) {
          w.ops(st.pre_fwd, "", pr.micro_batch);
          w.layers(sched.dense.fwd, at.dense, kLayerPrefix, "dense", Pass::kFwd, pr.micro_batch);
          w.layers(sched.moe.fwd, at.moe, kLayerPrefix, "moe", Pass::kFwd, pr.micro_batch);
          w.layers(sched.mtp.fwd, at.mtp, kMtpPrefix, "mtp", Pass::kFwd, pr.micro_batch);
          w.ops(st.post_fwd, "", pr.micro_batch);
          fwd_end[ri][mb] = w.cursor;
        } else {
          w.ops(st.post_bwd, "", pr.micro_batch);
          // Backward runs the layers last first; the first `*_recomputed` of them rerun
          // their forward before it.
          auto backward = [&](const LayerOps& l, const std::vector<LayerRef>& layers, int recomputed,
                              const char* prefix, const char* kind) {
            for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
              const std::vector<LayerRef> one{layers[layers.size() - 1 - static_cast<size_t>(i)]};
              if (i < recomputed) w.layers(l.recompute, one, prefix, kind, Pass::kRecompute, pr.micro_batch);
              w.layers(l.bwd, one, prefix, kind, Pass::kBwd, pr.micro_batch);
            }
          };
          backward(sched.mtp, at.mtp, st.mtp_recomputed, kMtpPrefix, "mtp");
          backward(sched.moe, at.moe, st.moe_recomputed, kLayerPrefix, "moe");
          backward(sched.dense, at.dense, st.dense_recomputed, kLayerPrefix, "dense");
          w.ops(st.pre_bwd, "", pr.micro_batch);
          bwd_end[ri][mb] = w.cursor;
        }
        ++next[ri];
        progress = true;
      }
    }
  }
  double end = 0;
  for (int r = 0; r < p; ++r) {
    StageWriter& w = writers[static_cast<size_t>(r)];
    w.ops(sched.stages[static_cast<size_t>(r)].step, "", -1);
    end = std::max(end, w.cursor);
  }

  ordered_json other{{"generator", "lcm trace"},
                     {"scenario", s.name},
                     {"micro_batches_shown", m},
                     {"micro_batches_per_step", sched.num_micro_batches},
                     {"trace_end_s", end},
                     {"schedule", e.mesh.vp > 1 ? "interleaved 1F1B shown as 1F1B over whole stages" : "1F1B"}};
  if (e.has_time) other["predicted_step_s"] = e.time.step_s;
  return ordered_json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
}

}  // namespace lcm::report
