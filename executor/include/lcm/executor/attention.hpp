// Causal fused attention with GQA: problem description, tensor layout, FLOP convention,
// and the correctness checker shared by `lcm-exec bench attention`, the reference kernels
// (attention_ref.cu) and the tests. Nothing here needs cuDNN or a GPU.
//
// Layout: every tensor is indexed [b, h, s, d] and stored BSHD (token-major, the layout a
// QKV projection produces and Megatron / Transformer Engine feed to cuDNN): element
// (b, h, s, d) of a tensor with H heads sits at ((b * S + s) * H + h) * D + d. Q, O, dO and
// dQ have h_q heads; K, V, dK and dV have h_kv heads; query head h reads KV head
// h / (h_q / h_kv). The softmax statistics (log-sum-exp, fp32) are [b, h_q, s, 1], contiguous.
//
// FLOPs (FlashAttention convention, the model's attn.core op): forward 4 b s^2 h_q d, halved
// when causal; backward 2.5 x forward (5 matmuls against 2, the recomputed QK^T included).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lcm/executor/compare.hpp"
#include "lcm/model/schedule.hpp"

namespace lcm::exec {

struct AttentionProblem {
  int64_t b = 1, s = 4096, hq = 32, hkv = 8, d = 128;
  int64_t dv = 0;  // head dim of V, O, dO, dV when it differs from d (MLA: 128 with d 192); 0: d
  int64_t vdim() const { return dv > 0 ? dv : d; }
  bool causal = true;
  // Sliding window (causal only): query i attends keys i - window .. i (Transformer Engine's
  // window (window, 0), cuDNN's left bound window + 1). 0 = the whole causal prefix.
  int64_t window = 0;
  float scale = 0;  // softmax scale; 0 means 1 / sqrt(d)
  // Ring attention (cp_ring.hpp) runs blocks with fewer keys than queries and writes the
  // statistics of a query sub-range into a longer array: s_kv keys (0: s; causal needs
  // s_kv = s) and the per-head stride of the Stats rows (0: s). Both default to plain attention.
  int64_t s_kv = 0;
  int64_t stats_stride = 0;
  int64_t skv() const { return s_kv > 0 ? s_kv : s; }
  int64_t sstride() const { return stats_stride > 0 ? stats_stride : s; }

  // From the model's shape (seq_kv = seq_q, head_dim_v = head_dim_qk) and the softmax scale
  // (0: 1 / sqrt(d)); and back (work_fraction 0.5 when causal).
  static AttentionProblem of(const AttentionShape& a, double scale);
  AttentionShape shape() const;

  float softmax_scale() const;
  int64_t group() const { return hkv > 0 ? hq / hkv : 0; }
  std::string shape_text() const;  // "BxSxHQxHKVxD", e.g. "1x16384x32x8x128"
  void validate() const;           // throws UsageError

  double fwd_flops() const;
  double bwd_flops() const;  // the model's backward factor (FlashAttention: 2.5x forward)
  // Elements of the q-shaped (Q, O, dO, dQ) and kv-shaped (K, V, dK, dV) tensors and of the stats.
  int64_t q_elems() const { return b * s * hq * d; }
  int64_t kv_elems() const { return b * skv() * hkv * d; }
  int64_t stat_elems() const { return b * hq * s; }
  // Bytes of one buffer set: Q K V O dO dQ dK dV in bf16 plus the fp32 stats.
  double set_bytes() const;

  // Element strides of the [b, h, s, d] index (BSHD storage).
  std::array<int64_t, 4> q_strides() const { return {s * hq * d, d, hq * d, 1}; }
  std::array<int64_t, 4> kv_strides() const { return {skv() * hkv * d, d, hkv * d, 1}; }
  // V (and dV) and O (and dO) with head dim vdim(); equal to kv_strides() / q_strides() when dv is 0.
  std::array<int64_t, 4> v_strides() const { return {skv() * hkv * vdim(), vdim(), hkv * vdim(), 1}; }
  std::array<int64_t, 4> o_strides() const { return {s * hq * vdim(), vdim(), hq * vdim(), 1}; }
  int64_t q_offset(int64_t bi, int64_t h, int64_t i, int64_t t) const { return ((bi * s + i) * hq + h) * d + t; }
  int64_t kv_offset(int64_t bi, int64_t h, int64_t j, int64_t t) const { return ((bi * skv() + j) * hkv + h) * d + t; }
  int64_t stat_offset(int64_t bi, int64_t h, int64_t i) const { return (bi * hq + h) * s + i; }
};

// Rows a check compares. Full: every (b, h, row). Sampled (large problems): query rows
// {0, 1, s-1} plus random ones of every (b, h_q); key rows for dK/dV from the last
// `kv_tail` rows (row s-1 included) of every (b, h_kv): under a causal mask those depend on
// the last kv_tail query rows only, so their reference costs O(kv_tail * s) per head instead
// of the O(s^2) a key row near the start would.
struct AttnRow {
  int32_t b = 0, h = 0, i = 0;
};
struct AttnSample {
  bool full = false;
  std::vector<AttnRow> q_rows;   // h is a query head
  std::vector<AttnRow> kv_rows;  // h is a KV head
  int64_t kv_first_query = 0;    // the reference needs LSE and D of query rows >= this
};
inline constexpr int64_t kAttnFullCheckMaxSeq = 2048;
AttnSample attention_sample(const AttentionProblem& p, bool full, uint64_t seed, int q_rows_per_head = 16,
                            int kv_rows_per_head = 8, int64_t kv_tail = 128);

// One output's comparison. Tolerance per element: (|ref| + mag) x 2^-7, where mag is the
// reference's magnitude term (forward: sum_j p_j |v_j|; gradients: the sum of the absolute
// values of the terms of the reference's sum). bf16 outputs round at 2^-9 relative; cuDNN
// rounds P (and dS) to bf16 before its matmuls, which moves each term by up to 2^-9 of its
// size; 2^-7 leaves a factor 2 on the sum of both. LSE (fp32): 2e-3 x max(1, |ref|) per
// element. The relative L2 error over the checked elements must stay under rel_l2_limit
// (O 1e-2, gradients 2e-2, LSE 2e-3). Both use the one result comparer (compare.hpp); the
// bench fills `nonfinite` from a scan of the whole output.
Comparison check_attention_values(const std::vector<float>& got, const std::vector<float>& ref,
                                  const std::vector<float>& mag, double rel_l2_limit);
Comparison check_attention_lse(const std::vector<float>& got, const std::vector<float>& ref);

// The outputs checked per point, in this order.
enum class AttnOut : uint8_t { kO, kLse, kDq, kDk, kDv };
inline constexpr int kAttnOuts = 5;
const char* to_string(AttnOut o);
struct AttnCheckSet {
  std::array<Comparison, kAttnOuts> out{};
  Comparison& operator[](AttnOut o) { return out[static_cast<size_t>(o)]; }
  const Comparison& operator[](AttnOut o) const { return out[static_cast<size_t>(o)]; }
  bool fwd_ok() const { return (*this)[AttnOut::kO].ok() && (*this)[AttnOut::kLse].ok(); }
  bool bwd_ok() const { return (*this)[AttnOut::kDq].ok() && (*this)[AttnOut::kDk].ok() && (*this)[AttnOut::kDv].ok(); }
  void merge(const AttnCheckSet& o);  // Comparison::merge of each output
};

}  // namespace lcm::exec
