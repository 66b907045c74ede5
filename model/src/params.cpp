// Parameter counts of the whole model and of one GPU per pipeline stage.
//
// Follows the modules Megatron-Core builds (gpt_layer_specs.py with the Transformer Engine
// backend, d98e8a64) and the counting of theoretical_memory_usage.py::
// compute_weight_and_optimizer_memory (docs/reference/formulas.md §1). Where the two differ,
// the real module layout wins and docs/flops-and-params.md says so:
//   * biases (add_bias_linear, add_qkv_bias) and the per-head qk-norms are counted;
//   * MLA q/kv norms exist only with qk_layernorm (Megatron's estimate always adds them);
//   * MLA down projections are TELinear(parallel_mode='duplicated'): replicated over TP;
//   * MTP blocks carry enorm, hnorm, eh_proj (2h -> h) and a final norm besides the layer;
//   * learned absolute position embeddings (max_position_embeddings x h) are counted;
//   * the router's expert_bias is a registered buffer, not a parameter: not counted.
#include "lcm/model/params.hpp"

#include <cassert>

#include "lcm/model/resolve.hpp"

namespace lcm {
namespace {

// One group of parameters, split by how the ranks hold it (Megatron's "TP-sharded,
// replicated, expert-sharded" split, theoretical_memory_usage.py).
struct Split {
  double tp = 0;          // sharded over TP (column/row-parallel weights, column biases)
  double replicated = 0;  // whole copy on every TP rank (norms, router, row-parallel biases)
  double expert = 0;      // sharded over EP x ETP (expert weights, expert fc1 biases)
  double expert_ep = 0;   // sharded over EP only (expert fc2 biases, row-parallel in ETP)
  // Parameter tensors (nn.Parameter objects, whatever their sharding): the non-expert ones
  // and all routed experts' (a GPU holds 1/EP of those).
  double tensors = 0;
  double expert_tensors = 0;

