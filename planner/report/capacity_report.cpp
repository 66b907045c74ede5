// Capacity-factor sweep renderings and the measured-loads parser.
#include "lcm/planner/report/capacity_report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"

namespace lcm::report {

namespace {

using nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Drop rates span 1e-15 .. 1: four significant digits, in percent.
std::string fmt_percent(double fraction) {
  if (fraction == 0.0) return "0";
  if (100.0 * fraction < 0.001) return "< 0.001";  // the column is in %: "< 0.001 %"
  return fmt::format("{:.4g}", 100.0 * fraction);
}

const char* ep_rule_name(EpTrafficRule r) {
  switch (r) {
    case EpTrafficRule::kScalesWithSlots: return "scales_with_slots";
    case EpTrafficRule::kUnchanged: return "unchanged";
    case EpTrafficRule::kUpperBound: return "dropless_upper_bound";
  }
  return "?";
}

std::string routing_note(const CapacitySweep& sw, const std::string& loads_source) {
  const double qmax = sw.inclusion.empty() ? 0 : *std::max_element(sw.inclusion.begin(), sw.inclusion.end());
  const double qmin = sw.inclusion.empty() ? 0 : *std::min_element(sw.inclusion.begin(), sw.inclusion.end());
  switch (sw.routing) {
    case RoutingKind::kBalanced:
      return fmt::format("Routing: balanced; each token picks {} distinct experts of {} uniformly, so every expert "
                         "is chosen with q = k/E = {:.4g}.", sw.topk, sw.experts, qmax);
    case RoutingKind::kZipf:
      return fmt::format("Routing: Zipf S = {:g}; expert popularity p_i ~ 1/i^S, {} distinct experts per token drawn "
                         "without replacement (Plackett-Luce); inclusion q from {:.4g} (expert 1) to {:.4g} "
                         "(expert {}), mean k/E = {:.4g}.", sw.zipf_s, sw.topk, qmax, qmin, sw.experts,
                         static_cast<double>(sw.topk) / sw.experts);
    case RoutingKind::kMeasured: {
      const double mean = sw.measured_assignments / sw.experts;
      const double max_load = qmax * sw.measured_assignments / sw.topk;
      return fmt::format("Routing: measured loads from {} ({:g} assignments over {} experts; busiest expert {:.3g}x "
                         "the mean).", loads_source.empty() ? "a loads file" : loads_source,
                         sw.measured_assignments, sw.experts, mean > 0 ? max_load / mean : 0.0);
    }
  }
  return "";
}

std::string method_note(const CapacitySweep& sw) {
  switch (sw.method) {
    case DropMethod::kExact:
      return "Method: exact. Expected drops E[sum_e max(0, n_e - C)] / (T k) with n_e ~ Binomial(T, q_e); exact for "
             "the expectation (linearity over experts needs only the marginals).";
    case DropMethod::kMonteCarlo:
      return fmt::format("Method: Monte Carlo, {} routings of T tokens, seed {} (std::mt19937_64); 95% CI = mean +- "
                         "1.96 sd/sqrt(N) (no drop seen: [0, 3/N (T-C)/T]).", sw.mc.samples, sw.mc.seed);
    case DropMethod::kMeasured:
      return sw.tokens_source != TokensSource::kOverride
                 ? "Method: measured, deterministic: drop = sum_e max(0, load_e - C) / sum_e load_e, C from the "
                   "measured total."
                 : "Method: measured, deterministic: loads scaled to T k assignments (same per-expert shares), drop "
                   "= sum_e max(0, load_e - C) / (T k).";
  }
  return "";
}

std::string traffic_note(const CapacitySweep& sw) {
  if (sw.dropless_ep_bytes == 0)
    return fmt::format("EP traffic: none (ep = {}, {} dispatcher).", sw.ep, to_string(sw.dispatcher));
  switch (sw.ep_rule) {
    case EpTrafficRule::kScalesWithSlots:
      return fmt::format("EP traffic: the comm model's dropless all-to-all (dispatch + combine, fwd + bwd, busiest "
                         "stage) times {}.", sw.pad_to_capacity ? "E C / (T k): padded slots travel" : "(1 - drop): "
                         "dropped assignments are masked before dispatch");
    case EpTrafficRule::kUnchanged:
      return "EP traffic: the allgather dispatcher all-gathers and reduce-scatters every token whatever is dropped "
             "(no all-to-all; ep_bytes in JSON/CSV), so it does not change with CF.";
    case EpTrafficRule::kUpperBound:
      return "EP traffic: flex dispatcher sends one copy per (token, destination rank); the dropless volume is "
             "shown as an upper bound.";
  }
  return "";
}

}  // namespace

std::vector<Table> capacity_tables(const Scenario& s, const CapacitySweep& sw, const std::string& loads_source) {
  const bool mc = sw.method == DropMethod::kMonteCarlo;
  Table t;
  t.title = fmt::format("Capacity factor sweep: {} ({}), T = {} tokens per routing group, E = {}, top-{}, {}",
                        s.name, s.model.name, sw.tokens, sw.experts, sw.topk,
                        sw.routing == RoutingKind::kZipf ? fmt::format("zipf:{:g}", sw.zipf_s)
                                                         : std::string(to_string(sw.routing)));
  t.header = {"cf", "C", "drop %"};
  if (mc) t.header.push_back("drop 95% CI %");
  for (const char* h : {"kept/expert", "slot fill %", "a2a GiB/step", "expert FLOPs/step", kNeedsHeader, "fits"})
    t.header.push_back(h);

  const double assignments = static_cast<double>(sw.tokens) * sw.topk;
  std::vector<std::string> ref = {"dropless", "-", "0"};
  if (mc) ref.push_back("-");
  for (std::string c : {fmt_fixed(assignments / sw.experts, 1), std::string("-"),
                        fmt::format("{:.2f}", sw.dropless_a2a_bytes / kGiB), fmt_sci(sw.dropless_expert_flops),
                        fmt_bytes_gib(sw.dropless_peak_high_bytes), std::string(sw.dropless_fits ? "yes" : sw.dropless_may_fit ? "tight" : "NO")})
    ref.push_back(c);
  t.rows.push_back(ref);
  for (const CapacityRow& r : sw.rows) {
    std::vector<std::string> row = {fmt::format("{:g}", r.cf), std::to_string(r.capacity),
                                    fmt_percent(r.drop_fraction)};
    if (mc) row.push_back(fmt::format("{} .. {}", fmt_percent(r.drop_ci_low), fmt_percent(r.drop_ci_high)));
    row.push_back(fmt_fixed(r.kept_per_expert, 1));
    row.push_back(fmt_fixed(100.0 * r.slot_fill, 1));
    row.push_back(fmt::format("{:.2f}", r.a2a_bytes / kGiB));
    row.push_back(fmt_sci(r.expert_flops));
    row.push_back(r.layout_valid ? fmt_bytes_gib(r.peak_high_bytes) : "n/a");
    row.push_back(r.layout_valid ? (r.fits ? "yes" : r.may_fit ? "tight" : "NO") : "invalid layout");
    t.rows.push_back(row);
  }

  t.notes.push_back(routing_note(sw, loads_source));
  t.notes.push_back(kNeedsNote);
  if (s.model.moe_router_num_groups > 0 && sw.routing != RoutingKind::kMeasured)
    t.notes.push_back(fmt::format("Group-limited routing (moe_router_num_groups = {}, group_topk = {}) is not "
                                  "modelled: tokens choose among all {} experts.", s.model.moe_router_num_groups,
                                  s.model.moe_router_group_topk, sw.experts));
  if (sw.tokens_source == TokensSource::kScenario) {
    const bool sp = s.parallel.sequence_parallel && s.parallel.tensor_model_parallel_size > 1;
    t.notes.push_back(fmt::format("T = micro_batch {} x seq {} / (cp {}{}) = {} tokens per router call on one rank "
                                  "(--tokens overrides).", s.training.micro_batch_size, s.training.seq_length,
                                  s.parallel.context_parallel_size,
                                  sp ? fmt::format(" x tp {}, sequence parallel", s.parallel.tensor_model_parallel_size)
                                     : std::string(""),
                                  sw.tokens));
  } else {
    t.notes.push_back(fmt::format("T = {} tokens per routing group ({}); traffic, FLOPs and memory are the "
                                  "scenario's ({} tokens per group) scaled by the processed fraction.",
                                  sw.tokens,
                                  sw.tokens_source == TokensSource::kLoads ? "measured total / k" : "--tokens",
                                  sw.scenario_tokens));
  }
  t.notes.push_back(method_note(sw));
  t.notes.push_back("C = ceil(T k / E x CF) (Megatron get_capacity); the drop policy (probs / position) picks which "
                    "assignments drop, not how many. kept/expert = T k (1 - drop) / E; slot fill = kept / (E C).");
  t.notes.push_back(sw.pad_to_capacity
                        ? "Padded to capacity (moe_pad_expert_input_to_capacity): experts compute all E C slots."
                        : "Not padded: experts compute only the kept assignments.");
  t.notes.push_back(traffic_note(sw));
  t.notes.push_back("Expert FLOPs: count_flops' routed-expert term (top-k of every token, fwd + bwd per the FLOP "
                    "convention) times the processed fraction. Peak memory: estimate() with "
                    "moe_expert_capacity_factor = CF.");
  return {t};
}

Table capacity_csv_table(const Scenario& s, const CapacitySweep& sw) {
  (void)s;
  Table t;
  t.header = {"cf", "capacity", "drop_fraction", "drop_ci_low", "drop_ci_high", "kept_per_expert", "slot_fill",
              "processed_fraction", "a2a_bytes_per_step", "a2a_bytes_per_layer_microbatch", "ep_bytes_per_step",
              "expert_flops_per_step", "peak_bytes", "peak_high_bytes", "fits", "layout_valid"};
  for (const CapacityRow& r : sw.rows) {
    t.rows.push_back({fmt::format("{:g}", r.cf), std::to_string(r.capacity), fmt::format("{:.10g}", r.drop_fraction),
                      fmt::format("{:.10g}", r.drop_ci_low), fmt::format("{:.10g}", r.drop_ci_high),
                      fmt::format("{:.10g}", r.kept_per_expert), fmt::format("{:.10g}", r.slot_fill),
                      fmt::format("{:.10g}", r.processed_fraction), fmt::format("{:.10g}", r.a2a_bytes),
                      fmt::format("{:.10g}", r.a2a_bytes_per_layer_microbatch), fmt::format("{:.10g}", r.ep_bytes),
                      fmt::format("{:.10g}", r.expert_flops), fmt::format("{:.10g}", r.peak_bytes),
                      fmt::format("{:.10g}", r.peak_high_bytes),
                      r.fits ? "true" : "false", r.layout_valid ? "true" : "false"});
  }
  return t;
}

nlohmann::ordered_json capacity_json(const Scenario& s, const CapacitySweep& sw, const std::string& loads_source) {
  ordered_json j;
  j["schema_version"] = 1;
  j["scenario"] = s.name;
  j["model"] = s.model.name;
  ordered_json routing;
  routing["distribution"] = to_string(sw.routing);
  if (sw.routing == RoutingKind::kZipf) routing["zipf_s"] = sw.zipf_s;
  if (sw.routing == RoutingKind::kMeasured) {
    routing["loads_file"] = loads_source;
    routing["measured_assignments"] = sw.measured_assignments;
  }
  routing["method"] = to_string(sw.method);
  if (sw.method == DropMethod::kMonteCarlo) {
    routing["samples"] = sw.mc.samples;
    routing["seed"] = sw.mc.seed;
  }
  routing["tokens"] = sw.tokens;
  routing["tokens_source"] = to_string(sw.tokens_source);
  routing["scenario_tokens"] = sw.scenario_tokens;
  routing["experts"] = sw.experts;
  routing["topk"] = sw.topk;
  routing["pad_to_capacity"] = sw.pad_to_capacity;
  routing["dispatcher"] = std::string(to_string(sw.dispatcher));
  routing["ep"] = sw.ep;
  routing["ep_traffic"] = ep_rule_name(sw.ep_rule);
  routing["inclusion_probabilities"] = sw.inclusion;
  j["routing"] = routing;
  j["dropless"] = {{"a2a_bytes", sw.dropless_a2a_bytes},
                   {"a2a_bytes_per_layer_microbatch", sw.dropless_a2a_bytes_per_layer_microbatch},
                   {"ep_bytes", sw.dropless_ep_bytes},
                   {"expert_flops", sw.dropless_expert_flops},
                   {"peak_bytes", sw.dropless_peak_bytes},
                   {"peak_high_bytes", sw.dropless_peak_high_bytes},
                   {"fits", sw.dropless_fits}};
  auto rows = ordered_json::array();
  for (const CapacityRow& r : sw.rows) {
    rows.push_back(ordered_json{{"cf", r.cf},
                                {"capacity", r.capacity},
                                {"drop_fraction", r.drop_fraction},
                                {"drop_ci_low", r.drop_ci_low},
                                {"drop_ci_high", r.drop_ci_high},
                                {"kept_per_expert", r.kept_per_expert},
                                {"slot_fill", r.slot_fill},
                                {"processed_fraction", r.processed_fraction},
                                {"a2a_bytes", r.a2a_bytes},
                                {"a2a_bytes_per_layer_microbatch", r.a2a_bytes_per_layer_microbatch},
                                {"ep_bytes", r.ep_bytes},
                                {"expert_flops", r.expert_flops},
                                {"layout_valid", r.layout_valid},
                                {"peak_bytes", r.peak_bytes},
                                {"peak_high_bytes", r.peak_high_bytes},
                                {"fits", r.fits}});
  }
  j["rows"] = rows;
  return j;
}

// ---------------------------------------------------------------------------------
// Measured loads files.
// ---------------------------------------------------------------------------------
namespace {

io::ConfigError load_error(const std::string& file, int line, std::string message) {
  io::ConfigError e;
  e.file = file;
  e.line = line;
  e.message = std::move(message);
  return e;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t end = line.find(',', pos);
    out.push_back(trim(std::string_view(line).substr(pos, end == std::string::npos ? std::string::npos : end - pos)));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

// A finite, non-negative number using every character of `s`.
std::optional<double> parse_count(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

std::optional<long> parse_index(const std::string& s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  if (s.size() > 9) return std::nullopt;
  return std::strtol(s.c_str(), nullptr, 10);
}

bool is_load_column(const std::string& name) {
  return name == "tokens" || name == "load" || name == "loads" || name == "count" || name == "num_tokens";
}

int line_of(const std::string& text, size_t byte) {
  const size_t end = std::min(byte, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

// 1-based line of element `index` of the JSON array opening at `open` (a '['), found by
// scanning top-level commas outside strings and nested brackets.
int json_element_line(const std::string& text, size_t open, size_t index) {
  size_t depth = 0, seen = 0;
  bool in_string = false;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (seen == index && !std::isspace(static_cast<unsigned char>(c))) return line_of(text, i);
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') ++depth;
    else if (c == ']' || c == '}') {
      if (depth == 0) break;
      --depth;
    } else if (c == ',' && depth == 0) ++seen;
  }
  return line_of(text, open);
}

io::Result<std::vector<double>> parse_json_loads(const std::string& text, const std::string& file) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    const size_t colon = what.find(": ");  // drop the "[json.exception...] parse error at ..." prefix
    return load_error(file, line_of(text, e.byte > 0 ? e.byte - 1 : 0),
                      "malformed JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  }
  size_t open = text.find('[');
  const nlohmann::json* arr = &doc;
  if (doc.is_object()) {
    if (!doc.contains("loads") || !doc["loads"].is_array())
      return load_error(file, 1, "expected a JSON array of per-expert loads or an object with a \"loads\" array");
    arr = &doc["loads"];
    const size_t key = text.find("\"loads\"");
    open = key == std::string::npos ? text.find('[') : text.find('[', key);
  } else if (!doc.is_array()) {
    return load_error(file, 1, "expected a JSON array of per-expert loads or an object with a \"loads\" array");
  }
  std::vector<double> loads;
  for (size_t i = 0; i < arr->size(); ++i) {
    const nlohmann::json& v = (*arr)[i];
    if (!v.is_number() || v.get<double>() < 0 || !std::isfinite(v.get<double>()))
      return load_error(file, json_element_line(text, open, i),
                        fmt::format("loads[{}]: expected a non-negative number, got {}", i, v.dump()));
    loads.push_back(v.get<double>());
  }
  if (loads.empty()) return load_error(file, line_of(text, open), "no per-expert loads in the array");
  return loads;
}

struct TextLine {
  int number = 0;
  std::string text;
};

io::Result<std::vector<double>> parse_csv_loads(const std::vector<TextLine>& lines, const std::string& file) {
  size_t first = 0, expert_col = 0, load_col = 1, width = 2;
  const std::vector<std::string> head = split_commas(lines[0].text);
  if (!parse_index(head[0])) {  // a header row
    std::optional<size_t> ec, lc;
    for (size_t c = 0; c < head.size(); ++c) {
      const std::string name = lower(head[c]);
      if (name == "expert" || name == "expert_id") ec = c;
      else if (is_load_column(name) && !lc) lc = c;
    }
    if (!ec || !lc)
      return load_error(file, lines[0].number, fmt::format("header '{}': expected columns 'expert' and 'tokens' "
                                                           "(or 'load', 'loads', 'count')", lines[0].text));
    expert_col = *ec;
    load_col = *lc;
    width = head.size();
    first = 1;
  }
  std::vector<double> loads;
  std::vector<int> defined_at;
  for (size_t i = first; i < lines.size(); ++i) {
    const std::vector<std::string> f = split_commas(lines[i].text);
    if (f.size() != width)
      return load_error(file, lines[i].number,
                        fmt::format("expected {} comma-separated fields, got {}", width, f.size()));
    const auto e = parse_index(f[expert_col]);
    if (!e)
      return load_error(file, lines[i].number, fmt::format("expert '{}': expected an index 0, 1, ...", f[expert_col]));
    const auto v = parse_count(f[load_col]);
    if (!v)
      return load_error(file, lines[i].number, fmt::format("load '{}': expected a non-negative number", f[load_col]));
    const auto idx = static_cast<size_t>(*e);
    if (idx >= loads.size()) {
      loads.resize(idx + 1, 0.0);
      defined_at.resize(idx + 1, 0);
    }
    if (defined_at[idx] != 0)
      return load_error(file, lines[i].number,
                        fmt::format("expert {} listed twice (first on line {})", idx, defined_at[idx]));
    loads[idx] = *v;
    defined_at[idx] = lines[i].number;
  }
  if (loads.empty()) return load_error(file, lines.back().number, "header but no per-expert rows");
  for (size_t e = 0; e < defined_at.size(); ++e)
    if (defined_at[e] == 0)
      return load_error(file, 0, fmt::format("expert {} missing (rows must cover experts 0..{})", e, loads.size() - 1));
  return loads;
}

}  // namespace

io::Result<std::vector<double>> parse_expert_loads(const std::string& raw, const std::string& file) {
  std::string text = raw;
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 byte-order mark
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return load_error(file, 0, "empty loads file");

  io::Result<std::vector<double>> parsed = std::vector<double>{};
  if (text[start] == '[' || text[start] == '{') {
    parsed = parse_json_loads(text, file);
  } else {
    std::vector<TextLine> lines;
    int number = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
      const size_t end = std::min(text.find('\n', pos), text.size());
      ++number;
      const std::string line = trim(std::string_view(text).substr(pos, end - pos));
      if (!line.empty() && line[0] != '#') lines.push_back({number, line});
      pos = end + 1;
    }
    if (lines.empty()) return load_error(file, 0, "no per-expert loads");
    if (lines[0].text.find(',') != std::string::npos) {
      parsed = parse_csv_loads(lines, file);
    } else {
      std::vector<double> loads;
      for (const TextLine& l : lines) {
        const auto v = parse_count(l.text);
        if (!v)
          return load_error(file, l.number, fmt::format("'{}': expected one non-negative count per line", l.text));
        loads.push_back(*v);
      }
      parsed = loads;
    }
  }
  if (!parsed) return parsed;
  const std::vector<double>& loads = parsed.value();
  if (std::accumulate(loads.begin(), loads.end(), 0.0) <= 0) return load_error(file, 0, "all loads are zero");
  return parsed;
}

}  // namespace lcm::report
