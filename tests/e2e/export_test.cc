// `shardscope export --chrome`: a recorded run written as a Chrome trace and
// parsed back — every slice one complete event, nested per thread as stored,
// chips as processes in chip order with the clock in their names, one flow
// per collective linking its chips, counters as counter events; gzip output
// reads back the same.
#include <unistd.h>
#include <zlib.h>

#include <cstdio>

#include <map>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/chrome_export.h"
#include "store/reader.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

std::string ReadGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  if (!f) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

class ExportE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(e2e::TempDb("export"));
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x1 --steps 3 --quiet --db ", *db_));
    ASSERT_EQ(o.code, 0) << o.text;
  }
  static std::string* db_;
};
std::string* ExportE2e::db_ = nullptr;

TEST_F(ExportE2e, ChromeTraceReadsBackWithEverySliceFlowAndCounter) {
  for (const std::string ext : {".json", ".json.gz"}) {
    const std::string out = absl::StrCat(::testing::TempDir(), "/export_", getpid(), ext);
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_, " --chrome ", out));
    ASSERT_EQ(o.code, 0) << o.text;
    const std::string text = ext == ".json" ? e2e::Shell("cat " + out).text : ReadGz(out);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object() && j["traceEvents"].is_array()) << ext;
    std::map<std::string, int> ph;
    std::map<int64_t, std::string> names;
    std::map<int64_t, int64_t> sort;
    std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> threads;
    std::map<int64_t, std::string> flows;  // id -> phases seen
    for (const auto& e : j["traceEvents"]) {
      const std::string p = e["ph"];
      ++ph[p];
      if (p == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
      if (p == "M" && e["name"] == "process_sort_index") sort[e["pid"]] = e["args"]["sort_index"];
      if (p == "X") threads[{e["pid"], e["tid"]}].push_back({e["ts"].get<double>(), e["dur"].get<double>()});
      if (p == "s" || p == "t" || p == "f") flows[e["id"]] += p;
    }
    // Every slice of the run, once.
    auto slices = e2e::Q(*db_, "SELECT COUNT(*) AS n FROM slices");
    EXPECT_EQ(ph["X"], slices.Int(0, "n")) << ext;
    auto counters = e2e::Q(*db_, "SELECT COUNT(*) AS n FROM counters");
    EXPECT_EQ(ph["C"], counters.Int(0, "n")) << ext;
    // Processes: the host, then each chip on each clock, in chip order.
    std::vector<std::string> by_sort;
    std::map<int64_t, std::string> ordered;
    for (const auto& [pid, s] : sort) ordered[s] = names[pid];
    for (const auto& [s, n] : ordered) by_sort.push_back(n);
    EXPECT_EQ(by_sort, (std::vector<std::string>{"host 0 (host clock)", "chip 0 (device clock)", "chip 1 (device clock)",
                                                 "chip 0 (modeled clock)", "chip 1 (modeled clock)"}))
        << ext;
    // Nesting per thread: each event lies inside the one open around it, or after it.
    for (auto& [lane, events] : threads) {
      std::vector<double> open;  // end times of the enclosing events
      for (const auto& [ts, dur] : events) {
        while (!open.empty() && ts >= open.back() - 1e-3) open.pop_back();
        if (!open.empty()) EXPECT_LE(ts + dur, open.back() + 1e-3) << "pid " << lane.first << " tid " << lane.second;
        open.push_back(ts + dur);
      }
    }
    // One flow per collective that links at least two chips: start, steps, finish.
    auto linked = e2e::Q(*db_,
                         "SELECT COUNT(*) AS n FROM (SELECT flow_id FROM slices WHERE flow_id IS NOT NULL"
                         " GROUP BY flow_id HAVING COUNT(*) >= 2)");
    EXPECT_EQ(static_cast<int64_t>(flows.size()), linked.Int(0, "n")) << ext;
    EXPECT_GT(flows.size(), 0u);
    for (const auto& [id, phases] : flows) {
      EXPECT_EQ(phases.front(), 's') << id;
      EXPECT_EQ(phases.back(), 'f') << id;
    }
  }
}

