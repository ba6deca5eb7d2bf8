// BuildRunReport and its renderers over the synthetic run (tests/store/synthetic_run.h):
// exact numbers in the tables, clock labels and plain words in the renderings.
#include "profiler/analysis/run_report.h"

#include <sqlite3.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "profiler/analysis/format.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::analysis {
namespace {

using namespace shardscope::testing;

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempDbPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto w = store::Writer::Open(path_);
    ASSERT_TRUE(w.ok()) << w.status();
    auto id = WriteSyntheticRun(**w);
    ASSERT_TRUE(id.ok()) << id.status();
    // A second run with no timelines at all: its report must say so plainly.
    trace::RunRecord bare;
    bare.sample = "bare";
    ASSERT_TRUE((*w)->StartRun(bare).ok());
    ASSERT_TRUE((*w)->EndRunAndCheck().ok());
    w->reset();
    auto r = store::Reader::Open(path_);
    ASSERT_TRUE(r.ok()) << r.status();
    reader_ = std::make_unique<store::Reader>(std::move(*r));
  }
  RunReport Build(int64_t run) {
    auto rep = BuildRunReport(*reader_, run);
    EXPECT_TRUE(rep.ok()) << rep.status();
    return rep.ok() ? *rep : RunReport{};
  }
  bool Has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  }
  // Changes the file with `sql` and reads it anew.
  void Edit(const char* sql) {
    reader_.reset();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    auto r = store::Reader::Open(path_);
    ASSERT_TRUE(r.ok()) << r.status();
    reader_ = std::make_unique<store::Reader>(std::move(*r));
  }
  std::string path_;
  std::unique_ptr<store::Reader> reader_;
};

TEST_F(RunReportTest, Tables) {
  RunReport r = Build(1);
  EXPECT_EQ(r.run.sample, "mlp");
  EXPECT_EQ(r.run.mesh, "2x2");
  EXPECT_EQ(r.run.num_devices, 4);
  EXPECT_EQ(r.run.status, "finished");
  EXPECT_EQ(r.run.started_at, "2023-11-14T22:13:20Z");

  EXPECT_EQ(r.steps.count, kSteps);
  // Walls: 16.0, 4.1, 4.2, 30.3, 4.4 ms -> median 4.4 ms; p90 at rank 3.6 of
  // 0..4, between 16.0 and 30.3: 16.0 + 0.6 * 14.3 = 24.58 ms.
  EXPECT_EQ(r.steps.median_wall_ns, 4 * kMs + 4 * (kMs / 10));
  EXPECT_EQ(r.steps.p90_wall_ns, 24 * kMs + 58 * (kMs / 100));
  EXPECT_DOUBLE_EQ(*r.steps.first_loss, 2.5);
  EXPECT_DOUBLE_EQ(*r.steps.last_loss, 1.5);

  EXPECT_EQ(r.compiles.count, 5);
  EXPECT_EQ(r.compiles.misses, 2);
  EXPECT_EQ(r.compiles.memory_hits, 3);
  EXPECT_EQ(r.compiles.recompilations, 1);
  EXPECT_EQ(r.compiles.total_ns, 38 * kMs + 3 * (kMs / 20));
  ASSERT_EQ(r.compiles.miss_list.size(), 2u);
  EXPECT_EQ(r.compiles.miss_list[0].cause_kind, "first_compile");
  EXPECT_EQ(r.compiles.miss_list[1].step, 3);
  EXPECT_EQ(r.compiles.miss_list[1].cause_kind, "input_shape_changed");
  EXPECT_EQ(r.compiles.miss_list[1].source_line, 41);
  EXPECT_EQ(r.executions, kSteps);

  const DeviceBreakdown& d = r.devices;
  EXPECT_EQ(d.steps_covered, kSteps);
  EXPECT_EQ(d.median_span_ns, ComputeNs(3) + kCollectiveNs);
  ASSERT_EQ(d.rows.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const DeviceRow& row = d.rows[i];
    EXPECT_EQ(row.device_id, i);
    EXPECT_EQ(row.host_id, i / 2);
    EXPECT_EQ(row.median_step.compute_ns, ComputeNs(i));
    EXPECT_EQ(row.median_step.collective_ns, kCollectiveNs);
    EXPECT_EQ(row.median_step.idle_ns, ComputeNs(3) - ComputeNs(i));
    EXPECT_EQ(row.median_step.bottleneck, "compute");
    EXPECT_EQ(row.all_steps.compute_ns, kSteps * ComputeNs(i));
  }

  ASSERT_EQ(r.sharding.size(), 2u);
  EXPECT_EQ(r.sharding[0].name, "x");
  EXPECT_EQ(r.sharding[0].devices, 4);
  EXPECT_EQ(r.sharding[0].max_bytes, 32 * 784 * 4);
  EXPECT_EQ(r.sharding[1].source, "propagated");
}

