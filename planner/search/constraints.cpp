// Search constraints: parsing and the membership tests the space applies (constraints.hpp).
#include "lcm/planner/search/constraints.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/model/uncertainty.hpp"

namespace lcm::plan {

namespace {

constexpr std::array<const char*, kNumSizeKnobs> kSizeNames = {"tp", "cp", "pp", "ep", "etp", "mbs"};
constexpr const char* kKnobList = "tp, cp, pp, ep, etp, mbs, sharding, recompute, cp_comm, dispatcher";

std::optional<SizeKnob> size_knob(const std::string& name) {
  for (int i = 0; i < kNumSizeKnobs; ++i)
    if (name == kSizeNames[static_cast<size_t>(i)]) return static_cast<SizeKnob>(i);
  return std::nullopt;
}

std::optional<int> positive(const std::string& text) {
  int v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1) return std::nullopt;
  return v;
}

std::optional<DpSharding> sharding_value(const std::string& v) {
  if (v == "ddp" || v == "zero0") return DpSharding::kNoShard;
  if (v == "zero1") return DpSharding::kOptim;
  if (v == "zero2") return DpSharding::kOptimGrads;
  if (v == "zero3" || v == "fsdp") return DpSharding::kOptimGradsParams;
  return parse_dp_sharding(v);
}

std::optional<RecomputeGranularity> recompute_value(const std::string& v) {
  if (v == "no-rc" || v == "none") return RecomputeGranularity::kNone;
  if (v == "sel" || v == "selective") return RecomputeGranularity::kSelective;
  if (v == "full") return RecomputeGranularity::kFull;
  return std::nullopt;
}

std::optional<CpCommType> cp_comm_value(const std::string& v) {
  if (v == "a2a+p2p") return CpCommType::kA2AP2P;
  return parse_cp_comm_type(v);
}

template <class E>
void exclude_all_but(std::vector<E>& out, E keep, std::initializer_list<E> all) {
  for (E e : all)
    if (e != keep && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
}

template <class E>
void exclude(std::vector<E>& out, E v) {
  if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
}

template <class E>
bool in(const std::vector<E>& v, E e) {
  return std::find(v.begin(), v.end(), e) != v.end();
}

bool split(const std::string& text, std::string& knob, std::string& value, std::string& error) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    error = fmt::format("'{}': expected KNOB=VALUE with KNOB one of {}", text, kKnobList);
    return false;
  }
  knob = text.substr(0, eq);
  value = text.substr(eq + 1);
  return true;
}

}  // namespace

bool SearchConstraints::allows(SizeKnob k, int v) const {
  const auto i = static_cast<size_t>(k);
  if (fixed[i] != 0 && v != fixed[i]) return false;
  if (max[i] != 0 && v > max[i]) return false;
  return !in(excluded_sizes, std::pair<SizeKnob, int>{k, v});
}
bool SearchConstraints::allows(DpSharding v) const { return !in(excluded_shardings, v); }
bool SearchConstraints::allows(RecomputeGranularity v) const { return !in(excluded_recomputes, v); }
bool SearchConstraints::allows(CpCommType v) const { return !in(excluded_cp_comms, v); }
bool SearchConstraints::allows(Dispatcher v) const { return !in(excluded_dispatchers, v); }

bool SearchConstraints::add_fix(const std::string& text, std::string& error) {
  std::string knob, value;
  if (!split(text, knob, value, error)) return false;
  if (const auto k = size_knob(knob)) {
    const auto v = positive(value);
    if (!v) {
      error = fmt::format("'{}': {} must be a positive integer", text, knob);
      return false;
    }
    fixed[static_cast<size_t>(*k)] = *v;
  } else if (knob == "sharding") {
    const auto v = sharding_value(value);
    if (!v) {
      error = fmt::format("'{}': not a sharding (no_shard, optim, optim_grads, optim_grads_params, zero1-3)", text);
      return false;
    }
    exclude_all_but(excluded_shardings, *v,
                    {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads, DpSharding::kOptimGradsParams});
  } else if (knob == "recompute") {
    const auto v = recompute_value(value);
    if (!v) {
      error = fmt::format("'{}': not a recompute granularity (no-rc, sel, full)", text);
      return false;
    }
    exclude_all_but(excluded_recomputes, *v,
                    {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull});
  } else if (knob == "cp_comm") {
    const auto v = cp_comm_value(value);
    if (!v) {
      error = fmt::format("'{}': not a CP communication (p2p, a2a, allgather, a2a+p2p)", text);
      return false;
    }
    exclude_all_but(excluded_cp_comms, *v,
                    {CpCommType::kP2P, CpCommType::kAllGather, CpCommType::kA2A, CpCommType::kA2AP2P});
  } else if (knob == "dispatcher") {
    const auto v = parse_dispatcher(value);
    if (!v) {
      error = fmt::format("'{}': not a dispatcher (alltoall, allgather, flex)", text);
      return false;
    }
    exclude_all_but(excluded_dispatchers, *v, {Dispatcher::kAllGather, Dispatcher::kAllToAll, Dispatcher::kFlex});
  } else {
    error = fmt::format("'{}': unknown knob '{}' (one of {})", text, knob, kKnobList);
    return false;
  }
  given.push_back("fix " + text);
  return true;
}

