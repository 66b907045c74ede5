// Device-memory categories of a measured run: the keys under which `lcm-exec train` files its
// allocator's bytes (summary.json memory.at_peak_by_category, docs/train-output.md) and which
// `lcm compare` maps onto the memory model's terms (docs/compare.md). One list for both sides.
#pragma once

#include <cstdint>

namespace lcm {

enum class MemCategory : uint8_t { kWeights, kGrads, kOptimizer, kActivations, kWorkspace, kOther };
inline constexpr int kNumMemCategories = 6;
const char* to_string(MemCategory c);  // the JSON key: "weights", "grads", ..., "other"

}  // namespace lcm
