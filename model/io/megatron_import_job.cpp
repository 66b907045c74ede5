// Megatron-LM flags -> TrainingSpec and ParallelSpec (batch, precision, attention backend,
// optimizer dtypes, mesh sizes, pipeline layout, sharding, recompute, overlap).
#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "enum_tables.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "megatron_importer.hpp"

namespace lcm::io {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + " ") {
    if (c == ' ' || c == ',' || c == '[' || c == ']' || c == '\t') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

}  // namespace

void MegatronImporter::map_training() {
  TrainingSpec& t = out_.draft.s.training;
  const char* seq_flag = get("seq-length") ? "seq-length" : "encoder-seq-length";
  const auto seq = integer(seq_flag, 1);
  if (!seq) fail_missing("seq-length", "missing --seq-length");
  t.seq_length = *seq;
  from("training.seq_length", seq_flag);
  if (!get("max-position-embeddings")) {
    out_.draft.s.model.max_position_embeddings = t.seq_length;
    from("model.max_position_embeddings", seq_flag);
    note(fmt::format("--max-position-embeddings not given (Megatron requires it): taken as --seq-length {}",
                     t.seq_length));
  }
  if (out_.draft.s.model.max_position_embeddings < t.seq_length)
    fail("max-position-embeddings", fmt::format("max_position_embeddings ({}) must be greater than or equal to "
                                                "seq_length ({}).",
                                                out_.draft.s.model.max_position_embeddings, t.seq_length));
  const auto mbs = integer("micro-batch-size", 1);
  if (!mbs) fail_missing("micro-batch-size", "missing --micro-batch-size (Megatron requires it)");
  t.micro_batch_size = static_cast<int>(*mbs);
  from("training.micro_batch_size", "micro-batch-size");

  // Precision: Megatron trains in fp32 without --bf16/--fp16; lcm models bf16 and fp8.
  const bool bf16 = on("bf16"), fp16 = on("fp16");
  if (bf16 && fp16) fail("fp16", "--fp16 and --bf16 cannot be used together (Megatron asserts)");
  if (!bf16 && !fp16)
    fail_missing("bf16", "Megatron trains in fp32 without --bf16 or --fp16; lcm models bf16 and fp8 training (add --bf16)");
  if (fp16) note("--fp16 modelled as bf16 (same tensor-core rate and 2-byte parameters)");
  t.precision = Precision::kBf16;
  if (const auto fmt8 = text("fp8-format")) {
    if (*fmt8 != "e4m3" && *fmt8 != "hybrid") fail("fp8-format", fmt::format("expected e4m3 or hybrid, got '{}'", *fmt8));
    t.precision = Precision::kFp8;
  }
  from("training.precision", get("fp8-format") ? "fp8-format" : "bf16");
  // --fp8-recipe (Megatron's default delayed); without --fp8-format Megatron ignores it.
  if (const auto recipe = text("fp8-recipe"); recipe && t.precision == Precision::kFp8) {
    const auto r = parse_fp8_recipe(*recipe);
    if (!r) fail("fp8-recipe", fmt::format("expected delayed, tensorwise, blockwise or mxfp8, got '{}'", *recipe));
    else t.fp8_recipe = *r;
    from("training.fp8_recipe", "fp8-recipe");
  }

  // Attention kernel: flash/fused/auto never materialise s x s; unfused/local and the
  // `local` transformer implementation (Megatron's own DotProductAttention) do.
  const std::string backend = text("attention-backend").value_or("auto");
  const auto ab = parse_attention_backend(backend);
  if (!ab) fail("attention-backend", fmt::format("expected flash, fused, unfused, local or auto, got '{}'", backend));
  t.attention_backend = *ab;
  from("training.attention_backend", "attention-backend");
  // Under auto, Transformer Engine picks from the job's environment (NVTE_FUSED_ATTN and
  // NVTE_FLASH_ATTN, both 1 unless set; attention/dot_product_attention/utils.py): cuDNN's fused
  // attention on Hopper; with NVTE_FUSED_ATTN=0 the flash-attn package (FlashAttention-2, as
  // NeMo-Framework-Launcher 24.01-24.07 ran every job); with both 0 its unfused kernels. The
  // other backends set these variables themselves (Megatron's AttnBackend).
  if (backend == "auto") {
    const bool fused_off = text("env:NVTE_FUSED_ATTN").value_or("1") == "0";
    const bool flash_off = text("env:NVTE_FLASH_ATTN").value_or("1") == "0";
    if (fused_off) {
      t.attention_backend = flash_off ? AttentionBackend::kUnfused : AttentionBackend::kFlash2;
      from("training.attention_backend", "env:NVTE_FUSED_ATTN");
    }
  }
  const std::string impl = text("transformer-impl").value_or("transformer_engine");
  if (impl == "local") {
    t.attention_backend = AttentionBackend::kUnfused;
    from("training.attention_backend", "transformer-impl");
  } else if (impl != "transformer_engine" && impl != "inference_optimized") {
    fail("transformer-impl", fmt::format("expected transformer_engine, local or inference_optimized, got '{}'", impl));
  }
  (void)on("use-flash-attn");  // fused attention: the default

  // Cross-entropy (language_module.py compute_language_model_loss): the implementation is read
  // only with the fusion on (validate_args rejects none; TransformerConfig defaults native).
  t.fp8_param_gather = on("fp8-param-gather");
  from("training.fp8_param_gather", "fp8-param-gather");
  t.cross_entropy_loss_fusion = on("cross-entropy-loss-fusion");
  from("training.cross_entropy_loss_fusion", "cross-entropy-loss-fusion");
  const std::string ce_impl = text("cross-entropy-fusion-impl").value_or("native");
  const auto ce = parse_cross_entropy_fusion_impl(ce_impl);
  if (!ce) fail("cross-entropy-fusion-impl", fmt::format("expected native or te, got '{}'", ce_impl));
  t.cross_entropy_fusion_impl = *ce;
  from("training.cross_entropy_fusion_impl", "cross-entropy-fusion-impl");

  // Gradient buffer dtype (validate_args): bf16 accumulates and reduces in fp32 unless
  // --grad-reduce-in-bf16 or a non-fp32 --main-grads-dtype; fp16 only with the fp32 flag.
  const std::string main_grads = text("main-grads-dtype").value_or("fp32");
  if (main_grads != "fp32" && main_grads != "bf16" && main_grads != "fp16")
    fail("main-grads-dtype", fmt::format("expected fp32, bf16 or fp16, got '{}'", main_grads));
  if (fp16) t.grad_reduce_in_fp32 = on("accumulate-allreduce-grads-in-fp32");
  else t.grad_reduce_in_fp32 = on("accumulate-allreduce-grads-in-fp32") || (!on("grad-reduce-in-bf16") && main_grads == "fp32");
  from("training.grad_reduce_in_fp32", get("grad-reduce-in-bf16") ? "grad-reduce-in-bf16" : "main-grads-dtype");

  const bool precision_aware = on("use-precision-aware-optimizer");
  auto dtype = [&](const char* flag, DType& field, const char* key) {
    const std::string v = text(flag).value_or("fp32");
    std::optional<DType> d = v == "fp16" ? std::optional<DType>(DType::kBf16) : parse_dtype(v);
    if (!d) fail(flag, fmt::format("expected fp32, bf16, fp16 or fp8, got '{}'", v));
    if (v == "fp16")
      note(fmt::format("--{} fp16 modelled as bf16 (2 bytes){}", flag,
                       std::string_view(flag) == "main-params-dtype"
                           ? "; bf16 master weights are the model's own, so the fp16 copy (2 B per parameter of "
                             "the optimizer shard) is not counted"
                           : ""));
    if (*d != DType::kFp32 && !precision_aware)
      fail(flag, fmt::format("{} can only be fp32 when not using precision-aware optimizer", flag));
    field = *d;
    from(key, flag);
  };
  dtype("main-params-dtype", t.main_params_dtype, "training.main_params_dtype");
  dtype("exp-avg-dtype", t.exp_avg_dtype, "training.exp_avg_dtype");
  dtype("exp-avg-sq-dtype", t.exp_avg_sq_dtype, "training.exp_avg_sq_dtype");
  if (on("use-megatron-fsdp")) {
    if (const auto mp = text("megatron-fsdp-main-params-dtype")) {
      const auto d = parse_dtype(*mp == "fp16" ? "bf16" : *mp);
      if (!d) fail("megatron-fsdp-main-params-dtype", fmt::format("expected fp32, bf16 or fp16, got '{}'", *mp));
      t.main_params_dtype = *d;
      from("training.main_params_dtype", "megatron-fsdp-main-params-dtype");
    }
    const std::string mg = text("megatron-fsdp-main-grads-dtype").value_or("auto");
    if (mg == "bf16" || mg == "fp16") t.grad_reduce_in_fp32 = false;
    else if (mg == "fp32") t.grad_reduce_in_fp32 = true;
  }
  // The precision-aware (distributed) optimizer with fp32 master weights hands them to Transformer
  // Engine's FusedAdam, which keeps only their low 16 bits (OptimizerConfig.store_param_remainders,
  // on by default, TE >= 2.1; Megatron-LM has no flag for it, Megatron-Bridge a config field)
  // unless Megatron keeps them itself: FP8 weights or a current-scaling recipe
  // (optimizer_config.py use_precision_aware_optimizer_no_fp8_or_ds_fp8).
  constexpr std::string_view kRemainders = "bridge:optimizer.store_param_remainders";
  const std::string remainders_field = text(kRemainders).value_or("true");
  if (remainders_field != "true" && remainders_field != "false")
    fail(kRemainders, fmt::format("expected true or false, got '{}'", remainders_field));
  if (precision_aware && on("use-distributed-optimizer") && !on("use-megatron-fsdp") && t.param_remainders_possible()) {
    t.store_param_remainders = remainders_field == "true";
    if (get(kRemainders)) {
      from("training.store_param_remainders", kRemainders);
    } else {
      from("training.store_param_remainders", "use-precision-aware-optimizer");
      note(
          "--use-precision-aware-optimizer: fp32 master weights kept as 16-bit remainders (Transformer Engine >= "
          "2.1)");
    }
  }
}

