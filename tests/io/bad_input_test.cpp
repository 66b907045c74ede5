// One test per kind of bad input: the rendered one-line message carries
// file:line:column, the key and what was expected.
#include "io_test_util.hpp"

namespace lcm::io::test {
namespace {

using testing::HasSubstr;
using testing::StartsWith;

TEST(BadInput, MalformedYamlGivesParserPosition) {
  const std::string text = "name: x\nmodel:\n  num_layers: [1, 2\n  hidden_size: 4\n";
  const std::string e = error_of(load_text(text));
  EXPECT_THAT(e, StartsWith("test.yaml:"));
  EXPECT_THAT(e, HasSubstr("malformed YAML"));
  EXPECT_THAT(e, testing::MatchesRegex("test\\.yaml:[0-9]+:[0-9]+: .*"));
}

TEST(BadInput, UnclosedFlowMappingIsMalformed) {
  EXPECT_THAT(error_of(load_text("name: x\nmodel: {num_layers: 2\n")), HasSubstr("malformed YAML"));
}

TEST(BadInput, DeepNestingIsAnErrorNotACrash) {
  std::string deep(2000, '[');
  const std::string e = error_of(load_text("name: " + deep + "\n"));
  EXPECT_THAT(e, StartsWith("test.yaml:"));
  EXPECT_THAT(e, HasSubstr("YAML nesting too deep"));
}

TEST(BadInput, NotAMapping) {
  EXPECT_EQ(error_of(load_text("- a\n- b\n")),
            "test.yaml:1:1: expected a scenario mapping with name, model, training, parallel and hardware sections, "
            "got a list");
  EXPECT_THAT(error_of(load_text("")), HasSubstr("got nothing (null)"));
}

TEST(BadInput, UnknownKeyNamesTheClosestValidKey) {
  EXPECT_EQ(error_of(load_text(base_with("  hidden_size: 1024", "  hiden_size: 1024"))),
            "test.yaml:5:3: model.hiden_size: unknown key 'hiden_size'; did you mean 'hidden_size'?");
  EXPECT_EQ(error_of(load_text(base_with("training:", "trainig:"))),
            "test.yaml:10:1: trainig: unknown key 'trainig'; did you mean 'training'?");
  EXPECT_EQ(error_of(load_text(base_with("  sequence_parallel: true", "  completely_unrelated: 1"))),
            "test.yaml:16:3: parallel.completely_unrelated: unknown key 'completely_unrelated'");
}

TEST(BadInput, KeyInTheWrongSectionOrWithMegatronDashes) {
  EXPECT_EQ(error_of(load_text(base_with("  vocab_size: 32000", "  vocab_size: 32000\n  sequence_parallel: true"))),
            "test.yaml:9:3: model.sequence_parallel: key 'sequence_parallel' belongs in section 'parallel:'");
  EXPECT_EQ(error_of(load_text(base_with("  sequence_parallel: true", "  sequence-parallel: true"))),
            "test.yaml:16:3: parallel.sequence-parallel: unknown key 'sequence-parallel'; did you mean "
            "'sequence_parallel'? (keys are Megatron-Core field names)");
}

TEST(BadInput, DuplicateKey) {
  EXPECT_EQ(error_of(load_text(base_with("  hidden_size: 1024", "  hidden_size: 1024\n  hidden_size: 2048"))),
            "test.yaml:6:3: model.hidden_size: duplicate key (first given on line 5)");
}

TEST(BadInput, WrongTypes) {
  EXPECT_EQ(error_of(load_text(base_with("num_layers: 8", "num_layers: eight"))),
            "test.yaml:4:3: model.num_layers: expected an integer in [1, 1024], got 'eight'");
  EXPECT_EQ(error_of(load_text(base_with("num_layers: 8", "num_layers: 8.5"))),
            "test.yaml:4:3: model.num_layers: expected an integer in [1, 1024], got '8.5'");
  EXPECT_EQ(error_of(load_text(base_with("num_layers: 8", "num_layers: \"8\""))),
            "test.yaml:4:3: model.num_layers: expected an integer in [1, 1024], got the quoted string \"8\" (remove the quotes)");
  EXPECT_EQ(error_of(load_text(base_with("sequence_parallel: true", "sequence_parallel: yes please"))),
            "test.yaml:16:3: parallel.sequence_parallel: expected true or false, got 'yes please'");
  EXPECT_EQ(error_of(load_text(base_with("num_layers: 8", "num_layers: [8]"))),
            "test.yaml:4:3: model.num_layers: expected an integer in [1, 1024], got a list");
  EXPECT_EQ(error_of(load_text(base_with("parallel:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\n",
                                         "parallel: 3\n"))),
            "test.yaml:14:1: parallel: expected a mapping of parallel keys, got '3'");
  EXPECT_EQ(error_of(load_text(base_with("seq_length: 8192", "seq_length: 8X"))),
            "test.yaml:11:3: training.seq_length: expected an integer or an integer with suffix K (x1024) or M "
            "(x1048576), e.g. 128K, got '8X'");
}

TEST(BadInput, UnknownEnumValueListsTheChoices) {
  EXPECT_EQ(error_of(load_text(base_with("position_embedding_type: rope", "position_embedding_type: alibi"))),
            "test.yaml:9:3: model.position_embedding_type: expected one of: rope, learned_absolute, none; got 'alibi'");
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"cp_comm_type=ring"})),
              HasSubstr("expected one of: p2p, all_gather (or allgather), a2a, a2a+p2p; got 'ring'"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"recompute_modules=[core_attn, mlps]"})),
              HasSubstr("--set recompute_modules=[core_attn, mlps]: parallel.recompute_modules: unknown recompute module 'mlps'"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"rank_order=tp-cp-dp-pp"})),
              HasSubstr("expected a permutation of tp, cp, ep, dp, pp joined by '-'"));
}

