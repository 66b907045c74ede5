// Full op names from the name table (ops.hpp), and back.
#include "lcm/model/ops.hpp"

#include <algorithm>
#include <functional>

#include "lcm/model/mem_category.hpp"

namespace lcm {

namespace {

// Pass suffixes, longest first so that ".bwd.dgrad" is not read as ".bwd".
struct Suffix {
  const char* text;
  Pass pass;
  GemmPart part;
};
constexpr Suffix kSuffixes[] = {
    {".bwd.dgrad", Pass::kBwd, GemmPart::kDgrad}, {".bwd.wgrad", Pass::kBwd, GemmPart::kWgrad},
    {".recompute", Pass::kRecompute, GemmPart::kNone}, {".bwd", Pass::kBwd, GemmPart::kNone},
    {".fwd", Pass::kFwd, GemmPart::kNone},
};

}  // namespace

std::string op_name(OpId id, Pass pass, GemmPart part, const char* prefix) {
  std::string n = prefix;
  n += to_string(id);
  switch (pass) {
    case Pass::kFwd: n += ".fwd"; break;
    case Pass::kRecompute: n += ".recompute"; break;
    case Pass::kBwd:
      n += ".bwd";
      if (part == GemmPart::kDgrad) n += ".dgrad";
      if (part == GemmPart::kWgrad) n += ".wgrad";
      break;
    case Pass::kStep: break;
  }
  return n;
}

std::string op_name(const Op& op, const char* prefix) { return op_name(op.id, op.pass, op.part, prefix); }

std::optional<OpName> parse_op_name(std::string_view name) {
  OpName out;
  for (const char* p : {kLayerPrefix, kMtpPrefix}) {
    if (name.starts_with(p)) {
      out.prefix = p;
      name.remove_prefix(std::string_view(p).size());
      break;
    }
  }
  // A step op has no suffix (its base may end in ".bwd": dp.params.allgather.bwd).
  if (*out.prefix == '\0') {
    if (const auto id = op_id_named(name)) {
      out.id = *id;
      out.pass = Pass::kStep;
      return out;
    }
  }
  for (const Suffix& s : kSuffixes) {
    if (!name.ends_with(s.text)) continue;
    const auto id = op_id_named(name.substr(0, name.size() - std::string_view(s.text).size()));
    if (!id) return std::nullopt;
    out.id = *id;
    out.pass = s.pass;
    out.part = s.part;
    return out;
  }
  return std::nullopt;
}

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights: return "weights";
    case MemCategory::kGrads: return "grads";
    case MemCategory::kOptimizer: return "optimizer";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kWorkspace: return "workspace";
    case MemCategory::kOther: return "other";
  }
  return "?";
}

ExpertLoadShares expert_load_shares(const std::vector<double>& loads) {
  ExpertLoadShares out;
  std::vector<double> sorted;
  double total = 0;
  for (double l : loads) {
    sorted.push_back(std::max(0.0, l));
    total += sorted.back();
  }
  if (!(total > 0)) return out;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const size_t g = sorted.size();
  for (size_t b = 0; b < static_cast<size_t>(kExpertLoadBuckets); ++b) {
    double sum = 0;
    for (size_t e = b * g / kExpertLoadBuckets; e < (b + 1) * g / kExpertLoadBuckets; ++e) sum += sorted[e];
    out.share[b] = static_cast<float>(sum / total);
  }
  return out;
}

}  // namespace lcm
