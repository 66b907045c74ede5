// The transformer the training runner trains (runner.hpp's TrainPlan): token embedding,
// per layer RMSNorm -> QKV -> RoPE -> cuDNN causal GQA attention -> output projection ->
// residual, RMSNorm -> SwiGLU MLP or MoeBlock -> residual; final RMSNorm, output layer
// (untied, or the embedding when tied), fused cross-entropy. bf16 activations, fp32 master
// weights / main grads / Adam moments in contiguous buffers. Every op is bracketed with the
// model's op tag (lcm/model/ops.hpp) exactly as the schedule (model/src/schedule_gen.hpp)
// emits it for a layout with groups of size 1.
//
// Dry mode (no CUDA at all: fake device pointers from the allocator's injected backend, no
// library handles, no kernel launches) runs the same control flow so the op tags of a step
// can be listed on a machine without a GPU (dry_run_tags, the contract test).
#pragma once

#include <cudnn_graph.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lcm/executor/cudnn_attention.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/executor/train/allocator.hpp"
#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/moe_block.hpp"
#include "lcm/executor/train/recorder.hpp"
#include "lcm/executor/train/runner.hpp"

namespace lcm::exec::train {

// One parameter tensor: a slice [offset, offset + numel) of the flat buffers.
struct ParamInfo {
  std::string name;             // "embedding", "layers.3.attn.qkv", "layers.3.moe.experts.fc1", "final_norm", "output"
  std::vector<int64_t> shape;   // [out, in] for linear weights (y = x W^T), [n] for norms
  int64_t offset = 0;
  int64_t numel = 0;
  float init_std = 0.02f;       // 0: constant init_value
  float init_value = 0.0f;
  bool decay = true;            // AdamW weight decay (not for norm weights, Megatron's rule for 1-D params)
};

class Model {
 public:
  // `alloc` outlives the model. Not dry: `cudnn` and `gemm` are the runner's handles on `stream`.
  Model(const TrainPlan& p, CachingAllocator& alloc, cudaStream_t stream, bool dry, LtGemm* gemm,
        cudnnHandle_t cudnn);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t flat_size() const { return flat_; }
  float* master() const { return master_.get(); }
  bf16* weights() const { return model_.get(); }
  float* grads() const { return grad_.get(); }
  float* exp_avg() const { return m_.get(); }
  float* exp_avg_sq() const { return v_.get(); }

  // master := init from `seed`; Adam moments := 0; bf16 copy refreshed.
  void init_weights(uint64_t seed);
  void refresh_bf16();  // model := bf16(master) (after a checkpoint load)
  void zero_grads();

  // One micro-batch: forward, loss (loss rows into loss_rows[T], fp32), backward; parameter
  // gradients accumulate into grads(). tokens and labels: device [tokens] int32.
  // aux_loss: device float the MoE blocks add their aux / z losses to.
  void micro_batch(const int32_t* tokens, const int32_t* labels, float grad_scale, float* loss_rows, float* aux_loss,
                   int mb, OpRecorder* rec);
  // Gradient norm, clipping, AdamW over every parameter; grad_norm: device float.
  void optimizer_step(const AdamParams& a, float clip, float* grad_norm, OpRecorder* rec);

  // MoE layers' routing of the last forward (after the stream synchronised): {layer, load, kept}.
  struct Routing {
    int layer;
    std::vector<int32_t> load, kept;
  };
  std::vector<Routing> routing() const;

  // The attention backward's workspace (fp32 dQ accumulator, cuDNN's plan workspace): taken
  // from the allocator for each call and given back after it, as Transformer Engine does.
  size_t attention_workspace_bytes() const { return attn_ ? attn_->workspace_bytes() : 0; }

  // While set, every MoE layer's forward (not its recompute) appends its assignments
  // (`--dump`: the PyTorch reference replays the runner's routing).
  struct CapturedRouting {
    int layer, micro_batch;
    MoeBlock::Slots slots;
  };
  void capture_routing(std::vector<CapturedRouting>* out) { capture_ = out; }

 private:
  struct LayerActs;
  void layer_forward(int l, LayerActs& a, const bf16* x, bf16* out, Pass pass, float* aux_loss);
  void layer_backward(int l, LayerActs& a, const bf16* x, const bf16* dy, bf16* dx);
  template <class F>
  void op(OpId id, Pass pass, GemmPart part, int layer, F&& f);
  void linear_fwd(const bf16* x, const bf16* w, bf16* y, int64_t out, int64_t in);
  void linear_dgrad(const bf16* dy, const bf16* w, bf16* dx, int64_t out, int64_t in, float beta = 0.0f);
  void attention_forward(int l, LayerActs& a, Pass pass, const std::function<bool(uint32_t)>& runs);
  DeviceArray<bf16> attention_backward(int l, LayerActs& a, const bf16* dmid);  // returns dL/dn1
  void linear_wgrad(const bf16* dy, const bf16* x, float* dw, int64_t out, int64_t in);
  int attention_set(const AttentionTensors& t, void* workspace);
  template <class T>
  DeviceArray<T> act(int64_t n) { return DeviceArray<T>(alloc_, static_cast<size_t>(n), MemCategory::kActivations); }
  void add_param(const std::string& name, std::vector<int64_t> shape, float std, float value, bool decay);

  const TrainPlan& p_;
  CachingAllocator& alloc_;
  cudaStream_t stream_;
  bool dry_;
  LtGemm* gemm_;
  OpRecorder* rec_ = nullptr;
  int mb_ = -1;

  std::vector<ParamInfo> params_;
  int64_t flat_ = 0;
  DeviceArray<float> master_, grad_, m_, v_;
  DeviceArray<bf16> model_;
  // Per layer: offsets of its parameters (dense: attn_norm, qkv, proj, mlp_norm, fc1, fc2;
  // MoE: attn_norm, qkv, proj, mlp_norm, then the block's).
  // qk_layernorm: q_norm, k_norm (GQA, per head) or q_norm, kv_norm (MLA, the latents).
  // MLA: q_down (q-LoRA), kv_down, q_up (or q), kv_up in place of qkv.
  struct LayerParams {
    int attn_norm = -1, qkv = -1, proj = -1, mlp_norm = -1, fc1 = -1, fc2 = -1;
    int q_norm = -1, k_norm = -1, q_down = -1, kv_down = -1, q_up = -1, kv_up = -1;
  };
  std::vector<LayerParams> lp_;
  int embedding_ = -1, final_norm_ = -1, output_ = -1;
  std::vector<std::unique_ptr<MoeBlock>> moe_;  // per layer (null for dense layers)

  std::unique_ptr<CudnnAttention> attn_;
  std::map<std::array<const void*, 10>, int> attn_sets_;  // bound variant-pack sets by pointers (and workspace)
  DeviceArray<float> rope_inv_freq_, rope_cos_, rope_sin_;
  float rope_mscale_ = 1.0f;
  DeviceArray<double> sumsq_;
  DeviceArray<float> clip_scale_;
  DeviceArray<float> aux_scratch_;  // aux losses of a recompute (counted once, in the forward)

  std::vector<std::unique_ptr<LayerActs>> acts_;
  std::vector<CapturedRouting>* capture_ = nullptr;
};

// The tags of a MoE block's ops in forward order (what MoeBlock brackets with ep = 1): router,
// top-k, permute, experts fc1 / act / fc2, unpermute, shared fc1 / act / fc2 when present.
std::vector<OpId> moe_block_forward_ops(bool shared);

}  // namespace lcm::exec::train
