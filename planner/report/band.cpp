// Error bands in reports (planner/include/lcm/planner/report/band.hpp).
#include "lcm/planner/report/band.hpp"

#include <cmath>

#include <fmt/format.h>

namespace lcm::report {

using nlohmann::ordered_json;

std::string fmt_with_range(double value, const Range& r, int decimals) {
  return fmt::format("{:.{}f} ({:.{}f}-{:.{}f})", value, decimals, r.low, decimals, r.high, decimals);
}

std::string fmt_pct_with_range(double fraction, const Range& r) {
  return fmt::format("{:.1f}% ({:.1f}-{:.1f}%)", 100.0 * fraction, 100.0 * r.low, 100.0 * r.high);
}

std::string fmt_relative_band(const StepBand& b) {
  return fmt::format("{:+.0f}%..{:+.0f}%", 100.0 * b.low, 100.0 * b.high);
}

std::string band_note(const OpUncertainty& ops) {
  const SpreadData& comp = composition_spread();
  return fmt::format(
      "ranges: the 80% error band of the step time (MFU and throughput inversely), docs/time-model.md \"Error bands\": "
      "op-level spreads {}; composition spread {:+.2f}%..{:+.2f}% from {} published-table rows, a DEVELOPMENT-SET "
      "figure "
      "(the model was developed against those rows){}",
      ops.present ? fmt::format("of the profile ({} residuals: {})", ops.points, ops.source)
                  : std::string("absent (the profile has no uncertainty section)"),
      100.0 * comp.band.low, 100.0 * comp.band.high, comp.rows,
      // Within half a per cent of zero or above: the published steps ran longer than predicted in
      // about 9 rows of 10 (since session 38).
      comp.band.low > -0.005 ? "; its low end is zero or above: those published steps ran longer than predicted, so a "
                               "band may lie (almost) wholly above its step time"
                             : "");
}

ordered_json band_json(const StepBand& b, double step_s, double tokens_per_s_per_gpu, double mfu, double hfu,
                       const OpUncertainty& ops) {
  auto pair = [](const Range& r) { return ordered_json::array({r.low, r.high}); };
  const SpreadData& comp = composition_spread();
  ordered_json op{{"present", b.op_present}, {"log_center", b.op_center}, {"log_half_width", b.op_half}};
  if (ops.present) {
    op["points"] = ops.points;
    op["source"] = ops.source;
  }
  return ordered_json{{"coverage", 0.8},
                      {"relative_low", b.low},
                      {"relative_high", b.high},
                      {"step_s", pair(time_range(step_s, b))},
                      {"tokens_per_s_per_gpu", pair(rate_range(tokens_per_s_per_gpu, b))},
                      {"mfu", pair(rate_range(mfu, b))},
                      {"hfu", pair(rate_range(hfu, b))},
                      {"op_level", op},
                      {"composition", ordered_json{{"log_center", b.comp_center},
                                                   {"log_half_width", b.comp_half},
                                                   {"rows", comp.rows},
                                                   {"development_set", comp.development_set},
                                                   {"source", comp.source}}}};
}

}  // namespace lcm::report
