// The predicted trace: valid Chrome Trace Event JSON, events of a (process, thread) never
// overlap (Perfetto requires it), op names of the schedule, and a timeline that agrees with
// the modelled step time.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "../common/test_hardware.hpp"
#include "../common/test_models.hpp"
#include "lcm/model/estimate.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/planner/report/trace.hpp"

namespace lcm {
namespace {

Scenario mixtral(int pp, int cp) {
  Scenario s;
  s.name = "trace-test";
  s.model = testing::mixtral_8x7b();
  s.model.hidden_dropout = s.model.attention_dropout = 0;
  s.hardware = testing::test_h100();
  s.training.seq_length = 32768;
  s.training.global_batch_size = 8;
  s.parallel.tensor_model_parallel_size = 2;
  s.parallel.sequence_parallel = true;
  s.parallel.context_parallel_size = cp;
  s.parallel.pipeline_model_parallel_size = pp;
  s.parallel.expert_model_parallel_size = 8;
  s.parallel.expert_tensor_parallel_size = 1;
  s.parallel.recompute_granularity = RecomputeGranularity::kSelective;
  s.parallel.use_distributed_optimizer = true;
  s.parallel.data_parallel_sharding_strategy = DpSharding::kOptim;
  s.num_gpus = 2 * cp * pp * 4;
  return s;
}

nlohmann::ordered_json trace_of(const Scenario& s, report::TraceDetail detail) {
  EXPECT_TRUE(validate_scenario(s).empty());
  const Estimate e = estimate(s);
  const Schedule sched = build_schedule(s, e.mesh, e.stage_layers, e.gpu_params);
  return report::predicted_trace(s, e, sched, report::TraceOptions{detail, 0});
}

void expect_no_overlap(const nlohmann::ordered_json& t) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> lanes;
  for (const auto& ev : t.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    lanes[{ev.at("pid").get<int>(), ev.at("tid").get<int>()}].push_back(
        {ev.at("ts").get<double>(), ev.at("dur").get<double>()});
  }
  ASSERT_FALSE(lanes.empty());
  for (auto& [lane, evs] : lanes) {
    std::sort(evs.begin(), evs.end());
    for (size_t i = 1; i < evs.size(); ++i)
      ASSERT_LE(evs[i - 1].first + evs[i - 1].second, evs[i].first + 1e-6)
          << "overlap on pid " << lane.first << " tid " << lane.second;
  }
}

TEST(Trace, SingleStageMatchesTheStepTime) {
  const Scenario s = mixtral(1, 2);
  const auto t = trace_of(s, report::TraceDetail::kOp);
  expect_no_overlap(t);
  std::set<std::string> names;
  for (const auto& ev : t.at("traceEvents"))
    if (ev.at("ph") == "X") names.insert(ev.at("name").get<std::string>());
  for (const char* n : {"embed.fwd", "L.attn.qkv.fwd", "L.attn.core.fwd", "L.attn.cp.kv.p2p.fwd",
                        "L.moe.dispatch.a2a.fwd", "L.attn.core.recompute", "L.moe.experts.fc2.bwd.wgrad",
                        "logits.fwd", "loss.bwd", "optimizer.step"})
    EXPECT_TRUE(names.count(n)) << n;
  // One stage: the timeline is the sum of the same op times the step model adds up.
  const double end = t.at("otherData").at("trace_end_s").get<double>();
  const double step = t.at("otherData").at("predicted_step_s").get<double>();
  EXPECT_NEAR(end / step, 1.0, 0.01);
}

TEST(Trace, PipelineStagesAreProcessesAndStreamsAreThreads) {
  const Scenario s = mixtral(4, 1);
  const auto t = trace_of(s, report::TraceDetail::kLayer);
  expect_no_overlap(t);
  std::set<int> pids;
  std::set<std::string> threads;
  for (const auto& ev : t.at("traceEvents")) {
    if (ev.at("ph") == "X") pids.insert(ev.at("pid").get<int>());
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name") threads.insert(ev.at("args").at("name").get<std::string>());
  }
  EXPECT_EQ(pids.size(), 4u);
  EXPECT_EQ(threads, (std::set<std::string>{"compute", "TP", "CP", "EP", "DP", "PP"}));
  // 1F1B fill and drain: the pipeline takes longer than one stage's work, and the trace
  // ends within 5% of the modelled step (the model's bubble is the closed form).
  const double end = t.at("otherData").at("trace_end_s").get<double>();
  const double step = t.at("otherData").at("predicted_step_s").get<double>();
  EXPECT_NEAR(end / step, 1.0, 0.05);
}

// Layer indices, by hand: 4 layers on 2 stages with 2 model chunks each (one layer per
// virtual stage) put layers 0 and 2 on stage 0, 1 and 3 on stage 1 (chunk j of stage r
// is virtual stage j*2 + r). With layer 1 dense, stage 1 draws its dense layer 1, then
// MoE layer 3 forward; the backward runs them last first. Stage-edge and step ops carry
// no layer.
TEST(Trace, EventsCarryTheirGlobalLayer) {
  Scenario s = mixtral(2, 1);
  s.model.num_layers = 4;
  s.model.moe_layer_pattern = {1, 0, 1, 1};
  s.parallel.num_layers_per_virtual_pipeline_stage = 1;
  s.training.global_batch_size = 8;  // 2 micro-batches per pipeline
  std::map<std::pair<int, std::string>, std::vector<int>> seen;  // (stage, name) -> layers, micro-batch 0
  int edge_ops = 0;
  const auto t = trace_of(s, report::TraceDetail::kOp);
  for (const auto& ev : t.at("traceEvents")) {
    if (ev.at("ph") != "X" || ev.at("args").at("micro_batch") != 0) continue;
    const std::string name = ev.at("name");
    if (!name.starts_with("L.")) {
      EXPECT_FALSE(ev.at("args").contains("layer")) << name;
      ++edge_ops;
      continue;
    }
    seen[{ev.at("pid").get<int>(), name}].push_back(ev.at("args").at("layer").get<int>());
  }
  EXPECT_GT(edge_ops, 0);
  EXPECT_EQ(seen[std::make_pair(0, std::string("L.attn.qkv.fwd"))], (std::vector<int>{0, 2}));
  EXPECT_EQ(seen[std::make_pair(0, std::string("L.attn.qkv.bwd.wgrad"))], (std::vector<int>{2, 0}));
  EXPECT_EQ(seen[std::make_pair(1, std::string("L.attn.qkv.fwd"))], (std::vector<int>{1, 3}));
  EXPECT_EQ(seen[std::make_pair(1, std::string("L.attn.qkv.bwd.dgrad"))], (std::vector<int>{3, 1}));
  EXPECT_EQ(seen[std::make_pair(1, std::string("L.mlp.fc1.fwd"))], (std::vector<int>{1}));
  EXPECT_EQ(seen[std::make_pair(1, std::string("L.moe.router.fwd"))], (std::vector<int>{3}));
  EXPECT_EQ(seen[std::make_pair(0, std::string("L.moe.router.fwd"))], (std::vector<int>{0, 2}));

  std::map<int, std::vector<std::pair<std::string, int>>> layer_events;  // stage -> (name, layer)
  const auto layer_trace = trace_of(s, report::TraceDetail::kLayer);
  for (const auto& ev : layer_trace.at("traceEvents"))
    if (ev.at("ph") == "X" && ev.at("args").at("micro_batch") == 0)
      layer_events[ev.at("pid").get<int>()].push_back({ev.at("name"), ev.at("args").at("layer").get<int>()});
  const std::vector<std::pair<std::string, int>> stage1{{"L.dense.fwd", 1}, {"L.moe.fwd", 3}, {"L.moe.recompute", 3},
                                                        {"L.moe.bwd", 3}, {"L.dense.recompute", 1}, {"L.dense.bwd", 1}};
  EXPECT_EQ(layer_events[1], stage1);
}

}  // namespace
}  // namespace lcm
