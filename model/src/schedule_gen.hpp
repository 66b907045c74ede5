// Internal to lcm_model: the one generator of the op schedule (schedule.hpp), with two
// consumers. build_schedule() collects its output into the Schedule's vectors;
// estimate_comm() (comm.cpp) folds the communication ops of the busiest stage into
// CommItems without building any vector. Every communication volume of the cost model
// is written here, once: docs/communication-model.md derives each one, docs/op-schedule.md
// lists the op names.
//
// The generator emits *elements*: the forward ops of one block in execution order, each
// carrying what the other passes make of it (Elem). A forward op is recomputed when its
// recompute module is selected (or under full recompute); its backward counterpart is
// derived per element (GEMM -> dgrad + wgrad, a collective -> its conjugate, given
// explicitly). Backward-only collectives (the all-reduce behind an identity copy, TE's
// re-gather of K and V) are elements whose op already has pass kBwd; they sit where the
// backward meets them, mirrored. build_schedule reverses the element list for the
// backward pass; the fold only sums, so it takes every element as it comes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/routing.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::sched {

inline constexpr double kAct = 2.0;  // bytes per bf16 element (activations, their grads, bf16 weights)

// Everything about one micro-batch on one rank that the op shapes and volumes need.
struct Ctx {
  const Scenario* s = nullptr;
  const Mesh* m = nullptr;
  double b = 0, seq = 0, h = 0;
  int64_t tokens = 0;     // b·s/c: tokens of this rank's CP chunk (full hidden under TP)
  int64_t sp_tokens = 0;  // tokens held between TP regions (tokens/t with SP)
  int t = 1, c = 1;
  bool sp = false;  // sequence parallel over t > 1 ranks
  DType gemm_dtype = DType::kBf16;
  // Volumes are real numbers (balanced-routing expectations are fractional).
  double T = 0;    // b·s/c
  double act = 0;  // X = T·h·2 B: one activation of this CP rank, the S of a TP collective
  double T_e = 0;  // tokens entering the MoE block on this rank: T/t with SP, else T
};

inline Ctx make_ctx(const Scenario& s, const Mesh& m) {
  Ctx x;
  x.s = &s;
  x.m = &m;
  x.b = s.training.micro_batch_size;
  x.seq = static_cast<double>(s.training.seq_length);
  x.h = static_cast<double>(s.model.hidden_size);
  x.t = m.tp;
  x.c = m.cp;
  x.sp = m.sp && m.tp > 1;
  x.tokens = static_cast<int64_t>(x.b * x.seq / m.cp);
  x.sp_tokens = m.sp ? x.tokens / m.tp : x.tokens;
  x.gemm_dtype = s.training.precision == Precision::kFp8 ? DType::kFp8 : DType::kBf16;
  x.T = static_cast<double>(s.training.micro_batch_size) * static_cast<double>(s.training.seq_length) / m.cp;
  x.act = x.T * x.h * kAct;
  x.T_e = x.T / (m.sp ? m.tp : 1);
  return x;
}

// ---------------------------------------------------------------------------------
// Ops and elements
// ---------------------------------------------------------------------------------

