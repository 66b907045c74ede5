// Reading user input files safely: only regular files (a FIFO, device or socket would block
// or never end: `lcm estimate /dev/zero`), at most kMaxInputBytes, and the reason in one line
// when a file cannot be read. Every reader of user files (scenarios, hardware profiles,
// Megatron command lines, expert loads, measurements) goes through here.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

#include "lcm/model/io/config_error.hpp"

namespace lcm::io {

// 16 MiB: the largest bundled input is ~40 KiB; a measurement summary of every op of a
// large model stays far below this.
inline constexpr size_t kMaxInputBytes = size_t{16} << 20;

// The whole file, or a ConfigError "PATH: cannot read WHAT: why" (not found, a directory,
// not a regular file, larger than `max_bytes`).
Result<std::string> read_input_file(const std::string& path, const std::string& what = "file",
                                    size_t max_bytes = kMaxInputBytes);

// A stream to its end (stdin), failing once it exceeds `max_bytes`; `display` names it.
Result<std::string> read_input_stream(std::istream& in, const std::string& display, const std::string& what = "input",
                                      size_t max_bytes = kMaxInputBytes);

// "16 MiB" (sizes in messages).
std::string byte_size_text(size_t bytes);

}  // namespace lcm::io
