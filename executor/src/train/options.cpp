// `lcm-exec train` command line (runner.hpp): CLI11, every error one line.
#include <CLI/CLI.hpp>

#include <string>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/runner.hpp"

namespace lcm::exec::train {

namespace {

struct Parser {
  CLI::App app{"lcm-exec train: train the scenario's model on the GPUs at hand", "lcm-exec train"};
  std::vector<std::string> sets;
  Parser(TrainOptions& o) {
    app.add_option("scenario", o.scenario, "scenario name or YAML path")->required();
    app.add_option("--set", sets, "KEY=VALUE scenario override (as `lcm --set`); repeatable");
    app.add_option("--layers", o.layers, "train N layers of the scenario's (per-GPU shapes kept)")
        ->check(CLI::Range(1, 100000));
    app.add_option("--steps", o.steps, "training steps (default 10)")->check(CLI::Range(1, 100000000));
    app.add_option("--warmup", o.warmup, "steps left out of the timing medians (default 2)")
        ->check(CLI::Range(0, 100000000));
    app.add_option("--out", o.out_dir, "output directory: summary.json, trace.rank0.json");
    app.add_option("--save", o.save_dir, "checkpoint directory: DIR/checkpoint is written after the last step");
    app.add_option("--save-every", o.save_every, "also checkpoint after every K-th step (needs --save)")
        ->check(CLI::Range(1, 100000000));
    app.add_flag("--resume", o.resume, "continue from the --save DIR's checkpoint (same configuration)");
    app.add_flag("--deterministic", o.deterministic,
                 "cuDNN's deterministic attention backward, so that a resumed run is bitwise identical (its "
                 "workspace grows as heads x seq^2: 4 GiB at 8K, 64 GiB at 32K for 32 heads)");
    app.add_option("--data", o.data, "synthetic | copy | PATH prefix of a Megatron .bin/.idx dataset");
    app.add_option("--dump", o.dump_dir, "write initial weights, the first micro-batch, step-1 loss and gradients");
    app.add_option("--seed", o.seed, "seed of the weights and the synthetic data (default 1234)");
    app.add_option("--lr", o.lr, "peak learning rate (default 3e-4)")->check(CLI::PositiveNumber);
    app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay (default 3e-5)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--lr-warmup-steps", o.lr_warmup_steps, "linear learning-rate warm-up steps (default 0)")
        ->check(CLI::Range(0, 100000000));
    app.add_option("--lr-decay-steps", o.lr_decay_steps,
                   "steps of the cosine decay (default: --steps; set it to stop a run early on the same schedule)")
        ->check(CLI::Range(1, 100000000));
    app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (default 0.1)")->check(CLI::NonNegativeNumber);
    app.add_option("--clip-grad", o.clip_grad, "gradient clipping norm (default 1.0)")->check(CLI::PositiveNumber);
    app.add_option("--moe-aux-loss-coeff", o.moe_aux_loss_coeff, "MoE load-balancing loss coefficient (default 0)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--moe-z-loss-coeff", o.moe_z_loss_coeff, "MoE router z-loss coefficient (default 0)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--dry-run", o.dry_run, "print the op names of one step and exit (no GPU needed)");
  }
};

std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\n') c = ' ';
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string train_usage() {
  TrainOptions o;
  Parser p(o);
  return p.app.help();
}

TrainOptions parse_train_args(int argc, const char* const* argv) {
  TrainOptions o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
  }
  Parser p(o);
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 2; --i) args.emplace_back(argv[i]);  // CLI11 takes them reversed
  try {
    p.app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw UsageError("train: " + one_line(e.what()) + " (see lcm-exec train --help)");
  }
  for (const std::string& kv : p.sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      throw UsageError("train: --set '" + kv + "': expected KEY=VALUE");
    o.sets.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (o.data != "synthetic" && o.data != "copy" && o.data.empty()) throw UsageError("train: --data: empty");
  if (o.resume && o.save_dir.empty())
    throw UsageError("train: --resume needs --save DIR (it continues from DIR/checkpoint)");
  if (o.save_every > 0 && o.save_dir.empty()) throw UsageError("train: --save-every needs --save DIR");
  if (o.min_lr > o.lr) throw UsageError("train: --min-lr must not exceed --lr");
  const int decay = o.lr_decay_steps > 0 ? o.lr_decay_steps : o.steps;
  if (o.lr_warmup_steps > decay)
    throw UsageError(o.lr_decay_steps > 0 ? "train: --lr-warmup-steps exceeds --lr-decay-steps"
                                          : "train: --lr-warmup-steps exceeds --steps");
  return o;
}

}  // namespace lcm::exec::train
