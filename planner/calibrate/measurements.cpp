// Measured op times as model ops: lcm-exec summaries and nccl-tests logs (measurements.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/planner/calibrate/measurements.hpp"

namespace lcm::calib {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// lcm-exec's GEMM dtype names: "fp8_block" (block-scaled FP8), "fp8_e4m3" / "fp8" (per-tensor),
// anything else BF16.
DType gemm_dtype(const std::string& name) {
  if (name == "fp8_block") return DType::kFp8Block;
  return name.rfind("fp8", 0) == 0 ? DType::kFp8 : DType::kBf16;
}

io::ConfigError err(const std::string& file, int line, const std::string& key, const std::string& msg) {
  return io::ConfigError{file, line, 0, key, msg};
}

// A field outside the range lcm accepts (a count, a rank, a dimension): thrown by the readers
// of integers below, turned into one input error naming the key and the range by the parsers
// (never a float-to-int cast out of range: fuzz/corpus/exec_json_fuzz/hand-group_size_1e300.json).
struct BadKey {
  std::string key;
  std::string message;
  int line = 0;  // of an nccl-tests log; 0 in JSON
};

// Ranges of the integer fields: a rank, group or EP size as lcm's cap on GPUs; GEMM and
// attention dimensions and MoE widths as implausible() below; GEMM groups, experts, top-k as
// lcm's cap on experts.
constexpr int64_t kMaxDim = int64_t{1} << 24;

// An integer value in [0, max] (an integral JSON number; 4096.0 is 4096).
int64_t integer_value(const json& v, const std::string& key, int64_t max) {
  const double x = v.is_number() ? v.get<double>() : -1.0;
  if (!(x >= 0 && x <= static_cast<double>(max)) || x != std::floor(x))
    throw BadKey{key, fmt::format("expected an integer in [0, {}], got {}", max, v.dump())};
  return static_cast<int64_t>(x);
}

std::optional<Collective> collective_named(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  if (s == "all_reduce" || s == "allreduce") return Collective::kAllReduce;
  if (s == "all_gather" || s == "allgather") return Collective::kAllGather;
  if (s == "reduce_scatter" || s == "reducescatter") return Collective::kReduceScatter;
  if (s == "all_to_all" || s == "alltoall" || s == "all_to_allv" || s == "alltoallv") return Collective::kAllToAll;
  if (s == "send_recv" || s == "sendrecv") return Collective::kSendRecv;
  return std::nullopt;
}

// Host of each rank from "#  Rank   0 Pid    1402 on           vm device  0 [...]" lines
// (lcm-exec's "devices" and nccl-tests' header use the same form).
// A rank beyond lcm's cap on GPUs is an input error (BadKey; with the 1-based line number
// where `numbered`, an nccl-tests log).
std::map<int, std::string> rank_hosts(const std::vector<std::string>& lines, bool numbered) {
  static const std::regex re(R"(^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+))");
  std::map<int, std::string> hosts;
  std::smatch m;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], m, re)) continue;
    const std::string digits = m[1].str();
    int64_t r = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
    if (ec != std::errc() || r >= limits::kNumGpus)
      throw BadKey{"Rank", fmt::format("expected a rank in [0, {}], got {}", limits::kNumGpus - 1, digits),
                   numbered ? static_cast<int>(i + 1) : 0};
    hosts[static_cast<int>(r)] = m[2].str();
  }
  return hosts;
}

// The group's topology from the host of each rank (lcm::group_topology); a rank whose host
// the file does not name sits on node rank / gpus_per_node.
GroupTopology topology(const std::vector<int>& ranks, const std::map<int, std::string>& hosts, int gpus_per_node) {
  std::map<std::string, int> node_ids;
  std::vector<int> node_of;
  for (int r : ranks) {
    const auto h = hosts.find(r);
    const std::string node = h != hosts.end() ? h->second : "node" + std::to_string(r / std::max(1, gpus_per_node));
    node_of.push_back(node_ids.emplace(node, static_cast<int>(node_ids.size())).first->second);
  }
  return group_topology(node_of);
}

MeasuredOp collective_point(Collective kind, double bytes, const GroupTopology& topo) {
  MeasuredOp m;
  m.op.kind = kind == Collective::kSendRecv ? OpKind::kSendRecv : OpKind::kCollective;
  m.op.stream = Stream::kTp;
  m.op.coll.kind = kind;
  m.op.coll.group_size = topo.size;
  m.op.coll.message_bytes = bytes;
  m.topo = topo;
  return m;
}

