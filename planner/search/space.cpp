// The search space: meshes of N GPUs and their deeper knobs (see space.hpp).
#include "space.hpp"

#include <algorithm>

namespace lcm::plan {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

namespace {

struct PipelineSplit {
  int pp = 1, first = 0, last = 0;
  bool custom = false;  // the base scenario's own pipeline_model_parallel_layout
};

int accounted_layers(const Scenario& s) {
  return s.model.num_layers + (s.parallel.account_for_embedding_in_pipeline_split ? 1 : 0) +
         (s.parallel.account_for_loss_in_pipeline_split ? 1 : 0);
}

// Pipeline sizes dividing `ranks`: the even split, and where the layers do not divide
// evenly also uneven first/last stages with equal middle stages (first >= last: the last
// stage carries the output layer). A base scenario with its own pipeline layout adds it for
// every pp that divides its stage count (stage s runs on rank s % pp, whatever pp is).
std::vector<PipelineSplit> pipeline_splits(const Scenario& base, int ranks) {
  const int L = base.model.num_layers, n = accounted_layers(base);
  const int stages = static_cast<int>(base.parallel.pipeline_layout.size());
  std::vector<PipelineSplit> out;
  for (int pp : divisors(ranks)) {
    if (stages > 0 && stages % pp == 0 && (pp > 1 || stages == 1)) out.push_back({pp, 0, 0, true});
    if (pp > n) break;
    out.push_back({pp, 0, 0});
    if (pp == 1 || n % pp == 0) continue;
    std::vector<PipelineSplit> uneven;
    if (pp == 2) {
      uneven.push_back({2, (L + 1) / 2, L / 2});
    } else {
      for (int mid : {L / pp, L / pp + 1}) {
        const int rest = L - (pp - 2) * mid;
        if (mid < 1 || rest < 2) continue;
        uneven.push_back({pp, (rest + 1) / 2, rest / 2});
      }
    }
    for (const PipelineSplit& u : uneven) {
      const bool dup = std::any_of(out.begin(), out.end(), [&](const PipelineSplit& o) {
        return !o.custom && o.pp == u.pp && o.first == u.first && o.last == u.last;
      });
      if (!dup && u.last >= 1) out.push_back(u);
    }
  }
  return out;
}

// CP communication: p2p ring, all-gather, all-to-all (Ulysses), and the hierarchical
// a2a+p2p with the all-to-all inside a node (the largest divisor of cp whose ranks share
// a node under tp-cp-... ordering) and the ring across nodes.
std::vector<std::pair<CpCommType, int>> cp_comms(int cp, int tp, int gpus_per_node) {
  if (cp <= 1) return {{CpCommType::kP2P, 0}};
  std::vector<std::pair<CpCommType, int>> out{{CpCommType::kP2P, 0}, {CpCommType::kAllGather, 0}, {CpCommType::kA2A, 0}};
  int inner = 1;
  for (int a : divisors(cp))
    if (a * tp <= gpus_per_node) inner = a;
  if (inner > 1 && inner < cp) out.push_back({CpCommType::kA2AP2P, inner});
  return out;
}

// The knob values the search tries (the dispatcher only for MoE models).
struct Knobs {
  std::vector<Dispatcher> dispatchers;
  std::vector<DpSharding> shardings{DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads,
                                    DpSharding::kOptimGradsParams};
  size_t recomputes = 3;
};

// The deeper knobs of a valid mesh `l` (tp, cp, pp and split, ep, etp set).
MeshSpec mesh_spec(const Scenario& base, const Layout& l, const Knobs& k, const SearchConstraints& c) {
  const int N = base.num_gpus;
  const bool moe = has_moe(base.model);
  const int gpn = std::max(1, base.hardware.interconnect.gpus_per_node);
  const int dp = N / (l.tp * l.cp * l.pp);
  const int edp = N / (l.etp * l.ep * l.pp);
  MeshSpec ms;
  ms.mesh = l;
  ms.vls = {0};
  if (l.pp > 1 && l.first_stage_layers == 0 && l.last_stage_layers == 0 && !l.custom_pipeline) {
    const int per_rank = accounted_layers(base) / l.pp;
    for (int d : divisors(per_rank))
      if (d < per_rank) ms.vls.push_back(d);
  }
  const int per_dp = base.training.global_batch_size / dp;
  for (int b = 1; b <= per_dp; b *= 2)
    if (per_dp % b == 0 && c.allows(SizeKnob::kMbs, b)) ms.mbss.push_back(b);
  ms.two_orders = l.pp > 1 && (dp > 1 || edp > 1);
  ms.cp_comms = cp_comms(l.cp, l.tp, gpn);
  if (l.cp > 1)  // with cp == 1 the CP communication names no choice
    std::erase_if(ms.cp_comms, [&](const std::pair<CpCommType, int>& x) { return !c.allows(x.first); });
  // Without a data-parallel group the sharding strategies are the same layout; without
  // expert communication (ep = etp = 1) so are the dispatchers.
  // (With a constraint on sharding, that one layout carries the first allowed strategy.)
  ms.shardings = dp * l.cp > 1 || (moe && edp > 1) ? k.shardings : std::vector<DpSharding>{k.shardings.front()};
  ms.dispatchers = l.ep * l.etp > 1 ? k.dispatchers : std::vector<Dispatcher>{k.dispatchers.front()};
  ms.leaves = static_cast<uint64_t>(ms.vls.size()) * k.recomputes * ms.mbss.size() * ms.cp_comms.size() *
              ms.shardings.size() * ms.dispatchers.size() * (ms.two_orders ? 2 : 1);
  return ms;
}

}  // namespace

Space enumerate_space(const Scenario& base, const SearchConstraints& c) {
  // Meshes, grouped by (tp, cp, ep, etp); each checked once with the most permissive deep
  // knobs (no interleaving, micro-batch 1, no recompute, p2p, distributed optimizer):
  // a mesh those knobs cannot make valid counts as one rejected candidate.
  Space space;
  const int N = base.num_gpus;
  const bool moe = has_moe(base.model);
  Knobs k;
  k.dispatchers = {base.model.moe_token_dispatcher_type};
  if (moe) {
    k.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kFlex};
    std::erase_if(k.dispatchers, [&](Dispatcher d) { return !c.allows(d); });
  }
  std::erase_if(k.shardings, [&](DpSharding x) { return !c.allows(x); });
  std::erase_if(space.recomputes, [&](RecomputeGranularity x) { return !c.allows(x); });
  k.recomputes = space.recomputes.size();
  // SearchConstraints::check leaves a value of every knob (a non-MoE model's dispatcher is its own).
  if (k.dispatchers.empty() || k.shardings.empty() || space.recomputes.empty()) return space;
  std::vector<int> tps;
  for (int t : divisors(std::max(1, base.hardware.interconnect.gpus_per_node)))
    if (N > 0 && N % t == 0 && c.allows(SizeKnob::kTp, t)) tps.push_back(t);
  std::vector<int> eps = moe ? divisors(base.model.num_experts) : std::vector<int>{1};
  std::erase_if(eps, [&](int ep) { return !c.allows(SizeKnob::kEp, ep); });
  for (int tp : tps) {
    for (int cp : divisors(N / tp)) {
      if (!c.allows(SizeKnob::kCp, cp)) continue;
      std::vector<PipelineSplit> splits = pipeline_splits(base, N / (tp * cp));
      std::erase_if(splits, [&](const PipelineSplit& sp) { return !c.allows(SizeKnob::kPp, sp.pp); });
      for (int ep : eps) {
        // Expert TP (MoE parallel folding): any divisor of the dense TP degree (Megatron takes
        // etp independently of tp; 1 and tp are the usual ones, tp 4 / etp 2 runs in its CI).
        const std::vector<int> etps = moe ? divisors(tp) : std::vector<int>{tp};
        for (int etp : etps) {
          if (!c.allows(SizeKnob::kEtp, etp)) continue;
          Item item;
          for (const PipelineSplit& sp : splits) {
            Layout l;
            l.tp = tp, l.cp = cp, l.pp = sp.pp, l.first_stage_layers = sp.first, l.last_stage_layers = sp.last;
            l.custom_pipeline = sp.custom;
            l.ep = ep, l.etp = etp;
            l.sharding = DpSharding::kOptim;
            l.dispatcher = k.dispatchers.front();
            std::vector<Problem> problems = validate_scenario(apply_layout(base, l));
            ++space.meshes_checked;
            if (!problems.empty()) {
              space.rejected_meshes.emplace_back(l, std::move(problems));
              continue;
            }
            MeshSpec ms = mesh_spec(base, l, k, c);
            if (ms.leaves == 0) continue;  // the constraints leave it no layout
            item.meshes.push_back(std::move(ms));
            item.leaves += item.meshes.back().leaves;
          }
          if (!item.meshes.empty()) space.items.push_back(std::move(item));
        }
      }
    }
  }
  // Largest items first: the threads finish together.
  std::stable_sort(space.items.begin(), space.items.end(), [](const Item& a, const Item& b) { return a.leaves > b.leaves; });
  for (const Item& it : space.items) space.leaves += it.leaves;
  return space;
}

}  // namespace lcm::plan
