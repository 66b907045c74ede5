// Rendering of sweeps of plans (lcm sweep): one row per point of the grid.
#include <fmt/format.h>

#include "lcm/planner/report/band.hpp"
#include "lcm/planner/report/plan_report.hpp"
#include "plan_format.hpp"

namespace lcm::report {

using nlohmann::ordered_json;
using plan::Metrics;

namespace {

std::string point_label(const SweepPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

int64_t tokens_per_step(const SweepPoint& p) {
  return static_cast<int64_t>(p.scenario.training.global_batch_size) * p.scenario.training.seq_length;
}

std::string mode_note(TokensPerStep mode) {
  return mode == TokensPerStep::kConstant
             ? "tokens per step: constant (--tokens-per-step constant): global_batch_size scales inversely with "
               "seq_length from the scenario's own point"
             : "tokens per step: scale (--tokens-per-step scale): global_batch_size is the scenario's at every point, "
               "so tokens per step grow with seq_length";
}

}  // namespace

const char* to_string(TokensPerStep t) { return t == TokensPerStep::kConstant ? "constant" : "scale"; }

ordered_json sweep_json(const std::vector<SweepPoint>& points, TokensPerStep mode) {
  ordered_json j;
  j["schema_version"] = kPlanSchemaVersion;
  j["tokens_per_step_mode"] = to_string(mode);
  ordered_json arr = ordered_json::array();
  for (const SweepPoint& p : points) {
    ordered_json e;
    ordered_json vals;
    for (const auto& [k, v] : p.values) vals[k] = v;
    e["values"] = vals;
    e["seq_length"] = p.scenario.training.seq_length;
    if (p.infeasible.empty()) {
      e["global_batch_size"] = p.scenario.training.global_batch_size;
      e["tokens_per_step"] = tokens_per_step(p);
      e["plan"] = plan_json(p.scenario, p.result);
    } else {
      e["global_batch_size"] = nullptr;
      e["tokens_per_step"] = nullptr;
      e["infeasible"] = p.infeasible;
      e["plan"] = nullptr;
    }
    arr.push_back(e);
  }
  j["points"] = arr;
  return j;
}

std::vector<Table> sweep_tables(const std::vector<SweepPoint>& points, TokensPerStep mode) {
  Table t;
  if (!points.empty()) {
    const Scenario& s = points.front().scenario;
    t.title = fmt::format("Best layout per point: {} on {}", s.model.name.empty() ? s.name : s.model.name, s.hardware.name);
  }
  if (!points.empty())
    for (const auto& [k, v] : points.front().values) t.header.push_back(k);
  for (const char* h : {"gpus", "global batch", "tokens/step", "best layout", "step s", "tok/s/GPU", "MFU %",
                        kNeedsHeader, "fit / valid", "changes vs previous point"})
    t.header.push_back(h);
  t.notes.push_back(mode_note(mode));
  const SweepPoint* prev = nullptr;
  for (const SweepPoint& p : points) {
    std::vector<std::string> row;
    for (const auto& [k, v] : p.values) row.push_back(v);
    row.push_back(fmt::format("{}", p.scenario.num_gpus));
    if (!p.infeasible.empty()) {
      row.insert(row.end(), {"-", "-", "infeasible"});
      for (int i = 0; i < 6; ++i) row.push_back("-");
      t.notes.push_back(point_label(p) + ": infeasible: " + p.infeasible);
      prev = nullptr;
      t.rows.push_back(std::move(row));
      continue;
    }
    row.push_back(fmt::format("{}", p.scenario.training.global_batch_size));
    row.push_back(fmt::format("{}", tokens_per_step(p)));
    if (p.result.ranked.empty()) {
      row.push_back(p.result.counts.valid == 0 ? "no valid layout"
                    : p.result.tight.empty()  ? "nothing fits"
                                              : fmt::format("only tight ({})", p.result.counts.tight));
      for (int i = 0; i < 4; ++i) row.push_back("-");
      row.push_back(fmt::format("{} / {}", p.result.counts.fit, p.result.counts.valid));
      row.push_back("-");
      t.notes.push_back(point_label(p) + ": " + plan_failure(p.scenario, p.result));
      prev = nullptr;
    } else {
      const plan::Ranked& g = p.result.ranked.front();
      row.push_back(plan::layout_string(g.layout, p.scenario));
      const Range st = time_range(g.metrics.step_s, g.band), mfu = rate_range(g.metrics.mfu, g.band);
      row.push_back(fmt::format("{} ({}-{})", sec(g.metrics.step_s), sec(st.low), sec(st.high)));
      row.push_back(fmt::format("{:.0f}", g.metrics.tokens_per_s_per_gpu));
      row.push_back(fmt::format("{} ({}-{})", pct(g.metrics.mfu), pct(mfu.low), pct(mfu.high)));
      if (p.result.ties > 1)
        t.notes.push_back(fmt::format("{}: #1-#{} of the plan are error-band ties (`lcm plan` lists them)",
                                      point_label(p), p.result.ties));
      row.push_back(fmt_bytes_gib(g.metrics.peak_high_bytes));
      row.push_back(fmt::format("{} / {}", p.result.counts.fit, p.result.counts.valid));
      std::string changes = "-";
      if (prev) {
        const auto d = plan::layout_differences(prev->result.ranked.front().layout, g.layout, p.scenario);
        changes = d.empty() ? "same layout" : "";
        for (size_t i = 0; i < d.size(); ++i) changes += (i ? ", " : "") + d[i];
      }
      row.push_back(changes);
      prev = &p;
    }
    t.rows.push_back(std::move(row));
  }
  if (!points.empty()) t.notes.push_back(band_note(points.front().scenario.hardware.uncertainty));
  t.notes.push_back(kNeedsNote);
  return {t};
}

Table sweep_csv_table(const std::vector<SweepPoint>& points, TokensPerStep mode) {
  Table t;
  if (!points.empty())
    for (const auto& [k, v] : points.front().values) t.header.push_back(k);
  for (const char* h : {"num_gpus",
                        "tokens_per_step_mode",
                        "global_batch_size",
                        "tokens_per_step",
                        "status",
                        "layout",
                        "step_s",
                        "tokens_per_s_per_gpu",
                        "mfu",
                        "peak_gib",
                        "needs_gib",
                        "fit",
                        "valid",
                        "enumerated",
                        "step_s_low",
                        "step_s_high",
                        "mfu_low",
                        "mfu_high",
                        "ties",
                        "message"})
    t.header.push_back(h);
  for (const SweepPoint& p : points) {
    std::vector<std::string> row;
    for (const auto& [k, v] : p.values) row.push_back(v);
    row.push_back(fmt::format("{}", p.scenario.num_gpus));
    row.push_back(to_string(mode));
    if (!p.infeasible.empty()) {
      row.insert(row.end(),
                 {"", "", "infeasible", "", "", "", "", "", "", "", "", "", "", "", "", "", "", p.infeasible});
      t.rows.push_back(std::move(row));
      continue;
    }
    row.push_back(fmt::format("{}", p.scenario.training.global_batch_size));
    row.push_back(fmt::format("{}", tokens_per_step(p)));
    const plan::PlanResult& r = p.result;
    if (r.ranked.empty()) {
      row.insert(row.end(), {r.counts.valid == 0 ? "no_valid_layout" : r.tight.empty() ? "nothing_fits" : "only_tight",
                             "", "", "", "", "", ""});
    } else {
      const Metrics& m = r.ranked.front().metrics;
      row.insert(row.end(), {"ok", plan::layout_string(r.ranked.front().layout, p.scenario), fmt::format("{:.6g}", m.step_s),
                             fmt::format("{:.6g}", m.tokens_per_s_per_gpu), fmt::format("{:.6g}", m.mfu),
                             fmt::format("{:.4f}", m.peak_bytes / kGiB), fmt::format("{:.4f}", m.peak_high_bytes / kGiB)});
    }
    row.push_back(fmt::format("{}", r.counts.fit));
    row.push_back(fmt::format("{}", r.counts.valid));
    row.push_back(fmt::format("{}", r.counts.enumerated));
    if (r.ranked.empty()) {
      row.insert(row.end(), {"", "", "", "", ""});
    } else {
      const plan::Ranked& g = r.ranked.front();
      const Range st = time_range(g.metrics.step_s, g.band), mfu = rate_range(g.metrics.mfu, g.band);
      for (double v : {st.low, st.high, mfu.low, mfu.high}) row.push_back(fmt::format("{:.6g}", v));
      row.push_back(fmt::format("{}", r.ties));
    }
    row.push_back(plan_failure(p.scenario, r));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace lcm::report
