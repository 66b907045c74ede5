// Expert capacity and routing-group tokens (capacity.hpp).
#include "lcm/model/capacity.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "lcm/model/resolve.hpp"

namespace lcm {

int64_t capacity_for_assignments(double assignments, int experts, double cf, int64_t min_capacity) {
  assert(experts > 0 && cf > 0);
  const auto c = static_cast<int64_t>(std::ceil((assignments / experts) * cf));
  return min_capacity > 0 ? std::max(c, min_capacity) : c;
}

int64_t capacity(int64_t tokens, int topk, int experts, double cf, int64_t min_capacity) {
  return capacity_for_assignments(static_cast<double>(tokens * topk), experts, cf, min_capacity);
}

int64_t routing_group_tokens(const Scenario& s, const Mesh& m) { return resolve(s, m).sp_tokens_int; }

}  // namespace lcm
