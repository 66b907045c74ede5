// Step time composition (see step_time.hpp; derivations in docs/time-model.md).
#include "lcm/model/step_time.hpp"

#include <algorithm>
#include <cassert>

namespace lcm {

namespace {

OpClass class_of(const Op& op) {
  switch (op.kind) {
    case OpKind::kGemm: return OpClass::kGemm;
    case OpKind::kAttention: return OpClass::kAttention;
    default: return OpClass::kMemoryBound;
  }
}

size_t idx(CommDim d) { return static_cast<size_t>(d); }

// Time of one op list (one pass of one layer or block), with the communication that the
// list's compute can hide. Communication is exposed unless:
//  - it is a CP ring exchange (overlappable): hidden under the attention core;
//  - it is TP with tp_comm_overlap: hidden under the list's GEMMs;
//  - it is EP all-to-all with overlap_moe_expert_parallel_comm: hidden under the other
//    micro-batch's compute (Megatron's 1F1B A2A overlap), i.e. under this list's compute.
struct PassTime {
  double total = 0;
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> exposed{};
  std::array<double, kNumCommDims> hidden{};
};

void add_list(const std::vector<Op>& ops, double repeat, const ParallelSpec& par, const MeshTopology& topo,
              const HardwareSpec& hw, PassTime& out) {
  if (repeat <= 0 || ops.empty()) return;
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> comm{};
  double cp_overlappable = 0, attn = 0, gemm = 0;
  for (const Op& op : ops) {
    const double t = op_time(op, topo, hw) * op.calls;
    if (op.kind == OpKind::kCollective || op.kind == OpKind::kSendRecv) {
      if (op.coll.dim == CommDim::kCp && op.overlappable) cp_overlappable += t;
      else comm[idx(op.coll.dim)] += t;
    } else {
      compute[static_cast<size_t>(class_of(op))] += t;
      if (op.kind == OpKind::kAttention) attn += t;
      if (op.kind == OpKind::kGemm) gemm += t;
    }
  }
  double total_compute = 0;
  for (double c : compute) total_compute += c;
  std::array<double, kNumCommDims> exposed = comm, hidden{};
  // CP ring: c-1 exchanges under c attention steps.
  exposed[idx(CommDim::kCp)] += std::max(0.0, cp_overlappable - attn);
  hidden[idx(CommDim::kCp)] += std::min(cp_overlappable, attn);
  auto hide = [&](CommDim d, double budget) {
    const double h = std::min(exposed[idx(d)], budget);
    exposed[idx(d)] -= h;
    hidden[idx(d)] += h;
  };
  if (par.tp_comm_overlap) hide(CommDim::kTp, gemm);
  if (par.overlap_moe_expert_parallel_comm) hide(CommDim::kEp, total_compute);
  double total = total_compute;
  for (double e : exposed) total += e;
  out.total += repeat * total;
  for (int i = 0; i < kNumOpClasses; ++i) out.compute[static_cast<size_t>(i)] += repeat * compute[static_cast<size_t>(i)];
  for (int i = 0; i < kNumCommDims; ++i) {
    out.exposed[static_cast<size_t>(i)] += repeat * exposed[static_cast<size_t>(i)];
    out.hidden[static_cast<size_t>(i)] += repeat * hidden[static_cast<size_t>(i)];
  }
}

// Times of one layer kind's lists, computed once and scaled by each stage's counts.
struct LayerTimes {
  PassTime fwd, recompute, bwd;
};

LayerTimes layer_times(const LayerOps& l, const ParallelSpec& par, const MeshTopology& topo, const HardwareSpec& hw) {
  LayerTimes t;
  add_list(l.fwd, 1, par, topo, hw, t.fwd);
  add_list(l.recompute, 1, par, topo, hw, t.recompute);
  add_list(l.bwd, 1, par, topo, hw, t.bwd);
  return t;
}

void accumulate(PassTime& into, const PassTime& p, double times) {
  if (times <= 0) return;
  into.total += times * p.total;
  for (size_t i = 0; i < into.compute.size(); ++i) into.compute[i] += times * p.compute[i];
  for (size_t i = 0; i < into.exposed.size(); ++i) {
    into.exposed[i] += times * p.exposed[i];
    into.hidden[i] += times * p.hidden[i];
  }
}

}  // namespace

StepTime step_time(const Scenario& s, const Mesh& m, const Schedule& sched, const Flops& flops) {
  const HardwareSpec& hw = s.hardware;
  const ParallelSpec& par = s.parallel;
  const MeshTopology topo = mesh_topology(s, m);
  StepTime out;
  out.stages.reserve(sched.stages.size());
  double worst = -1, sum_fb = 0;
  double dp_exposed_worst = 0, dp_hidden_worst = 0, opt_worst = 0;
  const LayerTimes dense = layer_times(sched.dense, par, topo, hw);
  const LayerTimes moe = layer_times(sched.moe, par, topo, hw);
  const LayerTimes mtp = layer_times(sched.mtp, par, topo, hw);
  for (const StageSchedule& st : sched.stages) {
    PassTime f, b;
    add_list(st.pre_fwd, 1, par, topo, hw, f);
    accumulate(f, dense.fwd, st.dense);
    accumulate(f, moe.fwd, st.moe);
    accumulate(f, mtp.fwd, st.mtp);
    add_list(st.post_fwd, 1, par, topo, hw, f);
    add_list(st.post_bwd, 1, par, topo, hw, b);
    accumulate(b, mtp.bwd, st.mtp);
    accumulate(b, moe.recompute, st.moe_recomputed);
    accumulate(b, moe.bwd, st.moe);
    accumulate(b, dense.recompute, st.dense_recomputed);
    accumulate(b, dense.bwd, st.dense);
    add_list(st.pre_bwd, 1, par, topo, hw, b);
    // With interleaving Megatron overlaps pipeline p2p with compute (--overlap-p2p-comm).
    if (m.vp > 1) {
      for (PassTime* p : {&f, &b}) {
        p->total -= p->exposed[idx(CommDim::kPp)];
        p->hidden[idx(CommDim::kPp)] += p->exposed[idx(CommDim::kPp)];
        p->exposed[idx(CommDim::kPp)] = 0;
      }
    }
    StageTime t;
    t.stage = st.stage;
    t.fwd = f.total;
    t.bwd = b.total;
    for (int i = 0; i < kNumOpClasses; ++i) t.compute[static_cast<size_t>(i)] = f.compute[static_cast<size_t>(i)] + b.compute[static_cast<size_t>(i)];
    for (int i = 0; i < kNumCommDims; ++i) {
      t.exposed_comm[static_cast<size_t>(i)] = f.exposed[static_cast<size_t>(i)] + b.exposed[static_cast<size_t>(i)];
      t.hidden_comm[static_cast<size_t>(i)] = f.hidden[static_cast<size_t>(i)] + b.hidden[static_cast<size_t>(i)];
    }
    // Data-parallel step collectives: overlappable ones hide under the backward (grads)
    // or forward (params) of the step's micro-batches except the last bucket, taken as
    // one layer's share.
    double dp_exposed = 0, dp_hidden = 0, opt = 0;
    const int layers_here = std::max(1, st.dense + st.moe);
    for (const Op& op : st.step) {
      const double tt = op_time(op, topo, hw);
      if (op.kind == OpKind::kMemoryBound) {
        opt += tt;
        continue;
      }
      if (!op.overlappable) {
        dp_exposed += tt;
        continue;
      }
      const bool grads = op.coll.kind != Collective::kAllGather;
      const double window = (grads ? t.bwd : t.fwd) * m.num_micro_batches;
      const double tail = tt / layers_here;
      const double hidden = std::min(tt - tail, window);
      dp_hidden += hidden;
      dp_exposed += tt - hidden;
    }
    const double fb = t.fwd + t.bwd;
    sum_fb += fb;
    if (fb + (dp_exposed + opt) / std::max(1, m.num_micro_batches) > worst) {
      worst = fb + (dp_exposed + opt) / std::max(1, m.num_micro_batches);
      out.bottleneck_stage = st.stage;
      dp_exposed_worst = dp_exposed;
      dp_hidden_worst = dp_hidden;
      opt_worst = opt;
    }
    out.stages.push_back(t);
  }
  const StageTime& bn = out.stages[static_cast<size_t>(out.bottleneck_stage)];
  const double fb_max = bn.fwd + bn.bwd;
  const double mb = m.num_micro_batches;
  // 1F1B: (m-1) steady-state slots of the slowest stage plus fill and drain through all
  // stages; interleaving shrinks fill/drain by vp (Narayanan et al. 2021).
  const double fill = (sum_fb - fb_max) / std::max(1, m.vp);
  out.pipeline = mb * fb_max + fill;
  out.bubble = fill;
  out.dp_exposed = dp_exposed_worst;
  out.dp_hidden = dp_hidden_worst;
  out.optimizer = opt_worst;
  out.step_s = out.pipeline + out.dp_exposed + out.optimizer;
  for (int i = 0; i < kNumOpClasses; ++i) out.compute[static_cast<size_t>(i)] = mb * bn.compute[static_cast<size_t>(i)];
  for (int i = 0; i < kNumCommDims; ++i) out.exposed_comm[static_cast<size_t>(i)] = mb * bn.exposed_comm[static_cast<size_t>(i)];
  out.exposed_comm[idx(CommDim::kDp)] += out.dp_exposed;
  const double world = s.num_gpus;
  const double tokens = static_cast<double>(s.training.global_batch_size) * static_cast<double>(s.training.seq_length);
  out.tokens_per_s_per_gpu = tokens / (out.step_s * world);
  out.model_tflops_per_gpu = flops.model_flops / (out.step_s * world) / 1e12;
  out.mfu = flops.model_flops / (out.step_s * world) / hw.gpu.peak_bf16_flops;
  out.hfu = flops.hardware_flops / (out.step_s * world) / hw.gpu.peak_bf16_flops;
  return out;
}

}  // namespace lcm
