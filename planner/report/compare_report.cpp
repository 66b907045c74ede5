// `lcm compare`: the prediction held against one `lcm-exec train` run (compare_report.hpp).
#include "lcm/planner/report/compare_report.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/planner/report/trace.hpp"

namespace lcm::report {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// ---------------------------------------------------------------------------------
// Reading JSON with the key path in every error.
// ---------------------------------------------------------------------------------
struct BadKey {
  std::string key;
  std::string message;
};

std::string got(const json& v) {
  std::string d = v.dump();
  if (d.size() > 40) d = d.substr(0, 37) + "...";
  return d;
}

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

const json& member(const json& obj, const std::string& path, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw BadKey{child(path, key), "missing"};
  return *it;
}

const json& object_at(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_object()) throw BadKey{child(path, key), "expected an object, got " + got(v)};
  return v;
}

const json& array_at(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_array()) throw BadKey{child(path, key), "expected an array, got " + got(v)};
  return v;
}

double number(const json& v, const std::string& key, double min) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) throw BadKey{key, "expected a number, got " + got(v)};
  const double x = v.get<double>();
  if (x < min) throw BadKey{key, fmt::format("expected a number >= {:g}, got {}", min, got(v))};
  return x;
}
double number_at(const json& obj, const std::string& path, const char* key, double min) {
  return number(member(obj, path, key), child(path, key), min);
}

int64_t integer(const json& v, const std::string& key, int64_t min, int64_t max) {
  if (!v.is_number_integer()) throw BadKey{key, "expected an integer, got " + got(v)};
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) throw BadKey{key, fmt::format("expected an integer in [{}, {}], got {}", min, max, x)};
  return x;
}
int64_t integer_at(const json& obj, const std::string& path, const char* key, int64_t min, int64_t max) {
  return integer(member(obj, path, key), child(path, key), min, max);
}

std::string string_at(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_string()) throw BadKey{child(path, key), "expected a string, got " + got(v)};
  return v.get<std::string>();
}

bool boolean_at(const json& obj, const std::string& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_boolean()) throw BadKey{child(path, key), "expected true or false, got " + got(v)};
  return v.get<bool>();
}

constexpr int64_t kMaxCount = int64_t{1} << 40;
constexpr int64_t kMaxLayer = 1 << 20;

// ---------------------------------------------------------------------------------
// Formatting.
// ---------------------------------------------------------------------------------
std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }
std::string ms(const std::optional<double>& s) { return s ? ms(*s) : "-"; }
std::string mib(const std::optional<double>& b) { return b ? fmt::format("{:.1f}", *b / (1024.0 * 1024.0)) : "-"; }
// One decimal, without a "-0.0%" from rounding noise.
std::string pct(double frac) {
  const double v = std::round(1000.0 * frac) / 10.0;
  return fmt::format("{:+.1f}%", v == 0.0 ? 0.0 : v);
}
// predicted / measured - 1; "-" when a side is missing or the measured value is 0.
std::optional<double> error_of(const std::optional<double>& pred, const std::optional<double>& meas) {
  if (!pred || !meas || *meas <= 0) return std::nullopt;
  return *pred / *meas - 1.0;
}
std::string err_text(const std::optional<double>& pred, const std::optional<double>& meas) {
  const auto e = error_of(pred, meas);
  return e ? pct(*e) : "-";
}
std::string layer_text(int layer) { return layer < 0 ? "-" : std::to_string(layer); }

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

const char* prefix_of(const OpName& n) { return n.prefix; }

}  // namespace


const char* to_string(CompareClass c) {
  switch (c) {
    case CompareClass::kGemm: return "GEMM";
    case CompareClass::kAttention: return "attention";
    case CompareClass::kMemoryBound: return "memory-bound";
    case CompareClass::kCommunication: return "communication";
    case CompareClass::kNotPredicted: return "not predicted";
  }
  return "?";
}

const char* to_string(LayerKind k) {
  switch (k) {
    case LayerKind::kDense: return "dense layers";
    case LayerKind::kMoe: return "MoE layers";
    case LayerKind::kMtp: return "MTP depths";
    case LayerKind::kOutside: return "outside layers";
  }
  return "?";
}

