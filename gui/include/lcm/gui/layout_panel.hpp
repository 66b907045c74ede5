// Layout panel: the planner's layout knobs (parallel degrees, rank order, micro-batch,
// recompute, distributed optimizer / ZeRO, CP communication, dispatcher). Each list offers
// only the values that give a valid layout with the other knobs as they are
// (validate_scenario); the others are greyed out with the rule they break as tooltip.
// Every change goes to the session, which re-estimates at once.
#pragma once

#include <vector>

#include <QWidget>

#include "lcm/planner/search/plan.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
QT_END_NAMESPACE

namespace lcm::gui {

class Session;

class LayoutPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LayoutPanel(Session* session, QWidget* parent = nullptr);

  // The knobs, in display order.
  enum Knob { kTp, kCp, kPp, kVl, kEp, kEtp, kMbs, kOrder, kRecompute, kSharding, kCpComm, kDispatcher, kNumKnobs };
  QComboBox* combo(Knob k) const { return combos_[static_cast<size_t>(k)]; }
  // Picks `value` for a knob as a user would (false when it is not offered or disabled).
  bool choose(Knob k, int value);

 private:
  void refresh();
  void changed(Knob k);

  Session* session_;
  bool updating_ = false;
  std::vector<QComboBox*> combos_;
  QLabel* derived_;
};

}  // namespace lcm::gui