TEST_F(ExportE2e, BadArgumentsAreClearErrors) {
  e2e::Output none = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_));
  EXPECT_EQ(none.code, 2) << none.text;
  EXPECT_TRUE(absl::StrContains(none.text, "--chrome")) << none.text;
  e2e::Output run = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_, " --run 9 --chrome /tmp/x.json"));
  EXPECT_EQ(run.code, 1) << run.text;
  EXPECT_TRUE(absl::StrContains(run.text, "no run 9")) << run.text;
  e2e::Output dir = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_, " --chrome /nonexistent/x.json"));
  EXPECT_EQ(dir.code, 1) << dir.text;
  EXPECT_TRUE(absl::StrContains(dir.text, "/nonexistent/x.json")) << dir.text;
}

// A counter stored as Inf was written as `"value":Inf`, invalid JSON; a
// damaged slice chunk left a half-written file behind. Now the sample is left
// out and counted, and a failed export leaves the file that was there.
TEST(ExportDamage, NonFiniteCountersAndDamagedChunks) {
  const std::string db = e2e::TempDb("export_damage");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x1 --steps 2 --quiet --db ", db)).code, 0);
  e2e::Exec(db, "UPDATE counters SET value = 9e999 WHERE rowid = (SELECT min(rowid) FROM counters);"
                "UPDATE counters SET value = 'n/a' WHERE rowid = (SELECT max(rowid) FROM counters)");
  const std::string out = ::testing::TempDir() + "/export_damage.json";
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", out));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "note: 2 counter samples left out: not a finite number")) << o.text;
  const nlohmann::json j = nlohmann::json::parse(e2e::Shell("cat " + out).text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not valid JSON";
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") EXPECT_TRUE(e["args"]["value"].is_number()) << e.dump();

  e2e::Exec(db, "UPDATE slice_chunks SET slices = '[[0,-5000000,1,3]]', count = 1 WHERE chunk_id % 2 = 0");
  e2e::Output bad = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", out));
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_TRUE(absl::StrContains(bad.text, "is damaged")) << bad.text;
  // The earlier export is still whole, and nothing half-written lies beside it.
  EXPECT_FALSE(nlohmann::json::parse(e2e::Shell("cat " + out).text, nullptr, false).is_discarded());
  EXPECT_NE(e2e::Shell(absl::StrCat("ls ", out, ".partial")).code, 0);
}

// An output through a link is written where the link points, the link kept
// (a rename over it made it a file: over /dev/stdout, for everyone); an
// output that cannot be written is the output's error, not the database's.
TEST_F(ExportE2e, ALinkIsWrittenThroughAndOutputErrorsNameTheOutput) {
  const std::string dir = ::testing::TempDir() + "/export_link";
  ASSERT_EQ(e2e::Shell(absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir, " && ln -s target.json ", dir,
                                    "/link.json")).code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_, " --chrome ", dir, "/link.json"));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(e2e::Shell(absl::StrCat("test -L ", dir, "/link.json")).code, 0) << "the link was replaced";
  EXPECT_FALSE(nlohmann::json::parse(e2e::Shell(absl::StrCat("cat ", dir, "/target.json")).text, nullptr, false)
                   .is_discarded());
  e2e::Output full = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", *db_, " --chrome /dev/full"));
  EXPECT_EQ(full.code, 1) << full.text;
  EXPECT_TRUE(absl::StrContains(full.text, "writing /dev/full failed")) << full.text;
  EXPECT_FALSE(absl::StrContains(full.text, "damage")) << full.text;
}

// `export DB --chrome DB` renamed the trace over the database it read, and a
// link or hard link to it did the same: the run was gone. Now refused, the file kept.
TEST_F(ExportE2e, TheDatabaseItselfIsNeverWrittenOver) {
  const std::string dir = ::testing::TempDir() + "/export_self";
  const std::string db = dir + "/run.db";
  ASSERT_EQ(e2e::Shell(absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir, " && cp ", *db_, " ", db, " && ln -s run.db ",
                                    dir, "/sym.json && ln ", db, " ", dir, "/hard.json")).code, 0);
  const std::string before = e2e::Shell("md5sum < " + db).text;
  for (const std::string out : {db, dir + "/sym.json", dir + "/hard.json", dir + "/./run.db"}) {
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", out));
    EXPECT_EQ(o.code, 1) << out << "\n" << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "the database being exported")) << o.text;
    EXPECT_EQ(e2e::Shell("md5sum < " + db).text, before) << out;
  }
  EXPECT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db)).code, 0);
  // Named as a side file the database does not have yet: written, it would be
  // read as the database's log (every command then refused the file).
  for (const std::string out : {db + "-wal", db + "-shm", dir + "/../export_self/run.db-journal"}) {
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", out));
    EXPECT_EQ(o.code, 1) << out << "\n" << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "a side file of the database being exported")) << o.text;
    EXPECT_NE(e2e::Shell("test -e " + out).code, 0) << out;
  }
  EXPECT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db)).code, 0);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// Every cell of the query's rows as text: "a,b\nc,d".
