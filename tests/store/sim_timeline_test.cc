// A simulated run's timeline in the store (store/sim_timeline.h): schedules
// written once, slices made again on demand through the `slices` view and
// SimTimelineReader exactly as the simulator placed them, a few bytes per
// chip and step, and damaged rows named (store_sim_timeline_test).
#include "store/sim_timeline.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "profiler/trace/sim_program.h"
#include "store/sim_walk.h"
#include "tests/temp_files.h"
#include "store/slice_search.h"
#include "store/timeline.h"
#include "store/writer.h"

namespace shardscope::store {
namespace {

std::string TempPath(const std::string& name) {
  std::string p = absl::StrCat(::testing::TempDir(), "/sim_", name, "_", getpid(), ".db");
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return test_files::RemoveAtExit(p);
}

// 4 chips: a kernel, an all-reduce over pairs with link traffic, a kernel, an
// all-reduce over all; chip 2 slow, jitter on every chip; a preemption at step 1.
struct Sim {
  std::map<int64_t, trace::SimProgram> programs;
  std::vector<trace::SimChip> chips;
  std::vector<int64_t> tracks = {101, 102, 103, 104};
  std::vector<trace::SimRun> runs;
};

Sim MakeSim(int steps) {
  Sim s;
  trace::SimProgram p;
  p.graph_id = 5;
  p.group_sets = {{{0, 1}, {2, 3}}, {{0, 1, 2, 3}}};
  trace::SimCollective pairs{0, "ring", {4000, 4000}, {}};
  pairs.group_links = {{{0, 1, 0, 0, 1 << 20, 4000}}, {{2, 3, 2, 0, 1 << 20, 3900}}};
  p.collectives.push_back(pairs);
  p.collectives.push_back({1, "torus", {9000}, {}});
  p.ops.push_back({"dot.1", 0, trace::SliceKind::kCompute, 1, 200000, -1, -1, 0});
  p.ops.push_back({"all_reduce.2", 0, trace::SliceKind::kCollective, 2, 0, 0, 0, 1 << 20});
  p.ops.push_back({"fusion.3", 0, trace::SliceKind::kCompute, 3, 50000, -1, -1, 0});
  p.ops.push_back({"all_reduce.4", 0, trace::SliceKind::kCollective, 4, 0, 1, 1, 4096});
  p.num_collective_ops = 2;
  p.BuildIndex(4);
  s.programs[5] = p;
  s.chips.assign(4, {1, 0.05, 77});
  s.chips[2].time_scale = 1 / 0.6;
  std::vector<int64_t> free(4, 0);
  for (int step = 0; step < steps; ++step) {
    trace::SimRun r;
    r.seq = step;
    r.step = step;
    r.graph_id = 5;
    if (step == 0) r.transfers.push_back({"transfer w", 0, trace::SliceKind::kTransfer, -1, 3000, -1, -1, 4096});
    r.start_ns = free;
    if (step == 1) {
      r.preempted_ns = {0, 0, 5000, 5000};
      r.start_ns[2] += 5000;
      r.start_ns[3] += 5000;
    }
    EXPECT_TRUE(trace::SimSchedule(s.programs[5], s.chips, &r).ok());
    free = r.end_ns;
    s.runs.push_back(r);
  }
  return s;
}

std::string WriteRun(const std::string& name, const Sim& s, int64_t* run_id, int host_slices = 0) {
  const std::string path = TempPath(name);
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status();
  trace::RunRecord run;
  run.sample = "sim";
  run.simulated = true;
  run.clock_kinds = "host,modeled";
  auto id = (*w)->StartRun(run);
  EXPECT_TRUE(id.ok());
  *run_id = *id;
  for (int c = 0; c < 4; ++c) {
    trace::TrackRecord t;
    t.track_id = s.tracks[c];
    t.name = absl::StrCat("chip ", c, " (modeled)");
    t.clock = trace::Clock::kModeled;
    t.device_id = c;
    (*w)->Record(t);
  }
  if (host_slices > 0) {  // the host's lane, recorded as in any run (track 200)
    trace::TrackRecord t;
    t.track_id = 200;
    t.name = "host 0 / main";
    t.clock = trace::Clock::kHost;
    (*w)->Record(t);
    for (int i = 0; i < host_slices; ++i) {
      trace::SliceRecord x;
      x.slice_id = 900000 + i;
      x.track_id = 200;
      x.start_ns = i * 10000;
      x.dur_ns = 5000;
      x.name = "dispatch";
      x.step = i;
      (*w)->Record(x);
    }
  }
  (*w)->Flush();
  absl::Status st = WriteSimTimeline(path, {*run_id, &s.programs, &s.chips, &s.tracks, &s.runs});
  EXPECT_TRUE(st.ok()) << st;
  (*w)->EndRun();
  w->reset();
  return path;
}

TEST(SimTimeline, SlicesAreMadeAgainExactlyAsScheduled) {
  Sim s = MakeSim(6);
  int64_t run_id = 0;
  const std::string path = WriteRun("exact", s, &run_id);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  // Every chip's slices, as SimChipSlices makes them, through the `slices` view.
  auto q = rd->Query(
      "SELECT s.slice_id, s.track_id, s.start_ns, s.dur_ns, s.depth, s.parent_id, n.name, s.kind, s.step,"
      " s.graph_id, s.flow_id, s.arrival_ns, s.wait_ns, s.bytes FROM slices s JOIN names n USING (name_id)"
      " WHERE s.run_id = ?1 ORDER BY s.slice_id",
      {std::to_string(run_id)});
  ASSERT_TRUE(q.ok()) << q.status();
  std::map<int64_t, trace::SimSlice> want;
  std::map<int64_t, int64_t> track_of;
  for (const trace::SimRun& r : s.runs)
    for (int c = 0; c < 4; ++c) {
      std::vector<trace::SimSlice> v;
      trace::SimChipSlices(run_id, s.programs[5], s.chips[c], r, c, &v);
      for (const auto& x : v) {
        want[x.slice_id] = x;
        track_of[x.slice_id] = s.tracks[c];
      }
    }
  ASSERT_EQ(q->rows.size(), want.size());
  std::set<std::string> kinds;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const int64_t id = q->Int(i, "slice_id");
    ASSERT_TRUE(want.count(id)) << id;
    const trace::SimSlice& w = want[id];
    EXPECT_EQ(q->Int(i, "track_id"), track_of[id]);
    EXPECT_EQ(q->Int(i, "start_ns"), w.start_ns);
    EXPECT_EQ(q->Int(i, "dur_ns"), w.dur_ns);
    EXPECT_EQ(q->Int(i, "depth"), w.depth);
    EXPECT_EQ(q->Int(i, "parent_id", -1), w.parent_id);
    EXPECT_EQ(q->Int(i, "flow_id", -1), w.flow_id);
    EXPECT_EQ(q->Int(i, "arrival_ns", -1), w.arrival_ns);
    if (w.arrival_ns >= 0) EXPECT_EQ(q->Int(i, "wait_ns"), w.start_ns - w.arrival_ns);
    EXPECT_EQ(q->Int(i, "bytes"), w.bytes);
    if (w.name) EXPECT_EQ(q->Text(i, "name"), *w.name);
    kinds.insert(q->Text(i, "kind"));
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"compute", "collective", "transfer", "host_wait"}));
  // The link slices sit inside their collective, named by the link.
  auto links = rd->Query(
      "SELECT n.name, COUNT(*) AS k FROM slices s JOIN names n USING (name_id) WHERE s.run_id = ?1 AND s.depth = 1"
      " GROUP BY n.name ORDER BY n.name",
      {std::to_string(run_id)});
  ASSERT_TRUE(links.ok());
  ASSERT_EQ(links->rows.size(), 2u);
  EXPECT_EQ(links->Text(0, "name"), "link 0-1");
  EXPECT_EQ(links->Int(0, "k"), 6);
  // One chip's rows only, through the track constraint; the events and per-step views read them too.
  auto one = rd->Query("SELECT COUNT(*) AS n FROM slices WHERE run_id = ?1 AND track_id = 103",
                       {std::to_string(run_id)});
  ASSERT_TRUE(one.ok());
  // 4 ops and the link it shows (2-3) per step, the first step's transfer, the preemption.
  EXPECT_EQ(one->Int(0, "n"), 6 * 5 + 1 + 1);
  auto summary = rd->Query(
      "SELECT device_id, SUM(dur_ns) AS compute_ns FROM events WHERE run_id = ?1 AND clock = 'modeled'"
      " AND step = 3 AND kind = 'compute' GROUP BY device_id ORDER BY device_id",
      {std::to_string(run_id)});
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->rows.size(), 4u);
  EXPECT_GT(summary->Int(2, "compute_ns"), summary->Int(0, "compute_ns") * 3 / 2);  // the slow chip
  // Step bounds on the modeled clock only.
  auto bounds = rd->Query("SELECT clock, COUNT(*) AS n FROM step_bounds WHERE run_id = ?1 GROUP BY clock",
                          {std::to_string(run_id)});
  ASSERT_TRUE(bounds.ok());
  ASSERT_EQ(bounds->rows.size(), 1u);
  EXPECT_EQ(bounds->Text(0, "clock"), "modeled");
  EXPECT_EQ(bounds->Int(0, "n"), 6);
}

