// Least-squares calibration of the time model's hardware parameters (calibration.hpp).
//
// Each class's parameters are fitted on the log of predicted / measured time, so a 10%
// miss on a 10 us op weighs as much as one on a 10 ms op. Fractions of a peak are fitted
// through a logistic transform (they stay in (0, 1)), other parameters through a log
// transform (they stay positive). The output-tile sizes of the GEMM curve are discrete:
// every pair of 64 / 128 / 256 is tried and the best kept. Cross-validation reruns the
// same fit on the points of k - 1 folds of shapes and predicts the held-out fold.
#include "lcm/model/calibration.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include <Eigen/Core>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

#include "lcm/model/flops.hpp"

namespace lcm {

const char* to_string(CalibClass c) {
  switch (c) {
    case CalibClass::kGemmBf16: return "gemm_bf16";
    case CalibClass::kGemmFp8: return "gemm_fp8";
    case CalibClass::kAttention: return "attention";
    case CalibClass::kMemory: return "memory";
    case CalibClass::kNvlink: return "nvlink";
    case CalibClass::kNic: return "nic";
    case CalibClass::kGemmFp8Block: return "gemm_fp8_block";
  }
  return "?";
}

CalibClass calib_class(const MeasuredOp& m) {
  switch (m.op.kind) {
    case OpKind::kGemm:
      return m.op.dtype == DType::kFp8Block ? CalibClass::kGemmFp8Block
             : m.op.dtype == DType::kFp8    ? CalibClass::kGemmFp8
                                            : CalibClass::kGemmBf16;
    case OpKind::kAttention: return CalibClass::kAttention;
    case OpKind::kMemoryBound: return CalibClass::kMemory;
    case OpKind::kCollective:
    case OpKind::kSendRecv: return m.topo.nodes > 1 ? CalibClass::kNic : CalibClass::kNvlink;
  }
  return CalibClass::kMemory;
}

double predict_time(const MeasuredOp& m, const HardwareSpec& hw) {
  const Op& op = m.op;
  switch (op.kind) {
    case OpKind::kGemm: {
      // lcm-exec times its GEMMs ungated: the host enqueues each cuBLASLt call while the GPU
      // runs the previous ones, so a GEMM shorter than the host's enqueue waits for it. A
      // measured GEMM is the larger of its GPU time and the host's time for its kernels (one
      // per group). Session 16: small BF16 GEMMs take 4.5-6 us on the GPU alone (CUDA graph
      // or behind a spinning kernel) and 9-11 us in lcm-exec's loops
      // (validation/measured/h200/session16/gemm_host_floor.json).
      const double kernels = static_cast<double>(std::max(1, op.gemm.groups));
      return std::max(gemm_time(op.gemm, op.dtype, hw), hw.host.exec_gemm_enqueue * kernels);
    }
    case OpKind::kAttention: {
      const double fwd = attention_core_flops(op.attn);
      const bool bwd = op.pass == Pass::kBwd;
      return attention_time(op.attn, bwd ? kAttentionBackwardFlopFactor * fwd : fwd, bwd, hw);
    }
    case OpKind::kMemoryBound: return memory_time(op.mem, hw);
    case OpKind::kCollective:
    case OpKind::kSendRecv: return collective_time(op.coll, m.topo, hw);
  }
  return 0;
}

namespace {

enum class Transform { kFraction, kPositive, kNonNegative };

struct Param {
  const char* key;       // profile key
  double unit;           // profile value = internal value / unit
  Transform transform;
  std::function<double&(HardwareSpec&)> ref;
  double nominal = 0;    // start of the fit where the profile has the term off (0)
};

double to_x(double v, Transform t) {
  if (t == Transform::kNonNegative) return std::sqrt(std::max(v, 0.0));
  if (t == Transform::kPositive) return std::log(std::max(v, 1e-300));
  const double p = std::clamp(v, 1e-6, 1.0 - 1e-6);
  return std::log(p / (1.0 - p));
}
double from_x(double x, Transform t) {
  if (t == Transform::kNonNegative) return x * x;
  if (t == Transform::kPositive) return std::exp(std::clamp(x, -700.0, 700.0));
  return 1.0 / (1.0 + std::exp(-x));
}

constexpr double kMiB = 1024.0 * 1024.0;

Param p_gemm{"efficiency.gemm", 1, Transform::kFraction, [](HardwareSpec& h) -> double& { return h.efficiency.gemm; }};
Param p_gemm_fp8{"efficiency.gemm_fp8", 1, Transform::kFraction,
                 [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fp8; }};
Param p_gemm_fp8_block{"efficiency.gemm_fp8_block", 1, Transform::kFraction,
                       [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fp8_block; }};
Param p_dim_half{"efficiency.gemm_dim_half", 1, Transform::kPositive,
                 [](HardwareSpec& h) -> double& { return h.efficiency.gemm_dim_half; }};
Param p_attn_fwd{"efficiency.attention_fwd", 1, Transform::kFraction,
                 [](HardwareSpec& h) -> double& { return h.efficiency.attention_fwd; }};
Param p_attn_bwd{"efficiency.attention_bwd", 1, Transform::kFraction,
                 [](HardwareSpec& h) -> double& { return h.efficiency.attention_bwd; }};
Param p_attn_half{"efficiency.attention_seq_half_tokens", 1, Transform::kPositive,
                  [](HardwareSpec& h) -> double& { return h.efficiency.attention_seq_half; }};
Param p_head_dim_half{"efficiency.attention_head_dim_half", 1, Transform::kPositive,
                      [](HardwareSpec& h) -> double& { return h.efficiency.attention_head_dim_half; }, 64};
Param p_wide_dim{"efficiency.attention_bwd_wide_dim_exponent", 1, Transform::kNonNegative,
                 [](HardwareSpec& h) -> double& { return h.efficiency.attention_bwd_wide_dim_exponent; }, 1.0};
Param p_kernel_fixed{"efficiency.kernel_fixed_us", 1e-6, Transform::kPositive,
                     [](HardwareSpec& h) -> double& { return h.efficiency.kernel_fixed; }, 2e-6};
Param p_roofline{"efficiency.gemm_roofline_exponent", 1, Transform::kPositive,
                 [](HardwareSpec& h) -> double& { return h.efficiency.gemm_roofline_exponent; }, 2.0};
Param p_memory_fixed{"efficiency.memory_fixed_us", 1e-6, Transform::kPositive,
                     [](HardwareSpec& h) -> double& { return h.efficiency.memory_fixed; }, 4e-6};
Param p_grouped_fixed{"efficiency.grouped_gemm_fixed_us", 1e-6, Transform::kPositive,
                      [](HardwareSpec& h) -> double& { return h.efficiency.grouped_gemm_fixed; }, 4e-6};
Param p_cta_tail{"efficiency.attention_cta_tail", 1, Transform::kNonNegative,
                 [](HardwareSpec& h) -> double& { return h.efficiency.attention_cta_tail; }, 0.5};
Param p_l2_slowdown{"efficiency.attention_l2_miss_slowdown", 1, Transform::kNonNegative,
                    [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_slowdown; }, 0.15};
Param p_l2_start{"efficiency.attention_l2_miss_start", 1, Transform::kPositive,
                 [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_start; }, 0.8};
Param p_l2_full{"efficiency.attention_l2_miss_full", 1, Transform::kPositive,
                [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_full; }, 1.3};
Param p_sm_fill{"efficiency.gemm_sm_fill_exponent", 1, Transform::kNonNegative,
                [](HardwareSpec& h) -> double& { return h.efficiency.gemm_sm_fill_exponent; }, 0.5};
Param p_c_exposed{"efficiency.gemm_c_write_exposed", 1, Transform::kFraction,
                  [](HardwareSpec& h) -> double& { return h.efficiency.gemm_c_write_exposed; }, 0.5};
Param p_fill_bw{"efficiency.gemm_fill_bw_exponent", 1, Transform::kNonNegative,
                [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fill_bw_exponent; }, 0.5};
Param p_split_k{"efficiency.gemm_split_k_chunk", 1, Transform::kPositive,
                [](HardwareSpec& h) -> double& { return h.efficiency.gemm_split_k_chunk; }, 8192};
Param p_acc_miss{"efficiency.gemm_accumulate_miss_bw", 1, Transform::kFraction,
                 [](HardwareSpec& h) -> double& { return h.efficiency.gemm_accumulate_miss_bw; }, 0.75};
Param p_exec_enqueue{"host.exec_gemm_enqueue_us", 1e-6, Transform::kPositive,
                     [](HardwareSpec& h) -> double& { return h.host.exec_gemm_enqueue; }, 8e-6};
Param p_hbm{"efficiency.hbm", 1, Transform::kFraction, [](HardwareSpec& h) -> double& { return h.efficiency.hbm; }};
Param p_nvlink{"efficiency.nvlink", 1, Transform::kFraction,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink; }};
Param p_nvlink_half{"efficiency.nvlink_half_MiB", kMiB, Transform::kPositive,
                    [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_half_bytes; }};
Param p_coll_base{"efficiency.collective_base_us", 1e-6, Transform::kPositive,
                  [](HardwareSpec& h) -> double& { return h.efficiency.collective_base; }, 5e-6};
Param p_ag_scale{"efficiency.nvlink_allgather_scale", 1, Transform::kPositive,
                 [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_allgather_scale; }, 1.0};
Param p_a2a_scale{"efficiency.nvlink_alltoall_scale", 1, Transform::kPositive,
                  [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_alltoall_scale; }, 1.0};
Param p_p2p_scale{"efficiency.nvlink_sendrecv_scale", 1, Transform::kPositive,
                  [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_sendrecv_scale; }, 1.0};
// NCCL's LL protocol bandwidth (a fraction of nvlink_bw), from the small ring collectives.
Param p_nvlink_ll{"efficiency.nvlink_ll", 1, Transform::kFraction,
                  [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_ll; }, 0.2};
Param p_ramp{"efficiency.nvlink_ramp_exponent", 1, Transform::kPositive,
             [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_ramp_exponent; }, 1.0};
Param p_nic{"efficiency.nic", 1, Transform::kFraction, [](HardwareSpec& h) -> double& { return h.efficiency.nic; }};
Param p_nic_half{"efficiency.nic_half_MiB", kMiB, Transform::kPositive,
                 [](HardwareSpec& h) -> double& { return h.efficiency.nic_half_bytes; }};

double log_residual(const MeasuredOp& m, const HardwareSpec& hw) {
  const double p = predict_time(m, hw);
  if (!(p > 0) || !(m.measured_s > 0)) return 0;
  return std::log(p / m.measured_s);
}

constexpr double kPrior = 0.01;

// Levenberg-Marquardt over the transformed parameters; `hw` receives the best fit.
struct Functor {
  using Scalar = double;
  using InputType = Eigen::VectorXd;
  using ValueType = Eigen::VectorXd;
  using JacobianType = Eigen::MatrixXd;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };

  const std::vector<const MeasuredOp*>* pts;
  const std::vector<Param>* params;
  HardwareSpec base;
  Eigen::VectorXd x0;     // the profile's parameters (transformed)
  Eigen::VectorXd prior;  // weight of the pull towards x0: 0 for terms the profile had off

  int inputs() const { return static_cast<int>(params->size()); }
  int values() const { return static_cast<int>(pts->size()) + inputs(); }

  HardwareSpec apply(const Eigen::VectorXd& x) const {
    HardwareSpec h = base;
    for (size_t i = 0; i < params->size(); ++i)
      (*params)[i].ref(h) = from_x(x[static_cast<Eigen::Index>(i)], (*params)[i].transform);
    return h;
  }
  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& f) const {
    const HardwareSpec h = apply(x);
    f.setZero(values());
    for (size_t i = 0; i < pts->size(); ++i) f[static_cast<Eigen::Index>(i)] = log_residual(*(*pts)[i], h);
    // A weak pull towards the starting values: a parameter the points do not determine
    // (a half-point no measured size comes near) stays where the profile had it instead
    // of drifting; against the data it weighs like a 1% miss per e-fold of change.
    for (int j = 0; j < inputs(); ++j) f[static_cast<Eigen::Index>(pts->size()) + j] = prior[j] * (x[j] - x0[j]);
    return 0;
  }
};

