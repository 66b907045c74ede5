// `lcm plot KIND SCENARIO -o FILE.png|FILE.svg`: lcm-gui's charts rendered offscreen with the
// same chart code (gui/). Registers itself with the `lcm` app (lcm/planner/cli/registry.hpp);
// gui/CMakeLists.txt links it into `lcm` where Qt6 is found.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <QApplication>
#include <QChart>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/gui/chart_export.hpp"
#include "lcm/gui/plot.hpp"
#include "lcm/gui/validation_data.hpp"
#include "lcm/model/io/data_dir.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/cli/registry.hpp"

namespace lcm::gui {

namespace {

using cli::kExitBadInput;
using cli::kExitFailure;
using cli::kExitOk;

struct PlotArgs {
  std::string kind;
  std::string cf;
  std::string skew;
  std::string loads;
  std::string results;  // empty: default_validation_input()
  int width = 1200;
  int height = 700;
};

// Fills the kind's inputs; false after printing the reason.
bool build_inputs(const PlotArgs& a, gui::PlotInputs& in) {
  if (!a.cf.empty()) {
    std::stringstream ss(a.cf);
    for (std::string tok; std::getline(ss, tok, ',');) {
      char* end = nullptr;
      const double v = std::strtod(tok.c_str(), &end);
      if (tok.empty() || end != tok.c_str() + tok.size() || !(v > 0)) {
        std::cerr << "lcm: --cf: '" << tok << "' is not a capacity factor > 0 (expected e.g. 1.0,1.25,1.5)\n";
        return false;
      }
      in.capacity_factors.push_back(v);
    }
  }
  if (!a.skew.empty()) {
    char* end = nullptr;
    const std::string v = a.skew.rfind("zipf:", 0) == 0 ? a.skew.substr(5) : "";
    const double s = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !(s >= 0)) {
      std::cerr << "lcm: --skew: '" << a.skew << "': expected zipf:S with S >= 0 (e.g. zipf:1.0)\n";
      return false;
    }
    in.routing = RoutingKind::kZipf;
    in.zipf_s = s;
  }
  if (!a.loads.empty()) {
    std::string err;
    auto loads = cli::read_expert_loads(a.loads, &err);
    if (!loads) {
      std::cerr << "lcm: " << err << "\n";
      return false;
    }
    in.routing = RoutingKind::kMeasured;
    in.loads = std::move(*loads);
  }
  in.results_dir = a.results.empty() ? default_validation_input() : QString::fromStdString(a.results);
  if (a.kind == "validation" && in.results_dir.isEmpty()) {
    std::cerr << "lcm: plot validation: validation/measured/h200/calibration_inputs.txt not found in "
              << io::data_dirs_text("") << " (give --results)\n";
    return false;
  }
  return true;
}

void add_plot_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("plot", "Render one of lcm-gui's charts to PNG or SVG (offscreen)");
  auto a = std::make_shared<PlotArgs>();
  auto so = std::make_shared<cli::ScenarioOptions>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("kind", a->kind, fmt::format("Chart: {}", fmt::join(gui::plot_kinds(), ", ")))->required();
  cli::add_scenario_options(*cmd, *so);
  cmd->add_option("-o,--output", *out, "Image to write (atomically): FILE.png or FILE.svg")->required();
  cmd->add_option("--width", a->width, "Image width in pixels")->check(CLI::Range(200, 8000))->capture_default_str();
  cmd->add_option("--height", a->height, "Image height in pixels")->check(CLI::Range(150, 8000))->capture_default_str();
  cmd->add_option("--cf", a->cf, "capacity: capacity factors, comma-separated (default 1.0 to 3.0 by 0.125)");
  auto* skew = cmd->add_option("--skew", a->skew, "capacity: routing skew zipf:S (default: balanced)");
  cmd->add_option("--loads", a->loads, "capacity: measured per-expert loads file (docs/moe-routing.md)")->excludes(skew);
  cmd->add_option("--results", a->results,
                  "validation: an lcm-exec results directory, summary JSON or list of inputs (.txt); default: the H200 "
                  "calibration inputs, validation/measured/h200/calibration_inputs.txt in the data directory (the "
                  "Validation tab's default, the same points)");
  cmd->callback([a, so, out, &exit_code] {
    const auto& kinds = gui::plot_kinds();
    if (std::find(kinds.begin(), kinds.end(), a->kind) == kinds.end()) {
      std::cerr << "lcm: plot: unknown kind '" << a->kind << "' (expected one of: " << fmt::format("{}", fmt::join(kinds, ", "))
                << ")\n";
      exit_code = kExitBadInput;
      return;
    }
    const auto format = gui::image_format_for(QString::fromStdString(*out));
    if (!format) {
      std::cerr << "lcm: plot: -o " << *out << ": expected a .png or .svg file name\n";
      exit_code = kExitBadInput;
      return;
    }
    auto s = cli::load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    gui::PlotInputs in;
    if (!build_inputs(*a, in)) {
      exit_code = kExitBadInput;
      return;
    }
    // Offscreen unless the caller chose a platform: no display is needed.
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char arg0[] = "lcm";
    static char* argv[] = {arg0, nullptr};
    QApplication qapp(argc, argv);
    std::string err;
    const QByteArray bytes = gui::render_plot(a->kind, *s, in, QSize(a->width, a->height), *format, &err);
    if (bytes.isEmpty()) {
      std::cerr << "lcm: plot " << a->kind << ": " << err << "\n";
      exit_code = kExitBadInput;
      return;
    }
    QString werr;
    if (!gui::write_file_atomically(QString::fromStdString(*out), bytes, &werr)) {
      std::cerr << "lcm: " << werr.toStdString() << "\n";
      exit_code = kExitFailure;
      return;
    }
    exit_code = kExitOk;
  });
}

[[maybe_unused]] const bool kRegistered = cli::register_command("plot", add_plot_command);

}  // namespace

}  // namespace lcm::gui