inline Stream stream_of(CommDim d) {
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

inline Op gemm_op(const char* base, int64_t m, int64_t n, int64_t k, int groups, const Ctx& x) {
  Op o;
  o.base = base;
  o.kind = OpKind::kGemm;
  o.dtype = x.gemm_dtype;
  o.gemm = GemmShape{m, n, k, groups};
  o.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  o.model_flops = o.flops;
  return o;
}

inline Op memory_op(const char* base, double bytes) {
  Op o;
  o.base = base;
  o.kind = OpKind::kMemoryBound;
  o.bytes = bytes;
  return o;
}

// A collective (or send/recv) of `calls` calls of S = message_bytes over `group` ranks,
// counted in Comm item `item` (nullptr: not counted, see Op::item).
inline Op coll_op(const char* base, Collective kind, CommDim dim, int group, double message_bytes, const char* item,
                  int calls = 1) {
  Op o;
  o.base = base;
  o.kind = kind == Collective::kSendRecv ? OpKind::kSendRecv : OpKind::kCollective;
  o.stream = stream_of(dim);
  o.coll = CollectiveShape{kind, dim, group, message_bytes};
  o.item = item;
  o.calls = calls;
  return o;
}

inline Op in_group(Op o, CommGroup g) {
  o.coll.group = g;
  return o;
}

inline bool is_comm(const Op& o) { return o.kind == OpKind::kCollective || o.kind == OpKind::kSendRecv; }

// One forward op and what the other passes make of it.
struct Elem {
  Op op;                     // op.pass == kFwd; kBwd: a backward-only op placed here
  uint32_t modules = 0;      // selective-recompute modules (kRecompute* bits) that rerun it
  bool checkpointed = true;  // inside the region full recompute reruns
  // Collectives: the backward counterpart (the conjugate collective), if any.
  bool has_bwd = true;
  Collective bwd_kind = Collective::kAllReduce;
  const char* bwd_item = nullptr;
  double bwd_bytes = 0;
  int bwd_calls = 1;
};

inline Elem compute_el(const Op& o, uint32_t modules = 0) {
  Elem e;
  e.op = o;
  e.modules = modules;
  return e;
}
// A collective whose backward runs `bwd_calls` calls of `bwd_kind` on S = bwd_bytes.
inline Elem coll_el(const Op& o, Collective bwd_kind, const char* bwd_item, double bwd_bytes, int bwd_calls,
                    uint32_t modules = 0) {
  Elem e;
  e.op = o;
  e.modules = modules;
  e.bwd_kind = bwd_kind;
  e.bwd_item = bwd_item;
  e.bwd_bytes = bwd_bytes;
  e.bwd_calls = bwd_calls;
  return e;
}
// A forward collective whose backward is an identity.
inline Elem fwd_only_el(const Op& o, uint32_t modules = 0) {
  Elem e;
  e.op = o;
  e.modules = modules;
  e.has_bwd = false;
  return e;
}
// A collective only the backward runs (at this point of the block, mirrored).
inline Elem bwd_only_el(Op o) {
  o.pass = Pass::kBwd;
  Elem e;
  e.op = o;
  e.has_bwd = false;
  return e;
}

// Which forward ops a pass reruns before the backward of a layer.
struct RecomputeSel {
  bool full = false;     // every op inside the checkpointed region
  uint32_t modules = 0;  // selective: ops of these modules
};

inline RecomputeSel layer_recompute(const ParallelSpec& par) {
  switch (par.recompute_granularity) {
    case RecomputeGranularity::kFull: return {true, 0};
    case RecomputeGranularity::kSelective: return {false, par.recompute_modules};
    case RecomputeGranularity::kNone: break;
  }
  return {};
}
// MTP depths (multi_token_prediction.py): full recompute checkpoints eh_proj and the
// layer with method uniform only (block is "not supported for MTP yet"); selective
// modules apply inside the MTP layer like anywhere else.
inline RecomputeSel mtp_recompute(const ParallelSpec& par) {
  if (par.recompute_granularity == RecomputeGranularity::kFull && par.recompute_method != RecomputeMethod::kUniform)
    return {};
  return layer_recompute(par);
}

// Layers of each kind on a stage that run a recompute pass before their backward.
struct RecomputeCounts {
  int dense = 0, moe = 0, mtp = 0;
};
inline RecomputeCounts recompute_counts(const ParallelSpec& par, const StageLayers& sl) {
  RecomputeCounts r;
  if (par.recompute_granularity == RecomputeGranularity::kFull) {
    r.dense = sl.num_recomputed_layers - sl.num_recomputed_moe_layers;
    r.moe = sl.num_recomputed_moe_layers;
    r.mtp = par.recompute_method == RecomputeMethod::kUniform ? sl.num_mtp_layers : 0;
  } else if (par.recompute_granularity == RecomputeGranularity::kSelective) {
    r.dense = sl.num_layers - sl.num_moe_layers;
    r.moe = sl.num_moe_layers;
    r.mtp = sl.num_mtp_layers;
  }
  return r;
}

// The ops an element contributes to each pass, through f(const Op&).
template <class F>
void fwd_op(const Elem& e, F&& f) {
  if (e.op.pass == Pass::kFwd) f(e.op);
}
inline bool recomputed(const Elem& e, const RecomputeSel& r) {
  if (e.op.pass != Pass::kFwd) return false;
  return r.full ? e.checkpointed : (e.modules & r.modules) != 0;
}
template <class F>
void recompute_op(const Elem& e, const RecomputeSel& r, F&& f) {
  if (!recomputed(e, r)) return;
  Op o = e.op;
  o.pass = Pass::kRecompute;
  o.model_flops = 0;
  f(o);
}
// Backward: GEMM -> dgrad + wgrad; attention -> backward (FlashAttention convention: 2.5x
// forward executed, 2x forward counted as model FLOPs); memory-bound ops move twice the
// bytes; collectives -> their conjugate as the element gives it.
template <class F>
void bwd_ops(const Elem& e, F&& f) {
  if (e.op.pass == Pass::kBwd) {
    f(e.op);
    return;
  }
  if (e.op.kind == OpKind::kGemm) {
    const GemmShape g = e.op.gemm;
    Op o = e.op;
    o.pass = Pass::kBwd;
    o.part = GemmPart::kDgrad;
    o.gemm = dgrad_shape(g);
    f(o);
    o.part = GemmPart::kWgrad;
    o.gemm = wgrad_shape(g);
    f(o);
    return;
  }
  if (is_comm(e.op) && !e.has_bwd) return;
  Op o = e.op;
  o.pass = Pass::kBwd;
  switch (o.kind) {
    case OpKind::kGemm: break;  // above
    case OpKind::kAttention:
      o.flops = kAttentionBackwardFlopFactor * e.op.flops;
      o.model_flops = 2.0 * e.op.model_flops;
      break;
    case OpKind::kMemoryBound:
      o.bytes = e.bwd_bytes > 0 ? e.bwd_bytes : 2.0 * e.op.bytes;  // bwd_bytes: FP8 gradient casts
      break;
    case OpKind::kCollective:
    case OpKind::kSendRecv:
      o.coll.kind = e.bwd_kind;
      o.coll.message_bytes = e.bwd_bytes;
      o.calls = e.bwd_calls;
      o.item = e.bwd_item;
      break;
  }
  f(o);
}

// ---------------------------------------------------------------------------------
// TP regions (docs/reference/formulas.md §4.2). Every TP-sharded block has an enter collective on its
// input and an exit collective on its output; they move X = T·h·2 B, except the MLA
// enter (latents) and the MTP eh_proj enter (2X).
// ---------------------------------------------------------------------------------
struct TpItems {
  const char* ag;  // SP all-gather
  const char* rs;  // SP reduce-scatter
  const char* ar;  // all-reduce without SP
};
inline constexpr TpItems kTpLayer{comm_item::kTpSpAllGather, comm_item::kTpSpReduceScatter, comm_item::kTpAllReduce};
inline constexpr TpItems kTpMla{comm_item::kTpSpAllGatherMla, comm_item::kTpSpReduceScatterMla,
                                comm_item::kTpAllReduceMla};
inline constexpr TpItems kTpEmbedding{comm_item::kTpEmbeddingAllGather, comm_item::kTpEmbeddingReduceScatter,
                                      comm_item::kTpEmbeddingAllReduce};
inline constexpr TpItems kTpOutput{comm_item::kTpOutputAllGather, comm_item::kTpOutputReduceScatter,
                                   comm_item::kTpOutputAllReduce};

// Enter (column-parallel input): SP all-gather forward, reduce-scatter backward. Without
// SP an identity copy forward (Megatron's f) whose backward all-reduces the input grad.
template <class Sink>
void tp_enter(Sink& out, const char* sp_base, const char* copy_base, double bytes, const TpItems& it, const Ctx& x,
              uint32_t modules = 0) {
  if (x.t <= 1) return;
  if (x.sp) {
    out(coll_el(coll_op(sp_base, Collective::kAllGather, CommDim::kTp, x.t, bytes, it.ag), Collective::kReduceScatter,
                it.rs, bytes, 1, modules));
    // The column-parallel GEMM saves only its SP shard of the input and all-gathers it
    // again in backward for the weight gradient (Megatron's
    // LinearWithGradAccumulationAndAsyncCommunication; TE's LayerNormLinear with SP).
    Op regather = coll_op(sp_base, Collective::kAllGather, CommDim::kTp, x.t, bytes, it.ag);
    regather.part = GemmPart::kWgrad;
    out(bwd_only_el(regather));
  } else {
    out(bwd_only_el(coll_op(copy_base, Collective::kAllReduce, CommDim::kTp, x.t, bytes, it.ar)));
  }
}
// Exit (row-parallel output): SP reduce-scatter forward, all-gather backward. Without SP
// an all-reduce forward (Megatron's g) whose backward is an identity.
template <class Sink>
void tp_exit(Sink& out, const char* sp_base, const char* ar_base, double bytes, const TpItems& it, const Ctx& x,
             uint32_t modules = 0) {
  if (x.t <= 1) return;
  if (x.sp)
    out(coll_el(coll_op(sp_base, Collective::kReduceScatter, CommDim::kTp, x.t, bytes, it.rs), Collective::kAllGather,
                it.ag, bytes, 1, modules));
  else
    out(fwd_only_el(coll_op(ar_base, Collective::kAllReduce, CommDim::kTp, x.t, bytes, it.ar), modules));
}

// A GEMM that every TP rank runs with the full weight on the tokens it holds (MLA down
// projections, router): with SP on its SP shard; without SP duplicated on all TP ranks,
// so only 1/t of it counts as model FLOPs.
inline Op replicated_gemm(const char* base, int64_t n, int64_t k, const Ctx& x) {
  Op o = gemm_op(base, x.sp_tokens, n, k, 1, x);
  if (!x.sp && x.t > 1) o.model_flops = o.flops / x.t;
  return o;
}

// Norm: read input, write output (bf16). Bias-dropout-add: read two, write one.
template <class Sink>
void norm(Sink& out, const char* base, const Ctx& x, uint32_t modules = 0) {
  out(compute_el(memory_op(base, 2.0 * kAct * static_cast<double>(x.sp_tokens) * x.h), modules));
}
template <class Sink>
void bda(Sink& out, const char* base, const Ctx& x) {
  out(compute_el(memory_op(base, 3.0 * kAct * static_cast<double>(x.sp_tokens) * x.h)));
}

// ---------------------------------------------------------------------------------
// Attention core and CP (docs/reference/formulas.md §4.5; TE context_parallel.py). Heads are this TP
// rank's: heads_q query heads, heads_kv key/value heads (>= 1: with fewer KV groups than
// TP ranks every rank holds one, attention.py).
// ---------------------------------------------------------------------------------
template <class Sink>
void attention_core(Sink& out, const Ctx& x, double heads_q, double heads_kv, double d_qk, double d_v) {
  const Scenario& s = *x.s;
  const double seq = x.seq;
  const int c = x.c;
  constexpr uint32_t kCore = kRecomputeCoreAttn;
  Op a;
  a.base = "attn.core";
  a.kind = OpKind::kAttention;
  a.attn.batch = static_cast<int64_t>(x.b);
  a.attn.head_dim_qk = static_cast<int64_t>(d_qk);
  a.attn.head_dim_v = static_cast<int64_t>(d_v);
  a.attn.causal = true;
  a.attn.work_fraction = 0.5;  // load-balanced causal chunks: each rank half of its rows
  a.attn.heads_q = static_cast<int64_t>(heads_q);
  a.attn.heads_kv = static_cast<int64_t>(heads_kv);
  a.attn.seq_q = static_cast<int64_t>(seq / c);
  a.attn.seq_kv = static_cast<int64_t>(seq);

  // Elements per token of Q, K, V, O on this rank, and bytes of its T tokens.
  const double q_tok = heads_q * d_qk, k_tok = heads_kv * d_qk, v_tok = heads_kv * d_v, o_tok = heads_q * d_v;
  const double to_bytes = x.T * kAct;
  const double q_bytes = q_tok * to_bytes, k_bytes = k_tok * to_bytes, v_bytes = v_tok * to_bytes;
  const double o_bytes = o_tok * to_bytes;
  const double kv_block = (k_tok + v_tok) * to_bytes;
  const double k_full = k_tok * to_bytes * c, v_full = v_tok * to_bytes * c;  // all_gather: whole sequence
  const auto& hs = s.parallel.hierarchical_context_parallel_sizes;
  const CpCommType type = s.parallel.cp_comm_type;
  const bool hierarchical = type == CpCommType::kA2AP2P && hs.size() == 2;
  const int n_a2a = hierarchical ? hs[0] : c;
  const int n_p2p = hierarchical ? hs[1] : 1;

  // Ring (p2p): forward sends n-1 KV blocks; backward n-1 KV blocks and n-1 dKV blocks
  // (TE sends KV, [KV, dKV] ... [KV, dKV], dKV), so 2(n-1) block sends.
  auto ring = [&](int n) {
    if (n <= 1) return;
    Op o = coll_op("attn.cp.kv.p2p", Collective::kSendRecv, CommDim::kCp, n, kv_block, comm_item::kCpP2pKv, n - 1);
    o.overlappable = true;
    out(coll_el(o, Collective::kSendRecv, comm_item::kCpP2pKv, kv_block, 2 * (n - 1), kCore));
  };
  // Ulysses all-to-all of one tensor; its backward moves the gradient the same way.
  auto a2a = [&](const char* base, double bytes) {
    out(coll_el(coll_op(base, Collective::kAllToAll, CommDim::kCp, n_a2a, bytes, comm_item::kCpA2A),
                Collective::kAllToAll, comm_item::kCpA2A, bytes, 1, kCore));
  };
  const bool ulysses = c > 1 && (type == CpCommType::kA2A || type == CpCommType::kA2AP2P) && n_a2a > 1;
  if (c > 1) {
    switch (type) {
      case CpCommType::kP2P: ring(c); break;
      case CpCommType::kAllGather:
        // K and V gathered separately (full sequence); the backward reduce-scatters dK, dV.
        out(coll_el(
            coll_op("attn.cp.k.allgather", Collective::kAllGather, CommDim::kCp, c, k_full, comm_item::kCpAllGatherKv),
            Collective::kReduceScatter, comm_item::kCpReduceScatterDkv, k_full, 1, kCore));
        out(coll_el(
            coll_op("attn.cp.v.allgather", Collective::kAllGather, CommDim::kCp, c, v_full, comm_item::kCpAllGatherKv),
            Collective::kReduceScatter, comm_item::kCpReduceScatterDkv, v_full, 1, kCore));
        break;
      case CpCommType::kA2A:
      case CpCommType::kA2AP2P:
        // Heads scattered over n_a2a ranks, sequence gathered: Q, K, V before the core.
        if (ulysses) {
          a2a("attn.cp.a2a.q", q_bytes);
          a2a("attn.cp.a2a.k", k_bytes);
          a2a("attn.cp.a2a.v", v_bytes);
        }
        // a2a+p2p: after the a2a a rank holds s/n_p2p tokens of heads/n_a2a, the same KV
        // block as plain p2p, in a ring over n_p2p.
        if (type == CpCommType::kA2AP2P) ring(n_p2p);
        a.attn.seq_q = static_cast<int64_t>(seq / n_p2p);
        a.attn.heads_q = static_cast<int64_t>(heads_q / n_a2a);
        a.attn.heads_kv = static_cast<int64_t>(std::max(1.0, heads_kv / n_a2a));
        break;
    }
  }
  a.flops = attention_core_flops(a.attn);
  a.model_flops = s.flop_convention.causal_halved ? a.flops : 2.0 * a.flops;
  out(compute_el(a, kCore));
  if (ulysses) a2a("attn.cp.a2a.o", o_bytes);  // O after the core; backward: dO before it
  if (c > 1 && type == CpCommType::kAllGather) {
    // TE saves only the local K and V: the backward gathers them again before the core.
    out(bwd_only_el(
        coll_op("attn.cp.v.regather", Collective::kAllGather, CommDim::kCp, c, v_full, comm_item::kCpAllGatherKv)));
    out(bwd_only_el(
        coll_op("attn.cp.k.regather", Collective::kAllGather, CommDim::kCp, c, k_full, comm_item::kCpAllGatherKv)));
  }
}

inline double head_dim(const ModelSpec& md) {
  return md.kv_channels > 0 ? static_cast<double>(md.kv_channels)
                            : static_cast<double>(md.hidden_size) / md.num_attention_heads;
}

// Attention block forward: norm, TP enter, projections, core, out-proj, TP exit, bda.
template <class Sink>
void attention_block(Sink& out, const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const double t = x.t;
  const int64_t T = x.tokens;
  const int64_t h = md.hidden_size;
  norm(out, "attn.norm", x, kRecomputeLayernorm);
  if (md.multi_latent_attention) {
    // multi_latent_attention.py: the down projections are duplicated linears on the tokens
    // this rank holds (the SP shard); the column-parallel up projections gather their
    // compressed inputs, and k_pos_emb is gathered explicitly. So the TP enter moves the
    // latents q (h without q-LoRA), kv and the rope key; mla_up_proj recompute reruns it.
    constexpr uint32_t kUp = kRecomputeMlaUpProj;
    const double a = md.num_attention_heads;
    const double dn = static_cast<double>(md.qk_head_dim), dr = static_cast<double>(md.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(md.v_head_dim);
    if (md.q_lora_rank > 0) out(compute_el(replicated_gemm("attn.q_down", md.q_lora_rank, h, x)));
    out(compute_el(replicated_gemm("attn.kv_down", md.kv_lora_rank + md.qk_pos_emb_head_dim, h, x)));
    const double q_in = md.q_lora_rank > 0 ? static_cast<double>(md.q_lora_rank) : x.h;
    const double latents = x.T * kAct * (q_in + static_cast<double>(md.kv_lora_rank + md.qk_pos_emb_head_dim));
    tp_enter(out, "attn.sp.allgather", "attn.tp.copy", latents, kTpMla, x, kUp);
    if (md.q_lora_rank > 0)
      out(compute_el(gemm_op("attn.q_up", T, static_cast<int64_t>(a * (dn + dr) / t), md.q_lora_rank, 1, x), kUp));
    else
      out(compute_el(gemm_op("attn.q", T, static_cast<int64_t>(a * (dn + dr) / t), h, 1, x), kUp));
    out(compute_el(gemm_op("attn.kv_up", T, static_cast<int64_t>(a * (dn + dv) / t), md.kv_lora_rank, 1, x), kUp));
    out(compute_el(memory_op("attn.rope", 2.0 * kAct * static_cast<double>(T) * (a / t + 1) * dr), kUp));
    attention_core(out, x, a / t, a / t, dn + dr, dv);  // no GQA: every head has its own K, V
    out(compute_el(gemm_op("attn.proj", T, h, static_cast<int64_t>(a * dv / t), 1, x)));
  } else {
    const double a = md.num_attention_heads;
    const double g = md.num_query_groups > 0 ? md.num_query_groups : md.num_attention_heads;
    const double dh = head_dim(md);
    tp_enter(out, "attn.sp.allgather", "attn.tp.copy", x.act, kTpLayer, x);
    out(compute_el(gemm_op("attn.qkv", T, static_cast<int64_t>((a + 2 * g) * dh / t), h, 1, x)));
    if (md.position_embedding_type == PositionEmbedding::kRope)
      out(compute_el(memory_op("attn.rope", 2.0 * kAct * static_cast<double>(T) * (a + g) / t * dh)));
    attention_core(out, x, a / t, std::max(1.0, g / t), dh, dh);
    out(compute_el(gemm_op("attn.proj", T, h, static_cast<int64_t>(a * dh / t), 1, x)));
  }
  tp_exit(out, "attn.sp.reducescatter", "attn.tp.allreduce", x.act, kTpLayer, x);
  bda(out, "attn.bda", x);
}

// A TP-sharded MLP of width w on the full tokens (dense MLP or shared experts).
template <class Sink>
void mlp_gemms(Sink& out, const char* fc1, const char* act, const char* fc2, double w, const Ctx& x, uint32_t modules) {
  const ModelSpec& md = x.s->model;
  const double gate = md.swiglu ? 2.0 : 1.0;
  const int64_t T = x.tokens;
  out(compute_el(gemm_op(fc1, T, static_cast<int64_t>(gate * w / x.t), md.hidden_size, 1, x), modules));
  out(compute_el(memory_op(act, kAct * static_cast<double>(T) * (gate + 1.0) * w / x.t), modules));
  out(compute_el(gemm_op(fc2, T, md.hidden_size, static_cast<int64_t>(w / x.t), 1, x), modules));
}

template <class Sink>
void dense_mlp_block(Sink& out, const Ctx& x) {
  constexpr uint32_t kMlp = kRecomputeMlp;
  norm(out, "mlp.norm", x, kRecomputeLayernorm);
  tp_enter(out, "mlp.sp.allgather", "mlp.tp.copy", x.act, kTpLayer, x, kMlp);
  mlp_gemms(out, "mlp.fc1", "mlp.act", "mlp.fc2", static_cast<double>(x.s->model.ffn_hidden_size), x, kMlp);
  tp_exit(out, "mlp.sp.reducescatter", "mlp.tp.allreduce", x.act, kTpLayer, x, kMlp);
  bda(out, "mlp.bda", x);
}

// ---------------------------------------------------------------------------------
// MoE block (docs/reference/formulas.md §4.6; Megatron token_dispatcher.py). Tokens enter on the SP
// shard: T_e per rank. Balanced routing.
// ---------------------------------------------------------------------------------

// P(a given EP rank holds >= 1 of a token's k experts) under uniform top-k routing:
// 1 - C(E - E/ep, k) / C(E, k).
inline double rank_hit_probability(double experts, double per_rank, int k) {
  double miss = 1.0;
  for (int i = 0; i < k; ++i) {
    const double num = experts - per_rank - i;
    if (num <= 0.0) return 1.0;
    miss *= num / (experts - i);
  }
  return 1.0 - miss;
}

template <class Sink>
void moe_block(Sink& out, const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const Mesh& m = *x.m;
  constexpr uint32_t kMoe = kRecomputeMoe;
  const double E = md.num_experts, h = x.h;
  const int k = md.moe_router_topk;
  const double f_e = static_cast<double>(md.moe_ffn_hidden_size > 0 ? md.moe_ffn_hidden_size : md.ffn_hidden_size);
  const double Te = x.T_e;
  const double dispatch_bytes = x.s->parallel.moe_fp8_dispatch ? 1.0 : kAct;  // forward dispatch only
  const Dispatcher type = md.moe_token_dispatcher_type;
  norm(out, "mlp.norm", x, kRecomputeLayernorm);
  out(compute_el(replicated_gemm("moe.router", md.num_experts, md.hidden_size, x), kMoe));
  out(compute_el(memory_op("moe.topk", 3.0 * 4.0 * static_cast<double>(x.sp_tokens) * E), kMoe));
  // Token copies (slots) this rank sends: T_e·k dropless; with a capacity factor
  // C = ceil(T_e·k/E·CF) per expert (get_capacity): E·C padded, min(E·C, T_e·k) dropping.
  // DeepEP (flex) and the allgather dispatcher are dropless here.
  double slots = Te * k;
  const double cf = md.moe_expert_capacity_factor;
  if (type == Dispatcher::kAllToAll && cf > 0.0) {
    const double capacity = static_cast<double>(capacity_for_assignments(Te * k, md.num_experts, cf));
    slots = md.moe_pad_expert_input_to_capacity ? E * capacity : std::min(E * capacity, Te * k);
  }
  const double tok = slots * h;     // elements of the slots
  const int n_tpep = m.etp * m.ep;  // the expert TPxEP group
  const CommGroup tpep = m.etp > 1 ? CommGroup::kExpertTpEp : CommGroup::kDim;
  const double gathered = n_tpep * Te * h * kAct;  // allgather dispatcher: S of its AG / RS
  // flex: a token goes to each destination rank once
  const double flex_tok =
      type == Dispatcher::kFlex && n_tpep > 1 ? Te * n_tpep * rank_hit_probability(E, E / m.ep, k) * h : 0.0;
  out(compute_el(memory_op("moe.permute", 2.0 * kAct * slots * h), kMoe));
  // Dispatch. Every collective of the dispatcher is charged to dim ep.
  switch (type) {
    case Dispatcher::kAllToAll:
      // EP all-to-all of the slots; backward: one all-to-all of the gradients per forward one.
      if (m.ep > 1)
        out(coll_el(coll_op("moe.dispatch.a2a", Collective::kAllToAll, CommDim::kEp, m.ep, tok * dispatch_bytes,
                            comm_item::kEpA2ADispatch),
                    Collective::kAllToAll, comm_item::kEpA2ABwd, tok * kAct, 1, kMoe));
      // dispatch_postprocess gathers the received tokens over the expert-TP group whether
      // or not SP is on (combine_preprocess reduce-scatters them).
      if (m.etp > 1)
        out(coll_el(in_group(coll_op("moe.dispatch.etp.allgather", Collective::kAllGather, CommDim::kEp, m.etp,
                                     m.etp * tok * kAct, comm_item::kEtpAllGatherDispatch),
                             CommGroup::kExpertTp),
                    Collective::kReduceScatter, comm_item::kEtpReduceScatterCombine, m.etp * tok * kAct, 1, kMoe));
      break;
    case Dispatcher::kAllGather:
      // Hidden states gathered over TPxEP; outputs reduce-scattered back.
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op("moe.dispatch.allgather", Collective::kAllGather, CommDim::kEp, n_tpep, gathered,
                                     comm_item::kEpAllGatherDispatch),
                             tpep),
                    Collective::kReduceScatter, comm_item::kEpReduceScatterCombine, gathered, 1, kMoe));
      break;
    case Dispatcher::kFlex:
      // DeepEP sends a token once per destination rank (is_token_in_rank): to each ETP rank
      // of every EP rank holding one of its experts.
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op("moe.dispatch.a2a", Collective::kAllToAll, CommDim::kEp, n_tpep,
                                     flex_tok * dispatch_bytes, comm_item::kEpA2ADispatch),
                             tpep),
                    Collective::kAllToAll, comm_item::kEpA2ABwd, flex_tok * kAct, 1, kMoe));
      break;
  }
  // Tokens the local experts process (balanced): what this rank sent, times the ETP ranks
  // whose tokens each expert shard also sees.
  const double expert_tokens = slots * m.etp;
  const int local_experts = std::max(1, md.num_experts / m.ep);
  const double gate = md.swiglu ? 2.0 : 1.0;
  const auto M = static_cast<int64_t>(expert_tokens);
  out(compute_el(
      gemm_op("moe.experts.fc1", M, static_cast<int64_t>(gate * f_e / m.etp), md.hidden_size, local_experts, x), kMoe));
  out(compute_el(memory_op("moe.experts.act", kAct * expert_tokens * (gate + 1.0) * f_e / m.etp),
                 kMoe | kRecomputeMoeAct));
  out(compute_el(gemm_op("moe.experts.fc2", M, md.hidden_size, static_cast<int64_t>(f_e / m.etp), local_experts, x),
                 kMoe));
  // Combine: the mirror of the dispatch.
  switch (type) {
    case Dispatcher::kAllToAll:
      if (m.etp > 1)
        out(coll_el(in_group(coll_op("moe.combine.etp.reducescatter", Collective::kReduceScatter, CommDim::kEp, m.etp,
                                     m.etp * tok * kAct, comm_item::kEtpReduceScatterCombine),
                             CommGroup::kExpertTp),
                    Collective::kAllGather, comm_item::kEtpAllGatherDispatch, m.etp * tok * kAct, 1, kMoe));
      if (m.ep > 1)
        out(coll_el(
            coll_op("moe.combine.a2a", Collective::kAllToAll, CommDim::kEp, m.ep, tok * kAct, comm_item::kEpA2ACombine),
            Collective::kAllToAll, comm_item::kEpA2ABwd, tok * kAct, 1, kMoe));
      break;
    case Dispatcher::kAllGather:
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op("moe.combine.reducescatter", Collective::kReduceScatter, CommDim::kEp, n_tpep,
                                     gathered, comm_item::kEpReduceScatterCombine),
                             tpep),
                    Collective::kAllGather, comm_item::kEpAllGatherDispatch, gathered, 1, kMoe));
      break;
    case Dispatcher::kFlex:
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op("moe.combine.a2a", Collective::kAllToAll, CommDim::kEp, n_tpep, flex_tok * kAct,
                                     comm_item::kEpA2ACombine),
                             tpep),
                    Collective::kAllToAll, comm_item::kEpA2ABwd, flex_tok * kAct, 1, kMoe));
      break;
  }
  out(compute_el(memory_op("moe.unpermute", 2.0 * kAct * slots * h), kMoe));
  if (md.moe_shared_expert_intermediate_size > 0) {
    // Shared experts: a TP-sharded MLP on the attention TP group (shared_experts.py),
    // inside the MoE layer's checkpoint for "moe" recompute.
    constexpr uint32_t kShared = kRecomputeMoe | kRecomputeSharedExperts;
    tp_enter(out, "moe.shared.sp.allgather", "moe.shared.tp.copy", x.act, kTpLayer, x, kShared);
    mlp_gemms(out, "moe.shared.fc1", "moe.shared.act", "moe.shared.fc2",
              static_cast<double>(md.moe_shared_expert_intermediate_size), x, kShared);
    tp_exit(out, "moe.shared.sp.reducescatter", "moe.shared.tp.allreduce", x.act, kTpLayer, x, kShared);
  }
  bda(out, "mlp.bda", x);
}

