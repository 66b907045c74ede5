// Atomic checkpoints (checkpoint.hpp): write to a tmp directory with fsync, swap it in with
// two renames, recover from a save killed at any point.
#include "lcm/executor/train/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "lcm-exec-checkpoint/1";
constexpr const char* kChecksumName = "lcm-mx64";

[[noreturn]] void io_error(const fs::path& p, const std::string& what) {
  throw ExecError(p.string() + ": " + what + ": " + std::strerror(errno));
}

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) io_error(p, "cannot open for fsync");
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    io_error(p, "fsync failed");
  }
  ::close(fd);
}

void write_file(const fs::path& p, const void* data, size_t bytes) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(p, "cannot create");
  const auto* c = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, c, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      io_error(p, "write failed");
    }
    c += n;
    bytes -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) io_error(p, "fsync / close failed");
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) io_error(from, "cannot rename to " + to.string());
}

std::string hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n == "." || n == "..") return false;
  for (const char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

bool is_tmp(const fs::path& p) { return p.filename().string().rfind("checkpoint.tmp-", 0) == 0; }

// The recovery rule, applied before a save writes anything.
void recover(const fs::path& dir) {
  const fs::path cur = dir / "checkpoint", old = dir / "checkpoint.old";
  for (const auto& e : fs::directory_iterator(dir))
    if (is_tmp(e.path())) fs::remove_all(e.path());
  if (fs::exists(old)) {
    if (fs::exists(cur)) {
      fs::remove_all(old);
    } else {
      rename_or_throw(old, cur);
    }
    fsync_path(dir, true);
  }
}

[[noreturn]] void corrupt(const fs::path& p, const std::string& what) { throw ExecError(p.string() + ": " + what); }

}  // namespace

uint64_t checkpoint_checksum(const void* data, size_t bytes) {
  constexpr uint64_t kM1 = 0x9E3779B97F4A7C15ull, kM2 = 0xBF58476D1CE4E5B9ull;
  const auto* c = static_cast<const unsigned char*>(data);
  uint64_t h = 0x243F6A8885A308D3ull ^ static_cast<uint64_t>(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, c + i, std::min<size_t>(8, bytes - i));  // little-endian host (data.cpp asserts it)
    h ^= w * kM1;
    h = ((h << 29) | (h >> 35)) * kM2;
  }
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

void save_checkpoint(const fs::path& dir, const nlohmann::json& meta, const std::vector<CheckpointBlob>& blobs) {
  std::set<std::string> names;
  for (const CheckpointBlob& b : blobs) {
    if (!valid_name(b.name) || b.name == "manifest")
      throw ExecError("checkpoint blob name '" + b.name + "': expected [A-Za-z0-9._-]+, not 'manifest'");
    if (!names.insert(b.name).second) throw ExecError("checkpoint blob name '" + b.name + "' given twice");
  }
  fs::create_directories(dir);
  recover(dir);
  const fs::path tmp = dir / ("checkpoint.tmp-" + std::to_string(::getpid()));
  fs::create_directory(tmp);
  nlohmann::json manifest = {{"format", kFormat}, {"checksum", kChecksumName}, {"meta", meta}};
  manifest["blobs"] = nlohmann::json::array();
  for (const CheckpointBlob& b : blobs) {
    const std::string file = b.name + ".bin";
    write_file(tmp / file, b.data, b.bytes);
    manifest["blobs"].push_back({{"name", b.name},
                                 {"file", file},
                                 {"bytes", b.bytes},
                                 {"checksum", hex(checkpoint_checksum(b.data, b.bytes))}});
  }
  const std::string text = manifest.dump(2) + "\n";
  write_file(tmp / "manifest.json", text.data(), text.size());
  fsync_path(tmp, true);
  const fs::path cur = dir / "checkpoint", old = dir / "checkpoint.old";
  const bool had_old = fs::exists(cur);
  if (had_old) rename_or_throw(cur, old);
  rename_or_throw(tmp, cur);
  fsync_path(dir, true);
  if (had_old) fs::remove_all(old);
}

std::optional<LoadedCheckpoint> load_checkpoint(const fs::path& dir) {
  fs::path ck = dir / "checkpoint";
  if (!fs::exists(ck)) ck = dir / "checkpoint.old";
  if (!fs::exists(ck)) return std::nullopt;
  const fs::path mpath = ck / "manifest.json";
  std::ifstream mf(mpath);
  if (!mf) corrupt(mpath, "missing (an incomplete checkpoint directory)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(mf);
  } catch (const nlohmann::json::exception& e) {
    corrupt(mpath, std::string("not valid JSON: ") + e.what());
  }
  if (!m.is_object() || m.value("format", "") != kFormat || m.value("checksum", "") != kChecksumName)
    corrupt(mpath, std::string("expected format \"") + kFormat + "\" with checksum \"" + kChecksumName + "\"");
  LoadedCheckpoint out;
  out.meta = m.value("meta", nlohmann::json());
  const nlohmann::json blobs = m.value("blobs", nlohmann::json());
  if (!blobs.is_array()) corrupt(mpath, "\"blobs\": expected an array");
  for (const nlohmann::json& b : blobs) {
    std::string name, file, sum;
    size_t bytes = 0;
    try {
      name = b.at("name").get<std::string>();
      file = b.at("file").get<std::string>();
      bytes = b.at("bytes").get<size_t>();
      sum = b.at("checksum").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      corrupt(mpath, "a blob entry: expected name, file, bytes and checksum (" + std::string(e.what()) + ")");
    }
    if (!valid_name(name) || file != name + ".bin")
      corrupt(mpath, "blob '" + name + "': bad name or file '" + file + "'");
    const fs::path fpath = ck / file;
    std::ifstream f(fpath, std::ios::binary);
    if (!f) corrupt(fpath, "missing (listed in manifest.json)");
    std::vector<std::byte> data(bytes);
    f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes));
    const auto got = static_cast<size_t>(f.gcount());
    const bool longer = f.peek() != std::char_traits<char>::eof();
    if (got != bytes || longer)
      corrupt(fpath, "truncated or extended: manifest.json says " + std::to_string(bytes) + " bytes, the file has " +
                         std::to_string(fs::file_size(fpath)));
    const std::string computed = hex(checkpoint_checksum(data.data(), bytes));
    if (computed != sum)
      corrupt(fpath,
              "checksum mismatch: manifest.json says " + sum + ", the data gives " + computed + " (corrupt file)");
    out.blobs.emplace(name, std::move(data));
  }
  return out;
}

}  // namespace lcm::exec::train
