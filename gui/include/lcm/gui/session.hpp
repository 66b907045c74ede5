// The document of lcm-gui: a base scenario (model, training job, hardware profile, cluster
// size), the planner Layout applied to it (plan::apply_layout, the same function the
// planner ranks with), and the model's estimate of the result. It stores and signals;
// every number comes from lcm::estimate and validate_scenario.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <QObject>
#include <QString>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/config_error.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::gui {

class Session : public QObject {
  Q_OBJECT
 public:
  explicit Session(QObject* parent = nullptr);

  // Loading replaces the whole document; on error the document is unchanged and the
  // error (file:line:column, key, message) is returned.
  std::optional<io::ConfigError> load_file(const QString& path);
  std::optional<io::ConfigError> load_yaml(const std::string& text, const std::string& display_name);
  // A Megatron command line (or functional-test model_config.yaml) through the importer,
  // on the current hardware profile and GPU count.
  std::optional<io::ConfigError> import_megatron(const QString& path);
  // scenario() as a scenario file (io::scenario_to_yaml), written atomically.
  bool save(const QString& path, QString* error) const;

  const Scenario& base() const { return base_; }
  const plan::Layout& layout() const { return layout_; }
  const Scenario& scenario() const { return scenario_; }  // base with the layout applied
  const std::vector<Problem>& problems() const { return problems_; }  // of scenario()
  bool has_estimate() const { return problems_.empty() && has_estimate_; }
  const Estimate& estimate() const { return estimate_; }
  const std::string& hardware_ref() const { return hardware_ref_; }
  const QString& path() const { return path_; }

  // Edits; each re-validates and re-estimates at once.
  void set_layout(const plan::Layout& l);
  // A changed model, job, hardware or GPU count; the layout is kept unless `layout` is given.
  void set_base(const Scenario& base, const std::string& hardware_ref, const plan::Layout* layout = nullptr);
  // What validate_scenario says about the base with `l` applied (empty: valid).
  std::vector<Problem> problems_for(const plan::Layout& l) const;

 signals:
  void baseChanged();      // model, job, hardware, GPU count or a new document
  void layoutChanged();    // the layout (after baseChanged too)
  void estimateChanged();  // after every re-estimate, also when the layout became invalid

 private:
  void adopt(Scenario s, std::string hardware_ref, QString path);
  void recompute();

  Scenario base_;
  plan::Layout layout_;
  Scenario scenario_;
  std::vector<Problem> problems_;
  Estimate estimate_;
  bool has_estimate_ = false;
  std::string hardware_ref_ = "h200-sxm";
  QString path_;
};

// The hardware profiles next to the default profile's directory (hwprofiles/*.yaml): name
// (file stem) and path.
std::vector<std::pair<QString, QString>> hardware_profiles();
// The bundled scenarios (scenarios/*.yaml): name (file stem) and path.
std::vector<std::pair<QString, QString>> bundled_scenarios();

}  // namespace lcm::gui
