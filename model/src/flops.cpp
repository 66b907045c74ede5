// FLOPs of one training step, by op class and pass, plus Megatron's headline count.
//
// Counting (docs/reference/formulas.md §2): 2 FLOPs per multiply-accumulate; every GEMM
// runs once forward and twice backward (dgrad + wgrad); the attention core (QK^T and PV)
// does s^2 (query, key) pairs per head, halved for a causal mask when the convention
// says so. The per-class terms reproduce Megatron-LM's num_floating_point_operations
// (megatron/training/training.py, d98e8a64) term by term, so with causal halving
// fwd + bwd - router == megatron_flops; megatron_flops itself is computed separately
// by a transcription of Megatron's formula (megatron_formula below).
//
// Context parallelism does not change the totals: with load-balanced chunks (each rank
// takes chunks i and 2c-1-i) every rank does 1/c of the causal work, so the step total
// equals the unsharded count.
#include "lcm/model/flops.hpp"

#include <algorithm>
#include <cassert>

#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/resolve.hpp"

namespace lcm {
namespace {

// Forward FLOPs of one transformer layer for one sequence, by op class.
struct LayerFwd {
  double attn_proj = 0;
  double attn_core = 0;
  double dense_mlp = 0;
  double routed = 0;
  double shared = 0;
  double router = 0;
  // LoRA adapters (A and B) on the attention projections and on the MLP / experts.
  double lora_attn = 0;
  double lora_mlp = 0;

