// A one-line progress bar on stderr for searches that take a while: drawn only when
// enabled (stderr is a terminal and not --quiet) and only once the work has run for a
// second, redrawn at most every 100 ms, erased when done.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace lcm::cli {

// True when stderr is a terminal.
bool stderr_is_terminal();

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, std::string label, bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Reports `done` of `total` units; `elapsed_s` since the work began (default: since
  // construction). Draws nothing before one second.
  void update(uint64_t done, uint64_t total);
  void update(uint64_t done, uint64_t total, double elapsed_s);
  // Erases the bar (if drawn).
  void finish();
  bool drawn() const { return drawn_; }

  // The bar's text for a state, e.g. "planning [#####-----]  50%  1.2M/2.4M  1.3 s".
  static std::string line(const std::string& label, uint64_t done, uint64_t total, double elapsed_s);

 private:
  std::ostream& out_;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  size_t width_ = 0;
  double last_draw_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lcm::cli