void MegatronImporter::map_parallel() {
  ParallelSpec& p = out_.draft.s.parallel;
  TrainingSpec& t = out_.draft.s.training;
  auto size = [&](const char* flag, int& field, const char* key) {
    field = static_cast<int>(integer(flag, 1).value_or(1));
    from(key, flag);
  };
  size("tensor-model-parallel-size", p.tensor_model_parallel_size, "parallel.tensor_model_parallel_size");
  size("pipeline-model-parallel-size", p.pipeline_model_parallel_size, "parallel.pipeline_model_parallel_size");
  size("context-parallel-size", p.context_parallel_size, "parallel.context_parallel_size");
  size("expert-model-parallel-size", p.expert_model_parallel_size, "parallel.expert_model_parallel_size");
  if (const auto etp = integer("expert-tensor-parallel-size", 1)) {
    p.expert_tensor_parallel_size = static_cast<int>(*etp);
    from("parallel.expert_tensor_parallel_size", "expert-tensor-parallel-size");
  }
  p.sequence_parallel = on("sequence-parallel");  // with tp = 1 Megatron turns it off (lcm: no effect)
  from("parallel.sequence_parallel", "sequence-parallel");

  if (const auto types = text("cp-comm-type")) {
    std::map<CpCommType, int> count;
    for (const std::string& w : words(*types)) {
      const auto c = parse_cp_comm_type(w);
      if (!c) fail("cp-comm-type", fmt::format("expected p2p, a2a, allgather or a2a+p2p, got '{}'", w));
      ++count[*c];
    }
    const auto best = std::max_element(count.begin(), count.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    p.cp_comm_type = best->first;
    if (count.size() > 1)
      note(fmt::format("--cp-comm-type {}: per-layer communication types modelled as {} for every layer", *types,
                       to_string(p.cp_comm_type)));
    from("parallel.cp_comm_type", "cp-comm-type");
  }
  if (const auto h = text("hierarchical-context-parallel-sizes")) {
    p.hierarchical_context_parallel_sizes.clear();
    for (const std::string& w : words(*h)) {
      auto r = read_int(YAML::Node(w), 1);
      if (failed(r)) fail("hierarchical-context-parallel-sizes", why(r));
      p.hierarchical_context_parallel_sizes.push_back(static_cast<int>(std::get<0>(r)));
    }
    from("parallel.hierarchical_context_parallel_sizes", "hierarchical-context-parallel-sizes");
  }
  if (on("use-tp-pp-dp-mapping")) {  // initialize_model_parallel order "tp-cp-ep-pp-dp"
    const Dim order[kNumOrderDims] = {Dim::kTp, Dim::kCp, Dim::kEp, Dim::kPp, Dim::kDp};
    std::copy(std::begin(order), std::end(order), p.order);
    from("parallel.rank_order", "use-tp-pp-dp-mapping");
  }
  p.overlap_grad_reduce = on("overlap-grad-reduce");
  p.overlap_param_gather = on("overlap-param-gather");
  p.tp_comm_overlap = on("tp-comm-overlap");
  p.overlap_moe_expert_parallel_comm = on("overlap-moe-expert-parallel-comm");
  for (const char* k : {"overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap", "overlap-moe-expert-parallel-comm"}) {
    std::string key = std::string("parallel.") + k;
    std::replace(key.begin(), key.end(), '-', '_');
    from(key, k);
  }
  map_pipeline();
  map_optimizer_sharding();
  map_recompute();
  map_cuda_graphs();
  // Global batch: --global-batch-size, the last step of --step-batch-size-schedule, or
  // Megatron's default micro_batch_size * data_parallel_size (one micro-batch per step).
  if (const auto g = integer("global-batch-size", 1)) {
    if (get("step-batch-size-schedule"))
      fail("step-batch-size-schedule", "Cannot specify both --step-batch-size-schedule and --global-batch-size");
    t.global_batch_size = static_cast<int>(*g);
    from("training.global_batch_size", "global-batch-size");
  } else if (const auto sched = text("step-batch-size-schedule")) {
    const std::vector<std::string> steps = words(*sched);
    const std::string& last = steps.back();
    const size_t colon = last.find(':');
    auto r = read_int(YAML::Node(colon == std::string::npos ? last : last.substr(colon + 1)), 1);
    if (colon == std::string::npos || failed(r))
      fail("step-batch-size-schedule", fmt::format("expected \"THRESHOLD:BS THRESHOLD:BS ...\", got '{}'", *sched));
    t.global_batch_size = static_cast<int>(std::get<0>(r));
    note(fmt::format("--step-batch-size-schedule '{}': modelled at its final global batch size {}", *sched,
                     t.global_batch_size));
    from("training.global_batch_size", "step-batch-size-schedule");
  } else {
    const int model = p.tensor_model_parallel_size * p.pipeline_model_parallel_size * p.context_parallel_size;
    const int dp = num_gpus_ % model == 0 ? num_gpus_ / model : 1;
    t.global_batch_size = t.micro_batch_size * dp;
    from("training.global_batch_size", "micro-batch-size");
  }
}

void MegatronImporter::map_pipeline() {
  ParallelSpec& p = out_.draft.s.parallel;
  const int L = out_.draft.s.model.num_layers, pp = p.pipeline_model_parallel_size;
  if (const auto f = integer("decoder-first-pipeline-num-layers", 1)) {
    p.num_layers_in_first_pipeline_stage = static_cast<int>(*f);
    from("parallel.num_layers_in_first_pipeline_stage", "decoder-first-pipeline-num-layers");
  }
  if (const auto g = integer("microbatch-group-size-per-virtual-pipeline-stage", 1)) {
    p.microbatch_group_size_per_vp_stage = static_cast<int>(*g);
    from("parallel.microbatch_group_size_per_virtual_pipeline_stage", "microbatch-group-size-per-virtual-pipeline-stage");
  }
  if (const auto l = integer("decoder-last-pipeline-num-layers", 1)) {
    p.num_layers_in_last_pipeline_stage = static_cast<int>(*l);
    from("parallel.num_layers_in_last_pipeline_stage", "decoder-last-pipeline-num-layers");
  }
  p.account_for_embedding_in_pipeline_split = on("account-for-embedding-in-pipeline-split");
  p.account_for_loss_in_pipeline_split = on("account-for-loss-in-pipeline-split");
  const bool uneven = p.num_layers_in_first_pipeline_stage > 0 || p.num_layers_in_last_pipeline_stage > 0;
  const int vpp_flags = (get("num-layers-per-virtual-pipeline-stage") != nullptr) +
                        (get("num-virtual-stages-per-pipeline-rank") != nullptr) +
                        (get("pipeline-model-parallel-layout") != nullptr);
  if (vpp_flags > 1)
    fail("num-layers-per-virtual-pipeline-stage",
         "No more than one of the following arguments can be set at the same time: "
         "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
         "--pipeline-model-parallel-layout");
  const int n = L + p.account_for_embedding_in_pipeline_split + p.account_for_loss_in_pipeline_split;
  if (const auto layout = text("pipeline-model-parallel-layout")) {
    if (uneven || p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split)
      fail("pipeline-model-parallel-layout",
           "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments");
    ExpandedPipelineLayout e = expand_pipeline_layout(*layout);
    if (!e.error.empty())
      fail("pipeline-model-parallel-layout", fmt::format("cannot parse pipeline layout '{}': {}", *layout, e.error));
    p.pipeline_layout = std::move(e.stages);  // modelled as written; validate_scenario checks it
    from("parallel.pipeline_model_parallel_layout", "pipeline-model-parallel-layout");
  } else if (const auto per_vs = integer("num-layers-per-virtual-pipeline-stage", 1)) {
    if (uneven)
      fail("num-layers-per-virtual-pipeline-stage",
           "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when enable "
           "uneven pipeline parallelism");
    // Megatron: vpp = (layers per stage) / N; vpp == 1 means no interleaving.
    p.num_layers_per_virtual_pipeline_stage = (n % pp == 0 && n / pp == *per_vs) ? 0 : static_cast<int>(*per_vs);
    from("parallel.num_layers_per_virtual_pipeline_stage", "num-layers-per-virtual-pipeline-stage");
  } else if (const auto v = integer("num-virtual-stages-per-pipeline-rank", 1)) {
    from("parallel.num_layers_per_virtual_pipeline_stage", "num-virtual-stages-per-pipeline-rank");
    if (*v == 1) return;
    if (uneven) {
      // Megatron splits each rank's layers evenly over its chunks: a custom layout of that split.
      std::vector<std::string> st =
          uneven_interleaved_layout(L, pp, static_cast<int>(*v), p.num_layers_in_first_pipeline_stage,
                                    p.num_layers_in_last_pipeline_stage, out_.draft.s.model.mtp_num_layers);
      if (st.empty())
        fail("num-virtual-stages-per-pipeline-rank",
             fmt::format("with uneven first/last stages ({} / {} of {} layers on {} ranks) every rank's layers must "
                         "split evenly into {} virtual stages",
                         p.num_layers_in_first_pipeline_stage, p.num_layers_in_last_pipeline_stage, L, pp, *v));
      p.num_layers_in_first_pipeline_stage = p.num_layers_in_last_pipeline_stage = 0;
      p.pipeline_layout = std::move(st);
      from("parallel.pipeline_model_parallel_layout", "num-virtual-stages-per-pipeline-rank");
    } else if (n % pp == 0) {
      if ((n / pp) % *v != 0)
        fail("num-virtual-stages-per-pipeline-rank",
             fmt::format("number of layers per pipeline rank ({}) must be divisible by the number of virtual stages "
                         "per pipeline rank ({})",
                         n / pp, *v));
      p.num_layers_per_virtual_pipeline_stage = static_cast<int>(n / pp / *v);
    }
  }
}

void MegatronImporter::map_optimizer_sharding() {
  ParallelSpec& p = out_.draft.s.parallel;
  const bool udo = on("use-distributed-optimizer");
  if (on("use-megatron-fsdp")) {
    const std::string st = text("data-parallel-sharding-strategy").value_or("optim_grads_params");
    const auto s = parse_dp_sharding(st);
    if (!s) fail("data-parallel-sharding-strategy",
                 fmt::format("expected no_shard, optim, optim_grads or optim_grads_params, got '{}'", st));
    p.data_parallel_sharding_strategy = *s;
    const int64_t version = integer("megatron-fsdp-version", 1).value_or(1);
    if (version == 2 && udo)
      fail("use-distributed-optimizer", "--megatron-fsdp-version 2 is not compatible with --use-distributed-optimizer");
    // Megatron-FSDP v1 always runs the DistributedOptimizer; v2 never does.
    p.use_distributed_optimizer = version != 2 && *s != DpSharding::kNoShard;
    if (*s == DpSharding::kNoShard) note("--use-megatron-fsdp with no_shard modelled as plain data parallelism");
    from("parallel.data_parallel_sharding_strategy", "data-parallel-sharding-strategy");
  } else if (on("use-torch-fsdp2")) {
    p.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
    p.use_distributed_optimizer = false;
    note("--use-torch-fsdp2 modelled as fully sharded data parallelism (optim_grads_params)");
    from("parallel.data_parallel_sharding_strategy", "use-torch-fsdp2");
  } else {
    p.use_distributed_optimizer = udo;
    p.data_parallel_sharding_strategy = udo ? DpSharding::kOptim : DpSharding::kNoShard;
    if (get("data-parallel-sharding-strategy"))
      note("--data-parallel-sharding-strategy applies to Megatron-FSDP only; without --use-megatron-fsdp it is ignored "
           "(as in Megatron)");
    from("parallel.data_parallel_sharding_strategy", "use-distributed-optimizer");
  }
  from("parallel.use_distributed_optimizer", "use-distributed-optimizer");
}

void MegatronImporter::map_recompute() {
  ParallelSpec& p = out_.draft.s.parallel;
  const auto gran = text("recompute-granularity");
  if (gran) {
    const auto g = parse_recompute_granularity(*gran);
    if (!g || *g == RecomputeGranularity::kNone)
      fail("recompute-granularity", fmt::format("expected full or selective, got '{}'", *gran));
    p.recompute_granularity = *g;
  } else if (on("recompute-activations") || on("moe-layer-recompute")) {
    p.recompute_granularity = RecomputeGranularity::kSelective;
  }
  from("parallel.recompute_granularity", gran ? "recompute-granularity" : "recompute-activations");
  if (p.recompute_granularity == RecomputeGranularity::kNone) {
    // TransformerConfig checks method and layer count only under a granularity; without one
    // they have no effect.
    for (const char* f : {"recompute-method", "recompute-num-layers"})
      if (get(f)) out_.ignored.push_back(std::string("--") + f);
  }
  const auto method = p.recompute_granularity == RecomputeGranularity::kNone ? std::nullopt : text("recompute-method");
  if (method) {
    if (p.recompute_granularity == RecomputeGranularity::kSelective)
      fail("recompute-method", "recompute method is not yet supported for selective recomputing granularity");
    const auto m = parse_recompute_method(*method);
    if (!m) fail("recompute-method", fmt::format("expected uniform or block, got '{}'", *method));
    p.recompute_method = *m;
    from("parallel.recompute_method", "recompute-method");
  } else if (p.recompute_granularity == RecomputeGranularity::kFull) {
    fail("recompute-granularity", "Using recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"");
  }
  if (const auto n = p.recompute_granularity == RecomputeGranularity::kNone ? std::nullopt
                                                                             : integer("recompute-num-layers", 1)) {
    if (p.recompute_granularity != RecomputeGranularity::kFull)
      fail("recompute-num-layers", "When using recompute_granularity: selective recompute_num_layers must be None.");
    p.recompute_num_layers = static_cast<int>(*n);
    from("parallel.recompute_num_layers", "recompute-num-layers");
  } else if (p.recompute_granularity == RecomputeGranularity::kFull) {
    fail("recompute-granularity", "When using recompute_granularity: full recompute_num_layers must be set");
  }
  p.recompute_modules = kRecomputeCoreAttn;  // TransformerConfig: recompute_modules None -> ["core_attn"]
  if (const auto mods = text("recompute-modules")) {
    p.recompute_modules = 0;
    for (const std::string& w : words(*mods)) {
      if (const auto bit = parse_recompute_module(w)) {
        p.recompute_modules |= *bit;
      } else if (w == "gdn_norm_out" || w == "gdp_in_proj" || w == "gdp_qkv" || w == "mhc") {
        note(fmt::format("--recompute-modules {}: recompute of a layer type lcm does not model; ignored", w));
      } else {
        fail("recompute-modules", fmt::format("Invalid choices for recompute_modules: {}. Allowed modules are: "
                                              "core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts",
                                              w));
      }
    }
    from("parallel.recompute_modules", "recompute-modules");
  }
  if (on("moe-layer-recompute")) p.recompute_modules |= kRecomputeMoe;
}

// CUDA graphs (megatron/training/arguments.py and TransformerConfig.__post_init__): the
// deprecated --enable-cuda-graph / --external-cuda-graph name the local / transformer_engine
// implementation; --cuda-graph-modules (formerly --cuda-graph-scope) the captured modules,
// where "full" or nothing is the whole layer and the deprecated "full_iteration" selects
// cuda_graph_impl full_iteration. The local implementation captures the router and the
// dispatcher's preprocessing together.
void MegatronImporter::map_cuda_graphs() {
  ParallelSpec& p = out_.draft.s.parallel;
  const auto impl_text = text("cuda-graph-impl");
  const bool legacy_local = on("enable-cuda-graph"), legacy_te = on("external-cuda-graph");
  if ((legacy_local || legacy_te) && impl_text && *impl_text != "none")
    fail(legacy_local ? "enable-cuda-graph" : "external-cuda-graph",
         "Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl.");
  if (legacy_local && legacy_te)
    fail("external-cuda-graph", "--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same time.");
  p.cuda_graph_impl = CudaGraphImpl::kNone;
  if (impl_text) {
    const auto impl = parse_cuda_graph_impl(*impl_text);
    if (!impl)
      fail("cuda-graph-impl",
           fmt::format("Invalid cuda graph implementation: {}; expected one of: {}", *impl_text,
                       spelling_list<CudaGraphImpl>()));
    p.cuda_graph_impl = *impl;
    from("parallel.cuda_graph_impl", "cuda-graph-impl");
  } else if (legacy_local || legacy_te) {
    p.cuda_graph_impl = legacy_local ? CudaGraphImpl::kLocal : CudaGraphImpl::kTransformerEngine;
    from("parallel.cuda_graph_impl", legacy_local ? "enable-cuda-graph" : "external-cuda-graph");
  }
  const bool given_modules = get("cuda-graph-modules") != nullptr, given_scope = get("cuda-graph-scope") != nullptr;
  if (given_modules && given_scope)
    fail("cuda-graph-scope", "cuda_graph_scope and cuda_graph_modules cannot be set together.");
  const char* flag = given_scope ? "cuda-graph-scope" : "cuda-graph-modules";
  p.cuda_graph_modules = 0;
  if (const auto mods = text(flag)) {
    const std::vector<std::string> names = words(*mods);
    for (const std::string& w : names) {
      if (w == "full") {
        if (names.size() != 1) fail(flag, "full scope cannot be used with other scopes.");
      } else if (w == "full_iteration") {
        if (p.cuda_graph_impl != CudaGraphImpl::kNone && p.cuda_graph_impl != CudaGraphImpl::kLocal &&
            p.cuda_graph_impl != CudaGraphImpl::kFullIteration)
          fail(flag, fmt::format("cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='{}'.",
                                 to_string(p.cuda_graph_impl)));
        p.cuda_graph_impl = CudaGraphImpl::kFullIteration;
        from("parallel.cuda_graph_impl", flag);
      } else if (w == "full_iteration_inference" || w == "mamba") {
        note(fmt::format("--{} {}: {} lcm does not model; ignored", flag, w,
                         w == "mamba" ? "captures Mamba layers, which" : "is an inference scope, which"));
      } else if (const auto bit = parse_cuda_graph_module(w)) {
        p.cuda_graph_modules |= *bit;
      } else {
        fail(flag, fmt::format("'{}' is not a CUDA graph module; expected attn, mlp, moe, moe_router, moe_preprocess, "
                               "mamba or full",
                               w));
      }
    }
    from("parallel.cuda_graph_modules", flag);
  }
  if (p.cuda_graph_impl == CudaGraphImpl::kNone && p.cuda_graph_modules != 0) {
    note(fmt::format("--{} has no effect without --cuda-graph-impl (as in Megatron); ignored", flag));
    p.cuda_graph_modules = 0;
  }
  if (p.cuda_graph_impl == CudaGraphImpl::kLocal && (p.cuda_graph_modules & (kCudaGraphMoeRouter | kCudaGraphMoePreprocess)))
    p.cuda_graph_modules |= kCudaGraphMoeRouter | kCudaGraphMoePreprocess;  // local captures both together
  if (p.cuda_graph_impl != CudaGraphImpl::kNone)
    note("CUDA graphs: the host time they save is modelled (docs/time-model.md); their static buffers and private "
         "memory pool are not in the memory estimate");
}

}  // namespace lcm::io