  double total() const { return attn_proj + attn_core + dense_mlp + routed + shared + router + lora_attn + lora_mlp; }
  // An MTP layer's GEMMs: no router, no LoRA adapters (MTP layers keep none).
  double total_without_router() const { return total() - router - lora_attn - lora_mlp; }
};

double ffn_factor(const ModelSpec& m) { return m.swiglu ? 3.0 : 2.0; }  // GEMMs per MLP width

// MACs per token of the attention projections. GQA: QKV h x (a+2g)d_h and out a*d_h x h.
// MLA: Megatron's q_term + kv term + rotary key + out projection, including its "+1"
// columns for the q/kv norms (training.py), kept so the sum matches Megatron exactly.
double attn_proj_macs(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double a = m.num_attention_heads;
  if (!m.multi_latent_attention) {
    const double dh = head_dim(m);
    return h * dh * (a + 2 * query_groups(m)) + a * dh * h;
  }
  const double dn = static_cast<double>(m.qk_head_dim);
  const double dr = static_cast<double>(m.qk_pos_emb_head_dim);
  const double dv = static_cast<double>(m.v_head_dim);
  const double rq = static_cast<double>(m.q_lora_rank);
  const double rkv = static_cast<double>(m.kv_lora_rank);
  const double q = m.q_lora_rank > 0 ? rq * (h + a * (dn + dr) + 1) : h * a * (dn + dr);
  return q + rkv * (h + a * (dn + dv) + 1) + h * dr + a * dv * h;
}

// MACs per token of the MLA up projections (what `mla_up_proj` recompute reruns): q up
// (or the full q projection without q-LoRA) and kv up. multi_latent_attention.py
// qkv_up_proj_and_rope_apply.
double mla_up_proj_macs(const ModelSpec& m) {
  if (!m.multi_latent_attention) return 0;
  const double a = m.num_attention_heads;
  const double dn = static_cast<double>(m.qk_head_dim);
  const double dr = static_cast<double>(m.qk_pos_emb_head_dim);
  const double dv = static_cast<double>(m.v_head_dim);
  const double q_in =
      m.q_lora_rank > 0 ? static_cast<double>(m.q_lora_rank) : static_cast<double>(m.hidden_size);
  return q_in * a * (dn + dr) + static_cast<double>(m.kv_lora_rank) * a * (dn + dv);
}

// MACs per (query, key) pair over all heads: QK^T plus PV.
double attn_core_macs_per_pair(const ModelSpec& m) {
  const double a = m.num_attention_heads;
  if (m.multi_latent_attention) {
    return a * static_cast<double>(m.qk_head_dim + m.qk_pos_emb_head_dim) +
           a * static_cast<double>(m.v_head_dim);
  }
  return 2 * a * head_dim(m);
}

// `span`: the tokens one document of the sequence attends over (attention_span; 0: the
// whole sequence). s / span documents of span^2 pairs each.
LayerFwd layer_fwd(const ModelSpec& m, int64_t seq, bool moe, bool causal_halved, int64_t span = 0,
                   const TrainingSpec* t = nullptr) {
  const double s = static_cast<double>(seq);
  const double h = static_cast<double>(m.hidden_size);
  if (span <= 0) span = seq;
  const double d = static_cast<double>(span);
  LayerFwd f;
  f.attn_proj = 2 * s * attn_proj_macs(m);
  // Causal pairs: s^2 / 2 (s^2 under the non-causal convention); a windowed layer's pairs
  // (windowed_pair_fraction of s^2) are doubled the same way under that convention. Packed
  // documents: (s / d) d^2 = s d pairs.
  const double share = windowed_layer_share(m, moe);
  const double pairs = (1.0 - share) * 0.5 + share * windowed_pair_fraction(m.window_size, span);
  f.attn_core = 2 * s * d * attn_core_macs_per_pair(m) * pairs * (causal_halved ? 1.0 : 2.0);
  if (moe) {
    const double topk = has_moe(m) ? m.moe_router_topk : 0;  // dense model: no experts
    f.routed = 2 * s * ffn_factor(m) * h * expert_ffn(m) * topk;
    f.shared = 2 * s * ffn_factor(m) * h * static_cast<double>(m.moe_shared_expert_intermediate_size);
    f.router = 2 * s * h * m.num_experts;
  } else {
    f.dense_mlp = 2 * s * ffn_factor(m) * h * static_cast<double>(ffn_width(m));
  }
  // LoRA adapters: 2 FLOPs per adapter parameter per token; a token visits top-k routed experts.
  if (t) {
    const LoraLayerParams lora = lora_layer_params(m, *t, moe);
    const double topk = moe && has_moe(m) ? m.moe_router_topk : 0;
    f.lora_attn = 2 * s * lora.attn;
    f.lora_mlp = 2 * s * (lora.mlp + lora.per_expert * topk);
  }
  return f;
}

// Adds `n` copies of a layer to `t`, all classes in their own slot.
void add_layers(FlopTerms& t, const LayerFwd& f, double n) {
  t.attn_proj += n * f.attn_proj;
  t.attn_core += n * f.attn_core;
  t.dense_mlp += n * f.dense_mlp;
  t.routed_experts += n * f.routed;
  t.shared_experts += n * f.shared;
  t.router += n * f.router;
  t.lora_adapters += n * (f.lora_attn + f.lora_mlp);
}

// Adds `n` MTP layers: their GEMMs go to `mtp`, their router to `router`.
void add_mtp_layers(FlopTerms& t, const LayerFwd& f, double n) {
  t.mtp += n * f.total_without_router();
  t.router += n * f.router;
}

FlopTerms scaled(const FlopTerms& t, double k) {
  return FlopTerms{t.attn_proj * k,      t.attn_core * k, t.dense_mlp * k, t.routed_experts * k,
                   t.shared_experts * k, t.router * k,    t.logits * k,    t.mtp * k, t.lora_adapters * k};
}

struct LayerCount {
  int dense = 0;
  int moe = 0;
};

void count_layer(const ModelSpec& m, int layer, LayerCount& c) {
  if (is_moe_layer(m, layer)) {
    ++c.moe;
  } else {
    ++c.dense;
  }
}

LayerCount all_layers(const ModelSpec& m) {
  LayerCount c;
  for (int i = 0; i < m.num_layers; ++i) count_layer(m, i, c);
  return c;
}


// Layers rerun by full recompute, as assigned per pipeline stage and model chunk by
// stage_layers() (mesh.cpp: uniform reruns every layer; block the first
// recompute_num_layers of each chunk; megatron/core/recompute.py). The FP8 "skip until
// hidden_states requires grad" shift is ignored.
LayerCount full_recompute_layers(const Scenario& s, const Mesh& m) {
  LayerCount c;
  for (const StageLayers& st : stage_layers(s, m)) {
    c.moe += st.num_recomputed_moe_layers;
    c.dense += st.num_recomputed_layers - st.num_recomputed_moe_layers;
  }
  return c;
}

// The forward work selective recompute reruns in one layer (megatron/core, recompute_modules).
// core_attn: the attention core. mla_up_proj: the MLA up projections. mlp: a dense
// layer's MLP. moe: the whole MoE layer (router, routed and shared experts). shared_experts:
// the shared experts. moe_act and layernorm: elementwise only, no GEMM FLOPs.
LayerFwd selective_part(const ModelSpec& model, const LayerFwd& f, int64_t seq, uint32_t mods,
                        bool moe) {
  LayerFwd r;
  if (mods & kRecomputeCoreAttn) r.attn_core = f.attn_core;
  if (mods & kRecomputeMlaUpProj) r.attn_proj = 2 * static_cast<double>(seq) * mla_up_proj_macs(model);
  if (!moe && (mods & kRecomputeMlp)) {
    r.dense_mlp = f.dense_mlp;
    r.lora_mlp = f.lora_mlp;
  }
  if (moe && (mods & kRecomputeMoe)) {
    r.routed = f.routed;
    r.shared = f.shared;
    r.router = f.router;
    r.lora_mlp = f.lora_mlp;
  }
  if (moe && (mods & kRecomputeSharedExperts)) r.shared = f.shared;
  return r;
}

// Forward work rerun by activation recomputation, whole step. `mtp_extra` is the step's
// MTP eh_proj + norm work, rerun with the MTP layer under full uniform recompute
// (multi_token_prediction.py: block recompute is not implemented for MTP and is skipped).
FlopTerms recompute_terms(const Scenario& s, const Mesh& m, const LayerFwd& dense,
                          const LayerFwd& moe, double seqs, double mtp_extra) {
  const ModelSpec& model = s.model;
  const ParallelSpec& p = s.parallel;
  const LayerFwd& mtp_layer = mtp_is_moe(model) ? moe : dense;
  FlopTerms rc;
  if (p.recompute_granularity == RecomputeGranularity::kFull) {
    const LayerCount c = full_recompute_layers(s, m);
    add_layers(rc, dense, c.dense * seqs);
    add_layers(rc, moe, c.moe * seqs);
    if (p.recompute_method == RecomputeMethod::kUniform) {
      add_mtp_layers(rc, mtp_layer, model.mtp_num_layers * seqs);
      rc.mtp += mtp_extra;
    }
  } else if (p.recompute_granularity == RecomputeGranularity::kSelective) {
    const int64_t seq = s.training.seq_length;
    const uint32_t mods = p.recompute_modules;
    const LayerCount c = all_layers(model);
    add_layers(rc, selective_part(model, dense, seq, mods, false), c.dense * seqs);
    add_layers(rc, selective_part(model, moe, seq, mods, true), c.moe * seqs);
    const bool mtp_moe = mtp_is_moe(model);
    add_mtp_layers(rc, selective_part(model, mtp_layer, seq, mods, mtp_moe),
                   model.mtp_num_layers * seqs);
  }
  return rc;
}

// Independent transcription of Megatron's transformer_flops() (training.py, d98e8a64): T =
// B*s tokens, sum of L_i^2 over the batch's documents = B*s*span (B*s^2 for BSHD batches,
// one document per sequence), no latent MoE, no output gate, no linear-attention variants.
double megatron_formula(const ModelSpec& m, int64_t seq, int64_t span, int64_t batch, int64_t padded_vocab) {
  const double h = static_cast<double>(m.hidden_size);
  const double tokens = static_cast<double>(batch) * static_cast<double>(seq);
  const double seqlen_sq_sum = static_cast<double>(batch) * static_cast<double>(seq) * static_cast<double>(span);
  const double fwd_bwd = 3, fma = 2;
  const double ffn_exp = m.swiglu ? 3 : 2;

  double num_moe = 0, num_dense = m.num_layers, routed_to = 0, last_is_moe = 0;
  if (has_moe(m)) {
    const LayerCount c = all_layers(m);
    num_moe = c.moe;
    num_dense = c.dense;
    routed_to = m.moe_router_topk;
    last_is_moe = mtp_is_moe(m) ? 1 : 0;
  }
  const double mtp = m.mtp_num_layers;
  num_moe += last_is_moe * mtp;
  num_dense += (1 - last_is_moe) * mtp;
  const double num_layers = m.num_layers + mtp;

  double attn_term = 0, core_term = 0;
  const double a = m.num_attention_heads;
  if (m.multi_latent_attention) {
    const double dn = static_cast<double>(m.qk_head_dim);
    const double dr = static_cast<double>(m.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(m.v_head_dim);
    const double q_term = m.q_lora_rank <= 0
                              ? h * a * (dn + dr)
                              : static_cast<double>(m.q_lora_rank) * (h + a * (dn + dr) + 1);
    attn_term = fwd_bwd * fma *
                (q_term + static_cast<double>(m.kv_lora_rank) * (h + a * (dn + dv) + 1) +
                 h * dr + a * dv * h);
    core_term = fwd_bwd * fma * (a * (dn + dr) / 2 + a * dv / 2);
  } else {
    const double q = head_dim(m) * a;
    const double kv = head_dim(m) * query_groups(m);
    attn_term = fwd_bwd * fma * (h * (q + kv + kv) + q * h);
    core_term = fwd_bwd * fma * q / 2 * 2;
  }
  const double mlp = fwd_bwd * fma * h *
                     (static_cast<double>(m.ffn_hidden_size) * ffn_exp * num_dense +
                      expert_ffn(m) * routed_to * ffn_exp * num_moe +
                      static_cast<double>(m.moe_shared_expert_intermediate_size) * ffn_exp * num_moe);
  const double mtp_proj = fwd_bwd * fma * mtp * (3 * h + 2 * h * h);
  const double logits = fwd_bwd * fma * h * static_cast<double>(padded_vocab) * (mtp + 1);
  return tokens * (mlp + attn_term * num_layers + mtp_proj + logits) +
         seqlen_sq_sum * core_term * num_layers;
}

}  // namespace

Flops count_flops(const Scenario& s, const Mesh& m) {
  const ModelSpec& model = s.model;
  const int64_t seq = s.training.seq_length;
  const double seqs = s.training.global_batch_size;
  const double tokens = seqs * static_cast<double>(seq);
  const double h = static_cast<double>(model.hidden_size);
  const double mtp = model.mtp_num_layers;
  const bool causal = s.flop_convention.causal_halved;

  const int64_t span = attention_span(s.training).span;
  const LayerFwd dense = layer_fwd(model, seq, false, causal, span, &s.training);
  const LayerFwd moe = layer_fwd(model, seq, true, causal, span, &s.training);
  const LayerCount c = all_layers(model);
  // MTP per depth: eh_proj (2h -> h) plus Megatron's 3h for enorm/hnorm/final norm.
  const double mtp_extra = mtp * 2 * tokens * (2 * h * h + 3 * h);

  Flops out;
  add_layers(out.fwd, dense, c.dense * seqs);
  add_layers(out.fwd, moe, c.moe * seqs);
  add_mtp_layers(out.fwd, mtp_is_moe(model) ? moe : dense, mtp * seqs);
  out.fwd.mtp += mtp_extra;
  // Output layer over the padded vocabulary, once for the main head and once per MTP depth.
  out.fwd.logits = 2 * tokens * h * static_cast<double>(m.padded_vocab) * (1 + mtp);
  out.bwd = scaled(out.fwd, 2.0);
  if (s.training.peft == Peft::kLora) {
    // A frozen base: its GEMMs run dgrad only (1x forward); the core and the adapters keep 2x.
    FlopTerms b = scaled(out.fwd, 1.0);
    b.attn_core = out.bwd.attn_core;
    b.lora_adapters = out.bwd.lora_adapters;
    out.bwd = b;
  }
  out.recompute = recompute_terms(s, m, dense, moe, seqs, mtp_extra);

  out.model_flops = out.fwd.total() + out.bwd.total();
  out.hardware_flops = out.model_flops + out.recompute.total();
  out.per_step = s.flop_convention.include_recompute ? out.hardware_flops : out.model_flops;
  out.megatron_flops =
      megatron_formula(model, seq, span, s.training.global_batch_size, m.padded_vocab);
  out.per_gpu_per_step = m.world > 0 ? out.per_step / m.world : 0.0;
  return out;
}

LayerFlops layer_forward_flops(const ModelSpec& model, int64_t seq, bool moe_layer,
                               bool causal_halved) {
  const LayerFwd f = layer_fwd(model, seq, moe_layer, causal_halved);
  return LayerFlops{f.attn_proj, f.attn_core, moe_layer ? f.routed + f.shared : f.dense_mlp};
}

double windowed_pair_fraction(int64_t window, int64_t seq) {
  if (window <= 0 || seq <= 0 || window >= seq) return 0.5;
  const double w = static_cast<double>(window), s = static_cast<double>(seq);
  return (w * s - 0.5 * w * w) / (s * s);
}

double windowed_layer_share(const ModelSpec& m, bool moe_layers) {
  if (m.window_size <= 0 || m.num_layers <= 0) return 0.0;
  const auto windowed = [&](int l) { return m.window_attn_skip_freq <= 0 || l % m.window_attn_skip_freq != 0; };
  int kind = 0, kind_windowed = 0, all_windowed = 0;
  for (int l = 1; l <= m.num_layers; ++l) {
    all_windowed += windowed(l) ? 1 : 0;
    if (is_moe_layer(m, l - 1) != moe_layers) continue;
    ++kind;
    kind_windowed += windowed(l) ? 1 : 0;
  }
  // A kind without layers of its own (an MTP layer of the other kind): the model's share.
  return kind > 0 ? static_cast<double>(kind_windowed) / kind : static_cast<double>(all_windowed) / m.num_layers;
}

AttentionShape attention_windowed_view(const AttentionShape& a) {
  AttentionShape w = a;
  if (a.window > 0 && a.causal) w.work_fraction = windowed_pair_fraction(a.window, a.seq_kv);
  w.windowed_share = a.window > 0 ? 1.0 : 0.0;
  return w;
}

AttentionShape attention_full_view(const AttentionShape& a) {
  AttentionShape f = a;
  f.window = 0;
  f.windowed_share = 0;
  return f;
}

double attention_core_flops(const AttentionShape& a) {
  const double share = a.window > 0 ? std::clamp(a.windowed_share, 0.0, 1.0) : 0.0;
  const double wf = share > 0 ? share * attention_windowed_view(a).work_fraction + (1.0 - share) * a.work_fraction
                              : a.work_fraction;
  const double pairs = static_cast<double>(a.seq_q) * static_cast<double>(a.seq_kv) * wf * static_cast<double>(a.batch);
  return 2.0 * pairs * static_cast<double>(a.heads_q) * static_cast<double>(a.head_dim_qk + a.head_dim_v);
}

}  // namespace lcm
