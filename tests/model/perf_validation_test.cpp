// Cross-check of the time model against published H100 performance tables (issue "Time
// model and planner", Done means item 2). docs/validation-performance.md records the
// output, the conventions and the assumptions; this file is the single source of both.
//
// Tables (validation/published/, read at run time):
//  - megatron_bridge_perf_summary.csv, DGX-H100 rows: tokens/s/GPU (primary) and model
//    TFLOP/s/GPU under Megatron-Bridge's causal-halved convention (flop_utils.py).
//  - nemo_24.07_h100.csv: tokens/s/GPU only (the 24.07 FLOP convention is unknown; the
//    implied FLOPs per token are printed next to ours for both conventions).
//  - megatron_weak_scaling_h100.csv: TFLOP/s/GPU under the pre-2025 Megatron count with
//    non-causal attention (FlopConvention{causal_halved = false}); no tokens/s published.
//  - moe_layer_microbench_h100.csv: one MoE layer's forward and backward ms on 8 H100
//    (EP 8), from the schedule's MoE-layer op times (op_time over the "moe." ops).
//
// Every row becomes a Scenario from the row itself (layout, batch, sequence, precision,
// GPUs) plus the architecture (validation/model_architectures.csv, or the row for the
// weak-scaling GPTs and the MoE proxies) plus assumptions that are the same for every row
// of a table (the comment above each table's reader; the doc lists them). Recipe facts
// that the published recipes state per model (recompute modules, EP A2A overlap, pipeline
// layout, dispatcher) are in recipe_for() with their source; nothing is fitted per row.
//
// The test prints the tables (markdown) and fails when a table's mean absolute error, the
// overall mean, or the number of rows within 20 % worsens past the bounds recorded below,
// or when the published FLOPs per token stop matching lcm's count under the table's
// convention. Regenerate the doc's tables with
//   build/bin/lcm_model_tests --gtest_filter='PerfValidation.*'
// LCM_PERF_BREAKDOWN=1 prints each row's step-time breakdown; LCM_WHATIF_NO_TP_OVERLAP=1 /
// LCM_WHATIF_NO_EP_OVERLAP=1 drop the TP / EP overlap flags for the what-if runs the doc
// quotes (the bounds are for the default run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lcm/model/estimate.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/pipeline_layout.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/timing.hpp"
#include "published_scenarios.hpp"

namespace {

using namespace lcm;

// ---------------------------------------------------------------------------------
// Recorded bounds: what the model achieved when this test was last calibrated (2026-11-30,
// with the FP8 GEMM efficiency, SP backward re-gathers, the DP overlap window and the
// partial TP / EP overlap with SM contention: Megatron-Bridge 31.2 %, NeMo 24.07 15.6 %,
// weak scaling 11.7 %, MoE layer 10.5 %, all 60 counted rows 23.1 %, 39 of them within
// 20 %), rounded
// slightly so that a regression fails. The errors are dominated by known modelling gaps
// (the doc's "Where the model misses"); when a fix lands, tighten these.
// Session 7 (issue 12) re-measured these rows once with the model frozen after the host-bound
// regime, DeepEP/HybridEP node de-duplication, the small-op terms and the FP8 memory terms
// (52de576; no change was scored on the rows in between): Megatron-Bridge 30.6 %, all 60 rows
// 21.3 % (signed +18.0 %), 40 within 20 %. The two bounds below were raised to that re-measure
// (not tuned; docs/validation-performance.md says so): the issue's 12 % target is not met.
// ---------------------------------------------------------------------------------
// Session 9 raised the Bridge and overall bounds (and lowered the within-20 % count by one)
// after the loss's TE traffic (loss_traffic_per_logit, from the TE source) made the Bridge rows
// faster: 30.6 -> 33.7 %, all 21.3 -> 23.0 % (docs/validation-performance.md says so).
// Session 13 tightened the Bridge and overall bounds and the band floor after the recipe
// corrections read from the releases' sources (NeMo 24.07 bf16 gradients, Qwen3-30B's alltoall
// dispatcher before 26.02): Bridge 32.8 %, NeMo 10.2 %, all 22.6 %, band coverage 42 of 54.
// Session 14 tightened them after the host costs of Megatron-LM's own layers (measured with
// Megatron-LM on the device machine's host, validation/measured/h200/megatron_host/; the H100
// profile takes the MoE layer's part, not the dense layer's: docs/time-model.md): Bridge
// 17.7 %, all 14.3 % (signed +8.5 %), 48 within 20 %, band coverage 45 of 54. Development-set
// figures: the choice of what the H100 profile takes was made after both choices' figures on
// these rows were seen. Then a selective recompute was charged only its modules' share of the
// layer's Python (it had been charged a whole forward's), which made the GPT-OSS rows faster
// and the figures worse: Bridge 19.8 %, all 15.4 % (+9.6 %), 48 within 20 %, band 44 of 54.
// The bounds follow that (a physics fix kept though it scores worse on these rows). Session 18
// modelled GPT-OSS's sliding-window attention (window 128 on alternating layers, as the
// architecture table states): less attention work makes those rows faster still, Bridge 20.1 %,
// all 15.6 % (+9.8 %); the bounds follow again, for the same reason.
// Session 19 added NeMo 24.07's three Nemotron rows (architectures from the launcher's YAMLs),
// declared before lcm first evaluated them (validation/published/DECLARATION_nemotron_nemo2407.md)
// with the model frozen: first prediction +20.8 % (8B), +22.4 % (22B), -10.3 % (340B); NeMo
// 10.3 -> 11.8 %, all 15.6 -> 15.7 % over 63 rows. The NeMo and overall bounds take the new rows.
// Then the per-micro-batch Python outside the layers (Megatron host runs set 3, measured for the
// CI iteration times, not for these rows): Bridge 20.1 -> 19.9 %, all 15.6 % (+9.6 %).
// Session 20 modelled CUDA graphs (ParallelSpec::cuda_graph_impl / cuda_graph_modules, from
// Megatron-LM's code) and gave Qwen3-30B-A3B's rows after 25.09 their presets' Transformer
// Engine graphs of the router and the dispatcher's preprocessing (read after the errors were
// known). With a free replay the four consistent 26.x rows went -16..-18 % -> -10.5..-11.8 %;
// with the replay cost measured on Megatron's local graphs (host runs set 6, graph_replay_us)
// -13.3..-15.9 %, 26.02's inconsistent cell +48 -> +49 %; Bridge 20.0 -> 19.6 %, all 15.6 ->
// 15.5 % (signed +9.7 -> +9.9 %). Tightened.
// Session 23 gave the H100 profile the calibrated H200 profile's die-level kernel terms and split
// efficiency.hbm (copies / elementwise kernels), declared before these rows were scored with it
// (validation/published/DECLARATION_h100_die_port.md) and kept whatever they showed: Bridge 19.6 ->
// 20.7 %, NeMo 11.7 -> 12.5 %, weak scaling 9.8 -> 7.6 %, MoE layer 10.1 -> 9.3 %, all 15.4 ->
// 15.8 % (signed +9.9 -> +10.1 %), 49 -> 52 within 20 %. Every bound follows the new figures.
// Session 26 modelled Megatron's custom pipeline layouts, and the DeepSeek-V3 row takes its
// pp_layout as written (pp 8 x vp 4, interleaved; it was first 7 / last 6 without interleaving):
// the smaller bubble makes it faster, +1.2 -> +6.0 %; Bridge 20.7 -> 20.9 %, all 15.8 -> 15.9 %
// (signed +10.1 -> +10.2 %). A development-set change, kept: the layout is the run's. Bound raised.
// Session 28 modelled --fp8-recipe, and the five 25.11 rows the page marks "FP8-CS" (per-tensor
// current scaling) take tensorwise: the amax pass before each cast slows them, Llama 3 8B +5.1 ->
// +2.1 %, 70B +7.8 -> +4.8 %, 405B +17.5 -> +14.4 %; Bridge 20.8 -> 20.3 %, all 15.9 -> 15.6 %
// (signed +10.1 -> +9.8 %). A development-set change (the rows' errors were known); the recipe
// is the row's recorded precision. Bounds tightened.
// Session 29 modelled packed sequences (training.document_length): the SFT rows run per-document
// attention over SQuAD examples of ~200 tokens (kSquadDocumentTokens), where they had been priced
// as 4096-token pre-training. NeMo 24.07's published FLOPs per token of its three SFT rows now
// equal lcm's count within 0.2 % (39.8 / 77.4 / 413.1 against 39.8 / 77.3 / 412.4: NeMo counted
// the documents' attention; they were 14-16 % off before), so the physics is the runs'. The rows
// get faster, and the model's general over-prediction no longer hides behind the 4096-token
// attention: Llama 2 7B SFT +5.7 -> +20.8 %, 13B -19.6 -> -10.3 %, 70B -3.3 -> +4.4 %, Bridge Llama 3
// 70B SFT +9.5 -> +17.9 %; Bridge 20.3 -> 20.5 %, NeMo 12.5 -> 13.0 %, all 15.6 -> 15.8 % (signed
// +9.8 -> +10.4 %), 52 -> 51 within 20 %. A development-set change (the rows' errors were known),
// kept because the FLOP count confirms it. Bounds raised to the new figures.
// Then session 29 modelled LoRA (training.peft: lora) and scored the four LoRA rows once, held
// out (validation/published/DECLARATION_lora.md, declared before the code existed): +3.1 %, +0.1 %,
// +6.6 % (NeMo Llama 2 7B / 13B / 70B), -6.0 % (Bridge Llama 3 70B); mean |error| 4.0 %, signed
// +1.0 %. They join the statistics as development rows: Bridge 20.5 -> 20.1 %, NeMo 13.0 -> 11.3 %,
// all 15.8 -> 15.1 % over 67 rows (signed +10.4 -> +9.8 %), 55 within 20 %. Bounds tightened.
// Session 30 applied the H100 profile's own kernel terms, fitted on 1369 lcm-exec ops measured on
// an H100 and adopted by the rule declared before the measurement (validation/measured/h100/
// DECLARATION.md: CV 90.6 %, held-out set B 88.1 % within 10 % against the ported terms' 81.3 %),
// and the block-scaled FP8 GEMM term measured there (validation/measured/h200/fp8_block/
// DECLARATION.md), which brings the six blockwise-FP8 MoE-layer rows into the count. Scored once,
// as both declarations prescribe, with no other change in between: on the same 67 rows 15.1 ->
// 15.9 % (signed +9.8 -> +10.8 %; the measured H100 GEMMs are ~2 % faster than the ported terms
// priced them, and the dense rows were already too fast); the six blockwise rows -0.6 .. -28.4 %
// (mean |error| 18.2 %, every one too slow in lcm's favour: the published FP8 layers are slower).
// Over all 73 counted rows: Bridge 20.9 %, NeMo 12.7 %, weak scaling 7.7 %, MoE layer 14.0 %
// (12 rows), all 16.1 % (signed +8.4 %), 57 within 20 %, band coverage 53 of 61. The bounds follow
// (the op-level evidence decided the profile, not these rows).
// Session 31 landed the die-level L2 slowdown of long attention forwards (held out on an H100,
// validation/measured/h100/attention_l2/) and priced the CP ring's attention as its per-step
// kernels (validation/measured/h200/cp_ring/): Bridge 20.8 %, NeMo 12.6 %, all 16.0 % (+8.4 %),
// 57 within 20 %, band coverage 55 of 61. Bounds tightened.
// Then the H100's elementwise rate: 0.70 -> 0.79 from the H100's own kernel probe, adopted by the
// rule declared before measuring (validation/measured/h100/train_suite2/DECLARATION.md: a second
// held-out H100 train suite, step median |error| 8.6 -> 2.5 %). Re-scored once here: Bridge 22.0 %,
// NeMo 14.6 %, weak scaling 8.2 %, MoE layer 15.1 %, all 17.3 % (signed +9.4 %), 54 within 20 %,
// band coverage 54 of 61.
// Every row gets faster and the rows were already too fast: the memory-bound over-pricing had
// hidden part of what the model misses in composition. The bounds follow (the kernel and the
// held-out training evidence decided).
// Session 32 priced the residual stream's gradients as they run: a residual add's backward
// launches no kernel at hidden_dropout 0 without a bias (validation/measured/h100/bda_probe/),
// and the fork's gradient sum runs after the pre-norm's backward (lcm-exec train's traces had
// `L.*.norm.bwd` 49 % above lcm's price and `L.*.bda.bwd` at 1 us against 0.31 ms). Per fork
// 20 -> 12 B per element. Re-scored once: Bridge 22.3 %, NeMo 15.5 %, weak scaling 8.3 %, MoE
// layer 15.1 %, all 17.7 % (signed +9.9 %), 53 within 20 %, band coverage 55 of 61. The rows get
// faster again and were already too fast; the op-level evidence decided, the bounds follow.
// Then the activation and RoPE backwards at their own bytes, from the same traces (backward /
// forward 1.75 for SwiGLU, 5/3 by count, and 1.00 for RoPE, where lcm had 2 for both): Bridge
// 22.7 %, NeMo 16.4 %, weak scaling 8.7 %, MoE layer 15.6 %, all 18.2 % (signed +10.3 %), 52 within
// 20 %. Same reasoning, bounds follow.
// Session 33: (1) the MoE-layer rows are timed as the benchmark times them, each pass in the
// host-bound regime of lcm's own host model (the kernels' enqueue, the MoE layer's Python,
// the dispatcher's synchronisation: standalone_pass_seconds), where they were bare GPU sums;
// the model's terms are unchanged. MoE layer 15.6 -> 10.1 %, all 18.2 -> 17.3 %, 52 -> 55 within
// 20 %. The FP8 rows' backwards, which the benchmark ran barely faster than the BF16 ones, are
// host-bound. (2) The signed mean had added the MoE rows' time errors (negative: lcm faster)
// to the other rows' rate errors (positive: lcm faster); it now counts lcm faster as positive
// on every row: all rows +10.3 % as printed before, +15.3 % in one direction, +14.3 % after (1).
// (3) Dropout as the GPT-3 5B / 20B recipes set it (0.1, Megatron-Core's default), priced: fused
// attention's random numbers at the profile's measured rates and the bias-dropout-add's mask
// (validation/measured/h100/dropout/). GPT3-5B +21.6 -> +15.7 %, GPT3-20B +20.5 -> +17.0 %; NeMo
// 16.4 -> 15.8 %, all 17.3 -> 17.2 % (+14.2 %), 55 -> 57 within 20 %. Bounds follow.
// Session 35: Transformer Engine's FP8 LayerNormLinear inputs as TE runs them (read from its
// code: the fused norm writes FP8 under delayed scaling, SP all-gathers it in FP8, and the
// weight gradient's transpose of it is priced; current scaling runs the norm unfused and then
// one cast-transpose). Bridge 22.7 -> 22.6 %, NeMo 15.8 -> 15.5 %, all 17.2 -> 17.0 % (+14.1 %).
// Session 36: NeMo 24.07's GPT3 175B rows without userbuffers TP overlap, as the launcher's
// gpt3/175b.yaml sets (a recipe read after the errors were known): +13.8 / +7.6 -> -2.9 / -6.2 %;
// NeMo 15.5 -> 14.8 %, all 17.0 -> 16.9 % (+13.7 %), band coverage 55 -> 56 of 61. Then the
// MoE layer's measured Python before the token dispatcher's synchronisation
// (host.moe_layer_presync_fwd_us, validation/measured/h100/moe_presync/) in the MoE-layer
// rows' forwards, a pass timed by itself: MoE layer 10.1 -> 6.6 % (+9.5 -> +5.0 %), all 16.9 ->
// 16.3 % (+13.0 %). Session 38: FlashAttention-2 for the runs NeMo-Framework-Launcher 24.01-24.07
// made with NVTE_FUSED_ATTN=0 (recipe_for; the flash2 terms fitted on the FlashAttention papers'
// H100 figures only): NeMo 14.8 -> 11.1 % (+12.7 -> +8.2 %), all 16.3 -> 15.4 % (+11.9 %), 58
// within 20 %; a recipe read after the rows' errors were known: a development-set change. The H100
// FlashAttention-2 terms refitted on the H100 probe (validation/measured/h100/flash2/): NeMo
// 9.1 % (+5.5 %), all 14.9 % (+11.2 %), 59 within 20 %. Session 39's FlashAttention-2 head-dim
// rule (heldout18's H100 probe; NeMo 24.07's Nemotron-4 340B runs d 192): NeMo 9.0 % (+5.7 %),
// all 14.9 % (+11.3 %). Then the CP ring's merges (attn.cp.merge): Bridge 22.4 % (+18.3 %), NeMo
// 8.8 % (+5.5 %), all 14.7 % (+11.1 %).
// Session 40: the slowest GPU (efficiency.gpu_speed_spread / _fp8; step_time.hpp,
// slowest_gpu_wait), fitted on the growth of the error with the GPU count in dgxc v24.11.1's
// fixed-layout series (each series' mean removed: the level is not fitted, these rows not used):
// Bridge 22.4 -> 18.0 % (+18.3 -> +11.7 %), NeMo 8.8 -> 7.0 % (+5.5 -> -1.6 %), weak scaling
// 8.7 -> 9.2 % (+3.6 -> -1.4 %: WORSE, its 32B-462B rows at 384-6144 GPUs move 5-8 points
// slower), all 14.7 -> 12.3 % (+11.1 -> +5.7 %), 61 within 20 %. A development-set change: the
// weak-scaling bound was loosened to its new figure, as that table's evidence goes against it.
// Session 43: 25.11's GPT-OSS 120B at the release code's mbs 1 (kBridgeCorrections: the row's
// batch cells contradict each other): +46.3 -> +37.7 %; Bridge 18.1 -> 17.8 % (17.82; +11.8 -> +11.5 %),
// all 12.4 -> 12.3 % (+5.7 -> +5.6 %). A development-set change.
constexpr double kBridgeMaeBound = 17.9;  // tokens/s, %
constexpr double kNemoMaeBound = 7.1;  // tokens/s, %
constexpr double kWeakScalingMaeBound = 9.3;  // TFLOP/s (non-causal), %
constexpr double kMoeLayerMaeBound = 6.7;  // fwd+bwd ms, %
constexpr double kOverallMaeBound = 12.3;  // all counted rows, primary metric, %
constexpr double kOverallSignedBound = 5.7;  // |mean signed error| of all counted rows (+: lcm faster), %
// Step rows whose 80% error band covers the published value: 41 of 54 at 37819bd (75.9 %,
// in-sample; issue 12 asks for 80 %), 42 of 54 in session 13, 44 in session 14, 47 of 57 in
// session 21, 49 of 57 in session 23. A floor, like the bounds above.
// kMinBandCovered: 53 of 61 with the LoRA rows (session 29), 55 after session 31's L2 term, 54
// after its H100 elementwise rate (the spread moved), 55 in session 32, 56 in session 36; 51 since
// session 37's dgxc-benchmarking rows joined the composition spread (-4.60 / +45.28 % -> -0.31 /
// +31.60 %: a third narrower; over all 158 step rows of the three tests the band covers 139, 88 %);
// 50 since session 38's FlashAttention-2 rows (the spread -1.00 / +23.60 %; all 158: 143, 91 %),
// 49 since dgxc-benchmarking v25.02's rows joined the spread (+2.28 / +22.69 % over 258), 47
// since the H100 FlashAttention-2 refit (+0.13 / +21.46 %), 48 with session 40's slowest GPU
// (the spread -5.36 / +11.93 %: a band centred on the rows and narrower by 18 %).
constexpr int kMinBandCovered = 48;
// kMinWithin20Pct: counted rows within 20 % on their primary metric (57 before the H100
// elementwise rate, 54 before session 32's residual gradients, 53 before its activation / RoPE
// backwards, 52 before session 33's host-bound MoE-layer rows, 55 before its dropout; 59 before
// session 40's slowest GPU).
constexpr int kMinWithin20Pct = 61;
constexpr int kMinCounted = 73;  // rows evaluated and counted (67 before session 30's blockwise rows)
constexpr int kMinBridgeCausalMatches = 26;  // FLOP-convention checks (see the test)
constexpr int kMinNemoNonCausalMatches = 9;

const std::string kDir = LCM_SOURCE_DIR "/validation/published/";

// ---------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

using Row = std::map<std::string, std::string>;

std::vector<Row> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  if (!std::getline(in, line)) return rows;
  const std::vector<std::string> header = split_csv_line(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    Row r;
    for (size_t i = 0; i < header.size(); ++i) r[header[i]] = i < cells.size() ? cells[i] : "";
    rows.push_back(std::move(r));
  }
  return rows;
}

