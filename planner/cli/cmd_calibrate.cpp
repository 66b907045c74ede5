// `lcm calibrate RESULTS... --profile hwprofiles/h200-sxm.yaml -o FILE`: fits the profile's
// time-model parameters to measured op times (lcm-exec results directories or summaries,
// nccl-tests logs) by least squares and writes the calibrated profile (-o: the command's
// output, which the model uses unchanged); the fit report (residual per op class, in
// --format) goes to stdout or --report-out. With --compare it fits nothing: its output is
// the predicted-vs-measured table of the profile as it stands (stdout or -o, as for every
// other command). By default the fit is also cross-validated over 5 folds of shapes
// (--folds); a held-out share within 10% far below the in-sample one is a WARNING, and with
// --strict-cv an exit code 3 and no profile written.
#include "commands.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "lcm/model/calibration.hpp"
#include "lcm/model/uncertainty.hpp"
#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/calibrate/measurements.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/calibration_report.hpp"

namespace lcm::cli {

namespace {

// --strict-cv: the cross-validated fit failed the guard (the report is written, the profile not).
constexpr int kExitCvGuard = 3;

struct CalibrateArgs {
  std::vector<std::string> inputs;
  std::string profile;
  std::string output;       // calibrated profile
  std::string format = "table";
  std::string report;  // fit report file (--report-out; default stdout)
  bool points = false;
  bool compare = false;
  int folds = 5;  // 0 or 1: no cross-validation
  double cv_max_drop_pp = report::kDefaultCvMaxDropPp;
  bool strict_cv = false;
};

// "FILE: KEY: why" lines grouped by why: "N points skipped: why (e.g. FILE: KEY)".
std::vector<std::string> skipped_summary(const std::vector<std::string>& skipped) {
  std::vector<std::pair<std::string, std::pair<int, std::string>>> groups;
  for (const std::string& s : skipped) {
    const size_t a = s.find(": "), b = a == std::string::npos ? a : s.find(": ", a + 2);
    const std::string why = b == std::string::npos ? s : s.substr(b + 2);
    const std::string where = b == std::string::npos ? "" : s.substr(0, b);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == why; });
    if (it == groups.end()) groups.push_back({why, {1, where}});
    else ++it->second.first;
  }
  std::vector<std::string> out;
  for (const auto& [why, g] : groups)
    out.push_back(fmt::format("skipped {} point{}: {} (e.g. {})", g.first, g.first == 1 ? "" : "s", why, g.second));
  return out;
}

