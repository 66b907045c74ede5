// TrainPlan from a scenario (runner.hpp): load with the overrides, scale the layer count,
// check the layout against the GPUs at hand and the features against what the runner
// implements. Shapes come from lcm::resolve and the mesh, never re-derived here.
#include <cmath>
#include <string>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/runner.hpp"
#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::exec::train {

namespace {

// Megatron's pattern string for a 0/1 layer list: "([0]*3+[1]*2)".
std::string pattern_text(const std::vector<uint8_t>& p) {
  std::string out = "(";
  for (size_t i = 0; i < p.size();) {
    size_t j = i;
    while (j < p.size() && p[j] == p[i]) ++j;
    out += (i ? "+[" : "[") + std::to_string(static_cast<int>(p[i])) + "]*" + std::to_string(j - i);
    i = j;
  }
  return out + ")";
}

Scenario load(const std::string& path, const std::vector<std::pair<std::string, std::string>>& sets) {
  io::LoadOptions lo;
  for (const auto& [k, v] : sets) lo.overrides.push_back({k, v});
  auto r = io::load_scenario(path, lo);
  if (!r) throw UsageError("train: " + r.error().str());
  return std::move(r).value();
}

[[noreturn]] void refuse(const std::string& what) { throw UsageError("train: " + what); }

}  // namespace