std::string Rows(const std::string& db, const std::string& sql) {
  std::string out;
  for (const auto& row : e2e::Q(db, sql).rows) {
    for (size_t i = 0; i < row.size(); ++i) absl::StrAppend(&out, i ? "," : "", row[i].value_or("NULL"));
    out += "\n";
  }
  return out;
}

// Per kind on each clock: slices, their total time, and the collectives'
// flows and arrivals, as a run's own tables hold them.
std::string KindTotals(const std::string& db) {
  return Rows(db,
                "SELECT t.clock, t.device_id, s.kind, count(*), sum(s.dur_ns), count(s.flow_id), "
                "count(s.arrival_ns), sum(s.step) FROM slices s JOIN tracks t USING (run_id, track_id) "
                "WHERE t.device_id IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3");
}

// `shardscope export --chrome` read back by `shardscope import` is the run it
// came from: chips as chips on their clocks, each slice's kind and step, each
// collective's flow and arrival, the steps' wall times; so fleet names the
// same slow chip with the same figures, on a recorded run and a simulated one.
// A run recorded without a timeline exports its counters only, and says so:
// an empty trace is not taken for an empty run.
TEST(ExportTraceOff, ARunWithoutATimelineSaysWhyTheExportIsEmpty) {
  const std::string db = e2e::TempDb("export_trace_off");
  const std::string json = absl::StrCat(::testing::TempDir(), "/export_trace_off_", getpid(), ".json");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 2 --trace off --quiet --db ", db)).code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json, " 2>&1"));
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "0 slices")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "note: the run has no timeline slices to export (--trace off")) << o.text;
}

// A run recorded with --trace steps has no kernels: read back from its
// export it must not look like a whole timeline (the report gave a verdict,
// "bound by compute 87%", on kernels it never had). Its capture note comes along.
TEST(ExportRoundTrip, APartlyCapturedRunReadBackSaysWhatItsCaptureLeftOut) {
  const std::string db = e2e::TempDb("roundtrip_steps"), back = e2e::TempDb("roundtrip_steps_back");
  const std::string json = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/roundtrip_steps_", getpid(), ".json"));
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 4 --trace steps --quiet --db ", db))
                .code,
            0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --quiet --db ", back)).code, 0);
  EXPECT_EQ(Rows(back, "SELECT capture_note FROM runs"), Rows(db, "SELECT capture_note FROM runs"));
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", back));
  EXPECT_TRUE(absl::StrContains(report.text, "no verdict on what bounds the step: recorded with --trace steps"))
      << report.text;
}

