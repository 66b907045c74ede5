// The data-directory search (see data_dir.hpp).
#include "lcm/model/io/data_dir.hpp"

#include <cstdlib>
#include <string_view>
#include <system_error>

#ifndef LCM_SOURCE_DIR
#define LCM_SOURCE_DIR ""
#endif
#ifndef LCM_BINARY_DIR
#define LCM_BINARY_DIR ""
#endif

namespace lcm::io {

namespace fs = std::filesystem;

namespace {

fs::path running_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

// The executable lies in the build tree it was compiled in (build/bin/, or below it).
bool running_uninstalled(const fs::path& exe) {
  if (std::string_view(LCM_BINARY_DIR).empty() || exe.empty()) return false;
  std::error_code ec;
  const fs::path build = fs::weakly_canonical(LCM_BINARY_DIR, ec);
  if (ec) return false;
  for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
    if (fs::equivalent(d, build, ec)) return true;
  return false;
}

}  // namespace

std::vector<fs::path> data_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("LCM_DATA_DIR"); env && *env) dirs.emplace_back(env);
  const fs::path exe = running_executable();
  if (!exe.empty()) dirs.push_back((exe.parent_path() / ".." / "share" / "lcm").lexically_normal());
  if (!std::string_view(LCM_SOURCE_DIR).empty() && running_uninstalled(exe)) dirs.emplace_back(LCM_SOURCE_DIR);
  return dirs;
}

std::optional<fs::path> find_data(const fs::path& relative) {
  std::error_code ec;
  for (const fs::path& d : data_dirs())
    if (fs::exists(d / relative, ec)) return d / relative;
  return std::nullopt;
}

std::string data_dirs_text(const std::string& sub) {
  std::string out;
  for (const fs::path& d : data_dirs()) out += (out.empty() ? "" : ", ") + (d / sub).string();
  return out.empty() ? "nowhere (set LCM_DATA_DIR)" : out;
}

}  // namespace lcm::io
