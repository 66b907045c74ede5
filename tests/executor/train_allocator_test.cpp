// Host tests of the training runner's caching allocator (lcm/executor/train/allocator.hpp)
// on a malloc backend that counts its calls: hand-derived sequences for rounding, reuse,
// splitting, merging, segment sizes, peaks and the at-peak breakdown, empty_cache and the
// out-of-memory retry, then a randomized sequence checked against reference bookkeeping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/allocator.hpp"

namespace lcm::exec::train {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// malloc with a call count, the live segments, an optional capacity and failures on demand.
struct FakeDevice {
  std::map<char*, size_t> segments;  // live backend segments
  size_t live_bytes = 0;
  size_t capacity = SIZE_MAX;
  int fail_next = 0;  // the next n calls fail as if out of memory
  int64_t alloc_calls = 0, free_calls = 0;
  std::vector<size_t> requested;  // sizes of the successful calls, in order

  RawBackend backend() {
    return RawBackend{[this](size_t n) -> void* {
                        ++alloc_calls;
                        if (fail_next > 0) {
                          --fail_next;
                          return nullptr;
                        }
                        if (live_bytes + n > capacity) return nullptr;
                        char* p = static_cast<char*>(std::malloc(n));
                        segments.emplace(p, n);
                        live_bytes += n;
                        requested.push_back(n);
                        return p;
                      },
                      [this](void* p) {
                        ++free_calls;
                        const auto it = segments.find(static_cast<char*>(p));
                        ASSERT_NE(it, segments.end()) << "the allocator freed a pointer that is no segment start";
                        live_bytes -= it->second;
                        segments.erase(it);
                        std::free(p);
                      }};
  }
};

char* as_char(void* p) { return static_cast<char*>(p); }

TEST(CachingAllocator, RoundsTo512BytesAndCarvesSmallRequestsFromOne2MiBSegment) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  EXPECT_EQ(a.allocate(0, MemCategory::kOther), nullptr);
  a.deallocate(nullptr);
  void* p1 = a.allocate(1, MemCategory::kActivations);  // 512
  void* p2 = a.allocate(513, MemCategory::kActivations);  // 1024
  void* p3 = a.allocate(1 * kMiB, MemCategory::kWeights);  // the largest small request
  EXPECT_EQ(dev.requested, std::vector<size_t>{2 * kMiB});
  EXPECT_EQ(as_char(p2), as_char(p1) + 512);
  EXPECT_EQ(as_char(p3), as_char(p1) + 1536);
  const AllocatorStats& s = a.stats();
  EXPECT_EQ(s.allocated, 512 + 1024 + kMiB);
  EXPECT_EQ(s.reserved, 2 * kMiB);
  EXPECT_EQ(s.allocated_by[static_cast<int>(MemCategory::kActivations)], 1536u);
  EXPECT_EQ(s.allocated_by[static_cast<int>(MemCategory::kWeights)], kMiB);
  EXPECT_EQ(s.allocations, 3);
  EXPECT_EQ(s.backend_allocations, 1);
  // What is left of the segment (2 MiB - 1 MiB - 1536) fits a 1 MiB - 1536 request, not more.
  void* p4 = a.allocate(kMiB - 1536, MemCategory::kOther);
  EXPECT_EQ(as_char(p4), as_char(p3) + kMiB);
  EXPECT_EQ(s.reserved, 2 * kMiB);
  void* p5 = a.allocate(512, MemCategory::kOther);  // the segment is full: a second one
  EXPECT_EQ(s.backend_allocations, 2);
  EXPECT_EQ(s.reserved, 4 * kMiB);
  for (void* p : {p1, p2, p3, p4, p5}) a.deallocate(p);
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.frees, 5);
}

