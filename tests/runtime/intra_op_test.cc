// Gang (runtime/intra_op.h): parts are claimed one at a time from a ticket
// tagged with the run's generation, so across many back-to-back runs every
// part runs exactly once, on the run it belongs to, whether a helper is
// spinning, asleep or late.
#include "runtime/intra_op.h"
#include "runtime/thread_pool.h"

#include <atomic>
#include <new>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace shardscope::runtime {
namespace {

TEST(Gang, EveryPartRunsOnceOnItsOwnRun) {
  Gang gang(2);
  EXPECT_EQ(gang.width(), 3);
  constexpr int kRuns = 20000;
  std::vector<int> hits;
  for (int r = 0; r < kRuns; ++r) {
    const int parts = 1 + r % 7;
    hits.assign(parts, 0);
    std::atomic<int> wrong_run{0};
    const int tag = r;
    gang.Run(parts, [&](int p) {
      if (tag != r) wrong_run.fetch_add(1);
      ++hits[p];  // each index is claimed by exactly one thread
    });
    ASSERT_EQ(wrong_run.load(), 0) << "run " << r;
    for (int p = 0; p < parts; ++p) ASSERT_EQ(hits[p], 1) << "run " << r << " part " << p;
  }
}

TEST(Gang, RunsAfterHelpersFellAsleepStillComplete) {
  Gang gang(1);
  std::atomic<int> sum{0};
  for (int r = 0; r < 5; ++r) {
    // Longer than the helpers' spin: they block on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    gang.Run(4, [&](int p) { sum.fetch_add(p + 1); });
  }
  EXPECT_EQ(sum.load(), 5 * (1 + 2 + 3 + 4));
}

TEST(Gang, HelperCpuBeyondTheCallersIsTheExtraCriticalPath) {
  // Parts run on the caller cost nothing; parts run on a helper burn 3 ms of
  // CPU. Whenever a helper ran one, the run's critical path exceeds the
  // caller's own time by about that much; otherwise nothing is added.
  Gang gang(1);
  const std::thread::id caller = std::this_thread::get_id();
  for (int r = 0; r < 5; ++r) {
    std::atomic<int> on_helper{0};
    gang.Run(2, [&](int) {
      if (std::this_thread::get_id() == caller) return;
      on_helper.fetch_add(1);
      const int64_t t0 = ThreadCpuNs();
      volatile double x = 0;
      while (ThreadCpuNs() - t0 < 3'000'000) x = x + 1;
    });
    const int64_t extra = gang.TakeExtraNs();
    if (on_helper.load() > 0) EXPECT_GE(extra, 2'900'000) << "run " << r;
    else EXPECT_EQ(extra, 0) << "run " << r;
    EXPECT_EQ(gang.TakeExtraNs(), 0);  // taken
  }
}

// A part that runs out of memory on a helper thread: the exception comes out
// of Run and ParallelFor in the caller, after every part finished (on a
// worker it ended the process: `run --batch 16384` under `ulimit -v` aborted
// instead of ending its run as failed), and the pool works again after.
TEST(Gang, APartsExceptionIsThrownInTheCaller) {
  for (int round = 0; round < 20; ++round) {
    Gang gang(1);
    std::atomic<int> ran{0};
    EXPECT_THROW(gang.Run(8, [&](int i) {
      ran.fetch_add(1);
      if (i == 5) throw std::bad_alloc();
    }), std::bad_alloc);
    EXPECT_EQ(ran.load(), 8);
    ran = 0;
    gang.Run(8, [&](int) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 8);
  }
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(6, [&](int i) {
    ran.fetch_add(1);
    if (i == 1) throw std::bad_alloc();
  }), std::bad_alloc);
  EXPECT_EQ(ran.load(), 6);
  pool.ParallelFor(6, [&](int) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 12);
}

TEST(ParallelRange, CoversTheRangeInOrderedDisjointPieces) {
  Gang gang(1);
  GangScope scope(&gang);
  for (int64_t n : {0, 1, 5, 1000, 123457}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    ParallelRange(n, 100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n << " i " << i;
  }
}

}  // namespace
}  // namespace shardscope::runtime