// "4096x6144x4096" -> {4096, 6144, 4096}; a dimension above 2^24 is an input error.
std::optional<std::vector<int64_t>> dims(const std::string& shape) {
  std::vector<int64_t> out;
  std::stringstream in(shape);
  for (std::string tok; std::getline(in, tok, 'x');) {
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || v > kMaxDim)
      throw BadKey{"shape", fmt::format("expected MxNxK with dimensions in [0, {}], got '{}'", kMaxDim, shape)};
    out.push_back(v);
  }
  return out;
}

// Physical bounds of one measurement (docs/calibration.md): a time between 10 ns and an
// hour, a message or copy of at most 1 TiB, GEMM and attention dimensions of at most 2^24.
// Returns "" or what is wrong.
std::string implausible(const MeasuredOp& m) {
  constexpr double kMaxBytes = 1099511627776.0;
  if (!(m.measured_s >= 1e-8 && m.measured_s <= 3600.0))
    return fmt::format("time {:g} s is outside the physical range [10 ns, 1 h]", m.measured_s);
  const Op& op = m.op;
  auto dim_ok = [&](double v) { return v >= 0 && v <= static_cast<double>(kMaxDim); };
  switch (op.kind) {
    case OpKind::kCollective:
    case OpKind::kSendRecv:
      if (!(op.coll.message_bytes > 0 && op.coll.message_bytes <= kMaxBytes))
        return fmt::format("message size {:g} bytes is outside (0, 1 TiB]", op.coll.message_bytes);
      break;
    case OpKind::kMemoryBound:
      if (!(op.mem.bytes > 0 && op.mem.bytes <= 2 * kMaxBytes)) return fmt::format("{:g} bytes copied is outside (0, 2 TiB]", op.mem.bytes);
      break;
    case OpKind::kGemm:
      if (!dim_ok(static_cast<double>(op.gemm.m)) || !dim_ok(static_cast<double>(op.gemm.n)) ||
          !dim_ok(static_cast<double>(op.gemm.k)) || op.gemm.groups > 65536)
        return fmt::format("GEMM {}x{}x{} has a dimension above 2^24", op.gemm.m, op.gemm.n, op.gemm.k);
      break;
    case OpKind::kAttention:
      for (int64_t v : {op.attn.batch, op.attn.seq_q, op.attn.seq_kv, op.attn.heads_q, op.attn.heads_kv,
                        op.attn.head_dim_qk, op.attn.head_dim_v})
        if (!dim_ok(static_cast<double>(v))) return fmt::format("attention dimension {} is above 2^24", v);
      break;
    default:
      break;
  }
  return {};
}

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// An optional boolean field: false when absent; anything but true / false throws BadKey.
bool flag(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return false;
  if (!it->is_boolean()) throw BadKey{key, fmt::format("expected true or false, got {}", it->dump())};
  return it->get<bool>();
}

// An integer field of `j`: 0 when absent or not a number (the callers' "missing"), else an
// integer in [0, max] (integer_value).
int64_t integer(const json& j, const char* key, int64_t max) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? integer_value(*it, key, max) : 0;
}

// A list of ranks (extra.ranks, extra.ep_ranks); anything but a list reads as none.
std::vector<int> rank_list(const json& j, const char* key) {
  std::vector<int> out;
  const auto it = j.find(key);
  if (it != j.end() && it->is_array())
    for (const json& r : *it) out.push_back(static_cast<int>(integer_value(r, key, limits::kNumGpus - 1)));
  return out;
}

