// Dry runs of the training runner (runner.hpp): the model's control flow without CUDA.
#include <memory>

#include "lcm/executor/train/runner.hpp"
#include "train/event_recorder.hpp"
#include "train/model.hpp"

namespace lcm::exec::train {

namespace {

// Fake device memory for dry runs: distinct, aligned addresses that are never touched.
RawBackend fake_backend() {
  auto next = std::make_shared<uintptr_t>(uintptr_t{1} << 40);
  return {[next](size_t bytes) {
            void* p = reinterpret_cast<void*>(*next);
            *next += (bytes + 4095) / 4096 * 4096 + 4096;
            return p;
          },
          [](void*) {}};
}

}  // namespace

std::vector<OpTag> dry_run_tags(const TrainPlan& p, int micro_batches) {
  CachingAllocator alloc(fake_backend());
  TagLog log;
  {
    Model m(p, alloc, nullptr, true, nullptr, nullptr);
    const int mbs = micro_batches < 0 ? p.micro_batches : micro_batches;
    for (int mb = 0; mb < mbs; ++mb) m.micro_batch(nullptr, nullptr, 1.0f, nullptr, nullptr, mb, &log);
    m.optimizer_step(AdamParams{}, 1.0f, nullptr, &log);
  }
  return log.tags;
}

}  // namespace lcm::exec::train
