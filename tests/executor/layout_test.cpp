// The executor's communicator splits must be the cost model's groups: for several layouts,
// simulating ncclCommSplit (ranks grouped by color, ordered by key) over every rank must
// give exactly lcm::group_ranks on the dense / expert grid.
#include <gtest/gtest.h>

#include <map>

#include "lcm/executor/error.hpp"
#include "lcm/executor/layout.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::exec {
namespace {

struct Case {
  std::string text;
  int world;
};

// The grid and dimension each group lives on, derived here independently of layout.cpp.
std::vector<int> model_group(const std::string& text, int world, Group g, int rank, const Layout& l) {
  Scenario s;
  s.num_gpus = world;
  s.parallel = l.parallel;
  s.model.num_experts = l.parallel.expert_model_parallel_size > 1 ? l.parallel.expert_model_parallel_size : 0;
  const Mesh m = derive_mesh(s);
  const RankGrid dense = dense_grid(m, s.parallel), expert = expert_grid(m, s.parallel);
  switch (g) {
    case Group::kWorld: {
      std::vector<int> all;
      for (int r = 0; r < world; ++r) all.push_back(r);
      return all;
    }
    case Group::kTp: return group_ranks(dense, Dim::kTp, rank);
    case Group::kCp: return group_ranks(dense, Dim::kCp, rank);
    case Group::kDp: return group_ranks(dense, Dim::kDp, rank);
    case Group::kPp: return group_ranks(dense, Dim::kPp, rank);
    case Group::kEp: return group_ranks(expert, Dim::kEp, rank);
    case Group::kEtp: return group_ranks(expert, Dim::kTp, rank);
    case Group::kEdp: return group_ranks(expert, Dim::kDp, rank);
  }
  ADD_FAILURE() << text;
  return {};
}

TEST(LayoutSplit, ColorsReproduceModelGroupRanks) {
  const std::vector<Case> cases = {
      {"", 4},
      {"tp=2", 2},
      {"tp=2,cp=2", 8},
      {"tp=2,pp=2", 8},
      {"tp=4,ep=2", 8},
      {"tp=2,cp=2,ep=4,etp=1", 8},
      {"tp=2,pp=2,order=tp-cp-ep-pp-dp", 8},
      {"tp=2,cp=2,pp=2,ep=4,etp=1", 16},
      {"cp=4,ep=8,etp=1,order=cp-tp-ep-dp-pp", 16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("layout '" + c.text + "' world " + std::to_string(c.world));
    const Layout l = parse_layout(c.text, c.world);
    for (Group g : kAllGroups) {
      SCOPED_TRACE(to_string(g));
      // What ncclCommSplit would build: color -> (key -> global rank).
      std::map<int, std::map<int, int>> comms;
      for (int r = 0; r < c.world; ++r) {
        const GroupSplit s = group_split(l, g, r);
        ASSERT_EQ(s.ranks, model_group(c.text, c.world, g, r, l));
        ASSERT_EQ(static_cast<int>(s.ranks.size()), group_size(l, g));
        ASSERT_GE(s.color, 0);
        ASSERT_TRUE(comms[s.color].emplace(s.key, r).second) << "two ranks with one key";
      }
      for (int r = 0; r < c.world; ++r) {
        const GroupSplit s = group_split(l, g, r);
        std::vector<int> built;
        for (const auto& [key, rank] : comms[s.color]) built.push_back(rank);
        EXPECT_EQ(built, s.ranks) << "rank " << r;
        EXPECT_EQ(s.ranks[static_cast<size_t>(s.key)], r);
      }
      int total = 0;
      for (const auto& [color, members] : comms) total += static_cast<int>(members.size());
      EXPECT_EQ(total, c.world);
      EXPECT_EQ(static_cast<int>(comms.size()) * group_size(l, g), c.world);
    }
  }
}

TEST(LayoutSplit, MeshComesFromDeriveMesh) {
  const Layout l = parse_layout("tp=2,cp=2,ep=4,etp=1", 16);
  EXPECT_EQ(l.mesh.tp, 2);
  EXPECT_EQ(l.mesh.cp, 2);
  EXPECT_EQ(l.mesh.dp, 4);
  EXPECT_EQ(l.mesh.ep, 4);
  EXPECT_EQ(l.mesh.etp, 1);
  EXPECT_EQ(l.mesh.edp, 4);
  // tp-cp-ep-dp-pp: tp varies fastest.
  EXPECT_EQ(group_split(l, Group::kTp, 5).ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(group_split(l, Group::kCp, 5).ranks, (std::vector<int>{5, 7}));
  EXPECT_EQ(group_split(l, Group::kEp, 5).ranks, (std::vector<int>{4, 5, 6, 7}));
}

TEST(LayoutSplit, RejectsImpossibleLayouts) {
  EXPECT_THROW(parse_layout("tp=3", 8), UsageError);
  EXPECT_THROW(parse_layout("tp=2,ep=3", 8), UsageError);
  EXPECT_THROW(parse_layout("tp=0", 8), UsageError);
  EXPECT_THROW(parse_layout("tp=two", 8), UsageError);
  EXPECT_THROW(parse_layout("tq=2", 8), UsageError);
  EXPECT_THROW(parse_layout("tp", 8), UsageError);
  EXPECT_THROW(parse_layout("tp=2,dp=3", 8), UsageError);  // dp is derived: 4
  EXPECT_THROW(parse_layout("order=tp-cp-ep-dp", 8), UsageError);
  EXPECT_THROW(parse_layout("order=tp-tp-ep-dp-pp", 8), UsageError);
  EXPECT_NO_THROW(parse_layout("tp=2,dp=4", 8));
}

TEST(LayoutSplit, GroupNamesRoundTrip) {
  for (Group g : kAllGroups) EXPECT_EQ(parse_group(to_string(g)), g);
  EXPECT_FALSE(parse_group("xp").has_value());
}

}  // namespace
}  // namespace lcm::exec
