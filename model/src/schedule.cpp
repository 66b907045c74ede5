// Per-op schedule of one training step (see schedule.hpp). Shapes follow Megatron-Core's
// modules (TE backend): column-parallel QKV / fc1, row-parallel out-proj / fc2, SP
// all-gather before and reduce-scatter after each TP region, vocab-parallel embedding and
// output layer, the alltoall MoE dispatcher (permute, EP all-to-all, ETP all-gather,
// grouped expert GEMMs, and back), TE's CP implementations. Sources: formulas.md §2-§4.
#include "lcm/model/schedule.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

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

constexpr double kAct = 2.0;

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }  // bytes per bf16 activation element

// Everything about one micro-batch on one rank that the op shapes need.
struct Ctx {
  const Scenario* s;
  const Mesh* m;
  double b, seq, h;
  int64_t tokens;      // b·s/c: tokens of this rank's CP chunk (full hidden under TP)
  int64_t sp_tokens;   // tokens held between TP regions (tokens/t with SP)
  int t, c;
  DType gemm_dtype;
};

Op gemm(const char* base, int64_t m, int64_t n, int64_t k, int groups, const Ctx& x) {
  Op o;
  o.base = base;
  o.kind = OpKind::kGemm;
  o.dtype = x.gemm_dtype;
  o.gemm = GemmShape{m, n, k, groups};
  o.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  o.model_flops = o.flops;
  return o;
}

Op memory_op(const char* base, double bytes) {
  Op o;
  o.base = base;
  o.kind = OpKind::kMemoryBound;
  o.bytes = bytes;
  return o;
}

Stream stream_of(CommDim d) {
  switch (d) {
    case CommDim::kTp: return Stream::kTp;
    case CommDim::kCp: return Stream::kCp;
    case CommDim::kEp: return Stream::kEp;
    case CommDim::kPp: return Stream::kPp;
    case CommDim::kDp:
    case CommDim::kEdp:
    case CommDim::kEmb: return Stream::kDp;
  }
  return Stream::kCompute;
}

Op coll(const char* base, Collective kind, CommDim dim, int group, double message_bytes) {
  Op o;
  o.base = base;
  o.kind = kind == Collective::kSendRecv ? OpKind::kSendRecv : OpKind::kCollective;
  o.stream = stream_of(dim);
  o.coll = CollectiveShape{kind, dim, group, message_bytes};
  return o;
}

double head_dim(const ModelSpec& md) {
  return md.kv_channels > 0 ? static_cast<double>(md.kv_channels)
                            : static_cast<double>(md.hidden_size) / md.num_attention_heads;
}

// TP-region entry/exit: SP all-gather / reduce-scatter, or a plain all-reduce at the exit.
void tp_enter(std::vector<Op>& ops, const char* base, const Ctx& x) {
  if (x.t > 1 && x.m->sp)
    ops.push_back(coll(base, Collective::kAllGather, CommDim::kTp, x.t, x.tokens * x.h * kAct));
}
void tp_exit(std::vector<Op>& ops, const char* sp_base, const char* ar_base, const Ctx& x) {
  if (x.t <= 1) return;
  if (x.m->sp)
    ops.push_back(coll(sp_base, Collective::kReduceScatter, CommDim::kTp, x.t, x.tokens * x.h * kAct));
  else
    ops.push_back(coll(ar_base, Collective::kAllReduce, CommDim::kTp, x.t, x.tokens * x.h * kAct));
}

// Norm: read input, write output (bf16). Bias-dropout-add: read two, write one.
void norm(std::vector<Op>& ops, const char* base, const Ctx& x) {
  ops.push_back(memory_op(base, 2.0 * kAct * static_cast<double>(x.sp_tokens) * x.h));
}
void bda(std::vector<Op>& ops, const char* base, const Ctx& x) {
  ops.push_back(memory_op(base, 3.0 * kAct * static_cast<double>(x.sp_tokens) * x.h));
}

