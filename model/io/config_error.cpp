// ConfigError rendering: "file:line:column: key: message" (line/column omitted when 0).
#include "lcm/model/io/config_error.hpp"

namespace lcm::io {

std::string ConfigError::str() const {
  std::string out = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    out += ':' + std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

}  // namespace lcm::io
