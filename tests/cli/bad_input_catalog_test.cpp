// The bad-input catalog (issue 14): every input the `lcm` binary must refuse, each run as a
// separate process in its own temporary directory, asserting the exit code and that stderr
// is exactly one line `lcm: ...` containing the expected text. Crashes (139/134), hangs
// (a 30 s timeout gives 124) and silent success all fail a case.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  std::string args;   // after `lcm`; $S = bundled scenarios, $P = bundled profiles (shell-expanded)
  int code;           // expected exit code
  std::string error;  // expected part of the one stderr line
  std::vector<std::pair<std::string, std::string>> files = {};  // written into the case's directory
  std::string setup = {};                                        // shell run there first
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A small valid dense scenario; cases append or replace lines of it.
const std::string kDense = R"(name: t
model:
  num_layers: 4
  hidden_size: 1024
  ffn_hidden_size: 4096
  num_attention_heads: 8
  vocab_size: 32000
training:
  seq_length: 4K
  micro_batch_size: 1
  global_batch_size: 8
hardware:
  profile: h200-sxm
  num_gpus: 8
)";

// kDense with `model:` extended by `extra` (indented lines).
std::string dense_with_model(const std::string& extra) {
  std::string s = kDense;
  s.insert(s.find("training:"), extra);
  return s;
}

std::string nested_pattern(int depth) { return std::string(depth, '(') + "[1]" + std::string(depth, ')'); }

std::string many_values(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += (i > 1 ? "," : "") + std::to_string(i) + "K";
  return s;
}

const std::string kNcclHeader =
    "# Collective test starting: all_reduce_perf\n"
    "#  Rank  0 Group  0 Pid  100 on      hostA device  0 [0000:18:00] NVIDIA H200\n"
    "#  Rank  1 Group  0 Pid  101 on      hostA device  1 [0000:2a:00] NVIDIA H200\n";

std::string nccl_row(const std::string& size, const std::string& time_us) {
  return "     " + size + "        262144     float     sum      -1    " + time_us +
         "   23.25   34.88      0    44.90   23.35   35.03      0\n";
}

std::string profile_with(const std::string& key, const std::string& value) {
  std::string p = slurp(fs::path(LCM_SOURCE_DIR) / "hwprofiles/h200-sxm.yaml");
  const size_t at = p.find("\n" + key + ":");
  const size_t end = p.find('\n', at + 1);
  return p.substr(0, at + 1) + key + ": " + value + p.substr(end);
}