// FP8 quantization of a GEMM's operands (Transformer Engine, per-tensor scaling): the
// forward casts the bf16 input to FP8 plus its transpose for the weight gradient (read 2,
// write 1 + 1 bytes per element), except where the preceding norm writes FP8 itself
// (LayerNormLinear: QKV, dense FC1; the experts' FC1 with an FP8 dispatch); the backward
// casts the output gradient the same way. Weights are cast once per step (not counted:
// parameters x 4 bytes, milliseconds per step). The op follows its GEMM's name.
struct Fp8Cast {
  const char* gemm;
  const char* name;
  bool fused_input;
};
inline const Fp8Cast* fp8_cast_of(const char* gemm_base, const Scenario& s) {
  static constexpr Fp8Cast kCasts[] = {
      {"attn.qkv", "attn.qkv.fp8cast", true},           {"attn.proj", "attn.proj.fp8cast", false},
      {"attn.q", "attn.q.fp8cast", false},              {"attn.q_down", "attn.q_down.fp8cast", false},
      {"attn.kv_down", "attn.kv_down.fp8cast", false},  {"attn.q_up", "attn.q_up.fp8cast", false},
      {"attn.kv_up", "attn.kv_up.fp8cast", false},      {"mlp.fc1", "mlp.fc1.fp8cast", true},
      {"mlp.fc2", "mlp.fc2.fp8cast", false},            {"moe.experts.fc1", "moe.experts.fc1.fp8cast", false},
      {"moe.experts.fc2", "moe.experts.fc2.fp8cast", false}, {"moe.shared.fc1", "moe.shared.fc1.fp8cast", false},
      {"moe.shared.fc2", "moe.shared.fc2.fp8cast", false},
  };
  static constexpr Fp8Cast kExpertsFc1Fp8Dispatch{"moe.experts.fc1", "moe.experts.fc1.fp8cast", true};
  for (const Fp8Cast& c : kCasts) {
    if (std::strcmp(c.gemm, gemm_base) != 0) continue;
    if (s.parallel.moe_fp8_dispatch && std::strcmp(c.gemm, "moe.experts.fc1") == 0) return &kExpertsFc1Fp8Dispatch;
    return &c;
  }
  return nullptr;
}

