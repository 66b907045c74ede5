// MoE problem, routing law and host references (see moe.hpp).
#include "lcm/executor/moe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "lcm/executor/error.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/routing.hpp"

namespace lcm::exec {

namespace {

std::string num_text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

int64_t MoeProblem::capacity() const {
  if (cf <= 0) return -1;
  return lcm::capacity(tokens, topk, experts, cf);  // Megatron get_capacity: the model's one formula
}

std::string MoeProblem::config_text() const {
  std::string s = "T" + std::to_string(tokens) + ".h" + std::to_string(hidden) + ".f" + std::to_string(ffn) + ".E" +
                  std::to_string(experts) + ".k" + std::to_string(topk) + ".ep" + std::to_string(ep) + "." +
                  std::string(to_string(score));
  if (groups > 0) s += ".g" + std::to_string(groups) + "x" + std::to_string(topk_groups);  // no "/": keys split on it
  return s;
}

std::string MoeProblem::point_text() const {
  return config_text() + (cf > 0 ? ".cf" + num_text(cf) + "." + to_string(policy) : std::string(".dropless")) + "." +
         skew.text();
}

void MoeProblem::validate() const {
  if (ep < 1 || experts % ep != 0)
    throw UsageError("moe: --experts " + std::to_string(experts) + " is not a multiple of the EP size " +
                     std::to_string(ep) + " (num_experts % EP == 0)");
}

std::vector<float> routing_log_weights(const MoeProblem& p) {
  if (p.skew.kind == RoutingSkew::Kind::kRouter) return {};
  const double s = p.skew.kind == RoutingSkew::Kind::kZipf ? p.skew.s : 0.0;
  const std::vector<double> w = lcm::zipf_weights(p.experts, s);
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = static_cast<float>(std::log(w[i]));
  return out;
}

double expected_drop_fraction(const MoeProblem& p) {
  if (p.cf <= 0) return 0.0;
  if (p.skew.kind == RoutingSkew::Kind::kRouter) return std::numeric_limits<double>::quiet_NaN();
  const double s = p.skew.kind == RoutingSkew::Kind::kZipf ? p.skew.s : 0.0;
  const std::vector<double> q = lcm::topk_inclusion_probabilities(lcm::zipf_weights(p.experts, s), p.topk);
  return lcm::expected_drop_fraction(q, p.tokens, p.topk, p.capacity());
}

float router_weight_scale(const MoeProblem& p) {
  const double base = std::sqrt(3.0 / static_cast<double>(p.hidden));  // logits of std ~0.58
  return static_cast<float>(p.skew.kind == RoutingSkew::Kind::kRouter ? base : base / 20.0);
}
float fc1_weight_scale(const MoeProblem& p) { return static_cast<float>(std::sqrt(3.0 / static_cast<double>(p.hidden))); }
float fc2_weight_scale(const MoeProblem& p) { return static_cast<float>(std::sqrt(3.0 / static_cast<double>(p.ffn))); }

TokenRoute route_token(const float* logits, const MoeProblem& p) {
  const int E = p.experts, k = p.topk;
  std::vector<float> key(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    const float l = logits[e];
    key[static_cast<size_t>(e)] = p.score == RouterScore::kSigmoid ? 1.0f / (1.0f + std::exp(-l)) : l;
  }
  std::vector<char> allowed(static_cast<size_t>(E), 1);
  if (p.groups > 0) {
    const int per = E / p.groups, m = k / p.topk_groups;
    std::vector<float> gscore(static_cast<size_t>(p.groups));
    for (int g = 0; g < p.groups; ++g) {
      std::vector<float> v(key.begin() + g * per, key.begin() + (g + 1) * per);
      std::partial_sort(v.begin(), v.begin() + m, v.end(), std::greater<float>());
      float sum = 0;
      for (int i = 0; i < m; ++i) sum += v[static_cast<size_t>(i)];
      gscore[static_cast<size_t>(g)] = sum;
    }
    std::vector<char> gsel(static_cast<size_t>(p.groups), 0);
    for (int i = 0; i < p.topk_groups; ++i) {
      int best = -1;
      for (int g = 0; g < p.groups; ++g)
        if (!gsel[static_cast<size_t>(g)] && (best < 0 || gscore[static_cast<size_t>(g)] > gscore[static_cast<size_t>(best)]))
          best = g;
      gsel[static_cast<size_t>(best)] = 1;
    }
    for (int e = 0; e < E; ++e) allowed[static_cast<size_t>(e)] = gsel[static_cast<size_t>(e / per)];
  }
  TokenRoute r;
  std::vector<char> taken(static_cast<size_t>(E), 0);
  for (int i = 0; i < k; ++i) {
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (allowed[static_cast<size_t>(e)] && !taken[static_cast<size_t>(e)] &&
          (best < 0 || key[static_cast<size_t>(e)] > key[static_cast<size_t>(best)]))
        best = e;
    taken[static_cast<size_t>(best)] = 1;
    r.idx.push_back(best);
  }
  if (p.score == RouterScore::kSoftmax) {
    float mx = -INFINITY;
    for (int e : r.idx) mx = std::max(mx, logits[e]);
    float sum = 0;
    for (int e : r.idx) sum += std::exp(logits[e] - mx);
    for (int e : r.idx) r.w.push_back(std::exp(logits[e] - mx) / sum);
  } else {
    float sum = 0;
    for (int e : r.idx) sum += key[static_cast<size_t>(e)];
    for (int e : r.idx) r.w.push_back(k > 1 ? key[static_cast<size_t>(e)] / sum : key[static_cast<size_t>(e)]);
  }
  return r;
}

double Dispatch::drop_fraction() const {
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  return total > 0 ? static_cast<double>(dropped) / static_cast<double>(total) : 0.0;
}

Dispatch reference_dispatch(const std::vector<int32_t>& idx, const std::vector<float>& w, int64_t tokens, int topk,
                            int experts, int64_t capacity, DropPolicy policy) {
  Dispatch d;
  const size_t E = static_cast<size_t>(experts);
  const int64_t n = tokens * topk;
  d.counts.assign(E, 0);
  d.kept.assign(E, 0);
  d.offset.assign(E, 0);
  d.row.assign(static_cast<size_t>(n), -1);
  std::vector<std::vector<int64_t>> of(E);  // assignments of each expert, token order
  for (int64_t a = 0; a < n; ++a) {
    const int32_t e = idx[static_cast<size_t>(a)];
    if (e < 0 || e >= experts) throw ExecError("reference_dispatch: expert index out of range");
    of[static_cast<size_t>(e)].push_back(a);
  }
  std::vector<char> keep(static_cast<size_t>(n), 1);
  for (size_t e = 0; e < E; ++e) {
    std::vector<int64_t>& list = of[e];
    d.counts[e] = static_cast<int64_t>(list.size());
    if (capacity >= 0 && static_cast<int64_t>(list.size()) > capacity) {
      std::vector<int64_t> order = list;
      if (policy == DropPolicy::kProbs)
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)];
        });
      for (size_t i = static_cast<size_t>(capacity); i < order.size(); ++i) keep[static_cast<size_t>(order[i])] = 0;
    }
  }
  int64_t off = 0;
  for (size_t e = 0; e < E; ++e) {
    d.offset[e] = off;
    int64_t r = 0;
    for (int64_t a : of[e])
      if (keep[static_cast<size_t>(a)]) d.row[static_cast<size_t>(a)] = static_cast<int32_t>(off + r++);
    d.kept[e] = r;
    d.dropped += d.counts[e] - r;
    off += r;
  }
  return d;
}

std::string format_loads(const std::vector<int64_t>& counts, const std::string& comment) {
  std::ostringstream o;
  std::istringstream in(comment);
  for (std::string line; std::getline(in, line);) o << "# " << line << "\n";
  for (int64_t c : counts) o << c << "\n";
  return o.str();
}

}  // namespace lcm::exec