// ---------------------------------------------------------------------------------
// summary.json
// ---------------------------------------------------------------------------------
io::Result<TrainSummary> parse_train_summary(const std::string& json_text, const std::string& file) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return io::ConfigError{file, 0, 0, "", std::string("not valid JSON: ") + e.what()};
  }
  if (!j.is_object()) return io::ConfigError{file, 0, 0, "", "expected a JSON object (an lcm-exec train summary)"};
  TrainSummary m;
  m.file = file;
  try {
    const std::string format = string_at(j, "", "format");
    if (format != kTrainSummaryFormat)
      throw BadKey{"format",
                   fmt::format("'{}' is not a format lcm compare reads (expected '{}')", format, kTrainSummaryFormat)};
    const json& sc = object_at(j, "", "scenario");
    m.scenario_name = string_at(sc, "scenario", "name");
    m.scenario_path = string_at(sc, "scenario", "path");
    const json& ov = array_at(j, "", "overrides");
    for (size_t i = 0; i < ov.size(); ++i) {
      const std::string key = item("overrides", i);
      const json& p = ov[i];
      if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
        throw BadKey{key, "expected a [\"KEY\", \"VALUE\"] pair of strings, got " + got(p)};
      m.overrides.push_back({p[0].get<std::string>(), p[1].get<std::string>()});
    }
    if (const auto d = j.find("device"); d != j.end()) {
      if (!d->is_object()) throw BadKey{"device", "expected an object, got " + got(*d)};
      m.device = string_at(*d, "device", "name");
    }
    const json& steps = array_at(j, "", "steps");
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::string key = item("steps", i);
      if (!steps[i].is_object()) throw BadKey{key, "expected an object, got " + got(steps[i])};
      const int step = static_cast<int>(integer_at(steps[i], key, "step", 0, kMaxCount));
      number_at(steps[i], key, "time_s", 0);
      if (!boolean_at(steps[i], key, "warmup") && m.first_measured_step == 0) m.first_measured_step = step;
    }
    const json& st = object_at(j, "", "step_time_s");
    m.step_median_s = number_at(st, "step_time_s", "median", 0);
    m.step_min_s = number_at(st, "step_time_s", "min", 0);
    m.step_max_s = number_at(st, "step_time_s", "max", 0);
    m.measured_steps = static_cast<int>(integer_at(st, "step_time_s", "measured_steps", 1, kMaxCount));
    if (!(m.step_median_s > 0)) throw BadKey{"step_time_s.median", "expected a time > 0, got 0"};
    if (m.first_measured_step == 0) throw BadKey{"steps", "no step with \"warmup\": false"};
    m.tokens_per_s = number_at(j, "", "tokens_per_s", 0);
    m.mfu = number_at(j, "", "mfu", 0);

    const json& ops = array_at(j, "", "ops");
    std::map<std::pair<std::string, int>, size_t> seen;
    for (size_t i = 0; i < ops.size(); ++i) {
      const std::string key = item("ops", i);
      const json& o = ops[i];
      if (!o.is_object()) throw BadKey{key, "expected an object, got " + got(o)};
      TrainOp op;
      op.name = string_at(o, key, "name");
      const auto parsed = parse_op_name(op.name);
      if (!parsed)
        throw BadKey{child(key, "name"), fmt::format("'{}' is not an op name of lcm's table (lcm/model/ops.hpp, "
                                                     "docs/op-schedule.md)",
                                                     op.name)};
      op.parsed = *parsed;
      op.layer = static_cast<int>(integer_at(o, key, "layer", -1, kMaxLayer));
      op.count = integer_at(o, key, "count", 0, kMaxCount);
      op.total_s = number_at(o, key, "total_s", 0);
      const auto [at, fresh] = seen.insert({{op.name, op.layer}, i});
      if (!fresh)
        throw BadKey{key,
                     fmt::format("{} at layer {} is listed twice (first as ops[{}])", op.name, op.layer, at->second)};
      m.ops.push_back(std::move(op));
    }

    const json& mem = object_at(j, "", "memory");
    m.peak_allocated = number_at(mem, "memory", "peak_allocated_bytes", 0);
    m.peak_reserved = number_at(mem, "memory", "peak_reserved_bytes", 0);
    const json& cat = object_at(mem, "memory", "at_peak_by_category");
    for (int c = 0; c < kNumMemCategories; ++c)
      m.at_peak[static_cast<size_t>(c)] =
          number_at(cat, "memory.at_peak_by_category", to_string(static_cast<MemCategory>(c)), 0);
    m.context = number_at(mem, "memory", "context_bytes", 0);
    m.library_workspace = number_at(mem, "memory", "library_workspace_bytes", 0);
    if (const auto h = j.find("host"); h != j.end()) {  // written since session 11
      if (!h->is_object()) throw BadKey{"host", "expected an object, got " + got(*h)};
      // -1 is the runner's "not measured"; anything else below 0 is an error.
      RunHostCosts r{number_at(*h, "host", "gemm_enqueue_s", -1), number_at(*h, "host", "kernel_enqueue_s", -1),
                     number_at(*h, "host", "sync_s", -1)};
      for (const auto& [v, key] : {std::pair{r.gemm_enqueue_s, "gemm_enqueue_s"}, {r.kernel_enqueue_s, "kernel_enqueue_s"},
                                   {r.sync_s, "sync_s"}})
        if (v < 0 && v != -1) throw BadKey{child("host", key), fmt::format("expected a time >= 0 (or -1: not measured), got {}", v)};
      if (r.gemm_enqueue_s >= 0 && r.kernel_enqueue_s >= 0 && r.sync_s >= 0) m.host = r;
    }
  } catch (const BadKey& b) {
    return io::ConfigError{file, 0, 0, b.key, b.message};
  }
  return m;
}

