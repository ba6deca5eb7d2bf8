// Tests of the workstation's model without a display: loading a run's small
// tables, the visible-window binary search, level-of-detail folding and
// summary columns (what a shape holds, never across a step), the level a zoom
// wants, clock alignment, the lane layout of a 64-chip pod, and the background
// loader over fixture databases written through the store's Writer.
#include "ui/app/trace_model.h"

#include <sqlite3.h>

#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/app/fixture.h"
#include "ui/app/clock_alignment.h"
#include "ui/app/format.h"
#include "ui/app/lod.h"
#include "ui/app/timeline_layout.h"
#include "ui/app/timeline_loader.h"

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

// A damaged placement row is left out of the Sharding view's data and
// counted there; the model, and with it every other view, still loads.
TEST(TraceModel, ADamagedPlacementDoesNotStopTheModel) {
  const std::string path = TempPath("damaged_placement.db");
  ASSERT_TRUE(WriteFixtureDb(path, {FixtureRun{.run_id = 1, .num_devices = 2, .num_hosts = 1}}).ok());
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
  // A tensor on both chips: chip 0's placement whole, chip 1's cut short.
  ASSERT_EQ(sqlite3_exec(h,
                         "INSERT INTO tensors VALUES (1, 1, 'w', '[4,8]', 'f32', '{replicated}', 'default', NULL, NULL,"
                         " 0);"
                         "INSERT INTO shard_placements VALUES (1, 1, 'w', 0, '[0:4,0:8]', 128);"
                         "INSERT INTO shard_placements VALUES (1, 1, 'w', 1, '[0:1,', 128);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  auto model = LoadTraceModel(path, std::nullopt);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->sharding_error, "");
  EXPECT_EQ(model->sharding.damaged_rows, 1);
  ASSERT_EQ(model->sharding.damaged.size(), 1u);
  EXPECT_THAT(model->sharding.damaged[0], HasSubstr("'[0:1,' is not [b:e,...]"));
  ASSERT_EQ(model->sharding.tensors.size(), 1u);
  EXPECT_EQ(model->sharding.tensors[0].tensor.devices, 1);
  EXPECT_FALSE(model->tracks.empty());
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
  // One launch per step, on the host clock.
  ASSERT_EQ(model->dispatches.size(), 6u);
  EXPECT_EQ(model->dispatches[1].step, 1);
  EXPECT_EQ(model->dispatches[1].host_start_ns, testing::kHostClockStart + testing::kStepNs + testing::kDispatchAfterNs);
  // The collective's moved value, for the selection panel.
  ASSERT_NE(model->MovedValue(1, 9), nullptr);
  EXPECT_EQ(*model->MovedValue(1, 9), "w");
  EXPECT_EQ(model->MovedValue(1, 8), nullptr);
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

// A row of slices from (start, dur) pairs, all compute, no step.
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
  // Folds stop growing at kMaxFoldWidths * 3 px, so density along the row shows.
  EXPECT_LE(blocks.size(), 1000u / (3 * kMaxFoldWidths) + 2);
  EXPECT_GE(blocks.size(), 1000u / (3 * kMaxFoldWidths) - 2);
  EXPECT_EQ(TotalCount(blocks), size_t(n));
  size_t next = 0;
  for (const DrawBlock& b : blocks) {
    EXPECT_EQ(b.first, next);
    next = b.first + b.count;
    EXPECT_LE(b.start_ns, b.end_ns);
    // Half of the span is busy: 1 ns slices 1 ns apart.
    EXPECT_NEAR(b.busy_fraction(), 0.5, 0.01);
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
    EXPECT_LE(blocks.size(), size_t(2 * width_px / 3 + 2)) << n << " slices";
  }
}

// Slices of several steps and kinds, each under a pixel.
SliceRow StepRow() {
  SliceRow row;
  auto add = [&](int64_t start, int64_t dur, SliceKind kind, int step) {
    Slice s;
    s.start_ns = start;
    s.dur_ns = dur;
    s.kind = kind;
    s.step = step;
    row.slices.push_back(s);
  };
  // Step 0: a host wait first, then mostly compute, then a collective.
  add(0, 2, SliceKind::kHostWait, 0);
  add(2, 6, SliceKind::kCompute, 0);
  add(8, 6, SliceKind::kCompute, 0);
  add(14, 3, SliceKind::kCollective, 0);
  // Step 1 begins right after, with no gap a fold could see.
  add(17, 1, SliceKind::kTransfer, 1);
  add(18, 8, SliceKind::kCompute, 1);
  row.Finish();
  return row;
}

TEST(FoldRow, FoldsNeverCrossAStepBoundary) {
  SliceRow row = StepRow();
  auto blocks = FoldRow(row, 0, 100, 30);  // everything under 30 ns folds
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].step, 0);
  EXPECT_EQ(blocks[0].count, 4u);
  EXPECT_EQ(blocks[1].step, 1);
  EXPECT_EQ(blocks[1].count, 2u);
  EXPECT_LE(blocks[0].end_ns, blocks[1].start_ns);
}

