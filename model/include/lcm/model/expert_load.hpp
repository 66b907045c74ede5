// Expert loads under a routing distribution: expert popularity (Zipf), the probability that
// a token's top-k set holds each expert, and what a skewed routing loads on the busiest
// expert-parallel rank (the schedule's and the memory model's model.moe_routing_skew).
// Pure functions, no I/O; routing.hpp builds the dropped-token statistics on them.
#pragma once

#include <vector>

namespace lcm {

// ---------------------------------------------------------------------------------
// Routing distributions.
// ---------------------------------------------------------------------------------

// w / sum(w). Precondition: a positive sum.
std::vector<double> normalised_weights(const std::vector<double>& w);

// Expert popularity p_i proportional to 1 / i^s (i = 1..E), normalised to sum 1.
// s = 0 is uniform.
std::vector<double> zipf_weights(int experts, double s);

// Probability q_e that a token's top-k set contains expert e when the k distinct experts
// are drawn without replacement with probabilities proportional to `weights` (successive
// sampling, the Plackett-Luce / Gumbel-top-k law). Sum of q_e = k. Exact up to
// quadrature error (< 1e-12 absolute; docs/moe-routing.md): with exponential clocks
// X_j ~ Exp(p_j), e is in the top-k iff fewer than k other clocks ring before X_e, so
//   q_e = integral_0^inf p_e exp(-p_e t) P(#{j != e : X_j < t} < k) dt,
// a Poisson-binomial tail under a one-dimensional integral. Preconditions: every
// weight > 0, 1 <= topk <= weights.size().
std::vector<double> topk_inclusion_probabilities(const std::vector<double>& weights, int topk);

// ---------------------------------------------------------------------------------
// Skewed routing over expert-parallel ranks (the scenario's model.moe_routing_skew).
// ---------------------------------------------------------------------------------

// What one routing group's tokens load on the experts, and on the busiest of the EP ranks
// holding them, in token copies per routed token (docs/moe-routing.md, "Skew in the step").
// Expert popularity is Zipf(s) (zipf_weights, top-k without replacement:
// topk_inclusion_probabilities) over a random placement: which experts a router makes
// popular is unrelated to their index, so each EP rank's block of E/ep experts (Megatron
// places them contiguously) is a uniformly random subset. Fluid expectations: expert e gets
// T * w_e copies of a group's T tokens, w_e = q_e capped at `cap_per_token` = C / T when a
// capacity drops tokens (0: dropless). The busiest rank is averaged over random placements
// (seeded Monte Carlo, the same numbers on every platform); every rank of an MoE layer waits
// for it at the combine, so it sets the layer's expert time and all-to-all volume.
struct RoutedLoad {
  double copies_per_token = 0;        // sum_e w_e: copies a routing group sends per token (k dropless)
  double busiest_factor = 1;          // E[max over EP ranks of a rank's copies] / their mean (>= 1)
  std::vector<double> busiest_loads;  // that rank's E/ep experts' w_e, largest first, averaged
};
// Preconditions: experts >= 1, 1 <= topk <= experts, zipf_s >= 0, ep >= 1 divides experts
// (or ep > experts: one expert per rank), cap_per_token >= 0. zipf_s = 0 is balanced
// routing: factor 1, every w_e = min(k/E, cap). Memoised (thread-safe): the planner asks for
// the same few (E, k, s, ep, cap) many times.
RoutedLoad routed_load(int experts, int topk, double zipf_s, int ep, double cap_per_token);

// The busiest rank's relative load summed over `layers` MoE layers whose placements are
// independent: its excess over the mean shrinks as 1/sqrt(layers) (normal approximation of
// the per-layer sums; exact for one layer). What a rank's saved activations see; a layer's
// time sees the per-layer factor.
double busiest_factor_over_layers(double factor, int layers);

}  // namespace lcm
