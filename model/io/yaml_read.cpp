// Typed readers over yaml-cpp nodes, Megatron list patterns, closest-name suggestions.
#include "yaml_read.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

namespace lcm::io {

Loc loc_of(const YAML::Mark& mark, const std::string& file) {
  Loc l;
  l.file = file;
  if (mark.line >= 0) l.line = mark.line + 1;
  if (mark.column >= 0) l.column = mark.column + 1;
  return l;
}

ConfigError error_at(const Loc& loc, std::string key, std::string message) {
  return ConfigError{loc.file, loc.line, loc.column, std::move(key), std::move(message)};
}

namespace {

// Where each document the parser reports starts, and where its first node is (no nodes are built).
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks, first_node;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { node(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& m) {
    if (first_node.size() < marks.size()) first_node.push_back(m);
  }
};

}  // namespace

Result<YAML::Node> parse_yaml(const std::string& text, const std::string& file) {
  try {
    // The documents are counted first, at most two: yaml-cpp 0.7's LoadAll never returns on a
    // ',' outside a flow collection (the parser yields an empty document at that same place
    // again and again without consuming it; fuzz finding 8: 2 GB of documents from 5 KB of a
    // profile), and YAML::Load alone would read the first document and drop the rest.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {}
    if (starts.marks.size() == 2) {
      const YAML::Mark& second = starts.marks[1];
      if (second.pos == starts.marks[0].pos) {
        const char c = second.pos >= 0 && static_cast<size_t>(second.pos) < text.size() ? text[second.pos] : '?';
        return error_at(loc_of(second, file), "", fmt::format("malformed YAML: unexpected '{}'", c));
      }
      const Loc at = loc_of(starts.first_node.size() == 2 ? starts.first_node[1] : second, file);
      return error_at(at, "", fmt::format("a second YAML document ('---' before line {}); the file must hold exactly one",
                                          at.line > 0 ? at.line : 1));
    }
    if (starts.marks.empty()) return YAML::Node();
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    return error_at(loc_of(e.mark, file), "", fmt::format("YAML nesting too deep (more than {} levels)", e.depth()));
  } catch (const YAML::ParserException& e) {
    return error_at(loc_of(e.mark, file), "", "malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return error_at(loc_of(e.mark, file), "", "malformed YAML: " + e.msg);
  } catch (const std::exception& e) {
    return error_at(Loc{file, 0, 0}, "", std::string("cannot read YAML: ") + e.what());
  } catch (...) {
    return error_at(Loc{file, 0, 0}, "", "cannot read YAML: unknown error");
  }
}

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing (null)";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.Tag() == "!") return fmt::format("the quoted string \"{}\"", n.Scalar());
  return fmt::format("'{}'", n.Scalar());
}

