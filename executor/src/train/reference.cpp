// CPU references of the training kernels (reference.hpp).
#include "lcm/executor/train/reference.hpp"

#include <algorithm>
#include <vector>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "lcm/model/capacity.hpp"

namespace lcm::exec::train::ref {

float bf16_round(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf / nan: keep (quiet the nan)
    if (u & 0x7fffffu) u |= 0x400000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
  }
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

void cast_to_bf16(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_round(in[i]);
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void embedding_fwd(const int32_t* tokens, const float* table, float* out, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(table + static_cast<int64_t>(tokens[r]) * h, h, out + r * h);
}

void embedding_bwd(const int32_t* tokens, const float* dout, float* dtable, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < h; ++c) dtable[static_cast<int64_t>(tokens[r]) * h + c] += dout[r * h + c];
}

void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t h, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < h; ++c) ss += static_cast<double>(x[r * h + c]) * x[r * h + c];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
    rstd[r] = static_cast<float>(rs);
    for (int64_t c = 0; c < h; ++c) y[r * h + c] = static_cast<float>(x[r * h + c] * rs * w[c]);
  }
}

void rmsnorm_bwd(const float* x, const float* w, const float* rstd, const float* dy, float* dx, float* dw, int64_t rows,
                 int64_t h) {
  std::vector<double> dwacc(static_cast<size_t>(h), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double rs = rstd[r];
    double dot = 0;
    for (int64_t c = 0; c < h; ++c) dot += static_cast<double>(dy[r * h + c]) * w[c] * x[r * h + c];
    const double coef = rs * rs * dot / static_cast<double>(h);
    for (int64_t c = 0; c < h; ++c) {
      dx[r * h + c] = static_cast<float>(rs * (static_cast<double>(dy[r * h + c]) * w[c] - x[r * h + c] * coef));
      dwacc[static_cast<size_t>(c)] += static_cast<double>(dy[r * h + c]) * x[r * h + c] * rs;
    }
  }
  for (int64_t c = 0; c < h; ++c) dw[c] += static_cast<float>(dwacc[static_cast<size_t>(c)]);
}

void rope_table(const float* inv_freq, float* cos_tab, float* sin_tab, int64_t seq, int64_t half, float mscale) {
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float ang = static_cast<float>(p) * inv_freq[i];  // the fp32 angle the kernel uses
      cos_tab[p * half + i] = static_cast<float>(std::cos(static_cast<double>(ang)) * mscale);
      sin_tab[p * half + i] = static_cast<float>(std::sin(static_cast<double>(ang)) * mscale);
    }
}

namespace {
void rope_apply(float* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
                int64_t head_dim, int64_t rot_dim, double sign) {
  const int64_t half = rot_dim / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t hd = 0; hd < heads; ++hd) {
      float* v = x + (r * heads + hd) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos_tab[(r % seq) * half + i], s = sign * sin_tab[(r % seq) * half + i];
        const double a = v[i], b = v[i + half];
        v[i] = static_cast<float>(a * c - b * s);
        v[i + half] = static_cast<float>(b * c + a * s);
      }
    }
}
}  // namespace

void rope_fwd(float* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim) {
  rope_apply(x, cos_tab, sin_tab, rows, seq, heads, head_dim, rot_dim, 1.0);
}

void rope_bwd(float* dx, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim) {
  rope_apply(dx, cos_tab, sin_tab, rows, seq, heads, head_dim, rot_dim, -1.0);
}

void qkv_split_rope(const float* qkv, float* q, float* k, float* v, const float* cos_tab, const float* sin_tab,
                    int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim, bool rotate) {
  const int64_t d = head_dim, row = (hq + 2 * hkv) * d;
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(qkv + r * row, qkv + r * row + hq * d, q + r * hq * d);
    std::copy(qkv + r * row + hq * d, qkv + r * row + (hq + hkv) * d, k + r * hkv * d);
    std::copy(qkv + r * row + (hq + hkv) * d, qkv + (r + 1) * row, v + r * hkv * d);
  }
  if (rotate) {
    rope_fwd(q, cos_tab, sin_tab, rows, seq, hq, d, d);
    rope_fwd(k, cos_tab, sin_tab, rows, seq, hkv, d, d);
  }
}

