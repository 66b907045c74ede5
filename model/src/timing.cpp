// Op times: roofline compute with efficiency curves, alpha-beta collectives on the
// node topology implied by the rank order. Parameters come from HardwareSpec (fitted by
// `lcm calibrate`); formulas are documented in docs/time-model.md.
#include "lcm/model/timing.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"

namespace lcm {

namespace {

double peak_flops(DType dtype, const HardwareSpec& hw) {
  return is_fp8(dtype) ? hw.gpu.peak_fp8_flops : hw.gpu.peak_bf16_flops;
}

// Topology of a group given its member ranks (node = rank / gpus_per_node).
GroupTopology topology_of(const std::vector<int>& ranks, int gpus_per_node) {
  std::vector<int> nodes;
  nodes.reserve(ranks.size());
  for (int r : ranks) nodes.push_back(r / std::max(1, gpus_per_node));
  return group_topology(nodes);
}

}  // namespace

GroupTopology group_topology(const std::vector<int>& node_of_rank) {
  GroupTopology t;
  t.size = static_cast<int>(node_of_rank.size());
  std::vector<int> nodes = node_of_rank;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  t.nodes = std::max(1, static_cast<int>(nodes.size()));
  t.per_node = (t.size + t.nodes - 1) / t.nodes;
  return t;
}

TopologyKey topology_key(const Scenario& s, const Mesh& m) {
  TopologyKey k{.shards = shard_key(m), .pp = m.pp, .dp = m.dp, .edp = m.edp};
  for (int i = 0; i < kNumOrderDims; ++i) k.order[static_cast<size_t>(i)] = static_cast<int32_t>(s.parallel.order[i]);
  return k;
}

MeshTopology mesh_topology(const Scenario& s, const Mesh& m) {
  MeshTopology topo;
  const int gpn = s.hardware.interconnect.gpus_per_node;
  const RankGrid dense = dense_grid(m, s.parallel);
  const RankGrid expert = expert_grid(m, s.parallel);
  auto set = [&](CommDim d, const std::vector<int>& ranks) {
    topo.dim[static_cast<size_t>(d)] = topology_of(ranks, gpn);
  };
  set(CommDim::kTp, group_ranks(dense, Dim::kTp, 0));
  set(CommDim::kCp, group_ranks(dense, Dim::kCp, 0));
  set(CommDim::kPp, group_ranks(dense, Dim::kPp, 0));
  set(CommDim::kEp, group_ranks(expert, Dim::kEp, 0));
  set(CommDim::kEdp, group_ranks(expert, Dim::kDp, 0));
  // Dense gradients reduce over DP x CP: every rank sharing rank 0's tp and pp coordinates.
  std::vector<int> dpcp;
  for (int cp_rank : group_ranks(dense, Dim::kCp, 0))
    for (int r : group_ranks(dense, Dim::kDp, cp_rank)) dpcp.push_back(r);
  set(CommDim::kDp, dpcp);
  topo.expert_tp = topology_of(group_ranks(expert, Dim::kTp, 0), gpn);
  std::vector<int> etp_ep;
  for (int e : group_ranks(expert, Dim::kEp, 0))
    for (int r : group_ranks(expert, Dim::kTp, e)) etp_ep.push_back(r);
  topo.expert_tp_ep = topology_of(etp_ep, gpn);
  // Tied-embedding sync: first and last pipeline stage.
  std::vector<int> pp = group_ranks(dense, Dim::kPp, 0);
  set(CommDim::kEmb, pp.size() > 1 ? std::vector<int>{pp.front(), pp.back()} : pp);
  return topo;
}

namespace {

// Output tiles of an m x n C on gemm_tile_m x gemm_tile_n tiles.
double output_tiles(double m, double n, const EfficiencySpec& e) {
  return std::ceil(m / std::max(1, e.gemm_tile_m)) * std::ceil(n / std::max(1, e.gemm_tile_n));
}

// Split-K: the number of CTAs sharing each output tile's reduction. A GEMM with fewer output
// tiles than SMs and a long k is split over k / gemm_split_k_chunk CTAs per tile (cuBLASLt's
// split-K / stream-K kernels), at most as many as fill the SMs; continuous in k so that the fit
// sees a smooth curve. 1 when off (chunk 0), with tiles >= SMs or k <= chunk.
// Why (session 22): the router weight gradients (M x N x K = hidden x experts x tokens: 8-24
// output tiles) ran -8..-4 % at k = 8192, +3..+5 % at 12K and +10..+23 % at 24-28K with the fill
// terms priced on the output tiles alone (calibration inputs and heldout13, development data):
// their time grows with k more slowly than a fixed number of busy SMs allows. Held out
// (heldout14-15) the rule under-splits 4-16 tiles over k of 40K-82K (+12..+19 %) and over-splits
// a 160-wide router output (-12 %, -23 %): docs/time-model.md.
double split_k(double m, double n, double k, const HardwareSpec& hw) {
  const EfficiencySpec& e = hw.efficiency;
  if (!(e.gemm_split_k_chunk > 0) || hw.gpu.num_sms <= 0) return 1.0;
  const double tiles = output_tiles(m, n, e);
  if (tiles >= hw.gpu.num_sms) return 1.0;
  return std::clamp(k / e.gemm_split_k_chunk, 1.0, hw.gpu.num_sms / tiles);
}

// Share of the SMs a GEMM of m x n x k keeps busy, to the power `exponent`: its output tiles
// (gemm_tile_m x gemm_tile_n) times its split-K factor over num_sms, at most 1; 1 with exponent
// 0 (off).
double sm_fill(double m, double n, double k, double exponent, const HardwareSpec& hw) {
  if (!(exponent > 0) || hw.gpu.num_sms <= 0) return 1.0;
  const double ctas = output_tiles(m, n, hw.efficiency) * split_k(m, n, k, hw);
  return std::pow(std::min(1.0, ctas / hw.gpu.num_sms), exponent);
}

// Efficiency of one GEMM of m x n x k (one expert of a group) relative to the dense peak of
// its dtype.
//  - Saturation in every dimension: d / (d + gemm_dim_half). Small m or n leave SMs or
//    operand reuse idle; a short k loop amortizes less of each output tile's fixed
//    prologue/epilogue. `k_half_scale` stretches the k half-point: an FP8 k loop runs at
//    twice the BF16 rate per clock while the per-tile fixed cost stays, so its half-point
//    in k is twice as long (k_half_scale = 2 for FP8).
//  - Edge tiles: m and n are covered by gemm_tile_m x gemm_tile_n output tiles; a partial
//    tile at the edge costs a full one. With gemm_tile_small > 0 each dimension takes the
//    lesser waste of its tile and that smaller one (cuBLASLt's heuristic picks a narrower tile
//    where it fits the shape better: m = 160 on 64-row tiles wastes 17 %, on 128-row tiles 37 %).
//  - No wave quantization: cuBLAS on Hopper schedules tiles persistently (stream-K /
//    split-K for few tiles), and the measured H200 shapes show no wave pattern
//    (validation/measured/h200/kernels_probe.json and comparison.md; docs/hardware-profiles.md).
double dims_efficiency(double m, double n, double k, DType dtype, const HardwareSpec& hw) {
  const EfficiencySpec& e = hw.efficiency;
  const bool fp8 = is_fp8(dtype);
  const double peak_fraction = dtype == DType::kFp8Block ? e.gemm_fp8_block : fp8 ? e.gemm_fp8 : e.gemm;
  const double k_half_scale = fp8 ? 2.0 : 1.0;
  if (m <= 0 || n <= 0 || k <= 0) return peak_fraction;
  auto sat = [](double d, double half) { return d / (d + half); };
  auto edge = [](double d, int tile) {
    const double t = std::max(1, tile);
    return d / (std::ceil(d / t) * t);
  };
  const double fill = sm_fill(m, n, k, e.gemm_sm_fill_exponent, hw);
  const int small = static_cast<int>(e.gemm_tile_small);
  const double em = small > 0 ? std::max(edge(m, e.gemm_tile_m), edge(m, small)) : edge(m, e.gemm_tile_m);
  const double en = small > 0 ? std::max(edge(n, e.gemm_tile_n), edge(n, small)) : edge(n, e.gemm_tile_n);
  return peak_fraction * sat(m, e.gemm_dim_half) * sat(n, e.gemm_dim_half) * sat(k, e.gemm_dim_half * k_half_scale) * em *
         en * fill;
}

// The mean split of a grouped GEMM: the groups split the tokens, which are m (forward,
// dgrad) or k (weight gradient: GemmShape::split_k).
double shape_efficiency(const GemmShape& g, DType dtype, const HardwareSpec& hw) {
  const int groups = std::max(1, g.groups);
  const double m = g.split_k ? static_cast<double>(g.m) : static_cast<double>(g.m) / groups;
  const double k = g.split_k ? static_cast<double>(g.k) / groups : static_cast<double>(g.k);
  return dims_efficiency(m, static_cast<double>(g.n), k, dtype, hw);
}

// Share of a working set's re-reads that miss L2: 0 while it is at most `fits` bytes, rising
// linearly to 1 at `misses` bytes (an LRU cache swept cyclically by more than it holds misses
// throughout). The K/V streaming of attention uses it.
double l2_miss_share(double bytes, double fits, double misses) {
  return std::clamp((bytes - fits) / (misses - fits), 0.0, 1.0);
}

// Smooth maximum (a^p + b^p)^(1/p) of two non-negative times, scaled by the larger so that
// large p does not overflow; p = 1 is the sum, p -> infinity the maximum.
double smooth_max(double a, double b, double p) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (!(hi > 0)) return 0;
  return hi * std::pow(1.0 + std::pow(lo / hi, p), 1.0 / p);
}

// One GEMM of m x n x k without the fixed time per kernel: the compute roofline at the
// shape's efficiency and, with gemm_roofline_exponent p > 0, the memory roofline of its
// operands (A m x k and B k x n at the dtype's width, a BF16 C m x n written) at hbm_bw x hbm,
// combined as a smooth maximum. An accumulating GEMM (beta 1: c_bytes above 2 are C read and
// written in equal parts, GemmShape::c_bytes) moves part of its C after that maximum, in the
// epilogue that follows each tile's k loop:
// - FP32 C (8 B per element: a weight gradient into fp32 main grads) moves all of it after:
//   the runner's expert weight gradients (validation/measured/h200/train_suite*/, a
//   development set) ran -4 %, -10 %, -20 %, -33 % too fast at 4096, 2048, 1024, 512 tokens
//   per expert (Mixtral; DeepSeek's slice -12 % to -31 %) with the write hidden under the
//   maximum, an error growing as k shrinks as serial C traffic predicts; with all of it after,
//   within about +-10 % at every k.
// - BF16 C (4 B: the router's dgrad adding into the layer's input gradient) moves only its read
//   after: bench moe's router dgrads at k = 64 and 128 experts are within 5 % that way and
//   19-27 % too slow with all of C after (calibration inputs, session 10).
// Why the two epilogues differ (cuBLASLt's kernel choice per output type is the candidate) is
// not established; each rule rests on its own measurements.
// - A BF16 C written once (c_bytes 2): gemm_c_write_exposed of it follows the maximum. Each
//   output tile's epilogue stores C after its k loop and a persistent kernel hides only part of
//   the store under the next tile's math: lcm-exec's GEMMs of 6-201 MB outputs over k = 256-4096
//   (validation/measured/h200/session15/short_k_gemm_bf16.json, a development set and a
//   calibration input) run slower than the maximum prices by about 0.5-0.7 of their C write at
//   the HBM rate, at every k; the time grows with the output, not with 1 / k.
// - An accumulating BF16 C larger than L2 (gemm_accumulate_miss_bw f < 1): C was just written
//   by the op before (the experts' path of dX), so L2 still holds about l2_bytes / 2 of it; the
//   rest of C's read misses, and the missing part's read-modify-write moves at f x the rate.
//   The miss share 1 - (l2_bytes / 2) / C keeps growing with C (session 16: the earlier linear
//   ramp, full at l2_bytes, priced C of 100-190 MB 13-14 % too fast); C's traffic takes
//   (1 - miss) / rate + miss / (f x rate) per byte. bench moe's router input gradients (K = 8-128
//   experts, C = 17-189 MB; every H200 set, development data) move 2C at 4.9 TB/s at 17 MB and
//   at 2.6 TB/s from 130 MB up; `lcm calibrate` fits f.
double c_bandwidth_share(double c_bytes_resident, const HardwareSpec& hw) {
  const double f = hw.efficiency.gemm_accumulate_miss_bw;
  const double l2 = hw.gpu.l2_bytes;
  if (!(f < 1.0) || !(f > 0) || !(l2 > 0) || !(c_bytes_resident > 0)) return 1.0;
  const double miss = std::clamp(1.0 - 0.5 * l2 / c_bytes_resident, 0.0, 1.0);
  return 1.0 / ((1.0 - miss) + miss / f);
}

double one_gemm_time(double m, double n, double k, DType dtype, const HardwareSpec& hw, double c_bytes = 2.0) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double t_compute = 2.0 * m * n * k / (peak_flops(dtype, hw) * dims_efficiency(m, n, k, dtype, hw));
  const double p = hw.efficiency.gemm_roofline_exponent;
  // The memory stream is issued by the CTAs of the output tiles: fewer tiles than SMs leave
  // part of the GPU's load bandwidth idle (gemm_fill_bw_exponent; bench moe's router GEMMs of
  // 16-56 tiles move their operand at 2.4-3.3 TB/s, those of 64-128 tiles at 3.8-4.2).
  const double bw = hw.gpu.hbm_bw * hw.efficiency.hbm * sm_fill(m, n, k, hw.efficiency.gemm_fill_bw_exponent, hw);
  if (!(p > 0) || !(bw > 0)) return t_compute;
  const double width = dtype_bytes(dtype);
  // C bytes inside the maximum and after it: a BF16 C written once (2 B) inside, less the
  // exposed share (gemm_c_write_exposed) after; an accumulating BF16 C (4 B) its write inside and
  // its read after, both at the L2-miss share of the rate; an accumulating FP32 C (8 B) all after.
  const bool bf16_accumulate = c_bytes > 2.0 && c_bytes < 8.0;
  const double c_after = c_bytes >= 8.0    ? c_bytes
                         : bf16_accumulate ? 0.5 * c_bytes
                                           : hw.efficiency.gemm_c_write_exposed * c_bytes;
  const double c_bw = bf16_accumulate ? bw * c_bandwidth_share(m * n * 0.5 * c_bytes, hw) : bw;
  const double t_memory = (m * k + k * n) * width / bw + m * n * (c_bytes - c_after) / c_bw;
  // Split-K's partial sums: each split past the first writes an FP32 m x n partial C that the
  // reduction reads back, after the k loops.
  const double t_split = (split_k(m, n, k, hw) - 1.0) * m * n * 8.0 / bw;
  return smooth_max(t_compute, t_memory, p) + m * n * c_after / c_bw + t_split;
}

}  // namespace

