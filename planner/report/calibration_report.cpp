// Tables and JSON of a calibration (calibration_report.hpp).
#include <cmath>

#include <fmt/format.h>

#include "lcm/model/io/enums.hpp"
#include "lcm/planner/report/calibration_report.hpp"

namespace lcm::report {

namespace {

std::string pct(double frac) { return fmt::format("{:+.1f}%", 100.0 * frac); }
std::string pct_abs(double frac) { return fmt::format("{:.1f}%", 100.0 * frac); }
// rms of log(pred/meas) as the relative error it corresponds to.
std::string rms_pct(double log_rms) { return fmt::format("{:.1f}%", 100.0 * rms_relative(log_rms)); }
std::string us(double s) { return fmt::format("{:.1f}", s * 1e6); }
std::string value(double v) { return fmt::format("{:.4g}", v); }

std::string shape_of(const MeasuredOp& m) {
  const Op& o = m.op;
  switch (o.kind) {
    case OpKind::kGemm:
      return fmt::format("{}x{}x{}{} {}", o.gemm.m, o.gemm.n, o.gemm.k,
                         o.gemm.groups > 1 ? fmt::format(" /{}", o.gemm.groups) : "", lcm::to_string(o.dtype));
    case OpKind::kAttention:
      return fmt::format("b{} s{} h{}/{} d{} {}", o.attn.batch, o.attn.seq_q, o.attn.heads_q, o.attn.heads_kv,
                         o.attn.head_dim_qk, o.pass == Pass::kBwd ? "bwd" : "fwd");
    case OpKind::kMemoryBound: return fmt::format("{:.1f} MiB moved", o.mem.bytes / (1024.0 * 1024.0));
    case OpKind::kCollective:
    case OpKind::kSendRecv:
      return fmt::format("{} {:.1f} MiB on {} ranks / {} node{}", to_string(o.coll.kind),
                         o.coll.message_bytes / (1024.0 * 1024.0), m.topo.size, m.topo.nodes,
                         m.topo.nodes > 1 ? "s" : "");
  }
  return "";
}

}  // namespace

Table comparison_table(const std::vector<PointResult>& rows, const std::string& title) {
  Table t;
  t.title = title;
  t.header = {"op", "class", "shape", "measured us", "predicted us", "error"};
  for (const PointResult& r : rows)
    t.rows.push_back({r.point->name, to_string(r.cls), shape_of(*r.point), us(r.point->measured_s),
                      us(r.predicted_after_s), pct(r.error_after())});
  const int within = count_within(rows, 0.10);
  t.notes.push_back(fmt::format("{} of {} points within 10% ({:.1f}%)", within, rows.size(),
                                rows.empty() ? 0.0 : 100.0 * within / static_cast<double>(rows.size())));
  return t;
}

std::vector<Table> calibration_tables(const Calibration& c, bool per_point) {
  std::vector<Table> out;
  Table cls;
  cls.title = "Fit per op class (error = predicted / measured - 1)";
  cls.header = {"class", "points", "rms before", "rms after", "max before", "max after", "within 10% before",
                "within 10% after"};
  for (const ClassFit& f : c.classes) {
    if (f.points == 0) {
      cls.rows.push_back({to_string(f.cls), "0", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    cls.rows.push_back({to_string(f.cls), std::to_string(f.points), rms_pct(f.rms_before), rms_pct(f.rms_after),
                        pct_abs(f.max_abs_before), pct_abs(f.max_abs_after),
                        fmt::format("{}/{}", f.within_10_before, f.points),
                        fmt::format("{}/{}", f.within_10_after, f.points)});
  }
  for (const ClassFit& f : c.classes)
    if (!f.note.empty()) cls.notes.push_back(fmt::format("{}: {}", to_string(f.cls), f.note));
  const size_t n = c.points.size();
  cls.notes.push_back(fmt::format("all classes: {} of {} points within 10% after the fit ({:.1f}%)", c.total_within_10,
                                  n, n ? 100.0 * c.total_within_10 / static_cast<double>(n) : 0.0));
  out.push_back(std::move(cls));

  Table par;
  par.title = "Parameters (profile keys and units)";
  par.header = {"key", "before", "after", "change"};
  for (const ClassFit& f : c.classes)
    for (const FittedParam& p : f.params)
      par.rows.push_back({p.key, value(p.before), value(p.after), p.before != 0 ? pct(p.after / p.before - 1.0) : "-"});
  out.push_back(std::move(par));

  if (per_point) {
    Table pts;
    pts.title = "Predicted vs measured per point";
    pts.header = {"op", "class", "shape", "measured us", "before us", "error before", "after us", "error after"};
    for (const PointResult& r : c.points)
      pts.rows.push_back({r.point->name, to_string(r.cls), shape_of(*r.point), us(r.point->measured_s),
                          us(r.predicted_before_s), pct(r.error_before()), us(r.predicted_after_s),
                          pct(r.error_after())});
    out.push_back(std::move(pts));
  }
  return out;
}

nlohmann::ordered_json calibration_json(const Calibration& c) {
  using oj = nlohmann::ordered_json;
  oj j;
  oj classes = oj::array();
  for (const ClassFit& f : c.classes) {
    oj params = oj::array();
    for (const FittedParam& p : f.params) params.push_back({{"key", p.key}, {"before", p.before}, {"after", p.after}});
    classes.push_back({{"class", to_string(f.cls)},
                       {"points", f.points},
                       {"fitted", f.fitted},
                       {"note", f.note},
                       {"params", params},
                       {"rms_log_before", f.rms_before},
                       {"rms_log_after", f.rms_after},
                       {"max_abs_error_before", f.max_abs_before},
                       {"max_abs_error_after", f.max_abs_after},
                       {"within_10_before", f.within_10_before},
                       {"within_10_after", f.within_10_after}});
  }
  j["classes"] = classes;
  oj pts = oj::array();
  for (const PointResult& r : c.points)
    pts.push_back({{"op", r.point->name},
                   {"key", r.point->key},
                   {"source", r.point->source},
                   {"class", to_string(r.cls)},
                   {"shape", shape_of(*r.point)},
                   {"measured_s", r.point->measured_s},
                   {"predicted_before_s", r.predicted_before_s},
                   {"predicted_after_s", r.predicted_after_s},
                   {"error_before", r.error_before()},
                   {"error_after", r.error_after()}});
  j["points"] = pts;
  j["within_10_after"] = c.total_within_10;
  j["total_points"] = c.points.size();
  return j;
}

}  // namespace lcm::report