// The walk a chip's run at a time (the fleet diagnosis's), filtered or not,
// gives exactly the slices of ForEachSlice that it keeps, in the same order.
TEST(SimTimeline, ChipRunWalkGivesTheSlicesItKeeps) {
  Sim s = MakeSim(6);
  int64_t run_id = 0;
  const std::string path = WriteRun("walk", s, &run_id);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  using Seen = std::vector<std::tuple<int, int, int64_t, int64_t, int64_t, int, std::string>>;
  Seen all;
  absl::Status st = SimTimelineReader(*rd).ForEachSlice(run_id, [&](const SimTimelineReader::Row& r) {
    all.push_back(
        {r.step, r.device_id, r.slice.slice_id, r.slice.start_ns, r.slice.dur_ns, r.slice.depth, *r.name});
  });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_GT(all.size(), 0u);
  for (int top : {0, 1})
    for (int which : {0, 1, 2}) {
      SimWalkFilter f;
      f.top_level_only = top;
      if (which == 1) f.want_step = [](int n) { return n == 1 || n == 4 || n == 5; };
      if (which == 2) f.want_step = [](int) { return false; };
      Seen want, got;
      for (const auto& x : all)
        if ((!f.want_step || f.want_step(std::get<0>(x))) && (!top || std::get<5>(x) == 0)) want.push_back(x);
      st = ForEachSimChipRun(*rd, run_id, f, [&](const SimChipRun& r) {
        for (const trace::SimSlice& x : *r.slices)
          got.push_back(
              {r.step, r.device_id, x.slice_id, x.start_ns, x.dur_ns, x.depth, *r.names->Of(x.name_id)});
      });
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(got, want) << "top-level only " << top << ", steps " << which;
      if (top && which == 0) {
        EXPECT_LT(want.size(), all.size());  // there are link slices to leave out
      }
    }
}

