// CPU references of the training runner's kernels (kernels.hpp): the same functions on host
// arrays, in float (bf16 tensors are passed as floats holding bf16 values; outputs are not
// rounded to bf16; reductions accumulate in double). The GPU tests compare the kernels with
// these, the host tests check these against hand-derived values and finite differences.
#pragma once

#include <cstdint>
#include <vector>

#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/moe_block.hpp"

namespace lcm::exec::train::ref {

float bf16_round(float v);  // round to nearest even, as __float2bfloat16_rn

void cast_to_bf16(const float* in, float* out, int64_t n);  // out = bf16_round(in)
void add(const float* a, const float* b, float* out, int64_t n);

void embedding_fwd(const int32_t* tokens, const float* table, float* out, int64_t rows, int64_t h);
void embedding_bwd(const int32_t* tokens, const float* dout, float* dtable, int64_t rows, int64_t h);  // +=

void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t h, float eps);
void rmsnorm_bwd(const float* x, const float* w, const float* rstd, const float* dy, float* dx, float* dw, int64_t rows,
                 int64_t h);  // dw +=

void rope_table(const float* inv_freq, float* cos_tab, float* sin_tab, int64_t seq, int64_t half, float mscale);
void rope_fwd(float* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim);
void rope_bwd(float* dx, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim);

void qkv_split_rope(const float* qkv, float* q, float* k, float* v, const float* cos_tab, const float* sin_tab,
                    int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim, bool rotate);
void qkv_join_rope(const float* dq, const float* dk, const float* dv, float* dqkv, const float* cos_tab,
                   const float* sin_tab, int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim,
                   bool rotate);
void mla_assemble_kv(const float* kvu, const float* kpe, float* k, float* v, int64_t rows, int64_t heads, int64_t dn,
                     int64_t dr, int64_t dv);
void mla_split_kv_grad(const float* dk, const float* dv_in, float* dkvu, float* dkpe, int64_t rows, int64_t heads,
                       int64_t dn, int64_t dr, int64_t dv);
void swiglu_fwd(const float* h, float* a, int64_t rows, int64_t f);
void swiglu_bwd(const float* h, const float* da, float* dh, int64_t rows, int64_t f);

void cross_entropy_fwd_bwd(const float* logits, const int32_t* labels, float* loss, float* dlogits, int64_t rows,
                           int64_t vocab, int64_t ld, float grad_scale);

void sum_squares(const float* g, int64_t n, double* acc);  // +=
// model[i] = bf16_round(master[i]) after the update.
void adamw_step(float* master, float* model, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamParams& p, const float* grad_scale);
void clip_coefficient(const double* sumsq, float max_norm, float* scale, float* norm);

// ---- MoE block (moe_block.hpp), in double ----------------------------------------------
// Parameters in MoeBlock's layouts (moe_block.cpp): router [E, h], fc1 [E, 2f, h], fc2
// [E, h, f], shared_fc1 [2fs, h], shared_fc2 [h, fs], expert_bias [E] (empty when unused).
struct MoeParams {
  std::vector<float> router, fc1, fc2, shared_fc1, shared_fc2, expert_bias;
};
struct MoeResult {
  std::vector<float> y;           // [T, h]
  double aux_loss = 0;            // aux + z, scaled by their coefficients
  double y_dot_dy = 0;            // sum(dy * y) in double (when dy is given)
  std::vector<int32_t> load, kept;  // per expert, before and after drops
  // Gradients (filled when dy is given): dL/dx and the parameters', L = sum(dy * y) +
  // loss_scale * aux_loss.
  std::vector<float> dx, d_router, d_fc1, d_fc2, d_shared_fc1, d_shared_fc2;
};
// round_bf16: round where the GPU stores bf16 (expert activations, y, dx, the permuted
// gradients, dlogits), for comparing with MoeBlock; false gives the exact function (finite
// differences). dy may be null (forward only).
MoeResult moe_block(const MoeBlockConfig& c, const MoeParams& p, const std::vector<float>& x, const float* dy,
                    float loss_scale, bool round_bf16);

}  // namespace lcm::exec::train::ref
