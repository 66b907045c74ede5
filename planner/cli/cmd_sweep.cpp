// `lcm sweep SCENARIO --vary seq_length=4K,32K,128K,1M [--vary num_experts=8,64]`: one
// plan per point of the grid, and which layout wins where. --tokens-per-step constant (the
// default) keeps global_batch_size x seq_length at the scenario's as seq_length varies;
// scale keeps global_batch_size. The search constraints of `lcm plan` apply to every point.
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/plan_report.hpp"
#include "plan_common.hpp"

namespace lcm::cli {

namespace {

struct Vary {
  std::string key;
  std::vector<std::string> values;
};

// "KEY=V1,V2,..." -> Vary; error text on bad input.
std::optional<Vary> parse_vary(const std::string& text, std::string* error) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    *error = fmt::format("--vary '{}': expected KEY=V1,V2,... (e.g. seq_length=4K,32K,128K)", text);
    return std::nullopt;
  }
  Vary v;
  v.key = text.substr(0, eq);
  size_t pos = eq + 1;
  while (true) {
    const size_t end = text.find(',', pos);
    std::string tok = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (tok.empty()) {
      *error = fmt::format("--vary '{}': empty value", text);
      return std::nullopt;
    }
    v.values.push_back(tok);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return v;
}

// --tokens-per-step constant: the global batch that keeps the base point's tokens per step
// at sequence length `seq`; nullopt and the reason when it is not a whole number of sequences.
std::optional<int64_t> constant_tokens_batch(const TrainingSpec& base, int64_t seq, std::string* why) {
  const int64_t tokens = static_cast<int64_t>(base.global_batch_size) * base.seq_length;
  if (seq > 0 && tokens % seq == 0) {
    if (tokens / seq <= limits::kGlobalBatchSize) return tokens / seq;
    *why = fmt::format("keeping {} tokens per step needs global_batch_size {}, above lcm's cap of {}", tokens,
                       tokens / seq, limits::kGlobalBatchSize);
    return std::nullopt;
  }
  *why = fmt::format(
      "keeping {} tokens per step (global_batch_size {} x seq_length {}) needs global_batch_size {} / {} = {:.4g}, "
      "not a whole number of sequences (--tokens-per-step scale keeps global_batch_size {})",
      tokens, base.global_batch_size, base.seq_length, tokens, seq,
      static_cast<double>(tokens) / static_cast<double>(seq), base.global_batch_size);
  return std::nullopt;
}

}  // namespace

