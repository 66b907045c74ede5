// Single-GPU tests of `lcm-exec bench attention`:
//   - the project's reference attention kernels against a float64 CPU computation;
//   - cuDNN's fused attention (forward and backward, GQA and MHA, several head dims) against
//     the reference kernels, every output element of small shapes and sampled rows of a
//     large one;
//   - the check fails when an output element is wrong or an output was never written;
//   - `lcm-exec bench attention` end to end, and with --inject corrupt it exits 6.
// Every test skips with the reason when no GPU (or no cuDNN, or no mpirun) is usable.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "lcm/executor/attention.hpp"
#include "lcm/executor/attention_ref.cuh"
#include "lcm/executor/kernels.cuh"
#include "lcm/executor/pattern.hpp"
#ifdef LCM_EXEC_HAVE_CUDNN
#include "lcm/executor/attention_runner.hpp"
#include "require_gpu.hpp"
#endif

namespace lcm::exec {
namespace {

float bf16_value(uint64_t seed, uint64_t i) { return __bfloat162float(__float2bfloat16_rn(pattern::uniform_pm1(seed, i))); }

// ---------------------------------------------------------------- reference vs float64

// The GPU reference against a CPU float64 computation from the definitions; with `window` > 0
// query i attends keys max(0, i - window) .. i only (a sliding window).
void reference_matches_cpu(int64_t window) {
  AttentionProblem p;
  p.b = 2;
  p.s = 70;  // not a multiple of anything the kernels chunk by
  p.hq = 4;
  p.hkv = 2;
  p.d = 32;
  p.scale = 0.6f;  // a peakier softmax than 1/sqrt(d)
  p.window = window;
  const auto first_key = [&](int64_t i) { return window > 0 ? std::max<int64_t>(0, i - window) : 0; };
  const size_t qn = static_cast<size_t>(p.q_elems()), kn = static_cast<size_t>(p.kv_elems());
  void *q, *k, *v, *g;
  ASSERT_EQ(cudaMalloc(&q, qn * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&k, kn * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&v, kn * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&g, qn * 2), cudaSuccess);
  kernels::fill_uniform(q, kernels::ElemType::kBf16, qn, 11, nullptr);
  kernels::fill_uniform(k, kernels::ElemType::kBf16, kn, 12, nullptr);
  kernels::fill_uniform(v, kernels::ElemType::kBf16, kn, 13, nullptr);
  kernels::fill_uniform(g, kernels::ElemType::kBf16, qn, 14, nullptr);

  // CPU, float64, straight from the definitions.
  const int64_t B = p.b, S = p.s, HQ = p.hq, D = p.d, G = p.group();
  const double sc = p.scale;
  std::vector<double> O(qn), dQ(qn, 0), dK(kn, 0), dV(kn, 0), L(static_cast<size_t>(p.stat_elems()));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < HQ; ++h) {
      const int64_t hk = h / G;
      std::vector<double> P(static_cast<size_t>(S * S), 0.0);
      for (int64_t i = 0; i < S; ++i) {
        double mx = -1e300;
        std::vector<double> sv(static_cast<size_t>(i + 1), -1e300);
        for (int64_t j = first_key(i); j <= i; ++j) {
          double dot = 0;
          for (int64_t t = 0; t < D; ++t)
            dot += bf16_value(11, p.q_offset(b, h, i, t)) * static_cast<double>(bf16_value(12, p.kv_offset(b, hk, j, t)));
          sv[static_cast<size_t>(j)] = sc * dot;
          mx = std::max(mx, sc * dot);
        }
        double z = 0;
        for (int64_t j = first_key(i); j <= i; ++j) z += std::exp(sv[static_cast<size_t>(j)] - mx);
        L[static_cast<size_t>(p.stat_offset(b, h, i))] = mx + std::log(z);
        for (int64_t j = first_key(i); j <= i; ++j) P[static_cast<size_t>(i * S + j)] = std::exp(sv[static_cast<size_t>(j)] - mx) / z;
        for (int64_t t = 0; t < D; ++t) {
          double o = 0;
          for (int64_t j = first_key(i); j <= i; ++j) o += P[static_cast<size_t>(i * S + j)] * bf16_value(13, p.kv_offset(b, hk, j, t));
          O[static_cast<size_t>(p.q_offset(b, h, i, t))] = o;
        }
      }
      for (int64_t i = 0; i < S; ++i) {
        double Di = 0;
        for (int64_t t = 0; t < D; ++t) Di += bf16_value(14, p.q_offset(b, h, i, t)) * O[static_cast<size_t>(p.q_offset(b, h, i, t))];
        for (int64_t j = first_key(i); j <= i; ++j) {
          double dp = 0;
          for (int64_t t = 0; t < D; ++t) dp += bf16_value(14, p.q_offset(b, h, i, t)) * static_cast<double>(bf16_value(13, p.kv_offset(b, hk, j, t)));
          const double pij = P[static_cast<size_t>(i * S + j)], ds = pij * (dp - Di);
          for (int64_t t = 0; t < D; ++t) {
            dQ[static_cast<size_t>(p.q_offset(b, h, i, t))] += sc * ds * bf16_value(12, p.kv_offset(b, hk, j, t));
            dK[static_cast<size_t>(p.kv_offset(b, hk, j, t))] += sc * ds * bf16_value(11, p.q_offset(b, h, i, t));
            dV[static_cast<size_t>(p.kv_offset(b, hk, j, t))] += pij * bf16_value(14, p.q_offset(b, h, i, t));
          }
        }
      }
    }

