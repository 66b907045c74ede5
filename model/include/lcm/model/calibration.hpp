// Calibration: the time model's hardware parameters fitted to measured op times.
//
// A measured point is one op the executor timed (a GEMM shape, an attention core, a
// memory-bound kernel, a collective on a group), expressed as the model's own op, so its
// prediction comes from the same functions the step time uses (timing.hpp): there is no
// second formula here. `calibrate` fits, per op class, the EfficiencySpec / interconnect
// parameters that class depends on by nonlinear least squares on log(predicted/measured)
// (Eigen's Levenberg-Marquardt), leaves classes without points untouched, and reports the
// residuals before and after. With k folds it also cross-validates the fit by shape: each
// fold's shapes are predicted by the fit of the other folds, so the report can set the
// in-sample residuals next to held-out ones. docs/calibration.md describes both.
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
  kNvlink,      // efficiency.nvlink, nvlink_half_MiB, nvlink_ll, ... (groups on one node)
  kNic,         // efficiency.nic, nic_half_MiB, nic_latency_us (groups across nodes)
  kGemmFp8Block,  // efficiency.gemm_fp8_block (block-scaled FP8; the shape curve is the GEMMs')
};
inline constexpr int kNumCalibClasses = 7;
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
  // Cross-validation (Calibration::cv.folds >= 2): the point's fold and its time predicted
  // by the fit of the other folds, which saw no point of its shape.
  int fold = -1;
  double predicted_cv_s = 0;
  double error_after() const { return predicted_after_s / point->measured_s - 1.0; }
  double error_before() const { return predicted_before_s / point->measured_s - 1.0; }
  double error_cv() const { return predicted_cv_s / point->measured_s - 1.0; }
};

// ---- Cross-validation by shape -------------------------------------------------------
//
// A point's shape: its op kind and dimensions, without the pass (an attention core's
// forward and backward share one, so a held-out sequence length is held out of both),
// - GEMM: dtype, m, n, k, groups, split_k;
// - attention: batch, sequences, heads, head dims, causal, work fraction;
// - memory-bound: the bytes moved, to the nearest power of 2;
// - collective: kind, group size, nodes, ranks per node, message size to the nearest power of 2.
// Repetitions of one shape (several runs, a memcpy and a copy kernel of one size) share it.
// Keys sort numerically within a kind (zero-padded).
std::string shape_key(const MeasuredOp& m);

// The fold (0 .. k-1) of each point, k >= 2: per op class, the class's distinct shape keys,
// ordered by a fixed hash of the key (FNV-1a, then the key), are dealt to folds
// round-robin, so every point of one shape is in one fold, each fold holds about 1/k of
// every class's shapes, sizes are not dealt in order (no fold of all the smallest
// messages), and the assignment depends only on the set of shapes, not on the input order.
std::vector<int> assign_folds(const std::vector<MeasuredOp>& points, int k);

// |predicted / measured - 1| over a set of points.
struct ErrorSummary {
  int points = 0;
  int within_10 = 0;  // |error| <= 10%
  double median_abs = 0;  // median |error| (mean of the two middle values for even counts)
  double mean_abs = 0;  // mean |error|
  double within_share() const { return points ? static_cast<double>(within_10) / points : 0.0; }
};
ErrorSummary summarize_errors(std::vector<double> relative_errors);

struct ClassCv {
  CalibClass cls = CalibClass::kGemmBf16;
  int shapes = 0;  // distinct shapes among the class's points
  ErrorSummary in_sample;  // the final fit (all points) on its own points
  ErrorSummary held_out;  // each point by the fit of the folds without its shape
};

struct CrossValidation {
  int folds = 0;  // k; 0: not run
  int shapes = 0;  // distinct shapes over all points
  std::vector<ClassCv> classes;  // one per CalibClass, in enum order
  ErrorSummary in_sample, held_out;  // all classes
  // In-sample minus held-out share of points within 10%, in percentage points.
  double within_drop_pp() const { return 100.0 * (in_sample.within_share() - held_out.within_share()); }
};

struct Calibration {
  HardwareSpec fitted;
  std::vector<ClassFit> classes;  // one per CalibClass, in enum order
  std::vector<PointResult> points;  // input order; pointers into the caller's vector
  int total_within_10 = 0;  // after the fit
  CrossValidation cv;  // folds == 0 unless calibrate() was given folds >= 2
};

// Rows whose |predicted / measured - 1| after the fit is at most `tolerance`.
int count_within(const std::vector<PointResult>& rows, double tolerance);

// Fits `start`'s parameters to the points (which must outlive the result). Classes
// without points keep their parameters. Deterministic. With `folds` >= 2 it also
// cross-validates: for each fold, the whole fit is run again from `start` on the points of
// the other folds and the fold's points are predicted with it (Calibration::cv,
// PointResult::predicted_cv_s). The fitted profile is the fit of all points either way.
Calibration calibrate(const std::vector<MeasuredOp>& points, const HardwareSpec& start, int folds = 0);

// The predicted-vs-measured comparison of a profile as it stands (no fitting): the same
// PointResult rows with predicted_before_s == predicted_after_s.
std::vector<PointResult> compare(const std::vector<MeasuredOp>& points, const HardwareSpec& hw);

}  // namespace lcm
