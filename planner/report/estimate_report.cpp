// Rendering of an Estimate as JSON, tables and long-format CSV.
#include "lcm/planner/report/estimate_report.hpp"
#include "lcm/planner/report/band.hpp"

#include <fmt/format.h>

#include "lcm/model/resolve.hpp"

namespace lcm::report {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Named terms of each breakdown, in report order. The names are the JSON keys.
template <class F>
void for_param_terms(const ParamComponents& c, F&& f) {
  f("embedding", c.embedding);
  f("attention", c.attention);
  f("dense_mlp", c.dense_mlp);
  f("router", c.router);
  f("routed_experts", c.routed_experts);
  f("shared_experts", c.shared_experts);
  f("norms", c.norms);
  f("output_layer", c.output_layer);
  f("mtp", c.mtp);
  if (c.lora_adapters > 0) f("lora_adapters", c.lora_adapters);  // peft: lora only
}

template <class F>
void for_flop_terms(const FlopTerms& t, F&& f) {
  f("attn_proj", t.attn_proj);
  f("attn_core", t.attn_core);
  f("dense_mlp", t.dense_mlp);
  f("routed_experts", t.routed_experts);
  f("shared_experts", t.shared_experts);
  f("router", t.router);
  f("logits", t.logits);
  f("mtp", t.mtp);
  f("lora_adapters", t.lora_adapters);  // 0 without peft: lora
}

// Terms of StageMemory; `allocated` says whether the term is part of the allocator's
// figure (tensors) or only of the device total.
template <class F>
void for_memory_terms(const StageMemory& m, F&& f) {
  f("weights", m.weights, true);
  f("grads", m.grads, true);
  f("main_params", m.main_params, true);
  f("optimizer_states", m.optimizer_states, true);
  f("fsdp_gather_buffers", m.fsdp_gather_buffers, true);
  f("fp8_weight_cache", m.fp8_weight_cache, true);
  f("activations", m.activations, true);
  f("logits_and_loss", m.logits_and_loss, true);
  f("transient_peak", m.transient_peak, true);
  f("comm_buffers", m.comm_buffers, true);
  f("workspaces", m.workspaces, true);
  f("cuda_context", m.cuda_context, false);
  f("nccl_buffers", m.nccl_buffers, false);
  f("cublas_workspace", m.cublas_workspace, false);
  f("fragmentation", m.fragmentation, false);
}

ordered_json components_json(const ParamComponents& c) {
  ordered_json j;
  for_param_terms(c, [&](const char* k, double v) { j[k] = v; });
  return j;
}

ordered_json flop_terms_json(const FlopTerms& t) {
  ordered_json j;
  for_flop_terms(t, [&](const char* k, double v) { j[k] = v; });
  j["total"] = t.total();
  return j;
}

ordered_json mesh_json(const Mesh& m) {
  return ordered_json{{"world", m.world}, {"tp", m.tp},   {"cp", m.cp},   {"pp", m.pp},
                      {"vp", m.vp},       {"dp", m.dp},   {"ep", m.ep},   {"etp", m.etp},
                      {"edp", m.edp},     {"sp", m.sp},   {"num_micro_batches", m.num_micro_batches},
                      {"padded_vocab", m.padded_vocab}};
}

std::string gib(double b) { return fmt_bytes_gib(b); }

// The routing the estimate assumed (model.moe_routing_skew) and what it makes of the busiest
// EP rank (resolve.hpp; docs/moe-routing.md "Skew in the step").
ordered_json routing_json(const Scenario& s, const Mesh& m) {
  const RankShape r = resolve(s, m);
  const double skew = s.model.moe_routing_skew;
  ordered_json j{{"skew", skew > 0 ? fmt::format("zipf:{}", skew) : std::string("balanced")},
                 {"busiest_ep_rank_factor", r.ep_busiest}};
  if (r.skewed) j["routed_copies_per_token"] = r.routed_copies;
  return j;
}

ordered_json time_json(const StepTime& t) {
  ordered_json compute, exposed;
  for (const StepTerm& term : step_terms(t)) {
    if (term.group == StepTermGroup::kCompute) compute[term.key] = term.seconds;
    if (term.group == StepTermGroup::kExposedComm) exposed[term.key] = term.seconds;
  }
  ordered_json stages = ordered_json::array();
  for (const StageTime& st : t.stages)
    stages.push_back(ordered_json{{"stage", st.stage}, {"fwd_s", st.fwd}, {"bwd_s", st.bwd}});
  return ordered_json{{"step_s", t.step_s},
                      {"tokens_per_s_per_gpu", t.tokens_per_s_per_gpu},
                      {"model_tflops_per_gpu", t.model_tflops_per_gpu},
                      {"mfu", t.mfu},
                      {"hfu", t.hfu},
                      {"bottleneck_stage", t.bottleneck_stage},
                      {"pipeline_s", t.pipeline},
                      {"bubble_s", t.bubble},
                      {"dp_exposed_s", t.dp_exposed},
                      {"dp_hidden_s", t.dp_hidden},
                      {"optimizer_s", t.optimizer},
                      {"straggler_s", t.straggler},
                      {"compute_s", compute},
                      {"exposed_comm_s", exposed},
                      {"stages", stages}};
}

}  // namespace

