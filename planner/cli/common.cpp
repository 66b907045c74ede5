// Shared CLI plumbing.
#include "lcm/planner/cli/common.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/planner/report/capacity_report.hpp"
#include "lcm/planner/search/plan.hpp"
#include "plan_common.hpp"

namespace lcm::cli {

void add_scenario_options(CLI::App& cmd, ScenarioOptions& o) {
  cmd.add_option("scenario", o.path,
                 "Scenario YAML (scenarios/*.yaml) or a Megatron functional-test model_config.yaml")
      ->required();
  cmd.add_option("--set", o.sets,
                 "Override a key, Megatron-Core name: --set tensor_model_parallel_size=4 (repeatable)");
  cmd.add_option("--gpus", o.gpus, "GPU count (replaces the scenario's hardware.num_gpus)")
      ->check(in_range(int64_t{1}, limits::kNumGpus));
  cmd.add_option("--hw", o.hw, "Hardware profile name or path (replaces the scenario's hardware.profile)");
  cmd.add_option("--layout", o.layout,
                 "A layout in the planner's notation, as `lcm plan` prints it: \"tp2 cp4(p2p) pp2 vp2 ep8 etp1 dp4 mbs1 "
                 "sel optim alltoall\" (knobs not named keep the scenario's)");
}

std::optional<Scenario> apply_layout_option(const Scenario& base, const std::string& layout) {
  plan::Layout l;
  std::string error;
  if (!plan::parse_layout_string(layout, base, l, error)) {
    std::cerr << fmt::format("lcm: --layout \"{}\": {}\n", layout, error);
    return std::nullopt;
  }
  Scenario s = plan::apply_layout(base, l);
  const std::vector<Problem> problems = validate_scenario(s);
  if (!problems.empty()) {
    std::cerr << fmt::format("lcm: --layout \"{}\": {}: {}{}\n", layout, problems.front().key, problems.front().message,
                             problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : "");
    return std::nullopt;
  }
  return s;
}

std::optional<Scenario> load_or_report(const ScenarioOptions& o) {
  if (!o.layout.empty()) {
    // The layout replaces the scenario's own: a --set of one of its knobs would be lost.
    for (const std::string& set : o.sets) {
      const std::string key = set.substr(0, set.find('='));
      if (is_searched_key(key)) {
        std::cerr << fmt::format("lcm: --set {}: --layout sets {}; give it in one of them\n", set, key_base(key));
        return std::nullopt;
      }
    }
    // Only the scenario's model and job matter: its own layout may break (load_for_planning).
    auto base = load_for_planning(o, {}, 0);
    if (!base) return std::nullopt;
    return apply_layout_option(*base, o.layout);
  }
  io::LoadOptions lo;
  for (const std::string& s : o.sets) {
    auto ov = io::parse_override(s);
    if (!ov) {
      std::cerr << "lcm: " << ov.error().str() << "\n";
      return std::nullopt;
    }
    lo.overrides.push_back(ov.value());
  }
  lo.num_gpus = o.gpus;
  lo.hardware = o.hw;
  lo.replace_scenario_job = true;
  std::vector<std::string> notes;
  lo.notes = &notes;
  auto r = io::load_scenario(o.path, lo);
  if (!r) {
    std::cerr << "lcm: " << r.error().str() << "\n";
    return std::nullopt;
  }
  for (const std::string& n : notes) std::cerr << "lcm: note: " << n << "\n";
  return std::move(r).value();
}

CLI::Validator in_range(double lo, double hi) {
  auto show = [](double v) {
    return v == std::floor(v) && std::fabs(v) < 1e15 ? std::to_string(static_cast<int64_t>(v)) : fmt::format("{}", v);
  };
  const std::string bounds = "[" + show(lo) + ", " + show(hi) + "]";
  return CLI::Validator(
      [lo, hi, bounds](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "Value " + text + " is not a number";
        if (!(v >= lo && v <= hi)) return "Value " + text + " not in range " + bounds;
        return {};
      },
      "in " + bounds);
}

CLI::Validator output_path_validator() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        if (path.empty() || path == "-") return {};
        std::error_code ec;
        if (fs::is_directory(path, ec)) return path + " is a directory";
        const fs::path p(path);
        const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
        if (!fs::exists(dir, ec)) return "directory " + dir.string() + " does not exist";
        if (!fs::is_directory(dir, ec)) return dir.string() + " is not a directory";
        return {};
      },
      "FILE");
}

void add_output_options(CLI::App& cmd, OutputOptions& o, const std::vector<std::string>& formats) {
  cmd.add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember(formats))
      ->capture_default_str();
  cmd.add_option("-o,--output", o.output, "Write to FILE (atomically) instead of stdout")
      ->check(output_path_validator());
}

report::Format parse_format(const std::string& f) {
  if (f == "json") return report::Format::kJson;
  if (f == "csv") return report::Format::kCsv;
  if (f == "md" || f == "markdown") return report::Format::kMarkdown;
  return report::Format::kTable;
}

