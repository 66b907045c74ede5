// Step time composition (see step_time.hpp; derivations in docs/time-model.md).
//
// step_time() = time the op lists once (pass_time, layer_times, step_op_times), then
// compose_step_time(). The planner calls the same pieces with op-list times shared
// between layouts, so every floating-point operation below runs in the same order on
// both paths and the results are bit-identical.
#include "lcm/model/step_time.hpp"

#include "step_compose.hpp"

#include "lcm/model/mesh.hpp"
#include "lcm/model/pipeline_schedule.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <new>
#include <type_traits>

namespace lcm {

namespace {

// Share of the SMs that overlapped TP / EP communication kernels occupy (TE userbuffers'
// default num_sm = 16 for pipelined reduce-scatter, of the 132 SMs of an H100/H200).
constexpr double kCommSmFraction = 16.0 / 132.0;

OpClass class_of(const Op& op) {
  switch (op.kind) {
    case OpKind::kGemm: return OpClass::kGemm;
    case OpKind::kAttention: return OpClass::kAttention;
    default: return OpClass::kMemoryBound;
  }
}

size_t idx(CommDim d) { return static_cast<size_t>(d); }

void accumulate(PassTime& into, const PassTime& p, double times) {
  if (times <= 0) return;
  into.total += times * p.total;
  for (size_t i = 0; i < into.compute.size(); ++i) into.compute[i] += times * p.compute[i];
  for (size_t i = 0; i < into.exposed.size(); ++i) {
    into.exposed[i] += times * p.exposed[i];
    into.hidden[i] += times * p.hidden[i];
  }
}

// The host-bound regime (docs/time-model.md, "Host-bound regime"). The host enqueues every
// kernel and the GPU cannot run ahead of it; between two synchronisations (a segment) the
// GPU's work takes max(GPU time, host time), and each synchronisation empties the host's
// lead and idles the GPU for its round trip and the next first launch (PassTime::sync_idle).
// The op lists of one micro-batch are added in execution order; every micro-batch is the
// same, so the open segment at its end continues into the next one's first segment (the
// 1F1B steady state): they are joined. Without any synchronisation in a micro-batch the
// segment is the whole step, which per micro-batch is max(0, host - GPU) of the micro-batch.
class HostClock {
 public:
  void add(const PassTime& p, double times) {
    if (times <= 0) return;
    if (p.syncs == 0) {
      gpu_ += times * p.total;
      host_ += times * p.host;
      return;
    }
    // The first instance closes the open segment; each further one is a segment of its own.
    close(gpu_ + p.total, host_ + p.host);
    idle_ += (times - 1) * std::max(0.0, p.host - p.total) + times * p.sync_idle;
    gpu_ = host_ = 0;
  }
  // GPU idle so far (the open segment not included).
  double idle() const { return idle_; }
  // GPU idle of the micro-batch: the open segment joined with the first one.
  double finish() const { return idle_ + std::max(0.0, (host_ + first_host_) - (gpu_ + first_gpu_)); }

