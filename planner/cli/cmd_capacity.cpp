// `lcm capacity SCENARIO --cf 1.0,1.25,1.5,2.0 [--skew zipf:S | --loads FILE]`: dropped-token
// rate per MoE capacity factor and its effect on all-to-all bytes, expert FLOPs and memory.
#include "commands.hpp"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/routing.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/capacity_report.hpp"

namespace lcm::cli {

namespace {

struct CapacityArgs {
  std::string cf = "1.0,1.25,1.5,2.0";
  std::string skew;
  std::string loads;
  std::string tokens;
  std::string method = "exact";
  int64_t samples = 1000;
  uint64_t seed = 1;
  bool pad = false;
};

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A finite double using every character of `s`.
std::optional<double> parse_real(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// "1.0,1.25,1.5" -> {1.0, 1.25, 1.5}; every entry a number > 0.
std::optional<std::vector<double>> parse_cf_list(const std::string& text, std::string* error) {
  std::vector<double> out;
  std::stringstream in(text);
  for (std::string tok; std::getline(in, tok, ',');) {
    tok = trimmed(tok);
    const auto v = parse_real(tok);
    if (!v || *v <= 0) {
      *error = tok.empty() ? fmt::format("empty entry in '{}'", text)
                           : fmt::format("'{}' is not a capacity factor > 0 (expected e.g. 1.0,1.25,1.5,2.0)", tok);
      return std::nullopt;
    }
    if (static_cast<int64_t>(out.size()) == limits::kListEntries) {
      *error = fmt::format("more than {} entries (lcm's cap on list options)", limits::kListEntries);
      return std::nullopt;
    }
    out.push_back(*v);
  }
  if (out.empty() || text.back() == ',') {
    *error = fmt::format("empty entry in '{}'", text);
    return std::nullopt;
  }
  return out;
}

// "zipf:S" -> S >= 0, small enough that E^-S does not underflow.
std::optional<double> parse_skew(const std::string& text, int experts, std::string* error) {
  const std::string prefix = "zipf:";
  if (text.rfind(prefix, 0) != 0) {
    *error = fmt::format("'{}': expected zipf:S with S >= 0 (e.g. zipf:1.0)", text);
    return std::nullopt;
  }
  const auto s = parse_real(text.substr(prefix.size()));
  if (!s || *s < 0) {
    *error = fmt::format("'{}': expected zipf:S with S >= 0 (e.g. zipf:1.0)", text);
    return std::nullopt;
  }
  if (experts > 1 && *s * std::log(static_cast<double>(experts)) > 650.0) {
    *error = fmt::format("'{}': S is too large for {} experts (E^-S underflows; S must be <= {:.1f})", text, experts,
                         650.0 / std::log(static_cast<double>(experts)));
    return std::nullopt;
  }
  return *s;
}

// Options -> CapacityOptions after the scenario is known; error text on bad input.
std::optional<CapacityOptions> build_options(const CapacityArgs& a, const Scenario& s, bool method_given,
                                             std::string* error) {
  CapacityOptions o;
  std::string err;
  auto cfs = parse_cf_list(a.cf, &err);
  if (!cfs) {
    *error = "--cf: " + err;
    return std::nullopt;
  }
  o.capacity_factors = *cfs;
  if (!a.tokens.empty()) {
    auto t = parse_size_list(a.tokens, limits::kRoutingTokens, &err);
    if (!t || t->size() != 1) {
      *error = "--tokens: " + (t ? fmt::format("'{}': expected one token count", a.tokens) : err);
      return std::nullopt;
    }
    o.tokens = t->front();
  }
  o.method = a.method == "mc" ? DropMethod::kMonteCarlo : DropMethod::kExact;
  if (a.samples <= 0) {
    *error = fmt::format("--samples: {} is not a positive sample count", a.samples);
    return std::nullopt;
  }
  if (o.method == DropMethod::kMonteCarlo) {
    const int64_t t = o.tokens > 0 ? o.tokens : routing_group_tokens(s, derive_mesh(s));
    const double draws = static_cast<double>(a.samples) * static_cast<double>(t) * s.model.moe_router_topk;
    if (draws > limits::kMonteCarloDraws) {
      *error = fmt::format("--samples: {} samples of {} tokens x top-{} are {:.3g} routing draws; at most {:.0e} (lcm's "
                           "cap, about a minute): lower --samples or --tokens",
                           a.samples, t, s.model.moe_router_topk, draws, limits::kMonteCarloDraws);
      return std::nullopt;
    }
  }
  o.mc = MonteCarloOptions{a.samples, a.seed};
  o.pad_to_capacity = a.pad;
  const int experts = s.model.num_experts;
  if (!a.skew.empty()) {
    auto z = parse_skew(a.skew, experts, &err);
    if (!z) {
      *error = "--skew: " + err;
      return std::nullopt;
    }
    o.routing = RoutingKind::kZipf;
    o.zipf_s = *z;
  }
  if (!a.loads.empty()) {
    if (method_given) {
      *error = "--method does not apply to --loads: measured loads are evaluated deterministically";
      return std::nullopt;
    }
    auto loads = read_expert_loads(a.loads, &err);
    if (!loads) {
      *error = err;
      return std::nullopt;
    }
    if (loads->size() != static_cast<size_t>(experts)) {
      *error = fmt::format("{}: loads for {} experts, but the scenario has num_experts = {}", a.loads, loads->size(),
                           experts);
      return std::nullopt;
    }
    o.routing = RoutingKind::kMeasured;
    o.loads = std::move(*loads);
  }
  return o;
}

}  // namespace

void register_capacity(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("capacity", "MoE capacity-factor sweep: dropped-token rate per capacity factor and "
                                             "its effect on all-to-all bytes, expert FLOPs and memory");
  auto so = std::make_shared<ScenarioOptions>();
  auto oo = std::make_shared<OutputOptions>();
  auto a = std::make_shared<CapacityArgs>();
  add_scenario_options(*cmd, *so);
  cmd->add_option("--cf", a->cf, "Capacity factors, comma-separated, each > 0")->capture_default_str();
  auto* skew = cmd->add_option("--skew", a->skew,
                               "Routing skew zipf:S: expert popularity ~ 1/i^S (default: balanced routing)");
  auto* loads = cmd->add_option("--loads", a->loads,
                                "Measured per-expert loads: CSV 'expert,tokens' (header), one count per line, or "
                                "JSON [..] / {\"loads\": [..]} (docs/moe-routing.md)");
  skew->excludes(loads);
  cmd->add_option("--tokens", a->tokens,
                  "Tokens per routing group T (K = 1024, M = 1024^2; default: micro_batch*seq/(cp*tp) of the "
                  "scenario; with --loads: scale the loads to T*k)");
  auto* method = cmd->add_option("--method", a->method, "exact (binomial expectation) or mc (Monte Carlo)")
                     ->check(CLI::IsMember({"exact", "mc"}))
                     ->capture_default_str();
  cmd->add_option("--samples", a->samples, "Monte Carlo routings of T tokens")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Monte Carlo seed (std::mt19937_64)")->capture_default_str();
  cmd->add_flag("--pad", a->pad, "Pad expert inputs to capacity (moe_pad_expert_input_to_capacity)");
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, a, method, &exit_code] {
    auto s = load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    if (!has_moe(s->model)) {
      std::cerr << "lcm: " << so->path << ": dense model (num_experts = 0); lcm capacity needs an MoE scenario\n";
      exit_code = kExitBadInput;
      return;
    }
    std::string err;
    const auto o = build_options(*a, *s, method->count() > 0, &err);
    if (!o) {
      std::cerr << "lcm: " << err << "\n";
      exit_code = kExitBadInput;
      return;
    }
    const CapacitySweep sw = capacity_sweep(*s, *o);
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) {
      text = report::capacity_json(*s, sw, a->loads).dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render_csv(report::capacity_csv_table(*s, sw));
    } else {
      text = report::render(report::capacity_tables(*s, sw, a->loads), f);
    }
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