std::vector<Case> catalog() {
  std::vector<Case> c;
  const std::string def = "estimate $S/default.yaml";
  // ---- crashes ----
  c.push_back({"PatternNested20000DeepInScenario", "estimate f.yaml", 2, "nested deeper than 100 brackets",
               {{"f.yaml", dense_with_model("  num_experts: 8\n  moe_ffn_hidden_size: 1024\n  moe_layer_freq: \"" +
                                            nested_pattern(20000) + "*4\"\n")}}});
  c.push_back({"PatternNested20000DeepInSet", def + " --set 'moe_layer_freq=" + nested_pattern(20000) + "*32'", 2,
               "nested deeper than 100 brackets"});
  c.push_back({"PatternNested20000DeepInImport",
               "import megatron --gpus 8 --hw h200-sxm -- --bf16 --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
               "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 "
               "--num-experts 8 --moe-layer-freq '" + nested_pattern(20000) + "*4'",
               2, "nested deeper than 100 brackets"});
  c.push_back({"PatternNested101Deep", def + " --set 'moe_layer_freq=" + nested_pattern(101) + "*32'", 2,
               "nested deeper than 100 brackets"});
  c.push_back({"PatternTooLong", def + " --set 'moe_layer_freq=[1]*999999+[0]*999999'", 2,
               "more than 1000000 elements"});
  c.push_back({"PatternNumberOverflow", def + " --set 'moe_layer_freq=[1]*999999999*999999999'", 2,
               "more than 1000000 elements"});
  c.push_back({"CapacityLoadsDevZero", "capacity $S/mixtral-8x7b.yaml --loads /dev/zero", 2, "a character device"});
  // ---- hangs and unbounded memory ----
  c.push_back({"EstimateFifo", "estimate f", 2, "a FIFO; lcm reads only regular files", {}, "mkfifo f"});
  c.push_back({"EstimateDevZero", "estimate /dev/zero", 2, "cannot read scenario: a character device"});
  c.push_back({"EstimateDirectory", "estimate d", 2, "cannot read scenario: a directory", {}, "mkdir d"});
  c.push_back({"EstimateHugeFile", "estimate big.yaml", 2, "larger than 16 MiB",
               {}, "head -c 17000000 /dev/zero | tr '\\0' '#' > big.yaml"});
  c.push_back({"ProfileFifo", "estimate f.yaml", 2, "cannot read hardware profile: a FIFO",
               {{"f.yaml", [] { std::string s = kDense; s.replace(s.find("h200-sxm"), 8, "./p.yaml"); return s; }()}},
               "mkfifo p.yaml"});
  c.push_back({"ImportFifo", "import megatron --gpus 8 --hw h200-sxm f", 2, "a FIFO", {}, "mkfifo f"});
  c.push_back({"ImportDevZero", "import megatron --gpus 8 --hw h200-sxm /dev/zero", 2, "a character device"});
  c.push_back({"CalibrateFifo", "calibrate f --profile h200-sxm -o out.yaml", 2, "a FIFO", {}, "mkfifo f"});
  c.push_back({"PlanMillionLayers", "plan $S/default.yaml -q --set num_layers=1048576", 2,
               "1048576; 1024 is lcm's cap"});
  c.push_back({"TraceLayers65536", "trace $S/default.yaml --set num_layers=65536 -o t.json", 2, "1024 is lcm's cap"});
  c.push_back({"TraceTooLarge", "trace $S/default.yaml --set num_layers=1024 -o t.json", 2,
               "show fewer with --micro-batches"});
  c.push_back({"SweepTwoThousandPoints", "sweep $S/default.yaml -q --vary seq_length=" + many_values(2000), 2,
               "more than 256 points"});
  c.push_back({"SweepGridTooLarge", "sweep $S/default.yaml -q --vary seq_length=" + many_values(20) +
               " --vary num_layers=" + "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", 2, "more than 256 points"});
  c.push_back({"CapacityMonteCarloUnbounded",
               "capacity $S/mixtral-8x7b.yaml --method mc --samples 100000000", 2, "routing draws; at most 2e+09"});
  c.push_back({"CapacityMonteCarloTokens",
               "capacity $S/mixtral-8x7b.yaml --method mc --samples 1000 --tokens 1024M", 2, "routing draws"});
  // ---- integer overflow: caps named in the message ----
  c.push_back({"VocabInt64Max", def + " --set vocab_size=9223372036854775807", 2, "16777216 is lcm's cap"});
  c.push_back({"VocabBeyondInt64", def + " --set vocab_size=99999999999999999999", 2, "16777216 is lcm's cap"});
  c.push_back({"MoeFfnTwoTo62", def + " --set moe_ffn_hidden_size=4611686018427387904", 2, "1048576 is lcm's cap"});
  c.push_back({"KvChannelsTwoTo62", def + " --set kv_channels=4611686018427387904", 2, "65536 is lcm's cap"});
  c.push_back({"QkHeadDimInt64Max", "estimate $S/deepseek-v3.yaml --set qk_head_dim=9223372036854775807", 2,
               "65536 is lcm's cap"});
  c.push_back({"HiddenSizeCap", def + " --set hidden_size=524288", 2, "262144 is lcm's cap"});
  c.push_back({"FfnCap", def + " --set ffn_hidden_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"SharedExpertCap", def + " --set moe_shared_expert_intermediate_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"HeadsCap", def + " --set num_attention_heads=32768", 2, "16384 is lcm's cap"});
  c.push_back({"QueryGroupsCap", def + " --set num_query_groups=32768", 2, "16384 is lcm's cap"});
  c.push_back({"NumLayersTwoTo31", def + " --set num_layers=2147483648", 2, "expected an integer in [1, 1024]"});
  c.push_back({"ExpertsCap", def + " --set num_experts=32768", 2, "16384 is lcm's cap"});
  c.push_back({"TopkCap", def + " --set moe_router_topk=32768", 2, "16384 is lcm's cap"});
  c.push_back({"MtpCap", def + " --set mtp_num_layers=65", 2, "64 is lcm's cap"});
  c.push_back({"SeqLengthCap", def + " --set seq_length=256M", 2, "134217728 is lcm's cap"});
  c.push_back({"SeqLengthOverflow", def + " --set seq_length=999999999999999999K", 2, "134217728 is lcm's cap"});
  c.push_back({"MicroBatchCap", def + " --set micro_batch_size=131072", 2, "65536 is lcm's cap"});
  c.push_back({"GlobalBatchCap", def + " --set global_batch_size=33554432", 2, "16777216 is lcm's cap"});
  c.push_back({"NumGpusCap", def + " --set num_gpus=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"TpCap", def + " --set tensor_model_parallel_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"PpCap", def + " --set pipeline_model_parallel_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"CpCap", def + " --set context_parallel_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"EpCap", def + " --set expert_model_parallel_size=2097152", 2, "1048576 is lcm's cap"});
  c.push_back({"MaxPositionCap", def + " --set max_position_embeddings=999999999999", 2, "134217728 is lcm's cap"});
  c.push_back({"RecomputeLayersCap", def + " --set recompute_num_layers=4096", 2, "1024 is lcm's cap"});
  c.push_back({"VppCap", def + " --set num_layers_per_virtual_pipeline_stage=4096", 2, "1024 is lcm's cap"});
  c.push_back({"MakeVocabDivisibleCap", def + " --set make_vocab_size_divisible_by=999999999", 2, "16777216 is lcm's cap"});
  c.push_back({"MlaRankCap", "estimate $S/deepseek-v3.yaml --set kv_lora_rank=1000000", 2, "65536 is lcm's cap"});
  c.push_back({"RopeOriginalCap", def + " --set rope_scaling.original_max_position_embeddings=999999999999", 2,
               "134217728 is lcm's cap"});
  c.push_back({"HierarchicalCpProduct", def + " --set 'hierarchical_context_parallel_sizes=[1048576,1048576]'", 2,
               "multiply to more than 1048576"});
  c.push_back({"ImportNumLayersCap",
               "import megatron --gpus 8 --hw h200-sxm -- --bf16 --num-layers 100000 --hidden-size 1024 "
               "--num-attention-heads 8 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
               "--global-batch-size 8",
               2, "--num-layers: 100000 is above lcm's cap of 1024"});
  c.push_back({"ImportHiddenInt64", "import megatron --gpus 8 --hw h200-sxm -- --bf16 --num-layers 4 --hidden-size "
               "9223372036854775807 --num-attention-heads 8 --seq-length 4096 --max-position-embeddings 4096 "
               "--micro-batch-size 1 --global-batch-size 8",
               2, "expected an integer in [1, 2147483647]"});
  c.push_back({"CapacityTokensOverflow", "capacity $S/mixtral-8x7b.yaml --tokens 999999999999999999M", 2,
               "is above 1099511627776 (lcm's cap"});
  c.push_back({"CapacityTokensTwoTo63", "capacity $S/mixtral-8x7b.yaml --tokens 8796093022208M", 2,
               "is above 1099511627776 (lcm's cap"});
  c.push_back({"CapacityLoadsHuge", "capacity $S/mixtral-8x7b.yaml --loads l.json", 2, "above 1e+15",
               {{"l.json", "[1e308,1,1,1,1,1,1,1]"}}});
  c.push_back({"ScalingSeqOverflow", "scaling $S/llama3.1-8b.yaml --seq 999999999999999999K", 2,
               "is above 134217728 (lcm's cap"});
  c.push_back({"ScalingSeqCap", "scaling $S/llama3.1-8b.yaml --seq 4K,256M", 2, "'256M' is above 134217728"});
  c.push_back({"ScalingSeqTooMany", "scaling $S/llama3.1-8b.yaml --seq " + many_values(300), 2,
               "more than 256 entries"});
  c.push_back({"CapacityCfTooMany", "capacity $S/mixtral-8x7b.yaml --cf " + [] {
                 std::string s;
                 for (int i = 1; i <= 300; ++i) s += (i > 1 ? "," : "") + std::to_string(i);
                 return s;
               }(), 2, "more than 256 entries"});
  c.push_back({"CalibrateHugeSize", "calibrate n.txt --profile h200-sxm -o out.yaml", 2,
               "message size 1e+308 bytes is outside",
               {{"n.txt", kNcclHeader + nccl_row("1" + std::string(308, '0'), "45.10")}}});
  c.push_back({"CalibrateImpossiblyFast", "calibrate n.txt --profile h200-sxm -o out.yaml", 2,
               "is outside the physical range", {{"n.txt", kNcclHeader + nccl_row("1048576", "0.000000001")}}});
  c.push_back({"CalibrateImpossiblySlow", "calibrate n.txt --profile h200-sxm -o out.yaml", 2,
               "is outside the physical range", {{"n.txt", kNcclHeader + nccl_row("1048576", "1e12")}}});
  c.push_back({"SweepVaryTwice", "sweep $S/default.yaml -q --vary seq_length=4K --vary seq_length=8K", 2,
               "seq_length is varied twice"});
  c.push_back({"SweepVarySearchedKey", "sweep $S/default.yaml -q --vary tensor_model_parallel_size=3", 2,
               "the planner chooses tensor_model_parallel_size itself"});
  c.push_back({"SweepVarySearchedKeyDotted", "sweep $S/default.yaml -q --vary parallel.micro_batch_size=1,2", 2,
               "the planner chooses micro_batch_size itself"});
  c.push_back({"RopeScalingDuplicateKey", "estimate f.yaml", 2, "factor: duplicate key",
               {{"f.yaml", dense_with_model("  position_embedding_type: rope\n  rope_scaling: {type: linear, factor: 2, "
                                            "factor: 4}\n")}}});
  c.push_back({"SecondYamlDocument", "estimate f.yaml", 2, "a second YAML document", {{"f.yaml", kDense + "---\nname: u\n"}}});
  c.push_back({"ProfileHbmHuge", "estimate f.yaml", 2, "hbm_capacity_MiB: expected a number <= 6.71089e+07",
               {{"f.yaml", [] { std::string s = kDense; s.replace(s.find("h200-sxm"), 8, "./p.yaml"); return s; }()},
                {"p.yaml", profile_with("hbm_capacity_MiB", "1e300")}}});
  c.push_back({"ProfileTflopsHuge", "estimate f.yaml", 2, "peak_bf16_dense_TFLOPs: expected a number <= 100000",
               {{"f.yaml", [] { std::string s = kDense; s.replace(s.find("h200-sxm"), 8, "./p.yaml"); return s; }()},
                {"p.yaml", profile_with("peak_bf16_dense_TFLOPs", "1e300")}}});
  // ---- -o and output ----
  // A bad -o path is a usage error found when the command line is read (exit 2, before any work).
  c.push_back({"OutputMissingDirectory", def + " -o nodir/x.json", 2, "--output: directory nodir does not exist"});
  c.push_back({"OutputIntoFile", def + " -o f/x.json", 2, "--output: f is not a directory", {{"f", "x"}}});
  c.push_back({"OutputDirectory", def + " -o d", 2, "--output: d is a directory", {}, "mkdir d"});
  c.push_back({"OutputDevFull", def + " -o /dev/full", 1, "cannot write /dev/full: No space left on device"});
  c.push_back({"StdoutDevFull", def + " >/dev/full", 1, "cannot write to standard output: No space left on device"});
  c.push_back({"OutputSymlinkLoop", def + " -o l", 1, "cannot write l", {}, "ln -s l l"});
  // ---- messages ----
  c.push_back({"CalibrateEmptyFile", "calibrate e.json --profile h200-sxm -o out.yaml", 2, "empty file",
               {{"e.json", ""}}});
  c.push_back({"CalibrateFlash2WithoutTerms",
               "calibrate --compare f.json --profile p.yaml",
               2,
               "fa: a FlashAttention-2 point (flash2) needs efficiency.attention_flash2_fwd and _bwd in the hardware "
               "profile (p.yaml has none)",
               {{"f.json", R"({"benchmark": "x", "points": [{"key": "fa", "correct": true, "time_us": {"median": 100},
                  "model_op": {"kind": "attention", "b": 1, "s_q": 4096, "s_kv": 4096, "hq": 8, "d": 128, "flash2": true}}]})"}},
               "grep -v attention_flash2 \"$P/h100-sxm.yaml\" > p.yaml"});
  c.push_back({"CalibrateWrongJson", "calibrate w.json --profile h200-sxm -o out.yaml", 2, "not an lcm-exec summary",
               {{"w.json", "[1, 2, 3]"}}});
  c.push_back({"CalibrateBrokenJson", "calibrate w.json --profile h200-sxm -o out.yaml", 2, "not valid JSON",
               {{"w.json", "{\"points\": [1, 2"}}});
  c.push_back({"CalibrateNotALog", "calibrate w.txt --profile h200-sxm -o out.yaml", 2, "not an nccl-tests log",
               {{"w.txt", "hello\n"}}});
  c.push_back({"CalibrateMissingInput", "calibrate nothere.json --profile h200-sxm -o out.yaml", 2,
               "no such file or directory"});
  c.push_back({"CalibrateNoOutput", "calibrate $S/../validation/measured/h200/gemm_run1.json --profile h200-sxm", 2,
               "-o FILE (the calibrated profile) is required"});
  c.push_back({"UnknownCommand", "frobnicate", 2, "unknown command 'frobnicate'; commands: estimate"});
  c.push_back({"MisspelledCommand", "estimat x", 2, "did you mean 'estimate'?"});
  c.push_back({"NoCommand", "", 2, "give a command: estimate"});
  c.push_back({"GpusZero", "plan $S/default.yaml --gpus 0", 2, "--gpus: Value 0 not in range [1, 1048576]"});
  c.push_back({"GpusNegative", "import megatron --gpus -3 --hw h200-sxm x", 2, "not in range [1, 1048576]"});
  c.push_back({"GpusNotANumber", "plan $S/default.yaml --gpus many", 2, "--gpus"});
  c.push_back({"TopZero", "plan $S/default.yaml --top 0", 2, "Value 0 not in range [1, 1000]"});
  c.push_back({"ThreadsTooMany", "plan $S/default.yaml --threads 5000", 2, "not in range [0, 1024]"});
  c.push_back({"MicroBatchesNegative", "trace $S/default.yaml -o t.json --micro-batches -1", 2, "--micro-batches"});
  c.push_back({"UnknownFormat", def + " --format xml", 2, "--format: xml not in"});
  c.push_back({"UnknownOption", def + " --frobnicate", 2, "--frobnicate"});
  c.push_back({"MissingScenario", "estimate", 2, "scenario is required"});
  c.push_back({"SweepWithoutVary", "sweep $S/default.yaml", 2, "--vary is required"});
  c.push_back({"NoSuchScenarioFile", "estimate nothere.yaml", 2, "cannot read scenario: No such file or directory"});
  c.push_back({"NoSuchBundledScenario", "estimate nothere", 2, "no such file, and no bundled scenario of that name"});
  // ---- scenario files ----
  c.push_back({"UnknownKey", "estimate f.yaml", 2, "unknown key 'hiden_size'; did you mean 'hidden_size'?",
               {{"f.yaml", dense_with_model("  hiden_size: 5\n")}}});
  c.push_back({"KeyInWrongSection", "estimate f.yaml", 2, "key 'sequence_parallel' belongs in section 'parallel:'",
               {{"f.yaml", dense_with_model("  sequence_parallel: true\n")}}});
  c.push_back({"MegatronDashes", "estimate f.yaml", 2, "did you mean 'swiglu'?",
               {{"f.yaml", dense_with_model("  --swiglu: true\n")}}});
  c.push_back({"DuplicateKey", "estimate f.yaml", 2, "duplicate key (first given on line 3)",
               {{"f.yaml", dense_with_model("  num_layers: 8\n")}}});
  c.push_back({"QuotedNumber", "estimate f.yaml", 2, "the quoted string \"8\" (remove the quotes)",
               {{"f.yaml", dense_with_model("  num_experts: \"8\"\n")}}});
  c.push_back({"WordForNumber", "estimate f.yaml", 2, "expected an integer in [0, 16384]",
               {{"f.yaml", dense_with_model("  num_experts: eight\n")}}});
  c.push_back({"UnknownEnum", "estimate f.yaml", 2, "expected one of: LayerNorm",
               {{"f.yaml", dense_with_model("  normalization: BatchNorm\n")}}});
  c.push_back({"BadBool", "estimate f.yaml", 2, "expected true or false", {{"f.yaml", dense_with_model("  swiglu: yes\n")}}});
  c.push_back({"NegativeDropout", "estimate f.yaml", 2, "expected a number >= 0",
               {{"f.yaml", dense_with_model("  hidden_dropout: -0.5\n")}}});
  c.push_back({"InfiniteRotaryBase", "estimate f.yaml", 2, "expected a number > 0",
               {{"f.yaml", dense_with_model("  rotary_base: .inf\n")}}});
  c.push_back({"MissingRequiredKey", "estimate f.yaml", 2, "missing required key 'vocab_size'", {{"f.yaml", [] {
                 std::string s = kDense;
                 s.erase(s.find("  vocab_size"), std::string("  vocab_size: 32000\n").size());
                 return s;
               }()}}});
  c.push_back({"MissingSection", "estimate f.yaml", 2, "missing required section 'training:'",
               {{"f.yaml", "name: t\nmodel:\n  num_layers: 1\nhardware:\n  profile: h200-sxm\n  num_gpus: 8\n"}}});
  c.push_back({"NotAMapping", "estimate f.yaml", 2, "expected a scenario mapping", {{"f.yaml", "- 1\n- 2\n"}}});
  c.push_back({"EmptyFile", "estimate f.yaml", 2, "expected a scenario mapping", {{"f.yaml", ""}}});
  c.push_back({"MalformedYaml", "estimate f.yaml", 2, "malformed YAML", {{"f.yaml", "name: [t\nmodel: {\n"}}});
  c.push_back({"YamlNestedTooDeep", "estimate f.yaml", 2, "YAML nesting too deep",
               {{"f.yaml", "name: " + std::string(3000, '[') + std::string(3000, ']') + "\n"}}});
  c.push_back({"BinaryGarbage", "estimate f.yaml", 2, "", {}, "printf '\\211PNG\\r\\n\\032\\n\\000\\000\\000\\rIHDR' > f.yaml"});
  c.push_back({"SeqLengthSuffixTypo", "estimate f.yaml", 2, "expected an integer or an integer with suffix K", {{"f.yaml", [] {
                 std::string s = kDense;
                 s.replace(s.find("4K"), 2, "4Q");
                 return s;
               }()}}});
  c.push_back({"UnknownProfile", def + " --set hardware.profile=h900", 2, "unknown hardware profile 'h900'"});
  c.push_back({"MissingProfileFile", def + " --set hardware.profile=./nothere.yaml", 2,
               "hardware profile file './nothere.yaml' not found"});
  c.push_back({"WorldNotDivisibleByTp", def + " --set tensor_model_parallel_size=3", 2, "(3 * 2 * 4 = 24)"});
  c.push_back({"WorldNotDivisible", def + " --set pipeline_model_parallel_size=3", 2, "is not divisible by"});
  c.push_back({"LearnedAbsoluteWithoutTable", "estimate f.yaml", 2, "max_position_embeddings (0) must be greater",
               {{"f.yaml", dense_with_model("  position_embedding_type: learned_absolute\n")}}});
  c.push_back({"MegatronConfigWithoutGpus", "estimate " + std::string(LCM_SOURCE_DIR) +
               "/tests/data/megatron/gpt3_mcore_te_tp1_pp4_vp1.yaml", 2, "give the GPU count and the hardware profile"});
  // ---- --set ----
  c.push_back({"SetWithoutEquals", def + " --set num_layers", 2, "expected KEY=VALUE"});
  c.push_back({"SetBadKeyCharacters", def + " --set Num-Layers=4", 2, "lower-case letters, digits"});
  c.push_back({"SetEmptyValue", def + " --set num_layers=", 2, "missing value after '='"});
  c.push_back({"SetUnknownKey", def + " --set num_layer=4", 2, "did you mean 'num_layers'?"});
  c.push_back({"SetAmbiguousKey", def + " --set name=x", 2, "ambiguous key; write name or model.name"});
  c.push_back({"SetNegative", def + " --set num_layers=-4", 2, "expected an integer in [1, 1024], got -4"});
  c.push_back({"SetFloatForInt", def + " --set num_layers=4.5", 2, "expected an integer in [1, 1024]"});
  // A Megatron pattern starting with '[' is read whole, not as the YAML list [1] plus dropped text.
  c.push_back({"SetPatternIsReadWhole", def + " --set 'moe_layer_freq=[1]*31'", 2,
               "moe_layer_freq lists 31 layers but num_layers is 32"});
  c.push_back({"SetCapacityFactorZero", def + " --set moe_expert_capacity_factor=0", 2, "expected a number > 0"});
  // ---- capacity options ----
  c.push_back({"CapacityDense", "capacity $S/llama3.1-8b.yaml", 2, "dense model (num_experts = 0)"});
  c.push_back({"CapacityCfZero", "capacity $S/mixtral-8x7b.yaml --cf 0", 2, "'0' is not a capacity factor > 0"});
  c.push_back({"CapacityCfEmptyEntry", "capacity $S/mixtral-8x7b.yaml --cf 1.0,,2.0", 2, "empty entry"});
  c.push_back({"CapacityCfInfinite", "capacity $S/mixtral-8x7b.yaml --cf inf", 2, "is not a capacity factor"});
  c.push_back({"CapacitySkewBad", "capacity $S/mixtral-8x7b.yaml --skew pareto:1", 2, "expected zipf:S"});
  c.push_back({"CapacitySkewHuge", "capacity $S/mixtral-8x7b.yaml --skew zipf:1000", 2, "S is too large"});
  c.push_back({"CapacityTokensTwoValues", "capacity $S/mixtral-8x7b.yaml --tokens 4K,8K", 2, "expected one token count"});
  c.push_back({"CapacityTokensZero", "capacity $S/mixtral-8x7b.yaml --tokens 0", 2, "is not a positive size"});
  c.push_back({"CapacitySamplesZero", "capacity $S/mixtral-8x7b.yaml --method mc --samples 0", 2,
               "is not a positive sample count"});
  c.push_back({"CapacityMethodWithLoads", "capacity $S/mixtral-8x7b.yaml --method mc --loads l.json", 2,
               "--method does not apply to --loads", {{"l.json", "[1,1,1,1,1,1,1,1]"}}});
  c.push_back({"CapacityLoadsWrongCount", "capacity $S/mixtral-8x7b.yaml --loads l.json", 2, "loads for 3 experts",
               {{"l.json", "[1,2,3]"}}});
  c.push_back({"CapacityLoadsMissing", "capacity $S/mixtral-8x7b.yaml --loads nothere.json", 2,
               "cannot read the loads file: No such file or directory"});
  c.push_back({"ScalingSeqZero", "scaling $S/llama3.1-8b.yaml --seq 0", 2, "'0' is not a positive size"});
  c.push_back({"ScalingSeqEmptyEntry", "scaling $S/llama3.1-8b.yaml --seq 4K,", 2, "empty entry"});
  c.push_back({"ScalingSeqWord", "scaling $S/llama3.1-8b.yaml --seq long", 2, "'long' is not a positive size"});
  // ---- import ----
  c.push_back({"ImportNothing", "import megatron --gpus 8 --hw h200-sxm", 2,
               "give an input file or the Megatron flags after '--'"});
  c.push_back({"ImportUnknownProfile", "import megatron --gpus 8 --hw h900 -- --num-layers 4", 2,
               "unknown hardware profile 'h900'"});
  c.push_back({"ImportMissingFile", "import megatron --gpus 8 --hw h200-sxm nothere.sh", 2,
               "cannot read the Megatron input: No such file or directory"});
  c.push_back({"ImportShellVariable", "import megatron --gpus 8 --hw h200-sxm -- --num-layers '$LAYERS'", 2,
               "unexpanded shell variable"});
  c.push_back({"ImportWithoutSubcommand", "import", 2, "A subcommand is required"});
  // ---- compare (a run directory made from the committed fixture tests/data/compare/) ----
  {
    const std::string cmp = "compare $S/llama3.1-8b.yaml d";
    const std::string fixture = "mkdir d && F=$S/../tests/data/compare/summary.json && ";
    c.push_back({"CompareMissingSummary", cmp, 2, "d/summary.json: cannot read the measured summary: No such file", {},
                 "mkdir d"});
    c.push_back({"CompareBrokenSummary", cmp, 2, "d/summary.json: not valid JSON", {}, "mkdir d && echo '{' > d/summary.json"});
    c.push_back({"CompareUnknownFormat", cmp, 2, "format: 'lcm-exec-train/9' is not a format lcm compare reads", {},
                 fixture + "sed 's|lcm-exec-train/1|lcm-exec-train/9|' $F > d/summary.json"});
    c.push_back({"CompareMissingKey", cmp, 2, "d/summary.json: memory.context_bytes: missing", {},
                 fixture + "sed '/context_bytes/d' $F > d/summary.json"});
    c.push_back({"CompareIllTypedKey", cmp, 2, "d/summary.json: mfu: expected a number, got \"high\"", {},
                 fixture + "sed 's/\"mfu\": [0-9.e-]*/\"mfu\": \"high\"/' $F > d/summary.json"});
    c.push_back({"CompareOpNameDoesNotParse", cmp, 2, "'L.attn.qkvx.fwd' is not an op name of lcm's table", {},
                 fixture + "sed 's/\"L.attn.qkv.fwd\"/\"L.attn.qkvx.fwd\"/' $F > d/summary.json"});
    c.push_back({"CompareLayerOutsideScenario", cmp, 2, "at layer 7, but the scenario (with the summary's overrides) has 2",
                 {}, fixture + "sed 's/\"layer\": 1,/\"layer\": 7,/' $F > d/summary.json"});
    c.push_back({"CompareOverridesFailValidation", cmp, 2,
                 "global_batch_size (4) is not divisible by micro_batch_size (1) times data_parallel_size (3) "
                 "(overrides: those of d/summary.json)",
                 {}, fixture + "perl -0pe 's/\"hardware.num_gpus\",\\s*\"1\"/\"hardware.num_gpus\", \"3\"/' $F > d/summary.json"});
    c.push_back({"CompareTraceMissing", cmp + " --trace-out t.json", 2,
                 "d/trace.rank0.json: cannot read the measured trace: No such file", {}, fixture + "cp $F d/"});
    c.push_back({"CompareWrongFormatOption", cmp + " --format xml", 2, "compare: --format: xml not in", {},
                 fixture + "cp $F d/"});
  }
  {  // issue 13: options that apply, --layout, --set blaming the override
    const std::string d = "estimate $S/default.yaml ";
    c.push_back({"HwUnknownBlamesHw", d + "--hw nope", 2, "--hw nope: hardware.profile: unknown hardware profile 'nope'"});
    c.push_back({"GpusBreakLayoutBlamesGpus", d + "--gpus 12", 2, "--gpus 12: hardware.num_gpus:"});
    c.push_back({"SetBlamesTheOverride", d + "--set tensor_model_parallel_size=3", 2,
                 "--set tensor_model_parallel_size=3: parallel.tensor_model_parallel_size: world size (64) is not "
                 "divisible"});
    c.push_back({"SetVirtualStagesDoNotSplit", d + "--set virtual_pipeline_model_parallel_size=5", 2,
                 "--set virtual_pipeline_model_parallel_size=5: virtual_pipeline_model_parallel_size: 32 layers on 2 "
                 "pipeline stages do not split into 5 virtual stages"});
    c.push_back({"SetRecomputeActivationsNotBool", d + "--set recompute_activations=maybe", 2,
                 "--set recompute_activations=maybe: recompute_activations: expected true or false"});
    c.push_back({"LayoutBadToken", d + "--layout 'tp2 zz9'", 2, "--layout \"tp2 zz9\": 'zz9' is not a layout token"});
    c.push_back({"LayoutBadCpComm", d + "--layout 'cp16(ring)'", 2,
                 "'cp16(ring)': expected p2p, a2a, allgather or a2aX+p2pY with X*Y = 16"});
    c.push_back({"LayoutDpMismatch", d + "--layout 'tp2 cp4 pp2 dp8'", 2, "'dp8': dp is derived: 64 GPUs / (tp2 x cp4 x pp2) = 4"});
    c.push_back({"LayoutTwice", d + "--layout 'tp2 tp4'", 2, "'tp4': tp is given twice"});
    c.push_back({"LayoutInvalid", d + "--layout tp3", 2, "--layout \"tp3\": parallel.tensor_model_parallel_size: world size"});
    c.push_back({"LayoutVpDoesNotSplit", d + "--layout 'pp2 vp5'", 2, "'vp5': 16 layers per pipeline rank (pp2) do not split"});
    c.push_back({"LayoutDenseHasNoExperts", "estimate $S/llama3.1-8b.yaml --layout 'ep2'", 2, "has no experts"});
    c.push_back({"LayoutAndSetSameKnob", d + "--layout tp1 --set tensor_model_parallel_size=2", 2,
                 "--set tensor_model_parallel_size=2: --layout sets tensor_model_parallel_size; give it in one of them"});
    c.push_back({"TraceLayoutBad", "trace $S/default.yaml -o t.json --layout 'pp3'", 2, "--layout \"pp3\""});
    c.push_back({"SweepHasNoLayout", "sweep $S/default.yaml --vary seq_length=4K --layout tp1", 2, "--layout"});
    c.push_back({"PlanGpus63Reason", "plan $S/default.yaml --gpus 63 -q", 2,
                 "every one of the 148 candidates breaks hardware.num_gpus: num_gpus (63) must be a multiple of "
                 "gpus_per_node (8)"});
  }
  {  // issue 13: lcm diff
    c.push_back({"DiffOneSideMissing", "diff $S/default.yaml", 2, "diff: B is missing"});
    c.push_back({"DiffNothing", "diff", 2, "A is required"});
    c.push_back({"DiffLayoutAndSecondScenario", "diff $S/default.yaml $S/default.yaml --layout-a tp2", 2,
                 "diff: give two scenarios A B, or one scenario with --layout-a / --layout-b, not both"});
    c.push_back({"DiffBadLayoutB", "diff $S/default.yaml --layout-b 'tp2 zz9'", 2,
                 "--layout \"tp2 zz9\": 'zz9' is not a layout token"});
    c.push_back({"DiffMissingB", "diff $S/default.yaml nowhere.yaml", 2, "nowhere.yaml"});
  }
  {  // issue 13: lcm plan search constraints
    const std::string p = "plan $S/default.yaml -q ";
    c.push_back({"PlanFixNotANumber", p + "--fix tp=x", 2, "--fix tp=x: 'tp=x': tp must be a positive integer"});
    c.push_back({"PlanFixUnknownKnob", p + "--fix zz=2", 2, "--fix zz=2: 'zz=2': unknown knob 'zz'"});
    c.push_back({"PlanFixNoEquals", p + "--fix tp", 2, "--fix tp: 'tp': expected KNOB=VALUE"});
    c.push_back({"PlanFixBadSharding", p + "--fix sharding=zero9", 2, "'sharding=zero9': not a sharding"});
    c.push_back({"PlanMaxNotSize", p + "--max sharding=2", 2, "--max takes a size knob"});
    c.push_back({"PlanMaxZero", p + "--max pp=0", 2, "'pp=0': pp must be a positive integer"});
    c.push_back({"PlanExcludeUnknown", p + "--exclude zz", 2, "--exclude zz: 'zz' is not a value of a searched knob"});
    c.push_back({"PlanExcludeAmbiguous", p + "--exclude allgather", 2,
                 "'allgather' names more than one knob: say which, e.g. cp_comm=allgather or dispatcher=allgather"});
    c.push_back({"PlanExcludeEverySharding",
                 p + "--exclude no_shard --exclude optim --exclude optim_grads --exclude zero3", 2,
                 "plan: every sharding is excluded"});
    c.push_back({"PlanFixAboveMax", p + "--fix pp=4 --max pp=2", 2, "--fix pp=4 is above --max pp=2"});
    c.push_back({"PlanHeadroom100", p + "--headroom 100%", 2, "--headroom 100%: '100%' is not a percentage in [0, 100)"});
    c.push_back({"PlanHeadroomText", p + "--headroom lots", 2, "'lots' is not a percentage"});
    c.push_back({"PlanTieTooLarge", p + "--tie 150%", 2, "--tie 150%: '150%' is not a percentage"});
    c.push_back({"PlanFixNothingLeft", p + "--fix tp=3", 2,
                 "no layout to try for 64 GPUs under the constraints (fix tp=3)"});
  }
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class BadInput : public testing::TestWithParam<Case> {};

