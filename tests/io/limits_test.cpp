// Reliability at the input edge (issue 14): input files are regular and bounded, Megatron
// patterns are bounded in depth and length, every size has a cap named in its message, the
// validator applies the same caps to scenarios built in code, and the data directories are
// searched in their documented order.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "io_test_util.hpp"
#include "lcm/model/io/data_dir.hpp"
#include "lcm/model/io/input_file.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/mesh.hpp"
#include "megatron_flags.hpp"
#include "yaml_read.hpp"

namespace lcm::io::test {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("lcm_limits_test_" + std::to_string(::getpid()) + "_" +
                                                   testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

TEST(InputFile, ReadsARegularFileWhole) {
  TempDir d;
  std::ofstream(d / "a.yaml") << "name: x\n";
  auto r = read_input_file((d / "a.yaml").string(), "scenario");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value(), "name: x\n");
}

TEST(InputFile, RefusesAFifoWithoutBlocking) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "f").c_str(), 0600), 0);
  auto r = read_input_file((d / "f").string(), "scenario");  // no writer: must not block
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().str(), (d / "f").string() + ": cannot read scenario: a FIFO; lcm reads only regular files");
}

TEST(InputFile, RefusesDevicesDirectoriesAndMissingFiles) {
  TempDir d;
  EXPECT_EQ(read_input_file("/dev/zero", "scenario").error().str(),
            "/dev/zero: cannot read scenario: a character device; lcm reads only regular files");
  EXPECT_EQ(read_input_file((d / ".").string(), "scenario").error().message,
            "cannot read scenario: a directory; lcm reads only regular files");
  EXPECT_EQ(read_input_file((d / "none").string(), "scenario").error().message,
            "cannot read scenario: No such file or directory");
}

TEST(InputFile, RefusesAFileAboveTheLimit) {
  TempDir d;
  std::ofstream(d / "big") << std::string(1025, 'x');
  EXPECT_EQ(read_input_file((d / "big").string(), "scenario", 1024).error().message,
            "cannot read scenario: larger than 1 KiB (the limit on input files)");
  EXPECT_TRUE(read_input_file((d / "big").string(), "scenario", 1025).ok());
  EXPECT_EQ(kMaxInputBytes, size_t{16} << 20);
}

TEST(InputFile, BoundsAStream) {
  std::istringstream small("abc"), big(std::string(2000, 'y'));
  EXPECT_EQ(read_input_stream(small, "<stdin>", "input", 1024).value(), "abc");
  EXPECT_EQ(read_input_stream(big, "<stdin>", "input", 1024).error().str(),
            "<stdin>: cannot read input: larger than 1 KiB (the limit on input files)");
}

TEST(ListPattern, NestingIsBounded) {
  auto nest = [](int depth) { return std::string(depth, '(') + "[1]" + std::string(depth, ')'); };
  ASSERT_FALSE(failed(eval_list_pattern(nest(kMaxListPatternDepth - 1))));
  EXPECT_EQ(std::get<0>(eval_list_pattern(nest(kMaxListPatternDepth - 1))), std::vector<int>{1});
  const auto deep = eval_list_pattern(nest(20000));  // used to overflow the stack
  ASSERT_TRUE(failed(deep));
  EXPECT_THAT(why(deep), HasSubstr("nested deeper than 100 brackets"));
  EXPECT_TRUE(failed(eval_list_pattern(std::string(20000, '[') + "1" + std::string(20000, ']'))));
}

TEST(ListPattern, LengthIsBounded) {
  EXPECT_EQ(std::get<0>(eval_list_pattern("[0]*3+[1]*2")), (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_THAT(why(eval_list_pattern("[1]*999999+[0]*999999")), HasSubstr("more than 1000000 elements"));
  EXPECT_THAT(why(eval_list_pattern("[1]*(999999999*999999999)")), HasSubstr("number too large"));
  EXPECT_THAT(why(eval_list_pattern("[1]*1000001")), HasSubstr("more than 1000000 elements"));
  EXPECT_EQ(std::get<0>(eval_list_pattern("[1]*1000000")).size(), 1000000u);
}

TEST(Caps, EachKeyNamesItsCap) {
  EXPECT_EQ(error_of(load_text(kBaseScenario, {"num_layers=1048576"})),
            "--set num_layers=1048576: model.num_layers: expected an integer in [1, 1024], got 1048576; 1024 is lcm's "
            "cap for this key "
            "(docs/scenario-format.md#caps)");
  // Above int64 too, and for int64 keys (no silent wrap to a negative size).
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"vocab_size=9223372036854775807"})),
              HasSubstr("expected an integer in [1, 16777216], got 9223372036854775807; 16777216 is lcm's cap"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"vocab_size=99999999999999999999999"})),
              HasSubstr("16777216 is lcm's cap"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"seq_length=999999999999999999K"})),
              HasSubstr("134217728 is lcm's cap"));
  // At the cap is fine.
  EXPECT_TRUE(load_text(kBaseScenario, {"num_layers=1024"}).ok());
  EXPECT_TRUE(load_text(kBaseScenario, {"seq_length=128M", "max_position_embeddings=null"}).ok());
}