TEST(CachingAllocator, ReusesTheBestFittingCachedBlock) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  void* p1 = a.allocate(512, MemCategory::kOther);
  void* p2 = a.allocate(4096, MemCategory::kOther);
  void* p3 = a.allocate(2048, MemCategory::kOther);
  void* p4 = a.allocate(512, MemCategory::kOther);  // keeps p3 from merging with the segment's tail
  a.deallocate(p2);  // cached: 4096 at p2
  a.deallocate(p3);  // merges with p2: 6144 at p2
  a.deallocate(p1);  // merges too: 6656 at p1
  EXPECT_EQ(a.allocate(100, MemCategory::kOther), p1);  // best fit is the 6656 block (the tail is larger)
  void* q = a.allocate(6144, MemCategory::kOther);  // the rest of it, exactly
  EXPECT_EQ(as_char(q), as_char(p1) + 512);
  EXPECT_EQ(dev.alloc_calls, 1);
  a.deallocate(q);
  a.deallocate(p1);
  a.deallocate(p4);
}

TEST(CachingAllocator, LargeRequestsGetTheirRoundedSizeAndSplitOnlyWhenTheRestIsAtLeast1MiB) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  const AllocatorStats& s = a.stats();
  void* p = a.allocate(3 * kMiB + 1, MemCategory::kWeights);  // rounded 3 MiB + 512, <= 10 MiB: segment as rounded
  EXPECT_EQ(dev.requested.back(), 3 * kMiB + 512);
  void* q = a.allocate(10 * kMiB + 1, MemCategory::kWeights);  // 10 MiB + 512 > 10 MiB: segment 12 MiB
  EXPECT_EQ(dev.requested.back(), 12 * kMiB);
  EXPECT_EQ(s.allocated, 13 * kMiB + 1024);  // the 2 MiB - 512 tail of the 12 MiB segment was split off
  EXPECT_EQ(s.reserved, 15 * kMiB + 512);
  // The tail (2 MiB - 512) serves 1.5 MiB; the rest (0.5 MiB - 512) is too small to split, so
  // the whole tail is handed out and counted, as PyTorch's allocated_bytes counts it.
  void* r = a.allocate(kMiB + kMiB / 2, MemCategory::kActivations);
  EXPECT_EQ(as_char(r), as_char(q) + 10 * kMiB + 512);
  EXPECT_EQ(dev.alloc_calls, 2);
  EXPECT_EQ(s.allocated_by[static_cast<int>(MemCategory::kActivations)], 2 * kMiB - 512);
  EXPECT_EQ(s.allocated, 15 * kMiB + 512);
  a.deallocate(r);
  // 11 MiB: segment 12 MiB, the 1 MiB rest is split off (>= 1 MiB) and cached.
  void* t = a.allocate(11 * kMiB, MemCategory::kOther);
  EXPECT_EQ(dev.requested.back(), 12 * kMiB);
  EXPECT_EQ(s.allocated_by[static_cast<int>(MemCategory::kOther)], 11 * kMiB);
  // A small request never takes a large block: a new 2 MiB segment.
  void* u = a.allocate(1000, MemCategory::kOther);
  EXPECT_EQ(dev.requested.back(), 2 * kMiB);
  EXPECT_EQ(dev.alloc_calls, 4);
  for (void* x : {p, q, t, u}) a.deallocate(x);
}

TEST(CachingAllocator, BestFitAmongLargeBlocksAndNoSplitBelow1MiB) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  void* b4 = a.allocate(4 * kMiB, MemCategory::kOther);
  void* b6 = a.allocate(6 * kMiB, MemCategory::kOther);
  void* b5 = a.allocate(5 * kMiB, MemCategory::kOther);
  for (void* p : {b4, b6, b5}) a.deallocate(p);
  EXPECT_EQ(a.allocate(4 * kMiB + kMiB / 2, MemCategory::kOther), b5);  // 5 MiB fits best, rest 0.5 MiB kept with it
  EXPECT_EQ(a.stats().allocated, 5 * kMiB);
  EXPECT_EQ(a.allocate(3 * kMiB, MemCategory::kOther), b4);  // 4 MiB: split, 1 MiB cached at b4 + 3 MiB
  EXPECT_EQ(a.stats().allocated, 8 * kMiB);
  EXPECT_EQ(a.allocate(kMiB + 512, MemCategory::kOther), b6);  // the cached 1 MiB rest is too small; 6 MiB is split
  EXPECT_EQ(dev.alloc_calls, 3);
  // The split 4 MiB segment merges back when both halves are free: empty_cache returns it.
  a.deallocate(b4);
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 1);
  EXPECT_EQ(a.stats().reserved, 11 * kMiB);
  a.deallocate(b5);
  a.deallocate(b6);
}