const std::string& get(const Row& r, const std::string& k) {
  static const std::string empty;
  auto it = r.find(k);
  return it == r.end() ? empty : it->second;
}

// Integer cell; blank or "n/a" -> fallback.
int64_t num(const Row& r, const std::string& k, int64_t fallback) {
  const std::string& v = get(r, k);
  if (v.empty() || v == "n/a") return fallback;
  try {
    return std::stoll(v);
  } catch (...) {
    return fallback;
  }
}

double real(const Row& r, const std::string& k) {
  const std::string& v = get(r, k);
  if (v.empty()) return 0;
  try {
    return std::stod(v);
  } catch (...) {
    return 0;
  }
}

// ---------------------------------------------------------------------------------
// Architectures (validation/model_architectures.csv)
// ---------------------------------------------------------------------------------
std::map<std::string, Row> architectures() {
  std::map<std::string, Row> out;
  for (Row& r : read_csv(kDir + "model_architectures.csv")) out[get(r, "model")] = r;
  return out;
}

// The table's model name -> the architecture CSV's name ("" = not there).
std::string arch_name(const std::string& table_model) {
  static const std::map<std::string, std::string> m = {
      {"LLAMA3_8B", "Llama3-8B"},
      {"LLAMA3_70B", "Llama3-70B"},
      {"LLAMA3.1_405B", "Llama3.1-405B"},
      {"GPT OSS 120B", "GPT-OSS-120B"},
      {"Qwen3_30B_a3B", "Qwen3-30B-A3B"},
      {"Qwen3_30B_a3B (tokendrop)", "Qwen3-30B-A3B"},
      {"Qwen3_235B_a22B", "Qwen3-235B-A22B"},
      {"Qwen3_235B_a22B (tokendrop)", "Qwen3-235B-A22B"},
      {"DeepSeekV3 (dropless)", "DeepSeek-V3"},
      {"GPT3-5B", "GPT3-5B (NeMo)"},
      {"GPT3-20B", "GPT3-20B (NeMo)"},
      {"GPT3-175B", "GPT3-175B (NeMo)"},
      {"LLAMA2-7B", "Llama2-7B"},
      {"LLAMA2-13B", "Llama2-13B"},
      {"LLAMA2-70B", "Llama2-70B"},
      {"LLAMA3-8B", "Llama3-8B"},
      {"LLAMA3-70B", "Llama3-70B"},
      {"Nemotron-8B", "Nemotron-8B"},
      {"Nemotron-22B", "Nemotron-22B"},
      {"Nemotron-340B", "Nemotron-340B"},
  };
  auto it = m.find(table_model);
  return it == m.end() ? "" : it->second;
}

// First integer after `key` in a free-text cell ("q_lora 1536, kv_lora 512, ...").
int64_t field_after(const std::string& text, const std::string& key) {
  const size_t p = text.find(key);
  if (p == std::string::npos) return 0;
  size_t i = p + key.size();
  while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  int64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) v = v * 10 + (text[i++] - '0');
  return v;
}

ModelSpec model_from_arch(const Row& a) {
  ModelSpec m;
  m.name = get(a, "model");
  m.num_layers = static_cast<int>(num(a, "layers", 0));
  m.hidden_size = num(a, "hidden", 0);
  m.ffn_hidden_size = num(a, "ffn_hidden", 0);
  m.num_attention_heads = static_cast<int>(num(a, "heads", 0));
  m.num_query_groups = static_cast<int>(num(a, "kv_heads", m.num_attention_heads));  // "MLA" -> heads
  m.kv_channels = num(a, "head_dim", m.num_attention_heads > 0 ? m.hidden_size / m.num_attention_heads : 0);
  m.vocab_size = num(a, "vocab", 0);
  const std::string act = get(a, "activation");
  m.swiglu = act.find("SwiGLU") != std::string::npos || act.find("gated") == 0;
  if (act.find("squared ReLU") != std::string::npos) m.activation = Activation::kSquaredRelu;
  if (act.find("quick_gelu") != std::string::npos) m.activation = Activation::kQuickGelu;
  const bool gpt3 = m.name.rfind("GPT3", 0) == 0;
  // GPT3 (NeMo GPTConfig): LayerNorm, biases, learned absolute positions, tied embeddings.
  // Nemotron (the launcher's layernorm1p, as the source column says): LayerNorm, RoPE, untied.
  // Llama / Qwen / DeepSeek / GPT-OSS: RMSNorm, RoPE, untied ("tied_embeddings: no").
  const bool layernorm = gpt3 || get(a, "source").find("layernorm1p") != std::string::npos;
  m.normalization = layernorm ? Normalization::kLayerNorm : Normalization::kRMSNorm;
  m.position_embedding_type = gpt3 ? PositionEmbedding::kLearnedAbsolute : PositionEmbedding::kRope;
  m.untie_embeddings_and_output_weights = get(a, "tied_embeddings") == "no";
  m.add_bias_linear = gpt3 || act.find("biases on") != std::string::npos;
  // Dropout as the recorded configurations set it: NeMo's GPTConfig5B and GPTConfig20B keep
  // Megatron-Core's TransformerConfig defaults, hidden and attention dropout 0.1 (the NeMo 1.0
  // launcher's gpt3/5b and 20b recipes too), where GPTConfig175B sets both to 0
  // (nemo/collections/llm/gpt/model/base.py, the source column's file); LlamaConfig, NemotronConfig
  // and the Bridge models set 0.
  const bool gpt3_dropout = gpt3 && m.name.find("175B") == std::string::npos;
  m.hidden_dropout = gpt3_dropout ? 0.1 : 0;
  m.attention_dropout = gpt3_dropout ? 0.1 : 0;
  m.max_position_embeddings = 4096;
  const int64_t experts = num(a, "experts", 0);
  if (experts > 0) {
    m.num_experts = static_cast<int>(experts);
    m.moe_router_topk = static_cast<int>(num(a, "topk", 2));
    m.moe_ffn_hidden_size = num(a, "moe_ffn_hidden", m.ffn_hidden_size);
    m.moe_shared_expert_intermediate_size = num(a, "shared_expert_ffn", 0);
    const std::string pat = get(a, "moe_layer_pattern");
    std::smatch mt;
    if (std::regex_search(pat, mt, std::regex(R"(\[0\]\*(\d+)\+\[1\]\*(\d+))"))) {
      const int d = std::stoi(mt[1]), e = std::stoi(mt[2]);
      m.moe_layer_pattern.assign(static_cast<size_t>(d), 0);
      m.moe_layer_pattern.insert(m.moe_layer_pattern.end(), static_cast<size_t>(e), 1);
    }
  }
  // Sliding-window attention, as the source column states it (GPT-OSS: "window_attn_skip_freq=2
  // (alternating SWA window 128 / full)").
  std::smatch sw;
  const std::string src = get(a, "source");
  if (std::regex_search(src, sw, std::regex(R"(window_attn_skip_freq=(\d+) \(alternating SWA window (\d+))"))) {
    m.window_attn_skip_freq = std::stoi(sw[1]);
    m.window_size = std::stoll(sw[2]);
  }
  const std::string mla = get(a, "mla");
  if (!mla.empty()) {
    m.multi_latent_attention = true;
    m.q_lora_rank = field_after(mla, "q_lora");
    m.kv_lora_rank = field_after(mla, "kv_lora");
    m.qk_head_dim = field_after(mla, "qk_nope");
    m.qk_pos_emb_head_dim = field_after(mla, "qk_rope");
    m.v_head_dim = field_after(mla, "v ");
    m.num_query_groups = m.num_attention_heads;
  }
  if (m.name == "DeepSeek-V3") {
    // DeepSeekV3Config (NeMo) / Megatron-Bridge recipe: sigmoid router, 8 groups top-4,
    // expert bias, one MTP layer (the H100 recipe's pp_layout "Et|(tt|)*30mL" ends in it).
    m.moe_router_score_function = RouterScore::kSigmoid;
    m.moe_router_num_groups = 8;
    m.moe_router_group_topk = 4;
    m.moe_router_enable_expert_bias = true;
    m.mtp_num_layers = 1;
  }
  if (m.name.rfind("Qwen3", 0) == 0) m.qk_layernorm = true;
  return m;
}

