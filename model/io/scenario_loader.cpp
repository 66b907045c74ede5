// Scaffolding: replaced by the real implementation in this issue.
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/io/megatron_import.hpp"
namespace lcm::io {} // namespace lcm::io