TEST_F(RunReportTest, Text) {
  std::string t = RenderText(Build(1));
  std::printf("%s", t.c_str());
  EXPECT_TRUE(Has(t, "run 1: mlp, 5 steps, mesh 2x2 (data, model), 4 chips on 2 hosts, profile cpu"));
  EXPECT_TRUE(Has(t, "median 4.4 ms   p90 25 ms (host)   loss 2.5 -> 1.5"));
  EXPECT_TRUE(Has(t, "2 misses, 3 cache hits, 1 recompilation"));
  EXPECT_TRUE(Has(t, "input shape changed: x f32[64,784] -> f32[48,784]   26 ms (host)"));
  EXPECT_TRUE(Has(t, "at samples/mlp.cc:41"));
  EXPECT_TRUE(Has(t, "device clock)"));
  EXPECT_TRUE(Has(t, "chip 3 (host 1)"));
  EXPECT_TRUE(Has(t, "compute"));
  EXPECT_TRUE(Has(t, "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"));
  EXPECT_TRUE(Has(t, "98 KiB/chip"));
  EXPECT_TRUE(Has(t, "3.1 MiB/chip"));
}

// The header's profile line read "peak 104.0 GFLOP/s (a gang of 2: 202.1)" and
// the kernels' heading "peak 95.0 GFLOP/s" (4 chips on 2 cores, each slower
// beside the others) with no word of why; the heading now says which peak it is.
TEST_F(RunReportTest, TheKernelsPeakSaysWhichPeakItIs) {
  RunReport r = Build(1);
  KernelRow k;
  k.name = "dot_general.3";
  k.count = 4;
  k.total_ns = 4'000'000;
  r.kernels.top = {k};
  r.run.profile_values_json = {{"name", "cpu"}, {"peak_flops", 104e9}, {"gang_peak_flops", 202e9}, {"gang_width", 2}};
  r.kernels.peak_flops = 95e9;
  EXPECT_TRUE(Has(RenderText(r), "peak 95.0 GFLOP/s: the profile's 104.0 GFLOP/s per core, 4 chips sharing the cores)"))
      << RenderText(r);
  r.kernels.peak_flops = 202e9;
  EXPECT_TRUE(Has(RenderMarkdown(r), "peak 202.0 GFLOP/s: a gang of 2 cores)")) << RenderMarkdown(r);
  r.kernels.peak_flops = 104e9;
  EXPECT_TRUE(Has(RenderText(r), "peak 104.0 GFLOP/s)")) << RenderText(r);
}

TEST_F(RunReportTest, EmptyTablesSaySo) {
  RunReport r = Build(2);
  EXPECT_TRUE(r.devices.rows.empty());
  std::string t = RenderText(r);
  EXPECT_TRUE(Has(t, "no steps recorded")) << t;
  EXPECT_TRUE(Has(t, "no compilations recorded")) << t;
  EXPECT_TRUE(Has(t, "Per chip: no device-clock tracks in this run")) << t;
  EXPECT_TRUE(Has(t, "no tensors recorded")) << t;
  EXPECT_TRUE(Has(t, "run 2: bare, 0 steps, 1 chip on 1 host")) << t;
  std::string md = RenderMarkdown(r);
  EXPECT_TRUE(Has(md, "No breakdown: no device-clock tracks")) << md;
}

