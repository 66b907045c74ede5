// A plain table of strings and its renderings: aligned terminal text, GitHub Markdown,
// and RFC 4180 CSV. Reports build Tables; the CLI picks the rendering.
#pragma once

#include <string>
#include <vector>

namespace lcm::report {

enum class Format { kTable, kMarkdown, kCsv, kJson };

struct Table {
  std::string title;                          // printed above text / Markdown renderings
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;             // printed below (text / Markdown only)
  bool align_numbers = true;                  // right-align numeric cells (text / Markdown)
};

std::string render_text(const Table& t);
std::string render_markdown(const Table& t);
std::string render_csv(const Table& t);
std::string render(const std::vector<Table>& tables, Format f);  // kJson not accepted here

// Number formatting shared by every report.
std::string fmt_bytes_gib(double bytes);     // "12.34"
std::string fmt_count(double n);             // "46.70 B", "187.1 M", "1024"
std::string fmt_sci(double x);               // "1.234e+15"
std::string fmt_fixed(double x, int digits);
std::string csv_escape(const std::string& s);
// Seconds for people: "12.345 s" below a minute, "3.2 min" below an hour, "2.41 h" above.
std::string fmt_duration(double seconds);

// The memory column every report shows next to a fits verdict: the number the verdict
// compares with HBM (Memory::peak_high_bytes, the top of the peak range), and its note.
inline constexpr const char* kNeedsHeader = "needs GiB";
inline constexpr const char* kNeedsNote =
    "needs GiB: the top of the worst stage's peak-memory band (peak incl. CUDA context, NCCL, fragmentation, times 1 + "
    "the memory model's 90th-percentile residual): fits when it is within HBM, tight when only the band's bottom (10th "
    "percentile, without the fragmentation the allocator releases under pressure) is, out of memory when neither";

}  // namespace lcm::report