TEST(SimTimeline, ReaderServesAChipsWindowAndItsSummaries) {
  Sim s = MakeSim(8);
  int64_t run_id = 0;
  const std::string path = WriteRun("window", s, &run_id);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok());
  SimTimelineReader sim(*rd);
  ASSERT_TRUE(*sim.IsSimulated(run_id));
  const trace::SimRun& r = s.runs[4];
  const int64_t t0 = r.start_ns[1], t1 = r.end_ns[1];
  auto slices = sim.Slices(run_id, 102, t0, t1);
  ASSERT_TRUE(slices.ok()) << slices.status();
  std::vector<trace::SimSlice> want;
  trace::SimChipSlices(run_id, s.programs[5], s.chips[1], r, 1, &want);
  size_t in_window = 0;
  for (const auto& w : want) in_window += w.start_ns < t1 && w.start_ns + w.dur_ns > t0;
  ASSERT_EQ(slices->size(), in_window);
  for (const TimelineSlice& x : *slices) {
    EXPECT_LT(x.start_ns, t1);
    EXPECT_GT(x.start_ns + x.dur_ns, t0);
    EXPECT_EQ(x.step, 4);
  }
  bool truncated = false;
  auto few = sim.Slices(run_id, 102, 0, INT64_MAX, 3, &truncated);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->size(), 3u);
  EXPECT_TRUE(truncated);
  auto buckets = sim.Summaries(run_id, 102, 0, 0, s.runs.back().end_ns[1] + 1);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  int64_t busy = 0, count = 0;
  for (const SummaryBucket& b : *buckets)
    if (b.depth == 0) {
      busy += b.busy_ns;
      count += b.count;
    }
  auto all = sim.Slices(run_id, 102, 0, INT64_MAX);
  int64_t want_busy = 0, want_count = 0;
  for (const TimelineSlice& x : *all)
    if (x.depth == 0) {
      want_busy += x.dur_ns;
      ++want_count;
    }
  EXPECT_EQ(busy, want_busy);
  EXPECT_EQ(count, want_count);
  EXPECT_FALSE(sim.Summaries(run_id, 102, 99, 0, 1).ok());

  // TimelineReader (what the app reads) defers to it for a simulated run:
  // the same window, and the whole-run summaries of every chip.
  TimelineReader tl(*rd);
  ASSERT_TRUE(*tl.simulated(run_id));
  auto same = tl.Slices(run_id, 102, t0, t1);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_EQ(same->size(), slices->size());
  for (size_t i = 0; i < same->size(); ++i) EXPECT_EQ((*same)[i].slice_id, (*slices)[i].slice_id);
  auto whole = tl.AllSummaries(run_id, 0, 0, s.runs.back().end_ns[1] + 1);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::set<int64_t> chips;
  int64_t chip_count = 0;
  for (const auto& b : *whole) {
    chips.insert(b.track_id);
    if (b.track_id == 102 && b.bucket.depth == 0) chip_count += b.bucket.count;
  }
  EXPECT_EQ(chips.size(), s.chips.size());
  EXPECT_EQ(chip_count, want_count);
  for (size_t i = 1; i < whole->size(); ++i) {
    const auto& a = (*whole)[i - 1].bucket;
    const auto& b = (*whole)[i].bucket;
    const bool ordered = std::tie((*whole)[i - 1].track_id, a.depth, a.start_ns) <
                         std::tie((*whole)[i].track_id, b.depth, b.start_ns);
    ASSERT_TRUE(ordered) << i;
  }
}

