// Load-balanced CP chunk layout and ring steps (see cp_attention.hpp).
#include "lcm/executor/cp_attention.hpp"

#include "lcm/executor/error.hpp"

namespace lcm::exec {

const char* to_string(CpStepKind k) {
  switch (k) {
    case CpStepKind::kDiagonal: return "diagonal";
    case CpStepKind::kLower: return "lower";
    case CpStepKind::kUpper: return "upper";
  }
  return "?";
}

void CpLayout::validate() const {
  if (cp < 1 || rank < 0 || rank >= cp) throw UsageError("cp-attention: bad CP rank");
  if (seq < 2 * cp || seq % (2 * cp) != 0)
    throw UsageError("cp-attention: the sequence " + std::to_string(seq) + " must be a multiple of 2 x cp = " +
                     std::to_string(2 * cp) + " (seq_length % (2 CP) == 0)");
}

int64_t CpLayout::global_row(int64_t local) const {
  const int64_t c = chunk();
  return local < c ? rank * c + local : (2 * cp - 1 - rank) * c + (local - c);
}

int CpLayout::owner(int64_t global, int64_t seq, int cp) {
  const int64_t c = seq / (2 * cp);
  const int64_t ch = global / c;
  return static_cast<int>(ch < cp ? ch : 2 * cp - 1 - ch);
}

int64_t CpLayout::local_of(int64_t global, int64_t seq, int cp) {
  const int64_t c = seq / (2 * cp);
  const int64_t ch = global / c;
  return ch < cp ? global % c : c + global % c;
}

CpStepKind CpLayout::step_kind(int step) const {
  if (step == 0) return CpStepKind::kDiagonal;
  return step <= rank ? CpStepKind::kLower : CpStepKind::kUpper;
}

CpLayout::Span CpLayout::step_span(int step) const {
  const int64_t c = chunk();
  switch (step_kind(step)) {
    case CpStepKind::kDiagonal: return {0, 2 * c, 0, 2 * c, true};
    case CpStepKind::kLower: return {0, 2 * c, 0, c, false};
    case CpStepKind::kUpper: return {c, c, 0, 2 * c, false};
  }
  return {};
}

std::vector<int64_t> cp_ring_pairs(int64_t seq, int cp) {
  std::vector<int64_t> out;
  for (int r = 0; r < cp; ++r) {
    const CpLayout me{seq, cp, r};
    me.validate();
    for (int i = 0; i < cp; ++i) {
      const CpLayout src{seq, cp, me.kv_source(i)};
      const CpLayout::Span sp = me.step_span(i);
      for (int64_t q = sp.q_begin; q < sp.q_begin + sp.q_rows; ++q)
        for (int64_t k = sp.k_begin; k < sp.k_begin + sp.k_rows; ++k) {
          if (sp.causal && k - sp.k_begin > q - sp.q_begin) continue;
          out.push_back(me.global_row(q) * seq + src.global_row(k));
        }
    }
  }
  return out;
}

}  // namespace lcm::exec
