// Shared helpers of the io tests: a valid base scenario text, loading from strings, and
// assertions on the rendered one-line error.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::io::test {

inline std::string source_dir() { return LCM_SOURCE_DIR; }
inline std::string profile_dir() { return source_dir() + "/hwprofiles"; }
inline std::string data_dir() { return source_dir() + "/tests/data"; }

// A small dense model that validates on 8 GPUs with room to break each rule.
inline const char* kBaseScenario = R"(name: base
model:
  name: tiny
  num_layers: 8
  hidden_size: 1024
  ffn_hidden_size: 4096
  num_attention_heads: 16
  vocab_size: 32000
  position_embedding_type: rope
training:
  seq_length: 8192
  micro_batch_size: 1
  global_batch_size: 16
parallel:
  tensor_model_parallel_size: 2
  sequence_parallel: true
hardware:
  profile: h200-sxm
  num_gpus: 8
)";

inline LoadOptions opts_with(std::vector<std::string> sets = {}) {
  LoadOptions o;
  o.profile_dirs = {profile_dir()};
  for (const std::string& s : sets) {
    auto ov = parse_override(s);
    EXPECT_TRUE(ov.ok()) << s << ": " << (ov.ok() ? "" : ov.error().str());
    if (ov.ok()) o.overrides.push_back(ov.value());
  }
  return o;
}

inline Result<Scenario> load_text(const std::string& text, std::vector<std::string> sets = {}) {
  return load_scenario_string(text, "test.yaml", opts_with(std::move(sets)));
}

// Replace the first occurrence of `from` in the base scenario (the test fails if absent).
inline std::string base_with(const std::string& from, const std::string& to) {
  std::string s = kBaseScenario;
  const size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << "base scenario has no '" << from << "'";
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

// The error rendered as one line; "" (and a test failure) if loading succeeded.
inline std::string error_of(const Result<Scenario>& r) {
  EXPECT_FALSE(r.ok()) << "expected a load error";
  return r.ok() ? std::string() : r.error().str();
}

}  // namespace lcm::io::test
