// Every bundled hardware profile and scenario loads and validates (globbed at run time, so a
// new file is covered without touching this test).
#include <filesystem>

#include "io_test_util.hpp"
#include "lcm/model/mesh.hpp"

namespace lcm::io::test {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> yaml_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(BundledFiles, EveryHardwareProfileLoads) {
  const auto files = yaml_files(profile_dir());
  ASSERT_GE(files.size(), 2u);
  for (const fs::path& p : files) {
    auto r = load_hardware_profile(p.string());
    ASSERT_TRUE(r.ok()) << r.error().str();
    const HardwareSpec& h = r.value();
    EXPECT_EQ(h.name, p.stem().string()) << "profile name must match its file name";
    EXPECT_GT(h.gpu.peak_bf16_flops, 0);
    EXPECT_GT(h.gpu.peak_fp8_flops, h.gpu.peak_bf16_flops);
    EXPECT_GT(h.gpu.hbm_bytes, 0);
    EXPECT_GT(h.interconnect.nvlink_bw, h.interconnect.nic_bw);
    for (double f : {h.efficiency.gemm, h.efficiency.attention_fwd, h.efficiency.attention_bwd, h.efficiency.hbm,
                     h.efficiency.nvlink, h.efficiency.nic}) {
      EXPECT_GT(f, 0.0) << p;
      EXPECT_LE(f, 1.0) << p;
    }
    EXPECT_GT(h.efficiency.gemm_tile_m, 0) << p;
    EXPECT_GT(h.efficiency.gemm_tile_n, 0) << p;
    for (double half : {h.efficiency.gemm_dim_half, h.efficiency.attention_seq_half, h.efficiency.nvlink_half_bytes,
                        h.efficiency.nic_half_bytes})
      EXPECT_GE(half, 0.0) << p;
  }
}

TEST(BundledFiles, EveryScenarioLoadsAndValidates) {
  const auto files = yaml_files(source_dir() + "/scenarios");
  ASSERT_GE(files.size(), 8u);
  for (const fs::path& p : files) {
    auto r = load_scenario(p.string());
    ASSERT_TRUE(r.ok()) << r.error().str();
    EXPECT_TRUE(validate_scenario(r.value()).empty()) << p;
    EXPECT_FALSE(r.value().name.empty()) << p;
  }
}

TEST(BundledFiles, EachModelHasItsScenario) {
  for (const char* id : {"llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b",
                         "qwen3-235b-a22b", "deepseek-v3", "default"})
    EXPECT_TRUE(fs::exists(source_dir() + "/scenarios/" + id + ".yaml")) << id;
}

}  // namespace
}  // namespace lcm::io::test
