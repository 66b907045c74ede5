// PNG / SVG rendering of chart views, atomic file writes.
#include "lcm/gui/chart_export.hpp"

#include <QBuffer>
#include <QGraphicsScene>
#include <QChart>
#include <QChartView>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QSaveFile>
#include <QSvgGenerator>

namespace lcm::gui {

std::optional<ImageFormat> image_format_for(const QString& path) {
  const QString ext = QFileInfo(path).suffix().toLower();
  if (ext == "png") return ImageFormat::kPng;
  if (ext == "svg") return ImageFormat::kSvg;
  return std::nullopt;
}

QByteArray render_view(QChartView* view, ImageFormat f) {
  const QSize size = view->size();
  QByteArray bytes;
  if (f == ImageFormat::kPng) {
    // Twice the pixels for sharp text. The scene is rendered, not the widget: QWidget::render
    // of a QGraphicsView ignores the painter's scale.
    QImage img(size * 2, QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::white);
    {
      QPainter p(&img);
      p.setRenderHint(QPainter::Antialiasing);
      view->scene()->render(&p, QRectF(0, 0, img.width(), img.height()), QRectF(QPointF(0, 0), QSizeF(size)));
    }
    QBuffer buf(&bytes);
    buf.open(QIODevice::WriteOnly);
    img.save(&buf, "PNG");
    return bytes;
  }
  QBuffer buf(&bytes);
  buf.open(QIODevice::WriteOnly);
  QSvgGenerator gen;
  gen.setOutputDevice(&buf);
  gen.setSize(size);
  gen.setViewBox(QRect(QPoint(0, 0), size));
  gen.setTitle(view->chart() ? view->chart()->title() : QString());
  gen.setDescription("lcm chart");
  {
    QPainter p(&gen);
    p.setRenderHint(QPainter::Antialiasing);
    view->scene()->render(&p, QRectF(QPointF(0, 0), QSizeF(size)), QRectF(QPointF(0, 0), QSizeF(size)));
  }
  return bytes;
}

QByteArray render_chart(QChart* chart, QSize size, ImageFormat f) {
  QChartView view(chart);  // takes ownership of the chart
  view.setRenderHint(QPainter::Antialiasing);
  view.setAttribute(Qt::WA_DontShowOnScreen);
  view.resize(size);
  view.show();  // lays the chart out (offscreen platform: nothing is drawn on a screen)
  return render_view(&view, f);
}

bool write_file_atomically(const QString& path, const QByteArray& bytes, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    *error = QString("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  if (file.write(bytes) != bytes.size() || !file.commit()) {
    *error = QString("write failed: %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

}  // namespace lcm::gui
