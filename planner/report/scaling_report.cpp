// Scaling table renderings.
#include "lcm/planner/report/scaling_report.hpp"

#include <fmt/format.h>

namespace lcm::report {

namespace {

std::string seq_label(int64_t s) {
  if (s % (1024 * 1024) == 0) return fmt::format("{}M", s / (1024 * 1024));
  if (s % 1024 == 0) return fmt::format("{}K", s / 1024);
  return std::to_string(s);
}

// Where the crossover falls relative to this row and the previous one.
std::string marker(const std::vector<ScalingRow>& rows, size_t i, const Crossover& x) {
  std::string m;
  const double lo = i == 0 ? 0.0 : static_cast<double>(rows[i - 1].seq_length);
  const double hi = static_cast<double>(rows[i].seq_length);
  auto mark = [&](double s, const char* what) {
    if (s > lo && s <= hi) m += fmt::format("{}<- {} crossover at {:.0f}", m.empty() ? "" : "; ", what, s);
  };
  mark(x.dense_seq, "dense");
  mark(x.moe_seq, "MoE");
  return m;
}

}  // namespace

std::vector<Table> scaling_tables(const Scenario& s, const std::vector<ScalingRow>& rows,
                                  const Crossover& x) {
  Table t;
  t.title = fmt::format("Scaling: {} ({}), forward FLOPs per layer per sequence; step = fwd+bwd of {} sequences",
                        s.name, s.model.name, s.training.global_batch_size);
  t.header = {"seq",          "layer attn core", "layer attn proj", "layer MLP/experts", "attn core %",
              "step FLOPs",   "step attn core",  "step MLP",       "act/layer GiB",     "act GiB",
              kNeedsHeader,   "fits",            "crossover"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const ScalingRow& r = rows[i];
    const std::string na = "n/a";
    t.rows.push_back({seq_label(r.seq_length),
                      fmt_sci(r.layer_attn_core),
                      fmt_sci(r.layer_attn_proj),
                      fmt_sci(r.layer_mlp),
                      fmt_fixed(100.0 * r.attn_core_share, 1),
                      fmt_sci(r.step_flops),
                      fmt_sci(r.step_attn_core),
                      fmt_sci(r.step_mlp),
                      r.layout_valid ? fmt_bytes_gib(r.activation_bytes_per_layer) : na,
                      r.layout_valid ? fmt_bytes_gib(r.activation_bytes) : na,
                      r.layout_valid ? fmt_bytes_gib(r.peak_high_bytes) : na,
                      r.layout_valid ? (r.fits ? "yes" : r.may_fit ? "tight" : "NO") : "invalid layout",
                      marker(rows, i, x)});
  }
  if (x.dense_seq > 0)
    t.notes.push_back(fmt::format("Dense layers: attention core overtakes the MLP at s = {:.0f} tokens.", x.dense_seq));
  if (x.moe_seq > 0)
    t.notes.push_back(fmt::format("MoE layers: attention core overtakes the active experts at s = {:.0f} tokens.", x.moe_seq));
  t.notes.push_back(fmt::format("Causal attention {}; memory is the worst pipeline stage under the scenario's layout.",
                                s.flop_convention.causal_halved ? "counted as half" : "counted in full"));
  return {t};
}

Table scaling_csv_table(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x) {
  (void)s;
  Table t;
  t.header = {"seq_length", "layer_attn_core_flops", "layer_attn_proj_flops", "layer_mlp_flops",
              "attn_core_share", "step_flops", "step_attn_core_flops", "step_attn_proj_flops",
              "step_mlp_flops", "activation_bytes_per_layer", "activation_bytes", "peak_bytes", "peak_high_bytes",
              "fits", "layout_valid", "attention_dominates", "dense_crossover_seq", "moe_crossover_seq"};
  for (const ScalingRow& r : rows) {
    t.rows.push_back({std::to_string(r.seq_length), fmt::format("{:.10g}", r.layer_attn_core),
                      fmt::format("{:.10g}", r.layer_attn_proj), fmt::format("{:.10g}", r.layer_mlp),
                      fmt::format("{:.6f}", r.attn_core_share), fmt::format("{:.10g}", r.step_flops),
                      fmt::format("{:.10g}", r.step_attn_core), fmt::format("{:.10g}", r.step_attn_proj),
                      fmt::format("{:.10g}", r.step_mlp), fmt::format("{:.10g}", r.activation_bytes_per_layer),
                      fmt::format("{:.10g}", r.activation_bytes), fmt::format("{:.10g}", r.peak_bytes),
                      fmt::format("{:.10g}", r.peak_high_bytes),
                      r.fits ? "true" : "false", r.layout_valid ? "true" : "false",
                      r.attention_dominates ? "true" : "false", fmt::format("{:.1f}", x.dense_seq),
                      fmt::format("{:.1f}", x.moe_seq)});
  }
  return t;
}

nlohmann::ordered_json scaling_json(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["scenario"] = s.name;
  j["model"] = s.model.name;
  j["causal_halved"] = s.flop_convention.causal_halved;
  j["crossover"] = {{"dense_seq", x.dense_seq}, {"moe_seq", x.moe_seq}};
  auto arr = nlohmann::ordered_json::array();
  for (const ScalingRow& r : rows) {
    arr.push_back(nlohmann::ordered_json{
        {"seq_length", r.seq_length},
        {"layer", {{"attn_core_flops", r.layer_attn_core}, {"attn_proj_flops", r.layer_attn_proj},
                   {"mlp_flops", r.layer_mlp}, {"attn_core_share", r.attn_core_share}}},
        {"step", {{"flops", r.step_flops}, {"attn_core_flops", r.step_attn_core},
                  {"attn_proj_flops", r.step_attn_proj}, {"mlp_flops", r.step_mlp}}},
        {"memory", {{"layout_valid", r.layout_valid}, {"activation_bytes_per_layer", r.activation_bytes_per_layer},
                    {"activation_bytes", r.activation_bytes}, {"peak_bytes", r.peak_bytes}, {"peak_high_bytes", r.peak_high_bytes}, {"fits", r.fits}}},
        {"attention_dominates", r.attention_dominates}});
  }
  j["rows"] = arr;
  return j;
}

}  // namespace lcm::report