  // GPU reference, every row.
  const AttnSample smp = attention_sample(p, true, 0);
  std::vector<int32_t> qr, kr;
  for (const AttnRow& r : smp.q_rows) qr.insert(qr.end(), {r.b, r.h, r.i});
  for (const AttnRow& r : smp.kv_rows) kr.insert(kr.end(), {r.b, r.h, r.i});
  const size_t nq = smp.q_rows.size(), nk = smp.kv_rows.size(), d = static_cast<size_t>(p.d);
  int32_t *dqr, *dkr;
  float *o, *om, *lse, *ds, *da, *gq, *gqm, *gk, *gkm, *gv, *gvm;
  ASSERT_EQ(cudaMalloc(&dqr, qr.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dkr, kr.size() * 4), cudaSuccess);
  for (float** x : {&o, &om, &gq, &gqm}) ASSERT_EQ(cudaMalloc(x, nq * d * 4), cudaSuccess);
  for (float** x : {&lse, &ds, &da}) ASSERT_EQ(cudaMalloc(x, nq * 4), cudaSuccess);
  for (float** x : {&gk, &gkm, &gv, &gvm}) ASSERT_EQ(cudaMalloc(x, nk * d * 4), cudaSuccess);
  cudaMemcpy(dqr, qr.data(), qr.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dkr, kr.data(), kr.size() * 4, cudaMemcpyHostToDevice);
  kernels::AttnRefDesc rd{static_cast<int32_t>(p.b), static_cast<int32_t>(p.s), static_cast<int32_t>(p.hq),
                          static_cast<int32_t>(p.hkv), static_cast<int32_t>(p.d), p.scale, 1,
                          static_cast<int32_t>(window)};
  kernels::attention_ref_fwd(rd, q, k, v, g, dqr, static_cast<int>(nq), o, om, lse, ds, da, nullptr);
  kernels::attention_ref_dq(rd, q, k, v, g, dqr, static_cast<int>(nq), lse, ds, da, gq, gqm, nullptr);
  // Full rows are in [b][h][i] order, so the compact row arrays are already [b][h_q][s].
  kernels::attention_ref_dkv(rd, q, k, v, g, dkr, static_cast<int>(nk), lse, ds, da, gk, gkm, gv, gvm, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto host = [](const float* dp, size_t n) {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), dp, n * 4, cudaMemcpyDeviceToHost);
    return h;
  };
  const auto ho = host(o, nq * d), hl = host(lse, nq), hq = host(gq, nq * d), hk = host(gk, nk * d), hv = host(gv, nk * d);
  const auto rel = [](const std::vector<float>& got, const auto& ref_at) {
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double r = ref_at(i);
      e2 += (got[i] - r) * (got[i] - r);
      r2 += r * r;
    }
    return std::sqrt(e2 / r2);
  };
  size_t row = 0;
  std::vector<double> Oc(nq * d), Lc(nq), dQc(nq * d), dKc(nk * d), dVc(nk * d);
  for (const AttnRow& r : smp.q_rows) {
    Lc[row] = L[static_cast<size_t>(p.stat_offset(r.b, r.h, r.i))];
    for (size_t t = 0; t < d; ++t) {
      Oc[row * d + t] = O[static_cast<size_t>(p.q_offset(r.b, r.h, r.i, static_cast<int64_t>(t)))];
      dQc[row * d + t] = dQ[static_cast<size_t>(p.q_offset(r.b, r.h, r.i, static_cast<int64_t>(t)))];
    }
    ++row;
  }
  row = 0;
  for (const AttnRow& r : smp.kv_rows) {
    for (size_t t = 0; t < d; ++t) {
      dKc[row * d + t] = dK[static_cast<size_t>(p.kv_offset(r.b, r.h, r.i, static_cast<int64_t>(t)))];
      dVc[row * d + t] = dV[static_cast<size_t>(p.kv_offset(r.b, r.h, r.i, static_cast<int64_t>(t)))];
    }
    ++row;
  }
  // fp32 arithmetic over at most 70 terms: far below 1e-5 relative.
  EXPECT_LT(rel(ho, [&](size_t i) { return Oc[i]; }), 1e-5);
  EXPECT_LT(rel(hl, [&](size_t i) { return Lc[i]; }), 1e-6);
  EXPECT_LT(rel(hq, [&](size_t i) { return dQc[i]; }), 1e-5);
  EXPECT_LT(rel(hk, [&](size_t i) { return dKc[i]; }), 1e-5);
  EXPECT_LT(rel(hv, [&](size_t i) { return dVc[i]; }), 1e-5);
  for (void* x : {q, k, v, g}) cudaFree(x);
  for (void* x : std::initializer_list<void*>{dqr, dkr, o, om, lse, ds, da, gq, gqm, gk, gkm, gv, gvm}) cudaFree(x);
}

