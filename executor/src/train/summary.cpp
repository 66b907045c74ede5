// summary.json of `lcm-exec train` (summary.hpp, docs/train-output.md).
#include "lcm/executor/train/summary.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "lcm/executor/error.hpp"
#include "lcm/executor/timing.hpp"

namespace lcm::exec::train {

double RoutingRecord::dropped_fraction() const {
  int64_t in = 0, out = 0;
  for (int64_t v : load) in += v;
  for (int64_t v : kept) out += v;
  return in > 0 ? static_cast<double>(in - out) / static_cast<double>(in) : 0.0;
}

void TrainSummary::finish() {
  std::vector<double> t;
  int64_t tokens = 0;
  for (const StepRecord& s : steps)
    if (!s.warmup) t.push_back(s.time_s), tokens += s.tokens;
  if (t.empty())
    for (const StepRecord& s : steps) t.push_back(s.time_s), tokens += s.tokens;
  measured_steps = static_cast<int>(t.size());
  if (t.empty()) return;
  // Medians by the benchmarks' statistics (compute_stats: unit-free despite its `_us` names).
  auto median_of = [&](double StepRecord::*field) {
    std::vector<double> v;
    for (const StepRecord& s : steps)
      if (!s.warmup && s.*field >= 0) v.push_back(s.*field);
    return v.empty() ? -1.0 : compute_stats(std::move(v)).median_us;
  };
  sm_clock_mhz_median = median_of(&StepRecord::sm_clock_mhz);
  power_w_median = median_of(&StepRecord::power_w);
  double total = 0;
  for (double v : t) total += v;
  const TimeStats st = compute_stats(std::move(t));
  step_time_median = st.median_us;
  step_time_min = st.min_us;
  step_time_max = st.max_us;
  tokens_per_s = total > 0 ? static_cast<double>(tokens) / total : 0.0;
  mfu = step_time_median > 0 && peak_flops > 0 ? model_flops_per_step / step_time_median / (peak_flops * device_count)
                                                 : 0.0;
}

nlohmann::json to_json(const TrainSummary& s) {
  using nlohmann::json;
  json overrides = json::array();
  for (const auto& [k, v] : s.overrides) overrides.push_back({k, v});
  json scaled = json::object();
  if (s.scaled) scaled["model.num_layers"] = {{"from", s.layers_from}, {"to", s.layers_to}};
  json steps = json::array();
  for (const StepRecord& r : s.steps)
    steps.push_back({{"step", r.step}, {"time_s", r.time_s}, {"loss", r.loss}, {"grad_norm", r.grad_norm},
                     {"aux_loss", r.aux_loss}, {"tokens", r.tokens}, {"warmup", r.warmup},
                     {"sm_clock_mhz", r.sm_clock_mhz}, {"power_w", r.power_w}});
  json ops = json::array();
  for (const OpAggregate& o : s.ops)
    ops.push_back({{"name", o.name}, {"layer", o.layer}, {"count", o.count}, {"total_s", o.total_s}, {"mean_s", o.mean_s()}});
  json by = json::object();
  for (int c = 0; c < kNumMemCategories; ++c)
    by[to_string(static_cast<MemCategory>(c))] = s.at_peak_by[static_cast<size_t>(c)];
  json routing = json::array();
  for (const RoutingRecord& r : s.routing)
    routing.push_back({{"layer", r.layer}, {"load", r.load}, {"kept", r.kept}, {"dropped_fraction", r.dropped_fraction()}});
  return {
      {"format", kTrainFormat},
      {"scenario", {{"path", s.scenario_path}, {"name", s.scenario_name}}},
      {"overrides", overrides},
      {"scaled", scaled},
      {"device", {{"name", s.device_name}, {"count", s.device_count}, {"cuda_driver", s.cuda_driver}, {"cudnn", s.cudnn}}},
      {"config",
       {{"seq_length", s.seq_length}, {"micro_batch_size", s.micro_batch_size}, {"micro_batches", s.micro_batches},
        {"recompute", s.recompute}, {"precision", s.precision}, {"seed", s.seed}, {"data", s.data}}},
      {"steps", steps},
      {"step_time_s",
       {{"median", s.step_time_median}, {"min", s.step_time_min}, {"max", s.step_time_max},
        {"measured_steps", s.measured_steps}}},
      {"tokens_per_s", s.tokens_per_s},
      {"mfu", s.mfu},
      {"clocks", {{"sm_mhz_median", s.sm_clock_mhz_median}, {"power_w_median", s.power_w_median}}},
      {"host",
       {{"gemm_enqueue_s", s.host.gemm_enqueue_s}, {"kernel_enqueue_s", s.host.kernel_enqueue_s},
        {"sync_s", s.host.sync_s}}},
      {"model_flops_per_step", s.model_flops_per_step},
      {"peak_flops", s.peak_flops},
      {"ops", ops},
      {"memory",
       {{"peak_allocated_bytes", s.peak_allocated}, {"peak_reserved_bytes", s.peak_reserved}, {"at_peak_by_category", by},
        {"context_bytes", s.context_bytes}, {"library_workspace_bytes", s.library_workspace_bytes}}},
      {"routing", routing},
  };
}

TrainSummary summary_from_json(const nlohmann::json& j) {
  if (j.at("format").get<std::string>() != kTrainFormat)
    throw std::runtime_error("not an lcm-exec train summary (format " + j.at("format").dump() + ")");
  TrainSummary s;
  s.scenario_path = j.at("scenario").at("path").get<std::string>();
  s.scenario_name = j.at("scenario").at("name").get<std::string>();
  for (const auto& o : j.at("overrides")) s.overrides.emplace_back(o.at(0).get<std::string>(), o.at(1).get<std::string>());
  if (j.at("scaled").contains("model.num_layers")) {
    s.scaled = true;
    s.layers_from = j["scaled"]["model.num_layers"].at("from").get<int>();
    s.layers_to = j["scaled"]["model.num_layers"].at("to").get<int>();
  }
  const auto& d = j.at("device");
  s.device_name = d.at("name").get<std::string>();
  s.device_count = d.at("count").get<int>();
  s.cuda_driver = d.at("cuda_driver").get<int>();
  s.cudnn = d.at("cudnn").get<int64_t>();
  const auto& c = j.at("config");
  s.seq_length = c.at("seq_length").get<int64_t>();
  s.micro_batch_size = c.at("micro_batch_size").get<int>();
  s.micro_batches = c.at("micro_batches").get<int>();
  s.recompute = c.at("recompute").get<std::string>();
  s.precision = c.at("precision").get<std::string>();
  s.seed = c.at("seed").get<uint64_t>();
  s.data = c.value("data", std::string("synthetic"));
  for (const auto& r : j.at("steps"))
    s.steps.push_back({r.at("step").get<int>(), r.at("time_s").get<double>(), r.at("loss").get<double>(),
                       r.at("grad_norm").get<double>(), r.value("aux_loss", 0.0), r.at("tokens").get<int64_t>(),
                       r.at("warmup").get<bool>(), r.value("sm_clock_mhz", -1.0), r.value("power_w", -1.0)});
  const auto& st = j.at("step_time_s");
  s.step_time_median = st.at("median").get<double>();
  s.step_time_min = st.at("min").get<double>();
  s.step_time_max = st.at("max").get<double>();
  s.measured_steps = st.at("measured_steps").get<int>();
  s.tokens_per_s = j.at("tokens_per_s").get<double>();
  s.mfu = j.at("mfu").get<double>();
  if (j.contains("clocks")) {  // summaries before session 10 have none
    s.sm_clock_mhz_median = j["clocks"].value("sm_mhz_median", -1.0);
    s.power_w_median = j["clocks"].value("power_w_median", -1.0);
  }
  if (j.contains("host")) {  // summaries before session 11 have none
    s.host.gemm_enqueue_s = j["host"].value("gemm_enqueue_s", -1.0);
    s.host.kernel_enqueue_s = j["host"].value("kernel_enqueue_s", -1.0);
    s.host.sync_s = j["host"].value("sync_s", -1.0);
  }
  s.model_flops_per_step = j.at("model_flops_per_step").get<double>();
  s.peak_flops = j.value("peak_flops", 0.0);
  for (const auto& o : j.at("ops"))
    s.ops.push_back({o.at("name").get<std::string>(), o.at("layer").get<int>(), o.at("count").get<int64_t>(),
                     o.at("total_s").get<double>()});
  const auto& m = j.at("memory");
  s.peak_allocated = m.at("peak_allocated_bytes").get<size_t>();
  s.peak_reserved = m.at("peak_reserved_bytes").get<size_t>();
  for (int k = 0; k < kNumMemCategories; ++k)
    s.at_peak_by[static_cast<size_t>(k)] = m.at("at_peak_by_category").at(to_string(static_cast<MemCategory>(k))).get<size_t>();
  s.context_bytes = m.at("context_bytes").get<size_t>();
  s.library_workspace_bytes = m.at("library_workspace_bytes").get<size_t>();
  for (const auto& r : j.at("routing"))
    s.routing.push_back({r.at("layer").get<int>(), r.at("load").get<std::vector<int64_t>>(),
                         r.at("kept").get<std::vector<int64_t>>()});
  return s;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw ExecError("cannot write " + tmp);
    f << text;
    f.flush();
    if (!f) throw ExecError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw ExecError("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace lcm::exec::train
