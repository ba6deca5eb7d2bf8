// The metrics report (profiler/analysis/metrics.h): exact figures over the
// synthetic run (tests/store/synthetic_run.h), and the two warnings on runs
// made to trigger them, or not.
#include "profiler/analysis/metrics.h"

#include <sqlite3.h>

#include <regex>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::analysis {
namespace {

using namespace shardscope::testing;

const TimingMetric& Metric(const MetricsReport& r, const std::string& name) {
  for (const TimingMetric& m : r.metrics)
    if (m.name == name) return m;
  ADD_FAILURE() << "no metric " << name;
  return r.metrics.front();
}

std::optional<int64_t> Counter(const MetricsReport& r, const std::string& name) {
  for (const CounterMetric& c : r.counters)
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return std::nullopt;
}

TEST(MetricsTest, SyntheticRunFigures) {
  const std::string path = TempDbPath("metrics_synthetic");
  {
    auto w = store::Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(WriteSyntheticRun(**w).ok());
  }
  auto rd = store::Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto r = BuildMetricsReport(*rd, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, kSteps);
  // Step 0 compiles in 12 ms, step 3 in 26 ms; the other three hit the cache.
  const TimingMetric& compile = Metric(*r, "CompileTime");
  EXPECT_EQ(compile.count, 2);
  EXPECT_EQ(compile.total_ns, 38 * kMs);
  EXPECT_EQ(compile.p50_ns, 12 * kMs);
  EXPECT_EQ(compile.max_ns, 26 * kMs);
  EXPECT_EQ(compile.clock, "host");
  // Each step's program: the slowest chip's compute (1.3 ms), then the 0.5 ms all-reduce, on every chip.
  const TimingMetric& execute = Metric(*r, "ExecuteTime");
  EXPECT_EQ(execute.clock, "device");
  EXPECT_EQ(execute.count, kSteps);
  EXPECT_EQ(execute.p90_ns, ComputeNs(kDevices - 1) + kCollectiveNs);
  EXPECT_EQ(Metric(*r, "MarkStep").total_ns, kSteps * (kMs / 5));
  EXPECT_EQ(Counter(*r, "MarkStep"), kSteps);
  EXPECT_EQ(Counter(*r, "UncachedCompile"), 2);
  EXPECT_EQ(Counter(*r, "CachedCompile"), 3);
  EXPECT_EQ(Counter(*r, "ValueRead"), 0);
  EXPECT_EQ(Counter(*r, "CreateTensor"), std::nullopt);  // not recorded: shown as such, not as 0
  EXPECT_EQ(Counter(*r, "PersistentCacheMiss"), std::nullopt);  // no cache directory in this run
  EXPECT_TRUE(r->warnings.empty());
  const std::string text = RenderMetricsText(*r);
  EXPECT_TRUE(absl::StrContains(text, "CompileTime")) << text;
  EXPECT_TRUE(absl::StrContains(text, "not recorded")) << text;
  EXPECT_TRUE(absl::StrContains(text, "No warnings.")) << text;
}

// 14 steps; `churn`: steps 10-13 each compile, and every step reads a value, falls back to host_call and
// traces two adds (and an exp every other step). `end`: the run ends (its metrics are stored).
int64_t WriteSteps(const std::string& path, bool churn, bool end = true) {
  auto w = store::Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status();
  trace::RunRecord run;
  run.sample = "churn";
  auto id = (*w)->StartRun(run);
  EXPECT_TRUE(id.ok()) << id.status();
  trace::TrackRecord host;
  host.track_id = 1;
  host.name = "host 0 / main";
  (*w)->Record(host);
  for (int s = 0; s < 14; ++s) {
    (*w)->Record(trace::StepRecord{s, 1.0, kMs});
    trace::CompilationRecord c;
    c.compile_id = s + 1;
    c.step = s;
    c.graph_id = 1;
    c.call_site = "a.cc:1";
    c.cache = s == 0 || (churn && s >= 10) ? "miss" : "memory_hit";
    c.duration_ns = kMs;
    (*w)->Record(c);
    if (churn) {
      trace::SliceRecord read;
      read.slice_id = s + 1;
      read.track_id = 1;
      read.start_ns = s * kMs;
      read.dur_ns = kMs / 2;
      read.name = "read value";
      read.step = s;
      (*w)->Record(read);
      trace::SliceRecord fallback = read;  // a host_call's slice, as core records it
      fallback.slice_id = 100 + s;
      fallback.name = "host_call at a.cc:9";
      (*w)->Record(fallback);
      (*w)->Record(trace::CounterRecord{-1, "CreateTensor", s * kMs, 10.0 * (s + 1)});
      (*w)->Record(trace::CounterRecord{-1, "TracedOp:stablehlo.add", s * kMs, 2.0 * (s + 1)});
      if (s % 2 == 0)
        (*w)->Record(trace::CounterRecord{-1, "TracedOp:stablehlo.exponential", s * kMs, s / 2 + 1.0});
    }
  }
  EXPECT_TRUE(end ? (*w)->EndRunAndCheck().ok() : (*w)->FlushAndCheck().ok());
  return id.ok() ? *id : 0;
}

TEST(MetricsTest, WarnsOfRecompilingAndReadingEveryStep) {
  const std::string path = TempDbPath("metrics_warnings");
  const int64_t churn = WriteSteps(path, true);
  const int64_t calm = WriteSteps(path, false);
  auto rd = store::Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto bad = BuildMetricsReport(*rd, churn);
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_EQ(bad->warnings.size(), 2u);
  EXPECT_TRUE(absl::StrContains(bad->warnings[0], "3 recompilations in the 3 steps after step 10 (1.00 per step)"))
      << bad->warnings[0];
  EXPECT_TRUE(absl::StrContains(bad->warnings[1], "a value is read back in 14 of 14 steps")) << bad->warnings[1];
  EXPECT_EQ(Counter(*bad, "ValueRead"), 14);
  EXPECT_EQ(Counter(*bad, "Fallback"), 14);
  EXPECT_EQ(Counter(*bad, "CreateTensor"), 140);  // the counter's last sample
  EXPECT_TRUE(absl::StrContains(RenderMetricsText(*bad), "host_call at a.cc:9")) << RenderMetricsText(*bad);
  auto good = BuildMetricsReport(*rd, calm);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->warnings.empty());
}

