// Calibration: the time model's hardware parameters fitted to measured op times.
//
// A measured point is one op the executor timed (a GEMM shape, an attention core, a
// memory-bound kernel, a collective on a group), expressed as the model's own op, so its
// prediction comes from the same functions the step time uses (timing.hpp): there is no
// second formula here. `calibrate` fits, per op class, the EfficiencySpec / interconnect
// parameters that class depends on by nonlinear least squares on log(predicted/measured)
// (Eigen's Levenberg-Marquardt), leaves classes without points untouched, and reports the
// residuals before and after. docs/calibration.md describes the fit.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lcm/model/ops.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/timing.hpp"

namespace lcm {

// Op classes with their own parameters (fitted in this order: FP8 GEMMs reuse the BF16
// shape curve).
enum class CalibClass : uint8_t {
  kGemmBf16,    // efficiency.gemm, gemm_dim_half, gemm_tile_m / _n
  kGemmFp8,     // efficiency.gemm_fp8
  kAttention,   // efficiency.attention_fwd, attention_bwd, attention_seq_half_tokens
  kMemory,      // efficiency.hbm
  kNvlink,      // efficiency.nvlink, nvlink_half_MiB, nvlink_latency_us (groups on one node)
  kNic,         // efficiency.nic, nic_half_MiB, nic_latency_us (groups across nodes)
};
inline constexpr int kNumCalibClasses = 6;
const char* to_string(CalibClass c);

struct MeasuredOp {
  std::string name;    // the op's name (schedule name such as "L.attn.core.fwd", or bench.*)
  std::string key;     // unique key of the point in its results (e.g. "gemm/bf16/4096x6144x4096")
  std::string source;  // file it was read from
  Op op;               // kind, pass, dtype and shape (op.id is kNone)
  GroupTopology topo;  // collectives: the group's ranks, nodes, ranks per node
  double measured_s = 0;  // median time of one call
  double spread = 0;      // (p90 - p10) / median of the repetitions, 0 when unknown
};

CalibClass calib_class(const MeasuredOp& m);
// The model's time for the op (one call), on `hw`.
double predict_time(const MeasuredOp& m, const HardwareSpec& hw);

// One fitted parameter: its profile key (as in hwprofiles/*.yaml, dotted for blocks,
// e.g. "efficiency.gemm", "nvlink_latency_us") and its value before and after, in the
// profile's units.
struct FittedParam {
  std::string key;
  double before = 0;
  double after = 0;
};

// The relative error a root mean square of log(predicted / measured) stands for.
inline double rms_relative(double rms_log) { return std::exp(rms_log) - 1.0; }

struct ClassFit {
  CalibClass cls = CalibClass::kGemmBf16;
  int points = 0;
  bool fitted = false;          // false: no points (parameters kept) or too few to fit
  std::string note;             // why not fitted, or what was held fixed
  std::vector<FittedParam> params;
  // Residuals: relative error (predicted - measured) / measured over the class's points.
  double rms_before = 0, rms_after = 0;        // root mean square of log(pred / meas), as a fraction
  double max_abs_before = 0, max_abs_after = 0;
  int within_10_before = 0, within_10_after = 0;  // points with |error| <= 10%
};

struct PointResult {
  const MeasuredOp* point = nullptr;
  CalibClass cls = CalibClass::kGemmBf16;
  double predicted_before_s = 0;
  double predicted_after_s = 0;
  double error_after() const { return predicted_after_s / point->measured_s - 1.0; }
  double error_before() const { return predicted_before_s / point->measured_s - 1.0; }
};

struct Calibration {
  HardwareSpec fitted;
  std::vector<ClassFit> classes;     // one per CalibClass, in enum order
  std::vector<PointResult> points;   // input order; pointers into the caller's vector
  int total_within_10 = 0;           // after the fit
};

// Rows whose |predicted / measured - 1| after the fit is at most `tolerance`.
int count_within(const std::vector<PointResult>& rows, double tolerance);

// Fits `start`'s parameters to the points (which must outlive the result). Classes
// without points keep their parameters. Deterministic.
Calibration calibrate(const std::vector<MeasuredOp>& points, const HardwareSpec& start);

// The predicted-vs-measured comparison of a profile as it stands (no fitting): the same
// PointResult rows with predicted_before_s == predicted_after_s.
std::vector<PointResult> compare(const std::vector<MeasuredOp>& points, const HardwareSpec& hw);

}  // namespace lcm
