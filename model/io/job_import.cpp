// Megatron-Bridge YAML and TorchTitan TOML jobs -> scenario (job_import.hpp).
#include "lcm/model/io/job_import.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/mesh.hpp"
#include "megatron_flags.hpp"
#include "toml_read.hpp"
#include "yaml_read.hpp"

namespace lcm::io {

// ---- Megatron-Bridge -------------------------------------------------------------------

namespace {

// Bridge fields whose Megatron flag is not the mechanical `_` -> `-` spelling.
struct Renamed {
  std::string_view field;  // section.key
  std::string_view flag;
};
constexpr Renamed kRenamed[] = {
    {"model.num_moe_experts", "num-experts"},
    {"model.gated_linear_unit", "swiglu"},
    {"model.virtual_pipeline_model_parallel_size", "num-virtual-stages-per-pipeline-rank"},
    {"model.num_layers_in_first_pipeline_stage", "decoder-first-pipeline-num-layers"},
    {"model.num_layers_in_last_pipeline_stage", "decoder-last-pipeline-num-layers"},
    {"model.rope_scaling", "use-rope-scaling"},
    {"model.yarn_rotary_scaling_factor", "rotary-scaling-factor"},
    {"model.seq_len_interpolation_factor", "rotary-seq-len-interpolation-factor"},
    {"model.fp8", "fp8-format"},
};
constexpr std::string_view kSections[] = {"model", "train", "dataset", "ddp", "optimizer"};

std::string scalar_text(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  std::string out;
  for (const auto& e : v) out += (out.empty() ? "" : " ") + e.Scalar();
  return out;
}

}  // namespace

Result<std::vector<MegatronFlag>> parse_megatron_bridge_yaml(const std::string& yaml_text,
                                                             const std::string& display_name,
                                                             std::vector<std::string>* unread) {
  auto doc = parse_yaml(yaml_text, display_name);
  if (!doc) return doc.error();
  const YAML::Node& root = doc.value();
  const Loc top{display_name, 1, 1};
  if (!root.IsMap())
    return error_at(top, "", "expected a Megatron-Bridge ConfigContainer override (model:, train:, ...)");
  std::vector<MegatronFlag> flags;
  auto add = [&](const Loc& loc, std::string flag, std::string value) {
    flags.push_back(MegatronFlag{std::move(flag), std::move(value), loc.file, loc.line, loc.column});
  };
  std::optional<std::string> model_seq, dataset_seq;
  bool have_model = false;
  try {
    for (const auto& sec : root) {
      const std::string section = sec.first.Scalar();
      const Loc sloc = loc_of(sec.first.Mark(), display_name);
      if (section == "mixed_precision") {
        const std::string mp = sec.second.IsScalar() ? sec.second.Scalar() : "";
        if (mp.rfind("bf16", 0) == 0) add(sloc, "bf16", "");
        else if (mp.rfind("fp16", 0) == 0) add(sloc, "fp16", "");
        else
          return error_at(sloc, section,
                          fmt::format("expected a bf16_* or fp16_* recipe name, got {}", describe(sec.second)));
        // Megatron-Bridge's FP8 recipe names carry the scaling (bridge_fp8_recipe).
        if (mp.find("fp8") != std::string::npos) add(sloc, "fp8-format", "hybrid");
        if (const auto recipe = bridge_fp8_recipe(mp)) add(sloc, "fp8-recipe", std::string(to_string(*recipe)));
        continue;
      }
      // Megatron-Bridge's PEFT (LoRA): lcm models it, but not through Megatron-LM flags; a
      // silent full-training import would be wrong.
      if (section == "peft" && !sec.second.IsNull())
        return error_at(sloc, section,
                        "peft (LoRA) is not imported: set training.peft: lora, training.lora_rank and "
                        "training.lora_target_modules in the imported scenario");
      if (std::find(std::begin(kSections), std::end(kSections), section) == std::end(kSections)) {
        if (unread) unread->push_back(section);  // checkpoint, scheduler, logger, ...: no cost
        continue;
      }
      if (!sec.second.IsMap()) return error_at(sloc, section, "expected a mapping, got " + describe(sec.second));
      have_model = have_model || section == "model";
      for (const auto& kv : sec.second) {
        const std::string key = kv.first.Scalar();
        const std::string dotted = section + "." + key;
        const Loc loc = loc_of(kv.first.Mark(), display_name);
        const YAML::Node& v = kv.second;
        if (v.IsMap()) {
          if (unread) unread->push_back(dotted);
          continue;
        }
        if (v.IsNull()) continue;  // null: the field's default
        const std::string value = scalar_text(v);
        // Fields whose meaning is inverted or split over two flags.
        if (dotted == "model.seq_length") model_seq = value;
        if (dotted == "dataset.seq_length") {
          dataset_seq = value;
          continue;
        }
        if (dotted == "model.share_embeddings_and_output_weights") {
          if (value == "false") add(loc, "untie-embeddings-and-output-weights", "");
          continue;
        }
        if (dotted == "model.add_bias_linear") {
          if (value == "false") add(loc, "disable-bias-linear", "");
          continue;
        }
        // Megatron-LM has no flag for it: its precision-aware optimizer stores eligible fp32 master
        // weights as 16-bit remainders (OptimizerConfig's default), which the import then assumes.
        if (dotted == "optimizer.store_param_remainders") {
          add(loc, std::string(kBridgeFieldPrefix) + dotted, value);
          continue;
        }
        if (dotted == "ddp.grad_reduce_in_fp32") {
          if (value == "false") add(loc, "grad-reduce-in-bf16", "");
          continue;
        }
        if (dotted == "model.num_query_groups") {
          const YAML::Node heads = sec.second["num_attention_heads"];
          if (!heads || !heads.IsScalar() || heads.Scalar() != value) add(loc, "group-query-attention", "");
          add(loc, "num-query-groups", value);
          continue;
        }
        if (dotted == "model.original_max_position_embeddings") {  // MLA's yarn: Megatron-LM fixes it
          if (value != "4096")
            return error_at(loc, dotted, "Megatron-LM's multi-latent attention fixes the yarn original length at 4096");
          continue;
        }
        if (dotted == "model.window_size" && v.IsSequence()) {  // TransformerConfig's (left, right) pair
          std::string pair;
          for (const auto& e : v) pair += (pair.empty() ? "" : ",") + e.Scalar();
          add(loc, "window-size", pair);
          continue;
        }
        if (dotted == "model.moe_layer_freq" && v.IsSequence()) {
          std::string list;
          for (const auto& e : v) list += (list.empty() ? "" : ",") + e.Scalar();
          add(loc, "moe-layer-freq", "[" + list + "]");
          continue;
        }
        std::string flag;
        for (const Renamed& r : kRenamed)
          if (r.field == dotted) flag = r.flag;
        if (flag.empty()) {
          flag = key;
          std::replace(flag.begin(), flag.end(), '_', '-');
        }
        const MegatronFlagName* known = find_megatron_flag(flag);
        if (!known) {  // a TransformerConfig field without a Megatron-LM flag (activation_func, fusions, ...)
          if (unread) unread->push_back(dotted);
          continue;
        }
        if (!known->takes_value) {
          if (value == "true") add(loc, flag, "");
          else if (value != "false")
            return error_at(loc, dotted, fmt::format("expected true or false, got '{}'", value));
          continue;
        }
        add(loc, flag, value);
      }
    }
  } catch (const YAML::Exception& e) {
    return error_at(top, "", std::string("cannot read: ") + e.what());
  }
  if (!have_model) return error_at(top, "model", "no model: section (a ConfigContainer override has one)");
  if (model_seq && dataset_seq && *model_seq != *dataset_seq)
    return error_at(top, "dataset.seq_length",
                    fmt::format("dataset.seq_length {} differs from model.seq_length {}", *dataset_seq, *model_seq));
  if (!model_seq && dataset_seq) add(top, "seq-length", *dataset_seq);
  return flags;
}

// ---- TorchTitan ------------------------------------------------------------------------

namespace {

struct TitanFail {
  ConfigError error;
};

class TitanReader {
 public:
  TitanReader(const TomlDoc& doc, std::string file) : doc_(doc), file_(std::move(file)) {}