  double total() const { return tp + replicated + expert + expert_ep; }
  Split& operator+=(const Split& o) {
    tp += o.tp;
    replicated += o.replicated;
    expert += o.expert;
    expert_ep += o.expert_ep;
    tensors += o.tensors;
    expert_tensors += o.expert_tensors;
    return *this;
  }
  Split operator*(double k) const {
    return {tp * k, replicated * k, expert * k, expert_ep * k, tensors * k, expert_tensors * k};
  }
  Split operator+(const Split& o) const {
    Split r = *this;
    return r += o;
  }
};

double norm_size(const ModelSpec& m) {  // RMSNorm: weight; LayerNorm: weight + bias
  return m.normalization == Normalization::kRMSNorm ? 1.0 : 2.0;
}

// Self-attention (GQA/MHA/MQA). Source: docs/reference/formulas.md §1.1; attention.py linear_qkv has a
// bias with add_bias_linear or add_qkv_bias, linear_proj (row-parallel) with add_bias_linear.
Split gqa_attention(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double dh = head_dim(m);
  const double a = m.num_attention_heads;
  const double g = query_groups(m);
  Split s;
  s.tp = h * dh * (2 * a + 2 * g);
  s.tensors = 2;  // linear_qkv, linear_proj weights
  if (m.add_bias_linear || m.add_qkv_bias) s.tp += (a + 2 * g) * dh, s.tensors += 1;
  if (m.add_bias_linear) s.replicated += h, s.tensors += 1;
  if (m.qk_layernorm) {  // q_layernorm + k_layernorm
    s.replicated += 2 * dh * norm_size(m);
    s.tensors += 2 * norm_size(m);
  }
  return s;
}

// Multi-latent attention. Source: docs/reference/formulas.md §1.2; multi_latent_attention.py (down
// projections are TELinear 'duplicated', up projections and linear_proj TP-sharded).
Split mla_attention(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double a = m.num_attention_heads;
  const double rq = static_cast<double>(m.q_lora_rank);
  const double rkv = static_cast<double>(m.kv_lora_rank);
  const double dn = static_cast<double>(m.qk_head_dim);
  const double dr = static_cast<double>(m.qk_pos_emb_head_dim);
  const double dv = static_cast<double>(m.v_head_dim);
  Split s;
  if (m.q_lora_rank > 0) {
    s.replicated += h * rq;        // linear_q_down_proj
    s.tp += rq * a * (dn + dr);    // linear_q_up_proj
    s.tensors += 2;
    if (m.qk_layernorm) s.replicated += rq * norm_size(m), s.tensors += norm_size(m);  // q_layernorm
  } else {
    s.tp += h * a * (dn + dr);     // linear_q_proj
    s.tensors += 1;
  }
  s.replicated += h * (rkv + dr);  // linear_kv_down_proj (latent + shared rotary key)
  s.tp += rkv * a * (dn + dv);     // linear_kv_up_proj
  if (m.qk_layernorm) s.replicated += rkv * norm_size(m), s.tensors += norm_size(m);  // kv_layernorm
  s.tp += a * dv * h;              // linear_proj
  s.tensors += 3;                  // kv down, kv up, proj
  if (m.add_bias_linear) s.replicated += h, s.tensors += 1;
  return s;
}

Split attention(const ModelSpec& m) {
  return m.multi_latent_attention ? mla_attention(m) : gqa_attention(m);
}

// An MLP of width w: fc1 h -> w (2w when gated), fc2 w -> h. fc1 is column-parallel (its
// bias shards), fc2 row-parallel (its bias is replicated). Source: docs/reference/formulas.md §1.3.
Split mlp(const ModelSpec& m, double w) {
  const double h = static_cast<double>(m.hidden_size);
  const double fc1_out = m.swiglu ? 2 * w : w;
  Split s;
  s.tp = h * fc1_out + w * h;
  s.tensors = 2;
  if (m.add_bias_linear) {
    s.tp += fc1_out;
    s.replicated += h;
    s.tensors += 2;
  }
  return s;
}

// All routed experts of one MoE layer (E x mlp(f_e)), held by EP x ETP.
Split routed_experts(const ModelSpec& m) {
  const Split one = mlp(m, expert_ffn(m));
  const double e = m.num_experts;
  Split s{0, 0, one.tp * e, one.replicated * e};
  s.expert_tensors = one.tensors * e;  // TE GroupedLinear and SequentialMLP: one weight per expert
  return s;
}

// Router h x E (+E bias with add_bias_linear), replicated. moe/router.py TopKRouter.
Split router(const ModelSpec& m) {
  const double e = m.num_experts;
  Split s{0, static_cast<double>(m.hidden_size) * e + (m.add_bias_linear ? e : 0), 0, 0};
  s.tensors = m.add_bias_linear ? 2 : 1;
  return s;
}

Split shared_experts(const ModelSpec& m) {
  if (m.moe_shared_expert_intermediate_size <= 0) return {};
  return mlp(m, static_cast<double>(m.moe_shared_expert_intermediate_size));
}

Split layer_norms(const ModelSpec& m) {  // input_layernorm + pre_mlp_layernorm
  Split s{0, 2 * norm_size(m) * static_cast<double>(m.hidden_size), 0, 0};
  s.tensors = 2 * norm_size(m);  // RMSNorm: weight; LayerNorm: weight and bias
  return s;
}

// MTP extras per depth besides its transformer layer: enorm, hnorm, final_layernorm and
// eh_proj (column-parallel, no bias). multi_token_prediction.py MultiTokenPredictionLayer.
Split mtp_extras(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  Split s{2 * h * h, 3 * norm_size(m) * h, 0, 0};
  s.tensors = 1 + 3 * norm_size(m);
  return s;
}

// Fraction of the routed experts a token touches.
double active_fraction(const ModelSpec& m) {
  return has_moe(m) ? static_cast<double>(m.moe_router_topk) / m.num_experts : 0.0;
}

// One whole transformer layer (MoE or dense MLP). `expert_scale` scales the routed experts
// (1 for total, top-k/E for active).
// LoRA adapters of one layer (Megatron-Bridge ParallelLinearAdapter), as held: TP-sharded
// (column-parallel base: A over r, B over out; row-parallel: A over in, B over out); routed
// experts' sharded over EP x ETP like the expert. MLA projections are refused by validation.
Split lora_layer(const ModelSpec& m, const TrainingSpec& t, bool moe, double expert_scale) {
  const LoraLayerParams p = lora_layer_params(m, t, moe);
  Split s;
  s.tp = p.attn + p.mlp;
  s.tensors = p.attn_tensors + p.mlp_tensors;
  const double experts = moe && has_moe(m) ? m.num_experts * expert_scale : 0.0;
  s.expert = p.per_expert * experts;
  s.expert_tensors = p.per_expert_tensors * experts;
  return s;
}

Split layer(const ModelSpec& m, bool moe, double expert_scale) {
  Split s = attention(m);
  s += layer_norms(m);
  if (moe) {
    s += router(m);
    s += routed_experts(m) * expert_scale;
    s += shared_experts(m);
  } else {
    s += mlp(m, static_cast<double>(ffn_width(m)));
  }
  return s;
}


// Fills every component; `expert_scale` as in layer().
ParamComponents components(const ModelSpec& m, double vocab, double expert_scale) {
  const double h = static_cast<double>(m.hidden_size);
  int moe_layers = 0;
  for (int i = 0; i < m.num_layers; ++i) moe_layers += is_moe_layer(m, i) ? 1 : 0;
  const int dense_layers = m.num_layers - moe_layers;

  ParamComponents c;
  c.embedding = vocab * h;
  if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute)
    c.embedding += static_cast<double>(m.max_position_embeddings) * h;
  c.attention = m.num_layers * attention(m).total();
  c.dense_mlp = dense_layers * mlp(m, static_cast<double>(ffn_width(m))).total();
  if (has_moe(m)) {
    c.router = moe_layers * router(m).total();
    c.routed_experts = moe_layers * routed_experts(m).total() * expert_scale;
    c.shared_experts = moe_layers * shared_experts(m).total();
  }
  c.norms = m.num_layers * layer_norms(m).total() + norm_size(m) * h;
  c.output_layer = m.untie_embeddings_and_output_weights ? vocab * h : 0.0;
  c.mtp = m.mtp_num_layers * (layer(m, mtp_is_moe(m), expert_scale).total() + mtp_extras(m).total());
  return c;
}

}  // namespace

