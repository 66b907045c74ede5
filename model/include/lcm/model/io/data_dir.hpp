// Where lcm finds its bundled data (hwprofiles/, scenarios/, validation/), so that an
// installed lcm works without the source tree. Search order:
//   1. $LCM_DATA_DIR (when set and not empty);
//   2. <directory of the running executable>/../share/lcm (what `cmake --install` lays out);
//   3. the source tree, only for a binary run from its build tree (uninstalled).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lcm::io {

// The data directories in search order (existing or not; 3. only when it applies).
std::vector<std::filesystem::path> data_dirs();

// The first <dir>/<relative> that exists, over data_dirs().
std::optional<std::filesystem::path> find_data(const std::filesystem::path& relative);

// "$LCM_DATA_DIR, /usr/share/lcm, ..." for messages: where a name was looked up.
std::string data_dirs_text(const std::string& sub);

}  // namespace lcm::io
