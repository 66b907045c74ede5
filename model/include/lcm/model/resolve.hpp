// The one place where the defaults of unset model fields and the per-rank shapes of a
// layout are derived. Megatron's defaults: kv_channels = hidden / heads, num_query_groups
// = heads (MHA), moe_ffn_hidden_size = ffn_hidden_size, and ffn_hidden_size = 4 * hidden.
// The loader writes them into the scenario; scenarios built in code may leave them 0, and
// the model reads them through these functions only. RankShape is what one GPU of a layout
// sees of one micro-batch: tokens after CP and SP, heads after TP, experts after EP, widths
// after ETP. The op schedule (schedule_gen.hpp) and the memory model read it; FLOP and
// parameter counts (no mesh) use the model-level functions.
#pragma once

#include <cstdint>

#include "lcm/model/mesh.hpp"
#include "lcm/model/ops.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

// Model-level dimensions with their defaults.
double head_dim(const ModelSpec& m);      // kv_channels, else hidden / heads
int query_groups(const ModelSpec& m);     // num_query_groups, else heads
int64_t ffn_width(const ModelSpec& m);    // ffn_hidden_size, else 4 * hidden
int64_t expert_ffn(const ModelSpec& m);   // moe_ffn_hidden_size, else ffn_width
// Megatron's MTP layers copy the kind of the model's last layer.
bool mtp_is_moe(const ModelSpec& m);

struct RankShape {
  // The model, defaults resolved (whole-model sizes).
  double hidden = 0;      // h
  double heads = 0;       // a, query heads
  double groups = 0;      // g, key/value heads (query groups)
  double head_dim = 0;    // d_h (GQA / MHA)
  double ffn = 0;         // dense MLP width
  double expert_ffn = 0;  // one routed expert's width
  double shared_ffn = 0;  // shared experts' total width
  double experts = 0;     // E; 0: dense model
  int topk = 0;
  bool moe = false;       // has_moe(model)
  bool mtp_moe = false;   // the MTP layers are MoE layers
  bool gated = false;     // SwiGLU MLPs and experts
  // Multi-latent attention.
  bool mla = false;
  double q_lora_rank = 0, kv_lora_rank = 0, qk_head_dim = 0, qk_pos_emb_head_dim = 0, v_head_dim = 0;

  // The layout.
  int tp = 1, cp = 1, ep = 1, etp = 1;
  bool sp = false;  // sequence parallel over tp > 1 ranks

  // One micro-batch on this rank.
  double micro_batch = 0;  // b
  double seq = 0;          // s, the whole sequence
  // Packed documents (attention_span): each attention kernel runs attn_docs documents of
  // attn_span tokens per sequence; 1 and s without packing.
  double attn_docs = 1;
  double attn_span = 0;
  double seq_rank = 0;     // s / c: this CP rank's part of a sequence
  double tokens = 0;       // T = b·s/c: tokens of this CP rank (full hidden under TP)
  double sp_tokens = 0;    // T/t with SP, else T: tokens between TP regions (and entering MoE)
  int64_t tokens_int = 0;     // T as a whole number of rows (GEMM M)
  int64_t sp_tokens_int = 0;  // its SP shard: tokens_int / t with SP (whole rows)
  double heads_rank = 0;      // a/t
  double kv_heads_rank = 0;   // max(1, g/t): with fewer groups than TP ranks each holds one
  int local_experts = 1;      // max(1, E/ep)
  // Skewed routing (model.moe_routing_skew > 0; expert_load.hpp, routed_load), set only then: the
  // copies a routing group sends per token (k dropless; fewer where a capacity drops them),
  // the busiest EP rank's copies over the mean rank's (1: balanced) and its experts' loads.
  // Padding to capacity makes every expert's input C rows: balanced whatever the skew.
  bool skewed = false;
  double routed_copies = 0;
  double ep_busiest = 1;
  ExpertLoadShares busiest_expert_loads{};
  double expert_ffn_rank = 0;  // expert width on this rank: f_e / etp
  double vocab_rank = 0;       // padded vocabulary / t
};

// Precondition: m = derive_mesh(s) (or a mesh of the same shape).
RankShape resolve(const Scenario& s, const Mesh& m);

}  // namespace lcm