double sum_sq(const std::vector<const MeasuredOp*>& pts, const HardwareSpec& h) {
  double s = 0;
  for (const MeasuredOp* m : pts) s += std::pow(log_residual(*m, h), 2);
  return s;
}

// Fits `params` on `pts` starting from `hw`; returns the sum of squared log residuals.
double fit(const std::vector<const MeasuredOp*>& pts, const std::vector<Param>& params, HardwareSpec& hw) {
  const auto n = static_cast<Eigen::Index>(params.size());
  Eigen::VectorXd x(n), prior(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Param& p = params[static_cast<size_t>(i)];
    const double v = p.ref(hw);
    x[i] = to_x(v > 0 ? v : p.nominal, p.transform);
    prior[i] = v > 0 ? kPrior : 0.0;
  }
  Functor f{&pts, &params, hw, x, prior};
  Eigen::NumericalDiff<Functor> nd(f);
  Eigen::LevenbergMarquardt<Eigen::NumericalDiff<Functor>> lm(nd);
  lm.parameters.maxfev = 4000;
  lm.parameters.xtol = 1e-12;
  lm.parameters.ftol = 1e-12;
  lm.minimize(x);
  HardwareSpec fitted = f.apply(x);
  const double before = sum_sq(pts, hw), after = sum_sq(pts, fitted);
  if (after <= before) hw = fitted;  // never worse than the start
  return std::min(before, after);
}

