// Expert loads under a routing distribution (expert_load.hpp): Zipf popularity, top-k
// inclusion probabilities, and the busiest expert-parallel rank of a skewed routing.
#include "lcm/model/expert_load.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <tuple>

namespace lcm {
std::vector<double> normalised_weights(const std::vector<double>& w) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<double> p(w.size());
  for (size_t i = 0; i < w.size(); ++i) p[i] = w[i] / sum;
  return p;
}

// ---------------------------------------------------------------------------------
// Routing distributions.
// ---------------------------------------------------------------------------------

std::vector<double> zipf_weights(int experts, double s) {
  assert(experts > 0 && s >= 0);
  std::vector<double> w(static_cast<size_t>(experts));
  for (int i = 0; i < experts; ++i) w[static_cast<size_t>(i)] = std::pow(i + 1.0, -s);
  return normalised_weights(w);
}

std::vector<double> topk_inclusion_probabilities(const std::vector<double>& weights, int topk) {
  const size_t e = weights.size();
  const auto k = static_cast<size_t>(topk);
  assert(topk >= 1 && k <= e);
  assert(std::all_of(weights.begin(), weights.end(), [](double w) { return w > 0; }));
  const std::vector<double> p = normalised_weights(weights);
  if (k == e) return std::vector<double>(e, 1.0);
  if (k == 1) return p;
  if (std::all_of(p.begin(), p.end(), [&](double x) { return x == p[0]; }))
    return std::vector<double>(e, static_cast<double>(k) / static_cast<double>(e));

  // q_i = integral over x = ln t of p_i t exp(-p_i t) F_i(t) dx, F_i(t) = P(fewer than k
  // of the other clocks rang by t). The integrand is analytic in x and decays at both
  // ends, so the trapezoid rule converges geometrically (error ~ exp(-pi^2 / h)).
  // Range: below t = 1e-18/p_max the integral is < 1e-18; above t = 46/p_min, < 1e-20.
  const auto [pmin_it, pmax_it] = std::minmax_element(p.begin(), p.end());
  const double x_lo = std::log(1e-18 / *pmax_it), x_hi = std::log(46.0 / *pmin_it);
  const double h = 0.1;
  const int points = static_cast<int>(std::ceil((x_hi - x_lo) / h));

  // Truncated (degree < k) Poisson-binomial distributions of the experts before i
  // (prefix) and after i (suffix, stored as cumulative sums).
  std::vector<double> prefix((e + 1) * k), suffix((e + 1) * k), a(e), q(e, 0.0);
  for (int j = 0; j <= points; ++j) {
    const double t = std::exp(x_lo + h * j);
    for (size_t i = 0; i < e; ++i) a[i] = -std::expm1(-p[i] * t);  // P(clock i rang by t)
    std::fill(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(k), 0.0);
    prefix[0] = 1.0;
    for (size_t i = 0; i < e; ++i) {
      const double* src = &prefix[i * k];
      double* dst = &prefix[(i + 1) * k];
      dst[0] = src[0] * (1 - a[i]);
      for (size_t m = 1; m < k; ++m) dst[m] = src[m] * (1 - a[i]) + src[m - 1] * a[i];
    }
    std::vector<double> cur(k, 0.0), next(k);
    cur[0] = 1.0;
    for (size_t i = e + 1; i-- > 0;) {
      if (i < e) {
        next[0] = cur[0] * (1 - a[i]);
        for (size_t m = 1; m < k; ++m) next[m] = cur[m] * (1 - a[i]) + cur[m - 1] * a[i];
        cur.swap(next);
      }
      double run = 0;
      for (size_t m = 0; m < k; ++m) suffix[i * k + m] = (run += cur[m]);
    }
    for (size_t i = 0; i < e; ++i) {
      double f = 0;  // P(fewer than k others): sum over prefix count m of P(suffix < k - m)
      for (size_t m = 0; m < k; ++m) f += prefix[i * k + m] * suffix[(i + 1) * k + (k - 1 - m)];
      q[i] += h * p[i] * t * std::exp(-p[i] * t) * f;
    }
  }
  for (double& x : q) x = std::clamp(x, 0.0, 1.0);
  return q;
}

