// The Megatron flag tables: every flag lcm maps or rules on is a real Megatron-LM flag, the
// generated name list is sorted and knows which flags take a value.
#include <algorithm>

#include <gtest/gtest.h>

#include "megatron_flags.hpp"     // private (model/io): the flag tables
#include "megatron_importer.hpp"  // private: mapped_megatron_flags()

namespace lcm::io::test {
namespace {

TEST(MegatronFlagTables, MappedAndRuledFlagsAreRealMegatronFlags) {
  for (std::string_view f : mapped_megatron_flags()) EXPECT_NE(find_megatron_flag(f), nullptr) << f;
  for (const FlagRule& r : flag_rules()) {
    EXPECT_NE(find_megatron_flag(r.name), nullptr) << r.name;
    const auto mapped = mapped_megatron_flags();
    EXPECT_EQ(std::find(mapped.begin(), mapped.end(), r.name), mapped.end()) << r.name << " is both mapped and ruled";
  }
}

TEST(MegatronFlagTables, NamesAreSortedAndKnowTheirArity) {
  const auto names = megatron_flag_names();
  ASSERT_GT(names.size(), 900u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end(),
                             [](const MegatronFlagName& a, const MegatronFlagName& b) { return a.name < b.name; }));
  ASSERT_NE(find_megatron_flag("bf16"), nullptr);
  EXPECT_FALSE(find_megatron_flag("bf16")->takes_value);
  EXPECT_TRUE(find_megatron_flag("num-layers")->takes_value);
  EXPECT_FALSE(find_megatron_flag("disable-bias-linear")->takes_value);  // store_false of add_bias_linear
  EXPECT_EQ(find_megatron_flag("no-such-flag"), nullptr);
}

}  // namespace
}  // namespace lcm::io::test