struct Residuals {
  double rms = 0, max_abs = 0;
  int within_10 = 0;
};
Residuals residuals(const std::vector<const MeasuredOp*>& pts, const HardwareSpec& h) {
  Residuals r;
  if (pts.empty()) return r;
  double s = 0;
  for (const MeasuredOp* m : pts) {
    const double lr = log_residual(*m, h);
    s += lr * lr;
    const double rel = predict_time(*m, h) / m->measured_s - 1.0;
    r.max_abs = std::max(r.max_abs, std::abs(rel));
    if (std::abs(rel) <= 0.10) ++r.within_10;
  }
  r.rms = std::sqrt(s / static_cast<double>(pts.size()));
  return r;
}

// The class's parameters: all of them when every one is determined by the points.
std::vector<Param> class_params(CalibClass c, const std::vector<const MeasuredOp*>& pts, std::string* note) {
  auto count = [&](auto pred) { return std::count_if(pts.begin(), pts.end(), pred); };
  switch (c) {
    case CalibClass::kGemmBf16: {
      if (pts.size() < 4) {
        *note = "fewer than 4 points: only the peak fraction fitted";
        return {p_gemm};
      }
      // Small and skinny GEMMs (a dimension of 256 or less, or a grouped GEMM) set the
      // memory roofline and the fixed time per compute kernel; without them both are kept.
      const auto small = count([](const MeasuredOp* m) {
        const GemmShape& g = m->op.gemm;
        return g.groups > 1 || std::min({g.m, g.n, g.k}) <= 256;
      });
      if (small < 3) {
        *note = "fewer than 3 small GEMMs: gemm_roofline_exponent and kernel_fixed_us kept";
        return {p_gemm, p_dim_half};
      }
      // The small GEMMs also set the memory stream's SM fill and lcm-exec's host enqueue floor.
      std::vector<Param> ps{p_gemm, p_dim_half, p_roofline, p_kernel_fixed, p_sm_fill, p_c_exposed, p_fill_bw,
                            p_exec_enqueue};
      // Accumulating BF16 outputs past L2 (the router's input gradients) set their miss rate.
      const auto accumulating = count([](const MeasuredOp* m) {
        const GemmShape& g = m->op.gemm;
        return g.c_bytes > 2.0 && g.c_bytes < 8.0 && static_cast<double>(g.m) * static_cast<double>(g.n) * 2.0 > 64e6;
      });
      if (accumulating >= 3) ps.push_back(p_acc_miss);
      // Few-output-tile GEMMs over a long k (a skinny output, k of 8192 or more: the router's
      // weight gradients) set the split-K chunk.
      const auto long_k = count([](const MeasuredOp* m) {
        const GemmShape& g = m->op.gemm;
        return g.groups == 1 && std::min(g.m, g.n) <= 256 && g.k >= 8192;
      });
      if (long_k >= 3) ps.push_back(p_split_k);
      // Grouped GEMMs of many groups (16 or more: the back-to-back fixed time is then at
      // least 15 of the group's fixed times) set the fixed time of a GEMM queued behind another.
      const auto grouped = count([](const MeasuredOp* m) { return m->op.gemm.groups >= 16; });
      if (grouped < 3) {
        *note = "fewer than 3 grouped GEMMs of 16 or more groups: grouped_gemm_fixed_us kept";
        return ps;
      }
      ps.push_back(p_grouped_fixed);
      return ps;
    }
    case CalibClass::kGemmFp8:
      *note = "shape curve (gemm_dim_half, tiles) shared with the BF16 fit";
      return {p_gemm_fp8};
    case CalibClass::kGemmFp8Block:
      *note = "shape curve (gemm_dim_half, tiles) shared with the BF16 fit";
      return {p_gemm_fp8_block};
    case CalibClass::kAttention: {
      const auto fwd = count([](const MeasuredOp* m) { return m->op.pass != Pass::kBwd; });
      const auto bwd = static_cast<long>(pts.size()) - fwd;
      std::vector<Param> ps;
      if (fwd) ps.push_back(p_attn_fwd);
      if (bwd) ps.push_back(p_attn_bwd);
      if (!fwd || !bwd) *note = fwd ? "no backward points: attention_bwd kept" : "no forward points: attention_fwd kept";
      if (static_cast<long>(pts.size()) > static_cast<long>(ps.size()) + 1) ps.push_back(p_attn_half);
      std::set<int64_t> dims;
      for (const MeasuredOp* m : pts) dims.insert(m->op.attn.head_dim_qk + m->op.attn.head_dim_v);
      if (dims.size() > 1) ps.push_back(p_head_dim_half);
      else if (note->empty()) *note = "one head dim measured: attention_head_dim_half kept";
      if (std::any_of(pts.begin(), pts.end(), [](const MeasuredOp* m) {
            return m->op.pass == Pass::kBwd && m->op.attn.head_dim_qk + m->op.attn.head_dim_v > 256;
          }))
        ps.push_back(p_wide_dim);
      // The CTA tail shows where a shape has at most a few CTAs per SM (b x heads x blocks of
      // 128 queries below 4 x 132).
      if (std::any_of(pts.begin(), pts.end(), [](const MeasuredOp* m) {
            const AttentionShape& a = m->op.attn;
            return a.batch * a.heads_q * ((a.seq_q + kAttentionBlockQ - 1) / kAttentionBlockQ) <= 4 * 132;
          }))
        ps.push_back(p_cta_tail);
      // The forward's slowdown once one KV head's K and V outgrow L2 (50 MiB on Hopper) shows in
      // forwards whose K and V of a head exceed 32 MiB: with at least 3 of them, its size and
      // the ramp's two ends are fitted.
      const auto beyond_l2 = count([](const MeasuredOp* m) {
        return m->op.pass != Pass::kBwd && attention_kv_head_bytes(m->op.attn) > 32.0 * kMiB;
      });
      if (beyond_l2 >= 3) {
        ps.push_back(p_l2_slowdown);
        ps.push_back(p_l2_start);
        ps.push_back(p_l2_full);
      }
      return ps;
    }
    case CalibClass::kMemory: {
      // A memory-bound kernel's fixed time shows in small copies: fitted here, where copies
      // span sizes from launch-bound to bandwidth-bound (its own key, memory_fixed_us; the
      // compute kernels' kernel_fixed_us comes from the small GEMMs).
      double lo = std::numeric_limits<double>::infinity(), hi = 0;
      for (const MeasuredOp* m : pts) lo = std::min(lo, m->op.mem.bytes), hi = std::max(hi, m->op.mem.bytes);
      if (pts.size() >= 3 && hi >= 64 * lo) return {p_hbm, p_memory_fixed};
      *note = "sizes span less than 64x: memory_fixed_us kept";
      return {p_hbm};
    }
    case CalibClass::kNvlink:
    case CalibClass::kNic: {
      const bool nv = c == CalibClass::kNvlink;
      if (pts.size() < 4) {
        *note = "fewer than 4 points: only the bandwidth fraction fitted";
        return {nv ? p_nvlink : p_nic};
      }
      // The per-step latency is kept (the profile quotes NCCL's own constant): on groups
      // of one size it is indistinguishable from the half-point, which adds half / peak.
      *note = nv ? "nvlink_latency_us kept (degenerate with nvlink_half_MiB on one group size)"
                 : "nic_latency_us kept (degenerate with nic_half_MiB on one group size)";
      if (!nv) return {p_nic, p_nic_half};
      // NVLink: the all-reduce sets `nvlink`; each other collective measured gets its own
      // scale (all-reduce absent: the first present kind anchors `nvlink`).
      std::set<Collective> kinds;
      for (const MeasuredOp* m : pts) {
        const Collective k = m->op.coll.kind == Collective::kReduceScatter ? Collective::kAllGather : m->op.coll.kind;
        kinds.insert(k);
      }
      std::vector<Param> ps{p_nvlink, p_nvlink_half};
      const bool anchor = kinds.count(Collective::kAllReduce) > 0;
      int skipped_anchor = anchor ? 1 : 0;
      for (const auto& [k, p] : {std::pair{Collective::kAllGather, p_ag_scale}, std::pair{Collective::kAllToAll, p_a2a_scale},
                                 std::pair{Collective::kSendRecv, p_p2p_scale}}) {
        if (!kinds.count(k)) continue;
        if (!skipped_anchor) {
          skipped_anchor = 1;  // this kind anchors `nvlink`; its scale stays
          continue;
        }
        ps.push_back(p);
      }
      double lo = std::numeric_limits<double>::infinity();
      for (const MeasuredOp* m : pts) lo = std::min(lo, m->op.coll.message_bytes);
      if (lo <= 1 << 20) ps.push_back(p_coll_base);
      // The LL protocol shows only in small ring collectives (all-reduce, all-gather,
      // reduce-scatter): fitted where at least 3 of them are 1 MiB or smaller.
      const auto small_ring = std::count_if(pts.begin(), pts.end(), [](const MeasuredOp* m) {
        return m->op.coll.kind != Collective::kAllToAll && m->op.coll.kind != Collective::kSendRecv &&
               m->op.coll.message_bytes <= (1 << 20);
      });
      if (small_ring >= 3) ps.push_back(p_nvlink_ll);
      if (pts.size() >= 12) ps.push_back(p_ramp);
      return ps;
    }
  }
  return {};
}

}  // namespace

