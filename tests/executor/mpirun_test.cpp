// Two-GPU tests: spawn `mpirun -np 2 lcm-exec bench collectives ...` and check the run's
// output, results, a planted wrong element, --resume, and that a stalled rank makes the
// other rank give up within the timeout with a message naming the op and the culprit.
// Skip with the reason below 2 GPUs or without mpirun.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>


namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

RunResult run_command(const std::string& cmd) {
  RunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string skip_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no GPU: ") + cudaGetErrorString(e);
  if (n < 2) return "needs 2 GPUs, found " + std::to_string(n);
  if (run_command("mpirun --version").exit_code != 0) return "mpirun not found";
  return "";
}

class MpirunTwoGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // the shared machines keep NVLink multicast off
    dir_ = std::filesystem::temp_directory_path() /
           ("lcm_exec_mpirun_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string exec(const std::string& args) const {
    // `timeout`: a hang fails the test instead of blocking the suite.
    return "timeout 150 mpirun --allow-run-as-root -np 2 --mca btl_vader_single_copy_mechanism none " LCM_BINARY_DIR
           "/bin/lcm-exec bench collectives --layout tp=2 --group tp --out " + dir_.string() + " " + args;
  }
  nlohmann::json summary() const {
    std::ifstream in(dir_ / "summary.json");
    if (!in) {
      ADD_FAILURE() << "no " << (dir_ / "summary.json").string();
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  std::filesystem::path dir_;
};

TEST_F(MpirunTwoGpus, CollectivesAreCorrectAndReported) {
  const RunResult r = run_command(exec("-b 1M -e 16M -f 4 -w 2 -n 5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("#       size"), std::string::npos) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["world_size"], 2);
  ASSERT_EQ(j["points"].size(), 15u);  // 5 collectives x 3 sizes
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p["correct"].get<bool>()) << p.dump();
    EXPECT_EQ(p["#wrong"], 0);
    EXPECT_EQ(p["group_size"], 2);
    EXPECT_GT(p["busbw"].get<double>(), 0.0);
    const std::string c = p["collective"];
    const double f = c == "all_reduce" ? 1.0 : c == "send_recv" ? 1.0 : 0.5;  // 2(n-1)/n, 1, (n-1)/n at n = 2
    EXPECT_NEAR(p["busbw"].get<double>(), p["algbw"].get<double>() * f, 1e-9 * p["algbw"].get<double>());
    EXPECT_GT(p["checked"].get<int64_t>(), 0);
  }
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(dir_ / ("trace_rank" + std::to_string(rank) + ".json"));
    ASSERT_TRUE(in) << "trace of rank " << rank;
    const nlohmann::json t = nlohmann::json::parse(in);
    EXPECT_EQ(t["distributedInfo"]["rank"], rank);
    int allreduce = 0;
    for (const auto& e : t["traceEvents"]) {
      EXPECT_EQ(e["pid"], rank);
      if (e["name"] == "bench.allreduce.tp") ++allreduce;
    }
    EXPECT_GE(allreduce, 5 * 3);
  }
}

TEST_F(MpirunTwoGpus, PlantedWrongElementFailsTheRun) {
  const RunResult r = run_command(exec("--ops all_reduce -b 1M -e 1M -w 1 -n 3 --inject corrupt@rank=1,point=0"));
  EXPECT_EQ(r.exit_code, 6) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j["status"], "wrong_results");
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_FALSE(j["points"][0]["correct"].get<bool>());
  EXPECT_GE(j["points"][0]["#wrong"].get<int64_t>(), 1);
}

TEST_F(MpirunTwoGpus, ResumeSkipsFinishedPoints) {
  ASSERT_EQ(run_command(exec("--ops all_gather -b 1M -e 2M -w 1 -n 3")).exit_code, 0);
  const RunResult r = run_command(exec("--ops all_gather -b 1M -e 4M -w 1 -n 3 --resume"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed"), std::string::npos) << r.output;
  const nlohmann::json j = summary();
  ASSERT_EQ(j["points"].size(), 3u);
  int resumed = 0;
  for (const auto& p : j["points"]) resumed += p["extra"].value("resumed", false) ? 1 : 0;
  EXPECT_EQ(resumed, 2);
}

TEST_F(MpirunTwoGpus, StalledRankMakesTheOtherExitWithinTheTimeout) {
  const double timeout = 10;
  const RunResult r = run_command(exec("--ops all_reduce -b 1M -e 1M -w 2 -n 5 --timeout 10 --inject stall@rank=1,seconds=300"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  // NCCL init and warm-up take a few seconds, ncclCommAbort gets at most 10 s; the stall
  // itself is 300 s.
  EXPECT_LT(r.seconds, timeout + 40) << r.output;
  EXPECT_NE(r.output.find("rank 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bench.allreduce.tp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timeout"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank(s) 1 never reached this op"), std::string::npos) << r.output;
  const nlohmann::json j = summary();
  ASSERT_TRUE(j.contains("failure")) << j.dump();
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["failure"]["rank"], 0);
  EXPECT_EQ(j["failure"]["kind"], "timeout");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "trace_rank0.json"));
}

}  // namespace
