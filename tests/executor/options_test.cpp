// lcm-exec command-line parsing: nccl-tests size syntax, shapes, layouts, fault injection.
#include <gtest/gtest.h>

#include "lcm/executor/error.hpp"
#include "lcm/executor/options.hpp"

namespace lcm::exec {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "lcm-exec");
  return parse_args(static_cast<int>(args.size()), args.data());
}

TEST(Options, SizesUseNcclTestsSuffixes) {
  EXPECT_EQ(parse_size("1M"), 1048576);
  EXPECT_EQ(parse_size("64K"), 65536);
  EXPECT_EQ(parse_size("1G"), 1073741824);
  EXPECT_EQ(parse_size("123"), 123);
  EXPECT_THROW(parse_size("1T"), UsageError);
  EXPECT_THROW(parse_size(""), UsageError);
  const auto s = sweep_sizes({parse_size("1M"), parse_size("1G"), 2.0, 0});
  ASSERT_EQ(s.size(), 11u);
  EXPECT_EQ(s.front(), 1 << 20);
  EXPECT_EQ(s.back(), 1 << 30);
  const auto add = sweep_sizes({1000, 4000, 2.0, 1000});
  EXPECT_EQ(add, (std::vector<int64_t>{1000, 2000, 3000, 4000}));
}

TEST(Options, CollectivesCommandLine) {
  const Options o = parse({"bench", "collectives", "--layout", "tp=2,cp=4", "--group", "tp", "-b", "1M", "-e", "1G",
                           "-f", "2", "--ops", "all_reduce,all_to_all", "--timeout=30", "--out", "/tmp/x"});
  EXPECT_EQ(o.family, Family::kCollectives);
  EXPECT_EQ(o.layout, "tp=2,cp=4");
  EXPECT_EQ(o.group, Group::kTp);
  EXPECT_EQ(o.sweep.min_bytes, 1 << 20);
  EXPECT_EQ(o.sweep.max_bytes, 1 << 30);
  EXPECT_EQ(o.ops, (std::vector<std::string>{"all_reduce", "all_to_all"}));
  EXPECT_DOUBLE_EQ(o.timeout_s, 30.0);
  EXPECT_EQ(o.out_dir, "/tmp/x");
}

TEST(Options, DefaultsAndTimeout) {
  const Options o = parse({"bench", "membw"});
  EXPECT_DOUBLE_EQ(o.timeout_s, 300.0);
  EXPECT_EQ(o.warmup, -1);
  EXPECT_EQ(o.iters, -1);
  EXPECT_EQ(o.group, Group::kWorld);
}

TEST(Options, GemmShapesAndTypes) {
  const Options o = parse({"bench", "gemm", "--shapes", "4096x6144x4096,128x256x512", "--dtype", "bf16", "--algos", "4"});
  ASSERT_EQ(o.shapes.size(), 2u);
  EXPECT_EQ(o.shapes[0].m, 4096);
  EXPECT_EQ(o.shapes[0].n, 6144);
  EXPECT_EQ(o.shapes[0].k, 4096);
  EXPECT_EQ(o.gemm_dtypes, (std::vector<GemmDType>{GemmDType::kBf16}));
  EXPECT_EQ(o.algos, 4);
  EXPECT_EQ(o.workspace_bytes, 32 << 20);
  EXPECT_EQ(parse_shapes("models").size(), model_shapes().size());
  for (const GemmShape& s : model_shapes()) {
    EXPECT_FALSE(s.label.empty());
    EXPECT_EQ(s.n % 16, 0);
    EXPECT_EQ(s.k % 16, 0);
  }
  EXPECT_THROW(parse_shapes("4096x4096"), UsageError);
  EXPECT_THROW(parse_shapes("4096x4095x4096"), UsageError);
}

TEST(Options, Injection) {
  const Inject s = parse_inject("stall@rank=1,seconds=60");
  EXPECT_EQ(s.kind, Inject::Kind::kStall);
  EXPECT_EQ(s.rank, 1);
  EXPECT_DOUBLE_EQ(s.seconds, 60.0);
  EXPECT_EQ(s.point, 0);
  const Inject c = parse_inject("corrupt@rank=0,point=3");
  EXPECT_EQ(c.kind, Inject::Kind::kCorrupt);
  EXPECT_EQ(c.point, 3);
  EXPECT_THROW(parse_inject("stall"), UsageError);
  EXPECT_THROW(parse_inject("melt@rank=1"), UsageError);
  EXPECT_THROW(parse_inject("stall@point=1"), UsageError);
}

TEST(Options, Rejections) {
  EXPECT_THROW(parse({"run"}), UsageError);
  EXPECT_THROW(parse({"bench", "moa"}), UsageError);  // not a benchmark
  EXPECT_EQ(parse({"bench", "moe"}).family, Family::kMoe);
  EXPECT_THROW(parse({"bench", "collectives", "--group", "xp"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "--frobnicate"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "-b"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "-b", "1G", "-e", "1M"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "--timeout", "0"}), UsageError);
  EXPECT_THROW(parse({"bench", "gemm", "--resume"}), UsageError);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_FALSE(usage().empty());
}

}  // namespace
}  // namespace lcm::exec