// A model op described explicitly by the point (`model_op`), as lcm-exec writes for ops
// without a family-specific shape (MoE phases, CP ring steps):
//   {"kind": "gemm", "m", "n", "k", "groups", "dtype"} | {"kind": "memory", "bytes", "copy" (optional, false)} |
//   {"kind": "collective", "collective", "bytes", "group_size"} |
//   {"kind": "attention", "b", "s_q", "s_kv", "hq", "hkv", "d", "d_v", "work_fraction", "pass",
//    "kv_block" (optional: the keys one kernel of a CP ring step holds),
//    "unfused" (optional, false: the unfused kernels of training.attention_backend unfused),
//    "flash2" (optional, false: FlashAttention-2's kernel, training.attention_backend flash2),
//    "dropout" (optional, false: attention dropout on)}
std::optional<MeasuredOp> explicit_op(const json& mo, const std::vector<int>& ranks,
                                      const std::map<int, std::string>& hosts, int gpn, std::string* why) {
  const std::string kind = mo.value("kind", "");
  MeasuredOp m;
  if (kind == "gemm") {
    m.op.kind = OpKind::kGemm;
    m.op.gemm = GemmShape{integer(mo, "m", kMaxDim), integer(mo, "n", kMaxDim), integer(mo, "k", kMaxDim),
                          std::max(1, static_cast<int>(integer(mo, "groups", limits::kNumExperts)))};
    m.op.dtype = gemm_dtype(mo.value("dtype", "bf16"));
    if (m.op.gemm.m <= 0 || m.op.gemm.n <= 0 || m.op.gemm.k <= 0) return *why = "gemm model_op without m, n, k", std::nullopt;
    return m;
  }
  if (kind == "memory") {
    m.op.kind = OpKind::kMemoryBound;
    m.op.mem.bytes = number(mo, "bytes");
    // A copy streams at efficiency.hbm, any other memory-bound kernel (a permutation, a norm)
    // at efficiency.hbm_elementwise.
    m.op.mem.copy = flag(mo, "copy");
    if (m.op.mem.bytes <= 0) return *why = "memory model_op without bytes", std::nullopt;
    return m;
  }
  if (kind == "collective") {
    const auto c = collective_named(mo.value("collective", ""));
    const int n = static_cast<int>(integer(mo, "group_size", limits::kNumGpus));
    if (!c || n < 2) return *why = "collective model_op without a known collective and group_size >= 2", std::nullopt;
    std::vector<int> rs = ranks;
    if (static_cast<int>(rs.size()) != n) {
      rs.clear();
      for (int r = 0; r < n; ++r) rs.push_back(r);
    }
    return collective_point(*c, number(mo, "bytes"), topology(rs, hosts, gpn));
  }
  if (kind == "attention") {
    m.op.kind = OpKind::kAttention;
    AttentionShape& a = m.op.attn;
    a.batch = integer(mo, "b", kMaxDim);
    a.seq_q = integer(mo, "s_q", kMaxDim);
    a.seq_kv = integer(mo, "s_kv", kMaxDim);
    a.heads_q = integer(mo, "hq", kMaxDim);
    a.heads_kv = integer(mo, "hkv", kMaxDim);
    a.head_dim_qk = integer(mo, "d", kMaxDim);
    a.head_dim_v = mo.contains("d_v") ? integer(mo, "d_v", kMaxDim) : a.head_dim_qk;
    a.work_fraction = mo.contains("work_fraction") ? number(mo, "work_fraction") : 1.0;
    a.causal = a.work_fraction < 1.0;
    a.kv_block = mo.contains("kv_block") ? integer(mo, "kv_block", kMaxDim) : 0;
    a.unfused = flag(mo, "unfused");
    a.flash2 = flag(mo, "flash2");
    a.dropout = flag(mo, "dropout");
    m.op.pass = mo.value("pass", "fwd") == "bwd" ? Pass::kBwd : Pass::kFwd;
    if (a.batch <= 0 || a.seq_q <= 0 || a.seq_kv <= 0 || a.heads_q <= 0 || a.head_dim_qk <= 0)
      return *why = "attention model_op without b, s_q, s_kv, hq, d", std::nullopt;
    return m;
  }
  *why = fmt::format("model_op kind '{}' is not one of gemm, memory, collective, attention", kind);
  return std::nullopt;
}

