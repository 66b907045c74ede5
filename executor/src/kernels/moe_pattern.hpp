// The synthetic routing term of `bench moe` (moe.hpp), shared by the device kernel and the
// host reference: G(seed, token, expert), a standard Gumbel variate from 24 hashed bits.
#pragma once

#include <math.h>

#include "lcm/executor/pattern.hpp"

namespace lcm::exec::pattern {

LCM_HD float routing_gumbel(uint64_t seed, uint64_t token, uint32_t expert) {
  const uint64_t h = mix64((seed * 0x9e3779b97f4a7c15ull) ^ (token * 0x100000001b3ull + expert * 0x2545f4914f6cdd1dull));
  const float u = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
  return -logf(-logf(u));
}

}  // namespace lcm::exec::pattern
