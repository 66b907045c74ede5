// The helpers the benchmark families share (executor/src/infra/run_context.hpp) that need
// neither a GPU nor MPI: the --point-ms repetition count, the warm-up of a single rank, the
// fwd+bwd series sum, rank lists and the exact checks' Comparison. Hand-derived values.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "infra/run_context.hpp"

namespace lcm::exec {
namespace {

TEST(BenchHelpers, RepsForPointMs) {
  EXPECT_EQ(reps_for_point(20, 2000, 0.25), 8);   // 2 s / 0.25 s
  EXPECT_EQ(reps_for_point(20, 2000, 0.5), 5);    // 4, raised to the minimum of 5
  EXPECT_EQ(reps_for_point(3, 2000, 0.5), 3);     // never more than -n
  EXPECT_EQ(reps_for_point(20, 2000, 0.01), 20);  // 200, capped at -n
  EXPECT_EQ(reps_for_point(20, 0, 0.5), 20);      // --point-ms 0: off
  EXPECT_EQ(reps_for_point(20, 2000, 0), 20);     // repetition time unknown
}

TEST(BenchHelpers, WarmUpCountsRepetitionsInBatches) {
  std::vector<int> reps;
  int waits = 0;
  Warmup w = warm_up(3, 0, [&](int i) { reps.push_back(i); }, [&] { ++waits; });
  EXPECT_EQ(w.done, 3);
  EXPECT_EQ(reps, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(waits, 1);

  reps.clear();
  waits = 0;
  w = warm_up(0, 0, [&](int i) { reps.push_back(i); }, [&] { ++waits; });
  EXPECT_EQ(w.done, 0);  // -w 0 and no minimum time: no warm-up at all
  EXPECT_TRUE(reps.empty());
  EXPECT_EQ(waits, 0);
}

TEST(BenchHelpers, WarmUpLastsAtLeastTheMinimumTime) {
  // Batches of 4 repetitions of >= 2 ms each until >= 30 ms have passed.
  std::vector<int> reps;
  int waits = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const Warmup w = warm_up(
      4, 0.03,
      [&](int i) {
        reps.push_back(i);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      [&] { ++waits; });
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(elapsed, 0.03);
  EXPECT_GE(w.done, 4);
  EXPECT_EQ(w.done % 4, 0);
  EXPECT_EQ(waits, w.done / 4);
  ASSERT_EQ(static_cast<int>(reps.size()), w.done);
  for (int i = 0; i < w.done; ++i) EXPECT_EQ(reps[static_cast<size_t>(i)], i);
  EXPECT_GE(w.rep_s, 0.002);  // the last batch's time per repetition
}

TEST(BenchHelpers, SeriesAndRanks) {
  EXPECT_EQ(sum_series({1.0, 2.5, 3.0}, {10.0, 20.0, 0.5}), (std::vector<double>{11.0, 22.5, 3.5}));
  EXPECT_EQ(ranks_text({0, 2, 5}), "0 2 5");
  EXPECT_EQ(ranks_text({}), "");
  EXPECT_EQ(peers_of({0, 2, 5}, 2), (std::vector<int>{0, 5}));
  EXPECT_TRUE(peers_of({3}, 3).empty());
}

TEST(BenchHelpers, ExactChecksReportThroughTheComparer) {
  const Comparison ok = exact_comparison(1000, 0);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.failures(), 0);
  EXPECT_EQ(ok.checked, 1000);
  const Comparison bad = exact_comparison(1000, 3);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.failures(), 3);  // what membw and collectives count as #wrong
  EXPECT_EQ(bad.checked, 1000);
}

}  // namespace
}  // namespace lcm::exec
