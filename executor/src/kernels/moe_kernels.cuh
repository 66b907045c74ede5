// Device kernels of `lcm-exec bench moe` behind plain C++ launchers (moe.hpp describes the
// routing, capacity and layout rules they implement). Everything is enqueued on the given
// stream; launch errors throw ExecError. bf16 activations and weights, fp32 logits, gate
// weights and accumulation.
//
// defines: fill_bf16_scaled, RouterDesc, moe_router_topk, moe_rank, moe_offsets,
//          moe_probs_threshold, moe_mark_ties, moe_keep_probs, moe_keep_position, moe_scatter,
//          moe_swiglu_fwd, moe_swiglu_bwd, moe_unpermute_fwd, moe_unpermute_bwd,
//          moe_permute_bwd, moe_topk_bwd, moe_count_wrong_permute, ref_rowmat
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lcm::exec::kernels {

// p[i] = bf16(uniform_pm1(seed, base + i) * scale), i in [0, n).
void fill_bf16_scaled(void* p, size_t n, uint64_t seed, uint64_t base, float scale, cudaStream_t s);

struct RouterDesc {
  int tokens = 0, experts = 0, topk = 0, groups = 0, topk_groups = 0;
  int sigmoid = 0;
  uint64_t seed = 0;        // routing term seed
  uint64_t token_base = 0;  // global id of this rank's token 0
  const float* log_w = nullptr;  // device [E]: log p_e; null: no synthetic term
};

// logits [T, E] (the router GEMM's output) += log p_e + G(seed, token, e) in place; then the
// top-k of every token: idx [T, k], gate weights w [T, k], and eid [T k] = idx (for the
// rank passes).
void moe_router_topk(const RouterDesc& d, float* logits, int32_t* idx, float* w, int32_t* eid, cudaStream_t s);

// Token-order rank of every entry among the entries of its expert: pos[a] for eid[a] >= 0
// (-1 elsewhere), totals[e] = entries of expert e. Scratch: chunk_counts of
// moe_rank_chunks(n) x E ints.
int64_t moe_rank_chunks(int64_t n);
void moe_rank(const int32_t* eid, int64_t n, int experts, int32_t* chunk_counts, int32_t* totals, int32_t* pos,
              cudaStream_t s);
// kept[e] = cap < 0 ? totals[e] : min(totals[e], cap); offset[e] = exclusive scan of kept.
void moe_offsets(const int32_t* totals, int experts, int64_t cap, int32_t* kept, int32_t* offset, cudaStream_t s);

// `probs` policy: for each expert with more than `cap` assignments, the bits of its cap-th
// largest gate weight (thr) and how many entries equal to it are kept (need); need = -1
// means keep all.
void moe_probs_threshold(const int32_t* idx, const float* w, int64_t n, const int32_t* counts, int experts,
                         int64_t cap, uint32_t* thr, int32_t* need, cudaStream_t s);
// tie[a] = idx[a] when its weight equals its expert's threshold, else -1.
void moe_mark_ties(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                   int32_t* tie, cudaStream_t s);
// eid_kept[a] = idx[a] if kept (weight above the threshold, or a tie whose rank < need), else -1.
void moe_keep_probs(const int32_t* idx, const float* w, int64_t n, const uint32_t* thr, const int32_t* need,
                    const int32_t* tie_pos, int32_t* eid_kept, cudaStream_t s);
// `position` policy: eid_kept[a] = idx[a] if pos[a] < cap.
void moe_keep_position(const int32_t* idx, const int32_t* pos, int64_t n, int64_t cap, int32_t* eid_kept,
                       cudaStream_t s);

// row_of[a] = offset[e] + pos[a] for kept entries (eid_kept[a] = e >= 0), else -1; and
// send[row_of[a]] = x[a / topk] (hidden bf16 values, 16-byte copies; hidden % 8 == 0).
void moe_scatter(const void* x, int64_t hidden, const int32_t* eid_kept, const int32_t* pos, const int32_t* offset,
                 int64_t n, int topk, int32_t* row_of, void* send, cudaStream_t s);

// a[r, c] = silu(h1[r, c]) h1[r, f + c] (gate, then up); the backward writes dh1.
void moe_swiglu_fwd(const void* h1, void* a, int64_t rows, int64_t ffn, cudaStream_t s);
void moe_swiglu_bwd(const void* h1, const void* da, void* dh1, int64_t rows, int64_t ffn, cudaStream_t s);

// y[t] = sum over kept j of w[t, j] back[row_of[t k + j]] (fp32 sum, bf16 out).
void moe_unpermute_fwd(const void* back, const int32_t* row_of, const float* w, int64_t tokens, int topk,
                       int64_t hidden, void* y, cudaStream_t s);
// dyperm[row] = w dout[t]; dprob[a] = dout[t] . back[row] (0 when dropped).
void moe_unpermute_bwd(const void* dout, const void* back, const int32_t* row_of, const float* w, int64_t tokens,
                       int topk, int64_t hidden, void* dyperm, float* dprob, cudaStream_t s);
// dx[t] = sum over kept j of dxperm[row_of[t k + j]].
void moe_permute_bwd(const void* dxperm, const int32_t* row_of, int64_t tokens, int topk, int64_t hidden, void* dx,
                     cudaStream_t s);
// dlogits [T, E] bf16 from the gate weights' gradient dprob [T, k] (softmax over the top-k
// logits, or normalised sigmoid); zero outside the selected experts.
void moe_topk_bwd(const RouterDesc& d, const float* logits, const int32_t* idx, const float* w, const float* dprob,
                  void* dlogits, cudaStream_t s);
// *wrong += elements of kept rows where send[row_of[a]] differs from x[a / topk] (bitwise).
void moe_count_wrong_permute(const void* x, const void* send, const int32_t* row_of, int64_t tokens, int topk,
                             int64_t hidden, unsigned long long* wrong, cudaStream_t s);

// Reference (no tensor cores, fp32): out[r, j] = sum_i in[r, i] W(i, j) and mag[r, j] =
// sum_i |in[r, i] W(i, j)|, W(i, j) = trans ? W[j K + i] : W[i N + j], W bf16.
void ref_rowmat(const float* in, int rows, int64_t K, const void* W, int64_t N, bool trans, float* out, float* mag,
                cudaStream_t s);

}  // namespace lcm::exec::kernels
