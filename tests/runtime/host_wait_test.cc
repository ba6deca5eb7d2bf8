// Waiting for the host, in the runtime: the dispatch queue measures how long
// its thread starved before each run arrived (host clock), and the Scheduler
// turns that into a "waiting for host" slice on the device clock, never
// longer than the gap before the program and never on the modeled clock.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "profiler/trace/recorder.h"
#include "runtime/dispatch.h"
#include "runtime/scheduler.h"

namespace shardscope::runtime {
namespace {

using namespace std::chrono_literals;

class SliceRecorder : public trace::Recorder {
 public:
  void Record(const trace::SliceRecord& s) override { slices.push_back(s); }
  using trace::Recorder::Record;
  std::vector<trace::SliceRecord> slices;
};

DeviceOp Kernel(int64_t dur) { return {1, "k", trace::SliceKind::kCompute, dur, -1, 0}; }

// Runs `work` items on a queue and returns the timing each was given.
TEST(DispatchTimingTest, StarvedOnlyWhenTheThreadSatIdleAfterEarlierWork) {
  DispatchQueue q(2);
  std::vector<DispatchTiming> seen(4);
  auto record = [&](int k) { return [&, k](const DispatchTiming& t) { seen[k] = t; }; };
  q.Enqueue(record(0));  // first work: nothing ran before, so no starving
  q.Drain();
  std::this_thread::sleep_for(30ms);  // the thread sits idle: the host is late
  q.Enqueue(record(1));
  q.Drain();
  // Work that queues behind running work did not keep the thread waiting.
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  q.Enqueue([gate](const DispatchTiming&) { gate.wait(); });
  std::this_thread::sleep_for(20ms);
  q.Enqueue(record(2));
  release.set_value();
  q.Drain();
  EXPECT_EQ(seen[0].starved_ns, 0);
  EXPECT_GE(seen[1].starved_ns, 29'000'000);
  EXPECT_LT(seen[1].starved_ns, 2'000'000'000);
  EXPECT_EQ(seen[2].starved_ns, 0);
  EXPECT_GT(seen[2].enqueued_ns, seen[1].enqueued_ns);
}

TEST(DispatchTimingTest, PlainWorkStillRuns) {
  DispatchQueue q(1);
  int ran = 0;
  q.Enqueue([&] { ++ran; });
  q.Drain();
  EXPECT_EQ(ran, 1);
}

// Device 0 finishes its first program at 100, device 1 at 300; the second
// program is launched at 1000 after the host kept them waiting.
struct TwoRuns {
  SliceRecorder rec;
  std::vector<DeviceSpan> first, second;
  void Run(trace::Clock clock, int64_t host_wait_ns) {
    trace::SetRecorder(&rec);
    Scheduler s(clock, {11, 12});
    ScheduleInput in;
    in.step = 0;
    in.launch_ns = 0;
    in.host_wait_ns = 123;  // ignored: nothing ran before the first program
    in.per_device = {{Kernel(100)}, {Kernel(300)}};
    first = *s.Schedule(in);
    in.step = 1;
    in.launch_ns = 1000;
    in.host_wait_ns = host_wait_ns;
    second = *s.Schedule(in);
    trace::SetRecorder(nullptr);
  }
  std::vector<trace::SliceRecord> Waits() const {
    std::vector<trace::SliceRecord> out;
    for (const auto& s : rec.slices)
      if (s.kind == trace::SliceKind::kHostWait) out.push_back(s);
    return out;
  }
};

TEST(SchedulerHostWaitTest, SliceEndsWhereTheProgramStarts) {
  TwoRuns r;
  r.Run(trace::Clock::kDevice, 500);
  auto waits = r.Waits();
  ASSERT_EQ(waits.size(), 2u);
  for (const auto& w : waits) {
    EXPECT_EQ(w.name, "waiting for host");
    EXPECT_EQ(w.step, 1);
    EXPECT_EQ(w.start_ns, 500);
    EXPECT_EQ(w.dur_ns, 500);
    EXPECT_EQ(w.depth, 0);
  }
  EXPECT_EQ(waits[0].track_id, 11);
  EXPECT_EQ(waits[1].track_id, 12);
  EXPECT_EQ(r.second[0].start_ns, 1000);
  EXPECT_EQ(r.second[0].host_wait_ns, 500);
  EXPECT_EQ(r.first[0].host_wait_ns, 0);
}

TEST(SchedulerHostWaitTest, NeverLongerThanTheGap) {
  TwoRuns r;
  r.Run(trace::Clock::kDevice, 5000);  // the host says 5000; the gaps are 900 and 700
  auto waits = r.Waits();
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0].start_ns, 100);
  EXPECT_EQ(waits[0].dur_ns, 900);
  EXPECT_EQ(waits[1].start_ns, 300);
  EXPECT_EQ(waits[1].dur_ns, 700);
}

TEST(SchedulerHostWaitTest, NoSliceWhenTheHostKeptUpOrOnTheModeledClock) {
  TwoRuns kept_up;
  kept_up.Run(trace::Clock::kDevice, 0);  // a gap of 900, but the queue never starved
  EXPECT_TRUE(kept_up.Waits().empty());
  EXPECT_EQ(kept_up.second[0].start_ns, 1000);
  TwoRuns modeled;
  modeled.Run(trace::Clock::kModeled, 500);
  EXPECT_TRUE(modeled.Waits().empty());
  EXPECT_EQ(modeled.second[0].host_wait_ns, 0);
}

TEST(SchedulerHostWaitTest, NoSliceWhenTheDeviceIsStillBusy) {
  SliceRecorder rec;
  trace::SetRecorder(&rec);
  Scheduler s(trace::Clock::kDevice, {11});
  ScheduleInput in;
  in.per_device = {{Kernel(2000)}};
  ASSERT_TRUE(s.Schedule(in).ok());
  in.launch_ns = 1000;  // launched before the device was free: no gap at all
  in.host_wait_ns = 400;
  auto spans = s.Schedule(in);
  trace::SetRecorder(nullptr);
  ASSERT_TRUE(spans.ok());
  EXPECT_EQ((*spans)[0].start_ns, 2000);
  EXPECT_EQ((*spans)[0].host_wait_ns, 0);
  for (const auto& sl : rec.slices) EXPECT_NE(sl.kind, trace::SliceKind::kHostWait);
}

}  // namespace
}  // namespace shardscope::runtime
