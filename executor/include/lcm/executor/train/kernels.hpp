// Kernels of the training runner's dense parts, forward and backward (kernels.cu), with
// their CPU references (reference.cpp, same signatures on host arrays, in float). bf16
// storage, fp32 math; parameter gradients accumulate (+=) into fp32 main-grad buffers, as
// Megatron's gradient buffers do across micro-batches. All launches go on `s`; nothing
// synchronises. Row-major: a row is one token (sequence-major within a micro-batch,
// [b, s] flattened, b slowest), as the runner lays activations out.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace lcm {
struct RopeScaling;  // lcm/model/specs.hpp (C++20; this header is also read by nvcc in C++17)
}

namespace lcm::exec::train {

using bf16 = __nv_bfloat16;

// ---- parameters and casts --------------------------------------------------------
// master[i] = std * N(0, 1) from (seed, i) (Box-Muller on a counter-based hash), or a
// constant when std == 0 (`value`); the same numbers on every GPU and on the host
// (init_value()) so a PyTorch reference can rebuild the weights from the seed.
void init_params(float* master, int64_t n, float std, float value, uint64_t seed, cudaStream_t s);
float init_value(uint64_t seed, int64_t i, float std, float value);  // host, bit-identical
void cast_to_bf16(const float* in, bf16* out, int64_t n, cudaStream_t s);
void cast_to_f32(const bf16* in, float* out, int64_t n, cudaStream_t s);

// ---- elementwise -------------------------------------------------------------------
void add(const bf16* a, const bf16* b, bf16* out, int64_t n, cudaStream_t s);  // out = a + b (out may alias a)
void add_inplace(bf16* acc, const bf16* b, int64_t n, cudaStream_t s);          // acc += b

// ---- embedding ---------------------------------------------------------------------
// out[r, :] = table[tokens[r], :]; the backward scatters dout rows into dtable (fp32, +=):
// the rows of one token id are summed in row order and the sum added once (a device sort by
// token id, no atomics: bit-identical from run to run).
// Token ids outside [0, vocab) are a bug in the data path (checked on the host before).
void embedding_fwd(const int32_t* tokens, const bf16* table, bf16* out, int64_t rows, int64_t h, cudaStream_t s);
void embedding_bwd(const int32_t* tokens, const bf16* dout, float* dtable, int64_t rows, int64_t h, cudaStream_t s);

// ---- RMSNorm ------------------------------------------------------------------------
// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per row (kept in fp32 for the backward).
// dx = rstd * (dy*w - x * rstd^2 * mean(dy*w*x)); dw += sum over rows of dy * x * rstd.
void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, float* rstd, int64_t rows, int64_t h, float eps,
                 cudaStream_t s);
void rmsnorm_bwd(const bf16* x, const bf16* w, const float* rstd, const bf16* dy, bf16* dx, float* dw,
                 int64_t rows, int64_t h, cudaStream_t s);

// ---- rotary position embedding -----------------------------------------------------
// Frequencies of each rotary pair (rot_dim / 2 of them) from the scenario's base and
// scaling (none, linear / position interpolation, llama3, YaRN; the formulas of the
// HF / Megatron implementations; YaRN's attention factor returned in *mscale, 1 otherwise).
struct RopeParams {
  double base = 10000.0;
  int type = 0;  // 0 none, 1 linear, 2 llama3, 3 yarn
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position = 0;                      // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn
  double mscale = 1.0, mscale_all_dim = 0.0;              // yarn
};
std::vector<float> rope_inv_freq(const RopeParams& p, int64_t rot_dim, float* mscale);
// YaRN's attention factor 0.1 m ln(scale) + 1 (1 when scale <= 1; Megatron yarn_get_mscale).
double yarn_mscale(double scale, double m);
// The scenario's rotary base and scaling (ModelSpec::rotary_base, rope_scaling) as RopeParams,
// with the defaults of Llama 3.1 (low 1, high 4) and of Megatron's YaRN (beta_fast 32,
// beta_slow 1, mscale 1, mscale_all_dim 0) for what the spec does not carry. Throws
// ExecError for dynamic NTK (not a training-time scaling) and for llama3 / YaRN without
// original_max_position_embeddings.
RopeParams rope_params(double rotary_base, const RopeScaling& s);
// cos/sin table [seq, rot_dim/2] (float) for positions 0..seq-1, times mscale.
void rope_table(const float* inv_freq_dev, float* cos_tab, float* sin_tab, int64_t seq, int64_t half, float mscale,
                cudaStream_t s);
