// The Recorder: a no-op until one is installed, then every record reaches it.
#include "profiler/trace/recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <string>
#include <thread>
#include <vector>

namespace shardscope::trace {
namespace {

class Capture : public Recorder {
 public:
  void Record(const SliceRecord& s) override { slices.push_back(s); }
  void Record(const CompilationRecord& c) override { compilations.push_back(c); }
  std::vector<SliceRecord> slices;
  std::vector<CompilationRecord> compilations;
};

TEST(Recorder, NoOpUntilInstalled) {
  EXPECT_FALSE(enabled());
  recorder().Record(SliceRecord{});  // must not crash
  Capture c;
  SetRecorder(&c);
  EXPECT_TRUE(enabled());
  SliceRecord s;
  s.name = "dot_general.7";
  s.kind = SliceKind::kCompute;
  recorder().Record(s);
  recorder().Record(CompilationRecord{});
  SetRecorder(nullptr);
  EXPECT_FALSE(enabled());
  recorder().Record(s);
  ASSERT_EQ(c.slices.size(), 1u);
  EXPECT_EQ(c.slices[0].name, "dot_general.7");
  EXPECT_EQ(c.compilations.size(), 1u);
}

TEST(Recorder, NamesOfClocksAndKinds) {
  EXPECT_STREQ(ClockName(Clock::kHost), "host");
  EXPECT_STREQ(ClockName(Clock::kDevice), "device");
  EXPECT_STREQ(ClockName(Clock::kModeled), "modeled");
  EXPECT_STREQ(SliceKindName(SliceKind::kCompute), "compute");
  EXPECT_STREQ(SliceKindName(SliceKind::kCollective), "collective");
  EXPECT_STREQ(SliceKindName(SliceKind::kTransfer), "transfer");
  EXPECT_STREQ(SliceKindName(SliceKind::kHost), "host");
  EXPECT_STREQ(SliceKindName(SliceKind::kCompile), "compile");
}

TEST(Recorder, HostClockStartsAtResetAndIsMonotonic) {
  ResetHostClock();
  int64_t a = HostNowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  int64_t b = HostNowNs();
  EXPECT_GE(a, 0);
  EXPECT_LT(a, 1'000'000'000);
  EXPECT_GE(b - a, 2'000'000);
}

TEST(Recorder, IdsAreUniqueAcrossThreads) {
  std::vector<std::vector<int64_t>> ids(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 1000; ++k) ids[t].push_back(NextId());
    });
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (auto& v : ids) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
}

}  // namespace
}  // namespace shardscope::trace