// `bench moe` phases as the model's ops, from the layer's configuration (extra.moe) and
// this rank's routing (extra.routing): the router and expert GEMMs (forward, and the
// backward's dgrad / wgrad), and the all-to-alls of the EP group. Memory-bound phases
// (top-k, permutation, activation) carry no byte count the model can use and stay out.
std::optional<MeasuredOp> moe_phase_op(const json& p, const std::string& op, const std::map<int, std::string>& hosts,
                                       int gpus_per_node, std::string* why) {
  const json ex = p.value("extra", json::object());
  const json moe = ex.value("moe", json::object());
  const json routing = ex.value("routing", json::object());
  const int64_t T = integer(moe, "tokens", kMaxDim), h = integer(moe, "hidden", kMaxDim),
                f = integer(moe, "ffn", kMaxDim), E = integer(moe, "experts", limits::kNumExperts);
  const int El = static_cast<int>(integer(moe, "local_experts", limits::kNumExperts)),
            ep = static_cast<int>(integer(moe, "ep", limits::kNumGpus));
  const int64_t topk = integer(moe, "topk", limits::kNumExperts);
  if (T <= 0 || h <= 0 || f <= 0 || E <= 0 || El <= 0 || ep <= 0 || topk <= 0) {
    *why = "moe point without extra.moe {tokens, hidden, ffn, experts, topk, ep, local_experts}";
    return std::nullopt;
  }
  // Rows this rank's experts receive (rank 0's, as the times are rank 0's), and the rows it
  // sends: its token-expert assignments less the dropped ones.
  const json recv = routing.value("received_rows_per_rank", json::array());
  const int64_t rows = recv.is_array() && !recv.empty()
                           ? integer_value(recv[0], "received_rows_per_rank", limits::kRoutingTokens)
                           : T * topk;
  const double dropped = number(routing, "dropped_fraction_rank0");
  const double sent_rows = static_cast<double>(T * topk) * (1.0 - dropped);
  // The phase is a schedule op by name ("L.moe.experts.fc1.bwd.wgrad"); its GEMM in that
  // pass, with the forward shape from the model's one definition (ops.hpp).
  const std::optional<OpName> name = parse_op_name(op);
  auto gemm = [&](GemmShape fwd) -> std::optional<MeasuredOp> {
    MeasuredOp m;
    m.op.kind = OpKind::kGemm;
    m.op.dtype = DType::kBf16;
    m.op.pass = name->pass;
    m.op.gemm = gemm_in_pass(fwd, name->part);
    if (name->pass != Pass::kFwd && name->part == GemmPart::kNone) return std::nullopt;
    return m;
  };
  // Per-expert loads (extra.routing.loads_all_ranks: tokens each expert received, summed over
  // the ranks): rank 0 holds experts 0 .. local_experts-1, so its grouped GEMMs split their
  // rows by those loads (ops.hpp ExpertLoadShares); without them the split is even.
  const json loads_json = routing.value("loads_all_ranks", json::array());
  auto with_loads = [&](GemmShape g) {
    if (!loads_json.is_array() || static_cast<int>(loads_json.size()) < El) return g;
    std::vector<double> loads;
    for (int e = 0; e < El; ++e) {
      const json& v = loads_json[static_cast<size_t>(e)];
      loads.push_back(v.is_number() ? std::max(0.0, v.get<double>()) : 0.0);
    }
    g.loads = expert_load_shares(loads);
    return g;
  };
  std::optional<MeasuredOp> m;
  const bool gated = moe.value("activation", "swiglu") == "swiglu";  // SwiGLU: gate, up
  switch (name && std::string_view(name->prefix) == kLayerPrefix ? name->id : OpId::kNone) {
    case OpId::kMoeRouter:
      // Its input gradient is an accumulating GEMM (moe_router_shape's dgrad_c_bytes): lcm-exec
      // adds it to the tokens' dX with beta 1 (executor/src/kernels/moe_layer.cpp).
      m = gemm(moe_router_shape(T, h, E));
      break;
    case OpId::kMoeExpertsFc1: m = gemm(with_loads(moe_fc1_shape(rows, h, f, gated, El))); break;
    case OpId::kMoeExpertsFc2: m = gemm(with_loads(moe_fc2_shape(rows, h, f, El))); break;
    case OpId::kMoeDispatchA2A:
    case OpId::kMoeCombineA2A: {
      if (ep <= 1) break;
      std::vector<int> ranks = rank_list(ex, "ep_ranks");
      if (static_cast<int>(ranks.size()) != ep) {
        ranks.clear();
        for (int r = 0; r < ep; ++r) ranks.push_back(r);
      }
      m = collective_point(Collective::kAllToAll, sent_rows * static_cast<double>(h) * 2.0,
                           topology(ranks, hosts, gpus_per_node));
      break;
    }
    default: break;
  }
  if (!m) *why = "moe phase without a model op (memory-bound phases carry no byte count)";
  return m;
}

