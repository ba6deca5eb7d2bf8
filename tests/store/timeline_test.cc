// The chunked slice layout and its reads: chunks decode to exactly what was
// encoded (and damaged ones are named, not crashed on); windows and summaries
// read through TimelineReader equal what a brute-force pass over the recorded
// slices gives; the `slices` view agrees; ring and size cap leave notes.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/reader.h"
#include "store/slice_chunks.h"
#include "store/timeline.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::store {
namespace {

using shardscope::testing::TempDbPath;

bool Same(const TimelineSlice& a, const TimelineSlice& b) {
  return std::tie(a.slice_id, a.start_ns, a.dur_ns, a.parent_id, a.graph_id, a.op_id, a.flow_id, a.bytes,
                  a.arrival_ns, a.name_id, a.category_id, a.shape_id, a.step, a.depth, a.kind) ==
         std::tie(b.slice_id, b.start_ns, b.dur_ns, b.parent_id, b.graph_id, b.op_id, b.flow_id, b.bytes,
                  b.arrival_ns, b.name_id, b.category_id, b.shape_id, b.step, b.depth, b.kind);
}

TimelineSlice RandomSlice(std::mt19937_64& rng, int64_t id, int64_t start) {
  TimelineSlice s;
  s.slice_id = id;
  s.start_ns = start;
  s.dur_ns = static_cast<int64_t>(rng() % 100000);
  s.depth = static_cast<int16_t>(rng() % 3);
  s.parent_id = rng() % 2 ? -1 : static_cast<int64_t>(rng() % 1000);
  s.name_id = static_cast<int32_t>(1 + rng() % 50);
  s.kind = static_cast<TimelineKind>(rng() % kNumTimelineKinds);
  s.op_id = rng() % 3 ? static_cast<int64_t>(rng() % 500) : -1;
  s.flow_id = rng() % 4 ? -1 : static_cast<int64_t>(rng() % 100000);
  s.bytes = rng() % 2 ? 0 : static_cast<int64_t>(rng() % (int64_t{1} << 40));
  s.arrival_ns = rng() % 3 ? -1 : start - static_cast<int64_t>(rng() % 5000);
  s.category_id = rng() % 4 ? 0 : static_cast<int32_t>(rng() % 9);
  s.shape_id = rng() % 4 ? 0 : static_cast<int32_t>(rng() % 90);
  return s;
}

TEST(SliceChunks, DecodeGivesBackWhatWasEncoded) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    internal::ChunkEncoder enc;
    const int64_t step = round % 5 == 0 ? -1 : round, graph = round % 3 == 0 ? -1 : round * 7;
    enc.Reset(step, graph);
    std::vector<TimelineSlice> in;
    int64_t id = static_cast<int64_t>(rng() % 1000000), start = static_cast<int64_t>(rng() % 1000000000) - 5000;
    const int n = 1 + static_cast<int>(rng() % internal::kChunkSlices);
    for (int i = 0; i < n; ++i) {
      // Ids and starts mostly rise, sometimes fall (nested slices recorded at their end).
      id += rng() % 5 == 0 ? -static_cast<int64_t>(rng() % 50) : static_cast<int64_t>(1 + rng() % 70);
      start += rng() % 6 == 0 ? -static_cast<int64_t>(rng() % 3000) : static_cast<int64_t>(rng() % 100000);
      TimelineSlice s = RandomSlice(rng, id, start);
      s.step = step < 0 ? -1 : static_cast<int32_t>(step);
      s.graph_id = graph;
      in.push_back(s);
      enc.Add(s);
    }
    internal::ChunkHeader h{round, step, graph, enc.start_ns(), enc.first_slice_id(), enc.count()};
    std::vector<TimelineSlice> out;
    ASSERT_TRUE(internal::DecodeChunk(h, enc.Text(), &out).ok()) << enc.Text().substr(0, 200);
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) ASSERT_TRUE(Same(in[i], out[i])) << "round " << round << " slice " << i;
  }
}

