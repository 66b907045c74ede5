// Scenario panel: open / save scenario YAML, import a Megatron command line, pick the model,
// hardware profile and cluster size, edit the training knobs. Loader errors and layout
// problems are shown inline with the offending key.
#pragma once

#include <array>

#include <QWidget>

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
QT_END_NAMESPACE

namespace lcm::gui {

class Session;

class ScenarioPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ScenarioPanel(Session* session, QWidget* parent = nullptr);

  // File actions (also the menu's); errors go to the inline error line.
  bool open_file(const QString& path);
  bool import_file(const QString& path);
  bool save_file(const QString& path);
  void open_dialog();
  void save_dialog();
  void import_dialog();

  QString error_text() const;  // the inline error line ("" when none)

 private:
  void refresh();        // controls from the session
  void apply_knobs();    // controls -> session
  void pick_model(int index);
  void pick_hardware(int index);
  void show_error(const QString& html, const QString& plain);

  Session* session_;
  bool updating_ = false;
  QLabel* path_;
  QLabel* error_;
  QString error_plain_;
  QComboBox* model_;
  QComboBox* hardware_;
  QComboBox* gpus_;
  QComboBox* seq_;
  QSpinBox* gbs_;
  QComboBox* precision_;
  QComboBox* fp8_recipe_;  // enabled with precision fp8
  QSpinBox* experts_;
  QSpinBox* topk_;
  QDoubleSpinBox* capacity_;
  QDoubleSpinBox* skew_;  // model.moe_routing_skew, the Zipf exponent (0: balanced)
  QSpinBox* document_length_;  // training.document_length (0: one document per sequence)
  QSpinBox* lora_rank_;        // training.lora_rank; 0: peft none (every weight trains)
  // training.lora_target_modules, enabled with a rank: one box per LoraTarget bit, in
  // kLoraTargetBoxes' order (scenario_panel.cpp).
  std::array<QCheckBox*, 4> lora_targets_;
};

}  // namespace lcm::gui
