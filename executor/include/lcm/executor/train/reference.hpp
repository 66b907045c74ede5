// CPU references of the training runner's kernels (kernels.hpp): the same functions on host
// arrays, in float (bf16 tensors are passed as floats holding bf16 values; outputs are not
// rounded to bf16; reductions accumulate in double). The GPU tests compare the kernels with
// these, the host tests check these against hand-derived values and finite differences.
#pragma once

#include <cstdint>
#include <vector>

#include "lcm/executor/train/kernels.hpp"

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

void swiglu_fwd(const float* h, float* a, int64_t rows, int64_t f);
void swiglu_bwd(const float* h, const float* da, float* dh, int64_t rows, int64_t f);

void cross_entropy_fwd_bwd(const float* logits, const int32_t* labels, float* loss, float* dlogits, int64_t rows,
                           int64_t vocab, int64_t ld, float grad_scale);

void sum_squares(const float* g, int64_t n, double* acc);  // +=
// model[i] = bf16_round(master[i]) after the update.
void adamw_step(float* master, float* model, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamParams& p, const float* grad_scale);
void clip_coefficient(const double* sumsq, float max_norm, float* scale, float* norm);

}  // namespace lcm::exec::train::ref