 private:
  void close(double gpu, double host) {
    if (!closed_) {
      first_gpu_ = gpu;
      first_host_ = host;
      closed_ = true;
    } else {
      idle_ += std::max(0.0, host - gpu);
    }
  }
  double gpu_ = 0, host_ = 0;  // the open segment
  double first_gpu_ = 0, first_host_ = 0;
  bool closed_ = false;
  double idle_ = 0;
};

// One pipeline rank's micro-batch times and its share of the step collectives.
struct StageResult {
  StageTime t;
  double fb = 0;          // t.fwd + t.bwd
  double dp_exposed = 0;  // per step
  double dp_hidden = 0;
  double opt = 0;
  double opt_host_wait = 0;  // of opt, the GPU waiting on the host (StepOpTime::host_wait)
  double score = 0;  // what the bottleneck rank maximises
};

}  // namespace

StageTime stage_microbatch_time(const StageInputs& st, const StepInputs& in) {
  PassTime f, b;
  HostClock clock;
  const auto add = [&clock](PassTime& into, const PassTime& p, double times) {
    accumulate(into, p, times);
    clock.add(p, times);
  };
  add(f, *st.pre_fwd, 1);
  add(f, in.dense->fwd, st.dense);
  add(f, in.moe->fwd, st.moe);
  add(f, in.mtp->fwd, st.mtp);
  add(f, *st.post_fwd, 1);
  const double idle_fwd = clock.idle();
  add(b, *st.post_bwd, 1);
  add(b, in.mtp->recompute, st.mtp_recomputed);
  add(b, in.mtp->bwd, st.mtp);
  add(b, in.moe->recompute, st.moe_recomputed);
  add(b, in.moe->bwd, st.moe);
  add(b, in.dense->recompute, st.dense_recomputed);
  add(b, in.dense->bwd, st.dense);
  add(b, *st.pre_bwd, 1);
  // Idle closed within the forward counts there; the rest (and the joined segment) in the backward.
  const double idle_bwd = clock.finish() - idle_fwd;
  f.total += idle_fwd;
  b.total += idle_bwd;
  // With interleaving Megatron overlaps pipeline p2p with compute (--overlap-p2p-comm).
  if (in.vp > 1) {
    for (PassTime* p : {&f, &b}) {
      p->total -= p->exposed[idx(CommDim::kPp)];
      p->hidden[idx(CommDim::kPp)] += p->exposed[idx(CommDim::kPp)];
      p->exposed[idx(CommDim::kPp)] = 0;
    }
  }
  // EP all-to-all overlap pairs one micro-batch's forward with another's backward: the
  // step's first forward and last backward have no partner, so per micro-batch 1/m of the
  // hidden all-to-all time stays exposed (only overlapped EP time is ever hidden).
  const double mb = std::max(1, in.num_micro_batches);
  for (PassTime* p : {&f, &b}) {
    const double unpaired = p->hidden[idx(CommDim::kEp)] / mb;
    p->hidden[idx(CommDim::kEp)] -= unpaired;
    p->exposed[idx(CommDim::kEp)] += unpaired;
    p->total += unpaired;
  }
  StageTime t;
  t.fwd = f.total;
  t.bwd = b.total;
  t.host_idle = idle_fwd + idle_bwd;
  for (size_t i = 0; i < kNumOpClasses; ++i) t.compute[i] = f.compute[i] + b.compute[i];
  for (size_t i = 0; i < kNumCommDims; ++i) {
    t.exposed_comm[i] = f.exposed[i] + b.exposed[i];
    t.hidden_comm[i] = f.hidden[i] + b.hidden[i];
  }
  return t;
}

namespace {

StageResult stage_result(const StageTime& microbatch, const StageInputs& st, const StepInputs& in) {
  StageResult r;
  r.t = microbatch;
  const StageTime& t = microbatch;
  // Data-parallel step collectives: overlappable ones hide under the backward (grads)
  // or forward (params) except the last bucket, taken as one layer's share. A once-per-step
  // gradient reduce-scatter can only start when the last micro-batch's backward produces
  // each bucket, and the parameter all-gather must finish within the first micro-batch's
  // forward (Megatron's overlap_grad_reduce / overlap_param_gather): the window is one
  // pass per call (per micro-batch for Megatron-FSDP's per-micro-batch collectives).
  const int layers_here = std::max(1, st.dense + st.moe);
  for (int i = 0; i < st.num_step; ++i) {
    const StepOpTime& op = st.step[i];
    const double tt = op.time;
    if (op.role == StepOpRole::kOptimizer) {
      r.opt += tt;
      r.opt_host_wait += op.host_wait;
      continue;
    }
    if (op.role == StepOpRole::kExposed) {
      r.dp_exposed += tt;
      continue;
    }
    const bool grads = op.role == StepOpRole::kUnderBackward;
    const double window = (grads ? t.bwd : t.fwd) * std::max(1, op.calls);
    const double tail = tt / layers_here;
    const double hidden = std::min(tt - tail, window);
    r.dp_hidden += hidden;
    r.dp_exposed += tt - hidden;
  }
  r.fb = t.fwd + t.bwd;
  r.score = r.fb + (r.dp_exposed + r.opt) / std::max(1, in.num_micro_batches);
  r.t.step_exposed = r.dp_exposed;
  r.t.step_hidden = r.dp_hidden;
  r.t.optimizer = r.opt - r.opt_host_wait;  // as the step reports it: GPU work, the host wait apart
  return r;
}

StageResult stage_result(const StageInputs& st, const StepInputs& in) {
  if (st.microbatch_time) return stage_result(*st.microbatch_time, st, in);
  return stage_result(stage_microbatch_time(st, in), st, in);
}

}  // namespace

// Communication is exposed unless:
//  - it is a CP ring exchange (overlappable): hidden under the attention core;
//  - it is TP with tp_comm_overlap: hidden under the list's GEMMs;
//  - it is EP all-to-all with overlap_moe_expert_parallel_comm: hidden under the other
//    micro-batch's compute (Megatron's 1F1B A2A overlap), i.e. under this list's compute.
bool overlaps_compute(const Op& op, const ParallelSpec& par) {
  if (op.kind != OpKind::kCollective && op.kind != OpKind::kSendRecv) return false;
  return (op.coll.dim == CommDim::kCp && op.overlappable) || (par.tp_comm_overlap && op.coll.dim == CommDim::kTp) ||
         (par.overlap_moe_expert_parallel_comm && op.coll.dim == CommDim::kEp);
}

PassTimeSwitches pass_time_switches(const ParallelSpec& par) {
  return {par.tp_comm_overlap, par.overlap_moe_expert_parallel_comm, static_cast<int32_t>(par.cuda_graph_impl),
          par.cuda_graph_modules};
}

uint32_t comm_uses(const std::vector<Op>& ops) {
  uint32_t mask = 0;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kCollective && op.kind != OpKind::kSendRecv) continue;
    mask |= op.coll.group == CommGroup::kExpertTp     ? kUsesExpertTp
            : op.coll.group == CommGroup::kExpertTpEp ? kUsesExpertTpEp
                                                      : 1u << static_cast<unsigned>(op.coll.dim);
  }
  return mask;
}

