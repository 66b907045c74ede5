// Cache keys of the model functions that the incremental estimator (incremental.hpp)
// shares between layouts. Each cached function declares its key type and the function
// computing it next to itself (structure_key in mesh.hpp, memory_key in memory.hpp,
// topology_key in timing.hpp, layer_ops_key / edge_ops_key / step_ops_key in
// schedule.hpp, pass_time_key in step_time.hpp), computed from the inputs the function
// reads. A key holds only the inputs a layout sets (LayoutInputs, incremental.hpp); the
// rest of the scenario is the key's scope, fixed for an estimator's lifetime.
//
// Contract, for two scenarios a, b of one scope: key(a) == key(b) implies that the
// function's results for a and b are equal, bit for bit. tests/model/cache_key_test.cpp
// checks it for every scenario knob the loader knows, one knob changed at a time on
// several bundled scenarios; a knob a function reads but its key omits fails there,
// naming both.
//
// A key is a plain struct of int32_t fields (no padding: hashed by its bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace lcm {

template <class Key>
constexpr void check_key_type() {
  static_assert(std::has_unique_object_representations_v<Key> && sizeof(Key) % 4 == 0,
                "a cache key is a struct of int32_t fields");
}

// Equality of two keys by their bytes: the same as the defaulted operator== (no padding,
// int32_t fields only) in one vectorised memcmp instead of a branch per field.
template <class Key>
bool key_equal(const Key& a, const Key& b) {
  check_key_type<Key>();
  return std::memcmp(&a, &b, sizeof(Key)) == 0;
}

template <class Key>
size_t key_hash(const Key& k) {
  check_key_type<Key>();
  uint64_t h = 0x9e3779b97f4a7c15ull;
  const auto* p = reinterpret_cast<const unsigned char*>(&k);
  for (size_t i = 0; i < sizeof(Key); i += 4) {
    uint32_t x;
    std::memcpy(&x, p + i, 4);
    h ^= static_cast<uint64_t>(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return static_cast<size_t>(h ^ (h >> 33));
}

}  // namespace lcm
