// Scaffolding: replaced by the real implementation in this issue.
#include "lcm/model/estimate.hpp"
#include "lcm/model/scaling.hpp"
namespace lcm {} // namespace lcm