void qkv_join_rope(const float* dq, const float* dk, const float* dv, float* dqkv, const float* cos_tab,
                   const float* sin_tab, int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim,
                   bool rotate) {
  const int64_t d = head_dim, row = (hq + 2 * hkv) * d;
  std::vector<float> q(dq, dq + rows * hq * d), k(dk, dk + rows * hkv * d);
  if (rotate) {
    rope_bwd(q.data(), cos_tab, sin_tab, rows, seq, hq, d, d);
    rope_bwd(k.data(), cos_tab, sin_tab, rows, seq, hkv, d, d);
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(q.begin() + r * hq * d, q.begin() + (r + 1) * hq * d, dqkv + r * row);
    std::copy(k.begin() + r * hkv * d, k.begin() + (r + 1) * hkv * d, dqkv + r * row + hq * d);
    std::copy(dv + r * hkv * d, dv + (r + 1) * hkv * d, dqkv + r * row + (hq + hkv) * d);
  }
}

void mla_assemble_kv(const float* kvu, const float* kpe, float* k, float* v, int64_t rows, int64_t heads, int64_t dn,
                     int64_t dr, int64_t dv) {
  const int64_t dq = dn + dr, du = dn + dv;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < heads; ++i) {
      const float* u = kvu + (r * heads + i) * du;
      float* kk = k + (r * heads + i) * dq;
      for (int64_t c = 0; c < dn; ++c) kk[c] = u[c];
      for (int64_t c = 0; c < dr; ++c) kk[dn + c] = kpe[r * dr + c];
      for (int64_t c = 0; c < dv; ++c) v[(r * heads + i) * dv + c] = u[dn + c];
    }
}

void mla_split_kv_grad(const float* dk, const float* dv_in, float* dkvu, float* dkpe, int64_t rows, int64_t heads,
                       int64_t dn, int64_t dr, int64_t dv) {
  const int64_t dq = dn + dr, du = dn + dv;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < dr; ++c) dkpe[r * dr + c] = 0;
    for (int64_t i = 0; i < heads; ++i) {
      const float* kk = dk + (r * heads + i) * dq;
      float* u = dkvu + (r * heads + i) * du;
      for (int64_t c = 0; c < dn; ++c) u[c] = kk[c];
      for (int64_t c = 0; c < dv; ++c) u[dn + c] = dv_in[(r * heads + i) * dv + c];
      for (int64_t c = 0; c < dr; ++c) dkpe[r * dr + c] += kk[dn + c];
    }
  }
}

void swiglu_fwd(const float* h, float* a, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < f; ++c) {
      const double g = h[r * 2 * f + c], u = h[r * 2 * f + f + c];
      a[r * f + c] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
}

void swiglu_bwd(const float* h, const float* da, float* dh, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < f; ++c) {
      const double g = h[r * 2 * f + c], u = h[r * 2 * f + f + c], d = da[r * f + c];
      const double sg = 1 / (1 + std::exp(-g));
      dh[r * 2 * f + c] = static_cast<float>(d * u * sg * (1 + g * (1 - sg)));
      dh[r * 2 * f + f + c] = static_cast<float>(d * g * sg);
    }
}

void cross_entropy_fwd_bwd(const float* logits, const int32_t* labels, float* loss, float* dlogits, int64_t rows,
                           int64_t vocab, int64_t ld, float grad_scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * ld;
    float* g = dlogits + r * ld;
    std::fill(g, g + ld, 0.0f);
    if (labels[r] < 0) {
      loss[r] = 0;
      continue;
    }
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < vocab; ++c) m = std::max(m, static_cast<double>(x[c]));
    double s = 0;
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(x[c] - m);
    const double lse = m + std::log(s);
    loss[r] = static_cast<float>(lse - x[labels[r]]);
    for (int64_t c = 0; c < vocab; ++c)
      g[c] = static_cast<float>((std::exp(x[c] - lse) - (c == labels[r] ? 1.0 : 0.0)) * grad_scale);
  }
}

