// Communication volume of one training step, per GPU, for the busiest pipeline stage.
//
// The volumes are the op schedule's: every collective and send/recv op carries its group,
// kind, message size, calls and the item it counts in (schedule_gen.hpp writes them, once,
// for build_schedule and for this fold). estimate_comm walks the busiest stage's ops through
// the same generator without building the schedule: per-layer ops times the stage's layers
// (and recomputed layers), stage-boundary ops once, all times Mesh::num_micro_batches; step
// ops once with their own calls. docs/communication-model.md derives each term and names the
// Megatron-LM / TransformerEngine code it follows.
#include "lcm/model/comm.hpp"

#include <algorithm>
#include <cassert>
#include <vector>

#include "lcm/model/params.hpp"
#include "lcm/model/schedule.hpp"
#include "schedule_gen.hpp"

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

double hit_probability(double experts, double held, int k) {
  if (held <= 0.0) return 0.0;
  double miss = 1.0;
  for (int i = 0; i < k; ++i) {
    const double num = experts - held - i;
    if (num <= 0.0) return 1.0;
    miss *= num / (experts - i);
  }
  return 1.0 - miss;
}

namespace {
double choose(int n, int r) {
  if (r < 0 || r > n) return 0.0;
  double c = 1.0;
  for (int i = 1; i <= r; ++i) c = c * (n - r + i) / i;
  return c;
}
}  // namespace

double node_hit_probability(const NodeDedup& d, int nodes) {
  const double E = d.experts;
  const int N = std::max(1, nodes), G = d.groups, gt = d.group_topk;
  if (N == 1) return 1.0;
  if (G <= 0 || gt <= 0 || gt >= G || (G % N != 0 && N % G != 0)) return hit_probability(E, E / N, d.topk);
  const double per_group = E / G, drawn_from = gt * per_group;  // the k experts come from gt groups
  if (N % G == 0)  // a group spans N/G nodes: the node's group is chosen with probability gt/G
    return static_cast<double>(gt) / G * hit_probability(drawn_from, E / N, d.topk);
  // g = G/N groups per node: j of them among the gt chosen (hypergeometric), then the k draws.
  const int g = G / N;
  double p = 0.0;
  for (int j = 1; j <= std::min(g, gt); ++j)
    p += choose(g, j) * choose(G - g, gt - j) / choose(G, gt) * hit_probability(drawn_from, j * per_group, d.topk);
  return p;
}

double expected_destination_nodes(const NodeDedup& d, int nodes) {
  return std::max(1, nodes) * node_hit_probability(d, nodes);
}

DedupTraffic dedup_traffic(const CollectiveShape& c, int nodes, int per_node) {
  assert(c.dedup.dest_ranks > 0 && per_node >= 1);
  const double token_bytes = c.message_bytes / c.dedup.dest_ranks;  // one copy of every token sent
  // Destinations spread evenly over the nodes: of dest_ranks copies, the sender's own and each
  // remote node's RDMA receiver (1 in per_node of them) do not cross NVLink.
  const double r = per_node;
  return {.nvlink_bytes = c.message_bytes * (r - 1.0) / r,
          .nic_bytes = token_bytes * (nodes - 1) * node_hit_probability(c.dedup, nodes)};
}

namespace {

// Appends to / merges into the fixed item array. An item that receives calls of different
// sizes (e.g. cp.a2a for Q, K, V, O) keeps the call-weighted mean as message_bytes, so
// sent_bytes == calls * bus_factor * message_bytes holds for every item. Items are matched
// by id.
class Items {
 public:
  explicit Items(Comm& c) : c_(c) {}

  // `times` executions of op (each of op.calls calls).
  void add(const Op& op, double times) {
    const CommItemId id = op.item;
    const int n = op.coll.group_size;
    const double message_bytes = op.coll.message_bytes;
    const double calls = times * op.calls;
    if (id == CommItemId::kNone || n <= 1 || calls <= 0.0 || message_bytes <= 0.0) return;
    const double sent = calls * sent_bytes_per_call(op.coll.kind, n, message_bytes);
    for (int i = 0; i < c_.num_items; ++i) {
      CommItem& it = c_.items[static_cast<size_t>(i)];
      if (it.id != id) continue;
      assert(it.dim == op.coll.dim && it.kind == op.coll.kind && it.group_size == n);
      const double total = it.calls + calls;
      if (it.message_bytes != message_bytes)
        it.message_bytes = (it.message_bytes * it.calls + message_bytes * calls) / total;
      it.calls = total;
      it.sent_bytes += sent;
      return;
    }
    assert(c_.num_items < Comm::kMaxItems);
    if (c_.num_items >= Comm::kMaxItems) return;
    CommItem& it = c_.items[static_cast<size_t>(c_.num_items++)];
    it.dim = op.coll.dim;
    it.kind = op.coll.kind;
    it.id = id;
    it.group_size = n;
    it.message_bytes = message_bytes;
    it.calls = calls;
    it.sent_bytes = sent;
  }

