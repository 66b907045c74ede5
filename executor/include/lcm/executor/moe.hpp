// `lcm-exec bench moe`: the problem, the synthetic routing law, and the host references
// of routing, capacity/drop and permutation. Nothing here needs a GPU.
//
// Routing (per rank, one router call over T tokens): logits l[t, e] = (X Wr)[t, e] +
// r[t, e], where r is the synthetic routing term. With skew zipf:S (balanced = zipf:0),
// r[t, e] = log p_e + G[t, e], p_e proportional to 1 / (e+1)^S (lcm::zipf_weights) and G
// i.i.d. standard Gumbel from (seed, global token, expert): the top-k of log p + G is
// exactly k experts drawn without replacement with probabilities p (Gumbel-top-k), the law
// `lcm capacity --skew zipf:S` assumes. The router GEMM adds a small term (weights scaled
// so its logits have a standard deviation of about 0.03), so the law holds up to that.
// With skew `router` there is no synthetic term.
//
// Scores (Megatron topk_softmax_with_capacity): softmax: top-k of the logits, gate weights
// = softmax over the k selected logits (moe_router_pre_softmax off); sigmoid: s = sigmoid(l),
// top-k of s, weights s / sum of the selected s when k > 1 (DeepSeek-V3). Group-limited
// top-k (Megatron group_limited_topk): the E experts form G groups; a group's score is the
// sum of its top (k / TG) selection scores (softmax: logits, sigmoid: s); the TG best groups
// are kept and the top-k is taken among their experts. Ties go to the lower index.
//
// Capacity (Megatron get_capacity, lcm::capacity): C = ceil(T k / E x CF) per expert per
// routing group. Drops per expert: `probs` keeps the C assignments with the highest gate
// weight (ties: earlier token first), `position` the first C in token order. Kept
// assignments are laid out expert-major, token order within an expert: row(t, j) =
// offset(e) + rank among e's kept assignments; experts of EP rank r are [r E/ep, (r+1) E/ep),
// so the layout is also destination-major for the all-to-all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lcm/executor/options.hpp"

namespace lcm::exec {

struct MoeProblem {
  int64_t tokens = 0, hidden = 0, ffn = 0;
  int experts = 0, topk = 0, ep = 1;
  int groups = 0, topk_groups = 0;
  RouterScore score = RouterScore::kSoftmax;
  DropPolicy policy = DropPolicy::kProbs;
  double cf = 0;  // 0: dropless
  RoutingSkew skew;

  int local_experts() const { return experts / ep; }
  int64_t assignments() const { return tokens * topk; }
  int64_t capacity() const;  // lcm::capacity(T, k, E, CF); -1 when dropless
  std::string config_text() const;  // "T8192.h4096.f14336.E8.k2.ep2.softmax"
  std::string point_text() const;   // config + ".cf1.25.probs.zipf:1.2" / ".dropless.balanced"
  void validate() const;            // throws UsageError (experts % ep, ...)
  // Bytes of one buffer set (the inputs X and dOut; every intermediate buffer is shared).
  double set_bytes() const { return 4.0 * static_cast<double>(tokens * hidden); }
};

// log p_e of the routing law (zipf:S, balanced = all equal); empty for `router`.
std::vector<float> routing_log_weights(const MoeProblem& p);
// Expected drop fraction under the routing law (lcm::expected_drop_fraction on the Gumbel
// top-k inclusion probabilities); 0 when dropless; NaN for `router`.
double expected_drop_fraction(const MoeProblem& p);

// Scales of the deterministic inputs: X, dOut uniform in [-1, 1); Wr, W1, W2 uniform times
// these, rounded to bf16.
float router_weight_scale(const MoeProblem& p);
float fc1_weight_scale(const MoeProblem& p);
float fc2_weight_scale(const MoeProblem& p);

// One token's routing from its final logits (E floats). Reference of the GPU kernel.
struct TokenRoute {
  std::vector<int32_t> idx;  // k experts, in selection order (best first)
  std::vector<float> w;      // gate weights
};
TokenRoute route_token(const float* logits, const MoeProblem& p);

// Capacity, drops and the permutation of one routing group from the top-k (T x k). Reference
// of the GPU's histogram / drop / prefix-sum / scatter.
struct Dispatch {
  std::vector<int64_t> counts;  // assignments per expert, before drops (the loads)
  std::vector<int64_t> kept;    // per expert, after drops
  std::vector<int64_t> offset;  // first row of each expert (exclusive scan of kept)
  std::vector<int32_t> row;     // per assignment t * k + j: its row, -1 when dropped
  int64_t dropped = 0;
  double drop_fraction() const;
};
Dispatch reference_dispatch(const std::vector<int32_t>& idx, const std::vector<float>& w, int64_t tokens, int topk,
                            int experts, int64_t capacity, DropPolicy policy);

// The per-expert loads file `lcm capacity --loads FILE` reads: '#' comment lines, then one
// non-negative count per line, expert 0 first.
std::string format_loads(const std::vector<int64_t>& counts, const std::string& comment);

}  // namespace lcm::exec
