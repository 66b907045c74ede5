// `lcm scaling SCENARIO --seq 4K,32K,128K,1M`: the memory + compute scaling table.
#include "commands.hpp"

#include <iostream>

#include "lcm/model/limits.hpp"
#include "lcm/model/scaling.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/report/scaling_report.hpp"

namespace lcm::cli {

void register_scaling(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("scaling", "FLOPs split and activation memory across sequence lengths, with the "
                                            "attention-vs-MLP crossover");
  auto so = std::make_shared<ScenarioOptions>();
  auto oo = std::make_shared<OutputOptions>();
  auto seqs = std::make_shared<std::string>("4K,32K,128K,1M");
  add_scenario_options(*cmd, *so);
  cmd->add_option("--seq", *seqs, "Sequence lengths (K = 1024, M = 1024^2)")->capture_default_str();
  add_output_options(*cmd, *oo, {"table", "md", "json", "csv"});
  cmd->callback([so, oo, seqs, &exit_code] {
    std::string err;
    auto list = parse_size_list(*seqs, limits::kSeqLength, &err);
    if (!list) {
      std::cerr << "lcm: --seq: " << err << "\n";
      exit_code = kExitBadInput;
      return;
    }
    auto s = load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    const auto rows = scaling_table(*s, *list);
    const Crossover x = attention_mlp_crossover(s->model, s->flop_convention.causal_halved);
    const report::Format f = parse_format(oo->format);
    std::string text;
    if (f == report::Format::kJson) {
      text = report::scaling_json(*s, rows, x).dump(2) + "\n";
    } else if (f == report::Format::kCsv) {
      text = report::render_csv(report::scaling_csv_table(*s, rows, x));
    } else {
      text = report::render(report::scaling_tables(*s, rows, x), f);
    }
    exit_code = write_output(oo->output, text) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
