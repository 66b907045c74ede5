// GPU test of the training MoE block (moe_block.hpp) against the CPU reference
// (ref::moe_block with bf16 rounding where the GPU stores bf16): loss, output, dx and every
// parameter gradient, for softmax top-2 with capacity factor 1.0 (probs and position
// policies), sigmoid group-limited routing with shared experts and expert bias, and dropless.
// Cosine similarity >= 0.999 and max error <= 2% of the tensor's largest reference value;
// the routing statistics must match exactly. A planted error must fail the check.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lcm/executor/gemm.hpp"
#include "lcm/executor/train/allocator.hpp"
#include "lcm/executor/train/moe_block.hpp"
#include "lcm/executor/train/reference.hpp"
#include "train_check.hpp"
#include "require_gpu.hpp"

namespace lcm::exec::train {
namespace {

std::vector<float> rand_bf16(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = ref::bf16_round(d(g));
  return v;
}
bf16* up_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    b[i] = static_cast<uint16_t>(u >> 16);  // already bf16 values
  }
  bf16* p = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(b.size(), 1) * 2), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}
std::vector<float> down_bf16(const bf16* p, size_t n) {
  std::vector<uint16_t> b(n);
  EXPECT_EQ(cudaMemcpy(b.data(), p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(b[i]) << 16;
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}
std::vector<float> down_f32(const float* p, size_t n) {
  std::vector<float> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

bool close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what, bool report) {
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  const double cos = testing::cosine(got, want);
  const testing::Check c = testing::compare(got, want, 0.0, 0.02 * scale + 1e-6, what);
  const bool ok = cos >= 0.999 && c.ok();
  if (!ok && report) ADD_FAILURE() << what << ": cosine " << cos << "; " << testing::describe(c, got, want);
  return ok;
}

struct Case {
  const char* name;
  RouterScore score;
  int groups, group_topk;
  int64_t shared;
  bool bias;
  double cf;
  bool by_position, pad;
};

void run_case(const Case& k) {
  MoeBlockConfig c;
  c.tokens = 16;
  c.hidden = 32;
  c.expert_ffn = 16;
  c.shared_ffn = k.shared;
  c.experts = 8;
  c.topk = 2;
  c.score = k.score;
  c.groups = k.groups;
  c.group_topk = k.group_topk;
  c.expert_bias = k.bias;
  c.capacity_factor = k.cf;
  c.drop_by_position = k.by_position;
  c.pad_to_capacity = k.pad;
  c.aux_loss_coeff = 0.1f;
  c.z_loss_coeff = 0.01f;
  const int64_t T = c.tokens, h = c.hidden;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    CachingAllocator alloc(cuda_backend());
    LtGemm gemm(s, int64_t{32} << 20);
    MoeBlock block(c, alloc, gemm, s);
    ref::MoeParams p;
    std::vector<ParamView> views = block.param_shapes();
    std::vector<bf16*> weights;
    std::vector<float*> grads;
    uint64_t seed = 100;
    for (ParamView& v : views) {
      const std::string name = v.name;
      const float scale = name == "router" ? 0.3f : name == "expert_bias" ? 0.05f : 0.2f;
      const std::vector<float> w = rand_bf16(static_cast<size_t>(v.numel), ++seed, scale);
      if (name == "router") p.router = w;
      else if (name == "experts.fc1") p.fc1 = w;
      else if (name == "experts.fc2") p.fc2 = w;
      else if (name == "shared.fc1") p.shared_fc1 = w;
      else if (name == "shared.fc2") p.shared_fc2 = w;
      else p.expert_bias = w;
      v.weight = up_bf16(w);
      weights.push_back(v.weight);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&v.grad), static_cast<size_t>(v.numel) * 4), cudaSuccess);
      ASSERT_EQ(cudaMemset(v.grad, 0, static_cast<size_t>(v.numel) * 4), cudaSuccess);
      grads.push_back(v.grad);
    }
    block.bind(views);
    const std::vector<float> x = rand_bf16(static_cast<size_t>(T * h), 1, 1.0f), dy = rand_bf16(x.size(), 2, 1.0f);
    bf16* dx_in = up_bf16(x);
    bf16* ddy = up_bf16(dy);
    bf16 *dyv = nullptr, *ddx = nullptr;
    float* daux = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dyv), x.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ddx), x.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&daux), 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(daux, 0, 4), cudaSuccess);
    block.forward(dx_in, dyv, daux, 0, 0, nullptr);
    block.backward(ddy, ddx, 1.0f, 0, 0, nullptr);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);

    const ref::MoeResult r = ref::moe_block(c, p, x, dy.data(), 1.0f, true);
    EXPECT_EQ(block.load(), r.load) << k.name;
    EXPECT_EQ(block.kept(), r.kept) << k.name;
    EXPECT_NEAR(down_f32(daux, 1)[0], r.aux_loss, 1e-4 * r.aux_loss) << k.name << " aux + z loss";
    const std::vector<float> y = down_bf16(dyv, x.size());
    close(y, r.y, std::string(k.name) + " y", true);
    close(down_bf16(ddx, x.size()), r.dx, std::string(k.name) + " dx", true);
    for (size_t i = 0; i < views.size(); ++i) {
      const std::string name = views[i].name;
      if (name == "expert_bias") continue;  // selection only: no gradient
      const std::vector<float> g = down_f32(grads[i], static_cast<size_t>(views[i].numel));
      const std::vector<float>& want = name == "router" ? r.d_router : name == "experts.fc1" ? r.d_fc1
                                       : name == "experts.fc2" ? r.d_fc2 : name == "shared.fc1" ? r.d_shared_fc1
                                                                                                 : r.d_shared_fc2;
      close(g, want, std::string(k.name) + " d" + name, true);
    }
    // The check bites: one output element moved by 10% of the output's scale.
    std::vector<float> bad = y;
    float scale = 0;
    for (float v : r.y) scale = std::max(scale, std::fabs(v));
    bad[bad.size() / 3] += 0.1f * scale;
    EXPECT_FALSE(close(bad, r.y, "planted", false)) << k.name << ": a planted error went unnoticed";

    for (bf16* w : weights) cudaFree(w);
    for (float* g : grads) cudaFree(g);
    cudaFree(dx_in);
    cudaFree(ddy);
    cudaFree(dyv);
    cudaFree(ddx);
    cudaFree(daux);
  }
  cudaStreamDestroy(s);
}

class TrainMoeBlock : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string why = ::lcm::test::no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_P(TrainMoeBlock, MatchesReference) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Routing, TrainMoeBlock,
    ::testing::Values(Case{"softmax_top2_cf1_probs", RouterScore::kSoftmax, 0, 0, 0, false, 1.0, false, false},
                      Case{"softmax_top2_cf1_position", RouterScore::kSoftmax, 0, 0, 0, false, 1.0, true, false},
                      Case{"softmax_top2_cf1_probs_padded", RouterScore::kSoftmax, 0, 0, 0, false, 1.0, false, true},
                      Case{"sigmoid_grouped_shared_bias", RouterScore::kSigmoid, 4, 2, 32, true, 0.0, false, false},
                      Case{"softmax_dropless", RouterScore::kSoftmax, 0, 0, 0, false, 0.0, false, false}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace lcm::exec::train
