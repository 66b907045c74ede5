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
#include "lcm/model/comm.hpp"
#include "lcm/model/schedule.hpp"
#include "lcm/model/specs.hpp"

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

// kFp8Block: e4m3 with Transformer Engine's Float8BlockScaling layout on Hopper, a scale per
// 1x128 block of the activation and per 128x128 block of the weight (cuBLASLt VEC128_32F /
// BLK128x128_32F; k a multiple of 128).
enum class GemmDType : uint8_t { kBf16, kFp8E4M3, kFp8Block };
const char* to_string(GemmDType t);
// Element type of `bench collectives` (-d).
enum class CollDType : uint8_t { kFloat, kBf16 };
const char* to_string(CollDType t);
// Copy methods of `bench membw` (--methods).
enum class CopyMethod : uint8_t { kMemcpy, kKernel };
const char* to_string(CopyMethod m);
// How much of a point's output a check compares (--check): every row up to a family's size
// limit, else sampled rows (auto); every row (full); sampled rows (sampled).
enum class CheckMode : uint8_t { kAuto, kFull, kSampled };
const char* to_string(CheckMode m);
bool check_full(CheckMode m, int64_t rows, int64_t auto_full_max_rows);  // full, or auto and rows <= max

// One GEMM point: the model's shape (lcm::GemmShape, C[m,n] = A[m,k] B[k,n], m = tokens,
// one group) and its label, e.g. "llama3-70b.qkv@16k" (empty for user shapes).
struct GemmPoint {
  GemmShape shape;
  std::string label;
  std::string text() const;  // "MxNxK"
};

// One attention point: the model's shape (lcm::AttentionShape: b x s tokens, h_q query and
// h_kv KV heads, head dim d; seq_kv = seq_q, head_dim_v = head_dim_qk; causal as --no-causal
// says, work_fraction 0.5 when causal) and its label, e.g. "gqa32/8.d128.s16k".
struct AttentionPoint {
  AttentionShape shape;
  std::string label;
};

// Megatron's capacity drop policies (the router score function is the model's lcm::RouterScore).
enum class DropPolicy : uint8_t { kProbs, kPosition };
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
  RouterScore score = RouterScore::kSoftmax;
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
  LayoutSpec layout;            // --layout, checked for syntax (the world size is checked at start-up)
  Group group = Group::kWorld;  // --group
  bool group_given = false;     // --group on the command line (cp-attention defaults to cp)
  // collectives
  std::vector<Collective> collectives;  // --ops; empty: all
  CollDType coll_dtype = CollDType::kFloat;  // -d
  SizeSweep sweep;              // collectives and membw
  // membw
  std::vector<CopyMethod> copy_methods;  // --methods; empty: both
  // gemm
  std::vector<GemmPoint> gemm_points;
  std::vector<GemmDType> gemm_dtypes{GemmDType::kBf16, GemmDType::kFp8E4M3};
  int algos = 1;                // gemm and attention: candidates to time; 1 = the heuristic's first choice
  int64_t workspace_bytes = int64_t{32} << 20;
  // attention and cp-attention
  std::vector<AttentionPoint> attn_points;
  double attn_scale = 0;        // --scale; 0: 1 / sqrt(d)
  CheckMode check = CheckMode::kAuto;  // attention, cp-attention, moe
  double point_ms = 2000;       // --point-ms: timed repetitions per point stop near this (>= 5 reps)
  // moe
  MoeOptions moe;
  std::string command_line;
};

// Throws UsageError. argv[0] is the program.
Options parse_args(int argc, const char* const* argv);
std::string usage();

int64_t parse_size(std::string_view s);  // "64M" -> 67108864; plain digits are bytes
std::vector<int64_t> sweep_sizes(const SizeSweep& s);
std::vector<GemmPoint> parse_shapes(std::string_view s);  // "MxNxK,..." or "models"
std::vector<GemmPoint> model_shapes();  // Llama 3 8B/70B and Mixtral 8x7B GEMMs at 4K-16K tokens
Inject parse_inject(std::string_view s);  // "stall@rank=1[,seconds=S][,point=P]"
// "BxSxHQxHKVxD,..." (S may end in K: 16K = 16384) or "sweep": d128 at s = 4K..128K, d64 and
// d192 at 4K, 16K, 64K; b = 1, 32 query / 8 KV heads.
std::vector<AttentionPoint> parse_attn_shapes(std::string_view s);
std::vector<AttentionPoint> attn_sweep_shapes();
// "none,1.0,1.25" -> {0, 1.0, 1.25} (0 = dropless); each factor > 0.
std::vector<double> parse_capacity_factors(std::string_view s);
// "balanced", "zipf:S" (S >= 0), "router"; a comma list for several.
std::vector<RoutingSkew> parse_skews(std::string_view s);
// Cross-field checks of the MoE options (experts, top-k, groups); throws UsageError.
void validate_moe(const MoeOptions& m);
// cp-attention default shapes: b = 1, 32 query / 8 KV heads, d 128, S = 8K, 32K, 128K.
std::vector<AttentionPoint> cp_attn_default_shapes();
// The checks that need the world size, before anything touches CUDA or NCCL: the layout
// against `world` (resolve_layout), and what each benchmark needs of it (moe: experts a
// multiple of ep; cp-attention: every sequence a multiple of 2 x the group size). Throws
// UsageError.
Layout validate_for_world(const Options& o, int world);

}  // namespace lcm::exec
