// Hardware profiles: unit conversion at load, strict keys, required blocks.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "io_test_util.hpp"

namespace lcm::io::test {
namespace {

using testing::HasSubstr;

TEST(HardwareProfile, H100ConvertedOnce) {
  auto r = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const HardwareSpec& h = r.value();
  EXPECT_EQ(h.name, "h100-sxm");
  EXPECT_DOUBLE_EQ(h.gpu.peak_bf16_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(h.gpu.peak_fp8_flops, 1978.9e12);
  EXPECT_DOUBLE_EQ(h.gpu.hbm_bytes, 81559.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.gpu.hbm_bw, 3350e9);
  EXPECT_EQ(h.gpu.num_sms, 132);
  EXPECT_DOUBLE_EQ(h.gpu.l2_bytes, 50.0 * 1024 * 1024);
  EXPECT_EQ(h.interconnect.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(h.interconnect.nvlink_bw, 450e9);
  EXPECT_DOUBLE_EQ(h.interconnect.nvlink_latency, 3.4e-6);
  EXPECT_DOUBLE_EQ(h.interconnect.nic_bw, 50e9);
  EXPECT_DOUBLE_EQ(h.interconnect.nic_latency, 14e-6);
  EXPECT_DOUBLE_EQ(h.efficiency.gemm, 0.803);
  EXPECT_DOUBLE_EQ(h.efficiency.nvlink, 0.822);
  EXPECT_DOUBLE_EQ(h.allowances.cuda_context, 0.92 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.nccl_per_communicator, 688.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.cublas_workspace, 64.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.fragmentation_fraction, 0.09);
  EXPECT_DOUBLE_EQ(h.allowances.activation_uncertainty, 0.05);
}

TEST(HardwareProfile, H200DiffersInMemoryOnly) {
  auto h100 = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  auto h200 = load_hardware_profile(profile_dir() + "/h200-sxm.yaml");
  ASSERT_TRUE(h100.ok() && h200.ok());
  EXPECT_DOUBLE_EQ(h200.value().gpu.hbm_bytes, 143771.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h200.value().gpu.hbm_bw, 4800e9);
  EXPECT_DOUBLE_EQ(h200.value().gpu.peak_bf16_flops, h100.value().gpu.peak_bf16_flops);
  EXPECT_DOUBLE_EQ(h200.value().interconnect.nvlink_bw, h100.value().interconnect.nvlink_bw);
}

class ProfileFile : public testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() / ("lcm_profile_" + std::to_string(::getpid()) + ".yaml")).string();
    std::ofstream(path_) << text;
    return path_;
  }
  std::string edited(const std::string& from, const std::string& to) {
    std::ifstream in(profile_dir() + "/h100-sxm.yaml");
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) s.replace(pos, from.size(), to);
    return write(s);
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(ProfileFile, UnknownKeyIsAnError) {
  auto r = load_hardware_profile(edited("nic_bw_GBps: 50", "nic_bw_GBs: 50"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("nic_bw_GBs: unknown key 'nic_bw_GBs'; did you mean 'nic_bw_GBps'?"));
  EXPECT_EQ(r.error().line > 0 && r.error().column == 1, true);
}

TEST_F(ProfileFile, MissingKeyAndBlock) {
  auto r = load_hardware_profile(edited("num_sms: 132\n", ""));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("num_sms: missing required key 'num_sms'"));
  auto e = load_hardware_profile(edited("  nic: 0.92\n", ""));
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.error().str(), HasSubstr("efficiency.nic: missing required key 'nic'"));
}

TEST_F(ProfileFile, EfficiencyIsAFraction) {
  auto r = load_hardware_profile(edited("gemm: 0.803", "gemm: 80.3"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("efficiency.gemm: expected a number <= 1, got 80.3"));
}

TEST_F(ProfileFile, CapacityGivenOnceInOneUnit) {
  auto gb = load_hardware_profile(edited("hbm_capacity_MiB: 81559", "hbm_capacity_GB: 80"));
  ASSERT_TRUE(gb.ok()) << gb.error().str();
  EXPECT_DOUBLE_EQ(gb.value().gpu.hbm_bytes, 80e9);
  auto gib = load_hardware_profile(edited("hbm_capacity_MiB: 81559", "hbm_capacity_GiB: 79.5"));
  ASSERT_TRUE(gib.ok());
  EXPECT_DOUBLE_EQ(gib.value().gpu.hbm_bytes, 79.5 * 1024 * 1024 * 1024);
  auto both = load_hardware_profile(edited("hbm_capacity_MiB: 81559", "hbm_capacity_MiB: 81559\nhbm_capacity_GB: 80"));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.error().str(), HasSubstr("give the HBM capacity once"));
}

TEST_F(ProfileFile, MalformedAndMissingFile) {
  auto r = load_hardware_profile(write("name: [x\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("malformed YAML"));
  auto m = load_hardware_profile("/nonexistent/p.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().str(), "/nonexistent/p.yaml: cannot read hardware profile");
}

}  // namespace
}  // namespace lcm::io::test
