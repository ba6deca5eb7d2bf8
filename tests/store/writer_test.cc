// Writer tests: every record kind lands in its table, names are interned,
// Flush makes rows visible, many threads can record at once, errors are kept
// (never fatal), and reopening a file appends a run.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::store {
namespace {

using namespace shardscope::trace;
using shardscope::testing::TempDbPath;

std::unique_ptr<Writer> MustOpen(const std::string& path) {
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::move(*w) : nullptr;
}

QueryResult MustQuery(const Reader& r, const std::string& sql) {
  auto q = r.Query(sql);
  EXPECT_TRUE(q.ok()) << sql << ": " << q.status();
  return q.ok() ? *q : QueryResult{};
}

TEST(WriterTest, CreatesDatabaseWithMeta) {
  std::string path = TempDbPath("meta");
  { MustOpen(path); }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->schema_version(), kSchemaVersion);
  QueryResult q = MustQuery(*r, "SELECT key, value FROM meta ORDER BY key");
  ASSERT_EQ(q.rows.size(), 2u);
  EXPECT_EQ(q.Text(0, "key"), "schema_version");
  EXPECT_EQ(q.Text(0, "value"), std::to_string(kSchemaVersion));
  EXPECT_EQ(q.Text(1, "value"), "shardscope");
  // WAL while a writer has it open; a closed file is self-contained (no -wal, -shm).
  EXPECT_EQ(MustQuery(*r, "PRAGMA journal_mode").Text(0, "journal_mode"), "delete");
  EXPECT_FALSE(r->LatestRunId().ok());
}

TEST(WriterTest, RoundTripsEveryRecordKind) {
  std::string path = TempDbPath("roundtrip");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  auto run_id = shardscope::testing::WriteSyntheticRun(*w);
  ASSERT_TRUE(run_id.ok()) << run_id.status();
  EXPECT_EQ(*run_id, 1);
  EXPECT_EQ(w->run_id(), 1);
  EXPECT_TRUE(w->status().ok());

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  QueryResult run = MustQuery(*r, "SELECT * FROM runs");
  ASSERT_EQ(run.rows.size(), 1u);
  EXPECT_EQ(run.Text(0, "sample"), "mlp");
  EXPECT_EQ(run.Text(0, "mesh_axes"), "data,model");
  EXPECT_EQ(run.Text(0, "status"), "finished");
  EXPECT_EQ(run.Text(0, "started_at"), "2023-11-14T22:13:20Z");
  EXPECT_EQ(run.Int(0, "schema_version"), kSchemaVersion);
  EXPECT_EQ(run.Text(0, "tool_version"), "0.1.0");
  EXPECT_GT(run.Int(0, "ended_at_ns"), run.Int(0, "started_at_ns"));

  struct Count { const char* table; int64_t rows; };
  for (Count c : {Count{"hosts", 2}, {"devices", 4}, {"meshes", 1}, {"tracks", 5},
                  {"slices", 5 * (3 * 4 + 1)}, {"graphs", 2}, {"compilations", 5},
                  {"executions", 5}, {"steps", 5}, {"tensors", 2}, {"shard_placements", 8},
                  {"counters", 20}}) {
    QueryResult q = MustQuery(*r, std::string("SELECT count(*) AS n FROM ") + c.table);
    EXPECT_EQ(q.Int(0, "n"), c.rows) << c.table;
  }
  QueryResult dev = MustQuery(*r, "SELECT * FROM devices WHERE device_id = 3");
  EXPECT_EQ(dev.Int(0, "host_id"), 1);
  EXPECT_EQ(dev.Text(0, "coords"), "[1,1]");
  EXPECT_EQ(dev.Int(0, "hbm_bytes"), 16LL << 30);
  EXPECT_DOUBLE_EQ(dev.Real(0, "peak_flops"), 1e12);

  // Producers' -1 / "" mean "none" and are stored as NULL.
  QueryResult host_track = MustQuery(*r, "SELECT * FROM tracks WHERE track_id = 1");
  EXPECT_EQ(host_track.Text(0, "clock"), "host");
  EXPECT_FALSE(host_track.rows[0][host_track.Col("device_id")].has_value());
  EXPECT_EQ(host_track.Text(0, "thread_name"), "main");
  QueryResult first = MustQuery(*r, "SELECT * FROM compilations WHERE step = 0");
  EXPECT_EQ(first.Text(0, "cause_kind"), "first_compile");
  EXPECT_FALSE(first.rows[0][first.Col("cause_detail")].has_value());
  EXPECT_FALSE(first.rows[0][first.Col("prev_graph_id")].has_value());
  QueryResult hit = MustQuery(*r, "SELECT * FROM compilations WHERE step = 1");
  EXPECT_EQ(hit.Text(0, "cache"), "memory_hit");
  EXPECT_FALSE(hit.rows[0][hit.Col("cause_kind")].has_value());
  EXPECT_FALSE(hit.rows[0][hit.Col("source_line")].has_value());
  QueryResult miss = MustQuery(*r, "SELECT * FROM compilations WHERE step = 3");
  EXPECT_EQ(miss.Text(0, "cause_detail"), "x f32[64,784] -> f32[48,784]");
  EXPECT_EQ(miss.Text(0, "source_file"), "samples/mlp.cc");
  EXPECT_EQ(miss.Int(0, "source_line"), 41);
  EXPECT_EQ(miss.Int(0, "prev_graph_id"), 1);

  QueryResult inner = MustQuery(*r, "SELECT * FROM slices WHERE depth = 1 LIMIT 1");
  EXPECT_EQ(inner.Int(0, "parent_id"), inner.Int(0, "slice_id") - 1);
  EXPECT_FALSE(inner.rows[0][inner.Col("flow_id")].has_value());
  QueryResult step = MustQuery(*r, "SELECT * FROM steps WHERE step = 2");
  EXPECT_DOUBLE_EQ(step.Real(0, "loss"), 2.0);
  QueryResult ex = MustQuery(*r, "SELECT * FROM executions WHERE step = 4");
  EXPECT_EQ(ex.Text(0, "cause"), "mark_step");
  EXPECT_EQ(ex.Int(0, "graph_id"), 2);
  QueryResult sp = MustQuery(*r, "SELECT * FROM shard_placements WHERE tensor_id = 1 AND device_id = 2");
  EXPECT_EQ(sp.Text(0, "index_ranges"), "[32:64,0:784]");
  EXPECT_EQ(sp.Int(0, "bytes"), 32 * 784 * 4);
  QueryResult t = MustQuery(*r, "SELECT * FROM tensors WHERE name = 'x'");
  EXPECT_EQ(t.Text(0, "sharding_source"), "annotated");
  QueryResult g = MustQuery(*r, "SELECT * FROM graphs WHERE graph_id = 2");
  EXPECT_EQ(g.Text(0, "ir_text_after"), "func.func @main() {} // partitioned");
  QueryResult c = MustQuery(*r, "SELECT * FROM counters WHERE device_id = 1 LIMIT 1");
  EXPECT_DOUBLE_EQ(c.Real(0, "value"), 2e6);
}

