// The host costs of lcm-exec train's own enqueue path, measured at start (summary.json
// "host"; docs/train-output.md). lcm compare predicts the run with them in place of the
// profile's `host:` block, which holds PyTorch eager's (docs/compare.md, "Host costs").
#pragma once

#include <cuda_runtime_api.h>

#include "lcm/executor/train/summary.hpp"

namespace lcm::exec {
class LtGemm;
}

namespace lcm::exec::train {

// Medians of `reps` host enqueues each, with the stream held by a StreamGate so that the GPU
// never runs ahead of the host being timed: a cuBLASLt GEMM through `gemm` (a 128 x 128 x 128
// BF16 shape whose algorithm is cached first, as every shape of a step is after its first
// micro-batch) and one of the runner's elementwise kernels; and the device-to-host round trip
// (cudaStreamSynchronize after one tiny kernel on an idle GPU, its enqueue excluded). Leaves
// the stream idle.
HostCosts measure_host_costs(LtGemm& gemm, cudaStream_t stream, int reps = 200);

}  // namespace lcm::exec::train
