// MoE token routing under a capacity factor: expert capacity, the expected dropped-token
// rate for a routing distribution (balanced, Zipf-skewed, measured per-expert loads),
// computed exactly or by seeded Monte Carlo, and what each capacity factor does to the
// expert-parallel all-to-all bytes, routed-expert GEMM FLOPs and peak memory.
//
// Vocabulary (docs/reference/formulas.md §6, docs/moe-routing.md):
//   T   tokens in one routing group: the tokens one router call sees on one rank
//       (micro_batch * seq / (cp * tp) under sequence parallelism);
//   k   moe_router_topk, E num_experts, CF moe_expert_capacity_factor;
//   C   expert capacity, Megatron's get_capacity(T*k, E, CF) = ceil(T*k/E * CF);
//   n_e tokens routed to expert e in the group (sum_e n_e = T*k);
//   drop fraction = sum_e max(0, n_e - C) / (T*k), dropped token-expert assignments
//       over all assignments (Megatron's `probs` and `position` drop policies choose
//       *which* assignments go, not how many).
// Pure functions, no I/O. Fractions are in [0, 1]; bytes, FLOPs per step as in
// comm.hpp / flops.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "lcm/model/capacity.hpp"
#include "lcm/model/expert_load.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

// ---------------------------------------------------------------------------------
// Expected drops, exact.
// ---------------------------------------------------------------------------------

// E[max(0, X - c)] for X ~ Binomial(n, q), summed over the binomial pmf from the short
// side of c (log-space saddle-point pmf; the sum stops at terms below 1e-18 of it).
// Accurate to ~1e-13 relative for n up to 1e9.
double expected_binomial_excess(int64_t n, double q, int64_t c);

// Expected drop fraction E[sum_e max(0, n_e - C)] / (T*k) when every token independently
// includes expert e with probability inclusion[e] (sum = k). n_e ~ Binomial(T, q_e)
// exactly; the experts' loads are dependent (they sum to T*k), but the expectation of a
// sum is the sum of expectations, so the marginals suffice and the result is exact.
double expected_drop_fraction(const std::vector<double>& inclusion, int64_t tokens, int topk,
                              int64_t capacity);

// ---------------------------------------------------------------------------------
// Expected drops, Monte Carlo.
// ---------------------------------------------------------------------------------

struct MonteCarloOptions {
  int64_t samples = 1000;  // routings of one group of T tokens
  uint64_t seed = 1;       // std::mt19937_64 seed; same seed, same numbers
};

struct DropStats {
  double mean = 0;     // mean drop fraction over the samples
  double sd = 0;       // sample standard deviation of the per-sample drop fraction
  double ci_low = 0;   // 95% confidence interval of the mean: mean -+ 1.96 sd / sqrt(N),
  double ci_high = 0;  // clipped to [0, 1]; when no sample drops, [0, 3/N * (T - C)/T]
  int64_t samples = 0;
};

// Routes T tokens, each to k distinct experts drawn without replacement with
// probabilities proportional to `weights` (uniform weights: balanced routing), `samples`
// times; one DropStats per entry of `capacities`, all from the same sampled routings.
// Deterministic for a given seed.
std::vector<DropStats> monte_carlo_drop_fraction(const std::vector<double>& weights,
                                                 int64_t tokens, int topk,
                                                 const std::vector<int64_t>& capacities,
                                                 const MonteCarloOptions& opts);

// ---------------------------------------------------------------------------------
// Measured loads.
// ---------------------------------------------------------------------------------

// sum_e max(0, loads[e] - capacity) / sum_e loads[e]; 0 when the loads sum to 0.
double measured_drop_fraction(const std::vector<double>& loads, double capacity);

// ---------------------------------------------------------------------------------
// The capacity-factor sweep (`lcm capacity`).
// ---------------------------------------------------------------------------------

enum class RoutingKind { kBalanced, kZipf, kMeasured };
enum class DropMethod { kExact, kMonteCarlo, kMeasured };

constexpr const char* to_string(RoutingKind k) {
  switch (k) {
    case RoutingKind::kBalanced: return "balanced";
    case RoutingKind::kZipf: return "zipf";
    case RoutingKind::kMeasured: return "measured";
  }
  return "?";
}
constexpr const char* to_string(DropMethod m) {
  switch (m) {
    case DropMethod::kExact: return "exact";
    case DropMethod::kMonteCarlo: return "mc";
    case DropMethod::kMeasured: return "measured";
  }
  return "?";
}