TEST(WriterTest, InternsNamesAcrossRunsAndReopens) {
  std::string path = TempDbPath("names");
  for (int round = 0; round < 2; ++round) {
    auto w = MustOpen(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->StartRun(RunRecord{}).ok());
    for (int i = 0; i < 300; ++i) {
      SliceRecord s;
      s.slice_id = i;
      s.name = i % 3 == 0 ? "fusion.1" : i % 3 == 1 ? "all-reduce.2" : "copy.3";
      w->Record(s);
    }
    ASSERT_TRUE(w->EndRunAndCheck().ok()) << w->status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM names").Int(0, "n"), 3);
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM slices").Int(0, "n"), 600);
  QueryResult q = MustQuery(*r,
      "SELECT count(DISTINCT name_id) AS n FROM slices s JOIN names USING (name_id)"
      " WHERE names.name = 'copy.3'");
  EXPECT_EQ(q.Int(0, "n"), 1);
}

TEST(WriterTest, EventsViewFlattensSlices) {
  std::string path = TempDbPath("events");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE(shardscope::testing::WriteSyntheticRun(*w).ok());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  QueryResult q = MustQuery(*r,
      "SELECT device_id, clock, kind, name, dur_ns, flow_id FROM events"
      " WHERE flow_id = 1002 ORDER BY device_id");
  ASSERT_EQ(q.rows.size(), 4u);  // one collective, linked across all four chips
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(q.Int(i, "device_id"), static_cast<int64_t>(i));
    EXPECT_EQ(q.Text(i, "clock"), "device");
    EXPECT_EQ(q.Text(i, "kind"), "collective");
    EXPECT_EQ(q.Text(i, "name"), "all-reduce.2");
    EXPECT_EQ(q.Int(i, "dur_ns"), shardscope::testing::kCollectiveNs);
  }
  QueryResult host = MustQuery(*r, "SELECT count(*) AS n FROM events WHERE clock = 'host'");
  EXPECT_EQ(host.Int(0, "n"), shardscope::testing::kSteps);
}

TEST(WriterTest, StepDeviceSummaryView) {
  using namespace shardscope::testing;
  std::string path = TempDbPath("summary");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE(WriteSyntheticRun(*w).ok());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  QueryResult q = MustQuery(*r,
      "SELECT * FROM step_device_summary WHERE run_id = 1 AND step = 2 ORDER BY device_id");
  ASSERT_EQ(q.rows.size(), 4u);
  int64_t span = ComputeNs(kDevices - 1) + kCollectiveNs;
  for (size_t i = 0; i < 4; ++i) {
    int d = static_cast<int>(i);
    EXPECT_EQ(q.Int(i, "compute_ns"), ComputeNs(d));  // depth-1 slices not counted
    EXPECT_EQ(q.Int(i, "collective_ns"), kCollectiveNs);
    EXPECT_EQ(q.Int(i, "transfer_ns"), 0);
    EXPECT_EQ(q.Int(i, "busy_ns"), ComputeNs(d) + kCollectiveNs);
    EXPECT_EQ(q.Int(i, "idle_ns"), span - ComputeNs(d) - kCollectiveNs);
    EXPECT_EQ(q.Int(i, "span_ns"), span);
  }
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM step_device_summary").Int(0, "n"),
            kSteps * kDevices);
}