// A simulated run's host lanes are stored slices like any run's: the chips
// come from the schedule, the host's from its chunks, side by side.
TEST(SimTimeline, HostLanesOfASimulatedRunAreRead) {
  Sim s = MakeSim(3);
  int64_t run_id = 0;
  const std::string path = WriteRun("host_lane", s, &run_id, /*host_slices=*/3);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  TimelineReader tl(*rd);
  ASSERT_TRUE(*tl.simulated(run_id));
  auto host = tl.Slices(run_id, 200, 0, INT64_MAX / 4);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->size(), 3u);
  auto chip = tl.Slices(run_id, 101, 0, INT64_MAX / 4);
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_FALSE(chip->empty());
  auto whole = tl.AllSummaries(run_id, 0, 0, INT64_MAX / 4);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::map<int64_t, int64_t> count;
  for (const auto& b : *whole) count[b.track_id] += b.bucket.count;
  EXPECT_EQ(count.size(), s.chips.size() + 1);
  EXPECT_EQ(count[200], 3);
  auto one = tl.Summaries(run_id, 200, 0, 0, INT64_MAX / 4);
  ASSERT_TRUE(one.ok()) << one.status();
  int64_t n = 0;
  for (const auto& b : *one) n += b.count;
  EXPECT_EQ(n, 3);
}

