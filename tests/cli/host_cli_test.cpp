// The host-bound note of `lcm estimate` (issue 12; docs/time-model.md, "Host-bound regime"):
// when the GPU waits on the host for more than 1% of the step, the table says so and names the
// host costs it assumed (the profile's host: block), since they belong to one host and one
// framework; a step that is not host-bound has no such note.
#include <gtest/gtest.h>

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

}  // namespace
