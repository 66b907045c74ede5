// Bounded, regular-file-only reading of user input (see input_file.hpp).
#include "lcm/model/io/input_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lcm::io {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

ConfigError file_error(const std::string& path, const std::string& what, const std::string& why) {
  return ConfigError{path, 0, 0, "", fmt::format("cannot read {}: {}", what, why)};
}

std::string too_large(size_t max_bytes) {
  return fmt::format("larger than {} (the limit on input files)", byte_size_text(max_bytes));
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string byte_size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (size_t{1} << 10) && bytes % (size_t{1} << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

Result<std::string> read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  if (path.empty()) return file_error("<input>", what, "empty file name");
  // O_NONBLOCK: opening a FIFO with no writer must not block; it is refused below.
  const Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) return file_error(path, what, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return file_error(path, what, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return file_error(path, what, fmt::format("{}; lcm reads only regular files", file_kind(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return file_error(path, what, too_large(max_bytes));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);  // one more byte: notices a file that grew
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return file_error(path, what, std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > max_bytes) return file_error(path, what, too_large(max_bytes));
    if (got == text.size()) text.resize(std::min(text.size() * 2, max_bytes + 1));
  }
  text.resize(got);
  return text;
}

Result<std::string> read_input_stream(std::istream& in, const std::string& display, const std::string& what,
                                      size_t max_bytes) {
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) return file_error(display, what, too_large(max_bytes));
  }
  if (in.bad()) return file_error(display, what, "read error");
  return text;
}

}  // namespace lcm::io
