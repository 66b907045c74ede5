// MoE routing under a capacity factor: expected drops (exact and Monte Carlo) and the
// sweep over capacity factors (capacity itself: capacity.cpp). The math is derived in
// docs/moe-routing.md.
//
// defines: expected_binomial_excess, expected_drop_fraction, monte_carlo_drop_fraction,
//          measured_drop_fraction, capacity_sweep (the routing distributions: expert_load.cpp)
#include "lcm/model/routing.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <random>

#include "lcm/model/estimate.hpp"

namespace lcm {
namespace {

constexpr double kLn2Pi = 1.8378770664093454836;  // ln(2*pi)

// ---------------------------------------------------------------------------------
// Binomial pmf in log space, saddle-point form (Loader 2000, "Fast and accurate
// computation of binomial probabilities"): no cancellation between lgamma terms, so the
// relative error of one pmf value stays ~1e-14 for n up to 1e9.
// ---------------------------------------------------------------------------------

// ln(n!) - ln(sqrt(2 pi n) (n/e)^n), the Stirling-series remainder.
double stirling_error(double n) {
  if (n <= 15.0) return std::lgamma(n + 1.0) - (n + 0.5) * std::log(n) + n - 0.5 * kLn2Pi;
  // Stirling series 1/(12n) - 1/(360n^3) + 1/(1260n^5) - 1/(1680n^7) + 1/(1188n^9).
  const double n2 = 1.0 / (n * n);
  return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - n2 / 1188) * n2) * n2) * n2) / n;
}

// x ln(x/m) + m - x, accurate when x is close to m.
double deviance_term(double x, double m) {
  if (std::fabs(x - m) < 0.1 * (x + m)) {
    const double v = (x - m) / (x + m);
    double s = (x - m) * v;
    double ej = 2 * x * v;
    const double v2 = v * v;
    for (int j = 1; j < 1000; ++j) {
      ej *= v2;
      const double s1 = s + ej / (2 * j + 1);
      if (s1 == s) return s;
      s = s1;
    }
    return s;
  }
  return x * std::log(x / m) + m - x;
}

// ln P(X = x), X ~ Binomial(n, q), 0 < q < 1, 0 <= x <= n.
double binomial_log_pmf(int64_t x, int64_t n, double q) {
  const double dn = static_cast<double>(n), dx = static_cast<double>(x);
  if (x == 0) return dn * std::log1p(-q);
  if (x == n) return dn * std::log(q);
  const double lc = stirling_error(dn) - stirling_error(dx) - stirling_error(dn - dx) -
                    deviance_term(dx, dn * q) - deviance_term(dn - dx, dn * (1 - q));
  const double lf = kLn2Pi + std::log(dx) + std::log1p(-dx / dn);
  return lc - 0.5 * lf;
}

constexpr double kRelativeCutoff = 1e-18;  // stop summing when a term is this small vs the sum