// The attention core and the CP communication around it.
void attention_core(std::vector<Op>& ops, const Ctx& x, double heads_q, double heads_kv, double d_qk,
                    double d_v) {
  const Scenario& s = *x.s;
  const double seq = x.seq;
  const int c = x.c;
  const double causal_fraction = 0.5;  // load-balanced causal chunks: each rank half of its rows
  Op a;
  a.base = "attn.core";
  a.kind = OpKind::kAttention;
  a.attn.batch = static_cast<int64_t>(x.b);
  a.attn.head_dim_qk = static_cast<int64_t>(d_qk);
  a.attn.head_dim_v = static_cast<int64_t>(d_v);
  a.attn.causal = true;
  a.attn.work_fraction = causal_fraction;
  a.attn.heads_q = static_cast<int64_t>(heads_q);
  a.attn.heads_kv = static_cast<int64_t>(std::max(1.0, heads_kv));
  a.attn.seq_q = static_cast<int64_t>(seq / c);
  a.attn.seq_kv = static_cast<int64_t>(seq);
  const double kv_chunk = x.b * (seq / c) * std::max(1.0, heads_kv) * (d_qk + d_v) * kAct;
  if (c > 1) {
    switch (s.parallel.cp_comm_type) {
      case CpCommType::kP2P: {
        Op o = coll("attn.cp.kv.p2p", Collective::kSendRecv, CommDim::kCp, c, kv_chunk);
        o.calls = c - 1;
        o.overlappable = true;
        ops.push_back(o);
        break;
      }
      case CpCommType::kAllGather:
        ops.push_back(coll("attn.cp.kv.allgather", Collective::kAllGather, CommDim::kCp, c, kv_chunk * c));
        break;
      case CpCommType::kA2A:
        // Ulysses: heads scattered over CP, sequence gathered; full sequence per rank.
        ops.push_back(coll("attn.cp.a2a.qkv", Collective::kAllToAll, CommDim::kCp, c,
                           x.b * (seq / c) * (heads_q * d_qk + std::max(1.0, heads_kv) * (d_qk + d_v)) * kAct));
        a.attn.seq_q = static_cast<int64_t>(seq);
        a.attn.heads_q = static_cast<int64_t>(heads_q / c);
        a.attn.heads_kv = static_cast<int64_t>(std::max(1.0, heads_kv / c));
        break;
      case CpCommType::kA2AP2P: {
        const auto& hs = s.parallel.hierarchical_context_parallel_sizes;
        const int inner = hs.size() == 2 ? hs[0] : 1;
        const int outer = hs.size() == 2 ? hs[1] : c;
        ops.push_back(coll("attn.cp.a2a.qkv", Collective::kAllToAll, CommDim::kCp, inner,
                           x.b * (seq / c) * (heads_q * d_qk + std::max(1.0, heads_kv) * (d_qk + d_v)) * kAct));
        Op o = coll("attn.cp.kv.p2p", Collective::kSendRecv, CommDim::kCp, outer, kv_chunk * inner / std::max(1, inner));
        o.calls = outer - 1;
        o.overlappable = true;
        ops.push_back(o);
        a.attn.seq_q = static_cast<int64_t>(seq / outer);
        a.attn.heads_q = static_cast<int64_t>(heads_q / inner);
        a.attn.heads_kv = static_cast<int64_t>(std::max(1.0, heads_kv / inner));
        break;
      }
    }
  }
  const double pairs = static_cast<double>(a.attn.seq_q) * static_cast<double>(a.attn.seq_kv) *
                       a.attn.work_fraction * x.b;
  a.flops = 2.0 * pairs * static_cast<double>(a.attn.heads_q) * (d_qk + d_v);
  a.model_flops = s.flop_convention.causal_halved ? a.flops : 2.0 * a.flops;
  ops.push_back(a);
  if (c > 1 && (s.parallel.cp_comm_type == CpCommType::kA2A || s.parallel.cp_comm_type == CpCommType::kA2AP2P)) {
    const int inner = s.parallel.cp_comm_type == CpCommType::kA2A ? c
                      : (s.parallel.hierarchical_context_parallel_sizes.size() == 2
                             ? s.parallel.hierarchical_context_parallel_sizes[0] : 1);
    ops.push_back(coll("attn.cp.a2a.o", Collective::kAllToAll, CommDim::kCp, inner,
                       x.b * (seq / c) * heads_q * d_v * kAct));
  }
}