TEST_F(RunReportTest, Markdown) {
  std::string md = RenderMarkdown(Build(1));
  EXPECT_TRUE(Has(md, "# shardscope report: "));
  EXPECT_TRUE(Has(md, "| step | cause | source | duration (host) |"));
  EXPECT_TRUE(Has(md, "| 3 | input shape changed: x f32[64,784] -> f32[48,784] | `samples/mlp.cc:41` | 26 ms |"));
  EXPECT_TRUE(Has(md, "| chip | compute | collective | transfer | idle | bottleneck |"));
  EXPECT_TRUE(Has(md, "| chip 0 (host 0) | 1.0 ms | 500 us | 0 | 300 us | compute |"));
  EXPECT_TRUE(Has(md, "| `x` | f32[64,784] |"));
}

TEST_F(RunReportTest, Json) {
  nlohmann::json j = nlohmann::json::parse(RenderJson(Build(1)));
  EXPECT_EQ(j["run"]["sample"], "mlp");
  EXPECT_EQ(j["steps"]["clock"], "host");
  EXPECT_EQ(j["steps"]["count"], kSteps);
  EXPECT_EQ(j["compilations"]["recompilations"], 1);
  EXPECT_EQ(j["compilations"]["miss_list"][1]["cause_kind"], "input_shape_changed");
  EXPECT_EQ(j["devices"]["clock"], "device");
  ASSERT_EQ(j["devices"]["rows"].size(), 4u);
  EXPECT_EQ(j["devices"]["rows"][3]["median_step"]["compute_ns"], ComputeNs(3));
  EXPECT_EQ(j["sharding"][0]["max_bytes_per_device"], 32 * 784 * 4);
  nlohmann::json bare = ReportToJson(Build(2));
  EXPECT_TRUE(bare["devices"]["rows"].empty());
  EXPECT_FALSE(bare["devices"]["empty_reason"].get<std::string>().empty());
  EXPECT_TRUE(bare["steps"]["first_loss"].is_null());
}

// runs.capture_note (what a capture setting left out of the timeline) is
// printed under the title in every format; a run without one prints none.
TEST_F(RunReportTest, CaptureNoteUnderTheTitle) {
  EXPECT_EQ(Build(1).run.capture_note, "");
  EXPECT_FALSE(Has(RenderText(Build(1)), "capture:"));
  Edit("UPDATE runs SET capture_note = 'timeline only for steps 2-3 (--trace-steps 2:3); "
       "steps 0-1 and 4-4 not captured (--trace-steps 2:3)' WHERE run_id = 1");
  RunReport noted = Build(1);
  EXPECT_TRUE(Has(noted.run.capture_note, "steps 0-1 and 4-4 not captured")) << noted.run.capture_note;
  const std::string text = RenderText(noted);
  EXPECT_TRUE(Has(text, "\ncapture: timeline only for steps 2-3 (--trace-steps 2:3); steps 0-1")) << text;
  EXPECT_LT(text.find("capture:"), text.find("Steps"));  // at the top, before any table
  EXPECT_TRUE(Has(RenderMarkdown(noted), "capture: timeline only for steps 2-3")) << RenderMarkdown(noted);
  EXPECT_EQ(ReportToJson(noted)["run"]["capture_note"], noted.run.capture_note);
  EXPECT_FALSE(Has(RenderText(Build(2)), "capture:"));  // the other run has no note
  EXPECT_EQ(ReportToJson(Build(2))["run"]["capture_note"], "");
}

// Faults are said on the clock they were injected on: a simulated run has no
// device clock (it said "faults injected on the device clock").
TEST_F(RunReportTest, FaultsAreOnTheRunsClock) {
  Edit("UPDATE runs SET config_json = json_set(config_json, '$.faults', json_array('slow-chip:1:0.6'));"
       " UPDATE runs SET simulated = 1 WHERE run_id = 2");
  EXPECT_TRUE(Has(RenderText(Build(1)), "\nfaults injected on the device clock")) << RenderText(Build(1));
  const std::string simulated = RenderText(Build(2));
  EXPECT_TRUE(Has(simulated, "\nfaults injected on the modeled clock")) << simulated;
  EXPECT_FALSE(Has(simulated, "device clock: see")) << simulated;
}