nlohmann::ordered_json estimate_json(const Scenario& s, const Estimate& e) {
  ordered_json j;
  j["schema_version"] = kEstimateSchemaVersion;
  j["scenario"] = ordered_json{{"name", s.name},
                               {"model", s.model.name},
                               {"hardware", s.hardware.name},
                               {"num_gpus", s.num_gpus},
                               {"seq_length", s.training.seq_length},
                               {"micro_batch_size", s.training.micro_batch_size},
                               {"global_batch_size", s.training.global_batch_size}};
  j["mesh"] = mesh_json(e.mesh);
  if (has_moe(s.model)) j["routing"] = routing_json(s, e.mesh);

  ordered_json params;
  params["total"] = e.params.total.total();
  params["active"] = e.params.active.total();
  params["total_main"] = e.params.total.main();
  params["active_main"] = e.params.active.main();
  params["components"] = ordered_json{{"total", components_json(e.params.total)},
                                      {"active", components_json(e.params.active)}};
  ordered_json per_gpu = ordered_json::array();
  for (size_t i = 0; i < e.gpu_params.size(); ++i) {
    per_gpu.push_back(ordered_json{{"stage", i},
                                   {"dense", e.gpu_params[i].dense},
                                   {"expert", e.gpu_params[i].expert},
                                   {"total", e.gpu_params[i].total()}});
  }
  params["per_gpu"] = per_gpu;
  j["params"] = params;

  const Flops& f = e.flops;
  j["flops"] = ordered_json{
      {"per_step", f.per_step},
      {"per_gpu_per_step", f.per_gpu_per_step},
      {"model_flops", f.model_flops},
      {"hardware_flops", f.hardware_flops},
      {"megatron_flops", f.megatron_flops},
      {"convention",
       ordered_json{{"causal_halved", s.flop_convention.causal_halved},
                    {"include_recompute", s.flop_convention.include_recompute}}},
      {"fwd", flop_terms_json(f.fwd)},
      {"bwd", flop_terms_json(f.bwd)},
      {"recompute", flop_terms_json(f.recompute)}};

  ordered_json stages = ordered_json::array();
  for (size_t i = 0; i < e.memory.stages.size(); ++i) {
    const StageMemory& m = e.memory.stages[i];
    ordered_json terms;
    for_memory_terms(m, [&](const char* k, double v, bool) { terms[k] = v; });
    const StageLayers& sl = e.stage_layers[i];
    stages.push_back(ordered_json{{"stage", m.stage},
                                  {"layers", sl.num_layers},
                                  {"moe_layers", sl.num_moe_layers},
                                  {"has_embedding", sl.has_embedding},
                                  {"has_output", sl.has_output},
                                  {"activations_per_microbatch", m.activations_per_microbatch},
                                  {"in_flight_microbatches", m.in_flight_microbatches},
                                  {"terms", terms},
                                  {"allocated_bytes", m.allocated},
                                  {"peak_bytes", m.peak},
                                  {"peak_low_bytes", m.peak_low},
                                  {"peak_high_bytes", m.peak_high},
                                  {"fits", m.peak_high <= e.memory.hbm_bytes},
                                  {"may_fit", m.peak_low <= e.memory.hbm_bytes}});
  }
  j["memory"] = ordered_json{{"peak_bytes", e.memory.peak_bytes},
                             {"allocated_peak_bytes", e.memory.allocated_peak_bytes},
                             {"hbm_bytes", e.memory.hbm_bytes},
                             {"peak_high_bytes", e.memory.peak_high_bytes},
                             {"peak_low_bytes", e.memory.peak_low_bytes},
                             {"verdict_stage", e.memory.verdict_stage},
                             {"fits", e.memory.fits},
                             {"may_fit", e.memory.may_fit},
                             {"verdict", verdict_name(verdict_of(e.memory))},
                             {"worst_stage", e.memory.worst_stage},
                             {"stages", stages}};

  ordered_json items = ordered_json::array();
  for (int i = 0; i < e.comm.num_items; ++i) {
    const CommItem& c = e.comm.items[static_cast<size_t>(i)];
    items.push_back(ordered_json{{"name", to_string(c.id)},
                                 {"dim", to_string(c.dim)},
                                 {"collective", to_string(c.kind)},
                                 {"group_size", c.group_size},
                                 {"message_bytes", c.message_bytes},
                                 {"calls", c.calls},
                                 {"sent_bytes", c.sent_bytes}});
  }
  ordered_json by_dim;
  for (int d = 0; d < kNumCommDims; ++d) {
    by_dim[to_string(static_cast<CommDim>(d))] = e.comm.sent_bytes_by_dim[static_cast<size_t>(d)];
  }
  if (e.has_time) {
    j["time"] = time_json(e.time);
    const StepTime& t = e.time;
    j["time"]["band"] = band_json(e.band, t.step_s, t.tokens_per_s_per_gpu, t.mfu, t.hfu, s.hardware.uncertainty);
  }
  j["comm"] = ordered_json{{"stage", e.comm.stage},
                           {"total_sent_bytes", e.comm.total_sent_bytes},
                           {"sent_bytes_by_dim", by_dim},
                           {"items", items}};
  return j;
}

