// Per-name self time from the stored timeline (profiler/analysis/slice_names.h):
// exact figures on a hand-made nest, step markers folded into one row, clocks
// kept apart, and the limit.
#include "profiler/analysis/slice_names.h"

#include <gtest/gtest.h>

#include <string>

#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::analysis {
namespace {

TEST(SliceNames, SelfTimeIsDurationLessChildrenPerName) {
  const std::string path = testing::TempDbPath("slice_names");
  {
    auto w = store::Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "nest";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    trace::TrackRecord host{}, chip{};
    host.track_id = 1;
    host.name = "thread 1";
    host.clock = trace::Clock::kHost;
    chip.track_id = 2;
    chip.name = "stream 7";
    chip.clock = trace::Clock::kDevice;
    chip.device_id = 0;
    (*w)->Record(host);
    (*w)->Record(chip);
    int64_t id = 1;
    auto add = [&](int64_t track, int64_t start, int64_t dur, int depth, int64_t parent, const char* name,
                   trace::SliceKind kind) {
      trace::SliceRecord s;
      s.slice_id = id++;
      s.track_id = track;
      s.start_ns = start;
      s.dur_ns = dur;
      s.depth = depth;
      s.parent_id = parent;
      s.name = name;
      s.kind = kind;
      (*w)->Record(s);
      return s.slice_id;
    };
    using K = trace::SliceKind;
    // Two steps, each: ProfilerStep#N [0,100) > a [10,60) > b [20,30), b [40,50); c [70,90).
    for (int step = 0; step < 2; ++step) {
      const int64_t t = step * 1000;
      const int64_t p = add(1, t, 100, 0, -1, step == 0 ? "ProfilerStep#3" : "ProfilerStep#4", K::kHost);
      const int64_t a = add(1, t + 10, 50, 1, p, "aten::linear", K::kHost);
      add(1, t + 20, 10, 2, a, "aten::addmm", K::kHost);
      add(1, t + 40, 10, 2, a, "aten::addmm", K::kHost);
      add(1, t + 70, 20, 1, p, "aten::relu", K::kHost);
    }
    add(2, 5, 300, 0, -1, "gemm_kernel", K::kCompute);
    add(2, 400, 40, 0, -1, "ncclKernel_AllReduce", K::kCollective);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  }
  auto rd = store::Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto host = TopNamesBySelfTime(*rd, 1, "host", 10);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->tracks, 1);
  EXPECT_EQ(host->slices, 10);
  EXPECT_EQ(host->names, 4);
  EXPECT_EQ(host->self_ns, 200);  // every instant of the two steps once
  ASSERT_EQ(host->top.size(), 4u);
  // ProfilerStep#* and aten::linear tie at 60: by name.
  EXPECT_EQ(host->top[0].name, "ProfilerStep#*");
  EXPECT_EQ(host->top[0].count, 2);
  EXPECT_EQ(host->top[0].total_ns, 200);
  EXPECT_EQ(host->top[0].self_ns, 60);  // 100 - 50 - 20, twice
  EXPECT_EQ(host->top[1].name, "aten::linear");
  EXPECT_EQ(host->top[1].self_ns, 60);  // 50 - 10 - 10, twice
  EXPECT_EQ(host->top[1].total_ns, 100);
  EXPECT_EQ(host->top[2].name, "aten::addmm");
  EXPECT_EQ(host->top[2].count, 4);
  EXPECT_EQ(host->top[2].self_ns, 40);
  EXPECT_EQ(host->top[2].max_ns, 10);
  EXPECT_EQ(host->top[3].name, "aten::relu");
  EXPECT_EQ(host->top[3].self_ns, 40);
  EXPECT_EQ(host->top[3].kind, "host");

  auto device = TopNamesBySelfTime(*rd, 1, "device", 1);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->names, 2);
  EXPECT_EQ(device->self_ns, 340);
  ASSERT_EQ(device->top.size(), 1u);  // the limit
  EXPECT_EQ(device->top[0].name, "gemm_kernel");
  EXPECT_EQ(device->top[0].kind, "compute");

  auto none = TopNamesBySelfTime(*rd, 1, "modeled", 10);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tracks, 0);
  EXPECT_TRUE(none->top.empty());
}

}  // namespace
}  // namespace shardscope::analysis
