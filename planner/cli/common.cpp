// Shared CLI plumbing.
#include "lcm/planner/cli/common.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <unistd.h>

#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::cli {

void add_scenario_options(CLI::App& cmd, ScenarioOptions& o) {
  cmd.add_option("scenario", o.path,
                 "Scenario YAML (scenarios/*.yaml) or a Megatron functional-test model_config.yaml")
      ->required();
  cmd.add_option("--set", o.sets,
                 "Override a key, Megatron-Core name: --set tensor_model_parallel_size=4 (repeatable)");
  cmd.add_option("--gpus", o.gpus, "GPU count (for Megatron model_config.yaml inputs)");
  cmd.add_option("--hw", o.hw, "Hardware profile name or path (for Megatron model_config.yaml inputs)");
}

std::optional<Scenario> load_or_report(const ScenarioOptions& o) {
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
  auto r = io::load_scenario(o.path, lo);
  if (!r) {
    std::cerr << "lcm: " << r.error().str() << "\n";
    return std::nullopt;
  }
  return std::move(r).value();
}

void add_output_options(CLI::App& cmd, OutputOptions& o, const std::vector<std::string>& formats) {
  cmd.add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember(formats))
      ->capture_default_str();
  cmd.add_option("-o,--output", o.output, "Write to FILE (atomically) instead of stdout");
}

report::Format parse_format(const std::string& f) {
  if (f == "json") return report::Format::kJson;
  if (f == "csv") return report::Format::kCsv;
  if (f == "md" || f == "markdown") return report::Format::kMarkdown;
  return report::Format::kTable;
}

bool write_output(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text;
    std::cout.flush();
    return static_cast<bool>(std::cout);
  }
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", target.filename().string(), getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      std::cerr << "lcm: cannot write " << tmp.string() << "\n";
      return false;
    }
    out << text;
    out.flush();
    if (!out) {
      std::cerr << "lcm: write failed: " << tmp.string() << "\n";
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::cerr << "lcm: cannot rename " << tmp.string() << " to " << path << ": " << ec.message() << "\n";
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> parse_size_list(const std::string& text, std::string* error) {
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
    int64_t mult = 1;
    const char last = tok.back();
    if (last == 'K' || last == 'k') mult = 1024;
    if (last == 'M' || last == 'm') mult = 1024 * 1024;
    if (mult != 1) tok.pop_back();
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || tok.empty() || v <= 0) {
      *error = fmt::format("'{}' is not a positive size (expected e.g. 4096, 32K or 1M)", tok);
      return std::nullopt;
    }
    out.push_back(static_cast<int64_t>(v) * mult);
    if (end == text.size()) break;
  }
  return out;
}

}  // namespace lcm::cli