// ---------------------------------------------------------------------------------
// Scenario construction: the row's layout plus per-table assumptions plus recipe facts.
// ---------------------------------------------------------------------------------
struct Layout {
  int gpus = 8, tp = 1, pp = 1, cp = 1, vp = 1, ep = 1, mbs = 1, gbs = 1;
  int etp = 1;  // expert tensor parallelism: 1 in every recipe but dgxc-benchmarking's Grok-1 (= TP)
  int64_t seq = 4096;
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // the table's "FP8-CS": tensorwise
  bool fsdp = false;
};

// A row's layout from the columns the published tables share (num_gpus, gbs, mbs, seq_len, tp,
// pp, cp, vp, ep, fsdp); a blank or absent column takes the default (mbs, vp, ep 1; no FSDP).
// Precision is each table's own.
Layout row_layout(const Row& r) {
  Layout l;
  l.gpus = static_cast<int>(num(r, "num_gpus", 8));
  l.gbs = static_cast<int>(num(r, "gbs", 1));
  l.mbs = static_cast<int>(num(r, "mbs", 1));
  l.seq = num(r, "seq_len", 4096);
  l.tp = static_cast<int>(num(r, "tp", 1));
  l.pp = static_cast<int>(num(r, "pp", 1));
  l.cp = static_cast<int>(num(r, "cp", 1));
  l.vp = static_cast<int>(num(r, "vp", 1));
  l.ep = static_cast<int>(num(r, "ep", 1));
  l.fsdp = num(r, "fsdp", 0) > 0;
  return l;
}

// Per-model recipe facts (stated in the published recipes; same for every row of a model).
struct Recipe {
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  uint32_t recompute_modules = 0;
  bool ep_a2a_overlap = false;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  std::string pipeline_layout;  // Megatron-Bridge's pp_layout (--pipeline-model-parallel-layout)
  bool grad_reduce_in_fp32 = true;
  bool bf16_optimizer = false;  // bf16 moments and no separate master copy (NeMo's SFT recipe)
  bool cross_entropy_loss_fusion = false;  // memory only (the loss buffers)
  CrossEntropyFusionImpl cross_entropy_fusion_impl = CrossEntropyFusionImpl::kNative;
  bool tp_comm_overlap = true;  // NeMo rows with TP > 1: userbuffers overlap unless the recipe turns it off
  CudaGraphImpl cuda_graph_impl = CudaGraphImpl::kNone;
  uint32_t cuda_graph_modules = 0;
  int64_t document_length = 0;  // packed SFT / LoRA sequences (kSquadDocumentTokens)
  uint32_t lora_targets = 0;     // LoRA rows (rank kLoraRank): the stack's default targets; 0 none
  AttentionBackend attention_backend = AttentionBackend::kFused;
  bool fp8_param_gather = false;  // FP8 rows: FP8 weights gathered in FP8 (NeMo's fp8_params)
  std::string note;
};

// LoRA rows (validation/published/DECLARATION_lora.md, fixed before they were first scored): rank
// 32 in both stacks (NeMo 1.0 lora_tuning.adapter_dim, Megatron-Bridge LoRA.dim); targets NeMo
// 1.0's default attention_qkv, Megatron-Bridge's default linear_qkv / proj / fc1 / fc2.
constexpr int64_t kLoraRank = 32;

// SFT and LoRA rows of both tables pack SQuAD v1.1 ("{input} {output}") into 4096-token
// sequences: a mean example of about 160 words of context, 10 of question and 3 of answer, taken
// as 200 tokens (validation/published/DECLARATION_lora.md, fixed before the LoRA rows were first
// scored; at 200 tokens the core is about 5 % of its 4096-token cost for these models).
constexpr int64_t kSquadDocumentTokens = 200;

// Sources: NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/*/ *_workload_base_configs.py
// and *_llm_pretrain.py (H100 presets), read 2026-08.
//
// Cross-entropy: every Megatron-Bridge row runs the fused loss with Transformer Engine's
// kernel: GPTModelProvider.cross_entropy_loss_fusion = True (src/megatron/bridge/models/
// gpt_provider.py, every tag from v0.1.0a0), and the performance scripts set
// cross_entropy_fusion_impl = "te" (v0.1.0rc3/rc4: scripts/performance/configs/{llama3,llama31,
// qwen3,deepseek}/*_llm_pretrain.yaml, the 25.09 models; v0.2.0 on: scripts/performance/utils/
// helpers.py / overrides.py set_common_perf_overrides, every model). The H100 rows are 25.09-26.06
// containers, i.e. Transformer Engine 2.2-2.17 (the in-place gradient; docs/memory-model.md).
// NeMo 24.07 (NVIDIA/NeMo-Framework-Launcher tag 24.07, launcher_scripts/conf/training/llama/
// llama3_8b.yaml: cross_entropy_loss_fusion: true; Megatron-Core 0.8 had only the native kernel);
// the other 24.07 configs (gpt3/20b, gpt3/175b, llama/llama2_7b, llama/llama2_70b) leave it unset
// (off).
//
// Gradient reduction of NeMo 24.07: the launcher's YAMLs leave `optim.grad_sync_dtype` unset
// (Apex's DistributedFusedAdam then syncs in its fp32 dtype), but its H100 FP8 example scripts,
// the published runs' recipes, add `+training.model.optim.grad_sync_dtype=bf16`
// (NeMo-Framework-Launcher tag 24.07, examples/training/gpt/h100/{5b,20b,175b}_fp8_*.sh,
// llama/h100/llama3_{8b,70b}_fp8.sh, llama2_70b_fp8.sh; the SFT recipe conf/peft/llama/sft.yaml
// sets grad_sync_dtype: bf16 too). NeMo 1.0 with distributed_fused_adam keeps no separate fp32
// main grads: `main_grad` is a view of Apex's contiguous gradient buffer in that dtype
// (nemo/core/optim/distributed_adam.py, zero_grad). So every NeMo row reduces in bf16 (read in
// session 13, after the rows' memory verdicts were known: docs/validation-memory.md).
Recipe recipe_for(const std::string& table, const ModelSpec& m) {
  Recipe r;
  if (table == "nemo") r.grad_reduce_in_fp32 = false;
  if (table == "nemo" && m.name == "Llama3-8B") r.cross_entropy_loss_fusion = true;  // native
  // Nemotron (launcher tag 24.07, conf/training/nemotron/nemotron_{8b,22b,340b}.yaml and the FP8
  // scripts examples/training/nemotron/h100/nemotron_{8b,22b}_fp8.sh; declared in
  // validation/published/DECLARATION_nemotron_nemo2407.md before lcm first evaluated the rows):
  // 8B and 22B set no grad_sync_dtype (fp32 sync) and run userbuffers TP overlap; 340B syncs in
  // bf16, turns TP overlap off and recomputes core attention (selective). 340B's optimizer also
  // runs in bf16 (`optim.dtype: bf16`: no master copy, bf16 moments), which the declaration
  // missed: read in the same YAML after its first verdict (out of memory) was seen.
  if (table == "nemo" && m.name.rfind("Nemotron-", 0) == 0) {
    r.grad_reduce_in_fp32 = m.name != "Nemotron-340B";
    if (m.name == "Nemotron-340B") {
      r.bf16_optimizer = true;
      r.tp_comm_overlap = false;
      r.recompute = RecomputeGranularity::kSelective;
      r.recompute_modules = kRecomputeCoreAttn;
    }
  }
  // GPT3 175B: the tag's conf/training/gpt3/175b.yaml sets `ub_tp_comm_overlap: False` and its
  // FP8 script (examples/training/gpt/h100/175b_fp8_16node.sh) does not turn it on (gpt3/20b,
  // llama2_70b, llama3_70b and the Nemotron 8B / 22B YAMLs set it True). Read in session 36,
  // after these rows' errors were known (+13.8 / +7.6 % with userbuffers overlap): a
  // development-set change.
  if (table == "nemo" && m.name.rfind("GPT3-175B", 0) == 0) r.tp_comm_overlap = false;
  // FlashAttention-2: NeMo-Framework-Launcher's launcher_scripts/conf/config.yaml sets
  // `NVTE_FUSED_ATTN: 0` ("Disable cudnn FA until we've tested it more") in every tag from 24.01
  // to 24.07 (removed on main in 04b8d098, 2024-08-29; first released in 24.09), and no 24.07
  // example script overrides it, so Transformer Engine ran the flash-attn package in the runs of
  // NeMo's 24.07 table and its long-sequence table (24.03.01). Read in session 38, after these
  // rows' errors were known: a development-set change (docs/validation-performance.md).
  if (table == "nemo") r.attention_backend = AttentionBackend::kFlash2;
  if (table != "bridge") return r;
  r.cross_entropy_loss_fusion = true;
  r.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
  const std::string& n = m.name;
  // Every H100 preset reduces gradients in bf16: mixed_precision / ddp grad_reduce_in_fp32 =
  // False in the Llama 3 / 3.1, Qwen3, DeepSeek-V3 and GPT-OSS performance configs of every
  // release (v0.1.0rc4 scripts/performance/configs/*/*_llm_pretrain.yaml; v0.2.0 and v0.3.0
  // *_llm_pretrain.py set_*_common_configs). Read in session 19 for all models (only the Llama
  // rows had it before), after these rows' errors were known.
  r.grad_reduce_in_fp32 = false;
  if (n == "DeepSeek-V3") {
    r.recompute = RecomputeGranularity::kSelective;
    r.recompute_modules = kRecomputeMlaUpProj | kRecomputeMlp;
    r.dispatcher = Dispatcher::kFlex;  // hybridep
    // pp_layout over pp 8 x vp 4. Until session 26 lcm could not combine an uneven split with
    // interleaving and modelled it as first 7 / last 6 layers without interleaving (+1.2 %).
    r.pipeline_layout = "Et|(tt|)*30mL";
  } else if (n == "Qwen3-235B-A22B") {
    r.ep_a2a_overlap = true;  // moe_a2a_overlap=True, alltoall dispatcher
  } else if (n == "Qwen3-30B-A3B") {
    r.dispatcher = Dispatcher::kFlex;  // 26.02 on (H100: DeepEP, lcm's default backend); 25.x: bridge_rows
  } else if (n == "GPT-OSS-120B") {
    r.recompute = RecomputeGranularity::kSelective;
    r.recompute_modules = kRecomputeLayernorm | kRecomputeMoeAct;
    r.note = "learnable softmax offset (attention sinks) not modelled";
  }
  return r;
}

struct Built {
  Scenario s;
  std::string problem;  // non-empty: not expressible
};

Built build(const std::string& id, const ModelSpec& model, const Layout& l, const Recipe& rc, const HardwareSpec& hw,
            bool tp_comm_overlap) {
  Built b;
  Scenario& s = b.s;
  s.name = id;
  s.model = model;
  s.model.moe_token_dispatcher_type = rc.dispatcher;
  s.hardware = hw;
  s.num_gpus = l.gpus;
  s.training.seq_length = l.seq;
  s.training.micro_batch_size = l.mbs;
  s.training.global_batch_size = l.gbs;
  s.training.precision = l.precision;
  s.training.fp8_recipe = l.fp8_recipe;
  s.training.fp8_param_gather = rc.fp8_param_gather && l.precision == Precision::kFp8;
  s.training.grad_reduce_in_fp32 = rc.grad_reduce_in_fp32;
  s.training.document_length = rc.document_length;
  if (rc.lora_targets != 0) {
    s.training.peft = Peft::kLora;
    s.training.lora_rank = kLoraRank;
    s.training.lora_targets = rc.lora_targets;
  }
  if (rc.bf16_optimizer) {
    s.training.main_params_dtype = DType::kBf16;  // no copy beside the bf16 weights
    s.training.exp_avg_dtype = s.training.exp_avg_sq_dtype = DType::kBf16;
  }
  s.training.cross_entropy_loss_fusion = rc.cross_entropy_loss_fusion;
  s.training.cross_entropy_fusion_impl = rc.cross_entropy_fusion_impl;
  s.training.attention_backend = rc.attention_backend;
  ParallelSpec& p = s.parallel;
  p.tensor_model_parallel_size = l.tp;
  p.sequence_parallel = l.tp > 1;
  p.pipeline_model_parallel_size = l.pp;
  p.context_parallel_size = l.cp;
  p.expert_model_parallel_size = model.num_experts > 0 ? l.ep : 1;
  p.expert_tensor_parallel_size = model.num_experts > 0 ? l.etp : 1;
  p.use_distributed_optimizer = true;
  p.data_parallel_sharding_strategy = l.fsdp ? DpSharding::kOptimGradsParams : DpSharding::kOptim;
  p.overlap_grad_reduce = true;
  p.overlap_param_gather = true;
  p.tp_comm_overlap = tp_comm_overlap && l.tp > 1 && std::getenv("LCM_WHATIF_NO_TP_OVERLAP") == nullptr;
  p.overlap_moe_expert_parallel_comm = rc.ep_a2a_overlap && l.ep > 1 && std::getenv("LCM_WHATIF_NO_EP_OVERLAP") == nullptr;
  p.recompute_granularity = rc.recompute;
  p.recompute_modules = rc.recompute_modules;
  p.cuda_graph_impl = rc.cuda_graph_impl;
  p.cuda_graph_modules = rc.cuda_graph_modules;
  if (!rc.pipeline_layout.empty() && l.pp > 1) {
    p.pipeline_layout = expand_pipeline_layout(rc.pipeline_layout).stages;
  } else if (l.vp > 1 && l.pp > 1) {
    // Megatron-Bridge recipes whose layer count does not split over pp x vp chunks count
    // the embedding and the loss as one layer each (Llama 3.1 405B: 126 + 2 = 128 = 64 x 2;
    // Qwen3-235B: 94 + 2 = 96 = 32 x 3).
    const int chunks = l.pp * l.vp;
    int n = model.num_layers;
    if (n % chunks != 0 && (n + 2) % chunks == 0) {
      p.account_for_embedding_in_pipeline_split = true;
      p.account_for_loss_in_pipeline_split = true;
      n += 2;
    }
    p.num_layers_per_virtual_pipeline_stage = n / chunks;
  } else if (l.pp > 1 && model.num_layers % l.pp != 0 && (model.num_layers + 2) % l.pp == 0) {
    p.account_for_embedding_in_pipeline_split = true;
    p.account_for_loss_in_pipeline_split = true;
  }
  for (const Problem& pr : validate_scenario(s)) b.problem += (b.problem.empty() ? "" : "; ") + pr.key + ": " + pr.message;
  return b;
}