TEST(SliceChunks, DamagedChunksAreNamedNotCrashedOn) {
  internal::ChunkHeader h{42, 1, 2, 1000, 10, 2};
  std::vector<TimelineSlice> out;
  for (const char* text : {"", "[", "[[0,1,2,0,0],[5,1,2,0]", "[[0,1,2,9,0],[5,1,2,0]]", "[[0,1,2,0,0]]",
                           "[[0,1,2,0,0],[5,-1,2,0]]", "[[0,1,2,0,0],[5,1,2,0,1,2,3,4,5,6,7,8,9,10]]",
                           "[[0,1,2,0,0],[x]]", "[[0,1,2,0,0],[5,1,2,0]] trailing", "[[0,1],[5,1,2,0]]",
                           "[[0,1,2,0,0],[5,1,2,0,99999999999999999999999]]"}) {
    out.clear();
    absl::Status st = internal::DecodeChunk(h, text, &out);
    EXPECT_TRUE(absl::IsDataLoss(st)) << text << " -> " << st;
    EXPECT_NE(st.message().find("slice_chunks row 42"), std::string::npos) << st;
    EXPECT_TRUE(out.empty()) << text;
  }
  EXPECT_TRUE(internal::DecodeChunk(h, " [ [0, 1,2,0,0] ,\n[5,1,2,0] ] ", &out).ok());
}

SummaryBucket RandomBucket(std::mt19937_64& rng, int level, int64_t bucket) {
  SummaryBucket b;
  const int shift = 22 + 2 * level;
  b.start_ns = bucket << shift;
  b.width_ns = int64_t{1} << shift;
  b.depth = 2;
  b.count = 1 + static_cast<int64_t>(rng() % 900);
  for (int k = 0; k < kNumTimelineKinds; ++k) {
    b.kind_ns[k] = rng() % 3 ? 0 : static_cast<int64_t>(rng() % 5000000);
    b.busy_ns += b.kind_ns[k];
  }
  b.longest_slice_id = static_cast<int64_t>(rng() % 100000000);
  b.longest_start_ns = b.start_ns + static_cast<int64_t>(rng() % static_cast<uint64_t>(b.width_ns));
  b.longest_dur_ns = static_cast<int64_t>(rng() % 9000000);
  b.longest_name_id = static_cast<int32_t>(rng() % 300);
  b.longest_kind = static_cast<TimelineKind>(rng() % kNumTimelineKinds);
  if (rng() % 4) {
    b.first_step = static_cast<int32_t>(rng() % 1000);
    b.last_step = b.first_step + static_cast<int32_t>(rng() % 3);
  }
  return b;
}

bool SameBucket(const SummaryBucket& a, const SummaryBucket& b) {
  return std::tie(a.start_ns, a.width_ns, a.depth, a.count, a.busy_ns, a.kind_ns, a.longest_slice_id,
                  a.longest_start_ns, a.longest_dur_ns, a.longest_name_id, a.longest_kind, a.first_step,
                  a.last_step) ==
         std::tie(b.start_ns, b.width_ns, b.depth, b.count, b.busy_ns, b.kind_ns, b.longest_slice_id,
                  b.longest_start_ns, b.longest_dur_ns, b.longest_name_id, b.longest_kind, b.first_step,
                  b.last_step);
}

