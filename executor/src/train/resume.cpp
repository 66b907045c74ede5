// Checkpoint identity and the --resume checks of `lcm-exec train` (runner.hpp). Host only:
// everything here runs before CUDA starts, so a refused resume exits 2 with one line.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/runner.hpp"
#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::exec::train {

namespace {

// "section.key" -> scalar text; a sequence of scalars is one array value, other sequences
// are flattened with their indices.
void flatten(const YAML::Node& n, const std::string& key, nlohmann::json& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      flatten(kv.second, key.empty() ? k : key + "." + k, out);
    }
  } else if (n.IsSequence()) {
    bool scalars = true;
    for (const auto& e : n) scalars = scalars && e.IsScalar();
    if (scalars) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : n) a.push_back(e.Scalar());
      out[key] = a;
    } else {
      for (size_t i = 0; i < n.size(); ++i) flatten(n[i], key + "." + std::to_string(i), out);
    }
  } else if (n.IsScalar()) {
    out[key] = n.Scalar();
  } else {
    out[key] = nullptr;
  }
}

}  // namespace

nlohmann::json run_fingerprint(const TrainOptions& o, const TrainPlan& p) {
  nlohmann::json scenario = nlohmann::json::object();
  flatten(YAML::Load(io::scenario_to_yaml(p.scenario, "")), "", scenario);
  nlohmann::json f = nlohmann::json::object();
  for (const auto& [k, v] : scenario.items())
    if (k != "name" && k != "hardware" && k.rfind("hardware.", 0) != 0) f[k] = v;
  // Floats as their shortest round-trip text, so a message shows what was typed.
  f["gpus"] = p.gpus;
  f["--data"] = o.data;
  f["--seed"] = o.seed;
  f["--lr"] = fmt::format("{}", o.lr);
  f["--min-lr"] = fmt::format("{}", o.min_lr);
  f["--lr-warmup-steps"] = o.lr_warmup_steps;
  f["--lr-decay-steps"] = o.lr_decay_steps > 0 ? o.lr_decay_steps : o.steps;
  f["--weight-decay"] = fmt::format("{}", o.weight_decay);
  f["--clip-grad"] = fmt::format("{}", o.clip_grad);
  f["--moe-aux-loss-coeff"] = fmt::format("{}", o.moe_aux_loss_coeff);
  f["--moe-z-loss-coeff"] = fmt::format("{}", o.moe_z_loss_coeff);
  return f;
}

std::string fingerprint_difference(const nlohmann::json& saved, const nlohmann::json& now) {
  for (const auto& [k, v] : saved.items()) {
    if (!now.contains(k)) return k + " is " + v.dump() + " in the checkpoint, absent here";
    if (now.at(k) != v) return k + " is " + v.dump() + " in the checkpoint, " + now.at(k).dump() + " here";
  }
  for (const auto& [k, v] : now.items())
    if (!saved.contains(k)) return k + " is absent in the checkpoint, " + v.dump() + " here";
  return "";
}

LoadedCheckpoint load_resume(const TrainOptions& o, const TrainPlan& p) {
  const std::string where = (std::filesystem::path(o.save_dir) / "checkpoint").string();
  std::optional<LoadedCheckpoint> ck = load_checkpoint(o.save_dir);
  if (!ck) throw UsageError("train: --resume: no checkpoint in " + where);
  const nlohmann::json& m = ck->meta;
  if (!m.is_object() || !m.contains("fingerprint") || !m.contains("step") || !m.at("step").is_number_integer())
    throw UsageError("train: --resume: " + where + " is not a training-runner checkpoint (no step or fingerprint)");
  const std::string diff = fingerprint_difference(m.at("fingerprint"), run_fingerprint(o, p));
  if (!diff.empty()) throw UsageError("train: --resume: " + where + " is another configuration's: " + diff);
  const int step = m.at("step").get<int>();
  if (step >= o.steps)
    throw UsageError("train: --resume: " + where + " is at step " + std::to_string(step) + ", --steps " +
                     std::to_string(o.steps) + " leaves nothing to train");
  return std::move(*ck);
}

}  // namespace lcm::exec::train
