// The parallel layout of an lcm-exec run and its communicator splits.
//
// `--layout tp=2,cp=4,ep=2,etp=1,pp=1[,order=tp-cp-ep-dp-pp]` becomes lcm's ParallelSpec;
// the mesh comes from lcm::derive_mesh (dp and edp are derived, never given) and every
// group from lcm::group_ranks on lcm::dense_grid / lcm::expert_grid: the cost model's own
// rank-order rule, so a communicator here holds exactly the ranks the planner assumed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::exec {

// Groups a benchmark can run on: the world and each parallel dimension of both meshes.
enum class Group : uint8_t { kWorld, kTp, kCp, kDp, kPp, kEp, kEtp, kEdp };
inline constexpr int kNumGroups = 8;
inline constexpr Group kAllGroups[kNumGroups] = {Group::kWorld, Group::kTp, Group::kCp,  Group::kDp,
                                                 Group::kPp,    Group::kEp, Group::kEtp, Group::kEdp};
const char* to_string(Group g);
std::optional<Group> parse_group(std::string_view name);

// `--layout` as parsed from the command line, before the world size is known: the sizes
// and the rank order (lcm::parse_rank_order, the scenario loader's parser); dp and edp only
// as the user wrote them, to be checked against the derived values.
struct LayoutSpec {
  ParallelSpec parallel;
  int dp = 0, edp = 0;  // 0: not given
  std::string text;     // as given, for reports
};

struct Layout {
  int world = 1;
  ParallelSpec parallel;
  Mesh mesh;
  std::string text;  // as given, for reports
};

// Throw UsageError with the offending key: a malformed spec (parse_layout_spec), or one the
// world size does not allow (resolve_layout). parse_layout does both.
LayoutSpec parse_layout_spec(std::string_view text);
Layout resolve_layout(const LayoutSpec& spec, int world);
Layout parse_layout(std::string_view text, int world);

// One NCCL split: ranks with equal color form a communicator; key orders them.
struct GroupSplit {
  Group group = Group::kWorld;
  int color = 0;           // the group's first rank in coordinate order (unique per group)
  int key = 0;             // this rank's index in `ranks` = its rank in the sub-communicator
  std::vector<int> ranks;  // global ranks of the group in sub-communicator order
};

int group_size(const Layout& l, Group g);
GroupSplit group_split(const Layout& l, Group g, int rank);

}  // namespace lcm::exec