struct CapacityOptions {
  std::vector<double> capacity_factors;  // each > 0
  RoutingKind routing = RoutingKind::kBalanced;
  double zipf_s = 0;                      // kZipf: exponent >= 0
  std::vector<double> loads;              // kMeasured: per-expert assignments, size E
  int64_t tokens = 0;                     // routing group size T; 0: routing_group_tokens
  DropMethod method = DropMethod::kExact; // ignored (kMeasured) for measured loads
  MonteCarloOptions mc;
  bool pad_to_capacity = false;           // force moe_pad_expert_input_to_capacity on
};

struct CapacityRow {
  double cf = 0;
  int64_t capacity = 0;            // C, per expert per routing group
  double drop_fraction = 0;        // expected dropped assignments / (T*k)
  double drop_ci_low = 0;          // Monte Carlo 95% CI; equal to drop_fraction otherwise
  double drop_ci_high = 0;
  double kept_per_expert = 0;      // assignments an expert computes, mean over experts: T*k*(1-drop)/E
  double slot_fill = 0;            // kept / (E*C): share of capacity slots holding a token
  double processed_fraction = 0;   // expert rows computed / (T*k): (1-drop), or E*C/(T*k) when padded
  // Expert-parallel traffic per GPU per step (busiest stage of the comm model).
  double a2a_bytes = 0;            // all-to-all items: dispatch + combine, fwd + bwd
  double a2a_bytes_per_layer_microbatch = 0;  // a2a_bytes / (MoE layers on that stage * micro-batches)
  double ep_bytes = 0;             // every EP item (a2a + ETP all-gather / reduce-scatter)
  double expert_flops = 0;         // routed-expert GEMM FLOPs per step, all GPUs
  bool layout_valid = true;        // scenario with this CF passes validate_scenario
  double peak_bytes = 0;           // estimate() peak memory per GPU, worst stage
  double peak_high_bytes = 0;      // Memory::peak_high_bytes: what `fits` compares with HBM
  bool fits = true;
  bool may_fit = true;             // Memory::may_fit (tight: may_fit && !fits)
};

// Where T came from: the scenario's routing group, --tokens, or the measured loads' total / k.
enum class TokensSource { kScenario, kOverride, kLoads };

constexpr const char* to_string(TokensSource t) {
  switch (t) {
    case TokensSource::kScenario: return "scenario";
    case TokensSource::kOverride: return "--tokens";
    case TokensSource::kLoads: return "loads";
  }
  return "?";
}

// How the dispatcher's EP traffic follows the routed slots.
enum class EpTrafficRule {
  kScalesWithSlots,  // alltoall: every EP item carries the routed slots (kept, or E*C padded)
  kUnchanged,        // allgather: every token is gathered whether its experts keep it or not
  kUpperBound,       // flex (DeepEP): one copy per (token, destination rank); drops shrink it
                     // by less than the kept fraction, so the dropless volume is kept as a bound
};

struct CapacitySweep {
  RoutingKind routing = RoutingKind::kBalanced;
  DropMethod method = DropMethod::kExact;
  double zipf_s = 0;
  MonteCarloOptions mc;
  int experts = 0;
  int topk = 0;
  int64_t tokens = 0;              // T used for the drop statistics
  TokensSource tokens_source = TokensSource::kScenario;
  int64_t scenario_tokens = 0;     // routing_group_tokens of the scenario (volumes are for it)
  double measured_assignments = 0; // kMeasured: sum of the loads as given
  bool pad_to_capacity = false;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  EpTrafficRule ep_rule = EpTrafficRule::kScalesWithSlots;
  int ep = 1;
  std::vector<double> inclusion;   // q_e per expert (kMeasured: loads / sum * k)
  // Dropless reference (capacity factor unset), from estimate().
  double dropless_a2a_bytes = 0;
  double dropless_a2a_bytes_per_layer_microbatch = 0;
  double dropless_ep_bytes = 0;
  double dropless_expert_flops = 0;
  double dropless_peak_bytes = 0;
  double dropless_peak_high_bytes = 0;  // what dropless_fits compares with HBM
  bool dropless_fits = true;
  bool dropless_may_fit = true;
  int moe_layers_on_stage = 0;     // busiest stage of the comm model
  int micro_batches = 1;
  std::vector<CapacityRow> rows;   // one per capacity factor, in the order given
};

// Preconditions: validate_scenario(s) is empty; s.model.num_experts > 0; every capacity
// factor > 0; for kMeasured loads.size() == num_experts with non-negative entries and a
// positive sum; for kZipf zipf_s >= 0; mc.samples > 0.
CapacitySweep capacity_sweep(const Scenario& s, const CapacityOptions& o);

}  // namespace lcm
