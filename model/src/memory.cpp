// Memory per GPU per pipeline stage. Every term, its formula and its source are in
// docs/memory-model.md; the comments here name the tensors, the doc derives the bytes.
//
// Conventions (bytes, one GPU, one micro-batch unless stated):
//   b  micro-batch size;  s  = seq_length / cp  (tokens of one sequence on this rank)
//   T  = s*b              tokens entering a layer on this TP rank when nothing is sequence-split
//   Ts = T/t with SP, else T   tokens of the sequence-split (LayerNorm / dropout / residual) region
//   t  tensor-parallel size (dense layers); etp, ep for routed experts.
// Activations are bf16 (2 B), dropout masks 1 B, router / softmax statistics fp32 (4 B).
// Under FP8 (Hopper, per-tensor current scaling or blockwise) every Transformer Engine linear
// saves its input as its own FP8 copy (1 B, `lb` below) instead of the bf16 tensor; bf16
// tensors other ops save (attention Q/K/V/O, activation inputs, norm inputs) stay 2 B.
#include "lcm/model/memory.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "lcm/model/expert_load.hpp"
#include "lcm/model/resolve.hpp"

namespace lcm {

namespace {

// Peak-memory residuals, measured / predicted allocated peak - 1, of the 44 Megatron-LM CI
// rows tests/model/megatron_ci_memory_test.cpp evaluates (docs/validation-memory.md, its
// "predicted GiB" and "measured GiB" columns), 10th and 90th percentiles at commit 6c377dc.
// The memory model's rules were developed against these rows as well.
constexpr SpreadData kMemory{{-0.0410, 0.0644},
                             44,
                             "allocated-peak residuals of the 44 Megatron-LM CI rows of "
                             "tests/model/megatron_ci_memory_test.cpp (docs/validation-memory.md), "
                             "10th/90th percentiles at 52de576; a development set",
                             true};

}  // namespace

const SpreadData& memory_spread() { return kMemory; }

namespace {

// Shapes and switches shared by every layer of the scenario: the per-rank shape
// (resolve.hpp) under the names of docs/memory-model.md, plus the memory-only switches.
struct Shape {
  double b = 1, s = 1, s_kv = 1, T = 1, Ts = 1, t = 1;
  double h = 0, a = 0, g = 0, dh = 0;
  double f = 0, fe = 0, fs = 0, E = 0, k = 0, etp = 1;
  double capacity = 1;  // expert-input multiplier from capacity padding
  double copies = 0;    // skewed routing: routed copies per token (expert_load.hpp); 0: k
  double skew = 1;      // skewed routing: the busiest EP rank's copies over the mean rank's
  bool swiglu = false, unfused = false, hidden_drop = false, attn_drop = false;
  bool mla = false, qk_norm = false;
  double r_q = 0, r_kv = 0, d_n = 0, d_r = 0, d_v = 0;
  double V = 0;  // padded vocab on this TP rank
  bool mtp_moe = false;  // MTP layers are MoE layers
  // Bytes per element of the input a TE linear saves for its weight gradient: 2 (bf16), or 1
  // under FP8. TE 2.x quantizes the input and keeps only the FP8 copy for backward
  // (transformer_engine/pytorch/module/linear.py `_Linear.forward`, "Discard unneeded data in
  // input tensor": column-wise FP8 data, or row-wise FP8 of the local shard where the
  // backward re-gathers it with SP; layernorm_linear.py saves `ln_out` the same way;
  // grouped_linear.py each expert's input). The bf16 tensor is then freed unless another op
  // saves it.
  double lb = 2;
};

Shape make_shape(const Scenario& sc, const Mesh& m) {
  const ModelSpec& md = sc.model;
  const RankShape r = resolve(sc, m);
  Shape x;
  x.t = m.tp;
  x.b = r.micro_batch;
  x.s = r.seq_rank;
  // Unfused attention cannot run with CP in Megatron; with CP the key length of a fused
  // kernel does not enter the memory terms, so s_kv = s here.
  x.s_kv = x.s;
  x.T = r.tokens;
  x.Ts = r.sp_tokens;
  x.h = r.hidden;
  x.a = r.heads;
  x.g = r.groups;
  x.dh = r.head_dim;
  x.f = r.ffn;
  x.fe = r.expert_ffn;
  x.fs = r.shared_ffn;
  x.E = r.experts;
  x.k = r.topk;
  x.etp = r.etp;
  if (md.moe_expert_capacity_factor > 0 && md.moe_pad_expert_input_to_capacity)
    x.capacity = md.moe_expert_capacity_factor;
  if (r.skewed) {
    x.copies = r.routed_copies;
    x.skew = r.ep_busiest;
  }
  x.swiglu = r.gated;
  x.unfused = sc.training.attention_backend == AttentionBackend::kUnfused;
  x.hidden_drop = md.hidden_dropout > 0;
  x.attn_drop = md.attention_dropout > 0;
  x.mla = r.mla;
  x.qk_norm = md.qk_layernorm;
  x.r_q = r.q_lora_rank;
  x.r_kv = r.kv_lora_rank;
  x.d_n = r.qk_head_dim;
  x.d_r = r.qk_pos_emb_head_dim;
  x.d_v = r.v_head_dim;
  x.V = r.vocab_rank;
  x.mtp_moe = r.mtp_moe;
  x.lb = sc.training.precision == Precision::kFp8 ? 1.0 : 2.0;
  return x;
}

// Saved-for-backward bytes of one layer under a selective-recompute module set, plus the
// working set of its forward/backward (transient) and its saved bytes with no recompute.
struct LayerModel {
  LayerActivation saved;  // after the selective policy in `modules`
  double full = 0;        // no recompute at all
  double transient = 0;   // short-lived buffers while this layer runs forward or backward
};

LayerModel model_layer(const Shape& x, bool moe, uint32_t modules) {
  const bool rc_core = modules & kRecomputeCoreAttn;
  const bool rc_ln = modules & kRecomputeLayernorm;
  const bool rc_up = modules & kRecomputeMlaUpProj;
  const bool rc_mlp = modules & kRecomputeMlp;
  const bool rc_moe = modules & kRecomputeMoe;
  const bool rc_moe_act = modules & kRecomputeMoeAct;
  const bool rc_shared = modules & kRecomputeSharedExperts;
  const double t = x.t, T = x.T, Ts = x.Ts, h = x.h;
  const double heads = x.a / t;  // heads on this rank

  LayerModel out;
  double full_attn = 0, full_mlp = 0;
  double attn = 0, mlp = 0;

  // ---- norms: the two LayerNorm / RMSNorm inputs (sequence-split region).
  const double norms = 2.0 * 2.0 * Ts * h;

  // ---- attention block.
  {
    double keep = 0, drop_core = 0, drop_ln = 0, drop_up = 0;
    double q_width, o_width;
    if (x.mla) {
      // Input norm is a separate module in Megatron's MLA spec: its output feeds the down
      // projections (duplicated over TP, sequence-split with SP).
      drop_ln += 2.0 * Ts * h;
      // Under FP8 the two down projections each save an FP8 copy of it: 2 x 1 B, the same bytes.
      // q_compressed (q-norm input, bf16) + q-norm output (the q_up linear's saved input).
      if (x.r_q > 0) keep += Ts * x.r_q * (2.0 + x.lb);
      // kv_compressed + k_pe (bf16), kv-norm output (the kv_up linear's saved input).
      keep += 2.0 * Ts * (x.r_kv + x.d_r) + x.lb * Ts * x.r_kv;
      // Up-projection outputs: query and key are new (concatenated with the rotary part);
      // value is a view of the kv_up output, which therefore stays alive whole.
      const double qk = x.a * (x.d_n + x.d_r);
      drop_up += 2.0 * T * (qk + qk + x.a * (x.d_n + x.d_v)) / t;
      q_width = qk;
      o_width = x.a * x.d_v;
    } else {
      // QKV input: the fused-norm output saved by the QKV projection (sequence-split with SP;
      // FP8: layernorm_linear.py saves `ln_out` as FP8).
      keep += x.lb * Ts * h;
      const double q = x.a * x.dh, kv = x.g * x.dh;
      keep += 2.0 * T * (q + 2.0 * kv) / t;              // Q, K, V
      if (x.qk_norm) keep += 2.0 * T * (q + kv) / t;     // q/k norm inputs
      q_width = q;
      o_width = q;
    }
    // Attention output = output-projection input, bf16: the fused kernel saves it as `out`.
    // Under FP8 the projection saves the same bf16 tensor, not an FP8 copy: Megatron sets
    // `save_original_input` on linear_proj for every recipe but delayed scaling
    // (megatron/core/transformer/attention.py, set_save_original_input(self.linear_proj);
    // delayed scaling would add a 1 B copy, not modelled: lcm has no recipe key).
    keep += 2.0 * T * o_width / t;
    const double ss = heads * x.b * x.s * x.s_kv;  // score elements on this rank
    if (x.unfused) {
      // Megatron's fused scale-mask-softmax kernel (sk <= 4096) saves bf16 probabilities;
      // beyond it the torch fallback saves fp32 probabilities plus their bf16 cast.
      drop_core += (x.s_kv <= kFusedSoftmaxMaxKeys ? 2.0 : 6.0) * ss;
      if (x.attn_drop) drop_core += 3.0 * ss;  // 1-byte mask + bf16 dropped-out probabilities
    } else {
      drop_core += 4.0 * heads * x.b * x.s;  // fp32 softmax log-sum-exp
    }
    if (x.hidden_drop) keep += Ts * h;  // dropout mask after the output projection
    full_attn = keep + drop_core + drop_ln + drop_up;
    attn = keep + (rc_core ? 0 : drop_core) + ((rc_ln && x.mla) ? 0 : drop_ln) + (rc_up && x.mla ? 0 : drop_up);

    // Working set: unfused attention holds the scores next to the probabilities in forward
    // and two s x s gradients in backward; fused attention holds dQ, dK, dV and dO.
    const double attn_ws = x.unfused ? (x.s_kv <= kFusedSoftmaxMaxKeys ? 4.0 : 10.0) * ss
                                     : 2.0 * T * (2.0 * q_width + 2.0 * x.g * x.dh) / t;
    out.transient = std::max(out.transient, attn_ws);
  }

  // ---- MLP block.
  if (!moe) {
    const double gate = x.swiglu ? 2.0 : 1.0;
    const double in = x.lb * Ts * h;               // fc1 input (fused-norm output; FP8 copy under FP8)
    const double fc1 = 2.0 * T * x.f * gate / t;  // fc1 output = activation input (bf16, saved by bias_swiglu/gelu)
    const double act = x.lb * T * x.f / t;        // activation output = fc2 input (FP8 copy under FP8)
    const double mask = x.hidden_drop ? Ts * h : 0.0;
    full_mlp = in + fc1 + act + mask;
    // `mlp` checkpoints the whole MLP on its input (transformer_layer.py, recompute_mlp:
    // te_checkpoint / tensor_parallel.checkpoint(self.mlp, ..., pre_mlp_layernorm_output)).
    // With the TE spec the pre-MLP norm is fused into fc1 (IdentityOp), so that input is the
    // residual stream, already counted as the norm input in `norms`: nothing else is kept
    // but the dropout mask of the bias-dropout-add outside the checkpoint.
    mlp = (rc_mlp ? 0 : in + fc1 + act) + mask;
    out.transient = std::max(out.transient, fc1 + 2.0 * T * x.f / t);  // their (bf16) gradients in backward
  } else {
    const double gate = x.swiglu ? 2.0 : 1.0;
    const double in = 2.0 * Ts * h;  // pre-MLP norm output: router, dispatcher and shared-expert input
    const double router = 11.0 * Ts * x.E;  // bf16 logits, fp32 probs, fp32 top-k probs, bool map
    // Token copies this rank's experts process: top-k copies of the local tokens, gathered
    // over the expert-TP group, padded to capacity when asked (balanced routing); under skew
    // the busiest EP rank's copies (x.skew, the stage loop sets it for its layers).
    const double N = Ts * (x.copies > 0 ? x.copies : x.k) * x.etp * x.capacity * x.skew;
    const double fe = x.fe / x.etp;
    // Permuted tokens = expert fc1 input: GroupedLinear saves them (FP8 copies under FP8); the
    // fused permute keeps only its row-id map.
    const double e_in = x.lb * N * h;
    const double e_fc1 = 2.0 * N * fe * gate;  // expert fc1 output (bf16: the activation's saved input)
    // Activation output = fc2 input (fc2's saved input: FP8 under FP8). A non-gated activation
    // keeps its own bf16 output as well: the probability multiply in experts.py bias_act_func
    // saves it (the fused weighted SwiGLU saves only its input and the probabilities).
    const double e_act = N * fe * (x.lb + (x.swiglu ? 0.0 : 2.0));
    const double e_probs = 4.0 * N;
    // Shared experts: fc1 reads the pre-MLP norm output that the router saves; under FP8
    // Megatron sets `save_original_input` on it (shared_experts.py), so no extra copy.
    const double sh_fc1 = x.fs > 0 ? 2.0 * T * x.fs * gate / t : 0.0;
    const double sh_act = x.fs > 0 ? x.lb * T * x.fs / t : 0.0;
    const double mask = x.hidden_drop ? Ts * h : 0.0;
    full_mlp = in + router + e_in + e_fc1 + e_act + e_probs + sh_fc1 + sh_act + mask;
    if (rc_moe) {
      mlp = in + mask;
    } else {
      // `layernorm` recomputes the separate pre-MLP norm's output; its input is in `norms`.
      // `moe_act` runs the activation under CheckpointWithoutOutput and discards its output
      // after fc2 (experts.py); under FP8 fc2 is set to save that original bf16 output
      // (set_save_original_input(self.linear_fc2)), so no FP8 copy survives either.
      mlp = (rc_ln ? 0 : in) + router + e_in + e_fc1 + (rc_moe_act ? 0 : e_act) + e_probs +
            (rc_shared ? 0 : sh_fc1 + sh_act) + mask;
    }
    // Working set: dispatch keeps permuted, received and sorted token copies at once in
    // forward; backward holds the gradients of the expert intermediates.
    // Gradients and dispatched copies are bf16 whatever the precision.
    const double dispatch_ws = 3.0 * 2.0 * Ts * x.k * h * x.capacity + 2.0 * N * h;
    out.transient = std::max(out.transient, std::max(dispatch_ws, e_fc1 + 2.0 * N * fe * (x.swiglu ? 1.0 : 2.0)));
  }

  out.saved.attention = attn;
  out.saved.mlp = mlp;
  out.saved.norms = norms;
  out.full = full_attn + full_mlp + norms;
  return out;
}

uint32_t selective_modules(const ParallelSpec& p) {
  return p.recompute_granularity == RecomputeGranularity::kSelective ? p.recompute_modules : 0u;
}

// Number of (chunk, micro-batch) forward passes whose activations a pipeline rank holds
// at its peak, in units of "stage micro-batches" (all v chunks of the rank = 1).
double in_flight(const Scenario& sc, const Mesh& m, int rank) {
  const int p = m.pp, mb = std::max(1, m.num_micro_batches);
  if (m.vp <= 1) {
    // Without interleaving (Megatron allows EP A2A overlap only with pp == 1 here), the
    // combined 1F1B pairs micro-batch i+1's forward with i's backward layer by layer:
    // the peak stays at about one micro-batch, no extra in flight.
    // 1F1B: p - r - 1 warmup forwards, then one more forward before the first backward.
    return static_cast<double>(std::min(p - rank, mb));
  }
  // Interleaved 1F1B (schedules.py): warmup = 2(p - r - 1) + (v - 1) * G model-chunk
  // forwards, G = microbatch_group_size_per_vp_stage (default p); all chunks when that
  // reaches m * v. One more forward runs before the first backward.
  const int total = mb * m.vp;
  const int warmup = 2 * (p - rank - 1) + (m.vp - 1) * p;
  const int chunks = warmup >= total ? total : warmup + 1;
  // --overlap-moe-expert-parallel-comm schedules one extra warmup chunk (docs/reference/formulas.md §3.3).
  const int extra = sc.parallel.overlap_moe_expert_parallel_comm ? 1 : 0;
  return static_cast<double>(std::min(chunks + extra, total)) / m.vp;
}

}  // namespace

LayerActivation layer_activation_bytes(const Scenario& s, const Mesh& m, bool moe_layer) {
  const Shape x = make_shape(s, m);
  const LayerModel lm = model_layer(x, moe_layer, selective_modules(s.parallel));
  if (s.parallel.recompute_granularity == RecomputeGranularity::kFull) {
    // Every layer recomputed, one checkpoint per layer: only the layer input is kept.
    LayerActivation a;
    a.norms = 2.0 * x.Ts * x.h;
    return a;
  }
  return lm.saved;
}

MemoryBaseKey memory_base_key(const Scenario& s, const Mesh& m) { return memory_base_key(structure_key(s, m), s, m); }

MemoryBaseKey memory_base_key(const StructureKey& structure, const Scenario& s, const Mesh& m) {
  const ParallelSpec& p = s.parallel;
  return {.structure = structure,
          .dp = m.dp,
          .edp = m.edp,
          .num_micro_batches = m.num_micro_batches,
          .micro_batch_size = s.training.micro_batch_size,
          .cp_comm_type = static_cast<int32_t>(p.cp_comm_type),
          .overlap_moe_expert_parallel_comm = p.overlap_moe_expert_parallel_comm,
          .precision = static_cast<int32_t>(s.training.precision)};
}

MemoryKey memory_key(const Scenario& s, const Mesh& m) { return memory_key(memory_base_key(s, m), s); }

Memory estimate_memory(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                       const std::vector<GpuParams>& params) {
  Memory out;
  estimate_memory(s, m, layers, params, out);
  return out;
}

namespace {

// Model-state bytes per parameter under the selected DP sharding: dense parameters are
// sharded over the DP x CP group, expert parameters over the EDP group.
struct StateBytes {
  double grad_b = 0, main_b = 0, optim_b = 0;
  bool shard_optim = false, shard_grads = false, shard_params = false;
};

StateBytes state_bytes(const Scenario& s) {
  const TrainingSpec& tr = s.training;
  const ParallelSpec& par = s.parallel;
  DpSharding strat = par.data_parallel_sharding_strategy;
  if (strat == DpSharding::kNoShard && par.use_distributed_optimizer) strat = DpSharding::kOptim;
  StateBytes b;
  b.grad_b = tr.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // bf16 main params: the model weights are the master copy, nothing extra is kept.
  b.main_b = tr.main_params_dtype == DType::kBf16 ? 0.0 : dtype_bytes(tr.main_params_dtype);
  // fp32 master weights kept as their low 16 bits beside the bf16 weights (store_param_remainders).
  if (tr.store_param_remainders) b.main_b = 2.0;
  b.optim_b = dtype_bytes(tr.exp_avg_dtype) + dtype_bytes(tr.exp_avg_sq_dtype);
  b.shard_optim = strat != DpSharding::kNoShard;
  b.shard_grads = strat == DpSharding::kOptimGrads || strat == DpSharding::kOptimGradsParams;
  b.shard_params = strat == DpSharding::kOptimGradsParams;
  return b;
}

}  // namespace

bool shards_parameters(const Scenario& s) { return state_bytes(s).shard_params; }

LossBytesPerLogit loss_bytes_per_logit(const TrainingSpec& t) {
  // Unfused (tensor_parallel/cross_entropy.py) and native fused (fusions/fused_cross_entropy.py)
  // run the same tensor program: `.float()` copies the bf16 logits to fp32 while the bf16 logits
  // are still referenced by the caller (2 + 4 B); max-subtraction, exp and the division by the sum
  // are in place, and the fp32 softmax is saved for backward (4 B). Backward turns the softmax into
  // the gradient in place, and the bf16 gradient of the logits is made from it while it is alive
  // (4 + 2 B): the native path casts inside calculate_gradients, the unfused path returns fp32 and
  // autograd casts to the input's dtype. Fusing saves kernels and an all-reduce, not bytes.
  if (!t.cross_entropy_loss_fusion || t.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kNative)
    return {.peak = 6.0, .kept_for_backward = 4.0};
  // Transformer Engine 2.2-2.17 (transformer_engine/pytorch/triton/cross_entropy.py): an online
  // softmax over the bf16 logits, and the gradient written in place into them (saved for
  // backward and scaled in place there); per-token statistics only besides (12 B x TP per token).
  // TE >= 2.18 (#3193) writes an fp32 gradient buffer instead: 6 / 4 B as above.
  return {.peak = 2.0, .kept_for_backward = 2.0};
}

ShardKey zero3_unit_key(const Mesh& m) { return shard_key(m); }

double zero3_unit_params(const Scenario& s, const Mesh& m) {
  // The largest FSDP unit (a layer or the embedding), parameters on this rank.
  const ModelSpec& md = s.model;
  const ParamComponents total = total_params(md, m.padded_vocab);
  const int L = std::max(1, md.num_layers);
  int n_moe = 0;
  for (int i = 0; i < md.num_layers; ++i) n_moe += is_moe_layer(md, i) ? 1 : 0;
  const int n_dense = md.num_layers - n_moe;
  const double per_layer_common = (total.attention + total.norms) / L / m.tp;
  double unit = n_dense > 0 ? per_layer_common + total.dense_mlp / n_dense / m.tp : 0.0;
  if (n_moe > 0)
    unit = std::max(unit, per_layer_common + total.shared_experts / n_moe / m.tp + total.router / n_moe +
                              total.routed_experts / n_moe / (m.ep * m.etp));
  return std::max(unit, total.embedding / m.tp);
}

void memory_without_state(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers, Memory& out) {
  const ModelSpec& md = s.model;
  const ParallelSpec& par = s.parallel;
  const MemoryAllowances& al = s.hardware.allowances;
  const Shape x = make_shape(s, m);

  const uint32_t modules = selective_modules(par);
  const LayerModel dense = model_layer(x, false, modules);
  const LayerModel moe = model_layer(x, true, modules);
  const bool full_rc = par.recompute_granularity == RecomputeGranularity::kFull;
  const int rc_layers = std::max(1, par.recompute_num_layers);
  const double layer_input = 2.0 * x.Ts * x.h;  // checkpoint of a fully recomputed layer
  // ---- Loss side (last stage): loss_bytes_per_logit (the CE implementation) times one
  // logits tensor on this rank; each MTP depth runs its own loss first and keeps what its
  // backward needs while the main loss runs.
  const double logits_unit = x.s * x.b * x.V;  // one logits tensor on this rank, elements
  const LossBytesPerLogit lb = loss_bytes_per_logit(s.training);
  const double loss_bytes = (lb.peak + lb.kept_for_backward * md.mtp_num_layers) * logits_unit;

  // ---- Communicators this rank joins (size > 1 only).
  int comms = 0;
  comms += m.tp > 1;
  comms += m.cp > 1;
  comms += m.dp * m.cp > 1;
  comms += m.pp > 1;
  if (has_moe(md)) {
    comms += m.ep > 1;
    comms += m.etp > 1 && m.etp != m.tp;
    comms += m.edp > 1;
  }

  // ---- CP p2p: two in-flight KV blocks (send + receive) during a layer's attention.
  double cp_buffers = 0;
  if (m.cp > 1 && (par.cp_comm_type == CpCommType::kP2P || par.cp_comm_type == CpCommType::kA2AP2P)) {
    const double kv_width = x.mla ? x.a * (x.d_n + x.d_r + x.d_v) : 2.0 * x.g * x.dh;
    cp_buffers = 2.0 * 2.0 * x.T * kv_width / m.tp;
  }

  out.hbm_bytes = s.hardware.gpu.hbm_bytes;
  out.stages.resize(layers.size());
  for (size_t r = 0; r < layers.size(); ++r) {
    const StageLayers& L = layers[r];
    StageMemory& st = out.stages[r];
    st = StageMemory{};
    st.stage = static_cast<int>(r);

    // Activations of one micro-batch on this stage (all its chunks).
    const int n_moe = L.num_moe_layers + (x.mtp_moe ? L.num_mtp_layers : 0);
    const int n_all = L.num_layers + L.num_mtp_layers;
    const int n_dense = n_all - n_moe;
    double per_mb = 0;
    double transient = 0;
    if (full_rc) {
      // Checkpointed groups: per model chunk of n layers, uniform keeps ceil(n/R) group
      // inputs; block keeps the inputs of the first R layers and full activations of the rest.
      const double chunks = m.vp;
      const double per_chunk = static_cast<double>(L.num_layers) / chunks;
      const double moe_frac = n_all > 0 ? static_cast<double>(n_moe) / n_all : 0.0;
      const double avg_full = moe_frac * moe.full + (1.0 - moe_frac) * dense.full;
      if (par.recompute_method == RecomputeMethod::kUniform) {
        per_mb = chunks * std::ceil(per_chunk / rc_layers) * layer_input;
      } else {
        const double rc = std::min<double>(rc_layers, per_chunk);
        per_mb = chunks * (rc * layer_input + (per_chunk - rc) * avg_full);
      }
      // MTP blocks are not covered by the layer recompute.
      per_mb += L.num_mtp_layers * (x.mtp_moe ? moe.full : dense.full);
      // Backward recomputes one group: its full activations plus that layer's working set.
      const double group = std::min<double>(rc_layers, std::max(1.0, per_chunk));
      const double worst_full = n_moe > 0 ? moe.full : dense.full;
      transient = group * worst_full + (n_moe > 0 ? moe.transient : dense.transient);
    } else if (x.skew > 1 && n_moe > 1) {
      // Skewed routing: the rank's saved expert activations over its n_moe layers, whose
      // popular experts fall on different ranks, exceed the mean by less than one layer's
      // busiest rank does (expert_load.hpp, busiest_factor_over_layers); the working set is one
      // layer's, at the per-layer factor.
      Shape xs = x;
      xs.skew = busiest_factor_over_layers(x.skew, n_moe);
      per_mb = n_dense * dense.saved.total() + n_moe * model_layer(xs, true, modules).saved.total();
      transient = std::max(n_dense > 0 ? dense.transient : 0.0, moe.transient);
    } else {
      per_mb = n_dense * dense.saved.total() + n_moe * moe.saved.total();
      transient = std::max(n_dense > 0 ? dense.transient : 0.0, n_moe > 0 ? moe.transient : 0.0);
    }
    if (L.num_mtp_layers > 0) {
      // MTP: embedding-norm and hidden-norm inputs plus the concatenated eh_proj input (a TE
      // linear: its FP8 copy under FP8).
      per_mb += L.num_mtp_layers * (2.0 * 2.0 * x.Ts * x.h + x.lb * x.Ts * 2.0 * x.h);
    }
    if (L.has_embedding && x.hidden_drop) per_mb += x.Ts * x.h;  // embedding dropout mask
    if (L.has_output) per_mb += 2.0 * 2.0 * x.Ts * x.h;          // final norm input + output-layer input

    st.activations_per_microbatch = per_mb;
    st.in_flight_microbatches = in_flight(s, m, static_cast<int>(r));
    st.activations = per_mb * st.in_flight_microbatches;
    st.logits_and_loss = L.has_output ? loss_bytes : 0.0;
    // The loss peak and a layer's working set do not coincide; the allocator's peak is the
    // larger of the two, so only the excess over the loss buffers is added.
    st.transient_peak = std::max(0.0, transient - st.logits_and_loss);
    st.comm_buffers = cp_buffers;
    // Workspaces PyTorch and Transformer Engine take from the caching allocator (so they are
    // in max_memory_allocated): a 32 MiB cuBLAS workspace per (handle, stream) for the
    // compute stream and one side stream (CUBLAS_WORKSPACE_CONFIG=:4096:8), TE's 32 MiB
    // cuBLASLt workspace on Hopper; plus the micro-batch's tokens, labels, loss mask and
    // position ids (8 + 8 + 4 + 8 bytes per token).
    st.workspaces = 3.0 * 32.0 * 1024.0 * 1024.0 + 28.0 * x.b * x.s;

    st.cuda_context = al.cuda_context;
    st.nccl_buffers = al.nccl_per_communicator * comms;
    st.cublas_workspace = al.cublas_workspace;
  }
}

void add_model_state(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                     const std::vector<GpuParams>& params, double zero3_unit, Memory& out) {
  const ModelSpec& md = s.model;
  const MemoryAllowances& al = s.hardware.allowances;
  const StateBytes b = state_bytes(s);
  const double dense_shard = static_cast<double>(m.dp) * m.cp;
  const double expert_shard = m.edp;
  const bool fp8 = s.training.precision == Precision::kFp8;
  assert(out.stages.size() == layers.size() && params.size() == layers.size());

  out.worst_stage = 0;
  out.peak_bytes = 0;
  out.allocated_peak_bytes = 0;
  out.peak_high_bytes = 0;
  out.peak_low_bytes = 0;
  out.verdict_stage = 0;
  out.fits = true;
  out.may_fit = true;
  const RelativeBand band = memory_spread().band;
  const size_t n = out.stages.size();
  for (size_t r = 0; r < n; ++r) {
    const StageLayers& L = layers[r];
    const GpuParams& P = params[r];
    StageMemory& st = out.stages[r];

    // Model state.
    const double wd = b.shard_params ? P.dense / dense_shard : P.dense;
    const double we = b.shard_params ? P.expert / expert_shard : P.expert;
    st.weights = 2.0 * (wd + we);
    // FP8 linear layers: everything but the word embedding and the output layer.
    const double fp8_linear = std::max(0.0, P.total() - stage_embedding_params(s, m, L.has_embedding, L.has_output));
    const bool fp8_params = fp8 && s.training.fp8_param_gather;
    // --fp8-param-gather: those weights are FP8 tensors, 1 B instead of 2 (the same share of a
    // sharded copy).
    if (fp8_params && P.total() > 0) st.weights -= (wd + we) * fp8_linear / P.total();
    // Gradients and optimizer state exist for what trains (LoRA: the adapters only).
    const double td = P.trainable_dense, te = P.trainable_expert;
    st.grads = b.grad_b * (b.shard_grads ? td / dense_shard + te / expert_shard : td + te);
    const double opt_params = b.shard_optim ? td / dense_shard + te / expert_shard : td + te;
    st.main_params = b.main_b * opt_params;
    st.optimizer_states = b.optim_b * opt_params;
    st.fsdp_gather_buffers = b.shard_params ? (2.0 * 2.0 + b.grad_b) * zero3_unit : 0.0;
    st.fp8_weight_cache = 0;
    if (fp8) {
      // TE caches an FP8 copy of each linear weight for the step, row-wise and (Hopper)
      // column-wise: 2 B per linear parameter. Embedding and output layer stay bf16. With FP8
      // weights (--fp8-param-gather) the weight is the row-wise copy: only the column-wise
      // transpose is cached, 1 B.
      st.fp8_weight_cache = (fp8_params ? 1.0 : 2.0) * fp8_linear;
    }

    st.allocated = st.weights + st.grads + st.main_params + st.optimizer_states +
                   st.fsdp_gather_buffers + st.fp8_weight_cache + st.activations +
                   st.logits_and_loss + st.transient_peak + st.comm_buffers + st.workspaces;
    st.fragmentation = al.fragmentation_fraction * st.allocated;
    st.peak = st.allocated + st.cuda_context + st.nccl_buffers + st.cublas_workspace + st.fragmentation;
    // The memory model's error band (issue 12): the 10th and 90th percentiles of its
    // measured / predicted residuals (memory_spread(), above).
    // The band's bottom leaves out the fragmentation term: that term is what the caching
    // allocator keeps reserved beyond its live tensors in runs without memory pressure, and
    // when cudaMalloc fails PyTorch's allocator releases its cached free blocks and retries
    // (CUDACachingAllocator: release_available_cached_blocks, then release_cached_blocks)
    // before it raises out of memory. A layout whose tensors and runtime fit but whose usual
    // fragmentation does not runs with allocator retries: it may fit (tight), it is not out of
    // memory. Optimistic, as a bottom should be: free blocks inside segments that still hold
    // live tensors cannot be released.
    st.peak_low = (st.peak - st.fragmentation) * (1.0 + band.low);
    st.peak_high = st.peak * (1.0 + band.high);

    if (st.peak > out.peak_bytes || r == 0) {
      out.peak_bytes = st.peak;
      out.worst_stage = st.stage;
    }
    out.allocated_peak_bytes = std::max(out.allocated_peak_bytes, st.allocated);
    if (st.peak_high > out.peak_high_bytes || r == 0) {
      out.peak_high_bytes = st.peak_high;
      out.verdict_stage = st.stage;
    }
    out.peak_low_bytes = std::max(out.peak_low_bytes, st.peak_low);
    if (st.peak_high > out.hbm_bytes) out.fits = false;
    if (st.peak_low > out.hbm_bytes) out.may_fit = false;
  }
}

void estimate_memory(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers,
                     const std::vector<GpuParams>& params, Memory& out) {
  memory_without_state(s, m, layers, out);
  add_model_state(s, m, layers, params, shards_parameters(s) ? zero3_unit_params(s, m) : 0.0, out);
}

}  // namespace lcm
