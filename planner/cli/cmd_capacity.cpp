// Scaffolding: replaced in this issue.
#include "commands.hpp"
namespace lcm::cli {
void register_capacity(CLI::App&, int&) {}
}  // namespace lcm::cli
