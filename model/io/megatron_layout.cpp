// --pipeline-model-parallel-layout -> lcm's uneven-pipeline fields (see megatron_internal.hpp).
// Syntax as Megatron's PipelineParallelLayerLayout.parse_str_to_list: stages separated by
// '|', layers E (embedding), t (transformer), m (MTP), L (loss); "(...)*n" and "x*n" repeat;
// commas are cosmetic. Stage s belongs to pipeline rank s % pp (virtual stage s / pp).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "megatron_internal.hpp"

namespace lcm::io {

namespace {

std::vector<int> split_even(int n, int pp, int first, int last) {
  std::vector<int> out(pp, 0);
  if (first == 0 && last == 0) {
    std::fill(out.begin(), out.end(), n / pp);
    return out;
  }
  int middle_stages = pp - (first > 0) - (last > 0);
  const int middle = n - first - last;
  for (int r = 0; r < pp; ++r) out[r] = middle_stages > 0 ? middle / middle_stages : 0;
  if (first > 0) out[0] = first;
  if (last > 0) out[pp - 1] = last;
  return out;
}

bool valid_split(int n, int pp, int first, int last) {
  if (first == 0 && last == 0) return n % pp == 0;
  const int middle_stages = pp - (first > 0) - (last > 0);
  const int middle = n - first - last;
  if (middle < 0 || (middle > 0) != (middle_stages > 0)) return false;
  return middle_stages == 0 || middle % middle_stages == 0;
}

}  // namespace

std::variant<LayoutMapping, std::string> map_pipeline_layout(std::string_view layout, int num_layers, int pp) {
  std::string s(layout);
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  try {
    auto unroll = [](const std::string& text, const std::regex& re) {
      std::string out;
      auto it = std::sregex_iterator(text.begin(), text.end(), re);
      size_t last = 0;
      for (; it != std::sregex_iterator(); ++it) {
        const std::smatch& m = *it;
        out += text.substr(last, m.position(0) - last);
        const long times = std::strtol(m[2].str().c_str(), nullptr, 10);
        if (times > 100000) throw std::runtime_error("repetition count too large");
        for (long k = 0; k < times; ++k) out += m[1].str();
        last = m.position(0) + m.length(0);
      }
      return out + text.substr(last);
    };
    s = unroll(s, std::regex(R"(\(([^)]+)\)\*(\d+))"));
    s = unroll(s, std::regex(R"((.)\*(\d+))"));
  } catch (const std::exception& e) {
    return fmt::format("cannot parse pipeline layout '{}': {}", layout, e.what());
  }
  std::vector<int> stage_layers(1, 0);
  for (char c : s) {
    if (c == '|') stage_layers.push_back(0);
    else if (c == 't') ++stage_layers.back();
    else if (c != 'E' && c != 'L' && c != 'm' && c != ' ')
      return fmt::format("invalid layer character '{}' in pipeline layout '{}' (known: E, t, m, L, |)", c, layout);
  }
  const int stages = static_cast<int>(stage_layers.size());
  if (pp <= 0 || stages % pp != 0)
    return fmt::format("pipeline layout '{}' has {} stages, not divisible by pipeline_model_parallel_size {}", layout,
                       stages, pp);
  int total = 0;
  for (int v : stage_layers) total += v;
  if (total != num_layers)
    return fmt::format("pipeline layout '{}' places {} transformer layers ('t') but num_layers is {}", layout, total,
                       num_layers);
  const int vp = stages / pp;
  LayoutMapping out;
  out.layout_per_rank.assign(pp, 0);
  for (int st = 0; st < stages; ++st) out.layout_per_rank[st % pp] += stage_layers[st];
  const auto& per = out.layout_per_rank;

  const bool all_equal = std::all_of(per.begin(), per.end(), [&](int v) { return v == per[0]; });
  const bool chunks_equal =
      std::all_of(stage_layers.begin(), stage_layers.end(), [&](int v) { return v == stage_layers[0]; });
  bool exact = false;
  if (all_equal) {
    exact = true;
    if (vp > 1 && chunks_equal && stage_layers[0] > 0) out.layers_per_virtual_stage = stage_layers[0];
  } else if (pp >= 2 && per.front() > 0 && per.back() > 0 &&
             std::all_of(per.begin() + 1, per.end() - 1, [&](int v) { return v == per[1]; })) {
    exact = true;
    out.first = per.front();
    out.last = per.back();
  }
  if (!exact) {  // closest representable split: keep the most-loaded rank, then the total deviation
    const int layout_max = *std::max_element(per.begin(), per.end());
    long best_score = std::numeric_limits<long>::max();
    bool found = false;
    for (int f = 0; f <= num_layers; ++f) {
      for (int l = 0; l <= num_layers; ++l) {
        if ((f == 0) != (l == 0) && pp <= 1) continue;
        if (!valid_split(num_layers, pp, f, l)) continue;
        const std::vector<int> m = split_even(num_layers, pp, f, l);
        long l1 = 0;
        for (int r = 0; r < pp; ++r) l1 += std::abs(m[r] - per[r]);
        const long score = 1000L * std::abs(*std::max_element(m.begin(), m.end()) - layout_max) + l1;
        if (score < best_score) best_score = score, out.first = f, out.last = l, found = true;
      }
    }
    if (!found)
      return fmt::format("pipeline layout '{}' cannot be approximated by lcm's first/middle/last split", layout);
  }
  // Keep the interleaved schedule when an even split with equal virtual stages is within one
  // layer of the layout on every rank (the schedule matters more than one layer of balance).
  if (vp > 1 && out.layers_per_virtual_stage == 0 && num_layers % (pp * vp) == 0) {
    const int even = num_layers / pp;
    if (std::all_of(per.begin(), per.end(), [&](int v) { return std::abs(v - even) <= 1; })) {
      out.first = out.last = 0;
      out.layers_per_virtual_stage = num_layers / (pp * vp);
    }
  }
  out.modelled_per_rank = split_even(num_layers, pp, out.first, out.last);
  const bool interleave_dropped = vp > 1 && out.layers_per_virtual_stage == 0;
  out.interleave_dropped = interleave_dropped;
  if (out.modelled_per_rank != per || interleave_dropped) {
    out.note = fmt::format("--pipeline-model-parallel-layout '{}' puts [{}] transformer layers on the pipeline ranks; "
                           "modelled as [{}]",
                           layout, fmt::join(per, ", "), fmt::join(out.modelled_per_rank, ", "));
    if (interleave_dropped) out.note += fmt::format(" without interleaving its {} uneven virtual stages per rank", vp);
    else if (vp > 1) out.note += fmt::format(" with {} equal virtual stages of {} layers per rank", vp, out.layers_per_virtual_stage);
  }
  return out;
}

}  // namespace lcm::io
