// GPU tests of `lcm-exec bench moe` and `bench cp-attention`: the command line on small
// problems (every point checked against the CPU / reference kernels / single-GPU attention),
// planted wrong results that must fail the run with exit code 6, and the 2-GPU variants
// (EP all-to-all, the CP ring). Each test skips with the reason where it cannot run.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace lcm::exec {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;
};

RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string skip_reason(int gpus) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no GPU: ") + cudaGetErrorString(e);
  if (n < gpus) return "needs " + std::to_string(gpus) + " GPUs, found " + std::to_string(n);
  if (run_command("mpirun --version").exit_code != 0) return "mpirun not found";
  return "";
}

class BenchCommandLine : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NCCL_NVLS_ENABLE", "0", 0);
    dir_ = std::filesystem::temp_directory_path() /
           ("lcm_exec_moecp_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  RunResult exec(int np, const std::string& args) const {
    return run_command("timeout 240 mpirun --allow-run-as-root --bind-to none -np " + std::to_string(np) +
                       " " LCM_BINARY_DIR "/bin/lcm-exec " + args + " -w 1 --warmup-ms 0 -n 3 --out " + dir_.string());
  }
  nlohmann::json summary() const {
    std::ifstream in(dir_ / "summary.json");
    if (!in) return nlohmann::json::object();
    return nlohmann::json::parse(in, nullptr, false);
  }
  std::set<std::string> ops() const {
    std::set<std::string> out;
    const nlohmann::json j = summary();  // a named copy: a range-for over a temporary's member dangles
    for (const auto& p : j["points"]) out.insert(p.value("op", ""));
    return out;
  }
  std::filesystem::path dir_;
};

#define REQUIRE_GPUS(n)                             \
  do {                                              \
    const std::string why = skip_reason(n);         \
    if (!why.empty()) GTEST_SKIP() << why;          \
  } while (0)

const char* kSmallMoe = "bench moe --tokens 256 --hidden 256 --ffn 512 --experts 8 --topk 2";

TEST_F(BenchCommandLine, MoeOneGpuDroplessAndCapacityAreCorrect) {
  REQUIRE_GPUS(1);
  const RunResult r = exec(1, std::string(kSmallMoe) + " --capacity-factor none,1.0 --skew balanced,zipf:1.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j.value("status", ""), "ok");
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p.value("correct", false)) << p.dump();
    EXPECT_EQ(p["extra"].value("check_mode", ""), "full");
  }
  const std::set<std::string> o = ops();
  for (const char* name : {"L.moe.router.fwd", "L.moe.topk.fwd", "L.moe.permute.fwd", "L.moe.experts.fc1.fwd",
                           "L.moe.experts.act.fwd", "L.moe.experts.fc2.fwd", "L.moe.unpermute.fwd",
                           "L.moe.experts.fc1.bwd.dgrad", "L.moe.experts.fc1.bwd.wgrad", "L.moe.router.bwd.wgrad",
                           "L.moe.layer.fwd+bwd"})
    EXPECT_TRUE(o.count(name)) << name;
  EXPECT_FALSE(o.count("L.moe.dispatch.a2a.fwd"));  // ep = 1: no all-to-all
  bool dropped = false;
  for (const auto& p : j["points"])
    if (p["extra"]["moe"].value("skew", "") == "zipf:1.2" && p["extra"]["moe"]["capacity_factor"] == 1.0)
      dropped = dropped || p["extra"]["routing"].value("dropped_fraction_rank0", 0.0) > 0.0;
  EXPECT_TRUE(dropped);
  int loads_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    if (e.path().filename().string().rfind("loads_", 0) == 0) {
      ++loads_files;
      std::ifstream in(e.path());
      int counts = 0;
      long total = 0;
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] != '#') {
          ++counts;
          total += std::stol(line);
        }
      EXPECT_EQ(counts, 8);
      EXPECT_EQ(total, 256 * 2);
    }
  EXPECT_EQ(loads_files, 4);
}