// Attention block forward: norm, [SP all-gather], projections, core, out-proj, [TP exit], bda.
void attention_block(std::vector<Op>& ops, const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const double t = x.t;
  const int64_t T = x.tokens;
  const int64_t h = md.hidden_size;
  norm(ops, "attn.norm", x);
  tp_enter(ops, "attn.sp.allgather", x);
  if (md.multi_latent_attention) {
    const double a = md.num_attention_heads;
    const double dn = static_cast<double>(md.qk_head_dim), dr = static_cast<double>(md.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(md.v_head_dim);
    if (md.q_lora_rank > 0) {
      ops.push_back(gemm("attn.q_down", T, md.q_lora_rank, h, 1, x));
      ops.push_back(gemm("attn.q_up", T, static_cast<int64_t>(a * (dn + dr) / t), md.q_lora_rank, 1, x));
    } else {
      ops.push_back(gemm("attn.q", T, static_cast<int64_t>(a * (dn + dr) / t), h, 1, x));
    }
    ops.push_back(gemm("attn.kv_down", T, md.kv_lora_rank + md.qk_pos_emb_head_dim, h, 1, x));
    ops.push_back(gemm("attn.kv_up", T, static_cast<int64_t>(a * (dn + dv) / t), md.kv_lora_rank, 1, x));
    ops.push_back(memory_op("attn.rope", 2.0 * kAct * static_cast<double>(T) * (a / t + 1) * dr));
    attention_core(ops, x, a / t, a / t, dn + dr, dv);
    ops.push_back(gemm("attn.proj", T, h, static_cast<int64_t>(a * dv / t), 1, x));
  } else {
    const double a = md.num_attention_heads;
    const double g = md.num_query_groups > 0 ? md.num_query_groups : md.num_attention_heads;
    const double dh = head_dim(md);
    ops.push_back(gemm("attn.qkv", T, static_cast<int64_t>((a + 2 * g) * dh / t), h, 1, x));
    if (md.position_embedding_type == PositionEmbedding::kRope)
      ops.push_back(memory_op("attn.rope", 2.0 * kAct * static_cast<double>(T) * (a + g) / t * dh));
    attention_core(ops, x, a / t, g / t, dh, dh);
    ops.push_back(gemm("attn.proj", T, h, static_cast<int64_t>(a * dh / t), 1, x));
  }
  tp_exit(ops, "attn.sp.reducescatter", "attn.tp.allreduce", x);
  bda(ops, "attn.bda", x);
}

// A TP-sharded MLP of width w on the full tokens (dense MLP or shared experts).
void mlp_gemms(std::vector<Op>& ops, const char* fc1, const char* act, const char* fc2, double w,
               const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const double gate = md.swiglu ? 2.0 : 1.0;
  const int64_t T = x.tokens;
  ops.push_back(gemm(fc1, T, static_cast<int64_t>(gate * w / x.t), md.hidden_size, 1, x));
  ops.push_back(memory_op(act, kAct * static_cast<double>(T) * (gate + 1.0) * w / x.t));
  ops.push_back(gemm(fc2, T, md.hidden_size, static_cast<int64_t>(w / x.t), 1, x));
}

void dense_mlp_block(std::vector<Op>& ops, const Ctx& x) {
  norm(ops, "mlp.norm", x);
  tp_enter(ops, "mlp.sp.allgather", x);
  mlp_gemms(ops, "mlp.fc1", "mlp.act", "mlp.fc2", static_cast<double>(x.s->model.ffn_hidden_size), x);
  tp_exit(ops, "mlp.sp.reducescatter", "mlp.tp.allreduce", x);
  bda(ops, "mlp.bda", x);
}

// MoE block with the alltoall dispatcher: tokens enter SP-sharded (sp_tokens per rank).
void moe_block(std::vector<Op>& ops, const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const Mesh& m = *x.m;
  const double E = md.num_experts, k = md.moe_router_topk, h = static_cast<double>(md.hidden_size);
  const double f_e = static_cast<double>(md.moe_ffn_hidden_size > 0 ? md.moe_ffn_hidden_size : md.ffn_hidden_size);
  const double Tr = static_cast<double>(x.sp_tokens);
  norm(ops, "mlp.norm", x);
  ops.push_back(gemm("moe.router", x.sp_tokens, md.num_experts, md.hidden_size, 1, x));
  ops.push_back(memory_op("moe.topk", 3.0 * 4.0 * Tr * E));
  // Token-expert assignments leaving this rank: T·k dropless, E·C when padded to capacity.
  double assignments = Tr * k;
  if (md.moe_expert_capacity_factor > 0 && md.moe_pad_expert_input_to_capacity)
    assignments = E * std::ceil(Tr * k / E * md.moe_expert_capacity_factor);
  const double dispatch_bytes = x.s->parallel.moe_fp8_dispatch ? 1.0 : kAct;
  ops.push_back(memory_op("moe.permute", 2.0 * kAct * assignments * h));
  if (m.ep > 1)
    ops.push_back(coll("moe.dispatch.a2a", Collective::kAllToAll, CommDim::kEp, m.ep, assignments * h * dispatch_bytes));
  // Tokens the local experts process (balanced routing: what this rank sent), gathered over
  // ETP when tokens arrive sequence-parallel (without SP every TP rank already holds them).
  const bool etp_gather = m.etp > 1 && m.sp;
  const double expert_tokens = etp_gather ? assignments * m.etp : assignments;
  if (etp_gather)
    ops.push_back(coll("moe.dispatch.etp.allgather", Collective::kAllGather, CommDim::kTp, m.etp, expert_tokens * h * kAct));
  const int local_experts = std::max(1, md.num_experts / m.ep);
  const double gate = md.swiglu ? 2.0 : 1.0;
  const auto M = static_cast<int64_t>(expert_tokens);
  ops.push_back(gemm("moe.experts.fc1", M, static_cast<int64_t>(gate * f_e / m.etp), md.hidden_size, local_experts, x));
  ops.push_back(memory_op("moe.experts.act", kAct * expert_tokens * (gate + 1.0) * f_e / m.etp));
  ops.push_back(gemm("moe.experts.fc2", M, md.hidden_size, static_cast<int64_t>(f_e / m.etp), local_experts, x));
  if (etp_gather)
    ops.push_back(coll("moe.combine.etp.reducescatter", Collective::kReduceScatter, CommDim::kTp, m.etp, expert_tokens * h * kAct));
  if (m.etp > 1 && !m.sp)  // expert outputs are partial sums over the ETP shards of f_e
    ops.push_back(coll("moe.combine.etp.allreduce", Collective::kAllReduce, CommDim::kTp, m.etp, expert_tokens * h * kAct));
  if (m.ep > 1)
    ops.push_back(coll("moe.combine.a2a", Collective::kAllToAll, CommDim::kEp, m.ep, assignments * h * kAct));
  ops.push_back(memory_op("moe.unpermute", 2.0 * kAct * assignments * h));
  if (md.moe_shared_expert_intermediate_size > 0) {
    tp_enter(ops, "moe.shared.sp.allgather", x);
    mlp_gemms(ops, "moe.shared.fc1", "moe.shared.act", "moe.shared.fc2",
              static_cast<double>(md.moe_shared_expert_intermediate_size), x);
    tp_exit(ops, "moe.shared.sp.reducescatter", "moe.shared.tp.allreduce", x);
  }
  bda(ops, "mlp.bda", x);
}

// Backward of a forward op list: reversed; GEMM -> dgrad + wgrad; attention -> backward
// (FlashAttention convention: 2.5x forward executed, 2x forward counted as model FLOPs);
// memory-bound ops move twice the bytes; all-gather <-> reduce-scatter; CP p2p carries
// KV and dKV.
std::vector<Op> backward_of(const std::vector<Op>& fwd) {
  std::vector<Op> out;
  out.reserve(fwd.size() * 2);
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    Op o = *it;
    o.pass = Pass::kBwd;
    switch (o.kind) {
      case OpKind::kGemm: {
        const GemmShape g = o.gemm;
        Op d = o;
        d.part = GemmPart::kDgrad;
        d.gemm = GemmShape{g.m, g.k, g.n, g.groups};
        Op w = o;
        w.part = GemmPart::kWgrad;
        w.gemm = GemmShape{g.k, g.n, g.m, g.groups};
        out.push_back(d);
        out.push_back(w);
        continue;
      }
      case OpKind::kAttention:
        o.flops = 2.5 * it->flops;
        o.model_flops = 2.0 * it->model_flops;
        break;
      case OpKind::kMemoryBound:
        o.bytes = 2.0 * it->bytes;
        break;
      case OpKind::kCollective:
        if (o.coll.kind == Collective::kAllGather) o.coll.kind = Collective::kReduceScatter;
        else if (o.coll.kind == Collective::kReduceScatter) o.coll.kind = Collective::kAllGather;
        if (starts_with(o.base, "attn.cp.kv.allgather")) o.coll.kind = Collective::kReduceScatter;
        break;
      case OpKind::kSendRecv:
        if (o.coll.dim == CommDim::kCp) o.coll.message_bytes *= 2.0;  // KV + dKV
        break;
    }
    out.push_back(o);
  }
  return out;
}

