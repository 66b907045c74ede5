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
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/resolve.hpp"
#include "lcm/model/capacity.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::sched {

inline constexpr double kAct = 2.0;  // bytes per bf16 element (activations, their grads, bf16 weights)

// Everything about one micro-batch on one rank that the op shapes and volumes need: the
// per-rank shape (resolve.hpp) and what the schedule derives from it.
struct Ctx {
  const Scenario* s = nullptr;
  const Mesh* m = nullptr;
  RankShape r;
  DType gemm_dtype = DType::kBf16;
  // Volumes are real numbers (balanced-routing expectations are fractional).
  double act = 0;  // X = T·h·2 B: one activation of this CP rank, the S of a TP collective
  // LoRA (training.peft: lora): every base GEMM is frozen (dgrad only); adapters of rank
  // lora_rank follow the target GEMMs (lora_adapter). lora_targets 0: none here (MTP layers).
  bool lora = false;
  double lora_rank = 0;
  uint32_t lora_targets = 0;
  // Transformer Engine's LayerNormLinear (QKV, dense FC1) under FP8 per-tensor scaling, with a
  // weight gradient (not LoRA's frozen base): delayed scaling's fused norm writes the GEMM's
  // FP8 input itself (norm_fp8_out); delayed and current scaling all-gather that input over SP
  // in FP8 (gather_fp8: current scaling quantizes the norm's bf16 output first, its amax
  // reduced over TP for that purpose). Blockwise keeps bf16 norms and gathers.
  bool norm_fp8_out = false;
  bool gather_fp8 = false;
};

