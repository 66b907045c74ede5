// ScenarioPanel.
#include "lcm/gui/scenario_panel.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "lcm/gui/session.hpp"
#include "lcm/model/io/enums.hpp"
#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::gui {

namespace {

QString seq_text(int64_t s) {
  if (s % (1024 * 1024) == 0) return QString("%1M").arg(s / (1024 * 1024));
  if (s % 1024 == 0) return QString("%1K").arg(s / 1024);
  return QString::number(s);
}

void select_data(QComboBox* c, const QVariant& v) {
  int i = c->findData(v);
  if (i < 0) {
    c->addItem(v.toString(), v);
    i = c->count() - 1;
  }
  c->setCurrentIndex(i);
}

QString html_escape(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

// The LoRA target boxes: the scenario's bit and the box's label (its object name is "lora_" and
// the label), in ScenarioPanel::lora_targets_' order.
struct LoraTargetBox {
  LoraTarget bit;
  const char* label;
};
constexpr std::array<LoraTargetBox, 4> kLoraTargetBoxes{
    {{kLoraQkv, "qkv"}, {kLoraProj, "proj"}, {kLoraFc1, "fc1"}, {kLoraFc2, "fc2"}}};

}  // namespace

ScenarioPanel::ScenarioPanel(Session* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      path_(new QLabel(this)),
      error_(new QLabel(this)),
      model_(new QComboBox(this)),
      hardware_(new QComboBox(this)),
      gpus_(new QComboBox(this)),
      seq_(new QComboBox(this)),
      gbs_(new QSpinBox(this)),
      precision_(new QComboBox(this)),
      fp8_recipe_(new QComboBox(this)),
      experts_(new QSpinBox(this)),
      topk_(new QSpinBox(this)),
      capacity_(new QDoubleSpinBox(this)),
      skew_(new QDoubleSpinBox(this)),
      document_length_(new QSpinBox(this)),
      lora_rank_(new QSpinBox(this)),
      lora_targets_{} {
  auto* box = new QGroupBox("Scenario", this);
  auto* open = new QPushButton("Open…", box);
  auto* save = new QPushButton("Save as…", box);
  auto* imp = new QPushButton("Import Megatron…", box);
  imp->setToolTip("A Megatron-LM command line (run script) or a functional-test model_config.yaml");
  connect(open, &QPushButton::clicked, this, &ScenarioPanel::open_dialog);
  connect(save, &QPushButton::clicked, this, &ScenarioPanel::save_dialog);
  connect(imp, &QPushButton::clicked, this, &ScenarioPanel::import_dialog);
  auto* buttons = new QHBoxLayout();
  buttons->addWidget(open);
  buttons->addWidget(save);
  buttons->addWidget(imp);
  path_->setWordWrap(true);
  path_->setStyleSheet("color: #555;");
  error_->setObjectName("scenario_error");
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::RichText);
  error_->setStyleSheet("color: #b00020; background: #fdecea; padding: 4px; border-radius: 3px;");
  error_->hide();

  model_->setObjectName("model");
  // One entry per model of the bundled scenarios, by the model's own name (model.name).
  for (const auto& [name, path] : bundled_scenarios()) {
    auto r = io::load_scenario(path.toStdString());
    if (!r) continue;
    const QString model = QString::fromStdString(r.value().model.name);
    if (model_->findText(model) < 0) model_->addItem(model, path);
  }
  model_->setToolTip("The scenario's model (model.name); pick another to take the architecture of a bundled "
                     "scenario (scenarios/*.yaml)");
  hardware_->setObjectName("hardware");
  for (const auto& [name, path] : hardware_profiles()) hardware_->addItem(name, name);
  gpus_->setObjectName("num_gpus");
  for (int g = 8; g <= 16384; g *= 2) gpus_->addItem(QString::number(g), g);
  seq_->setObjectName("seq_length");
  for (int64_t s = 4096; s <= 1024 * 1024; s *= 2) seq_->addItem(seq_text(s), QVariant::fromValue<qlonglong>(s));
  gbs_->setObjectName("global_batch_size");
  gbs_->setRange(1, 1 << 20);
  precision_->setObjectName("precision");
  for (Precision p : {Precision::kBf16, Precision::kFp8})
    precision_->addItem(QString::fromUtf8(to_string(p).data(), static_cast<int>(to_string(p).size())), static_cast<int>(p));
  fp8_recipe_->setObjectName("fp8_recipe");
  for (Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise})
    fp8_recipe_->addItem(QString::fromUtf8(to_string(r).data(), static_cast<int>(to_string(r).size())), static_cast<int>(r));
  fp8_recipe_->setToolTip("Megatron --fp8-recipe (training.fp8_recipe): the FP8 casts' traffic and, for blockwise, "
                          "the block-scaled GEMM term of the profile (refused where it has none)");
  experts_->setObjectName("num_experts");
  experts_->setRange(0, 4096);
  experts_->setSpecialValueText("dense (0)");
  topk_->setObjectName("moe_router_topk");
  topk_->setRange(1, 64);
  capacity_->setObjectName("moe_expert_capacity_factor");
  capacity_->setRange(0, 16);
  capacity_->setSingleStep(0.25);
  capacity_->setDecimals(3);
  capacity_->setSpecialValueText("dropless");
  skew_->setObjectName("moe_routing_skew");
  skew_->setRange(0, 4);
  skew_->setSingleStep(0.1);
  skew_->setDecimals(2);
  skew_->setSpecialValueText("balanced");
  skew_->setPrefix("zipf:");
  skew_->setToolTip("Routing skew the estimate assumes (model.moe_routing_skew): expert popularity ~ 1/i^S over a "
                    "random placement; the busiest EP rank sets each MoE layer's time and memory");

