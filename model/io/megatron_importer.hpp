// Private: the flag-by-flag Megatron -> scenario mapping. megatron_import.cpp holds the
// framework (flag lookup, classification, public API) and the model mapping;
// megatron_import_job.cpp the training and parallel mapping.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "megatron_internal.hpp"

namespace lcm::io {

// Flags this importer reads; every other known flag is noted, rejected or ignored.
std::span<const std::string_view> mapped_megatron_flags();

class MegatronImporter {
 public:
  MegatronImporter(const std::vector<MegatronFlag>& flags, int num_gpus, const HardwareSpec& hardware,
                   const std::string& name, const Loc& document);
  Result<MegatronDraft> run();

 private:
  struct Fail {
    ConfigError error;
  };

  // ---- flag access (values of mapped flags; '$VAR' values are errors) ----
  const MegatronFlag* get(std::string_view flag) const;
  bool on(std::string_view flag);                                    // bare flag given (and not "false")
  std::optional<std::string> text(std::string_view flag);           // value, if given
  std::optional<int64_t> integer(std::string_view flag, int64_t min);
  std::optional<double> real(std::string_view flag, double min, bool exclusive);
  [[noreturn]] void fail(std::string_view flag, std::string message) const;
  [[noreturn]] void fail_missing(std::string_view flag, std::string message) const;
  // Record that a spec key was set from `flag` (present + location for error messages).
  void from(const std::string& dotted, std::string_view flag);
  void note(std::string message) { out_.notes.push_back(std::move(message)); }

  void classify();
  void map_model();
  void map_window();
  void map_position_embedding();
  void map_vocab();
  void map_moe();
  void map_training();
  void map_parallel();
  void map_pipeline();
  void map_optimizer_sharding();
  void map_recompute();
  void map_cuda_graphs();

  std::map<std::string, const MegatronFlag*, std::less<>> by_name_;
  int num_gpus_;
  const HardwareSpec& hardware_;
  std::string name_;
  Loc document_;
  MegatronDraft out_;
};

}  // namespace lcm::io
