// The chart kinds shared by `lcm plot`, lcm-gui's export and its screenshots: a kind name
// plus a scenario (and the kind's inputs) -> the chart, built by charts.hpp.
#pragma once

#include <string>
#include <vector>

#include <QByteArray>
#include <QSize>
#include <QString>

#include "lcm/gui/chart_export.hpp"

#include "lcm/model/routing.hpp"
#include "lcm/model/specs.hpp"

QT_BEGIN_NAMESPACE
class QChart;
QT_END_NAMESPACE

namespace lcm::gui {

struct PlotInputs {
  // capacity
  std::vector<double> capacity_factors;  // empty: default_capacity_factors()
  RoutingKind routing = RoutingKind::kBalanced;
  double zipf_s = 0;
  std::vector<double> loads;  // kMeasured
  // validation: an lcm-exec results directory
  QString results_dir;
};

// "memory", "step-time", "timeline", "scaling-flops", "scaling-memory", "capacity", "validation".
const std::vector<std::string>& plot_kinds();
// 1.0, 1.125, ..., 3.0.
std::vector<double> default_capacity_factors();
// The kind's chart (caller owns it), or null with a one-line reason in *error (unknown
// kind, invalid layout, a dense model for capacity, unreadable results). "timeline" is not
// a QChart (it is the Timeline tab's TimelineWidget): render_plot draws every kind.
QChart* make_plot(const std::string& kind, const Scenario& s, const PlotInputs& in, std::string* error);
// The kind as PNG or SVG bytes at `size` (the timeline grows taller when its rows need it),
// or empty with a one-line reason in *error.
QByteArray render_plot(const std::string& kind, const Scenario& s, const PlotInputs& in, QSize size, ImageFormat f,
                       std::string* error);

}  // namespace lcm::gui
