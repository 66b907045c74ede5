// Model specs of published architectures, built in C++ for tests that must not depend
// on the YAML loader. Values: shared/reference/validation/model_architectures.csv.
#pragma once

#include "lcm/model/specs.hpp"

namespace lcm::testing {

inline ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
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

inline ModelSpec mixtral_8x7b() {
  ModelSpec m = llama3_8b();
  m.name = "mixtral-8x7b";
  m.vocab_size = 32000;
  m.rotary_base = 1e6;
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 14336;
  return m;
}

}  // namespace lcm::testing
