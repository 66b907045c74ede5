// Incremental evaluation: memory and step time of many layouts of one scenario (the
// planner's search), each model function computed once per distinct input and the
// results composed with the functions step_time() itself is made of, so every result is
// bit-identical to a fresh estimate of that layout.
//
// What is shared, and when: every cached function declares its key next to itself
// (cache_key.hpp lists them): stage_layers / gpu_params / count_flops (structure_key),
// estimate_memory (memory_key), mesh_topology (topology_key), the op lists of
// build_schedule (layer_ops_key, edge_ops_key, step_ops_key) and their timings
// (pass_time_key). A key holds the layout inputs its function reads; everything else is
// the estimator's scope: the base scenario it was made with, which no call can change
// (select() takes only the layout inputs from its argument). So a knob outside the
// layout inputs cannot serve a stale result whatever the model functions read, and one
// inside them is in every key whose function reads it (tests/model/cache_key_test.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/step_time.hpp"

namespace lcm {

// The inputs a layout sets: the whole parallel spec, the micro-batch size and the MoE
// token dispatcher. copy_layout_inputs writes exactly these from `from` into `to`.
void copy_layout_inputs(const Scenario& from, Scenario& to);
// Whether a and b differ at most in their layout inputs (the same scope).
bool same_scope(const Scenario& a, const Scenario& b);

class IncrementalEstimator {
 public:
  explicit IncrementalEstimator(const Scenario& base);
  ~IncrementalEstimator();
  IncrementalEstimator(const IncrementalEstimator&) = delete;
  IncrementalEstimator& operator=(const IncrementalEstimator&) = delete;

  // Selects the base scenario with the layout inputs of `s` (the rest of `s` is not
  // read; it is meant to be the base's: same_scope). Precondition: the selected
  // scenario is valid (validate_scenario) and m == derive_mesh(s).
  void select(const Scenario& s, const Mesh& m);
  // select(s, m) with the mesh of the current selection, for an `s` that differs from the
  // selected scenario at most in the DP sharding knobs (data_parallel_sharding_strategy,
  // use_distributed_optimizer, overlap_param_gather; none is a mesh size): the planner's
  // loop over the shardings of one layout. Copies only those knobs, and keeps the cache
  // keys that read none of them (structure, topology, layer and edge ops, memory base;
  // tests/model/cache_key_test.cpp checks that they read none).
  void select_sharding(const Scenario& s);
  const Scenario& scenario() const;

  // estimate_memory of the selected scenario (stage_layers, gpu_params of its mesh).
  const Memory& memory();
  // A lower bound of step_time().step_s from the pipeline passes alone (the step
  // collectives and the optimizer only add to it), below it by a rounding margin.
  double step_time_lower_bound();
  // step_time(s, m, build_schedule(s, m, ...), count_flops(s, m)) of the selected
  // scenario, bit for bit, without StepTime::stages (left empty).
  StepTime step_time();

  // Drops every cached result (memory use grows with the distinct inputs seen).
  void clear();
  uint64_t schedules_built() const;  // build_schedule calls so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lcm