bool SearchConstraints::add_max(const std::string& text, std::string& error) {
  std::string knob, value;
  if (!split(text, knob, value, error)) return false;
  const auto k = size_knob(knob);
  if (!k) {
    error = fmt::format("'{}': --max takes a size knob (tp, cp, pp, ep, etp, mbs), not '{}'", text, knob);
    return false;
  }
  const auto v = positive(value);
  if (!v) {
    error = fmt::format("'{}': {} must be a positive integer", text, knob);
    return false;
  }
  max[static_cast<size_t>(*k)] = *v;
  given.push_back("max " + text);
  return true;
}

bool SearchConstraints::add_exclude(const std::string& text, std::string& error) {
  const size_t eq = text.find('=');
  if (eq != std::string::npos) {
    std::string knob, value;
    if (!split(text, knob, value, error)) return false;
    if (const auto k = size_knob(knob)) {
      const auto v = positive(value);
      if (!v) {
        error = fmt::format("'{}': {} must be a positive integer", text, knob);
        return false;
      }
      excluded_sizes.emplace_back(*k, *v);
    } else if (knob == "sharding" && sharding_value(value)) {
      exclude(excluded_shardings, *sharding_value(value));
    } else if (knob == "recompute" && recompute_value(value)) {
      exclude(excluded_recomputes, *recompute_value(value));
    } else if (knob == "cp_comm" && cp_comm_value(value)) {
      exclude(excluded_cp_comms, *cp_comm_value(value));
    } else if (knob == "dispatcher" && parse_dispatcher(value)) {
      exclude(excluded_dispatchers, *parse_dispatcher(value));
    } else {
      error = fmt::format("'{}': not a value of a searched knob ({})", text, kKnobList);
      return false;
    }
    given.push_back("exclude " + text);
    return true;
  }
  // A bare value: the knob it names. "allgather" is both a CP communication and a dispatcher.
  const auto sh = sharding_value(text);
  const auto rc = recompute_value(text);
  const auto cpc = cp_comm_value(text);
  const auto d = parse_dispatcher(text);
  const int named = (sh ? 1 : 0) + (rc ? 1 : 0) + (cpc ? 1 : 0) + (d ? 1 : 0);
  if (named == 0) {
    error = fmt::format(
        "'{}' is not a value of a searched knob (a sharding, no-rc|sel|full, a CP communication, a "
        "dispatcher, or KNOB=VALUE)",
        text);
    return false;
  }
  if (named > 1) {
    error = fmt::format("'{}' names more than one knob: say which, e.g. cp_comm={} or dispatcher={}", text, text, text);
    return false;
  }
  if (sh) exclude(excluded_shardings, *sh);
  if (rc) exclude(excluded_recomputes, *rc);
  if (cpc) exclude(excluded_cp_comms, *cpc);
  if (d) exclude(excluded_dispatchers, *d);
  given.push_back("exclude " + text);
  return true;
}

bool parse_percent(const std::string& text, double& fraction, std::string& error) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v) || v < 0 || v >= 100) {
    error = fmt::format("'{}' is not a percentage in [0, 100) (e.g. 10%)", text);
    return false;
  }
  fraction = v / 100.0;
  return true;
}

void SearchConstraints::use_default_headroom() {
  headroom = 0;
  headroom_source = fmt::format(
      "none: the memory band decides (fits: its top, peak x {:.4f}, within HBM; tight: it straddles HBM), the memory "
      "model's residual spread ({})",
      1.0 + memory_spread().band.high, memory_spread().source);
}

bool SearchConstraints::set_headroom(const std::string& text, std::string& error) {
  if (!parse_percent(text, headroom, error)) return false;
  headroom_source = "--headroom " + text;
  given.push_back("headroom " + text);
  return true;
}

bool SearchConstraints::check(std::string& error) const {
  if (excluded_shardings.size() == 4) error = "every sharding is excluded";
  else if (excluded_recomputes.size() == 3) error = "every recompute granularity is excluded";
  else if (excluded_cp_comms.size() == 4) error = "every CP communication is excluded";
  else if (excluded_dispatchers.size() == 3) error = "every dispatcher is excluded";
  else {
    for (int i = 0; i < kNumSizeKnobs; ++i) {
      const auto k = static_cast<size_t>(i);
      if (fixed[k] != 0 && max[k] != 0 && fixed[k] > max[k]) {
        error = fmt::format("--fix {0}={1} is above --max {0}={2}", kSizeNames[k], fixed[k], max[k]);
        return false;
      }
    }
    return true;
  }
  return false;
}

}  // namespace lcm::plan
