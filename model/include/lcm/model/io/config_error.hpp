// The one error type of everything that reads user input (YAML files, Megatron
// command lines, --set overrides). Rendered as one line:
//   FILE:LINE:COLUMN: KEY: MESSAGE
// Line and column are 1-based; 0 means unknown (e.g. an override given on the command
// line, whose `file` is "--set").
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace lcm::io {

struct ConfigError {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;      // dotted path of the offending key, e.g. "parallel.tensor_model_parallel_size"
  std::string message;  // what was expected
  std::string str() const;
};

// Value or ConfigError (std::expected is C++23).
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT(google-explicit-constructor)
  Result(ConfigError error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const ConfigError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ConfigError> v_;
};

}  // namespace lcm::io