inline Ctx make_ctx(const Scenario& s, const Mesh& m) {
  Ctx x;
  x.s = &s;
  x.m = &m;
  x.r = resolve(s, m);
  x.gemm_dtype = s.training.precision != Precision::kFp8           ? DType::kBf16
                 : s.training.fp8_recipe == Fp8Recipe::kBlockwise ? DType::kFp8Block
                                                                  : DType::kFp8;
  x.act = x.r.tokens * x.r.hidden * kAct;
  x.lora = s.training.peft == Peft::kLora;
  x.lora_rank = static_cast<double>(s.training.lora_rank);
  x.lora_targets = x.lora ? s.training.lora_targets : 0;
  const bool tensor_scaled =
      s.training.precision == Precision::kFp8 &&
      (s.training.fp8_recipe == Fp8Recipe::kDelayed || s.training.fp8_recipe == Fp8Recipe::kTensorwise);
  x.norm_fp8_out = tensor_scaled && !x.lora && s.training.fp8_recipe == Fp8Recipe::kDelayed;
  x.gather_fp8 = tensor_scaled && !x.lora;
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

inline Op gemm_op(OpId base, const GemmShape& g, const Ctx& x) {
  Op o;
  o.id = base;
  o.kind = OpKind::kGemm;
  o.dtype = x.gemm_dtype;
  o.gemm = g;
  // Its weight gradient accumulates into the main grads (read and written).
  o.gemm.grad_c_bytes = 2.0 * (x.s->training.grad_reduce_in_fp32 ? 4.0 : 2.0);
  o.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  o.model_flops = o.flops;
  o.frozen_weight = x.lora;  // LoRA's base model: no weight gradient
  return o;
}
inline Op gemm_op(OpId base, int64_t m, int64_t n, int64_t k, int groups, const Ctx& x) {
  return gemm_op(base, GemmShape{m, n, k, groups}, x);
}

inline Op memory_op(OpId base, double bytes) {
  Op o;
  o.id = base;
  o.kind = OpKind::kMemoryBound;
  o.mem.bytes = bytes;
  return o;
}

// A collective (or send/recv) of `calls` calls of S = message_bytes over `group` ranks,
// counted in Comm item `item` (kNone: not counted, see Op::item).
inline Op coll_op(OpId base, Collective kind, CommDim dim, int group, double message_bytes, CommItemId item,
                  int calls = 1) {
  Op o;
  o.id = base;
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

// One forward op and what the other passes make of it.
struct Elem {
  Op op;                     // op.pass == kFwd; kBwd: a backward-only op placed here
  uint32_t modules = 0;      // selective-recompute modules (kRecompute* bits) that rerun it
  bool checkpointed = true;  // inside the region full recompute reruns
  // Collectives: the backward counterpart (the conjugate collective), if any.
  bool has_bwd = true;
  Collective bwd_kind = Collective::kAllReduce;
  CommItemId bwd_item = CommItemId::kNone;
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
inline Elem coll_el(const Op& o, Collective bwd_kind, CommItemId bwd_item, double bwd_bytes, int bwd_calls,
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
    if (e.op.frozen_weight) return;
    o.part = GemmPart::kWgrad;
    o.gemm = wgrad_shape(g);
    f(o);
    return;
  }
  if (!e.has_bwd) return;  // forward-only collectives, LoRA's scaled add
  Op o = e.op;
  o.pass = Pass::kBwd;
  o.host_syncs = 0;  // the backward reuses the forward's host-side counts
  switch (o.kind) {
    case OpKind::kGemm: break;  // above
    case OpKind::kAttention:
      // Unfused: four batched GEMMs to the forward's two (no recomputed scores).
      o.flops = (e.op.attn.unfused ? 2.0 : kAttentionBackwardFlopFactor) * e.op.flops;
      o.model_flops = 2.0 * e.op.model_flops;
      break;
    case OpKind::kMemoryBound:
      o.mem.bytes = e.bwd_bytes > 0 ? e.bwd_bytes : 2.0 * e.op.mem.bytes;  // bwd_bytes: an element's own backward (FP8 casts, norms at a fork, bda, activations, RoPE)
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
  CommItemId ag;  // SP all-gather
  CommItemId rs;  // SP reduce-scatter
  CommItemId ar;  // all-reduce without SP
};
inline constexpr TpItems kTpLayer{CommItemId::kTpSpAllGather, CommItemId::kTpSpReduceScatter, CommItemId::kTpAllReduce};
inline constexpr TpItems kTpMla{CommItemId::kTpSpAllGatherMla, CommItemId::kTpSpReduceScatterMla,
                                CommItemId::kTpAllReduceMla};
inline constexpr TpItems kTpEmbedding{CommItemId::kTpEmbeddingAllGather, CommItemId::kTpEmbeddingReduceScatter,
                                      CommItemId::kTpEmbeddingAllReduce};
inline constexpr TpItems kTpOutput{CommItemId::kTpOutputAllGather, CommItemId::kTpOutputReduceScatter,
                                   CommItemId::kTpOutputAllReduce};

// Enter (column-parallel input): SP all-gather forward, reduce-scatter backward. Without
// SP an identity copy forward (Megatron's f) whose backward all-reduces the input grad.
// `gather_bytes` (default: `bytes`) is what the all-gathers move where the input is gathered in
// another type than its gradient is reduced in (an FP8 LayerNormLinear input: Ctx::gather_fp8).
template <class Sink>
void tp_enter(Sink& out, OpId sp_base, OpId copy_base, double bytes, const TpItems& it, const Ctx& x,
              uint32_t modules = 0, double gather_bytes = -1.0) {
  if (x.r.tp <= 1) return;
  if (gather_bytes < 0) gather_bytes = bytes;
  if (x.r.sp) {
    out(coll_el(coll_op(sp_base, Collective::kAllGather, CommDim::kTp, x.r.tp, gather_bytes, it.ag),
                Collective::kReduceScatter, it.rs, bytes, 1, modules));
    // The column-parallel GEMM saves only its SP shard of the input and all-gathers it
    // again in backward for the weight gradient (Megatron's
    // LinearWithGradAccumulationAndAsyncCommunication; TE's LayerNormLinear with SP). A
    // frozen GEMM (LoRA) has no weight gradient; its adapter saved its own gathered input.
    if (!x.lora) {
      Op regather = coll_op(sp_base, Collective::kAllGather, CommDim::kTp, x.r.tp, gather_bytes, it.ag);
      regather.part = GemmPart::kWgrad;
      out(bwd_only_el(regather));
    }
  } else {
    out(bwd_only_el(coll_op(copy_base, Collective::kAllReduce, CommDim::kTp, x.r.tp, bytes, it.ar)));
  }
}
// Exit (row-parallel output): SP reduce-scatter forward, all-gather backward. Without SP
// an all-reduce forward (Megatron's g) whose backward is an identity.
template <class Sink>
void tp_exit(Sink& out, OpId sp_base, OpId ar_base, double bytes, const TpItems& it, const Ctx& x,
             uint32_t modules = 0) {
  if (x.r.tp <= 1) return;
  if (x.r.sp)
    out(coll_el(coll_op(sp_base, Collective::kReduceScatter, CommDim::kTp, x.r.tp, bytes, it.rs), Collective::kAllGather,
                it.ag, bytes, 1, modules));
  else
    out(fwd_only_el(coll_op(ar_base, Collective::kAllReduce, CommDim::kTp, x.r.tp, bytes, it.ar), modules));
}

// A GEMM that every TP rank runs with the full weight on the tokens it holds, g.m =
// x.r.sp_tokens_int (MLA down
// projections, router): with SP on its SP shard; without SP duplicated on all TP ranks,
// so only 1/t of it counts as model FLOPs.
inline Op replicated_gemm(OpId base, const GemmShape& g, const Ctx& x) {
  Op o = gemm_op(base, g, x);
  if (!x.r.sp && x.r.tp > 1) o.model_flops = o.flops / x.r.tp;
  return o;
}

// FP8 quantization of a GEMM's operands (Transformer Engine, per-tensor scaling): the
// forward casts the bf16 input to FP8 plus its transpose for the weight gradient (read 2,
// write 1 + 1 bytes per element), except where its producer quantizes it (Fp8Input); the
// backward casts the output gradient the same way. Weights are cast once per step (not
// counted: parameters x 4 bytes, milliseconds per step). The op follows its GEMM's name.
enum class Fp8Input {
  kCast,  // a bf16 input, cast by the GEMM's own op
  kNorm,  // LayerNormLinear's norm output (QKV without MLA, dense FC1)
  kDispatch,  // the experts' FC1: the token dispatcher's output, quantized where it dispatches in FP8
};
struct Fp8Cast {
  OpId gemm;
  OpId cast;
  Fp8Input input;
};
inline const Fp8Cast* fp8_cast_of(OpId gemm) {
  static constexpr Fp8Cast kCasts[] = {
      {OpId::kAttnQkv, OpId::kAttnQkvFp8Cast, Fp8Input::kNorm},
      {OpId::kAttnProj, OpId::kAttnProjFp8Cast, Fp8Input::kCast},
      {OpId::kAttnQ, OpId::kAttnQFp8Cast, Fp8Input::kCast},
      {OpId::kAttnQDown, OpId::kAttnQDownFp8Cast, Fp8Input::kCast},
      {OpId::kAttnKvDown, OpId::kAttnKvDownFp8Cast, Fp8Input::kCast},
      {OpId::kAttnQUp, OpId::kAttnQUpFp8Cast, Fp8Input::kCast},
      {OpId::kAttnKvUp, OpId::kAttnKvUpFp8Cast, Fp8Input::kCast},
      {OpId::kMlpFc1, OpId::kMlpFc1Fp8Cast, Fp8Input::kNorm},
      {OpId::kMlpFc2, OpId::kMlpFc2Fp8Cast, Fp8Input::kCast},
      {OpId::kMoeExpertsFc1, OpId::kMoeExpertsFc1Fp8Cast, Fp8Input::kDispatch},
      {OpId::kMoeExpertsFc2, OpId::kMoeExpertsFc2Fp8Cast, Fp8Input::kCast},
      {OpId::kMoeSharedFc1, OpId::kMoeSharedFc1Fp8Cast, Fp8Input::kCast},
      {OpId::kMoeSharedFc2, OpId::kMoeSharedFc2Fp8Cast, Fp8Input::kCast},
  };
  for (const Fp8Cast& c : kCasts)
    if (c.gemm == gemm) return &c;
  return nullptr;
}

// Whether a GEMM's input is LayerNormLinear's norm output: that norm writes it in FP8 where
// Ctx::norm_fp8_out (else bf16), and SP all-gathers it in FP8 where Ctx::gather_fp8.
inline bool norm_fed(OpId gemm) {
  const Fp8Cast* c = fp8_cast_of(gemm);
  return c && c->input == Fp8Input::kNorm;
}

// Norm: read input, write output (bf16, or FP8 where it writes an FP8 GEMM input itself:
// out_bytes 1); its backward reads the input and the gradient and writes the input's gradient
// and the weight's partial sums, twice a bf16 forward. A layer's pre-norm reads the residual
// stream, which also feeds the block's residual add: autograd sums the two gradients of that
// fork (read two, write one) after the norm's backward, so a kResidualFork norm's backward
// carries that add too (lcm-exec train runs it inside the norm's backward op).
enum class NormInput { kResidualFork, kPlain };
template <class Sink>
void norm(Sink& out, OpId base, const Ctx& x, NormInput input, uint32_t modules = 0, double out_bytes = kAct) {
  const double elems = static_cast<double>(x.r.sp_tokens_int) * x.r.hidden;
  Elem e = compute_el(memory_op(base, (kAct + out_bytes) * elems), modules);
  e.bwd_bytes = 4.0 * kAct * elems;
  if (input == NormInput::kResidualFork) e.bwd_bytes += 3.0 * kAct * elems;
  out(e);
}
// An MLP activation over `elems` elements of its output (tokens x width): the forward reads
// the fc1 output (gate x elems: the gated half too for SwiGLU / GeGLU) and writes elems; the
// backward reads the saved fc1 output and the incoming gradient and writes the fc1 output's
// gradient, (2 gate + 1) x elems (lcm-exec train's traces: backward / forward 1.75 for SwiGLU,
// 5/3 by this count, against the 2 of a generic memory-bound op).
inline Elem activation_el(OpId id, double elems, double gate, uint32_t modules) {
  Elem e = compute_el(memory_op(id, kAct * elems * (gate + 1.0)), modules);
  e.bwd_bytes = kAct * elems * (2.0 * gate + 1.0);
  return e;
}
// Rotary embedding: a fixed rotation of each pair, so its backward rotates the gradient back,
// the forward's bytes (Transformer Engine's fused RoPE runs one kernel each way; lcm-exec
// train's traces: backward / forward 1.00).
inline Elem rope_el(double bytes, uint32_t modules = 0) {
  Elem e = compute_el(memory_op(OpId::kAttnRope, bytes), modules);
  e.bwd_bytes = bytes;
  return e;
}

// Bias-dropout-add: read two, write one, and with hidden_dropout the 1-byte mask it keeps for
// the backward (one fused kernel: Megatron-Core's and Transformer Engine's jit_fuser is
// torch.compile; validation/measured/h100/dropout/ measured 8.2-9.4 B per element at the
// dropout-free kernel's rate, the random numbers' generation on top of the 7 B priced here).
// Its backward: the residual add passes the gradient to
// both summands (no kernel; their sum at the fork is the pre-norm's, above); dropout multiplies
// it by the mask (read the gradient and the 1-byte mask, write: 5 B per element); a linear bias
// sums it over the tokens (read: 2 B). At hidden_dropout 0 without a bias (every Llama-style
// recipe) the backward launches no kernel, eager or compiled
// (validation/measured/h100/bda_probe/), so the op has none.
template <class Sink>
void bda(Sink& out, OpId base, const Ctx& x) {
  const double elems = static_cast<double>(x.r.sp_tokens_int) * x.r.hidden;
  const bool dropout = x.s->model.hidden_dropout > 0;
  Elem e = compute_el(memory_op(base, (3.0 * kAct + (dropout ? 1.0 : 0.0)) * elems));
  const double bwd = (dropout ? 5.0 : 0.0) + (x.s->model.add_bias_linear ? kAct : 0.0);
  if (bwd > 0) e.bwd_bytes = bwd * elems;
  else e.has_bwd = false;
  out(e);
}

// ---------------------------------------------------------------------------------
// Attention core and CP (docs/reference/formulas.md §4.5; TE context_parallel.py). Heads are this TP
// rank's: heads_q query heads, heads_kv key/value heads (>= 1: with fewer KV groups than
// TP ranks every rank holds one, attention.py).
// ---------------------------------------------------------------------------------
// The CP ring's merges (Transformer Engine's AttnFuncWithCPAndKVP2P, bf16 inputs; TE 1.13 and
// 2.x alike): the forward zero-fills O (2 B per element), folds each of the n steps' partial
// output into it with its log-sum-exp correction (one fused kernel: the step's output read, O read
// and written, 6 B), and first copies K and V into the ring's send buffer (4 B); the backward
// copies each step's dQ into dQ, then adds (4 B, then 6 B per step), does the same for dK and dV
// in the travelling buffer, and copies K and V into its buffers (4 B). Per element of this rank's
// tokens (x q_tok, kv_tok = K + V, o_tok per token), priced at the slowest rank, whose every step
// covers all its rows; the log-sum-exp corrections themselves (per row, not per element) are
// left out. One call per ring step.
inline Elem cp_merge_el(int n, double q_tok, double kv_tok, double o_tok, const Ctx& x) {
  const double t = x.r.tokens, steps = n;
  const double fwd = t * (o_tok * (2.0 + 6.0 * steps) + 4.0 * kv_tok);
  const double bwd = t * (q_tok * (6.0 * steps - 2.0) + kv_tok * (6.0 * steps + 2.0));
  Op o = memory_op(OpId::kAttnCpMerge, fwd / steps);
  o.calls = n;
  Elem e = compute_el(o, kRecomputeCoreAttn);
  e.bwd_bytes = bwd / steps;
  return e;
}

template <class Sink>
void attention_core(Sink& out, const Ctx& x, double heads_q, double heads_kv, double d_qk, double d_v,
                    double windowed_share) {
  const Scenario& s = *x.s;
  // Packed documents: the kernel runs attn_docs documents of attn_span tokens per sequence
  // (THD); CP splits each document into 2c load-balanced chunks, the same as a whole sequence.
  // The K/V volumes below are per token and do not change.
  const double seq = x.r.attn_span;
  const int c = x.r.cp;
  constexpr uint32_t kCore = kRecomputeCoreAttn;
  Op a;
  a.id = OpId::kAttnCore;
  a.kind = OpKind::kAttention;
  a.attn.batch = static_cast<int64_t>(x.r.micro_batch * x.r.attn_docs);
  a.attn.head_dim_qk = static_cast<int64_t>(d_qk);
  a.attn.head_dim_v = static_cast<int64_t>(d_v);
  a.attn.causal = true;
  a.attn.work_fraction = 0.5;  // load-balanced causal chunks: each rank half of its rows
  a.attn.heads_q = static_cast<int64_t>(heads_q);
  a.attn.heads_kv = static_cast<int64_t>(heads_kv);
  a.attn.seq_q = static_cast<int64_t>(seq / c);
  a.attn.seq_kv = static_cast<int64_t>(seq);
  a.attn.dropout = s.model.attention_dropout > 0;
  if (windowed_share > 0) {  // sliding-window layers among this kind's (windowed_layer_share)
    a.attn.window = s.model.window_size;
    a.attn.windowed_share = windowed_share;
  }

  // Elements per token of Q, K, V, O on this rank, and bytes of its T tokens.
  const double q_tok = heads_q * d_qk, k_tok = heads_kv * d_qk, v_tok = heads_kv * d_v, o_tok = heads_q * d_v;
  const double to_bytes = x.r.tokens * kAct;
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
  int ring_steps = 1;  // the p2p ring's steps, whose partial results attn.cp.merge folds together
  auto ring = [&](int n) {
    if (n <= 1) return;
    ring_steps = n;
    Op o = coll_op(OpId::kAttnCpKvP2p, Collective::kSendRecv, CommDim::kCp, n, kv_block, CommItemId::kCpP2pKv, n - 1);
    o.overlappable = true;
    out(coll_el(o, Collective::kSendRecv, CommItemId::kCpP2pKv, kv_block, 2 * (n - 1), kCore));
  };
  // Ulysses all-to-all of one tensor; its backward moves the gradient the same way.
  auto a2a = [&](OpId base, double bytes) {
    out(coll_el(coll_op(base, Collective::kAllToAll, CommDim::kCp, n_a2a, bytes, CommItemId::kCpA2A),
                Collective::kAllToAll, CommItemId::kCpA2A, bytes, 1, kCore));
  };
  const bool ulysses = c > 1 && (type == CpCommType::kA2A || type == CpCommType::kA2AP2P) && n_a2a > 1;
  if (c > 1) {
    switch (type) {
      case CpCommType::kP2P:
        ring(c);
        set_cp_ring_sequence(a.attn, static_cast<int64_t>(seq), c);
        break;
      case CpCommType::kAllGather:
        // K and V gathered separately (full sequence); the backward reduce-scatters dK, dV.
        out(coll_el(
            coll_op(OpId::kAttnCpKAllGather, Collective::kAllGather, CommDim::kCp, c, k_full, CommItemId::kCpAllGatherKv),
            Collective::kReduceScatter, CommItemId::kCpReduceScatterDkv, k_full, 1, kCore));
        out(coll_el(
            coll_op(OpId::kAttnCpVAllGather, Collective::kAllGather, CommDim::kCp, c, v_full, CommItemId::kCpAllGatherKv),
            Collective::kReduceScatter, CommItemId::kCpReduceScatterDkv, v_full, 1, kCore));
        break;
      case CpCommType::kA2A:
      case CpCommType::kA2AP2P:
        // Heads scattered over n_a2a ranks, sequence gathered: Q, K, V before the core.
        if (ulysses) {
          a2a(OpId::kAttnCpA2AQ, q_bytes);
          a2a(OpId::kAttnCpA2AK, k_bytes);
          a2a(OpId::kAttnCpA2AV, v_bytes);
        }
        // a2a+p2p: after the a2a a rank holds s/n_p2p tokens of heads/n_a2a, the same KV
        // block as plain p2p, in a ring over n_p2p.
        if (type == CpCommType::kA2AP2P) ring(n_p2p);
        set_cp_ring_sequence(a.attn, static_cast<int64_t>(seq), n_p2p);
        a.attn.heads_q = static_cast<int64_t>(heads_q / n_a2a);
        a.attn.heads_kv = static_cast<int64_t>(std::max(1.0, heads_kv / n_a2a));
        break;
    }
  }
  a.flops = attention_core_flops(a.attn);
  a.model_flops = s.flop_convention.causal_halved ? a.flops : 2.0 * a.flops;
  if (s.training.attention_backend == AttentionBackend::kUnfused) {
    // The unfused kernels compute every score, the causal and the windowed ones' masked half
    // too (validation refuses CP for this backend): the op's executed FLOPs are the whole
    // matrix's, its model FLOPs stay the convention's.
    a.attn.unfused = true;
    a.attn.work_fraction = 1.0;
    a.attn.window = 0;
    a.attn.windowed_share = 0;
    a.flops = attention_core_flops(a.attn);
  }
  a.attn.flash2 = s.training.attention_backend == AttentionBackend::kFlash2;
  out(compute_el(a, kCore));
  if (ring_steps > 1) out(cp_merge_el(ring_steps, q_tok, k_tok + v_tok, o_tok, x));
  if (ulysses) a2a(OpId::kAttnCpA2AO, o_bytes);  // O after the core; backward: dO before it
  if (c > 1 && type == CpCommType::kAllGather) {
    // TE saves only the local K and V: the backward gathers them again before the core.
    out(bwd_only_el(
        coll_op(OpId::kAttnCpVRegather, Collective::kAllGather, CommDim::kCp, c, v_full, CommItemId::kCpAllGatherKv)));
    out(bwd_only_el(
        coll_op(OpId::kAttnCpKRegather, Collective::kAllGather, CommDim::kCp, c, k_full, CommItemId::kCpAllGatherKv)));
  }
}

// Attention block forward: norm, TP enter, projections, core, out-proj, TP exit, bda.
template <class Sink>
void attention_block(Sink& out, const Ctx& x, double windowed_share) {
  const ModelSpec& md = x.s->model;
  const double t = x.r.tp;
  const int64_t T = x.r.tokens_int;
  const int64_t h = md.hidden_size;
  // The norm feeds QKV, or with MLA the down projections (a separate norm, bf16 out).
  norm(out, OpId::kAttnNorm, x, NormInput::kResidualFork, kRecomputeLayernorm,
       x.norm_fp8_out && norm_fed(md.multi_latent_attention ? OpId::kAttnKvDown : OpId::kAttnQkv) ? 1.0 : kAct);
  if (md.multi_latent_attention) {
    // multi_latent_attention.py: the down projections are duplicated linears on the tokens
    // this rank holds (the SP shard); the column-parallel up projections gather their
    // compressed inputs, and k_pos_emb is gathered explicitly. So the TP enter moves the
    // latents q (h without q-LoRA), kv and the rope key; mla_up_proj recompute reruns it.
    constexpr uint32_t kUp = kRecomputeMlaUpProj;
    const double a = md.num_attention_heads;
    const double dn = static_cast<double>(md.qk_head_dim), dr = static_cast<double>(md.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(md.v_head_dim);
    if (md.q_lora_rank > 0) out(compute_el(replicated_gemm(OpId::kAttnQDown, GemmShape{x.r.sp_tokens_int, md.q_lora_rank, h}, x)));
    out(compute_el(replicated_gemm(OpId::kAttnKvDown, GemmShape{x.r.sp_tokens_int, md.kv_lora_rank + md.qk_pos_emb_head_dim, h}, x)));
    const double q_in = md.q_lora_rank > 0 ? static_cast<double>(md.q_lora_rank) : x.r.hidden;
    const double latents = x.r.tokens * kAct * (q_in + static_cast<double>(md.kv_lora_rank + md.qk_pos_emb_head_dim));
    tp_enter(out, OpId::kAttnSpAllGather, OpId::kAttnTpCopy, latents, kTpMla, x, kUp);
    // qk_layernorm: RMSNorm of the q latent (with q-LoRA) and of the kv latent before the up
    // projections (multi_latent_attention.py q_layernorm / kv_layernorm; TE fuses them into
    // the up projections' LayerNormColumnParallelLinear). Read and write of each latent.
    if (md.qk_layernorm) {
      const double normed = static_cast<double>((md.q_lora_rank > 0 ? md.q_lora_rank : 0) + md.kv_lora_rank);
      out(compute_el(memory_op(OpId::kAttnQkNorm, 2.0 * kAct * static_cast<double>(T) * normed), kUp));
    }
    if (md.q_lora_rank > 0)
      out(compute_el(gemm_op(OpId::kAttnQUp, T, static_cast<int64_t>(a * (dn + dr) / t), md.q_lora_rank, 1, x), kUp));
    else
      out(compute_el(gemm_op(OpId::kAttnQ, T, static_cast<int64_t>(a * (dn + dr) / t), h, 1, x), kUp));
    out(compute_el(gemm_op(OpId::kAttnKvUp, T, static_cast<int64_t>(a * (dn + dv) / t), md.kv_lora_rank, 1, x), kUp));
    out(rope_el(2.0 * kAct * static_cast<double>(T) * (a / t + 1) * dr, kUp));
    attention_core(out, x, a / t, a / t, dn + dr, dv, windowed_share);  // no GQA: every head has its own K, V
    out(compute_el(gemm_op(OpId::kAttnProj, T, h, static_cast<int64_t>(a * dv / t), 1, x)));
  } else {
    const double a = md.num_attention_heads;
    const double g = x.r.groups;
    const double dh = x.r.head_dim;
    tp_enter(out, OpId::kAttnSpAllGather, OpId::kAttnTpCopy, x.act, kTpLayer, x, 0,
             x.gather_fp8 && norm_fed(OpId::kAttnQkv) ? x.act / kAct : x.act);
    out(compute_el(gemm_op(OpId::kAttnQkv, T, static_cast<int64_t>((a + 2 * g) * dh / t), h, 1, x)));
    // qk_layernorm: per-head RMSNorm of Q and K after the projection (attention.py
    // q_layernorm / k_layernorm), read and write of both.
    if (md.qk_layernorm)
      out(compute_el(memory_op(OpId::kAttnQkNorm, 2.0 * kAct * static_cast<double>(T) * (a + g) / t * dh)));
    if (md.position_embedding_type == PositionEmbedding::kRope)
      out(rope_el(2.0 * kAct * static_cast<double>(T) * (a + g) / t * dh));
    attention_core(out, x, a / t, std::max(1.0, g / t), dh, dh, windowed_share);
    out(compute_el(gemm_op(OpId::kAttnProj, T, h, static_cast<int64_t>(a * dh / t), 1, x)));
  }
  tp_exit(out, OpId::kAttnSpReduceScatter, OpId::kAttnTpAllReduce, x.act, kTpLayer, x);
  bda(out, OpId::kAttnBda, x);
}

// A TP-sharded MLP of width w on the full tokens (dense MLP or shared experts).
template <class Sink>
void mlp_gemms(Sink& out, OpId fc1, OpId act, OpId fc2, double w, const Ctx& x, uint32_t modules) {
  const ModelSpec& md = x.s->model;
  const double gate = md.swiglu ? 2.0 : 1.0;
  const int64_t T = x.r.tokens_int;
  out(compute_el(gemm_op(fc1, T, static_cast<int64_t>(gate * w / x.r.tp), md.hidden_size, 1, x), modules));
  out(activation_el(act, static_cast<double>(T) * w / x.r.tp, gate, modules));
  out(compute_el(gemm_op(fc2, T, md.hidden_size, static_cast<int64_t>(w / x.r.tp), 1, x), modules));
}

template <class Sink>
void dense_mlp_block(Sink& out, const Ctx& x) {
  constexpr uint32_t kMlp = kRecomputeMlp;
  norm(out, OpId::kMlpNorm, x, NormInput::kResidualFork, kRecomputeLayernorm,
       x.norm_fp8_out && norm_fed(OpId::kMlpFc1) ? 1.0 : kAct);
  tp_enter(out, OpId::kMlpSpAllGather, OpId::kMlpTpCopy, x.act, kTpLayer, x, kMlp,
           x.gather_fp8 && norm_fed(OpId::kMlpFc1) ? x.act / kAct : x.act);
  mlp_gemms(out, OpId::kMlpFc1, OpId::kMlpAct, OpId::kMlpFc2, x.r.ffn, x, kMlp);
  tp_exit(out, OpId::kMlpSpReduceScatter, OpId::kMlpTpAllReduce, x.act, kTpLayer, x, kMlp);
  bda(out, OpId::kMlpBda, x);
}

// ---------------------------------------------------------------------------------
// MoE block (docs/reference/formulas.md §4.6; Megatron token_dispatcher.py). Tokens enter on the SP
// shard: T_e per rank. Balanced routing.
// ---------------------------------------------------------------------------------


template <class Sink>
void moe_block(Sink& out, const Ctx& x) {
  const ModelSpec& md = x.s->model;
  const Mesh& m = *x.m;
  constexpr uint32_t kMoe = kRecomputeMoe;
  const double E = md.num_experts, h = x.r.hidden;
  const int k = md.moe_router_topk;
  const double f_e = x.r.expert_ffn;
  const double Te = x.r.sp_tokens;
  const double dispatch_bytes = x.s->parallel.moe_fp8_dispatch ? 1.0 : kAct;  // forward dispatch only
  const Dispatcher type = md.moe_token_dispatcher_type;
  norm(out, OpId::kMlpNorm, x, NormInput::kResidualFork, kRecomputeLayernorm);
  out(compute_el(replicated_gemm(OpId::kMoeRouter, moe_router_shape(x.r.sp_tokens_int, md.hidden_size, md.num_experts), x),
                 kMoe));
  out(compute_el(memory_op(OpId::kMoeTopk, 3.0 * 4.0 * static_cast<double>(x.r.sp_tokens_int) * E), kMoe));
  // Token copies (slots) this rank sends: T_e·k dropless; with a capacity factor
  // C = ceil(T_e·k/E·CF) per expert (get_capacity): E·C padded, min(E·C, T_e·k) dropping.
  // DeepEP (flex) and the allgather dispatcher are dropless here.
  // Under skewed routing (x.r.skewed) each expert's share is capped at C separately.
  double slots = Te * k;
  const double cf = md.moe_expert_capacity_factor;
  if (x.r.skewed) {
    slots = Te * x.r.routed_copies;
  } else if (schedule_applies_capacity(md)) {
    const double capacity = static_cast<double>(capacity_for_assignments(Te * k, md.num_experts, cf));
    slots = md.moe_pad_expert_input_to_capacity ? E * capacity : std::min(E * capacity, Te * k);
  }
  // Skew: every rank waits for the busiest EP rank at the combine, so the layer's expert
  // GEMMs and all-to-alls are that rank's, ep_busiest times the mean rank's (expert_load.hpp).
  const double busiest = x.r.ep_busiest;
  const double tok = slots * h * busiest;  // elements of the slots the busiest rank receives
  const int n_tpep = m.etp * m.ep;  // the expert TPxEP group
  const CommGroup tpep = m.etp > 1 ? CommGroup::kExpertTpEp : CommGroup::kDim;
  const double gathered = n_tpep * Te * h * kAct;  // allgather dispatcher: S of its AG / RS
  // flex: a token goes to each destination rank once
  const double dest_ranks = n_tpep * hit_probability(E, E / m.ep, k);  // flex: per token
  const double flex_tok = type == Dispatcher::kFlex && n_tpep > 1 ? Te * dest_ranks * h * busiest : 0.0;
  // DeepEP / HybridEP send a token once per destination node (comm.hpp, NodeDedup).
  const NodeDedup dedup{dest_ranks, md.num_experts, k, md.moe_router_num_groups, md.moe_router_group_topk};
  const auto flex = [&dedup](Op o) {
    o.coll.dedup = dedup;
    return o;
  };
  Op permute = memory_op(OpId::kMoePermute, 2.0 * kAct * slots * h);
  permute.host_syncs = dispatcher_syncs(md) ? 1 : 0;
  out(compute_el(permute, kMoe));
  // Dispatch. Every collective of the dispatcher is charged to dim ep.
  switch (type) {
    case Dispatcher::kAllToAll:
      // EP all-to-all of the slots; backward: one all-to-all of the gradients per forward one.
      if (m.ep > 1)
        out(coll_el(coll_op(OpId::kMoeDispatchA2A, Collective::kAllToAll, CommDim::kEp, m.ep, tok * dispatch_bytes,
                            CommItemId::kEpA2ADispatch),
                    Collective::kAllToAll, CommItemId::kEpA2ABwd, tok * kAct, 1, kMoe));
      // dispatch_postprocess gathers the received tokens over the expert-TP group whether
      // or not SP is on (combine_preprocess reduce-scatters them).
      if (m.etp > 1)
        out(coll_el(in_group(coll_op(OpId::kMoeDispatchEtpAllGather, Collective::kAllGather, CommDim::kEp, m.etp,
                                     m.etp * tok * kAct, CommItemId::kEtpAllGatherDispatch),
                             CommGroup::kExpertTp),
                    Collective::kReduceScatter, CommItemId::kEtpReduceScatterCombine, m.etp * tok * kAct, 1, kMoe));
      break;
    case Dispatcher::kAllGather:
      // Hidden states gathered over TPxEP; outputs reduce-scattered back.
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op(OpId::kMoeDispatchAllGather, Collective::kAllGather, CommDim::kEp, n_tpep, gathered,
                                     CommItemId::kEpAllGatherDispatch),
                             tpep),
                    Collective::kReduceScatter, CommItemId::kEpReduceScatterCombine, gathered, 1, kMoe));
      break;
    case Dispatcher::kFlex:
      // DeepEP sends a token once per destination rank (is_token_in_rank): to each ETP rank
      // of every EP rank holding one of its experts.
      if (n_tpep > 1)
        out(coll_el(flex(in_group(coll_op(OpId::kMoeDispatchA2A, Collective::kAllToAll, CommDim::kEp, n_tpep,
                                          flex_tok * dispatch_bytes, CommItemId::kEpA2ADispatch),
                                  tpep)),
                    Collective::kAllToAll, CommItemId::kEpA2ABwd, flex_tok * kAct, 1, kMoe));
      break;
  }
  // Tokens the local experts process: what this rank sent (balanced; the busiest rank's
  // share under skew), times the ETP ranks whose tokens each expert shard also sees.
  const double expert_tokens = slots * m.etp * busiest;
  const int local_experts = x.r.local_experts;
  const double gate = md.swiglu ? 2.0 : 1.0;
  const auto M = static_cast<int64_t>(expert_tokens);
  GemmShape fc1 = moe_fc1_shape(M, md.hidden_size, x.r.expert_ffn_rank, md.swiglu, local_experts);
  GemmShape fc2 = moe_fc2_shape(M, md.hidden_size, x.r.expert_ffn_rank, local_experts);
  fc1.loads = fc2.loads = x.r.busiest_expert_loads;  // even (all zero) unless skewed
  out(compute_el(gemm_op(OpId::kMoeExpertsFc1, fc1, x), kMoe));
  out(activation_el(OpId::kMoeExpertsAct, expert_tokens * f_e / m.etp, gate, kMoe | kRecomputeMoeAct));
  out(compute_el(gemm_op(OpId::kMoeExpertsFc2, fc2, x), kMoe));
  // Combine: the mirror of the dispatch.
  switch (type) {
    case Dispatcher::kAllToAll:
      if (m.etp > 1)
        out(coll_el(in_group(coll_op(OpId::kMoeCombineEtpReduceScatter, Collective::kReduceScatter, CommDim::kEp, m.etp,
                                     m.etp * tok * kAct, CommItemId::kEtpReduceScatterCombine),
                             CommGroup::kExpertTp),
                    Collective::kAllGather, CommItemId::kEtpAllGatherDispatch, m.etp * tok * kAct, 1, kMoe));
      if (m.ep > 1)
        out(coll_el(
            coll_op(OpId::kMoeCombineA2A, Collective::kAllToAll, CommDim::kEp, m.ep, tok * kAct, CommItemId::kEpA2ACombine),
            Collective::kAllToAll, CommItemId::kEpA2ABwd, tok * kAct, 1, kMoe));
      break;
    case Dispatcher::kAllGather:
      if (n_tpep > 1)
        out(coll_el(in_group(coll_op(OpId::kMoeCombineReduceScatter, Collective::kReduceScatter, CommDim::kEp, n_tpep,
                                     gathered, CommItemId::kEpReduceScatterCombine),
                             tpep),
                    Collective::kAllGather, CommItemId::kEpAllGatherDispatch, gathered, 1, kMoe));
      break;
    case Dispatcher::kFlex:
      if (n_tpep > 1)
        out(coll_el(flex(in_group(coll_op(OpId::kMoeCombineA2A, Collective::kAllToAll, CommDim::kEp, n_tpep,
                                          flex_tok * kAct, CommItemId::kEpA2ACombine),
                                  tpep)),
                    Collective::kAllToAll, CommItemId::kEpA2ABwd, flex_tok * kAct, 1, kMoe));
      break;
  }
  out(compute_el(memory_op(OpId::kMoeUnpermute, 2.0 * kAct * slots * h), kMoe));
  if (md.moe_shared_expert_intermediate_size > 0) {
    // Shared experts: a TP-sharded MLP on the attention TP group (shared_experts.py),
    // inside the MoE layer's checkpoint for "moe" recompute.
    constexpr uint32_t kShared = kRecomputeMoe | kRecomputeSharedExperts;
    tp_enter(out, OpId::kMoeSharedSpAllGather, OpId::kMoeSharedTpCopy, x.act, kTpLayer, x, kShared);
    mlp_gemms(out, OpId::kMoeSharedFc1, OpId::kMoeSharedAct, OpId::kMoeSharedFc2,
              static_cast<double>(md.moe_shared_expert_intermediate_size), x, kShared);
    tp_exit(out, OpId::kMoeSharedSpReduceScatter, OpId::kMoeSharedTpAllReduce, x.act, kTpLayer, x, kShared);
  }
  bda(out, OpId::kMlpBda, x);
}

// ---------------------------------------------------------------------------------
// LoRA adapters (docs/op-schedule.md §4.1b; Megatron-Bridge LoRALinear / ParallelLinearAdapter):
// after its frozen base GEMM, a target linear runs A (in -> r) and B (r -> out) in BF16 with
// weight gradients, then scales B's output and adds it to the base output (one elementwise
// pass: 5 element reads and writes; its backward passes the gradient through). A
// column-parallel base (qkv, fc1) under SP first all-gathers its input over TP
// (gather_from_sequence_parallel_region; backward reduce-scatter), A is sharded over r and B
// over out; a row-parallel base (proj, fc2) shards A over in and all-reduces its T x r output
// (forward only), and B is priced column-parallel (out / t). Routed experts: one adapter per
// expert, grouped like the base, ETP in place of TP, no SP gather. The small all-gather of a
// column adapter's T x r output is left out.
// ---------------------------------------------------------------------------------
struct LoraSite {
  OpId base;
  uint32_t target;
  bool column;  // column-parallel base (input full width, output sharded)
  bool expert;  // routed experts (grouped, ETP)
  OpId sp_ag, a, tp_ar, b, add;
};
inline const LoraSite* lora_site(OpId base) {
  static constexpr OpId N = OpId::kNone;
  static constexpr LoraSite kSites[] = {
      {OpId::kAttnQkv, kLoraQkv, true, false, OpId::kAttnQkvLoraSpAllGather, OpId::kAttnQkvLoraA, N,
       OpId::kAttnQkvLoraB, OpId::kAttnQkvLoraAdd},
      {OpId::kAttnProj, kLoraProj, false, false, N, OpId::kAttnProjLoraA, OpId::kAttnProjLoraTpAllReduce,
       OpId::kAttnProjLoraB, OpId::kAttnProjLoraAdd},
      {OpId::kMlpFc1, kLoraFc1, true, false, OpId::kMlpFc1LoraSpAllGather, OpId::kMlpFc1LoraA, N, OpId::kMlpFc1LoraB,
       OpId::kMlpFc1LoraAdd},
      {OpId::kMlpFc2, kLoraFc2, false, false, N, OpId::kMlpFc2LoraA, OpId::kMlpFc2LoraTpAllReduce, OpId::kMlpFc2LoraB,
       OpId::kMlpFc2LoraAdd},
      {OpId::kMoeSharedFc1, kLoraFc1, true, false, OpId::kMoeSharedFc1LoraSpAllGather, OpId::kMoeSharedFc1LoraA, N,
       OpId::kMoeSharedFc1LoraB, OpId::kMoeSharedFc1LoraAdd},
      {OpId::kMoeSharedFc2, kLoraFc2, false, false, N, OpId::kMoeSharedFc2LoraA, OpId::kMoeSharedFc2LoraTpAllReduce,
       OpId::kMoeSharedFc2LoraB, OpId::kMoeSharedFc2LoraAdd},
      {OpId::kMoeExpertsFc1, kLoraFc1, true, true, N, OpId::kMoeExpertsFc1LoraA, N, OpId::kMoeExpertsFc1LoraB,
       OpId::kMoeExpertsFc1LoraAdd},
      {OpId::kMoeExpertsFc2, kLoraFc2, false, true, N, OpId::kMoeExpertsFc2LoraA, N, OpId::kMoeExpertsFc2LoraB,
       OpId::kMoeExpertsFc2LoraAdd},
  };
  for (const LoraSite& s : kSites)
    if (s.base == base) return &s;
  return nullptr;
}

// The adapter elements of the base GEMM element `base` (nothing when it is no target).
template <class Sink>
void lora_adapter(Sink& out, const Ctx& x, const Elem& base) {
  if (!x.lora_targets || base.op.kind != OpKind::kGemm || base.op.pass != Pass::kFwd) return;
  const LoraSite* site = lora_site(base.op.id);
  if (!site || !(x.lora_targets & site->target)) return;
  const GemmShape& g = base.op.gemm;
  const int t = site->expert ? x.m->etp : x.r.tp;
  const auto r = static_cast<int64_t>(x.lora_rank);
  auto inherit = [&](Elem e) {  // the base's recompute modules and checkpointed region
    e.modules = base.modules;
    e.checkpointed = base.checkpointed;
    return e;
  };
  auto like = [&](const Op& o) { return inherit(compute_el(o)); };
  auto adapter_gemm = [&](OpId id, int64_t n, int64_t k) {
    Op o = gemm_op(id, GemmShape{g.m, n, k, g.groups}, x);
    o.dtype = DType::kBf16;  // Megatron linears, outside the FP8 autocast's TE modules
    o.gemm.loads = g.loads;
    o.frozen_weight = false;
    return like(o);
  };
  if (site->column) {
    if (site->sp_ag != OpId::kNone && x.r.sp)
      out(inherit(coll_el(coll_op(site->sp_ag, Collective::kAllGather, CommDim::kTp, x.r.tp, x.act,
                                  CommItemId::kTpSpAllGather),
                          Collective::kReduceScatter, CommItemId::kTpSpReduceScatter, x.act, 1)));
    out(adapter_gemm(site->a, std::max<int64_t>(1, r / t), g.k));
    out(adapter_gemm(site->b, g.n, r));
  } else {
    out(adapter_gemm(site->a, r, g.k));
    if (site->tp_ar != OpId::kNone && t > 1)
      out(inherit(fwd_only_el(coll_op(site->tp_ar, Collective::kAllReduce, CommDim::kTp, t,
                                      static_cast<double>(g.m) * static_cast<double>(r) * kAct, CommItemId::kTpAllReduce))));
    out(adapter_gemm(site->b, std::max<int64_t>(1, g.n / t), r));
  }
  Elem add = like(memory_op(site->add, 5.0 * kAct * static_cast<double>(g.m) * static_cast<double>(g.n)));
  add.has_bwd = false;
  out(add);
}

// One transformer layer of a kind.
template <class Sink>
void emit_layer(const Ctx& x, bool moe, Sink& out) {
  auto body = [&](auto& sink) {
    attention_block(sink, x, windowed_layer_share(x.s->model, moe));
    if (moe)
      moe_block(sink, x);
    else
      dense_mlp_block(sink, x);
  };
  auto with_lora = [&](const Elem& e) {
    out(e);
    lora_adapter(out, x, e);
  };
  if (!is_fp8(x.gemm_dtype)) {
    body(with_lora);
    return;
  }
  // Bytes per element of a cast: read the BF16 tensor (2 B), write its FP8 copy and the
  // transposed copy Hopper's TN kernels need for the other GEMM of the pair (1 + 1 B).
  // tensorwise (current scaling) reads the tensor once more for its amax first (+2 B);
  // blockwise writes a 4-byte scale per 128 elements for each copy (+8/128 B); delayed scales
  // by the amax history, inside the cast.
  // A norm-fed input (LayerNormLinear's QKV and dense FC1) has no cast of its own where the
  // norm quantizes it, but the weight gradient still needs the transposed copy: delayed
  // scaling's fused norm writes the FP8 input and Transformer Engine transposes it (read 1,
  // write 1: TE 2.x rmsnorm/layernorm_fwd's nvte_transpose after the norm kernel, TE 1.x's
  // tex.fp8_transpose(ln_out_total) before the weight-gradient GEMM).
  // Current scaling and blockwise run the norm unfused (TE 2.x normalization.cpp
  // force_unfused_kernel: the norm writes bf16, its amax computed in the norm kernel), then one
  // cast-transpose (4 B; blockwise + 8/128). LoRA's frozen base has no weight gradient and
  // keeps the amax pass only (its norm output also feeds the adapter in bf16), as does the
  // experts' FC1 behind an FP8 dispatch (its tokens arrive quantized; not modelled further).
  const Fp8Recipe recipe = x.s->training.fp8_recipe;
  const double amax = recipe == Fp8Recipe::kTensorwise ? 2.0 : 0.0;
  const double cast = 4.0 + amax + (recipe == Fp8Recipe::kBlockwise ? 8.0 / 128.0 : 0.0);
  auto input_bytes = [&](Fp8Input in) {
    if (in == Fp8Input::kCast || (in == Fp8Input::kDispatch && !x.s->parallel.moe_fp8_dispatch)) return cast;
    if (in == Fp8Input::kDispatch || x.lora) return amax;
    return recipe == Fp8Recipe::kDelayed ? 2.0 : cast - amax;
  };
  auto with_casts = [&](const Elem& e) {
    if (e.op.kind == OpKind::kGemm && e.op.pass == Pass::kFwd) {
      if (const Fp8Cast* c = fp8_cast_of(e.op.id)) {
        const GemmShape& g = e.op.gemm;
        Elem ce = e;  // the GEMM's recompute modules and checkpointed region
        ce.op = memory_op(c->cast, input_bytes(c->input) * static_cast<double>(g.m) * static_cast<double>(g.k));
        ce.bwd_bytes = cast * static_cast<double>(g.m) * static_cast<double>(g.n);
        out(ce);
      }
    }
    with_lora(e);
  };
  body(with_casts);
}

// ---------------------------------------------------------------------------------
// Embedding and head (first and last stage; each MTP depth has its own)
// ---------------------------------------------------------------------------------

// Vocab-parallel lookup: its partial sums leave through the TP exit (SP reduce-scatter,
// reduce_scatter_embeddings; without SP an all-reduce, no backward collective).
template <class Sink>
void emit_embedding(Sink& out, const Ctx& x, OpId base, OpId sp_base, OpId ar_base) {
  out(compute_el(memory_op(base, 2.0 * kAct * static_cast<double>(x.r.tokens_int) * x.r.hidden)));
  tp_exit(out, sp_base, ar_base, x.act, kTpEmbedding, x);
}

// Final norm, column-parallel logits (SP: all-gather of the input; without SP an identity
// copy whose backward all-reduces), fused vocab-parallel cross entropy. The cross
// entropy's forward all-reduces (max, sum-exp, target logit: T fp32 each) carry no Comm
// item (communication-model.md §8); its backward has no collective.
// Bytes the loss moves per logit of this rank, forward and backward, by implementation:
// - unfused (tensor_parallel/cross_entropy.py) and native fused (fusions/fused_cross_entropy.py):
//   fp32 logits read and a softmax-ready buffer written in the forward (12 B), twice that in the
//   backward (read it, write the fp32 gradient, cast to bf16);
// - Transformer Engine's Triton kernel (triton/cross_entropy.py, TE 2.2-2.17): the online
//   softmax reads the bf16 logits (2 B), the loss kernel reads them again and writes the
//   bf16 gradient in place (4 B); the backward scales that gradient by the incoming one in
//   place (element_mul_kernel: 4 B; skipped only when it is exactly 1, never with a loss
//   averaged over tokens).
struct LossTraffic {
  double fwd = 0, bwd = 0;
};
inline LossTraffic loss_traffic_per_logit(const TrainingSpec& t) {
  if (t.cross_entropy_loss_fusion && t.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kTe) return {6.0, 4.0};
  return {12.0, 24.0};
}

template <class Sink>
void emit_head(Sink& out, const Ctx& x, OpId norm_base, OpId ag_base, OpId copy_base, OpId logits_base,
               OpId loss_base) {
  const double v_local = static_cast<double>(x.m->padded_vocab) / x.r.tp;
  norm(out, norm_base, x, NormInput::kPlain);
  tp_enter(out, ag_base, copy_base, x.act, kTpOutput, x);
  out(compute_el(gemm_op(logits_base, x.r.tokens_int, static_cast<int64_t>(v_local), x.s->model.hidden_size, 1, x)));
  const LossTraffic lt = loss_traffic_per_logit(x.s->training);
  Elem loss = compute_el(memory_op(loss_base, lt.fwd * static_cast<double>(x.r.tokens_int) * v_local));
  loss.bwd_bytes = lt.bwd * static_cast<double>(x.r.tokens_int) * v_local;
  out(loss);
  if (x.r.tp > 1)
    out(fwd_only_el(coll_op(OpId::kLossTpAllReduce, Collective::kAllReduce, CommDim::kTp, x.r.tp,
                            3.0 * 4.0 * static_cast<double>(x.r.tokens_int), CommItemId::kNone)));
}

// The first stage's embedding and the last stage's head.
template <class Sink>
void emit_stage_embedding(const Ctx& x, Sink& out) {
  emit_embedding(out, x, OpId::kEmbed, OpId::kEmbedSpReduceScatter, OpId::kEmbedTpAllReduce);
}
template <class Sink>
void emit_stage_head(const Ctx& x, Sink& out) {
  emit_head(out, x, OpId::kFinalNorm, OpId::kLogitsSpAllGather, OpId::kLogitsTpCopy, OpId::kLogits, OpId::kLoss);
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
  emit_embedding(outside, x, OpId::kMtpEmbed, OpId::kMtpEmbedSpReduceScatter, OpId::kMtpEmbedTpAllReduce);
  tp_enter(out, OpId::kMtpEhProjSpAllGather, OpId::kMtpEhProjTpCopy, 2.0 * x.act, kTpLayer, x);
  out(compute_el(gemm_op(OpId::kMtpEhProj, x.r.tokens_int, static_cast<int64_t>(x.r.hidden / x.r.tp), 2 * md.hidden_size, 1, x)));
  tp_exit(out, OpId::kMtpEhProjSpReduceScatter, OpId::kMtpEhProjTpAllReduce, x.act, kTpLayer, x);
  Ctx no_adapters = x;  // MTP layers keep no LoRA adapters (frozen like the rest)
  no_adapters.lora_targets = 0;
  emit_layer(no_adapters, x.r.mtp_moe, out);
  emit_head(outside, x, OpId::kMtpNorm, OpId::kMtpSpAllGather, OpId::kMtpTpCopy, OpId::kMtpLogits, OpId::kMtpLoss);
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
  const double bytes = x.r.tokens * x.r.hidden / (m.sp ? m.tp : 1) * kAct;
  const int from_prev = m.vp - (first ? 1 : 0);  // chunks with a previous stage
  const int to_next = m.vp - (last ? 1 : 0);     // chunks with a next stage
  // Without interleaving Megatron batches the p2p ops and synchronises the device after each
  // (batch_p2p_sync, p2p_communication.py): in the 1F1B steady state a send and the next
  // receive are one call, so each receive is one synchronisation (none with --overlap-p2p-comm).
  auto op = [&](OpId base, Pass pass, CommItemId item, int calls) {
    Op o = coll_op(base, Collective::kSendRecv, CommDim::kPp, 2, bytes, item, calls);
    o.pass = pass;
    if (m.vp == 1 && (base == OpId::kPpRecv || base == OpId::kPpRecvGrad)) o.host_syncs = 1;
    return o;
  };
  if (from_prev > 0) f(StageList::kPreFwd, op(OpId::kPpRecv, Pass::kFwd, CommItemId::kNone, from_prev));
  if (to_next > 0) f(StageList::kPostFwd, op(OpId::kPpSend, Pass::kFwd, CommItemId::kPpSendRecv, to_next));
  if (to_next > 0) f(StageList::kPostBwd, op(OpId::kPpRecvGrad, Pass::kBwd, CommItemId::kNone, to_next));
  if (from_prev > 0) f(StageList::kPreBwd, op(OpId::kPpSendGrad, Pass::kBwd, CommItemId::kPpSendRecv, from_prev));
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
  auto add = [&](OpId base, Collective kind, CommDim dim, int group, double bytes, CommItemId item, int calls,
                 bool overlap) {
    if (group <= 1 || bytes <= 0) return;
    Op o = coll_op(base, kind, dim, group, bytes, item, calls);
    o.pass = Pass::kStep;
    o.overlappable = overlap;
    f(o);
  };
  struct Group {
    double params;
    double tensors;
    CommDim dim;
    int size;
    OpId ar, rs, ag, ag_bwd;                 // ops
    CommItemId ar_item, rs_item, ag_item;  // Comm items
    double bf16_params;  // of `params`, those gathered in bf16 under --fp8-param-gather
  };
  // What trains (GpuParams::trainable_*): every parameter, or under LoRA the adapters only;
  // Megatron's DDP buffers hold only parameters that require gradients.
  const bool lora = s.training.peft == Peft::kLora;
  // --fp8-param-gather: the distributed optimizer gathers the FP8 linear weights in FP8, 1 B a
  // parameter (the embedding and output layer in bf16; the experts are all linear); LoRA trains
  // bf16 adapters only.
  const bool fp8_gather = s.training.precision == Precision::kFp8 && s.training.fp8_param_gather && !lora;
  const double dense_bf16 = std::min(p.trainable_dense, stage_embedding_params(s, m, first, last));
  const Group groups[2] = {
      {p.trainable_dense, p.trainable_dense_tensors, CommDim::kDp, m.dp * m.cp, OpId::kDpGradsAllReduce,
       OpId::kDpGradsReduceScatter, OpId::kDpParamsAllGather, OpId::kDpParamsAllGatherBwd,
       CommItemId::kDpAllReduceGrads, CommItemId::kDpReduceScatterGrads, CommItemId::kDpAllGatherParams, dense_bf16},
      {p.trainable_expert, p.trainable_expert_tensors, CommDim::kEdp, x.r.moe ? m.edp : 1, OpId::kEdpGradsAllReduce,
       OpId::kEdpGradsReduceScatter, OpId::kEdpParamsAllGather, OpId::kEdpParamsAllGatherBwd,
       CommItemId::kEdpAllReduceGrads, CommItemId::kEdpReduceScatterGrads, CommItemId::kEdpAllGatherParams, 0.0}};
  // The optimizer's per-tensor host work walks the tensors of the rank's shard: all of them
  // without sharding and under Megatron-FSDP (every parameter is sharded over the group), a
  // 1/DP share with the distributed optimizer (a tensor belongs to the rank its buffer range
  // falls in; the few that straddle two ranks are ignored).
  double optimizer_params = 0, optimizer_tensors = 0;
  for (const Group& g : groups) {
    const double grads = g.params * gb;
    const double weights = fp8_gather ? g.bf16_params * kAct + (g.params - g.bf16_params) * 1.0 : g.params * kAct;
    switch (how) {
      case DpSharding::kNoShard:  // DDP: one all-reduce of the main grads per step
        add(g.ar, Collective::kAllReduce, g.dim, g.size, grads, g.ar_item, 1, par.overlap_grad_reduce);
        optimizer_params += g.params;
        optimizer_tensors += g.tensors;
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
    optimizer_tensors += how == DpSharding::kOptim ? g.tensors / std::max(1, g.size) : g.tensors;
  }
  // LoRA: the replicated parameters (norms, router) are frozen; the adapters are TP-sharded.
  add(OpId::kTpGradsAllReduce, Collective::kAllReduce, CommDim::kTp, x.r.tp, lora ? 0.0 : tp_replicated * gb,
      CommItemId::kTpAllReduceGrads, 1, false);
  // finalize_model_grads: the word embedding lives on the first and the last stage when it
  // is tied to the output layer or needed by MTP; its main grad is summed between them.
  const bool shared_embedding = !s.model.untie_embeddings_and_output_weights || s.model.mtp_num_layers > 0;
  if (m.pp > 1 && shared_embedding && (first || last) && !lora)
    add(OpId::kEmbGradsAllReduce, Collective::kAllReduce, CommDim::kEmb, 2,
        static_cast<double>(m.padded_vocab) * x.r.hidden / m.tp * gb, CommItemId::kEmbAllReduceGrads, 1, false);
  // Gradient clipping's norm reads every fp32 main grad once (Megatron's clip_grad_norm with
  // its default --clip-grad 1.0; lcm-exec train's sum of squares): 4 B per parameter. Then
  // fused Adam reads fp32 param, grad, exp_avg, exp_avg_sq and writes them back and the bf16
  // copy: 30 B. (The runner's optimizer.step, which times both, ran 12-13 % above 30 B per
  // parameter at the HBM rate on the Mixtral slices, validation/measured/h200/train_suite*/.)
  Op opt = memory_op(OpId::kOptimizerStep, (4.0 + 30.0) * optimizer_params);
  opt.mem.tensors = optimizer_tensors;
  opt.pass = Pass::kStep;
  f(opt);
}

}  // namespace lcm::sched