int run_calibrate(const CalibrateArgs& a) {
  auto found = io::find_hardware_profile(a.profile, {});
  if (!found) {
    std::cerr << "lcm: " << found.error().str() << "\n";
    return kExitBadInput;
  }
  const std::string profile_path = found.value();
  auto read = io::read_input_file(profile_path, "hardware profile");
  if (!read) {
    std::cerr << "lcm: " << read.error().str() << "\n";
    return kExitBadInput;
  }
  const std::string profile_text = std::move(read).value();
  auto hw = io::load_hardware_profile_text(profile_text, profile_path);
  if (!hw) {
    std::cerr << "lcm: " << hw.error().str() << "\n";
    return kExitBadInput;
  }
  calib::Measurements ms;
  for (const std::string& in : a.inputs) {
    auto r = calib::read_measurements(in, hw.value().interconnect.gpus_per_node, ms);
    if (!r) {
      std::cerr << "lcm: " << r.error().str() << "\n";
      return kExitBadInput;
    }
  }
  if (ms.points.empty()) {
    std::cerr << "lcm: no usable measurements in " << fmt::format("{}", fmt::join(a.inputs, ", "))
              << (ms.skipped.empty() ? "" : fmt::format(" ({} points skipped, e.g. {})", ms.skipped.size(), ms.skipped[0]))
              << "\n";
    return kExitBadInput;
  }
  // FlashAttention-2 points are priced with the profile's own terms for it: a profile without
  // them cannot price those points (validation refuses such a scenario the same way).
  for (const auto& p : ms.points)
    if (p.op.kind == OpKind::kAttention && p.op.attn.flash2 && !hw.value().efficiency.has_flash2_terms()) {
      std::cerr << "lcm: " << p.key << ": a FlashAttention-2 point (flash2) needs efficiency.attention_flash2_fwd and "
                << "_bwd in the hardware profile (" << profile_path << " has none)\n";
      return kExitBadInput;
    }
  const report::Format f = parse_format(a.format);
  // Points of another part (an H100 profile on H200 summaries): a warning on stderr and in the
  // report, not an error (a deliberate cross-part comparison is legitimate).
  const std::vector<std::string> mismatches = calib::gpu_mismatches(ms, hw.value());
  for (const std::string& m : mismatches) std::cerr << "lcm: calibrate: warning: " << m << "\n";

  if (a.compare) {
    if (!a.output.empty() && !a.report.empty()) {
      std::cerr << "lcm: calibrate --compare: its report is its output; give -o FILE or --report-out FILE, not both\n";
      return kExitBadInput;
    }
    const auto rows = compare(ms.points, hw.value());
    report::Table t = report::comparison_table(rows, fmt::format("{}: predicted vs measured", profile_path));
    for (const std::string& s : skipped_summary(ms.skipped)) t.notes.push_back(s);
    for (const std::string& m : mismatches) t.notes.push_back("WARNING: " + m);
    std::string text;
    if (f == report::Format::kJson) {
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (const PointResult& r : rows)
        j.push_back({{"op", r.point->name}, {"key", r.point->key}, {"class", to_string(r.cls)},
                     {"measured_s", r.point->measured_s}, {"predicted_s", r.predicted_after_s},
                     {"error", r.error_after()}});
      text = j.dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render({t}, f);  // one table: a CSV file is read by scripts
    } else {
      text = report::render({t, report::comparison_family_table(rows)}, f);
    }
    return write_output(a.output.empty() ? a.report : a.output, text) ? kExitOk : kExitFailure;
  }

  if (a.output.empty()) {
    std::cerr << "lcm: calibrate: -o FILE (the calibrated profile) is required unless --compare is given\n";
    return kExitBadInput;
  }
  if (a.strict_cv && a.folds < 2) {
    std::cerr << fmt::format("lcm: calibrate: --strict-cv needs cross-validation (--folds 2 or more, not {})\n",
                             a.folds);
    return kExitBadInput;
  }
  const bool profile_to_stdout = a.output == "-", report_to_stdout = a.report.empty() || a.report == "-";
  if (a.output == a.report || (profile_to_stdout && report_to_stdout)) {
    std::cerr << fmt::format(
        "lcm: calibrate: the calibrated profile (-o) and the fit report (--report-out) would both "
        "go to {}; give the report its own file\n",
        profile_to_stdout ? "stdout" : a.output);
    return kExitBadInput;
  }
  const Calibration cal = calibrate(ms.points, hw.value(), a.folds >= 2 ? a.folds : 0);
  const std::string warning = report::cv_warning(cal, a.cv_max_drop_pp);
  const bool refused = a.strict_cv && !warning.empty();
  // The report's notes carry the warning; stderr too where no person reads those notes.
  if (!warning.empty() && (!report_to_stdout || f == report::Format::kCsv || f == report::Format::kJson))
    std::cerr << "lcm: calibrate: " << warning << "\n";

  std::vector<io::ProfileEdit> edits;
  {
    std::vector<std::string> sources;
    for (const std::string& in : a.inputs) sources.push_back(std::filesystem::path(in).filename().string());
    edits.push_back({"name", fmt::format("Calibrated by `lcm calibrate` from {} measured points ({}); the fitted "
                                         "keys below say what they were. Named after its file.",
                                         ms.points.size(), fmt::join(sources, ", "))});
  }
  for (const ClassFit& c : cal.classes) {
    if (!c.fitted) continue;
    for (const FittedParam& p : c.params)
      edits.push_back({p.key, fmt::format("lcm calibrate: {:.4g} -> {:.4g}, fitted on {} {} points (rms error {:.1f}% -> "
                                          "{:.1f}%, {}/{} within 10%)",
                                          p.before, p.after, c.points, to_string(c.cls),
                                          100.0 * rms_relative(c.rms_before), 100.0 * rms_relative(c.rms_after),
                                          c.within_10_after, c.points)});
  }
  // A profile is named after its file (hwprofiles/NAME.yaml is found by NAME).
  HardwareSpec written = cal.fitted;
  written.name = written.gpu.name = std::filesystem::path(a.output).stem().string();
  auto edited = io::edit_hardware_profile(profile_text, profile_path, written, edits);
  if (!edited) {
    // The edited profile is reloaded with the profile's bounds: a fit outside them (an
    // efficiency below 1% from impossible measurements) is refused, not written.
    std::cerr << "lcm: " << a.output << ": calibrated profile not written: " << edited.error().str() << "\n";
    return kExitBadInput;
  }
  // The op-level error bands (model/uncertainty.hpp) from the residuals: held out when
  // cross-validated, else in-sample (the source says which).
  {
    std::vector<std::string> sources;
    for (const std::string& in : a.inputs) sources.push_back(std::filesystem::path(in).filename().string());
    const std::string source =
        cal.cv.folds >= 2
            ? fmt::format("lcm calibrate: held-out residuals ({}-fold cross-validation by shape) of {} points ({})",
                          cal.cv.folds, ms.points.size(), fmt::join(sources, ", "))
            : fmt::format("lcm calibrate: IN-SAMPLE residuals of the fit (no cross-validation) of {} points ({})",
                          ms.points.size(), fmt::join(sources, ", "));
    edited = io::set_profile_uncertainty(edited.value(), profile_path, op_uncertainty_of(cal, source));
    if (!edited) {
      std::cerr << "lcm: " << a.output << ": calibrated profile not written: " << edited.error().str() << "\n";
      return kExitBadInput;
    }
  }
  if (!refused && !write_output(a.output, edited.value())) return kExitFailure;

  const std::string written_note =
      refused
          ? fmt::format("calibrated profile NOT written to {} (--strict-cv and the cross-validation WARNING)", a.output)
          : fmt::format("calibrated profile written to {}", a.output);
  std::string text;
  if (f == report::Format::kJson) {
    auto j = report::calibration_json(cal, a.cv_max_drop_pp);
    j["profile"] = profile_path;
    j["output"] = a.output;
    j["profile_written"] = !refused;
    j["skipped"] = ms.skipped;
    j["gpu_mismatches"] = mismatches;
    text = j.dump(2) + "\n";
  } else {
    auto tables = report::calibration_tables(cal, a.points, a.cv_max_drop_pp);
    for (const std::string& s : skipped_summary(ms.skipped)) tables.front().notes.push_back(s);
    for (const std::string& m : mismatches) tables.front().notes.push_back("WARNING: " + m);
    tables.front().notes.push_back(written_note);
    text = report::render(tables, f);
  }
  if (!write_output(a.report, text)) return kExitFailure;
  if (refused) {
    std::cerr << "lcm: calibrate: " << written_note << "\n";
    return kExitCvGuard;
  }
  return kExitOk;
}

}  // namespace