// A part of a pod: --chips and --steps keep those chips' lanes and those
// steps (a 4096-chip pod's whole timeline was 883 MB of gzip), host lanes
// stay, the selection is said in the file and read back by import; bad
// selections are usage errors naming what the run has.
TEST(ExportRoundTrip, APartOfAPodIsExportedAndSaysWhichPart) {
  const std::string db = e2e::TempDb("export_part"), back = e2e::TempDb("export_part_back");
  const std::string json =
      test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/export_part_", getpid(), ".json"));
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 4x4x4 --steps 6 --quiet --db ",
                                    db))
                .code,
            0);
  e2e::Output o = e2e::Shell(
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chips 0-3,17 --steps 2:3 --chrome ", json));
  ASSERT_EQ(o.code, 0) << o.text;
  nlohmann::json j = nlohmann::json::parse(e2e::Shell("cat " + json).text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.text;
  EXPECT_EQ(j["otherData"]["capture_note"], "exported: chips 0-3,17 of 64, steps 2-3");
  std::set<int64_t> chip_pids, steps;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t pid = e["pid"];
    if (pid >= 1'000'000) chip_pids.insert(pid % 1'000'000);
    if (e["args"].contains("step")) steps.insert(e["args"]["step"].get<int64_t>());
  }
  EXPECT_EQ(chip_pids, (std::set<int64_t>{0, 1, 2, 3, 17}));
  EXPECT_EQ(steps, (std::set<int64_t>{2, 3}));
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --quiet --db ", back)).code, 0);
  EXPECT_EQ(Rows(back, "SELECT capture_note FROM runs"), "exported: chips 0-3,17 of 64, steps 2-3\n");
  // Its chips keep their ids (chip 17 was read back as chip 4, so fleet named the wrong chip).
  EXPECT_EQ(Rows(back, "SELECT group_concat(device_id) FROM (SELECT device_id FROM devices ORDER BY device_id)"),
            "0,1,2,3,17\n");
  for (const char* bad : {"--chips 64", "--chips 3-1", "--chips x", "--steps 9:12", "--steps 2:1", "--steps a"}) {
    e2e::Output b = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " ", bad, " --chrome ", json));
    EXPECT_EQ(b.code, 2) << bad << ": " << b.text;
  }
  e2e::Output range = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --steps 9:12 --chrome ", json));
  EXPECT_TRUE(absl::StrContains(range.text, "run 1 stored steps 0-5")) << range.text;
  // A part of a recorded run reads back with its steps timed as the run timed
  // them, exactly (otherData step_walls): from 0 its first step read 2.5x, and
  // from the end of the mark_step before it 9.9 ms for 6.1 once under load.
  const std::string rec = e2e::TempDb("export_part_rec"), rec_back = e2e::TempDb("export_part_rec_back");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 5 --quiet --db ", rec)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", rec, " --steps 2:3 --chrome ", json)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --quiet --db ", rec_back)).code, 0);
  auto wall = [](const std::string& db) {
    return static_cast<double>(e2e::Q(db, "SELECT wall_ns FROM steps WHERE step = 2").Int(0, "wall_ns"));
  };
  EXPECT_EQ(wall(rec_back), wall(rec));
  // A run without a timeline has no step bounds: its counters cannot be
  // placed in the steps asked for, and are not written as if they were.
  const std::string off = e2e::TempDb("export_part_off");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 4 --trace off --quiet --db ", off)).code, 0);
  e2e::Output c = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", off, " --steps 1:2 --chrome ", json, " 2>&1"));
  EXPECT_EQ(c.code, 0) << c.text;
  EXPECT_TRUE(absl::StrContains(c.text, " 0 counter samples")) << c.text;
  EXPECT_TRUE(absl::StrContains(c.text, "counter samples left out: the run stored no step bounds")) << c.text;
  // The device clock's view of a simulated pod is empty, and query says why.
  e2e::Output q = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " query ", db,
                                          " \"SELECT * FROM step_device_summary\" 2>&1"));
  EXPECT_EQ(q.code, 0) << q.text;
  EXPECT_TRUE(absl::StrContains(q.text, "note: no rows: step_device_summary covers the device clock")) << q.text;
  // The per-op views have their rows, the measured columns 0: said, in every format.
  for (const char* format : {" --format table", " --format csv", " --format json"}) {
    e2e::Output k = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " query ", db, format,
                                            " \"SELECT sum(count) FROM kernel_stats\" 2>&1"));
    EXPECT_EQ(k.code, 0) << k.text;
    EXPECT_TRUE(absl::StrContains(k.text, "note: kernel_stats counts measured device-clock time, which simulated runs"))
        << format << ": " << k.text;
  }
  // A recorded run's file says nothing of it.
  e2e::Output r = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " query ", rec,
                                          " \"SELECT sum(count) FROM time_by_source_line\" 2>&1"));
  EXPECT_FALSE(absl::StrContains(r.text, "note:")) << r.text;
}

// A stop signal in the middle of an export leaves no half-written file
// beside OUT (SIGTERM and SIGHUP left OUT.partial, up to 8 MB), and the OUT
// that was there is kept; the process still dies of the signal.
TEST(ExportSignals, AStopSignalLeavesNoPartialFile) {
  const std::string db = e2e::TempDb("export_signal");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x4 --steps 120 --quiet --db ", db)).code, 0);
  const std::string out = absl::StrCat(::testing::TempDir(), "/export_signal_", getpid(), ".json.gz");
  for (const char* sig : {"TERM", "HUP"}) {
    ASSERT_EQ(e2e::Shell(absl::StrCat("echo old > ", out)).code, 0);
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", out,
                                            " >/dev/null 2>&1 & p=$!; sleep 0.05; kill -", sig,
                                            " $p; wait $p; echo rc=$?"));
    EXPECT_NE(e2e::Shell(absl::StrCat("test -e ", out, ".partial")).code, 0) << sig << ": " << o.text;
    // Either the export finished first (a whole trace) or it died and OUT is the old one.
    const std::string head = e2e::Shell(absl::StrCat("head -c 3 ", out)).text;
    EXPECT_TRUE(head == "old" || head == "\x1f\x8b\x08") << sig << ": " << o.text;
  }
  std::remove(out.c_str());
}