// The model op of one point of an lcm-exec summary, or nullopt with why it is skipped; a field
// out of range throws BadKey.
std::optional<MeasuredOp> point_op(const json& p, const std::string& key, const std::string& family,
                                   const std::map<int, std::string>& hosts, int gpus_per_node,
                                   std::string* why_skipped) {
  std::vector<int> ranks =
      p.contains("extra") && p["extra"].is_object() ? rank_list(p["extra"], "ranks") : std::vector<int>{};
  std::optional<MeasuredOp> m;
  std::string& why = *why_skipped;
  if (p.contains("model_op") && p["model_op"].is_object()) {
    m = explicit_op(p["model_op"], ranks, hosts, gpus_per_node, &why);
  } else if (family == "moe") {
    const std::string op = p.value("op", "");
    if (op.find(".layer.") != std::string::npos || op.find(".phases.") != std::string::npos)
      why = "whole-layer total of the separate phases";
    else m = moe_phase_op(p, op, hosts, gpus_per_node, &why);
  } else if (family == "gemm") {
    const auto d = dims(p.value("shape", ""));
    if (d && d->size() == 3) {
      m = MeasuredOp{};
      m->op.kind = OpKind::kGemm;
      m->op.gemm = GemmShape{(*d)[0], (*d)[1], (*d)[2], 1};
      m->op.dtype = gemm_dtype(p.value("dtype", "bf16"));
    } else {
      why = "gemm shape is not MxNxK";
    }
  } else if (family == "attention" && key.find("/fwd+bwd/") != std::string::npos) {
    why = "forward+backward total of the separate fwd and bwd points";
  } else if (family == "attention") {
    const json a = p.contains("extra") ? p["extra"].value("attention", json::object()) : json::object();
    if (number(a, "s") > 0 && number(a, "hq") > 0 && number(a, "d") > 0) {
      m = MeasuredOp{};
      m->op.kind = OpKind::kAttention;
      AttentionShape& s = m->op.attn;
      s.batch = std::max<int64_t>(1, integer(a, "b", kMaxDim));
      s.seq_q = s.seq_kv = integer(a, "s", kMaxDim);
      s.heads_q = integer(a, "hq", kMaxDim);
      s.heads_kv = a.contains("hkv") ? integer(a, "hkv", kMaxDim) : s.heads_q;
      s.head_dim_qk = integer(a, "d", kMaxDim);
      s.head_dim_v = a.contains("d_v") ? integer(a, "d_v", kMaxDim) : s.head_dim_qk;
      s.causal = a.value("causal", true);
      s.work_fraction = s.causal ? 0.5 : 1.0;
      // A sliding window (lcm-exec --window W): every query attends W keys before it.
      if (s.causal && a.contains("window") && integer(a, "window", kMaxDim) > 0) {
        s.window = integer(a, "window", kMaxDim);
        s.windowed_share = 1.0;
      }
      const std::string op = p.value("op", "");
      m->op.pass = key.find("/bwd/") != std::string::npos || op.ends_with(".bwd") ? Pass::kBwd : Pass::kFwd;
    } else {
      why = "attention point without extra.attention {s, hq, d}";
    }
  } else if (family == "cp-attention") {
    // `bench cp-attention`'s compute-only steps of one rank (L.attn.core.fwd / .bwd): the op
    // the schedule builds for a CP rank of the p2p ring (set_cp_ring_sequence, ops.hpp). The
    // ring totals include the messages; the messages are point-to-point sends of the ring, not
    // a collective of the model.
    const std::string op = p.value("op", "");
    const json a = p.contains("extra") ? p["extra"].value("cp_attention", json::object()) : json::object();
    if (op != "L.attn.core.fwd" && op != "L.attn.core.bwd") {
      why = "a CP ring total or message (the compute-only steps are the model's op)";
    } else if (number(a, "s") > 0 && number(a, "cp") > 0 && number(a, "hq") > 0 && number(a, "d") > 0) {
      const int64_t s = integer(a, "s", kMaxDim), cp = integer(a, "cp", limits::kNumGpus);
      m = MeasuredOp{};
      m->op.kind = OpKind::kAttention;
      AttentionShape& sh = m->op.attn;
      sh.batch = std::max<int64_t>(1, integer(a, "b", kMaxDim));
      set_cp_ring_sequence(sh, s, cp);
      sh.heads_q = integer(a, "hq", kMaxDim);
      sh.heads_kv = a.contains("hkv") ? integer(a, "hkv", kMaxDim) : sh.heads_q;
      sh.head_dim_qk = sh.head_dim_v = integer(a, "d", kMaxDim);
      m->op.pass = op.ends_with(".bwd") ? Pass::kBwd : Pass::kFwd;
    } else {
      why = "cp-attention point without extra.cp_attention {s, cp, hq, d}";
    }
  } else if (family == "collectives") {
    const auto c = collective_named(p.value("collective", ""));
    const int n = static_cast<int>(integer(p, "group_size", limits::kNumGpus));
    if (c && n >= 2) {
      if (static_cast<int>(ranks.size()) != n) {
        ranks.clear();
        for (int r = 0; r < n; ++r) ranks.push_back(r);
      }
      m = collective_point(*c, number(p, "size"), topology(ranks, hosts, gpus_per_node));
    } else {
      why = n < 2 ? "a group of one rank moves nothing" : "unknown collective";
    }
  } else if (family == "membw") {
    // A device-to-device copy reads and writes every byte.
    m = MeasuredOp{};
    m->op.kind = OpKind::kMemoryBound;
    m->op.mem.bytes = 2.0 * number(p, "size");
    m->op.mem.copy = true;
    if (!(m->op.mem.bytes > 0)) m.reset(), why = "no size";
  } else {
    why = fmt::format("family '{}' point carries no model_op", family);
  }
  return m;
}

}  // namespace

