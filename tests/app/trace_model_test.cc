// Tests of the workstation's model without a display: loading a run from a
// fixture database, the visible-window binary search, and level-of-detail
// folding (many tiny slices fold into few blocks, none lost).
#include "ui/app/trace_model.h"

#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/app/fixture.h"
#include "ui/app/format.h"
#include "ui/app/lod.h"

namespace shardscope::app {
namespace {

using ::testing::HasSubstr;
using testing::FixtureRun;
using testing::TempPath;
using testing::WriteFixtureDb;

std::string TwoRunDb() {
  std::string path = TempPath("two_runs.db");
  EXPECT_TRUE(WriteFixtureDb(path, {FixtureRun{.run_id = 1, .num_devices = 2, .num_hosts = 1},
                                    FixtureRun{.run_id = 2, .num_devices = 4, .num_hosts = 2}})
                  .ok());
  return path;
}

size_t CountDeviceTracks(const TraceModel& m) {
  size_t n = 0;
  for (const Track& t : m.tracks) n += t.is_device();
  return n;
}

TEST(TraceModel, LoadsLatestRunByDefault) {
  auto model = LoadTraceModel(TwoRunDb(), std::nullopt);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->run.run_id, 2);
  EXPECT_EQ(model->run.sample, "mlp");
  EXPECT_EQ(model->run_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(CountDeviceTracks(*model), 4u);
  ASSERT_EQ(model->tracks.size(), 6u);
  // Device lanes first, in device order, then host threads.
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(model->tracks[d].device_id, d);
    EXPECT_EQ(model->tracks[d].clock, Clock::kDevice);
  }
  EXPECT_FALSE(model->tracks[4].is_device());
  EXPECT_EQ(model->tracks[4].clock, Clock::kHost);
  EXPECT_EQ(model->tracks[4].thread_name, "main");
  const FixtureRun spec{.num_devices = 4, .num_hosts = 2};
  EXPECT_EQ(model->num_slices, size_t(spec.steps) * (4 * testing::kSlicesPerDeviceStep +
                                                     2 * testing::kSlicesPerHostStep));
}

TEST(TraceModel, SlicesAreSortedPerDepthRowWithRunningMaxEnd) {
  auto model = LoadTraceModel(TwoRunDb(), 2);
  ASSERT_TRUE(model.ok()) << model.status();
  const Track& chip0 = model->tracks[0];
  ASSERT_EQ(chip0.rows.size(), 1u);
  const SliceRow& row = chip0.rows[0];
  ASSERT_EQ(row.slices.size(), 6u * testing::kSlicesPerDeviceStep);
  for (size_t i = 1; i < row.slices.size(); ++i) {
    EXPECT_LE(row.slices[i - 1].start_ns, row.slices[i].start_ns);
    EXPECT_LE(row.max_end[i - 1], row.max_end[i]);
  }
  EXPECT_EQ(model->Name(row.slices[0].name), "fusion.3");
  EXPECT_EQ(row.slices[0].kind, SliceKind::kCompute);
  EXPECT_EQ(row.slices[2].kind, SliceKind::kCollective);
  EXPECT_EQ(row.slices[2].bytes, 4096);
  EXPECT_EQ(row.slices[3].step, 1);
  // Host lanes have the nested 'trace' slices in a second depth row.
  const Track& host0 = model->tracks[4];
  ASSERT_EQ(host0.rows.size(), 2u);
  EXPECT_EQ(model->Name(host0.rows[1].slices[0].name), "trace");
}

TEST(TraceModel, ClocksKeepTheirOwnExtents) {
  auto model = LoadTraceModel(TwoRunDb(), 2);
  ASSERT_TRUE(model.ok()) << model.status();
  auto device = model->ClockExtent(Clock::kDevice);
  auto host = model->ClockExtent(Clock::kHost);
  ASSERT_TRUE(device && host);
  EXPECT_EQ(device->first, 0);
  EXPECT_EQ(host->first, testing::kHostClockStart);
  EXPECT_FALSE(model->ClockExtent(Clock::kModeled).has_value());
  EXPECT_FALSE(model->HasClock(Clock::kModeled));
}

TEST(TraceModel, LoadsCompilations) {
  auto model = LoadTraceModel(TwoRunDb(), 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->run.run_id, 1);
  EXPECT_EQ(CountDeviceTracks(*model), 2u);
  ASSERT_EQ(model->compilations.size(), size_t(testing::kCompilationsPerRun));
  const Compilation& c = model->compilations[1];
  EXPECT_EQ(c.step, 2);
  EXPECT_TRUE(c.is_miss());
  EXPECT_EQ(c.cause_kind, "input_shape_changed");
  EXPECT_EQ(c.cause_detail, "x f32[64,784] -> f32[48,784]");
  EXPECT_EQ(c.SourceLocation(), "samples/mlp.cc:41");
  EXPECT_EQ(c.duration_ns, 180'000);
  const Compilation& hit = model->compilations[2];
  EXPECT_FALSE(hit.is_miss());
  EXPECT_EQ(hit.cause_kind, "");
  EXPECT_EQ(hit.SourceLocation(), "");
}

TEST(TraceModel, MissingRunSaysWhichRunsExist) {
  auto model = LoadTraceModel(TwoRunDb(), 7);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("has no run 7"));
  EXPECT_THAT(model.status().message(), HasSubstr("1, 2"));
}

TEST(TraceModel, BadFilesAreErrorsNotCrashes) {
  auto missing = LoadTraceModel(TempPath("does_not_exist.db"), std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("does_not_exist.db"));

  std::string junk = TempPath("junk.db");
  std::ofstream(junk) << "this is not a database, just some words that go on for a while....\n";
  auto not_db = LoadTraceModel(junk, std::nullopt);
  ASSERT_FALSE(not_db.ok());
  EXPECT_THAT(not_db.status().message(), HasSubstr("junk.db"));
}

// A row of slices from (start, dur) pairs.
SliceRow MakeRow(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  SliceRow row;
  for (auto [start, dur] : spans) {
    Slice s;
    s.start_ns = start;
    s.dur_ns = dur;
    row.slices.push_back(s);
  }
  row.Finish();
  return row;
}

TEST(SliceRow, VisibleFindsSlicesOverlappingTheWindow) {
  SliceRow row = MakeRow({{0, 10}, {10, 10}, {20, 10}, {30, 10}, {40, 10}});
  EXPECT_EQ(row.Visible(0, 50), (std::pair<size_t, size_t>{0, 5}));
  EXPECT_EQ(row.Visible(15, 25), (std::pair<size_t, size_t>{1, 3}));
  EXPECT_EQ(row.Visible(10, 20), (std::pair<size_t, size_t>{1, 2}));  // half-open window
  EXPECT_EQ(row.Visible(100, 200).second - row.Visible(100, 200).first, 0u);
  EXPECT_EQ(row.Visible(-50, -1).second - row.Visible(-50, -1).first, 0u);
}

TEST(SliceRow, VisibleSeesALongSliceThatStartedFarLeft) {
  // The long slice starts first but is still on screen at t=500; a search on
  // start times alone would skip it.
  SliceRow row = MakeRow({{0, 1000}, {10, 5}, {20, 5}, {600, 5}});
  auto [first, last] = row.Visible(500, 700);
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(last, 4u);
}

TEST(SliceRow, VisibleMatchesBruteForce) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t t = 0;
  for (int i = 0; i < 2000; ++i) {
    t += rng() % 50;
    spans.push_back({t, int64_t(rng() % 40)});
  }
  SliceRow row = MakeRow(spans);
  for (int q = 0; q < 500; ++q) {
    int64_t t0 = rng() % (t + 100) - 50;
    int64_t t1 = t0 + 1 + rng() % 3000;
    auto [first, last] = row.Visible(t0, t1);
    for (size_t i = 0; i < row.slices.size(); ++i) {
      const Slice& s = row.slices[i];
      bool overlaps = s.start_ns < t1 && s.end_ns() > t0;
      if (overlaps) {
        EXPECT_TRUE(i >= first && i < last) << "slice " << i << " missed for [" << t0 << "," << t1 << ")";
      }
    }
    // The range is tight at the ends: nothing entirely before the window begins it.
    if (first < last) {
      EXPECT_GT(row.max_end[first], t0);
      EXPECT_LT(row.slices[last - 1].start_ns, t1);
    }
  }
}

