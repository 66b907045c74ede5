// Table renderings: Markdown structure, CSV quoting, text alignment.
#include <gtest/gtest.h>

#include "lcm/planner/report/table.hpp"

namespace lcm::report {
namespace {

Table sample() {
  Table t;
  t.title = "T";
  t.header = {"name", "value"};
  t.rows = {{"a|b", "1.5"}, {"quote\"d, comma", "-2"}};
  t.notes = {"note"};
  return t;
}

TEST(Report, CsvQuotesPerRfc4180) {
  EXPECT_EQ(render_csv(sample()), "name,value\na|b,1.5\n\"quote\"\"d, comma\",-2\n");
}

TEST(Report, MarkdownEscapesPipesAndAlignsNumbers) {
  const std::string md = render_markdown(sample());
  EXPECT_EQ(md, "### T\n\n| name | value |\n|---|---:|\n| a\\|b | 1.5 |\n| quote\"d, comma | -2 |\n\nnote\n");
}

TEST(Report, TextRightAlignsNumbers) {
  const std::string txt = render_text(sample());
  EXPECT_NE(txt.find("  a|b               1.5\n"), std::string::npos) << txt;
  EXPECT_NE(txt.find("  quote\"d, comma     -2\n"), std::string::npos) << txt;
}

TEST(Report, NumberFormats) {
  EXPECT_EQ(fmt_bytes_gib(1024.0 * 1024 * 1024 * 1.5), "1.50");
  EXPECT_EQ(fmt_count(46.70e9), "46.70 B");
  EXPECT_EQ(fmt_count(187.1e6), "187.1 M");
  EXPECT_EQ(fmt_count(512), "512");
}

}  // namespace
}  // namespace lcm::report
