// Model specs of published architectures, built in C++ for tests that must not depend
// on the YAML loader. Values: validation/published/model_architectures.csv.
#pragma once

#include <cstdint>

#include "lcm/model/specs.hpp"

namespace lcm::testing {

inline ModelSpec llama_like(int layers, int64_t h, int64_t ffn, int heads, int groups) {
  ModelSpec m;
  m.name = "llama-like";
  m.num_layers = layers;
  m.hidden_size = h;
  m.ffn_hidden_size = ffn;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = 128;
  m.vocab_size = 128256;
  m.untie_embeddings_and_output_weights = true;
  m.swiglu = true;
  m.add_bias_linear = false;
  m.normalization = Normalization::kRMSNorm;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.rotary_base = 500000;
  return m;
}

inline ModelSpec llama3_8b() { return llama_like(32, 4096, 14336, 32, 8); }
inline ModelSpec llama31_70b() { return llama_like(80, 8192, 28672, 64, 8); }

inline ModelSpec mixtral(int layers, int64_t h, int64_t ffn, int heads) {
  ModelSpec m = llama_like(layers, h, ffn, heads, 8);
  m.vocab_size = 32000;
  m.rotary_base = 1e6;
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = ffn;
  return m;
}
inline ModelSpec mixtral_8x7b() { return mixtral(32, 4096, 14336, 32); }
inline ModelSpec mixtral_8x22b() { return mixtral(56, 6144, 16384, 48); }

inline ModelSpec qwen3_moe(int layers, int64_t h, int heads, int64_t expert_ffn) {
  ModelSpec m = llama_like(layers, h, 0, heads, 4);
  m.vocab_size = 151936;
  m.qk_layernorm = true;
  m.num_experts = 128;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = expert_ffn;
  return m;
}
inline ModelSpec qwen3_30b_a3b() { return qwen3_moe(48, 2048, 32, 768); }
inline ModelSpec qwen3_235b_a22b() { return qwen3_moe(94, 4096, 64, 1536); }

// DeepSeek-V3: MLA, 256 routed experts top-8 + 1 shared, first 3 layers dense ([0]*3+[1]*58), MTP 1.
inline ModelSpec deepseek_v3() {
  ModelSpec m = llama_like(61, 7168, 18432, 128, 128);
  m.vocab_size = 129280;
  m.qk_layernorm = true;
  m.multi_latent_attention = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m.num_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_shared_expert_intermediate_size = 2048;
  m.moe_router_enable_expert_bias = true;  // a buffer, not a parameter
  m.moe_layer_pattern.assign(61, 1);
  for (int i = 0; i < 3; ++i) m.moe_layer_pattern[static_cast<size_t>(i)] = 0;
  m.mtp_num_layers = 1;
  return m;
}

}  // namespace lcm::testing