int count_within(const std::vector<PointResult>& rows, double tolerance) {
  int n = 0;
  for (const PointResult& r : rows)
    if (r.point->measured_s > 0 && std::abs(r.error_after()) <= tolerance) ++n;
  return n;
}

std::vector<PointResult> compare(const std::vector<MeasuredOp>& points, const HardwareSpec& hw) {
  std::vector<PointResult> out;
  out.reserve(points.size());
  for (const MeasuredOp& m : points) {
    const double t = predict_time(m, hw);
    out.push_back({&m, calib_class(m), t, t});
  }
  return out;
}

namespace {

Calibration fit_all(const std::vector<MeasuredOp>& points, const HardwareSpec& start) {
  Calibration cal;
  cal.fitted = start;
  std::vector<std::vector<const MeasuredOp*>> by_class(kNumCalibClasses);
  for (const MeasuredOp& m : points)
    if (m.measured_s > 0) by_class[static_cast<size_t>(calib_class(m))].push_back(&m);

  // Memory first: it sets the fixed time per kernel that every compute class includes.
  cal.classes.resize(kNumCalibClasses);
  for (const CalibClass c : {CalibClass::kMemory, CalibClass::kGemmBf16, CalibClass::kGemmFp8, CalibClass::kGemmFp8Block, CalibClass::kAttention,
                             CalibClass::kNvlink, CalibClass::kNic}) {
    const int ci = static_cast<int>(c);
    const auto& pts = by_class[static_cast<size_t>(ci)];
    ClassFit cf;
    cf.cls = c;
    cf.points = static_cast<int>(pts.size());
    const Residuals rb = residuals(pts, start);
    cf.rms_before = rb.rms;
    cf.max_abs_before = rb.max_abs;
    cf.within_10_before = rb.within_10;
    if (pts.empty()) {
      cf.note = "no measurements: parameters kept";
    } else {
      std::vector<Param> params = class_params(c, pts, &cf.note);
      HardwareSpec before = cal.fitted;
      if (c == CalibClass::kGemmBf16) {
        // Discrete tile sizes: fit the continuous parameters for each and keep the best.
        double best = std::numeric_limits<double>::infinity();
        HardwareSpec best_hw = cal.fitted;
        for (int tm : {64, 128, 256})
          for (int tn : {64, 128, 256}) {
            HardwareSpec h = before;
            h.efficiency.gemm_tile_m = tm;
            h.efficiency.gemm_tile_n = tn;
            const double ss = fit(pts, params, h);
            if (ss < best - 1e-12) {
              best = ss;
              best_hw = h;
            }
          }
        cal.fitted = best_hw;
      } else {
        fit(pts, params, cal.fitted);
      }
      for (const Param& p : params) {
        HardwareSpec b = before;
        cf.params.push_back({p.key, p.ref(b) / p.unit, p.ref(cal.fitted) / p.unit});
      }
      if (c == CalibClass::kGemmBf16) {
        cf.params.push_back({"efficiency.gemm_tile_m", static_cast<double>(before.efficiency.gemm_tile_m),
                             static_cast<double>(cal.fitted.efficiency.gemm_tile_m)});
        cf.params.push_back({"efficiency.gemm_tile_n", static_cast<double>(before.efficiency.gemm_tile_n),
                             static_cast<double>(cal.fitted.efficiency.gemm_tile_n)});
      }
      cf.fitted = true;
    }
    const Residuals ra = residuals(pts, cal.fitted);
    cf.rms_after = ra.rms;
    cf.max_abs_after = ra.max_abs;
    cf.within_10_after = ra.within_10;
    cal.classes[static_cast<size_t>(ci)] = std::move(cf);
  }

  const HardwareSpec& after = cal.fitted;
  cal.points.reserve(points.size());
  for (const MeasuredOp& m : points) cal.points.push_back({&m, calib_class(m), predict_time(m, start), predict_time(m, after)});
  cal.total_within_10 = count_within(cal.points, 0.10);
  return cal;
}

// 2^round(log2(bytes)) as its exponent: the size bucket of a copy or a message.
long size_bucket(double bytes) { return std::lround(std::log2(std::max(bytes, 1.0))); }

// Cross-validates `cal` (the fit of all `points` from `start`) over `k` folds of shapes.
void cross_validate(const std::vector<MeasuredOp>& points, const HardwareSpec& start, int k, Calibration& cal) {
  assert(k >= 2 && cal.points.size() == points.size());
  CrossValidation& cv = cal.cv;
  cv.folds = k;
  const std::vector<int> fold = assign_folds(points, k);
  for (int f = 0; f < k; ++f) {
    std::vector<MeasuredOp> train;
    std::vector<size_t> held;
    for (size_t i = 0; i < points.size(); ++i) {
      if (fold[i] == f) held.push_back(i);
      else train.push_back(points[i]);
    }
    if (held.empty()) continue;
    // The same fit from the same start: classes whose every shape is held out keep start's values.
    const HardwareSpec hw = fit_all(train, start).fitted;
    for (size_t i : held) {
      cal.points[i].fold = f;
      cal.points[i].predicted_cv_s = predict_time(points[i], hw);
    }
  }

  std::vector<std::set<std::string>> shapes(kNumCalibClasses);
  std::vector<std::vector<double>> in(kNumCalibClasses), out(kNumCalibClasses);
  std::vector<double> all_in, all_out;
  std::set<std::string> all_shapes;
  for (const PointResult& r : cal.points) {
    const auto c = static_cast<size_t>(r.cls);
    const std::string key = shape_key(*r.point);
    shapes[c].insert(key);
    all_shapes.insert(key);
    if (!(r.point->measured_s > 0)) continue;  // not fitted, not scored (as count_within)
    in[c].push_back(r.error_after());
    out[c].push_back(r.error_cv());
    all_in.push_back(r.error_after());
    all_out.push_back(r.error_cv());
  }
  cv.shapes = static_cast<int>(all_shapes.size());
  cv.classes.clear();
  for (int c = 0; c < kNumCalibClasses; ++c) {
    const auto ci = static_cast<size_t>(c);
    cv.classes.push_back({static_cast<CalibClass>(c), static_cast<int>(shapes[ci].size()), summarize_errors(in[ci]),
                          summarize_errors(out[ci])});
  }
  cv.in_sample = summarize_errors(all_in);
  cv.held_out = summarize_errors(all_out);
}

}  // namespace

