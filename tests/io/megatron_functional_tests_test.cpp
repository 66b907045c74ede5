// Dev-only check: import the MODEL_ARGS of every Megatron-LM functional test under
// tests/functional_tests/test_cases/{gpt,moe,mixtral} of a Megatron-LM checkout
// ($LCM_MEGATRON_DIR, default /work/ref/megatron; without one, the copies in tests/data/megatron). H100 tests are those
// with a golden_values_*dgx_h100*/*dgxh100* file. The GPU count is the recipes' 8 (one
// DGX node) unless the layout needs more, then the smallest multiple of 8 that fits.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "io_test_util.hpp"
#include "lcm/model/io/megatron_import.hpp"

namespace lcm::io::test {
namespace {

namespace fs = std::filesystem;

std::string megatron_dir() {
  const char* env = std::getenv("LCM_MEGATRON_DIR");
  return env ? env : "/work/ref/megatron";
}

int flag_int(const std::vector<MegatronFlag>& flags, const std::string& name, int dflt) {
  for (auto it = flags.rbegin(); it != flags.rend(); ++it)
    if (it->name == name) return std::atoi(it->value.c_str());
  return dflt;
}

// 8 GPUs (one DGX node, the recipes' default) when the layout fits, else the smallest of
// 1, 2, 4 (single-GPU tests) or a larger multiple of 8 that the layout and batch divide.
int gpus_for(const std::vector<MegatronFlag>& flags) {
  const int tp = flag_int(flags, "tensor-model-parallel-size", 1), pp = flag_int(flags, "pipeline-model-parallel-size", 1),
            cp = flag_int(flags, "context-parallel-size", 1), ep = flag_int(flags, "expert-model-parallel-size", 1),
            etp = flag_int(flags, "expert-tensor-parallel-size", tp), mbs = flag_int(flags, "micro-batch-size", 1),
            gbs = flag_int(flags, "global-batch-size", 0);
  std::vector<int> candidates = {8, 1, 2, 4};
  for (int n = 16; n <= 4096; n += 8) candidates.push_back(n);
  for (int n : candidates) {
    if (n % (tp * pp * cp) || n % (etp * ep * pp)) continue;
    if (gbs > 0 && gbs % (mbs * (n / (tp * pp * cp)))) continue;
    return n;
  }
  return 8;
}

// H100 configs lcm rejects on purpose, with the reason.
const std::map<std::string, std::string>& known_rejections() {
  static const std::map<std::string, std::string> m = {
      {"gpt_dynamic_inference_tp2_pp2_ep2_gptoss_20b_swa",
       "EP 2 x TP 2 without --sequence-parallel: Megatron warns (\"sequence parallelism must be used\"), "
       "validate_scenario rejects it"},
  };
  return m;
}

std::string slurp_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Without a checkout (CI), the copies bundled in tests/data/megatron, which must all import:
// the test never skips (only GPU tests may, .ci/check-skips).
TEST(MegatronFunctionalTests, EveryBundledModelConfigImports) {
  auto hw = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  ASSERT_TRUE(hw.ok());
  int n = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/tests/data/megatron")) {
    auto flags = parse_megatron_model_config(slurp_file(e.path()), e.path().string());
    ASSERT_TRUE(flags.ok()) << flags.error().str();
    auto r = import_megatron(flags.value(), gpus_for(flags.value()), hw.value(), e.path().stem().string());
    if (e.path().stem() == "deepseek_proxy_fsdp_ep2_fsdp2") {  // an fp32 recipe: rejected by design
      EXPECT_THAT(r.ok() ? "" : r.error().str(), testing::HasSubstr("--bf16: Megatron trains in fp32"));
    } else {
      EXPECT_TRUE(r.ok()) << e.path() << ": " << (r.ok() ? "" : r.error().str());
    }
    ++n;
  }
  EXPECT_EQ(n, 9);
}

TEST(MegatronFunctionalTests, EveryH100ModelConfigImports) {
  const fs::path root = fs::path(megatron_dir()) / "tests/functional_tests/test_cases";
  if (!fs::exists(root)) {
    std::printf("no Megatron-LM checkout at %s: EveryBundledModelConfigImports covers the bundled copies\n",
                megatron_dir().c_str());
    return;
  }
  auto hw = load_hardware_profile(profile_dir() + "/h100-sxm.yaml");
  ASSERT_TRUE(hw.ok());
  int total = 0, ok = 0, h100_total = 0, h100_ok = 0, h100_rejected = 0;
  std::string failures;
  for (const char* group : {"gpt", "moe", "mixtral"}) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root / group)) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      const fs::path cfg = dir / "model_config.yaml";
      if (!fs::exists(cfg)) continue;
      bool h100 = false;
      for (const auto& f : fs::directory_iterator(dir)) {
        const std::string n = f.path().filename().string();
        h100 |= n.find("dgx_h100") != std::string::npos || n.find("dgxh100") != std::string::npos;
      }
      auto flags = parse_megatron_model_config(slurp_file(cfg), cfg.string());
      std::string why;
      if (!flags.ok()) {
        why = flags.error().str();
      } else if (flags.value().empty()) {
        continue;  // an empty MODEL_ARGS (arguments come from elsewhere)
      } else {
        auto r = import_megatron(flags.value(), gpus_for(flags.value()), hw.value(), dir.filename().string());
        if (!r.ok()) why = r.error().str();
      }
      if (!why.empty() && known_rejections().count(dir.filename().string())) {
        std::printf("known rejection: %s (%s)\n", dir.filename().string().c_str(),
                    known_rejections().at(dir.filename().string()).c_str());
        ++total;
        h100_total += h100;
        h100_rejected += h100;
        continue;
      }
      ++total;
      h100_total += h100;
      if (why.empty()) {
        ++ok;
        h100_ok += h100;
      } else {
        failures += std::string(h100 ? "[H100] " : "       ") + why + "\n";
      }
    }
  }
  std::printf("Megatron functional tests: %d/%d import (H100: %d/%d, %d rejected by design)\n%s", ok, total, h100_ok,
              h100_total, h100_rejected, failures.c_str());
  EXPECT_EQ(h100_ok + h100_rejected, h100_total) << failures;
}

}  // namespace
}  // namespace lcm::io::test