void sum_squares(const float* g, int64_t n, double* acc) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  *acc += s;
}

void adamw_step(float* master, float* model, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamParams& p, const float* grad_scale) {
  const double t = static_cast<double>(p.step);
  const float decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay);
  const float step_size = static_cast<float>(p.lr / (1.0 - std::pow(static_cast<double>(p.beta1), t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(p.beta2), t)));
  const float sc = grad_scale ? *grad_scale : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * sc;
    exp_avg[i] = p.beta1 * exp_avg[i] + (1.0f - p.beta1) * g;
    exp_avg_sq[i] = p.beta2 * exp_avg_sq[i] + (1.0f - p.beta2) * g * g;
    const float denom = std::sqrt(exp_avg_sq[i]) / bc2_sqrt + p.eps;
    master[i] = master[i] * decay;
    master[i] = master[i] - step_size * (exp_avg[i] / denom);
    model[i] = bf16_round(master[i]);
  }
}

void clip_coefficient(const double* sumsq, float max_norm, float* scale, float* norm) {
  const double nrm = std::sqrt(*sumsq);
  *norm = static_cast<float>(nrm);
  *scale = max_norm > 0 ? static_cast<float>(std::min(1.0, max_norm / (nrm + 1e-6))) : 1.0f;
}


// ---- MoE block ------------------------------------------------------------------------------
namespace {
double sig(double v) { return 1 / (1 + std::exp(-v)); }
}  // namespace