// ---------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------
struct Result {
  std::string table, id;
  bool evaluated = false;
  bool counted = true;  // false: evaluated for information, outside the error statistics
  std::string reason;  // skip reason, or a caveat for evaluated rows
  double pred = 0, pub = 0;            // primary metric
  double pred2 = 0, pub2 = 0;          // secondary metric (TFLOP/s, or fwd/bwd ms)
  double pred3 = 0, pub3 = 0;
  double flops_per_token = 0, flops_per_token_nc = 0, pub_flops_per_token = 0;
  double step_s = 0;  // predict(): the predicted step time
  Scenario scenario;  // the row's scenario (evaluated rows; published_h100_scenarios)
  bool has_band = false;  // predict(): the step's 80% error band (Estimate::band), for rate rows
  StepBand band;
  Memory memory;  // predict(): the estimate's memory (verdicts: fits, may_fit, the band's ends)
  double err() const { return 100.0 * (pred - pub) / pub; }
};

[[maybe_unused]] double pct(double pred, double pub) { return pub > 0 ? 100.0 * (pred - pub) / pub : 0; }

// Published FLOPs per token implied by a row (TFLOP/s / tokens/s).
double implied_flops_per_token(double tflops, double tokens) { return tokens > 0 ? tflops * 1e12 / tokens : 0; }

bool load_h100(HardwareSpec& hw) {
  hw = HardwareSpec{};
  auto r = io::load_hardware_profile(LCM_SOURCE_DIR "/hwprofiles/h100-sxm.yaml");
  if (!r.ok()) {
    ADD_FAILURE() << "cannot load h100-sxm: " << r.error().str();
    return false;
  }
  hw = r.value();
  return true;
}

// Tokens/s and model TFLOP/s of a scenario (TFLOP/s under the scenario's FLOP convention),
// with its model FLOPs per token under both conventions.
void predict(Scenario s, Result& res) {
  res.scenario = s;
  const Estimate e = estimate(s);
  res.pred = e.time.tokens_per_s_per_gpu;
  res.pred2 = e.time.model_tflops_per_gpu;
  res.step_s = e.time.step_s;
  res.has_band = true;
  res.band = e.band;
  res.memory = e.memory;
  const double tokens = static_cast<double>(s.training.global_batch_size) * static_cast<double>(s.training.seq_length);
  const bool causal = s.flop_convention.causal_halved;
  s.flop_convention.causal_halved = !causal;
  const double other = count_flops(s, e.mesh).model_flops / tokens;
  res.flops_per_token = causal ? e.flops.model_flops / tokens : other;
  res.flops_per_token_nc = causal ? other : e.flops.model_flops / tokens;
  res.evaluated = true;
  // LCM_PERF_DUMP=DIR: each evaluated row's scenario as a YAML file, so that `lcm estimate`,
  // `lcm comm` or `lcm trace` can take one row apart (the hardware is the row's profile name).
  if (const char* dir = std::getenv("LCM_PERF_DUMP")) {
    std::string file = res.id;
    for (char& c : file)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    std::ofstream(std::string(dir) + "/" + file + ".yaml") << io::scenario_to_yaml(res.scenario, res.scenario.hardware.name);
  }
  if (std::getenv("LCM_PERF_BREAKDOWN") != nullptr) {
    const StepTime& t = e.time;
    auto ex = [&](CommDim d) { return t.exposed_comm[static_cast<size_t>(d)]; };
    std::printf("%s: step %.3f s = pipeline %.3f (bubble %.3f) + dp %.3f + opt %.3f; gemm %.3f attn %.3f mem %.3f; "
                "exposed tp %.3f cp %.3f ep %.3f pp %.3f dp %.3f; mb %d vp %d\n",
                res.id.c_str(), t.step_s, t.pipeline, t.bubble, t.dp_exposed, t.optimizer, t.compute[0], t.compute[1],
                t.compute[2], ex(CommDim::kTp), ex(CommDim::kCp), ex(CommDim::kEp), ex(CommDim::kPp), ex(CommDim::kDp),
                e.mesh.num_micro_batches, e.mesh.vp);
  }
}

// ---------------------------------------------------------------------------------
// Megatron-Bridge rows whose own cells contradict each other: gbs = mbs x dp x ga fails (dp =
// GPUs / (tp x pp x cp), the CSV's dp_derived). Three rows of the whole table do, one of them on
// H100: 25.11 GPT-OSS 120B (gbs 512, mbs 4, dp 16, ga 2). Its mbs 4 and ga 2 are the cells of the
// same release's B200 / GB200 rows (pp 1, dp 64: 512 / (4 x 64) = 2), while its pp 4 and ep 8
// are the H100 preset's. Such a row takes the contradicted cell from the release's code; a
// contradictory H100 row without an entry here fails PerfValidation.BridgeRowsAgreeWithThemselves.
// Read in session 43, after the row's error and its out-of-memory verdict were known (a
// development-set change; docs/validation-memory.md).
struct BridgeCorrection {
  const char* release;
  const char* system;
  const char* model;
  int mbs;
  const char* source;
};
constexpr BridgeCorrection kBridgeCorrections[] = {
    {"25.11", "DGX-H100", "GPT OSS 120B", 1,
     "Megatron-Bridge v0.2.0 scripts/performance/configs/gpt_oss/workload_base_configs.py, "
     "GPT_OSS_120B_H100_BF16_BASE_CONFIG: gbs 512, mbs 1, pp 4, ep 8"},
};

const BridgeCorrection* bridge_correction(const Row& r) {
  for (const BridgeCorrection& c : kBridgeCorrections)
    if (get(r, "release") == c.release && get(r, "system") == c.system && get(r, "model") == c.model) return &c;
  return nullptr;
}

// False where the row states gbs, mbs, dp and ga and they disagree (true where a cell is blank).
bool bridge_batch_cells_agree(const Row& r) {
  const int64_t gbs = num(r, "gbs", 0), mbs = num(r, "mbs", 0), dp = num(r, "dp_derived", 0), ga = num(r, "ga", 0);
  return gbs <= 0 || mbs <= 0 || dp <= 0 || ga <= 0 || gbs == mbs * dp * ga;
}