io::Result<TrainSummary> read_train_summary(const std::string& dir) {
  const std::string file = (std::filesystem::path(dir) / "summary.json").string();
  auto text = io::read_input_file(file, "the measured summary");
  if (!text) return text.error();
  return parse_train_summary(text.value(), file);
}

std::vector<io::Override> prediction_overrides(const TrainSummary& m, const std::vector<io::Override>& extra) {
  std::vector<io::Override> out = m.overrides;
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// ---------------------------------------------------------------------------------
// The prediction.
// ---------------------------------------------------------------------------------
std::vector<PredictedOp> predicted_op_times(const Scenario& s, const Estimate& e, const Schedule& sched, int stage) {
  const ordered_json trace = predicted_trace(s, e, sched, TraceOptions{});
  std::vector<PredictedOp> out;
  std::map<std::pair<std::string, int>, size_t> index;
  for (const ordered_json& ev : trace["traceEvents"]) {
    if (ev["ph"] != "X" || ev["pid"] != stage) continue;
    const ordered_json& args = ev["args"];
    const int layer = args.contains("layer")       ? args["layer"].get<int>()
                      : args.contains("mtp_depth") ? args["mtp_depth"].get<int>()
                                                   : -1;
    const std::string name = ev["name"].get<std::string>();
    const auto [at, fresh] = index.insert({{name, layer}, out.size()});
    if (fresh) out.push_back(PredictedOp{name, layer, 0.0});
    out[at->second].seconds += ev["dur"].get<double>() * 1e-6;
  }
  return out;
}

namespace {

// The kind of each op id the schedule holds (any pass: an id keeps its kind).
std::array<std::optional<OpKind>, kNumOpIds> kinds_of(const Schedule& sched) {
  std::array<std::optional<OpKind>, kNumOpIds> k{};
  auto add = [&](const std::vector<Op>& list) {
    for (const Op& op : list) k[static_cast<size_t>(op.id)] = op.kind;
  };
  for (const LayerOps* l : {&sched.dense, &sched.moe, &sched.mtp}) add(l->fwd), add(l->recompute), add(l->bwd);
  for (const StageSchedule& st : sched.stages)
    for (const auto* list : {&st.pre_fwd, &st.post_fwd, &st.post_bwd, &st.pre_bwd, &st.step}) add(*list);
  return k;
}

CompareClass class_of(const std::optional<OpKind>& kind) {
  if (!kind) return CompareClass::kNotPredicted;
  switch (*kind) {
    case OpKind::kGemm: return CompareClass::kGemm;
    case OpKind::kAttention: return CompareClass::kAttention;
    case OpKind::kMemoryBound: return CompareClass::kMemoryBound;
    case OpKind::kCollective:
    case OpKind::kSendRecv: return CompareClass::kCommunication;
  }
  return CompareClass::kNotPredicted;
}

LayerKind layer_kind(const Scenario& s, const OpName& n, int layer) {
  if (std::string_view(n.prefix) == kMtpPrefix) return LayerKind::kMtp;
  if (std::string_view(n.prefix) == kLayerPrefix)
    return is_moe_layer(s.model, layer) ? LayerKind::kMoe : LayerKind::kDense;
  return LayerKind::kOutside;
}

void add_to(Total& t, const OpComparison& o) {
  if (o.predicted_s) t.predicted_s += *o.predicted_s, ++t.predicted_ops;
  if (o.measured_s) t.measured_s += *o.measured_s, ++t.measured_ops;
}

// Measured categories against the model's terms (docs/compare.md#memory); every term of
// StageMemory::allocated is in exactly one category.
std::vector<MemoryRow> memory_rows(const StageMemory& p, const TrainSummary& m) {
  auto at = [&](MemCategory c) { return m.at_peak[static_cast<size_t>(c)]; };
  std::vector<MemoryRow> rows;
  rows.push_back({"weights", "weights + fp8_weight_cache + fsdp_gather_buffers",
                  p.weights + p.fp8_weight_cache + p.fsdp_gather_buffers, at(MemCategory::kWeights)});
  rows.push_back({"grads", "grads", p.grads, at(MemCategory::kGrads)});
  rows.push_back(
      {"optimizer", "main_params + optimizer_states", p.main_params + p.optimizer_states, at(MemCategory::kOptimizer)});
  rows.push_back({"activations", "activations + logits_and_loss + transient_peak",
                  p.activations + p.logits_and_loss + p.transient_peak, at(MemCategory::kActivations)});
  rows.push_back({"workspace", "workspaces", p.workspaces, at(MemCategory::kWorkspace)});
  rows.push_back({"other", "comm_buffers", p.comm_buffers, at(MemCategory::kOther)});
  rows.push_back({"peak allocated", "allocated", p.allocated, m.peak_allocated});
  rows.push_back({"reserved - allocated", "fragmentation", p.fragmentation, m.peak_reserved - m.peak_allocated});
  rows.push_back({"CUDA context", "cuda_context", p.cuda_context, m.context});
  rows.push_back({"library workspaces", "cublas_workspace", p.cublas_workspace, m.library_workspace});
  rows.push_back({"NCCL buffers", "nccl_buffers", p.nccl_buffers, std::nullopt});
  return rows;
}

}  // namespace

io::Result<Scenario> load_compare_scenario(const std::string& scenario_path, const TrainSummary& m,
                                           const std::vector<io::Override>& extra) {
  io::LoadOptions lo;
  lo.overrides = prediction_overrides(m, extra);
  auto s = io::load_scenario(scenario_path, lo);
  if (!s) {
    // The summary's overrides are applied as --set: say where they came from.
    io::ConfigError e = s.error();
    e.message += " (overrides: those of " + m.file + (extra.empty() ? "" : ", then --set / --profile") + ")";
    return e;
  }
  // lcm-exec's runner keeps whole fp32 master weights (its plan refuses store_param_remainders),
  // so a run it recorded ran without them, whatever the scenario file now says.
  s.value().training.store_param_remainders = false;
  if (m.host) {
    HostSpec& h = s.value().hardware.host;
    h.kernel_launch = m.host->gemm_enqueue_s;
    h.sync = m.host->sync_s;
    h.launch_latency = 0;
    h.layer_overhead_fwd = h.layer_overhead_bwd = h.moe_overhead_fwd = h.moe_overhead_bwd = 0;
    h.microbatch_overhead = 0;  // lcm-exec's runner has no Python per micro-batch either
    h.graph_replay = 0;
    h.optimizer_tensor = h.iteration_overhead = 0;  // its fused optimizer, no training loop's Python
  }
  const int64_t layers = s.value().model.num_layers + s.value().model.mtp_num_layers;
  const Estimate probe = estimate(s.value(), EstimateOptions{false});
  const int64_t mbs = std::max(1, probe.mesh.num_micro_batches);
  if (layers * mbs > limits::kTraceLayerMicroBatches)
    return io::ConfigError{scenario_path, 0, 0, "",
                           fmt::format("compare: {} layers x {} micro-batches is more than {} layer passes (lcm's cap "
                                       "on the predicted trace compare aligns with)",
                                       layers, mbs, limits::kTraceLayerMicroBatches)};
  return s;
}

io::Result<Comparison> compare_run(const Scenario& s, const TrainSummary& m) {
  const Estimate e = estimate(s);
  const Schedule sched = build_schedule(s, e.mesh, e.stage_layers, e.gpu_params);
  const auto kinds = kinds_of(sched);

  Comparison c;
  c.scenario = s.name;
  c.measured = m.file;
  c.device = m.device;
  c.num_micro_batches = sched.num_micro_batches;
  c.measured_steps = m.measured_steps;
  c.host_from_run = m.host.has_value();
  c.host = s.hardware.host;

  // Measured ops by (name, layer); each is matched at most once.
  std::map<std::pair<std::string, int>, size_t> measured;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const TrainOp& op = m.ops[i];
    const std::string_view prefix = prefix_of(op.parsed);
    const int layers = prefix == kLayerPrefix ? s.model.num_layers : prefix == kMtpPrefix ? s.model.mtp_num_layers : 0;
    const bool ok = prefix.empty() ? op.layer == -1 : op.layer >= 0 && op.layer < layers;
    if (!ok)
      return io::ConfigError{
          m.file, 0, 0, fmt::format("ops[{}].layer", i),
          prefix.empty() ? fmt::format("{} runs outside the layers: expected layer -1, got {}", op.name, op.layer)
                         : fmt::format("{} at layer {}, but the scenario (with the summary's overrides) has "
                                       "{} {}",
                                       op.name, op.layer, layers, prefix == kLayerPrefix ? "layers" : "MTP depths")};
    measured.insert({{op.name, op.layer}, i});
  }
  std::vector<char> matched(m.ops.size(), 0);
  const double steps = m.measured_steps;
  auto per_step = [&](const TrainOp& op) { return op.total_s / steps; };

  for (const PredictedOp& p : predicted_op_times(s, e, sched, 0)) {
    const auto parsed = parse_op_name(p.name);
    assert(parsed && "the predicted trace names ops with op_name()");
    OpComparison o{
        p.name,    p.layer,     class_of(kinds[static_cast<size_t>(parsed->id)]), layer_kind(s, *parsed, p.layer),
        p.seconds, std::nullopt};
    if (const auto it = measured.find({p.name, p.layer}); it != measured.end()) {
      o.measured_s = per_step(m.ops[it->second]);
      matched[it->second] = 1;
    }
    c.ops.push_back(std::move(o));
  }
  for (size_t i = 0; i < m.ops.size(); ++i) {
    if (matched[i]) continue;
    const TrainOp& op = m.ops[i];
    c.ops.push_back(OpComparison{op.name, op.layer, class_of(kinds[static_cast<size_t>(op.parsed.id)]),
                                 layer_kind(s, op.parsed, op.layer), std::nullopt, per_step(op)});
  }
  for (const OpComparison& o : c.ops) {
    add_to(c.classes[static_cast<size_t>(o.cls)], o);
    add_to(c.layer_kinds[static_cast<size_t>(o.kind)], o);
    add_to(c.all, o);
  }

  assert(e.has_time);
  c.predicted_step_s = e.time.step_s;
  c.measured_step_s = m.step_median_s;
  c.measured_step_min_s = m.step_min_s;
  c.measured_step_max_s = m.step_max_s;
  c.predicted_tokens_per_s = e.time.tokens_per_s;
  c.measured_tokens_per_s = m.tokens_per_s;
  c.predicted_mfu = e.time.mfu;
  c.measured_mfu = m.mfu;
  c.memory = memory_rows(e.memory.stages.front(), m);
  for (double b : m.at_peak) c.measured_categories_sum += b;
  return c;
}

