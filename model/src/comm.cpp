// Communication volume of one training step, per GPU, for the busiest pipeline stage.
//
// Every term is one collective family of one parallel dimension. Per-micro-batch terms are
// counted for the layers of the stage and multiplied by Mesh::num_micro_batches; optimizer-
// side terms (DP, embedding sync) happen once per step. docs/communication-model.md derives
// each term and names the Megatron-LM / TransformerEngine code it follows.
#include "lcm/model/comm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "lcm/model/params.hpp"

namespace lcm {

double bus_factor(Collective kind, int n) {
  assert(n >= 1);
  const double nd = static_cast<double>(n);
  switch (kind) {
    case Collective::kAllReduce:
      return 2.0 * (nd - 1.0) / nd;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (nd - 1.0) / nd;
    case Collective::kSendRecv:
      return 1.0;
  }
  return 0.0;
}

double sent_bytes_per_call(Collective kind, int n, double message_bytes) {
  if (n <= 1) return 0.0;  // a group of one talks to nobody
  return bus_factor(kind, n) * message_bytes;
}

namespace {

constexpr double kBf16Bytes = 2.0;  // activations, gradients of activations, bf16 params

// Appends to / merges into the fixed item array. An item that receives calls of different
// sizes (e.g. cp.a2a for Q, K, V, O) keeps the call-weighted mean as message_bytes, so
// sent_bytes == calls * bus_factor * message_bytes holds for every item.
class Items {
 public:
  explicit Items(Comm& c) : c_(c) {}

  void add(CommDim dim, Collective kind, const char* what, int n, double message_bytes,
           double calls) {
    if (n <= 1 || calls <= 0.0 || message_bytes <= 0.0) return;
    const double sent = calls * sent_bytes_per_call(kind, n, message_bytes);
    for (int i = 0; i < c_.num_items; ++i) {
      CommItem& it = c_.items[static_cast<size_t>(i)];
      if (std::strcmp(it.what, what) != 0) continue;
      assert(it.dim == dim && it.kind == kind && it.group_size == n);
      const double total = it.calls + calls;
      it.message_bytes = (it.message_bytes * it.calls + message_bytes * calls) / total;
      it.calls = total;
      it.sent_bytes += sent;
      return;
    }
    assert(c_.num_items < Comm::kMaxItems);
    if (c_.num_items >= Comm::kMaxItems) return;
    CommItem& it = c_.items[static_cast<size_t>(c_.num_items++)];
    it.dim = dim;
    it.kind = kind;
    it.what = what;
    it.group_size = n;
    it.message_bytes = message_bytes;
    it.calls = calls;
    it.sent_bytes = sent;
  }

