// A database written before `steps.eval_loss` existed gains the column when
// a writer opens it, keeps what it held, and takes new steps with eval losses.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "store/index_ranges.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/timeline.h"
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

TEST(Migration, OldStepsTableGainsEvalLoss) {
  std::string path = absl::StrCat(::testing::TempDir(), "/old_", getpid(), ".db");
  std::remove(path.c_str());
  {
    // The schema as it was: steps without eval_loss, one finished run, one step.
    std::string old = absl::StrReplaceAll(
        V1SchemaSql(), {{"  eval_loss REAL,                           -- held-out loss after this step, when measured\n", ""}});
    ASSERT_EQ(old.find("eval_loss"), std::string::npos) << "the schema text changed; update this test";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql = old + R"(
      INSERT INTO meta VALUES ('schema_version', '1'), ('tool', 'shardscope');
      INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,
                       tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)
        VALUES (1, 'mlp', '1x1', 'data,model', 'dp', '{}', '1 host x 1 chip', 'cpu', 'host,device', '0.1.0', 1,
                1, 1, '2026-11-01T00:00:00Z', 0, 'finished');
      INSERT INTO steps VALUES (1, 0, 2.5, 1000);)";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "llama";
    run.mesh = "1x1";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    trace::StepRecord s{4, 1.5, 2000};
    s.has_eval_loss = true;
    s.eval_loss = 1.75;
    (*w)->Record(s);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT run_id, step, loss, eval_loss FROM steps ORDER BY run_id");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_FALSE(q->rows[0][3].has_value());  // the old step: no eval loss
  EXPECT_DOUBLE_EQ(q->Real(1, "eval_loss"), 1.75);
  EXPECT_DOUBLE_EQ(q->Real(0, "loss"), 2.5);
  std::remove(path.c_str());
}

