// Number formats shared by the plan and sweep reports (internal to planner/report).
#pragma once

#include <string>

#include <fmt/format.h>

namespace lcm::report {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline std::string sec(double s) { return fmt::format("{:.3f}", s); }        // seconds, 3 decimals
inline std::string pct(double f) { return fmt::format("{:.1f}", 100.0 * f); }  // fraction as percent

}  // namespace lcm::report
