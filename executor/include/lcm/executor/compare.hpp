// The one result comparer of lcm-exec: a GPU output against its reference, element by
// element, under a mixed absolute / relative tolerance, plus a relative L2 bound over all
// checked elements. Every check uses it: GEMM (reference/gemm_check.cpp), attention and
// ring attention (reference/attention.cpp, kernels/cp_ring.cpp), the MoE layer
// (kernels/moe_layer.cpp). Each caller states its own Tolerance next to the call.
//
// An element passes when |got - ref| <= tolerance, with
//   tolerance = rel x max(|ref|, ref_floor) + mag_rel x mag + abs,
// mag being the caller's magnitude term of that element (for a sum, the sum of the absolute
// values of its terms: what rounding inside the sum scales with). NaN and infinity fail.
// The comparison is ok when no element fails, the relative L2 error ||got - ref|| / ||ref||
// stays within rel_l2_limit, and no non-finite value was found where one was looked for.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>

namespace lcm::exec {

struct Tolerance {
  double rel = 0;        // times |ref|
  double ref_floor = 0;  // |ref| counts as at least this (log-sum-exp: 1)
  double mag_rel = 0;    // times the caller's magnitude term
  double abs = 0;        // absolute floor
  double rel_l2_limit = 1e-2;
  double at(double ref, double mag) const;  // the tolerance of one element
};

struct Comparison {
  int64_t checked = 0;
  int64_t wrong = 0;         // elements outside tolerance (non-finite ones included)
  double max_err_ratio = 0;  // worst |got - ref| / tolerance; infinite when an element is not finite
  int64_t worst_index = -1;  // the element with that ratio (the caller's index; -1: none checked)
  double worst_got = 0, worst_ref = 0;
  double rel_l2 = 0;         // ||got - ref|| / ||ref|| over the checked elements
  double rel_l2_limit = 1e-2;
  int64_t nonfinite = -1;    // non-finite values found by a scan of the whole output (-1: not scanned)

  bool ok() const { return wrong == 0 && rel_l2 <= rel_l2_limit && nonfinite <= 0; }
  // What a point counts as wrong: the failing and non-finite elements, and at least 1 when
  // only the L2 bound fails.
  int64_t failures() const;
  // Combines two comparisons of the same output (e.g. two buffer sets): counts add, the worst
  // element and the largest relative L2 error are kept.
  void merge(const Comparison& o);
  // From sums accumulated elsewhere (a device-side comparison): sum of squared errors and of
  // squared references.
  static Comparison from_sums(int64_t checked, int64_t wrong, int64_t nonfinite, double err2, double ref2,
                              double rel_l2_limit);
};

// Accumulates one output's comparison element by element.
class Comparer {
 public:
  explicit Comparer(const Tolerance& t);
  // Compares one element; `index` identifies it in the report (default: the call count).
  // True when it is within tolerance.
  bool add(double got, double ref, double mag = 0, int64_t index = -1);
  Comparison result() const;

 private:
  Tolerance tol_;
  Comparison c_;
  double err2_ = 0, ref2_ = 0;
};

// checked, wrong, nonfinite (when scanned), max_err_over_tolerance, worst {index, got, ref},
// rel_l2_error, rel_l2_limit, ok: the `check` objects of summary.json.
nlohmann::json to_json(const Comparison& c);

// got[i] against ref[i] with magnitude term mag[i] (mag may be empty: no magnitude term).
Comparison compare(std::span<const float> got, std::span<const float> ref, std::span<const float> mag,
                   const Tolerance& t);

}  // namespace lcm::exec