 private:
  Comm& c_;
};

// What the busiest stage runs per micro-batch, and how much of it is recomputed.
struct Work {
  double layers = 0;      // transformer layers, MTP blocks included (each has attention)
  double moe = 0;         // of which MoE layers
  double dense = 0;       // of which dense-MLP layers
  double mtp = 0;         // MTP blocks (last stage)
  double embeddings = 0;  // embedding lookups: first stage, plus one per MTP block
  double outputs = 0;     // output-layer (logit) GEMMs: last stage, plus one per MTP block
  bool first = false, last = false;
  double tokens = 0;      // b * s / c: tokens of one micro-batch on this CP rank
  double m = 1;           // micro-batches per step
  // Forward collectives that run again in the backward pass (recomputation), per micro-batch.
  double rc_attn = 0;     // attention blocks fully recomputed (full): enter and exit
  double rc_mlp = 0;      // TP-sharded MLP blocks recomputed (dense MLP, shared expert)
  double rc_mla_up = 0;   // MLA latent all-gathers re-run by "mla_up_proj" (selective)
  double rc_cp = 0;       // attention layers whose CP exchange is re-run
  double rc_moe = 0;      // MoE layers whose dispatch / combine are re-run
};

int busiest_stage(const std::vector<StageLayers>& layers) {
  int best = 0;
  int most = -1;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int n = layers[i].num_layers + layers[i].num_mtp_layers;
    if (n > most) {
      most = n;
      best = static_cast<int>(i);
    }
  }
  return best;
}

Work stage_work(const Scenario& s, const Mesh& m, const StageLayers& st, int stage) {
  const ModelSpec& model = s.model;
  const ParallelSpec& par = s.parallel;
  Work w;
  w.first = stage == 0;
  w.last = stage == m.pp - 1;
  w.mtp = st.num_mtp_layers;
  const bool mtp_moe = model.num_layers > 0 && is_moe_layer(model, model.num_layers - 1);
  w.layers = st.num_layers + w.mtp;
  w.moe = st.num_moe_layers + (mtp_moe ? w.mtp : 0.0);
  w.dense = w.layers - w.moe;
  w.embeddings = (st.has_embedding ? 1.0 : 0.0) + w.mtp;
  w.outputs = (st.has_output ? 1.0 : 0.0) + w.mtp;
  w.tokens = static_cast<double>(s.training.micro_batch_size) *
             static_cast<double>(s.training.seq_length) / m.cp;
  w.m = m.num_micro_batches;

  const bool shared = model.moe_shared_expert_intermediate_size > 0;
  if (par.recompute_granularity == RecomputeGranularity::kFull) {
    // stage_layers counts them: every layer (uniform) or the first recompute_num_layers
    // of each model chunk (block). MTP blocks are outside the recomputed decoder.
    const double rec = st.num_recomputed_layers;
    const double rec_moe = st.num_recomputed_moe_layers;
    w.rc_attn = rec;
    w.rc_mlp = (rec - rec_moe) + (shared ? rec_moe : 0.0);
    w.rc_cp = rec;
    w.rc_moe = rec_moe;
  } else if (par.recompute_granularity == RecomputeGranularity::kSelective) {
    const uint32_t mods = par.recompute_modules;
    // TE re-runs the whole checkpointed core attention, CP exchange included.
    if (mods & kRecomputeCoreAttn) w.rc_cp = w.layers;
    if (mods & kRecomputeMlp) w.rc_mlp += w.dense;
    if (mods & kRecomputeMoe) w.rc_moe = w.moe;
    if (shared && (mods & (kRecomputeMoe | kRecomputeSharedExperts))) w.rc_mlp += w.moe;
    if (model.multi_latent_attention && (mods & kRecomputeMlaUpProj)) w.rc_mla_up = w.layers;
  }
  return w;
}

// ---------------------------------------------------------------------------------
// TP (formulas.md §4.2). Every TP-sharded block (attention, dense MLP, shared expert,
// MTP eh_proj) has an "enter" collective (conjugate copy / SP all-gather of its input) and
// an "exit" collective (all-reduce / SP reduce-scatter of its output).
// ---------------------------------------------------------------------------------
void add_tp(Items& out, const Scenario& s, const Mesh& m, const Work& w) {
  const int t = m.tp;
  if (t <= 1) return;
  const ModelSpec& model = s.model;
  const double h = static_cast<double>(model.hidden_size);
  const double act = w.tokens * h * kBf16Bytes;  // b*(s/c)*h bf16: S of one collective
  const bool mla = model.multi_latent_attention;
  const bool shared = model.moe_shared_expert_intermediate_size > 0;

  // Blocks per micro-batch. Routed experts are not here: they talk over ETP / EP.
  const double mlp_blocks = w.dense + (shared ? w.moe : 0.0);
  const double enter_h = (mla ? 0.0 : w.layers) + mlp_blocks;  // S = act
  const double enter_2h = w.mtp;                                // eh_proj input [s, 2h]
  const double exit_h = w.layers + mlp_blocks + w.mtp;
  // MLA enters through its compressed latents: q (or h without q-LoRA), kv, rope key.
  const double q_in = model.q_lora_rank > 0 ? static_cast<double>(model.q_lora_rank) : h;
  const double lat = w.tokens * kBf16Bytes *
                     (q_in + static_cast<double>(model.kv_lora_rank + model.qk_pos_emb_head_dim));
  const double enter_lat = mla ? w.layers : 0.0;

  // Recomputed forward collectives.
  const double rc_enter_h = (mla ? 0.0 : w.rc_attn) + w.rc_mlp;
  const double rc_exit_h = w.rc_attn + w.rc_mlp;
  const double rc_enter_lat = mla ? w.rc_attn + w.rc_mla_up : 0.0;

  const double mb = w.m;
  if (m.sp) {
    // fwd: AG(enter) + RS(exit); bwd: RS(enter) + AG(exit).
    out.add(CommDim::kTp, Collective::kAllGather, "tp.sp.allgather", t, act,
            mb * (enter_h + exit_h + rc_enter_h));
    out.add(CommDim::kTp, Collective::kAllGather, "tp.sp.allgather", t, 2.0 * act,
            mb * enter_2h);
    out.add(CommDim::kTp, Collective::kReduceScatter, "tp.sp.reducescatter", t, act,
            mb * (exit_h + enter_h + rc_exit_h));
    out.add(CommDim::kTp, Collective::kReduceScatter, "tp.sp.reducescatter", t, 2.0 * act,
            mb * enter_2h);
    out.add(CommDim::kTp, Collective::kAllGather, "tp.sp.allgather.mla", t, lat,
            mb * (enter_lat + rc_enter_lat));
    out.add(CommDim::kTp, Collective::kReduceScatter, "tp.sp.reducescatter.mla", t, lat,
            mb * enter_lat);
    // Vocab-parallel embedding: RS of the summed lookups (fwd), AG (bwd).
    out.add(CommDim::kTp, Collective::kReduceScatter, "tp.embedding.reducescatter", t, act,
            mb * w.embeddings);
    out.add(CommDim::kTp, Collective::kAllGather, "tp.embedding.allgather", t, act,
            mb * w.embeddings);
    // Output layer: AG of the SP-sharded input (fwd), RS of its gradient (bwd).
    out.add(CommDim::kTp, Collective::kAllGather, "tp.output.allgather", t, act,
            mb * w.outputs);
    out.add(CommDim::kTp, Collective::kReduceScatter, "tp.output.reducescatter", t, act,
            mb * w.outputs);
  } else {
    // fwd: AR(exit); bwd: AR(enter).
    out.add(CommDim::kTp, Collective::kAllReduce, "tp.allreduce", t, act,
            mb * (exit_h + enter_h + rc_exit_h));
    out.add(CommDim::kTp, Collective::kAllReduce, "tp.allreduce", t, 2.0 * act,
            mb * enter_2h);
    out.add(CommDim::kTp, Collective::kAllReduce, "tp.allreduce.mla", t, lat, mb * enter_lat);
    out.add(CommDim::kTp, Collective::kAllReduce, "tp.embedding.allreduce", t, act,
            mb * w.embeddings);
    out.add(CommDim::kTp, Collective::kAllReduce, "tp.output.allreduce", t, act,
            mb * w.outputs);
  }
}

// ---------------------------------------------------------------------------------
// CP (formulas.md §4.5; TransformerEngine context_parallel.py). Heads are TP-local.
// ---------------------------------------------------------------------------------
void add_cp(Items& out, const Scenario& s, const Mesh& m, const Work& w) {
  const int c = m.cp;
  if (c <= 1) return;
  const ModelSpec& model = s.model;
  const double a_t = static_cast<double>(model.num_attention_heads) / m.tp;
  double q_tok, k_tok, v_tok, o_tok;  // elements per token of Q, K, V, O on this TP rank
  if (model.multi_latent_attention) {  // no GQA: every head has its own K and V
    const double qk = static_cast<double>(model.qk_head_dim + model.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(model.v_head_dim);
    q_tok = k_tok = a_t * qk;
    v_tok = o_tok = a_t * dv;
  } else {
    const double dh = model.kv_channels > 0
                          ? static_cast<double>(model.kv_channels)
                          : static_cast<double>(model.hidden_size) / model.num_attention_heads;
    const double g_t = static_cast<double>(model.num_query_groups) / m.tp;
    q_tok = o_tok = a_t * dh;
    k_tok = v_tok = g_t * dh;
  }
  const double to_bytes = w.tokens * kBf16Bytes;  // per-token elements -> bytes of s/c tokens
  const double kv_block = (k_tok + v_tok) * to_bytes;
  const double mb = w.m;
  const double fwd = w.layers;       // attention calls per micro-batch
  const double rc = w.rc_cp;         // recomputed attention forwards per micro-batch

  auto ring = [&](int n) {
    // fwd: n-1 KV blocks; bwd: KV again plus dKV (TE sends KV, [KV,dKV]..., dKV).
    out.add(CommDim::kCp, Collective::kSendRecv, "cp.p2p.kv", n, kv_block,
            mb * (n - 1) * (3.0 * fwd + rc));
  };
  auto a2a = [&](int n) {
    // Q, K, V before and O after attention; bwd: dO before, dQ, dK, dV after.
    const double per_call[4] = {q_tok, k_tok, v_tok, o_tok};
    for (double e : per_call) {
      out.add(CommDim::kCp, Collective::kAllToAll, "cp.a2a", n, e * to_bytes,
              mb * (2.0 * fwd + rc));
    }
  };

  switch (s.parallel.cp_comm_type) {
    case CpCommType::kP2P:
      ring(c);
      break;
    case CpCommType::kAllGather: {
      // K and V gathered separately in fwd and again in bwd; dK, dV reduce-scattered.
      const double k_full = k_tok * to_bytes * c;
      const double v_full = v_tok * to_bytes * c;
      for (double full : {k_full, v_full}) {
        out.add(CommDim::kCp, Collective::kAllGather, "cp.allgather.kv", c, full,
                mb * (2.0 * fwd + rc));
        out.add(CommDim::kCp, Collective::kReduceScatter, "cp.reducescatter.dkv", c, full,
                mb * fwd);
      }
      break;
    }
    case CpCommType::kA2A:
      a2a(c);
      break;
    case CpCommType::kA2AP2P: {
      const std::vector<int>& hs = s.parallel.hierarchical_context_parallel_sizes;
      const int n_a2a = hs.size() == 2 ? hs[0] : c;
      const int n_p2p = hs.size() == 2 ? hs[1] : 1;
      a2a(n_a2a);
      ring(n_p2p);  // after the a2a a rank holds s/n_p2p tokens of heads/n_a2a: same block
      break;
    }
  }
}

// ---------------------------------------------------------------------------------
// EP / ETP (formulas.md §4.6; Megatron token_dispatcher.py).
// ---------------------------------------------------------------------------------

// Expected number of distinct EP ranks hit by one token's top-k under uniform routing,
// normalised per rank: P(a given EP rank holds >= 1 of the token's k experts).
double rank_hit_probability(double experts, double per_rank, int k) {
  double miss = 1.0;  // C(E - E/ep, k) / C(E, k)
  for (int i = 0; i < k; ++i) {
    const double num = experts - per_rank - i;
    if (num <= 0.0) return 1.0;
    miss *= num / (experts - i);
  }
  return 1.0 - miss;
}

void add_ep(Items& out, const Scenario& s, const Mesh& m, const Work& w) {
  const ModelSpec& model = s.model;
  if (model.num_experts <= 0 || w.moe <= 0.0) return;
  const double h = static_cast<double>(model.hidden_size);
  const double E = model.num_experts;
  const int k = model.moe_router_topk;
  // Tokens entering the MoE block on this rank: the SP shard of the CP chunk.
  const double T = w.tokens / (m.sp ? m.tp : 1);
  const double dispatch_bytes = s.parallel.moe_fp8_dispatch ? 1.0 : kBf16Bytes;
  const double mb = w.m;
  const double fwd = w.moe + w.rc_moe;  // forward dispatch/combine calls per micro-batch
  const double bwd = 2.0 * w.moe;       // backward: one a2a per forward a2a

  switch (model.moe_token_dispatcher_type) {
    case Dispatcher::kAllToAll: {
      // Token copies this rank sends (slots incl. those for its own experts).
      double slots = T * k;
      const double cf = model.moe_expert_capacity_factor;
      if (cf > 0.0) {
        const double capacity = std::ceil(T * k / E * cf);  // Megatron get_capacity
        slots = model.moe_pad_expert_input_to_capacity ? E * capacity
                                                        : std::min(E * capacity, T * k);
      }
      const double tok = slots * h;
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.dispatch", m.ep, tok * dispatch_bytes,
              mb * fwd);
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.combine", m.ep, tok * kBf16Bytes,
              mb * fwd);
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.bwd", m.ep, tok * kBf16Bytes,
              mb * bwd);
      // After the EP a2a each rank holds `slots` tokens (balanced); they are all-gathered
      // over ETP before the experts and reduce-scattered after (dispatch_postprocess /
      // combine_preprocess), independent of sequence_parallel.
      const double gathered = m.etp * tok * kBf16Bytes;
      out.add(CommDim::kEp, Collective::kAllGather, "etp.allgather.dispatch", m.etp, gathered,
              mb * (fwd + w.moe));
      out.add(CommDim::kEp, Collective::kReduceScatter, "etp.reducescatter.combine", m.etp,
              gathered, mb * (fwd + w.moe));
      break;
    }
    case Dispatcher::kAllGather: {
      const int n = m.etp * m.ep;  // the TPxEP group of the expert mesh
      const double gathered = n * T * h * kBf16Bytes;
      out.add(CommDim::kEp, Collective::kAllGather, "ep.allgather.dispatch", n, gathered,
              mb * (fwd + w.moe));
      out.add(CommDim::kEp, Collective::kReduceScatter, "ep.reducescatter.combine", n, gathered,
              mb * (fwd + w.moe));
      break;
    }
    case Dispatcher::kFlex: {
      // DeepEP sends a token once per destination rank (is_token_in_rank), to every ETP
      // rank of each EP rank that holds one of its experts.
      const int n = m.etp * m.ep;
      const double p = rank_hit_probability(E, E / m.ep, k);
      const double tok = T * n * p * h;
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.dispatch", n, tok * dispatch_bytes,
              mb * fwd);
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.combine", n, tok * kBf16Bytes,
              mb * fwd);
      out.add(CommDim::kEp, Collective::kAllToAll, "ep.a2a.bwd", n, tok * kBf16Bytes, mb * bwd);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------