ParamCounts count_params(const ModelSpec& model, int64_t padded_vocab) {
  const double v = static_cast<double>(padded_vocab);
  return ParamCounts{components(model, v, 1.0), components(model, v, active_fraction(model))};
}

LoraLayerParams lora_layer_params(const ModelSpec& m, const TrainingSpec& t, bool moe_layer) {
  LoraLayerParams p;
  if (t.peft != Peft::kLora) return p;
  const double r = static_cast<double>(t.lora_rank), h = static_cast<double>(m.hidden_size);
  const double gate = m.swiglu ? 2.0 : 1.0;
  auto adapter = [&](uint32_t target, double in, double out, double& params, double& tensors) {
    if (!(t.lora_targets & target)) return;
    params += r * (in + out);
    tensors += 2;
  };
  if (!m.multi_latent_attention) {
    const double q = head_dim(m) * m.num_attention_heads, kv = head_dim(m) * query_groups(m);
    adapter(kLoraQkv, h, q + 2 * kv, p.attn, p.attn_tensors);
    adapter(kLoraProj, q, h, p.attn, p.attn_tensors);
  }
  auto mlp = [&](double w, double& params, double& tensors) {
    adapter(kLoraFc1, h, gate * w, params, tensors);
    adapter(kLoraFc2, w, h, params, tensors);
  };
  if (!moe_layer) {
    mlp(static_cast<double>(ffn_width(m)), p.mlp, p.mlp_tensors);
  } else if (has_moe(m)) {
    if (m.moe_shared_expert_intermediate_size > 0)
      mlp(static_cast<double>(m.moe_shared_expert_intermediate_size), p.mlp, p.mlp_tensors);
    mlp(expert_ffn(m), p.per_expert, p.per_expert_tensors);
  }
  return p;
}

ParamCounts count_params(const Scenario& s, int64_t padded_vocab) {
  ParamCounts c = count_params(s.model, padded_vocab);
  if (s.training.peft != Peft::kLora) return c;
  int moe_layers = 0;
  for (int i = 0; i < s.model.num_layers; ++i) moe_layers += is_moe_layer(s.model, i) ? 1 : 0;
  const int dense_layers = s.model.num_layers - moe_layers;
  const auto adapters = [&](double scale) {
    return dense_layers * lora_layer(s.model, s.training, false, scale).total() +
           moe_layers * lora_layer(s.model, s.training, true, scale).total();
  };
  c.total.lora_adapters = adapters(1.0);
  c.active.lora_adapters = adapters(active_fraction(s.model));
  return c;
}