  const TomlValue* get(const std::string& table, const std::string& key) {
    const auto t = doc_.tables.find(table);
    if (t == doc_.tables.end()) return nullptr;
    const auto k = t->second.find(key);
    if (k == t->second.end()) return nullptr;
    read_.insert(table + "." + key);
    return &k->second;
  }
  [[noreturn]] void fail(const std::string& table, const std::string& key, const std::string& message) {
    const auto t = doc_.tables.find(table);
    int line = 0;
    if (t != doc_.tables.end())
      if (const auto k = t->second.find(key); k != t->second.end()) line = k->second.line;
    throw TitanFail{ConfigError{file_, line, 0, table + "." + key, message}};
  }
  int64_t integer(const std::string& table, const std::string& key, int64_t fallback, int64_t min = 1) {
    const TomlValue* v = get(table, key);
    if (!v) return fallback;
    if (v->kind != TomlValue::Kind::kInt) fail(table, key, "expected an integer");
    if (v->i < min || v->i > INT32_MAX) fail(table, key, fmt::format("expected an integer >= {}, got {}", min, v->i));
    return v->i;
  }
  std::string string(const std::string& table, const std::string& key, const std::string& fallback) {
    const TomlValue* v = get(table, key);
    if (!v) return fallback;
    if (v->kind != TomlValue::Kind::kString) fail(table, key, "expected a string");
    return v->str;
  }
  bool boolean(const std::string& table, const std::string& key, bool fallback) {
    const TomlValue* v = get(table, key);
    if (!v) return fallback;
    if (v->kind != TomlValue::Kind::kBool) fail(table, key, "expected true or false");
    return v->b;
  }
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [t, keys] : doc_.tables)
      for (const auto& [k, v] : keys)
        if (!read_.count(t + "." + k)) out.push_back(t.empty() ? k : t + "." + k);
    return out;
  }