TEST(FoldRow, AFoldShowsWhatItHoldsNotItsFirstSlice) {
  SliceRow row = StepRow();
  auto blocks = FoldRow(row, 0, 100, 30);
  const DrawBlock& b = blocks[0];
  // It begins with a host wait, but it is mostly compute.
  EXPECT_EQ(row.slices[b.first].kind, SliceKind::kHostWait);
  EXPECT_EQ(b.kind, SliceKind::kCompute);
  EXPECT_EQ(b.kind_ns[int(SliceKind::kCompute)], 12);
  EXPECT_EQ(b.kind_ns[int(SliceKind::kCollective)], 3);
  EXPECT_EQ(b.kind_ns[int(SliceKind::kHostWait)], 2);
  EXPECT_EQ(b.busy_ns, 17);
  EXPECT_DOUBLE_EQ(b.busy_fraction(), 1.0);
  EXPECT_EQ(DominantKind(b.kind_ns), SliceKind::kCompute);
}

TEST(Lod, LevelFollowsTheZoom) {
  const double level0 = double(store::kLevel0WidthNs);
  // Level 0's buckets wider than a 3 px column: read slices.
  EXPECT_EQ(LevelForZoom(level0 / 3 * 0.9, 3), -1);
  EXPECT_EQ(LevelForZoom(level0 / 3, 3), 0);
  EXPECT_EQ(LevelForZoom(level0 * 4 / 3, 3), 1);
  EXPECT_EQ(LevelForZoom(level0 * 4 / 3 * 3.9, 3), 1);
  EXPECT_EQ(LevelForZoom(level0 * 16 / 3, 3), 2);
  EXPECT_EQ(LevelForZoom(1e15, 3), store::kNumSummaryLevels - 1);
  // The buckets of the chosen level are never wider than a column.
  for (double ns_per_px : {level0 / 3, level0, level0 * 30, 1e12}) {
    const int level = LevelForZoom(ns_per_px, 3);
    ASSERT_GE(level, 0);
    EXPECT_LE(double(store::kLevel0WidthNs << (2 * level)), 3 * ns_per_px);
  }
}

store::SummaryBucket Bucket(int64_t start, int64_t width, int64_t count, int64_t busy, SliceKind kind, int step) {
  store::SummaryBucket b;
  b.start_ns = start;
  b.width_ns = width;
  b.count = count;
  b.busy_ns = busy;
  b.kind_ns[int(kind)] = busy;
  b.first_step = b.last_step = step;
  return b;
}

TEST(SummaryColumns, AggregateBucketsIntoColumns) {
  std::vector<store::SummaryBucket> buckets;
  for (int i = 0; i < 8; ++i) buckets.push_back(Bucket(i * 100, 100, 2, 50, i < 4 ? SliceKind::kCompute : SliceKind::kCollective, i / 4));
  auto columns = SummaryColumns(buckets, 0, 800, 400);
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(columns[0].count, 8);
  EXPECT_EQ(columns[0].busy_ns, 200);
  EXPECT_DOUBLE_EQ(columns[0].busy_fraction(), 0.5);
  EXPECT_EQ(columns[0].dominant, SliceKind::kCompute);
  EXPECT_EQ(columns[1].dominant, SliceKind::kCollective);
  EXPECT_EQ(columns[0].first_step, 0);
  EXPECT_EQ(columns[1].last_step, 1);
}