TrainPlan plan_training(const TrainOptions& o, int gpus) {
  TrainPlan p;
  p.gpus = gpus;
  p.overrides = o.sets;
  // The runner's loss is a fused cross-entropy that writes the bf16 gradient over the logits in
  // the forward, Transformer Engine's kind: the scenario as run says so.
  p.overrides.emplace_back("training.cross_entropy_loss_fusion", "true");
  p.overrides.emplace_back("training.cross_entropy_fusion_impl", "te");
  auto found = io::find_scenario(o.scenario);
  if (!found) throw UsageError("train: " + found.error().str());
  p.scenario_path = found.value();
  Scenario s = load(p.scenario_path, p.overrides);
  p.layers_from = p.layers_to = s.model.num_layers;
  if (o.layers > 0 && o.layers != s.model.num_layers) {
    if (o.layers > s.model.num_layers)
      refuse("--layers " + std::to_string(o.layers) + " exceeds the scenario's " + std::to_string(s.model.num_layers) +
             " layers");
    p.overrides.emplace_back("model.num_layers", std::to_string(o.layers));
    if (!s.model.moe_layer_pattern.empty()) {
      std::vector<uint8_t> head(s.model.moe_layer_pattern.begin(), s.model.moe_layer_pattern.begin() + o.layers);
      p.overrides.emplace_back("model.moe_layer_freq", pattern_text(head));
    }
    s = load(p.scenario_path, p.overrides);
    p.layers_to = o.layers;
  }
  const ModelSpec& md = s.model;
  const ParallelSpec& par = s.parallel;

  // The layout: its groups (sizes of one today) must multiply to the GPUs at hand.
  if (s.num_gpus != gpus || par.tensor_model_parallel_size != 1 || par.context_parallel_size != 1 ||
      par.pipeline_model_parallel_size != 1 || par.expert_model_parallel_size != 1 ||
      (has_moe(md) && par.expert_tensor_parallel_size > 1)) {
    std::string fix = "--set hardware.num_gpus=" + std::to_string(gpus);
    if (par.tensor_model_parallel_size != 1) fix += " --set parallel.tensor_model_parallel_size=1";
    if (par.sequence_parallel) fix += " --set parallel.sequence_parallel=false";
    if (par.context_parallel_size != 1) fix += " --set parallel.context_parallel_size=1";
    if (par.pipeline_model_parallel_size != 1) fix += " --set parallel.pipeline_model_parallel_size=1";
    if (par.num_layers_per_virtual_pipeline_stage != 0) fix += " --set parallel.num_layers_per_virtual_pipeline_stage=0";
    if (par.expert_model_parallel_size != 1) fix += " --set parallel.expert_model_parallel_size=1";
    if (has_moe(md) && par.expert_tensor_parallel_size > 1) fix += " --set parallel.expert_tensor_parallel_size=1";
    refuse("the layout needs " + std::to_string(s.num_gpus) + " GPUs (tp " + std::to_string(par.tensor_model_parallel_size) +
           ", cp " + std::to_string(par.context_parallel_size) + ", pp " + std::to_string(par.pipeline_model_parallel_size) +
           ", ep " + std::to_string(par.expert_model_parallel_size) + "); " + std::to_string(gpus) +
           " at hand and groups of size 1 only so far: " + fix);
  }
  const auto problems = validate_scenario(s);
  if (!problems.empty()) refuse(problems.front().key + ": " + problems.front().message);
  p.mesh = derive_mesh(s);
  p.rank = resolve(s, p.mesh);
  if (p.mesh.world != gpus) refuse("the mesh spans " + std::to_string(p.mesh.world) + " GPUs, " + std::to_string(gpus) + " at hand");

  // Features the runner implements; anything else is refused by name.
  if (md.normalization != Normalization::kRMSNorm)
    refuse("LayerNorm is not implemented by the runner (RMSNorm only): --set model.normalization=RMSNorm");
  if (md.position_embedding_type != PositionEmbedding::kRope)
    refuse("the runner implements rotary position embeddings only: --set model.position_embedding_type=rope");
  if (md.add_bias_linear || md.add_qkv_bias)
    refuse("linear biases are not implemented by the runner: --set model.add_bias_linear=false --set model.add_qkv_bias=false");
  if (!md.swiglu) refuse("the runner implements SwiGLU MLPs only: --set model.swiglu=true");
  if (md.mtp_num_layers > 0) refuse("multi-token prediction is not implemented by the runner: --set model.mtp_num_layers=0");
  if (md.hidden_dropout > 0 || md.attention_dropout > 0)
    refuse("dropout is not implemented by the runner: --set model.hidden_dropout=0 --set model.attention_dropout=0");
  if (s.training.precision != Precision::kBf16) refuse("the runner trains in bf16 only: --set training.precision=bf16");
  if (s.training.peft != Peft::kNone)
    refuse("LoRA (frozen base, adapters) is not implemented by the runner: --set training.peft=none "
           "--set training.lora_rank=0");
  if (s.training.document_length > 0)
    refuse("packed documents (per-document attention) are not implemented by the runner (one document per sequence): "
           "--set training.document_length=0");
  if (md.moe_routing_skew > 0)
    refuse("model.moe_routing_skew is the routing the estimate assumes; the runner routes with its own router, so a "
           "comparison would not be like for like: --set model.moe_routing_skew=balanced");
  if (md.window_size > 0)
    refuse("sliding-window attention is not implemented by the runner (full causal attention only): --set "
           "model.window_size=null --set model.window_attn_skip_freq=null");
  if (s.training.attention_backend != AttentionBackend::kFused)
    refuse("the runner uses fused (cuDNN) attention only: --set training.attention_backend=fused");
  if (!s.training.grad_reduce_in_fp32 || s.training.main_params_dtype != DType::kFp32 ||
      s.training.store_param_remainders || s.training.exp_avg_dtype != DType::kFp32 ||
      s.training.exp_avg_sq_dtype != DType::kFp32)
    refuse(
        "the runner keeps fp32 main grads, whole fp32 master weights and Adam moments only "
        "(training.grad_reduce_in_fp32, main_params_dtype, store_param_remainders, exp_avg_dtype, exp_avg_sq_dtype)");
  try {
    p.rope = rope_params(md.rotary_base, md.rope_scaling);
  } catch (const ExecError& e) {
    refuse(std::string("RoPE scaling: ") + e.what());
  }

  const RankShape& r = p.rank;
  p.b = s.training.micro_batch_size;
  p.s = s.training.seq_length;
  p.tokens = r.tokens_int;
  p.hidden = md.hidden_size;
  p.heads = static_cast<int64_t>(r.heads_rank);
  p.groups = static_cast<int64_t>(r.kv_heads_rank);
  p.head_dim = static_cast<int64_t>(r.head_dim);
  p.qk_norm = md.qk_layernorm;
  p.mla = md.multi_latent_attention;
  if (p.mla) {
    p.q_lora = md.q_lora_rank;
    p.kv_lora = md.kv_lora_rank;
    p.qk_nope = md.qk_head_dim;
    p.qk_rope = md.qk_pos_emb_head_dim;
    p.v_dim = md.v_head_dim;
    p.head_dim = p.qk_nope + p.qk_rope;
    p.groups = p.heads;  // every head has its own K and V
    if (p.kv_lora <= 0 || p.qk_nope <= 0 || p.qk_rope <= 0 || p.qk_rope % 2 != 0 || p.v_dim <= 0)
      refuse("MLA needs kv_lora_rank, qk_head_dim, v_head_dim > 0 and an even qk_pos_emb_head_dim > 0");
    if (p.v_dim % 8 != 0 || p.v_dim > 256)
      refuse("v_head_dim " + std::to_string(p.v_dim) + ": cuDNN fused attention needs a multiple of 8 up to 256");
    p.rope_dim = p.qk_rope;
  } else {
    if (static_cast<double>(p.head_dim) != r.head_dim)
      refuse("head dim " + std::to_string(r.head_dim) + ": cuDNN fused attention needs a multiple of 8 up to 256");
    p.v_dim = p.head_dim;
    p.rope_dim = p.head_dim;
  }
  if (p.head_dim % 8 != 0 || p.head_dim > 256)
    refuse("head dim " + std::to_string(p.head_dim) + ": cuDNN fused attention needs a multiple of 8 up to 256");
  p.ffn = static_cast<int64_t>(r.ffn);
  p.vocab = md.vocab_size;
  p.padded_vocab = p.mesh.padded_vocab;
  p.micro_batches = p.mesh.num_micro_batches;
  p.num_layers = md.num_layers;
  p.tied_embeddings = !md.untie_embeddings_and_output_weights;
  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  // MLA under YaRN: Megatron's MLASelfAttention scales the softmax by mscale(factor,
  // mscale_all_dim)^2 (the runner's cos/sin carry the ratio of the two mscales, rope.cpp).
  if (p.mla && p.rope.type == 3)
    p.softmax_scale *= static_cast<float>(std::pow(yarn_mscale(p.rope.factor, p.rope.mscale_all_dim), 2));
  p.expert_ffn = static_cast<int64_t>(r.expert_ffn_rank);
  p.shared_ffn = md.moe_shared_expert_intermediate_size;
  p.experts = md.num_experts;
  p.topk = md.moe_router_topk;
  p.moe_aux_loss_coeff = o.moe_aux_loss_coeff;
  p.deterministic_attention = o.deterministic;
  p.moe_z_loss_coeff = o.moe_z_loss_coeff;

  switch (par.recompute_granularity) {
    case RecomputeGranularity::kNone: p.recompute = RecomputeKind::kNone; break;
    case RecomputeGranularity::kSelective: p.recompute = RecomputeKind::kSelective; break;
    case RecomputeGranularity::kFull: p.recompute = RecomputeKind::kFull; break;
  }
  if (p.recompute == RecomputeKind::kSelective) {
    p.recompute_modules = par.recompute_modules;
    const uint32_t kSupported =
        kRecomputeCoreAttn | kRecomputeLayernorm | kRecomputeMlp | (p.mla ? kRecomputeMlaUpProj : 0u);
    constexpr uint32_t kMoeWhole = kRecomputeMoe | kRecomputeMoeAct | kRecomputeSharedExperts;
    if ((p.recompute_modules & ~(kSupported | kMoeWhole)) != 0)
      refuse("selective recompute of mla_up_proj applies to MLA models only");
    if (has_moe(md) && (p.recompute_modules & kMoeWhole) != 0)
      refuse("selective recompute of moe / moe_act / shared_experts is not implemented by the runner: "
             "--set parallel.recompute_modules=core_attn (or full recompute)");
  }
  for (int l = 0; l < p.num_layers; ++l) {
    p.moe_layer.push_back(is_moe_layer(md, l) ? 1 : 0);
    const bool full = p.recompute == RecomputeKind::kFull &&
                      (par.recompute_method == RecomputeMethod::kUniform || l < par.recompute_num_layers);
    p.recompute_layer.push_back(full ? 1 : 0);
  }
  p.scenario = std::move(s);
  return p;
}

}  // namespace lcm::exec::train
