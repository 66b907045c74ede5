// Hardware profiles: unit conversion at load, strict keys, required blocks.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

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
  EXPECT_DOUBLE_EQ(h.efficiency.gemm, 0.7342);
  EXPECT_DOUBLE_EQ(h.efficiency.gemm_fp8, 0.6528);
  EXPECT_DOUBLE_EQ(h.efficiency.gemm_fp8_block, 0.6004);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_fwd, 0.661);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_bwd, 0.546);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_flash2_fwd, 0.385);  // session 38: FlashAttention-2, H100 probe
  EXPECT_DOUBLE_EQ(h.efficiency.attention_flash2_bwd, 0.3075);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_flash2_seq_half, 370);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_flash2_other_head_dim, 0.88);  // session 39: heldout18 probe (development)
  EXPECT_DOUBLE_EQ(h.efficiency.gpu_speed_spread, 0.022);  // session 40: dgxc v24.11.1's growth (development)
  EXPECT_DOUBLE_EQ(h.efficiency.gpu_speed_spread_fp8, 0.053);
  EXPECT_DOUBLE_EQ(h.efficiency.hbm, 0.9004);
  EXPECT_DOUBLE_EQ(h.efficiency.hbm_elementwise, 0.79);  // session 31: the H100's own probe
  EXPECT_DOUBLE_EQ(h.efficiency.nvlink, 0.822);
  EXPECT_DOUBLE_EQ(h.efficiency.nic, 0.92);
  // Curve parameters: counts stay counts, sizes convert from MiB to bytes.
  EXPECT_DOUBLE_EQ(h.efficiency.gemm_dim_half, 13.97);
  EXPECT_EQ(h.efficiency.gemm_tile_m, 128);
  EXPECT_EQ(h.efficiency.gemm_tile_n, 128);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_seq_half, 337.5);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_l2_miss_slowdown, 0.2153);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_l2_miss_start, 0.5255);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_l2_miss_full, 1.44);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_dropout_fwd_rate, 890e9);
  EXPECT_DOUBLE_EQ(h.efficiency.attention_dropout_bwd_rate, 1680e9);
  EXPECT_DOUBLE_EQ(h.efficiency.nvlink_half_bytes, 20.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.efficiency.nic_half_bytes, 4.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.cuda_context, 0.92 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.nccl_per_communicator, 688.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.cublas_workspace, 64.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h.allowances.fragmentation_fraction, 0.09);
}