// A version-2 file from before --topology: `devices` without topology_coords
// and links, no `links` view. A reader opens it as it is; a writer adds the
// columns in place, old rows read NULL, and new chips keep their coordinates.
TEST(Migration, AVersion2FileGainsTopologyColumns) {
  std::string path = absl::StrCat(::testing::TempDir(), "/v2_topology_", getpid(), ".db");
  std::remove(path.c_str());
  auto one_run = [&](const std::string& coords, const std::string& links) {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "mlp";
    run.mesh = "2x1";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    for (int d = 0; d < 2; ++d) {
      trace::DeviceRecord dev{d, 0, absl::StrCat("[", d, ",0]"), 1 << 30, 1e12};
      dev.topology_coords = coords.empty() ? "" : absl::StrCat("[", d, "]");
      dev.links_json = links.empty() ? "" : absl::StrCat(R"([{"peer":)", 1 - d, R"(,"kind":"ici","bandwidth":1e9,"latency_ns":1000}])");
      (*w)->Record(dev);
    }
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  };
  one_run("", "");
  {
    // Back to the version-2 schema as it was.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* sql = "DROP VIEW links; ALTER TABLE devices DROP COLUMN topology_coords; ALTER TABLE devices DROP COLUMN links;";
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  {
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status();
    auto q = r->Query("SELECT COUNT(*) AS n FROM devices");
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ(q->Int(0, "n"), 2);
  }
  one_run("yes", "yes");
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT run_id, device_id, topology_coords, links FROM devices ORDER BY run_id, device_id");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 4u);
  EXPECT_FALSE(q->rows[0][2].has_value());  // the old run's chips: no coordinates
  EXPECT_EQ(q->Text(3, "topology_coords"), "[1]");
  auto links = r->Query("SELECT run_id, link_id, kind, bandwidth FROM links");
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_EQ(links->rows.size(), 1u);  // 0-1, once
  EXPECT_EQ(links->Text(0, "link_id"), "0-1");
  EXPECT_EQ(links->Text(0, "kind"), "ici");
  std::remove(path.c_str());
}

// A file whose links view reads one object per link ("peer", before
// 2026-11-27): a writer remakes the view, which reads the old runs' rows and
// the new runs' "peers" lists alike (and remakes a kernel_stats view from
// before its min_ns and max_ns).
TEST(Migration, TheLinksViewReadsBothFormsOfDeviceLinks) {
  std::string path = absl::StrCat(::testing::TempDir(), "/old_links_", getpid(), ".db");
  std::remove(path.c_str());
  auto one_run = [&](bool grouped) {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "mlp";
    run.mesh = "3x1";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    for (int d = 0; d < 3; ++d) {  // a ring of 3: 0-1, 1-2, 0-2
      trace::DeviceRecord dev{d, 0, absl::StrCat("[", d, ",0]"), 1 << 30, 1e12};
      dev.topology_coords = absl::StrCat("[", d, "]");
      const int next = (d + 1) % 3, prev = (d + 2) % 3;
      dev.links_json =
          grouped ? absl::StrCat(R"([{"bandwidth":2e9,"kind":"dcn","latency_ns":9,"peers":[)", next, ",",
                                 prev, "]}]")
                  : absl::StrCat(R"([{"bandwidth":1e9,"kind":"ici","latency_ns":1,"peer":)", next,
                                 R"(},{"bandwidth":1e9,"kind":"ici","latency_ns":1,"peer":)", prev, "}]");
      (*w)->Record(dev);
    }
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  };
  one_run(false);
  {
    // The view as files written before had it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* sql =
        "DROP VIEW links; CREATE VIEW links AS SELECT d.run_id, d.device_id || '-' || json_extract(j.value, "
        "'$.peer') AS link_id, d.device_id AS a, json_extract(j.value, '$.peer') AS b, json_extract(j.value, "
        "'$.kind') AS kind, json_extract(j.value, '$.bandwidth') AS bandwidth, json_extract(j.value, "
        "'$.latency_ns') AS latency_ns FROM devices d, json_each(d.links) j WHERE d.links IS NOT NULL AND "
        "d.device_id < json_extract(j.value, '$.peer');"
        // And a kernel_stats view from before min_ns and max_ns.
        "DROP VIEW kernel_stats; CREATE VIEW kernel_stats AS SELECT run_id, graph_id, op_id FROM ops;";
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  one_run(true);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto links = r->Query(
      "SELECT run_id, link_id, a, b, kind, bandwidth, latency_ns FROM links ORDER BY run_id, link_id");
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_EQ(links->rows.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const bool grouped = i >= 3;
    EXPECT_EQ(links->Int(i, "run_id"), grouped ? 2 : 1);
    EXPECT_EQ(links->Text(i, "link_id"), std::vector<std::string>({"0-1", "0-2", "1-2"})[i % 3]);
    EXPECT_LT(links->Int(i, "a"), links->Int(i, "b"));
    EXPECT_EQ(links->Text(i, "kind"), grouped ? "dcn" : "ici");
    EXPECT_EQ(links->Real(i, "bandwidth"), grouped ? 2e9 : 1e9);
  }
  // The file's own kernel_stats view was made again too.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = 'kernel_stats'", -1, &q, nullptr),
      SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_NE(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))).find("max_ns"),
            std::string::npos);
  sqlite3_finalize(q);
  sqlite3_close(db);
  std::remove(path.c_str());
}

