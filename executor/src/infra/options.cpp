// Command-line parsing of lcm-exec (see options.hpp).
#include "lcm/executor/options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <sstream>

#include "lcm/executor/collectives.hpp"
#include "lcm/executor/cp_attention.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/moe.hpp"
#include "lcm/model/io/enums.hpp"

namespace lcm::exec {

namespace {
// --dtype spellings of `bench gemm`; the first of a type is its name in results ("fp8" is an alias).
struct GemmDTypeName {
  const char* name;
  GemmDType type;
};
constexpr GemmDTypeName kGemmDTypes[] = {{"bf16", GemmDType::kBf16},
                                         {"fp8_e4m3", GemmDType::kFp8E4M3},
                                         {"fp8_block", GemmDType::kFp8Block},
                                         {"fp8", GemmDType::kFp8E4M3}};
}  // namespace

const char* to_string(GemmDType t) {
  for (const GemmDTypeName& d : kGemmDTypes)
    if (d.type == t) return d.name;
  return "?";
}
const char* to_string(CollDType t) { return t == CollDType::kBf16 ? "bf16" : "float"; }
const char* to_string(CopyMethod m) { return m == CopyMethod::kMemcpy ? "memcpy" : "kernel"; }
const char* to_string(DropPolicy p) { return p == DropPolicy::kProbs ? "probs" : "position"; }
const char* to_string(CheckMode m) {
  switch (m) {
    case CheckMode::kAuto: return "auto";
    case CheckMode::kFull: return "full";
    case CheckMode::kSampled: return "sampled";
  }
  return "?";
}

bool check_full(CheckMode m, int64_t rows, int64_t auto_full_max_rows) {
  return m == CheckMode::kFull || (m == CheckMode::kAuto && rows <= auto_full_max_rows);
}

std::string GemmPoint::text() const {
  return std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
}

std::string RoutingSkew::text() const {
  if (kind == Kind::kBalanced) return "balanced";
  if (kind == Kind::kRouter) return "router";
  std::string v = std::to_string(s);
  while (v.size() > 1 && v.back() == '0') v.pop_back();
  if (!v.empty() && v.back() == '.') v.pop_back();
  return "zipf:" + v;
}

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int64_t parse_int(std::string_view flag, std::string_view v) {
  int64_t out = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    throw UsageError(std::string(flag) + ": '" + std::string(v) + "' is not an integer");
  return out;
}

double parse_double(std::string_view flag, std::string_view v) {
  try {
    size_t used = 0;
    const double d = std::stod(std::string(v), &used);
    if (used == v.size() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  throw UsageError(std::string(flag) + ": '" + std::string(v) + "' is not a number");
}

}  // namespace

int64_t parse_size(std::string_view s) {
  if (s.empty()) throw UsageError("empty size");
  int64_t mult = 1;
  const char last = s.back();
  if (last == 'K' || last == 'k') mult = int64_t{1} << 10;
  else if (last == 'M' || last == 'm') mult = int64_t{1} << 20;
  else if (last == 'G' || last == 'g') mult = int64_t{1} << 30;
  const std::string_view digits = mult == 1 ? s : s.substr(0, s.size() - 1);
  const int64_t v = parse_int("size", digits);
  if (v < 0 || v > (int64_t{1} << 62) / mult) throw UsageError("size '" + std::string(s) + "' out of range");
  return v * mult;
}

std::vector<int64_t> sweep_sizes(const SizeSweep& s) {
  std::vector<int64_t> out;
  if (s.min_bytes <= 0 || s.max_bytes < s.min_bytes) throw UsageError("-b/-e: need 0 < min <= max");
  if (s.step_bytes <= 0 && s.factor <= 1.0) throw UsageError("-f: the factor must be > 1");
  for (int64_t b = s.min_bytes; b <= s.max_bytes && out.size() < 4096;) {
    out.push_back(b);
    const int64_t next = s.step_bytes > 0 ? b + s.step_bytes : static_cast<int64_t>(std::llround(static_cast<double>(b) * s.factor));
    b = next > b ? next : b + 1;
  }
  return out;
}

std::vector<GemmPoint> model_shapes() {
  // M = tokens; N, K from hidden / ffn (Llama 3 8B: 4096/14336, 32 heads, 8 KV groups;
  // Llama 3 70B: 8192/28672, 64 heads, 8 KV groups; Mixtral 8x7B: 4096/14336, 8 experts,
  // top-2, so 16K tokens give 4K tokens per expert). QKV: (heads + 2 groups) x 128;
  // MLP up is the fused gate+up projection of SwiGLU (2 x ffn).
  return {
      {{8192, 8192, 8192}, "square-8k"},
      {{4096, 6144, 4096}, "llama3-8b.qkv@4k"},
      {{8192, 28672, 4096}, "llama3-8b.mlp-up@8k"},
      {{8192, 4096, 14336}, "llama3-8b.mlp-down@8k"},
      {{16384, 10240, 8192}, "llama3-70b.qkv@16k"},
      {{16384, 8192, 8192}, "llama3-70b.attn-out@16k"},
      {{4096, 8192, 28672}, "llama3-70b.mlp-down@4k"},
      {{16384, 6144, 4096}, "mixtral-8x7b.qkv@16k"},
      {{4096, 28672, 4096}, "mixtral-8x7b.expert-up@16k"},
      {{4096, 4096, 14336}, "mixtral-8x7b.expert-down@16k"},
  };
}

// Any positive M, N, K: cuBLASLt runs shapes that are not multiples of 16 (the runner pads
// the leading dimensions, gemm.hpp); a shape it cannot run is skipped with the reason.
std::vector<GemmPoint> parse_shapes(std::string_view s) {
  if (s == "models") return model_shapes();
  std::vector<GemmPoint> out;
  for (std::string_view item : split(s, ',')) {
    const auto dims = split(item, 'x');
    if (dims.size() != 3) throw UsageError("--shapes: '" + std::string(item) + "': expected MxNxK");
    GemmPoint g{{parse_int("--shapes", dims[0]), parse_int("--shapes", dims[1]), parse_int("--shapes", dims[2])}, ""};
    if (g.shape.m < 1 || g.shape.n < 1 || g.shape.k < 1)
      throw UsageError("--shapes: '" + std::string(item) + "': dimensions must be positive");
    out.push_back(g);
  }
  if (out.empty()) throw UsageError("--shapes: no shape given");
  return out;
}

namespace {

std::string seq_label(int64_t s) {
  return s % 1024 == 0 ? std::to_string(s / 1024) + "k" : std::to_string(s);
}

AttentionPoint attn_shape(int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d) {
  AttentionPoint a;
  a.shape.batch = b;
  a.shape.seq_q = a.shape.seq_kv = s;
  a.shape.heads_q = hq;
  a.shape.heads_kv = hkv;
  a.shape.head_dim_qk = a.shape.head_dim_v = d;
  a.shape.causal = true;
  a.shape.work_fraction = 0.5;
  a.label = (hq == hkv ? "mha" + std::to_string(hq) : "gqa" + std::to_string(hq) + "/" + std::to_string(hkv)) +
            ".d" + std::to_string(d) + ".s" + seq_label(s) + (b > 1 ? ".b" + std::to_string(b) : "");
  return a;
}

}  // namespace

std::vector<AttentionPoint> attn_sweep_shapes() {
  std::vector<AttentionPoint> out;
  for (int64_t s : {4, 8, 16, 32, 64, 128}) out.push_back(attn_shape(1, s * 1024, 32, 8, 128));
  for (int64_t d : {64, 192})
    for (int64_t s : {4, 16, 64}) out.push_back(attn_shape(1, s * 1024, 32, 8, d));
  return out;
}

std::vector<AttentionPoint> parse_attn_shapes(std::string_view s) {
  if (s == "sweep" || s == "default") return attn_sweep_shapes();
  std::vector<AttentionPoint> out;
  for (std::string_view item : split(s, ',')) {
    const auto dims = split(item, 'x');
    if (dims.size() != 5) throw UsageError("--shapes: '" + std::string(item) + "': expected BxSxHQxHKVxD");
    int64_t v[5];
    for (size_t i = 0; i < 5; ++i) {
      std::string_view x = dims[i];
      int64_t mult = 1;
      if (i == 1 && !x.empty() && (x.back() == 'K' || x.back() == 'k')) {
        mult = 1024;
        x.remove_suffix(1);
      }
      v[i] = parse_int("--shapes", x) * mult;
      if (v[i] < 1) throw UsageError("--shapes: '" + std::string(item) + "': dimensions must be positive");
    }
    if (v[2] % v[3] != 0) throw UsageError("--shapes: '" + std::string(item) + "': HQ must be a multiple of HKV");
    if (v[4] % 8 != 0 || v[4] > 256)
      throw UsageError("--shapes: '" + std::string(item) + "': D must be a multiple of 8 and at most 256");
    out.push_back(attn_shape(v[0], v[1], v[2], v[3], v[4]));
  }
  if (out.empty()) throw UsageError("--shapes: no shape given");
  return out;
}

std::vector<AttentionPoint> cp_attn_default_shapes() {
  std::vector<AttentionPoint> out;
  for (int64_t s : {8, 32, 128}) out.push_back(attn_shape(1, s * 1024, 32, 8, 128));
  return out;
}

std::vector<double> parse_capacity_factors(std::string_view s) {
  std::vector<double> out;
  for (std::string_view item : split(s, ',')) {
    if (item == "none" || item == "dropless") {
      out.push_back(0.0);
      continue;
    }
    const double v = parse_double("--capacity-factor", item);
    if (!(v > 0)) throw UsageError("--capacity-factor: '" + std::string(item) + "' must be > 0 (or 'none': dropless)");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--capacity-factor: no value given");
  return out;
}

std::vector<RoutingSkew> parse_skews(std::string_view s) {
  std::vector<RoutingSkew> out;
  for (std::string_view item : split(s, ',')) {
    RoutingSkew k;
    if (item == "balanced" || item == "uniform") {
      k.kind = RoutingSkew::Kind::kBalanced;
    } else if (item == "router") {
      k.kind = RoutingSkew::Kind::kRouter;
    } else if (item.rfind("zipf:", 0) == 0) {
      k.kind = RoutingSkew::Kind::kZipf;
      k.s = parse_double("--skew", item.substr(5));
      if (k.s < 0) throw UsageError("--skew: '" + std::string(item) + "': the Zipf exponent must be >= 0");
    } else {
      throw UsageError("--skew: '" + std::string(item) + "' (balanced, zipf:S, router)");
    }
    out.push_back(k);
  }
  if (out.empty()) throw UsageError("--skew: no value given");
  return out;
}

void validate_moe(const MoeOptions& m) {
  if (m.tokens < 1) throw UsageError("--tokens must be >= 1");
  if (m.hidden < 16 || m.hidden % 16 != 0) throw UsageError("--hidden must be a positive multiple of 16");
  if (m.ffn < 16 || m.ffn % 16 != 0) throw UsageError("--ffn must be a positive multiple of 16");
  if (m.experts < 1 || m.experts > 1024) throw UsageError("--experts: 1..1024");
  if (m.topk < 1 || m.topk > 16 || m.topk > m.experts) throw UsageError("--topk: 1..min(16, experts)");
  if (m.groups < 0 || m.topk_groups < 0) throw UsageError("--groups and --topk-groups must be >= 0");
  if ((m.groups > 0) != (m.topk_groups > 0)) throw UsageError("--groups and --topk-groups go together");
  if (m.groups > 0) {
    if (m.groups > 64) throw UsageError("--groups: at most 64");
    if (m.experts % m.groups != 0) throw UsageError("--groups must divide --experts");
    if (m.topk_groups > m.groups) throw UsageError("--topk-groups must be <= --groups");
    if (m.topk % m.topk_groups != 0) throw UsageError("--topk must be a multiple of --topk-groups (Megatron)");
    if (m.topk > m.topk_groups * (m.experts / m.groups))
      throw UsageError("--topk exceeds the experts of --topk-groups groups");
  }
  if (static_cast<double>(m.tokens) * m.topk > 2.0e9) throw UsageError("--tokens x --topk too large");
}

Layout validate_for_world(const Options& o, int world) {
  const Layout l = resolve_layout(o.layout, world);
  if (o.family == Family::kMoe) {
    MoeProblem p;
    p.experts = o.moe.experts;
    p.ep = l.mesh.ep;
    p.validate();
  }
  if (o.family == Family::kCpAttention) {
    const int cp = world > 1 ? group_size(l, o.group) : 1;  // the ring runs over --group
    for (const AttentionPoint& a : o.attn_points) CpLayout{a.shape.seq_q, cp, 0}.validate();
  }
  return l;
}

Inject parse_inject(std::string_view s) {
  Inject in;
  const size_t at = s.find('@');
  const std::string_view kind = s.substr(0, at);
  if (kind == "stall") in.kind = Inject::Kind::kStall;
  else if (kind == "corrupt") in.kind = Inject::Kind::kCorrupt;
  else if (kind == "kill") in.kind = Inject::Kind::kKill;
  else throw UsageError("--inject: '" + std::string(kind) + "': expected stall, corrupt or kill");
  if (at == std::string_view::npos) throw UsageError("--inject: expected KIND@rank=R[,point=P][,seconds=S]");
  for (std::string_view item : split(s.substr(at + 1), ',')) {
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
    if (key == "rank") in.rank = static_cast<int>(parse_int("--inject rank", val));
    else if (key == "point") in.point = static_cast<int>(parse_int("--inject point", val));
    else if (key == "seconds") in.seconds = parse_double("--inject seconds", val);
    else throw UsageError("--inject: unknown key '" + std::string(key) + "' (rank, point, seconds)");
  }
  if (in.rank < 0) throw UsageError("--inject: rank=R is required");
  return in;
}

std::string usage() {
  std::ostringstream o;
  o << "usage: mpirun -np N lcm-exec bench <gemm|collectives|membw|attention|moe|cp-attention> [options]\n"
       "\n"
       "Measures the hardware lcm plans for: one MPI rank per GPU; every point is warmed up,\n"
       "timed with CUDA events per repetition (median, min, max), run over rotating buffers of\n"
       "at least max(100 MB, 2 x L2) and checked for correctness.\n"
       "\n"
       "common options:\n"
       "  --out DIR            results: summary.csv, summary.json, trace_rank<R>.json (atomic writes)\n"
       "  --resume             skip points that DIR/summary.json already holds as correct\n"
       "  --timeout S          seconds any wait may take (NCCL init, split, a point) [300]\n"
       "  -w, --warmup N       warm-up repetitions [gemm 10, collectives 5, membw 5, attention 1]\n"
       "  --warmup-ms MS       and repeat them until at least MS ms have passed, so a power-limited\n"
       "                       GPU reaches its sustained clock before timing [gemm, attention 500, others 0]\n"
       "  -n, --iters N        timed repetitions (raised to the buffer-set count) [gemm 50, collectives 20,\n"
       "                       membw 20, attention 20]\n"
       "  --seed N             data pattern seed [1]\n"
       "  --rotate BYTES       distinct buffer bytes to rotate through [max(100M, 2 x L2)]\n"
       "  --inject KIND@rank=R[,point=P][,seconds=S]\n"
       "                       fault injection: stall (rank R sleeps S s, default 3 x timeout, before\n"
       "                       point P's timed loop), corrupt (one output element of point P is\n"
       "                       overwritten before the check), kill (SIGKILL before point P)\n"
       "\n"
       "bench gemm:\n"
       "  --shapes MxNxK,...   C[M,N] = A[M,K] B[K,N], any sizes (rows padded to 16 bytes; a shape cuBLASLt\n"
       "                       cannot run is skipped with the reason); 'models' = Llama 3 8B/70B, Mixtral\n"
       "                       8x7B GEMMs [8192x8192x8192]\n"
       "  --dtype LIST         bf16, fp8 (e4m3 in, bf16 out, TN layout, per-tensor scales), fp8_block (the\n"
       "                       same with a scale per 1x128 activation and 128x128 weight block, Transformer\n"
       "                       Engine's blockwise recipe on Hopper; K a multiple of 128) [bf16,fp8]\n"
       "  --algos K            time the cuBLASLt heuristic's first K candidates, keep the fastest [1]\n"
       "  --workspace BYTES    cuBLASLt workspace [32M]\n"
       "\n"
       "bench collectives:\n"
       "  --layout SPEC        tp=2,cp=4,ep=2,etp=1,pp=1[,order=tp-cp-ep-dp-pp]; dp, edp derived ['']\n"
       "  --group G            world, tp, cp, dp, pp, ep, etp, edp [world]\n"
       "  --ops LIST           all_reduce,all_gather,reduce_scatter,all_to_all,send_recv [all]\n"
       "  -b, -e SIZE          min and max bytes, K/M/G suffixes [1M, 1G]\n"
       "  -f F, -i BYTES       multiplicative [2] or additive step\n"
       "  -d TYPE              float, bf16 [float]\n"
       "\n"
       "bench attention (cuDNN fused flash attention, causal, GQA, bf16; forward and backward):\n"
       "  --shapes LIST        BxSxHQxHKVxD,... (S may end in K) or 'sweep': d128 at S = 4K..128K, d64 and\n"
       "                       d192 at 4K, 16K, 64K, B = 1, 32 query / 8 KV heads [sweep]\n"
       "  --scale X            softmax scale [1/sqrt(D)]\n"
       "  --no-causal          no causal mask\n"
       "  --window W           sliding window: each query attends the W keys before it (causal; 0 = none) [0]\n"
       "  --check MODE         auto (every row up to S = 2048, else sampled rows), full, sampled [auto]\n"
       "  --point-ms MS        stop adding timed repetitions past MS ms per point (at least 5) [2000]\n"
       "  --algos K            time the heuristic's first K finalizable plans per direction, keep the fastest [1]\n"
       "\n"
       "bench moe (router, top-k, permutation, EP all-to-all, grouped expert GEMMs, combine; fwd + bwd):\n"
       "  --layout SPEC        the EP group is --layout's ep (e.g. ep=2) ['']\n"
       "  --tokens N           tokens per rank (one router call) [8192]\n"
       "  --hidden H, --ffn F  hidden size, expert FFN size (SwiGLU) [4096, 14336]\n"
       "  --experts E, --topk K  routed experts, experts per token [8, 2]\n"
       "  --capacity-factor LIST  none (dropless) or factors, e.g. none,1.0,1.25 [none]\n"
       "  --drop-policy P      probs (drop lowest gate probability per expert), position [probs]\n"
       "  --score F            softmax (over the top-k logits, Megatron's default), sigmoid [softmax]\n"
       "  --groups G --topk-groups TG  group-limited top-k (DeepSeek-V3) [off]\n"
       "  --skew LIST          balanced, zipf:S (expert i drawn with weight 1/i^S, as lcm capacity), router\n"
       "                       (the router GEMM's scores only) [balanced]\n"
       "  --check MODE         auto (every token up to 512 tokens, else sampled), full, sampled [auto]\n"
       "\n"
       "bench cp-attention (ring attention over --layout's cp group, load-balanced causal chunks):\n"
       "  --layout cp=N        context-parallel size; --group defaults to cp\n"
       "  --shapes LIST        1xSxHQxHKVxD,... with S the full sequence [1x8Kx32x8x128,1x32Kx32x8x128,1x128Kx32x8x128]\n"
       "  --check MODE         auto (every row up to S = 4096, else sampled rows), full, sampled [auto]\n"
       "  --point-ms MS        as for attention [2000]\n"
       "\n"
       "bench membw:\n"
       "  --methods LIST       memcpy (cudaMemcpyAsync D2D), kernel (16-byte vector copy) [both]\n"
       "  -b, -e, -f, -i       size sweep as above [1M, 1G, 2]\n"
       "\n"
       "exit codes: 0 ok, 1 runtime error, 2 usage, 5 collective timeout / NCCL error (all\n"
       "communicators aborted), 6 a correctness check failed\n";
  return o.str();
}

Options parse_args(int argc, const char* const* argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  int i = 1;
  const auto next_positional = [&]() -> std::string_view { return i < argc ? std::string_view(argv[i++]) : std::string_view{}; };
  std::string_view cmd = next_positional();
  if (cmd == "-h" || cmd == "--help" || cmd.empty()) {
    o.help = true;
    return o;
  }
  if (cmd != "bench") throw UsageError("unknown command '" + std::string(cmd) + "' (expected: bench)");
  const std::string_view fam = next_positional();
  if (fam == "gemm") o.family = Family::kGemm;
  else if (fam == "collectives") o.family = Family::kCollectives;
  else if (fam == "membw") o.family = Family::kMembw;
  else if (fam == "attention") o.family = Family::kAttention;
  else if (fam == "moe") o.family = Family::kMoe;
  else if (fam == "cp-attention") o.family = Family::kCpAttention;
  else if (fam == "-h" || fam == "--help") { o.help = true; return o; }
  else throw UsageError("bench: unknown benchmark '" + std::string(fam) + "' (gemm, collectives, membw, attention, moe, cp-attention)");
  o.gemm_points = {{{8192, 8192, 8192}, "square-8k"}};
  if (o.family == Family::kAttention) o.attn_points = attn_sweep_shapes();
  if (o.family == Family::kCpAttention) o.attn_points = cp_attn_default_shapes();
  bool causal = true;
  int64_t window = 0;
  const bool is_moe = o.family == Family::kMoe;
  const auto moe_only = [&](const std::string& flag) {
    if (!is_moe) throw UsageError(flag + " is an option of bench moe");
  };

  for (; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    bool has_inline = false;
    if (flag.rfind("--", 0) == 0) {
      const size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_inline = true;
      }
    }
    const auto arg = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) throw UsageError(flag + ": missing value");
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") o.help = true;
    else if (flag == "--out") o.out_dir = arg();
    else if (flag == "--resume") o.resume = true;
    else if (flag == "--timeout") o.timeout_s = parse_double(flag, arg());
    else if (flag == "-w" || flag == "--warmup") o.warmup = static_cast<int>(parse_int(flag, arg()));
    else if (flag == "-n" || flag == "--iters") o.iters = static_cast<int>(parse_int(flag, arg()));
    else if (flag == "--warmup-ms") {
      o.warmup_s = parse_double(flag, arg()) / 1000.0;
      if (o.warmup_s < 0) throw UsageError("--warmup-ms must be >= 0");
    }
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(parse_int(flag, arg()));
    else if (flag == "--rotate") o.rotate_bytes = static_cast<double>(parse_size(arg()));
    else if (flag == "--inject") o.inject = parse_inject(arg());
    else if (flag == "--layout") o.layout = parse_layout_spec(arg());
    else if (flag == "--group") {
      const std::string g = arg();
      const auto pg = parse_group(g);
      if (!pg) throw UsageError("--group: '" + g + "' (expected world, tp, cp, dp, pp, ep, etp, edp)");
      o.group = *pg;
      o.group_given = true;
    } else if (flag == "--ops" || flag == "--methods") {
      const std::string list = arg();
      o.collectives.clear();
      o.copy_methods.clear();
      for (std::string_view name : split(list, ',')) {
        if (o.family == Family::kMembw) {
          if (name == to_string(CopyMethod::kMemcpy)) o.copy_methods.push_back(CopyMethod::kMemcpy);
          else if (name == to_string(CopyMethod::kKernel)) o.copy_methods.push_back(CopyMethod::kKernel);
          else throw UsageError(flag + ": unknown method '" + std::string(name) + "' (memcpy, kernel)");
        } else {
          const CollOp* c = find_coll_op(name);
          if (!c)
            throw UsageError(flag + ": unknown collective '" + std::string(name) +
                             "' (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv)");
          o.collectives.push_back(c->kind);
        }
      }
    } else if (flag == "-d" || flag == "--dtype") {
      const std::string v = arg();
      if (o.family == Family::kGemm) {
        o.gemm_dtypes.clear();
        for (std::string_view s : split(v, ',')) {
          const auto d = std::find_if(std::begin(kGemmDTypes), std::end(kGemmDTypes),
                                      [&](const GemmDTypeName& n) { return s == n.name; });
          if (d == std::end(kGemmDTypes)) throw UsageError("--dtype: '" + std::string(s) + "' (gemm: bf16, fp8, fp8_block)");
          o.gemm_dtypes.push_back(d->type);
        }
      } else if (v == "float") {
        o.coll_dtype = CollDType::kFloat;
      } else if (v == "bf16") {
        o.coll_dtype = CollDType::kBf16;
      } else {
        throw UsageError("-d: '" + v + "' (float, bf16)");
      }
    } else if (flag == "-b" || flag == "--minbytes") o.sweep.min_bytes = parse_size(arg());
    else if (flag == "-e" || flag == "--maxbytes") o.sweep.max_bytes = parse_size(arg());
    else if (flag == "-f" || flag == "--stepfactor") o.sweep.factor = parse_double(flag, arg());
    else if (flag == "-i" || flag == "--stepbytes") o.sweep.step_bytes = parse_size(arg());
    else if (flag == "--tokens") { moe_only(flag); o.moe.tokens = parse_int(flag, arg()); }
    else if (flag == "--hidden") { moe_only(flag); o.moe.hidden = parse_int(flag, arg()); }
    else if (flag == "--ffn") { moe_only(flag); o.moe.ffn = parse_int(flag, arg()); }
    else if (flag == "--experts") { moe_only(flag); o.moe.experts = static_cast<int>(parse_int(flag, arg())); }
    else if (flag == "--topk") { moe_only(flag); o.moe.topk = static_cast<int>(parse_int(flag, arg())); }
    else if (flag == "--groups") { moe_only(flag); o.moe.groups = static_cast<int>(parse_int(flag, arg())); }
    else if (flag == "--topk-groups") { moe_only(flag); o.moe.topk_groups = static_cast<int>(parse_int(flag, arg())); }
    else if (flag == "--capacity-factor") { moe_only(flag); o.moe.capacity_factors = parse_capacity_factors(arg()); }
    else if (flag == "--skew") { moe_only(flag); o.moe.skews = parse_skews(arg()); }
    else if (flag == "--drop-policy") {
      moe_only(flag);
      const std::string v = arg();
      if (v == "probs") o.moe.drop_policy = DropPolicy::kProbs;
      else if (v == "position") o.moe.drop_policy = DropPolicy::kPosition;
      else throw UsageError("--drop-policy: '" + v + "' (probs, position)");
    } else if (flag == "--score") {
      moe_only(flag);
      const std::string v = arg();
      const auto score = parse_router_score(v);  // the scenario loader's moe_router_score_function parser
      if (!score) throw UsageError("--score: '" + v + "' (softmax, sigmoid)");
      o.moe.score = *score;
    }
    else if (flag == "--shapes") {
      if (o.family == Family::kAttention || o.family == Family::kCpAttention) o.attn_points = parse_attn_shapes(arg());
      else o.gemm_points = parse_shapes(arg());
    }
    else if (flag == "--scale") {
      o.attn_scale = parse_double(flag, arg());
      if (o.attn_scale <= 0) throw UsageError("--scale must be positive");
    }
    else if (flag == "--no-causal") causal = false;
    else if (flag == "--window") {
      window = parse_int(flag, arg());
      if (window < 0) throw UsageError("--window must be >= 0 (0: no window)");
    }
    else if (flag == "--check") {
      const std::string v = arg();
      if (v == "auto") o.check = CheckMode::kAuto;
      else if (v == "full") o.check = CheckMode::kFull;
      else if (v == "sampled") o.check = CheckMode::kSampled;
      else throw UsageError("--check: '" + v + "' (auto, full, sampled)");
    }
    else if (flag == "--point-ms") {
      o.point_ms = parse_double(flag, arg());
      if (o.point_ms < 0) throw UsageError("--point-ms must be >= 0");
    }
    else if (flag == "--algos") o.algos = static_cast<int>(parse_int(flag, arg()));
    else if (flag == "--workspace") o.workspace_bytes = parse_size(arg());
    else throw UsageError("unknown option '" + flag + "' (see lcm-exec --help)");
  }
  if (o.timeout_s <= 0) throw UsageError("--timeout must be positive");
  if (o.warmup < -1 || o.iters == 0 || o.iters < -1) throw UsageError("-w must be >= 0 and -n >= 1");
  if (o.algos < 1 || o.algos > 64) throw UsageError("--algos: 1..64");
  if (o.resume && o.out_dir.empty()) throw UsageError("--resume needs --out DIR");
  if (o.family == Family::kCollectives || o.family == Family::kMembw) (void)sweep_sizes(o.sweep);  // validates -b/-e/-f/-i
  if (is_moe) validate_moe(o.moe);
  if (window > 0 && !causal) throw UsageError("--window needs the causal mask (drop --no-causal)");
  for (AttentionPoint& a : o.attn_points) {
    a.shape.causal = causal;
    a.shape.work_fraction = causal ? 0.5 : 1.0;
    if (window > 0) {
      a.shape.window = window;
      a.shape.windowed_share = 1.0;
      a.label += ".w" + std::to_string(window);
    }
  }
  if (o.family == Family::kCpAttention) {
    if (!o.group_given) o.group = Group::kCp;
    for (const AttentionPoint& a : o.attn_points)
      if (a.shape.batch != 1) throw UsageError("cp-attention: --shapes '" + a.label + "': only B = 1 is supported");
    if (!causal) throw UsageError("cp-attention: --no-causal is not supported (load balancing is for causal masks)");
    if (window > 0) throw UsageError("cp-attention: --window is not supported (the ring runs full causal blocks)");
  }
  return o;
}

}  // namespace lcm::exec
