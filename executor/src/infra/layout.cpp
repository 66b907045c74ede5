// Layout parsing and communicator colors (see layout.hpp).
#include "lcm/executor/layout.hpp"

#include <algorithm>
#include <charconv>

#include "lcm/executor/error.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::exec {

const char* to_string(Group g) {
  switch (g) {
    case Group::kWorld: return "world";
    case Group::kTp: return "tp";
    case Group::kCp: return "cp";
    case Group::kDp: return "dp";
    case Group::kPp: return "pp";
    case Group::kEp: return "ep";
    case Group::kEtp: return "etp";
    case Group::kEdp: return "edp";
  }
  return "?";
}

std::optional<Group> parse_group(std::string_view name) {
  for (Group g : kAllGroups)
    if (name == to_string(g)) return g;
  return std::nullopt;
}

namespace {

int parse_positive(std::string_view key, std::string_view v) {
  int out = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out < 1)
    throw UsageError("--layout: " + std::string(key) + "=" + std::string(v) + ": expected a positive integer");
  return out;
}

}  // namespace

LayoutSpec parse_layout_spec(std::string_view text) {
  LayoutSpec l;
  l.text = std::string(text);
  ParallelSpec& p = l.parallel;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw UsageError("--layout: '" + std::string(item) + "': expected KEY=VALUE");
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "tp") p.tensor_model_parallel_size = parse_positive(key, val);
    else if (key == "cp") p.context_parallel_size = parse_positive(key, val);
    else if (key == "pp") p.pipeline_model_parallel_size = parse_positive(key, val);
    else if (key == "ep") p.expert_model_parallel_size = parse_positive(key, val);
    else if (key == "etp") p.expert_tensor_parallel_size = parse_positive(key, val);
    else if (key == "dp") l.dp = parse_positive(key, val);
    else if (key == "edp") l.edp = parse_positive(key, val);
    else if (key == "order") {
      const auto order = parse_rank_order(val);  // the scenario loader's rank_order parser
      if (!order) throw UsageError("--layout: order=" + std::string(val) + ": expected a permutation of tp-cp-ep-dp-pp");
      std::copy(order->begin(), order->end(), p.order);
    } else {
      throw UsageError("--layout: unknown key '" + std::string(key) + "' (expected tp, cp, pp, ep, etp, dp, edp, order)");
    }
  }
  return l;
}

Layout resolve_layout(const LayoutSpec& spec, int world) {
  if (world < 1) throw UsageError("--layout: world size must be positive");
  Layout l;
  l.world = world;
  l.text = spec.text;
  l.parallel = spec.parallel;
  const ParallelSpec& p = l.parallel;
  const int tp = p.tensor_model_parallel_size, cp = p.context_parallel_size, pp = p.pipeline_model_parallel_size;
  const int ep = p.expert_model_parallel_size;
  const int etp = p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : tp;
  const auto fail = [&](const std::string& m) { throw UsageError("--layout " + l.text + ": " + m); };
  if (world % (tp * cp * pp) != 0)
    fail("world size " + std::to_string(world) + " is not divisible by tp*cp*pp = " + std::to_string(tp * cp * pp));
  if (world % (etp * ep * pp) != 0)
    fail("world size " + std::to_string(world) + " is not divisible by etp*ep*pp = " + std::to_string(etp * ep * pp));

  Scenario s;
  s.num_gpus = world;
  s.parallel = p;
  s.model.num_experts = ep > 1 ? ep : 0;  // derive_mesh keeps ep = 1 for a dense model
  l.mesh = derive_mesh(s);
  if (spec.dp != 0 && spec.dp != l.mesh.dp)
    fail("dp is derived as world/(tp*cp*pp) = " + std::to_string(l.mesh.dp) + ", not " + std::to_string(spec.dp));
  if (spec.edp != 0 && spec.edp != l.mesh.edp)
    fail("edp is derived as world/(etp*ep*pp) = " + std::to_string(l.mesh.edp) + ", not " + std::to_string(spec.edp));
  return l;
}

Layout parse_layout(std::string_view text, int world) { return resolve_layout(parse_layout_spec(text), world); }

namespace {

struct GridDim {
  RankGrid grid;
  Dim dim;
};

GridDim grid_dim(const Layout& l, Group g) {
  switch (g) {
    case Group::kTp: return {dense_grid(l.mesh, l.parallel), Dim::kTp};
    case Group::kCp: return {dense_grid(l.mesh, l.parallel), Dim::kCp};
    case Group::kDp: return {dense_grid(l.mesh, l.parallel), Dim::kDp};
    case Group::kPp: return {dense_grid(l.mesh, l.parallel), Dim::kPp};
    case Group::kEp: return {expert_grid(l.mesh, l.parallel), Dim::kEp};
    case Group::kEtp: return {expert_grid(l.mesh, l.parallel), Dim::kTp};
    case Group::kEdp: return {expert_grid(l.mesh, l.parallel), Dim::kDp};
    case Group::kWorld: break;
  }
  return {RankGrid{}, Dim::kTp};
}

}  // namespace

int group_size(const Layout& l, Group g) {
  switch (g) {
    case Group::kWorld: return l.world;
    case Group::kTp: return l.mesh.tp;
    case Group::kCp: return l.mesh.cp;
    case Group::kDp: return l.mesh.dp;
    case Group::kPp: return l.mesh.pp;
    case Group::kEp: return l.mesh.ep;
    case Group::kEtp: return l.mesh.etp;
    case Group::kEdp: return l.mesh.edp;
  }
  return 1;
}

GroupSplit group_split(const Layout& l, Group g, int rank) {
  GroupSplit s;
  s.group = g;
  if (g == Group::kWorld) {
    for (int r = 0; r < l.world; ++r) s.ranks.push_back(r);
  } else {
    const GridDim gd = grid_dim(l, g);
    s.ranks = group_ranks(gd.grid, gd.dim, rank);
  }
  s.color = s.ranks.front();
  s.key = static_cast<int>(std::find(s.ranks.begin(), s.ranks.end(), rank) - s.ranks.begin());
  return s;
}

}  // namespace lcm::exec