double gemm_efficiency(const GemmShape& g, const HardwareSpec& hw) { return shape_efficiency(g, DType::kBf16, hw); }

double gemm_time(const GemmShape& g, DType dtype, const HardwareSpec& hw) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const int groups = std::max(1, g.groups);
  // A grouped GEMM runs one GEMM per group (Transformer Engine's GroupedLinear launches a
  // cuBLAS GEMM per expert): the first pays the fixed time of a kernel, each later one, queued
  // behind it on the same stream, the back-to-back fixed time (grouped_gemm_fixed).
  const EfficiencySpec& e = hw.efficiency;
  const double next_fixed = e.grouped_gemm_fixed > 0 ? e.grouped_gemm_fixed : e.kernel_fixed;
  const double fixed = e.kernel_fixed + next_fixed * static_cast<double>(groups - 1);
  const double n = static_cast<double>(g.n);
  const double tokens = static_cast<double>(g.split_k ? g.k : g.m);
  const double other = static_cast<double>(g.split_k ? g.m : g.k);
  auto expert = [&](double t) {
    return g.split_k ? one_gemm_time(other, n, t, dtype, hw, g.c_bytes) : one_gemm_time(t, n, other, dtype, hw, g.c_bytes);
  };
  if (groups == 1 || g.loads.even()) return static_cast<double>(groups) * expert(tokens / groups) + fixed;
  // Uneven routing: each bucket's experts at their own token count (ops.hpp ExpertLoadShares).
  double t = 0;
  for (int b = 0; b < kExpertLoadBuckets; ++b) {
    const int count = (b + 1) * groups / kExpertLoadBuckets - b * groups / kExpertLoadBuckets;
    if (count > 0) t += count * expert(static_cast<double>(g.loads.share[static_cast<size_t>(b)]) * tokens / count);
  }
  return t + fixed;
}

