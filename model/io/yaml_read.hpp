// Private: small typed readers over yaml-cpp nodes, shared by the scenario loader, the
// hardware-profile loader and the Megatron importer. Every reader returns the value or an
// error *message* ("expected an integer >= 1, got 0"); the caller attaches file:line:column
// and the key. Numbers are parsed strictly (std::from_chars over the whole scalar), never
// through yaml-cpp's lenient conversions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/io/names.hpp"

namespace lcm::io {

// A place in an input: file plus 1-based line/column (0 = unknown, e.g. "--set").
struct Loc {
  std::string file;
  int line = 0;
  int column = 0;
};

Loc loc_of(const YAML::Mark& mark, const std::string& file);
ConfigError error_at(const Loc& loc, std::string key, std::string message);

// Parse a whole YAML document; any yaml-cpp or std exception (ParserException with its
// mark, DeepRecursion, bad conversions) becomes a ConfigError.
Result<YAML::Node> parse_yaml(const std::string& text, const std::string& file);

// Value-or-message for the typed readers: Bad carries what was expected.
struct Bad {
  std::string message;
};
template <class T>
using Read = std::variant<T, Bad>;
template <class T>
bool failed(const Read<T>& r) {
  return r.index() == 1;
}
template <class T>
const std::string& why(const Read<T>& r) {
  return std::get<1>(r).message;
}

// Integers: plain scalars of decimal digits with an optional sign. `min`/`max` are
// inclusive bounds named in the message.
Read<int64_t> read_int(const YAML::Node& n, int64_t min, int64_t max = INT64_MAX);
// read_int whose upper bound is one of lcm's caps (lcm/model/limits.hpp): the message says so.
Read<int64_t> read_capped_int(const YAML::Node& n, int64_t min, int64_t cap);
// Finite reals (integers accepted). `min_exclusive`: value must be > min, else >= min.
Read<double> read_double(const YAML::Node& n, double min, bool min_exclusive);
Read<bool> read_bool(const YAML::Node& n);
Read<std::string> read_string(const YAML::Node& n);
// Integers with an optional binary suffix K (x1024) or M (x1024^2): 4K, 128K, 1M, at most `cap`.
Read<int64_t> read_size_with_suffix(const YAML::Node& n, int64_t min, int64_t cap);
Read<int64_t> parse_size_with_suffix(std::string_view text, int64_t min, int64_t cap);

// What a scalar looks like, for messages: "'abc'", "a list", "a mapping".
std::string describe(const YAML::Node& n);

// Megatron's list-pattern strings (arguments.py _eval_pattern: digits , [ ] ( ) + *):
// "([0]*3+[1]*58)", "[1,1,0]*2", "[0]+[1]*23". Returns the flattened list. Brackets nest at
// most kMaxListPatternDepth deep and the list has at most kMaxListPatternLength elements.
inline constexpr int kMaxListPatternDepth = 100;
inline constexpr size_t kMaxListPatternLength = 1'000'000;
Read<std::vector<int>> eval_list_pattern(std::string_view text);
// Inverse for 0/1 patterns: run-length form "([0]*3+[1]*58)".
std::string list_pattern_string(const std::vector<uint8_t>& pattern);

// closest() and unknown_message(): lcm/model/io/names.hpp.

// Strings helpers.
std::string trim(std::string_view s);

}  // namespace lcm::io
