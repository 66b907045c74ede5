// End-to-end tests of the `lcm` binary: exit codes, output formats that parse, --set,
// atomic -o, import round trip.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "../common/run_lcm.hpp"

namespace {

namespace fs = std::filesystem;

using CmdResult = lcm::test::LcmRun;
using lcm::test::slurp;

CmdResult lcm(const std::string& args) { return lcm::test::run_lcm(args, "cli_test"); }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// Minimal RFC 4180 field count of one line (no embedded newlines in our CSV).
size_t csv_fields(const std::string& line) {
  size_t n = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) ++n;
  }
  return n;
}

TEST(Cli, EstimateJsonHasTheDocumentedSchema) {
  const CmdResult r = lcm("estimate scenarios/llama3.1-8b.yaml --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_GT(j.at("params").at("total").get<double>(), 7.9e9);
  EXPECT_GT(j.at("params").at("active").get<double>(), 7.9e9);
  EXPECT_GT(j.at("flops").at("per_step").get<double>(), 0.0);
  const auto& mem = j.at("memory");
  EXPECT_GT(mem.at("peak_bytes").get<double>(), mem.at("allocated_peak_bytes").get<double>());
  ASSERT_FALSE(mem.at("stages").empty());
  for (const auto& st : mem.at("stages")) {
    EXPECT_TRUE(st.at("terms").contains("weights"));
    EXPECT_TRUE(st.at("terms").contains("activations"));
    EXPECT_LE(st.at("allocated_bytes").get<double>(), mem.at("allocated_peak_bytes").get<double>());
  }
  EXPECT_TRUE(j.at("comm").contains("items"));
  EXPECT_TRUE(j.at("comm").contains("sent_bytes_by_dim"));
}

TEST(Cli, EstimateCsvParses) {
  const CmdResult r = lcm("estimate scenarios/mixtral-8x7b.yaml --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto ls = lines(r.out);
  ASSERT_GT(ls.size(), 20u);
  EXPECT_EQ(ls[0], "section,stage,item,value,unit");
  for (const auto& l : ls) EXPECT_EQ(csv_fields(l), 5u) << l;
}

TEST(Cli, EstimateMarkdownRendersTables) {
  const CmdResult r = lcm("estimate scenarios/deepseek-v3.yaml --format md");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto ls = lines(r.out);
  int tables = 0;
  for (size_t i = 1; i < ls.size(); ++i) {
    if (ls[i].rfind("|---", 0) == 0 && ls[i - 1].rfind("|", 0) == 0) {
      ++tables;
      // Every row of the table has as many cells as the header.
      const auto cells = [](const std::string& l) {  // unescaped pipes
        long n = 0;
        for (size_t c = 0; c < l.size(); ++c) n += l[c] == '|' && (c == 0 || l[c - 1] != '\\');
        return n;
      };
      for (size_t k = i + 1; k < ls.size() && !ls[k].empty() && ls[k][0] == '|'; ++k)
        EXPECT_EQ(cells(ls[k]), cells(ls[i - 1])) << ls[k];
    }
  }
  EXPECT_GE(tables, 4);
}

TEST(Cli, SetOverrideChangesTheLayout) {
  const CmdResult r = lcm("estimate scenarios/llama3.1-8b.yaml --format json --set tensor_model_parallel_size=2 "
                    "--set context_parallel_size=4 --set pipeline_model_parallel_size=1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("mesh").at("tp"), 2);
  EXPECT_EQ(j.at("mesh").at("cp"), 4);
}

TEST(Cli, BadOverrideIsExitCode2WithOneLine) {
  const CmdResult r = lcm("estimate scenarios/llama3.1-8b.yaml --set tensor_model_parallel_size=3");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("tensor_model_parallel_size"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, UnknownOverrideKeyIsExitCode2) {
  const CmdResult r = lcm("estimate scenarios/llama3.1-8b.yaml --set tensor_parallel_size=2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tensor_model_parallel_size"), std::string::npos) << r.err;  // did-you-mean
}

TEST(Cli, MissingFileIsExitCode2) {
  const CmdResult r = lcm("estimate scenarios/no-such-file.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no-such-file.yaml"), std::string::npos) << r.err;
}

TEST(Cli, MalformedYamlNamesLineAndColumn) {
  const fs::path bad = fs::temp_directory_path() / "lcm_cli_bad.yaml";
  std::ofstream(bad) << "model:\n  num_layers: [1, 2\n";
  const CmdResult r = lcm("estimate '" + bad.string() + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bad.string() + ":"), std::string::npos) << r.err;
}

TEST(Cli, ScalingJsonAndCrossover) {
  const CmdResult r = lcm("scaling scenarios/llama3.1-8b.yaml --seq 4K,32K,128K,1M --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("rows").size(), 4u);
  EXPECT_EQ(j.at("rows")[3].at("seq_length"), 1048576);
  EXPECT_NEAR(j.at("crossover").at("dense_seq").get<double>(), 43008.0, 1e-6);
}

TEST(Cli, ScalingTableMarksTheCrossover) {
  const CmdResult r = lcm("scaling scenarios/llama3.1-8b.yaml --seq 4K,32K,128K,1M");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dense crossover at 43008"), std::string::npos) << r.out;
}

TEST(Cli, ScalingBadSeqIsExitCode2) {
  const CmdResult r = lcm("scaling scenarios/llama3.1-8b.yaml --seq 4X");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("4X"), std::string::npos) << r.err;
}

TEST(Cli, OutputFileIsWrittenAtomically) {
  const fs::path dir = fs::temp_directory_path() / "lcm_cli_out";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const CmdResult r = lcm("estimate scenarios/qwen3-30b-a3b.yaml --format json -o '" + (dir / "e.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NO_THROW((void)nlohmann::json::parse(slurp(dir / "e.json")));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

TEST(Cli, ImportMegatronCommandLineRoundTrips) {
  const fs::path dir = fs::temp_directory_path() / "lcm_cli_import";
  fs::create_directories(dir);
  const fs::path out = dir / "imported.yaml";
  const CmdResult r = lcm(
      "import megatron --gpus 8 --hw h100-sxm -o '" + out.string() +
      "' -- --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
      "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
      "--micro-batch-size 1 --global-batch-size 128 --tensor-model-parallel-size 2 --sequence-parallel "
      "--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
      "--untie-embeddings-and-output-weights --vocab-size 128256 --bf16 --use-distributed-optimizer");
  ASSERT_EQ(r.code, 0) << r.err;
  const CmdResult e = lcm("estimate '" + out.string() + "' --format json");
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j.at("mesh").at("tp"), 2);
  EXPECT_EQ(j.at("mesh").at("dp"), 4);
  EXPECT_NEAR(j.at("params").at("total_main").get<double>(), 8.03e9, 0.01 * 8.03e9);
}

TEST(Cli, ImportUnknownMegatronFlagIsExitCode2) {
  const CmdResult r = lcm("import megatron --gpus 8 --hw h100-sxm -- --num-layers 2 --hiden-size 64");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("hidden-size"), std::string::npos) << r.err;
}

TEST(Cli, TraceWritesChromeTraceJson) {
  const fs::path out = fs::temp_directory_path() / "lcm_cli_trace.json";
  fs::remove(out);
  const CmdResult r = lcm("trace scenarios/llama3.1-8b.yaml --detail layer -o '" + out.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(out));
  ASSERT_TRUE(j.at("traceEvents").is_array());
  EXPECT_GT(j.at("traceEvents").size(), 10u);
  EXPECT_EQ(j.at("displayTimeUnit"), "ms");
  const CmdResult bad = lcm("trace scenarios/llama3.1-8b.yaml --detail fine -o '" + out.string() + "'");
  EXPECT_EQ(bad.code, 2);
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* c : {"", "estimate ", "scaling ", "import ", "import megatron ", "capacity ", "trace "}) {
    const CmdResult r = lcm(std::string(c) + "-h");
    EXPECT_EQ(r.code, 0) << c << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << c;
  }
}

}  // namespace