TEST(SummaryColumns, ALongSliceSpillsIntoTheColumnsItCovers) {
  // One 350 ns collective starts in the first 100 ns bucket.
  std::vector<store::SummaryBucket> buckets{Bucket(0, 100, 1, 350, SliceKind::kCollective, 0),
                                            Bucket(400, 100, 1, 20, SliceKind::kCompute, 0)};
  auto columns = SummaryColumns(buckets, 0, 1000, 100);
  ASSERT_EQ(columns.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(columns[i].start_ns, i * 100);
    EXPECT_DOUBLE_EQ(columns[i].busy_fraction(), 1.0);
    EXPECT_EQ(columns[i].dominant, SliceKind::kCollective);
  }
  EXPECT_EQ(columns[3].busy_ns, 50);
  EXPECT_EQ(columns[3].count, 0);  // nothing starts there; it is the spill
  EXPECT_EQ(columns[4].dominant, SliceKind::kCompute);
  EXPECT_EQ(columns[4].busy_ns, 20);
}

TEST(CounterColumns, KeepMinMaxAndLast) {
  std::vector<store::CounterBucket> b(4);
  for (int i = 0; i < 4; ++i) b[i] = store::CounterBucket{i * 10, 10, 1, double(i), double(10 + i), double(5 + i), i * 10 + 5};
  auto columns = CounterColumns(b, 0, 40, 20);
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(columns[0].min, 0);
  EXPECT_EQ(columns[0].max, 11);
  EXPECT_EQ(columns[0].last, 6);
  EXPECT_EQ(columns[1].count, 2);
}

TEST(LoadWindow, CoversTheViewWithMarginAndStaysPutForSmallMoves) {
  auto [t0, t1] = LoadWindow(1000, 2000, 0, 1'000'000);
  EXPECT_LE(t0, 1000 - 500);
  EXPECT_GE(t1, 2000);
  EXPECT_EQ(LoadWindow(1010, 2010, 0, 1'000'000), (std::pair{t0, t1}));
  // Clipped to the run.
  EXPECT_EQ(LoadWindow(0, 1000, 0, 1500).first, 0);
  EXPECT_EQ(LoadWindow(0, 1000, 0, 1500).second, 1500);
}

std::array<std::vector<StepSpan>, kNumClocks> Steps(std::vector<StepSpan> host, std::vector<StepSpan> device) {
  std::array<std::vector<StepSpan>, kNumClocks> steps;
  steps[int(Clock::kHost)] = std::move(host);
  steps[int(Clock::kDevice)] = std::move(device);
  return steps;
}

std::array<std::optional<std::pair<int64_t, int64_t>>, kNumClocks> Extents(std::pair<int64_t, int64_t> host,
                                                                          std::pair<int64_t, int64_t> device) {
  std::array<std::optional<std::pair<int64_t, int64_t>>, kNumClocks> e;
  e[int(Clock::kHost)] = host;
  e[int(Clock::kDevice)] = device;
  return e;
}