ParamComponents total_params(const ModelSpec& model, int64_t padded_vocab) {
  return components(model, static_cast<double>(padded_vocab), 1.0);
}

// Sharding: Split.tp / tp, replicated whole, expert / (ep * etp), expert_ep / ep. The
// word embedding is a VocabParallelEmbedding and the output layer a ColumnParallelLinear
// (both / tp); the final norm sits with the output layer on the last stage. With tied
// embeddings and pp > 1 the last stage keeps its own copy of the word embedding for the
// head (Megatron's shared_embedding_or_output_weight, gradients all-reduced with stage 0);
// with MTP the last stage also holds a copy of the embedding for the MTP input
// (gpt_model.py: `if self.pre_process or self.mtp_process`), tied or not.
double stage_embedding_params(const Scenario& s, const Mesh& m, bool has_embedding, bool has_output) {
  const double vh = static_cast<double>(m.padded_vocab) / m.tp * static_cast<double>(s.model.hidden_size);
  double emb = 0;
  if (has_embedding) emb += vh;
  if (has_output && (s.model.untie_embeddings_and_output_weights || m.pp > 1)) emb += vh;
  return emb;
}

std::vector<GpuParams> gpu_params(const Scenario& s, const Mesh& m,
                                  const std::vector<StageLayers>& stages) {
  const ModelSpec& model = s.model;
  const double h = static_cast<double>(model.hidden_size);
  const double vocab = static_cast<double>(m.padded_vocab);
  assert(m.tp > 0 && m.ep > 0 && m.etp > 0);
  auto on_gpu = [&](const Split& x) {
    return GpuParams{x.tp / m.tp + x.replicated,
                     x.expert / (static_cast<double>(m.ep) * m.etp) + x.expert_ep / m.ep, x.tensors,
                     x.expert_tensors / m.ep};
  };
  const bool lora = s.training.peft == Peft::kLora;
  const Split lora_dense = lora_layer(model, s.training, false, 1.0);
  const Split lora_moe = has_moe(model) ? lora_layer(model, s.training, true, 1.0) : Split{};
  const bool mtp_moe = mtp_is_moe(model);
  const Split dense_layer = layer(model, false, 1.0);
  const Split moe_layer = has_moe(model) ? layer(model, true, 1.0) : Split{};
  const Split mtp_block = layer(model, mtp_moe, 1.0) + mtp_extras(model);

  std::vector<GpuParams> out;
  out.reserve(stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageLayers& st = stages[i];
    Split held = dense_layer * (st.num_layers - st.num_moe_layers);
    held += moe_layer * st.num_moe_layers;
    held += mtp_block * st.num_mtp_layers;
    // GPTModel builds the embedding on the first stage and on the MTP stage
    // (pre_process or mtp_process), the head on the last stage (post_process).
    const bool holds_embedding = st.has_embedding || st.num_mtp_layers > 0;
    if (holds_embedding) {
      held.tp += vocab * h;
      held.tensors += 1;
      if (model.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
        held.replicated += static_cast<double>(model.max_position_embeddings) * h;
        held.tensors += 1;
      }
    }
    if (st.has_output) {
      held.replicated += norm_size(model) * h;  // final layernorm
      held.tensors += norm_size(model);
      // Untied: the output layer. Tied: the head reuses the embedding where this stage
      // holds one, else the stage keeps its own copy of the word embedding.
      if (model.untie_embeddings_and_output_weights || !holds_embedding) held.tp += vocab * h, held.tensors += 1;
    }
    // LoRA: the adapters of the stage's transformer layers (MTP layers keep none) are held on
    // top of the frozen base and are all that trains.
    const Split adapters = lora_dense * (st.num_layers - st.num_moe_layers) + lora_moe * st.num_moe_layers;
    GpuParams g = on_gpu(held + adapters);
    const GpuParams t = lora ? on_gpu(adapters) : g;
    g.trainable_dense = t.dense;
    g.trainable_expert = t.expert;
    g.trainable_dense_tensors = t.dense_tensors;
    g.trainable_expert_tensors = t.expert_tensors;
    out.push_back(g);
  }
  return out;
}

}  // namespace lcm