// PP (formulas.md §4.3): activations forward, their gradients backward, per model chunk.
// ---------------------------------------------------------------------------------
void add_pp(Items& out, const Mesh& m, const Scenario& s, const Work& w) {
  if (m.pp <= 1) return;
  const double bytes = w.tokens * static_cast<double>(s.model.hidden_size) / (m.sp ? m.tp : 1) *
                       kBf16Bytes;
  const double sends = 2.0 * m.vp - (w.first ? 1.0 : 0.0) - (w.last ? 1.0 : 0.0);
  out.add(CommDim::kPp, Collective::kSendRecv, "pp.sendrecv", 2, bytes, w.m * sends);
}

// ---------------------------------------------------------------------------------
// DP / EDP (formulas.md §4.4) and the tied-embedding gradient sync.
// ---------------------------------------------------------------------------------
DpSharding effective_sharding(const ParallelSpec& par) {
  if (par.data_parallel_sharding_strategy != DpSharding::kNoShard) {
    return par.data_parallel_sharding_strategy;
  }
  return par.use_distributed_optimizer ? DpSharding::kOptim : DpSharding::kNoShard;
}

struct DpNames {
  CommDim dim;
  const char* allreduce;
  const char* reducescatter;
  const char* allgather;
};

void add_dp_group(Items& out, const DpNames& nm, DpSharding how, int n, double params,
                  double grad_bytes, double m) {
  const double grads = params * grad_bytes;
  const double weights = params * kBf16Bytes;
  switch (how) {
    case DpSharding::kNoShard:  // DDP: one all-reduce of the main grads per step
      out.add(nm.dim, Collective::kAllReduce, nm.allreduce, n, grads, 1.0);
      break;
    case DpSharding::kOptim:  // ZeRO-1 / distributed optimizer: RS grads, AG params
      out.add(nm.dim, Collective::kReduceScatter, nm.reducescatter, n, grads, 1.0);
      out.add(nm.dim, Collective::kAllGather, nm.allgather, n, weights, 1.0);
      break;
    case DpSharding::kOptimGrads:  // ZeRO-2 (Megatron-FSDP): RS after every backward
      out.add(nm.dim, Collective::kReduceScatter, nm.reducescatter, n, grads, m);
      out.add(nm.dim, Collective::kAllGather, nm.allgather, n, weights, 1.0);
      break;
    case DpSharding::kOptimGradsParams:  // ZeRO-3 / FSDP: AG fwd + AG bwd + RS, per micro-batch
      out.add(nm.dim, Collective::kReduceScatter, nm.reducescatter, n, grads, m);
      out.add(nm.dim, Collective::kAllGather, nm.allgather, n, weights, 2.0 * m);
      break;
  }
}

