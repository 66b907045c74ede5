// Device kernels of lcm-exec behind plain C++ launchers (the .cpp files never see CUDA
// syntax). Everything here is enqueued on the given stream and returns at once; launch
// errors throw ExecError.
//
// defines: ElemType, elem_size, fill_uniform, gather_bf16, fill_words, count_wrong_words,
//          copy_vec16, CollCheck, CollPattern, fill_coll_input, count_wrong_coll
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lcm::exec::kernels {

enum class ElemType : uint8_t { kF32, kBf16, kFp8E4M3 };
size_t elem_size(ElemType t);
const char* to_string(ElemType t);  // nccl-tests type names: float, bfloat16, f8e4m3

// p[i] = uniform_pm1(seed, i) rounded to `t` (round to nearest even), i in [0, n).
void fill_uniform(void* p, ElemType t, size_t n, uint64_t seed, cudaStream_t s);
// out[j] = float(p[idx[j]]) for a bf16 array p; idx and out are device arrays of n.
void gather_bf16(const void* p, const int64_t* idx, size_t n, float* out, cudaStream_t s);

// Copy bandwidth: p[i] = word_value(seed, i); the check adds the mismatches to *wrong.
void fill_words(uint32_t* p, size_t n, uint64_t seed, cudaStream_t s);
void count_wrong_words(const uint32_t* p, size_t n, uint64_t seed, unsigned long long* wrong,
                       cudaStream_t s);
// dst[0, bytes) = src[0, bytes) with 16-byte loads and stores; bytes % 16 == 0, both
// pointers 16-byte aligned.
void copy_vec16(void* dst, const void* src, size_t bytes, cudaStream_t s);

// Collectives: rank r's send buffer holds coll_value(seed, r, i); the receive buffer of
// `rank` (n elements) is compared exactly with what the collective must produce.
enum class CollCheck : uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
struct CollPattern {
  ElemType type = ElemType::kF32;
  uint64_t seed = 0;
  int nranks = 1;
  int rank = 0;     // this rank within the communicator
  int peer = 0;     // send/recv: the rank this one receives from
  size_t chunk = 0; // elements per rank: AG input, RS output, A2A block
};
void fill_coll_input(void* p, ElemType t, size_t n, uint64_t seed, int rank, cudaStream_t s);
void count_wrong_coll(const void* p, size_t n, CollCheck op, const CollPattern& pat,
                      unsigned long long* wrong, cudaStream_t s);

}  // namespace lcm::exec::kernels