std::string shape_key(const MeasuredOp& m) {
  const Op& o = m.op;
  switch (o.kind) {
    case OpKind::kGemm:
    {
      // Uneven per-expert loads are part of the shape (the largest bucket's share tells
      // Zipf-skewed routing from balanced).
      std::string key = fmt::format("gemm/dtype{}/m{:09}/n{:09}/k{:09}/g{:05}/{}", static_cast<int>(o.dtype), o.gemm.m,
                                    o.gemm.n, o.gemm.k, o.gemm.groups, o.gemm.split_k ? "split_k" : "split_m");
      if (!o.gemm.loads.even()) key += fmt::format("/top{:.3f}", o.gemm.loads.share[0]);
      return key;
    }
    case OpKind::kAttention: {
      const AttentionShape& a = o.attn;
      return fmt::format("attention/b{:06}/sq{:09}/skv{:09}/hq{:05}/hkv{:05}/dqk{:05}/dv{:05}/{}/w{:.6f}", a.batch,
                         a.seq_q, a.seq_kv, a.heads_q, a.heads_kv, a.head_dim_qk, a.head_dim_v,
                         a.causal ? "causal" : "full", a.work_fraction) +
             (a.kv_block > 0 ? fmt::format("/kv{:09}", a.kv_block) : std::string()) + (a.unfused ? "/unfused" : "") +
             (a.dropout ? "/dropout" : "");
    }
    case OpKind::kMemoryBound: return fmt::format("memory/2^{:03}", size_bucket(o.mem.bytes));
    case OpKind::kCollective:
    case OpKind::kSendRecv:
      return fmt::format("collective/{}/ranks{:06}/nodes{:05}/per_node{:04}/2^{:03}", to_string(o.coll.kind),
                         m.topo.size, m.topo.nodes, m.topo.per_node, size_bucket(o.coll.message_bytes));
  }
  return "?";
}

