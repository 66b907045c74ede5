// CPU references of the training kernels (reference.hpp).
#include "lcm/executor/train/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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

}  // namespace lcm::exec::train::ref