std::vector<std::pair<std::string, double>> memory_terms(const StageMemory& m) {
  std::vector<std::pair<std::string, double>> out;
  for_memory_terms(m, [&](const char* k, double v, bool) { out.emplace_back(k, v); });
  return out;
}

// "143.49 on stage 1 of HBM 140.40: TIGHT, may not fit (peak 134.80, band 129.27-143.49 on that stage;
// allocated 120.00)": the verdict's own number first (Memory::peak_high_bytes), then the band it is the top of.
std::string memory_verdict(const Memory& mem) {
  const StageMemory& v = mem.stages[static_cast<size_t>(mem.verdict_stage)];
  const MemoryVerdict verdict = verdict_of(mem);
  const char* word = verdict == MemoryVerdict::kFits    ? "fits"
                     : verdict == MemoryVerdict::kTight ? "TIGHT, may not fit"
                                                        : "DOES NOT FIT";
  return fmt::format("{} on stage {} of HBM {}: {} (peak {}, band {}-{} on that stage; allocated {})",
                     fmt_bytes_gib(mem.peak_high_bytes), mem.verdict_stage, fmt_bytes_gib(mem.hbm_bytes), word,
                     fmt_bytes_gib(v.peak), fmt_bytes_gib(v.peak_low), fmt_bytes_gib(v.peak_high),
                     fmt_bytes_gib(v.allocated));
}