// ---------------------------------------------------------------------------------
// Tables and JSON.
// ---------------------------------------------------------------------------------
namespace {

std::vector<std::string> total_row(const std::string& label, const Total& t) {
  return {label, t.predicted_ops ? ms(t.predicted_s) : "-", t.measured_ops ? ms(t.measured_s) : "-",
          t.predicted_ops && t.measured_ops ? err_text(t.predicted_s, t.measured_s) : "-",
          fmt::format("{} / {}", t.predicted_ops, t.measured_ops)};
}

double gap_share(double step, double ops) { return step > 0 ? (step - ops) / step : 0.0; }

}  // namespace

std::vector<Table> compare_tables(const Comparison& c) {
  std::vector<Table> out;
  const std::string err_note = "error = predicted / measured - 1 (positive: the model is slower than the run)";

  Table step;
  step.title = fmt::format("Step: {} predicted vs {} (rank 0, per step)", c.scenario, c.measured);
  step.header = {"quantity", "predicted", "measured", "error"};
  step.rows.push_back({"step time (ms; measured: median)", ms(c.predicted_step_s), ms(c.measured_step_s),
                       err_text(c.predicted_step_s, c.measured_step_s)});
  step.rows.push_back({"sum of op times (ms)", ms(c.all.predicted_s), ms(c.all.measured_s),
                       err_text(c.all.predicted_s, c.all.measured_s)});
  step.rows.push_back({"step - sum of op times (ms)", ms(c.predicted_step_s - c.all.predicted_s),
                       ms(c.measured_step_s - c.all.measured_s), "-"});
  step.rows.push_back({"tokens/s", fmt::format("{:.0f}", c.predicted_tokens_per_s),
                       fmt::format("{:.0f}", c.measured_tokens_per_s),
                       err_text(c.predicted_tokens_per_s, c.measured_tokens_per_s)});
  step.rows.push_back({"MFU", fmt::format("{:.1f}%", 100.0 * c.predicted_mfu),
                       fmt::format("{:.1f}%", 100.0 * c.measured_mfu), err_text(c.predicted_mfu, c.measured_mfu)});
  step.notes.push_back(err_note);
  step.notes.push_back(fmt::format(
      "measured: host gaps and overheads between ops {} ms per step ({:.1f}% of the measured step): what the model "
      "must explain beyond its op times",
      ms(c.measured_step_s - c.all.measured_s), 100.0 * gap_share(c.measured_step_s, c.all.measured_s)));
  step.notes.push_back(fmt::format(
      "predicted: the step differs from the op sum by {} ms ({:.1f}% of the predicted step: pipeline bubble, hidden "
      "communication, the gradient tail)",
      ms(c.predicted_step_s - c.all.predicted_s), 100.0 * gap_share(c.predicted_step_s, c.all.predicted_s)));
  step.notes.push_back(fmt::format("measured over {} steps (min {} ms, max {} ms){}; {} micro-batches per step",
                                   c.measured_steps, ms(c.measured_step_min_s), ms(c.measured_step_max_s),
                                   c.device.empty() ? "" : " on " + c.device, c.num_micro_batches));
  step.notes.push_back(
      c.host_from_run
          ? fmt::format("host costs of the prediction: the run's own (measured by lcm-exec at start): {:.2f} us per "
                        "kernel enqueue (a cuBLASLt GEMM), {:.2f} us per device-to-host sync, no per-layer Python",
                        1e6 * c.host.kernel_launch, 1e6 * c.host.sync)
          : fmt::format("host costs of the prediction: the profile's (the summary records none): {:.2f} us per kernel "
                        "enqueue, {:.2f} us per sync, {:.1f} / {:.1f} us of per-layer Python per forward / backward (an MoE "
                        "layer {:.1f} / {:.1f} more), {:.1f} us per micro-batch outside the layers, {:.1f} us per "
                        "optimizer tensor, {:.1f} us per iteration",
                        1e6 * c.host.kernel_launch, 1e6 * c.host.sync, 1e6 * c.host.layer_overhead_fwd,
                        1e6 * c.host.layer_overhead_bwd, 1e6 * c.host.moe_overhead_fwd, 1e6 * c.host.moe_overhead_bwd,
                        1e6 * c.host.microbatch_overhead, 1e6 * c.host.optimizer_tensor, 1e6 * c.host.iteration_overhead));
  out.push_back(std::move(step));

  Table cls;
  cls.title = "Per op class (ms per step)";
  cls.header = {"class", "predicted", "measured", "error", "ops (predicted / measured)"};
  for (int i = 0; i < kNumCompareClasses; ++i) {
    const Total& t = c.classes[static_cast<size_t>(i)];
    if (static_cast<CompareClass>(i) == CompareClass::kNotPredicted && t.measured_ops == 0) continue;
    cls.rows.push_back(total_row(to_string(static_cast<CompareClass>(i)), t));
  }
  cls.rows.push_back(total_row("all ops", c.all));
  cls.notes.push_back("a class sums each side's ops, one-sided ops included (listed below)");
  out.push_back(std::move(cls));

  Table kinds;
  kinds.title = "Per layer kind (ms per step)";
  kinds.header = {"layers", "predicted", "measured", "error", "ops (predicted / measured)"};
  for (int i = 0; i < kNumLayerKinds; ++i) {
    const Total& t = c.layer_kinds[static_cast<size_t>(i)];
    if (t.predicted_ops == 0 && t.measured_ops == 0) continue;
    kinds.rows.push_back(total_row(to_string(static_cast<LayerKind>(i)), t));
  }
  out.push_back(std::move(kinds));

  Table mem;
  mem.title = "Memory (MiB; the model's terms of rank 0's stage vs the allocator at its allocated peak)";
  mem.header = {"item", "model terms", "predicted", "measured", "error"};
  for (const MemoryRow& r : c.memory)
    mem.rows.push_back({r.item, r.terms, mib(r.predicted), mib(r.measured), err_text(r.predicted, r.measured)});
  const double peak = c.memory.size() > 6 && c.memory[6].measured ? *c.memory[6].measured : 0.0;
  if (std::fabs(c.measured_categories_sum - peak) > 0.5)
    mem.notes.push_back(fmt::format("the measured categories sum to {} MiB, not the measured peak allocated {} MiB",
                                    mib(c.measured_categories_sum), mib(peak)));
  mem.notes.push_back("the first six rows sum to peak allocated on each side; the last four are outside the allocator");
  out.push_back(std::move(mem));

  Table one;
  one.title = "Ops on one side only (ms per step)";
  one.header = {"op", "layer", "class", "predicted", "measured"};
  for (const OpComparison& o : c.ops)
    if (!o.predicted_s || !o.measured_s)
      one.rows.push_back({o.name, layer_text(o.layer), to_string(o.cls), ms(o.predicted_s), ms(o.measured_s)});
  if (one.rows.empty()) one.notes.push_back("none: every op is on both sides");
  out.push_back(std::move(one));

  Table ops;
  ops.title = "Per op (ms per step)";
  ops.header = {"op", "layer", "class", "predicted", "measured", "error"};
  for (const OpComparison& o : c.ops)
    ops.rows.push_back({o.name, layer_text(o.layer), to_string(o.cls), ms(o.predicted_s), ms(o.measured_s),
                        err_text(o.predicted_s, o.measured_s)});
  out.push_back(std::move(ops));
  return out;
}