// One transformer layer of a kind.
template <class Sink>
void emit_layer(const Ctx& x, bool moe, Sink& out) {
  auto body = [&](auto& sink) {
    attention_block(sink, x);
    if (moe)
      moe_block(sink, x);
    else
      dense_mlp_block(sink, x);
  };
  if (x.gemm_dtype != DType::kFp8) {
    body(out);
    return;
  }
  auto with_casts = [&](const Elem& e) {
    if (e.op.kind == OpKind::kGemm && e.op.pass == Pass::kFwd) {
      if (const Fp8Cast* c = fp8_cast_of(e.op.base, *x.s)) {
        const GemmShape& g = e.op.gemm;
        Elem ce = e;  // the GEMM's recompute modules and checkpointed region
        ce.op = memory_op(c->name, c->fused_input ? 0.0 : 4.0 * static_cast<double>(g.m) * static_cast<double>(g.k));
        ce.bwd_bytes = 4.0 * static_cast<double>(g.m) * static_cast<double>(g.n);
        out(ce);
      }
    }
    out(e);
  };
  body(with_casts);
}

// ---------------------------------------------------------------------------------
// Embedding and head (first and last stage; each MTP depth has its own)
// ---------------------------------------------------------------------------------

// Vocab-parallel lookup: its partial sums leave through the TP exit (SP reduce-scatter,
// reduce_scatter_embeddings; without SP an all-reduce, no backward collective).
template <class Sink>
void emit_embedding(Sink& out, const Ctx& x, const char* base, const char* sp_base, const char* ar_base) {
  out(compute_el(memory_op(base, 2.0 * kAct * static_cast<double>(x.tokens) * x.h)));
  tp_exit(out, sp_base, ar_base, x.act, kTpEmbedding, x);
}