TEST(WriterTest, FlushMakesRowsVisibleWhileOpen) {
  std::string path = TempDbPath("flush");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->StartRun(RunRecord{}).ok());
  auto r = Reader::Open(path);  // a second connection, as the UI would have
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(MustQuery(*r, "SELECT status FROM runs").Text(0, "status"), "running");
  for (int i = 0; i < 1000; ++i) w->Record(StepRecord{i, 1.0, 100});
  ASSERT_TRUE(w->FlushAndCheck().ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM steps").Int(0, "n"), 1000);
  w->EndRun();
  EXPECT_EQ(MustQuery(*r, "SELECT status FROM runs").Text(0, "status"), "finished");
  w.reset();
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM steps").Int(0, "n"), 1000);
}

TEST(WriterTest, DestructorWritesWhatIsQueued) {
  std::string path = TempDbPath("dtor");
  {
    auto w = MustOpen(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->StartRun(RunRecord{}).ok());
    for (int i = 0; i < 5000; ++i) w->Record(CounterRecord{-1, "c", i, 1.0});
  }  // no Flush: the destructor drains the queue
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM counters WHERE device_id IS NULL").Int(0, "n"),
            5000);
  EXPECT_EQ(MustQuery(*r, "SELECT status FROM runs").Text(0, "status"), "running");
}

TEST(WriterTest, ConcurrentProducers) {
  std::string path = TempDbPath("concurrent");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->StartRun(RunRecord{}).ok());
  constexpr int kThreads = 8, kPerThread = 25000;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      for (int i = 0; i < kPerThread; ++i) {
        SliceRecord s;
        s.slice_id = static_cast<int64_t>(t) * kPerThread + i;
        s.track_id = t;
        s.start_ns = i * 1000;
        s.dur_ns = 900;
        s.name = "op." + std::to_string(i % 50);
        s.kind = SliceKind::kCompute;
        s.step = i / 1000;
        w->Record(s);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(w->FlushAndCheck().ok()) << w->status();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ perf     ] %d slices from %d threads in %.3f s: %.0f rows/s\n",
              kThreads * kPerThread, kThreads, secs, kThreads * kPerThread / secs);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM slices").Int(0, "n"), kThreads * kPerThread);
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM names").Int(0, "n"), 50);
}

TEST(WriterTest, ReopeningAppendsASecondRun) {
  std::string path = TempDbPath("reopen");
  for (int i = 1; i <= 2; ++i) {
    auto w = MustOpen(path);
    ASSERT_TRUE(w);
    RunRecord run;
    run.sample = i == 1 ? "mlp" : "cnn";
    auto id = w->StartRun(run);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, i);
    w->Record(StepRecord{0, 1.0, 10});
    ASSERT_TRUE(w->EndRunAndCheck().ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->LatestRunId(), 2);
  QueryResult q = MustQuery(*r, "SELECT run_id, sample, status FROM runs ORDER BY run_id");
  ASSERT_EQ(q.rows.size(), 2u);
  EXPECT_EQ(q.Text(1, "sample"), "cnn");
  EXPECT_EQ(q.Text(0, "status"), "finished");
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM steps").Int(0, "n"), 2);
}

TEST(WriterTest, ErrorsAreKeptNotFatal) {
  std::string path = TempDbPath("errors");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  w->Record(StepRecord{0, 1.0, 10});  // before BeginRun: dropped, reported
  ASSERT_FALSE(w->FlushAndCheck().ok());
  EXPECT_NE(w->status().message().find("BeginRun"), std::string::npos) << w->status();
  EXPECT_EQ(w->run_id(), 0);

  ASSERT_TRUE(w->StartRun(RunRecord{}).ok());
  CompilationRecord bad;
  bad.cache = "sometimes";  // violates the schema's CHECK
  w->Record(bad);
  w->Record(StepRecord{1, 1.0, 10});  // writing goes on after the error
  absl::Status st = w->EndRunAndCheck();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st;
  EXPECT_NE(st.message().find("1 more write error"), std::string::npos) << st;
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM steps").Int(0, "n"), 1);
  // The run lost a record: never 'finished', and it says what was lost.
  EXPECT_EQ(MustQuery(*r, "SELECT status FROM runs").Text(0, "status"), "incomplete");
  EXPECT_EQ(MustQuery(*r, "SELECT records_lost FROM run_writers").Int(0, "records_lost"), 1);
}

TEST(WriterTest, WorksAsTheInstalledRecorder) {
  std::string path = TempDbPath("installed");
  auto w = MustOpen(path);
  ASSERT_TRUE(w);
  SetRecorder(w.get());
  recorder().BeginRun(RunRecord{});
  recorder().Record(StepRecord{0, 0.5, 10});
  recorder().EndRun();
  SetRecorder(nullptr);
  EXPECT_EQ(w->run_id(), 1);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(MustQuery(*r, "SELECT count(*) AS n FROM steps").Int(0, "n"), 1);
}

}  // namespace
}  // namespace shardscope::store