TEST_P(BadInput, ExitsWithOneLine) {
  const Case& k = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("lcm_catalog_" + std::to_string(::getpid()) + "_" + k.name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& [name, text] : k.files) std::ofstream(dir / name, std::ios::binary) << text;
  const std::string cmd = "cd '" + dir.string() + "' && S='" + LCM_SOURCE_DIR + "/scenarios' && P='" + LCM_SOURCE_DIR +
                          "/hwprofiles' && { " + (k.setup.empty() ? ":" : k.setup) + "; } && timeout 30 '" +
                          LCM_BINARY_DIR + "/bin/lcm' " + k.args + " 2>err </dev/null" +
                          (k.args.find(">/dev/full") == std::string::npos ? " >out" : "");
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const std::string err = slurp(dir / "err");
  EXPECT_EQ(code, k.code) << "lcm " << k.args.substr(0, 300) << "\nstderr: " << err;
  ASSERT_FALSE(err.empty()) << "no message";
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
  EXPECT_EQ(err.rfind("lcm: ", 0), 0u) << err;
  EXPECT_NE(err.find(k.error), std::string::npos) << "expected '" << k.error << "' in: " << err;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Catalog, BadInput, testing::ValuesIn(catalog()),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(BadInputCatalog, HasAtLeastOneHundredCases) { EXPECT_GE(catalog().size(), 100u); }

}  // namespace