namespace {

// One fused attention kernel (every layer of the op alike). `window_keys` > 0: a sliding-window
// kernel whose 128-query CTAs each process that many keys per row (its longest CTA, and the
// K/V working set of a head that its CTAs share in L2).
double one_attention_time(const AttentionShape& a, double flops, bool backward, const HardwareSpec& hw,
                          double window_keys = 0) {
  if (flops <= 0) return 0;
  const EfficiencySpec& e = hw.efficiency;
  const double kv = static_cast<double>(a.seq_kv) * a.work_fraction;
  // FlashAttention-2 (AttentionShape::flash2): its own fractions, half-point and head-dim rule
  // (below); the CTA tail, L2 and dropout terms shared (validation/measured/h100/flash2/).
  const double peak_share = a.flash2 ? (backward ? e.attention_flash2_bwd : e.attention_flash2_fwd)
                                     : (backward ? e.attention_bwd : e.attention_fwd);
  const double seq_half = a.flash2 ? e.attention_flash2_seq_half : e.attention_seq_half;
  assert(peak_share > 0);  // validation refuses flash2 without the profile's terms
  double eff = peak_share * kv / (kv + seq_half);
  // Head dims run in whole 64-wide tiles (kAttentionHeadDimTile): a kernel for d = 96 does
  // d = 128's work (session 18: causal 1 x 20K x 24 / 8 heads, d 96 took 97 % / 96 % of d 128's
  // forward / backward time, not 75 %; validation/measured/h200/heldout11/, a development
  // set). Every head dim measured before (64, 128, 192, 256; MLA's 192 / 128) is whole tiles.
  // FlashAttention-2 ships a kernel per 32-wide head dim (kFlash2HeadDimTile: its d-96 kernel ran
  // 18 % faster than d 128's time on heldout18's H100 probe, a development reading).
  const int64_t tile = a.flash2 ? kFlash2HeadDimTile : kAttentionHeadDimTile;
  const auto padded = [tile](int64_t d) { return static_cast<double>((d + tile - 1) / tile * tile); };
  const bool dims = a.head_dim_qk > 0 && a.head_dim_v > 0;  // synthetic shapes may leave them 0
  const double dq = dims ? padded(a.head_dim_qk) : static_cast<double>(a.head_dim_qk);
  const double dv = dims ? padded(a.head_dim_v) : static_cast<double>(a.head_dim_v);
  const double pad = dims ? (dq + dv) / static_cast<double>(a.head_dim_qk + a.head_dim_v) : 1.0;
  // FlashAttention-2 follows neither head-dimension curve of cuDNN's kernel: its d-128 kernel is
  // the tuned one and every other head dim runs at one lower share of it, forward and backward
  // (attention_flash2_other_head_dim; its H100 forward: 324 / 370 / 326 TFLOP/s at d 64 / 128 /
  // 256, non-causal 16K, validation/published/flashattention_h100.csv; heldout18's probe: d 64,
  // 96, 192 and 256 forwards 6-20 % and backwards 9-15 % below d 128's rate, where the wide-dim
  // exponent priced d 192 / 256 backwards 36-59 % too slow).
  if (a.flash2) {
    if (dims && 0.5 * (dq + dv) != 128.0) eff *= e.attention_flash2_other_head_dim;
  } else if (e.attention_head_dim_half > 0) {
    const double d = 0.5 * (dq + dv), h = e.attention_head_dim_half;
    eff *= (d / (d + h)) / (128.0 / (128.0 + h));
  }
  if (backward && !a.flash2 && e.attention_bwd_wide_dim_exponent > 0) {
    const double d = 0.5 * (dq + dv);
    if (d > 128) eff *= std::pow(128.0 / d, e.attention_bwd_wide_dim_exponent);
  }
  double t = pad * flops / (hw.gpu.peak_bf16_flops * eff);
  const double rows = static_cast<double>(a.batch * a.heads_q * a.seq_q);  // query rows of all heads
  const double wf = std::clamp(a.work_fraction, 1e-9, 1.0);
  // CTA tail: a CTA computes kAttentionBlockQ query rows of one head; the longest attends
  // min(1, 2 wf) of the keys (causal: the last block sees them all; a sliding window: the
  // window plus its own block), so its share of the work is that over s_q x wf of one of
  // b x heads (at most the whole head). Its time on one
  // SM, at num_sms times less than the whole GPU's rate, is t x num_sms x its share; the
  // kernel ends at least when it does, and `attention_cta_tail` of it shows after the even
  // share.
  if (e.attention_cta_tail > 0 && hw.gpu.num_sms > 0 && rows > 0) {
    const double block = std::min<double>(kAttentionBlockQ, static_cast<double>(a.seq_q));
    const double keys = window_keys > 0 ? std::min(1.0, window_keys / static_cast<double>(a.seq_kv))
                                        : std::min(1.0, 2.0 * wf);
    const double share = std::min(1.0, block * keys / (static_cast<double>(a.seq_q) * wf)) /
                         static_cast<double>(a.batch * a.heads_q);
    const double longest = t * hw.gpu.num_sms * share;
    t = std::max(t + e.attention_cta_tail * longest, longest);
  }
  // Forward K/V beyond L2: every CTA reads the K and V rows it attends, and concurrent CTAs of
  // one KV head share them in L2 while the head's K and V fit. Past that the forward slows by
  // a fixed share, the same on the H100 (3.35 TB/s) and the H200 (4.8 TB/s): the loads' latency
  // is exposed, their bandwidth is not the limit (validation/measured/h100/attention_l2/; until
  // session 30 an HBM-bound stream, which priced the H100's long forwards 34-67 % too slow).
  // The backward (2.5x the FLOPs per byte) does not slow. A sliding window's CTAs of one head
  // read overlapping key ranges in order: the working set is the keys one CTA touches
  // (window_keys), not the head's whole K and V. Under the CP ring each step's kernel streams
  // the one KV block it holds (kv_block keys).
  if (!backward && e.attention_l2_miss_slowdown > 0 && hw.gpu.l2_bytes > 0) {
    const double kv_head_bytes = attention_kv_head_bytes(a, window_keys);
    // A ramp of zero width (full <= start) is a step at start.
    const double start = e.attention_l2_miss_start * hw.gpu.l2_bytes;
    const double full = std::max(e.attention_l2_miss_full * hw.gpu.l2_bytes, start + 1.0);
    const double miss = l2_miss_share(kv_head_bytes, start, full);
    t *= 1.0 + e.attention_l2_miss_slowdown * miss;
  }
  // Dropout: a random number per score element the kernel computes, at its own rate (the
  // measured difference of whole kernels with and without it, so after the terms above).
  const double drop_rate = backward ? e.attention_dropout_bwd_rate : e.attention_dropout_fwd_rate;
  if (a.dropout && drop_rate > 0)
    t += rows * static_cast<double>(a.seq_kv) * wf / drop_rate;
  return t + e.kernel_fixed;
}

// Unfused attention (AttentionShape::unfused; the kernels and bytes: unfused_attention_traffic,
// ops.hpp): the batched GEMMs over the whole score matrix (a causal mask does not skip the upper
// triangle), each priced as one GEMM whose rows stack the batch x heads problems (cuBLAS runs
// them as one strided-batched kernel; at 512 or more rows per problem the per-dimension
// saturation terms this ignores are within a few per cent of flat), and the memory-bound kernels
// over the scores at efficiency.hbm_elementwise, each with its fixed time.
double unfused_attention_time(const AttentionShape& a, bool backward, const HardwareSpec& hw) {
  const UnfusedAttentionTraffic t = unfused_attention_traffic(a, backward);
  const double problems = static_cast<double>(a.batch * a.heads_q);
  const auto rows = [&](int64_t r) { return static_cast<int64_t>(problems * static_cast<double>(r)); };
  const auto gemm = [&](int64_t m, int64_t n, int64_t k) { return gemm_time(GemmShape{m, n, k}, DType::kBf16, hw); };
  const int64_t sq = a.seq_q, sk = a.seq_kv, dqk = a.head_dim_qk, dv = a.head_dim_v;
  const double gemms = backward ? gemm(rows(sq), sk, dv)     // dP = dO V^T
                                      + gemm(rows(sk), dv, sq)   // dV = P^T dO
                                      + gemm(rows(sq), dqk, sk)  // dQ = dS K
                                      + gemm(rows(sk), dqk, sq)  // dK = dS^T Q
                                : gemm(rows(sq), sk, dqk)        // S = Q K^T
                                      + gemm(rows(sq), dv, sk);  // O = P V
  const double scores = problems * static_cast<double>(sq) * static_cast<double>(sk);
  const EfficiencySpec& e = hw.efficiency;
  const double fixed = e.memory_fixed > 0 ? e.memory_fixed : e.kernel_fixed;
  const double bytes = scores * t.score_bytes + t.other_bytes;
  return gemms + bytes / (hw.gpu.hbm_bw * e.hbm_elementwise) + fixed * t.elementwise;
}

}  // namespace

