// Megatron's --pipeline-model-parallel-layout (pipeline_layout.hpp): expansion as Megatron-Core's
// PipelineParallelLayerLayout.parse_str_to_list (megatron/core/transformer/
// pipeline_parallel_layer_layout.py): commas removed, then re.sub of r'\(([^)]+)\)\*(\d+)'
// and then of r'(.)\*(\d+)' (each non-overlapping, left to right), then split on '|'.
#include "lcm/model/pipeline_layout.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace lcm {

namespace {

// Expanded layouts longer than this are refused (a typo like "t*99999999" would otherwise
// allocate gigabytes); Megatron's longest real layouts are a few hundred characters.
constexpr size_t kMaxExpandedChars = 1 << 20;

// Reads the digits at text[i...]; false when there are none or the count is absurd.
bool read_count(std::string_view text, size_t& i, size_t& count) {
  const size_t start = i;
  count = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    count = count * 10 + static_cast<size_t>(text[i] - '0');
    if (count > kMaxExpandedChars) return false;
    ++i;
  }
  return i > start;
}

// One re.sub pass. group: the "(...)*n" pattern; otherwise "x*n".
bool unroll(std::string_view text, bool group, std::string& out, std::string& error) {
  out.clear();
  size_t i = 0;
  while (i < text.size()) {
    size_t body_begin = 0, body_end = 0, after = 0;
    bool match = false;
    if (group && text[i] == '(') {
      const size_t close = text.find(')', i + 1);
      if (close != std::string_view::npos && close > i + 1 && close + 2 < text.size() && text[close + 1] == '*' &&
          std::isdigit(static_cast<unsigned char>(text[close + 2]))) {
        body_begin = i + 1, body_end = close, after = close + 2, match = true;
      }
    } else if (!group && i + 2 < text.size() && text[i + 1] == '*' &&
               std::isdigit(static_cast<unsigned char>(text[i + 2])) && text[i] != '\n') {
      body_begin = i, body_end = i + 1, after = i + 2, match = true;
    }
    if (!match) {
      out += text[i++];
      continue;
    }
    size_t count = 0;
    if (!read_count(text, after, count) || (body_end - body_begin) * count > kMaxExpandedChars) {
      error = "a repetition count is too large";
      return false;
    }
    for (size_t k = 0; k < count; ++k) out.append(text.substr(body_begin, body_end - body_begin));
    if (out.size() > kMaxExpandedChars) {
      error = "the expanded layout is too long";
      return false;
    }
    i = after;
  }
  return true;
}

}  // namespace

ExpandedPipelineLayout expand_pipeline_layout(std::string_view text) {
  ExpandedPipelineLayout r;
  std::string s(text);
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  std::string a, b;
  if (!unroll(s, true, a, r.error) || !unroll(a, false, b, r.error)) return r;
  r.stages.emplace_back();
  for (char c : b) {
    if (c == '|') {
      r.stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      r.stages.back() += c;
    } else {
      r.error = c == ' ' ? std::string("a space is not a layer character (known: E, t, m, L, |)")
                         : fmt::format("'{}' is not a layer character (known: E, t, m, L, |)", c);
      r.stages.clear();
      return r;
    }
  }
  return r;
}

std::string pipeline_layout_text(const std::vector<std::string>& stages) {
  // A stage of n equal characters is written "x*n" (n > 2); a run of k > 1 equal stages
  // "(s|)*k" (its separators inside), except the last stage of the layout, written plainly.
  auto stage_text = [](const std::string& st) {
    if (st.size() > 2 && std::all_of(st.begin(), st.end(), [&](char c) { return c == st[0]; }))
      return fmt::format("{}*{}", st[0], st.size());
    return st;
  };
  std::string out;
  const size_t n = stages.size();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n - 1 && stages[j] == stages[i]) ++j;  // the last stage is never in a run
    const size_t run = i == n - 1 ? 1 : j - i;
    const std::string st = stage_text(stages[i]);
    // A stage-repeat group needs a non-empty stage ("()*k" does not parse).
    if (run > 1 && !stages[i].empty()) {
      out += fmt::format("({}|)*{}", st, run);
    } else {
      for (size_t k = 0; k < run; ++k) out += st + (i + k + 1 < n ? "|" : "");
    }
    i += run;
  }
  return out;
}

std::vector<std::string> uneven_interleaved_layout(int num_layers, int pp, int vp, int first, int last,
                                                   int mtp_layers) {
  if (pp < 2 || vp < 1 || num_layers <= 0) return {};
  const int middle_ranks = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const int middle = num_layers - first - last;
  if (middle < 0 || (middle > 0 && middle_ranks <= 0)) return {};
  if (middle_ranks > 0 && middle % middle_ranks != 0) return {};
  std::vector<int> per_rank(static_cast<size_t>(pp), middle_ranks > 0 ? middle / middle_ranks : 0);
  if (first > 0) per_rank.front() = first;
  if (last > 0) per_rank.back() = last;
  for (int c : per_rank)
    if (c % vp != 0) return {};
  std::vector<std::string> stages(static_cast<size_t>(pp * vp));
  for (int j = 0; j < vp; ++j)
    for (int r = 0; r < pp; ++r) stages[static_cast<size_t>(j * pp + r)] = std::string(per_rank[r] / vp, 't');
  stages.front().insert(0, "E");
  stages.back() += std::string(static_cast<size_t>(std::max(0, mtp_layers)), 'm') + "L";
  return stages;
}

std::vector<int> layout_layers_per_rank(const std::vector<std::string>& stages, int pp) {
  std::vector<int> out(static_cast<size_t>(std::max(pp, 0)), 0);
  if (pp <= 0) return out;
  for (size_t s = 0; s < stages.size(); ++s)
    out[s % static_cast<size_t>(pp)] +=
        static_cast<int>(std::count(stages[s].begin(), stages[s].end(), 't'));
  return out;
}

}  // namespace lcm
