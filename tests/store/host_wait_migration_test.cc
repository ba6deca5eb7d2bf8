// A database written before the slice kind 'host_wait' existed (its slices
// CHECK constraint refuses the word, its step_device_summary has no
// host_wait_ns) is migrated when a writer opens it: the slices table is
// rebuilt with everything it held (views over it, a user's too, keep working),
// its indexes and the summary view are made again, and new runs can store
// chips waiting for the host.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"

namespace shardscope::store {
namespace {

// The version-1 schema text, as the release that wrote version-1 files had it.
std::string V1SchemaSql() {
  std::ifstream f(SHARDSCOPE_TEST_DATA "/store/schema_v1.sql");
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_FALSE(text.str().empty()) << "missing " SHARDSCOPE_TEST_DATA "/store/schema_v1.sql";
  return text.str();
}

// step_device_summary as it was before host_wait_ns.
constexpr char kOldSummary[] = R"(CREATE VIEW IF NOT EXISTS step_device_summary AS
WITH dev AS (
  SELECT s.run_id, s.step, t.device_id, s.kind, s.start_ns, s.dur_ns
  FROM slices s
  JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
  WHERE t.clock = 'device' AND t.device_id IS NOT NULL AND s.depth = 0 AND s.step IS NOT NULL
),
span AS (
  SELECT run_id, step, min(start_ns) AS step_start_ns, max(start_ns + dur_ns) AS step_end_ns
  FROM dev GROUP BY run_id, step
),
per AS (
  SELECT run_id, step, device_id,
         sum(CASE WHEN kind = 'compute' THEN dur_ns ELSE 0 END) AS compute_ns,
         sum(CASE WHEN kind = 'collective' THEN dur_ns ELSE 0 END) AS collective_ns,
         sum(CASE WHEN kind = 'transfer' THEN dur_ns ELSE 0 END) AS transfer_ns,
         sum(dur_ns) AS busy_ns
  FROM dev GROUP BY run_id, step, device_id
)
SELECT p.run_id, p.step, p.device_id, p.compute_ns, p.collective_ns, p.transfer_ns,
       max(0, (sp.step_end_ns - sp.step_start_ns) - p.busy_ns) AS idle_ns, p.busy_ns,
       sp.step_end_ns - sp.step_start_ns AS span_ns, sp.step_start_ns, sp.step_end_ns
FROM per p
JOIN span sp ON sp.run_id = p.run_id AND sp.step = p.step;)";

std::string OldSchema() {
  std::string s = V1SchemaSql();
  std::string check = absl::StrReplaceAll(s, {{"'compile','host_wait')", "'compile')"}});
  EXPECT_NE(check, s) << "the slices CHECK changed; update this test";
  const std::string begin = "CREATE VIEW IF NOT EXISTS step_device_summary AS";
  const std::string end = "JOIN span sp ON sp.run_id = p.run_id AND sp.step = p.step;";
  size_t b = check.find(begin), e = check.find(end, b);
  EXPECT_TRUE(b != std::string::npos && e != std::string::npos) << "the summary view changed; update this test";
  if (b == std::string::npos || e == std::string::npos) return check;
  return check.replace(b, e + end.size() - b, kOldSummary);
}

int64_t Count(const Reader& r, const std::string& sql) {
  auto q = r.Query(sql);
  EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
  return q.ok() ? q->Int(0, "n") : -1;
}

TEST(Migration, SlicesGainTheHostWaitKind) {
  std::string path = absl::StrCat(::testing::TempDir(), "/old_slices_", getpid(), ".db");
  std::remove(path.c_str());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql = OldSchema() + R"(
      INSERT INTO meta VALUES ('schema_version', '1'), ('tool', 'shardscope');
      INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,
                       tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)
        VALUES (1, 'mlp', '1x1', 'data,model', 'dp', '{}', '1 host x 1 chip', 'cpu', 'host,device', '0.1.0', 1,
                1, 1, '2026-11-01T00:00:00Z', 0, 'finished');
      INSERT INTO tracks VALUES (1, 7, 'chip 0', 'device', 0, 0, NULL);
      INSERT INTO names(name_id, name) VALUES (1, 'dot.1');
      INSERT INTO slices(run_id, slice_id, track_id, start_ns, dur_ns, depth, name_id, kind, step)
        VALUES (1, 1, 7, 0, 100, 0, 1, 'compute', 0), (1, 2, 7, 300, 100, 0, 1, 'compute', 1);
      CREATE VIEW my_compute AS SELECT slice_id, dur_ns FROM slices WHERE kind = 'compute';)";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    // The old file refuses the new kind: the migration is needed.
    EXPECT_NE(sqlite3_exec(db,
                           "INSERT INTO slices(run_id, slice_id, track_id, start_ns, dur_ns, depth, name_id, kind)"
                           " VALUES (1, 9, 7, 0, 1, 0, 1, 'host_wait')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "mlp";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    trace::TrackRecord t;
    t.track_id = 7;
    t.name = "chip 0";
    t.clock = trace::Clock::kDevice;
    t.device_id = 0;
    (*w)->Record(t);
    trace::SliceRecord k;
    k.slice_id = 1;
    k.track_id = 7;
    k.start_ns = 0;
    k.dur_ns = 100;
    k.name = "dot.1";
    k.kind = trace::SliceKind::kCompute;
    k.step = 0;
    (*w)->Record(k);
    trace::SliceRecord wait = k;
    wait.slice_id = 2;
    wait.start_ns = 100;
    wait.dur_ns = 400;
    wait.name = "waiting for host";
    wait.kind = trace::SliceKind::kHostWait;
    wait.step = 1;
    (*w)->Record(wait);
    k.slice_id = 3;
    k.start_ns = 500;
    k.step = 1;
    (*w)->Record(k);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  // What the old file held is still there, and the views work over it.
  EXPECT_EQ(Count(*r, "SELECT count(*) AS n FROM slices WHERE run_id = 1"), 2);
  EXPECT_EQ(Count(*r, "SELECT count(*) AS n FROM events WHERE run_id = 1 AND name = 'dot.1'"), 2);
  EXPECT_EQ(Count(*r, "SELECT count(*) AS n FROM sqlite_master WHERE name LIKE 'slices_before%'"), 0);
  // A view the user made over slices survives, and reads the new table.
  EXPECT_EQ(Count(*r, "SELECT count(*) AS n FROM my_compute"), 4);
  // Version 2: the rows went into chunks, and `slices` is the view over them.
  EXPECT_EQ(Count(*r, "SELECT count(*) AS n FROM sqlite_master WHERE type = 'view' AND name = 'slices'"), 1);
  EXPECT_EQ(Count(*r, "SELECT sum(count) AS n FROM slice_chunks WHERE run_id = 1"), 2);
  // The new run's wait is stored and summed apart from idle time.
  auto q = r->Query("SELECT step, compute_ns, host_wait_ns, idle_ns, span_ns FROM step_device_summary"
                    " WHERE run_id = 2 ORDER BY step");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_EQ(q->Int(0, "host_wait_ns"), 0);
  EXPECT_EQ(q->Int(1, "host_wait_ns"), 400);
  EXPECT_EQ(q->Int(1, "compute_ns"), 100);
  EXPECT_EQ(q->Int(1, "span_ns"), 500);
  EXPECT_EQ(q->Int(1, "idle_ns"), 0);
  auto old = r->Query("SELECT host_wait_ns, idle_ns FROM step_device_summary WHERE run_id = 1 AND step = 1");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->Int(0, "host_wait_ns"), 0);
  // A second open finds nothing left to migrate.
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope::store