TEST(SummaryGroups, DecodeGivesBackWhatWasEncoded) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int level = static_cast<int>(rng() % kNumSummaryLevels);
    const int64_t first = internal::GroupOf(static_cast<int64_t>(rng() % 4000) - 2000);  // before 0 too
    internal::SummaryGroup g{level, 2, first, {}};
    for (int64_t off = 0; off < internal::kGroupBuckets; ++off)
      if (rng() % 3 == 0) internal::AddToGroup(g, RandomBucket(rng, level, first + off));
    if (g.buckets.empty()) internal::AddToGroup(g, RandomBucket(rng, level, first + 31));
    internal::GroupRow row = internal::EncodeGroup(g);
    std::vector<SummaryBucket> back;
    ASSERT_TRUE(internal::DecodeGroup(level, 2, row.first_bucket, row.slice_base, row.step_base,
                                      static_cast<int64_t>(g.buckets.size()), row.text, &back)
                    .ok())
        << row.text;
    ASSERT_EQ(back.size(), g.buckets.size());
    for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(SameBucket(back[i], g.buckets[i])) << trial << " " << i;
    // A window of buckets decodes only those.
    back.clear();
    ASSERT_TRUE(internal::DecodeGroup(level, 2, row.first_bucket, row.slice_base, row.step_base,
                                      static_cast<int64_t>(g.buckets.size()), row.text, &back, first + 8, first + 15)
                    .ok());
    for (const SummaryBucket& b : back) {
      EXPECT_GE(b.start_ns >> (22 + 2 * level), first + 8);
      EXPECT_LE(b.start_ns >> (22 + 2 * level), first + 15);
    }
  }
  // Merging a bucket into its place adds up; a new one goes in order.
  internal::SummaryGroup g{0, 0, 64, {}};
  SummaryBucket a = RandomBucket(rng, 0, 70), b = RandomBucket(rng, 0, 70), c = RandomBucket(rng, 0, 66);
  a.depth = b.depth = c.depth = 0;
  internal::AddToGroup(g, a);
  internal::AddToGroup(g, b);
  internal::AddToGroup(g, c);
  ASSERT_EQ(g.buckets.size(), 2u);
  EXPECT_EQ(g.buckets[0].start_ns, c.start_ns);
  EXPECT_EQ(g.buckets[1].count, a.count + b.count);
  EXPECT_EQ(g.buckets[1].longest_dur_ns, std::max(a.longest_dur_ns, b.longest_dur_ns));
}

TEST(SummaryGroups, DamagedGroupsAreNamedNotCrashedOn) {
  std::vector<SummaryBucket> out;
  for (const char* text :
       {"", "[", "[[0,1,2,0,0,0,0,-1,0]", "[[0,0,2,0,0,0,0,-1,0]]", "[[32,1,2,0,0,0,0,-1,0]]",
        "[[3,1,2,0,0,0,0,-1,0],[3,1,2,0,0,0,0,-1,0]]", "[[0,1,2,0,0,0,9,-1,0]]", "[[0,1,-2,0,0,0,0,-1,0]]",
        "[[0,1,2,0,0,0,0,-2,0]]", "[[0,1,2,0,0,0,0,-1,0,5,-5]]", "[[0,1,2,0,0,0,0]]",
        "[[0,1,2,0,0,0,0,-1,0,1,2,3,4,5,6,7]]", "[[0,1,2,0,0,0,0,-1,0]] x", "[[0,1,2,0,0,0,0,-1,0],[x]]",
        "[[0,1,2,0,0,0,0,-1,0],[1,1,2,0,0,0,0,-1,0]]"}) {
    out.clear();
    absl::Status st = internal::DecodeGroup(1, 0, 96, 0, 0, 1, text, &out);
    EXPECT_TRUE(absl::IsDataLoss(st)) << text << " -> " << st;
    EXPECT_NE(st.message().find("slice_summary_groups row (level 1, first bucket 96"), std::string::npos) << st;
    EXPECT_TRUE(out.empty()) << text;
  }
  EXPECT_TRUE(internal::DecodeGroup(1, 0, 96, 0, 0, 1, " [ [0, 1,2,0,0,0,0,-1,0] ] ", &out).ok());
}

// A writer at `path` with a run started and one device track (id 1).
absl::StatusOr<std::unique_ptr<Writer>> OpenOneTrackRun(const std::string& path) {
  auto w = Writer::Open(path);
  if (!w.ok()) return w.status();
  trace::RunRecord run;
  run.sample = "synthetic";
  if (auto id = (*w)->StartRun(run); !id.ok()) return id.status();
  trace::TrackRecord tr;
  tr.track_id = 1;
  tr.name = "chip 0";
  tr.clock = trace::Clock::kDevice;
  tr.device_id = 0;
  (*w)->Record(tr);
  return w;
}

// One slice named "k" on track 1.
void RecordSlice(Writer& w, int64_t slice_id, int64_t start, int64_t dur, int step) {
  trace::SliceRecord s;
  s.slice_id = slice_id;
  s.track_id = 1;
  s.start_ns = start;
  s.dur_ns = dur;
  s.name = "k";
  s.step = step;
  w.Record(s);
}

