// Every output format of plan, sweep and comm parses: JSON with its documented keys,
// CSV with a header and rows of equal width whose numbers parse, Markdown tables that
// render (header, separator, rows of equal width).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lcm/planner/report/comm_report.hpp"
#include "lcm/planner/report/plan_report.hpp"
#include "plan_test_util.hpp"

namespace lcm::report {
namespace {

using nlohmann::json;
using plantest::scenario;

struct Planned {
  Scenario base;
  plan::PlanResult result;
};

const Planned& mixtral() {
  static const Planned p = [] {
    Planned x{scenario("mixtral-8x7b", {{"seq_length", "64K"}}, 64), {}};
    x.result = plan::search(x.base);
    return x;
  }();
  return p;
}

TEST(PlanFormats, JsonHasTheDocumentedKeys) {
  const Planned& p = mixtral();
  const json j = json::parse(plan_json(p.base, p.result).dump(2));
  EXPECT_EQ(j.at("schema_version"), kPlanSchemaVersion);
  EXPECT_EQ(j.at("num_gpus"), 64);
  EXPECT_EQ(j.at("scenario").at("seq_length"), 65536);
  for (const char* k : {"enumerated", "valid", "fit", "evaluated"}) EXPECT_TRUE(j.at("counts").at(k).is_number_unsigned());
  EXPECT_EQ(j.at("counts").at("evaluated"), j.at("counts").at("enumerated"));
  const json& ranked = j.at("ranked");
  ASSERT_EQ(ranked.size(), p.result.ranked.size());
  ASSERT_FALSE(ranked.empty());
  double prev = 0;
  for (const json& r : ranked) {
    for (const char* k : {"tensor_model_parallel_size", "context_parallel_size", "cp_comm_type",
                          "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
                          "expert_model_parallel_size", "expert_tensor_parallel_size", "data_parallel_size",
                          "micro_batch_size", "recompute_granularity", "data_parallel_sharding_strategy",
                          "moe_token_dispatcher_type", "rank_order"})
      EXPECT_TRUE(r.at("layout").contains(k)) << k;
    const json& m = r.at("metrics");
    for (const char* k : {"step_s", "tokens_per_s_per_gpu", "mfu", "peak_bytes", "bubble_s"})
      EXPECT_TRUE(m.at(k).is_number()) << k;
    for (const char* d : {"tp", "cp", "ep", "pp", "dp"}) EXPECT_TRUE(m.at("exposed_comm_s").at(d).is_number()) << d;
    EXPECT_TRUE(m.at("fits").get<bool>());
    // The error band (docs/planner.md): [low, high] of the step time (the composition spread
    // since session 40: -4.59 % / +10.77 %); ties first, by the band's high end.
    const json& b = r.at("band");
    EXPECT_LT(b.at("step_s").at(0).get<double>(), b.at("step_s").at(1).get<double>());
    EXPECT_GE(b.at("step_s").at(1).get<double>(), m.at("step_s").get<double>());
    EXPECT_TRUE(b.at("composition").at("development_set").get<bool>());
    EXPECT_TRUE(r.at("tie").is_boolean());
    const double key = r.at("tie").get<bool>() ? b.at("step_s").at(1).get<double>() : m.at("step_s").get<double>();
    // #1 is the fastest; then its ties; the first group after them starts the step-time order.
    if (r.at("rank").get<int>() <= 2 || r.at("rank").get<int>() == j.at("ties").at("count").get<int>() + 1) prev = 0;
    EXPECT_GE(key, prev);
    prev = key;
  }
  EXPECT_TRUE(j.at("why_not").is_array());
  for (const json& w : j.at("why_not")) {
    const std::string reason = w.at("reason");
    EXPECT_TRUE(reason == "out_of_memory" || reason == "invalid") << reason;
    EXPECT_FALSE(w.at("message").get<std::string>().empty());
  }
  EXPECT_TRUE(j.at("near_ties").is_array());
  EXPECT_TRUE(j.at("megatron_flags").is_array());
  EXPECT_EQ(j.at("megatron_flags").at(0), "--tensor-model-parallel-size");
  EXPECT_TRUE(j.at("megatron_command").is_string());
}

TEST(PlanFormats, CsvHasAHeaderAndParsingRows) {
  const Planned& p = mixtral();
  const std::string text = render_csv(plan_csv_table(p.base, p.result));
  const auto ls = plantest::lines(text);
  ASSERT_EQ(ls.size(), p.result.ranked.size() + 1);
  const auto header = plantest::csv_fields(ls[0]);
  EXPECT_EQ(header.front(), "rank");
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<size_t>(it - header.begin());
  };
  const size_t step = col("step_s"), peak = col("peak_gib"), tp = col("tp"), layout = col("layout");
  for (size_t i = 1; i < ls.size(); ++i) {
    const auto f = plantest::csv_fields(ls[i]);
    ASSERT_EQ(f.size(), header.size()) << ls[i];
    EXPECT_EQ(std::stoi(f[0]), static_cast<int>(i));
    EXPECT_NEAR(std::stod(f[step]), p.result.ranked[i - 1].metrics.step_s, 1e-5 * p.result.ranked[i - 1].metrics.step_s);
    EXPECT_GT(std::stod(f[peak]), 0.0);
    EXPECT_EQ(std::stoi(f[tp]), p.result.ranked[i - 1].layout.tp);
    EXPECT_EQ(f[layout], plan::layout_string(p.result.ranked[i - 1].layout, p.base));
  }
}

TEST(PlanFormats, MarkdownTablesRender) {
  const Planned& p = mixtral();
  const std::string md = render(plan_tables(p.base, p.result), Format::kMarkdown);
  EXPECT_EQ(plantest::check_markdown_tables(md), 4);  // decision, May-fit, why-not, flags
  ASSERT_FALSE(p.result.tight.empty());
  EXPECT_NE(md.find("### May fit"), std::string::npos);
  EXPECT_NE(md.find("### Best layouts"), std::string::npos);
  EXPECT_NE(md.find("### Why not"), std::string::npos);
  EXPECT_NE(md.find("--tensor-model-parallel-size"), std::string::npos);
  const std::string text = render(plan_tables(p.base, p.result), Format::kTable);
  EXPECT_NE(text.find(plan::layout_string(p.result.ranked.front().layout, p.base)), std::string::npos);
}

std::vector<SweepPoint> sweep() {
  std::vector<SweepPoint> pts;
  for (const char* seq : {"8K", "32K"}) {
    SweepPoint p;
    p.values = {{"seq_length", seq}};
    p.scenario = scenario("mixtral-8x7b", {{"seq_length", seq}}, 64);
    p.result = plan::search(p.scenario);
    pts.push_back(std::move(p));
  }
  SweepPoint none;  // a point with no answer shows as such
  none.values = {{"seq_length", "1M"}};
  none.scenario = scenario("deepseek-v3", {}, 8);
  none.result = plan::search(none.scenario);
  pts.push_back(std::move(none));
  return pts;
}

TEST(SweepFormats, AllParse) {
  const std::vector<SweepPoint> pts = sweep();
  const json j = json::parse(sweep_json(pts, TokensPerStep::kScale).dump());
  ASSERT_EQ(j.at("points").size(), 3u);
  EXPECT_EQ(j.at("points").at(0).at("values").at("seq_length"), "8K");
  EXPECT_FALSE(j.at("points").at(0).at("plan").at("ranked").empty());
  EXPECT_TRUE(j.at("points").at(2).at("plan").at("ranked").empty());
  EXPECT_NE(j.at("points").at(2).at("plan").at("failure").get<std::string>().find("nothing fits"), std::string::npos);

  const auto ls = plantest::lines(render_csv(sweep_csv_table(pts, TokensPerStep::kScale)));
  ASSERT_EQ(ls.size(), 4u);
  const auto header = plantest::csv_fields(ls[0]);
  EXPECT_EQ(header.front(), "seq_length");
  for (size_t i = 1; i < ls.size(); ++i) EXPECT_EQ(plantest::csv_fields(ls[i]).size(), header.size()) << ls[i];
  EXPECT_EQ(plantest::csv_fields(ls[3])[5], "nothing_fits");

  const std::string md = render(sweep_tables(pts, TokensPerStep::kScale), Format::kMarkdown);
  EXPECT_EQ(plantest::check_markdown_tables(md), 1);
  EXPECT_NE(md.find("nothing fits"), std::string::npos);
}

TEST(SweepFormats, InfeasiblePointAndTokensPerStepMode) {
  std::vector<SweepPoint> pts = sweep();
  pts.pop_back();
  SweepPoint odd;
  odd.values = {{"seq_length", "48K"}};
  odd.scenario = scenario("mixtral-8x7b", {{"seq_length", "48K"}}, 64);
  odd.infeasible = "not a whole number of sequences";
  pts.push_back(std::move(odd));
  const json j = json::parse(sweep_json(pts, TokensPerStep::kConstant).dump());
  EXPECT_EQ(j.at("tokens_per_step_mode"), "constant");
  EXPECT_EQ(j.at("points").at(0).at("global_batch_size"), 128);  // the scenario's, as these points were made
  EXPECT_EQ(j.at("points").at(0).at("tokens_per_step"), 128 * 8192);
  EXPECT_EQ(j.at("points").at(2).at("infeasible"), "not a whole number of sequences");
  EXPECT_TRUE(j.at("points").at(2).at("plan").is_null());

  const auto ls = plantest::lines(render_csv(sweep_csv_table(pts, TokensPerStep::kConstant)));
  ASSERT_EQ(ls.size(), 4u);
  const auto header = plantest::csv_fields(ls[0]);
  for (size_t i = 1; i < ls.size(); ++i) EXPECT_EQ(plantest::csv_fields(ls[i]).size(), header.size()) << ls[i];
  EXPECT_EQ(plantest::csv_fields(ls[1])[4], std::to_string(128 * 8192));
  EXPECT_EQ(plantest::csv_fields(ls[3])[5], "infeasible");

  const std::string md = render(sweep_tables(pts, TokensPerStep::kConstant), Format::kMarkdown);
  EXPECT_EQ(plantest::check_markdown_tables(md), 1);
  EXPECT_NE(md.find("tokens per step: constant"), std::string::npos);
  EXPECT_NE(md.find("seq_length=48K: infeasible: not a whole number of sequences"), std::string::npos) << md;
}

TEST(CommFormats, AllParseAndAddUp) {
  const Scenario s = scenario("mixtral-8x7b");
  const plan::CommBreakdown c = plan::comm_breakdown(s);
  const json j = json::parse(comm_json(s, c).dump());
  EXPECT_EQ(j.at("schema_version"), kCommSchemaVersion);
  ASSERT_FALSE(j.at("items").empty());
  double sent = 0;
  for (const json& it : j.at("items")) {
    EXPECT_GT(it.at("time_s").get<double>(), 0.0) << it.dump();
    sent += it.at("sent_bytes").get<double>();
  }
  EXPECT_NEAR(sent, c.estimate.comm.total_sent_bytes, 1e-6 * sent);
  for (const json& d : j.at("dims")) {
    EXPECT_GE(d.at("time_s").get<double>() + 1e-12, d.at("exposed_s").get<double>()) << d.dump();
    EXPECT_TRUE(d.at("intra_node").is_boolean());
  }
  const auto ls = plantest::lines(render_csv(comm_csv_table(s, c)));
  ASSERT_EQ(ls.size(), c.items.size() + 1);
  for (size_t i = 1; i < ls.size(); ++i) EXPECT_EQ(plantest::csv_fields(ls[i]).size(), plantest::csv_fields(ls[0]).size());
  EXPECT_EQ(plantest::check_markdown_tables(render(comm_tables(s, c), Format::kMarkdown)), 2);
}

// Exposed plus hidden per-micro-batch communication is the serial time of those ops.
TEST(CommBreakdown, ExposedPlusHiddenIsTheTime) {
  const Scenario s = scenario("mixtral-8x7b");
  const plan::CommBreakdown c = plan::comm_breakdown(s);
  for (const plan::DimComm& d : c.dims) {
    if (d.dim == CommDim::kDp || d.dim == CommDim::kEdp || d.dim == CommDim::kEmb) continue;
    EXPECT_NEAR(d.exposed_s + d.hidden_s, d.time_s, 1e-9 + 1e-9 * d.time_s) << to_string(d.dim);
  }
  EXPECT_NEAR(c.step_exposed_s + c.step_hidden_s, c.step_time_s, 1e-9 + 1e-9 * c.step_time_s);
  // EP of Mixtral's layout (ep 8 after tp 2, cp 2) spans two nodes of 8 GPUs.
  const GroupTopology& ep = c.topology.dim[static_cast<size_t>(CommDim::kEp)];
  EXPECT_EQ(ep.size, 8);
}

}  // namespace
}  // namespace lcm::report
