// Megatron-LM flags that change cost but that lcm does not model: accepted with a note, or
// rejected. See megatron_flags.hpp for how flags are classified.
#include "megatron_flags.hpp"

#include <algorithm>

namespace lcm::io {

namespace {

constexpr FlagRole kNote = FlagRole::kNoted, kReject = FlagRole::kUnsupported;

constexpr FlagRule kRules[] = {
    // ---- accepted, reported as not modelled -----------------------------------------------
    {"attention-output-gate", kNote, "",
     "the attention output gate (an extra h x heads*kv_channels weight per layer) is not counted"},
    {"num-distributed-optimizer-instances", kNote, "1",
     "optimizer sharding over partial data-parallel groups is modelled as one instance"},
    {"outer-dp-sharding-strategy", kNote, "no_shard", "hybrid (outer) data-parallel sharding is not modelled"},
    {"first-last-layers-bf16", kNote, "", "BF16 first/last layers in an FP8 run are modelled at FP8 speed"},
    {"num-layers-at-start-in-bf16", kNote, "", "BF16 first layers in an FP8 run are modelled at FP8 speed"},
    {"num-layers-at-end-in-bf16", kNote, "", "BF16 last layers in an FP8 run are modelled at FP8 speed"},
    {"no-fp8-wgrad", kNote, "", "BF16 weight-gradient GEMMs in an FP8 run are modelled at FP8 speed"},
    {"disable-fp8-wgrad", kNote, "", "BF16 weight-gradient GEMMs in an FP8 run are modelled at FP8 speed"},
    {"fine-grained-activation-offloading", kNote, "", "activation offloading to host memory is not modelled"},
    {"offload-modules", kNote, "", "activation offloading to host memory is not modelled"},
    {"cpu-offloading-num-layers", kNote, "0", "activation/weight offloading to host memory is not modelled"},
    {"activation-offload-fraction", kNote, "", "activation offloading to host memory is not modelled"},
    {"optimizer-cpu-offload", kNote, "", "optimizer state offloading to host memory is not modelled"},
    {"optimizer-offload-fraction", kNote, "", "optimizer state offloading to host memory is not modelled"},
    {"delay-wgrad-compute", kNote, "", "delayed weight-gradient computation (overlap) is not modelled"},
    {"optimizer", kNote, "adam", "optimizer state is modelled as Adam (two moments)"},
    {"microbatch-group-size-per-virtual-pipeline-stage", kNote, "",
     "in-flight micro-batches assume the default group size (= pipeline size)"},
    {"fp32-residual-connection", kNote, "", "an FP32 residual stream is modelled as 16-bit"},
    {"distribute-saved-activations", kNote, "", "distributing saved activations over TP ranks is not modelled"},
    {"mlp-chunks-for-training", kNote, "1", "chunked MLP computation is not modelled"},
    {"freeze-all-layers", kNote, "", "frozen layers are modelled as trained (gradients, optimizer state, backward)"},
    {"freeze-base-for-mtp", kNote, "", "a frozen base model is modelled as trained"},
    {"mtp-use-repeated-layer", kNote, "", "MTP layers sharing one set of weights are counted separately"},
    {"kitchen-config-file", kNote, "", "custom quantization recipes are modelled as the base precision"},
    {"kitchen-recipe-number", kNote, "", "custom quantization recipes are modelled as the base precision"},
    {"te-precision-config-file", kNote, "", "custom precision recipes are modelled as the base precision"},
    {"torch-fsdp2-no-reshard-after-forward", kNote, "", "FSDP2 keeping gathered weights after forward is not modelled"},
    {"hybrid-context-parallel", kNote, "", "hybrid (variable-length) context parallelism is modelled as plain CP"},
    {"spec", kNote, "", "a custom layer spec is modelled as the standard GPT layer"},
    {"moe-expert-rank-capacity-factor", kNote, "", "per-rank token budgets (hybridep/ncclep) are not modelled"},
    {"moe-paged-stash", kNote, "", "paged MoE activation stashing is not modelled"},
    {"moe-router-force-biased", kNote, "",
     "forced-biased routing imbalance is not modelled (balanced routing assumed)"},
    // ---- rejected: lcm cannot represent these models ----------------------------------------
    {"hybrid-layer-pattern", kReject, "", "hybrid Mamba/attention models are not modelled"},
    {"hybrid-override-pattern", kReject, "", "hybrid Mamba/attention models are not modelled"},
    {"is-hybrid-model", kReject, "", "hybrid Mamba/attention models are not modelled"},
    {"experimental-attention-variant", kReject, "",
     "experimental attention variants (gated delta net, DSA) are not modelled"},
    {"linear-attention-freq", kReject, "", "linear-attention layers are not modelled"},
    {"heterogeneous-layers-config-path", kReject, "", "heterogeneous per-layer configurations are not modelled"},
    {"heterogeneous-layers-config-encoded-json", kReject, "",
     "heterogeneous per-layer configurations are not modelled"},
    {"moe-latent-size", kReject, "", "latent MoE projections are not modelled"},
    {"enable-mhc-connections", kReject, "", "hyper-connections (multiple residual streams) are not modelled"},
    {"tensor-parallel-num-weight-shards", kReject, "1",
     "GTP weight sharding beyond tensor parallelism is not modelled"},
    {"expert-tensor-parallel-num-weight-shards", kReject, "1", "GTP weight sharding of experts is not modelled"},
    {"fp4-format", kReject, "", "FP4 training needs Blackwell; lcm models bf16 and fp8 on H100/H200"},
    {"yaml-cfg", kReject, "", "Megatron's --yaml-cfg files are not read; pass the flags or a model_config.yaml"},
    {"decoder-num-layers", kReject, "", "encoder-decoder (T5) models are not modelled"},
    {"batch-size", kReject, "", "--batch-size argument is no longer valid, use --micro-batch-size instead"},
    {"warmup", kReject, "", "--warmup argument is no longer valid, use --lr-warmup-fraction instead"},
    {"model-parallel-size", kReject, "",
     "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead"},
    {"checkpoint-activations", kReject, "",
     "--checkpoint-activations is no longer valid, use --recompute-activations, or, for more control, "
     "--recompute-granularity and --recompute-method"},
};

}  // namespace

std::span<const FlagRule> flag_rules() { return kRules; }

const FlagRule* find_flag_rule(std::string_view name) {
  for (const FlagRule& r : kRules)
    if (r.name == name) return &r;
  return nullptr;
}

bool is_neutral(const FlagRule& rule, std::string_view value) {
  std::string_view rest = rule.neutral;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return false;
}

const MegatronFlagName* find_megatron_flag(std::string_view name) {
  const auto names = megatron_flag_names();
  const auto it = std::lower_bound(names.begin(), names.end(), name,
                                   [](const MegatronFlagName& f, std::string_view n) { return f.name < n; });
  return it != names.end() && it->name == name ? &*it : nullptr;
}

}  // namespace lcm::io
