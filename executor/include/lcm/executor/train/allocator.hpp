// The training runner's device memory: a caching allocator in the manner of PyTorch's
// (size-rounded blocks, freed blocks kept for reuse, split large blocks), so that the
// figures it reports are the ones Megatron prints: peak allocated (bytes handed out and
// not yet freed) and peak reserved (bytes obtained from the driver). Every allocation
// names a category, so `lcm compare` can hold the measured bytes against the model's
// terms (weights, grads, optimizer, activations, workspace).
//
// Stream semantics: the runner issues all work of one rank on one compute stream (the
// communication streams of later issues synchronise with it through events before a
// block is freed), so a block freed on the host may be handed out again at once: the
// next user's kernels run after the previous user's in stream order.
//
// The raw backend is injectable so the bookkeeping is tested on the CPU
// (tests/executor/train_allocator_test.cpp); cuda_backend() is cudaMalloc / cudaFree.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "lcm/model/mem_category.hpp"

namespace lcm::exec::train {

// MemCategory, kNumMemCategories and their names: lcm/model/mem_category.hpp (shared with lcm compare).

struct AllocatorStats {
  size_t allocated = 0;       // bytes of live blocks as handed out (rounded sizes)
  size_t reserved = 0;        // bytes held from the backend (live + cached)
  size_t peak_allocated = 0;  // since construction or the last reset_peaks()
  size_t peak_reserved = 0;
  std::array<size_t, kNumMemCategories> allocated_by{};       // live bytes per category
  std::array<size_t, kNumMemCategories> at_peak_by{};         // per category, at the moment of peak_allocated
  int64_t allocations = 0, frees = 0, backend_allocations = 0, backend_frees = 0;
};

struct RawBackend {
  std::function<void*(size_t)> alloc;  // returns nullptr when out of memory
  std::function<void(void*)> free;
};
RawBackend cuda_backend();  // cudaMalloc / cudaFree (allocator.cpp)

class CachingAllocator {
 public:
  explicit CachingAllocator(RawBackend backend);
  ~CachingAllocator();  // returns every cached block to the backend; live blocks are a bug (assert)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // bytes == 0 gives nullptr. On out-of-memory the cache is emptied and the backend tried
  // again; then ExecError naming the request, the category and the current stats.
  void* allocate(size_t bytes, MemCategory c);
  void deallocate(void* p);  // nullptr is a no-op; an unknown pointer is a bug (assert)
  void empty_cache();        // returns unused cached blocks to the backend
  const AllocatorStats& stats() const;
  void reset_peaks();        // peaks := current values

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// RAII device array of T from a CachingAllocator.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(CachingAllocator& a, size_t n, MemCategory c)
      : a_(&a), n_(n), p_(static_cast<T*>(a.allocate(n * sizeof(T), c))) {}
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept : a_(o.a_), n_(o.n_), p_(o.p_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) { reset(); a_ = o.a_; n_ = o.n_; p_ = o.p_; o.p_ = nullptr; o.n_ = 0; }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void reset() { if (p_) a_->deallocate(p_); p_ = nullptr; n_ = 0; }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  CachingAllocator* a_ = nullptr;
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace lcm::exec::train