void register_sweep(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sweep", "Plan every point of a grid (--vary KEY=V1,V2,...) and show which layout wins where");
  auto so = std::make_shared<ScenarioOptions>();
  auto oo = std::make_shared<OutputOptions>();
  auto pa = std::make_shared<PlanArgs>();
  auto varies = std::make_shared<std::vector<std::string>>();
  auto tokens_mode = std::make_shared<std::string>("constant");
  add_scenario_options(*cmd, *so);
  cmd->get_option("--gpus")->description("GPUs to plan for (default: the scenario's num_gpus)");
  cmd->remove_option(cmd->get_option("--layout"));  // every point is planned
  cmd->add_option("--vary", *varies, "A scenario key and its values: --vary seq_length=4K,32K,128K,1M (repeatable: grid)")
      ->required();
  cmd->add_option("--tokens-per-step", *tokens_mode,
                  "When seq_length varies: constant keeps global_batch_size x seq_length at the scenario's (global "
                  "batch scales inversely; a point where it is not a whole number is infeasible), scale keeps "
                  "global_batch_size")
      ->check(CLI::IsMember({"constant", "scale"}))
      ->capture_default_str();
  add_plan_options(*cmd, *pa, false);
  add_constraint_options(*cmd, *pa);
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, pa, varies, tokens_mode, &exit_code] {
    const report::TokensPerStep tokens =
        *tokens_mode == "scale" ? report::TokensPerStep::kScale : report::TokensPerStep::kConstant;
    if (!parse_constraints(*pa)) {
      exit_code = kExitBadInput;
      return;
    }
    std::vector<Vary> grid;
    for (const std::string& v : *varies) {
      std::string err;
      auto parsed = parse_vary(v, &err);
      if (!parsed) {
        std::cerr << "lcm: " << err << "\n";
        exit_code = kExitBadInput;
        return;
      }
      std::string why;
      if (is_searched_key(parsed->key))
        why = fmt::format("the planner chooses {} itself for every point; vary a model, training or hardware key",
                          key_base(parsed->key));
      for (const Vary& g : grid)
        if (key_base(g.key) == key_base(parsed->key))
          why = fmt::format("{} is varied twice; give all its values in one --vary", key_base(parsed->key));
      if (!why.empty()) {
        std::cerr << "lcm: --vary " << parsed->key << ": " << why << "\n";
        exit_code = kExitBadInput;
        return;
      }
      grid.push_back(std::move(*parsed));
    }
    // Each point is a whole search: bound their number (checked as the grid grows, no overflow).
    size_t points = 1;
    for (const Vary& v : grid) {
      points *= v.values.size();
      if (points > static_cast<size_t>(limits::kListEntries)) {
        std::cerr << fmt::format("lcm: --vary: more than {} points (lcm's cap: each point is a whole search)\n",
                                 limits::kListEntries);
        exit_code = kExitBadInput;
        return;
      }
    }
    note_searched_keys(*so);
    // The base point of --tokens-per-step constant: the scenario with its --set overrides.
    std::optional<Scenario> base;
    if (tokens == report::TokensPerStep::kConstant) {
      base = load_for_planning(*so, {}, so->gpus);
      if (!base) {
        exit_code = kExitBadInput;
        return;
      }
    }
    // Every point is loaded (and its global batch set) before the first search: bad input
    // fails at once, not after the searches of the points before it.
    std::vector<report::SweepPoint> out;
    for (size_t i = 0; i < points; ++i) {
      report::SweepPoint p;
      std::vector<io::Override> extra;
      size_t rest = i;
      for (size_t g = grid.size(); g-- > 0;) {
        const Vary& v = grid[g];
        const std::string& value = v.values[rest % v.values.size()];
        rest /= v.values.size();
        extra.insert(extra.begin(), io::Override{v.key, value});
        p.values.insert(p.values.begin(), {v.key, value});
      }
      auto s = load_for_planning(*so, extra, so->gpus);
      if (!s) {
        exit_code = kExitBadInput;
        return;
      }
      if (base && s->training.seq_length != base->training.seq_length) {
        if (s->training.global_batch_size != base->training.global_batch_size) {
          std::cerr << "lcm: --tokens-per-step constant sets global_batch_size from seq_length; vary only one of "
                       "them, or give --tokens-per-step scale\n";
          exit_code = kExitBadInput;
          return;
        }
        const auto gbs = constant_tokens_batch(base->training, s->training.seq_length, &p.infeasible);
        if (gbs) {
          extra.push_back({"global_batch_size", std::to_string(*gbs), "--tokens-per-step constant"});
          s = load_for_planning(*so, extra, so->gpus);
          if (!s) {
            exit_code = kExitBadInput;
            return;
          }
        }
      }
      p.scenario = std::move(*s);
      out.push_back(std::move(p));
    }
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].infeasible.empty())
        out[i].result = run_search(out[i].scenario, *pa, fmt::format("point {}/{}", i + 1, points));
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) text = report::sweep_json(out, tokens).dump(2) + "\n";
    else if (f == report::Format::kCsv) text = report::render_csv(report::sweep_csv_table(out, tokens));
    else text = report::render(report::sweep_tables(out, tokens), f);
    if (!write_output(oo->output, text)) {
      exit_code = kExitFailure;
      return;
    }
    const bool any = std::any_of(out.begin(), out.end(), [](const report::SweepPoint& p) { return !p.result.ranked.empty(); });
    if (!any) {
      std::cerr << "lcm: no point of the sweep has a layout that is valid and fits\n";
      exit_code = kExitBadInput;
      return;
    }
    exit_code = kExitOk;
  });
}

}  // namespace lcm::cli
