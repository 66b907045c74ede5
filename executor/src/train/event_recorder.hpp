// The runner's OpRecorder implementations (recorder.hpp): CUDA event pairs from a pool,
// resolved once per step after the stream synchronised (no host synchronisation inside a
// step), and a tag log for dry runs.
#pragma once

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lcm/executor/train/recorder.hpp"
#include "lcm/executor/train/summary.hpp"

namespace lcm::exec::train {

// Records the tags only (dry runs, the contract test).
class TagLog : public OpRecorder {
 public:
  void begin(const OpTag& tag, cudaStream_t) override { tags.push_back(tag); }
  void end(cudaStream_t) override {}
  std::vector<OpTag> tags;
};

// The full name of a tag: lcm::op_name with the "L." prefix inside a layer.
std::string tag_name(const OpTag& t);

class EventRecorder : public OpRecorder {
 public:
  EventRecorder() = default;
  ~EventRecorder() override;
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Brackets a step: records the step's reference event on `s`.
  void begin_step(int step, bool warmup, cudaStream_t s);
  void begin(const OpTag& tag, cudaStream_t s) override;
  void end(cudaStream_t s) override;
  // After the stream synchronised: turns the step's events into trace events and per-op
  // totals (the latter only for non-warm-up steps), and returns the events to the pool.
  void resolve_step();

  const std::vector<OpAggregate> aggregates() const;  // per (name, layer), first-seen order
  nlohmann::json trace(int rank, const std::string& process_name) const;  // Chrome trace

 private:
  struct Open {
    OpTag tag;
    cudaEvent_t start;
  };
  struct Done {
    OpTag tag;
    cudaEvent_t start, stop;
  };
  cudaEvent_t take();
  std::vector<cudaEvent_t> pool_, all_;
  std::vector<Open> open_;
  std::vector<Done> done_;
  cudaEvent_t origin_ = nullptr;  // the first step's reference event: ts 0 of the trace
  cudaEvent_t step_ref_ = nullptr;
  int step_ = 0;
  bool warmup_ = false;
  nlohmann::json events_ = nlohmann::json::array();
  std::map<std::pair<std::string, int>, size_t> index_;
  std::vector<OpAggregate> agg_;
};

}  // namespace lcm::exec::train