TEST(BadInput, MissingRequiredKeyPointsAtItsSection) {
  EXPECT_EQ(error_of(load_text(base_with("  hidden_size: 1024\n", ""))),
            "test.yaml:2:1: model.hidden_size: missing required key 'hidden_size'");
  EXPECT_EQ(error_of(load_text(base_with("  global_batch_size: 16\n", ""))),
            "test.yaml:10:1: training.global_batch_size: missing required key 'global_batch_size'");
  EXPECT_EQ(error_of(load_text(base_with("  num_gpus: 8\n", ""))),
            "test.yaml:17:1: hardware.num_gpus: missing required key 'num_gpus'");
  EXPECT_EQ(error_of(load_text(base_with("name: base\n", ""))), "test.yaml:1:1: name: missing required key 'name'");
  EXPECT_EQ(error_of(load_text(base_with("  ffn_hidden_size: 4096\n", ""))),
            "test.yaml:2:1: model.ffn_hidden_size: missing required key 'ffn_hidden_size'");
}

TEST(BadInput, MissingSection) {
  const std::string text = base_with("hardware:\n  profile: h200-sxm\n  num_gpus: 8\n", "");
  EXPECT_EQ(error_of(load_text(text)), "test.yaml:1:1: hardware: missing required section 'hardware:'");
}

TEST(BadInput, OutOfRange) {
  EXPECT_EQ(error_of(load_text(base_with("num_layers: 8", "num_layers: 0"))),
            "test.yaml:4:3: model.num_layers: expected an integer in [1, 1024], got 0");
  EXPECT_EQ(error_of(load_text(base_with("num_gpus: 8", "num_gpus: -8"))),
            "test.yaml:19:3: hardware.num_gpus: expected an integer in [1, 1048576], got -8");
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"moe_expert_capacity_factor=0"})),
              HasSubstr("--set moe_expert_capacity_factor=0: model.moe_expert_capacity_factor: expected a number > 0, got 0 (or null "
                                   "for dropless)"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"rotary_base=-1"})), HasSubstr("expected a number > 0, got -1"));
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"num_layers=99999999999"})),
              HasSubstr("expected an integer in [1, 1024], got 99999999999; 1024 is lcm's cap for this key"));
}

// model.moe_routing_skew: balanced | zipf:S (issue 12); a dense model cannot be skewed.
TEST(BadInput, MoeRoutingSkew) {
  const std::string expected = "expected balanced or zipf:S with 0 <= S <= 64 (e.g. zipf:1.2)";
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"moe_routing_skew=zipf:"})),
              HasSubstr("model.moe_routing_skew: " + expected + ", got a mapping"));
  for (const char* bad : {"uniform", "zipf:-1", "zipf:abc", "zipf:65"})
    EXPECT_THAT(error_of(load_text(kBaseScenario, {std::string("moe_routing_skew=") + bad})),
                HasSubstr(std::string("model.moe_routing_skew: '") + bad + "': " + expected))
        << bad;
  const std::string moe = base_with("  vocab_size: 32000\n", "  vocab_size: 32000\n  num_experts: 8\n  moe_ffn_hidden_size: 1024\n");
  auto ok = load_text(moe, {"moe_routing_skew=zipf:1.2"});
  ASSERT_TRUE(ok.ok()) << ok.error().str();
  EXPECT_DOUBLE_EQ(ok.value().model.moe_routing_skew, 1.2);
  auto bal = load_text(moe, {"moe_routing_skew=balanced"});
  ASSERT_TRUE(bal.ok()) << bal.error().str();
  EXPECT_EQ(bal.value().model.moe_routing_skew, 0.0);
  EXPECT_THAT(error_of(load_text(kBaseScenario, {"moe_routing_skew=zipf:1"})),
              HasSubstr("model.moe_routing_skew: moe_routing_skew needs num_experts (an MoE model)"));
}