namespace {

bool is_plain_scalar(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!"; }

std::optional<int64_t> to_int(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> to_double(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string quoted_hint(const YAML::Node& n) {
  return n.IsScalar() && n.Tag() == "!" ? " (remove the quotes)" : "";
}

std::string bound_text(int64_t min, int64_t max) {
  if (max == INT64_MAX) return min == INT64_MIN ? "" : fmt::format(" >= {}", min);
  return fmt::format(" in [{}, {}]", min, max);
}

}  // namespace

Read<int64_t> read_int(const YAML::Node& n, int64_t min, int64_t max) {
  const auto v = n.IsScalar() ? to_int(n.Scalar()) : std::nullopt;
  if (!v || !is_plain_scalar(n))
    return Bad{fmt::format("expected an integer{}, got {}{}", bound_text(min, max), describe(n), quoted_hint(n))};
  if (*v < min || *v > max) return Bad{fmt::format("expected an integer{}, got {}", bound_text(min, max), *v)};
  return *v;
}

Read<int64_t> read_capped_int(const YAML::Node& n, int64_t min, int64_t cap) {
  auto r = read_int(n, min, cap);
  if (!failed(r)) return r;
  // Above the cap (or beyond int64): name the cap as such.
  const std::string text = n.IsScalar() && is_plain_scalar(n) ? n.Scalar() : std::string();
  const size_t digits = text.find_first_not_of('+') == std::string::npos ? 0 : text.find_first_not_of('+');
  if (text.empty() || digits > 1 || text.find_first_not_of("0123456789", digits) != std::string::npos) return r;
  const auto v = to_int(text);
  if (v && *v <= cap) return r;
  return Bad{fmt::format("expected an integer{}, got {}; {} is lcm's cap for this key (docs/scenario-format.md#caps)",
                         bound_text(min, cap), text, cap)};
}

Read<double> read_double(const YAML::Node& n, double min, bool min_exclusive) {
  const auto v = n.IsScalar() ? to_double(n.Scalar()) : std::nullopt;
  const std::string bound = fmt::format(" {} {}", min_exclusive ? ">" : ">=", min);
  if (!v || !is_plain_scalar(n)) return Bad{fmt::format("expected a number{}, got {}{}", bound, describe(n), quoted_hint(n))};
  if (min_exclusive ? !(*v > min) : !(*v >= min)) return Bad{fmt::format("expected a number{}, got {}", bound, n.Scalar())};
  return *v;
}

Read<bool> read_bool(const YAML::Node& n) {
  if (is_plain_scalar(n)) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return Bad{fmt::format("expected true or false, got {}", describe(n))};
}

Read<std::string> read_string(const YAML::Node& n) {
  if (!n.IsScalar()) return Bad{fmt::format("expected a string, got {}", describe(n))};
  // One line of text: a control character (a carriage return or NUL from `--set`, say) would not
  // survive the scenario writer's round trip (found by set_fuzz, docs/reliability.md finding 9).
  const std::string& s = n.Scalar();
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      return Bad{fmt::format("expected one line of text, got a control character (byte 0x{:02x}) at position {}", c, i + 1)};
  }
  return s;
}

Read<int64_t> parse_size_with_suffix(std::string_view text, int64_t min, int64_t cap) {
  std::string_view s = text;
  int64_t mult = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) mult = 1024, s.remove_suffix(1);
  else if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) mult = 1024 * 1024, s.remove_suffix(1);
  const auto v = to_int(s);
  if (!v) return Bad{fmt::format("expected an integer or an integer with suffix K (x1024) or M (x1048576), e.g. 128K, got '{}'", text)};
  if (*v < std::numeric_limits<int64_t>::min() / mult)  // *v * mult would overflow
    return Bad{fmt::format("expected a size >= {}, got '{}'", min, text)};
  if (*v > cap / mult || *v * mult > cap)
    return Bad{fmt::format("expected a size in [{}, {}], got '{}'; {} is lcm's cap (docs/scenario-format.md#caps)", min,
                           cap, text, cap)};
  const int64_t out = *v * mult;
  if (out < min) return Bad{fmt::format("expected a size >= {}, got {}", min, out)};
  return out;
}

Read<int64_t> read_size_with_suffix(const YAML::Node& n, int64_t min, int64_t cap) {
  if (!n.IsScalar())
    return Bad{fmt::format("expected an integer or a size like 128K, got {}", describe(n))};
  return parse_size_with_suffix(n.Scalar(), min, cap);
}

// ---- Megatron list patterns -----------------------------------------------------------
namespace {

struct PatternValue {
  bool is_list = false;
  int64_t number = 0;
  std::vector<int> list;
};

class PatternParser {
 public:
  explicit PatternParser(std::string_view s)
      : s_(s), shown_(s.size() <= 60 ? std::string(s) : std::string(s.substr(0, 40)) + "..." + std::string(s.substr(s.size() - 10))) {}

