// Internal to lcm_model: an open-addressing hash map from a cache key (cache_key.hpp) to
// V (linear probing, no erase): memo tables that only grow until clear(). Values move
// when the table grows; keep them behind pointers.
#pragma once

#include <utility>
#include <vector>

#include "lcm/model/cache_key.hpp"

namespace lcm {

template <class Key, class V>
class KeyMap {
 public:
  // The value for `k`, default-constructed when new.
  V& operator[](const Key& k) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = key_hash(k) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = k;
        ++size_;
        return s.value;
      }
      if (key_equal(s.key, k)) return s.value;
    }
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    Key key{};
    V value{};
    bool used = false;
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.clear();
    slots_.resize(old.empty() ? 64 : old.size() * 2);
    size_ = 0;
    for (Slot& s : old)
      if (s.used) (*this)[s.key] = std::move(s.value);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace lcm