// The timeline's search (Ctrl+F) and "this op's slices" find a simulated
// chip's slices, made from the schedule, as the `slices` view shows them.
TEST(SimTimeline, SearchFindsTheSlicesTheScheduleMakes) {
  Sim s = MakeSim(5);
  int64_t run_id = 0;
  const std::string path = WriteRun("search", s, &run_id);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto want = rd->Query(
      "SELECT s.track_id, s.slice_id, s.start_ns, s.step FROM slices s JOIN names n ON n.name_id = s.name_id"
      " WHERE s.run_id = ?1 AND lower(n.name) LIKE '%all_reduce%' ORDER BY s.start_ns, s.track_id, s.slice_id",
      {std::to_string(run_id)});
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_GT(want->rows.size(), 20u);  // 2 collectives x 4 chips x 5 steps, and their link slices
  auto got = FindSlicesByName(*rd, run_id, "ALL_Reduce");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->hits.size(), want->rows.size());
  EXPECT_EQ(got->total, static_cast<int64_t>(want->rows.size()));
  for (size_t i = 0; i < got->hits.size(); ++i) {
    EXPECT_EQ(got->hits[i].track_id, want->Int(i, "track_id")) << i;
    EXPECT_EQ(got->hits[i].slice.slice_id, want->Int(i, "slice_id")) << i;
    EXPECT_EQ(got->hits[i].slice.start_ns, want->Int(i, "start_ns")) << i;
    EXPECT_EQ(got->hits[i].slice.step, want->Int(i, "step")) << i;
    EXPECT_EQ(got->hits[i].slice.kind, TimelineKind::kCollective) << i;
  }
  auto few = FindSlicesByName(*rd, run_id, "dot.1", 3);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_EQ(few->hits.size(), 3u);
  EXPECT_EQ(few->total, 4 * 5);  // one per chip and step
  auto op = FindSlicesByOp(*rd, run_id, 5, 3);  // fusion.3
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->total, 4 * 5);
  ASSERT_EQ(op->names.size(), 1u);
  EXPECT_EQ(op->names[0].second, "fusion.3");
  std::set<int64_t> tracks;
  for (const SliceHit& h : op->hits) tracks.insert(h.track_id);
  EXPECT_EQ(tracks, std::set<int64_t>(s.tracks.begin(), s.tracks.end()));
  auto none = FindSlicesByOp(*rd, run_id, 6, 3);  // another program
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total, 0);
}

TEST(SimTimeline, StoresAFewBytesPerChipStepAndNamesDamage) {
  Sim s = MakeSim(50);
  int64_t run_id = 0;
  const std::string path = WriteRun("damage", s, &run_id);
  {
    auto rd = Reader::Open(path);
    ASSERT_TRUE(rd.ok());
    auto bytes = rd->Query("SELECT SUM(length(starts) + length(ends) + coalesce(length(preempted), 0)) AS b FROM sim_runs");
    ASSERT_TRUE(bytes.ok());
    EXPECT_LT(bytes->Int(0, "b") / (4.0 * 50), 16);  // bytes per chip-step of the per-run rows
  }
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "UPDATE sim_runs SET ends = x'0203' WHERE seq = 3", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok());
  auto q = rd->Query("SELECT COUNT(*) FROM slices WHERE run_id = ?1", {std::to_string(run_id)});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(std::string(q.status().message()).find("sim_runs row 3"), std::string::npos) << q.status();
}

}  // namespace
}  // namespace shardscope::store