// A version-1 file (no runs.capture_note) reports as before, with no capture line.
TEST(RunReportV1, FileWithoutTheCaptureNoteColumn) {
  std::ifstream f(SHARDSCOPE_TEST_DATA "/store/schema_v1.sql");
  std::stringstream schema;
  schema << f.rdbuf();
  ASSERT_FALSE(schema.str().empty()) << "missing " SHARDSCOPE_TEST_DATA "/store/schema_v1.sql";
  ASSERT_EQ(schema.str().find("capture_note"), std::string::npos);
  const std::string path = TempDbPath("report_v1");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql = schema.str() + R"(
    INSERT INTO meta VALUES ('schema_version', '1'), ('tool', 'shardscope');
    INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,
                     tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)
      VALUES (1, 'mlp', '1x1', 'data,model', 'dp', '{}', '1 host x 1 chip', 'cpu', 'host,device', '0.1.0', 1,
              1, 1, '2026-11-01T00:00:00Z', 0, 'finished');
    INSERT INTO steps VALUES (1, 0, 2.5, 1000, NULL);)";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto r = store::Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto rep = BuildRunReport(*r, 1);
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_EQ(rep->run.capture_note, "");
  EXPECT_EQ(rep->steps.count, 1);
  EXPECT_EQ(RenderText(*rep).find("capture:"), std::string::npos);
}

TEST_F(RunReportTest, UnknownRun) {
  auto rep = BuildRunReport(*reader_, 42);
  ASSERT_FALSE(rep.ok());
  EXPECT_TRUE(absl::IsNotFound(rep.status()));
  EXPECT_TRUE(Has(std::string(rep.status().message()), "has no run 42 (runs: 1-2)"))
      << rep.status();
}

TEST(FormatTest, ShortShardingKeepsSmallListsAndShortensPods) {
  EXPECT_EQ(ShortSharding("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"),
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_EQ(ShortSharding("{replicated}"), "{replicated}");
  std::vector<std::string> in_order, strided;
  for (int k = 0; k < 64; ++k) in_order.push_back(absl::StrCat(k));
  for (int k = 0; k < 64; ++k) strided.push_back(absl::StrCat((k % 2) * 32 + k / 2));
  EXPECT_EQ(ShortSharding(absl::StrCat("{devices=[64,1]", absl::StrJoin(in_order, ","), "}")),
            "{devices=[64,1]<=[64]}");
  EXPECT_EQ(ShortSharding(absl::StrCat("{devices=[32,1,2]", absl::StrJoin(strided, ","), " last_tile_dim_replicate}")),
            "{devices=[32,1,2]0,32,1,33,...,63 (64 chips) last_tile_dim_replicate}");
  // A tuple: each element on its own.
  EXPECT_EQ(ShortSharding(absl::StrCat("{{devices=[64]", absl::StrJoin(in_order, ","), "}, {replicated}}")),
            "{{devices=[64]<=[64]}, {replicated}}");
}

TEST(FormatTest, Units) {
  EXPECT_EQ(FormatNs(0), "0");
  EXPECT_EQ(FormatNs(850), "850 ns");
  EXPECT_EQ(FormatNs(12500), "12 us");
  EXPECT_EQ(FormatNs(4100000), "4.1 ms");
  EXPECT_EQ(FormatNs(38000000), "38 ms");
  EXPECT_EQ(FormatNs(1250000000), "1.25 s");
  EXPECT_EQ(FormatNs(150LL * 1000000000), "2.5 min");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(100352), "98 KiB");
  EXPECT_EQ(FormatBytes(3211264), "3.1 MiB");
  EXPECT_EQ(Humanize("input_shape_changed"), "input shape changed");
}

}  // namespace
}  // namespace shardscope::analysis
