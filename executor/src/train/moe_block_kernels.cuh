// Kernels of the training MoE block (moe_block.cpp) that the bench's MoE kernels
// (kernels/moe_kernels.cuh) do not cover: routing on real logits with the expert bias and
// the statistics of the aux and z losses, their finalisation, the router backward with the
// losses' gradients, and the permutation backward that accumulates into dx.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lcm/executor/train/kernels.hpp"

namespace lcm::exec::train::moe {

struct RouteDesc {
  int tokens = 0, experts = 0, topk = 0, groups = 0, group_topk = 0;
  bool sigmoid = false;
  bool aux = false;  // collect the aux loss statistics (counts of the plain top-k, sums of the scores)
  bool z = false;    // collect sum over tokens of logsumexp^2
};

// Per token t of logits [T, E] (fp32): selection scores (softmax: the logits; sigmoid:
// sigmoid(l) + bias[e], bias bf16 or null), optional group-limited top-k, the top-k idx [T, k]
// (best first, ties to the lower expert), gate weights w [T, k] (softmax over the selected
// logits; sigmoid: s / (sum of selected s + 1e-20) when k > 1, without the bias) and
// eid = idx. Statistics (written here; only those `d` asks for): aux_count[e] = tokens whose
// plain top-k of the scores (no bias, no groups) holds e; aux_psum[e] = sum over tokens of the
// aux scores (softmax over all experts, or sigmoid normalised over all experts); *zsum = sum
// of lse^2. The float sums run in a fixed order (per-block partials, then the blocks in
// order), so they are bit-identical from run to run.
void route(const RouteDesc& d, const float* logits, const bf16* bias, int32_t* idx, float* w, int32_t* eid,
           int32_t* aux_count, float* aux_psum, float* zsum, cudaStream_t s);

// *out += aux_coeff E / (k T^2) sum_e psum[e] count[e] + z_coeff zsum / T (Megatron's
// switch_load_balancing_loss_func and z_loss_func); the terms whose coefficient is 0 are skipped.
void loss_finalize(const RouteDesc& d, const int32_t* aux_count, const float* aux_psum, const float* zsum,
                   float aux_coeff, float z_coeff, float* out, cudaStream_t s);

// dlogits [T, E] (bf16) = gradient through the gate weights (dprob [T, k], 0 for dropped
// entries) + aux_g count[e] through the aux scores + z_g lse softmax (z_g = loss_scale z_coeff
// 2 / T; aux_g = loss_scale aux_coeff E / (k T^2); 0 switches a term off).
void router_bwd(const RouteDesc& d, const float* logits, const int32_t* idx, const float* w, const float* dprob,
                const int32_t* aux_count, float aux_g, float z_g, bf16* dlogits, cudaStream_t s);

// offset[e] = e cap (expert inputs padded to capacity).
void padded_offsets(int experts, int64_t cap, int32_t* offset, cudaStream_t s);

// dx[t] (+)= sum over kept j of dxperm[row_of[t k + j]] (accumulate: add to dx's values).
void permute_bwd(const bf16* dxperm, const int32_t* row_of, int64_t tokens, int topk, int64_t hidden, bf16* dx,
                 bool accumulate, cudaStream_t s);

}  // namespace lcm::exec::train::moe