double attention_kv_head_bytes(const AttentionShape& a, double keys) {
  const double resident = static_cast<double>(a.kv_block > 0 ? std::min(a.kv_block, a.seq_kv) : a.seq_kv);
  return 2.0 * (keys > 0 ? std::min(keys, resident) : resident) * static_cast<double>(a.head_dim_qk + a.head_dim_v);
}

// A sliding-window op stands for windowed_share of its layers windowed and the rest in full:
// its time is the two populations' times weighted by the share, each at its own FLOPs (the
// op's FLOPs per executed pair: the backward's factor included) and its own kernel shape.
double attention_time(const AttentionShape& a, double flops, bool backward, const HardwareSpec& hw) {
  if (flops <= 0) return 0;
  if (a.unfused) return unfused_attention_time(a, backward, hw);
  // The CP ring (p2p, and a2a+p2p's ring): one kernel per ring step, each on the KV block the
  // rank holds then (Transformer Engine's AttnFuncWithCPAndKVP2P; lcm-exec bench cp-attention
  // runs the same steps). Rank r holds the load-balanced chunks r and 2n-1-r of a sequence cut in
  // 2n: its q = s/n queries, the block B = s/n keys. Step 0 is causal over its own block (q x B
  // x 1/2 pairs); each of the n-1 others is q x B/2 pairs without a mask: all q over the first
  // half of the block (a block from an earlier rank) or the second half of q over the whole
  // block (a later rank's). Every step but the first has both kinds on some rank, and a rank's
  // next block waits for its predecessor, so the n-1 steps take the slower kind each. Each step
  // is a kernel of its own: its keys per query, CTA tail, L2 working set and fixed time. The
  // schedule gives the op s/n queries over all s keys (its FLOPs are the steps' sum); a
  // sliding window keeps the one-kernel form below.
  if (a.kv_block > 0 && a.kv_block < a.seq_kv && a.causal && a.window <= 0) {
    const double useful = attention_core_flops(a);
    if (!(useful > 0)) return one_attention_time(a, flops, backward, hw);
    const double per_flop = flops / useful;
    const int64_t n = std::max<int64_t>(2, (a.seq_kv + a.kv_block / 2) / a.kv_block);
    AttentionShape diag = a;
    diag.seq_kv = a.kv_block;
    diag.kv_block = 0;
    diag.work_fraction = 0.5;
    AttentionShape lower = diag;  // all queries, the first half of the block
    lower.seq_kv = std::max<int64_t>(1, a.kv_block / 2);
    lower.causal = false;
    lower.work_fraction = 1.0;
    AttentionShape upper = diag;  // the second half of the queries, the whole block
    upper.seq_q = std::max<int64_t>(1, a.seq_q / 2);
    upper.causal = false;
    upper.work_fraction = 1.0;
    const auto step = [&](const AttentionShape& s) {
      return one_attention_time(s, per_flop * attention_core_flops(s), backward, hw);
    };
    return step(diag) + static_cast<double>(n - 1) * std::max(step(lower), step(upper));
  }
  if (a.window <= 0 || !(a.windowed_share > 0)) return one_attention_time(a, flops, backward, hw);
  const double share = std::min(1.0, a.windowed_share);
  const double useful = attention_core_flops(a);
  if (!(useful > 0)) return one_attention_time(a, flops, backward, hw);
  const double per_flop = flops / useful;
  const AttentionShape f = attention_full_view(a);
  // The windowed kernel: each query row processes its window and attention_window_extra keys
  // more (the key tiles its 128-query block touches, partly masked), at the causal curve's
  // efficiency for that many keys; a window that covers the sequence is the causal kernel.
  AttentionShape w = f;
  double keys = 0;
  if (a.window < a.seq_kv) {
    const double extra = hw.efficiency.attention_window_extra;
    w.work_fraction = std::min(0.5, attention_windowed_view(a).work_fraction + extra / static_cast<double>(a.seq_kv));
    keys = static_cast<double>(a.window) + std::max(extra, static_cast<double>(kAttentionBlockQ));
  }
  const double tw = one_attention_time(w, per_flop * attention_core_flops(w), backward, hw, keys);
  return share >= 1.0 ? tw : share * tw + (1.0 - share) * one_attention_time(f, per_flop * attention_core_flops(f), backward, hw);
}