TEST(AttentionRefOnGpu, MatchesCpuFloat64) {
  LCM_REQUIRE_GPU();
  reference_matches_cpu(0);
}

// A sliding window of 17 keys on 70 tokens: rows near the start see their whole prefix, the
// rest 18 keys (the window and themselves).
TEST(AttentionRefOnGpu, SlidingWindowMatchesCpuFloat64) {
  LCM_REQUIRE_GPU();
  reference_matches_cpu(17);
}

// ---------------------------------------------------------------- cuDNN vs reference

#ifdef LCM_EXEC_HAVE_CUDNN

class CudnnAttentionOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    LCM_REQUIRE_GPU();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    runner_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  // Sets up and runs forward + backward on every set; false if cuDNN has no engine for the
  // shape (the caller fails or skips).
  bool run(int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int sets = 1, float scale = 0, int64_t window = 0) {
    AttentionProblem p;
    p.window = window;
    p.b = b;
    p.s = s;
    p.hq = hq;
    p.hkv = hkv;
    p.d = d;
    p.scale = scale;
    runner_ = std::make_unique<AttentionRunner>(stream_);
    runner_->setup(p, sets, 42 + static_cast<uint64_t>(d), 1);
    if (!runner_->supported()) return false;
    for (int i = 0; i < sets; ++i) {
      runner_->forward(i);
      runner_->backward(i);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return true;
  }
  void expect_correct(const AttnCheckSet& c, bool full) {
    const AttentionProblem& p = runner_->problem();
    for (int i = 0; i < kAttnOuts; ++i) {
      const Comparison& x = c.out[static_cast<size_t>(i)];
      const char* name = to_string(static_cast<AttnOut>(i));
      EXPECT_EQ(x.wrong, 0) << name << ": max err/tol " << x.max_err_ratio;
      EXPECT_EQ(x.nonfinite, 0) << name;
      EXPECT_LE(x.rel_l2, x.rel_l2_limit) << name;
      EXPECT_TRUE(x.ok()) << name;
      std::printf("  %-3s rel L2 %.2e, max err/tol %.3f (%lld checked)\n", name, x.rel_l2, x.max_err_ratio,
                  static_cast<long long>(x.checked));
    }
    if (full) {
      EXPECT_EQ(c[AttnOut::kO].checked, p.q_elems());
      EXPECT_EQ(c[AttnOut::kLse].checked, p.stat_elems());
      EXPECT_EQ(c[AttnOut::kDq].checked, p.q_elems());
      EXPECT_EQ(c[AttnOut::kDk].checked, p.kv_elems());
      EXPECT_EQ(c[AttnOut::kDv].checked, p.kv_elems());
    }
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<AttentionRunner> runner_;
};

// Shapes cuDNN supports on Hopper (d <= 128 or 256, any s): no engine is a failure.
#define LCM_RUN_OR_FAIL(...) \
  if (!run(__VA_ARGS__)) FAIL() << "cuDNN has no engine for this shape: " << runner_->unsupported_reason()
// Shapes whose support depends on the cuDNN version (d = 192 backward, s % 64 != 0).
#define LCM_RUN_OR_SKIP(...) \
  if (!run(__VA_ARGS__)) GTEST_SKIP() << "cuDNN has no engine for this shape: " << runner_->unsupported_reason()

TEST_F(CudnnAttentionOnGpu, GqaD128EveryElementMatchesReference) {
  LCM_RUN_OR_FAIL(2, 1024, 8, 2, 128, 2);
  std::printf("  cuDNN: %s\n", runner_->cudnn().describe().dump().c_str());
  for (int set = 0; set < 2; ++set) expect_correct(runner_->verify(set, true, 1), true);
}

TEST_F(CudnnAttentionOnGpu, MhaD64EveryElementMatchesReference) {
  LCM_RUN_OR_FAIL(1, 512, 4, 4, 64);
  expect_correct(runner_->verify(0, true, 1), true);
}

TEST_F(CudnnAttentionOnGpu, GqaD192EveryElementMatchesReference) {
  LCM_RUN_OR_SKIP(1, 1024, 4, 1, 192);
  expect_correct(runner_->verify(0, true, 1), true);
}

TEST_F(CudnnAttentionOnGpu, SequenceNotAMultipleOf64AndPeakySoftmax) {
  LCM_RUN_OR_SKIP(1, 1000, 8, 2, 64, 1, 0.5f);
  expect_correct(runner_->verify(0, true, 1), true);
}

// cuDNN's sliding window (the left-bound diagonal band after the causal one), GPT-OSS's
// geometry (64 / 8 heads of 64, window 128) at 1024 tokens: every element against the
// windowed reference.
TEST_F(CudnnAttentionOnGpu, SlidingWindowEveryElementMatchesReference) {
  LCM_RUN_OR_FAIL(1, 1024, 64, 8, 64, 1, 0, 128);
  expect_correct(runner_->verify(0, true, 1), true);
}

TEST_F(CudnnAttentionOnGpu, LargeShapeSampledRowsMatchReference) {
  LCM_RUN_OR_FAIL(1, 8192, 32, 8, 128);
  expect_correct(runner_->verify(0, false, 3), false);
}

TEST_F(CudnnAttentionOnGpu, PlantedWrongElementsAreDetected) {
  LCM_RUN_OR_FAIL(1, 512, 8, 2, 128);
  ASSERT_TRUE(runner_->verify(0, true, 1).fwd_ok());
  runner_->corrupt(0, AttnOut::kO, 0, 3, 100, 7, 4.0f);
  runner_->corrupt(0, AttnOut::kDk, 0, 1, 5, 0, -3.0f);
  AttnCheckSet c = runner_->verify(0, true, 1);
  EXPECT_EQ(c[AttnOut::kO].wrong, 1);
  EXPECT_EQ(c[AttnOut::kDk].wrong, 1);
  EXPECT_EQ(c[AttnOut::kDq].wrong, 0);
  EXPECT_FALSE(c.fwd_ok());
  EXPECT_FALSE(c.bwd_ok());
  runner_->corrupt(0, AttnOut::kLse, 0, 0, 0, 0, 7.0f);
  c = runner_->verify(0, true, 1);
  EXPECT_EQ(c[AttnOut::kLse].wrong, 1);
  // In sampled mode the row the benchmark's --inject corrupts (s - 1 of head 0) is checked.
  runner_->corrupt(0, AttnOut::kDq, 0, 0, 511, 0, 1.0e4f);
  c = runner_->verify(0, false, 9);
  EXPECT_GE(c[AttnOut::kDq].wrong, 1);
}

TEST_F(CudnnAttentionOnGpu, UnwrittenOutputsAreDetected) {
  AttentionProblem p;
  p.b = 1;
  p.s = 256;
  p.hq = 4;
  p.hkv = 2;
  p.d = 64;
  runner_ = std::make_unique<AttentionRunner>(stream_);
  runner_->setup(p, 1, 5, 1);
  ASSERT_TRUE(runner_->supported()) << runner_->unsupported_reason();
  // No forward or backward: every output still holds the NaN poison.
  AttnCheckSet c = runner_->verify(0, false, 1);
  EXPECT_EQ(c[AttnOut::kO].nonfinite, p.q_elems());
  EXPECT_EQ(c[AttnOut::kDv].nonfinite, p.kv_elems());
  EXPECT_FALSE(c.fwd_ok());
  EXPECT_FALSE(c.bwd_ok());
  // Forward only: the gradients are still unwritten.
  runner_->forward(0);
  c = runner_->verify(0, false, 1);
  EXPECT_TRUE(c.fwd_ok());
  EXPECT_FALSE(c.bwd_ok());
}

#endif  // LCM_EXEC_HAVE_CUDNN

// ---------------------------------------------------------------- the command line

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

class AttentionCommandLine : public ::testing::Test {
 protected:
  void SetUp() override {
    LCM_REQUIRE_GPU();
#ifndef LCM_EXEC_HAVE_CUDNN
    GTEST_SKIP() << "lcm-exec built without cuDNN";
#endif
    if (run_command("mpirun --version").exit_code != 0) GTEST_SKIP() << "mpirun not found";
    dir_ = std::filesystem::temp_directory_path() /
           ("lcm_exec_attention_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  RunResult exec(const std::string& args) const {
    return run_command("timeout 120 mpirun --allow-run-as-root -np 1 " LCM_BINARY_DIR
                       "/bin/lcm-exec bench attention --shapes 1x1024x8x2x64,1x4096x8x2x128 -w 1 --warmup-ms 0 -n 3 "
                       "--out " + dir_.string() + " " + args);
  }
  nlohmann::json summary() const {
    std::ifstream in(dir_ / "summary.json");
    if (!in) return nlohmann::json::object();
    return nlohmann::json::parse(in, nullptr, false);
  }
  std::filesystem::path dir_;
};

TEST_F(AttentionCommandLine, MeasuresAndChecksEveryPoint) {
  const RunResult r = exec("");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j.value("status", ""), "ok");
  ASSERT_EQ(j["points"].size(), 6u) << r.output;  // fwd, bwd, fwd+bwd per shape
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p.value("correct", false)) << p.dump();
    EXPECT_GT(p.value("tflops", 0.0), 0.0);
    EXPECT_GT(p.value("checked", 0), 0);
    EXPECT_EQ(p["extra"].value("check_mode", ""), p.value("shape", "") == "1x1024x8x2x64" ? "full" : "sampled");
  }
  EXPECT_EQ(j["points"][2].value("op", ""), "L.attn.core.fwd+bwd");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "trace_rank0.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "summary.csv"));
}

TEST_F(AttentionCommandLine, PlantedWrongResultFailsTheRun) {
  const RunResult r = exec("--inject corrupt@rank=0");
  EXPECT_EQ(r.exit_code, 6) << r.output;  // a correctness check failed
  EXPECT_NE(r.output.find("WRONG"), std::string::npos) << r.output;
  const nlohmann::json j = summary();
  EXPECT_EQ(j.value("status", ""), "wrong_results");
  ASSERT_GE(j["points"].size(), 3u);
  EXPECT_TRUE(j["points"][0].value("correct", false));   // fwd of the corrupted point: O untouched
  EXPECT_FALSE(j["points"][1].value("correct", true));   // bwd: dQ corrupted
  EXPECT_GE(j["points"][1].value("wrong", 0), 1);
  EXPECT_FALSE(j["points"][2].value("correct", true));   // fwd+bwd
  EXPECT_TRUE(j["points"][5].value("correct", false));   // the next point is clean
}

}  // namespace
}  // namespace lcm::exec
