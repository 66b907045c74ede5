// Rendering of plan::CommBreakdown (lcm comm).
#include "lcm/planner/report/comm_report.hpp"

#include <fmt/format.h>

#include "lcm/planner/search/plan.hpp"

namespace lcm::report {

namespace {

using nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string where(const GroupTopology& g) {
  if (g.size <= 1) return "-";
  if (g.nodes <= 1) return "intra-node";
  return fmt::format("inter-node ({} nodes x {})", g.nodes, g.per_node);
}

// Per-micro-batch dimensions (the step collectives are reported on their own).
bool per_microbatch(CommDim d) { return d == CommDim::kTp || d == CommDim::kCp || d == CommDim::kEp || d == CommDim::kPp; }

}  // namespace

ordered_json comm_json(const Scenario& s, const plan::CommBreakdown& c) {
  const Estimate& e = c.estimate;
  ordered_json j;
  j["schema_version"] = kCommSchemaVersion;
  j["scenario"] = s.name;
  j["num_gpus"] = s.num_gpus;
  j["layout"] = plan::layout_string(plan::layout_of(s), s);
  j["stage"] = c.stage;
  j["bottleneck_stage"] = e.time.bottleneck_stage;
  j["step_s"] = e.time.step_s;
  j["num_micro_batches"] = e.mesh.num_micro_batches;
  ordered_json items = ordered_json::array();
  for (const plan::CommItemTime& it : c.items)
    items.push_back(ordered_json{{"dim", to_string(it.item.dim)},
                                 {"collective", to_string(it.item.kind)},
                                 {"item", to_string(it.item.id)},
                                 {"group_size", it.item.group_size},
                                 {"message_bytes", it.item.message_bytes},
                                 {"calls", it.item.calls},
                                 {"sent_bytes", it.item.sent_bytes},
                                 {"time_s", it.time_s}});
  j["items"] = items;
  ordered_json other = ordered_json::array();
  for (const plan::UncountedComm& u : c.uncounted)
    other.push_back(ordered_json{{"op", u.op},
                                 {"dim", to_string(u.dim)},
                                 {"collective", to_string(u.kind)},
                                 {"group_size", u.group_size},
                                 {"time_s", u.time_s}});
  j["uncounted_ops"] = other;
  ordered_json dims = ordered_json::array();
  for (const plan::DimComm& d : c.dims)
    dims.push_back(ordered_json{{"dim", to_string(d.dim)},
                                {"group", ordered_json{{"size", d.group.size}, {"nodes", d.group.nodes}, {"per_node", d.group.per_node}}},
                                {"intra_node", d.group.nodes <= 1},
                                {"sent_bytes", d.sent_bytes},
                                {"time_s", d.time_s},
                                {"exposed_s", d.exposed_s},
                                {"hidden_s", d.hidden_s},
                                {"step_time_s", d.step_time_s}});
  j["dims"] = dims;
  j["step_collectives"] = ordered_json{{"time_s", c.step_time_s}, {"exposed_s", c.step_exposed_s}, {"hidden_s", c.step_hidden_s}};
  return j;
}

std::vector<Table> comm_tables(const Scenario& s, const plan::CommBreakdown& c) {
  const Estimate& e = c.estimate;
  std::vector<Table> out;
  Table d;
  d.title = fmt::format("Communication by dimension, per GPU per step (pipeline stage {}; {}; step {:.3f} s)", c.stage,
                        plan::layout_string(plan::layout_of(s), s), e.time.step_s);
  d.header = {"dim", "group", "where", "sent GiB", "time s", "exposed s", "hidden s", "step ops s"};
  for (const plan::DimComm& x : c.dims) {
    if (x.sent_bytes <= 0 && x.time_s <= 0 && x.step_time_s <= 0) continue;  // no traffic
    const bool mb = per_microbatch(x.dim);
    d.rows.push_back({to_string(x.dim), fmt::format("{}", x.group.size), where(x.group),
                      fmt::format("{:.3f}", x.sent_bytes / kGiB), mb ? fmt::format("{:.4f}", x.time_s) : "-",
                      mb ? fmt::format("{:.4f}", x.exposed_s) : "-", mb ? fmt::format("{:.4f}", x.hidden_s) : "-",
                      fmt::format("{:.4f}", x.step_time_s)});
  }
  d.rows.push_back({"step ops (all dims)", "-", "-", "-", "-", fmt::format("{:.4f}", c.step_exposed_s),
                    fmt::format("{:.4f}", c.step_hidden_s), fmt::format("{:.4f}", c.step_time_s)});
  d.notes.push_back(
      "time: serial sum of the dimension's per-micro-batch collectives over the step; exposed: not hidden under "
      "compute (what the step pays); step ops: once-per-step collectives (DP/EDP gradient reduction and parameter "
      "gather, TP and embedding gradient sums), whose overlap the step time computes for all of them together");
  if (c.stage != e.time.bottleneck_stage)
    d.notes.push_back(fmt::format("the step time's bottleneck is stage {}; these figures are for stage {}, the busiest",
                                  e.time.bottleneck_stage, c.stage));
  out.push_back(std::move(d));

  Table t;
  t.title = "Collectives";
  t.header = {"dim", "collective", "item", "group", "MiB per call", "calls", "sent GiB", "time s"};
  for (const plan::CommItemTime& it : c.items)
    t.rows.push_back({to_string(it.item.dim), to_string(it.item.kind), to_string(it.item.id), fmt::format("{}", it.item.group_size),
                      fmt::format("{:.2f}", it.item.message_bytes / (1024.0 * 1024.0)), fmt::format("{:.0f}", it.item.calls),
                      fmt::format("{:.3f}", it.item.sent_bytes / kGiB), fmt::format("{:.4f}", it.time_s)});
  for (const plan::UncountedComm& u : c.uncounted)
    t.rows.push_back({to_string(u.dim), to_string(u.kind), u.op + " (uncounted)", fmt::format("{}", u.group_size), "-",
                      "-", "-", fmt::format("{:.4f}", u.time_s)});
  if (t.rows.empty()) t.rows.push_back({"-", "-", "no communication (one GPU)", "-", "-", "-", "-", "-"});
  t.notes.push_back(
      "volumes follow nccl-tests conventions (sent = what one rank puts on the wire); uncounted ops move no bytes of "
      "their own in the volume model (pipeline receives are the neighbour's sends)");
  out.push_back(std::move(t));
  return out;
}

Table comm_csv_table(const Scenario&, const plan::CommBreakdown& c) {
  Table t;
  t.header = {"dim", "collective", "item", "group_size", "message_bytes", "calls", "sent_bytes", "time_s", "intra_node"};
  for (const plan::CommItemTime& it : c.items) {
    const GroupTopology& g = c.topology.dim[static_cast<size_t>(it.item.dim)];
    t.rows.push_back({to_string(it.item.dim), to_string(it.item.kind), to_string(it.item.id), fmt::format("{}", it.item.group_size),
                      fmt::format("{:.6g}", it.item.message_bytes), fmt::format("{:.6g}", it.item.calls),
                      fmt::format("{:.6g}", it.item.sent_bytes), fmt::format("{:.6g}", it.time_s),
                      g.nodes <= 1 ? "true" : "false"});
  }
  return t;
}

}  // namespace lcm::report
