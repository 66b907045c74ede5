// Scaling tab (FLOPs split and memory per GPU versus sequence length, 4K..1M, with the
// attention-vs-MLP crossover) and capacity tab (dropped tokens versus capacity factor for
// a routing skew or measured per-expert loads). Both rebuild when shown after a change.
#pragma once

#include <vector>

#include <QWidget>

QT_BEGIN_NAMESPACE
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace lcm::gui {

class ChartPanel;
class Session;

class ScalingTab : public QWidget {
  Q_OBJECT
 public:
  explicit ScalingTab(Session* session, QWidget* parent = nullptr);
  ChartPanel* flops_panel() const { return flops_; }
  ChartPanel* memory_panel() const { return memory_; }
  void refresh();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  Session* session_;
  ChartPanel* flops_;
  ChartPanel* memory_;
  QLabel* note_;
  bool dirty_ = true;
};

class CapacityTab : public QWidget {
  Q_OBJECT
 public:
  explicit CapacityTab(Session* session, QWidget* parent = nullptr);
  ChartPanel* panel() const { return panel_; }
  QTableWidget* table() const { return table_; }
  // Measured per-expert loads from a file (docs/moe-routing.md); false with the reason shown.
  bool load_loads(const QString& path);
  // Zipf-skewed routing with exponent s (the docs' screenshot shows s = 1.2).
  void set_zipf(double s);
  void refresh();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  Session* session_;
  QComboBox* routing_;
  QDoubleSpinBox* zipf_;
  QComboBox* method_;
  QLabel* note_;
  ChartPanel* panel_;
  QTableWidget* table_;
  std::vector<double> loads_;
  QString loads_path_;
  bool dirty_ = true;
};

}  // namespace lcm::gui