void add_dp(Items& out, const Scenario& s, const Mesh& m, const GpuParams& p, const Work& w) {
  const int n_dense = m.dp * m.cp;
  const int n_expert = s.model.num_experts > 0 ? m.edp : 1;
  const double grad_bytes = s.training.grad_reduce_in_fp32 ? 4.0 : 2.0;
  const DpSharding how = effective_sharding(s.parallel);
  add_dp_group(out,
               {CommDim::kDp, "dp.allreduce.grads", "dp.reducescatter.grads",
                "dp.allgather.params"},
               how, n_dense, p.dense, grad_bytes, w.m);
  add_dp_group(out,
               {CommDim::kEdp, "edp.allreduce.grads", "edp.reducescatter.grads",
                "edp.allgather.params"},
               how, n_expert, p.expert, grad_bytes, w.m);
}

// finalize_model_grads (_allreduce_non_tensor_model_parallel_grads): with sequence
// parallelism every TP-replicated parameter (norms, router, duplicated MLA down
// projections, row-parallel biases) sees only its rank's tokens, so its main grad is summed
// over TP once per step. gpu_params gives dense = sharded / t + replicated; evaluating it
// again at tp = 1 (same padded vocab) separates the replicated part.
void add_tp_grad_sync(Items& out, const Scenario& s, const Mesh& m,
                      const std::vector<StageLayers>& layers, int stage, const GpuParams& p) {
  if (!m.sp || m.tp <= 1) return;
  Mesh one = m;
  one.tp = 1;
  const double dense_1 = gpu_params(s, one, layers)[static_cast<size_t>(stage)].dense;
  const double replicated = std::max(0.0, (m.tp * p.dense - dense_1) / (m.tp - 1));
  const double grad_bytes = s.training.grad_reduce_in_fp32 ? 4.0 : 2.0;
  out.add(CommDim::kTp, Collective::kAllReduce, "tp.allreduce.grads", m.tp,
          replicated * grad_bytes, 1.0);
}