// A copy streams at efficiency.hbm (the rate `lcm calibrate` fits on lcm-exec's copies, the one
// the GEMM operand streams above use too); a step's norms, activations, permutations and
// optimizer kernels reach less of the bandwidth (efficiency.hbm_elementwise: the H200 probe's
// layer kernels averaged 0.70 where copies reached 0.85-0.90; session 23).
double memory_time(const MemoryShape& m, const HardwareSpec& hw) {
  if (m.bytes <= 0) return 0;
  const EfficiencySpec& e = hw.efficiency;
  const double rate = hw.gpu.hbm_bw * (m.copy ? e.hbm : e.hbm_elementwise);
  return m.bytes / rate + (e.memory_fixed > 0 ? e.memory_fixed : e.kernel_fixed);
}

double collective_time(const CollectiveShape& c, const GroupTopology& topo, const HardwareSpec& hw) {
  const int n = std::max(1, c.group_size);
  if (n <= 1 || c.message_bytes <= 0) return 0;
  const InterconnectSpec& ic = hw.interconnect;
  const EfficiencySpec& e = hw.efficiency;
  const double S = c.message_bytes;
  auto eff = [](double peak, double bytes, double half) { return peak * bytes / (bytes + half); };
  const bool intra = topo.nodes <= 1;
  // Per-rank bus bandwidth. Inside a node: NVLink. Across nodes, rings are NIC-bound: each
  // rank of the group drives its own NIC, so a group with r ranks per node moves r NICs'
  // worth per node while each rank also pushes (r-1)/r of its ring traffic over NVLink.
  const double kind_scale = c.kind == Collective::kAllGather || c.kind == Collective::kReduceScatter
                                ? e.nvlink_allgather_scale
                            : c.kind == Collective::kAllToAll ? e.nvlink_alltoall_scale
                            : c.kind == Collective::kSendRecv ? e.nvlink_sendrecv_scale
                                                              : 1.0;
  double nvl = eff(ic.nvlink_bw * e.nvlink * kind_scale, S, e.nvlink_half_bytes);
  if (e.nvlink_ramp_exponent != 1.0)
    nvl = ic.nvlink_bw * e.nvlink * kind_scale * std::pow(S / (S + e.nvlink_half_bytes), e.nvlink_ramp_exponent);
  const double nic = eff(ic.nic_bw * e.nic, S, e.nic_half_bytes);
  switch (c.kind) {
    case Collective::kAllReduce:
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      const double busbw = intra ? nvl : std::min(nvl, nic * topo.per_node);
      const double steps = c.kind == Collective::kAllReduce ? 2.0 * (n - 1) : static_cast<double>(n - 1);
      const double bus_bytes = S * bus_factor(c.kind, n);
      const double simple = e.collective_base + steps * (intra ? ic.nvlink_latency : ic.nic_latency) + bus_bytes / busbw;
      // NCCL's tuner runs a small ring collective with the LL protocol when that is faster:
      // a shorter step latency, a lower bus bandwidth and no pipeline ramp (specs.hpp).
      if (!intra || e.nvlink_ll <= 0) return simple;
      return std::min(simple, e.collective_base + steps * ic.nvlink_ll_latency + bus_bytes / (ic.nvlink_bw * e.nvlink_ll));
    }
    case Collective::kAllToAll: {
      // Each rank sends S/n to every peer: (per_node-1)/n of S over NVLink, the rest
      // through its own NIC (per-GPU NIC bandwidth does not aggregate for all-to-all).
      const double on_node = static_cast<double>(std::min(topo.per_node, n) - 1) / n;
      const double off_node = intra ? 0.0 : static_cast<double>(n - topo.per_node) / n;
      const double t_nvl = S * on_node / nvl;
      const double t_nic = off_node > 0 ? S * off_node / nic : 0.0;
      const double latency = e.collective_base + (intra ? ic.nvlink_latency : ic.nic_latency);
      if (c.dedup.dest_ranks > 0 && !intra) {  // issue 12: DeepEP / HybridEP node de-duplication (comm.cpp)
        const DedupTraffic d = dedup_traffic(c, topo.nodes, std::min(topo.per_node, n));
        return latency + std::max(d.nvlink_bytes / nvl, d.nic_bytes / nic);
      }
      return latency + std::max(t_nvl, t_nic);
    }
    case Collective::kSendRecv: {
      // One neighbour; a group spanning nodes has a neighbour off node.
      return e.collective_base + (intra ? ic.nvlink_latency + S / nvl : ic.nic_latency + S / nic);
    }
  }
  return 0;
}

double op_time(const Op& op, const MeshTopology& topo, const HardwareSpec& hw) {
  switch (op.kind) {
    case OpKind::kGemm: return gemm_time(op.gemm, op.dtype, hw);
    case OpKind::kAttention: return attention_time(op.attn, op.flops, op.pass == Pass::kBwd, hw);
    case OpKind::kMemoryBound: return memory_time(op.mem, hw);
    case OpKind::kCollective:
    case OpKind::kSendRecv: {
      // Expert-layer collectives name their group: the expert-TP group or the ETP x EP
      // block of the expert grid; the rest run on their dimension's group.
      GroupTopology t = op.coll.group == CommGroup::kExpertTp     ? topo.expert_tp
                        : op.coll.group == CommGroup::kExpertTpEp ? topo.expert_tp_ep
                                                                   : topo[op.coll.dim];
      if (t.size != op.coll.group_size) {  // a sub-group (e.g. hierarchical CP levels)
        t.size = op.coll.group_size;
        t.per_node = std::min(t.per_node, t.size);
        t.nodes = (t.size + t.per_node - 1) / t.per_node;
      }
      return collective_time(op.coll, t, hw);
    }
  }
  return 0;
}

}  // namespace lcm