TEST(CachingAllocator, FreedNeighboursMergeSoEmptyCacheReturnsTheSegment) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  void* x = a.allocate(512, MemCategory::kOther);
  void* y = a.allocate(512, MemCategory::kOther);
  void* z = a.allocate(512, MemCategory::kOther);
  a.deallocate(x);
  a.deallocate(z);  // merges with the free tail
  a.empty_cache();  // y still splits the segment: nothing to return
  EXPECT_EQ(dev.free_calls, 0);
  EXPECT_EQ(a.stats().reserved, 2 * kMiB);
  a.deallocate(y);  // merges with both neighbours: one whole free segment
  // A request for the whole segment is served from it without a backend call.
  EXPECT_EQ(a.allocate(kMiB, MemCategory::kOther), x);
  void* w = a.allocate(kMiB, MemCategory::kOther);
  EXPECT_EQ(as_char(w), as_char(x) + kMiB);
  EXPECT_EQ(dev.alloc_calls, 1);
  a.deallocate(x);
  a.deallocate(w);
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 1);
  EXPECT_EQ(a.stats().reserved, 0u);
  EXPECT_EQ(a.stats().backend_frees, 1);
  EXPECT_TRUE(dev.segments.empty());
}

TEST(CachingAllocator, PeaksAndTheBreakdownAtThePeak) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  const AllocatorStats& s = a.stats();
  auto at_peak = [&](MemCategory c) { return s.at_peak_by[static_cast<int>(c)]; };
  void* w = a.allocate(4 * kMiB, MemCategory::kWeights);
  void* act = a.allocate(3 * kMiB, MemCategory::kActivations);
  EXPECT_EQ(s.peak_allocated, 7 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kWeights), 4 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kActivations), 3 * kMiB);
  a.deallocate(act);
  void* g = a.allocate(2 * kMiB, MemCategory::kGrads);  // from the cached 3 MiB block, 1 MiB split off
  EXPECT_EQ(g, act);
  EXPECT_EQ(s.allocated, 6 * kMiB);
  EXPECT_EQ(s.peak_allocated, 7 * kMiB);  // below the peak: the breakdown stays
  EXPECT_EQ(at_peak(MemCategory::kGrads), 0u);
  EXPECT_EQ(at_peak(MemCategory::kActivations), 3 * kMiB);
  void* o = a.allocate(2 * kMiB, MemCategory::kOptimizer);  // the cached 1 MiB is too small: new segment
  EXPECT_EQ(s.allocated, 8 * kMiB);
  EXPECT_EQ(s.peak_allocated, 8 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kWeights), 4 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kGrads), 2 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kOptimizer), 2 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kActivations), 0u);
  EXPECT_EQ(s.reserved, 9 * kMiB);
  EXPECT_EQ(s.peak_reserved, 9 * kMiB);
  a.deallocate(o);
  a.deallocate(g);
  a.empty_cache();  // returns the 2 MiB and the merged 3 MiB segments
  EXPECT_EQ(s.reserved, 4 * kMiB);
  EXPECT_EQ(s.peak_reserved, 9 * kMiB);
  a.reset_peaks();
  EXPECT_EQ(s.peak_allocated, 4 * kMiB);
  EXPECT_EQ(s.peak_reserved, 4 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kWeights), 4 * kMiB);
  EXPECT_EQ(at_peak(MemCategory::kOptimizer), 0u);
  a.deallocate(w);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeDevice dev;
  CachingAllocator a(dev.backend());
  a.deallocate(a.allocate(8 * kMiB, MemCategory::kActivations));  // cached, unsplit
  dev.fail_next = 1;
  void* p = a.allocate(9 * kMiB, MemCategory::kActivations);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(dev.alloc_calls, 3);  // 8 MiB, the failed 9 MiB, the retried 9 MiB
  EXPECT_EQ(dev.free_calls, 1);  // the cached 8 MiB went back before the retry
  EXPECT_EQ(a.stats().reserved, 9 * kMiB);
  EXPECT_EQ(a.stats().backend_allocations, 2);
  a.deallocate(p);
}