TEST(ExportRoundTrip, ARecordedRunReadBackIsTheSameRunForFleet) {
  const std::string db = e2e::TempDb("roundtrip_rec");
  const std::string back = e2e::TempDb("roundtrip_rec_back");
  const std::string json = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/roundtrip_", getpid(), ".json.gz"));
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 6 --quiet",
                                    " --fault slow-chip:2:0.6 --db ", db)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json)).code, 0);
  e2e::Output imp = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --db ", back));
  ASSERT_EQ(imp.code, 0) << imp.text;
  EXPECT_TRUE(absl::StrContains(imp.text, "4 chips")) << imp.text;
  EXPECT_TRUE(absl::StrContains(imp.text, "own_export")) << imp.text;
  EXPECT_EQ(KindTotals(back), KindTotals(db));
  EXPECT_NE(KindTotals(db).find("collective"), std::string::npos);
  // Steps: as many, each with a wall time, and together the run's: the export
  // holds each step's mark_step, not the moment its loss was logged (where
  // the recorder closes a step), so single steps move by a few ms either way.
  EXPECT_EQ(Rows(back, "SELECT group_concat(step) FROM steps"), Rows(db, "SELECT group_concat(step) FROM steps"));
  const double total = e2e::Q(db, "SELECT sum(wall_ns) AS t FROM steps").Real(0, "t");
  const double total_back = e2e::Q(back, "SELECT sum(wall_ns) AS t FROM steps").Real(0, "t");
  EXPECT_EQ(e2e::Q(back, "SELECT count(*) AS n FROM steps WHERE wall_ns > 0").Int(0, "n"), 6);
  EXPECT_NEAR(total_back / total, 1.0, 0.1) << total << " " << total_back;
  // The diagnosis, from each file alone.
  const std::string fleet = absl::StrCat(SHARDSCOPE_CLI_BINARY, " fleet --format json ");
  nlohmann::json f1 = nlohmann::json::parse(e2e::Shell(fleet + db).text, nullptr, false);
  nlohmann::json f2 = nlohmann::json::parse(e2e::Shell(fleet + back).text, nullptr, false);
  ASSERT_TRUE(f1.is_object() && f2.is_object());
  ASSERT_FALSE(f1["suspects"].empty());
  EXPECT_EQ(f1["suspects"][0]["id"], "2");
  EXPECT_EQ(f2["suspects"][0]["id"], f1["suspects"][0]["id"]);
  EXPECT_EQ(f2["suspects"][0]["flagged"], true);
  EXPECT_NEAR(f2["suspects"][0]["score"].get<double>(), f1["suspects"][0]["score"].get<double>(), 1e-3);
}

// A collective's link slices start together, and some end together: read
// back by time alone they nested in each other, and a slow link went
// unseen. The export's depth keeps them siblings.
TEST(ExportRoundTrip, ASlowLinkIsFoundInTheExportReadBack) {
  const std::string db = e2e::TempDb("roundtrip_link");
  const std::string back = e2e::TempDb("roundtrip_link_back");
  const std::string json = absl::StrCat(::testing::TempDir(), "/roundtrip_link_", getpid(), ".json");
  test_files::RemoveAtExit(json);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 4x4 --steps 6 --quiet",
                                    " --fault link:1-2:0.3 --db ", db)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --db ", back)).code, 0);
  const std::string links = "SELECT count(DISTINCT name) FROM events WHERE name LIKE 'link %' AND clock = 'modeled'";
  EXPECT_EQ(Rows(back, links), Rows(db, links));
  // Every slice at the depth it was stored at.
  const std::string depths = "SELECT depth, count(*) FROM events WHERE clock = 'modeled' GROUP BY depth ORDER BY depth";
  EXPECT_EQ(Rows(back, depths), Rows(db, depths));
  e2e::Output f = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " fleet ", back));
  EXPECT_TRUE(absl::StrContains(f.text, "verdict: suspect: link 1-2")) << f.text;
  // Its hosts come back, and its topology says so (it read "1 host (rank 0 of
  // 1)" beside "16 chips on 4 hosts" in fleet's header).
  const std::string hosts = "SELECT num_hosts FROM runs";
  EXPECT_EQ(Rows(back, hosts), Rows(db, hosts));
  EXPECT_GT(e2e::Q(back, hosts).Int(0, "num_hosts"), 1);
  EXPECT_TRUE(absl::StrContains(f.text, absl::StrCat(e2e::Q(back, hosts).Int(0, "num_hosts"),
                                                     " hosts (one file, exported by shardscope)")))
      << f.text;
}