// Slices that arrive after their group was written (late: another thread's
// slices, an import's stragglers) are merged into that group's row, at every
// level, and neither replace nor double what it held.
TEST(SummaryGroups, LateSlicesMergeIntoTheirGroups) {
  const std::string path = TempDbPath("late_groups");
  auto w = OpenOneTrackRun(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::mt19937_64 rng(9);
  std::vector<std::pair<int64_t, int64_t>> recorded;  // start, dur
  int64_t id = 1;
  auto add = [&](int64_t start, int64_t dur, int step) {
    RecordSlice(**w, id++, start, dur, step);
    recorded.emplace_back(start, dur);
  };
  // Three seconds in order (about 700 level-0 buckets, 22 groups), a flush
  // half way (groups written open), then stragglers in groups long written.
  for (int64_t t = 0; t < 3'000'000'000; t += 1'000'000 + static_cast<int64_t>(rng() % 2'000'000)) {
    add(t, 500'000 + static_cast<int64_t>(rng() % 400'000), static_cast<int>(t / 500'000'000));
    if (recorded.size() == 700) (*w)->Flush();
  }
  for (int64_t late : {int64_t{5'000'000}, int64_t{300'000'000}, int64_t{1'000'000'000}, int64_t{2'999'000'000}})
    add(late + 123, 7'000'000, 99);  // longer than any: each becomes its bucket's longest
  ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  w->reset();
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  TimelineReader tl(*r);
  for (int level = 0; level < 5; ++level) {
    const int shift = 22 + 2 * level;
    std::map<int64_t, std::pair<int64_t, int64_t>> want;  // bucket -> count, longest
    for (const auto& [start, dur] : recorded) {
      auto& [n, longest] = want[start >> shift];
      ++n;
      longest = std::max(longest, dur);
    }
    auto got = tl.Summaries(1, 1, level, 0, 4'000'000'000);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size()) << "level " << level;
    for (const SummaryBucket& b : *got) {
      EXPECT_EQ(b.count, want[b.start_ns >> shift].first) << "level " << level << " bucket " << (b.start_ns >> shift);
      EXPECT_EQ(b.longest_dur_ns, want[b.start_ns >> shift].second) << "level " << level;
    }
  }
  std::remove(path.c_str());
}

struct Recorded {
  std::string path;
  std::map<int64_t, std::vector<TimelineSlice>> by_track;  // as recorded, with name ids resolved later
  std::map<int64_t, std::vector<std::string>> names;
};

// Two device tracks and a host track with nesting, over `steps` steps.
// With `flush_each_step`, every step ends with a Flush: open chunks and
// summary buckets are written, and the next step's slices merge into them.
Recorded RecordRun(const std::string& name, int steps, WriterOptions options = {}, bool flush_each_step = false) {
  Recorded out;
  out.path = TempDbPath(name);
  auto w = Writer::Open(out.path, options);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return out;
  trace::RunRecord run;
  run.sample = "synthetic";
  EXPECT_TRUE((*w)->StartRun(run).ok());
  for (int t = 0; t < 3; ++t) {
    trace::TrackRecord tr;
    tr.track_id = 10 + t;
    tr.name = t < 2 ? absl::StrCat("chip ", t) : "host 0 / main";
    tr.clock = t < 2 ? trace::Clock::kDevice : trace::Clock::kHost;
    tr.device_id = t < 2 ? t : -1;
    (*w)->Record(tr);
  }
  std::mt19937_64 rng(11);
  int64_t id = 1;
  std::vector<int64_t> now = {0, 0, 0};
  for (int step = 0; step < steps; ++step) {
    for (int t = 0; t < 3; ++t) {
      const int n = 300 + static_cast<int>(rng() % 500);
      for (int i = 0; i < n; ++i) {
        trace::SliceRecord s;
        s.slice_id = id++;
        s.track_id = 10 + t;
        s.start_ns = now[t];
        s.dur_ns = 1000 + static_cast<int64_t>(rng() % 200000);
        s.name = absl::StrCat("op.", rng() % 20);
        s.kind = t == 2           ? trace::SliceKind::kHost
                 : rng() % 7 == 0 ? trace::SliceKind::kHostWait  // a chip waiting for the host
                                  : static_cast<trace::SliceKind>(rng() % 3);
        s.step = step;
        s.graph_id = step % 2;
        s.op_id = static_cast<int64_t>(i);
        if (s.kind == trace::SliceKind::kCollective) s.arrival_ns = s.start_ns - 500;
        if (t == 2 && i % 2 == 1) {  // a child inside the previous host slice
          s.depth = 1;
          s.parent_id = id - 2;
          s.start_ns = now[t] - 900;
          s.dur_ns = 400;
        } else {
          now[t] += s.dur_ns + static_cast<int64_t>(rng() % 3000);
        }
        (*w)->Record(s);
        TimelineSlice x;
        x.slice_id = s.slice_id;
        x.start_ns = s.start_ns;
        x.dur_ns = s.dur_ns;
        x.depth = static_cast<int16_t>(s.depth);
        x.parent_id = s.parent_id;
        x.kind = static_cast<TimelineKind>(s.kind);
        x.step = step;
        x.graph_id = s.graph_id;
        x.op_id = s.op_id;
        x.arrival_ns = s.arrival_ns;
        out.by_track[s.track_id].push_back(x);
        out.names[s.track_id].push_back(s.name);
      }
    }
    trace::StepRecord st;
    st.step = step;
    st.wall_ns = 1;
    (*w)->Record(st);
    if (flush_each_step) (*w)->Flush();
  }
  EXPECT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  return out;
}

void ExpectWindowsAndSummariesEqualABruteForcePass(Recorded rec) {
  auto r = Reader::Open(rec.path);
  ASSERT_TRUE(r.ok()) << r.status();
  TimelineReader tl(*r);
  ASSERT_TRUE(tl.chunked().value());
  // Resolve the names the writer interned.
  auto ids = r->Query("SELECT name_id, name FROM names");
  ASSERT_TRUE(ids.ok());
  std::map<std::string, int32_t> name_id;
  for (size_t i = 0; i < ids->rows.size(); ++i)
    name_id[ids->Text(i, "name")] = static_cast<int32_t>(ids->Int(i, "name_id"));
  for (auto& [track, slices] : rec.by_track)
    for (size_t i = 0; i < slices.size(); ++i) slices[i].name_id = name_id[rec.names[track][i]];

  std::mt19937_64 rng(3);
  for (auto& [track, slices] : rec.by_track) {
    const int64_t end = std::max_element(slices.begin(), slices.end(), [](auto& a, auto& b) {
                          return a.start_ns + a.dur_ns < b.start_ns + b.dur_ns;
                        })->start_ns + slices.back().dur_ns;
    for (int q = 0; q < 20; ++q) {
      int64_t t0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(end));
      int64_t t1 = t0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(end / 3));
      std::vector<TimelineSlice> want;
      for (const auto& s : slices)
        if (s.start_ns < t1 && s.start_ns + s.dur_ns >= t0) want.push_back(s);
      std::sort(want.begin(), want.end(), [](auto& a, auto& b) {
        return a.depth != b.depth ? a.depth < b.depth : a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.slice_id < b.slice_id;
      });
      auto got = tl.Slices(1, track, t0, t1);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want.size()) << "track " << track << " [" << t0 << ", " << t1 << ")";
      for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(Same((*got)[i], want[i])) << i;
    }
    for (int level = 0; level < 4; ++level) {
      std::map<std::pair<int, int64_t>, SummaryBucket> want;
      const int shift = 22 + 2 * level;
      for (const auto& s : slices) {
        SummaryBucket& b = want[{s.depth, s.start_ns >> shift}];
        if (b.count == 0 || s.dur_ns > b.longest_dur_ns) {
          b.longest_slice_id = s.slice_id;
          b.longest_dur_ns = s.dur_ns;
        }
        ++b.count;
        b.busy_ns += s.dur_ns;
        b.kind_ns[static_cast<int>(s.kind)] += s.dur_ns;
      }
      auto got = tl.Summaries(1, track, level, 0, end);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want.size()) << "level " << level;
      for (const SummaryBucket& b : *got) {
        const SummaryBucket& w = want[{b.depth, b.start_ns >> shift}];
        EXPECT_EQ(b.count, w.count);
        EXPECT_EQ(b.busy_ns, w.busy_ns);
        EXPECT_EQ(b.kind_ns, w.kind_ns);
        EXPECT_EQ(b.longest_dur_ns, w.longest_dur_ns);
        EXPECT_EQ(b.width_ns, int64_t{1} << shift);
      }
    }
  }
  auto steps = tl.Steps(1);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->size(), 8u);  // 4 steps on the device and host clocks
  // The SQL view expands the same slices.
  auto view = r->Query("SELECT count(*) AS n, sum(dur_ns) AS d, sum(wait_ns) AS w FROM slices");
  ASSERT_TRUE(view.ok()) << view.status();
  int64_t n = 0, d = 0, wsum = 0;
  for (const auto& [track, slices] : rec.by_track)
    for (const auto& s : slices) {
      ++n;
      d += s.dur_ns;
      if (s.arrival_ns >= 0) wsum += s.start_ns - s.arrival_ns;
    }
  EXPECT_EQ(view->Int(0, "n"), n);
  EXPECT_EQ(view->Int(0, "d"), d);
  EXPECT_EQ(view->Int(0, "w"), wsum);
  // The JSON view (what the sqlite3 shell reads) and the native one (what
  // shardscope's own connections read) give the same rows.
  const std::string all = "SELECT run_id, slice_id, track_id, start_ns, dur_ns, depth, parent_id, name_id, kind,"
                          " step, graph_id, op_id, flow_id, bytes, arrival_ns, wait_ns, category_id FROM slices"
                          " ORDER BY slice_id";
  auto native = r->Query(all);
  ASSERT_TRUE(native.ok()) << native.status();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(rec.path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  {
    Reader plain = Reader::OnConnection(raw);
    auto temp = plain.Query("SELECT count(*) AS n FROM sqlite_temp_master");
    ASSERT_TRUE(temp.ok());
    ASSERT_EQ(temp->Int(0, "n"), 0);  // nothing shadows the file's own views here
    auto json = plain.Query(all);
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_EQ(json->rows.size(), static_cast<size_t>(n));
    EXPECT_TRUE(json->rows == native->rows);
    // Filters the native reader applies itself (kind, depth) give the same
    // rows as SQL's own comparison, values of other types included.
    for (const char* where : {"kind = 'collective'", "kind = 'host' AND depth = 1", "depth = 0 AND kind = 'compute'",
                              "kind = 'nonsense'", "kind = 1", "depth = '0'", "depth = 0.0", "depth = 1.5",
                              "kind = 'collective' OR depth = 1", "kind IN ('transfer', 'host_wait')"}) {
      const std::string sql = absl::StrCat("SELECT slice_id, kind, depth FROM slices WHERE ", where, " ORDER BY slice_id");
      auto a = plain.Query(sql);
      auto b = r->Query(sql);
      ASSERT_TRUE(a.ok() && b.ok()) << where;
      EXPECT_TRUE(a->rows == b->rows) << where << ": " << a->rows.size() << " rows by SQL, " << b->rows.size()
                                      << " natively";
    }
  }
  // The same for slice_summaries: the JSON view over the groups, the native
  // view, and TimelineReader's buckets agree.
  const std::string buckets = "SELECT run_id, track_id, level, depth, bucket, count, busy_ns, compute_ns,"
                              " collective_ns, transfer_ns, host_ns, compile_ns, host_wait_ns, longest_slice_id,"
                              " longest_start_ns, longest_dur_ns, longest_name_id, longest_kind, first_step, last_step"
                              " FROM slice_summaries ORDER BY run_id, track_id, level, depth, bucket";
  auto native_buckets = r->Query(buckets);
  ASSERT_TRUE(native_buckets.ok()) << native_buckets.status();
  // ... and the per-chip step breakdown, summed per chunk natively and per
  // slice by the file's own view.
  const std::string breakdown = "SELECT * FROM step_device_summary ORDER BY run_id, step, device_id";
  auto native_breakdown = r->Query(breakdown);
  ASSERT_TRUE(native_breakdown.ok()) << native_breakdown.status();
  {
    Reader plain = Reader::OnConnection(raw);
    auto json = plain.Query(buckets);
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_GT(json->rows.size(), 0u);
    EXPECT_TRUE(json->rows == native_buckets->rows);
    auto per_slice = plain.Query(breakdown);
    ASSERT_TRUE(per_slice.ok()) << per_slice.status();
    EXPECT_EQ(per_slice->rows.size(), 8u);  // 4 steps x 2 chips
    EXPECT_TRUE(per_slice->rows == native_breakdown->rows);
    EXPECT_TRUE(per_slice->columns == native_breakdown->columns);
  }
  sqlite3_close(raw);
  for (const auto& [track, slices] : rec.by_track) {
    auto got = tl.Summaries(1, track, 1, INT64_MIN / 4, INT64_MAX / 4);
    ASSERT_TRUE(got.ok()) << got.status();
    auto sql = r->Query(absl::StrCat("SELECT count(*) AS n, sum(count) AS c, sum(busy_ns) AS b FROM slice_summaries"
                                     " WHERE track_id = ", track, " AND level = 1"));
    ASSERT_TRUE(sql.ok());
    int64_t c = 0, b = 0;
    for (const SummaryBucket& x : *got) {
      c += x.count;
      b += x.busy_ns;
    }
    EXPECT_EQ(static_cast<int64_t>(got->size()), sql->Int(0, "n"));
    EXPECT_EQ(c, sql->Int(0, "c"));
    EXPECT_EQ(b, sql->Int(0, "b"));
  }
  // The whole-run view is one small query at a coarse level.
  EXPECT_EQ(SummaryLevelFor(0, int64_t{1} << 32, 2000), 0);  // 1024 level-0 buckets
  EXPECT_EQ(SummaryLevelFor(0, 1000000, 2000), -1);
  EXPECT_EQ(SummaryLevelFor(0, int64_t{1} << 34, 2000), 1);  // 4096 level-0 buckets, 1024 at level 1
  // Chunks stay about a quarter of a 16 KiB page (the text cap, passed by at
  // most the slice that crossed it), so four share a page.
  auto sizes = r->Query("SELECT max(length(slices)) AS most, count(*) AS n, sum(count) AS slices FROM slice_chunks");
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_LE(sizes->Int(0, "most"), static_cast<int64_t>(internal::kChunkTextBytes) + 120);
  EXPECT_EQ(sizes->Int(0, "slices"), n);
}

