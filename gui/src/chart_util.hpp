// Shared chart styling: axis construction, display units, palette (internal to lcm_gui).
#pragma once

#include <QBrush>
#include <QChart>
#include <QColor>
#include <QFont>
#include <QLogValueAxis>
#include <QPen>
#include <QString>
#include <QValueAxis>

namespace lcm::gui::detail {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Okabe-Ito palette (colour-blind safe), then two greys.
inline QColor palette(int i) {
  static const QColor colors[] = {QColor(0, 114, 178),  QColor(230, 159, 0), QColor(0, 158, 115),
                                  QColor(204, 121, 167), QColor(86, 180, 233), QColor(213, 94, 0),
                                  QColor(240, 228, 66),  QColor(120, 120, 120), QColor(60, 60, 60)};
  return colors[static_cast<size_t>(i) % (sizeof(colors) / sizeof(colors[0]))];
}

// Seconds -> a display unit that keeps the numbers readable.
struct TimeUnit {
  double scale;  // multiply seconds by this
  const char* name;
};
inline TimeUnit time_unit(double max_seconds) {
  if (max_seconds >= 2.0) return {1.0, "s"};
  if (max_seconds >= 2e-3) return {1e3, "ms"};
  return {1e6, "µs"};
}

// A step time as every view prints it (headline, step-time chart, timeline title), so that
// they show the same digits of the same field: "62.66 s", "850.3 ms".
inline QString step_time_text(double seconds) {
  const TimeUnit u = time_unit(seconds);
  return QString("%1 %2").arg(seconds * u.scale, 0, 'g', 4).arg(u.name);
}

inline QChart* new_chart(const QString& title) {
  auto* c = new QChart();
  c->setTitle(title);
  QFont tf = c->titleFont();
  tf.setPointSizeF(11);
  tf.setBold(true);
  c->setTitleFont(tf);
  c->setAnimationOptions(QChart::NoAnimation);
  c->legend()->setAlignment(Qt::AlignBottom);
  c->setMargins(QMargins(6, 6, 6, 6));
  return c;
}

inline QValueAxis* value_axis(const QString& title, const QString& fmt = "%.3g") {
  auto* a = new QValueAxis();
  a->setTitleText(title);
  a->setLabelFormat(fmt);
  return a;
}

inline QLogValueAxis* log_axis(const QString& title, double base, const QString& fmt = "%g") {
  auto* a = new QLogValueAxis();
  a->setTitleText(title);
  a->setBase(base);
  a->setLabelFormat(fmt);
  a->setMinorTickCount(-1);
  a->setMinorGridLineColor(QColor(238, 238, 238));
  return a;
}

}  // namespace lcm::gui::detail