// ---------------------------------------------------------------------------------
// Random numbers: std::mt19937_64 (its output sequence is fixed by the standard) with our
// own integer and real mappings, so a seed gives the same numbers on every platform.
// ---------------------------------------------------------------------------------
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t bits() { return g_(); }
  double uniform01() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform in [0, n), unbiased (Lemire 2019, multiply-and-reject).
  uint64_t below(uint64_t n) {
    __extension__ typedef unsigned __int128 u128;
    u128 m = static_cast<u128>(g_()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<u128>(g_()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  std::mt19937_64 g_;
};

// Walker / Vose alias table: O(1) draws from a discrete distribution.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& p) : prob_(p.size()), alias_(p.size()) {
    const size_t n = p.size();
    std::vector<double> scaled(n);
    std::vector<size_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = p[i] * static_cast<double>(n);
      (scaled[i] < 1.0 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const size_t s = small.back(), l = large.back();
      small.pop_back();
      prob_[s] = scaled[s];
      alias_[s] = l;
      scaled[l] = (scaled[l] + scaled[s]) - 1.0;
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (size_t i : large) prob_[i] = 1.0;
    for (size_t i : small) prob_[i] = 1.0;  // rounding leftovers
  }
  // One 64-bit draw: the high 32 bits pick the column (multiply-shift, bias < E / 2^32),
  // the low 32 bits are the coin (resolution 2^-32).
  size_t draw(Rng& rng) const {
    const uint64_t r = rng.bits();
    const auto i = static_cast<size_t>(((r >> 32) * prob_.size()) >> 32);
    return static_cast<double>(r & 0xffffffffu) * 0x1.0p-32 < prob_[i] ? i : alias_[i];
  }

 private:
  std::vector<double> prob_;
  std::vector<size_t> alias_;
};

// Draws one token's k distinct experts, without replacement, proportional to p.
// Rejection from the alias table while the chosen experts hold < half the mass (fewer
// than 2 draws expected per pick), then a linear scan over the rest; both give exactly
// the conditional law p_e / (1 - chosen mass) over the unchosen experts.
class TopkSampler {
 public:
  TopkSampler(const std::vector<double>& p, int k)
      : p_(p), k_(k), alias_(p), stamp_(p.size(), -1),
        uniform_(std::all_of(p.begin(), p.end(), [&](double x) { return x == p[0]; })),
        perm_(p.size()) {
    std::iota(perm_.begin(), perm_.end(), 0);
  }

  // Adds the token's k experts to `loads`; `token` must differ between calls.
  void route(Rng& rng, int64_t token, std::vector<int64_t>& loads) {
    const size_t e = p_.size();
    if (uniform_) {  // partial Fisher-Yates: the first k entries are a uniform k-subset
      for (int j = 0; j < k_; ++j) {
        const size_t r = static_cast<size_t>(j) + rng.below(e - static_cast<size_t>(j));
        std::swap(perm_[static_cast<size_t>(j)], perm_[r]);
        ++loads[perm_[static_cast<size_t>(j)]];
      }
      return;
    }
    double chosen = 0;
    for (int j = 0; j < k_; ++j) {
      size_t pick = 0;
      if (chosen < 0.5) {
        do pick = alias_.draw(rng);
        while (stamp_[pick] == token);
      } else {
        pick = scan(rng.uniform01() * (1.0 - chosen), token);
      }
      stamp_[pick] = token;
      chosen += p_[pick];
      ++loads[pick];
    }
  }

 private:
  size_t scan(double u, int64_t token) const {
    size_t last = 0;
    for (size_t i = 0; i < p_.size(); ++i) {
      if (stamp_[i] == token) continue;
      last = i;
      u -= p_[i];
      if (u < 0) return i;
    }
    return last;  // u left over from rounding: the last unchosen expert
  }

  std::vector<double> p_;
  int k_;
  AliasTable alias_;
  std::vector<int64_t> stamp_;  // token that last chose the expert
  bool uniform_;
  std::vector<size_t> perm_;
};

}  // namespace

// ---------------------------------------------------------------------------------
// Expected drops, exact.
// ---------------------------------------------------------------------------------

double expected_binomial_excess(int64_t n, double q, int64_t c) {
  if (n <= 0 || q <= 0) return c < 0 ? static_cast<double>(-c) : 0.0;
  if (c >= n) return 0.0;
  if (q >= 1) return static_cast<double>(n - c);
  const double mean = static_cast<double>(n) * q;
  if (c < 0) return mean - static_cast<double>(c);
  const double odds = q / (1 - q);
  if (static_cast<double>(c) >= mean) {
    // Upper tail: sum_{x > c} (x - c) P(x); c >= mean >= mode - 1, so P falls with x.
    double sum = 0;
    double pmf = std::exp(binomial_log_pmf(c + 1, n, q));
    for (int64_t x = c + 1; x <= n && pmf > 0; ++x) {
      const double term = static_cast<double>(x - c) * pmf;
      sum += term;
      if (term < kRelativeCutoff * sum) break;
      pmf *= static_cast<double>(n - x) / static_cast<double>(x + 1) * odds;
    }
    return sum;
  }
  // c below the mean: E[max(0, X - c)] = (mean - c) + E[max(0, c - X)], the second term
  // from the short lower tail; P falls as x decreases from c - 1 (c - 1 < mode).
  double sum = mean - static_cast<double>(c);
  if (c == 0) return sum;
  double pmf = std::exp(binomial_log_pmf(c - 1, n, q));
  for (int64_t x = c - 1; x >= 0 && pmf > 0; --x) {
    const double term = static_cast<double>(c - x) * pmf;
    sum += term;
    if (term < kRelativeCutoff * sum) break;
    pmf *= static_cast<double>(x) / static_cast<double>(n - x + 1) / odds;
  }
  return sum;
}