Table compare_long_table(const Comparison& c) {
  Table t;
  t.header = {"section", "item", "layer", "class", "unit", "predicted", "measured", "error"};
  auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.9g}", *v) : std::string(); };
  auto err = [](const std::optional<double>& p, const std::optional<double>& m) {
    const auto e = error_of(p, m);
    return e ? fmt::format("{:.6f}", *e) : std::string();
  };
  auto row = [&](const std::string& section, const std::string& item, const std::string& layer, const std::string& cls,
                 const std::string& unit, const std::optional<double>& p, const std::optional<double>& m) {
    t.rows.push_back({section, item, layer, cls, unit, num(p), num(m), err(p, m)});
  };
  row("step", "step_time", "", "", "s", c.predicted_step_s, c.measured_step_s);
  row("step", "sum_of_ops", "", "", "s", c.all.predicted_s, c.all.measured_s);
  row("step", "step_minus_ops", "", "", "s", c.predicted_step_s - c.all.predicted_s,
      c.measured_step_s - c.all.measured_s);
  row("step", "tokens_per_s", "", "", "1/s", c.predicted_tokens_per_s, c.measured_tokens_per_s);
  row("step", "mfu", "", "", "", c.predicted_mfu, c.measured_mfu);
  auto total = [&](const std::string& section, const std::string& item, const Total& x) {
    row(section, item, "", "", "s", x.predicted_ops ? std::optional<double>(x.predicted_s) : std::nullopt,
        x.measured_ops ? std::optional<double>(x.measured_s) : std::nullopt);
  };
  for (int i = 0; i < kNumCompareClasses; ++i)
    total("class", to_string(static_cast<CompareClass>(i)), c.classes[static_cast<size_t>(i)]);
  for (int i = 0; i < kNumLayerKinds; ++i)
    total("layer_kind", to_string(static_cast<LayerKind>(i)), c.layer_kinds[static_cast<size_t>(i)]);
  for (const MemoryRow& r : c.memory) row("memory", r.item, "", "", "bytes", r.predicted, r.measured);
  for (const OpComparison& o : c.ops)
    row("op", o.name, std::to_string(o.layer), to_string(o.cls), "s", o.predicted_s, o.measured_s);
  return t;
}

