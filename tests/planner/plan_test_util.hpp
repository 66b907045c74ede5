// Helpers of the planner tests: bundled scenarios with overrides, the `lcm` binary, and
// small parsers for the CSV and Markdown renderings.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/planner/search/plan.hpp"
#include "../common/run_lcm.hpp"

namespace lcm::plantest {

// A bundled scenario with `key=value` overrides and `gpus` GPUs (0: its own).
inline Scenario scenario(const std::string& id, const std::vector<io::Override>& sets = {}, int gpus = 0) {
  io::LoadOptions lo;
  lo.overrides = sets;
  auto r = io::load_scenario(std::string(LCM_SOURCE_DIR) + "/scenarios/" + id + ".yaml", lo);
  if (!r) ADD_FAILURE() << r.error().str();
  Scenario s = r.value();
  if (gpus > 0) s.num_gpus = gpus;
  return s;
}

using CmdResult = test::LcmRun;
using test::slurp;

// Runs `lcm ARGS` from the source tree root; captures stdout and stderr (not a terminal).
inline CmdResult lcm(const std::string& args) { return test::run_lcm(args, "plan_test"); }

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// RFC 4180 fields of one line (our CSV has no embedded newlines); nullopt-like empty
// vector plus failure when quotes do not balance.
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  EXPECT_FALSE(quoted) << "unbalanced quotes: " << line;
  return out;
}

// Cells of a Markdown table row "| a | b \| c |" (escaped pipes stay in the cell).
inline std::vector<std::string> md_cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cur;
  bool started = false;
  for (size_t i = 0; i < row.size(); ++i) {
    const char c = row[i];
    if (c == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cur += '|';
      ++i;
    } else if (c == '|') {
      if (started) cells.push_back(cur);
      started = true;
      cur.clear();
    } else {
      cur += c;
    }
  }
  return cells;
}

// Every Markdown table in `text` renders: a header row, a separator row of ---, ---: cells
// with as many cells, and body rows with as many cells. Returns the number of tables.
inline int check_markdown_tables(const std::string& text) {
  const auto ls = lines(text);
  int tables = 0;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i].empty() || ls[i][0] != '|') continue;
    const size_t n = md_cells(ls[i]).size();
    EXPECT_GT(n, 0u);
    EXPECT_LT(i + 1, ls.size());
    if (i + 1 >= ls.size()) return tables;
    const auto sep = md_cells(ls[i + 1]);
    EXPECT_EQ(sep.size(), n) << ls[i + 1];
    for (const std::string& c : sep) EXPECT_TRUE(c == "---" || c == "---:") << "separator cell '" << c << "'";
    size_t j = i + 2;
    for (; j < ls.size() && !ls[j].empty() && ls[j][0] == '|'; ++j) EXPECT_EQ(md_cells(ls[j]).size(), n) << ls[j];
    ++tables;
    i = j;
  }
  return tables;
}

}  // namespace lcm::plantest