TEST(Timeline, WindowsAndSummariesEqualABruteForcePass) {
  ExpectWindowsAndSummariesEqualABruteForcePass(RecordRun("timeline_read", 4));
}

// Flushed buckets are written open; the slices that come after land in the
// same buckets and must be merged into those rows, not replace or double them.
TEST(Timeline, SummariesMergeAcrossFlushes) {
  ExpectWindowsAndSummariesEqualABruteForcePass(RecordRun("timeline_flushed", 4, {}, /*flush_each_step=*/true));
}

// A window finds a chunk that starts before it by looking back as far as the
// track's longest chunk. While a run is written that length can grow, so a
// reader must not keep an answer from before; once the run ends it may.
TEST(Timeline, AWindowOfALiveRunSeesAChunkLongerThanAnyBefore) {
  const std::string path = TempDbPath("live_span");
  auto w = OpenOneTrackRun(path);
  ASSERT_TRUE(w.ok()) << w.status();
  int64_t id = 1;
  auto add = [&](int64_t start, int64_t dur, int step) { RecordSlice(**w, id++, start, dur, step); };
  for (int i = 0; i < 100; ++i) add(i * 1'000'000, 500'000, 0);  // step 0: short slices
  (*w)->Flush();
  ASSERT_TRUE((*w)->status().ok()) << (*w)->status();
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  TimelineReader tl(*r);
  auto count = [&](int64_t t0, int64_t t1) -> size_t {
    auto got = tl.Slices(1, 1, t0, t1);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->size() : 0;
  };
  EXPECT_EQ(count(12'000'000'000, 13'000'000'000), 0u);
  add(10'000'000'000, 5'000'000'000, 1);  // step 1: one slice from 10 s to 15 s
  (*w)->Flush();
  ASSERT_TRUE((*w)->status().ok()) << (*w)->status();
  EXPECT_EQ(count(12'000'000'000, 13'000'000'000), 1u) << "a longer chunk written after the first window";
  ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  EXPECT_EQ(count(12'000'000'000, 13'000'000'000), 1u);
  EXPECT_EQ(count(0, 20'000'000'000), 101u);
  EXPECT_EQ(count(15'000'000'001, 20'000'000'000), 0u);
  w->reset();
  TimelineReader after(*r);  // a finished run: every track's span from one query
  auto got = after.Slices(1, 1, 14'000'000'000, 14'500'000'000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);
  auto none = after.Slices(1, 7, 0, 20'000'000'000);  // a track with no chunks
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  std::remove(path.c_str());
}

TEST(Timeline, ARingKeepsTheLastStepsAndSaysSo) {
  WriterOptions o;
  o.ring_steps = 2;
  Recorded rec = RecordRun("timeline_ring", 6, o);
  auto r = Reader::Open(rec.path);
  ASSERT_TRUE(r.ok());
  auto steps = r->Query("SELECT group_concat(DISTINCT step) AS s FROM (SELECT step FROM slice_chunks ORDER BY step)");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->Text(0, "s"), "4,5");
  auto note = r->Query("SELECT capture_note FROM runs");
  ASSERT_TRUE(note.ok());
  EXPECT_NE(note->Text(0, "capture_note").find("last 2 steps"), std::string::npos) << note->Text(0, "capture_note");
  EXPECT_NE(note->Text(0, "capture_note").find("steps up to 3 were dropped"), std::string::npos);
  auto all_steps = r->Query("SELECT count(*) AS n FROM steps");
  EXPECT_EQ(all_steps->Int(0, "n"), 6);  // only the timeline is trimmed
  // The kept steps keep their level-of-detail buckets at every level; a
  // bucket that ends before the first kept step's start (on its track's
  // clock) goes, and one straddling it keeps what it counted: exactly.
  std::map<bool, int64_t> cut;  // host clock? -> first start of a kept step
  for (const auto& [track, slices] : rec.by_track)
    for (const auto& s : slices)
      if (s.step >= 4) {
        auto [it, fresh] = cut.try_emplace(track == 12, s.start_ns);
        if (!fresh) it->second = std::min(it->second, s.start_ns);
      }
  for (int level = 0; level < 5; ++level) {
    const int shift = 22 + 2 * level;
    int64_t want = 0;
    for (const auto& [track, slices] : rec.by_track)
      for (const auto& s : slices) want += ((s.start_ns >> shift) + 1) << shift > cut[track == 12];
    auto sum = r->Query(absl::StrCat("SELECT sum(count) AS n FROM slice_summaries WHERE level = ", level));
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->Int(0, "n"), want) << "level " << level;
  }
}

TEST(Timeline, ACaptureCapStopsTheTimelineAndSaysWhere) {
  WriterOptions o;
  o.max_capture_bytes = 1200 * 1024;  // an empty file is about 0.7 MB (16 KiB pages)
  Recorded rec = RecordRun("timeline_cap", 40, o);
  auto r = Reader::Open(rec.path);
  ASSERT_TRUE(r.ok());
  int64_t recorded = 0;
  for (const auto& [track, s] : rec.by_track) recorded += static_cast<int64_t>(s.size());
  auto q = r->Query("SELECT (SELECT sum(count) FROM slice_chunks) AS kept, (SELECT count(*) FROM steps) AS steps,"
                    " (SELECT capture_note FROM runs) AS note");
  ASSERT_TRUE(q.ok());
  EXPECT_LT(q->Int(0, "kept"), recorded);
  EXPECT_GT(q->Int(0, "kept"), 0);
  EXPECT_EQ(q->Int(0, "steps"), 40);
  const std::string note = q->Text(0, "note");
  EXPECT_NE(note.find("timeline capture stopped at step "), std::string::npos) << note;
  EXPECT_NE(note.find(absl::StrCat(recorded - q->Int(0, "kept"), " later slices")), std::string::npos) << note;
}

}  // namespace
}  // namespace shardscope::store