ordered_json compare_json(const Comparison& c) {
  auto total = [](const Total& t) {
    return ordered_json{
        {"predicted_s", t.predicted_s},
        {"measured_s", t.measured_s},
        {"predicted_ops", t.predicted_ops},
        {"measured_ops", t.measured_ops},
        {"error",
         t.predicted_ops && t.measured_ops ? optional_json(error_of(t.predicted_s, t.measured_s)) : json(nullptr)}};
  };
  ordered_json j;
  j["scenario"] = c.scenario;
  j["measured"] = c.measured;
  j["device"] = c.device;
  j["micro_batches"] = c.num_micro_batches;
  j["measured_steps"] = c.measured_steps;
  j["error_convention"] = "predicted / measured - 1";
  j["step"] = ordered_json{{"predicted_s", c.predicted_step_s},
                           {"measured_median_s", c.measured_step_s},
                           {"measured_min_s", c.measured_step_min_s},
                           {"measured_max_s", c.measured_step_max_s},
                           {"error", optional_json(error_of(c.predicted_step_s, c.measured_step_s))},
                           {"predicted_ops_s", c.all.predicted_s},
                           {"measured_ops_s", c.all.measured_s},
                           {"predicted_step_minus_ops_s", c.predicted_step_s - c.all.predicted_s},
                           {"measured_host_gap_s", c.measured_step_s - c.all.measured_s},
                           {"measured_host_gap_fraction", gap_share(c.measured_step_s, c.all.measured_s)},
                           {"predicted_tokens_per_s", c.predicted_tokens_per_s},
                           {"measured_tokens_per_s", c.measured_tokens_per_s},
                           {"predicted_mfu", c.predicted_mfu},
                           {"measured_mfu", c.measured_mfu}};
  j["host"] = ordered_json{{"source", c.host_from_run ? "run" : "profile"},
                           {"kernel_launch_s", c.host.kernel_launch},
                           {"sync_s", c.host.sync},
                           {"launch_latency_s", c.host.launch_latency},
                           {"layer_overhead_fwd_s", c.host.layer_overhead_fwd},
                           {"layer_overhead_bwd_s", c.host.layer_overhead_bwd},
                           {"moe_layer_overhead_fwd_s", c.host.moe_overhead_fwd},
                           {"moe_layer_overhead_bwd_s", c.host.moe_overhead_bwd},
                           {"microbatch_overhead_s", c.host.microbatch_overhead},
                           {"optimizer_tensor_s", c.host.optimizer_tensor},
                           {"iteration_overhead_s", c.host.iteration_overhead}};
  ordered_json classes = ordered_json::object();
  for (int i = 0; i < kNumCompareClasses; ++i)
    classes[to_string(static_cast<CompareClass>(i))] = total(c.classes[static_cast<size_t>(i)]);
  j["classes"] = std::move(classes);
  ordered_json kinds = ordered_json::object();
  for (int i = 0; i < kNumLayerKinds; ++i)
    kinds[to_string(static_cast<LayerKind>(i))] = total(c.layer_kinds[static_cast<size_t>(i)]);
  j["layer_kinds"] = std::move(kinds);
  ordered_json mem = ordered_json::array();
  for (const MemoryRow& r : c.memory)
    mem.push_back({{"item", r.item},
                   {"model_terms", r.terms},
                   {"predicted_bytes", optional_json(r.predicted)},
                   {"measured_bytes", optional_json(r.measured)},
                   {"error", optional_json(error_of(r.predicted, r.measured))}});
  j["memory"] = std::move(mem);
  j["measured_categories_sum_bytes"] = c.measured_categories_sum;
  ordered_json ops = ordered_json::array();
  for (const OpComparison& o : c.ops)
    ops.push_back({{"name", o.name},
                   {"layer", o.layer},
                   {"class", to_string(o.cls)},
                   {"layer_kind", to_string(o.kind)},
                   {"predicted_s", optional_json(o.predicted_s)},
                   {"measured_s", optional_json(o.measured_s)},
                   {"error", optional_json(error_of(o.predicted_s, o.measured_s))}});
  j["ops"] = std::move(ops);
  return j;
}