// In place on x [rows, heads, head_dim]: the first rot_dim channels of each head rotate in
// NeoX style (pairs (i, i + rot_dim/2)), the rest pass through; row r has position r % seq.
// The backward applies the inverse rotation to the gradient (also in place).
void rope_fwd(bf16* x, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim, cudaStream_t s);
void rope_bwd(bf16* dx, const float* cos_tab, const float* sin_tab, int64_t rows, int64_t seq, int64_t heads,
              int64_t head_dim, int64_t rot_dim, cudaStream_t s);

// The fused QKV projection's rows [rows, (hq + 2 hkv) * head_dim] = [q heads | k heads |
// v heads] split into BSHD tensors q [rows, hq, d], k and v [rows, hkv, d] in one pass, Q and
// K turned by RoPE over the whole head (NeoX pairs, as rope_fwd) when `rotate`; the backward
// joins dq, dk (turned back when `rotate`, as rope_bwd) and dv into the fused rows. The
// same numbers as copying and then calling rope_fwd / rope_bwd.
void qkv_split_rope(const bf16* qkv, bf16* q, bf16* k, bf16* v, const float* cos_tab, const float* sin_tab,
                    int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim, bool rotate, cudaStream_t s);
void qkv_join_rope(const bf16* dq, const bf16* dk, const bf16* dv, bf16* dqkv, const float* cos_tab,
                   const float* sin_tab, int64_t rows, int64_t seq, int64_t hq, int64_t hkv, int64_t head_dim,
                   bool rotate, cudaStream_t s);

// ---- multi-latent attention (MLA) ----------------------------------------------------
// Forward: the per-head K [rows, heads, dn + dr] and V [rows, heads, dv] out of the up
// projection's output kvu [rows, heads, dn + dv] ([k_nope | v] per head) and the rotated
// shared key kpe [rows, dr]: K = [k_nope | kpe], V = v (Megatron's split and cat).
// Backward: dkvu [rows, heads, dn + dv] = [dK[..., :dn] | dV] and dkpe [rows, dr] = the sum
// over heads of dK[..., dn:] (fp32, heads in order: bit-identical from run to run).
void mla_assemble_kv(const bf16* kvu, const bf16* kpe, bf16* k, bf16* v, int64_t rows, int64_t heads, int64_t dn,
                     int64_t dr, int64_t dv, cudaStream_t s);
void mla_split_kv_grad(const bf16* dk, const bf16* dv_in, bf16* dkvu, bf16* dkpe, int64_t rows, int64_t heads,
                       int64_t dn, int64_t dr, int64_t dv, cudaStream_t s);

// ---- SwiGLU --------------------------------------------------------------------------
// h [rows, 2f] = [gate | up]; a = silu(gate) * up [rows, f]; backward gives dh [rows, 2f].
void swiglu_fwd(const bf16* h, bf16* a, int64_t rows, int64_t f, cudaStream_t s);
void swiglu_bwd(const bf16* h, const bf16* da, bf16* dh, int64_t rows, int64_t f, cudaStream_t s);

// ---- loss ----------------------------------------------------------------------------
// Fused softmax cross-entropy over logits [rows, vocab] (bf16, row stride ld >= vocab, the
// padded vocabulary's columns >= vocab ignored): loss[r] = logsumexp - logits[r, label];
// dlogits[r, :] = (softmax - onehot) * grad_scale (bf16, same layout), written in the same
// pass (Megatron computes it in the backward from saved statistics; same numbers).
// Labels < 0 are ignored (loss 0, gradient 0). dlogits may be logits itself: each element is
// read before its gradient overwrites it (in place, as Transformer Engine's Triton
// cross-entropy does; the runner runs it so).
void cross_entropy_fwd_bwd(const bf16* logits, const int32_t* labels, float* loss, bf16* dlogits, int64_t rows,
                           int64_t vocab, int64_t ld, float grad_scale, cudaStream_t s);

// ---- optimizer -------------------------------------------------------------------------
// sum of squares of g[0..n) added to *acc (fp64 on the device), in a fixed order (per-block
// partials, then one block sums them): bit-identical from run to run.
void sum_squares(const float* g, int64_t n, double* acc, cudaStream_t s);
// AdamW (decoupled weight decay, PyTorch's torch.optim.AdamW): g' = g * grad_scale (the
// clip coefficient, read from the device so no host round trip); m = b1 m + (1-b1) g';
// v = b2 v + (1-b2) g'^2; p -= lr (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd p);
// then model[i] = bf16(p). t is the 1-based step.
struct AdamParams {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int64_t step = 1;
};
void adamw_step(float* master, bf16* model, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamParams& p, const float* grad_scale, cudaStream_t s);
// *scale = min(1, max_norm / (sqrt(*sumsq) + 1e-6)) (Megatron's clip_grad_norm), and
// *norm = sqrt(*sumsq); both on the device.
void clip_coefficient(const double* sumsq, float max_norm, float* scale, float* norm, cudaStream_t s);

}  // namespace lcm::exec::train