TEST(Caps, ValidatorAppliesThemToScenariosBuiltInCode) {
  auto r = load_text(kBaseScenario);
  ASSERT_TRUE(r.ok());
  Scenario s = r.value();
  s.model.hidden_size = int64_t{1} << 62;
  s.training.seq_length = int64_t{1} << 40;
  const auto problems = validate_scenario(s);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].key, "model.hidden_size");
  EXPECT_EQ(problems[0].message, "4611686018427387904 is above lcm's cap of 262144 for this key "
                                 "(docs/scenario-format.md#caps)");
  EXPECT_EQ(problems[1].key, "training.seq_length");
}

TEST(Caps, ParallelProductsDoNotOverflow) {
  // tp * pp * cp = 2^60 would overflow int; the rule must still see "not divisible".
  auto r = load_text(kBaseScenario, {"tensor_model_parallel_size=1048576", "pipeline_model_parallel_size=1048576",
                                     "context_parallel_size=1048576"});
  EXPECT_THAT(error_of(r), HasSubstr("(1048576 * 1048576 * 1048576 = 1152921504606846976)"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"hierarchical_context_parallel_sizes=[65536,65536]"})),
              HasSubstr("multiply to more than 1048576"));
}

TEST(Yaml, ASecondDocumentIsAnError) {
  EXPECT_EQ(error_of(load_text(std::string(kBaseScenario) + "---\nname: other\n")),
            "test.yaml:21:1: a second YAML document ('---' before line 21); the file must hold exactly one");
}

// yaml-cpp's LoadAll produced empty documents without end on a ',' outside a flow collection
// (fuzz finding 8, profile_fuzz: out of memory); now a syntax error at the comma.
TEST(Yaml, ACommaOutsideAFlowIsAnErrorNotAnEndlessLoad) {
  EXPECT_EQ(error_of(load_text(",")), "test.yaml:1:1: malformed YAML: unexpected ','");
  EXPECT_EQ(error_of(load_text("# a comment\n,x\n")), "test.yaml:2:1: malformed YAML: unexpected ','");
}

TEST(Yaml, DuplicateRopeScalingKeysAreErrors) {
  EXPECT_THAT(error_of(load_text(base_with("  position_embedding_type: rope",
                                           "  position_embedding_type: rope\n  rope_scaling: {type: linear, factor: "
                                           "2, factor: 8}"))),
              HasSubstr("model.rope_scaling: factor: duplicate key"));
}

TEST(HardwareProfile, ValuesHavePhysicalBounds) {
  std::ifstream in(profile_dir() + "/h200-sxm.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const size_t at = text.find("\nhbm_capacity_MiB:");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 1, text.find('\n', at + 1) - at - 1, "hbm_capacity_MiB: 1e300");
  auto r = load_hardware_profile_text(text, "p.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), HasSubstr("hbm_capacity_MiB: expected a number <= 6.71089e+07 (lcm's physical bound"));
  // An efficiency below 1% (what a calibration on impossible times fits) is refused.
  std::string eff = ss.str();
  const size_t hbm = eff.find("\n  hbm:");
  ASSERT_NE(hbm, std::string::npos);
  eff.replace(hbm + 1, eff.find('\n', hbm + 1) - hbm - 1, "  hbm: 4.5e-31");
  EXPECT_THAT(load_hardware_profile_text(eff, "p.yaml").error().str(),
              HasSubstr("efficiency.hbm: expected a number >= 0.01"));
}

TEST(DataDirs, EnvironmentFirstThenShareThenSourceTree) {
  ::setenv("LCM_DATA_DIR", "/opt/lcm-data", 1);
  const auto dirs = data_dirs();
  ::unsetenv("LCM_DATA_DIR");
  ASSERT_EQ(dirs.size(), 3u);  // the test binary runs from its build tree: the source tree is last
  EXPECT_EQ(dirs[0], fs::path("/opt/lcm-data"));
  EXPECT_EQ(dirs[1].filename(), "lcm");
  EXPECT_EQ(dirs[1].parent_path().filename(), "share");
  EXPECT_EQ(dirs[2], fs::path(LCM_SOURCE_DIR));
  EXPECT_EQ(data_dirs().size(), 2u);  // no LCM_DATA_DIR
}

TEST(DataDirs, BundledScenariosLoadByName) {
  auto r = load_scenario("default", opts_with());
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r.value().name, "mixtral-8x7b-128k");
  EXPECT_THAT(load_scenario("no-such-scenario").error().str(),
              HasSubstr("no-such-scenario: no such file, and no bundled scenario of that name (searched "));
}

}  // namespace
}  // namespace lcm::io::test