namespace {

// The temporary file of the write in progress, removed by the TERM/INT/HUP handler.
char g_temp_path[4096];
volatile sig_atomic_t g_temp_active = 0;

void remove_temp_and_reraise(int sig) {
  if (g_temp_active) ::unlink(g_temp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Installs the handler for the lifetime of one temporary file.
class TempGuard {
 public:
  explicit TempGuard(const std::string& path) {
    std::snprintf(g_temp_path, sizeof g_temp_path, "%s", path.c_str());
    g_temp_active = 1;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) old_[n_++] = {sig, std::signal(sig, remove_temp_and_reraise)};
  }
  ~TempGuard() {
    for (int i = 0; i < n_; ++i) std::signal(old_[i].first, old_[i].second);
    g_temp_active = 0;
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;

 private:
  std::pair<int, void (*)(int)> old_[3];
  int n_ = 0;
};

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool fail(const std::string& what, int err) {
  std::cerr << "lcm: " << what << ": " << std::strerror(err) << "\n";
  return false;
}

// Anything that is not a regular file (a device, a FIFO, a terminal) is written in place.
bool write_in_place(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return fail("cannot write " + path, errno);
  const bool ok = write_all(fd, text);
  const int err = errno;
  ::close(fd);
  return ok || fail("cannot write " + path, err);
}

}  // namespace

bool write_output(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    std::cout.flush();
    if (write_all(STDOUT_FILENO, text)) return true;
    return fail("cannot write to standard output", errno);
  }
  // Follow symlinks: the file written (atomically) is the link's target.
  std::error_code ec;
  fs::path target(path);
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) return fail("cannot write " + path, ELOOP);
    const fs::path to = fs::read_symlink(target, ec);
    if (ec) return fail("cannot write " + path, ec.value());
    target = to.is_absolute() ? to : target.parent_path() / to;
  }
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return fail("cannot write " + path, EISDIR);
    return write_in_place(target.string(), text);
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) {
    const int err = errno;
    return fail(fmt::format("cannot write {}: directory {}", path, dir.string()), err);
  }
  if (!S_ISDIR(dst.st_mode)) return fail(fmt::format("cannot write {}: {}", path, dir.string()), ENOTDIR);

  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", target.filename().string(), getpid());
  TempGuard guard(tmp.string());
  ::unlink(tmp.c_str());  // a leftover of a killed run with the same pid
  const mode_t mode = exists ? (st.st_mode & 07777) : 0666;  // new files: 0666 less the umask
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return fail("cannot write " + path, errno);
  bool ok = write_all(fd, text);
  int err = errno;
  if (ok && exists) {
    // Keep the existing file's mode (exactly: the umask does not apply) and, where allowed, its owner.
    if (::fchmod(fd, st.st_mode & 07777) != 0) ok = false, err = errno;
    if (ok && (st.st_uid != ::geteuid() || st.st_gid != ::getegid())) (void)!::fchown(fd, st.st_uid, st.st_gid);
  }
  if (ok && ::fsync(fd) != 0 && errno != EINVAL) ok = false, err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), target.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    return fail("cannot write " + path, err);
  }
  return true;
}

std::optional<std::vector<int64_t>> parse_size_list(const std::string& text, int64_t cap, std::string* error) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string tok = text.substr(pos, end - pos);
    pos = end + 1;
    if (tok.empty()) {
      *error = fmt::format("empty entry in '{}'", text);
      return std::nullopt;
    }
    if (static_cast<int64_t>(out.size()) == limits::kListEntries) {
      *error = fmt::format("more than {} entries (lcm's cap on list options)", limits::kListEntries);
      return std::nullopt;
    }
    const std::string entry = tok;
    int64_t mult = 1;
    const char last = tok.back();
    if (last == 'K' || last == 'k') mult = 1024;
    if (last == 'M' || last == 'm') mult = 1024 * 1024;
    if (mult != 1) tok.pop_back();
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    const bool digits = !tok.empty() && ec != std::errc::invalid_argument && p == tok.data() + tok.size();
    if (!digits || (ec == std::errc() && v <= 0)) {
      *error = fmt::format("'{}' is not a positive size (expected e.g. 4096, 32K or 1M)", entry);
      return std::nullopt;
    }
    if (ec != std::errc() || v > cap / mult || v * mult > cap) {
      *error = fmt::format("'{}' is above {} (lcm's cap, docs/scenario-format.md#caps)", entry, cap);
      return std::nullopt;
    }
    out.push_back(v * mult);
    if (end == text.size()) break;
  }
  return out;
}

std::optional<std::vector<double>> read_expert_loads(const std::string& path, std::string* error) {
  auto text = io::read_input_file(path, "the loads file");
  if (!text) {
    *error = text.error().str();
    return std::nullopt;
  }
  auto r = report::parse_expert_loads(text.value(), path);
  if (!r) {
    *error = r.error().str();
    return std::nullopt;
  }
  for (size_t i = 0; i < r.value().size(); ++i) {
    if (r.value()[i] > limits::kExpertLoad) {
      *error = fmt::format("{}: expert {}: load {:g} is above {:g} (lcm's cap on one expert's load)", path, i,
                           r.value()[i], limits::kExpertLoad);
      return std::nullopt;
    }
  }
  return std::move(r).value();
}

}  // namespace lcm::cli
