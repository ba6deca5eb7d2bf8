// The timeline's navigation answers (ui/app/timeline_nav.h, store/slice_search.h)
// checked against plain SQL on the same database: a range's per-name table
// from slices, the same range past the raw budget from summaries (per kind),
// search by name over the whole run, the selected op, the counterpart on the
// modeled clock and where a program started on each chip.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "store/reader.h"
#include "store/slice_search.h"
#include "tests/app/fixture.h"
#include "ui/app/timeline_nav.h"

namespace shardscope::app {
namespace {

using testing::DeviceTrack;
using testing::FixtureRun;
using testing::ModeledTrack;

store::Reader Open(const std::string& path) {
  auto r = store::Reader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

store::QueryResult Q(const store::Reader& r, const std::string& sql) {
  auto q = r.Query(sql);
  EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
  return q.ok() ? *q : store::QueryResult{};
}

std::string DeviceTracks(int n) {
  std::vector<std::string> ids;
  for (int d = 0; d < n; ++d) ids.push_back(absl::StrCat(DeviceTrack(d)));
  return absl::StrJoin(ids, ",");
}

std::vector<int64_t> DeviceTrackIds(int n) {
  std::vector<int64_t> ids;
  for (int d = 0; d < n; ++d) ids.push_back(DeviceTrack(d));
  return ids;
}

// Nearest rank, as the metrics report computes it, from SQL's ordered durations.
int64_t SqlPercentile(const store::Reader& r, const std::string& where, double q) {
  auto n = Q(r, absl::StrCat("SELECT count(*) AS n FROM slices s JOIN names USING (name_id) WHERE ", where)).Int(0, "n");
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * n)));
  return Q(r, absl::StrCat("SELECT dur_ns FROM slices s JOIN names USING (name_id) WHERE ", where,
                           " ORDER BY dur_ns LIMIT 1 OFFSET ", rank - 1))
      .Int(0, "dur_ns");
}

TEST(RangeStats, PerNameFiguresEqualSqlOverTheSameSlices) {
  const std::string path = testing::TempPath("nav_range.db");
  FixtureRun run;
  run.steps = 8;
  ASSERT_TRUE(testing::WriteFixtureDb(path, {run}).ok());
  store::Reader r = Open(path);
  const int64_t t0 = 1'200'000, t1 = 5'650'000;
  auto stats = ComputeRangeStats(r, 1, Clock::kDevice, DeviceTrackIds(4), t0, t1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->exact);
  EXPECT_EQ(stats->summarized, 0);
  const std::string in_range = absl::StrCat("run_id = 1 AND track_id IN (", DeviceTracks(4), ") AND start_ns >= ", t0,
                                            " AND start_ns < ", t1);
  auto sql = Q(r, absl::StrCat("SELECT name, count(*) AS n, sum(dur_ns) AS total FROM slices s JOIN names USING "
                               "(name_id) WHERE ", in_range, " GROUP BY name ORDER BY name"));
  ASSERT_EQ(stats->rows.size(), sql.rows.size());
  ASSERT_EQ(sql.rows.size(), 3u);  // fusion.3, dot.7, all-reduce.2
  int64_t count = 0;
  for (size_t i = 0; i < sql.rows.size(); ++i) {
    const std::string name = sql.Text(i, "name");
    auto row = std::find_if(stats->rows.begin(), stats->rows.end(), [&](const RangeRow& x) { return x.name == name; });
    ASSERT_NE(row, stats->rows.end()) << name;
    EXPECT_EQ(row->count, sql.Int(i, "n")) << name;
    EXPECT_EQ(row->total_ns, sql.Int(i, "total")) << name;
    EXPECT_DOUBLE_EQ(row->mean_ns(), double(sql.Int(i, "total")) / sql.Int(i, "n")) << name;
    const std::string where = absl::StrCat(in_range, " AND name = '", name, "'");
    EXPECT_EQ(row->p50_ns, SqlPercentile(r, where, 0.5)) << name;
    EXPECT_EQ(row->p90_ns, SqlPercentile(r, where, 0.9)) << name;
    EXPECT_FALSE(row->from_summaries);
    count += row->count;
  }
  EXPECT_EQ(stats->count, count);
  // The all-reduces differ per chip (200-230 us): p90 is the slowest chips'.
  auto ar = std::find_if(stats->rows.begin(), stats->rows.end(), [](const RangeRow& x) { return x.name == "all-reduce.2"; });
  EXPECT_GT(ar->p90_ns, ar->p50_ns);
  // Rows come largest total first.
  for (size_t i = 1; i < stats->rows.size(); ++i) EXPECT_GE(stats->rows[i - 1].total_ns, stats->rows[i].total_ns);
}

