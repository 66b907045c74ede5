// "Did you mean" suggestions for names typed by a user (keys, enum values, commands).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace lcm::io {

// Closest candidate by edit distance (optimal string alignment), or "" when nothing is
// close enough (distance > max(2, |word|/3)).
std::string closest(std::string_view word, std::span<const std::string> candidates);
// "unknown key 'hiden_size'; did you mean 'hidden_size'?" (the second part only when close).
std::string unknown_message(std::string_view what, std::string_view word, std::span<const std::string> candidates);

}  // namespace lcm::io