 private:
  const TomlDoc& doc_;
  std::string file_;
  std::set<std::string> read_;
};

}  // namespace

Result<MegatronImportReport> import_torchtitan(const std::string& toml_text, const std::string& display_name,
                                               const ModelSpec& model, int num_gpus, const HardwareSpec& hardware,
                                               const std::string& name) {
  auto parsed = parse_toml_subset(toml_text, display_name);
  if (!parsed) return parsed.error();
  TitanReader r(parsed.value(), display_name);
  MegatronImportReport out;
  Scenario& s = out.scenario;
  s.name = name;
  s.model = model;
  s.hardware = hardware;
  s.num_gpus = num_gpus;
  TrainingSpec& t = s.training;
  ParallelSpec& p = s.parallel;
  try {
    // [model]: the architecture is the --model scenario's; converters say FP8.
    if (const TomlValue* c = r.get("model", "converters")) {
      if (c->kind != TomlValue::Kind::kArray) r.fail("model", "converters", "expected an array of strings");
      for (const TomlValue& e : c->items) {
        if (e.str == "float8") t.precision = Precision::kFp8;
        else r.fail("model", "converters", fmt::format("converter '{}' is not modelled (lcm reads float8)", e.str));
      }
    }
    (void)r.get("model", "name"), (void)r.get("model", "flavor");
    t.seq_length = r.integer("training", "seq_len", 2048);  // TorchTitan's default
    if (r.string("training", "mixed_precision_param", "bfloat16") != "bfloat16")
      r.fail("training", "mixed_precision_param", "lcm models bfloat16 (or FP8) compute; float32 is not modelled");
    if (r.string("training", "mixed_precision_reduce", "float32") != "float32")
      r.fail("training", "mixed_precision_reduce", "expected float32 (TorchTitan's only choice)");
    t.grad_reduce_in_fp32 = true;

    const int tp = static_cast<int>(r.integer("parallelism", "tensor_parallel_degree", 1));
    const int cp = static_cast<int>(r.integer("parallelism", "context_parallel_degree", 1));
    const int pp = static_cast<int>(r.integer("parallelism", "pipeline_parallel_degree", 1));
    const int replicate = static_cast<int>(r.integer("parallelism", "data_parallel_replicate_degree", 1));
    int shard = static_cast<int>(r.integer("parallelism", "data_parallel_shard_degree", -1, -1));
    if (shard == 0) r.fail("parallelism", "data_parallel_shard_degree", "expected -1 (the rest) or a degree >= 1");
    const int64_t model_ranks = int64_t{replicate} * cp * tp * pp;
    if (shard == -1) {
      if (num_gpus % model_ranks != 0)
        r.fail("parallelism", "data_parallel_shard_degree",
               fmt::format("-1 leaves {} GPUs / (replicate x cp x tp x pp = {}), not whole", num_gpus, model_ranks));
      shard = static_cast<int>(num_gpus / model_ranks);
    }
    if (model_ranks * shard != num_gpus)
      r.fail("parallelism", "data_parallel_shard_degree",
             fmt::format("dp_replicate x dp_shard x cp x tp x pp = {} but the job has {} GPUs (--gpus)",
                         model_ranks * shard, num_gpus));
    // TorchTitan applies FSDP over the dp_shard x cp ranks: with CP the parameters are sharded
    // even at dp_shard 1.
    const bool sharded = shard > 1 || cp > 1;
    if (replicate > 1 && sharded)
      r.fail("parallelism", "data_parallel_replicate_degree",
             "HSDP (replicas of an FSDP group over dp_shard x cp) is not modelled");
    p.tensor_model_parallel_size = tp;
    p.sequence_parallel = tp > 1;  // TorchTitan's TP always shards the norms' sequence
    p.context_parallel_size = cp;
    p.pipeline_model_parallel_size = pp;
    p.data_parallel_sharding_strategy = sharded ? DpSharding::kOptimGradsParams : DpSharding::kNoShard;
    p.use_distributed_optimizer = sharded;
    p.overlap_grad_reduce = true;  // DDP buckets / FSDP2 reduce-scatter during backward
    p.overlap_param_gather = sharded;  // FSDP2 prefetches the next all-gather
    const std::string reshard = r.string("parallelism", "fsdp_reshard_after_forward", "default");
    if (reshard != "always" && reshard != "default" && reshard != "never")
      r.fail("parallelism", "fsdp_reshard_after_forward", "expected always, default or never");
    if (sharded && (reshard == "never" || (reshard == "default" && pp > 1)))
      out.notes.push_back(
          fmt::format("fsdp_reshard_after_forward {}: parameters kept gathered between forward and "
                      "backward; modelled as resharded (ZeRO-3)",
                      reshard));
    p.tp_comm_overlap = r.boolean("parallelism", "enable_async_tensor_parallel", false);
    if (cp > 1) {
      const std::string rot = r.string("parallelism", "context_parallel_rotate_method", "allgather");
      if (rot == "alltoall") p.cp_comm_type = CpCommType::kP2P;
      else if (rot == "allgather") p.cp_comm_type = CpCommType::kAllGather;
      else r.fail("parallelism", "context_parallel_rotate_method", "expected allgather or alltoall");
    }
    const int ep = static_cast<int>(r.integer("parallelism", "expert_parallel_degree", 1));
    const int etp = static_cast<int>(r.integer("parallelism", "expert_tensor_parallel_degree", 1));
    if (has_moe(model)) {
      p.expert_model_parallel_size = ep;
      p.expert_tensor_parallel_size = etp;
      const std::string backend = r.string("parallelism", "expert_parallel_comm_backend", "standard");
      if (backend == "standard") s.model.moe_token_dispatcher_type = Dispatcher::kAllToAll;
      else if (backend == "deepep") s.model.moe_token_dispatcher_type = Dispatcher::kFlex;
      else r.fail("parallelism", "expert_parallel_comm_backend", "expected standard or deepep");
    } else if (ep != 1) {
      r.fail("parallelism", "expert_parallel_degree", "the --model scenario has no experts");
    } else {
      p.expert_tensor_parallel_size = tp;  // dense: as the scenario loader resolves it
    }

    // Batch: without PP one micro-batch per local batch (gradient accumulation up to the
    // global batch); with PP the local batch is cut into pipeline micro-batches.
    const int dp = replicate * shard;
    const int local = static_cast<int>(r.integer("training", "local_batch_size", 8));  // TorchTitan's default
    t.micro_batch_size =
        pp > 1 ? static_cast<int>(r.integer("parallelism", "pipeline_parallel_microbatch_size", 1)) : local;
    t.global_batch_size = static_cast<int>(r.integer("training", "global_batch_size", int64_t{local} * dp));
    if (pp > 1 && int64_t{local} * dp != t.global_batch_size)
      r.fail(
          "training", "global_batch_size",
          fmt::format("with pipeline parallelism lcm models local_batch_size x dp = global_batch_size ({} x {} != {})",
                      local, dp, t.global_batch_size));
    if (pp > 1) {
      const std::string sched = r.string("parallelism", "pipeline_parallel_schedule", "1F1B");
      p.account_for_embedding_in_pipeline_split =
          r.integer("parallelism", "pipeline_parallel_first_stage_less_layers", 1, 0) == 1;
      p.account_for_loss_in_pipeline_split =
          r.integer("parallelism", "pipeline_parallel_last_stage_less_layers", 1, 0) == 1;
      for (const char* k : {"pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers"})
        if (r.integer("parallelism", k, 1, 0) > 1)
          r.fail("parallelism", k, "expected 0 or 1 (lcm's account_for_* split)");
      const int n = model.num_layers + p.account_for_embedding_in_pipeline_split + p.account_for_loss_in_pipeline_split;
      const int per_rank = n / pp;
      const int per_stage = static_cast<int>(r.integer("parallelism", "pipeline_parallel_layers_per_stage", per_rank));
      if (sched == "1F1B") {
        if (per_stage != per_rank)
          r.fail("parallelism", "pipeline_parallel_layers_per_stage",
                 fmt::format("1F1B has one stage per rank: {} layers, got {}", per_rank, per_stage));
      } else if (sched == "Interleaved1F1B") {
        p.num_layers_per_virtual_pipeline_stage = per_stage;
      } else {
        r.fail("parallelism", "pipeline_parallel_schedule",
               fmt::format("schedule '{}' is not modelled (lcm models 1F1B and Interleaved1F1B)", sched));
      }
    }
    const std::string mode = r.string("activation_checkpoint", "mode", "selective");  // TorchTitan's default
    if (mode == "full") {
      p.recompute_granularity = RecomputeGranularity::kFull;
      p.recompute_method = RecomputeMethod::kUniform;
      p.recompute_num_layers = 1;
    } else if (mode != "none") {
      r.fail("activation_checkpoint", "mode",
             fmt::format("mode '{}' is not modelled: TorchTitan's selective AC recomputes other tensors than "
                         "Megatron's; lcm models none and full",
                         mode));
    }
  } catch (const TitanFail& f) {
    return f.error;
  }
  out.ignored_flags = r.unread();
  const std::vector<Problem> problems = validate_scenario(s);
  if (!problems.empty()) return ConfigError{display_name, 0, 0, problems.front().key, problems.front().message};
  return out;
}

}  // namespace lcm::io