TEST(BadInput, KvChannelsCannotBeDerived) {
  EXPECT_EQ(error_of(load_text(base_with("num_attention_heads: 16", "num_attention_heads: 24"))),
            "test.yaml:5:3: model.kv_channels: kv_channels not given and hidden_size (1024) is not divisible by "
            "num_attention_heads (24); set kv_channels (derived from model.hidden_size)");
}

TEST(BadInput, MoeLayerFreq) {
  const std::string moe = "  position_embedding_type: rope\n  num_experts: 4\n  moe_layer_freq: ";
  EXPECT_EQ(error_of(load_text(base_with("  position_embedding_type: rope\n", moe + "\"[0]*3+[1]*4\"\n"))),
            "test.yaml:11:3: model.moe_layer_freq: moe_layer_freq lists 7 layers but num_layers is 8");
  EXPECT_EQ(error_of(load_text(base_with("  position_embedding_type: rope\n", moe + "\"[0]*3+[2]*5\"\n"))),
            "test.yaml:11:3: model.moe_layer_freq: moe_layer_freq pattern '[0]*3+[2]*5' must contain only 0 and 1");
  EXPECT_THAT(error_of(load_text(base_with("  position_embedding_type: rope\n", moe + "\"[0]*3+import os\"\n"))),
              HasSubstr("only digits and , [ ] ( ) + * are allowed"));
}

TEST(BadInput, RopeScaling) {
  EXPECT_EQ(error_of(load_text(base_with("position_embedding_type: rope",
                                         "position_embedding_type: rope\n  rope_scaling: {type: yarn, factor: 4}"))),
            "test.yaml:10:3: model.rope_scaling.original_max_position_embeddings: "
            "rope_scaling.original_max_position_embeddings is required when rope_scaling.type is yarn");
  EXPECT_EQ(error_of(load_text(base_with("position_embedding_type: rope",
                                         "position_embedding_type: rope\n  rope_scaling: {type: yarn, facter: 4}"))),
            "test.yaml:10:30: model.rope_scaling: unknown key 'facter'; did you mean 'factor'?");
  EXPECT_THAT(error_of(load_text(base_with("position_embedding_type: rope",
                                           "position_embedding_type: rope\n  rope_scaling: {type: ntk}"))),
              HasSubstr("test.yaml:10:18: model.rope_scaling: type: expected one of: none, linear, llama3, yarn, "
                        "dynamic_ntk; got 'ntk'"));
}

TEST(BadInput, DistributedOptimizerContradiction) {
  EXPECT_THAT(error_of(load_text(kBaseScenario,
                                 {"use_distributed_optimizer=true", "data_parallel_sharding_strategy=no_shard"})),
              StartsWith("--set data_parallel_sharding_strategy=no_shard: parallel.data_parallel_sharding_strategy: "
                         "no_shard contradicts "
                         "use_distributed_optimizer: true"));
}

TEST(BadInput, UnknownHardwareProfile) {
  const std::string e = error_of(load_text(base_with("profile: h200-sxm", "profile: h200-sxn")));
  EXPECT_THAT(e, StartsWith("test.yaml:18:3: hardware.profile: unknown hardware profile 'h200-sxn'; did you mean "
                            "'h200-sxm'?; available: h100-sxm, h200-sxm, h200-sxm.calibrated; searched:"));
  EXPECT_THAT(error_of(load_text(base_with("profile: h200-sxm", "profile: /nonexistent/h9.yaml"))),
              HasSubstr("hardware profile file '/nonexistent/h9.yaml' not found"));
}

TEST(BadInput, MegatronConfigNeedsGpusAndHardware) {
  const std::string text = "ENV_VARS:\n  A: 1\nMODEL_ARGS:\n  --num-layers: 2\n";
  EXPECT_THAT(error_of(load_text(text)),
              StartsWith("test.yaml:3:1: MODEL_ARGS: this is a Megatron functional-test model_config.yaml: give the "
                         "GPU count and the hardware profile"));
}

TEST(BadInput, UnreadableFile) {
  auto r = load_scenario("/nonexistent/scenario.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().str(), StartsWith("/nonexistent/scenario.yaml: cannot read scenario: No such file or directory"));
}

TEST(ConfigErrorRendering, OmitsUnknownPositions) {
  EXPECT_EQ((ConfigError{"f.yaml", 3, 7, "model.x", "bad"}).str(), "f.yaml:3:7: model.x: bad");
  EXPECT_EQ((ConfigError{"f.yaml", 3, 0, "model.x", "bad"}).str(), "f.yaml:3: model.x: bad");
  EXPECT_EQ((ConfigError{"--set", 0, 0, "tp", "bad"}).str(), "--set: tp: bad");
  EXPECT_EQ((ConfigError{"f.yaml", 0, 0, "", "bad"}).str(), "f.yaml: bad");
}

}  // namespace
}  // namespace lcm::io::test
