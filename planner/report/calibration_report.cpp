// Tables and JSON of a calibration (calibration_report.hpp).
#include <algorithm>
#include <cmath>
#include <numeric>

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
      // Queries over another key count (a CP rank's share of the sequence): "s8192/32768"; a CP
      // ring's per-step KV block: " ring 16384".
      return fmt::format("b{} s{}{} h{}/{} d{}{} {}", o.attn.batch, o.attn.seq_q,
                         o.attn.seq_kv != o.attn.seq_q ? fmt::format("/{}", o.attn.seq_kv) : "", o.attn.heads_q,
                         o.attn.heads_kv, o.attn.head_dim_qk,
                         o.attn.kv_block > 0 ? fmt::format(" ring {}", o.attn.kv_block) : "",
                         o.pass == Pass::kBwd ? "bwd" : "fwd");
    case OpKind::kMemoryBound: return fmt::format("{:.1f} MiB moved", o.mem.bytes / (1024.0 * 1024.0));
    case OpKind::kCollective:
    case OpKind::kSendRecv:
      return fmt::format("{} {:.1f} MiB on {} ranks / {} node{}", to_string(o.coll.kind),
                         o.coll.message_bytes / (1024.0 * 1024.0), m.topo.size, m.topo.nodes,
                         m.topo.nodes > 1 ? "s" : "");
  }
  return "";
}

std::string share(int within, int points) {
  return fmt::format("{}/{} ({:.1f}%)", within, points, points ? 100.0 * within / static_cast<double>(points) : 0.0);
}

std::vector<std::string> cv_row(const std::string& name, int shapes, const ErrorSummary& in, const ErrorSummary& out) {
  if (in.points == 0) return {name, "0", std::to_string(shapes), "-", "-", "-", "-", "-", "-"};
  return {name,
          std::to_string(in.points),
          std::to_string(shapes),
          share(in.within_10, in.points),
          share(out.within_10, out.points),
          pct_abs(in.median_abs),
          pct_abs(out.median_abs),
          pct_abs(in.mean_abs),
          pct_abs(out.mean_abs)};
}

Table cv_table(const Calibration& c, double max_drop_pp) {
  const CrossValidation& cv = c.cv;
  Table t;
  t.title = fmt::format("Cross-validation: {} folds by shape (error = |predicted / measured - 1|)", cv.folds);
  t.header = {"class",     "points",         "shapes", "within 10% in-sample", "within 10% CV", "median in-sample",
              "median CV", "mean in-sample", "mean CV"};
  for (const ClassCv& k : cv.classes) t.rows.push_back(cv_row(to_string(k.cls), k.shapes, k.in_sample, k.held_out));
  t.rows.push_back(cv_row("all", cv.shapes, cv.in_sample, cv.held_out));
  t.notes.push_back(
      "in-sample: the fit of all points (the profile written) scored on the points it was fitted to; CV: each point "
      "predicted by the same fit rerun from the starting profile on the folds without its shape");
  const std::string warning = cv_warning(c, max_drop_pp);
  t.notes.push_back(warning.empty()
                        ? fmt::format("cross-validated share within 10% is {:.1f} points below in-sample (warning "
                                      "above {:g})",
                                      cv.within_drop_pp(), max_drop_pp)
                        : warning);
  return t;
}

}  // namespace

std::string cv_warning(const Calibration& c, double max_drop_pp) {
  const CrossValidation& cv = c.cv;
  if (cv.folds < 2 || !(cv.within_drop_pp() > max_drop_pp)) return "";
  // The classes that lose the most points within 10% when their shapes are held out.
  std::vector<const ClassCv*> worst;
  for (const ClassCv& k : cv.classes)
    if (k.held_out.within_10 < k.in_sample.within_10) worst.push_back(&k);
  std::stable_sort(worst.begin(), worst.end(), [](const ClassCv* a, const ClassCv* b) {
    const int da = a->in_sample.within_10 - a->held_out.within_10, db = b->in_sample.within_10 - b->held_out.within_10;
    return da != db ? da > db : a->held_out.mean_abs > b->held_out.mean_abs;
  });
  std::vector<std::string> names;
  for (size_t i = 0; i < worst.size() && i < 3; ++i)
    names.push_back(fmt::format("{} {}/{} -> {}/{} within 10%, mean error {} -> {}", to_string(worst[i]->cls),
                                worst[i]->in_sample.within_10, worst[i]->in_sample.points, worst[i]->held_out.within_10,
                                worst[i]->held_out.points, pct_abs(worst[i]->in_sample.mean_abs),
                                pct_abs(worst[i]->held_out.mean_abs)));
  return fmt::format(
      "WARNING: cross-validated fit: {} of points within 10% held out vs {} in-sample ({:.1f} points lower, more than "
      "{:g}); worst held out: {}",
      share(cv.held_out.within_10, cv.held_out.points), share(cv.in_sample.within_10, cv.in_sample.points),
      cv.within_drop_pp(), max_drop_pp, fmt::join(names, "; "));
}

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

