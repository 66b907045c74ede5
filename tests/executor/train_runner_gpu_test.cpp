// lcm-exec train on a GPU (label gpu; skips without one): a tiny dense GQA model trains and
// writes a valid summary and trace whose op names are the schedule's; the copy task is
// learned. The binary runs as a child process, as a user runs it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "lcm/executor/train/summary.hpp"

namespace {

namespace fs = std::filesystem;

std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return "";
}
#define LCM_REQUIRE_GPU()                                \
  do {                                                   \
    const std::string why = no_gpu_reason();             \
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why; \
  } while (0)

// A tiny Llama-like GQA model on one GPU: 2 layers, hidden 256, 8 query / 2 KV heads of 32,
// SwiGLU 512, vocab 1000 (padded to 1024), 256-token sequences, 2 micro-batches.
fs::path tiny_scenario(const fs::path& dir, const std::string& recompute) {
  fs::create_directories(dir);
  const fs::path p = dir / "tiny.yaml";
  std::ofstream f(p);
  f << "name: tiny-gqa\n"
       "model:\n  name: tiny\n  num_layers: 2\n  hidden_size: 256\n  ffn_hidden_size: 512\n"
       "  num_attention_heads: 8\n  num_query_groups: 2\n  kv_channels: 32\n  vocab_size: 1000\n"
       "  untie_embeddings_and_output_weights: true\n  swiglu: true\n  add_bias_linear: false\n"
       "  normalization: RMSNorm\n  position_embedding_type: rope\n  rotary_base: 10000\n"
       "  hidden_dropout: 0.0\n  attention_dropout: 0.0\n"
       "training:\n  seq_length: 256\n  micro_batch_size: 1\n  global_batch_size: 2\n  precision: bf16\n"
       "parallel:\n  recompute_granularity: "
    << recompute << "\n"
    << (recompute == "full" ? "  recompute_method: uniform\n  recompute_num_layers: 1\n" : "")
    << "hardware:\n  profile: h200-sxm\n  num_gpus: 1\n";
  return p;
}

int run(const std::string& args, std::string* out = nullptr) {
  const std::string cmd = "timeout 600 " LCM_BINARY_DIR "/bin/lcm-exec train " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n = 0;
  std::string text;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

lcm::exec::train::TrainSummary read_summary(const fs::path& dir) {
  std::ifstream f(dir / "summary.json");
  return lcm::exec::train::summary_from_json(nlohmann::json::parse(f));
}

TEST(TrainOnGpu, TinyDenseTrainsAndWritesASummary) {
  LCM_REQUIRE_GPU();
  for (const std::string rc : {"none", "selective", "full"}) {
    SCOPED_TRACE(rc);
    const fs::path dir = fs::temp_directory_path() / ("lcm_train_tiny_" + rc);
    fs::remove_all(dir);
    std::string log;
    ASSERT_EQ(run(tiny_scenario(dir, rc).string() + " --steps 3 --warmup 1 --out " + dir.string(), &log), 0) << log;
    const auto s = read_summary(dir);
    ASSERT_EQ(s.steps.size(), 3u);
    EXPECT_EQ(s.recompute, rc);
    EXPECT_EQ(s.micro_batches, 2);
    EXPECT_EQ(s.measured_steps, 2);
    for (const auto& st : s.steps) {
      EXPECT_TRUE(std::isfinite(st.loss));
      EXPECT_EQ(st.tokens, 512);
    }
    // Synthetic uniform tokens: the initial loss is near ln(1000) = 6.91.
    EXPECT_NEAR(s.steps[0].loss, 6.91, 0.3);
    EXPECT_GT(s.step_time_median, 0.0);
    EXPECT_GT(s.peak_allocated, 0u);
    EXPECT_GE(s.peak_reserved, s.peak_allocated);
    // Every measured op is a schedule name; the per-layer ones carry layers 0 and 1.
    std::set<std::string> names;
    for (const auto& o : s.ops) names.insert(o.name);
    EXPECT_TRUE(names.count("L.attn.core.bwd"));
    EXPECT_TRUE(names.count("L.mlp.fc1.bwd.wgrad"));
    EXPECT_TRUE(names.count("optimizer.step"));
    EXPECT_EQ(names.count("L.attn.core.recompute"), rc == "none" ? 0u : 1u);
    EXPECT_TRUE(fs::exists(dir / "trace.rank0.json"));
  }
}

TEST(TrainOnGpu, CopyTaskIsLearned) {
  LCM_REQUIRE_GPU();
  const fs::path dir = fs::temp_directory_path() / "lcm_train_copy";
  fs::remove_all(dir);
  std::string log;
  ASSERT_EQ(run(tiny_scenario(dir, "none").string() + " --data copy --steps 300 --lr 1e-3 --min-lr 1e-4 "
                "--lr-warmup-steps 20 --weight-decay 0 --out " + dir.string(), &log), 0) << log;
  const auto s = read_summary(dir);
  ASSERT_EQ(s.steps.size(), 300u);
  EXPECT_LT(s.steps.back().loss, 0.1) << "first " << s.steps.front().loss;
}

}  // namespace
