// Defaults of unset model fields and per-rank shapes (resolve.hpp).
#include "lcm/model/resolve.hpp"

#include <algorithm>
#include <cassert>

#include "lcm/model/capacity.hpp"
#include "lcm/model/expert_load.hpp"

namespace lcm {

double head_dim(const ModelSpec& m) {
  if (m.kv_channels > 0) return static_cast<double>(m.kv_channels);
  assert(m.num_attention_heads > 0);
  return static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

int query_groups(const ModelSpec& m) { return m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads; }

int64_t ffn_width(const ModelSpec& m) { return m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size; }

int64_t expert_ffn(const ModelSpec& m) { return m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : ffn_width(m); }

bool mtp_is_moe(const ModelSpec& m) { return m.num_layers > 0 && is_moe_layer(m, m.num_layers - 1); }

RankShape resolve(const Scenario& s, const Mesh& m) {
  const ModelSpec& md = s.model;
  RankShape r;
  r.hidden = static_cast<double>(md.hidden_size);
  r.heads = md.num_attention_heads;
  r.groups = query_groups(md);
  r.head_dim = head_dim(md);
  r.ffn = static_cast<double>(ffn_width(md));
  r.expert_ffn = static_cast<double>(expert_ffn(md));
  r.shared_ffn = static_cast<double>(md.moe_shared_expert_intermediate_size);
  r.experts = md.num_experts;
  r.topk = md.moe_router_topk;
  r.moe = has_moe(md);
  r.mtp_moe = mtp_is_moe(md);
  r.gated = md.swiglu;
  r.mla = md.multi_latent_attention;
  r.q_lora_rank = static_cast<double>(md.q_lora_rank);
  r.kv_lora_rank = static_cast<double>(md.kv_lora_rank);
  r.qk_head_dim = static_cast<double>(md.qk_head_dim);
  r.qk_pos_emb_head_dim = static_cast<double>(md.qk_pos_emb_head_dim);
  r.v_head_dim = static_cast<double>(md.v_head_dim);

  r.tp = m.tp;
  r.cp = m.cp;
  r.ep = m.ep;
  r.etp = m.etp;
  r.sp = m.sp && m.tp > 1;

  r.micro_batch = s.training.micro_batch_size;
  r.seq = static_cast<double>(s.training.seq_length);
  r.seq_rank = r.seq / m.cp;
  const AttentionSpan span = attention_span(s.training);
  r.attn_docs = static_cast<double>(span.docs);
  r.attn_span = static_cast<double>(span.span);
  r.tokens = r.micro_batch * r.seq / m.cp;
  r.sp_tokens = r.tokens / (m.sp ? m.tp : 1);
  r.tokens_int = static_cast<int64_t>(r.tokens);
  r.sp_tokens_int = m.sp ? r.tokens_int / m.tp : r.tokens_int;
  r.heads_rank = r.heads / m.tp;
  r.kv_heads_rank = std::max(1.0, r.groups / m.tp);
  r.local_experts = std::max(1, md.num_experts / std::max(1, m.ep));
  r.expert_ffn_rank = r.expert_ffn / m.etp;
  if (md.moe_routing_skew > 0 && r.moe && !(md.moe_expert_capacity_factor > 0 && md.moe_pad_expert_input_to_capacity)) {
    // C per expert per routing group of sp_tokens tokens, where the schedule applies one.
    double cap = 0;
    if (schedule_applies_capacity(md))
      cap = static_cast<double>(capacity_for_assignments(r.sp_tokens * r.topk, md.num_experts,
                                                         md.moe_expert_capacity_factor)) /
            r.sp_tokens;
    const RoutedLoad l = routed_load(md.num_experts, r.topk, md.moe_routing_skew, std::max(1, m.ep), cap);
    r.skewed = true;
    r.routed_copies = l.copies_per_token;
    r.ep_busiest = l.busiest_factor;
    r.busiest_expert_loads = expert_load_shares(l.busiest_loads);
  }
  r.vocab_rank = static_cast<double>(m.padded_vocab) / m.tp;
  return r;
}

}  // namespace lcm
