// Expert capacity and routing-group tokens (capacity.hpp).
#include "lcm/model/capacity.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "lcm/model/resolve.hpp"

namespace lcm {

int64_t capacity_for_assignments(double assignments, int experts, double cf, int64_t min_capacity) {
  assert(experts > 0 && cf > 0 && assignments >= 0);
  // Saturates at the assignments T*k: no expert can receive more (it gets at most T), so any
  // larger capacity drops nothing, and a huge CF cannot overflow the integer.
  const double c = std::min(std::ceil((assignments / experts) * cf), std::max(1.0, std::ceil(assignments)));
  const auto cap = static_cast<int64_t>(c);
  return min_capacity > 0 ? std::max(cap, min_capacity) : cap;
}

int64_t capacity(int64_t tokens, int topk, int experts, double cf, int64_t min_capacity) {
  return capacity_for_assignments(static_cast<double>(tokens * topk), experts, cf, min_capacity);
}

int64_t routing_group_tokens(const Scenario& s, const Mesh& m) { return resolve(s, m).sp_tokens_int; }

}  // namespace lcm