  document_length_->setObjectName("document_length");
  document_length_->setRange(0, 1 << 30);  // capped at seq_length in refresh()
  document_length_->setSingleStep(256);
  document_length_->setSpecialValueText("one per sequence");
  document_length_->setToolTip("Packed documents (training.document_length, SFT): attention runs within documents of "
                               "this many tokens, round(seq_length / document_length) per sequence; 0 = one "
                               "document per sequence");
  lora_rank_->setObjectName("lora_rank");
  lora_rank_->setRange(0, 1 << 16);
  lora_rank_->setSingleStep(8);
  lora_rank_->setSpecialValueText("off (all weights train)");
  lora_rank_->setToolTip("LoRA (training.peft: lora, training.lora_rank): the base model is frozen and runs forward "
                         "and input gradients only; adapters of this rank on the checked linears train. 0 = peft none");
  auto* targets = new QWidget(this);
  auto* targets_row = new QHBoxLayout(targets);
  targets_row->setContentsMargins(0, 0, 0, 0);
  for (size_t i = 0; i < kLoraTargetBoxes.size(); ++i) {
    const QString label = kLoraTargetBoxes[i].label;
    auto* box_ = new QCheckBox(label, targets);
    box_->setObjectName("lora_" + label);
    box_->setToolTip("training.lora_target_modules: linear_" + label +
                     " (fc1 / fc2 adapt dense MLPs, shared and routed experts)");
    targets_row->addWidget(box_);
    lora_targets_[i] = box_;
  }
  targets_row->addStretch(1);

  auto* form = new QFormLayout();
  form->addRow("model", model_);
  form->addRow("hardware profile", hardware_);
  form->addRow("GPUs", gpus_);
  form->addRow("seq_length (tokens)", seq_);
  form->addRow("global_batch_size", gbs_);
  form->addRow("precision", precision_);
  form->addRow("FP8 recipe", fp8_recipe_);
  form->addRow("num_experts", experts_);
  form->addRow("moe_router_topk", topk_);
  form->addRow("capacity factor", capacity_);
  form->addRow("routing skew", skew_);
  form->addRow("document length", document_length_);
  form->addRow("LoRA rank", lora_rank_);
  form->addRow("LoRA targets", targets);
  auto* inner = new QVBoxLayout(box);
  inner->addLayout(buttons);
  inner->addWidget(path_);
  inner->addWidget(error_);
  inner->addLayout(form);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(box);

  connect(model_, &QComboBox::activated, this, &ScenarioPanel::pick_model);
  connect(hardware_, &QComboBox::activated, this, &ScenarioPanel::pick_hardware);
  for (QComboBox* c : {gpus_, seq_, precision_, fp8_recipe_}) connect(c, &QComboBox::activated, this, [this] { apply_knobs(); });
  for (QSpinBox* s : {gbs_, experts_, topk_, document_length_, lora_rank_})
    connect(s, &QSpinBox::valueChanged, this, [this] { apply_knobs(); });
  for (QDoubleSpinBox* d : {capacity_, skew_}) connect(d, &QDoubleSpinBox::valueChanged, this, [this] { apply_knobs(); });
  for (QCheckBox* c : lora_targets_) connect(c, &QCheckBox::toggled, this, [this] { apply_knobs(); });
  connect(session_, &Session::baseChanged, this, &ScenarioPanel::refresh);
  connect(session_, &Session::estimateChanged, this, &ScenarioPanel::refresh);
  refresh();
}