namespace {

io::Result<std::vector<MeasuredOp>> parse_exec_summary_unguarded(const std::string& text, const std::string& file,
                                                                 int gpus_per_node, std::vector<std::string>* skipped) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const std::exception& e) {
    return err(file, 0, "", std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("points") || !doc["points"].is_array() || !doc.contains("benchmark"))
    return err(file, 0, "points", "not an lcm-exec summary (expected an object with 'benchmark' and 'points')");
  std::vector<std::string> dev_lines;
  if (doc.contains("devices") && doc["devices"].is_array())
    for (const auto& d : doc["devices"])
      if (d.is_string()) dev_lines.push_back(d.get<std::string>());
  const auto hosts = rank_hosts(dev_lines, false);
  std::vector<MeasuredOp> out;
  auto skip = [&](const std::string& key, const std::string& why) {
    if (skipped) skipped->push_back(fmt::format("{}: {}: {}", file, key, why));
  };
  for (const json& p : doc["points"]) {
    const std::string key = p.value("key", "?");
    const std::string family = p.value("family", doc.value("benchmark", ""));
    if (!p.value("correct", false)) {
      skip(key, "its correctness check failed");
      continue;
    }
    const json tu = p.value("time_us", json::object());
    const double med = number(tu, "median");
    if (!(med > 0)) {
      skip(key, "no median time");
      continue;
    }
    std::optional<MeasuredOp> m;
    std::string why;
    try {
      m = point_op(p, key, family, hosts, gpus_per_node, &why);
    } catch (const BadKey& b) {
      return err(file, 0, key, fmt::format("{}: {}", b.key, b.message));
    }
    if (!m) {
      skip(key, why);
      continue;
    }
    m->name = p.value("op", key);
    m->key = key;
    m->source = file;
    m->measured_s = med * 1e-6;
    if (const std::string bad = implausible(*m); !bad.empty()) return err(file, 0, key, bad);
    const double p10 = number(tu, "p10"), p90 = number(tu, "p90");
    m->spread = p90 > p10 ? (p90 - p10) / med : 0.0;
    out.push_back(std::move(*m));
  }
  return out;
}

