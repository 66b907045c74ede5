// Private: what lcm knows about Megatron-LM's command-line flags.
//
//  * megatron_flag_names(): every flag Megatron-LM defines (generated, sorted), with
//    whether it takes a value -- the command-line splitter needs that, and a flag outside
//    this list is an error naming the closest known flag.
//  * flag_rules(): the flags that change cost but that lcm does not model. kNoted ones are
//    accepted and reported in the import notes (unless given their neutral value);
//    kUnsupported ones are errors (unless neutral).
//  * The importer's own handler table (megatron_import.cpp) holds the mapped flags.
//  * Every other known flag is accepted and ignored: data paths, logging, checkpointing,
//    learning-rate schedule, initialisation, dropout, seeds, evaluation, tokenizer files,
//    timers, profiling, fault tolerance, inference/RL serving knobs, kernel-fusion toggles.
#pragma once

#include <span>
#include <string_view>

namespace lcm::io {

struct MegatronFlagName {
  std::string_view name;  // without the leading "--"
  bool takes_value;
};
std::span<const MegatronFlagName> megatron_flag_names();
const MegatronFlagName* find_megatron_flag(std::string_view name);

enum class FlagRole { kNoted, kUnsupported };
struct FlagRule {
  std::string_view name;
  FlagRole role;
  std::string_view neutral;  // '|'-separated values that mean "off" ("" for bare flags)
  std::string_view why;      // what lcm does not model
};
std::span<const FlagRule> flag_rules();
const FlagRule* find_flag_rule(std::string_view name);
// True when `value` is one of the rule's neutral values.
bool is_neutral(const FlagRule& rule, std::string_view value);

}  // namespace lcm::io
