// Scaling table across sequence lengths and the attention-vs-MLP crossover.
//
// Per layer and per sequence, forward attention-core FLOPs grow as c_attn·s² and MLP
// (or active-expert) FLOPs as c_mlp·s, both read off layer_forward_flops (flops.cpp,
// the formulas' only home). The crossover is therefore s* = c_mlp / c_attn. For a dense
// GQA/MHA layer with causal halving, attention core is 2·s²·a·d_h and the MLP 2·s·r·h·f,
// so s* = r·h·f / (a·d_h) (r = 3 for SwiGLU, 2 otherwise; half that without causal
// halving); for an MoE layer f becomes k·f_e + f_s (docs/scaling.md derives both).
#include "lcm/model/scaling.hpp"

#include "lcm/model/estimate.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/limits.hpp"

namespace lcm {

namespace {

constexpr int64_t kProbeSeq = 4096;  // any s > 0 gives the same coefficients

double crossover_for(const ModelSpec& model, bool moe_layer, bool causal_halved) {
  if (windowed_layer_share(model, moe_layer) <= 0) {
    const LayerFlops f = layer_forward_flops(model, kProbeSeq, moe_layer, causal_halved);
    const double s = static_cast<double>(kProbeSeq);
    const double c_attn = f.attn_core / (s * s);
    const double c_mlp = f.mlp / s;
    return c_attn > 0 ? c_mlp / c_attn : 0.0;
  }
  // Sliding-window layers: a windowed layer's core grows linearly once s passes the window,
  // so attention is no longer c_attn s^2 and the crossover is solved for: attention minus MLP
  // grows with s (its per-token attention never shrinks), so bisect on the token count.
  // Every layer windowed may never cross (per token, 2 W pairs against the MLP): 0.
  const auto attention_leads = [&](int64_t s) {
    const LayerFlops f = layer_forward_flops(model, s, moe_layer, causal_halved);
    return f.attn_core > f.mlp;
  };
  int64_t lo = 1, hi = limits::kSeqLength;
  if (!attention_leads(hi)) return 0.0;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (attention_leads(mid) ? hi : lo) = mid;
  }
  return static_cast<double>(hi);
}

int count_moe_layers(const ModelSpec& model) {
  int n = 0;
  for (int i = 0; i < model.num_layers; ++i) n += is_moe_layer(model, i) ? 1 : 0;
  return n;
}

}  // namespace

Crossover attention_mlp_crossover(const ModelSpec& model, bool causal_halved) {
  Crossover c;
  const int moe = count_moe_layers(model);
  if (moe < model.num_layers) c.dense_seq = crossover_for(model, false, causal_halved);
  if (moe > 0) c.moe_seq = crossover_for(model, true, causal_halved);
  return c;
}

std::vector<ScalingRow> scaling_table(const Scenario& base, const std::vector<int64_t>& seqs) {
  std::vector<ScalingRow> rows;
  rows.reserve(seqs.size());
  const ModelSpec& model = base.model;
  const int moe = count_moe_layers(model);
  const int dense = model.num_layers - moe;
  const bool causal_halved = base.flop_convention.causal_halved;
  for (int64_t seq : seqs) {
    ScalingRow r;
    r.seq_length = seq;
    // Per layer, averaged over the model's mix of dense and MoE layers.
    const LayerFlops fd = layer_forward_flops(model, seq, false, causal_halved);
    const LayerFlops fm = layer_forward_flops(model, seq, true, causal_halved);
    const double wd = static_cast<double>(dense) / model.num_layers;
    const double wm = static_cast<double>(moe) / model.num_layers;
    r.layer_attn_core = wd * fd.attn_core + wm * fm.attn_core;
    r.layer_attn_proj = wd * fd.attn_proj + wm * fm.attn_proj;
    r.layer_mlp = wd * fd.mlp + wm * fm.mlp;
    const double layer_total = r.layer_attn_core + r.layer_attn_proj + r.layer_mlp;
    r.attn_core_share = layer_total > 0 ? r.layer_attn_core / layer_total : 0;
    r.attention_dominates = r.layer_attn_core > r.layer_mlp;

    Scenario s = base;
    s.training.seq_length = seq;
    r.layout_valid = validate_scenario(s).empty();
    // FLOPs do not depend on the layout; compute them even where the layout is invalid.
    const Mesh mesh = r.layout_valid ? derive_mesh(s) : Mesh{};
    const Flops fl = count_flops(s, r.layout_valid ? mesh : derive_mesh(base));
    r.step_flops = fl.per_step;
    const FlopTerms& fw = fl.fwd;
    const FlopTerms& bw = fl.bwd;
    r.step_attn_core = fw.attn_core + bw.attn_core;
    r.step_attn_proj = fw.attn_proj + bw.attn_proj;
    r.step_mlp = fw.dense_mlp + bw.dense_mlp + fw.routed_experts + bw.routed_experts +
                 fw.shared_experts + bw.shared_experts;
    if (r.layout_valid) {
      const Estimate e = estimate(s, EstimateOptions{.with_time = false});
      const StageMemory& worst = e.memory.stages[static_cast<size_t>(e.memory.worst_stage)];
      const StageLayers& wl = e.stage_layers[static_cast<size_t>(e.memory.worst_stage)];
      r.activation_bytes = worst.activations;
      r.activation_bytes_per_layer =
          wl.num_layers > 0 ? worst.activations_per_microbatch / wl.num_layers : 0;
      r.peak_bytes = e.memory.peak_bytes;
      r.peak_high_bytes = e.memory.peak_high_bytes;
      r.fits = e.memory.fits;
      r.may_fit = e.memory.may_fit;
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace lcm