size_t TotalCount(const std::vector<DrawBlock>& blocks) {
  size_t n = 0;
  for (const DrawBlock& b : blocks) n += b.count;
  return n;
}

TEST(FoldRow, ManyTinySlicesFoldIntoFewBlocksAndKeepTheirCount) {
  // 1,000,000 slices of 1 ns, 1 ns apart, shown 1000 px wide.
  std::vector<std::pair<int64_t, int64_t>> spans;
  const int n = 1'000'000;
  spans.reserve(n);
  for (int i = 0; i < n; ++i) spans.push_back({2 * i, 1});
  SliceRow row = MakeRow(spans);
  const double ns_per_px = 2.0 * n / 1000;
  auto blocks = FoldRow(row, 0, 2 * n, 3 * ns_per_px);
  EXPECT_LE(blocks.size(), 1000u / 3 + 2);
  EXPECT_GE(blocks.size(), 1u);
  EXPECT_EQ(TotalCount(blocks), size_t(n));
  // Blocks cover consecutive index ranges in order.
  size_t next = 0;
  for (const DrawBlock& b : blocks) {
    EXPECT_EQ(b.first, next);
    next = b.first + b.count;
    EXPECT_LE(b.start_ns, b.end_ns);
  }
}

TEST(FoldRow, WideSlicesAreDrawnOneByOne) {
  SliceRow row = MakeRow({{0, 100}, {100, 100}, {250, 100}});
  auto blocks = FoldRow(row, 0, 400, 3);  // 1 ns per px, 3 px threshold
  ASSERT_EQ(blocks.size(), 3u);
  for (const DrawBlock& b : blocks) EXPECT_FALSE(b.folded());
}