Table comparison_family_table(const std::vector<PointResult>& rows) {
  std::vector<std::pair<std::string, std::vector<double>>> fams;  // family, its errors
  for (const PointResult& r : rows) {
    const std::string& op = r.point->name;
    std::string name = to_string(r.cls);
    if (op.starts_with("L.moe.router."))
      name = "moe router GEMMs";
    else if (op.starts_with("L.moe.experts.") && r.point->op.kind == OpKind::kGemm)
      name = "moe grouped expert GEMMs";
    auto it = std::find_if(fams.begin(), fams.end(), [&](const auto& f) { return f.first == name; });
    if (it == fams.end()) it = fams.insert(fams.end(), {name, {}});
    it->second.push_back(r.error_after());
  }
  Table t;
  t.title = "Predicted vs measured by family (error = predicted / measured - 1)";
  t.header = {"family", "points", "within 10%", "errors", "mean |error|", "mean signed"};
  for (const auto& [name, errors] : fams) {
    const ErrorSummary sum = summarize_errors(errors);
    const auto [lo, hi] = std::minmax_element(errors.begin(), errors.end());
    const double signed_mean = std::accumulate(errors.begin(), errors.end(), 0.0) / static_cast<double>(errors.size());
    t.rows.push_back({name, std::to_string(sum.points), share(sum.within_10, sum.points), pct(*lo) + " .. " + pct(*hi),
                      pct_abs(sum.mean_abs), pct(signed_mean)});
  }
  return t;
}

std::vector<Table> calibration_tables(const Calibration& c, bool per_point, double cv_max_drop_pp) {
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
  cls.notes.push_back(fmt::format("all classes: {} of {} points within 10% after the fit ({:.1f}%{})",
                                  c.total_within_10, n, n ? 100.0 * c.total_within_10 / static_cast<double>(n) : 0.0,
                                  c.cv.folds >= 2 ? fmt::format(", in-sample; {} cross-validated",
                                                                share(c.cv.held_out.within_10, c.cv.held_out.points))
                                                  : ""));
  out.push_back(std::move(cls));
  if (c.cv.folds >= 2) out.push_back(cv_table(c, cv_max_drop_pp));

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
    const bool cv = c.cv.folds >= 2;
    if (cv) pts.header.insert(pts.header.end(), {"fold", "CV us", "error CV"});
    for (const PointResult& r : c.points) {
      pts.rows.push_back({r.point->name, to_string(r.cls), shape_of(*r.point), us(r.point->measured_s),
                          us(r.predicted_before_s), pct(r.error_before()), us(r.predicted_after_s),
                          pct(r.error_after())});
      if (cv)
        pts.rows.back().insert(pts.rows.back().end(),
                               {std::to_string(r.fold), us(r.predicted_cv_s), pct(r.error_cv())});
    }
    out.push_back(std::move(pts));
  }
  return out;
}

nlohmann::ordered_json calibration_json(const Calibration& c, double cv_max_drop_pp) {
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
  const bool cv = c.cv.folds >= 2;
  oj pts = oj::array();
  for (const PointResult& r : c.points) {
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
    if (cv) {
      pts.back()["shape_key"] = shape_key(*r.point);
      pts.back()["fold"] = r.fold;
      pts.back()["predicted_cv_s"] = r.predicted_cv_s;
      pts.back()["error_cv"] = r.error_cv();
    }
  }
  j["points"] = pts;
  j["within_10_after"] = c.total_within_10;
  j["total_points"] = c.points.size();
  if (cv) {
    auto summary = [](const ErrorSummary& s) {
      return oj{{"points", s.points},
                {"within_10", s.within_10},
                {"within_10_share", s.within_share()},
                {"median_abs_error", s.median_abs},
                {"mean_abs_error", s.mean_abs}};
    };
    oj classes_cv = oj::array();
    for (const ClassCv& k : c.cv.classes)
      classes_cv.push_back({{"class", to_string(k.cls)},
                            {"shapes", k.shapes},
                            {"in_sample", summary(k.in_sample)},
                            {"cross_validated", summary(k.held_out)}});
    const std::string warning = cv_warning(c, cv_max_drop_pp);
    j["cross_validation"] = {{"folds", c.cv.folds},
                             {"shapes", c.cv.shapes},
                             {"in_sample", summary(c.cv.in_sample)},
                             {"cross_validated", summary(c.cv.held_out)},
                             {"within_10_drop_pp", c.cv.within_drop_pp()},
                             {"max_drop_pp", cv_max_drop_pp},
                             {"warning", warning.empty() ? oj(nullptr) : oj(warning)},
                             {"classes", classes_cv}};
  } else {
    j["cross_validation"] = nullptr;
  }
  return j;
}

}  // namespace lcm::report