// A file written by the last release that stored version 1 (one row per
// slice), kept as it was: a writer migrates it to chunks, and every slice
// reads back the same through the `slices` view, with summaries and step
// bounds made for the old run.
TEST(Migration, AVersion1FileFromTheLastReleaseMigratesToChunks) {
  const std::string fixture = SHARDSCOPE_TEST_DATA "/store/schema_v1_mlp.db";
  std::string path = absl::StrCat(::testing::TempDir(), "/v1_copy_", getpid(), ".db");
  {
    std::ifstream in(fixture, std::ios::binary);
    ASSERT_TRUE(in) << "missing " << fixture;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  const std::string columns =
      "run_id, slice_id, track_id, start_ns, dur_ns, depth, parent_id, name_id, kind, step, graph_id, op_id,"
      " flow_id, bytes";
  auto all_slices = [&](const Reader& r) {
    auto q = r.Query("SELECT " + columns + " FROM slices ORDER BY run_id, slice_id");
    EXPECT_TRUE(q.ok()) << q.status();
    return q.ok() ? q->rows : std::vector<std::vector<Cell>>{};
  };
  std::vector<std::vector<Cell>> before;
  {
    auto r = Reader::Open(path);  // read as it is, without migrating
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->schema_version(), 1);
    before = all_slices(*r);
    ASSERT_GT(before.size(), 100u);
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->schema_version(), kSchemaVersion);
  EXPECT_EQ(all_slices(*r), before);
  auto n = [&](const std::string& sql) {
    auto q = r->Query(sql);
    EXPECT_TRUE(q.ok()) << q.status() << " " << sql;
    return q.ok() ? q->Int(0, "n") : -1;
  };
  EXPECT_EQ(n("SELECT count(*) AS n FROM sqlite_master WHERE type = 'view' AND name = 'slices'"), 1);
  EXPECT_EQ(n("SELECT sum(count) AS n FROM slice_summaries WHERE level = 0 AND depth = 0"),
            n("SELECT count(*) AS n FROM slices WHERE depth = 0"));
  EXPECT_EQ(n("SELECT count(DISTINCT step) AS n FROM step_bounds WHERE clock = 'device'"), 3);
  EXPECT_GT(n("SELECT count(*) AS n FROM step_device_summary"), 0);
  EXPECT_GT(n("SELECT count(*) AS n FROM kernel_stats WHERE count > 0"), 0);
  EXPECT_EQ(n("SELECT count(*) AS n FROM runs WHERE imported = 0 AND capture_note IS NULL"), 1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope::store

namespace shardscope::store {
namespace {

// A file written by the last release that stored version 2 (a row per summary
// bucket), kept as it was: it reads as it is (the timeline and its level of
// detail), and a writer regroups the buckets, 32 to a row, with every bucket
// reading back the same through the `slice_summaries` view — the file's own
// JSON view and shardscope's native one alike — and through TimelineReader.
TEST(Migration, AVersion2FileFromTheLastReleaseRegroupsItsSummaries) {
  const std::string fixture = SHARDSCOPE_TEST_DATA "/store/schema_v2_mlp.db";
  std::string path = absl::StrCat(::testing::TempDir(), "/v2_copy_", getpid(), ".db");
  {
    std::ifstream in(fixture, std::ios::binary);
    ASSERT_TRUE(in) << "missing " << fixture;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  const std::string buckets =
      "SELECT run_id, track_id, level, depth, bucket, count, busy_ns, compute_ns, collective_ns, transfer_ns, host_ns,"
      " compile_ns, host_wait_ns, longest_slice_id, longest_start_ns, longest_dur_ns, longest_name_id, longest_kind,"
      " first_step, last_step FROM slice_summaries ORDER BY run_id, track_id, level, depth, bucket";
  auto whole_run = [](const Reader& r) {
    TimelineReader tl(r);
    auto b = tl.AllSummaries(1, 0, INT64_MIN / 4, INT64_MAX / 4);
    EXPECT_TRUE(b.ok()) << b.status();
    std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> out;
    if (b.ok())
      for (const auto& x : *b)
        out.emplace_back(x.track_id, x.bucket.start_ns, x.bucket.count, x.bucket.busy_ns, x.bucket.longest_slice_id);
    return out;
  };
  std::vector<std::vector<Cell>> before;
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> before_lod;
  {
    auto r = Reader::Open(path);  // read as it is, without migrating
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->schema_version(), 2);
    auto q = r->Query(buckets);
    ASSERT_TRUE(q.ok()) << q.status();
    before = q->rows;
    ASSERT_GT(before.size(), 50u);
    before_lod = whole_run(*r);
    ASSERT_FALSE(before_lod.empty());
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->schema_version(), kSchemaVersion);
  auto native = r->Query(buckets);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(native->rows == before);
  EXPECT_EQ(whole_run(*r), before_lod);
  // One row per track, level, depth and 32 buckets.
  auto kinds = r->Query("SELECT (SELECT type FROM sqlite_master WHERE name = 'slice_summaries') AS t,"
                        " (SELECT count(*) FROM slice_summary_groups) AS groups,"
                        " (SELECT count(*) FROM (SELECT DISTINCT run_id, track_id, level, depth, bucket >> 5"
                        " FROM slice_summaries)) AS want");
  ASSERT_TRUE(kinds.ok());
  EXPECT_EQ(kinds->Text(0, "t"), "view");
  EXPECT_EQ(kinds->Int(0, "groups"), kinds->Int(0, "want"));
  EXPECT_LT(kinds->Int(0, "groups"), static_cast<int64_t>(before.size()));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  {
    Reader plain = Reader::OnConnection(raw);  // the sqlite3 shell's view of the file
    auto json = plain.Query(buckets);
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_TRUE(json->rows == before);
  }
  sqlite3_close(raw);
  // And a second writer changes nothing more.
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  auto again = Reader::Open(path);
  ASSERT_TRUE(again.ok());
  auto q = again->Query(buckets);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->rows == before);
  std::remove(path.c_str());
}

// A version-3 file keeps a row per tensor per chip and each decision's
// sharding text (here the version-2 fixture, which has them as version 3 did):
// it reads as it is, spans included (a reader does not migrate), and a writer
// turns the tables into spans and interned texts behind views of their
// names, every row reading back the same.
TEST(Migration, PlacementsAndDecisionsBecomeSpansAndTextsReadingTheSame) {
  const std::string fixture = SHARDSCOPE_TEST_DATA "/store/schema_v2_mlp.db";
  std::string path = absl::StrCat(::testing::TempDir(), "/v3_spans_", getpid(), ".db");
  {
    std::ifstream in(fixture, std::ios::binary);
    ASSERT_TRUE(in) << "missing " << fixture;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  const std::string placements =
      "SELECT run_id, tensor_id, tensor_name, device_id, index_ranges, bytes FROM shard_placements"
      " ORDER BY run_id, tensor_id, device_id";
  const std::string decisions =
      "SELECT run_id, graph_id, op_id, name, sharding, source, via, source_file, source_line, from_op_id"
      " FROM sharding_decisions ORDER BY run_id, graph_id, op_id";
  // The spans as our readers take them, expanded to chips.
  auto spans = [](const Reader& r) {
    std::vector<std::tuple<int64_t, int64_t, int64_t>> out;  // tensor, chip, bytes
    auto from = PlacementSpansSql(r);
    EXPECT_TRUE(from.ok()) << from.status();
    if (!from.ok()) return out;
    auto q = r.Query(absl::StrCat("SELECT tensor_id, first_device, last_device, bytes FROM ", *from,
                                  " ORDER BY tensor_id, first_device"));
    EXPECT_TRUE(q.ok()) << q.status();
    for (size_t i = 0; q.ok() && i < q->rows.size(); ++i)
      for (int64_t d = q->Int(i, "first_device"); d <= q->Int(i, "last_device"); ++d)
        out.emplace_back(q->Int(i, "tensor_id"), d, q->Int(i, "bytes"));
    return out;
  };
  std::vector<std::vector<Cell>> before_p, before_d;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> before_s;
  {
    auto r = Reader::Open(path);  // read as it is, without migrating
    ASSERT_TRUE(r.ok()) << r.status();
    auto p = r->Query(placements);
    auto d = r->Query(decisions);
    ASSERT_TRUE(p.ok() && d.ok());
    before_p = p->rows;
    before_d = d->rows;
    before_s = spans(*r);
    ASSERT_EQ(before_p.size(), 36u);  // 9 tensors on 4 chips
    ASSERT_EQ(before_s.size(), 36u);
    ASSERT_GT(before_d.size(), 50u);
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->schema_version(), kSchemaVersion);
  auto p = r->Query(placements);
  auto d = r->Query(decisions);
  ASSERT_TRUE(p.ok() && d.ok());
  EXPECT_TRUE(p->rows == before_p);
  EXPECT_TRUE(d->rows == before_d);
  EXPECT_EQ(spans(*r), before_s);
  auto kinds = r->Query(
      "SELECT (SELECT type FROM sqlite_master WHERE name = 'shard_placements') AS p,"
      " (SELECT type FROM sqlite_master WHERE name = 'sharding_decisions') AS d,"
      " (SELECT count(*) FROM shard_placement_spans) AS spans,"
      " (SELECT count(*) FROM (SELECT DISTINCT tensor_id, index_ranges, bytes FROM shard_placements)) AS distinct_shards,"
      " (SELECT count(*) FROM sharding_texts) AS texts");
  ASSERT_TRUE(kinds.ok()) << kinds.status();
  EXPECT_EQ(kinds->Text(0, "p"), "view");
  EXPECT_EQ(kinds->Text(0, "d"), "view");
  // Consecutive chips with one shard are one span: here each distinct shard
  // is on a run of consecutive chips.
  EXPECT_EQ(kinds->Int(0, "spans"), kinds->Int(0, "distinct_shards"));
  EXPECT_LT(kinds->Int(0, "spans"), 36);
  EXPECT_EQ(kinds->Int(0, "texts"), 3);
  std::remove(path.c_str());
}

// The views are written as the tables were: one chip's placement changed in
// the middle of a span splits it (the others keep theirs), a chip removed
// leaves a gap, a chip added fills it; a decision's new text is interned.
TEST(Migration, TheViewsTakeWritesAsTheTablesDid) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/view_writes_", getpid(), ".db");
  std::remove(path.c_str());
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto exec = [&](const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << " " << sql;
    sqlite3_free(err);
  };
  exec("INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,"
       " tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)"
       " VALUES (1, 's', '8', 'data', 'dp', '{}', '', 'cpu', 'host', 'x', 4, 1, 8, 't', 0, 'running');"
       "INSERT INTO shard_placement_spans VALUES (1, 7, 'w', 0, 7, '[0:4]', 16);");
  exec("UPDATE shard_placements SET index_ranges = '[0:2]', bytes = 8 WHERE device_id = 3");
  exec("DELETE FROM shard_placements WHERE device_id = 5");
  exec("INSERT INTO shard_placements VALUES (1, 7, 'w', 5, '[2:4]', 8)");
  exec("INSERT INTO sharding_decisions VALUES (1, 1, 1, 'a', '{replicated}', 'default', NULL, NULL, NULL, NULL);"
       "INSERT INTO sharding_decisions VALUES (1, 1, 2, 'b', '{replicated}', 'default', NULL, NULL, NULL, NULL);"
       "UPDATE sharding_decisions SET sharding = '{devices=[8]<=[8]}' WHERE op_id = 2;");
  sqlite3_close(db);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT group_concat(device_id || '=' || index_ranges, ' ') AS chips FROM"
                    " (SELECT * FROM shard_placements ORDER BY device_id)");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Text(0, "chips"), "0=[0:4] 1=[0:4] 2=[0:4] 3=[0:2] 4=[0:4] 5=[2:4] 6=[0:4] 7=[0:4]");
  auto s = r->Query("SELECT group_concat(first_device || '-' || last_device, ' ') AS spans FROM"
                    " (SELECT * FROM shard_placement_spans ORDER BY first_device)");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Text(0, "spans"), "0-2 3-3 4-4 5-5 6-7");
  auto d = r->Query("SELECT group_concat(name || '=' || sharding, ' ') AS d,"
                    " (SELECT count(*) FROM sharding_texts) AS texts FROM"
                    " (SELECT * FROM sharding_decisions ORDER BY op_id)");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->Text(0, "d"), "a={replicated} b={devices=[8]<=[8]}");
  EXPECT_EQ(d->Int(0, "texts"), 2);
  std::remove(path.c_str());
}