// ---------------------------------------------------------------------------------
// The combined trace.
// ---------------------------------------------------------------------------------
io::Result<ordered_json> compare_trace(const Scenario& s, const Estimate& e, const Schedule& sched,
                                       const std::string& measured_trace_text, const std::string& trace_file,
                                       int step) {
  ordered_json out = predicted_trace(s, e, sched, TraceOptions{});
  const int stages = static_cast<int>(sched.stages.size());
  for (ordered_json& ev : out["traceEvents"])
    if (ev["ph"] == "M" && ev["name"] == "process_name")
      ev["args"]["name"] =
          stages == 1 ? std::string("predicted") : "predicted stage " + std::to_string(ev["pid"].get<int>());

  json in;
  try {
    in = json::parse(measured_trace_text);
  } catch (const json::exception& ex) {
    return io::ConfigError{trace_file, 0, 0, "", std::string("not valid JSON: ") + ex.what()};
  }
  const int pid = stages;  // after the predicted stages
  ordered_json& events = out["traceEvents"];
  events.push_back(ordered_json{
      {"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "measured rank 0"}}}});
  events.push_back(ordered_json{
      {"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
  try {
    if (!in.is_object()) throw BadKey{"", "expected a Chrome trace object with 'traceEvents'"};
    const json& list = array_at(in, "", "traceEvents");
    std::vector<const json*> picked;
    double t0 = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string key = item("traceEvents", i);
      const json& ev = list[i];
      if (!ev.is_object()) throw BadKey{key, "expected an object, got " + got(ev)};
      const std::string ph = string_at(ev, key, "ph");
      if (ph == "M") {
        if (string_at(ev, key, "name") == "thread_name") {
          ordered_json copy = ordered_json::parse(ev.dump());
          copy["pid"] = pid;
          events.push_back(std::move(copy));
        }
        continue;
      }
      if (ph != "X") continue;
      string_at(ev, key, "name");
      const double ts = number_at(ev, key, "ts", -1e300);
      number_at(ev, key, "dur", 0);
      integer_at(ev, key, "tid", 0, kMaxLayer);
      const json& args = object_at(ev, key, "args");
      if (integer_at(args, child(key, "args"), "step", 0, kMaxCount) != step) continue;
      if (const auto w = args.find("warmup"); w != args.end() && w->is_boolean() && w->get<bool>()) continue;
      t0 = picked.empty() ? ts : std::min(t0, ts);
      picked.push_back(&ev);
    }
    if (picked.empty()) throw BadKey{"traceEvents", fmt::format("no measured events of step {}", step)};
    for (const json* ev : picked) {
      ordered_json copy = ordered_json::parse(ev->dump());
      copy["cat"] = "measured";
      copy["pid"] = pid;
      copy["ts"] = (*ev)["ts"].get<double>() - t0;
      events.push_back(std::move(copy));
    }
  } catch (const BadKey& b) {
    return io::ConfigError{trace_file, 0, 0, b.key, b.message};
  }
  out["otherData"]["generator"] = "lcm compare";
  out["otherData"]["measured_trace"] = trace_file;
  out["otherData"]["measured_step"] = step;
  return out;
}

}  // namespace lcm::report