QString ScenarioPanel::error_text() const { return error_plain_; }

void ScenarioPanel::show_error(const QString& html, const QString& plain) {
  error_plain_ = plain;
  error_->setText(html);
  error_->setVisible(!plain.isEmpty());
}

void ScenarioPanel::refresh() {
  if (updating_) return;
  updating_ = true;
  const Scenario& s = session_->base();
  path_->setText(session_->path().isEmpty() ? QString("%1 (not saved)").arg(QString::fromStdString(s.name))
                                            : session_->path());
  // The document's own model name, whatever its file is called; a model that is not among the
  // bundled ones gets an entry of its own (no file: picking it changes nothing).
  const QString own = QString::fromStdString(s.model.name);
  for (int i = model_->count() - 1; i >= 0; --i)
    if (model_->itemData(i).toString().isEmpty() && model_->itemText(i) != own) model_->removeItem(i);
  int mi = model_->findText(own);
  if (mi < 0 && !own.isEmpty()) {
    model_->addItem(own, QString());
    mi = model_->count() - 1;
  }
  if (mi >= 0) model_->setCurrentIndex(mi);
  // The scenario names its profile ("h200-sxm.calibrated") or gives a path ("../h200-sxm.yaml"):
  // the entry is the file name less a YAML suffix only (completeBaseName would cut
  // ".calibrated" off a name and show the uncalibrated profile).
  QString profile = QFileInfo(QString::fromStdString(session_->hardware_ref())).fileName();
  for (const QString& suffix : {QStringLiteral(".yaml"), QStringLiteral(".yml")})
    if (profile.endsWith(suffix)) profile.chop(suffix.size());
  select_data(hardware_, profile);
  select_data(gpus_, s.num_gpus);
  select_data(seq_, QVariant::fromValue<qlonglong>(s.training.seq_length));
  gbs_->setValue(s.training.global_batch_size);
  select_data(precision_, static_cast<int>(s.training.precision));
  select_data(fp8_recipe_, static_cast<int>(s.training.fp8_recipe));
  fp8_recipe_->setEnabled(s.training.precision == Precision::kFp8);
  experts_->setValue(s.model.num_experts);
  topk_->setValue(s.model.moe_router_topk);
  topk_->setEnabled(has_moe(s.model));
  capacity_->setValue(std::max(0.0, s.model.moe_expert_capacity_factor));
  capacity_->setEnabled(has_moe(s.model));
  skew_->setValue(s.model.moe_routing_skew);
  skew_->setEnabled(has_moe(s.model));
  document_length_->setMaximum(static_cast<int>(std::min<int64_t>(s.training.seq_length, 1 << 30)));
  document_length_->setValue(static_cast<int>(std::min<int64_t>(s.training.document_length, 1 << 30)));
  const bool lora = s.training.peft == Peft::kLora;
  lora_rank_->setValue(lora ? static_cast<int>(s.training.lora_rank) : 0);
  for (size_t i = 0; i < kLoraTargetBoxes.size(); ++i) {
    lora_targets_[i]->setChecked((s.training.lora_targets & kLoraTargetBoxes[i].bit) != 0);
    lora_targets_[i]->setEnabled(lora);
  }
  // Layout problems of the current document (a knob change can invalidate the layout).
  const auto& problems = session_->problems();
  if (!problems.empty()) {
    QString html = "<b>Invalid layout for these settings:</b><ul style='margin:0'>";
    QString plain;
    for (const Problem& p : problems) {
      html += QString("<li><b>%1</b>: %2</li>").arg(html_escape(p.key), html_escape(p.message));
      plain += QString::fromStdString(p.key + ": " + p.message + "\n");
    }
    show_error(html + "</ul>", plain.trimmed());
  } else if (error_plain_.startsWith("Invalid") || !problems.empty()) {
    show_error({}, {});
  }
  updating_ = false;
}

