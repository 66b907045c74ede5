// Element-wise comparison of a kernel's output with its reference, shared by the training
// kernels' host and GPU tests: element i passes when |got - ref| <= rel |ref| + abs.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace lcm::exec::train::testing {

struct Check {
  int64_t failures = 0, worst = -1;
  double worst_excess = 0;  // |got - ref| / (rel |ref| + abs) of the worst element
  std::string what;
  bool ok() const { return failures == 0; }
};

inline Check compare(const std::vector<float>& got, const std::vector<float>& ref, double rel, double abs,
                     const std::string& what = "") {
  Check c;
  c.what = what;
  if (got.size() != ref.size()) {
    c.failures = 1;
    c.what += " (size mismatch)";
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double tol = rel * std::fabs(static_cast<double>(ref[i])) + abs;
    const double excess = std::isfinite(err) ? err / tol : 1e30;
    if (!(err <= tol)) ++c.failures;
    if (excess > c.worst_excess) {
      c.worst_excess = excess;
      c.worst = static_cast<int64_t>(i);
    }
  }
  return c;
}

inline std::string describe(const Check& c, const std::vector<float>& got, const std::vector<float>& ref) {
  std::ostringstream o;
  o << c.what << ": " << c.failures << " of " << got.size() << " elements out of tolerance";
  if (c.worst >= 0)
    o << "; worst [" << c.worst << "] got " << got[static_cast<size_t>(c.worst)] << " ref "
      << ref[static_cast<size_t>(c.worst)] << " (" << c.worst_excess << "x the tolerance)";
  return o.str();
}

// Cosine similarity of two vectors (1 for two zero vectors).
inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0 && bb == 0) return 1.0;
  return ab / std::sqrt(aa * bb);
}

}  // namespace lcm::exec::train::testing