std::vector<int> assign_folds(const std::vector<MeasuredOp>& points, int k) {
  assert(k >= 2);
  // Per class: shape key -> fold, dealt round-robin in the order of (FNV-1a hash of the key,
  // key). Dealt in key order, the i-th size of every collective kind would land in one fold
  // whenever a kind has a multiple of k sizes.
  auto fnv1a = [](const std::string& s) {
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
  };
  std::vector<std::map<std::string, int>> folds(kNumCalibClasses);
  std::vector<std::string> keys;
  keys.reserve(points.size());
  for (const MeasuredOp& m : points) {
    keys.push_back(shape_key(m));
    folds[static_cast<size_t>(calib_class(m))].emplace(keys.back(), 0);
  }
  for (auto& cls : folds) {
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& kv : cls) order.emplace_back(fnv1a(kv.first), kv.first);
    std::sort(order.begin(), order.end());
    int next = 0;
    for (const auto& [hash, key] : order) cls.at(key) = next++ % k;
  }
  std::vector<int> out;
  out.reserve(points.size());
  for (size_t i = 0; i < points.size(); ++i)
    out.push_back(folds[static_cast<size_t>(calib_class(points[i]))].at(keys[i]));
  return out;
}

ErrorSummary summarize_errors(std::vector<double> relative_errors) {
  ErrorSummary s;
  s.points = static_cast<int>(relative_errors.size());
  if (relative_errors.empty()) return s;
  double sum = 0;
  for (double& e : relative_errors) {
    e = std::abs(e);
    sum += e;
    if (e <= 0.10) ++s.within_10;
  }
  std::sort(relative_errors.begin(), relative_errors.end());
  const size_t n = relative_errors.size();
  s.median_abs = n % 2 ? relative_errors[n / 2] : 0.5 * (relative_errors[n / 2 - 1] + relative_errors[n / 2]);
  s.mean_abs = sum / static_cast<double>(n);
  return s;
}

Calibration calibrate(const std::vector<MeasuredOp>& points, const HardwareSpec& start, int folds) {
  Calibration cal = fit_all(points, start);
  if (folds >= 2) cross_validate(points, start, folds, cal);
  return cal;
}

}  // namespace lcm
