// The training runner's caching allocator (allocator.hpp): PyTorch's CUDACachingAllocator
// (c10/cuda/CUDACachingAllocator.cpp) reduced to one stream and no expandable segments.
//
//   request size    rounded up to a multiple of 512 B (at least 512 B)
//   pool            small for rounded sizes <= 1 MiB, large above
//   reuse           best fit among the pool's cached blocks (smallest size, then lowest address)
//   split           a reused or new block is split when the remainder is >= 512 B (small) or
//                   >= 1 MiB (large); the remainder stays cached in the same pool
//   new segment     small: 2 MiB; large: the rounded size, rounded to 2 MiB above 10 MiB
//   free            the block is merged with free neighbours of its own segment, then cached
//   empty_cache     returns every cached block that is a whole segment to the backend
//   out of memory   empty_cache, try again, then ExecError
//
// `allocated` counts the size of the blocks handed out, as PyTorch's allocated_bytes does: a
// large block whose remainder was too small to split is counted whole.
#include "lcm/executor/train/allocator.hpp"

#include <cuda_runtime.h>

#include <cassert>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train {

namespace {

constexpr size_t kMinBlock = 512;  // rounding unit and the smallest small remainder kept
constexpr size_t kSmallSize = size_t{1} << 20;  // largest request of the small pool
constexpr size_t kSmallSegment = size_t{2} << 20;
constexpr size_t kMinLargeRound = size_t{10} << 20;  // large segments above this are rounded to kRoundLarge
constexpr size_t kRoundLarge = size_t{2} << 20;

size_t round_up(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }
size_t round_size(size_t bytes) { return bytes < kMinBlock ? kMinBlock : round_up(bytes, kMinBlock); }
size_t segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  return rounded <= kMinLargeRound ? rounded : round_up(rounded, kRoundLarge);
}

struct Block {
  char* ptr;
  size_t size;
  bool small;
  bool allocated = false;
  MemCategory category = MemCategory::kOther;
  Block* prev = nullptr;  // neighbours inside one backend segment
  Block* next = nullptr;
};

struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};
using Pool = std::set<Block*, BySizeThenAddress>;

std::string mib(size_t bytes) {
  return std::to_string(bytes) + " B (" + std::to_string(static_cast<double>(bytes) / (1 << 20)) + " MiB)";
}

}  // namespace


struct CachingAllocator::Impl {
  RawBackend backend;
  AllocatorStats stats;
  Pool small_pool, large_pool;
  std::unordered_map<void*, Block*> live;

  Pool& pool_of(const Block* b) { return b->small ? small_pool : large_pool; }

  Block* take_cached(size_t rounded) {
    Pool& pool = rounded <= kSmallSize ? small_pool : large_pool;
    Block key{nullptr, rounded, false};
    const auto it = pool.lower_bound(&key);  // smallest size >= rounded; lowest address among equals
    if (it == pool.end()) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  }

  Block* new_segment(size_t rounded) {
    const size_t bytes = segment_size(rounded);
    void* p = backend.alloc(bytes);
    if (!p) {
      release_cached();
      p = backend.alloc(bytes);
    }
    if (!p) return nullptr;
    ++stats.backend_allocations;
    stats.reserved += bytes;
    if (stats.reserved > stats.peak_reserved) stats.peak_reserved = stats.reserved;
    return new Block{static_cast<char*>(p), bytes, rounded <= kSmallSize};
  }

  // Splits b so that it holds `rounded` bytes when the remainder is worth keeping; the
  // remainder goes back to b's pool.
  void maybe_split(Block* b, size_t rounded) {
    const size_t rest = b->size - rounded;
    if (rest < (b->small ? kMinBlock : kSmallSize)) return;
    Block* r = new Block{b->ptr + rounded, rest, b->small};
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = rounded;
    pool_of(r).insert(r);
  }

  // Merges the free neighbour n into b (b stays, n is deleted).
  void absorb(Block* b, Block* n) {
    pool_of(n).erase(n);
    if (n == b->prev) {
      b->ptr = n->ptr;
      b->prev = n->prev;
      if (b->prev) b->prev->next = b;
    } else {
      b->next = n->next;
      if (b->next) b->next->prev = b;
    }
    b->size += n->size;
    delete n;
  }