 private:
  Comm& c_;
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

// Executions of one element list per step: forward, recompute, backward.
struct Times {
  double fwd = 0, recompute = 0, bwd = 0;
};

// Folds the communication ops of the elements `gen` emits.
template <class Gen>
void fold(Items& out, const Times& n, const sched::RecomputeSel& rc, Gen&& gen) {
  auto sink = [&](const sched::Elem& e) {
    if (!is_comm(e.op)) return;
    sched::fwd_op(e, [&](const Op& o) { out.add(o, n.fwd); });
    if (n.recompute > 0) sched::recompute_op(e, rc, [&](const Op& o) { out.add(o, n.recompute); });
    sched::bwd_ops(e, [&](const Op& o) { out.add(o, n.bwd); });
  };
  gen(sink);
}

}  // namespace

Comm estimate_comm(const Scenario& s, const Mesh& m, const std::vector<StageLayers>& layers) {
  Comm c;
  if (layers.empty()) return c;
  c.stage = busiest_stage(layers);
  const size_t stage = static_cast<size_t>(c.stage);
  const StageLayers& sl = layers[stage];
  const ParallelSpec& par = s.parallel;
  const sched::Ctx x = sched::make_ctx(s, m);
  const double mb = m.num_micro_batches;
  const bool first = c.stage == 0, last = stage + 1 == layers.size();
  Items out(c);

  // Layers of each kind, per micro-batch.
  const sched::RecomputeCounts rc = sched::recompute_counts(par, sl);
  const sched::RecomputeSel layer_rc = sched::layer_recompute(par);
  const double dense = sl.num_layers - sl.num_moe_layers, moe = sl.num_moe_layers, mtp = sl.num_mtp_layers;
  if (dense > 0)
    fold(out, {mb * dense, mb * rc.dense, mb * dense}, layer_rc, [&](auto& k) { sched::emit_layer(x, false, k); });
  if (moe > 0) fold(out, {mb * moe, mb * rc.moe, mb * moe}, layer_rc, [&](auto& k) { sched::emit_layer(x, true, k); });
  if (mtp > 0)
    fold(out, {mb * mtp, mb * rc.mtp, mb * mtp}, sched::mtp_recompute(par), [&](auto& k) { sched::emit_mtp(x, k); });

  // Stage boundaries, per micro-batch.
  if (first) fold(out, {mb, 0, mb}, {}, [&](auto& k) { sched::emit_stage_embedding(x, k); });
  if (last) fold(out, {mb, 0, mb}, {}, [&](auto& k) { sched::emit_stage_head(x, k); });
  sched::emit_pp(x, first, last, [&](sched::StageList, const Op& o) { out.add(o, mb); });

  // Once per step. Parameter counts only when a gradient term needs them.
  GpuParams p;
  double replicated = 0;
  const bool sharded_data = m.dp * m.cp > 1 || (has_moe(s.model) && m.edp > 1);
  const bool tp_grads = m.sp && m.tp > 1;
  if (sharded_data || tp_grads) {
    p = gpu_params(s, m, layers)[stage];
    if (tp_grads)
      replicated = sched::tp_replicated_params(m, p.dense, sched::gpu_params_at_tp1(s, m, layers)[stage].dense);
  }
  sched::emit_step(x, first, last, p, replicated, [&](const Op& o) {
    if (is_comm(o)) out.add(o, 1.0);
  });

  // Items by dimension (stable), then the sums.
  for (int i = 1; i < c.num_items; ++i) {
    const CommItem it = c.items[static_cast<size_t>(i)];
    int j = i;
    for (; j > 0 && c.items[static_cast<size_t>(j - 1)].dim > it.dim; --j)
      c.items[static_cast<size_t>(j)] = c.items[static_cast<size_t>(j - 1)];
    c.items[static_cast<size_t>(j)] = it;
  }
  for (int i = 0; i < c.num_items; ++i) {
    const CommItem& it = c.items[static_cast<size_t>(i)];
    c.sent_bytes_by_dim[static_cast<size_t>(it.dim)] += it.sent_bytes;
    c.total_sent_bytes += it.sent_bytes;
  }
  return c;
}

}  // namespace lcm