std::vector<Table> estimate_tables(const Scenario& s, const Estimate& e) {
  std::vector<Table> out;
  const Mesh& m = e.mesh;

  Table sum;
  sum.title = fmt::format("lcm estimate: {} ({} on {} x {})", s.name, s.model.name, s.num_gpus,
                          s.hardware.name);
  sum.header = {"quantity", "value"};
  sum.align_numbers = false;
  sum.rows = {
      {"mesh", fmt::format("tp={} cp={} pp={} vp={} dp={}{}{}", m.tp, m.cp, m.pp, m.vp, m.dp,
                           has_moe(s.model) ? fmt::format(" | ep={} etp={} edp={}", m.ep, m.etp, m.edp) : "",
                           m.sp ? " | sp" : "")},
      {"sequence x micro-batch x global batch",
       fmt::format("{} x {} x {} ({} micro-batches per pipeline{})", s.training.seq_length,
                   s.training.micro_batch_size, s.training.global_batch_size, m.num_micro_batches,
                   s.training.document_length > 0
                       ? fmt::format("; packed: {} documents of {} tokens per sequence",
                                     attention_span(s.training).docs, attention_span(s.training).span)
                       : "")},
      {"params total / active", fmt::format("{} / {}", fmt_count(e.params.total.main()),
                                            fmt_count(e.params.active.main()))},
      {"FLOPs per step", fmt::format("{} ({})", fmt_sci(e.flops.per_step),
                                     s.flop_convention.include_recompute ? "hardware" : "model")},
      {"memory needed / GPU (GiB)", memory_verdict(e.memory)},
      {"comm sent / GPU / step (GiB)", gib(e.comm.total_sent_bytes)},
  };
  if (has_moe(s.model) && s.model.moe_routing_skew > 0) {
    const RankShape r = resolve(s, m);
    sum.rows.insert(sum.rows.begin() + 1,
                    {"routing", fmt::format("zipf:{} (model.moe_routing_skew): the busiest EP rank's experts get {:.3f}x the "
                                            "mean rank's tokens; {:.3g} routed copies per token",
                                            s.model.moe_routing_skew, r.ep_busiest, r.routed_copies)});
  }
  if (e.has_time) {
    const StepTime& t = e.time;
    const StepBand& b = e.band;
    const Range st = time_range(t.step_s, b);
    sum.rows.push_back(
        {"step time (s)",
         fmt::format("{:.3f}{} (band {:.3f}-{:.3f}; bubble {:.3f}, DP exposed {:.3f}, optimizer {:.3f}{})", t.step_s,
                     t.step_s >= 60.0 ? " = " + fmt_duration(t.step_s) : std::string(), st.low, st.high, t.bubble,
                     t.dp_exposed, t.optimizer,
                     t.straggler > 0 ? fmt::format(", slowest GPU {:.3f}", t.straggler) : std::string())});
    sum.rows.push_back(
        {"tokens/s/GPU", fmt_with_range(t.tokens_per_s_per_gpu, rate_range(t.tokens_per_s_per_gpu, b), 0)});
    sum.rows.push_back({"model TFLOP/s/GPU, MFU, HFU",
                        fmt::format("{}, {}, {:.1f}% (of dense BF16 peak)",
                                    fmt_with_range(t.model_tflops_per_gpu, rate_range(t.model_tflops_per_gpu, b), 1),
                                    fmt_pct_with_range(t.mfu, rate_range(t.mfu, b)), 100 * t.hfu)});
    sum.notes.push_back(band_note(s.hardware.uncertainty));
  }
  out.push_back(sum);

  Table p;
  p.title = "Parameters (main model; MTP listed separately)";
  p.header = {"component", "total", "active"};
  std::vector<std::pair<const char*, double>> tot, act;
  for_param_terms(e.params.total, [&](const char* k, double v) { tot.emplace_back(k, v); });
  for_param_terms(e.params.active, [&](const char* k, double v) { act.emplace_back(k, v); });
  for (size_t i = 0; i < tot.size(); ++i) {
    if (tot[i].second == 0) continue;
    p.rows.push_back({tot[i].first, fmt_count(tot[i].second), fmt_count(act[i].second)});
  }
  p.rows.push_back({"main (no MTP)", fmt_count(e.params.total.main()), fmt_count(e.params.active.main())});
  out.push_back(p);

  Table f;
  f.title = fmt::format("FLOPs per step (all GPUs; causal {}, recompute {})",
                        s.flop_convention.causal_halved ? "halved" : "full",
                        s.flop_convention.include_recompute ? "included" : "excluded");
  f.header = {"op class", "forward", "backward", "recompute"};
  std::vector<std::pair<const char*, double>> fw, bw, rc;
  for_flop_terms(e.flops.fwd, [&](const char* k, double v) { fw.emplace_back(k, v); });
  for_flop_terms(e.flops.bwd, [&](const char* k, double v) { bw.emplace_back(k, v); });
  for_flop_terms(e.flops.recompute, [&](const char* k, double v) { rc.emplace_back(k, v); });
  for (size_t i = 0; i < fw.size(); ++i) {
    if (fw[i].second == 0 && bw[i].second == 0 && rc[i].second == 0) continue;
    f.rows.push_back({fw[i].first, fmt_sci(fw[i].second), fmt_sci(bw[i].second), fmt_sci(rc[i].second)});
  }
  f.rows.push_back({"total", fmt_sci(e.flops.fwd.total()), fmt_sci(e.flops.bwd.total()),
                    fmt_sci(e.flops.recompute.total())});
  f.notes.push_back(fmt::format("Megatron num_floating_point_operations: {}", fmt_sci(e.flops.megatron_flops)));
  out.push_back(f);

  Table mem;
  mem.title = "Memory per GPU by pipeline stage (GiB)";
  mem.header = {"term"};
  for (const StageMemory& sm : e.memory.stages) mem.header.push_back(fmt::format("stage {}", sm.stage));
  std::vector<std::vector<std::string>> rows;
  bool first_stage = true;
  for (const StageMemory& sm : e.memory.stages) {
    size_t r = 0;
    for_memory_terms(sm, [&](const char* k, double v, bool) {
      if (first_stage) rows.push_back({k});
      rows[r++].push_back(gib(v));
    });
    auto add = [&](const char* k, const std::string& v) {
      if (first_stage) rows.push_back({k});
      rows[r++].push_back(v);
    };
    add("in-flight micro-batches", fmt_fixed(sm.in_flight_microbatches, 2));
    add("allocated (framework max)", gib(sm.allocated));
    add("peak (device)", gib(sm.peak));
    add("peak range", fmt::format("{}-{}", gib(sm.peak_low), gib(sm.peak_high)));
    first_stage = false;
  }
  mem.rows = rows;
  mem.notes.push_back(fmt::format("HBM per GPU: {} GiB; worst stage: {}", gib(e.memory.hbm_bytes),
                                  e.memory.worst_stage));
  out.push_back(mem);

  Table c;
  c.title = fmt::format("Communication per GPU per step (stage {})", e.comm.stage);
  c.header = {"name", "dim", "collective", "group", "message MiB", "calls", "sent GiB"};
  for (int i = 0; i < e.comm.num_items; ++i) {
    const CommItem& it = e.comm.items[static_cast<size_t>(i)];
    c.rows.push_back({to_string(it.id), to_string(it.dim), to_string(it.kind), std::to_string(it.group_size),
                      fmt_fixed(it.message_bytes / (1024.0 * 1024.0), 2), fmt_fixed(it.calls, 0),
                      gib(it.sent_bytes)});
  }
  out.push_back(c);

  if (e.has_time) {
    const StepTime& t = e.time;
    Table tt;
    tt.title = fmt::format("Step time breakdown (bottleneck stage {}, per step)", t.bottleneck_stage);
    tt.header = {"part", "seconds", "share %"};
    auto row = [&](const std::string& k, double v) {
      if (v <= 0) return;
      tt.rows.push_back({k, fmt_fixed(v, 4), fmt_fixed(100.0 * v / t.step_s, 1)});
    };
    for (const StepTerm& term : step_terms(t)) {
      switch (term.group) {
        case StepTermGroup::kCompute: row(fmt::format("compute: {}", term.key), term.seconds); break;
        case StepTermGroup::kExposedComm: row(fmt::format("exposed comm: {}", term.key), term.seconds); break;
        case StepTermGroup::kBubble:
        case StepTermGroup::kOptimizer: row(term.label, term.seconds); break;
      }
    }
    tt.rows.push_back({"step", fmt_fixed(t.step_s, 4), "100.0"});
    tt.notes.push_back("Exposed DP communication includes the non-overlapped last bucket.");
    // Host-bound time rests on the profile's host costs, which belong to one host and one
    // framework: say which were assumed when they matter (over 1% of the step).
    if (t.host_idle > 0.01 * t.step_s) {
      const HostSpec& h = s.hardware.host;
      tt.notes.push_back(fmt::format(
          "Host-bound: the GPU waits on the host {:.1f}% of the step, with the profile's host costs ({:.2f} us per "
          "kernel enqueue, {:.2f} us per sync, {:.0f} / {:.0f} us of Python per layer forward / backward, an MoE layer "
          "{:.0f} / {:.0f} us more, {:.0f} us per micro-batch outside the layers, {:.1f} us per optimizer tensor, "
          "{:.0f} us per iteration; docs/time-model.md \"Host-bound regime\"): they were measured on one host, and "
          "another host or framework has other costs (give the profile its own host: block).",
          100.0 * t.host_idle / t.step_s, 1e6 * h.kernel_launch, 1e6 * h.sync, 1e6 * h.layer_overhead_fwd,
          1e6 * h.layer_overhead_bwd, 1e6 * h.moe_overhead_fwd, 1e6 * h.moe_overhead_bwd, 1e6 * h.microbatch_overhead,
          1e6 * h.optimizer_tensor, 1e6 * h.iteration_overhead));
    }
    // A profile without the attention dropout rates prices the fused kernel's random numbers as
    // free (EfficiencySpec::attention_dropout_*_rate, docs/time-model.md): say so where it
    // applies. Unfused attention prices its dropout kernels by their bytes, not at these rates.
    const bool no_fwd = s.hardware.efficiency.attention_dropout_fwd_rate <= 0;
    const bool no_bwd = s.hardware.efficiency.attention_dropout_bwd_rate <= 0;
    const bool unfused = s.training.attention_backend == AttentionBackend::kUnfused;
    if (!unfused && s.model.attention_dropout > 0 && (no_fwd || no_bwd))
      tt.notes.push_back(fmt::format(
          "Attention dropout {:g} is priced free in the {} of the attention kernels: the profile {} has no "
          "efficiency.attention_dropout_{}_Gelem_per_s (cuDNN's fused attention at dropout 0.1 ran its forward 1.9-2.5x "
          "as long on an H100: validation/measured/h100/dropout/; measure with scripts/probe_dropout.py).",
          s.model.attention_dropout, no_fwd && no_bwd ? "forward and backward" : no_fwd ? "forward" : "backward",
          s.hardware.name, no_fwd && no_bwd ? "{fwd,bwd}" : no_fwd ? "fwd" : "bwd"));
    // Unfused attention is priced as its kernels (docs/time-model.md), but the error band's
    // attention spread is the fused kernels': say how it fared held out.
    if (unfused)
      tt.notes.push_back(
          "Unfused attention (training.attention_backend unfused) is priced as its kernels: the batched GEMMs and "
          "the softmax over every layer's seq x seq scores. Held out on an H100 (the price of a562182) it was 5 of 20 "
          "ops within 10 %, 28.6 % too fast on average (validation/measured/h100/unfused_attention/); the band's attention "
          "spread is the fused kernels' and understates it.");
    // FlashAttention-2 is priced at its own rates: say where they come from.
    if (s.training.attention_backend == AttentionBackend::kFlash2)
      tt.notes.push_back(fmt::format(
          "Attention runs FlashAttention-2 (training.attention_backend flash2), priced at the profile's own rates for "
          "it (efficiency.attention_flash2_fwd {:g}, _bwd {:g}: about 0.6x cuDNN's on Hopper), fitted in-sample on "
          "FlashAttention-2 kernels probed on the GPU (torch's flash backend); the band's attention spread is cuDNN's "
          "(validation/measured/h100/flash2/).",
          s.hardware.efficiency.attention_flash2_fwd, s.hardware.efficiency.attention_flash2_bwd));
    out.push_back(tt);
  }
  return out;
}

