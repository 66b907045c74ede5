// lcm-gui: explore mesh layouts interactively.
//   lcm-gui [SCENARIO.yaml] [--screenshot DIR] [--size WxH] [--train-run DIR [--train-scenario YAML]]
// --train-run opens an lcm-exec train run directory in the Validation tab (lcm compare).
// --screenshot renders every tab to DIR/<tab>.png (offscreen where QT_QPA_PLATFORM says so)
// and exits. Exit codes as lcm: 0 ok, 1 failure, 2 bad input.
#include <iostream>
#include <string>

#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFileInfo>
#include <QRegularExpression>

#include "lcm/gui/main_window.hpp"
#include "lcm/gui/scenario_panel.hpp"
#include "lcm/gui/session.hpp"
#include "lcm/gui/validation_tab.hpp"

namespace {

void add_options(QCommandLineParser& cli) {
  cli.setApplicationDescription("lcm-gui: long-context MoE training planner");
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addPositionalArgument("scenario", "Scenario YAML to open (default: scenarios/default.yaml)");
  cli.addOption(QCommandLineOption(QStringLiteral("screenshot"), QStringLiteral("Render every tab to DIR/<tab>.png and exit."),
                                   QStringLiteral("DIR")));
  cli.addOption(QCommandLineOption(QStringLiteral("train-run"),
                                   QStringLiteral("Open an lcm-exec train run directory in the Validation tab (lcm compare)."),
                                   QStringLiteral("DIR")));
  cli.addOption(QCommandLineOption(QStringLiteral("train-scenario"),
                                   QStringLiteral("The scenario of --train-run's prediction (default: the one its summary.json names)."),
                                   QStringLiteral("YAML")));
  cli.addOption(QCommandLineOption(QStringLiteral("size"), QStringLiteral("Window size WxH (default 1600x1000)."),
                                   QStringLiteral("WxH"), QStringLiteral("1600x1000")));
}

int print_help_or_version(QCoreApplication& core) {
  QCoreApplication::setApplicationName("lcm-gui");
  QCoreApplication::setApplicationVersion("0.1.0");
  QCommandLineParser cli;
  add_options(cli);
  cli.process(core);  // prints the help or the version and exits 0
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --help and --version without a display (QApplication aborts when it cannot open one):
  // they are answered by a QCoreApplication before any window system is touched.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "-h" && a != "--help" && a != "--help-all" && a != "-?" && a != "-v" && a != "--version") continue;
    QCoreApplication core(argc, argv);
    return print_help_or_version(core);
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("lcm-gui");
  QApplication::setApplicationVersion("0.1.0");
  QCommandLineParser cli;
  add_options(cli);
  cli.process(app);
  const QString shot = QStringLiteral("screenshot"), size = QStringLiteral("size");

  const QStringList wh = cli.value(size).split('x');
  bool ok_w = false, ok_h = false;
  const int w = wh.size() == 2 ? wh[0].toInt(&ok_w) : 0;
  const int h = wh.size() == 2 ? wh[1].toInt(&ok_h) : 0;
  if (!ok_w || !ok_h || w < 400 || h < 300) {
    std::cerr << "lcm-gui: --size " << cli.value(size).toStdString() << ": expected WxH, at least 400x300\n";
    return 2;
  }

  lcm::gui::MainWindow win;
  QString path = cli.positionalArguments().value(0);
  if (path.isEmpty()) {
    for (const auto& [name, p] : lcm::gui::bundled_scenarios())
      if (name == "default") path = p;
  }
  if (!path.isEmpty() && !win.scenario_panel()->open_file(path)) {
    std::cerr << "lcm-gui: " << win.scenario_panel()->error_text().toStdString() << "\n";
    if (cli.isSet(shot)) return 2;
  }
  if (cli.isSet(QStringLiteral("train-run")) &&
      !win.validation_tab()->load_train_run(cli.value(QStringLiteral("train-run")),
                                            cli.value(QStringLiteral("train-scenario")))) {
    std::cerr << "lcm-gui: --train-run: " << win.validation_tab()->train_run()->status_text().remove(QRegularExpression("<[^>]*>")).toStdString() << "\n";
    return 2;
  }
  win.resize(w, h);
  if (cli.isSet(shot)) {
    win.setAttribute(Qt::WA_DontShowOnScreen);
    win.show();
    QString err;
    if (!win.save_screenshots(cli.value(shot), &err)) {
      std::cerr << "lcm-gui: " << err.toStdString() << "\n";
      return 1;
    }
    return 0;
  }
  win.show();
  return app.exec();
}