// Final norm, column-parallel logits (SP: all-gather of the input; without SP an identity
// copy whose backward all-reduces), fused vocab-parallel cross entropy. The cross
// entropy's forward all-reduces (max, sum-exp, target logit: T fp32 each) carry no Comm
// item (communication-model.md §8); its backward has no collective.
template <class Sink>
void emit_head(Sink& out, const Ctx& x, const char* norm_base, const char* ag_base, const char* copy_base,
               const char* logits_base, const char* loss_base) {
  const double v_local = static_cast<double>(x.m->padded_vocab) / x.t;
  norm(out, norm_base, x);
  tp_enter(out, ag_base, copy_base, x.act, kTpOutput, x);
  out(compute_el(gemm_op(logits_base, x.tokens, static_cast<int64_t>(v_local), x.s->model.hidden_size, 1, x)));
  // Cross entropy over fp32 logits: read logits, write softmax-ready buffer, (bwd reads it).
  out(compute_el(memory_op(loss_base, 3.0 * 4.0 * static_cast<double>(x.tokens) * v_local)));
  if (x.t > 1)
    out(fwd_only_el(coll_op("loss.tp.allreduce", Collective::kAllReduce, CommDim::kTp, x.t,
                            3.0 * 4.0 * static_cast<double>(x.tokens), nullptr)));
}