MoeResult moe_block(const MoeBlockConfig& c, const MoeParams& p, const std::vector<float>& x, const float* dy,
                    float loss_scale, bool round_bf16) {
  const int64_t T = c.tokens, h = c.hidden, f = c.expert_ffn, fs = c.shared_ffn;
  const int E = c.experts, k = c.topk;
  const bool sigm = c.score == RouterScore::kSigmoid;
  const auto rd = [&](double v) { return round_bf16 ? static_cast<double>(bf16_round(static_cast<float>(v))) : v; };
  MoeResult out;
  // Router.
  std::vector<double> l(static_cast<size_t>(T * E));
  for (int64_t t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e) {
      double acc = 0;
      for (int64_t q = 0; q < h; ++q) acc += static_cast<double>(x[t * h + q]) * p.router[e * h + q];
      l[t * E + e] = round_bf16 ? static_cast<float>(acc) : acc;  // fp32 logits on the GPU
    }
  // Top-k.
  std::vector<int32_t> idx(static_cast<size_t>(T * k));
  std::vector<double> w(static_cast<size_t>(T * k));
  for (int64_t t = 0; t < T; ++t) {
    const double* lt = &l[t * E];
    const auto key = [&](int e) {
      return sigm ? sig(lt[e]) + (c.expert_bias ? p.expert_bias[e] : 0.0f) : lt[e];
    };
    std::vector<bool> allowed(static_cast<size_t>(E), true);
    if (c.groups > 0) {
      const int per = E / c.groups, m = k / c.group_topk;
      std::vector<double> gs(static_cast<size_t>(c.groups));
      for (int g = 0; g < c.groups; ++g) {
        std::vector<double> v;
        for (int e = g * per; e < (g + 1) * per; ++e) v.push_back(key(e));
        std::sort(v.begin(), v.end(), std::greater<>());
        gs[g] = std::accumulate(v.begin(), v.begin() + m, 0.0);
      }
      std::vector<bool> gsel(static_cast<size_t>(c.groups), false);
      for (int i = 0; i < c.group_topk; ++i) {
        int best = -1;
        for (int g = 0; g < c.groups; ++g)
          if (!gsel[g] && (best < 0 || gs[g] > gs[best])) best = g;
        gsel[best] = true;
      }
      for (int e = 0; e < E; ++e) allowed[e] = gsel[e / per];
    }
    for (int i = 0; i < k; ++i) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        if (!allowed[e]) continue;
        bool taken = false;
        for (int j = 0; j < i; ++j) taken = taken || idx[t * k + j] == e;
        if (!taken && (best < 0 || key(e) > key(best))) best = e;
      }
      idx[t * k + i] = best;
    }
    if (!sigm) {
      double mx = -1e300, sum = 0;
      for (int i = 0; i < k; ++i) mx = std::max(mx, lt[idx[t * k + i]]);
      for (int i = 0; i < k; ++i) sum += std::exp(lt[idx[t * k + i]] - mx);
      for (int i = 0; i < k; ++i) w[t * k + i] = std::exp(lt[idx[t * k + i]] - mx) / sum;
    } else {
      double sum = 0;
      for (int i = 0; i < k; ++i) sum += sig(lt[idx[t * k + i]]);
      for (int i = 0; i < k; ++i) w[t * k + i] = k > 1 ? sig(lt[idx[t * k + i]]) / (sum + 1e-20) : sig(lt[idx[t * k + i]]);
    }
  }
  // Aux and z losses.
  const bool aux = c.aux_loss_coeff != 0, zl = c.z_loss_coeff != 0;
  std::vector<double> lse(static_cast<size_t>(T)), psum(static_cast<size_t>(E), 0.0);
  std::vector<int32_t> acount(static_cast<size_t>(E), 0);
  double zsum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const double* lt = &l[t * E];
    const double mx = *std::max_element(lt, lt + E);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(lt[e] - mx);
    lse[t] = mx + std::log(s);
    zsum += lse[t] * lse[t];
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lt[a] > lt[b]; });
    for (int i = 0; i < k; ++i) ++acount[order[i]];
    double S = 0;
    for (int e = 0; e < E; ++e) S += sig(lt[e]);
    for (int e = 0; e < E; ++e) psum[e] += sigm ? sig(lt[e]) / (S + 1e-20) : std::exp(lt[e] - lse[t]);
  }
  const double Td = static_cast<double>(T);
  if (aux) {
    double acc = 0;
    for (int e = 0; e < E; ++e) acc += psum[e] * acount[e];
    out.aux_loss += c.aux_loss_coeff * acc * E / (k * Td * Td);
  }
  if (zl) out.aux_loss += c.z_loss_coeff * zsum / Td;
  // Capacity and drops: kept[a] per assignment a = t k + j.
  const int64_t n = T * k;
  const int64_t cap = c.capacity_factor > 0 ? lcm::capacity(T, k, E, c.capacity_factor) : -1;
  std::vector<bool> keep(static_cast<size_t>(n), true);
  out.load.assign(static_cast<size_t>(E), 0);
  out.kept.assign(static_cast<size_t>(E), 0);
  for (int e = 0; e < E; ++e) {
    std::vector<int64_t> as;
    for (int64_t a = 0; a < n; ++a)
      if (idx[a] == e) as.push_back(a);
    out.load[e] = static_cast<int32_t>(as.size());
    if (cap >= 0 && static_cast<int64_t>(as.size()) > cap) {
      if (!c.drop_by_position)
        std::stable_sort(as.begin(), as.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
      for (size_t i = static_cast<size_t>(cap); i < as.size(); ++i) keep[as[i]] = false;
    }
    for (int64_t a : as) out.kept[e] += keep[a] ? 1 : 0;
  }
  // Experts, per kept assignment (the row order does not change any value).
  std::vector<double> h1(static_cast<size_t>(n * 2 * f)), av(static_cast<size_t>(n * f)), back(static_cast<size_t>(n * h));
  std::vector<double> y(static_cast<size_t>(T * h), 0.0);
  for (int64_t a = 0; a < n; ++a) {
    if (!keep[a]) continue;
    const int64_t t = a / k, e = idx[a];
    const float* W1 = &p.fc1[e * 2 * f * h];
    const float* W2 = &p.fc2[e * h * f];
    for (int64_t j = 0; j < 2 * f; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < h; ++q) acc += static_cast<double>(x[t * h + q]) * W1[j * h + q];
      h1[a * 2 * f + j] = rd(acc);
    }
    for (int64_t i = 0; i < f; ++i) {
      const double g = h1[a * 2 * f + i], u = h1[a * 2 * f + f + i];
      av[a * f + i] = rd(g * sig(g) * u);
    }
    for (int64_t q = 0; q < h; ++q) {
      double acc = 0;
      for (int64_t i = 0; i < f; ++i) acc += av[a * f + i] * W2[q * f + i];
      back[a * h + q] = rd(acc);
    }
    for (int64_t q = 0; q < h; ++q) y[t * h + q] += w[a] * back[a * h + q];
  }
  for (double& v : y) v = rd(v);
  std::vector<double> sh1, sa;
  if (fs > 0) {
    sh1.resize(static_cast<size_t>(T * 2 * fs));
    sa.resize(static_cast<size_t>(T * fs));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < 2 * fs; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < h; ++q) acc += static_cast<double>(x[t * h + q]) * p.shared_fc1[j * h + q];
        sh1[t * 2 * fs + j] = rd(acc);
      }
      for (int64_t i = 0; i < fs; ++i) {
        const double g = sh1[t * 2 * fs + i], u = sh1[t * 2 * fs + fs + i];
        sa[t * fs + i] = rd(g * sig(g) * u);
      }
      for (int64_t q = 0; q < h; ++q) {
        double acc = y[t * h + q];
        for (int64_t i = 0; i < fs; ++i) acc += sa[t * fs + i] * p.shared_fc2[q * fs + i];
        y[t * h + q] = rd(acc);
      }
    }
  }
  out.y.assign(y.begin(), y.end());
  if (!dy) return out;
  for (size_t i = 0; i < y.size(); ++i) out.y_dot_dy += static_cast<double>(dy[i]) * y[i];

  // ---- backward ----
  std::vector<double> dx(static_cast<size_t>(T * h), 0.0);
  out.d_router.assign(p.router.size(), 0.0f);
  out.d_fc1.assign(p.fc1.size(), 0.0f);
  out.d_fc2.assign(p.fc2.size(), 0.0f);
  out.d_shared_fc1.assign(p.shared_fc1.size(), 0.0f);
  out.d_shared_fc2.assign(p.shared_fc2.size(), 0.0f);
  if (fs > 0) {
    std::vector<double> dsh1(static_cast<size_t>(T * 2 * fs)), g2(p.shared_fc2.size(), 0.0), g1(p.shared_fc1.size(), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < fs; ++i) {
        double acc = 0;
        for (int64_t q = 0; q < h; ++q) {
          acc += static_cast<double>(dy[t * h + q]) * p.shared_fc2[q * fs + i];
          g2[q * fs + i] += static_cast<double>(dy[t * h + q]) * sa[t * fs + i];
        }
        const double da = rd(acc), g = sh1[t * 2 * fs + i], u = sh1[t * 2 * fs + fs + i], sg = sig(g);
        dsh1[t * 2 * fs + i] = rd(da * u * sg * (1 + g * (1 - sg)));
        dsh1[t * 2 * fs + fs + i] = rd(da * g * sg);
      }
      for (int64_t q = 0; q < h; ++q) {
        double acc = 0;
        for (int64_t j = 0; j < 2 * fs; ++j) {
          acc += dsh1[t * 2 * fs + j] * p.shared_fc1[j * h + q];
          g1[j * h + q] += dsh1[t * 2 * fs + j] * x[t * h + q];
        }
        dx[t * h + q] = rd(acc);
      }
    }
    out.d_shared_fc1.assign(g1.begin(), g1.end());
    out.d_shared_fc2.assign(g2.begin(), g2.end());
  }
  std::vector<double> dprob(static_cast<size_t>(n), 0.0), gw1(p.fc1.size(), 0.0), gw2(p.fc2.size(), 0.0);
  std::vector<double> dxr(static_cast<size_t>(T * h), 0.0);
  for (int64_t a = 0; a < n; ++a) {
    if (!keep[a]) continue;
    const int64_t t = a / k, e = idx[a];
    const float* W1 = &p.fc1[e * 2 * f * h];
    const float* W2 = &p.fc2[e * h * f];
    std::vector<double> dyp(static_cast<size_t>(h)), da(static_cast<size_t>(f)), dh(static_cast<size_t>(2 * f));
    for (int64_t q = 0; q < h; ++q) {
      dprob[a] += static_cast<double>(dy[t * h + q]) * back[a * h + q];
      dyp[q] = rd(w[a] * dy[t * h + q]);
    }
    for (int64_t i = 0; i < f; ++i) {
      double acc = 0;
      for (int64_t q = 0; q < h; ++q) {
        acc += dyp[q] * W2[q * f + i];
        gw2[e * h * f + q * f + i] += dyp[q] * av[a * f + i];
      }
      da[i] = rd(acc);
      const double g = h1[a * 2 * f + i], u = h1[a * 2 * f + f + i], sg = sig(g);
      dh[i] = rd(da[i] * u * sg * (1 + g * (1 - sg)));
      dh[f + i] = rd(da[i] * g * sg);
    }
    for (int64_t q = 0; q < h; ++q) {
      double acc = 0;
      for (int64_t j = 0; j < 2 * f; ++j) {
        acc += dh[j] * W1[j * h + q];
        gw1[e * 2 * f * h + j * h + q] += dh[j] * x[t * h + q];
      }
      dxr[t * h + q] += rd(acc);
    }
  }
  for (int64_t i = 0; i < T * h; ++i) dx[i] = rd(dx[i] + dxr[i]);
  out.d_fc1.assign(gw1.begin(), gw1.end());
  out.d_fc2.assign(gw2.begin(), gw2.end());
  // Router: gradient of the logits, then dx += dl Wr and dWr = dl^T x.
  const double aux_g = aux ? static_cast<double>(loss_scale) * c.aux_loss_coeff * E / (k * Td * Td) : 0.0;
  const double z_g = zl ? static_cast<double>(loss_scale) * c.z_loss_coeff * 2.0 / Td : 0.0;
  std::vector<double> dl(static_cast<size_t>(T * E), 0.0), gr(p.router.size(), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const double* lt = &l[t * E];
    double* d = &dl[t * E];
    if (aux) {
      double S = 0, dot = 0;
      for (int e = 0; e < E; ++e) S += sig(lt[e]);
      for (int e = 0; e < E; ++e) dot += (sigm ? sig(lt[e]) / (S + 1e-20) : std::exp(lt[e] - lse[t])) * aux_g * acount[e];
      for (int e = 0; e < E; ++e) {
        const double dp = aux_g * acount[e];
        d[e] += sigm ? sig(lt[e]) * (1 - sig(lt[e])) * (dp - dot) / (S + 1e-20) : std::exp(lt[e] - lse[t]) * (dp - dot);
      }
    }
    if (zl)
      for (int e = 0; e < E; ++e) d[e] += z_g * lse[t] * std::exp(lt[e] - lse[t]);
    double gdot = 0, gsum = 0;
    for (int j = 0; j < k; ++j) gdot += w[t * k + j] * dprob[t * k + j];
    for (int j = 0; j < k; ++j) gsum += sig(lt[idx[t * k + j]]);
    for (int j = 0; j < k; ++j) {
      const int e = idx[t * k + j];
      const double g = dprob[t * k + j];
      if (!sigm) d[e] += w[t * k + j] * (g - gdot);
      else d[e] += sig(lt[e]) * (1 - sig(lt[e])) * (k > 1 ? (g - gdot) / (gsum + 1e-20) : g);
    }
    for (int e = 0; e < E; ++e) d[e] = rd(d[e]);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t q = 0; q < h; ++q) {
      double acc = 0;
      for (int e = 0; e < E; ++e) {
        acc += dl[t * E + e] * p.router[e * h + q];
        gr[e * h + q] += dl[t * E + e] * x[t * h + q];
      }
      dx[t * h + q] = rd(dx[t * h + q] + acc);
    }
  out.d_router.assign(gr.begin(), gr.end());
  out.dx.assign(dx.begin(), dx.end());
  return out;
}

}  // namespace lcm::exec::train::ref