void add_embedding_sync(Items& out, const Scenario& s, const Mesh& m, const Work& w) {
  // finalize_model_grads: the word embedding lives on the first and the last stage when it
  // is tied to the output layer or needed by MTP; its main grad is all-reduced between them.
  const bool shared = !s.model.untie_embeddings_and_output_weights || s.model.mtp_num_layers > 0;
  if (m.pp <= 1 || !shared || !(w.first || w.last)) return;
  const double grad_bytes = s.training.grad_reduce_in_fp32 ? 4.0 : 2.0;
  const double params =
      static_cast<double>(m.padded_vocab) * static_cast<double>(s.model.hidden_size) / m.tp;
  out.add(CommDim::kEmb, Collective::kAllReduce, "emb.allreduce.grads", 2, params * grad_bytes,
          1.0);
}

}  // namespace

Comm estimate_comm(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers) {
  Comm c;
  if (layers.empty()) return c;
  c.stage = busiest_stage(layers);
  const Work w = stage_work(s, m, layers[static_cast<size_t>(c.stage)], c.stage);
  Items out(c);
  add_tp(out, s, m, w);
  add_cp(out, s, m, w);
  add_ep(out, s, m, w);
  add_pp(out, m, s, w);
  const bool sharded_data = m.dp * m.cp > 1 || (s.model.num_experts > 0 && m.edp > 1);
  if (sharded_data || (m.sp && m.tp > 1)) {
    const GpuParams p = gpu_params(s, m, layers)[static_cast<size_t>(c.stage)];
    add_dp(out, s, m, p, w);
    add_tp_grad_sync(out, s, m, layers, c.stage, p);
  }
  add_embedding_sync(out, s, m, w);
  for (int i = 0; i < c.num_items; ++i) {
    const CommItem& it = c.items[static_cast<size_t>(i)];
    c.sent_bytes_by_dim[static_cast<size_t>(it.dim)] += it.sent_bytes;
    c.total_sent_bytes += it.sent_bytes;
  }
  return c;
}

}  // namespace lcm