// The first stage's embedding and the last stage's head.
template <class Sink>
void emit_stage_embedding(const Ctx& x, Sink& out) {
  emit_embedding(out, x, "embed", "embed.sp.reducescatter", "embed.tp.allreduce");
}
template <class Sink>
void emit_stage_head(const Ctx& x, Sink& out) {
  emit_head(out, x, "final.norm", "logits.sp.allgather", "logits.tp.copy", "logits", "loss");
}

inline bool mtp_is_moe(const ModelSpec& md) {
  return md.num_experts > 0 && md.num_layers > 0 && is_moe_layer(md, md.num_layers - 1);
}

// One MTP depth (DeepSeek-V3; multi_token_prediction.py): embedding of the shifted tokens,
// eh_proj over [embedding; hidden] (2h -> h, a TP block entered with 2X and left with X),
// a transformer layer of the kind of the model's last layer, its own norm, logits and
// loss. Full recompute reruns eh_proj and the layer only (the checkpointed region).
template <class Sink>
void emit_mtp(const Ctx& x, Sink& out) {
  const ModelSpec& md = x.s->model;
  auto outside = [&](Elem e) {
    e.checkpointed = false;
    out(e);
  };
  emit_embedding(outside, x, "mtp.embed", "mtp.embed.sp.reducescatter", "mtp.embed.tp.allreduce");
  tp_enter(out, "mtp.eh_proj.sp.allgather", "mtp.eh_proj.tp.copy", 2.0 * x.act, kTpLayer, x);
  out(compute_el(gemm_op("mtp.eh_proj", x.tokens, static_cast<int64_t>(x.h / x.t), 2 * md.hidden_size, 1, x)));
  tp_exit(out, "mtp.eh_proj.sp.reducescatter", "mtp.eh_proj.tp.allreduce", x.act, kTpLayer, x);
  emit_layer(x, mtp_is_moe(md), out);
  emit_head(outside, x, "mtp.norm", "mtp.sp.allgather", "mtp.tp.copy", "mtp.logits", "mtp.loss");
}