TEST(CachingAllocator, OutOfMemoryAfterTheRetryNamesTheRequestCategoryAndStats) {
  FakeDevice dev;
  dev.capacity = 16 * kMiB;
  CachingAllocator a(dev.backend());
  void* w = a.allocate(12 * kMiB, MemCategory::kWeights);
  try {
    a.allocate(5 * kMiB, MemCategory::kOptimizer);
    FAIL() << "no ExecError";
  } catch (const ExecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("5242880 B"), std::string::npos) << m;
    EXPECT_NE(m.find("optimizer"), std::string::npos) << m;
    EXPECT_NE(m.find("allocated 12582912 B"), std::string::npos) << m;
    EXPECT_NE(m.find("reserved 12582912 B"), std::string::npos) << m;
  }
  EXPECT_EQ(dev.alloc_calls, 3);  // 12 MiB, then 5 MiB twice
  EXPECT_EQ(a.stats().allocated, 12 * kMiB);
  EXPECT_EQ(a.stats().allocations, 1);
  a.deallocate(w);
}

TEST(CachingAllocator, DestructorReturnsEverySegment) {
  FakeDevice dev;
  {
    CachingAllocator a(dev.backend());
    DeviceArray<float> x(a, 1000, MemCategory::kWeights);
    EXPECT_EQ(x.bytes(), 4000u);
    EXPECT_EQ(a.stats().allocated, 4096u);
    DeviceArray<float> y = std::move(x);
    EXPECT_EQ(x.get(), nullptr);
    a.deallocate(a.allocate(12 * kMiB, MemCategory::kOther));
    void* s = a.allocate(100, MemCategory::kOther);
    a.deallocate(s);
    y.reset();
    EXPECT_EQ(a.stats().allocated, 0u);
    EXPECT_EQ(dev.segments.size(), 2u);
  }
  EXPECT_TRUE(dev.segments.empty());
  EXPECT_EQ(dev.free_calls, 2);
}

// Random allocate / free sequence against reference bookkeeping: allocated is the sum of the
// rounded requests plus at most (1 MiB - 512) per live large block; live blocks lie inside a
// backend segment and do not overlap (and keep the fill pattern written at their ends);
// reserved is what the backend holds and is >= allocated; peaks are the maxima seen; out of
// memory happens only when the needed segment does not fit even with the cache emptied.
struct LiveBlock {
  char* p;
  size_t rounded;
  unsigned char tag;
  MemCategory c;
};

void fill_ends(const LiveBlock& l) {
  const size_t n = std::min<size_t>(l.rounded, 512);
  std::memset(l.p, l.tag, n);
  std::memset(l.p + l.rounded - n, l.tag, n);
}

void check_ends(const LiveBlock& l) {
  const size_t n = std::min<size_t>(l.rounded, 512);
  for (size_t k = 0; k < n; ++k) {
    ASSERT_EQ(static_cast<unsigned char>(l.p[k]), l.tag);
    ASSERT_EQ(static_cast<unsigned char>(l.p[l.rounded - n + k]), l.tag);
  }
}