// Issue 14: shapes that are not multiples of 16 run (bf16: PyTorch times 3000x5000x7000 at
// 559 TFLOP/s), or, where cuBLASLt has no kernel (fp8 wants K a multiple of 16), are skipped
// with the reason printed; either way the run goes on with the other shapes.
TEST_F(BenchCommandLine, GemmShapesNotMultipleOf16RunOrAreSkipped) {
  REQUIRE_GPUS(1);
  const RunResult r = exec(1, "bench gemm --shapes 256x256x256,3000x5000x7000,129x250x77 --dtype bf16,fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> keys;
  const nlohmann::json j = summary();
  for (const auto& p : j["points"]) {
    keys.insert(p.value("key", ""));
    EXPECT_TRUE(p.value("correct", false)) << p.dump();
  }
  for (const char* k : {"gemm/bf16/256x256x256", "gemm/bf16/3000x5000x7000", "gemm/bf16/129x250x77",
                        "gemm/fp8_e4m3/256x256x256"})
    EXPECT_TRUE(keys.count(k)) << k << "\n" << r.output;
  for (const char* s : {"3000x5000x7000", "129x250x77"})
    if (!keys.count(std::string("gemm/fp8_e4m3/") + s))
      EXPECT_NE(r.output.find(std::string(s) + "  (skipped: "), std::string::npos) << s << "\n" << r.output;
}

TEST_F(BenchCommandLine, MoeSigmoidGroupLimitedPositionPolicy) {
  REQUIRE_GPUS(1);
  const RunResult r = exec(1, "bench moe --tokens 384 --hidden 256 --ffn 256 --experts 16 --topk 4 --groups 4 "
                              "--topk-groups 2 --score sigmoid --drop-policy position --capacity-factor 1.0 "
                              "--skew zipf:1.0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(summary().value("status", ""), "ok");
}

TEST_F(BenchCommandLine, MoePlantedWrongOutputFailsTheRun) {
  REQUIRE_GPUS(1);
  const RunResult r = exec(1, std::string(kSmallMoe) + " --inject corrupt@rank=0");
  EXPECT_EQ(r.exit_code, 6) << r.output;
  EXPECT_NE(r.output.find("WRONG"), std::string::npos) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j.value("status", ""), "wrong_results");
  ASSERT_FALSE(j["points"].empty());
  EXPECT_FALSE(j["points"][0].value("correct", true));
  EXPECT_GE(j["points"][0]["extra"]["check"]["Y"].value("wrong", 0), 1);
}

TEST_F(BenchCommandLine, MoeTwoGpusExpertParallel) {
  REQUIRE_GPUS(2);
  const RunResult r = exec(2, std::string(kSmallMoe) + " --layout ep=2 --capacity-factor none,1.25 --skew zipf:1.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::set<std::string> o = ops();
  for (const char* name : {"L.moe.dispatch.a2a.fwd", "L.moe.combine.a2a.fwd", "L.moe.dispatch.a2a.bwd",
                           "L.moe.combine.a2a.bwd", "L.moe.dispatch.counts.fwd"})
    EXPECT_TRUE(o.count(name)) << name;
  const nlohmann::json j = summary();
  for (const auto& p : j["points"]) EXPECT_TRUE(p.value("correct", false)) << p.dump();
  EXPECT_TRUE(std::filesystem::exists(dir_ / "trace_rank1.json"));
  const RunResult bad = exec(2, std::string(kSmallMoe) + " --layout ep=2 --inject corrupt@rank=1");
  EXPECT_EQ(bad.exit_code, 6) << bad.output;
}

TEST_F(BenchCommandLine, CpAttentionOneGpuIsPlainCausalAttention) {
  REQUIRE_GPUS(1);
#ifndef LCM_EXEC_HAVE_CUDNN
  GTEST_SKIP() << "lcm-exec built without cuDNN";
#endif
  const RunResult r = exec(1, "bench cp-attention --shapes 1x1024x8x2x64");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(summary().value("status", ""), "ok");
}

TEST_F(BenchCommandLine, CpAttentionRingOnTwoGpus) {
  REQUIRE_GPUS(2);
#ifndef LCM_EXEC_HAVE_CUDNN
  GTEST_SKIP() << "lcm-exec built without cuDNN";
#endif
  const RunResult r = exec(2, "bench cp-attention --layout cp=2 --shapes 1x2048x8x2x64,1x8192x8x4x128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j.value("status", ""), "ok");
  const std::set<std::string> o = ops();
  for (const char* name : {"L.attn.core.fwd", "L.attn.core.bwd", "L.attn.cp.kv.p2p.fwd", "L.attn.cp.kv.p2p.bwd",
                           "L.attn.cp.ring.fwd", "L.attn.cp.ring.bwd", "L.attn.cp.ring.fwd+bwd"})
    EXPECT_TRUE(o.count(name)) << name;
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p.value("correct", false)) << p.dump();
    EXPECT_TRUE(p["extra"]["exposed_comm_us"].contains("fwd"));
  }
  const RunResult bad = exec(2, "bench cp-attention --layout cp=2 --shapes 1x2048x8x2x64 --inject corrupt@rank=1");
  EXPECT_EQ(bad.exit_code, 6) << bad.output;
}

}  // namespace
}  // namespace lcm::exec