void ScenarioPanel::apply_knobs() {
  if (updating_) return;
  Scenario s = session_->base();
  s.num_gpus = gpus_->currentData().toInt();
  s.training.seq_length = seq_->currentData().toLongLong();
  s.training.global_batch_size = gbs_->value();
  s.training.precision = static_cast<Precision>(precision_->currentData().toInt());
  // A recipe applies to FP8 training only (validate_scenario): BF16 keeps the default.
  s.training.fp8_recipe = s.training.precision == Precision::kFp8 ? static_cast<Fp8Recipe>(fp8_recipe_->currentData().toInt())
                                                                  : Fp8Recipe::kDelayed;
  s.model.num_experts = experts_->value();
  s.model.moe_router_topk = topk_->value();
  s.model.moe_expert_capacity_factor = capacity_->value();
  s.model.moe_routing_skew = has_moe(s.model) ? skew_->value() : 0.0;
  s.training.document_length = document_length_->value();
  const int rank = lora_rank_->value();
  s.training.peft = rank > 0 ? Peft::kLora : Peft::kNone;
  s.training.lora_rank = rank;
  uint32_t targets = 0;
  for (size_t i = 0; i < kLoraTargetBoxes.size(); ++i)
    targets |= lora_targets_[i]->isChecked() ? kLoraTargetBoxes[i].bit : 0u;
  if (rank > 0 && targets == 0) {
    // The loader's rule (training.lora_target_modules): at least one target.
    const QString key = "training.lora_target_modules", what = "expected at least one LoRA target (qkv, proj, fc1, fc2)";
    show_error(QString("<b>%1</b>: %2").arg(key, what), key + ": " + what);
    return;
  }
  // peft none keeps the default target set (what the scenario file leaves out).
  s.training.lora_targets = rank > 0 ? targets : kLoraAllTargets;
  show_error({}, {});
  session_->set_base(s, session_->hardware_ref());
}

void ScenarioPanel::pick_model(int index) {
  const QString path = model_->itemData(index).toString();
  if (path.isEmpty()) return;  // the document's own model
  auto r = io::load_scenario(path.toStdString());
  if (!r) {
    const io::ConfigError& e = r.error();
    show_error(QString("<b>%1</b>: %2").arg(html_escape(e.key), html_escape(e.str())), QString::fromStdString(e.str()));
    return;
  }
  Scenario s = session_->base();
  s.model = r.value().model;
  // Keep the layout when it still fits the new model; otherwise take the scenario's own.
  Scenario probe = plan::apply_layout(s, session_->layout());
  const plan::Layout own = plan::layout_of(r.value());
  show_error({}, {});
  session_->set_base(s, session_->hardware_ref(), validate_scenario(probe).empty() ? nullptr : &own);
}

void ScenarioPanel::pick_hardware(int index) {
  const QString name = hardware_->itemData(index).toString();
  auto path = io::find_hardware_profile(name.toStdString(), {});
  auto hw = path ? io::load_hardware_profile(path.value()) : io::Result<HardwareSpec>(path.error());
  if (!hw) {
    show_error(QString("<b>%1</b>: %2").arg(html_escape(hw.error().key), html_escape(hw.error().str())),
               QString::fromStdString(hw.error().str()));
    return;
  }
  Scenario s = session_->base();
  s.hardware = hw.value();
  show_error({}, {});
  session_->set_base(s, name.toStdString());
}

bool ScenarioPanel::open_file(const QString& path) {
  const auto err = session_->load_file(path);
  if (err) {
    show_error(QString("Cannot load %1<br><b>%2</b>: %3")
                   .arg(QString::fromStdString(err->file).toHtmlEscaped(), html_escape(err->key.empty() ? "(file)" : err->key),
                        html_escape(err->str())),
               QString::fromStdString(err->str()));
    return false;
  }
  show_error({}, {});
  return true;
}

bool ScenarioPanel::import_file(const QString& path) {
  const auto err = session_->import_megatron(path);
  if (err) {
    show_error(QString("Cannot import %1<br><b>%2</b>: %3")
                   .arg(path.toHtmlEscaped(), html_escape(err->key.empty() ? "(command line)" : err->key),
                        html_escape(err->str())),
               QString::fromStdString(err->str()));
    return false;
  }
  show_error({}, {});
  return true;
}

bool ScenarioPanel::save_file(const QString& path) {
  QString err;
  if (!session_->save(path, &err)) {
    show_error(err.toHtmlEscaped(), err);
    return false;
  }
  return true;
}

void ScenarioPanel::open_dialog() {
  const QString p = QFileDialog::getOpenFileName(this, "Open scenario", QString(), "Scenario YAML (*.yaml *.yml);;All files (*)");
  if (!p.isEmpty()) open_file(p);
}

void ScenarioPanel::save_dialog() {
  const QString p = QFileDialog::getSaveFileName(this, "Save scenario", QString(), "Scenario YAML (*.yaml)");
  if (!p.isEmpty()) save_file(p);
}

void ScenarioPanel::import_dialog() {
  const QString p = QFileDialog::getOpenFileName(this, "Import Megatron command line or model_config.yaml");
  if (!p.isEmpty()) import_file(p);
}

}  // namespace lcm::gui
