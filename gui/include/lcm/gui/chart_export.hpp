// Chart images: a chart view rendered to PNG or SVG bytes, and files written atomically
// (QSaveFile: a temporary file in the target directory, renamed on commit).
#pragma once

#include <optional>

#include <QByteArray>
#include <QSize>
#include <QString>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
QT_END_NAMESPACE

namespace lcm::gui {

enum class ImageFormat { kPng, kSvg };

// By the file name's extension (.png, .svg, case-insensitive); nullopt otherwise.
std::optional<ImageFormat> image_format_for(const QString& path);

// The view as it is laid out now, at its current size.
QByteArray render_view(QChartView* view, ImageFormat f);
// A chart (ownership taken) laid out offscreen at `size` pixels and rendered.
QByteArray render_chart(QChart* chart, QSize size, ImageFormat f);

// Writes atomically; false with the reason in *error.
bool write_file_atomically(const QString& path, const QByteArray& bytes, QString* error);

}  // namespace lcm::gui
