// Session: load / import / save and the re-estimate on every change.
#include "lcm/gui/session.hpp"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "lcm/gui/chart_export.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::gui {

Session::Session(QObject* parent) : QObject(parent) {}

std::optional<io::ConfigError> Session::load_file(const QString& path) {
  io::LoadOptions lo;
  lo.num_gpus = base_.num_gpus > 0 ? base_.num_gpus : 8;  // Megatron model_config.yaml inputs
  lo.hardware = hardware_ref_;
  std::string ref = hardware_ref_;
  lo.hardware_ref = &ref;  // the file's own profile: what the panel shows and Save as writes
  auto r = io::load_scenario(path.toStdString(), lo);
  if (!r) return r.error();
  adopt(std::move(r).value(), ref, path);
  return std::nullopt;
}

std::optional<io::ConfigError> Session::load_yaml(const std::string& text, const std::string& display_name) {
  io::LoadOptions lo;
  lo.num_gpus = base_.num_gpus > 0 ? base_.num_gpus : 8;
  lo.hardware = hardware_ref_;
  std::string ref = hardware_ref_;
  lo.hardware_ref = &ref;
  auto r = io::load_scenario_string(text, display_name, lo);
  if (!r) return r.error();
  adopt(std::move(r).value(), ref, QString());
  return std::nullopt;
}

std::optional<io::ConfigError> Session::import_megatron(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    return io::ConfigError{path.toStdString(), 0, 0, "", "cannot read the file"};
  const std::string text = f.readAll().toStdString();
  const std::string name = path.toStdString();
  const bool yaml = path.endsWith(".yaml") || path.endsWith(".yml");
  auto flags = yaml ? io::parse_megatron_model_config(text, name) : io::parse_megatron_command_line(text, name);
  if (!flags) return flags.error();
  const int gpus = base_.num_gpus > 0 ? base_.num_gpus : 8;
  auto r = io::import_megatron(flags.value(), gpus, base_.hardware, QFileInfo(path).completeBaseName().toStdString());
  if (!r) return r.error();
  adopt(std::move(r).value(), hardware_ref_, QString());
  return std::nullopt;
}

bool Session::save(const QString& path, QString* error) const {
  const std::string yaml = io::scenario_to_yaml(scenario_, hardware_ref_);
  return write_file_atomically(path, QByteArray::fromStdString(yaml), error);
}

void Session::set_layout(const plan::Layout& l) {
  layout_ = l;
  recompute();
  emit layoutChanged();
  emit estimateChanged();
}

void Session::set_base(const Scenario& base, const std::string& hardware_ref, const plan::Layout* layout) {
  base_ = base;
  if (layout) layout_ = *layout;
  hardware_ref_ = hardware_ref;
  recompute();
  emit baseChanged();
  emit layoutChanged();
  emit estimateChanged();
}

std::vector<Problem> Session::problems_for(const plan::Layout& l) const {
  return validate_scenario(plan::apply_layout(base_, l));
}

void Session::adopt(Scenario s, std::string hardware_ref, QString path) {
  layout_ = plan::layout_of(s);
  base_ = std::move(s);
  hardware_ref_ = std::move(hardware_ref);
  path_ = std::move(path);
  recompute();
  emit baseChanged();
  emit layoutChanged();
  emit estimateChanged();
}

void Session::recompute() {
  scenario_ = plan::apply_layout(base_, layout_);
  problems_ = validate_scenario(scenario_);
  has_estimate_ = problems_.empty();
  if (has_estimate_) estimate_ = lcm::estimate(scenario_);
}

namespace {

std::vector<std::pair<QString, QString>> yaml_files(const QString& dir) {
  std::vector<std::pair<QString, QString>> out;
  const QDir d(dir);
  for (const QFileInfo& fi : d.entryInfoList({"*.yaml"}, QDir::Files, QDir::Name))
    out.emplace_back(fi.completeBaseName(), fi.absoluteFilePath());
  return out;
}

}  // namespace

std::vector<std::pair<QString, QString>> hardware_profiles() {
  auto p = io::find_hardware_profile("h200-sxm", {});
  if (!p) return {};
  return yaml_files(QFileInfo(QString::fromStdString(p.value())).absolutePath());
}

std::vector<std::pair<QString, QString>> bundled_scenarios() {
  auto p = io::find_hardware_profile("h200-sxm", {});
  if (!p) return {};
  QDir root = QFileInfo(QString::fromStdString(p.value())).absoluteDir();
  root.cdUp();
  return yaml_files(root.filePath("scenarios"));
}

}  // namespace lcm::gui
