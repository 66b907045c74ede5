// Runs the built `lcm` from the source tree root, stdin from /dev/null, and captures its
// exit code, stdout and stderr (the CLI tests' one way of calling the binary).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace lcm::test {

struct LcmRun {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `tag` names the scratch directory (one per test program and process).
inline LcmRun run_lcm(const std::string& args, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("lcm_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const fs::path out = tmp / "out", err = tmp / "err";
  const std::string cmd = std::string("cd '") + LCM_SOURCE_DIR + "' && '" + LCM_BINARY_DIR + "/bin/lcm' " + args +
                          " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  LcmRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace lcm::test