TEST(AlignClocks, ADeviceClockThatStartsBeforeTheDispatchIsPlacedAfterIt) {
  // The chips' clock starts at 0, the host dispatches step 0 at 5 s.
  auto steps = Steps({{0, 4'900'000'000, 5'001'000'000}}, {{0, 0, 800'000}, {1, 1'000'000, 1'800'000}});
  std::vector<Dispatch> dispatches{{0, 1, 5'000'400'000, 1000}, {1, 1, 5'001'400'000, 1000}};
  auto a = AlignClocks(steps, dispatches, Extents({4'900'000'000, 5'002'000'000}, {0, 1'800'000}));
  EXPECT_EQ(a.offset_ns[int(Clock::kHost)], 0);
  EXPECT_EQ(a.offset_ns[int(Clock::kDevice)], 5'000'400'000);
  EXPECT_TRUE(a.related[int(Clock::kDevice)]);
  EXPECT_THAT(a.note[int(Clock::kDevice)], HasSubstr("dispatch"));
  // Every step's program now starts at or after its launch.
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_GE(steps[int(Clock::kDevice)][s].start_ns + a.offset_ns[int(Clock::kDevice)], dispatches[s].host_start_ns);
  }
}

TEST(AlignClocks, ClocksThatAlreadyAgreeAreLeftAlone) {
  // shardscope's Scheduler lays programs out from their launch: nothing to shift.
  auto steps = Steps({{0, 0, 2'000'000}}, {{0, 1'500'000, 2'500'000}});
  std::vector<Dispatch> dispatches{{0, 1, 1'500'000, 1000}};
  auto a = AlignClocks(steps, dispatches, Extents({0, 2'000'000}, {1'500'000, 2'500'000}));
  EXPECT_EQ(a.offset_ns[int(Clock::kDevice)], 0);
  EXPECT_TRUE(a.related[int(Clock::kDevice)]);
}

TEST(AlignClocks, AnotherClockDomainIsPulledBackToTheDispatch) {
  // An imported GPU clock counting from boot, hours ahead of the host's.
  const int64_t hours = int64_t{3600} * 1'000'000'000 * 5;
  auto steps = Steps({{7, 100, 900}}, {{7, hours + 1000, hours + 2000}});
  auto a = AlignClocks(steps, {}, Extents({0, 1000}, {hours + 1000, hours + 2000}));
  EXPECT_EQ(a.offset_ns[int(Clock::kDevice)], 100 - (hours + 1000));  // host step start, no dispatches
  EXPECT_THAT(a.note[int(Clock::kDevice)], HasSubstr("another clock domain"));
}

TEST(AlignClocks, WithoutCommonStepsFirstEventsLineUpAndSaySo) {
  auto steps = Steps({}, {{0, 50, 90}});
  auto a = AlignClocks(steps, {}, Extents({1000, 5000}, {40, 90}));
  EXPECT_FALSE(a.related[int(Clock::kDevice)]);
  EXPECT_EQ(a.offset_ns[int(Clock::kDevice)], 1000 - 40);
  EXPECT_THAT(a.note[int(Clock::kDevice)], HasSubstr("not aligned"));
}

// A pod: 64 chips on 8 hosts, each on the device and modeled clocks, a main
// thread per host, and compilations.
TraceModel Pod() {
  TraceModel m;
  for (int d = 0; d < 64; ++d) {
    for (Clock c : {Clock::kDevice, Clock::kModeled}) {
      Track t;
      t.track_id = d * 2 + (c == Clock::kModeled);
      t.clock = c;
      t.device_id = d;
      t.host_id = d / 8;
      m.tracks.push_back(t);
    }
  }
  for (int h = 0; h < 8; ++h) {
    Track t;
    t.track_id = 1000 + h;
    t.host_id = h;
    t.thread_name = "main";
    m.tracks.push_back(t);
  }
  m.compilations.resize(3);
  return m;
}

TEST(TimelineLayout, AChipWithSeveralLanesIsOneChipAndEachLaneSaysItsStream) {
  // An imported GPU: two streams, an annotation lane (no chip) and the waits
  // worked out for it; a second GPU with one stream.
  TraceModel m;
  auto add = [&](int64_t id, std::optional<int64_t> device, const std::string& thread) {
    Track t;
    t.track_id = id;
    t.clock = Clock::kDevice;
    t.device_id = device;
    t.thread_name = thread;
    m.tracks.push_back(t);
  };
  add(1, 0, "stream 7");
  add(2, 0, "stream 20");
  add(3, std::nullopt, "stream 7");
  add(4, 0, "waiting for host");
  add(5, 1, "stream 7");
  auto sections = BuildSections(m, nullptr);
  ASSERT_FALSE(sections.empty());
  ASSERT_EQ(sections[0].groups.size(), 1u);
  const LaneGroup& g = sections[0].groups[0];
  EXPECT_EQ(g.label, "host 0 \xC2\xB7 chips 0-1");
  std::vector<std::string> labels;
  for (const LaneRef& l : g.lanes) labels.push_back(l.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"chip 0 \xC2\xB7 stream 7", "chip 0 \xC2\xB7 stream 20",
                                              "host 0: stream 7 annotations", "chip 0 \xC2\xB7 waiting for host",
                                              "chip 1"}));
}

TEST(TimelineLayout, SixtyFourChipsAndTheHostLanesFitOneScreen) {
  TraceModel pod = Pod();
  RunOverview overview;
  for (const Track& t : pod.tracks) overview.depths[t.track_id] = t.is_device() ? 1 : 3;
  auto sections = BuildSections(pod, &overview);
  ASSERT_EQ(sections.size(), 3u);
  EXPECT_EQ(sections[0].clock, Clock::kDevice);
  EXPECT_EQ(sections[1].clock, Clock::kModeled);
  EXPECT_EQ(sections[2].clock, Clock::kHost);
  // Grouped by host: 8 chips each.
  ASSERT_EQ(sections[0].groups.size(), 8u);
  EXPECT_EQ(sections[0].groups[3].label, "host 3 \xC2\xB7 chips 24-31");
  EXPECT_EQ(sections[0].groups[3].lanes.size(), 8u);

  auto collapsed = DefaultCollapsed(sections);
  EXPECT_TRUE(collapsed.contains("modeled"));  // one clock's chips at a time
  const float screen = 700;  // what a 900 px window leaves the lanes
  RowLayout layout = LayoutRows(sections, collapsed, screen);
  EXPECT_TRUE(layout.fits);
  EXPECT_LE(layout.total_h, screen);
  int device_lanes = 0, host_lanes = 0, headers = 0;
  for (const Row& row : layout.rows) {
    if (row.type == RowType::kLane) {
      EXPECT_GE(row.h, kMinLaneHeight);
      (sections[row.section].clock == Clock::kDevice ? device_lanes : host_lanes)++;
    }
    headers += row.type == RowType::kGroup;
  }
  EXPECT_EQ(device_lanes, 64);
  EXPECT_EQ(host_lanes, 8);
  EXPECT_EQ(headers, 8);  // one per host of chips; a host's single thread needs none

  // Collapsing a host's chips hides them and gives the rest more room.
  float before = 0;
  for (const Row& row : layout.rows) {
    if (row.type == RowType::kLane && sections[row.section].clock == Clock::kDevice) before = row.h;
  }
  for (int h = 0; h < 4; ++h) collapsed.insert(absl::StrCat("device/host ", h));
  RowLayout smaller = LayoutRows(sections, collapsed, screen);
  int shown = 0;
  float after = 0;
  for (const Row& row : smaller.rows) {
    if (row.type == RowType::kLane && sections[row.section].clock == Clock::kDevice) ++shown, after = row.h;
  }
  EXPECT_EQ(shown, 32);
  EXPECT_GT(after, before);
}

// The compilations row keeps room for its label when 64 chips' lanes are
// squeezed: at 8.5 px its label ran over the host lane below it.
TEST(TimelineLayout, TheCompilationsRowKeepsRoomForItsLabel) {
  TraceModel pod = Pod();
  Compilation c;
  c.compile_id = 1;
  c.cache = "miss";
  pod.compilations.push_back(c);
  RunOverview overview;
  for (const Track& t : pod.tracks) overview.depths[t.track_id] = t.is_device() ? 1 : 3;
  auto sections = BuildSections(pod, &overview);
  const float screen = 700;
  RowLayout layout = LayoutRows(sections, DefaultCollapsed(sections), screen);
  EXPECT_TRUE(layout.fits);
  int compiles = 0;
  float lane_h = 0;
  for (const Row& row : layout.rows) {
    if (row.type == RowType::kCompiles) {
      ++compiles;
      EXPECT_GE(row.h, kMinCompilesHeight);
    }
    if (row.type == RowType::kLane) lane_h = row.h;
  }
  EXPECT_EQ(compiles, 1);
  EXPECT_LT(lane_h, kMinCompilesHeight);  // the lanes were squeezed
}

TEST(TimelineLayout, LanesGetADepthRowEachWhenThereIsRoom) {
  TraceModel pod = Pod();
  pod.tracks.resize(2);  // chip 0 on two clocks
  Track main;
  main.track_id = 1000;
  main.thread_name = "main";
  pod.tracks.push_back(main);
  RunOverview overview;
  overview.depths[1000] = 3;
  auto sections = BuildSections(pod, &overview);
  RowLayout layout = LayoutRows(sections, {}, 800);
  for (const Row& row : layout.rows) {
    if (row.type == RowType::kLane && row.lane.label == "host 0: main") {
      EXPECT_EQ(row.rows_shown, 3);
      EXPECT_EQ(row.h, 3 * kDepthRowHeight + 4);
    }
  }
}

class LoaderTest : public ::testing::Test {
 protected:
  void Open(const FixtureRun& run, LoaderOptions options = {}) {
    std::string db = TempPath("loader.db");
    ASSERT_TRUE(WriteFixtureDb(db, {run}).ok());
    auto model = LoadTraceModel(db, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<TraceModel>(*std::move(model));
    loader_ = std::make_unique<TimelineLoader>(*model_, nullptr, options);
    ASSERT_TRUE(loader_->WaitIdle(30));
    ASSERT_TRUE(loader_->error().ok()) << loader_->error();
    ASSERT_NE(loader_->overview(), nullptr);
  }
  std::unique_ptr<TraceModel> model_;
  std::unique_ptr<TimelineLoader> loader_;
};

TEST_F(LoaderTest, OverviewHasStepsExtentsAlignmentAndWholeRunSummaries) {
  Open({.num_devices = 4, .num_hosts = 2});
  const RunOverview& ov = *loader_->overview();
  ASSERT_EQ(ov.steps[int(Clock::kDevice)].size(), 6u);
  ASSERT_EQ(ov.steps[int(Clock::kHost)].size(), 6u);
  EXPECT_EQ(ov.steps[int(Clock::kDevice)][2].start_ns, 2 * testing::kStepNs);
  ASSERT_TRUE(ov.extent[int(Clock::kDevice)]);
  EXPECT_EQ(ov.extent[int(Clock::kDevice)]->first, 0);
  EXPECT_GE(ov.extent[int(Clock::kDevice)]->second, 5 * testing::kStepNs + 800'000);
  EXPECT_FALSE(ov.extent[int(Clock::kModeled)]);
  // The chips' clock is placed after the host's launch of step 0.
  EXPECT_EQ(ov.alignment.offset_ns[int(Clock::kDevice)], testing::kHostClockStart + testing::kDispatchAfterNs);
  // Host threads have a nested row; chips one.
  EXPECT_EQ(ov.depths.at(testing::HostTrack(0)), 2);
  EXPECT_EQ(ov.depths.at(testing::DeviceTrack(0)), 1);
  // Whole-run summaries of every track hold every slice.
  auto whole = loader_->WholeRun(testing::DeviceTrack(2));
  ASSERT_NE(whole, nullptr);
  int64_t count = 0, collective_ns = 0;
  for (const auto& b : whole->depths.at(0)) count += b.count, collective_ns += b.kind_ns[int(SliceKind::kCollective)];
  EXPECT_EQ(count, 6 * testing::kSlicesPerDeviceStep);
  EXPECT_EQ(collective_ns, 6 * (200'000 + 2 * 10'000));
  EXPECT_TRUE(ov.counters.empty());
}

TEST_F(LoaderTest, LoadsOnlyTheWindowItIsAskedFor) {
  Open({.num_devices = 2, .num_hosts = 1});
  WindowKey key{testing::DeviceTrack(1), -1, 2 * testing::kStepNs, 3 * testing::kStepNs};
  loader_->Request({key});
  ASSERT_TRUE(loader_->WaitIdle(30));
  auto w = loader_->Get(key);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->rows.size(), 1u);
  ASSERT_EQ(w->rows[0].slices.size(), 3u);  // step 2's three slices, nothing else
  for (const Slice& s : w->rows[0].slices) EXPECT_EQ(s.step, 2);
  EXPECT_EQ(loader_->Name(w->rows[0].slices[2].name_id), "all-reduce.2");
  EXPECT_EQ(w->rows[0].slices[2].kind, SliceKind::kCollective);
  // A narrower window inside is answered from it; a coarser level is not.
  EXPECT_EQ(loader_->Best(key.track_id, -1, key.t0 + 10, key.t1 - 10), w);
  // Wider than it: only the whole-run summaries cover that (coarser, a fallback).
  ASSERT_NE(loader_->Best(key.track_id, -1, 0, key.t1), nullptr);
  EXPECT_GE(loader_->Best(key.track_id, -1, 0, key.t1)->key.level, 0);
  EXPECT_FALSE(loader_->progress().busy());
}

TEST_F(LoaderTest, AWindowWithTooManySlicesComesBackTruncated) {
  Open({.num_devices = 1, .num_hosts = 1, .tiny_slices = 3000}, LoaderOptions{.max_slices_per_window = 2000});
  WindowKey key{testing::DeviceTrack(0), -1, 0, 7 * testing::kStepNs};
  loader_->Request({key});
  ASSERT_TRUE(loader_->WaitIdle(30));
  auto w = loader_->Get(key);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->truncated);
  EXPECT_TRUE(w->rows.empty());  // nothing half-loaded is kept
  auto best = loader_->Best(key.track_id, -1, 0, 7 * testing::kStepNs);
  ASSERT_NE(best, nullptr);
  EXPECT_GE(best->key.level, 0);  // never the truncated slices
}

TEST_F(LoaderTest, FindsTheMembersOfACollectiveAndWhoArrivedLast) {
  FixtureRun run{.num_devices = 4, .num_hosts = 2, .late_device = 2};
  Open(run);
  std::vector<int64_t> tracks;
  for (int d = 0; d < 4; ++d) tracks.push_back(testing::DeviceTrack(d));
  const int64_t t = 3 * testing::kStepNs;
  loader_->Request({WindowKey{testing::DeviceTrack(0), -1, t, t + testing::kStepNs}});
  ASSERT_TRUE(loader_->WaitIdle(30));
  auto w = loader_->Get(WindowKey{testing::DeviceTrack(0), -1, t, t + testing::kStepNs});
  ASSERT_NE(w, nullptr);
  const Slice& ar = w->rows[0].slices[2];
  EXPECT_EQ(ar.slice_id, testing::AllReduceSliceId(run, 3, 0));
  ASSERT_GE(ar.flow_id, 0);
  loader_->RequestFlow(ar.flow_id, tracks, ar.start_ns, ar.end_ns());
  ASSERT_TRUE(loader_->WaitIdle(30));
  FlowMembers flow = loader_->flow();
  EXPECT_TRUE(flow.done);
  ASSERT_EQ(flow.members.size(), 4u);
  const auto last = std::max_element(flow.members.begin(), flow.members.end(),
                                     [](const auto& a, const auto& b) { return a.second.arrival_ns < b.second.arrival_ns; });
  if (last->second.arrival_ns < 0) GTEST_SKIP() << "this store does not keep arrival_ns yet";
  EXPECT_EQ(last->first, testing::DeviceTrack(2));
}

TEST_F(LoaderTest, ListsCountersWithWholeRunSummaries) {
  Open({.num_devices = 4, .num_hosts = 2, .with_counters = true});
  const auto& counters = loader_->overview()->counters;
  ASSERT_EQ(counters.size(), 5u);  // CreateTensor, then hbm_bytes_in_use on 4 chips
  EXPECT_EQ(counters[0].name, "CreateTensor");
  EXPECT_FALSE(counters[0].device_id);
  EXPECT_EQ(counters[1].name, "hbm_bytes_in_use");
  EXPECT_EQ(counters[3].device_id, 2);
  EXPECT_DOUBLE_EQ(counters[3].max, 3e6 + 5000);
  EXPECT_DOUBLE_EQ(counters[3].min, 3e6);
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
  EXPECT_EQ(FormatTick(5'001'200'000, 200'000), "5.0012 s");
  EXPECT_EQ(FormatTick(12'000'000, 2'000'000), "12 ms");
  EXPECT_EQ(FormatTick(850, 50), "850 ns");
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

}  // namespace
}  // namespace shardscope::app
