// Command line of lcm-exec: `lcm-exec bench <gemm|collectives|membw|attention|moe|cp-attention> [options]`.
//
// Sizes follow nccl-tests: `-b 1M -e 1G -f 2` with K/M/G = 2^10/2^20/2^30 bytes. Times are
// seconds on the command line and microseconds in every output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lcm/executor/layout.hpp"

namespace lcm::exec {

enum class Family : uint8_t { kGemm, kCollectives, kMembw, kAttention, kMoe, kCpAttention };

// Fault injection (docs/reference/reliability.md §3.9): deterministic (rank, point) triggers.
struct Inject {
  enum class Kind : uint8_t { kNone, kStall, kCorrupt, kKill };
  Kind kind = Kind::kNone;
  int rank = -1;
  int point = 0;         // 0-based index of the measured point it hits
  double seconds = 0;    // stall: how long the rank sleeps before the timed loop (0: 3 x timeout)
};

struct SizeSweep {
  int64_t min_bytes = int64_t{1} << 20;
  int64_t max_bytes = int64_t{1} << 30;
  double factor = 2.0;   // multiplicative step (-f); ignored when step_bytes > 0
  int64_t step_bytes = 0;  // additive step (-i)
};

enum class GemmDType : uint8_t { kBf16, kFp8E4M3 };
const char* to_string(GemmDType t);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;  // C[m,n] = A[m,k] * B[k,n]; m = tokens
  std::string label;            // e.g. "llama3-70b.qkv@16k"; empty for user shapes
};

// One attention point: causal GQA, b x s tokens, h_q query and h_kv KV heads, head dim d.
struct AttnShape {
  int64_t b = 1, s = 4096, hq = 32, hkv = 8, d = 128;
  std::string label;  // e.g. "gqa32/8.d128.s16k"
};

// MoE router score function and Megatron's capacity drop policies.
enum class ScoreFunction : uint8_t { kSoftmax, kSigmoid };
enum class DropPolicy : uint8_t { kProbs, kPosition };
const char* to_string(ScoreFunction f);
const char* to_string(DropPolicy p);

// Synthetic routing of `bench moe` (moe.hpp): balanced (uniform random top-k), zipf:S
// (expert popularity 1/i^S, the law of `lcm capacity --skew zipf:S`) or router (the router
// GEMM's scores alone, no synthetic term).
struct RoutingSkew {
  enum class Kind : uint8_t { kBalanced, kZipf, kRouter };
  Kind kind = Kind::kBalanced;
  double s = 0;  // zipf exponent
  std::string text() const;  // "balanced", "zipf:1.2", "router"
};

struct MoeOptions {
  int64_t tokens = 8192;   // per rank: one router call's routing group
  int64_t hidden = 4096;
  int64_t ffn = 14336;     // per expert (SwiGLU: fc1 is hidden x 2 ffn)
  int experts = 8;
  int topk = 2;
  std::vector<double> capacity_factors{0.0};  // 0: dropless (--capacity-factor none)
  DropPolicy drop_policy = DropPolicy::kProbs;
  ScoreFunction score = ScoreFunction::kSoftmax;
  int groups = 0;          // group-limited top-k (DeepSeek-V3): expert groups; 0 = off
  int topk_groups = 0;     // groups a token may use
  std::vector<RoutingSkew> skews{RoutingSkew{}};
};

struct Options {
  Family family = Family::kGemm;
  bool help = false;
  std::string out_dir;          // --out; empty: console only
  bool resume = false;
  double timeout_s = 300.0;     // every wait: init, split, each measured point
  int warmup = -1;              // -w; -1: the family's default
  double warmup_s = -1;         // --warmup-ms / 1000: warm up at least this long; -1: family default
  int iters = -1;               // -n; -1: the family's default
  uint64_t seed = 1;
  double rotate_bytes = 0;      // distinct buffer bytes to rotate through; 0: max(100 MB, 2 x L2)
  Inject inject;
  // collectives
  std::string layout = "";      // --layout; empty: every dimension 1 (dp = world)
  Group group = Group::kWorld;  // --group
  std::vector<std::string> ops; // --ops (collectives) or --methods (membw); empty: all
  std::string dtype = "float";  // collectives: float | bf16
  SizeSweep sweep;
  // gemm
  std::vector<GemmShape> shapes;
  std::vector<GemmDType> gemm_dtypes{GemmDType::kBf16, GemmDType::kFp8E4M3};
  int algos = 1;                // heuristic candidates to time; 1 = the heuristic's first choice
  int64_t workspace_bytes = int64_t{32} << 20;
  // attention
  std::vector<AttnShape> attn_shapes;
  double attn_scale = 0;        // --scale; 0: 1 / sqrt(d)
  std::string attn_check = "auto";  // auto (full up to s = 2048, else sampled) | full | sampled
  double point_ms = 2000;       // --point-ms: timed repetitions per point stop near this (>= 5 reps)
  bool attn_causal = true;      // --no-causal
  // moe
  MoeOptions moe;
  bool group_given = false;     // --group on the command line (cp-attention defaults to cp)
  std::string command_line;
};

// Throws UsageError. argv[0] is the program.
Options parse_args(int argc, const char* const* argv);
std::string usage();

int64_t parse_size(std::string_view s);  // "64M" -> 67108864; plain digits are bytes
std::vector<int64_t> sweep_sizes(const SizeSweep& s);
std::vector<GemmShape> parse_shapes(std::string_view s);  // "MxNxK,..." or "models"
std::vector<GemmShape> model_shapes();  // Llama 3 8B/70B and Mixtral 8x7B GEMMs at 4K-16K tokens
Inject parse_inject(std::string_view s);  // "stall@rank=1[,seconds=S][,point=P]"
// "BxSxHQxHKVxD,..." (S may end in K: 16K = 16384) or "sweep": d128 at s = 4K..128K, d64 and
// d192 at 4K, 16K, 64K; b = 1, 32 query / 8 KV heads.
std::vector<AttnShape> parse_attn_shapes(std::string_view s);
std::vector<AttnShape> attn_sweep_shapes();
// "none,1.0,1.25" -> {0, 1.0, 1.25} (0 = dropless); each factor > 0.
std::vector<double> parse_capacity_factors(std::string_view s);
// "balanced", "zipf:S" (S >= 0), "router"; a comma list for several.
std::vector<RoutingSkew> parse_skews(std::string_view s);
// Cross-field checks of the MoE options (experts, top-k, groups); throws UsageError.
void validate_moe(const MoeOptions& m);
// cp-attention default shapes: b = 1, 32 query / 8 KV heads, d 128, S = 8K, 32K, 128K.
std::vector<AttnShape> cp_attn_default_shapes();

}  // namespace lcm::exec