// Recompute ops for the layer: everything (full), or the selected modules.
std::vector<Op> recompute_of(const std::vector<Op>& fwd, const ParallelSpec& par, bool full) {
  std::vector<Op> out;
  auto has = [&](uint32_t bit) { return (par.recompute_modules & bit) != 0; };
  auto prefix = [](const Op& o, const char* p) { return starts_with(o.base, p); };
  for (const Op& f : fwd) {
    bool take = full;
    if (!full && par.recompute_granularity == RecomputeGranularity::kSelective) {
      take = (has(kRecomputeCoreAttn) && prefix(f, "attn.core")) ||
             (has(kRecomputeLayernorm) && (prefix(f, "attn.norm") || prefix(f, "mlp.norm"))) ||
             (has(kRecomputeMoeAct) && prefix(f, "moe.experts.act")) ||
             (has(kRecomputeMlaUpProj) && (prefix(f, "attn.q_up") || prefix(f, "attn.kv_up"))) ||
             (has(kRecomputeMlp) && prefix(f, "mlp.") && !prefix(f, "mlp.norm") && !prefix(f, "mlp.bda")) ||
             (has(kRecomputeMoe) && prefix(f, "moe.") && !prefix(f, "moe.shared")) ||
             (has(kRecomputeSharedExperts) && prefix(f, "moe.shared"));
      // Recomputing attention in Megatron's CP ring re-runs its KV exchange.
      if (has(kRecomputeCoreAttn) && prefix(f, "attn.cp.")) take = true;
    }
    if (!take) continue;
    Op o = f;
    o.pass = Pass::kRecompute;
    o.model_flops = 0;
    out.push_back(o);
  }
  return out;
}