void register_calibrate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("calibrate",
                                 "Fit a hardware profile's time-model parameters to measured op times (lcm-exec "
                                 "results, nccl-tests logs) and write the calibrated profile");
  auto a = std::make_shared<CalibrateArgs>();
  cmd->add_option("RESULTS", a->inputs,
                  "lcm-exec results directories or summary JSON files, nccl-tests logs (text)")
      ->required();
  cmd->add_option("--profile", a->profile, "Hardware profile to start from (name or path)")->required();
  cmd->add_option("-o,--output", a->output,
                  "Write the calibrated profile (YAML) to FILE (atomically); required unless --compare, whose output "
                  "is its report (stdout, or FILE)")
      ->check(output_path_validator());
  cmd->add_option("--format", a->format, "Format of the report (the fit's, or --compare's table)")
      ->check(CLI::IsMember({"table", "md", "csv", "json"}))
      ->capture_default_str();
  cmd->add_option("--report-out,--report", a->report,
                  "Write the fit report to FILE (atomically) instead of stdout (--report: the same, its former name)")
      ->check(output_path_validator());
  cmd->add_flag("--points", a->points, "Add the per-point predicted-vs-measured table to the report");
  auto* compare =
      cmd->add_flag("--compare", a->compare, "Fit nothing: the predicted-vs-measured table of --profile as it stands");
  cmd->add_option("--folds", a->folds,
                  "Cross-validate the fit over K folds of distinct op shapes (each fold refitted on the others and "
                  "scored on its own points); 0 or 1: no cross-validation")
      ->check(in_range(0, 1000))
      ->capture_default_str()
      ->excludes(compare);
  cmd->add_option("--cv-max-drop", a->cv_max_drop_pp,
                  "Warn when the cross-validated share of points within 10% is more than PP percentage points below "
                  "the in-sample share")
      ->check(in_range(0.0, 100.0))
      ->capture_default_str()
      ->excludes(compare);
  cmd->add_flag("--strict-cv", a->strict_cv,
                "When that warning is given, write no profile and exit with code 3 (the report is still written)")
      ->excludes(compare);
  cmd->callback([a, &exit_code] { exit_code = run_calibrate(*a); });
}

}  // namespace lcm::cli
