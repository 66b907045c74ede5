// Ring attention over a context-parallel group with load-balanced causal chunks (Megatron /
// Transformer Engine AttnFuncWithCPAndKVP2P): the host-side rules, no GPU needed.
//
// The sequence of S tokens is cut into 2 cp chunks of c = S / (2 cp); rank r holds chunks r
// and 2cp-1-r, concatenated, so its local rows 0..c-1 are global rows r c.., and local rows
// c..2c-1 are global rows (2cp-1-r) c... At ring step i (0..cp-1) rank r holds the K, V of
// rank (r - i) mod cp and computes, as TE does:
//   i = 0        diagonal: all 2c local queries against its own 2c keys, causal mask
//                (chunk r before chunk 2cp-1-r, so the local causal mask is the global one);
//   1 <= i <= r  lower: all 2c queries against the first half (chunk r-i) of the received
//                keys, no mask (that chunk lies before both of r's chunks);
//   i > r        upper: the second half of the queries (chunk 2cp-1-r) against all 2c
//                received keys, no mask (both of the source's chunks lie before it).
// Every step costs the same, 2 c^2 query-key pairs: the load balance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lcm::exec {

enum class CpStepKind : uint8_t { kDiagonal, kLower, kUpper };
const char* to_string(CpStepKind k);

struct CpLayout {
  int64_t seq = 0;  // S, the full sequence
  int cp = 1;
  int rank = 0;     // rank in the CP group
  int64_t chunk() const { return seq / (2 * cp); }
  int64_t local_rows() const { return 2 * chunk(); }
  void validate() const;  // throws UsageError: S % (2 cp) == 0
  // Global row of local row i (0 <= i < 2c).
  int64_t global_row(int64_t local) const;
  // Local row of global row g on the rank that holds it, and that rank.
  static int owner(int64_t global, int64_t seq, int cp);
  static int64_t local_of(int64_t global, int64_t seq, int cp);
  CpStepKind step_kind(int step) const;
  int kv_source(int step) const { return ((rank - step) % cp + cp) % cp; }
  // The rows a step touches: queries [q_begin, q_begin + q_rows) of the local 2c, keys
  // [k_begin, k_begin + k_rows) of the source's local 2c.
  struct Span {
    int64_t q_begin = 0, q_rows = 0, k_begin = 0, k_rows = 0;
    bool causal = false;
  };
  Span step_span(int step) const;
};

// Every (global query, global key) pair the ring computes over all ranks and steps, as
// q * S + k (host tests: exactly the causal pairs, each once).
std::vector<int64_t> cp_ring_pairs(int64_t seq, int cp);

}  // namespace lcm::exec