TEST(RangeStats, PastTheRawBudgetSummariesGiveExactTimePerKindAndSaySo) {
  const std::string path = testing::TempPath("nav_range_lod.db");
  FixtureRun run;
  run.steps = 40;  // 40 ms: about ten level-0 buckets
  ASSERT_TRUE(testing::WriteFixtureDb(path, {run}).ok());
  store::Reader r = Open(path);
  const int64_t t0 = 1'500'000, t1 = 37'300'000;
  RangeOptions options;
  options.max_raw_slices = 10;  // far fewer than the range holds
  auto stats = ComputeRangeStats(r, 1, Clock::kDevice, DeviceTrackIds(4), t0, t1, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_FALSE(stats->exact);
  EXPECT_EQ(stats->summary_level, 0);
  EXPECT_GT(stats->summarized, 0);
  EXPECT_LT(stats->summarized, stats->count);  // the edges were read raw
  EXPECT_NE(stats->note.find("summaries"), std::string::npos) << stats->note;
  const std::string in_range = absl::StrCat("run_id = 1 AND track_id IN (", DeviceTracks(4), ") AND start_ns >= ", t0,
                                            " AND start_ns < ", t1);
  EXPECT_EQ(stats->count, Q(r, absl::StrCat("SELECT count(*) AS n FROM slices WHERE ", in_range)).Int(0, "n"));
  EXPECT_EQ(stats->busy_ns,
            Q(r, absl::StrCat("SELECT sum(dur_ns) AS t FROM slices WHERE depth = 0 AND ", in_range)).Int(0, "t"));
  auto sql = Q(r, absl::StrCat("SELECT kind, sum(dur_ns) AS total FROM slices WHERE ", in_range, " GROUP BY kind"));
  ASSERT_EQ(stats->rows.size(), sql.rows.size());
  for (size_t i = 0; i < sql.rows.size(); ++i) {
    auto row = std::find_if(stats->rows.begin(), stats->rows.end(),
                            [&](const RangeRow& x) { return x.name == sql.Text(i, "kind"); });
    ASSERT_NE(row, stats->rows.end()) << sql.Text(i, "kind");
    EXPECT_EQ(row->total_ns, sql.Int(i, "total")) << row->name;
    EXPECT_TRUE(row->from_summaries);
    EXPECT_EQ(row->p50_ns, -1);  // summaries keep no distribution
  }
}

TEST(SliceSearch, FindsEveryMatchInTheRunNotOnlyLoadedWindows) {
  const std::string path = testing::TempPath("nav_search.db");
  FixtureRun one, two;
  two.run_id = 2;
  two.steps = 9;
  ASSERT_TRUE(testing::WriteFixtureDb(path, {one, two}).ok());
  store::Reader r = Open(path);
  auto found = store::FindSlicesByName(r, 2, "ALL-red");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->names.size(), 1u);
  EXPECT_EQ(found->names[0].second, "all-reduce.2");
  auto sql = Q(r, "SELECT slice_id, track_id, start_ns FROM slices s JOIN names USING (name_id) WHERE run_id = 2 AND "
                  "lower(name) LIKE '%all-red%' ORDER BY start_ns, track_id, slice_id");
  ASSERT_EQ(found->total, static_cast<int64_t>(sql.rows.size()));
  ASSERT_EQ(found->hits.size(), sql.rows.size());
  EXPECT_EQ(found->total, 9 * 4);
  for (size_t i = 0; i < sql.rows.size(); ++i) {
    EXPECT_EQ(found->hits[i].slice.slice_id, sql.Int(i, "slice_id"));
    EXPECT_EQ(found->hits[i].track_id, sql.Int(i, "track_id"));
  }
  // Bounded: the earliest hits kept, every match counted.
  auto few = store::FindSlicesByName(r, 2, "all-reduce", 5);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->total, 36);
  EXPECT_TRUE(few->truncated());
  ASSERT_EQ(few->hits.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(few->hits[i].slice.slice_id, sql.Int(i, "slice_id"));
  // Several names match a substring; none match nonsense.
  auto many = store::FindSlicesByName(r, 2, ".");
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->total, Q(r, "SELECT count(*) AS n FROM slices s JOIN names USING (name_id) WHERE run_id = 2 AND "
                              "name LIKE '%.%'").Int(0, "n"));
  auto none = store::FindSlicesByName(r, 2, "no such kernel");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total, 0);
}