// ---------------------------------------------------------------------------------
// Pipeline send/recv (docs/reference/formulas.md §4.3): per micro-batch each of the stage's vp model
// chunks receives and sends activations forward and gradients backward, except at the
// ends of the model. Only sends carry a Comm item (a receive is the neighbour's send).
// ---------------------------------------------------------------------------------
enum class StageList : uint8_t { kPreFwd, kPostFwd, kPostBwd, kPreBwd };

template <class F>
void emit_pp(const Ctx& x, bool first, bool last, F&& f) {
  const Mesh& m = *x.m;
  if (m.pp <= 1) return;
  const double bytes = x.T * x.h / (m.sp ? m.tp : 1) * kAct;
  const int from_prev = m.vp - (first ? 1 : 0);  // chunks with a previous stage
  const int to_next = m.vp - (last ? 1 : 0);     // chunks with a next stage
  auto op = [&](const char* base, Pass pass, const char* item, int calls) {
    Op o = coll_op(base, Collective::kSendRecv, CommDim::kPp, 2, bytes, item, calls);
    o.pass = pass;
    return o;
  };
  if (from_prev > 0) f(StageList::kPreFwd, op("pp.recv", Pass::kFwd, nullptr, from_prev));
  if (to_next > 0) f(StageList::kPostFwd, op("pp.send", Pass::kFwd, comm_item::kPpSendRecv, to_next));
  if (to_next > 0) f(StageList::kPostBwd, op("pp.recv.grad", Pass::kBwd, nullptr, to_next));
  if (from_prev > 0) f(StageList::kPreBwd, op("pp.send.grad", Pass::kBwd, comm_item::kPpSendRecv, from_prev));
}