Table estimate_long_table(const Scenario& s, const Estimate& e) {
  (void)s;
  Table t;
  t.header = {"section", "stage", "item", "value", "unit"};
  auto row = [&](const char* sec, const std::string& stage, const std::string& item, double v,
                 const char* unit) {
    t.rows.push_back({sec, stage, item, fmt::format("{:.10g}", v), unit});
  };
  for_param_terms(e.params.total, [&](const char* k, double v) { row("params.total", "", k, v, "params"); });
  for_param_terms(e.params.active, [&](const char* k, double v) { row("params.active", "", k, v, "params"); });
  row("params", "", "total", e.params.total.total(), "params");
  row("params", "", "active", e.params.active.total(), "params");
  for (size_t i = 0; i < e.gpu_params.size(); ++i) {
    row("params.per_gpu", std::to_string(i), "dense", e.gpu_params[i].dense, "params");
    row("params.per_gpu", std::to_string(i), "expert", e.gpu_params[i].expert, "params");
  }
  for_flop_terms(e.flops.fwd, [&](const char* k, double v) { row("flops.fwd", "", k, v, "flop"); });
  for_flop_terms(e.flops.bwd, [&](const char* k, double v) { row("flops.bwd", "", k, v, "flop"); });
  for_flop_terms(e.flops.recompute, [&](const char* k, double v) { row("flops.recompute", "", k, v, "flop"); });
  row("flops", "", "per_step", e.flops.per_step, "flop");
  row("flops", "", "model_flops", e.flops.model_flops, "flop");
  row("flops", "", "hardware_flops", e.flops.hardware_flops, "flop");
  row("flops", "", "megatron_flops", e.flops.megatron_flops, "flop");
  for (const StageMemory& m : e.memory.stages) {
    const std::string st = std::to_string(m.stage);
    for_memory_terms(m, [&](const char* k, double v, bool) { row("memory", st, k, v, "bytes"); });
    row("memory", st, "allocated", m.allocated, "bytes");
    row("memory", st, "peak", m.peak, "bytes");
    row("memory", st, "peak_low", m.peak_low, "bytes");
    row("memory", st, "peak_high", m.peak_high, "bytes");
  }
  row("memory", "", "peak_bytes", e.memory.peak_bytes, "bytes");
  row("memory", "", "allocated_peak_bytes", e.memory.allocated_peak_bytes, "bytes");
  for (int i = 0; i < e.comm.num_items; ++i) {
    const CommItem& it = e.comm.items[static_cast<size_t>(i)];
    row("comm", std::to_string(e.comm.stage), to_string(it.id), it.sent_bytes, "bytes");
  }
  row("comm", std::to_string(e.comm.stage), "total", e.comm.total_sent_bytes, "bytes");
  if (e.has_time) {  // the step time and MFU with the ends of their error band
    const Range st = time_range(e.time.step_s, e.band), mfu = rate_range(e.time.mfu, e.band);
    row("time", "", "step_s", e.time.step_s, "s");
    row("time", "", "step_s_low", st.low, "s");
    row("time", "", "step_s_high", st.high, "s");
    row("time", "", "mfu", e.time.mfu, "fraction");
    row("time", "", "mfu_low", mfu.low, "fraction");
    row("time", "", "mfu_high", mfu.high, "fraction");
  }
  return t;
}

}  // namespace lcm::report