// The per-op counters: the last sample of each TracedOp counter, most first.
TEST(MetricsTest, OpsTracedPerKind) {
  const std::string path = TempDbPath("metrics_ops_traced");
  const int64_t run = WriteSteps(path, true);
  auto rd = store::Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto r = BuildMetricsReport(*rd, run);
  ASSERT_TRUE(r.ok()) << r.status();
  using Counts = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(r->ops_traced, (Counts{{"stablehlo.add", 28}, {"stablehlo.exponential", 7}}));
  const std::string text = RenderMetricsText(*r);
  EXPECT_TRUE(absl::StrContains(text, "Ops traced")) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("Ops traced[^\\n]*\\n +stablehlo\\.add +28\\n"))) << text;
}

// The figures of a run that ended are rows of the `metrics` table, equal to
// what the same code computes from the run's tables; a run that never ended
// has no rows and is computed; so is a file without the table (older files).
TEST(MetricsTest, StoredWhenTheRunEndsElseComputed) {
  const std::string path = TempDbPath("metrics_stored");
  const int64_t ended = WriteSteps(path, true);
  const int64_t open = WriteSteps(path, true, /*end=*/false);
  {
    auto rd = store::Reader::Open(path);
    ASSERT_TRUE(rd.ok()) << rd.status();
    auto stored = BuildMetricsReport(*rd, ended);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(stored->stored);
    auto computed = store::ComputeRunMetrics(*rd, ended);
    ASSERT_TRUE(computed.ok()) << computed.status();
    EXPECT_TRUE(static_cast<const store::RunMetrics&>(*stored) == *computed);
    EXPECT_EQ(Metric(*stored, "TransferFromDeviceTime").count, 14);
    EXPECT_EQ(Counter(*stored, "PersistentCacheHit"), std::nullopt);  // NULL in the table: not recorded
    auto rows = rd->Query(
        "SELECT COUNT(*) AS n, SUM(kind = 'metric') AS metrics, SUM(kind = 'counter') AS counters,"
        " SUM(CASE WHEN kind = 'counter' AND name = 'ValueRead' THEN value END) AS reads,"
        " SUM(CASE WHEN kind = 'op_traced' AND name = 'stablehlo.add' THEN value END) AS adds"
        " FROM metrics WHERE run_id = ?1",
        {std::to_string(ended)});
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->Int(0, "metrics"), 6);
    EXPECT_EQ(rows->Int(0, "counters"), 9);
    EXPECT_EQ(rows->Int(0, "reads"), 14);
    EXPECT_EQ(rows->Int(0, "adds"), 28);
    auto unended = BuildMetricsReport(*rd, open);
    ASSERT_TRUE(unended.ok()) << unended.status();
    EXPECT_FALSE(unended->stored);
    EXPECT_EQ(Counter(*unended, "ValueRead"), 14);
    EXPECT_TRUE(absl::StrContains(RenderMetricsText(*unended), "computed from the run's tables"));
    EXPECT_TRUE(absl::StrContains(RenderMetricsText(*stored), "stored when the run ended"));
  }
  // A file from before the table: the same figures, computed.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE metrics", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto rd = store::Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto old = BuildMetricsReport(*rd, ended);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->stored);
  EXPECT_EQ(Counter(*old, "ValueRead"), 14);
  EXPECT_EQ(Metric(*old, "TransferFromDeviceTime").count, 14);
}

}  // namespace
}  // namespace shardscope::analysis