double expected_drop_fraction(const std::vector<double>& inclusion, int64_t tokens, int topk,
                              int64_t capacity) {
  if (tokens <= 0 || topk <= 0) return 0.0;
  double excess = 0, last_q = -1, last_excess = 0;
  for (double q : inclusion) {  // balanced routing: one binomial, reused
    if (q != last_q) {
      last_excess = expected_binomial_excess(tokens, q, capacity);
      last_q = q;
    }
    excess += last_excess;
  }
  return excess / (static_cast<double>(tokens) * topk);
}

// ---------------------------------------------------------------------------------
// Expected drops, Monte Carlo.
// ---------------------------------------------------------------------------------

std::vector<DropStats> monte_carlo_drop_fraction(const std::vector<double>& weights,
                                                 int64_t tokens, int topk,
                                                 const std::vector<int64_t>& capacities,
                                                 const MonteCarloOptions& opts) {
  assert(tokens > 0 && topk >= 1 && static_cast<size_t>(topk) <= weights.size());
  assert(opts.samples > 0);
  const std::vector<double> p = normalised_weights(weights);
  TopkSampler sampler(p, topk);
  Rng rng(opts.seed);
  const size_t nc = capacities.size();
  std::vector<double> mean(nc, 0.0), m2(nc, 0.0);  // Welford accumulators
  std::vector<int64_t> loads(p.size());
  const double assignments = static_cast<double>(tokens) * topk;
  int64_t token_id = 0;
  for (int64_t s = 0; s < opts.samples; ++s) {
    std::fill(loads.begin(), loads.end(), 0);
    for (int64_t t = 0; t < tokens; ++t) sampler.route(rng, token_id++, loads);
    for (size_t c = 0; c < nc; ++c) {
      int64_t excess = 0;
      for (int64_t n : loads) excess += std::max<int64_t>(0, n - capacities[c]);
      const double d = static_cast<double>(excess) / assignments;
      const double delta = d - mean[c];
      mean[c] += delta / static_cast<double>(s + 1);
      m2[c] += delta * (d - mean[c]);
    }
  }
  std::vector<DropStats> out(nc);
  const auto n = static_cast<double>(opts.samples);
  for (size_t c = 0; c < nc; ++c) {
    DropStats& st = out[c];
    st.samples = opts.samples;
    st.mean = mean[c];
    st.sd = opts.samples > 1 ? std::sqrt(m2[c] / (n - 1)) : 0.0;
    const double half = 1.96 * st.sd / std::sqrt(n);
    st.ci_low = std::max(0.0, st.mean - half);
    st.ci_high = std::min(1.0, st.mean + half);
    if (st.mean == 0.0) {
      // No sample dropped anything: the normal interval collapses to [0, 0]. Bound the
      // mean instead by P(any drop) <= 3/N (95%, rule of three) times the largest drop
      // fraction possible, (T - C)/T (k experts filled to T tokens each).
      const double cap = static_cast<double>(capacities[c]);
      const double worst = std::max(0.0, (static_cast<double>(tokens) - cap) / static_cast<double>(tokens));
      st.ci_high = std::min(1.0, 3.0 / n * worst);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Measured loads.
// ---------------------------------------------------------------------------------

double measured_drop_fraction(const std::vector<double>& loads, double capacity) {
  double total = 0, excess = 0;
  for (double l : loads) {
    total += l;
    excess += std::max(0.0, l - capacity);
  }
  return total > 0 ? excess / total : 0.0;
}

// ---------------------------------------------------------------------------------
// The capacity-factor sweep.
// ---------------------------------------------------------------------------------
namespace {

// Bytes sent per GPU per step on the expert-parallel dimension (dispatch + combine, fwd +
// bwd, as the comm model counts them for its busiest stage): all-to-all items only, or
// every EP item (with the all-to-all dispatcher: the ETP all-gather / reduce-scatter of
// the received tokens too).
double ep_bytes(const Comm& c, bool all_to_all_only) {
  double bytes = 0;
  for (int i = 0; i < c.num_items; ++i) {
    const CommItem& it = c.items[static_cast<size_t>(i)];
    if (it.dim == CommDim::kEp && (!all_to_all_only || it.kind == Collective::kAllToAll))
      bytes += it.sent_bytes;
  }
  return bytes;
}

// Routed-expert GEMM FLOPs per step under the scenario's convention. count_flops counts
// the top-k active assignments of every token (dropless).
double routed_expert_flops(const Scenario& s, const Flops& f) {
  double v = f.fwd.routed_experts + f.bwd.routed_experts;
  if (s.flop_convention.include_recompute) v += f.recompute.routed_experts;
  return v;
}

// The routing group: expert weights p (for sampling), the measured loads scaled to the
// group, and T*k. Fills the sweep's T, its source and the inclusion probabilities q.
struct GroupRouting {
  std::vector<double> weights;
  std::vector<double> scaled_loads;
  double assignments = 0;
};

GroupRouting set_up_routing(const CapacityOptions& o, CapacitySweep& sw) {
  const int e = sw.experts, k = sw.topk;
  GroupRouting g;
  g.weights.assign(static_cast<size_t>(e), 1.0 / e);
  if (o.routing == RoutingKind::kMeasured) {
    assert(o.loads.size() == static_cast<size_t>(e));
    sw.measured_assignments = std::accumulate(o.loads.begin(), o.loads.end(), 0.0);
    assert(sw.measured_assignments > 0);
    sw.tokens_source = o.tokens > 0 ? TokensSource::kOverride : TokensSource::kLoads;
    sw.tokens = o.tokens > 0 ? o.tokens : std::llround(sw.measured_assignments / k);
    g.assignments = o.tokens > 0 ? static_cast<double>(o.tokens) * k : sw.measured_assignments;
    g.scaled_loads = o.loads;
    for (double& l : g.scaled_loads) l *= g.assignments / sw.measured_assignments;
    for (double l : o.loads) sw.inclusion.push_back(l / sw.measured_assignments * k);
    return g;
  }
  sw.tokens_source = o.tokens > 0 ? TokensSource::kOverride : TokensSource::kScenario;
  sw.tokens = o.tokens > 0 ? o.tokens : sw.scenario_tokens;
  g.assignments = static_cast<double>(sw.tokens) * k;
  if (o.routing == RoutingKind::kZipf) {
    g.weights = zipf_weights(e, o.zipf_s);
    sw.inclusion = topk_inclusion_probabilities(g.weights, k);
  } else {
    sw.inclusion.assign(static_cast<size_t>(e), static_cast<double>(k) / e);
  }
  return g;
}

// Drop fraction (mean and CI) per capacity, for the chosen routing and method.
std::vector<DropStats> drop_stats(const CapacityOptions& o, const CapacitySweep& sw, const GroupRouting& g,
                                  const std::vector<int64_t>& caps) {
  if (sw.method == DropMethod::kMonteCarlo)
    return monte_carlo_drop_fraction(g.weights, sw.tokens, sw.topk, caps, o.mc);
  std::vector<DropStats> out(caps.size());
  for (size_t i = 0; i < caps.size(); ++i) {
    const double d = sw.method == DropMethod::kMeasured
                         ? measured_drop_fraction(g.scaled_loads, static_cast<double>(caps[i]))
                         : expected_drop_fraction(sw.inclusion, sw.tokens, sw.topk, caps[i]);
    out[i] = DropStats{d, 0.0, d, d, 0};
  }
  return out;
}

// The dropless scenario's traffic, routed-expert FLOPs and memory: what every capacity
// factor scales.
void set_dropless_reference(const Scenario& s, CapacitySweep& sw) {
  Scenario base = s;
  base.model.moe_expert_capacity_factor = 0;
  base.model.moe_pad_expert_input_to_capacity = false;
  const Estimate eb = estimate(base);
  sw.ep = eb.mesh.ep;
  sw.ep_rule = sw.dispatcher == Dispatcher::kAllToAll    ? EpTrafficRule::kScalesWithSlots
               : sw.dispatcher == Dispatcher::kAllGather ? EpTrafficRule::kUnchanged
                                                         : EpTrafficRule::kUpperBound;
  sw.dropless_a2a_bytes = ep_bytes(eb.comm, /*all_to_all_only=*/true);
  sw.dropless_ep_bytes = ep_bytes(eb.comm, /*all_to_all_only=*/false);
  sw.dropless_expert_flops = routed_expert_flops(s, eb.flops);
  sw.dropless_peak_bytes = eb.memory.peak_bytes;
  sw.dropless_peak_high_bytes = eb.memory.peak_high_bytes;
  sw.dropless_fits = eb.memory.fits;
  sw.dropless_may_fit = eb.memory.may_fit;
  sw.micro_batches = std::max(eb.mesh.num_micro_batches, 1);
  if (!eb.stage_layers.empty()) {
    const int last = static_cast<int>(eb.stage_layers.size()) - 1;
    sw.moe_layers_on_stage =
        eb.stage_layers[static_cast<size_t>(std::clamp(eb.comm.stage, 0, last))].num_moe_layers;
  }
  const double per_layer_mb = static_cast<double>(std::max(sw.moe_layers_on_stage, 1)) * sw.micro_batches;
  sw.dropless_a2a_bytes_per_layer_microbatch = sw.dropless_a2a_bytes / per_layer_mb;
}

CapacityRow make_row(const Scenario& s, const CapacitySweep& sw, double cf, int64_t cap, const DropStats& drop,
                     double assignments) {
  CapacityRow r;
  r.cf = cf;
  r.capacity = cap;
  r.drop_fraction = drop.mean;
  r.drop_ci_low = drop.ci_low;
  r.drop_ci_high = drop.ci_high;
  const double kept = assignments * (1.0 - r.drop_fraction);
  const double slots = static_cast<double>(sw.experts) * static_cast<double>(cap);
  r.kept_per_expert = kept / sw.experts;
  r.slot_fill = slots > 0 ? std::min(1.0, kept / slots) : 0.0;
  r.processed_fraction = assignments > 0 ? (sw.pad_to_capacity ? slots : kept) / assignments : 0.0;
  const double traffic = sw.ep_rule == EpTrafficRule::kScalesWithSlots ? r.processed_fraction : 1.0;
  r.a2a_bytes = sw.dropless_a2a_bytes * traffic;
  r.a2a_bytes_per_layer_microbatch = sw.dropless_a2a_bytes_per_layer_microbatch * traffic;
  r.ep_bytes = sw.dropless_ep_bytes * traffic;
  r.expert_flops = sw.dropless_expert_flops * r.processed_fraction;

  Scenario sc = s;
  sc.model.moe_expert_capacity_factor = cf;
  sc.model.moe_pad_expert_input_to_capacity = sw.pad_to_capacity;
  r.layout_valid = validate_scenario(sc).empty();
  if (r.layout_valid) {
    const Estimate ec = estimate(sc);
    r.peak_bytes = ec.memory.peak_bytes;
    r.peak_high_bytes = ec.memory.peak_high_bytes;
    r.fits = ec.memory.fits;
    r.may_fit = ec.memory.may_fit;
  } else {
    r.fits = r.may_fit = false;
  }
  return r;
}

}  // namespace

CapacitySweep capacity_sweep(const Scenario& s, const CapacityOptions& o) {
  assert(has_moe(s.model) && s.model.moe_router_topk >= 1);
  CapacitySweep sw;
  sw.routing = o.routing;
  sw.method = o.routing == RoutingKind::kMeasured ? DropMethod::kMeasured : o.method;
  sw.zipf_s = o.routing == RoutingKind::kZipf ? o.zipf_s : 0.0;
  sw.mc = o.mc;
  sw.experts = s.model.num_experts;
  sw.topk = s.model.moe_router_topk;
  sw.scenario_tokens = routing_group_tokens(s, derive_mesh(s));
  sw.pad_to_capacity = o.pad_to_capacity || s.model.moe_pad_expert_input_to_capacity;
  sw.dispatcher = s.model.moe_token_dispatcher_type;
  const GroupRouting g = set_up_routing(o, sw);

  std::vector<int64_t> caps;
  for (double cf : o.capacity_factors) {
    assert(cf > 0);
    caps.push_back(sw.tokens_source == TokensSource::kLoads ? capacity_for_assignments(g.assignments, sw.experts, cf)
                                                            : capacity(sw.tokens, sw.topk, sw.experts, cf));
  }
  const std::vector<DropStats> drops = drop_stats(o, sw, g, caps);
  set_dropless_reference(s, sw);
  for (size_t i = 0; i < caps.size(); ++i)
    sw.rows.push_back(make_row(s, sw, o.capacity_factors[i], caps[i], drops[i], g.assignments));
  return sw;
}

}  // namespace lcm