TEST(FoldRow, TinySlicesSeparatedByWideGapsStaySeparate) {
  SliceRow row = MakeRow({{0, 1}, {100, 1}, {200, 1}});
  auto blocks = FoldRow(row, 0, 300, 3);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(TotalCount(blocks), 3u);
}

TEST(FoldRow, ZoomingInUnfolds) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int i = 0; i < 100; ++i) spans.push_back({10 * i, 8});
  SliceRow row = MakeRow(spans);
  auto far = FoldRow(row, 0, 1000, 3 * 10.0);   // 10 ns per px: 8 ns slices are < 1 px
  auto near = FoldRow(row, 0, 1000, 3 * 0.1);   // 0.1 ns per px: each is 80 px
  EXPECT_EQ(TotalCount(far), 100u);
  EXPECT_LT(far.size(), 5u);
  EXPECT_EQ(near.size(), 100u);
  // Only the visible part of the row is looked at.
  auto window = FoldRow(row, 500, 600, 0.3);
  EXPECT_EQ(TotalCount(window), 10u);
  EXPECT_EQ(window.front().first, 50u);
}

TEST(FoldRow, ShapesDependOnTheScreenNotTheTrace) {
  std::mt19937_64 rng(11);
  for (int n : {1'000, 100'000, 400'000}) {
    std::vector<std::pair<int64_t, int64_t>> spans;
    int64_t t = 0;
    for (int i = 0; i < n; ++i) {
      t += 1 + rng() % 20;
      spans.push_back({t, int64_t(rng() % 15)});
    }
    SliceRow row = MakeRow(spans);
    const double width_px = 1500;
    const double ns_per_px = double(t) / width_px;
    auto blocks = FoldRow(row, 0, t + 1, 3 * ns_per_px);
    EXPECT_EQ(TotalCount(blocks), size_t(n));
    // A block is either a wide slice (>= 3 px) or a fold that is followed by a
    // gap or a wide slice, so at most about two per 3 px.
    EXPECT_LE(blocks.size(), size_t(2 * width_px / 3 + 2)) << n << " slices";
  }
}

TEST(TimeAxis, ZoomKeepsTheTimeUnderTheMouse) {
  TimeAxis axis{1000, 10, 100};
  const double before = axis.ToNs(400);
  ZoomAround(axis, 400, 2.0, 0.01, 1e9);
  EXPECT_DOUBLE_EQ(axis.ns_per_px, 5);
  EXPECT_NEAR(axis.ToNs(400), before, 1e-9);
  ZoomAround(axis, 400, 1e-12, 0.01, 50);  // clamped out
  EXPECT_DOUBLE_EQ(axis.ns_per_px, 50);
  EXPECT_NEAR(axis.ToNs(400), before, 1e-6);
}

TEST(Format, DurationsAndBytes) {
  EXPECT_EQ(FormatDuration(850), "850 ns");
  EXPECT_EQ(FormatDuration(12'400), "12.4 us");
  EXPECT_EQ(FormatDuration(3'200'000), "3.20 ms");
  EXPECT_EQ(FormatDuration(1.5e9), "1.50 s");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(4 << 20), "4.0 MiB");
  EXPECT_EQ(NiceStep(130), 200);
  EXPECT_EQ(NiceStep(1000), 1000);
  EXPECT_EQ(NiceStep(4100), 5000);
}

}  // namespace
}  // namespace shardscope::app
