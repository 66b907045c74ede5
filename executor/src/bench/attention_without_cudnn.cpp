// `lcm-exec bench attention` where lcm-exec was built without cuDNN (executor/CMakeLists.txt
// compiles bench/attention.cpp instead when cudnn_graph.h and libcudnn are found).
#include "infra/run_context.hpp"
#include "lcm/executor/error.hpp"

namespace lcm::exec {

void run_attention_bench(RunContext&) {
  throw UsageError("bench attention: this lcm-exec was built without cuDNN (no cudnn_graph.h with libcudnn found; "
                   "set CUDNN_ROOT and reconfigure)");
}

}  // namespace lcm::exec

namespace lcm::exec {

void run_cp_attention_bench(RunContext&) {
  throw UsageError("bench cp-attention: this lcm-exec was built without cuDNN (no cudnn_graph.h with libcudnn found; "
                   "set CUDNN_ROOT and reconfigure)");
}

}  // namespace lcm::exec