TEST(SliceSearch, AnOpsSlicesAreFoundThroughItsGraphsChunks) {
  const std::string path = testing::TempPath("nav_search_op.db");
  FixtureRun run;
  run.steps = 7;
  ASSERT_TRUE(testing::WriteFixtureDb(path, {run}).ok());
  store::Reader r = Open(path);
  auto found = store::FindSlicesByOp(r, 1, 1, 9);  // the all-reduce: op 9 of graph 1
  ASSERT_TRUE(found.ok()) << found.status();
  auto sql = Q(r, "SELECT slice_id FROM slices WHERE run_id = 1 AND graph_id = 1 AND op_id = 9 ORDER BY start_ns, "
                  "track_id, slice_id");
  ASSERT_EQ(found->total, static_cast<int64_t>(sql.rows.size()));
  EXPECT_EQ(found->total, 7 * 4);
  for (size_t i = 0; i < sql.rows.size(); ++i) EXPECT_EQ(found->hits[i].slice.slice_id, sql.Int(i, "slice_id"));
  ASSERT_EQ(found->names.size(), 1u);
  EXPECT_EQ(found->names[0].second, "all-reduce.2");
  auto none = store::FindSlicesByOp(r, 1, 1, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total, 0);
}

TEST(SelectionDetails, OpCounterpartAndProgramStartsEqualSql) {
  const std::string path = testing::TempPath("nav_details.db");
  FixtureRun run;
  run.with_modeled = true;
  ASSERT_TRUE(testing::WriteFixtureDb(path, {run}).ok());
  store::Reader r = Open(path);
  auto op = LookupOp(r, 1, 1, 9);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE(op->has_value());
  auto sql = Q(r, "SELECT name, shape, modeled_ns, bytes_read FROM ops WHERE run_id = 1 AND graph_id = 1 AND op_id = 9");
  EXPECT_EQ((*op)->name, sql.Text(0, "name"));
  EXPECT_EQ((*op)->shape, sql.Text(0, "shape"));
  EXPECT_EQ((*op)->modeled_ns, sql.Int(0, "modeled_ns"));
  EXPECT_EQ((*op)->bytes_read, sql.Int(0, "bytes_read"));
  auto missing = LookupOp(r, 1, 1, 12345);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  // fusion.3 of step 2 on chip 1, and the same kernel on chip 1's modeled lane.
  auto dev = Q(r, "SELECT slice_id, start_ns, dur_ns, name_id FROM slices s JOIN names USING (name_id) WHERE run_id = 1 "
                  "AND track_id = 2 AND step = 2 AND name = 'fusion.3'");
  ASSERT_EQ(dev.rows.size(), 1u);
  Slice s;
  s.slice_id = dev.Int(0, "slice_id");
  s.start_ns = dev.Int(0, "start_ns");
  s.dur_ns = dev.Int(0, "dur_ns");
  s.step = 2;
  auto other = FindCounterpart(r, 1, ModeledTrack(1), s, static_cast<int32_t>(dev.Int(0, "name_id")), 0, 10'000'000);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(other->has_value());
  auto mod = Q(r, "SELECT slice_id, dur_ns FROM slices s JOIN names USING (name_id) WHERE run_id = 1 AND track_id = 501 "
                  "AND step = 2 AND name = 'fusion.3'");
  EXPECT_EQ((*other)->slice_id, mod.Int(0, "slice_id"));
  EXPECT_EQ((*other)->dur_ns, mod.Int(0, "dur_ns"));

  // Program 1 of step 3 started on each chip with its first slice of graph 1.
  auto starts = FindProgramStarts(r, 1, DeviceTrackIds(4), 3, 1, 0, 10'000'000);
  ASSERT_TRUE(starts.ok()) << starts.status();
  auto first = Q(r, "SELECT track_id, min(start_ns) AS t FROM slices WHERE run_id = 1 AND step = 3 AND graph_id = 1 "
                    "AND track_id <= 4 GROUP BY track_id ORDER BY track_id");
  ASSERT_EQ(starts->size(), first.rows.size());
  for (size_t i = 0; i < first.rows.size(); ++i) {
    EXPECT_EQ((*starts)[i].track_id, first.Int(i, "track_id"));
    EXPECT_EQ((*starts)[i].slice.start_ns, first.Int(i, "t"));
  }
}

}  // namespace
}  // namespace shardscope::app