LayerOps layer_ops(const Ctx& x, bool moe) {
  LayerOps l;
  attention_block(l.fwd, x);
  if (moe) moe_block(l.fwd, x);
  else dense_mlp_block(l.fwd, x);
  const ParallelSpec& par = x.s->parallel;
  if (par.recompute_granularity != RecomputeGranularity::kNone)
    l.recompute = recompute_of(l.fwd, par, par.recompute_granularity == RecomputeGranularity::kFull);
  l.bwd = backward_of(l.fwd);
  return l;
}

// Last stage: final norm, logits (vocab-parallel), fused cross entropy.
void head_ops(std::vector<Op>& ops, const Ctx& x, const char* norm_base, const char* ag_base,
              const char* logits_base, const char* loss_base) {
  const double v_local = static_cast<double>(x.m->padded_vocab) / x.t;
  norm(ops, norm_base, x);
  tp_enter(ops, ag_base, x);
  ops.push_back(gemm(logits_base, x.tokens, static_cast<int64_t>(v_local), x.s->model.hidden_size, 1, x));
  // Cross entropy over fp32 logits: read logits, write softmax-ready buffer, (bwd reads it).
  ops.push_back(memory_op(loss_base, 3.0 * 4.0 * static_cast<double>(x.tokens) * v_local));
  if (x.t > 1) ops.push_back(coll("loss.tp.allreduce", Collective::kAllReduce, CommDim::kTp, x.t, 3.0 * 4.0 * static_cast<double>(x.tokens)));
}