// ---------------------------------------------------------------------------------
// Skewed routing over expert-parallel ranks.
// ---------------------------------------------------------------------------------

namespace {

constexpr int kPlacements = 4096;  // random placements averaged (the busiest factor's MC error ~0.1%)

RoutedLoad compute_routed_load(int experts, int topk, double zipf_s, int ep, double cap) {
  const auto e = static_cast<size_t>(experts);
  std::vector<double> w = zipf_s > 0 ? topk_inclusion_probabilities(zipf_weights(experts, zipf_s), topk)
                                     : std::vector<double>(e, static_cast<double>(topk) / experts);
  if (cap > 0)
    for (double& x : w) x = std::min(x, cap);
  RoutedLoad out;
  out.copies_per_token = std::accumulate(w.begin(), w.end(), 0.0);
  const size_t ranks = static_cast<size_t>(std::min(ep, experts));
  const size_t local = e / ranks;
  if (zipf_s == 0 || ranks == 1) {
    out.busiest_loads.assign(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(local));
    std::sort(out.busiest_loads.begin(), out.busiest_loads.end(), std::greater<>());
    return out;
  }
  // Fisher-Yates over a fixed-seed mt19937_64 (its output is specified by the standard;
  // std::shuffle's use of it is not).
  std::mt19937_64 rng(0x6c636d2d736b6577ull);
  std::vector<double> perm = w, block(local), sum_sorted(local, 0.0);
  double sum_max = 0;
  for (int trial = 0; trial < kPlacements; ++trial) {
    for (size_t i = e - 1; i > 0; --i) std::swap(perm[i], perm[static_cast<size_t>(rng() % (i + 1))]);
    size_t best = 0;
    double best_sum = -1;
    for (size_t r = 0; r < ranks; ++r) {
      const double sum = std::accumulate(perm.begin() + static_cast<std::ptrdiff_t>(r * local),
                                         perm.begin() + static_cast<std::ptrdiff_t>((r + 1) * local), 0.0);
      if (sum > best_sum) best_sum = sum, best = r;
    }
    sum_max += best_sum;
    std::copy_n(perm.begin() + static_cast<std::ptrdiff_t>(best * local), local, block.begin());
    std::sort(block.begin(), block.end(), std::greater<>());
    for (size_t j = 0; j < local; ++j) sum_sorted[j] += block[j];
  }
  const double mean_rank = out.copies_per_token / static_cast<double>(ranks);
  out.busiest_factor = std::max(1.0, sum_max / kPlacements / mean_rank);
  out.busiest_loads.resize(local);
  for (size_t j = 0; j < local; ++j) out.busiest_loads[j] = sum_sorted[j] / kPlacements;
  return out;
}

}  // namespace

RoutedLoad routed_load(int experts, int topk, double zipf_s, int ep, double cap_per_token) {
  assert(experts >= 1 && topk >= 1 && topk <= experts && zipf_s >= 0 && ep >= 1 && cap_per_token >= 0);
  assert(ep > experts || experts % ep == 0);
  using Key = std::tuple<int, int, double, int, double>;
  static std::mutex mutex;
  static std::map<Key, RoutedLoad> memo;
  const Key key{experts, topk, zipf_s, std::min(ep, experts), cap_per_token};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  RoutedLoad r = compute_routed_load(experts, topk, zipf_s, ep, cap_per_token);
  std::lock_guard<std::mutex> lock(mutex);
  if (memo.size() > 4096) memo.clear();  // bounded: a sweep over many shapes cannot grow it without end
  return memo.emplace(key, std::move(r)).first->second;
}

double busiest_factor_over_layers(double factor, int layers) {
  return layers <= 1 ? factor : 1.0 + (factor - 1.0) / std::sqrt(static_cast<double>(layers));
}

}  // namespace lcm