uint32_t comm_uses(const LayerOps& l) { return comm_uses(l.fwd) | comm_uses(l.recompute) | comm_uses(l.bwd); }

PassTimeKey pass_time_key(uint32_t uses, const ParallelSpec& par, const MeshTopology& topo) {
  PassTimeKey k;
  k.switches = pass_time_switches(par);
  for (size_t d = 0; d < kNumCommDims; ++d)
    if (uses & (1u << d)) k.dim[d] = topo.dim[d];
  if (uses & kUsesExpertTp) k.expert_tp = topo.expert_tp;
  if (uses & kUsesExpertTpEp) k.expert_tp_ep = topo.expert_tp_ep;
  return k;
}

PassTime pass_time(const std::vector<Op>& ops, const ParallelSpec& par, const MeshTopology& topo,
                   const HardwareSpec& hw) {
  PassTime out;
  if (ops.empty()) return out;
  std::array<double, kNumOpClasses> compute{};
  std::array<double, kNumCommDims> comm{};
  double cp_overlappable = 0, attn = 0, gemm = 0;
  double tp_last_chunks = 0;  // TP reduce-scatters / all-reduces: their last pipelined chunk
  double pre_kernels = 0;
  for (const Op& op : ops) {
    const double t = op_time(op, topo, hw) * op.calls;
    out.kernels += host_kernels(op);
    if (out.syncs == 0) {  // up to and including the first synchronising op
      out.pre_sync_gpu += t;
      pre_kernels += host_kernels(op);
    }
    out.syncs += op.host_syncs * op.calls;
    if (is_comm(op)) {
      if (op.coll.dim == CommDim::kCp && op.overlappable) cp_overlappable += t;
      else comm[idx(op.coll.dim)] += t;
      if (op.coll.dim == CommDim::kTp && op.coll.kind != Collective::kAllGather)
        tp_last_chunks += t / std::max(1, op.coll.group_size);
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
  // TP overlap (Transformer Engine userbuffers): a GEMM is split into tp chunks pipelined
  // with the collective; an all-gather before a GEMM hides entirely, a reduce-scatter after
  // it leaves its last chunk (1/tp of it) exposed.
  if (par.tp_comm_overlap) {
    const double before = exposed[idx(CommDim::kTp)];
    hide(CommDim::kTp, std::min(gemm, std::max(0.0, before - tp_last_chunks)));
  }
  if (par.overlap_moe_expert_parallel_comm) hide(CommDim::kEp, total_compute);
  // Hidden TP and EP communication still runs kernels on SMs the GEMMs lose: TE's
  // pipelined reduce-scatter and NCCL's all-to-all take about kCommSmFraction of the SMs
  // while they run (TE userbuffers default num_sm = 16 of 132 on H100/H200).
  const double contention = kCommSmFraction * (hidden[idx(CommDim::kTp)] + hidden[idx(CommDim::kEp)]);
  compute[static_cast<size_t>(OpClass::kGemm)] += contention;
  total_compute += contention;
  double total = total_compute;
  for (double e : exposed) total += e;
  out.host = out.kernels * hw.host.kernel_launch;
  out.sync_idle = out.syncs * (hw.host.sync + hw.host.launch_latency);
  if (out.syncs == 0) out.pre_sync_gpu = 0;
  else out.pre_sync_host = pre_kernels * hw.host.kernel_launch;
  out.total = total;
  out.compute = compute;
  out.exposed = exposed;
  out.hidden = hidden;
  return out;
}

namespace {
// Whether an op list holds an op of schedule identity `id` (the router: an MoE layer's list; the
// embedding and the loss: the stage edges that carry the per-micro-batch Python).
bool holds(const std::vector<Op>& ops, OpId id) {
  return std::any_of(ops.begin(), ops.end(), [id](const Op& o) { return o.id == id; });
}

// An op of the MoE block (router to unpermute, shared experts, their FP8 casts).
bool in_moe_block(OpId id) { return id >= OpId::kMoeRouter && id <= OpId::kMoeSharedFc2Fp8Cast; }

// Which part of a layer an op belongs to, in the vocabulary of Megatron's CUDA graph modules.
enum class GraphPart { kAttn, kMlp, kPreMlpNorm, kRouter, kPreprocess, kSharedExperts, kMoeRest, kOther };

GraphPart graph_part(OpId id, bool moe_layer) {
  if (id >= OpId::kAttnNorm && id <= OpId::kAttnKvUpFp8Cast) return GraphPart::kAttn;
  if (id == OpId::kMlpNorm) return moe_layer ? GraphPart::kPreMlpNorm : GraphPart::kMlp;
  if (id >= OpId::kMlpSpAllGather && id <= OpId::kMlpFc2Fp8Cast) return moe_layer ? GraphPart::kMoeRest : GraphPart::kMlp;
  if (id == OpId::kMoeRouter || id == OpId::kMoeTopk) return GraphPart::kRouter;
  if (id == OpId::kMoePermute) return GraphPart::kPreprocess;
  if ((id >= OpId::kMoeSharedSpAllGather && id <= OpId::kMoeSharedTpAllReduce) || id == OpId::kMoeSharedFc1Fp8Cast ||
      id == OpId::kMoeSharedFc2Fp8Cast)
    return GraphPart::kSharedExperts;
  if (in_moe_block(id)) return GraphPart::kMoeRest;
  return GraphPart::kOther;
}

}  // namespace

// Megatron's captured regions (transformer_layer.py): attn = input norm, attention and its
// bias-dropout-add; mlp = a dense layer's MLP; moe = the whole MoE block; moe_router = the
// pre-MLP norm, the router and, not overlapped, the shared experts; moe_preprocess = the
// dispatcher's permutation. No modules = the whole layer; full_iteration = everything.
bool graph_captures(OpId id, bool moe_layer, const ParallelSpec& par) {
  if (par.cuda_graph_impl == CudaGraphImpl::kNone) return false;
  const uint32_t m = par.cuda_graph_modules;
  if (par.cuda_graph_impl == CudaGraphImpl::kFullIteration || m == 0) return true;
  switch (graph_part(id, moe_layer)) {
    case GraphPart::kAttn: return m & kCudaGraphAttn;
    case GraphPart::kMlp: return m & kCudaGraphMlp;
    case GraphPart::kPreMlpNorm:
    case GraphPart::kRouter:
    case GraphPart::kSharedExperts: return m & (kCudaGraphMoe | kCudaGraphMoeRouter);
    case GraphPart::kPreprocess: return m & (kCudaGraphMoe | kCudaGraphMoePreprocess);
    case GraphPart::kMoeRest: return m & kCudaGraphMoe;
    case GraphPart::kOther: return false;
  }
  return false;
}

namespace {

// A pass's kernels split by what a CUDA graph captures: all of the layer's and the MoE block's.
struct GraphSplit {
  double kernels = 0, captured = 0;          // the whole list
  double moe_kernels = 0, moe_captured = 0;  // the MoE block's ops (router to unpermute)
};

GraphSplit graph_split(const std::vector<Op>& ops, bool moe_layer, const ParallelSpec& par) {
  GraphSplit g;
  for (const Op& op : ops) {
    const double k = host_kernels(op);
    const bool in = graph_captures(op.id, moe_layer, par);
    g.kernels += k;
    if (in) g.captured += k;
    if (in_moe_block(op.id)) {
      g.moe_kernels += k;
      if (in) g.moe_captured += k;
    }
  }
  return g;
}

// A pass's host time under CUDA graphs: the captured kernels are replayed, not enqueued (one
// graph launch, kernel_launch + graph_replay, per pass for the per-layer implementations,
// nothing per layer for a full-iteration graph), and the captured modules' Python does not run, in proportion to their
// kernels (the layer's Python over the layer's kernels, the MoE block's over the block's). A
// full-iteration graph holds no host synchronisation.
void apply_graphs(PassTime& t, const GraphSplit& g, double layer_python, double moe_python, const ParallelSpec& par,
                  const HostSpec& h) {
  double python = layer_python + moe_python;
  if (g.captured > 0) {
    const bool full = par.cuda_graph_impl == CudaGraphImpl::kFullIteration;
    const double launches = full ? 0.0 : 1.0;
    t.kernels += launches - g.captured;
    t.host += (launches - g.captured) * h.kernel_launch + launches * h.graph_replay;
    python = layer_python * (1.0 - g.captured / std::max(1.0, g.kernels)) +
             moe_python * (g.moe_kernels > 0 ? 1.0 - g.moe_captured / g.moe_kernels : 1.0);
    if (full) {
      t.syncs = 0;
      t.sync_idle = 0;
    }
  }
  t.host += python;
}

}  // namespace

LayerTimes layer_times(const LayerOps& l, const ParallelSpec& par, const MeshTopology& topo, const HardwareSpec& hw) {
  LayerTimes t;
  t.fwd = pass_time(l.fwd, par, topo, hw);
  t.recompute = pass_time(l.recompute, par, topo, hw);
  t.bwd = pass_time(l.bwd, par, topo, hw);
  // A layer's Python (module calls, hooks, autocast) on top of its kernels, per pass it runs;
  // an MoE layer (its list routes tokens) adds its router's, dispatcher's and experts' Python.
  // A recompute pass re-runs only the recomputed modules: the dense part in proportion to its
  // kernels against the forward's, the MoE part when it re-runs the router (full recompute).
  // CUDA graphs then take the captured modules' enqueue and Python off each pass (apply_graphs).
  const HostSpec& h = hw.host;
  const bool moe = holds(l.fwd, OpId::kMoeRouter);
  const double share = std::min(1.0, t.recompute.kernels / std::max(1.0, t.fwd.kernels));
  if (t.fwd.total > 0 || t.fwd.host > 0)
    apply_graphs(t.fwd, graph_split(l.fwd, moe, par), h.layer_overhead_fwd, moe ? h.moe_overhead_fwd : 0.0, par, h);
  if (!l.recompute.empty())
    apply_graphs(t.recompute, graph_split(l.recompute, moe, par), h.layer_overhead_fwd * share,
                 holds(l.recompute, OpId::kMoeRouter) ? h.moe_overhead_fwd : 0.0, par, h);
  if (t.bwd.total > 0 || t.bwd.host > 0)
    apply_graphs(t.bwd, graph_split(l.bwd, moe, par), h.layer_overhead_bwd, moe ? h.moe_overhead_bwd : 0.0, par, h);
  return t;
}

double standalone_pass_seconds(const PassTime& p) {
  // Without a synchronisation pre_sync_* are 0: max(GPU, host).
  const double g1 = std::min(p.pre_sync_gpu, p.total), h1 = std::min(p.pre_sync_host, p.host);
  return std::max(g1, h1) + std::max(p.total - g1, p.host - h1) + p.sync_idle;
}

std::array<PassTime, 4> edge_times(const std::array<const std::vector<Op>*, 4>& lists, const ParallelSpec& par,
                                   const MeshTopology& topo, const HardwareSpec& hw) {
  std::array<PassTime, 4> t;
  const bool full = par.cuda_graph_impl == CudaGraphImpl::kFullIteration;
  for (size_t i = 0; i < 4; ++i) {
    t[i] = pass_time(*lists[i], par, topo, hw);
    if (full) {  // replayed inside the iteration's graph: no enqueue, no synchronisation
      t[i].host = t[i].kernels = t[i].sync_idle = 0;
      t[i].syncs = 0;
    }
  }
  const double half = full ? 0.0 : 0.5 * hw.host.microbatch_overhead;
  if (holds(*lists[0], OpId::kEmbed)) t[0].host += half;  // batch fetch, embedding
  if (holds(*lists[1], OpId::kLoss)) t[1].host += half;  // batch fetch, output layer, loss
  return t;
}

std::vector<StepOpTime> step_op_times(const std::vector<Op>& step, const MeshTopology& topo, const HardwareSpec& hw) {
  std::vector<StepOpTime> out;
  out.reserve(step.size());
  for (const Op& op : step) {
    StepOpTime t;
    t.time = op_time(op, topo, hw) * op.calls;
    t.calls = op.calls;
    if (op.kind == OpKind::kMemoryBound) {
      // The optimizer step's per-tensor host work and its kernels overlap: the larger wins, and
      // the host's excess is the GPU's wait.
      t.role = StepOpRole::kOptimizer;
      t.host_wait = std::max(0.0, op.mem.tensors * hw.host.optimizer_tensor - t.time);
      t.time += t.host_wait;
    } else if (!op.overlappable) {
      t.role = StepOpRole::kExposed;
    } else if (op.coll.kind != Collective::kAllGather || op.id == OpId::kDpParamsAllGatherBwd ||
               op.id == OpId::kEdpParamsAllGatherBwd) {
      // Gradient reductions and ZeRO-3's re-gather of the parameters for the backward run
      // during the backward; the other parameter all-gathers before the forward.
      t.role = StepOpRole::kUnderBackward;
    } else {
      t.role = StepOpRole::kUnderForward;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<ChunkPass> pipeline_chunk_passes(const Scenario& s, const StepInputs& in,
                                             const std::vector<std::array<double, 2>>& rank_fb) {
  const int pp = in.num_ranks, vp = std::max(1, in.vp);
  assert(static_cast<int>(rank_fb.size()) == pp);
  std::vector<ChunkPass> out(static_cast<size_t>(pp) * static_cast<size_t>(vp));
  if (vp == 1) {
    for (int r = 0; r < pp; ++r) out[static_cast<size_t>(r)] = {rank_fb[r][0], rank_fb[r][1]};
    return out;
  }
  Mesh m;
  m.pp = pp;
  m.vp = vp;
  const std::vector<StageLayers> chunks = chunk_layers(s, m);
  // An edge list without its pipeline p2p (hidden under interleaving): the embedding (rank
  // 0's pre lists) or the output layer and loss (the last rank's post lists).
  const auto edge = [](const PassTime* p) { return p->total - p->exposed[idx(CommDim::kPp)]; };
  std::vector<std::array<double, 2>> raw(static_cast<size_t>(vp));
  for (int r = 0; r < pp; ++r) {
    const StageInputs& st = in.stages[in.stage_input[r]];
    const StageLayers* c = &chunks[static_cast<size_t>(r) * vp];
    // The rank's layers (the stage inputs' counts) spread over its chunks as chunk_layers
    // places them, dense and MoE apart; evenly where it places none of a kind.
    int dense_sum = 0, moe_sum = 0, dense_rc_sum = 0, moe_rc_sum = 0;
    for (int j = 0; j < vp; ++j) {
      dense_sum += c[j].num_layers - c[j].num_moe_layers;
      moe_sum += c[j].num_moe_layers;
      dense_rc_sum += c[j].num_recomputed_layers - c[j].num_recomputed_moe_layers;
      moe_rc_sum += c[j].num_recomputed_moe_layers;
    }
    const auto share = [vp](int part, int sum) { return sum > 0 ? static_cast<double>(part) / sum : 1.0 / vp; };
    std::array<double, 2> sum{};
    for (int j = 0; j < vp; ++j) {
      const double d = share(c[j].num_layers - c[j].num_moe_layers, dense_sum);
      const double e = share(c[j].num_moe_layers, moe_sum);
      const double d_rc = share(c[j].num_recomputed_layers - c[j].num_recomputed_moe_layers, dense_rc_sum);
      const double e_rc = share(c[j].num_recomputed_moe_layers, moe_rc_sum);
      double f = d * st.dense * in.dense->fwd.total + e * st.moe * in.moe->fwd.total;
      double b = d * st.dense * in.dense->bwd.total + d_rc * st.dense_recomputed * in.dense->recompute.total +
                 e * st.moe * in.moe->bwd.total + e_rc * st.moe_recomputed * in.moe->recompute.total;
      if (j == 0) {  // embedding
        f += edge(st.pre_fwd);
        b += edge(st.pre_bwd);
      }
      if (j == vp - 1) {  // MTP layers, output layer and loss
        f += st.mtp * in.mtp->fwd.total + edge(st.post_fwd);
        b += st.mtp * in.mtp->bwd.total + st.mtp_recomputed * in.mtp->recompute.total + edge(st.post_bwd);
      }
      raw[static_cast<size_t>(j)] = {std::max(0.0, f), std::max(0.0, b)};
      sum[0] += raw[static_cast<size_t>(j)][0];
      sum[1] += raw[static_cast<size_t>(j)][1];
    }
    // Scaled to the rank's own pass times (host idle, unpaired EP time, rounding), so a
    // rank's chunks add up to it.
    for (int j = 0; j < vp; ++j) {
      ChunkPass& cp = out[static_cast<size_t>(r) * vp + j];
      cp.fwd = sum[0] > 0 ? rank_fb[r][0] * (raw[static_cast<size_t>(j)][0] / sum[0]) : rank_fb[r][0] / vp;
      cp.bwd = sum[1] > 0 ? rank_fb[r][1] * (raw[static_cast<size_t>(j)][1] / sum[1]) : rank_fb[r][1] / vp;
    }
  }
  return out;
}

StepTime compose_step_time(const Scenario& s, const StepInputs& in, const Flops& flops, bool per_stage) {
  assert(in.num_ranks > 0 && in.dense && in.moe && in.mtp && in.stages && in.stage_input);
  const HardwareSpec& hw = s.hardware;
  StepTime out;
  if (per_stage) out.stages.reserve(static_cast<size_t>(in.num_ranks));
  // Ranks sharing stage inputs share the result: compute each distinct one once, in
  // rank order (the same values a per-rank computation gives). The cache is raw storage:
  // this runs once per layout in the planner, and zeroing it would cost more than the sums.
  static_assert(std::is_trivially_destructible_v<StageResult>);
  constexpr int kMaxDistinct = 8;
  alignas(StageResult) unsigned char storage[kMaxDistinct * sizeof(StageResult)];
  StageResult* cached = reinterpret_cast<StageResult*>(storage);
  int cached_input[kMaxDistinct];
  int num_cached = 0;
  const StageResult* bn_result = nullptr;
  // Results beyond kMaxDistinct: the current one and the bottleneck.
  alignas(StageResult) unsigned char overflow_storage[2 * sizeof(StageResult)];
  StageResult* overflow = reinterpret_cast<StageResult*>(overflow_storage);
  double worst = -1;
  std::vector<std::array<double, 2>> rank_fb;  // with a pipeline: each rank's {fwd, bwd}
  if (in.num_ranks > 1) rank_fb.reserve(static_cast<size_t>(in.num_ranks));
  for (int r = 0; r < in.num_ranks;) {
    const int input = in.stage_input[r];
    // Consecutive ranks with the same inputs (the middle of a pipeline): one result.
    int run = 1;
    while (r + run < in.num_ranks && in.stage_input[r + run] == input) ++run;
    const StageResult* res = nullptr;
    for (int c = 0; c < num_cached && !res; ++c)
      if (cached_input[c] == input) res = &cached[c];
    if (!res) {
      if (num_cached < kMaxDistinct) {
        res = new (&cached[num_cached]) StageResult(stage_result(in.stages[input], in));
        cached_input[num_cached++] = input;
      } else {
        StageResult* slot = bn_result == &overflow[0] ? &overflow[1] : &overflow[0];
        res = new (slot) StageResult(stage_result(in.stages[input], in));
      }
    }
    if (in.num_ranks > 1)
      for (int k = 0; k < run; ++k) rank_fb.push_back({res->t.fwd, res->t.bwd});
    if (res->score > worst) {  // equal scores: the run's first rank stays the bottleneck
      worst = res->score;
      out.bottleneck_stage = r;
      bn_result = res;
    }
    for (int k = 0; per_stage && k < run; ++k) {
      out.stages.push_back(res->t);
      out.stages.back().stage = r + k;
    }
    r += run;
  }
  const StageTime& bn = bn_result->t;
  out.dp_exposed = bn_result->dp_exposed;
  out.dp_hidden = bn_result->dp_hidden;
  out.optimizer = bn.optimizer;  // GPU work; its host wait joins host_idle below
  const double fb_max = bn.fwd + bn.bwd;
  const double mb = in.num_micro_batches;
  // One rank: m micro-batches back to back. A pipeline: Megatron's 1F1B or interleaved 1F1B
  // schedule run pass by pass over the model chunks' times (pipeline_schedule.hpp); with
  // equal chunks that is m * fb_max + (sum_r fb_r - fb_max) / vp (Narayanan et al. 2021).
  // The bubble is what the bottleneck rank does not fill.
  out.pipeline = in.num_ranks > 1
                     ? pipeline_makespan(in.num_ranks, std::max(1, in.vp), in.num_micro_batches,
                                         pipeline_chunk_passes(s, in, rank_fb),
                                         s.parallel.microbatch_group_size_per_vp_stage)
                     : mb * fb_max;
  out.bubble = std::max(0.0, out.pipeline - mb * fb_max);
  // The step closes with a synchronisation (the gradient norm's .item() before the optimizer
  // update) and the training loop's own Python (host.iteration_overhead); the next step's
  // first kernel waits for its launch.
  const double step_sync = hw.host.sync + hw.host.launch_latency + hw.host.iteration_overhead;
  out.host_idle = mb * bn.host_idle + step_sync + bn_result->opt_host_wait;
  for (size_t i = 0; i < kNumOpClasses; ++i) out.compute[i] = mb * bn.compute[i];
  out.straggler = slowest_gpu_wait(out.compute, s.training.precision == Precision::kFp8, s.num_gpus, hw.efficiency);
  out.step_s = out.pipeline + out.dp_exposed + bn_result->opt + step_sync + out.straggler;
  for (size_t i = 0; i < kNumCommDims; ++i) out.exposed_comm[i] = mb * bn.exposed_comm[i];
  out.exposed_comm[idx(CommDim::kDp)] += out.dp_exposed;
  const double world = s.num_gpus;
  const double tokens = static_cast<double>(s.training.global_batch_size) * static_cast<double>(s.training.seq_length);
  out.tokens_per_s = tokens / out.step_s;
  out.tokens_per_s_per_gpu = tokens / (out.step_s * world);
  out.model_tflops_per_gpu = flops.model_flops / (out.step_s * world) / 1e12;
  out.mfu = flops.model_flops / (out.step_s * world) / hw.gpu.peak_bf16_flops;
  out.hfu = flops.hardware_flops / (out.step_s * world) / hw.gpu.peak_bf16_flops;
  return out;
}

StepTime step_time(const Scenario& s, const Mesh& m, const Schedule& sched, const Flops& flops) {
  const HardwareSpec& hw = s.hardware;
  const ParallelSpec& par = s.parallel;
  const MeshTopology topo = mesh_topology(s, m);
  const LayerTimes dense = layer_times(sched.dense, par, topo, hw);
  const LayerTimes moe = layer_times(sched.moe, par, topo, hw);
  const LayerTimes mtp = layer_times(sched.mtp, par, topo, hw);
  const size_t n = sched.stages.size();
  std::vector<StageInputs> stages(n);
  std::vector<std::array<PassTime, 4>> edges(n);
  std::vector<std::vector<StepOpTime>> steps(n);
  std::vector<int> stage_input(n);
  for (size_t r = 0; r < n; ++r) {
    const StageSchedule& st = sched.stages[r];
    StageInputs& in = stages[r];
    copy_layer_counts(st, in);
    edges[r] = edge_times({&st.pre_fwd, &st.post_fwd, &st.post_bwd, &st.pre_bwd}, par, topo, hw);
    in.pre_fwd = &edges[r][0];
    in.post_fwd = &edges[r][1];
    in.post_bwd = &edges[r][2];
    in.pre_bwd = &edges[r][3];
    steps[r] = step_op_times(st.step, topo, hw);
    in.step = steps[r].data();
    in.num_step = static_cast<int>(steps[r].size());
    stage_input[r] = static_cast<int>(r);
  }
  StepInputs in;
  in.dense = &dense;
  in.moe = &moe;
  in.mtp = &mtp;
  in.stages = stages.data();
  in.stage_input = stage_input.data();
  in.num_ranks = static_cast<int>(n);
  in.vp = m.vp;
  in.num_micro_batches = m.num_micro_batches;
  return compose_step_time(s, in, flops, true);
}

double expected_max_standard_normal(int64_t n) {
  if (n <= 1) return 0.0;
  const double p = (static_cast<double>(n) - 0.375) / (static_cast<double>(n) + 0.25);
  // Phi^-1(p) for p in (0.5, 1): Acklam's rational approximation (relative error below 1.2e-9).
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
                          -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kHigh = 1 - 0.02425;
  if (p <= kHigh) {
    const double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double q = std::sqrt(-2 * std::log(1 - p));
  return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
         ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
}

double slowest_gpu_wait(const std::array<double, kNumOpClasses>& compute, bool fp8, int64_t num_gpus,
                        const EfficiencySpec& e) {
  const double gemm = compute[static_cast<size_t>(OpClass::kGemm)];
  const double attention = compute[static_cast<size_t>(OpClass::kAttention)];
  const double spread_seconds =
      gemm * (fp8 ? e.gpu_speed_spread_fp8 : e.gpu_speed_spread) + attention * e.gpu_speed_spread;
  return spread_seconds > 0 ? spread_seconds * expected_max_standard_normal(num_gpus) : 0.0;
}

std::array<StepTerm, kNumStepTerms> step_terms(const std::array<double, kNumOpClasses>& compute,
                                               const std::array<double, kNumCommDims>& exposed_comm, double bubble,
                                               double host_idle, double straggler, double optimizer) {
  using G = StepTermGroup;
  static_assert(kNumOpClasses == 3 && kNumCommDims == 7, "one entry per op class and dimension below");
  const auto c = [&](OpClass k) { return compute[static_cast<size_t>(k)]; };
  const auto x = [&](CommDim d) { return exposed_comm[idx(d)]; };
  using D = CommDim;
  return {{
      {G::kCompute, "gemm", "GEMM", "GEMM compute", c(OpClass::kGemm)},
      {G::kCompute, "attention", "attention", "attention compute", c(OpClass::kAttention)},
      {G::kCompute, "memory_bound", "memory-bound", "memory-bound ops", c(OpClass::kMemoryBound)},
      {G::kExposedComm, to_string(D::kTp), "TP comm", "exposed TP communication", x(D::kTp)},
      {G::kExposedComm, to_string(D::kCp), "CP comm", "exposed CP communication", x(D::kCp)},
      {G::kExposedComm, to_string(D::kEp), "EP comm", "exposed EP communication", x(D::kEp)},
      {G::kExposedComm, to_string(D::kPp), "PP comm", "exposed PP communication", x(D::kPp)},
      {G::kExposedComm, to_string(D::kDp), "DP comm", "exposed DP communication", x(D::kDp)},
      {G::kExposedComm, to_string(D::kEdp), "EDP comm", "exposed EDP communication", x(D::kEdp)},
      {G::kExposedComm, to_string(D::kEmb), "embedding comm", "exposed embedding communication", x(D::kEmb)},
      {G::kBubble, "bubble", "pipeline bubble", "pipeline bubble", bubble},
      {G::kBubble, "host", "host-bound", "GPU idle waiting on the host", host_idle},
      {G::kBubble, "straggler", "slowest GPU", "waiting on the job's slowest GPU", straggler},
      {G::kOptimizer, "optimizer", "optimizer", "optimizer step", optimizer},
  }};
}

}  // namespace lcm
