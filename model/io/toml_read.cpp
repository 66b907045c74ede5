// The strict TOML-subset reader (toml_read.hpp).
#include "toml_read.hpp"

#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace lcm::io {

namespace {

struct LineReader {
  const std::string& s;
  size_t i = 0;
  std::string file;
  int line = 0;

  [[noreturn]] void fail(const std::string& message) const {
    throw ConfigError{file, line, static_cast<int>(i) + 1, "", message};
  }
  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  bool at_end_or_comment() {
    skip_ws();
    return i >= s.size() || s[i] == '#';
  }
  static bool bare(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }
  std::string key() {
    skip_ws();
    const size_t start = i;
    while (i < s.size() && bare(s[i])) ++i;
    if (i == start)
      fail(i < s.size() && (s[i] == '"' || s[i] == '\'') ? "quoted keys are not supported"
                                                         : "expected a bare key (letters, digits, _ and -)");
    return s.substr(start, i - start);
  }
  TomlValue value() {
    skip_ws();
    TomlValue v;
    v.line = line;
    if (i >= s.size()) fail("expected a value");
    const char c = s[i];
    if (c == '"') {
      if (s.compare(i, 3, "\"\"\"") == 0) fail("multi-line strings are not supported");
      ++i;
      for (;; ++i) {
        if (i >= s.size()) fail("unterminated string");
        if (s[i] == '"') break;
        if (s[i] == '\\') {
          if (++i >= s.size()) fail("unterminated string");
          const char e = s[i];
          if (e == '"' || e == '\\') v.str += e;
          else if (e == 'n') v.str += '\n';
          else if (e == 't') v.str += '\t';
          else fail(fmt::format("unsupported escape '\\{}'", e));
        } else {
          v.str += s[i];
        }
      }
      ++i;
      return v;
    }
    if (c == '\'') {
      if (s.compare(i, 3, "'''") == 0) fail("multi-line strings are not supported");
      const size_t end = s.find('\'', i + 1);
      if (end == std::string::npos) fail("unterminated string");
      v.str = s.substr(i + 1, end - i - 1);
      i = end + 1;
      return v;
    }
    if (c == '[') {
      v.kind = TomlValue::Kind::kArray;
      ++i;
      for (;;) {
        skip_ws();
        if (i >= s.size() || s[i] == '#') fail("arrays must close on the line they open ('[' ... ']')");
        if (s[i] == ']') break;
        v.items.push_back(value());
        if (v.items.back().kind == TomlValue::Kind::kArray) fail("nested arrays are not supported");
        skip_ws();
        if (i < s.size() && s[i] == ',') {
          ++i;
          continue;
        }
        skip_ws();
        if (i >= s.size() || s[i] != ']') fail("expected ',' or ']' in the array");
      }
      ++i;
      return v;
    }
    if (c == '{') fail("inline tables are not supported");
    const size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '#' && s[i] != ',' && s[i] != ']') ++i;
    const std::string t = s.substr(start, i - start);
    if (t == "true" || t == "false") {
      v.kind = TomlValue::Kind::kBool;
      v.b = t == "true";
      return v;
    }
    const char* b = t.data() + (t[0] == '+' ? 1 : 0);
    const char* e = t.data() + t.size();
    int64_t n = 0;
    if (auto [p, ec] = std::from_chars(b, e, n); ec == std::errc() && p == e) {
      v.kind = TomlValue::Kind::kInt;
      v.i = n;
      v.d = static_cast<double>(n);
      return v;
    }
    double d = 0;
    if (auto [p, ec] = std::from_chars(b, e, d);
        ec == std::errc() && p == e && std::isfinite(d) && t.find_first_of("0123456789") != std::string::npos) {
      v.kind = TomlValue::Kind::kFloat;
      v.d = d;
      return v;
    }
    fail(
        fmt::format("'{}' is not a value lcm reads (a \"string\", an integer, a float, true/false or a one-line "
                    "array)",
                    t));
  }
};

}  // namespace

Result<TomlDoc> parse_toml_subset(const std::string& text, const std::string& file) {
  TomlDoc doc;
  std::string table;
  std::set<std::string> headers;
  doc.tables[table];
  int line_no = 0;
  try {
    for (size_t pos = 0; pos <= text.size();) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      pos = end + 1;
      ++line_no;
      LineReader r{line, 0, file, line_no};
      if (r.at_end_or_comment()) {
        if (end == text.size()) break;
        continue;
      }
      if (line[r.i] == '[') {
        if (line.compare(r.i, 2, "[[") == 0) r.fail("arrays of tables ([[...]]) are not supported");
        ++r.i;
        std::string name = r.key();
        while (r.i < line.size() && line[r.i] == '.') {
          ++r.i;
          name += "." + r.key();
        }
        r.skip_ws();
        if (r.i >= line.size() || line[r.i] != ']') r.fail("expected ']' closing the table header");
        ++r.i;
        if (!r.at_end_or_comment()) r.fail("unexpected text after the table header");
        if (!headers.insert(name).second) r.fail(fmt::format("table [{}] is defined twice", name));
        table = name;
        doc.tables[table];
      } else {
        const std::string k = r.key();
        r.skip_ws();
        if (r.i < line.size() && line[r.i] == '.') r.fail("dotted keys are not supported; use a [table] header");
        if (r.i >= line.size() || line[r.i] != '=') r.fail(fmt::format("expected '=' after key '{}'", k));
        ++r.i;
        TomlValue v = r.value();
        if (!r.at_end_or_comment()) r.fail("unexpected text after the value");
        if (!doc.tables[table].emplace(k, std::move(v)).second)
          r.fail(fmt::format("key '{}' is defined twice in [{}]", k, table));
      }
      if (end == text.size()) break;
    }
  } catch (const ConfigError& e) {
    return e;
  }
  return doc;
}

}  // namespace lcm::io
