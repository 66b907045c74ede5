// `lcm-exec train SCENARIO`: the training runner's command line, the configuration it
// derives from the scenario (TrainPlan: per-rank shapes from lcm::resolve, the layer kinds,
// the recompute policy), the op tags a step emits without touching CUDA (the contract the
// host test holds against the model's schedule) and the entry point that trains.
//
// Everything here up to run_train() is host-only: bad input is a UsageError (one line,
// exit 2) raised before CUDA starts. docs/executor.md ("lcm-exec train") describes the
// runner, docs/train-output.md what it writes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/executor/train/checkpoint.hpp"
#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/recorder.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/resolve.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::exec::train {

struct TrainOptions {
  bool help = false;
  std::string scenario;                                    // name or path (lcm::io::load_scenario)
  std::vector<std::pair<std::string, std::string>> sets;   // --set KEY=VALUE, in order
  int layers = 0;                                          // --layers N (0: the scenario's)
  int steps = 10;                                          // --steps
  int warmup = 2;                                          // --warmup: steps left out of the medians
  std::string out_dir;                                     // --out (empty: no files)
  std::string save_dir;                                    // --save DIR: checkpoint DIR/checkpoint after the last step
  int save_every = 0;                                      // --save-every K: also after every K-th step
  bool resume = false;                                     // --resume: continue from the --save DIR's checkpoint
  bool deterministic = false;                             // --deterministic (bitwise resume; O(heads x seq^2) workspace)
  std::string data = "synthetic";                          // synthetic | copy | PATH (Megatron .bin/.idx prefix)
  std::string dump_dir;                                    // --dump DIR (step-1 weights, batch, loss, grads)
  uint64_t seed = 1234;
  float lr = 3e-4f;
  float min_lr = 3e-5f;   // cosine decay to this at the last step (after warmup_lr steps of linear warm-up)
  int lr_warmup_steps = 0;
  int lr_decay_steps = 0;  // --lr-decay-steps: the cosine's length (0: --steps), so a run cut short keeps the schedule
  float weight_decay = 0.1f;
  float clip_grad = 1.0f;
  float moe_aux_loss_coeff = 0.0f;  // Megatron --moe-aux-loss-coeff (its default 0)
  float moe_z_loss_coeff = 0.0f;    // Megatron --moe-z-loss-coeff
  bool dry_run = false;    // --dry-run: print the op tags of one step, no CUDA
  std::string command_line;
};

// Throws UsageError (one line). argv[0] is the program, argv[1] "train".
TrainOptions parse_train_args(int argc, const char* const* argv);
std::string train_usage();

enum class RecomputeKind : uint8_t { kNone, kSelective, kFull };

// What one rank trains: the scenario as run (overrides and --layers applied), the mesh,
// the per-rank shapes and the derived sizes the model code needs.
struct TrainPlan {
  Scenario scenario;
  std::string scenario_path;
  std::vector<std::pair<std::string, std::string>> overrides;  // what makes the scenario describe the run
  int layers_from = 0, layers_to = 0;                          // --layers: scaled from / to (equal: not scaled)
  Mesh mesh;
  RankShape rank;
  int gpus = 1;
  // Shapes of one micro-batch on this rank.
  int64_t b = 1, s = 0, tokens = 0, hidden = 0, heads = 0, groups = 0, head_dim = 0, ffn = 0;
  int64_t vocab = 0, padded_vocab = 0;
  int micro_batches = 1;
  int num_layers = 0;
  std::vector<char> moe_layer;     // per layer
  std::vector<char> recompute_layer;  // per layer: full recompute before its backward
  RecomputeKind recompute = RecomputeKind::kNone;
  uint32_t recompute_modules = 0;  // selective
  bool tied_embeddings = false;
  bool qk_norm = false;  // qk_layernorm: RMSNorm per head of Q and K (MLA: of the q and kv latents)
  // Multi-latent attention (MLA): q_lora 0 projects Q straight from the hidden state;
  // head_dim is then qk_nope + qk_rope (Q and K), groups = heads, and RoPE turns the last
  // qk_rope channels of each head (K's shared across the heads).
  bool mla = false;
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_dim = 0;
  int64_t rope_dim = 0;  // channels of a head that RoPE turns (head_dim; MLA: qk_rope)
  RopeParams rope;
  float norm_eps = 1e-5f;
  float softmax_scale = 0;
  // MoE (when any layer is MoE).
  int64_t expert_ffn = 0, shared_ffn = 0;
  int experts = 0, topk = 0;
  float moe_aux_loss_coeff = 0.0f, moe_z_loss_coeff = 0.0f;
  bool deterministic_attention = false;  // CudnnAttention's deterministic backward (bitwise resume)
};

// Loads the scenario with the overrides and --layers, checks that the layout's group sizes
// multiply to `gpus` and that the runner implements every feature the scenario asks for.
// Throws UsageError with one line (naming the --set that makes a layout fit).
TrainPlan plan_training(const TrainOptions& o, int gpus);

// The op tags one training step emits, in order, for `micro_batches` micro-batches (the
// plan's when < 0): the runner's model run in dry mode (no CUDA, fake device pointers).
// MoE blocks contribute the tags of MoeBlock's documented op sequence (the real block's
// tags are checked on the GPU).
std::vector<OpTag> dry_run_tags(const TrainPlan& p, int micro_batches = -1);

// ---- checkpoints (--save DIR, --resume; checkpoint.hpp writes them) --------------------
// What identifies the run's configuration: the scenario as run (scenario_to_yaml of the plan's
// scenario, flattened to "section.key" -> value; the name and the hardware left out), the
// group count, the data spec, the seed and the optimizer's and schedule's settings. A resume
// must match it exactly: the checkpoint's state only continues the same run.
nlohmann::json run_fingerprint(const TrainOptions& o, const TrainPlan& p);
// The first key where two fingerprints differ, as "KEY is A in the checkpoint, B here"; ""
// when they are equal.
std::string fingerprint_difference(const nlohmann::json& saved, const nlohmann::json& now);
// --resume: DIR/checkpoint of --save DIR. UsageError (one line) when there is none, when it
// was written for another configuration (naming the first difference), or when its step is
// not before --steps. Corrupt files are ExecErrors (checkpoint.hpp).
LoadedCheckpoint load_resume(const TrainOptions& o, const TrainPlan& p);

// Trains (CUDA). Returns the process exit code; throws ExecError on a runtime failure.
int run_train(const TrainOptions& o, const TrainPlan& p);

}  // namespace lcm::exec::train
