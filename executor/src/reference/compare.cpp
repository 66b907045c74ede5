// The result comparer (see compare.hpp).
#include "lcm/executor/compare.hpp"

#include <algorithm>
#include <cmath>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

namespace {

double rel_l2_of(double err2, double ref2) {
  return ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
}

}  // namespace

double Tolerance::at(double ref, double mag) const {
  return rel * std::max(std::fabs(ref), ref_floor) + mag_rel * std::fabs(mag) + abs;
}

int64_t Comparison::failures() const {
  const int64_t w = wrong + std::max<int64_t>(nonfinite, 0);
  return w == 0 && !ok() ? 1 : w;
}

void Comparison::merge(const Comparison& o) {
  checked += o.checked;
  wrong += o.wrong;
  if (o.worst_index >= 0 && (worst_index < 0 || !(o.max_err_ratio <= max_err_ratio))) {
    max_err_ratio = o.max_err_ratio;
    worst_index = o.worst_index;
    worst_got = o.worst_got;
    worst_ref = o.worst_ref;
  }
  rel_l2 = std::max(rel_l2, o.rel_l2);
  rel_l2_limit = o.rel_l2_limit;
  if (o.nonfinite >= 0) nonfinite = std::max<int64_t>(nonfinite, 0) + o.nonfinite;
}

Comparison Comparison::from_sums(int64_t checked, int64_t wrong, int64_t nonfinite, double err2, double ref2,
                                 double rel_l2_limit) {
  Comparison c;
  c.checked = checked;
  c.wrong = wrong;
  c.nonfinite = nonfinite;
  c.rel_l2 = rel_l2_of(err2, ref2);
  c.rel_l2_limit = rel_l2_limit;
  return c;
}

Comparer::Comparer(const Tolerance& t) : tol_(t) { c_.rel_l2_limit = t.rel_l2_limit; }

bool Comparer::add(double got, double ref, double mag, int64_t index) {
  const double tol = tol_.at(ref, mag) + 1e-30;  // never 0: a ratio, and an exact 0 == 0 passes
  const double err = std::fabs(got - ref);
  const int64_t at = index >= 0 ? index : c_.checked;
  ++c_.checked;
  const bool pass = err <= tol;  // NaN compares false
  if (!pass) ++c_.wrong;
  const double ratio = std::isfinite(err) ? err / tol : INFINITY;
  if (c_.worst_index < 0 || ratio > c_.max_err_ratio) {
    c_.max_err_ratio = ratio;
    c_.worst_index = at;
    c_.worst_got = got;
    c_.worst_ref = ref;
  }
  err2_ = std::isfinite(err) ? err2_ + err * err : INFINITY;
  ref2_ += ref * ref;
  return pass;
}

Comparison Comparer::result() const {
  Comparison c = c_;
  c.rel_l2 = rel_l2_of(err2_, ref2_);
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j = {{"checked", c.checked}, {"wrong", c.wrong}};
  if (c.nonfinite >= 0) j["nonfinite"] = c.nonfinite;
  j["max_err_over_tolerance"] = c.max_err_ratio;
  if (c.worst_index >= 0) j["worst"] = {{"index", c.worst_index}, {"got", c.worst_got}, {"ref", c.worst_ref}};
  j["rel_l2_error"] = c.rel_l2;
  j["rel_l2_limit"] = c.rel_l2_limit;
  j["ok"] = c.ok();
  return j;
}

Comparison compare(std::span<const float> got, std::span<const float> ref, std::span<const float> mag,
                   const Tolerance& t) {
  if (got.size() != ref.size() || (!mag.empty() && mag.size() != ref.size()))
    throw ExecError("compare: got, ref and mag differ in size");
  Comparer c(t);
  for (size_t i = 0; i < ref.size(); ++i)
    c.add(got[i], ref[i], mag.empty() ? 0.0 : static_cast<double>(mag[i]), static_cast<int64_t>(i));
  return c.result();
}

}  // namespace lcm::exec
