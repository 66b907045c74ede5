// Error bands: how far a predicted step time (and the MFU and throughput derived from it)
// and a predicted peak memory may be from a measurement, from the model's own residuals.
// The one home of the band formula; docs/time-model.md, "Error bands", derives it.
//
// A step time's band combines two independent sources in log space:
//   (1) the op level: each calibration class's residual band (HardwareSpec::uncertainty,
//       the cross-validated residuals `lcm calibrate` writes into the profile), weighted by
//       the class's share of the step (step_terms: compute per class, exposed communication,
//       the bubble spread over the compute classes, the optimizer as memory-bound);
//   (2) the composition: what op residuals do not see (exposed communication and overlap,
//       pipeline bubble, host-bound gaps), the step-level residuals of the published-table
//       comparison (composition_spread(): a DEVELOPMENT set, see its source).
// With centre m = (ln(1+low) + ln(1+high)) / 2 and half-width s = (ln(1+high) - ln(1+low)) / 2
// of each band, the op terms add linearly (errors of one class are systematic, so fully
// correlated), the two sources in quadrature:
//   m = sum_c w_c m_c + m_comp,  s = sqrt((sum_c w_c s_c)^2 + s_comp^2),
//   step band = step_s x [exp(m - s), exp(m + s)].
#pragma once

#include <array>

#include "lcm/model/calibration.hpp"
#include "lcm/model/comm.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/step_time.hpp"

namespace lcm {

// Step-level residuals of the published H100 tables (tests/model/perf_validation_test.cpp,
// docs/validation-performance.md): the composition term.
const SpreadData& composition_spread();
// The memory model's spread, memory_spread(), lives with the memory model (memory.hpp).
// Memory's error band (StageMemory::peak_low / peak_high, model/src/memory.cpp) is
// peak x (1 + memory_spread().band.low / .high); it decides the memory verdict (fits / tight
// / out of memory, Memory::fits and may_fit).

// The band of one step time, relative: the measured step lies in step_s x [1 + low, 1 + high].
struct StepBand {
  double low = 0, high = 0;
  double op_center = 0, op_half = 0;  // log space, the op-level term (weighted)
  double comp_center = 0, comp_half = 0;  // log space, the composition term
  bool op_present = false;  // the profile has op residuals (else the band is composition only)
  bool operator==(const StepBand&) const = default;
};

// `fp8`: the GEMMs run in FP8 (Precision::kFp8): the GEMM share takes gemm_fp8's band.
StepBand step_band(const std::array<double, kNumOpClasses>& compute,
                   const std::array<double, kNumCommDims>& exposed_comm, double bubble, double optimizer, bool fp8,
                   const OpUncertainty& ops);
inline StepBand step_band(const StepTime& t, const Scenario& s) {
  return step_band(t.compute, t.exposed_comm, t.bubble, t.optimizer, s.training.precision == Precision::kFp8,
                   s.hardware.uncertainty);
}

// A figure proportional to the step time (step_s) and one inversely proportional (MFU,
// throughput), at the band's ends: {low end, high end} of the figure itself.
struct Range {
  double low = 0, high = 0;
  bool operator==(const Range&) const = default;
};
inline Range time_range(double step_s, const StepBand& b) { return {step_s * (1 + b.low), step_s * (1 + b.high)}; }
inline Range rate_range(double rate, const StepBand& b) { return {rate / (1 + b.high), rate / (1 + b.low)}; }

// The op-level bands of a calibration: per class, the 10th and 90th percentiles of
// measured / predicted - 1 over its points, from the cross-validated predictions when the
// fit was cross-validated (held out), else from the fitted ones (in-sample). A class
// without points gets {0, 0}. `source` is stored as given.
OpUncertainty op_uncertainty_of(const Calibration& cal, const std::string& source);

// The q-quantile (0..1) of `values` with linear interpolation between order statistics
// (numpy's default); 0 for an empty set.
double quantile(std::vector<double> values, double q);

}  // namespace lcm
