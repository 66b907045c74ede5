// The runner's op recorders (event_recorder.hpp).
#include "train/event_recorder.hpp"

#include <cassert>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train {

std::string tag_name(const OpTag& t) { return op_name(t.id, t.pass, t.part, t.layer >= 0 ? kLayerPrefix : ""); }

EventRecorder::~EventRecorder() {
  for (cudaEvent_t e : all_) cudaEventDestroy(e);  // no throw in a destructor; errors here are moot
}

cudaEvent_t EventRecorder::take() {
  if (pool_.empty()) {
    cudaEvent_t e = nullptr;
    LCM_CUDA_CHECK(cudaEventCreate(&e));
    all_.push_back(e);
    return e;
  }
  cudaEvent_t e = pool_.back();
  pool_.pop_back();
  return e;
}

void EventRecorder::begin_step(int step, bool warmup, cudaStream_t s) {
  assert(open_.empty() && done_.empty());
  step_ = step;
  warmup_ = warmup;
  step_ref_ = take();
  LCM_CUDA_CHECK(cudaEventRecord(step_ref_, s));
  if (!origin_) origin_ = step_ref_;  // kept for the whole run
}

void EventRecorder::begin(const OpTag& tag, cudaStream_t s) {
  cudaEvent_t e = take();
  LCM_CUDA_CHECK(cudaEventRecord(e, s));
  open_.push_back({tag, e});
}

void EventRecorder::end(cudaStream_t s) {
  assert(!open_.empty());
  cudaEvent_t e = take();
  LCM_CUDA_CHECK(cudaEventRecord(e, s));
  done_.push_back({open_.back().tag, open_.back().start, e});
  open_.pop_back();
}

void EventRecorder::resolve_step() {
  assert(open_.empty());
  float ref_ms = 0;
  LCM_CUDA_CHECK(cudaEventElapsedTime(&ref_ms, origin_, step_ref_));
  for (const Done& d : done_) {
    float a = 0, b = 0;
    LCM_CUDA_CHECK(cudaEventElapsedTime(&a, step_ref_, d.start));
    LCM_CUDA_CHECK(cudaEventElapsedTime(&b, d.start, d.stop));
    const std::string name = tag_name(d.tag);
    nlohmann::json args = {{"layer", d.tag.layer}, {"micro_batch", d.tag.micro_batch}, {"step", step_}};
    if (warmup_) args["warmup"] = true;
    events_.push_back({{"name", name}, {"ph", "X"}, {"pid", 0}, {"tid", 0},
                       {"ts", (static_cast<double>(ref_ms) + a) * 1e3}, {"dur", static_cast<double>(b) * 1e3},
                       {"args", args}});
    if (!warmup_) {
      const auto key = std::make_pair(name, d.tag.layer);
      auto it = index_.find(key);
      if (it == index_.end()) {
        it = index_.emplace(key, agg_.size()).first;
        agg_.push_back({name, d.tag.layer, 0, 0.0});
      }
      OpAggregate& g = agg_[it->second];
      ++g.count;
      g.total_s += static_cast<double>(b) * 1e-3;
    }
    pool_.push_back(d.start);
    pool_.push_back(d.stop);
  }
  done_.clear();
  if (step_ref_ != origin_) pool_.push_back(step_ref_);
  step_ref_ = nullptr;
}

const std::vector<OpAggregate> EventRecorder::aggregates() const { return agg_; }

nlohmann::json EventRecorder::trace(int rank, const std::string& process_name) const {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", process_name}}}});
  ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
  for (nlohmann::json e : events_) {
    e["pid"] = rank;
    ev.push_back(std::move(e));
  }
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

}  // namespace lcm::exec::train