// ---------------------------------------------------------------------------------
// Once-per-step ops (docs/reference/formulas.md §3.1, §4.4): gradient reduction and parameter gather
// over DP (dense parameters, group dp·cp) and EDP (expert parameters), the TP sum of the
// TP-replicated parameters' grads under SP, the embedding gradient sync between first
// and last stage, and the optimizer update. `calls` is per step: Megatron-FSDP
// (optim_grads, optim_grads_params) reduce-scatters after every micro-batch's backward,
// and optim_grads_params gathers the parameters before every forward and backward.
// ---------------------------------------------------------------------------------
inline DpSharding effective_sharding(const ParallelSpec& par) {
  if (par.data_parallel_sharding_strategy != DpSharding::kNoShard) return par.data_parallel_sharding_strategy;
  return par.use_distributed_optimizer ? DpSharding::kOptim : DpSharding::kNoShard;
}

inline double grad_bytes(const Scenario& s) { return s.training.grad_reduce_in_fp32 ? 4.0 : 2.0; }

// finalize_model_grads (_allreduce_non_tensor_model_parallel_grads): with SP every
// TP-replicated parameter (norms, router, duplicated MLA down projections, row-parallel
// biases) sees only its rank's tokens, so its main grad is summed over TP once per step.
// gpu_params gives dense = sharded/t + replicated; evaluated again at tp = 1 (same padded
// vocab) it separates the replicated part: dense_tp1 is that second evaluation.
inline double tp_replicated_params(const Mesh& m, double dense, double dense_tp1) {
  if (!m.sp || m.tp <= 1) return 0.0;
  return std::max(0.0, (m.tp * dense - dense_tp1) / (m.tp - 1));
}
inline std::vector<GpuParams> gpu_params_at_tp1(const Scenario& s, const Mesh& m,
                                                const std::vector<StageLayers>& layers) {
  Mesh one = m;
  one.tp = 1;
  return gpu_params(s, one, layers);
}

template <class F>
void emit_step(const Ctx& x, bool first, bool last, const GpuParams& p, double tp_replicated, F&& f) {
  const Scenario& s = *x.s;
  const Mesh& m = *x.m;
  const ParallelSpec& par = s.parallel;
  const double gb = grad_bytes(s);
  const DpSharding how = effective_sharding(par);
  const int mb = m.num_micro_batches;
  auto add = [&](const char* base, Collective kind, CommDim dim, int group, double bytes, const char* item, int calls,
                 bool overlap) {
    if (group <= 1 || bytes <= 0) return;
    Op o = coll_op(base, kind, dim, group, bytes, item, calls);
    o.pass = Pass::kStep;
    o.overlappable = overlap;
    f(o);
  };
  struct Group {
    double params;
    CommDim dim;
    int size;
    const char *ar, *rs, *ag, *ag_bwd;        // op bases
    const char *ar_item, *rs_item, *ag_item;  // Comm items
  };
  const Group groups[2] = {
      {p.dense, CommDim::kDp, m.dp * m.cp, "dp.grads.allreduce", "dp.grads.reducescatter", "dp.params.allgather",
       "dp.params.allgather.bwd", comm_item::kDpAllReduceGrads, comm_item::kDpReduceScatterGrads,
       comm_item::kDpAllGatherParams},
      {p.expert, CommDim::kEdp, s.model.num_experts > 0 ? m.edp : 1, "edp.grads.allreduce", "edp.grads.reducescatter",
       "edp.params.allgather", "edp.params.allgather.bwd", comm_item::kEdpAllReduceGrads,
       comm_item::kEdpReduceScatterGrads, comm_item::kEdpAllGatherParams}};
  double optimizer_params = 0;
  for (const Group& g : groups) {
    const double grads = g.params * gb, weights = g.params * kAct;
    switch (how) {
      case DpSharding::kNoShard:  // DDP: one all-reduce of the main grads per step
        add(g.ar, Collective::kAllReduce, g.dim, g.size, grads, g.ar_item, 1, par.overlap_grad_reduce);
        optimizer_params += g.params;
        continue;
      case DpSharding::kOptim:  // ZeRO-1 / distributed optimizer: RS grads, AG params
        add(g.rs, Collective::kReduceScatter, g.dim, g.size, grads, g.rs_item, 1, par.overlap_grad_reduce);
        add(g.ag, Collective::kAllGather, g.dim, g.size, weights, g.ag_item, 1, par.overlap_param_gather);
        break;
      case DpSharding::kOptimGrads:  // ZeRO-2 (Megatron-FSDP): RS after every backward
        add(g.rs, Collective::kReduceScatter, g.dim, g.size, grads, g.rs_item, mb, par.overlap_grad_reduce);
        add(g.ag, Collective::kAllGather, g.dim, g.size, weights, g.ag_item, 1, par.overlap_param_gather);
        break;
      case DpSharding::kOptimGradsParams:  // ZeRO-3 / FSDP: RS and AG fwd + AG bwd, per micro-batch
        add(g.rs, Collective::kReduceScatter, g.dim, g.size, grads, g.rs_item, mb, par.overlap_grad_reduce);
        add(g.ag, Collective::kAllGather, g.dim, g.size, weights, g.ag_item, mb, par.overlap_param_gather);
        add(g.ag_bwd, Collective::kAllGather, g.dim, g.size, weights, g.ag_item, mb, true);
        break;
    }
    optimizer_params += g.params / std::max(1, g.size);
  }
  add("tp.grads.allreduce", Collective::kAllReduce, CommDim::kTp, x.t, tp_replicated * gb, comm_item::kTpAllReduceGrads,
      1, false);
  // finalize_model_grads: the word embedding lives on the first and the last stage when it
  // is tied to the output layer or needed by MTP; its main grad is summed between them.
  const bool shared_embedding = !s.model.untie_embeddings_and_output_weights || s.model.mtp_num_layers > 0;
  if (m.pp > 1 && shared_embedding && (first || last))
    add("emb.grads.allreduce", Collective::kAllReduce, CommDim::kEmb, 2,
        static_cast<double>(m.padded_vocab) * x.h / m.tp * gb, comm_item::kEmbAllReduceGrads, 1, false);
  // Fused Adam: read fp32 param, grad, exp_avg, exp_avg_sq; write them back and the bf16 copy.
  Op opt = memory_op("optimizer.step", 30.0 * optimizer_params);
  opt.pass = Pass::kStep;
  f(opt);
}

}  // namespace lcm::sched
