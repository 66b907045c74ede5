// Kind name -> chart.
#include "lcm/gui/plot.hpp"

#include <algorithm>

#include <QChart>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/gui/charts.hpp"
#include "lcm/gui/timeline.hpp"
#include "lcm/gui/validation_data.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::gui {

const std::vector<std::string>& plot_kinds() {
  static const std::vector<std::string> k = {"memory",         "step-time", "timeline",  "scaling-flops",
                                             "scaling-memory", "capacity",  "validation"};
  return k;
}

std::vector<double> default_capacity_factors() {
  std::vector<double> v;
  for (int i = 0; i <= 16; ++i) v.push_back(1.0 + 0.125 * i);
  return v;
}

QChart* make_plot(const std::string& kind, const Scenario& s, const PlotInputs& in, std::string* error) {
  const bool known = std::find(plot_kinds().begin(), plot_kinds().end(), kind) != plot_kinds().end();
  if (!known) {
    *error = fmt::format("unknown plot kind '{}' (expected one of: {})", kind, fmt::join(plot_kinds(), ", "));
    return nullptr;
  }
  if (kind == "validation") {
    const ValidationLoad v = load_validation_rows(in.results_dir, s.hardware);
    if (!v.error.isEmpty()) {
      *error = v.error.toStdString();
      return nullptr;
    }
    return validation_chart(v.rows, QString("%1 points, %2").arg(v.rows.size()).arg(QString::fromStdString(s.hardware.name)));
  }
  const auto problems = validate_scenario(s);
  if (!problems.empty()) {
    *error = fmt::format("{}: {}", problems.front().key, problems.front().message);
    return nullptr;
  }
  if (kind == "scaling-flops" || kind == "scaling-memory") {
    const auto rows = scaling_table(s, scaling_seq_lengths());
    const Crossover x = attention_mlp_crossover(s.model, s.flop_convention.causal_halved);
    return kind == "scaling-flops" ? scaling_flops_chart(s, rows, x) : scaling_memory_chart(s, rows, x);
  }
  if (kind == "capacity") {
    if (!has_moe(s.model)) {
      *error = "dense model (num_experts = 0): the capacity plot needs an MoE scenario";
      return nullptr;
    }
    CapacityOptions o;
    o.capacity_factors = in.capacity_factors.empty() ? default_capacity_factors() : in.capacity_factors;
    o.routing = in.routing;
    o.zipf_s = in.zipf_s;
    o.loads = in.loads;
    if (o.routing == RoutingKind::kMeasured && o.loads.size() != static_cast<size_t>(s.model.num_experts)) {
      *error = fmt::format("loads for {} experts, but the scenario has num_experts = {}", o.loads.size(),
                           s.model.num_experts);
      return nullptr;
    }
    return capacity_chart(s, capacity_sweep(s, o));
  }
  if (kind == "timeline") {
    *error = "the timeline is drawn by TimelineWidget, not a chart (render_plot)";
    return nullptr;
  }
  const Estimate e = estimate(s);
  if (kind == "memory") return memory_chart(s, e);
  return step_time_chart(s, e);
}

QByteArray render_plot(const std::string& kind, const Scenario& s, const PlotInputs& in, QSize size, ImageFormat f,
                       std::string* error) {
  if (kind != "timeline") {
    QChart* chart = make_plot(kind, s, in, error);
    return chart ? render_chart(chart, size, f) : QByteArray();
  }
  const auto problems = validate_scenario(s);
  if (!problems.empty()) {
    *error = fmt::format("{}: {}", problems.front().key, problems.front().message);
    return {};
  }
  const Estimate e = estimate(s);
  TimelineData d = timeline_data(s, e);
  QString title = timeline_title(d, e.mesh.pp);
  TimelineWidget w;
  w.setAttribute(Qt::WA_DontShowOnScreen);
  w.set_data(std::move(d), std::move(title));
  return w.render(size, f);
}

}  // namespace lcm::gui