io::Result<std::vector<MeasuredOp>> parse_nccl_tests_log_unguarded(const std::string& text, const std::string& file,
                                                                   int gpus_per_node) {
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const auto hosts = rank_hosts(lines, true);
  if (hosts.empty())
    return err(file, 0, "", "no '#  Rank N ... on HOST' lines: not an nccl-tests log, or the header was cut");
  std::optional<Collective> coll;
  static const std::regex start(R"(Collective test starting:\s*(\w+?)_perf)");
  std::smatch sm;
  for (const std::string& l : lines)
    if (std::regex_search(l, sm, start)) coll = collective_named(sm[1].str());
  if (!coll) {
    const std::string stem = fs::path(file).filename().string();
    for (const char* n : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"})
      if (stem.find(n) != std::string::npos) coll = collective_named(n);
  }
  if (!coll)
    return err(file, 0, "",
               "cannot tell the collective: no 'Collective test starting: X_perf' line and the file name names none "
               "of all_reduce, all_gather, reduce_scatter, alltoall, sendrecv");
  std::vector<int> ranks;
  for (const auto& [r, h] : hosts) ranks.push_back(r);
  const GroupTopology topo = topology(ranks, hosts, gpus_per_node);
  std::vector<MeasuredOp> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const size_t b = l.find_first_not_of(" \t");
    if (b == std::string::npos || l[b] == '#') continue;
    std::istringstream in(l);
    std::vector<std::string> tok;
    for (std::string t; in >> t;) tok.push_back(t);
    if (tok.size() < 9 || tok[0].find_first_not_of("0123456789") != std::string::npos) continue;
    // size count type redop root time algbw busbw #wrong [in-place: time algbw busbw #wrong]
    double size = 0, time_us = 0;
    try {
      size = std::stod(tok[0]);
      time_us = std::stod(tok[5]);
    } catch (const std::exception&) {
      return err(file, static_cast<int>(i + 1), "", "expected numbers in the size and time columns");
    }
    if (tok[8] != "0" && tok[8] != "N/A") continue;  // wrong results are not measurements
    if (!(time_us > 0) || !(size > 0)) continue;
    MeasuredOp m = collective_point(*coll, size, topo);
    m.name = fmt::format("nccl-tests.{}", to_string(*coll));
    m.key = fmt::format("nccl-tests/{}/{}/{:.0f}", to_string(*coll), topo.size, size);
    m.source = file;
    m.measured_s = time_us * 1e-6;
    if (const std::string bad = implausible(m); !bad.empty()) return err(file, static_cast<int>(i + 1), "", bad);
    out.push_back(std::move(m));
  }
  if (out.empty()) return err(file, 0, "", "no result rows (size count type redop root time ...) found");
  return out;
}

}  // namespace

// A value of the wrong JSON type, or a number out of range, anywhere in the input: one error
// naming the file, never an escaping exception (fuzz/corpus/exec_json_fuzz, nccl_log_fuzz).
io::Result<std::vector<MeasuredOp>> parse_exec_summary(const std::string& text, const std::string& file,
                                                       int gpus_per_node, std::vector<std::string>* skipped) {
  try {
    return parse_exec_summary_unguarded(text, file, gpus_per_node, skipped);
  } catch (const BadKey& b) {
    return err(file, 0, "devices", fmt::format("{}: {}", b.key, b.message));
  } catch (const std::exception& e) {
    return err(file, 0, "", std::string("malformed lcm-exec summary: ") + e.what());
  }
}

io::Result<std::vector<MeasuredOp>> parse_nccl_tests_log(const std::string& text, const std::string& file,
                                                         int gpus_per_node) {
  try {
    return parse_nccl_tests_log_unguarded(text, file, gpus_per_node);
  } catch (const BadKey& b) {
    return err(file, b.line, b.key, b.message);
  } catch (const std::exception& e) {
    return err(file, 0, "", std::string("malformed nccl-tests log: ") + e.what());
  }
}

namespace {

// The "system" block of a summary that parse_exec_summary accepted; nothing when it is absent
// or not of the expected types (older summaries, hand-made ones).
std::optional<MeasuredGpu> summary_gpu(const std::string& text, const std::string& file) {
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("system") || !doc["system"].is_object()) return std::nullopt;
  const json& s = doc["system"];
  if (!s.contains("gpu_name") || !s["gpu_name"].is_string()) return std::nullopt;
  MeasuredGpu g;
  g.file = file;
  g.name = s["gpu_name"].get<std::string>();
  if (s.contains("sm_count") && s["sm_count"].is_number_integer()) g.sm_count = s["sm_count"].get<int>();
  if (s.contains("hbm_bytes") && s["hbm_bytes"].is_number()) g.hbm_bytes = s["hbm_bytes"].get<double>();
  return g;
}

}  // namespace

