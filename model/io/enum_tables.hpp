// Private: the string <-> enum tables behind lcm/model/io/enums.hpp, exposed as spans so
// the loader can list the accepted spellings in an error ("expected one of: ...") and
// suggest the closest one. The first spelling of each value is canonical.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lcm/model/specs.hpp"

namespace lcm::io {

template <class E>
struct Spelling {
  std::string_view name;
  E value;
};

template <class E>
std::span<const Spelling<E>> spellings();

template <class E>
std::optional<E> parse_enum(std::string_view s) {
  for (const auto& sp : spellings<E>())
    if (sp.name == s) return sp.value;
  return std::nullopt;
}

// "a, b, c" over the canonical spellings (aliases in parentheses after their value).
template <class E>
std::string spelling_list() {
  std::string out;
  const auto table = spellings<E>();
  for (size_t i = 0; i < table.size(); ++i) {
    const bool alias = i > 0 && table[i - 1].value == table[i].value;
    if (alias) {
      out += " (or ";
      out += table[i].name;
      out += ")";
      continue;
    }
    if (!out.empty()) out += ", ";
    out += table[i].name;
  }
  return out;
}

}  // namespace lcm::io
