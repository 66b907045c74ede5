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

}  // namespace
}  // namespace lcm