// ---------------------------------------------------------------------------------
// Megatron-Bridge performance summary, DGX-H100 rows.
// Assumptions (all rows): distributed optimizer with overlapped grad reduce-scatter and
// param all-gather; SP when TP > 1; TP comm overlap (userbuffers) for the dense Llama
// models with TP > 1 (llama3_llm_pretrain.py sets tp_comm_overlap_cfg for H100); ETP 1;
// FSDP column > 0 -> Megatron-FSDP (ZeRO-3 sharding over DP); "not stated" precision
// (25.09) -> FP8, the 25.09 page's notes being about FP8 granularities and the dense
// TFLOP/s (725 on Llama3 8B) exceeding what BF16 can reach; GEMMs at the FP8 dense peak,
// attention in BF16. Balanced routing, dropless (the tables force balance).
// ---------------------------------------------------------------------------------
std::vector<Result> bridge_rows(const HardwareSpec& hw, const std::map<std::string, Row>& archs) {
  std::vector<Result> out;
  for (const Row& r : read_csv(kDir + "megatron_bridge_perf_summary.csv")) {
    if (get(r, "system") != "DGX-H100") continue;
    Result res;
    res.table = "bridge";
    const std::string model = get(r, "model");
    res.id = get(r, "release") + " " + model + " " + get(r, "section").substr(0, get(r, "section").find(' ')) +
             " " + get(r, "num_gpus") + "GPU";
    if (get(r, "variant") != "primary") res.id += " (alt)";
    res.pub = real(r, "tokens_per_sec_per_gpu");
    res.pub2 = real(r, "model_tflops_per_gpu");
    res.pub_flops_per_token = implied_flops_per_token(res.pub2, res.pub);
    const std::string section = get(r, "section");
    const std::string prec = get(r, "precision");
    if (get(r, "variant") != "primary") {
      res.reason = "parenthesized alternative (blockwise FP8): the table gives one tokens/s cell for both; counted once";
    } else if (arch_name(model).empty() || !archs.count(arch_name(model))) {
      res.reason = "architecture not expressible or not in model_architectures.csv (Nemotron-3 Nano is a Mamba/attention hybrid MoE)";
    } else if (prec.find("MX") != std::string::npos) {
      res.reason = "FP8-MX (MXFP8) is Blackwell-only";
    }
    if (!res.reason.empty()) {
      out.push_back(res);
      continue;
    }
    const ModelSpec m = model_from_arch(archs.at(arch_name(model)));
    Layout l = row_layout(r);
    l.precision = prec == "BF16" ? Precision::kBf16 : Precision::kFp8;
    // "FP8-CS" (per-tensor current scaling, the page's nomenclature) is Megatron's tensorwise
    // recipe; "FP8" and "not stated" keep lcm's default (delayed: no amax pass), the recipes'
    // scaling not being stated (session 28, after these rows' errors were known).
    if (prec == "FP8-CS") l.fp8_recipe = Fp8Recipe::kTensorwise;
    const BridgeCorrection* correction = bridge_correction(r);
    if (correction != nullptr) l.mbs = correction->mbs;
    Recipe rc = recipe_for("bridge", m);
    // FP8 weights (session 41, read after these rows' errors were known: a development-set change):
    // the performance scripts take Megatron-Bridge's mixed-precision recipes
    // (scripts/performance/utils/helpers.py get_precision_config, v0.1.0rc3-v0.3.0), and
    // bf16_with_fp8_delayed_scaling_mixed and bf16_with_fp8_current_scaling_mixed set
    // fp8_param_gather = True in every release (src/megatron/bridge/training/mixed_precision.py);
    // only the subchannel (blockwise) recipe, not a counted row here, sets False.
    rc.fp8_param_gather = l.fp8_recipe != Fp8Recipe::kBlockwise;
    // Qwen3-30B-A3B on H100 before 26.02: the presets set no flex backend, and Megatron-Bridge
    // skips HybridEP on GPUs other than GB200/GB300 (v0.2.0 training/flex_dispatcher_backend.py),
    // so the 25.09 and 25.11 runs used the alltoall dispatcher (25.09: run_script.py's token
    // drop with alltoall); 26.02 on (v0.3.0 qwen3_workload_base_configs.py) use flex (DeepEP,
    // lcm's default backend). Read in session 13, after these rows' errors were known.
    if (m.name == "Qwen3-30B-A3B" && get(r, "release").rfind("25.", 0) == 0) rc.dispatcher = Dispatcher::kAllToAll;
    // Qwen3-30B-A3B's H100 BF16 preset captures the router and the dispatcher's preprocessing in
    // Transformer Engine CUDA graphs in every release after 25.09 (Megatron-Bridge v0.2.0
    // scripts/performance/configs/qwen3/workload_base_configs.py QWEN3_30B_A3B_H100_BF16_BASE_CONFIG;
    // v0.3.0-v0.5.0 qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1:
    // cuda_graph_impl="transformer_engine", cuda_graph_scope=["moe_router", "moe_preprocess"]);
    // 25.09's (v0.1.0rc4 qwen3_30b_a3b_llm_pretrain.yaml, h100: cuda_graphs false) has none, nor
    // has any other H100 preset of these rows. Read in session 20, after the rows' errors were known.
    if (m.name == "Qwen3-30B-A3B" && get(r, "release") != "25.09") {
      rc.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
      rc.cuda_graph_modules = kCudaGraphMoeRouter | kCudaGraphMoePreprocess;
    }
    if (model.find("tokendrop") != std::string::npos) {
      rc.note = "token-drop run modelled as dropless: balanced routing drops nothing at capacity factor 1";
    }
    if (section.find("SFT") != std::string::npos) {
      rc.note += std::string(rc.note.empty() ? "" : "; ") + "SFT: packed SQuAD documents of ~200 tokens";
      rc.document_length = kSquadDocumentTokens;
    }
    if (section.find("LoRA") != std::string::npos) {
      rc.note += std::string(rc.note.empty() ? "" : "; ") +
                 "LoRA rank 32 on qkv, proj, fc1, fc2; packed SQuAD documents of ~200 tokens; held out when first scored";
      rc.document_length = kSquadDocumentTokens;
      rc.lora_targets = kLoraAllTargets;
    }
    if (correction != nullptr)
      rc.note += std::string(rc.note.empty() ? "" : "; ") + "mbs " + std::to_string(correction->mbs) +
                 " from the release's code (the row's gbs, mbs, dp and ga cells contradict each other)";
    const bool dense = m.num_experts == 0;
    Built b = build(res.id, m, l, rc, hw, /*tp_comm_overlap=*/dense);
    res.reason = rc.note;
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    predict(b.s, res);
    out.push_back(res);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// NeMo 24.07 performance summary (DGX-H100, FP8).
// FLOP convention: not documented; the implied FLOPs per token (TFLOP/s / tokens/s) of every
// pre-training row equals lcm's NON-causal count within 0.1 % (GPT3, Llama 2, Llama 3), so
// TFLOP/s are compared with causal_halved = false (the FLOP-convention test below checks it).
// Assumptions (all rows): as for Megatron-Bridge (distributed optimizer, overlapped DP
// collectives, SP and TP comm overlap when TP > 1 -- the NeMo 24.07 recipes run userbuffers
// TP overlap for the TP > 1 GPT/Llama/Nemotron configs but GPT3 175B's and Nemotron 340B's,
// recipe_for), FP8 GEMMs, no recompute (none stated), grad reduce in bf16 (the FP8 example
// scripts; recipe_for; Nemotron rows: their own YAMLs, recipe_for). CP/VP blank -> 1.
// SFT rows (packed sequences) are modelled as pre-training at the same sequence length.
// ---------------------------------------------------------------------------------
std::vector<Result> nemo_rows(const HardwareSpec& hw, const std::map<std::string, Row>& archs) {
  std::vector<Result> out;
  for (const Row& r : read_csv(kDir + "nemo_24.07_h100.csv")) {
    Result res;
    res.table = "nemo";
    const std::string model = get(r, "model");
    res.id = model + " " + get(r, "task") + " " + get(r, "num_gpus") + "GPU";
    res.pub = real(r, "tokens_per_sec_per_gpu");
    res.pub2 = real(r, "model_tflops_per_gpu");
    res.pub_flops_per_token = implied_flops_per_token(res.pub2, res.pub);
    const std::string task = get(r, "task");
    if (arch_name(model).empty() || !archs.count(arch_name(model))) {
      res.reason = "architecture not in model_architectures.csv";
    }
    if (!res.reason.empty()) {
      out.push_back(res);
      continue;
    }
    const ModelSpec m = model_from_arch(archs.at(arch_name(model)));
    Layout l = row_layout(r);
    l.precision = Precision::kFp8;
    Recipe rc = recipe_for("nemo", m);
    if (task == "SFT") {
      rc.note = "SFT: packed SQuAD documents of ~200 tokens";
      rc.document_length = kSquadDocumentTokens;
      // conf/peft/llama/sft.yaml (launcher tag 24.07): distributed_fused_adam with `dtype: bf16`
      // (NeMo then stores no master copy: optimizer dtype == model dtype) and bf16 moments.
      rc.bf16_optimizer = true;
    }
    if (task == "LoRA") {
      rc.note = "LoRA rank 32 on qkv; packed SQuAD documents of ~200 tokens; held out when first scored";
      rc.document_length = kSquadDocumentTokens;
      rc.lora_targets = kLoraQkv;
    }
    Built b = build(res.id, m, l, rc, hw, /*tp_comm_overlap=*/rc.tp_comm_overlap);
    b.s.flop_convention.causal_halved = false;
    res.reason = rc.note;
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    predict(b.s, res);
    out.push_back(res);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// NeMo's long-sequence table (NeMo 24.03.01 container, DGX-H100, Llama 2 7B, FP8; CP 1-32 at
// 4K-1024K tokens), held out when added: validation/published/DECLARATION_nemo_long_sequence.md
// fixes the mapping before lcm evaluated a row. The NeMo rows' recipe (recipe_for("nemo")), no
// recompute, micro-batch 1, the table's global batch, CP over p2p (the 24.03 stack's only CP),
// no virtual pipeline. Only TFLOP/s are published; they are compared with lcm's NON-causal
// count, NeMo 1.0's convention (the NeMo 24.07 rows' implied FLOPs per token, above), so the
// primary metric here is TFLOP/s per GPU (a rate, like tokens/s: rate_range applies).
// ---------------------------------------------------------------------------------
constexpr double kGiB = 1073741824.0;

// A row's memory verdict as the long-sequence and dgxc-benchmarking tables print it.
std::string memory_verdict(const Memory& mem) {
  return mem.fits      ? fmt::format("fits ({:.1f} GiB at the band's top)", mem.peak_high_bytes / kGiB)
         : mem.may_fit ? fmt::format("tight ({:.1f} GiB at the band's top)", mem.peak_high_bytes / kGiB)
                       : fmt::format("OUT OF MEMORY ({:.1f} GiB at the band's bottom)", mem.peak_low_bytes / kGiB);
}

std::vector<Result> nemo_long_sequence_rows(const HardwareSpec& hw, const std::map<std::string, Row>& archs) {
  std::vector<Result> out;
  for (const Row& r : read_csv(kDir + "nemo_long_sequence_h100.csv")) {
    Result res;
    res.table = "nemo_long";
    const std::string model = get(r, "model");
    res.id = fmt::format("{} {}K CP{} {}GPU", model, get(r, "seq_len_k"), get(r, "cp"), get(r, "num_gpus"));
    res.pub = real(r, "model_tflops_per_gpu");
    if (!archs.count(model)) {
      res.reason = "architecture not in model_architectures.csv";
      out.push_back(res);
      continue;
    }
    const ModelSpec m = model_from_arch(archs.at(model));
    Layout l = row_layout(r);  // no mbs / vp columns: micro-batch 1, no virtual pipeline
    l.precision = Precision::kFp8;
    const Recipe rc = recipe_for("nemo", m);
    Built b = build(res.id, m, l, rc, hw, /*tp_comm_overlap=*/rc.tp_comm_overlap);
    b.s.parallel.cp_comm_type = CpCommType::kP2P;
    b.s.flop_convention.causal_halved = false;
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    predict(b.s, res);
    std::swap(res.pred, res.pred2);  // primary: TFLOP/s (non-causal); secondary: tokens/s
    res.reason = memory_verdict(res.memory);
    out.push_back(res);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// NVIDIA/dgxc-benchmarking's H100 tables (tag v24.11.1: NeMo 24.05 / 24.09 / "dev" containers,
// NeMo 1.0 launcher YAMLs; BF16 and FP8 at 8-2304 GPUs), held out when added:
// validation/published/DECLARATION_dgxc_benchmarking.md fixes this mapping before lcm evaluated a
// row. Tokens/s per GPU = gbs x seq / (step x GPUs). The NeMo rows' recipe with the YAMLs'
// differences: userbuffers TP overlap on every TP > 1 workload (the Nemotron and Grok-1
// configure.sh overrides, the Llama and GPT-3 YAMLs), GPT-3 175B's dropout 0.1 and GPT-2 vocab,
// Llama 3.1 405B's 16 query groups and GPT-2 vocab (mock data), Grok-1's capacity factor 1.0
// with padding and experts sharded over TP. Memory verdicts in `reason`.
// ---------------------------------------------------------------------------------
// `tag` "v24.11.1" (dgxc_benchmarking_h100.csv), "v25.02" (dgxc_benchmarking_v25.02_h100.csv,
// DECLARATION_dgxc_benchmarking_v25.02.md: NeMo 24.12, its rows' ids start with the tag, and the
// tag's recipe changes below) or "v25.04" (dgxc_benchmarking_v25.04_h100.csv,
// DECLARATION_dgxc_benchmarking_v25.04.md: Llama 3.1 and Nemotron-4 on NeMo 2.0's performance
// scripts, container 25.02.01; the recipe below).
std::vector<Result> dgxc_rows(const HardwareSpec& hw, const std::map<std::string, Row>& archs,
                              const std::string& tag = "v24.11.1") {
  const bool v2502 = tag == "v25.02";
  const bool v2504 = tag == "v25.04";
  const bool tagged = v2502 || v2504;
  static const std::map<std::string, std::string> kArch = {
      {"Llama3.1-8B", "Llama3-8B"},         {"Llama3.1-70B", "Llama3-70B"},     {"Llama3.1-405B", "Llama3.1-405B"},
      {"Nemotron4-15B", "Nemotron4-15B"},   {"Nemotron4-340B", "Nemotron-340B"}, {"GPT3-175B", "GPT3-175B (NeMo)"},
      {"Grok-1", "Grok-1"},
  };
  std::vector<Result> out;
  const std::string file = tagged ? "dgxc_benchmarking_" + tag + "_h100.csv" : "dgxc_benchmarking_h100.csv";
  for (const Row& r : read_csv(kDir + file)) {
    Result res;
    res.table = tagged ? "dgxc_" + tag : "dgxc";
    const std::string model = get(r, "model"), prec = get(r, "precision");
    res.id = fmt::format("{}{} {} {}GPU", tagged ? tag + " " : "", model, prec, get(r, "num_gpus"));
    const auto it = kArch.find(model);
    if (it == kArch.end() || !archs.count(it->second)) {
      res.reason = "architecture not in model_architectures.csv";
      out.push_back(res);
      continue;
    }
    ModelSpec m = model_from_arch(archs.at(it->second));
    m.num_layers = static_cast<int>(num(r, "num_layers", m.num_layers));
    if (model == "Llama3.1-405B" && !v2504) {  // v25.04: NeMo 2.0's Llama31Config405B, HF tokenizer
      m.num_query_groups = 16;  // llama3.1_405b.yaml
      m.vocab_size = 50257;     // GPT2BPETokenizer, mock data
    }
    if (model == "GPT3-175B") {
      m.vocab_size = 50257;  // GPT2BPETokenizer
      m.hidden_dropout = m.attention_dropout = 0.1;  // gpt3_175b_hydra.yaml
    }
    if (model == "Grok-1") {
      m.moe_expert_capacity_factor = 1.0;  // grok1_314b.yaml
      m.moe_pad_expert_input_to_capacity = true;
    }
    Layout l = row_layout(r);
    l.precision = prec == "FP8" ? Precision::kFp8 : Precision::kBf16;
    if (model == "Grok-1") l.etp = l.tp;  // Megatron-Core of that generation shards experts over TP
    Recipe rc = recipe_for("nemo", m);
    rc.tp_comm_overlap = true;  // every workload here with TP > 1 (see the declaration)
    // The declaration's caveat, now expressible (session 38, after the score): GPT-3 175B,
    // Nemotron-4 340B and Grok-1 set NVTE_FUSED_ATTN=0 (FlashAttention-2), Llama 3.1 and
    // Nemotron-4 15B NVTE_FUSED_ATTN=1 (cuDNN).
    rc.attention_backend = model == "GPT3-175B" || model == "Nemotron4-340B" || model == "Grok-1"
                               ? AttentionBackend::kFlash2
                               : AttentionBackend::kFused;
    // FP8 weights on the FP8 rows (session 40, development): every workload's configure.sh at
    // v24.11.1 and v25.02 passes model.fp8_params=$FP8_ENABLED (GPT-3 175B's YAML sets it true),
    // and NeMo 1.0 builds Megatron-Core's DDP with fp8_param_gather = fp8_params
    // (megatron_gpt_model.py, NeMo v2.0.0 / v2.1.0).
    rc.fp8_param_gather = true;
    if (v2502) {
      // The v25.02 tag's recipe changes (its declaration): GPT-3 175B exports NVTE_FUSED_ATTN=1
      // and its YAML runs virtual pipeline 6 (the README header's 12 is stale); Nemotron-4 340B
      // runs BF16 with CP 2 (configure.sh); Nemotron-4 15B moved to mcore_distributed_optim
      // without grad_sync_dtype: fp32 gradient reduction.
      if (model == "GPT3-175B") {
        rc.attention_backend = AttentionBackend::kFused;
        l.vp = 6;
      }
      if (model == "Nemotron4-340B" && l.precision == Precision::kBf16) l.cp = 2;
      if (model == "Nemotron4-15B") rc.grad_reduce_in_fp32 = true;
    }
    if (v2504) {
      // NeMo 2.0's performance scripts at the tag's NeMo commit d2b21556 (the declaration, with the
      // files read): bf16 gradient reduction (performance mode), userbuffers TP overlap on every
      // TP > 1 row, NVTE_FUSED_ATTN=1 with the backend on auto: cuDNN on Hopper, for Nemotron-4
      // 340B too; no recompute, no CUDA graphs; fp32 master weights and Adam moments (Nemotron-4
      // 340B included); the fused (native) loss; delayed FP8 scaling. Nemotron-4 340B runs virtual
      // pipeline 12 (launch.sh passes -vp 12; the README's NA is taken as stale).
      rc = Recipe{};
      rc.grad_reduce_in_fp32 = false;
      rc.cross_entropy_loss_fusion = true;
      rc.tp_comm_overlap = true;
      rc.attention_backend = AttentionBackend::kFused;
      // FP8 weights (`fp8_params`: FP8GlobalStateManager.FP8_PARAMETERS and the DDP's
      // fp8_param_gather), modelled since session 40 after this table's score (development): its
      // two FP8 runs flagged out of memory at the score fit or are tight with it.
      rc.fp8_param_gather = true;
      if (model == "Nemotron4-340B") l.vp = 12;
    }
    // CP over p2p: ParallelSpec's default, the only CP of those containers' Transformer Engine.
    const Built b = build(res.id, m, l, rc, hw, /*tp_comm_overlap=*/rc.tp_comm_overlap);
    const double step = real(r, "step_time_s");
    res.pub = static_cast<double>(l.gbs) * static_cast<double>(l.seq) / (step * l.gpus);
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    predict(b.s, res);
    res.pred2 = res.step_s;
    res.pub2 = step;
    res.reason = memory_verdict(res.memory);
    out.push_back(res);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Megatron-Core r0.8.0 weak scaling (Megatron-LM README), H100, BF16.
// Architecture from the row: GPT with MHA, 4h GeLU MLP, LayerNorm, biases, tied
// embeddings, vocab 131072, seq 4096. Layout from the row (no VP, no CP: not stated);
// the README names the overlap flags used: --overlap-grad-reduce --overlap-param-gather
// --tp-comm-overlap, with the distributed optimizer and SP. Micro-batch 1.
// Compared on TFLOP/s with the non-causal attention count of mid-2024 Megatron.
// ---------------------------------------------------------------------------------
std::vector<Result> weak_scaling_rows(const HardwareSpec& hw) {
  std::vector<Result> out;
  for (const Row& r : read_csv(kDir + "megatron_weak_scaling_h100.csv")) {
    Result res;
    res.table = "weak";
    res.id = "GPT " + get(r, "model_size") + " " + get(r, "num_gpus") + "GPU";
    res.pub = real(r, "per_gpu_tflops");
    ModelSpec m;
    m.name = "GPT-" + get(r, "model_size");
    m.num_layers = static_cast<int>(num(r, "num_layers", 0));
    m.hidden_size = num(r, "hidden_size", 0);
    m.num_attention_heads = static_cast<int>(num(r, "attention_heads", 0));
    m.num_query_groups = m.num_attention_heads;
    m.kv_channels = m.hidden_size / m.num_attention_heads;
    m.ffn_hidden_size = 4 * m.hidden_size;
    m.vocab_size = num(r, "vocab", 131072);
    m.normalization = Normalization::kLayerNorm;
    m.position_embedding_type = PositionEmbedding::kRope;
    m.hidden_dropout = 0;
    m.attention_dropout = 0;
    Layout l;
    l.gpus = static_cast<int>(num(r, "num_gpus", 8));
    l.gbs = static_cast<int>(num(r, "global_batch_size", 1));
    l.seq = num(r, "seq_len", 4096);
    l.tp = static_cast<int>(num(r, "tp", 1));
    l.pp = static_cast<int>(num(r, "pp", 1));
    Built b = build(res.id, m, l, Recipe{}, hw, /*tp_comm_overlap=*/true);
    b.s.flop_convention.causal_halved = false;
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    Result tmp = res;
    predict(b.s, tmp);
    res.evaluated = true;
    res.scenario = b.s;
    res.pred = tmp.pred2;  // primary: TFLOP/s/GPU, non-causal
    res.pred2 = tmp.pred;  // tokens/s/GPU (no published counterpart)
    res.flops_per_token = tmp.flops_per_token;
    res.flops_per_token_nc = tmp.flops_per_token_nc;
    res.has_band = tmp.has_band;
    res.band = tmp.band;
    out.push_back(res);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Single MoE layer on 8 H100 (EP 8, TP 1, 4096 tokens per rank, balanced routing):
// forward and backward ms of the schedule's "moe." ops (router, top-k, permute, dispatch
// all-to-all, grouped expert GEMMs, activation, combine all-to-all, unpermute), summed
// without overlap (the benchmark times one layer on one stream), each pass in the host-bound
// regime: the host enqueues those kernels and runs the MoE layer's Python, and the alltoall
// and DeepEP dispatchers synchronise once in the forward (CUDA events around each pass see
// the GPU wait for the host). Non-gated GeLU experts
// (the proxies do not set gated_linear_unit); no shared expert (not passed to the config).
// FP8 rows: expert and router GEMMs at the FP8 peak. All dispatchers (alltoall, DeepEP,
// HybridEP) are modelled as the same NCCL-style all-to-all volumes.
// ---------------------------------------------------------------------------------
[[maybe_unused]] std::vector<Result> moe_layer_rows(const HardwareSpec& hw) {
  std::vector<Result> out;
  for (const Row& r : read_csv(kDir + "moe_layer_microbench_h100.csv")) {
    Result res;
    res.table = "moe";
    res.id = get(r, "case");
    res.pub2 = real(r, "forward_ms");
    res.pub3 = real(r, "backward_ms");
    res.pub = res.pub2 + res.pub3;
    ModelSpec m;
    m.name = get(r, "proxy_model");
    m.num_layers = 1;
    m.hidden_size = num(r, "hidden", 0);
    m.num_attention_heads = 8;
    m.num_query_groups = 8;
    m.kv_channels = m.hidden_size / 8;
    m.ffn_hidden_size = num(r, "moe_ffn_hidden", 0);
    m.num_experts = static_cast<int>(num(r, "num_experts", 0));
    m.moe_router_topk = static_cast<int>(num(r, "topk", 2));
    m.moe_ffn_hidden_size = m.ffn_hidden_size;
    m.vocab_size = 32000;
    m.swiglu = false;
    m.add_bias_linear = false;
    m.hidden_dropout = 0;
    m.attention_dropout = 0;
    m.normalization = Normalization::kRMSNorm;
    m.position_embedding_type = PositionEmbedding::kRope;
    if (get(r, "router_score") == "sigmoid") m.moe_router_score_function = RouterScore::kSigmoid;
    const int groups = static_cast<int>(num(r, "router_groups", 0));
    if (groups > 0) {
      m.moe_router_num_groups = groups;
      m.moe_router_group_topk = static_cast<int>(num(r, "router_group_topk", 1));
    }
    Layout l;
    l.gpus = static_cast<int>(num(r, "num_gpus", 8));
    l.ep = static_cast<int>(num(r, "ep", 8));
    l.seq = num(r, "seq_len_per_rank", 4096);
    l.mbs = static_cast<int>(num(r, "micro_batch", 1));
    l.gbs = l.mbs * l.gpus;
    l.precision = get(r, "precision").rfind("fp8", 0) == 0 ? Precision::kFp8 : Precision::kBf16;
    // The FP8 cases run Transformer Engine's blockwise recipe (the CSV's precision cell). With a
    // measured block-scaled GEMM term in the profile they are modelled so and counted;
    // without one lcm cannot price them (validation/measured/h200/fp8_block/DECLARATION.md).
    const bool blockwise = l.precision == Precision::kFp8 && get(r, "precision").find("blockwise") != std::string::npos;
    if (blockwise && hw.efficiency.gemm_fp8_block > 0) l.fp8_recipe = Fp8Recipe::kBlockwise;
    Recipe rc;
    rc.dispatcher = get(r, "dispatcher") == "alltoall" ? Dispatcher::kAllToAll : Dispatcher::kFlex;
    Built b = build(res.id, m, l, rc, hw, false);
    if (!b.problem.empty()) {
      res.reason = "layout not expressible: " + b.problem;
      out.push_back(res);
      continue;
    }
    const Scenario& s = b.s;
    const Mesh mesh = derive_mesh(s);
    const auto layers = stage_layers(s, mesh);
    const auto params = gpu_params(s, mesh, layers);
    const Schedule sched = build_schedule(s, mesh, layers, params);
    const MeshTopology topo = mesh_topology(s, mesh);
    // One pass of the MoE block alone, as the benchmark times it: its ops' GPU time, and the
    // host's enqueue of their kernels plus the MoE layer's Python (router, dispatcher, experts:
    // host.moe_overhead_*), with the dispatcher's synchronisation (standalone_pass_seconds); the
    // forward's Python before that synchronisation (host.moe_presync_fwd) is a segment of its own.
    auto pass_ms = [&](const std::vector<Op>& layer, double python, double presync) {
      std::vector<Op> ops;
      for (const Op& op : layer)
        if (std::string_view(to_string(op.id)).starts_with("moe.")) ops.push_back(op);
      PassTime p = pass_time(ops, s.parallel, topo, s.hardware);
      p.host += python;
      p.pre_sync_host += presync;
      return standalone_pass_seconds(p) * 1e3;
    };
    res.pred2 = pass_ms(sched.moe.fwd, s.hardware.host.moe_overhead_fwd, s.hardware.host.moe_presync_fwd);
    res.pred3 = pass_ms(sched.moe.bwd, s.hardware.host.moe_overhead_bwd, 0.0);
    res.pred = res.pred2 + res.pred3;
    res.evaluated = true;
    if (rc.dispatcher == Dispatcher::kFlex)
      res.reason = "DeepEP/HybridEP kernels modelled as the NCCL all-to-all volumes";
    if (l.precision == Precision::kFp8 && l.fp8_recipe != Fp8Recipe::kBlockwise) {
      // Blockwise-scaled FP8 (1x128 activations, 128x128 weights; TE's blockwise recipe) runs
      // other cuBLASLt kernels than per-tensor FP8 (the published FP8 rows run 0.9-1.15x the BF16
      // ones). Without the profile's block-scaled term (efficiency.gemm_fp8_block) these rows are
      // shown under per-tensor FP8, not counted.
      res.counted = false;
      res.reason = "not counted: blockwise FP8 and the profile has no block-scaled GEMM term (efficiency.gemm_fp8_block); shown as per-tensor FP8";
    }
    out.push_back(res);
  }
  return out;
}

#ifndef LCM_PUBLISHED_SCENARIOS_ONLY  // no_false_oom_test links this file for its scenarios only
// ---------------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------------
// The signed mean counts lcm predicting faster than measured as positive on every row: a
// row's error is pred / pub - 1 of its own quantity, a rate (tokens/s, TFLOP/s) on the step
// rows and a time (ms) on the MoE-layer rows, whose sign is flipped for the mean.
struct Summary {
  int n = 0, within20 = 0;
  double sum_abs = 0, sum_signed = 0;
  double mae() const { return n > 0 ? sum_abs / n : 0; }
  double bias() const { return n > 0 ? sum_signed / n : 0; }
  void add(const Result& r) {
    const double e = r.err();
    ++n;
    sum_abs += std::fabs(e);
    sum_signed += r.table == "moe" ? -e : e;
    within20 += std::fabs(e) <= 20.0 ? 1 : 0;
  }
};

Summary summarize(const std::vector<Result>& rows) {
  Summary s;
  for (const Result& r : rows)
    if (r.evaluated && r.counted) s.add(r);
  return s;
}

Summary print_table(const std::string& title, const std::vector<Result>& rows, const char* tflops_convention) {
  std::printf("\n### %s\n\n", title.c_str());
  const std::string t = rows.empty() ? "" : rows.front().table;
  const bool dgxc = t.rfind("dgxc", 0) == 0;  // either dgxc-benchmarking tag
  if (t == "nemo_long") {
    std::printf("| row | pred TFLOP/s/GPU (non-causal) | pub TFLOP/s/GPU | err %% | pred tok/s/GPU | "
                "80%% band (TFLOP/s) | memory |\n|---|---:|---:|---:|---:|---|---|\n");
  } else if (dgxc) {
    std::printf("| row | pred tok/s/GPU | pub tok/s/GPU | err %% | pred step s | pub step s | 80%% band (tok/s/GPU) | "
                "memory |\n|---|---:|---:|---:|---:|---:|---|---|\n");
  } else if (t == "bridge" || t == "nemo") {
    std::printf("| row | pred tok/s/GPU | pub tok/s/GPU | err %% | pred TFLOP/s (%s) | pub TFLOP/s | err %% | "
                "GFLOP/token: lcm causal / non-causal / published | note |\n"
                "|---|---:|---:|---:|---:|---:|---:|---|---|\n",
                tflops_convention);
  } else if (t == "weak") {
    std::printf("| row | pred TFLOP/s/GPU (non-causal) | pub TFLOP/s/GPU | err %% | pred tok/s/GPU | "
                "GFLOP/token: lcm causal / non-causal |\n|---|---:|---:|---:|---:|---|\n");
  } else {
    std::printf("| row | pred fwd ms | pub fwd ms | err %% | pred bwd ms | pub bwd ms | err %% | pred fwd+bwd | "
                "pub fwd+bwd | err %% | note |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  }
  for (const Result& r : rows) {
    if (!r.evaluated) continue;
    if (dgxc) {
      const Range range = rate_range(r.pred, r.band);
      std::printf("| %s | %.0f | %.0f | %+.1f | %.2f | %.2f | %.0f-%.0f%s | %s |\n", r.id.c_str(), r.pred, r.pub, r.err(),
                  r.pred2, r.pub2, range.low, range.high, r.pub >= range.low && r.pub <= range.high ? "" : " (outside)",
                  r.reason.c_str());
    } else if (t == "nemo_long") {
      const Range range = rate_range(r.pred, r.band);
      std::printf("| %s | %.0f | %.0f | %+.1f | %.0f | %.0f-%.0f%s | %s |\n", r.id.c_str(), r.pred, r.pub, r.err(),
                  r.pred2, range.low, range.high, r.pub >= range.low && r.pub <= range.high ? "" : " (outside)",
                  r.reason.c_str());
    } else if (t == "bridge" || t == "nemo") {
      std::printf("| %s | %.0f | %.0f | %+.1f | %.0f | %.0f | %+.1f | %.1f / %.1f / %.1f | %s |\n", r.id.c_str(), r.pred,
                  r.pub, r.err(), r.pred2, r.pub2, pct(r.pred2, r.pub2), r.flops_per_token / 1e9,
                  r.flops_per_token_nc / 1e9, r.pub_flops_per_token / 1e9, r.reason.c_str());
    } else if (t == "weak") {
      std::printf("| %s | %.1f | %.1f | %+.1f | %.0f | %.1f / %.1f |\n", r.id.c_str(), r.pred, r.pub, r.err(), r.pred2,
                  r.flops_per_token / 1e9, r.flops_per_token_nc / 1e9);
    } else {
      std::printf("| %s | %.2f | %.2f | %+.1f | %.2f | %.2f | %+.1f | %.2f | %.2f | %+.1f | %s |\n", r.id.c_str(),
                  r.pred2, r.pub2, pct(r.pred2, r.pub2), r.pred3, r.pub3, pct(r.pred3, r.pub3), r.pred, r.pub, r.err(),
                  r.reason.c_str());
    }
  }
  bool any_skipped = false;
  for (const Result& r : rows) {
    if (r.evaluated) continue;
    if (!any_skipped) std::printf("\nSkipped (not expressible):\n\n");
    any_skipped = true;
    std::printf("- %s: %s\n", r.id.c_str(), r.reason.c_str());
  }
  const Summary s = summarize(rows);
  std::printf("\n%s: %d rows counted, mean |error| %.1f %%, mean signed error %+.1f %% (+: lcm faster), %d within 20 %%\n",
              title.c_str(), s.n, s.mae(), s.bias(), s.within20);
  return s;
}

// Rows whose published TFLOP/s and tokens/s imply lcm's FLOPs per token under the table's
// convention within 1 % (pre-training rows; SFT rows count packed tokens differently and
// GPT-OSS's count in Megatron-Bridge follows its own sliding-window formula).
// Rows whose published FLOPs per token match lcm's count under one convention within 1 %;
// `only`: and not under the other (packed ~200-token documents make the two differ by < 1 %).
int convention_matches(const std::vector<Result>& rows, bool causal, bool only = false) {
  int n = 0;
  const auto match = [](double pub, double ours) { return std::fabs(pub / ours - 1.0) < 0.01; };
  for (const Result& r : rows) {
    if (!r.evaluated || r.pub_flops_per_token <= 0) continue;
    const double ours = causal ? r.flops_per_token : r.flops_per_token_nc;
    const double other = causal ? r.flops_per_token_nc : r.flops_per_token;
    n += match(r.pub_flops_per_token, ours) && !(only && match(r.pub_flops_per_token, other)) ? 1 : 0;
  }
  return n;
}

HardwareSpec load_h100_or_fail() {
  HardwareSpec hw;
  load_h100(hw);
  return hw;
}

TEST(PerfValidation, PublishedH100TablesWithinRecordedBounds) {
  const HardwareSpec hw = load_h100_or_fail();
  ASSERT_GT(hw.gpu.peak_bf16_flops, 0);
  const auto archs = architectures();
  ASSERT_FALSE(archs.empty()) << "cannot read " << kDir << "model_architectures.csv";

  const auto bridge = bridge_rows(hw, archs);
  const auto nemo = nemo_rows(hw, archs);
  const auto weak = weak_scaling_rows(hw);
  const auto moe = moe_layer_rows(hw);
  ASSERT_FALSE(bridge.empty());
  ASSERT_FALSE(nemo.empty());
  ASSERT_FALSE(weak.empty());
  ASSERT_FALSE(moe.empty());

  const Summary sb = print_table("Megatron-Bridge performance summary, DGX-H100 (tokens/s/GPU)", bridge, "causal");
  const Summary sn = print_table("NeMo 24.07 performance summary, DGX-H100, FP8 (tokens/s/GPU)", nemo, "non-causal");
  const Summary sw = print_table("Megatron-Core r0.8.0 weak scaling, H100, BF16 (TFLOP/s/GPU, non-causal)", weak, "");
  const Summary sm = print_table("MoE layer microbenchmark, 8 x H100, EP 8 (ms, forward + backward)", moe, "");

  Summary all;
  for (const auto* rows : {&bridge, &nemo, &weak, &moe})
    for (const Result& r : *rows)
      if (r.evaluated && r.counted) all.add(r);
  std::printf("\nOverall: %d rows counted, mean |error| %.1f %%, mean signed error %+.1f %% (+: lcm faster), %d within 20 %%\n", all.n,
              all.mae(), all.bias(), all.within20);

  // Error-band coverage (issue 12: the band of a prediction covers the published value in at
  // least 80 % of rows): the step rows (the primary metric is a rate, tokens/s or TFLOP/s,
  // inversely proportional to the step time: rate_range); the MoE-layer rows are op sums with
  // no step band. IN-SAMPLE: the band's composition part is these rows' own residual spread.
  int band_rows = 0, covered = 0;
  for (const auto* rows : {&bridge, &nemo, &weak})
    for (const Result& r : *rows) {
      if (!r.evaluated || !r.counted || !r.has_band) continue;
      ++band_rows;
      const Range range = rate_range(r.pred, r.band);
      const bool in = r.pub >= range.low && r.pub <= range.high;
      covered += in ? 1 : 0;
      if (!in)
        std::printf("  outside its band: %s (published %.4g, band %.4g-%.4g, error %+.1f %%)\n", r.id.c_str(), r.pub,
                    range.low, range.high, r.err());
    }
  std::printf("Error bands: the 80%% band covers the published value in %d of %d step rows (in-sample)\n", covered,
              band_rows);
  EXPECT_GE(band_rows, 50);
  EXPECT_GE(covered, kMinBandCovered);

  // FLOP conventions: Megatron-Bridge counts causal attention halved; NeMo 24.07's implied
  // FLOPs per token match lcm's non-causal count (and not the causal one).
  const int bridge_causal = convention_matches(bridge, true), nemo_nc = convention_matches(nemo, false),
            nemo_causal = convention_matches(nemo, true, /*only=*/true);
  std::printf("FLOP convention: %d Bridge rows match lcm's causal count within 1 %%; %d NeMo rows match the "
              "non-causal count, %d the causal one only\n",
              bridge_causal, nemo_nc, nemo_causal);
  EXPECT_GE(bridge_causal, kMinBridgeCausalMatches);
  EXPECT_GE(nemo_nc, kMinNemoNonCausalMatches);
  EXPECT_EQ(nemo_causal, 0);

  EXPECT_GE(all.n, kMinCounted);
  EXPECT_LE(sb.mae(), kBridgeMaeBound);
  EXPECT_LE(sn.mae(), kNemoMaeBound);
  EXPECT_LE(sw.mae(), kWeakScalingMaeBound);
  EXPECT_LE(sm.mae(), kMoeLayerMaeBound);
  EXPECT_LE(all.mae(), kOverallMaeBound);
  EXPECT_LE(std::fabs(all.bias()), kOverallSignedBound);
  EXPECT_GE(all.within20, kMinWithin20Pct);
}

// Every DGX-H100 row of the Megatron-Bridge table either states a consistent batch (gbs = mbs x
// dp x ga) or has a correction from its release's code, and the correction is consistent with
// the row's gbs and dp; a correction for a consistent row (or a row no longer there) fails too.
TEST(PerfValidation, BridgeRowsAgreeWithThemselves) {
  int contradictory = 0, corrected = 0;
  for (const Row& r : read_csv(kDir + "megatron_bridge_perf_summary.csv")) {
    if (get(r, "system") != "DGX-H100") continue;
    const std::string id = get(r, "release") + " " + get(r, "model");
    const BridgeCorrection* c = bridge_correction(r);
    if (bridge_batch_cells_agree(r)) {
      EXPECT_EQ(c, nullptr) << id << ": a correction for a row whose cells agree";
      continue;
    }
    ++contradictory;
    ASSERT_NE(c, nullptr) << id << ": gbs " << get(r, "gbs") << " != mbs " << get(r, "mbs") << " x dp "
                          << get(r, "dp_derived") << " x ga " << get(r, "ga")
                          << ", and no correction from the release's code";
    ++corrected;
    EXPECT_EQ(num(r, "gbs", 0) % (c->mbs * num(r, "dp_derived", 0)), 0)
        << id << ": the corrected mbs does not divide gbs / dp";
  }
  EXPECT_EQ(contradictory, 1);  // 25.11 GPT-OSS 120B
  EXPECT_EQ(corrected, static_cast<int>(std::size(kBridgeCorrections)));
}

// NeMo's long-sequence table, held out when added (DECLARATION_nemo_long_sequence.md): its
// one score is in docs/validation-performance.md. Not in the overall figure above (those
// rows' bounds were recorded before it).
TEST(PerfValidation, NemoLongSequenceTable) {
  const HardwareSpec hw = load_h100_or_fail();
  const auto archs = architectures();
  const auto rows = nemo_long_sequence_rows(hw, archs);
  ASSERT_EQ(rows.size(), 9u);
  const Summary s = print_table("NeMo long-sequence pre-training, DGX-H100, Llama 2 7B FP8 (TFLOP/s/GPU, non-causal)",
                                rows, "");
  int covered = 0, within10 = 0, fit = 0;
  double best = INFINITY;  // the smallest |error| of the table (the 4K row)
  for (const Result& r : rows) {
    ASSERT_TRUE(r.evaluated) << r.id << ": " << r.reason;
    const Range range = rate_range(r.pred, r.band);
    covered += r.pub >= range.low && r.pub <= range.high ? 1 : 0;
    within10 += std::fabs(r.err()) <= 10.0 ? 1 : 0;
    best = std::min(best, std::fabs(r.err()));
    fit += r.reason.rfind("OUT OF MEMORY", 0) == 0 ? 0 : 1;
  }
  std::printf("NeMo long-sequence: %d of %d within 10 %%, the 80%% band covers %d, %d fit or are tight\n", within10,
              s.n, covered, fit);
  // The one held-out score (session 25, at c296fa6's model and profile): mean |error| 34.3 %,
  // signed +34.3 % (every row too fast, +9.0 % at 4K rising to +41..+51 % from 32K), 1 of 9
  // within 10 %, the band covering 4 of 9, all 9 fitting or tight. A regression guard on the
  // recorded figures, not a target: a change that makes them worse fails here.
  // Session 30's H100 kernel terms (adopted on H100 op data, see kBridgeMaeBound) moved them to
  // 35.8 % (signed +35.8 %), 0 of 9 within 10 % (the 4K row +9.0 -> +10.4 %), the band covering
  // 3 of 9; the guard follows (on the best row's error, now that no row is within 10 %).
  // Session 31 landed the die-level L2 slowdown of long forwards that validation/measured/h100/
  // attention_l2/DECLARATION.md adopted (held out 25 of 26 ops within 10 %, against 17) and
  // priced the CP ring's per-step kernels on the KV block each holds: 43.7 % (signed +43.7 %),
  // the band covering 4 of 9. Both make these rows' long attention faster, and the rows were
  // already too fast; the kernel evidence decided, and the guard follows. Pricing the ring's
  // steps as kernels of their own (validation/measured/h200/cp_ring/) then gave 42.9 %; the H100's
  // elementwise rate from its own kernel probe (validation/measured/h100/train_suite2/) 44.3 %,
  // the 4K row +13.0 %. Session 32's residual-stream gradients (see kBridgeMaeBound): 45.0 %, the
  // 4K row +14.5 %, the band covering 4; its activation / RoPE backwards 45.7 %, the 4K row +15.9 %,
  // the band covering 3. Session 35's FP8 LayerNormLinear inputs (the norm writes FP8, SP
  // gathers it in FP8, the weight gradient's transpose is priced): 45.73 %, the band covering 4;
  // session 36's composition spread (NeMo's GPT3 175B recipe) leaves it at 4; session 37's (the
  // dgxc-benchmarking rows joined it, narrower by a third) at 2. Session 38: the 24.03 launcher
  // ran Transformer Engine with NVTE_FUSED_ATTN=0, i.e. FlashAttention-2 (recipe_for), priced
  // with terms fitted on the FlashAttention papers' H100 figures only: 45.7 -> 5.5 % (signed
  // +4.8 %), 9 of 9 within 10 %, the band covering 8 (a recipe read after these rows' errors
  // were known: a development-set figure); 7 since dgxc-benchmarking v25.02's rows joined the
  // composition spread (+2.28 / +22.69 %: the 1M row, -0.5 %, falls outside its band too). The
  // H100 FlashAttention-2 terms refitted on the H100 probe (validation/measured/h100/flash2/):
  // 3.4 % (signed -1.3 %), 9 of 9 within 10 %, the band (+0.13 / +21.46 %) covering 5. Session
  // 39 priced the CP ring's merges (attn.cp.merge: Transformer Engine's per-step output
  // corrections and dQ / dKV accumulation, O(n) passes over the rank's tokens): 3.8 % (signed
  // -2.2 %), 8 of 9 within 10 % (512K at CP 16: -10.7 %). Session 40's slowest GPU (fitted on
  // dgxc v24.11.1's growth with the GPU count; 4 to 1024 GPUs here) makes every row slower by
  // 2-6 points: 7.5 % (signed -7.5 %), 7 of 9 within 10 % (512K -16.3 %, 1M -15.0 %), the band
  // (-5.36 / +11.93 %) covering 5. WORSE: this table goes against the term (its runs at CP 16-32
  // were already priced too slow); the bounds were loosened to the new figures, a development
  // choice made with both tables' figures in view (docs/validation-performance.md, session 40).
  // The band covers 4 since the composition spread took the dgxc rows' FP8 weights (-4.59 /
  // +10.77 %).
  EXPECT_LE(s.mae(), 7.5);
  EXPECT_LE(best, 16.0);
  EXPECT_GE(within10, 7);
  EXPECT_GE(covered, 4);
  EXPECT_EQ(fit, 9);
}

// NVIDIA/dgxc-benchmarking's H100 tables, held out when added (DECLARATION_dgxc_benchmarking.md):
// every row's error, the whole table's and each workload's and precision's figures, band
// coverage and memory verdicts. Not in the overall figure of PublishedH100TablesWithinRecordedBounds.
// A dgxc-benchmarking table's figures: per workload, per precision and both, and over its rows
// (`label` names them in the printed lines: "dgxc-benchmarking", "dgxc v25.02 held out", ...).
struct DgxcScore {
  Summary s;
  int covered = 0, within10 = 0, fit = 0, tight = 0;
};
DgxcScore score_dgxc(const std::vector<Result>& rows, const std::string& label) {
  DgxcScore d;
  std::map<std::string, Summary> by_group;
  std::map<std::string, int> within10_by;
  for (const Result& r : rows) {
    EXPECT_TRUE(r.evaluated) << r.id << ": " << r.reason;
    if (!r.evaluated) continue;
    d.s.add(r);
    const Range range = rate_range(r.pred, r.band);
    d.covered += r.pub >= range.low && r.pub <= range.high ? 1 : 0;
    const bool w10 = std::fabs(r.err()) <= 10.0;
    d.within10 += w10 ? 1 : 0;
    d.fit += r.reason.rfind("fits", 0) == 0 ? 1 : 0;
    d.tight += r.reason.rfind("tight", 0) == 0 ? 1 : 0;
    const std::string id = r.id.rfind("v25.", 0) == 0 ? r.id.substr(r.id.find(' ') + 1) : r.id;  // tag prefix
    const std::string workload = id.substr(0, id.find(' '));
    const std::string precision = id.find(" FP8 ") != std::string::npos ? "FP8" : "BF16";
    for (const std::string& g : {workload, precision, workload + " " + precision}) {
      by_group[g].add(r);
      within10_by[g] += w10 ? 1 : 0;
    }
  }
  std::printf("\n");
  for (const auto& [g, gs] : by_group)
    std::printf("%s %s: %d rows counted, mean |error| %.1f %%, mean signed error %+.1f %%, %d within 10 %%, "
                "%d within 20 %%\n",
                label.c_str(), g.c_str(), gs.n, gs.mae(), gs.bias(), within10_by[g], gs.within20);
  std::printf("\n%s: %d of %d within 10 %%, %d within 20 %%; the 80%% band covers %d; memory: %d fit, %d "
              "tight, %d flagged out of memory\n",
              label.c_str(), d.within10, d.s.n, d.s.within20, d.covered, d.fit, d.tight, d.s.n - d.fit - d.tight);
  return d;
}

// One line with a tag's held-out and seen figures (the tables whose rows were partly seen before
// their declaration).
void print_held_and_seen(const char* tag, const DgxcScore& h, const DgxcScore& s) {
  std::printf(
      "\ndgxc %s held out: %d rows, mean |error| %.1f %%, mean signed error %+.1f %%; seen: %d rows, mean "
      "|error| %.1f %%, mean signed error %+.1f %%\n",
      tag, h.s.n, h.s.mae(), h.s.bias(), s.s.n, s.s.mae(), s.s.bias());
}

TEST(PerfValidation, DgxcBenchmarkingTable) {
  const HardwareSpec hw = load_h100_or_fail();
  const auto archs = architectures();
  const auto rows = dgxc_rows(hw, archs);
  ASSERT_EQ(rows.size(), 88u);
  const Summary s = print_table("NVIDIA dgxc-benchmarking v24.11.1, H100 (tokens/s/GPU)", rows, "");
  const DgxcScore d = score_dgxc(rows, "dgxc-benchmarking");
  const int covered = d.covered, within10 = d.within10, fit = d.fit, tight = d.tight;
  // The one held-out score (session 37, the model and profile of 60ee0ef, the declaration's
  // commit): mean |error| 16.9 %, signed +16.9 % (every row too fast: BF16 +14.6 %, FP8 +19.1 %),
  // 5 of 88 within 10 %, 66 within 20 %, the band covering all 88, no run flagged out of memory
  // (85 fit, 3 tight). A regression guard on those figures, not a target. The rows then joined
  // the composition spread (in-sample from there): the narrower band covers 86 of them. Session
  // 38 priced the FlashAttention-2 rows (GPT-3 175B, Nemotron-4 340B, Grok-1) as such, the
  // declaration's caveat (development): 15.3 % (+15.3 %), 10 within 10 %, 72 within 20 %, the
  // band (-1.00 / +23.60 %) covering 85; with the H100 FlashAttention-2 terms refitted on the H100
  // probe 14.7 % (+14.7 %), 13 within 10 %, 75 within 20 %, the band (+0.13 / +21.46 %) 84.
  // Session 39 priced FlashAttention-2's head dims as its kernels run (heldout18's H100 probe: no
  // cuDNN wide-dim backward exponent, 0.88 of d 128's rate at other dims): Nemotron-4 340B's
  // d-192 backwards get 1.8x faster and its rows 8-10 points more optimistic: 15.1 % (+15.1 %),
  // 7 within 10 %, 75 within 20 %, the band 84. Then the CP ring's merges (attn.cp.merge; the
  // Llama 3.1 rows run CP 2): 14.4 % (+14.4 %), 17 within 10 %, 78 within 20 %, the band
  // (-0.04 / +20.44 %) 83. Session 40's slowest GPU, whose two spreads were fitted on this
  // table's fixed-layout series (their growth with the GPU count; each series' mean removed, so
  // IN-SAMPLE for the slopes and development for the level): 6.7 % (+6.3 %), 79 within 10 %, 87
  // within 20 %, the band (-5.36 / +11.93 %) 85. FP8 weights on the FP8 rows (their configure.sh
  // sets fp8_params; session 40, development): 6.8 % (+6.6 %), 79 within 10 %, the band (-4.59 /
  // +10.77 %) 84, all 88 fit.
  EXPECT_LE(s.mae(), 6.9);
  EXPECT_LE(s.bias(), 6.6);
  EXPECT_GE(within10, 79);
  EXPECT_GE(s.within20, 87);
  EXPECT_GE(covered, 84);
  EXPECT_EQ(fit + tight, 88);
}

// NVIDIA/dgxc-benchmarking v25.02's H100 tables (NeMo 24.12), held out when added
// (DECLARATION_dgxc_benchmarking_v25.02.md, f42d96d): every row, then the held-out figures over
// the 76 rows not seen before the declaration and the 12 Llama 3.1 70B rows (their MFU row was
// seen) apart.
TEST(PerfValidation, DgxcBenchmarkingV2502Table) {
  const HardwareSpec hw = load_h100_or_fail();
  const auto archs = architectures();
  const auto rows = dgxc_rows(hw, archs, "v25.02");
  ASSERT_EQ(rows.size(), 88u);
  print_table("NVIDIA dgxc-benchmarking v25.02, H100 (tokens/s/GPU)", rows, "");
  std::vector<Result> held, seen;
  for (const Result& r : rows) (r.id.rfind("v25.02 Llama3.1-70B ", 0) == 0 ? seen : held).push_back(r);
  ASSERT_EQ(held.size(), 76u);
  const DgxcScore h = score_dgxc(held, "dgxc v25.02 held out");
  const DgxcScore s = score_dgxc(seen, "dgxc v25.02 seen (Llama 3.1 70B)");
  print_held_and_seen("v25.02", h, s);
  // The one held-out score (the model and profiles of f42d96d, the declaration's commit, with
  // the composition spread of then, -1.00 / +23.60 %): over the 76 unseen rows mean |error|
  // 13.3 %, signed +13.3 % (every row too fast: BF16 +11.6 %, FP8 +15.0 %), 20 within 10 %, 67
  // within 20 %, the 80 % band covering 71 (93 %), no run flagged out of memory (73 fit, 3
  // tight); the 12 seen Llama 3.1 70B rows 13.4 % (+13.4 %), all 12 inside their band. A
  // regression guard on those figures, not a target. Development since: the FlashAttention-2
  // refit (session 38) 12.7 %; FlashAttention-2's head-dim rule (session 39: Nemotron-4 340B at
  // d 192 from +4.4 % to +8.0 %) 13.2 % (+13.2 %), 19 within 10 %, 67 within 20 %, the band 72;
  // the CP ring's merges 12.6 % (+12.6 %), 24 within 10 %, 69 within 20 %, the band 72. Session
  // 40's slowest GPU (fitted on v24.11.1's fixed-layout series; the same series here, re-measured,
  // give nearly the same spreads, 0.020 / 0.052 against 0.022 / 0.053): 5.9 % (+4.7 %), 65 within
  // 10 %, 74 within 20 %, the band (-5.36 / +11.93 %) 72; seen rows 3.2 %. The band 71 since
  // dgxc v25.04's rows joined the composition spread (-5.37 / +10.77 % over 316). FP8 weights on
  // the FP8 rows: 6.0 % (+5.0 %), the band 71, all 76 fit; seen rows 3.4 %.
  EXPECT_LE(h.s.mae(), 6.0);
  EXPECT_LE(h.s.bias(), 5.1);
  EXPECT_GE(h.within10, 65);
  EXPECT_GE(h.s.within20, 74);
  EXPECT_GE(h.covered, 71);
  EXPECT_EQ(h.fit + h.tight, 76);
  EXPECT_LE(s.s.mae(), 3.4);
  EXPECT_EQ(s.fit + s.tight, 12);
}

// NVIDIA/dgxc-benchmarking v25.04's H100 tables (Llama 3.1 8B / 70B / 405B and its proxies,
// Nemotron-4 15B / 340B on NeMo 2.0's performance scripts, container 25.02.01), held out when
// added (DECLARATION_dgxc_benchmarking_v25.04.md, declared with the model and profiles of
// session 40's slowest GPU frozen): every row, then the held-out figures over the 50 rows not
// seen before the declaration and the 8 seen rows apart.
TEST(PerfValidation, DgxcBenchmarkingV2504Table) {
  const HardwareSpec hw = load_h100_or_fail();
  const auto archs = architectures();
  const auto rows = dgxc_rows(hw, archs, "v25.04");
  ASSERT_EQ(rows.size(), 58u);
  print_table("NVIDIA dgxc-benchmarking v25.04, H100 (tokens/s/GPU)", rows, "");
  // Seen before the declaration (its "Seen before declaring"): two masking slips and the READMEs'
  // worked examples.
  static const std::set<std::string> kSeen = {"v25.04 Nemotron4-15B BF16 16GPU",   "v25.04 Nemotron4-15B FP8 16GPU",
                                              "v25.04 Nemotron4-15B BF16 64GPU",   "v25.04 Nemotron4-15B FP8 64GPU",
                                              "v25.04 Nemotron4-340B BF16 256GPU", "v25.04 Nemotron4-340B FP8 256GPU",
                                              "v25.04 Llama3.1-8B BF16 8GPU",      "v25.04 Llama3.1-8B FP8 8GPU"};
  std::vector<Result> held, seen;
  for (const Result& r : rows) (kSeen.count(r.id) ? seen : held).push_back(r);
  ASSERT_EQ(seen.size(), 8u);
  ASSERT_EQ(held.size(), 50u);
  const DgxcScore h = score_dgxc(held, "dgxc v25.04 held out");
  const DgxcScore s = score_dgxc(seen, "dgxc v25.04 seen");
  print_held_and_seen("v25.04", h, s);
  // The one held-out score (session 40, the model and profiles of d32eaa3 frozen since the
  // declaration, cf4a057): over the 50 unseen rows mean |error| 4.8 %, signed +1.5 % (BF16
  // +4.0 %, FP8 -0.9 %), 49 within 10 % (Llama 3.1 405B BF16 at 64 GPUs +12.9 %), 50 within 20 %,
  // the 80 % band covering all 50; memory: 43 fit, 6 tight, 1 flagged out of memory (Llama 3.1
  // 405B FP8 at 512 GPUs: 80.2 GiB at the band's bottom; the run's FP8 parameters, `fp8_params`,
  // are not modelled). The 8 seen rows 4.6 % (+2.7 %), 1 flagged (Nemotron-4 15B FP8 at 16
  // GPUs). Issue 12's re-measure target (mean |error| <= 12 %, |signed| <= 5 %, band >= 80 %) is
  // met on this table. A regression guard on those figures, not a target. Development since:
  // FP8 weights (training.fp8_param_gather, NeMo 2.0's fp8_params, read before the score but not
  // then modelled): 4.5 % (+1.8 %), 49 within 10 %, the band 50, memory 49 fit, 1 tight, none
  // flagged; seen rows 4.3 % (+3.1 %), none flagged.
  EXPECT_EQ(h.s.n, 50);
  EXPECT_EQ(s.s.n, 8);
  EXPECT_LE(h.s.mae(), 4.6);
  EXPECT_LE(std::fabs(h.s.bias()), 1.9);
  EXPECT_GE(h.within10, 49);
  EXPECT_GE(h.s.within20, 50);
  EXPECT_GE(h.covered, 50);
  EXPECT_EQ(h.fit + h.tight, 50);
  EXPECT_EQ(s.fit + s.tight, 8);
  EXPECT_LE(s.s.mae(), 4.4);
}

// FlashAttention-2 on the H100 (training.attention_backend flash2): the profile's terms against
// the FlashAttention papers' H100 figures (flashattention_h100.csv: the FA3 paper's forward,
// head dims 64 / 128 / 256; the FA2 paper's forward+backward, 64 / 128; causal and not; 512-16K
// tokens at 16K tokens per call; FLOPs in their convention, fwd 4 b s^2 h d, halved when causal,
// forward+backward 3.5x). The first terms were fitted to the 24 head-dim-128 points (23 of 24
// within 10 %, in-sample); the H100 probe then held them out at 20 of 72 (validation/measured/
// h100/flash2/) and the terms are now fitted on that probe, so this compares the papers' figures
// with the probe's kernel (development): the papers' FlashAttention-2 runs up to 32 % faster at
// 512-2K tokens and within 10 % from 4K on. The guard: 8 of 24 head-dim-128 points within 10 %,
// none off by more than 32 %.
TEST(PerfValidation, FlashAttention2PublishedH100Figures) {
  HardwareSpec hw;
  if (!load_h100(hw)) return;
  int n128 = 0, w128 = 0, n = 0, w = 0;
  double abs128 = 0, abs_all = 0, worst128 = 0;
  std::printf(
      "\n| direction | causal | head dim | seq | published TFLOP/s | lcm TFLOP/s | err %% (+: lcm faster) "
      "|\n|---|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : read_csv(kDir + "flashattention_h100.csv")) {
    if (get(r, "impl") != "FlashAttention-2" || get(r, "tflops") == "OOM") continue;
    const std::string dir = get(r, "direction");
    const bool causal = get(r, "causal") == "True";
    const int64_t d = num(r, "head_dim", 0), s = num(r, "seq_len", 0), b = num(r, "batch", 0), h = num(r, "nheads", 0);
    AttentionShape a{
        b, s, s, h, h, d, d, causal, causal ? 0.5 : 1.0};  // causal as half the square, as lcm-exec's points
    a.flash2 = true;
    const double core = attention_core_flops(a);
    const double t = dir == "fwd" ? attention_time(a, core, false, hw)
                                  : attention_time(a, core, false, hw) +
                                        attention_time(a, kAttentionBackwardFlopFactor * core, true, hw);
    const double fa_flops =
        (dir == "fwd" ? 1.0 : 3.5) * 4.0 * b * s * static_cast<double>(s) * h * d / (causal ? 2.0 : 1.0);
    const double pred = fa_flops / t / 1e12, pub = real(r, "tflops");
    const double e = pct(pred, pub);
    std::printf("| %s | %s | %lld | %lld | %.0f | %.0f | %+.1f |\n", dir.c_str(), causal ? "yes" : "no",
                static_cast<long long>(d), static_cast<long long>(s), pub, pred, e);
    ++n;
    abs_all += std::fabs(e);
    w += std::fabs(e) <= 10.0;
    if (d == 128) {
      ++n128;
      abs128 += std::fabs(e);
      w128 += std::fabs(e) <= 10.0;
      worst128 = std::max(worst128, std::fabs(e));
    }
  }
  std::printf(
      "\nFlashAttention-2, H100 published figures: head dim 128 %d of %d within 10 %%, mean |error| "
      "%.1f %%; all head dims %d of %d within 10 %%, mean |error| %.1f %%\n",
      w128, n128, abs128 / std::max(1, n128), w, n, abs_all / std::max(1, n));
  EXPECT_EQ(n128, 24);
  EXPECT_EQ(n, 60);
  EXPECT_GE(w128, 8);
  EXPECT_LE(worst128, 32.0);
}

#endif  // LCM_PUBLISHED_SCENARIOS_ONLY

}  // namespace

// published_scenarios.hpp: the training runs of the Megatron-Bridge, NeMo 24.07 and weak-scaling
// tables as the rows above build them (the MoE-layer microbenchmark is one layer, not a run).
std::vector<lcm::test::PublishedScenario> lcm::test::published_h100_scenarios() {
  HardwareSpec hw;
  if (!load_h100(hw)) return {};
  const auto archs = architectures();
  std::vector<PublishedScenario> out;
  for (const auto& rows :
       {bridge_rows(hw, archs), nemo_rows(hw, archs), weak_scaling_rows(hw), nemo_long_sequence_rows(hw, archs),
        dgxc_rows(hw, archs), dgxc_rows(hw, archs, "v25.02"), dgxc_rows(hw, archs, "v25.04")})
    for (const Result& r : rows)
      if (r.evaluated) out.push_back({.table = r.table, .id = r.id, .scenario = r.scenario});
  return out;
}