std::vector<std::string> gpu_mismatches(const Measurements& ms, const HardwareSpec& hw) {
  struct Group {
    int files = 0;
    std::string first;
  };
  std::map<std::tuple<std::string, int, double>, Group> groups;
  for (const MeasuredGpu& g : ms.gpus) {
    const bool sm_off = g.sm_count > 0 && hw.gpu.num_sms > 0 && g.sm_count != hw.gpu.num_sms;
    const bool hbm_off = g.hbm_bytes > 0 && hw.gpu.hbm_bytes > 0 && std::abs(g.hbm_bytes / hw.gpu.hbm_bytes - 1.0) > 0.05;
    if (!sm_off && !hbm_off) continue;
    Group& grp = groups[{g.name, g.sm_count, g.hbm_bytes}];
    if (grp.files++ == 0) grp.first = g.file;
  }
  std::vector<std::string> out;
  for (const auto& [key, grp] : groups) {
    const auto& [name, sms, hbm] = key;
    out.push_back(fmt::format("{} file{} measured on another GPU than profile {} describes: {} ({} SMs, {:.1f} GiB) "
                              "against {} SMs and {:.1f} GiB (e.g. {})",
                              grp.files, grp.files == 1 ? "" : "s", hw.name, name, sms, hbm / 1073741824.0,
                              hw.gpu.num_sms, hw.gpu.hbm_bytes / 1073741824.0, grp.first));
  }
  return out;
}

io::Result<bool> read_measurements(const std::string& path, int gpus_per_node, Measurements& out) {
  std::error_code ec;
  if (path.size() > 1 && path[0] == '@') {
    // A list of inputs, one per line ('#' comments); a relative entry is looked up from the
    // current directory, then from each directory above the list (a list inside a
    // repository names its files from the repository root).
    const fs::path list(path.substr(1));
    const auto list_text = io::read_input_file(list.string(), "the list of inputs");
    if (!list_text) return list_text.error();
    std::istringstream in(list_text.value());
    int line_no = 0;
    bool any = false;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      const size_t b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      const std::string entry = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
      fs::path found = entry;
      if (fs::path(entry).is_relative() && !fs::exists(found, ec)) {
        for (fs::path dir = fs::absolute(list, ec).parent_path(); !dir.empty(); dir = dir.parent_path()) {
          if (fs::exists(dir / entry, ec)) {
            found = dir / entry;
            break;
          }
          if (dir == dir.parent_path()) break;
        }
      }
      if (!fs::exists(found, ec)) return err(list.string(), line_no, "", fmt::format("{}: no such file or directory", entry));
      auto r = read_measurements(found.string(), gpus_per_node, out);
      if (!r) return r.error();
      any = true;
    }
    if (!any) return err(list.string(), 0, "", "the list names no inputs");
    return true;
  }
  auto read_one = [&](const fs::path& p, bool from_dir) -> io::Result<bool> {
    const auto text = io::read_input_file(p.string(), "measurements");
    if (!text) return text.error();
    const std::string& t = text.value();
    const size_t b = t.find_first_not_of(" \t\r\n");
    if (b == std::string::npos)
      return err(p.string(), 0, "", "empty file (expected an lcm-exec summary JSON or an nccl-tests log)");
    const bool is_json = t[b] == '{' || t[b] == '[' || p.extension() == ".json";
    if (is_json) {
      auto r = parse_exec_summary(t, p.string(), gpus_per_node, &out.skipped);
      if (!r) {
        if (from_dir) return false;  // other JSON files in a directory are not ours
        return r.error();
      }
      out.points.insert(out.points.end(), r.value().begin(), r.value().end());
      if (auto gpu = summary_gpu(t, p.string())) out.gpus.push_back(std::move(*gpu));
    } else {
      auto r = parse_nccl_tests_log(t, p.string(), gpus_per_node);
      if (!r) {
        if (from_dir) return false;
        return r.error();
      }
      out.points.insert(out.points.end(), r.value().begin(), r.value().end());
    }
    out.files.push_back(p.string());
    return true;
  };
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    if (fs::is_regular_file(p / "summary.json", ec)) return read_one(p / "summary.json", false);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && ext == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    bool any = false;
    for (const fs::path& f : files) {
      auto r = read_one(f, true);
      if (!r) return r.error();
      any = any || r.value();
    }
    if (!any)
      return err(path, 0, "", "no lcm-exec summary (summary.json or another *.json summary) in this directory");
    return true;
  }
  if (!fs::exists(p, ec)) return err(path, 0, "", "no such file or directory");
  return read_one(p, false);
}

}  // namespace lcm::calib