  void release_cached() {
    for (Pool* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev || b->next) {
          ++it;
          continue;
        }
        it = pool->erase(it);
        stats.reserved -= b->size;
        ++stats.backend_frees;
        backend.free(b->ptr);
        delete b;
      }
    }
  }

  void note_peak() {
    if (stats.allocated <= stats.peak_allocated) return;
    stats.peak_allocated = stats.allocated;
    stats.at_peak_by = stats.allocated_by;
  }
};

CachingAllocator::CachingAllocator(RawBackend backend) : impl_(std::make_unique<Impl>()) {
  assert(backend.alloc && backend.free);
  impl_->backend = std::move(backend);
}

CachingAllocator::~CachingAllocator() {
  Impl& m = *impl_;
  assert(m.live.empty() && "CachingAllocator destroyed with live blocks");
  // Every segment's blocks are either live or cached: gather them by segment, free the
  // segments by their first block (prev == nullptr), delete every block.
  std::vector<Block*> all;
  for (auto& [p, b] : m.live) all.push_back(b);
  for (Pool* pool : {&m.small_pool, &m.large_pool}) all.insert(all.end(), pool->begin(), pool->end());
  for (Block* b : all) {
    if (!b->prev) {
      try {
        m.backend.free(b->ptr);
      } catch (...) {  // a failing cudaFree after an earlier device error: nothing left to do
      }
    }
  }
  for (Block* b : all) delete b;
}

void* CachingAllocator::allocate(size_t bytes, MemCategory c) {
  if (bytes == 0) return nullptr;
  Impl& m = *impl_;
  const size_t rounded = round_size(bytes);
  Block* b = m.take_cached(rounded);
  if (!b) b = m.new_segment(rounded);
  if (!b) {
    const AllocatorStats& s = m.stats;
    throw ExecError("out of device memory: request of " + mib(bytes) + " (rounded " + mib(rounded) + ", segment " +
                    mib(segment_size(rounded)) + ") for " + to_string(c) + " failed after emptying the cache; " +
                    "allocated " + mib(s.allocated) + ", reserved " + mib(s.reserved) + ", peak allocated " +
                    mib(s.peak_allocated) + ", peak reserved " + mib(s.peak_reserved));
  }
  m.maybe_split(b, rounded);
  b->allocated = true;
  b->category = c;
  m.live.emplace(b->ptr, b);
  m.stats.allocated += b->size;
  m.stats.allocated_by[static_cast<size_t>(c)] += b->size;
  ++m.stats.allocations;
  m.note_peak();
  return b->ptr;
}

void CachingAllocator::deallocate(void* p) {
  if (!p) return;
  Impl& m = *impl_;
  const auto it = m.live.find(p);
  assert(it != m.live.end() && "deallocate of a pointer this allocator did not hand out");
  if (it == m.live.end()) throw ExecError("CachingAllocator::deallocate: pointer not allocated here (a bug)");
  Block* b = it->second;
  m.live.erase(it);
  m.stats.allocated -= b->size;
  m.stats.allocated_by[static_cast<size_t>(b->category)] -= b->size;
  ++m.stats.frees;
  b->allocated = false;
  if (b->prev && !b->prev->allocated) m.absorb(b, b->prev);
  if (b->next && !b->next->allocated) m.absorb(b, b->next);
  m.pool_of(b).insert(b);
}

void CachingAllocator::empty_cache() { impl_->release_cached(); }

const AllocatorStats& CachingAllocator::stats() const { return impl_->stats; }

void CachingAllocator::reset_peaks() {
  AllocatorStats& s = impl_->stats;
  s.peak_allocated = s.allocated;
  s.peak_reserved = s.reserved;
  s.at_peak_by = s.allocated_by;
}

RawBackend cuda_backend() {
  RawBackend b;
  b.alloc = [](size_t bytes) -> void* {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: the allocator empties its cache and tries again
      return nullptr;
    }
    LCM_CUDA_CHECK(e);
    return p;
  };
  b.free = [](void* p) { LCM_CUDA_CHECK(cudaFree(p)); };
  return b;
}

}  // namespace lcm::exec::train
