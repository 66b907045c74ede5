// Rendering of two estimates side by side (lcm/planner/report/diff_report.hpp).
#include "lcm/planner/report/diff_report.hpp"

#include <cassert>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "lcm/planner/report/band.hpp"
#include "lcm/planner/report/estimate_report.hpp"

namespace lcm::report {

namespace {

using nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ordered_json number_or_null(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr); }

std::string fmt_rel(double r) { return std::isfinite(r) ? fmt::format("{:+.2f}%", 100.0 * r) : "-"; }

// A value for people in the row's unit: GiB for bytes, seconds to the microsecond.
std::string fmt_value(const DiffRow& r, double v) {
  if (r.unit == "bytes") return fmt_bytes_gib(v);
  if (r.unit == "bool") return v != 0 ? "yes" : "no";
  if (r.unit == "s") return fmt::format("{:.6f}", v);
  if (r.unit == "fraction") return fmt::format("{:.4f}", v);
  if (r.unit == "count") return fmt::format("{:.4g}", v);
  return fmt::format("{:.1f}", v);
}

std::string fmt_diff(const DiffRow& r) {
  const double d = r.diff();
  if (r.unit == "bool") return d == 0 ? "=" : (d > 0 ? "no -> yes" : "yes -> no");
  if (r.unit == "bytes") return (d >= 0 ? "+" : "") + fmt_bytes_gib(d);
  if (r.unit == "s") return fmt::format("{:+.6f}", d);
  if (r.unit == "fraction") return fmt::format("{:+.4f}", d);
  if (r.unit == "count") return fmt::format("{:+.4g}", d);
  return fmt::format("{:+.1f}", d);
}

ordered_json side_json(const DiffSide& s) {
  const Mesh& m = s.estimate->mesh;
  return ordered_json{{"label", s.label},
                      {"scenario", s.scenario->name},
                      {"model", s.scenario->model.name},
                      {"hardware", s.scenario->hardware.name},
                      {"num_gpus", s.scenario->num_gpus},
                      {"mesh", ordered_json{{"tp", m.tp},
                                            {"cp", m.cp},
                                            {"pp", m.pp},
                                            {"vp", m.vp},
                                            {"dp", m.dp},
                                            {"ep", m.ep},
                                            {"etp", m.etp},
                                            {"edp", m.edp}}},
                      {"verdict_stage", s.estimate->memory.verdict_stage}};
}

std::string mesh_text(const Mesh& m) {
  return fmt::format("tp{} cp{} pp{} vp{} dp{} ep{} etp{}", m.tp, m.cp, m.pp, m.vp, m.dp, m.ep, m.etp);
}

// Whether the two step-time bands overlap, and the sentence that says what that means.
bool bands_overlap(const Estimate& a, const Estimate& b) {
  const Range ra = time_range(a.time.step_s, a.band), rb = time_range(b.time.step_s, b.band);
  return ra.low <= rb.high && rb.low <= ra.high;
}
std::string bands_note(const Estimate& a, const Estimate& b) {
  return bands_overlap(a, b)
             ? "step-time error bands of A and B overlap: the difference is within the model's error (a tie)"
             : "step-time error bands of A and B do not overlap: the difference is larger than the model's error";
}

}  // namespace

double DiffRow::rel() const {
  if (a == 0) return b == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  return (b - a) / a;
}

std::vector<DiffRow> diff_rows(const Estimate& a, const Estimate& b) {
  assert(a.has_time && b.has_time);
  std::vector<DiffRow> rows;
  rows.push_back({"headline", "step_s", "s", a.time.step_s, b.time.step_s});
  rows.push_back(
      {"headline", "tokens_per_s_per_gpu", "tokens/s", a.time.tokens_per_s_per_gpu, b.time.tokens_per_s_per_gpu});
  rows.push_back({"headline", "mfu", "fraction", a.time.mfu, b.time.mfu});
  // The ends of the error bands (model/uncertainty.hpp).
  const Range sa_r = time_range(a.time.step_s, a.band), sb_r = time_range(b.time.step_s, b.band);
  const Range ma_r = rate_range(a.time.mfu, a.band), mb_r = rate_range(b.time.mfu, b.band);
  rows.push_back({"headline", "step_s_low", "s", sa_r.low, sb_r.low});
  rows.push_back({"headline", "step_s_high", "s", sa_r.high, sb_r.high});
  rows.push_back({"headline", "mfu_low", "fraction", ma_r.low, mb_r.low});
  rows.push_back({"headline", "mfu_high", "fraction", ma_r.high, mb_r.high});
  rows.push_back({"headline", "needs_bytes", "bytes", a.memory.peak_high_bytes, b.memory.peak_high_bytes});
  rows.push_back({"headline", "hbm_bytes", "bytes", a.memory.hbm_bytes, b.memory.hbm_bytes});
  rows.push_back({"headline", "fits", "bool", a.memory.fits ? 1.0 : 0.0, b.memory.fits ? 1.0 : 0.0});
  rows.push_back({"headline", "may_fit", "bool", a.memory.may_fit ? 1.0 : 0.0, b.memory.may_fit ? 1.0 : 0.0});

  const StageMemory& ma = a.memory.stages[static_cast<size_t>(a.memory.verdict_stage)];
  const StageMemory& mb = b.memory.stages[static_cast<size_t>(b.memory.verdict_stage)];
  const auto ta = memory_terms(ma), tb = memory_terms(mb);
  assert(ta.size() == tb.size());
  rows.push_back(
      {"memory", "activations_per_microbatch", "bytes", ma.activations_per_microbatch, mb.activations_per_microbatch});
  rows.push_back({"memory", "in_flight_microbatches", "count", ma.in_flight_microbatches, mb.in_flight_microbatches});
  for (size_t i = 0; i < ta.size(); ++i) rows.push_back({"memory", ta[i].first, "bytes", ta[i].second, tb[i].second});
  rows.push_back({"memory", "allocated", "bytes", ma.allocated, mb.allocated});
  rows.push_back({"memory", "peak", "bytes", ma.peak, mb.peak});
  rows.push_back({"memory", "peak_low", "bytes", ma.peak_low, mb.peak_low});
  rows.push_back({"memory", "peak_high", "bytes", ma.peak_high, mb.peak_high});

  const auto sa = step_terms(a.time), sb = step_terms(b.time);
  for (size_t i = 0; i < sa.size(); ++i) rows.push_back({"step", sa[i].key, "s", sa[i].seconds, sb[i].seconds});
  return rows;
}

