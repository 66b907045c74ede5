// Table renderings (text, Markdown, CSV) and shared number formatting.
#include "lcm/planner/report/table.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace lcm::report {

namespace {

// A cell is numeric (right-aligned) when it is a plain number, optionally with a unit
// suffix of one word ("46.70 B", "1.5e+18", "-2", "12.5 %").
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  size_t i = 0;
  if (s[i] == '-' || s[i] == '+') ++i;
  bool digit = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') digit = true;
    else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && i > 0 && (s[i - 1] == 'e' || s[i - 1] == 'E'))) continue;
    else break;
  }
  if (!digit) return false;
  if (i == s.size()) return true;
  if (s[i] != ' ') return false;
  return s.find(' ', i + 1) == std::string::npos;  // one trailing unit word
}

std::vector<size_t> column_widths(const Table& t) {
  std::vector<size_t> w(t.header.size(), 0);
  for (size_t i = 0; i < t.header.size(); ++i) w[i] = t.header[i].size();
  for (const auto& r : t.rows) {
    assert(r.size() == t.header.size());
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  return w;
}

}  // namespace

std::string render_text(const Table& t) {
  const auto w = column_widths(t);
  std::string out;
  if (!t.title.empty()) out += t.title + "\n";
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    for (size_t i = 0; i < cells.size(); ++i) {
      const bool right = !header && t.align_numbers && looks_numeric(cells[i]);
      out += i ? "  " : "  ";
      out += right ? fmt::format("{:>{}}", cells[i], w[i]) : fmt::format("{:<{}}", cells[i], w[i]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  };
  line(t.header, true);
  std::string rule;
  for (size_t i = 0; i < w.size(); ++i) rule += "  " + std::string(w[i], '-');
  out += rule + "\n";
  for (const auto& r : t.rows) line(r, false);
  for (const auto& n : t.notes) out += "  " + n + "\n";
  return out;
}

std::string render_markdown(const Table& t) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '|') o += "\\|";
      else o += c;
    }
    return o;
  };
  std::string out;
  if (!t.title.empty()) out += "### " + t.title + "\n\n";
  out += "|";
  for (const auto& h : t.header) out += " " + esc(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < t.header.size(); ++i) {
    const bool numeric = t.align_numbers && !t.rows.empty() && looks_numeric(t.rows.front()[i]);
    out += numeric ? "---:|" : "---|";
  }
  out += "\n";
  for (const auto& r : t.rows) {
    out += "|";
    for (const auto& c : r) out += " " + esc(c) + " |";
    out += "\n";
  }
  if (!t.notes.empty()) {
    out += "\n";
    for (const auto& n : t.notes) out += n + "\n";
  }
  return out;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += "\"\"";
    else o += c;
  }
  return o + "\"";
}

std::string render_csv(const Table& t) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      out += csv_escape(cells[i]);
    }
    out += "\n";
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
  return out;
}

std::string render(const std::vector<Table>& tables, Format f) {
  assert(f != Format::kJson);
  std::string out;
  for (size_t i = 0; i < tables.size(); ++i) {
    if (f == Format::kCsv) {
      out += render_csv(tables[i]);  // callers emit a single table for CSV
    } else {
      if (i) out += "\n";
      out += f == Format::kMarkdown ? render_markdown(tables[i]) : render_text(tables[i]);
    }
  }
  return out;
}

std::string fmt_bytes_gib(double bytes) { return fmt::format("{:.2f}", bytes / (1024.0 * 1024.0 * 1024.0)); }

std::string fmt_count(double n) {
  const double a = std::fabs(n);
  if (a >= 1e12) return fmt::format("{:.3f} T", n / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  if (a >= 1e4) return fmt::format("{:.1f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string fmt_sci(double x) { return fmt::format("{:.4e}", x); }
std::string fmt_fixed(double x, int digits) { return fmt::format("{:.{}f}", x, digits); }

std::string fmt_duration(double seconds) {
  if (seconds < 60.0) return fmt::format("{:.3f} s", seconds);
  if (seconds < 3600.0) return fmt::format("{:.1f} min", seconds / 60.0);
  return fmt::format("{:.2f} h", seconds / 3600.0);
}

}  // namespace lcm::report