// One MTP depth (DeepSeek-V3): eh_proj over [embedding of the shifted tokens; hidden],
// a transformer layer of the kind of the model's last layer, its own norm, head and loss.
// MTP layers are not recomputed (Megatron only applies uniform full recompute to them;
// the FLOP model counts that, the schedule leaves it out).
LayerOps mtp_ops(const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const bool moe = md.num_experts > 0 && is_moe_layer(md, md.num_layers - 1);
  LayerOps l;
  l.fwd.push_back(memory_op("mtp.embed", 2.0 * kAct * static_cast<double>(x.tokens) * x.h));
  l.fwd.push_back(gemm("mtp.eh_proj", x.tokens, static_cast<int64_t>(x.h / x.t), 2 * md.hidden_size, 1, x));
  attention_block(l.fwd, x);
  if (moe) moe_block(l.fwd, x);
  else dense_mlp_block(l.fwd, x);
  head_ops(l.fwd, x, "mtp.norm", "mtp.sp.allgather", "mtp.logits", "mtp.loss");
  l.bwd = backward_of(l.fwd);
  return l;
}

// Once-per-step ops: gradient reduction and parameter gather over DP (dense parameters,
// group dp·cp) and EDP (expert parameters), the tied-embedding gradient sync between
// first and last stage, and the optimizer update. Sources: formulas.md §3.1, §4.4.
std::vector<Op> step_ops(const Scenario& s, const Mesh& m, const StageLayers& sl, const GpuParams& p) {
  std::vector<Op> ops;
  const ParallelSpec& par = s.parallel;
  const double grad_bytes = s.training.grad_reduce_in_fp32 ? 4.0 : 2.0;
  const int dp_group = m.dp * m.cp;
  DpSharding sharding = par.data_parallel_sharding_strategy;
  if (par.use_distributed_optimizer && sharding == DpSharding::kNoShard) sharding = DpSharding::kOptim;
  auto add = [&](const char* base, Collective kind, CommDim dim, int group, double bytes, bool overlap) {
    if (group <= 1 || bytes <= 0) return;
    Op o = coll(base, kind, dim, group, bytes);
    o.pass = Pass::kStep;
    o.overlappable = overlap;
    ops.push_back(o);
  };
  struct Group { double params; CommDim dim; int size; const char* ar; const char* rs; const char* ag; const char* ag_bwd; };
  const Group groups[2] = {
      {p.dense, CommDim::kDp, dp_group, "dp.grads.allreduce", "dp.grads.reducescatter", "dp.params.allgather", "dp.params.allgather.bwd"},
      {p.expert, CommDim::kEdp, m.edp, "edp.grads.allreduce", "edp.grads.reducescatter", "edp.params.allgather", "edp.params.allgather.bwd"}};
  double optimizer_params = 0;
  for (const Group& g : groups) {
    if (sharding == DpSharding::kNoShard) {
      add(g.ar, Collective::kAllReduce, g.dim, g.size, g.params * grad_bytes, par.overlap_grad_reduce);
      optimizer_params += g.params;
    } else {
      add(g.rs, Collective::kReduceScatter, g.dim, g.size, g.params * grad_bytes, par.overlap_grad_reduce);
      add(g.ag, Collective::kAllGather, g.dim, g.size, g.params * kAct, par.overlap_param_gather);
      if (sharding == DpSharding::kOptimGradsParams)
        add(g.ag_bwd, Collective::kAllGather, g.dim, g.size, g.params * kAct, true);
      optimizer_params += g.params / std::max(1, g.size);
    }
  }
  if (!s.model.untie_embeddings_and_output_weights && m.pp > 1 && (sl.has_embedding || sl.has_output))
    add("emb.grads.allreduce", Collective::kAllReduce, CommDim::kEmb, 2,
        static_cast<double>(m.padded_vocab) / m.tp * static_cast<double>(s.model.hidden_size) * grad_bytes, false);
  // Fused Adam: read fp32 param, grad, exp_avg, exp_avg_sq; write them back and the bf16 copy.
  Op opt = memory_op("optimizer.step", 30.0 * optimizer_params);
  opt.pass = Pass::kStep;
  ops.push_back(opt);
  return ops;
}

}  // namespace

