// Mesh derivation, layer-to-stage assignment and Megatron's rank-order rule.
#include "lcm/model/mesh.hpp"

#include <algorithm>
#include <cassert>

namespace lcm {

int64_t padded_vocab_size(int64_t vocab, int divisible_by, int tp) {
  const int64_t multiple = static_cast<int64_t>(divisible_by > 0 ? divisible_by : 1) * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

bool is_moe_layer(const ModelSpec& model, int layer) {
  if (!has_moe(model)) return false;
  if (model.moe_layer_pattern.empty()) return true;
  assert(layer >= 0 && layer < static_cast<int>(model.moe_layer_pattern.size()));
  return model.moe_layer_pattern[static_cast<size_t>(layer)] != 0;
}

namespace {

// Transformer layers on each pipeline rank in pipeline order, before interleaving.
// Megatron: an even split of num_layers (plus one virtual layer each for the embedding
// and the loss when accounted for), or explicit first/last stage sizes with the rest
// split evenly over the middle stages.
void pipeline_split(const ModelSpec& model, const ParallelSpec& par, int* counts) {
  const int p = par.pipeline_model_parallel_size;
  const int L = model.num_layers;
  if (p == 1) {
    counts[0] = L;
    return;
  }
  const int first = par.num_layers_in_first_pipeline_stage;
  const int last = par.num_layers_in_last_pipeline_stage;
  if (first > 0 || last > 0) {
    int middle_ranks = p - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
    int rest = L - first - last;
    int per = middle_ranks > 0 ? rest / middle_ranks : 0;
    for (int r = 0; r < p; ++r) counts[r] = per;
    if (first > 0) counts[0] = first;
    if (last > 0) counts[p - 1] = last;
    return;
  }
  const int emb = par.account_for_embedding_in_pipeline_split ? 1 : 0;
  const int loss = par.account_for_loss_in_pipeline_split ? 1 : 0;
  const int per = (L + emb + loss) / p;
  for (int r = 0; r < p; ++r) counts[r] = per;
  counts[0] -= emb;
  counts[p - 1] -= loss;
}

}  // namespace

Mesh derive_mesh(const Scenario& s) {
  const ParallelSpec& par = s.parallel;
  Mesh m;
  m.world = s.num_gpus;
  m.tp = par.tensor_model_parallel_size;
  m.cp = par.context_parallel_size;
  m.pp = par.pipeline_model_parallel_size;
  m.dp = m.world / (m.tp * m.cp * m.pp);
  m.etp = par.expert_tensor_parallel_size > 0 ? par.expert_tensor_parallel_size : m.tp;
  m.ep = has_moe(s.model) ? par.expert_model_parallel_size : 1;
  m.edp = m.world / (m.etp * m.ep * m.pp);
  m.sp = par.sequence_parallel && m.tp > 1;
  if (!par.pipeline_layout.empty() && m.pp > 0) {
    m.vp = static_cast<int>(par.pipeline_layout.size()) / m.pp;
  } else if (par.num_layers_per_virtual_pipeline_stage > 0 && m.pp > 1) {
    const int emb = par.account_for_embedding_in_pipeline_split ? 1 : 0;
    const int loss = par.account_for_loss_in_pipeline_split ? 1 : 0;
    const int per_rank = (s.model.num_layers + emb + loss) / m.pp;
    m.vp = per_rank / par.num_layers_per_virtual_pipeline_stage;
  }
  const int per_pipeline_batch = s.training.micro_batch_size * m.dp;
  m.num_micro_batches = per_pipeline_batch > 0 ? s.training.global_batch_size / per_pipeline_batch : 0;
  m.padded_vocab = padded_vocab_size(s.model.vocab_size, s.model.make_vocab_size_divisible_by, m.tp);
  return m;
}

namespace {

// Whether the layer at position `pos` of its model chunk is fully recomputed.
bool recomputed(const ParallelSpec& par, int pos) {
  if (par.recompute_granularity != RecomputeGranularity::kFull) return false;
  return par.recompute_method == RecomputeMethod::kUniform || pos < par.recompute_num_layers;
}

void add_layer(const ModelSpec& model, const ParallelSpec& par, int layer, int pos, StageLayers& st) {
  const bool moe = is_moe_layer(model, layer);
  ++st.num_layers;
  st.num_moe_layers += moe ? 1 : 0;
  if (recomputed(par, pos)) {
    ++st.num_recomputed_layers;
    st.num_recomputed_moe_layers += moe ? 1 : 0;
  }
}

// Calls f(rank, chunk, layer, pos) for every transformer layer in the order each pipeline
// rank runs its model chunks: `chunk` the rank's model chunk (0 without interleaving), `layer`
// the global 0-based index, `pos` its position in its chunk.
template <class F>
void for_each_stage_layer(const Scenario& s, const Mesh& m, F&& f) {
  const ModelSpec& model = s.model;
  const int p = m.pp;
  if (const std::vector<std::string>& layout = s.parallel.pipeline_layout; !layout.empty()) {
    // A custom layout: stage j * p + r is rank r's chunk j; layers are numbered in stage order.
    std::vector<int> first_layer(layout.size() + 1, 0);
    for (size_t st = 0; st < layout.size(); ++st)
      first_layer[st + 1] = first_layer[st] + static_cast<int>(std::count(layout[st].begin(), layout[st].end(), 't'));
    for (int r = 0; r < p; ++r)
      for (int j = 0; j < m.vp; ++j) {
        const size_t st = static_cast<size_t>(j * p + r);
        for (int layer = first_layer[st], pos = 0; layer < first_layer[st + 1]; ++layer, ++pos) f(r, j, layer, pos);
      }
    return;
  }
  int counts[1024];
  assert(p <= 1024);
  pipeline_split(model, s.parallel, counts);

  if (m.vp > 1) {
    // Interleaved: global chunk c = j*p + r holds layers [c*n, (c+1)*n) in model order,
    // where n = layers per virtual stage; the embedding-accounted virtual layer shifts
    // all layer indices by one on chunk 0 of rank 0.
    const int n = s.parallel.num_layers_per_virtual_pipeline_stage;
    const int emb = s.parallel.account_for_embedding_in_pipeline_split ? 1 : 0;
    for (int r = 0; r < p; ++r) {
      for (int j = 0; j < m.vp; ++j) {
        const int chunk = j * p + r;
        int pos = 0;
        for (int v = chunk * n; v < (chunk + 1) * n; ++v) {
          const int layer = v - emb;
          if (layer < 0 || layer >= model.num_layers) continue;  // embedding / loss slots
          f(r, j, layer, pos++);
        }
      }
    }
  } else {
    int layer = 0;
    for (int r = 0; r < p; ++r)
      for (int i = 0; i < counts[r]; ++i, ++layer) f(r, 0, layer, i);
  }
}

}  // namespace

StructureKey structure_key(const Scenario& s, const Mesh& m) {
  const ParallelSpec& p = s.parallel;
  return {.shards = shard_key(m),
          .split = pipeline_split_key(s, m),
          .account_for_embedding = p.account_for_embedding_in_pipeline_split,
          .account_for_loss = p.account_for_loss_in_pipeline_split,
          .recompute_granularity = static_cast<int32_t>(p.recompute_granularity),
          .recompute_method = static_cast<int32_t>(p.recompute_method),
          .recompute_num_layers = p.recompute_num_layers,
          .recompute_modules = static_cast<int32_t>(p.recompute_modules)};
}

std::vector<StageLayers> stage_layers(const Scenario& s, const Mesh& m) {
  const ModelSpec& model = s.model;
  std::vector<StageLayers> out(static_cast<size_t>(m.pp));
  for_each_stage_layer(s, m, [&](int r, int, int layer, int pos) {
    add_layer(model, s.parallel, layer, pos, out[static_cast<size_t>(r)]);
  });
  // A custom layout must put the embedding on rank 0 and the loss and the MTP layers on the
  // last rank (validate.cpp), where Megatron's default split has them.
  out.front().has_embedding = true;
  out.back().has_output = true;
  out.back().num_mtp_layers = model.mtp_num_layers;
  return out;
}

uint64_t pipeline_layout_hash(const std::vector<std::string>& stages) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (const std::string& st : stages) {
    for (char c : st) mix(static_cast<unsigned char>(c));
    mix('|');
  }
  return h == 0 ? 1 : h;
}

std::vector<std::vector<int>> stage_layer_indices(const Scenario& s, const Mesh& m) {
  std::vector<std::vector<int>> out(static_cast<size_t>(m.pp));
  for_each_stage_layer(s, m, [&](int r, int, int layer, int) { out[static_cast<size_t>(r)].push_back(layer); });
  return out;
}

std::vector<StageLayers> chunk_layers(const Scenario& s, const Mesh& m) {
  const ModelSpec& model = s.model;
  const size_t vp = static_cast<size_t>(std::max(1, m.vp));
  std::vector<StageLayers> out(static_cast<size_t>(m.pp) * vp);
  for_each_stage_layer(s, m, [&](int r, int j, int layer, int pos) {
    add_layer(model, s.parallel, layer, pos, out[static_cast<size_t>(r) * vp + static_cast<size_t>(j)]);
  });
  // Where stage_layers puts them: the embedding first, the loss and the MTP layers last.
  out.front().has_embedding = true;
  out.back().has_output = true;
  out.back().num_mtp_layers = model.mtp_num_layers;
  return out;
}

// ---------------------------------------------------------------------------------
// Rank order
// ---------------------------------------------------------------------------------
namespace {
constexpr int idx(Dim d) { return static_cast<int>(d); }
}  // namespace

RankGrid dense_grid(const Mesh& m, const ParallelSpec& p) {
  RankGrid g;
  g.size[idx(Dim::kTp)] = m.tp;
  g.size[idx(Dim::kCp)] = m.cp;
  g.size[idx(Dim::kEp)] = 1;
  g.size[idx(Dim::kDp)] = m.dp;
  g.size[idx(Dim::kPp)] = m.pp;
  for (int i = 0; i < kNumOrderDims; ++i) g.order[static_cast<size_t>(i)] = p.order[i];
  return g;
}

RankGrid expert_grid(const Mesh& m, const ParallelSpec& p) {
  RankGrid g;
  g.size[idx(Dim::kTp)] = m.etp;
  g.size[idx(Dim::kCp)] = 1;
  g.size[idx(Dim::kEp)] = m.ep;
  g.size[idx(Dim::kDp)] = m.edp;
  g.size[idx(Dim::kPp)] = m.pp;
  for (int i = 0; i < kNumOrderDims; ++i) g.order[static_cast<size_t>(i)] = p.order[i];
  return g;
}

std::array<int, kNumOrderDims> coords_of(const RankGrid& g, int rank) {
  std::array<int, kNumOrderDims> c{};
  for (Dim d : g.order) {
    const int n = g.size[static_cast<size_t>(idx(d))];
    c[static_cast<size_t>(idx(d))] = rank % n;
    rank /= n;
  }
  return c;
}

int rank_of(const RankGrid& g, const std::array<int, kNumOrderDims>& coords) {
  int rank = 0;
  int stride = 1;
  for (Dim d : g.order) {
    rank += coords[static_cast<size_t>(idx(d))] * stride;
    stride *= g.size[static_cast<size_t>(idx(d))];
  }
  return rank;
}

std::vector<int> group_ranks(const RankGrid& g, Dim dim, int rank) {
  std::array<int, kNumOrderDims> c = coords_of(g, rank);
  const int n = g.size[static_cast<size_t>(idx(dim))];
  std::vector<int> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    c[static_cast<size_t>(idx(dim))] = i;
    out.push_back(rank_of(g, c));
  }
  return out;
}

}  // namespace lcm
