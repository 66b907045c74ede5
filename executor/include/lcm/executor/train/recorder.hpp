// Op timing of the training runner: every op of a step is bracketed by begin/end on the
// stream it runs on, and named with the model's typed contract (lcm/model/ops.hpp): op id,
// pass, GEMM part and the global layer index (-1 for ops outside a layer, e.g. the
// embedding, the loss, the optimizer step), so that `lcm compare` lines measured ops up
// with predicted ones by (id, pass, part, layer).
//
// The runner's implementation records CUDA events in pools and resolves them once per step
// (no host synchronisation inside a step); a null recorder (nullptr) records nothing.
#pragma once

#include <cuda_runtime_api.h>

#include "lcm/model/ops.hpp"

namespace lcm::exec::train {

struct OpTag {
  OpId id = OpId::kNone;
  Pass pass = Pass::kFwd;
  GemmPart part = GemmPart::kNone;
  int layer = -1;        // global layer index; -1 outside the layers
  int micro_batch = -1;  // -1 for once-per-step ops
};

class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  virtual void begin(const OpTag& tag, cudaStream_t stream) = 0;
  virtual void end(cudaStream_t stream) = 0;
};

// Brackets one op; tolerates a null recorder.
class OpScope {
 public:
  OpScope(OpRecorder* r, const OpTag& tag, cudaStream_t s) : r_(r), s_(s) { if (r_) r_->begin(tag, s_); }
  ~OpScope() { if (r_) r_->end(s_); }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpRecorder* r_;
  cudaStream_t s_;
};

}  // namespace lcm::exec::train
