// Attention problem, sampling and checker (see attention.hpp).
#include "lcm/executor/attention.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "lcm/executor/error.hpp"
#include "lcm/model/flops.hpp"

namespace lcm::exec {

float AttentionProblem::softmax_scale() const {
  return scale > 0 ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

std::string AttentionProblem::shape_text() const {
  return std::to_string(b) + "x" + std::to_string(s) + "x" + std::to_string(hq) + "x" + std::to_string(hkv) + "x" +
         std::to_string(d) + (dv > 0 && dv != d ? "x" + std::to_string(dv) : "") +
         (window > 0 ? "w" + std::to_string(window) : "");
}

void AttentionProblem::validate() const {
  const std::string what = "attention shape " + shape_text() + ": ";
  if (b < 1 || s < 1 || hq < 1 || hkv < 1 || d < 1) throw UsageError(what + "every dimension must be positive");
  if (hq % hkv != 0) throw UsageError(what + "h_q must be a multiple of h_kv (GQA)");
  if (d % 8 != 0 || d > 256) throw UsageError(what + "head dim must be a multiple of 8 and at most 256");
  if (dv < 0 || vdim() % 8 != 0 || vdim() > 256) throw UsageError(what + "V head dim must be a multiple of 8 and at most 256");
  if (static_cast<double>(q_elems()) >= 9.2e18 / 4) throw UsageError(what + "too large");
  if (s_kv < 0 || stats_stride < 0 || (stats_stride > 0 && stats_stride < s)) throw UsageError(what + "bad s_kv / stats stride");
  if (causal && skv() != s) throw UsageError(what + "a causal mask needs as many keys as queries");
  if (window < 0) throw UsageError(what + "the sliding window must be 0 (none) or positive");
  if (window > 0 && !causal) throw UsageError(what + "a sliding window needs the causal mask");
}

AttentionProblem AttentionProblem::of(const AttentionShape& a, double scale) {
  AttentionProblem p;
  p.b = a.batch;
  p.s = a.seq_q;
  p.s_kv = a.seq_kv == a.seq_q ? 0 : a.seq_kv;
  p.hq = a.heads_q;
  p.hkv = a.heads_kv;
  p.d = a.head_dim_qk;
  p.causal = a.causal;
  p.scale = static_cast<float>(scale);
  // A sliding-window op stands for windowed and full layers (AttentionShape::windowed_share);
  // one kernel runs one population.
  if (a.window > 0 && a.windowed_share > 0) {
    if (a.windowed_share < 1)
      throw UsageError("attention shape " + p.shape_text() + ": an op mixing windowed and full layers (windowed share " +
                       std::to_string(a.windowed_share) + ") is not one kernel");
    p.window = a.window;
  }
  return p;
}

AttentionShape AttentionProblem::shape() const {
  AttentionShape a;
  a.batch = b;
  a.seq_q = s;
  a.seq_kv = skv();
  a.heads_q = hq;
  a.heads_kv = hkv;
  a.head_dim_qk = d;
  a.head_dim_v = vdim();
  a.causal = causal;
  a.work_fraction = causal ? 0.5 : 1.0;  // causal as half the square
  if (window > 0) {                      // every layer of the op windowed
    a.window = window;
    a.windowed_share = 1.0;
  }
  return a;
}

// The model's attention FLOP count (lcm::attention_core_flops).
double AttentionProblem::fwd_flops() const { return attention_core_flops(shape()); }
double AttentionProblem::bwd_flops() const { return kAttentionBackwardFlopFactor * fwd_flops(); }

double AttentionProblem::set_bytes() const {
  const double vq = static_cast<double>(vdim()) / static_cast<double>(d);  // O, dO; V, dV scale with the V head dim
  return 2.0 * ((2.0 + 2.0 * vq) * static_cast<double>(q_elems()) + (2.0 + 2.0 * vq) * static_cast<double>(kv_elems())) +
         4.0 * static_cast<double>(stat_elems());
}

AttnSample attention_sample(const AttentionProblem& p, bool full, uint64_t seed, int q_rows_per_head,
                            int kv_rows_per_head, int64_t kv_tail) {
  AttnSample out;
  out.full = full;
  const auto rows = [&](int64_t heads, bool kv, std::vector<AttnRow>& dst) {
    std::mt19937_64 rng(seed ^ (kv ? 0x6b76ull : 0x71ull));
    for (int64_t bi = 0; bi < p.b; ++bi)
      for (int64_t h = 0; h < heads; ++h) {
        std::set<int64_t> pick;
        if (full) {
          for (int64_t i = 0; i < p.s; ++i) pick.insert(i);
        } else if (!kv) {
          pick = {0, std::min<int64_t>(1, p.s - 1), p.s - 1};
          while (static_cast<int64_t>(pick.size()) < std::min<int64_t>(q_rows_per_head, p.s))
            pick.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(p.s)));
        } else {
          const int64_t tail = std::min<int64_t>(kv_tail, p.s);
          pick = {p.s - 1};
          while (static_cast<int64_t>(pick.size()) < std::min<int64_t>(kv_rows_per_head, tail))
            pick.insert(p.s - 1 - static_cast<int64_t>(rng() % static_cast<uint64_t>(tail)));
        }
        for (int64_t i : pick)
          dst.push_back({static_cast<int32_t>(bi), static_cast<int32_t>(h), static_cast<int32_t>(i)});
      }
  };
  rows(p.hq, false, out.q_rows);
  rows(p.hkv, true, out.kv_rows);
  int64_t first = p.s;
  for (const AttnRow& r : out.kv_rows) first = std::min<int64_t>(first, r.i);
  // Non-causal: every key row depends on every query row.
  out.kv_first_query = p.causal ? first : 0;
  return out;
}

Comparison check_attention_values(const std::vector<float>& got, const std::vector<float>& ref,
                                  const std::vector<float>& mag, double rel_l2_limit) {
  // (|ref| + mag) x 2^-7 per element.
  return compare(got, ref, mag, Tolerance{.rel = 1.0 / 128, .mag_rel = 1.0 / 128, .rel_l2_limit = rel_l2_limit});
}

Comparison check_attention_lse(const std::vector<float>& got, const std::vector<float>& ref) {
  // 2e-3 x max(1, |ref|) per element, relative L2 error 2e-3.
  return compare(got, ref, {}, Tolerance{.rel = 2e-3, .ref_floor = 1.0, .rel_l2_limit = 2e-3});
}

const char* to_string(AttnOut o) {
  switch (o) {
    case AttnOut::kO: return "O";
    case AttnOut::kLse: return "LSE";
    case AttnOut::kDq: return "dQ";
    case AttnOut::kDk: return "dK";
    case AttnOut::kDv: return "dV";
  }
  return "?";
}

void AttnCheckSet::merge(const AttnCheckSet& o) {
  for (size_t i = 0; i < out.size(); ++i) out[i].merge(o.out[i]);
}

}  // namespace lcm::exec
