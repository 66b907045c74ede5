// The lcm-exec binary on bad command lines: every option is parsed and checked before CUDA,
// NCCL (and, for what needs no world size, MPI) start, so bad input gives one line
// `lcm-exec: <what was expected>` on stderr and exit code 2 on any machine, a GPU-less one
// included (the binary used to report "no CUDA device" for `--layout garbage`).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace {

struct ExecRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ExecRun lcm_exec(const std::string& args) {
  ExecRun r;
  // `timeout`: a run that reached the device and hung fails instead of blocking the suite.
  const std::string cmd = "timeout 60 " LCM_BINARY_DIR "/bin/lcm-exec " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Exit code 2 and exactly one line, `lcm-exec: ...` containing `expected`.
void expect_usage_error(const std::string& args, const std::string& expected) {
  SCOPED_TRACE("lcm-exec " + args);
  const ExecRun r = lcm_exec(args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("lcm-exec: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CUDA"), std::string::npos) << r.output;
}

TEST(ExecCommandLine, SyntaxErrorsExitTwoBeforeTheDevice) {
  expect_usage_error("bench collectives --layout garbage", "--layout: 'garbage': expected KEY=VALUE");
  expect_usage_error("bench collectives --layout tp=2,order=tp-cp-dp", "expected a permutation of tp-cp-ep-dp-pp");
  expect_usage_error("bench collectives --ops all_reduce,broadcast", "unknown collective 'broadcast'");
  expect_usage_error("bench membw --methods dma", "unknown method 'dma'");
  expect_usage_error("bench gemm --shapes 4096x4096", "expected MxNxK");
  expect_usage_error("bench gemm --dtype fp16", "--dtype: 'fp16'");
  expect_usage_error("bench moe --score relu", "--score: 'relu' (softmax, sigmoid)");
  expect_usage_error("bench attention --check most", "--check: 'most'");
  expect_usage_error("bench tensors", "unknown benchmark 'tensors'");
}

TEST(ExecCommandLine, WorldSizeErrorsExitTwoBeforeTheDevice) {
  // One process, no mpirun: an MPI singleton of world size 1.
  expect_usage_error("bench collectives --layout tp=3", "world size 1 is not divisible by tp*cp*pp = 3");
  expect_usage_error("bench collectives --layout dp=2", "dp is derived as world/(tp*cp*pp) = 1, not 2");
  expect_usage_error("bench moe --layout ep=2", "world size 1 is not divisible by etp*ep*pp = 2");
}

TEST(ExecCommandLine, HelpExitsZero) {
  const ExecRun r = lcm_exec("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage: mpirun -np N lcm-exec bench"), std::string::npos);
}

}  // namespace
