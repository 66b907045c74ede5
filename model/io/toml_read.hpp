// Private: a strict reader of the TOML subset lcm writes (`lcm export torchtitan`) and
// TorchTitan's own train_configs use: `[table]` / `[a.b]` headers, `key = value` with bare
// keys, values that are basic "strings" (escapes \" \\ \n \t), 'literal strings', integers,
// floats, true/false, and one-line arrays of those; # comments. Everything else TOML allows
// (inline tables, multi-line strings or arrays, dotted keys, dates, [[arrays of tables]]) is
// an error naming file:line, as are duplicate keys and tables. Debian 12 has toml++
// (libtomlplusplus-dev) but lcm does not depend on it for this one reader.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lcm/model/io/config_error.hpp"

namespace lcm::io {

struct TomlValue {
  enum class Kind { kString, kInt, kFloat, kBool, kArray };
  Kind kind = Kind::kString;
  std::string str;  // kString
  int64_t i = 0;  // kInt
  double d = 0;  // kFloat (and kInt, converted)
  bool b = false;  // kBool
  std::vector<TomlValue> items;  // kArray
  int line = 0;
};

// Tables by name ("" = before any header), keys in each.
struct TomlDoc {
  std::map<std::string, std::map<std::string, TomlValue>> tables;
};

Result<TomlDoc> parse_toml_subset(const std::string& text, const std::string& file);

}  // namespace lcm::io