TEST(HardwareProfile, TheRemovedActivationBandKeyIsAOneLineError) {
  const std::string path = ::testing::TempDir() + "/removed_activation_band.yaml";
  {
    std::ifstream in(profile_dir() + "/h100-sxm.yaml");
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    const size_t at = s.find("  fragmentation_fraction:");
    ASSERT_NE(at, std::string::npos);
    s.insert(at, "  activation_uncertainty_fraction: 0.05\n");
    std::ofstream(path) << s;
  }
  const auto r = load_hardware_profile(path);
  ASSERT_FALSE(r.ok());
  const std::string e = r.error().str();
  EXPECT_THAT(e, HasSubstr("allowances.activation_uncertainty_fraction: removed: the memory band"));
  EXPECT_THAT(e, HasSubstr(":"));  // file:line:column first
  EXPECT_EQ(e.find('\n'), std::string::npos);
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

// The H100 profile's kernel terms are the H100 fit that validation/measured/h100/DECLARATION.md
// adopted (validation/measured/h100/scores/h100-fit.yaml, session 29), key for key, except the
// attention class: the session-30 refit of set A's attention points with the L2 slowdown terms,
// which validation/measured/h100/attention_l2/DECLARATION.md adopted (h100-l2-fit.yaml). Its
// NVLink terms stay its own (8-GPU H100 NCCL figures: the fit had no collective points), and the
// block-scaled FP8 term measured on the H100 is the same in the calibrated H200 profile (the
// die-port rule read the other way).
TEST(HardwareProfile, H100CarriesItsAdoptedFit) {
  auto h100 = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  auto fit = load_hardware_profile(std::string(LCM_SOURCE_DIR) + "/validation/measured/h100/scores/h100-fit.yaml");
  auto l2 = load_hardware_profile(std::string(LCM_SOURCE_DIR) +
                                  "/validation/measured/h100/attention_l2/h100-l2-fit.yaml");
  auto h200 = load_hardware_profile(profile_dir() + "/h200-sxm.calibrated.yaml");
  ASSERT_TRUE(h100.ok() && fit.ok() && l2.ok() && h200.ok());
  const EfficiencySpec& a = h100.value().efficiency;
  const EfficiencySpec& b = fit.value().efficiency;
  const EfficiencySpec& c = l2.value().efficiency;
  for (auto [what, x, y] : {std::tuple{"gemm", a.gemm, b.gemm}, {"gemm_fp8", a.gemm_fp8, b.gemm_fp8},
                            {"attention_fwd", a.attention_fwd, c.attention_fwd},
                            {"attention_bwd", a.attention_bwd, c.attention_bwd}, {"hbm", a.hbm, b.hbm},
                            {"gemm_dim_half", a.gemm_dim_half, b.gemm_dim_half},
                            {"attention_seq_half", a.attention_seq_half, c.attention_seq_half},
                            {"attention_head_dim_half", a.attention_head_dim_half, c.attention_head_dim_half},
                            {"attention_bwd_wide_dim_exponent", a.attention_bwd_wide_dim_exponent,
                             c.attention_bwd_wide_dim_exponent},
                            {"kernel_fixed", a.kernel_fixed, b.kernel_fixed},
                            {"gemm_roofline_exponent", a.gemm_roofline_exponent, b.gemm_roofline_exponent},
                            {"memory_fixed", a.memory_fixed, b.memory_fixed},
                            {"grouped_gemm_fixed", a.grouped_gemm_fixed, b.grouped_gemm_fixed},
                            {"attention_cta_tail", a.attention_cta_tail, c.attention_cta_tail},
                            {"attention_l2_miss_slowdown", a.attention_l2_miss_slowdown, c.attention_l2_miss_slowdown},
                            {"attention_l2_miss_start", a.attention_l2_miss_start, c.attention_l2_miss_start},
                            {"attention_l2_miss_full", a.attention_l2_miss_full, c.attention_l2_miss_full},
                            {"attention_window_extra", a.attention_window_extra, b.attention_window_extra},
                            {"gemm_sm_fill_exponent", a.gemm_sm_fill_exponent, b.gemm_sm_fill_exponent},
                            {"gemm_accumulate_miss_bw", a.gemm_accumulate_miss_bw, b.gemm_accumulate_miss_bw},
                            {"gemm_c_write_exposed", a.gemm_c_write_exposed, b.gemm_c_write_exposed},
                            {"gemm_fill_bw_exponent", a.gemm_fill_bw_exponent, b.gemm_fill_bw_exponent},
                            {"gemm_tile_small", a.gemm_tile_small, b.gemm_tile_small},
                            {"gemm_split_k_chunk", a.gemm_split_k_chunk, b.gemm_split_k_chunk}})
    EXPECT_DOUBLE_EQ(x, y) << what;
  EXPECT_EQ(a.gemm_tile_m, b.gemm_tile_m);
  EXPECT_EQ(a.gemm_tile_n, b.gemm_tile_n);
  EXPECT_DOUBLE_EQ(h100.value().host.exec_gemm_enqueue, fit.value().host.exec_gemm_enqueue);
  EXPECT_DOUBLE_EQ(h100.value().host.exec_gemm_enqueue, 8.177e-6);
  // Not fitted by either: the elementwise rate, the H200's 0.70 scaled by the H100's own
  // kernel probe (validation/measured/h100/train_suite2/DECLARATION.md, session 31).
  EXPECT_DOUBLE_EQ(b.hbm_elementwise, 0.70);
  EXPECT_DOUBLE_EQ(a.hbm_elementwise, 0.79);
  // Its own NVLink terms and band (the fit wrote a 0 / 0 band: it had no NVLink points).
  EXPECT_DOUBLE_EQ(a.nvlink, 0.822);
  EXPECT_DOUBLE_EQ(h100.value().uncertainty.nvlink.low, -0.7617);
  // The fit's cross-validated op bands.
  EXPECT_DOUBLE_EQ(h100.value().uncertainty.attention.low, l2.value().uncertainty.attention.low);
  EXPECT_DOUBLE_EQ(h100.value().uncertainty.attention.high, l2.value().uncertainty.attention.high);
  EXPECT_DOUBLE_EQ(h100.value().uncertainty.gemm_bf16.high, fit.value().uncertainty.gemm_bf16.high);
  EXPECT_DOUBLE_EQ(a.gemm_fp8_block, 0.6004);
  EXPECT_DOUBLE_EQ(h200.value().efficiency.gemm_fp8_block, a.gemm_fp8_block);
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
  // The curve parameters are required too (no silent C++ defaults).
  for (const char* key : {"gemm_fp8", "gemm_dim_half", "gemm_tile_m", "gemm_tile_n", "attention_seq_half_tokens",
                          "nvlink_half_MiB", "nic_half_MiB", "attention_head_dim_half", "attention_bwd_wide_dim_exponent",
                          "kernel_fixed_us", "collective_base_us", "nvlink_allgather_scale",
                          "nvlink_alltoall_scale", "nvlink_sendrecv_scale", "nvlink_ramp_exponent",
                          // small-op regime (issue 12)
                          "gemm_roofline_exponent", "memory_fixed_us", "attention_cta_tail", "gemm_sm_fill_exponent",
                          "grouped_gemm_fixed_us", "gemm_accumulate_miss_bw", "gemm_c_write_exposed",
                          "gemm_fill_bw_exponent", "gemm_tile_small", "gemm_split_k_chunk", "nvlink_ll",
                          "attention_window_extra_tokens", "hbm_elementwise"}) {
    std::ifstream in(profile_dir() + "/h100-sxm.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(std::string("  ") + key + ":");
    ASSERT_NE(at, std::string::npos) << key;
    const size_t eol = text.find('\n', at);
    auto m = load_hardware_profile(edited(text.substr(at, eol - at + 1), ""));
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_THAT(m.error().str(), HasSubstr(std::string("efficiency.") + key + ": missing required key"));
  }
}

// host.moe_layer_presync_fwd_us may be left out (0: a standalone MoE pass is one host segment);
// given, it is read in microseconds and bounded like the other per-layer Python keys.
TEST_F(ProfileFile, MoePresyncPythonIsOptional) {
  // The shipped profile carries the measured share (session 36: 0.726 x 1046.0 us).
  auto shipped = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  ASSERT_TRUE(shipped.ok());
  EXPECT_DOUBLE_EQ(shipped.value().host.moe_presync_fwd, 759.2e-6);
  // Left out: 0, the pass is one host segment.
  auto none = load_hardware_profile(edited("  moe_layer_presync_fwd_us: 759.2\n", ""));
  ASSERT_TRUE(none.ok()) << none.error().str();
  EXPECT_EQ(none.value().host.moe_presync_fwd, 0.0);
  auto given =
      load_hardware_profile(edited("  moe_layer_presync_fwd_us: 759.2\n", "  moe_layer_presync_fwd_us: 412.5\n"));
  ASSERT_TRUE(given.ok()) << given.error().str();
  EXPECT_DOUBLE_EQ(given.value().host.moe_presync_fwd, 412.5e-6);
  auto bad = load_hardware_profile(edited("  moe_layer_presync_fwd_us: 759.2\n", "  moe_layer_presync_fwd_us: -1\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().str(), HasSubstr("host.moe_layer_presync_fwd_us"));
}

// efficiency.attention_flash2_other_head_dim may be left out (1: FlashAttention-2 at one rate for
// every head dim); given, it is a fraction like the other efficiencies.
TEST_F(ProfileFile, Flash2OtherHeadDimIsOptional) {
  auto none = load_hardware_profile(edited("  attention_flash2_other_head_dim: 0.88\n", ""));
  ASSERT_TRUE(none.ok()) << none.error().str();
  EXPECT_EQ(none.value().efficiency.attention_flash2_other_head_dim, 1.0);
  auto bad = load_hardware_profile(
      edited("  attention_flash2_other_head_dim: 0.88\n", "  attention_flash2_other_head_dim: 1.2\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().str(), HasSubstr("efficiency.attention_flash2_other_head_dim"));
}

// efficiency.gpu_speed_spread / _fp8 may be left out (0: every GPU alike, no wait for the slowest);
// given, each is a relative standard deviation in [0, 0.5].
TEST_F(ProfileFile, GpuSpeedSpreadIsOptional) {
  auto none = load_hardware_profile(edited("  gpu_speed_spread: 0.022\n  gpu_speed_spread_fp8: 0.053\n", ""));
  ASSERT_TRUE(none.ok()) << none.error().str();
  EXPECT_EQ(none.value().efficiency.gpu_speed_spread, 0.0);
  EXPECT_EQ(none.value().efficiency.gpu_speed_spread_fp8, 0.0);
  auto bad = load_hardware_profile(edited("  gpu_speed_spread_fp8: 0.053\n", "  gpu_speed_spread_fp8: 0.6\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().str(), HasSubstr("efficiency.gpu_speed_spread_fp8"));
  auto negative = load_hardware_profile(edited("  gpu_speed_spread: 0.022\n", "  gpu_speed_spread: -0.01\n"));
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.error().str(), HasSubstr("efficiency.gpu_speed_spread"));
}

// gemm_roofline_exponent is 0 (off) or a smooth-maximum exponent in [1, 1000].
TEST_F(ProfileFile, RooflineExponentIsOffOrAtLeastOne) {
  for (const char* bad : {"0.5", "1001", "-1"}) {
    auto r = load_hardware_profile(
        edited("gemm_roofline_exponent: 8.974\n", std::string("gemm_roofline_exponent: ") + bad + "\n"));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().str(), HasSubstr("gemm_roofline_exponent")) << bad;
  }
  for (const char* good : {"0", "1", "3.5", "64", "1000"}) {
    auto r = load_hardware_profile(
        edited("gemm_roofline_exponent: 8.974\n", std::string("gemm_roofline_exponent: ") + good + "\n"));
    EXPECT_TRUE(r.ok()) << good << ": " << (r.ok() ? "" : r.error().str());
  }
}

TEST_F(ProfileFile, CurveParametersAreChecked) {
  auto tile = load_hardware_profile(edited("gemm_tile_m: 128", "gemm_tile_m: 0"));
  ASSERT_FALSE(tile.ok());
  EXPECT_THAT(tile.error().str(), HasSubstr("efficiency.gemm_tile_m"));
  auto half = load_hardware_profile(edited("nvlink_half_MiB: 20", "nvlink_half_MiB: -1"));
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(half.error().str(), HasSubstr("efficiency.nvlink_half_MiB"));
  auto unit = load_hardware_profile(edited("nvlink_half_MiB: 20", "nvlink_half_bytes: 20"));
  ASSERT_FALSE(unit.ok());
  EXPECT_THAT(unit.error().str(), HasSubstr("unknown key 'nvlink_half_bytes'"));
}

TEST_F(ProfileFile, EfficiencyIsAFraction) {
  auto r = load_hardware_profile(edited("gemm: 0.7342", "gemm: 71.83"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("efficiency.gemm: expected a number <= 1 (lcm's physical bound, docs/hardware-profiles.md), got 71.83"));
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
  EXPECT_EQ(m.error().str(), "/nonexistent/p.yaml: cannot read hardware profile: No such file or directory");
}

}  // namespace
}  // namespace lcm::io::test