namespace lcm::io::test {
namespace {

// docs/scenario-format.md says 500 (yaml-cpp's DepthGuard, counting the top-level mapping).
TEST(Yaml, NestingLimitIsTheDocumented500) {
  auto nested = [](int n) { return "name: " + std::string(n, '[') + std::string(n, ']') + "\n"; };
  EXPECT_THAT(error_of(load_text(nested(498))), HasSubstr("name: expected a string, got a list"));
  EXPECT_THAT(error_of(load_text(nested(499))), HasSubstr("YAML nesting too deep (more than 500 levels)"));
}

// The did-you-mean search stops each distance as soon as it cannot beat the best so far
// (what makes an unknown flag cheap: most of the fuzzers' time went there). Its answers must
// be those of the full search: every candidate's whole optimal-string-alignment table.
TEST(Suggestions, ClosestIsTheFullSearchsAnswer) {
  auto full_distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  auto full_closest = [&](std::string_view word, const std::vector<std::string>& names) {
    size_t best_d = SIZE_MAX;
    std::string best;
    for (const std::string& c : names) {
      // The distance is at least the length difference (only to keep this test quick).
      if (std::max(word.size(), c.size()) - std::min(word.size(), c.size()) > best_d) continue;
      if (const size_t d = full_distance(word, c); d < best_d) best_d = d, best = c;
    }
    return best_d <= std::max<size_t>(2, word.size() / 3) ? best : std::string();
  };
  std::vector<std::string> names;
  for (const MegatronFlagName& n : megatron_flag_names()) names.emplace_back(n.name);
  ASSERT_GT(names.size(), 900u);
  // Every 17th flag with a letter dropped, two swapped, one changed, a suffix added, and the
  // reversed name; plus words near nothing.
  std::vector<std::string> words = {"",           "x",   "zzzzzzzzzzzz",       "num-layer", "tensor-model-paralel-size",
                                    "nmu-layers", "bf8", std::string(300, 'q')};
  for (size_t i = 0; i < names.size(); i += 17) {
    const std::string& n = names[i];
    const size_t k = n.size() / 2;
    words.push_back(n.substr(0, k) + n.substr(k + 1));
    std::string swapped = n;
    std::swap(swapped[k - 1], swapped[k]);
    words.push_back(swapped);
    std::string changed = n;
    changed[k] = changed[k] == 'e' ? 'a' : 'e';
    words.push_back(changed);
    words.push_back(n + "-size");
    words.emplace_back(n.rbegin(), n.rend());
  }
  // And 1 to 6 random edits (insert, delete, replace, swap) of every 7th flag, seeded: distances
  // on both sides of the cutoff, where the band of the search (|i - j| <= cutoff) has its edges.
  std::mt19937 rng(12345);
  const std::string letters = "abcdefghijklmnopqrstuvwxyz-";
  for (size_t i = 0; i < names.size(); i += 7) {
    std::string w = names[i];
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !w.empty(); ++e) {
      const size_t at = rng() % w.size();
      const char c = letters[rng() % letters.size()];
      switch (rng() % 4) {
        case 0: w.insert(w.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 1: w.erase(at, 1); break;
        case 2: w[at] = c; break;
        default: if (at + 1 < w.size()) std::swap(w[at], w[at + 1]); break;
      }
    }
    words.push_back(w);
  }
  int suggested = 0;
  for (const std::string& w : words) {
    const std::string got = closest(w, names);
    EXPECT_EQ(got, full_closest(w, names)) << "word '" << w << "'";
    suggested += !got.empty();
  }
  EXPECT_GT(suggested, static_cast<int>(words.size()) / 2);  // the comparison is not all "no suggestion"
  EXPECT_EQ(closest("num-layer", names), "num-layers");
  EXPECT_EQ(closest("tensor-model-paralel-size", names), "tensor-model-parallel-size");
  EXPECT_EQ(closest("nmu-layers", names), "num-layers");
  EXPECT_EQ(closest("bf8", names), "bf16");  // as far from 'sft': the first in order
  EXPECT_EQ(closest("zzzzzzzzzzzz", names), "");
}

}  // namespace
}  // namespace lcm::io::test