// A run the hang detector ended: the trace says so (otherData "run_status"
// and "hangs") and marks the stopped chip on its lane; it had read as a
// whole run that just stopped.
TEST(ExportHang, AStoppedChipIsMarkedOnItsLane) {
  const std::string json = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/export_hang_", getpid(), ".json"));
  // A simulated run that `fault` hangs, exported; returns its trace.
  auto hung_trace = [&](const std::string& name, const std::string& fault) {
    const std::string db = e2e::TempDb(name);
    EXPECT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 2x4 --steps 6 --quiet",
                                      " --fault ", fault, " --db ", db)).code,
              1);
    EXPECT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json)).code, 0);
    std::ifstream in(json);
    return nlohmann::json::parse(in, nullptr, false);
  };
  // The instant events: each must mark `chip` on its modeled-clock process.
  auto marks_of = [](const nlohmann::json& trace, int chip) {
    int marks = 0;
    for (const auto& e : trace["traceEvents"])
      if (e.value("ph", "") == "i") {
        ++marks;
        EXPECT_EQ(e["name"], absl::StrCat("chip ", chip, " stopped responding"));
        EXPECT_EQ(e["pid"], 2000000 + chip) << "the chip's modeled-clock process";
      }
    return marks;
  };
  const nlohmann::json trace = hung_trace("export_hang", "fail-chip:5@3");
  ASSERT_TRUE(trace.is_object());
  EXPECT_EQ(trace["otherData"]["run_status"], "hang detected") << trace["otherData"].dump();
  ASSERT_EQ(trace["otherData"]["hangs"].size(), 1u) << trace["otherData"].dump();
  EXPECT_TRUE(absl::StartsWith(trace["otherData"]["hangs"][0].get<std::string>(), "hang detected at step 3: chip 5"));
  EXPECT_EQ(marks_of(trace, 5), 1);
  // A hang in step 0, before any step ended: marked at the lane's start (it had no mark).
  const nlohmann::json t0 = hung_trace("export_hang_step0", "fail-chip:2@0");
  ASSERT_TRUE(t0.is_object());
  EXPECT_EQ(marks_of(t0, 2), 1);
}

TEST(ExportRoundTrip, ASimulatedRunReadBackIsRankedOnItsModeledClock) {
  const std::string db = e2e::TempDb("roundtrip_sim");
  const std::string back = e2e::TempDb("roundtrip_sim_back");
  const std::string json = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/roundtrip_sim_", getpid(), ".json"));
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 2x4 --steps 4 --quiet",
                                    " --fault slow-chip:6:0.7 --db ", db)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", db, " --chrome ", json)).code, 0);
  // The file alone says the run was simulated, and with which faults.
  {
    std::ifstream in(json);
    const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(trace.is_object());
    EXPECT_EQ(trace["otherData"]["simulated"], true) << trace["otherData"].dump();
    EXPECT_EQ(trace["otherData"]["faults_injected"], nlohmann::json::array({"slow-chip:6:0.7"}));
    EXPECT_TRUE(absl::StartsWith(trace["otherData"]["clocks"].get<std::string>(), "simulated: nothing was computed"));
  }
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", json, " --db ", back)).code, 0);
  EXPECT_EQ(Rows(back, "SELECT clock_kinds || ' ' || profile FROM runs"),
            Rows(db, "SELECT 'host,device,modeled ' || profile FROM runs"));
  EXPECT_EQ(Rows(back, "SELECT count(*) FROM tracks WHERE clock = 'modeled' AND device_id IS NOT NULL"), "8\n");
  e2e::Output f = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " fleet ", back));
  EXPECT_TRUE(absl::StrContains(f.text, "verdict: suspect: chip 6")) << f.text;
  EXPECT_TRUE(absl::StrContains(f.text, "ranked on the modeled clock")) << f.text;
  // The report's verdict is the simulated run's, on the modeled clock, not "no verdict".
  auto verdict = [](const std::string& path) {
    e2e::Output r = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", path, " --format json"));
    return nlohmann::json::parse(r.text, nullptr, false)["verdict"];
  };
  const nlohmann::json original = verdict(db), read_back = verdict(back);
  ASSERT_TRUE(original.is_object() && read_back.is_object());
  EXPECT_EQ(read_back["bound"], original["bound"]) << read_back.dump();
  EXPECT_EQ(read_back["breakdown"]["step"], original["breakdown"]["step"]) << read_back.dump();
  EXPECT_EQ(read_back["breakdown"]["clock"], "modeled") << read_back.dump();
}