void check_disjoint_inside_segments(std::vector<LiveBlock> live, const FakeDevice& dev) {
  std::sort(live.begin(), live.end(), [](const LiveBlock& x, const LiveBlock& y) { return x.p < y.p; });
  for (size_t i = 0; i < live.size(); ++i) {
    if (i + 1 < live.size()) {
      ASSERT_LE(live[i].p + live[i].rounded, live[i + 1].p);
    }
    auto seg = dev.segments.upper_bound(live[i].p);
    ASSERT_NE(seg, dev.segments.begin());
    --seg;
    ASSERT_LE(live[i].p + live[i].rounded, seg->first + seg->second);
  }
}

size_t reference_segment(size_t rounded) {
  const size_t two = 2 * kMiB;
  if (rounded <= kMiB) return two;
  return rounded <= 10 * kMiB ? rounded : (rounded + two - 1) / two * two;
}

TEST(CachingAllocator, RandomSequenceAgreesWithReferenceBookkeeping) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    FakeDevice dev;
    dev.capacity = 96 * kMiB;
    CachingAllocator a(dev.backend());
    const AllocatorStats& s = a.stats();
    std::mt19937_64 rng(seed);
    std::vector<LiveBlock> live;
    size_t max_allocated = 0, max_reserved = 0, ooms = 0, empties = 0;
    for (int step = 0; step < 4000; ++step) {
      const bool do_alloc = live.empty() || rng() % 100 < (live.size() < 40 ? 60u : 40u);
      if (do_alloc) {
        const int kind = static_cast<int>(rng() % 10);
        const size_t bytes = kind < 6   ? 1 + rng() % (64 * kKiB)
                             : kind < 8 ? 1 + rng() % (kMiB + 4 * kKiB)
                                        : kMiB + rng() % (24 * kMiB);
        const size_t rounded = (bytes + 511) / 512 * 512;
        const auto c = static_cast<MemCategory>(rng() % kNumMemCategories);
        void* p = nullptr;
        try {
          p = a.allocate(bytes, c);
        } catch (const ExecError&) {
          ++ooms;
          ASSERT_GT(dev.live_bytes + reference_segment(rounded), dev.capacity);
          continue;
        }
        live.push_back({as_char(p), rounded, static_cast<unsigned char>(rng()), c});
        fill_ends(live.back());
      } else {
        const size_t i = rng() % live.size();
        check_ends(live[i]);
        a.deallocate(live[i].p);
        live[i] = live.back();
        live.pop_back();
        if (rng() % 200 == 0) {
          a.empty_cache();
          ++empties;
        }
      }
      check_disjoint_inside_segments(live, dev);
      size_t sum = 0, slack = 0;
      std::array<size_t, kNumMemCategories> by{};
      for (const LiveBlock& l : live) {
        sum += l.rounded;
        by[static_cast<int>(l.c)] += l.rounded;
        if (l.rounded > kMiB) slack += kMiB - 512;
      }
      ASSERT_GE(s.allocated, sum);
      ASSERT_LE(s.allocated, sum + slack);
      size_t by_total = 0;
      for (int c = 0; c < kNumMemCategories; ++c) {
        ASSERT_GE(s.allocated_by[c], by[c]);
        by_total += s.allocated_by[c];
      }
      ASSERT_EQ(by_total, s.allocated);
      ASSERT_EQ(s.reserved, dev.live_bytes);
      ASSERT_GE(s.reserved, s.allocated);
      max_allocated = std::max(max_allocated, s.allocated);
      max_reserved = std::max(max_reserved, s.reserved);
      ASSERT_EQ(s.peak_allocated, max_allocated);
      ASSERT_EQ(s.peak_reserved, max_reserved);
    }
    EXPECT_GT(ooms, 0u) << "the capacity never bound; the out-of-memory path went untested";
    EXPECT_GT(empties, 0u);
    for (const LiveBlock& l : live) a.deallocate(l.p);
    EXPECT_EQ(s.allocated, 0u);
    a.empty_cache();  // every segment merged back whole
    EXPECT_EQ(s.reserved, 0u);
    EXPECT_TRUE(dev.segments.empty());
    EXPECT_EQ(s.backend_allocations, s.backend_frees);
  }
}

}  // namespace
}  // namespace lcm::exec::train
