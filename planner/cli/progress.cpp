// Progress bar on stderr (see progress.hpp).
#include "progress.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <unistd.h>

namespace lcm::cli {

namespace {

std::string count(uint64_t n) {
  if (n >= 10'000'000) return fmt::format("{:.0f}M", static_cast<double>(n) / 1e6);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  if (n >= 10'000) return fmt::format("{:.0f}K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::ostream& out, std::string label, bool enabled)
    : out_(out), label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::line(const std::string& label, uint64_t done, uint64_t total, double elapsed_s) {
  constexpr int kCells = 30;
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const int filled = static_cast<int>(frac * kCells);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(kCells - filled), '-');
  return fmt::format("{} [{}] {:3.0f}%  {}/{}  {:.1f} s", label, bar, 100.0 * frac, count(done), count(total), elapsed_s);
}

void ProgressBar::update(uint64_t done, uint64_t total) {
  update(done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

void ProgressBar::update(uint64_t done, uint64_t total, double elapsed_s) {
  if (!enabled_ || elapsed_s < 1.0) return;
  if (drawn_ && elapsed_s - last_draw_ < 0.1 && done < total) return;
  const std::string text = line(label_, done, total, elapsed_s);
  out_ << '\r' << text;
  if (text.size() < width_) out_ << std::string(width_ - text.size(), ' ');
  out_.flush();
  width_ = std::max(width_, text.size());
  drawn_ = true;
  last_draw_ = elapsed_s;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  out_ << '\r' << std::string(width_, ' ') << '\r';
  out_.flush();
  drawn_ = false;
}

}  // namespace lcm::cli
