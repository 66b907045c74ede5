// RoPE frequencies of the training runner on the host (kernels.hpp): the scalings of HF
// transformers' modeling_rope_utils.py (linear, llama3, yarn) and Megatron's YaRN mscale, and
// the scenario's RopeScaling mapped onto them.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/kernels.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::exec::train {

double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

namespace {
// Rotary pair index at which a wavelength turns num_rotations times over max_pos positions.
double yarn_correction_dim(double num_rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (num_rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}
}  // namespace

std::vector<float> rope_inv_freq(const RopeParams& p, int64_t rot_dim, float* mscale) {
  const int64_t half = rot_dim / 2;
  std::vector<double> base(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    base[static_cast<size_t>(i)] = 1.0 / std::pow(p.base, static_cast<double>(2 * i) / static_cast<double>(rot_dim));
  std::vector<float> out(static_cast<size_t>(half));
  double ms = 1.0;
  for (int64_t i = 0; i < half; ++i) {
    const double f = base[static_cast<size_t>(i)];
    double v = f;
    switch (p.type) {
      case 0: break;
      case 1: v = f / p.factor; break;
      case 2: {  // Meta's apply_scaling (Llama 3.1)
        const double old = static_cast<double>(p.original_max_position);
        const double low_wavelen = old / p.low_freq_factor, high_wavelen = old / p.high_freq_factor;
        const double wavelen = 2 * std::numbers::pi / f;
        if (wavelen < high_wavelen) {
          v = f;
        } else if (wavelen > low_wavelen) {
          v = f / p.factor;
        } else {
          const double smooth = (old / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
          v = (1 - smooth) * f / p.factor + smooth * f;
        }
        break;
      }
      case 3: {  // YaRN (HF _compute_yarn_parameters, Megatron YarnRotaryEmbedding)
        const double dim = static_cast<double>(rot_dim), mp = static_cast<double>(p.original_max_position);
        double low = std::floor(yarn_correction_dim(p.beta_fast, dim, p.base, mp));
        double high = std::ceil(yarn_correction_dim(p.beta_slow, dim, p.base, mp));
        low = std::max(low, 0.0);
        high = std::min(high, dim - 1);
        if (low == high) high += 0.001;
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
        v = f / p.factor * (1 - extrapolation) + f * extrapolation;
        break;
      }
      default: throw ExecError("rope_inv_freq: unknown scaling type " + std::to_string(p.type));
    }
    out[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  if (p.type == 3) ms = yarn_mscale(p.factor, p.mscale) / yarn_mscale(p.factor, p.mscale_all_dim);
  if (mscale) *mscale = static_cast<float>(ms);
  return out;
}

RopeParams rope_params(double rotary_base, const RopeScaling& s) {
  RopeParams p;
  p.base = rotary_base;
  p.factor = s.factor;
  p.original_max_position = s.original_max_position_embeddings;
  switch (s.type) {
    case RopeScalingType::kNone: p.type = 0; p.factor = 1.0; break;
    case RopeScalingType::kLinear: p.type = 1; break;
    case RopeScalingType::kLlama3: p.type = 2; break;
    case RopeScalingType::kYarn: p.type = 3; break;
    case RopeScalingType::kDynamicNtk:
      throw ExecError("rope_scaling dynamic_ntk is an inference-time scaling; lcm-exec train has no kernel for it");
  }
  if ((p.type == 2 || p.type == 3) && p.original_max_position <= 0)
    throw ExecError("rope_scaling llama3 / yarn needs original_max_position_embeddings > 0");
  if (p.type != 0 && !(p.factor > 0)) throw ExecError("rope_scaling factor must be > 0");
  return p;
}

}  // namespace lcm::exec::train
