// Single-GPU tests of the executor's device code: cuBLASLt GEMMs against the CPU, a
// planted wrong output element found by the checker, and the verified copy kernel.
// Every test skips with the reason when no GPU is usable.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "lcm/executor/gemm.hpp"
#include "lcm/executor/kernels.cuh"
#include "require_gpu.hpp"

namespace lcm::exec {
namespace {

// Empty when a GPU is usable, else why not.
class GemmOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    LCM_REQUIRE_GPU();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  bool fp8_capable() const {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    return p.major * 10 + p.minor >= 89;
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(GemmOnGpu, SmallBf16MatchesCpuReference) {
  GemmRunner r(stream_, 32 << 20);
  r.setup({128, 256, 512, GemmDType::kBf16}, 2, 42, 1);
  ASSERT_TRUE(r.supported());
  r.enqueue(0);
  r.enqueue(1);
  for (int s = 0; s < 2; ++s) {
    const Comparison c = r.verify(s, 1);
    EXPECT_EQ(c.checked, 128 * 256);  // every element
    EXPECT_EQ(c.wrong, 0) << "max err/tol " << c.max_err_ratio;
    EXPECT_LT(c.rel_l2, 5e-3);
  }
}

TEST_F(GemmOnGpu, SmallFp8MatchesCpuReference) {
  if (!fp8_capable()) GTEST_SKIP() << "fp8 needs compute capability 8.9 or newer";
  GemmRunner r(stream_, 32 << 20);
  r.setup({128, 256, 512, GemmDType::kFp8E4M3}, 1, 43, 1);
  ASSERT_TRUE(r.supported()) << "cuBLASLt offers no fp8 TN algorithm";
  r.enqueue(0);
  const Comparison c = r.verify(0, 1);
  EXPECT_EQ(c.checked, 128 * 256);
  EXPECT_EQ(c.wrong, 0) << "max err/tol " << c.max_err_ratio;
}

// Block scales (1x128 activation, 128x128 weight) holding the per-tensor values: the same
// product as the per-tensor run, so the CPU reference applies unchanged. Hopper only (sm_90:
// cuBLASLt's VEC128 / BLK128x128 modes); m, n not multiples of 128 test the scale padding.
TEST_F(GemmOnGpu, SmallFp8BlockScaledMatchesCpuReference) {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  if (p.major != 9) GTEST_SKIP() << "block-scaled fp8 (VEC128 / BLK128x128) is a Hopper (sm_90) cuBLASLt mode";
  GemmRunner r(stream_, 32 << 20);
  r.setup({200, 320, 512, GemmDType::kFp8Block}, 1, 45, 1);
  ASSERT_TRUE(r.supported()) << r.unsupported_reason();
  r.enqueue(0);
  const Comparison c = r.verify(0, 1);
  EXPECT_EQ(c.checked, 200 * 320);
  EXPECT_EQ(c.wrong, 0) << "max err/tol " << c.max_err_ratio;
  GemmRunner odd(stream_, 32 << 20);
  odd.setup({128, 256, 500, GemmDType::kFp8Block}, 1, 46, 1);
  EXPECT_FALSE(odd.supported());
  EXPECT_EQ(odd.unsupported_reason(), "fp8_block needs K a multiple of 128");
}

TEST_F(GemmOnGpu, PlantedWrongElementIsDetected) {
  GemmRunner r(stream_, 32 << 20);
  r.setup({128, 256, 512, GemmDType::kBf16}, 1, 44, 1);
  ASSERT_TRUE(r.supported());
  r.enqueue(0);
  ASSERT_EQ(r.verify(0, 1).wrong, 0);
  r.corrupt_output(0, 3, 5, 1000.0f);
  const Comparison c = r.verify(0, 1);
  EXPECT_EQ(c.wrong, 1);
  EXPECT_FALSE(c.ok());
}

TEST_F(GemmOnGpu, UnwrittenOutputIsDetected) {
  GemmRunner r(stream_, 32 << 20);
  r.setup({128, 256, 512, GemmDType::kBf16}, 1, 45, 1);
  ASSERT_TRUE(r.supported());
  // No enqueue: the output still holds the NaN poison written at setup.
  EXPECT_EQ(r.verify(0, 1).wrong, 128 * 256);
}

TEST_F(GemmOnGpu, LargeShapeSampledCheckPasses) {
  GemmRunner r(stream_, 32 << 20);
  r.setup({2048, 3072, 4096, GemmDType::kBf16}, 1, 46, 4);
  ASSERT_TRUE(r.supported());
  for (int a = 0; a < r.num_algos(); ++a) {  // every heuristic candidate computes the same product
    r.select_algo(a);
    r.enqueue(0);
    const Comparison c = r.verify(0, 3);
    EXPECT_EQ(c.checked, 32 * 32);
    EXPECT_EQ(c.wrong, 0) << "algo " << a;
  }
}

// Shapes that are not multiples of 16: the rows are padded to 16 bytes (gemm.hpp), bf16
// runs and matches the CPU; fp8 runs correctly or says why not.
TEST_F(GemmOnGpu, ShapesNotMultipleOf16) {
  for (const GemmProblem& p : {GemmProblem{3000, 5000, 7000, GemmDType::kBf16}, GemmProblem{129, 250, 77, GemmDType::kBf16}}) {
    GemmRunner r(stream_, 32 << 20);
    r.setup(p, 1, 47, 1);
    ASSERT_TRUE(r.supported()) << p.m << "x" << p.n << "x" << p.k << ": " << r.unsupported_reason();
    r.enqueue(0);
    const Comparison c = r.verify(0, 5);
    EXPECT_EQ(c.wrong, 0) << p.m << "x" << p.n << "x" << p.k << ": max err/tol " << c.max_err_ratio;
    EXPECT_TRUE(c.ok());
  }
  if (!fp8_capable()) return;
  GemmRunner r(stream_, 32 << 20);
  r.setup({129, 250, 77, GemmDType::kFp8E4M3}, 1, 48, 1);
  if (r.supported()) {
    r.enqueue(0);
    EXPECT_TRUE(r.verify(0, 5).ok());
  } else {
    EXPECT_FALSE(r.unsupported_reason().empty());
  }
}

TEST(CopyOnGpu, VectorCopyIsVerifiedAndCorruptionFound) {
  LCM_REQUIRE_GPU();
  const size_t bytes = (64u << 20) + 48;  // not a multiple of the grid: exercises the tail
  void* src = nullptr;
  void* dst = nullptr;
  unsigned long long* wrong = nullptr;
  ASSERT_EQ(cudaMalloc(&src, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&wrong, sizeof *wrong), cudaSuccess);
  kernels::fill_words(static_cast<uint32_t*>(src), bytes / 4, 9, nullptr);
  ASSERT_EQ(cudaMemset(dst, 0, bytes), cudaSuccess);
  kernels::copy_vec16(dst, src, bytes, nullptr);
  unsigned long long n = 1;
  ASSERT_EQ(cudaMemset(wrong, 0, sizeof *wrong), cudaSuccess);
  kernels::count_wrong_words(static_cast<const uint32_t*>(dst), bytes / 4, 9, wrong, nullptr);
  ASSERT_EQ(cudaMemcpy(&n, wrong, sizeof n, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(dst) + bytes - 4, 0x5a, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(wrong, 0, sizeof *wrong), cudaSuccess);
  kernels::count_wrong_words(static_cast<const uint32_t*>(dst), bytes / 4, 9, wrong, nullptr);
  ASSERT_EQ(cudaMemcpy(&n, wrong, sizeof n, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(n, 1u);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(wrong);
}

}  // namespace
}  // namespace lcm::exec
