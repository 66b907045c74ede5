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
  EXPECT_EQ(o.layout.text, "tp=2,cp=4");
  EXPECT_EQ(o.layout.parallel.tensor_model_parallel_size, 2);
  EXPECT_EQ(o.layout.parallel.context_parallel_size, 4);
  EXPECT_EQ(o.group, Group::kTp);
  EXPECT_EQ(o.sweep.min_bytes, 1 << 20);
  EXPECT_EQ(o.sweep.max_bytes, 1 << 30);
  EXPECT_EQ(o.collectives, (std::vector<Collective>{Collective::kAllReduce, Collective::kAllToAll}));
  EXPECT_EQ(o.coll_dtype, CollDType::kFloat);
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
  ASSERT_EQ(o.gemm_points.size(), 2u);
  EXPECT_EQ(o.gemm_points[0].shape.m, 4096);
  EXPECT_EQ(o.gemm_points[0].shape.n, 6144);
  EXPECT_EQ(o.gemm_points[0].shape.k, 4096);
  EXPECT_EQ(o.gemm_points[0].shape.groups, 1);
  EXPECT_EQ(o.gemm_points[1].text(), "128x256x512");
  EXPECT_EQ(o.gemm_dtypes, (std::vector<GemmDType>{GemmDType::kBf16}));
  EXPECT_EQ(o.algos, 4);
  EXPECT_EQ(o.workspace_bytes, 32 << 20);
  EXPECT_EQ(parse({"bench", "gemm", "--dtype", "fp8,fp8_block"}).gemm_dtypes,
            (std::vector<GemmDType>{GemmDType::kFp8E4M3, GemmDType::kFp8Block}));
  EXPECT_STREQ(to_string(GemmDType::kFp8Block), "fp8_block");
  EXPECT_THROW(parse({"bench", "gemm", "--dtype", "fp8_mx"}), UsageError);
  EXPECT_EQ(parse_shapes("models").size(), model_shapes().size());
  for (const GemmPoint& s : model_shapes()) {
    EXPECT_FALSE(s.label.empty());
    EXPECT_EQ(s.shape.n % 16, 0);
    EXPECT_EQ(s.shape.k % 16, 0);
  }
  EXPECT_THROW(parse_shapes("4096x4096"), UsageError);
  EXPECT_THROW(parse_shapes("4096x0x4096"), UsageError);
  // Not multiples of 16: cuBLASLt runs them (PyTorch times 3000x5000x7000 bf16), so they parse.
  const auto odd = parse_shapes("3000x5000x7000,1x4095x33");
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[0].shape.n, 5000);
  EXPECT_EQ(odd[1].shape.k, 33);
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

TEST(Options, EveryValueIsTypedAtParseTime) {
  // --layout: syntax and the rank order (the scenario loader's parser) before any world size.
  const Options l = parse({"bench", "collectives", "--layout", "tp=2,ep=4,order=tp-cp-ep-pp-dp", "-d", "bf16"});
  EXPECT_EQ(l.layout.parallel.expert_model_parallel_size, 4);
  EXPECT_EQ(l.layout.parallel.order[3], Dim::kPp);
  EXPECT_EQ(l.layout.parallel.order[4], Dim::kDp);
  EXPECT_EQ(l.coll_dtype, CollDType::kBf16);
  EXPECT_THROW(parse({"bench", "collectives", "--layout", "garbage"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "--layout", "order=tp-cp-ep-dp"}), UsageError);
  EXPECT_THROW(parse({"bench", "collectives", "--layout", "order=tp-tp-ep-dp-pp"}), UsageError);
  // --ops and --methods become enums; unknown names are usage errors, not run-time ones.
  EXPECT_THROW(parse({"bench", "collectives", "--ops", "all_reduce,broadcast"}), UsageError);
  EXPECT_EQ(parse({"bench", "collectives", "--ops", "allgather"}).collectives,
            (std::vector<Collective>{Collective::kAllGather}));  // the trace spelling too
  const Options m = parse({"bench", "membw", "--methods", "kernel"});
  EXPECT_EQ(m.copy_methods, (std::vector<CopyMethod>{CopyMethod::kKernel}));
  EXPECT_THROW(parse({"bench", "membw", "--methods", "dma"}), UsageError);
  EXPECT_EQ(parse({"bench", "moe", "--check", "sampled"}).check, CheckMode::kSampled);
  EXPECT_TRUE(check_full(CheckMode::kAuto, 512, 512));
  EXPECT_FALSE(check_full(CheckMode::kAuto, 513, 512));
  EXPECT_TRUE(check_full(CheckMode::kFull, 1 << 20, 512));
  EXPECT_FALSE(check_full(CheckMode::kSampled, 1, 512));
}

TEST(Options, WorldSizeChecksComeBeforeTheDevice) {
  const Options c = parse({"bench", "collectives", "--layout", "tp=2,cp=2"});
  EXPECT_EQ(validate_for_world(c, 8).mesh.dp, 2);
  EXPECT_THROW(validate_for_world(c, 6), UsageError);  // 6 % (tp cp) != 0
  // moe: the experts must split evenly over the EP group.
  const Options m = parse({"bench", "moe", "--layout", "ep=4", "--experts", "6", "--topk", "2"});
  EXPECT_THROW(validate_for_world(m, 4), UsageError);
  EXPECT_EQ(validate_for_world(parse({"bench", "moe", "--layout", "ep=2", "--experts", "6"}), 2).mesh.ep, 2);
  // cp-attention: each sequence a multiple of 2 x the ring size.
  const Options cp = parse({"bench", "cp-attention", "--layout", "cp=4", "--shapes", "1x1004x8x8x64"});
  EXPECT_THROW(validate_for_world(cp, 4), UsageError);  // 1004 % 8 != 0
  EXPECT_EQ(validate_for_world(parse({"bench", "cp-attention", "--layout", "cp=2", "--shapes", "1x1004x8x8x64"}), 2).mesh.cp,
            2);  // 1004 % 4 == 0
}

}  // namespace
}  // namespace lcm::exec