// A pod's whole timeline is weighed before a byte is written: past what a
// viewer opens (about 5M slices) it is refused, nothing written, with the
// ways to cut it; a part, or `--chips all`, is written. The weight is read
// from the file's counts, close to what the export then writes.
TEST(ExportSize, APodPastWhatAViewerOpensIsWeighedBeforeWriting) {
  const std::string small = e2e::TempDb("export_size_small"), rec = e2e::TempDb("export_size_rec");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 4x4x4 --steps 6 --quiet --db ",
                                    small)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 4x1 --steps 4 --quiet --db ", rec)).code, 0);
  const std::string json =
      test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/export_size_", getpid(), ".json"));
  struct Part {
    std::string db;
    std::set<int64_t> chips;
    int64_t first = -1, last = -1;
  };
  for (const Part& p : {Part{small}, Part{small, {0, 1, 2, 3}}, Part{small, {}, 2, 3}, Part{small, {5}, 4, 4},
                        Part{rec}, Part{rec, {1}}, Part{rec, {}, 1, 2}}) {
    auto rd = store::Reader::Open(p.db);
    ASSERT_TRUE(rd.ok()) << rd.status();
    store::ChromeExportOptions o;
    o.chips = p.chips;
    o.first_step = p.first;
    o.last_step = p.last;
    const int64_t estimate = store::EstimateChromeSlices(*rd, 1, o);
    auto written = store::ExportChromeTrace(*rd, 1, json, o);
    ASSERT_TRUE(written.ok()) << written.status();
    SCOPED_TRACE(absl::StrCat(p.db, " chips ", p.chips.size(), " steps ", p.first, "-", p.last));
    EXPECT_GT(written->slices, 0);
    EXPECT_GE(estimate, written->slices * 6 / 10) << written->slices;
    EXPECT_LE(estimate, written->slices * 11 / 10) << written->slices;
  }
  // A small run's chips named whole: the run as it is.
  e2e::Output all = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", small, " --chips all --chrome ", json));
  EXPECT_EQ(all.code, 0) << all.text;
  EXPECT_FALSE(absl::StrContains(e2e::Shell("head -c 4000 " + json).text, "exported:")) << all.text;

  // 4096 chips x 20 steps of the mlp: about 6M slices.
  const std::string pod = e2e::TempDb("export_size_pod");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY,
                                    " run mlp --simulate --topology 16x16x16 --steps 20 --quiet --db ", pod)).code, 0);
  std::remove(json.c_str());
  e2e::Output whole = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", pod, " --chrome ", json));
  EXPECT_EQ(whole.code, 2) << whole.text;
  EXPECT_TRUE(absl::StrContains(whole.text, "slices (4096 chips, steps 0-19), more than a trace viewer opens"))
      << whole.text;
  EXPECT_TRUE(absl::StrContains(whole.text, "nothing written")) << whole.text;
  EXPECT_TRUE(absl::StrContains(whole.text, "--chips all")) << whole.text;
  EXPECT_NE(access(json.c_str(), F_OK), 0) << "a refused export wrote " << json;
  e2e::Output part = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " export ", pod, " --chips 0-63 --chrome ", json));
  EXPECT_EQ(part.code, 0) << part.text;
  EXPECT_FALSE(absl::StrContains(part.text, "note:")) << part.text;
}

}  // namespace
}  // namespace shardscope
