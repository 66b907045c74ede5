// The host-bound note of `lcm estimate` (issue 12; docs/time-model.md, "Host-bound regime"):
// when the GPU waits on the host for more than 1% of the step, the table says so and names the
// host costs it assumed (the profile's host: block), since they belong to one host and one
// framework; a step that is not host-bound has no such note.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/run_lcm.hpp"

namespace {

using lcm::test::LcmRun;

LcmRun lcm(const std::string& args) { return lcm::test::run_lcm(args, "host_cli_test"); }

// The Megatron host-time runs' MoE scenario (hidden 256, 256 tokens: host-bound by design) on
// the H200 profile, whose host: block holds 10.87 us per kernel, 16.66 us per sync, 1816.4 /
// 4036.2 us per layer forward / backward, 1046.0 / 6809.8 us more for an MoE layer, 5642.7 us
// per micro-batch outside the layers, 35.9 us per optimizer tensor and 1661.3 us per iteration.
TEST(HostCli, HostBoundEstimateNamesTheHostCostsItAssumed) {
  const LcmRun r = lcm("estimate validation/measured/h200/megatron_host/scenario_moe.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Host-bound: the GPU waits on the host "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with the profile's host costs (10.87 us per kernel enqueue, 16.66 us per sync, 1816 / 4036 us "
                       "of Python per layer forward / backward, an MoE layer 1046 / 6810 us more, 5643 us per "
                       "micro-batch outside the layers, 35.9 us per optimizer tensor, 1661 us per iteration;"),
            std::string::npos)
      << r.out;
}

TEST(HostCli, GpuBoundEstimateHasNoHostNote) {
  const LcmRun r = lcm("estimate scenarios/llama3.1-70b.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("Host-bound:"), std::string::npos) << r.out;
}

// Attention dropout on a profile without its rates: the estimate says the random numbers are
// priced free and where the rates come from; with the shipped profile (which has them) no note.
TEST(HostCli, AttentionDropoutWithoutRatesIsNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lcm_dropout_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(std::string(LCM_SOURCE_DIR) + "/hwprofiles/h100-sxm.yaml");
  ASSERT_TRUE(in.good());
  std::ofstream prof(dir / "no_dropout.yaml");
  for (std::string line; std::getline(in, line);)
    if (line.find("attention_dropout_") == std::string::npos) prof << line << "\n";
  prof.close();
  const std::string scenario = "estimate scenarios/llama3.1-8b.yaml --set attention_dropout=0.1";
  const LcmRun bare = lcm(scenario + " --hw '" + (dir / "no_dropout.yaml").string() + "'");
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_NE(bare.out.find("Attention dropout 0.1 is priced free in the forward and backward of the attention kernels"),
            std::string::npos)
      << bare.out;
  EXPECT_NE(bare.out.find("efficiency.attention_dropout_{fwd,bwd}_Gelem_per_s"), std::string::npos) << bare.out;
  const LcmRun shipped = lcm(scenario + " --hw h100-sxm");
  ASSERT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_EQ(shipped.out.find("priced free"), std::string::npos) << shipped.out;
  // Unfused attention prices its dropout kernels by their bytes, not at the profile's rates.
  const LcmRun unfused = lcm(scenario + " --set seq_length=4096 --set context_parallel_size=1 "
                                        "--set attention_backend=unfused --hw '" + (dir / "no_dropout.yaml").string() + "'");
  ASSERT_EQ(unfused.code, 0) << unfused.err;
  EXPECT_EQ(unfused.out.find("priced free"), std::string::npos) << unfused.out;
  fs::remove_all(dir);
}

// An estimate of unfused attention says how its price fared held out, and that the band's
// attention spread (the fused kernels') understates it; a fused estimate does not.
TEST(HostCli, UnfusedAttentionNamesItsHeldOutError) {
  const std::string scenario = "estimate scenarios/llama3.1-8b.yaml --set seq_length=4096 --set context_parallel_size=1";
  const LcmRun unfused = lcm(scenario + " --set attention_backend=unfused");
  ASSERT_EQ(unfused.code, 0) << unfused.err;
  EXPECT_NE(unfused.out.find("5 of 20 ops within 10 %, 28.6 % too fast on average"), std::string::npos) << unfused.out;
  const LcmRun fused = lcm(scenario);
  ASSERT_EQ(fused.code, 0) << fused.err;
  EXPECT_EQ(fused.out.find("Unfused attention"), std::string::npos) << fused.out;
}

// An estimate of FlashAttention-2 names its rates and where they come from; a fused one does not.
TEST(HostCli, FlashAttention2NamesItsRates) {
  const std::string scenario = "estimate scenarios/llama3.1-8b.yaml --hw h100-sxm";
  const LcmRun flash2 = lcm(scenario + " --set attention_backend=flash2");
  ASSERT_EQ(flash2.code, 0) << flash2.err;
  EXPECT_NE(flash2.out.find("Attention runs FlashAttention-2 (training.attention_backend flash2)"), std::string::npos)
      << flash2.out;
  EXPECT_NE(flash2.out.find("attention_flash2_fwd 0.385, _bwd 0.3075"), std::string::npos) << flash2.out;
  const LcmRun fused = lcm(scenario);
  ASSERT_EQ(fused.code, 0) << fused.err;
  EXPECT_EQ(fused.out.find("FlashAttention-2"), std::string::npos) << fused.out;
}

}  // namespace