  Read<std::vector<int>> run() {
    if (s_.find_first_not_of("0123456789,[]()+* ") != std::string_view::npos)
      return Bad{fmt::format("invalid pattern '{}': only digits and , [ ] ( ) + * are allowed", shown_)};
    auto v = expr();
    if (!err_.empty()) return Bad{err_};
    skip();
    if (pos_ != s_.size()) return Bad{fmt::format("invalid pattern '{}': unexpected '{}' at offset {}", shown_, s_[pos_], pos_)};
    if (!v.is_list) return Bad{fmt::format("invalid pattern '{}': expected a list expression", shown_)};
    return v.list;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void fail(const std::string& what) {
    if (err_.empty()) err_ = fmt::format("invalid pattern '{}': {}", shown_, what);
  }
  PatternValue expr() {
    PatternValue v = term();
    while (err_.empty() && eat('+')) {
      PatternValue r = term();
      if (v.is_list != r.is_list) fail("cannot add a list and a number");
      else if (v.is_list && v.list.size() + r.list.size() > kMaxListPatternLength) fail(too_long());
      else if (v.is_list) v.list.insert(v.list.end(), r.list.begin(), r.list.end());
      else if (v.number + r.number > kMaxPatternNumber) fail("number too large");
      else v.number += r.number;
    }
    return v;
  }
  PatternValue term() {
    PatternValue v = factor();
    while (err_.empty() && eat('*')) {
      PatternValue r = factor();
      if (v.is_list && r.is_list) {
        fail("cannot multiply two lists");
      } else if (v.is_list || r.is_list) {
        PatternValue& l = v.is_list ? v : r;
        const int64_t times = v.is_list ? r.number : v.number;
        if (times < 0 || times * static_cast<int64_t>(l.list.size()) > static_cast<int64_t>(kMaxListPatternLength)) {
          fail(too_long());
          break;
        }
        PatternValue out;
        out.is_list = true;
        for (int64_t i = 0; i < times; ++i) out.list.insert(out.list.end(), l.list.begin(), l.list.end());
        v = std::move(out);
      } else if (r.number != 0 && v.number > kMaxPatternNumber / r.number) {
        fail("number too large");
      } else {
        v.number *= r.number;
      }
    }
    return v;
  }
  PatternValue factor() {
    PatternValue v;
    skip();
    // Each '(' or '[' recurses once; bounded so that a hostile pattern cannot exhaust the stack.
    const bool opens = pos_ < s_.size() && (s_[pos_] == '(' || s_[pos_] == '[');
    if (opens && ++depth_ > kMaxListPatternDepth) {
      fail(fmt::format("nested deeper than {} brackets", kMaxListPatternDepth));
      return v;
    }
    if (eat('(')) {
      v = expr();
      if (!eat(')')) fail("missing ')'");
      --depth_;
      return v;
    }
    if (eat('[')) {
      v.is_list = true;
      if (eat(']')) return --depth_, v;
      do {
        PatternValue e = expr();
        if (e.is_list) fail("nested lists are not allowed");
        else if (v.list.size() >= kMaxListPatternLength) fail(too_long());
        else v.list.push_back(static_cast<int>(e.number));
      } while (err_.empty() && eat(','));
      if (!eat(']')) fail("missing ']'");
      --depth_;
      return v;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (start == pos_ || pos_ - start > 9) {
      fail(start == pos_ ? "expected a number, '[' or '('" : "number too large");
      return v;
    }
    v.number = std::stoll(std::string(s_.substr(start, pos_ - start)));
    return v;
  }

  static std::string too_long() {
    return fmt::format("the list would have more than {} elements", kMaxListPatternLength);
  }
  static constexpr int64_t kMaxPatternNumber = 999'999'999;

  std::string_view s_;
  std::string shown_;  // s_ for messages, shortened when long
  size_t pos_ = 0;
  int depth_ = 0;
  std::string err_;
};

}  // namespace

Read<std::vector<int>> eval_list_pattern(std::string_view text) { return PatternParser(text).run(); }

std::string list_pattern_string(const std::vector<uint8_t>& pattern) {
  std::string out = "(";
  size_t i = 0;
  while (i < pattern.size()) {
    size_t j = i;
    while (j < pattern.size() && pattern[j] == pattern[i]) ++j;
    if (i) out += '+';
    out += fmt::format("[{}]*{}", static_cast<int>(pattern[i]), j - i);
    i = j;
  }
  return out + ")";
}

// ---- suggestions ----------------------------------------------------------------------
namespace {

// Optimal string alignment distance (an adjacent transposition counts one edit), or cutoff + 1
// when it is above `cutoff`. Only the diagonal band |i - j| <= cutoff is computed (Ukkonen): an
// alignment of cost <= cutoff never leaves it, and every cell outside it counts as cutoff + 1.
// The computation also stops once two consecutive rows are above the cutoff everywhere (every
// later entry derives from one of them). `rows` is scratch kept across calls: three rows, no
// allocation per candidate.
size_t edit_distance(std::string_view a, std::string_view b, size_t cutoff, std::vector<size_t>& rows) {
  const size_t n = a.size(), m = b.size(), w = m + 1, out = cutoff + 1;
  if ((n > m ? n - m : m - n) > cutoff) return out;
  rows.assign(3 * w, out);
  size_t* before = rows.data();  // row i - 2
  size_t* prev = before + w;  // row i - 1
  size_t* cur = prev + w;  // row i
  for (size_t j = 0; j <= std::min(m, cutoff); ++j) prev[j] = j;
  size_t prev_min = 0;
  for (size_t i = 1; i <= n; ++i) {
    const size_t lo = i > cutoff ? i - cutoff : 1, hi = std::min(m, i + cutoff);
    cur[lo - 1] = lo == 1 ? i : out;  // column 0, or the cell left of the band
    if (hi < m) cur[hi + 1] = out;  // the next row reads one cell past this band
    size_t row_min = cur[lo - 1];
    for (size_t j = lo; j <= hi; ++j) {
      size_t d = std::min(std::min(prev[j], cur[j - 1]) + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d = std::min(d, before[j - 2] + 1);
      cur[j] = std::min(d, out);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > cutoff && prev_min > cutoff) return out;
    prev_min = row_min;
    std::swap(before, prev);  // rotate: before <- prev <- cur <- (old before, overwritten next)
    std::swap(prev, cur);
  }
  return std::min(prev[m], out);
}

}  // namespace

// The first candidate at the smallest distance, if that is at most a third of the word (at
// least 2). A candidate is examined only against the best so far: its distance must be
// below the best one's, so the length difference or the letter counts alone rule most out,
// and the distance computation keeps to the band that can still beat it (a long unknown word
// or flag, e.g. from a garbage run.sh, stays cheap: fuzz finding 3).
std::string closest(std::string_view word, std::span<const std::string> candidates) {
  size_t cutoff = std::max<size_t>(2, word.size() / 3);  // largest distance still worth taking
  std::string best;
  std::vector<size_t> rows;
  // The word's letter counts. A candidate's letters not matched by the word's, and the word's
  // not matched by the candidate's, are each at most the distance (an edit adds at most one to
  // either; a transposition none): the larger of the two rules a candidate out without the table.
  std::array<int, 256> count{};
  for (const char ch : word) ++count[static_cast<unsigned char>(ch)];
  for (const std::string& c : candidates) {
    if (std::max(word.size(), c.size()) - std::min(word.size(), c.size()) > cutoff) continue;
    size_t shared = 0;
    for (const char ch : c) shared += count[static_cast<unsigned char>(ch)]-- > 0;
    for (const char ch : c) ++count[static_cast<unsigned char>(ch)];
    if (std::max(c.size(), word.size()) - shared > cutoff) continue;
    const size_t d = edit_distance(word, c, cutoff, rows);
    if (d > cutoff) continue;
    best = c;
    if (d == 0) break;
    cutoff = d - 1;  // a later candidate must be strictly closer (ties keep the first)
  }
  return best;
}

std::string unknown_message(std::string_view what, std::string_view word, std::span<const std::string> candidates) {
  std::string msg = fmt::format("unknown {} '{}'", what, word);
  const std::string c = closest(word, candidates);
  if (!c.empty()) msg += fmt::format("; did you mean '{}'?", c);
  return msg;
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace lcm::io
