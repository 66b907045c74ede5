// Constraints on the planner's search (`lcm plan --fix/--exclude/--max/--headroom`): which
// knob values the search space enumerates (planner/search/space.cpp applies them while it
// builds the space, so excluded layouts are never evaluated), and the HBM headroom a layout
// must leave to fit. docs/planner.md, "Search constraints".
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "lcm/model/specs.hpp"

namespace lcm::plan {

// The knobs with a size: --fix tp=8, --max pp=8, --exclude tp=1.
enum class SizeKnob : uint8_t { kTp, kCp, kPp, kEp, kEtp, kMbs };
inline constexpr int kNumSizeKnobs = 6;

struct SearchConstraints {
  std::array<int, kNumSizeKnobs> fixed{};  // 0: free
  std::array<int, kNumSizeKnobs> max{};  // 0: no cap
  std::vector<std::pair<SizeKnob, int>> excluded_sizes;
  // Excluded values of the named knobs (--fix of one of them excludes the others). cp_comm
  // applies where cp > 1, dispatcher where ep x etp > 1 (elsewhere they name no choice).
  std::vector<DpSharding> excluded_shardings;
  std::vector<RecomputeGranularity> excluded_recomputes;
  std::vector<CpCommType> excluded_cp_comms;
  std::vector<Dispatcher> excluded_dispatchers;
  double headroom = 0;  // fraction of HBM a layout must leave free: fits iff needs <= HBM x (1 - headroom)
  // Where the headroom comes from: "--headroom 10%" as given, or (the CLI's default,
  // plan_common.cpp) none: the memory band decides (model/memory.hpp, Memory::fits / may_fit).
  std::string headroom_source;
  std::vector<std::string> given;  // the constraints as given ("fix tp=8", "headroom 10%"), in order

  bool allows(SizeKnob k, int v) const;
  bool allows(DpSharding v) const;
  bool allows(RecomputeGranularity v) const;
  bool allows(CpCommType v) const;
  bool allows(Dispatcher v) const;
  bool empty() const { return given.empty(); }

  // Each adds one constraint from the command line's text; false with a one-line error
  // naming the value (the caller prefixes the option).
  bool add_fix(const std::string& text, std::string& error);  // "tp=8", "sharding=optim", "recompute=full"
  bool add_max(const std::string& text, std::string& error);  // "pp=8" (size knobs only)
  bool add_exclude(const std::string& text, std::string& error);  // "zero3", "a2a", "full", "cp_comm=allgather", "tp=1"
  bool set_headroom(const std::string& text, std::string& error);  // "10%" or "10", in [0, 100)
  // The default when no --headroom is given (`lcm plan`, the GUI, the no-false-OOM test): no
  // headroom; the memory model's own band decides fits (model/memory.hpp: fits, tight, out of memory).
  void use_default_headroom();
  // After every add: an error when a knob has no value left ("--exclude ... excludes every sharding").
  bool check(std::string& error) const;
};

// "--tie 2%": a percentage in (0, 100) as a fraction; false with an error naming the text.
bool parse_percent(const std::string& text, double& fraction, std::string& error);

}  // namespace lcm::plan