nlohmann::ordered_json diff_json(const DiffSide& a, const DiffSide& b) {
  ordered_json j;
  j["schema_version"] = kDiffSchemaVersion;
  j["a"] = side_json(a);
  j["b"] = side_json(b);
  ordered_json sections{
      {"headline", ordered_json::object()}, {"memory", ordered_json::object()}, {"step", ordered_json::object()}};
  for (const DiffRow& r : diff_rows(*a.estimate, *b.estimate)) {
    if (r.unit == "bool") {
      sections[r.section][r.key] = ordered_json{{"a", r.a != 0}, {"b", r.b != 0}, {"changed", r.a != r.b}};
      continue;
    }
    sections[r.section][r.key] =
        ordered_json{{"a", r.a}, {"b", r.b}, {"diff", r.diff()}, {"rel", number_or_null(r.rel())}, {"unit", r.unit}};
  }
  j["headline"] = sections["headline"];
  j["memory"] = sections["memory"];
  j["step"] = sections["step"];
  j["bands_overlap"] = bands_overlap(*a.estimate, *b.estimate);
  return j;
}

std::vector<Table> diff_tables(const DiffSide& a, const DiffSide& b) {
  const std::vector<DiffRow> rows = diff_rows(*a.estimate, *b.estimate);
  Table head;
  head.title = fmt::format("lcm diff: A = {} ({}) vs B = {} ({})", a.label, mesh_text(a.estimate->mesh), b.label,
                           mesh_text(b.estimate->mesh));
  head.header = {"quantity", "A", "B", "B - A", "rel"};
  Table mem;
  mem.title = fmt::format("memory of the verdict stage (GiB): A stage {}, B stage {}", a.estimate->memory.verdict_stage,
                          b.estimate->memory.verdict_stage);
  mem.header = {"term", "A", "B", "B - A", "rel"};
  Table step;
  step.title = "step-time terms (s per step, bottleneck stage)";
  step.header = {"term", "A", "B", "B - A", "rel"};
  for (const DiffRow& r : rows) {
    std::string name = r.key;
    if (r.key == "needs_bytes") name = kNeedsHeader;
    if (r.key == "hbm_bytes") name = "HBM GiB";
    std::vector<std::string> cells = {name, fmt_value(r, r.a), fmt_value(r, r.b), fmt_diff(r),
                                      r.unit == "bool" ? "" : fmt_rel(r.rel())};
    Table& t = r.section == "headline" ? head : (r.section == "memory" ? mem : step);
    t.rows.push_back(std::move(cells));
  }
  head.notes.push_back(bands_note(*a.estimate, *b.estimate));
  head.notes.push_back(band_note(a.scenario->hardware.uncertainty));
  head.notes.push_back(kNeedsNote);
  return {head, mem, step};
}

Table diff_long_table(const DiffSide& a, const DiffSide& b) {
  Table t;
  t.header = {"section", "item", "a", "b", "diff", "rel", "unit"};
  for (const DiffRow& r : diff_rows(*a.estimate, *b.estimate)) {
    const double rel = r.rel();
    t.rows.push_back({r.section, r.key, fmt::format("{:.10g}", r.a), fmt::format("{:.10g}", r.b),
                      fmt::format("{:.10g}", r.diff()), std::isfinite(rel) ? fmt::format("{:.10g}", rel) : "", r.unit});
  }
  return t;
}

}  // namespace lcm::report
