// How every report shows an error band (model/uncertainty.hpp): a figure with its 80 %
// range, "12.345 (11.94-17.02)", the JSON object of a step time's band, and the one-line
// note that says what the band is and where its spreads come from.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lcm/model/specs.hpp"
#include "lcm/model/uncertainty.hpp"

namespace lcm::report {

// "12.345 (11.94-17.02)": the value and its range, `decimals` digits.
std::string fmt_with_range(double value, const Range& r, int decimals);
// Percentages of fractions: "41.2% (30.1-42.8%)".
std::string fmt_pct_with_range(double fraction, const Range& r);
// "-3%..+41%": the band relative to the prediction.
std::string fmt_relative_band(const StepBand& b);

// The note under a table with bands: the coverage, the two sources and, for the
// composition term, that it is a development-set figure.
std::string band_note(const OpUncertainty& ops);

// JSON: {"coverage", "relative_low", "relative_high", "step_s": [lo, hi],
// "tokens_per_s_per_gpu": [lo, hi], "mfu": [lo, hi], "hfu": [lo, hi], "op_level": {...},
// "composition": {...}} (docs/estimate-json.md).
nlohmann::ordered_json band_json(const StepBand& b, double step_s, double tokens_per_s_per_gpu, double mfu, double hfu,
                                 const OpUncertainty& ops);

}  // namespace lcm::report