Schedule build_schedule(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                        const std::vector<GpuParams>& params) {
  Ctx x;
  x.s = &s;
  x.m = &m;
  x.b = s.training.micro_batch_size;
  x.seq = static_cast<double>(s.training.seq_length);
  x.h = static_cast<double>(s.model.hidden_size);
  x.t = m.tp;
  x.c = m.cp;
  x.tokens = static_cast<int64_t>(x.b * x.seq / m.cp);
  x.sp_tokens = m.sp ? x.tokens / m.tp : x.tokens;
  x.gemm_dtype = s.training.precision == Precision::kFp8 ? DType::kFp8 : DType::kBf16;

  Schedule out;
  out.num_micro_batches = m.num_micro_batches;
  out.vp = m.vp;
  int dense_layers = 0, moe_layers = 0, mtp_layers = 0;
  for (const StageLayers& sl : layers) {
    dense_layers += sl.num_layers - sl.num_moe_layers;
    moe_layers += sl.num_moe_layers;
    mtp_layers += sl.num_mtp_layers;
  }
  if (dense_layers > 0) out.dense = layer_ops(x, false);
  if (moe_layers > 0) out.moe = layer_ops(x, true);
  if (mtp_layers > 0) out.mtp = mtp_ops(x);
  const bool selective = s.parallel.recompute_granularity == RecomputeGranularity::kSelective;
  out.stages.reserve(layers.size());
  const double pp_bytes = static_cast<double>(x.sp_tokens) * x.h * kAct;
  for (size_t r = 0; r < layers.size(); ++r) {
    const StageLayers& sl = layers[r];
    StageSchedule st;
    st.stage = static_cast<int>(r);
    st.dense = sl.num_layers - sl.num_moe_layers;
    st.moe = sl.num_moe_layers;
    st.mtp = sl.num_mtp_layers;
    st.dense_recomputed = out.dense.recompute.empty() ? 0
                          : selective ? st.dense : sl.num_recomputed_layers - sl.num_recomputed_moe_layers;
    st.moe_recomputed = out.moe.recompute.empty() ? 0 : selective ? st.moe : sl.num_recomputed_moe_layers;
    const bool first = r == 0, last = r + 1 == layers.size();
    if (first) {
      st.pre_fwd.push_back(memory_op("embed", 2.0 * kAct * static_cast<double>(x.tokens) * x.h));
      tp_exit(st.pre_fwd, "embed.sp.reducescatter", "embed.tp.allreduce", x);
      st.pre_bwd = backward_of(st.pre_fwd);
    } else {
      st.pre_fwd.push_back(coll("pp.recv", Collective::kSendRecv, CommDim::kPp, 2, pp_bytes));
      st.pre_bwd.push_back(coll("pp.send.grad", Collective::kSendRecv, CommDim::kPp, 2, pp_bytes));
      st.pre_bwd.back().pass = Pass::kBwd;
    }
    if (last) {
      head_ops(st.post_fwd, x, "final.norm", "logits.sp.allgather", "logits", "loss");
      st.post_bwd = backward_of(st.post_fwd);
    } else {
      st.post_fwd.push_back(coll("pp.send", Collective::kSendRecv, CommDim::kPp, 2, pp_bytes));
      st.post_bwd.push_back(coll("pp.recv.grad", Collective::kSendRecv, CommDim::kPp, 2, pp_bytes));
      st.post_bwd.back().pass = Pass::kBwd;
    }
    st.step = step_ops(s, m, sl, params[r]);
    out.stages.push_back(std::move(st));
  }
  return out;
}

}  // namespace lcm
