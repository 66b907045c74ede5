// `lcm plot`: the same charts rendered offscreen to PNG and SVG; bad input exits 2.
#include <QImage>
#include <QProcess>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QtTest>

namespace {

const QString kLcm = QStringLiteral(LCM_BINARY_DIR "/bin/lcm");
const QString kDefault = QStringLiteral(LCM_SOURCE_DIR "/scenarios/default.yaml");

struct Run {
  int code = -1;
  QString err;
};

Run lcm(const QStringList& args) {
  QProcess p;
  p.start(kLcm, args);
  p.waitForFinished(120000);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class PlotTest : public QObject {
  Q_OBJECT

 private slots:
  void every_kind_renders_a_png();
  void svg_is_valid();
  void bad_kind_exits_2();
  void bad_extension_and_scenario_exit_2();
};

void PlotTest::every_kind_renders_a_png() {
  QTemporaryDir dir;
  for (const char* kind : {"memory", "step-time", "timeline", "scaling-flops", "scaling-memory", "capacity", "validation"}) {
    const QString out = dir.filePath(QString("%1.png").arg(kind));
    const Run r = lcm({"plot", kind, kDefault, "-o", out, "--width", "800", "--height", "500"});
    QVERIFY2(r.code == 0, qPrintable(QString("%1: %2").arg(kind, r.err)));
    QImage img(out);
    QVERIFY2(!img.isNull(), kind);
    QCOMPARE(img.size(), QSize(1600, 1000));  // 2x the requested size
    // Not blank: a chart draws more than a handful of colours.
    QSet<QRgb> colours;
    for (int y = 0; y < img.height(); y += 7)
      for (int x = 0; x < img.width(); x += 7) colours.insert(img.pixel(x, y));
    QVERIFY2(colours.size() > 5, kind);
  }
  const Run r = lcm({"plot", "capacity", kDefault, "-o", dir.filePath("z.png"), "--skew", "zipf:1.2"});
  QCOMPARE(r.code, 0);
}

void PlotTest::svg_is_valid() {
  QTemporaryDir dir;
  const QString out = dir.filePath("memory.svg");
  const Run r = lcm({"plot", "memory", kDefault, "-o", out});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QSvgRenderer svg(out);
  QVERIFY(svg.isValid());
  QCOMPARE(svg.viewBox().size(), QSize(1200, 700));
  QFile f(out);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QVERIFY(f.readAll().contains("memory per GPU (GiB)"));
}

void PlotTest::bad_kind_exits_2() {
  QTemporaryDir dir;
  const QString out = dir.filePath("x.png");
  const Run r = lcm({"plot", "histogram", kDefault, "-o", out});
  QCOMPARE(r.code, 2);
  QVERIFY2(r.err.contains("unknown kind 'histogram'"), qPrintable(r.err));
  QCOMPARE(r.err.count('\n'), 1);  // one line
  QVERIFY(!QFile::exists(out));
}

void PlotTest::bad_extension_and_scenario_exit_2() {
  QTemporaryDir dir;
  Run r = lcm({"plot", "memory", kDefault, "-o", dir.filePath("x.jpg")});
  QCOMPARE(r.code, 2);
  QVERIFY(r.err.contains(".png or .svg"));
  r = lcm({"plot", "memory", dir.filePath("missing.yaml"), "-o", dir.filePath("x.png")});
  QCOMPARE(r.code, 2);
  r = lcm({"plot", "memory", kDefault, "--set", "context_parallel_size=3", "-o", dir.filePath("x.png")});
  QCOMPARE(r.code, 2);
  QVERIFY(r.err.contains("context_parallel_size"));
  QVERIFY(!QFile::exists(dir.filePath("x.png")));
  r = lcm({"plot", "capacity", QStringLiteral(LCM_SOURCE_DIR "/scenarios/llama3.1-8b.yaml"), "-o", dir.filePath("x.png")});
  QCOMPARE(r.code, 2);
  QVERIFY(r.err.contains("dense model"));
}

QTEST_MAIN(PlotTest)
#include "plot_test.moc"