// Statements through the views against the same statements on the tables
// they were: the same rows after, and each fails where the table's failed
// (a key taken twice), whatever the conflict clause says.
TEST(Migration, TheViewsAnswerEveryWriteAsTheTablesDid) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/view_vs_table_", getpid(), ".db");
  std::remove(path.c_str());
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  const std::string rows =
      "INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,"
      " tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)"
      " VALUES (1, 's', '4', 'data', 'dp', '{}', '', 'cpu', 'host', 'x', 4, 1, 4, 't', 0, 'running');"
      "INSERT INTO sharding_decisions VALUES (1, 1, 0, 'a', '{replicated}', 'default', NULL, NULL, NULL, NULL),"
      " (1, 1, 1, 'b', '{replicated}', 'propagated', 'add', NULL, NULL, 0),"
      " (1, 1, 2, 'c', '{devices=[4]<=[4]}', 'annotated', NULL, 'm.py', 3, NULL);";
  // The same placements: as the writer stores them (spans), and as rows.
  const char* kSpans =
      "INSERT INTO shard_placement_spans VALUES (1, 1, 'w', 0, 3, '[0:4]', 16), (1, 2, 'x', 0, 1, '[0:2]', 8),"
      " (1, 2, 'x', 2, 3, '[2:4]', 8);";
  const char* kRows =
      "INSERT INTO shard_placements VALUES (1, 1, 'w', 0, '[0:4]', 16), (1, 1, 'w', 1, '[0:4]', 16),"
      " (1, 1, 'w', 2, '[0:4]', 16), (1, 1, 'w', 3, '[0:4]', 16), (1, 2, 'x', 0, '[0:2]', 8),"
      " (1, 2, 'x', 1, '[0:2]', 8), (1, 2, 'x', 2, '[2:4]', 8), (1, 2, 'x', 3, '[2:4]', 8);";
  const char* kTables =
      "CREATE TABLE shard_placements (run_id INTEGER NOT NULL, tensor_id INTEGER NOT NULL, tensor_name TEXT NOT NULL,"
      " device_id INTEGER NOT NULL, index_ranges TEXT NOT NULL, bytes INTEGER NOT NULL,"
      " PRIMARY KEY (run_id, tensor_id, device_id));"
      "CREATE TABLE sharding_decisions (run_id INTEGER NOT NULL, graph_id INTEGER NOT NULL, op_id INTEGER NOT NULL,"
      " name TEXT NOT NULL, sharding TEXT NOT NULL, source TEXT NOT NULL, via TEXT, source_file TEXT,"
      " source_line INTEGER, from_op_id INTEGER, PRIMARY KEY (run_id, graph_id, op_id));"
      "CREATE TABLE runs (run_id INTEGER, sample, mesh, mesh_axes, sharding, config_json, topology, profile,"
      " clock_kinds, tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status);";
  const std::vector<std::string> statements = {
      "INSERT INTO shard_placements VALUES (1, 1, 'w', 2, '[0:9]', 4)",
      "INSERT OR IGNORE INTO shard_placements VALUES (1, 1, 'w', 2, '[0:9]', 4)",
      "INSERT OR REPLACE INTO shard_placements VALUES (1, 1, 'w', 2, '[0:9]', 4)",
      "INSERT INTO shard_placements VALUES (1, 1, 'w', 7, '[0:9]', 4)",
      "UPDATE shard_placements SET device_id = device_id + 1 WHERE tensor_id = 1",
      "UPDATE OR IGNORE shard_placements SET device_id = 3 WHERE tensor_id = 1 AND device_id = 1",
      "UPDATE OR REPLACE shard_placements SET device_id = 3 WHERE tensor_id = 1 AND device_id = 1",
      "UPDATE shard_placements SET device_id = 9 WHERE tensor_id = 1 AND device_id = 1",
      "UPDATE shard_placements SET tensor_id = 2 WHERE tensor_id = 1 AND device_id = 2",
      "UPDATE shard_placements SET bytes = bytes + 1 WHERE device_id < 2",
      "DELETE FROM shard_placements WHERE device_id IN (1, 2)",
      "INSERT INTO shard_placements SELECT run_id, tensor_id, tensor_name, device_id + 4, index_ranges, bytes"
      " FROM shard_placements",
      "INSERT INTO sharding_decisions SELECT * FROM sharding_decisions WHERE op_id = 0",
      "INSERT OR IGNORE INTO sharding_decisions SELECT * FROM sharding_decisions WHERE op_id = 0",
      "UPDATE sharding_decisions SET op_id = op_id + 1",
      "UPDATE OR IGNORE sharding_decisions SET op_id = 2 WHERE op_id = 1",
      "UPDATE OR REPLACE sharding_decisions SET op_id = 0 WHERE op_id = 1",
      "UPDATE sharding_decisions SET sharding = '{maximal device=0}' WHERE op_id < 2",
      "DELETE FROM sharding_decisions WHERE op_id = 1",
  };
  auto state = [](sqlite3* db) {
    std::string out;
    for (const char* sql : {"SELECT * FROM shard_placements ORDER BY 1, 2, 4", "SELECT * FROM sharding_decisions ORDER BY 1, 2, 3"}) {
      sqlite3_stmt* q = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &q, nullptr), SQLITE_OK);
      while (sqlite3_step(q) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(q); ++c) {
          const unsigned char* t = sqlite3_column_text(q, c);
          absl::StrAppend(&out, t ? reinterpret_cast<const char*>(t) : "NULL", "|");
        }
        out += "\n";
      }
      sqlite3_finalize(q);
    }
    return out;
  };
  for (const std::string& sql : statements) {
    const std::string copy = absl::StrCat(path, ".copy");
    std::remove(copy.c_str());
    {
      std::ifstream in(path, std::ios::binary);
      std::ofstream out(copy, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
    }
    sqlite3* view = nullptr;
    sqlite3* table = nullptr;
    ASSERT_EQ(sqlite3_open(copy.c_str(), &view), SQLITE_OK);
    ASSERT_EQ(sqlite3_open(":memory:", &table), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(view, absl::StrCat(rows, kSpans).c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(view);
    ASSERT_EQ(sqlite3_exec(table, absl::StrCat(kTables, rows, kRows).c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(table);
    ASSERT_EQ(state(view), state(table));
    const int through_view = sqlite3_exec(view, sql.c_str(), nullptr, nullptr, nullptr);
    const int on_table = sqlite3_exec(table, sql.c_str(), nullptr, nullptr, nullptr);
    EXPECT_EQ(through_view == SQLITE_OK, on_table == SQLITE_OK) << sql << ": " << sqlite3_errmsg(view);
    EXPECT_EQ(state(view), state(table)) << sql;
    sqlite3_close(view);
    sqlite3_close(table);
    std::remove(copy.c_str());
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope::store
