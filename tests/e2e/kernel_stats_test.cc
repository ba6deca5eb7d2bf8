// The cost model end to end: `shardscope run mlp` records modeled tracks for
// every chip (clock 'modeled', collectives aligned), one `ops` row per op, and
// the per-kernel views answer from the recorded device clock; the report shows
// the top kernels and the cost model's error; `--profile` picks the chip.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/reader.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using e2e::Output;
using e2e::Shell;
using e2e::TempDb;
using e2e::Q;

class KernelStatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(TempDb("kernel_stats_2x2"));
    run_ = new Output(Shell(absl::StrCat("env -u OPENBLAS_CORETYPE ", SHARDSCOPE_CLI_BINARY, " run mlp --db ", *db_,
                                         " --mesh 2x2 --steps 6 --change-step 3 --quiet")));
  }
  static std::string* db_;
  static Output* run_;
};
std::string* KernelStatsTest::db_;
Output* KernelStatsTest::run_;

TEST_F(KernelStatsTest, ModeledTracksForEveryChip) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  auto run = Q(*db_, "SELECT profile, clock_kinds FROM runs");
  EXPECT_EQ(run.Text(0, "profile"), "cpu");
  EXPECT_EQ(run.Text(0, "clock_kinds"), "host,device,modeled");
  auto tracks = Q(*db_, "SELECT device_id, name FROM tracks WHERE clock = 'modeled' ORDER BY device_id");
  ASSERT_EQ(tracks.rows.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_EQ(tracks.Int(d, "device_id"), static_cast<int64_t>(d));
    EXPECT_EQ(tracks.Text(d, "name"), absl::StrCat("chip ", d, " (modeled)"));
  }
  // As many modeled slices as device ones, per chip (waits for the host are on
  // the device clock only).
  auto per = Q(*db_,
               "SELECT device_id, SUM(clock = 'device' AND kind != 'host_wait') AS dev, SUM(clock = 'modeled') AS model,"
               " SUM(clock = 'modeled' AND kind = 'collective') AS coll"
               " FROM events WHERE device_id IS NOT NULL GROUP BY device_id");
  ASSERT_EQ(per.rows.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_GT(per.Int(r, "dev"), 0);
    EXPECT_EQ(per.Int(r, "dev"), per.Int(r, "model"));
    EXPECT_GT(per.Int(r, "coll"), 0);
  }
  // Every modeled collective starts and ends together on the chips of its group.
  auto flows = Q(*db_,
                 "SELECT flow_id, COUNT(*) AS n, COUNT(DISTINCT start_ns) AS starts, COUNT(DISTINCT dur_ns) AS durs"
                 " FROM events WHERE clock = 'modeled' AND kind = 'collective' GROUP BY flow_id");
  ASSERT_FALSE(flows.rows.empty());
  for (size_t r = 0; r < flows.rows.size(); ++r) {
    EXPECT_EQ(flows.Int(r, "n"), 2);
    EXPECT_EQ(flows.Int(r, "starts"), 1);
    EXPECT_EQ(flows.Int(r, "durs"), 1);
  }
  auto peak = Q(*db_, "SELECT MIN(peak_flops) AS lo, MAX(peak_flops) AS hi FROM devices");
  EXPECT_GT(peak.Real(0, "lo"), 1e10);
  EXPECT_EQ(peak.Real(0, "lo"), peak.Real(0, "hi"));
}

TEST_F(KernelStatsTest, ViewsAnswerFromTheDeviceClock) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  // One ops row per op of each of the two compiled graphs.
  auto graphs = Q(*db_, "SELECT COUNT(DISTINCT graph_id) AS g FROM ops");
  EXPECT_EQ(graphs.Int(0, "g"), 2);
  // The matmuls: compute-bound, timed on every chip, a sane fraction of peak.
  auto dots = Q(*db_,
                "SELECT count, total_ns, mean_ns, min_ns, max_ns, roofline, fraction_of_peak, source_file"
                " FROM kernel_stats WHERE opcode = 'stablehlo.dot_general' AND count > 0");
  ASSERT_FALSE(dots.rows.empty());
  for (size_t r = 0; r < dots.rows.size(); ++r) {
    EXPECT_EQ(dots.Int(r, "count") % 4, 0);  // every chip ran it
    EXPECT_GT(dots.Int(r, "total_ns"), 0);
    EXPECT_GT(dots.Int(r, "min_ns"), 0);
    EXPECT_LE(dots.Real(r, "min_ns"), dots.Real(r, "mean_ns"));
    EXPECT_GE(dots.Real(r, "max_ns"), dots.Real(r, "mean_ns"));
    EXPECT_GT(dots.Real(r, "fraction_of_peak"), 0);
    EXPECT_LT(dots.Real(r, "fraction_of_peak"), 3);
    EXPECT_EQ(dots.Text(r, "source_file"), "samples/mlp.cc");
  }
  // Device time in kernel_stats is the compute and collective time on the device clock.
  auto sum = Q(*db_, "SELECT SUM(total_ns) AS t FROM kernel_stats");
  auto dev = Q(*db_,
               "SELECT SUM(dur_ns) AS t FROM events WHERE clock = 'device' AND op_id IS NOT NULL AND depth = 0");
  EXPECT_EQ(sum.Int(0, "t"), dev.Int(0, "t"));
  // The slowest and fastest execution are the events' own.
  auto ends = Q(*db_, "SELECT MAX(max_ns) AS hi, MIN(min_ns) AS lo FROM kernel_stats");
  auto evs =
      Q(*db_,
        "SELECT MAX(dur_ns) AS hi, MIN(dur_ns) AS lo FROM events WHERE clock = 'device' AND op_id IS NOT NULL"
        " AND depth = 0");
  EXPECT_EQ(ends.Int(0, "hi"), evs.Int(0, "hi"));
  EXPECT_EQ(ends.Int(0, "lo"), evs.Int(0, "lo"));
  // An op that never ran has neither.
  auto idle = Q(*db_,
                "SELECT COUNT(*) AS n FROM kernel_stats WHERE count = 0 AND (min_ns IS NOT NULL OR max_ns IS "
                "NOT NULL)");
  EXPECT_EQ(idle.Int(0, "n"), 0);
  auto lines = Q(*db_, "SELECT source_file, total_ns FROM time_by_source_line ORDER BY total_ns DESC LIMIT 1");
  ASSERT_EQ(lines.rows.size(), 1u);
  EXPECT_EQ(lines.Text(0, "source_file"), "samples/mlp.cc");
  auto mods = Q(*db_, "SELECT module_path FROM time_by_module_path WHERE total_ns > 0 ORDER BY module_path");
  std::string names;
  for (size_t r = 0; r < mods.rows.size(); ++r) names += mods.Text(r, "module_path") + ";";
  EXPECT_TRUE(absl::StrContains(names, "l1;")) << names;
  EXPECT_TRUE(absl::StrContains(names, "l2;")) << names;
  EXPECT_TRUE(absl::StrContains(names, "l3;")) << names;
}

TEST_F(KernelStatsTest, ReportShowsTopKernelsAndTheError) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  Output r = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", *db_));
  ASSERT_EQ(r.code, 0) << r.text;
  EXPECT_TRUE(absl::StrContains(r.text, "Top kernels (device clock")) << r.text;
  EXPECT_TRUE(absl::StrContains(r.text, "dot_general")) << r.text;
  EXPECT_TRUE(absl::StrContains(r.text, "cost model error (cpu profile): median ")) << r.text;
  Output j = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", *db_, " --format json"));
  EXPECT_TRUE(absl::StrContains(j.text, "\"cost_model_error\"")) << j.text;
}

TEST(KernelStatsProfileTest, ProfileOption) {
  std::string db = TempDb("kernel_stats_h100");
  Output run = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", db,
                                  " --mesh 1x2 --steps 2 --change-step -1 --profile h100 --quiet"));
  ASSERT_EQ(run.code, 0) << run.text;
  EXPECT_EQ(Q(db, "SELECT profile FROM runs").Text(0, "profile"), "h100");
  EXPECT_DOUBLE_EQ(Q(db, "SELECT MAX(peak_flops) AS p FROM devices").Real(0, "p"), 494.7e12);
  EXPECT_EQ(Q(db, "SELECT COUNT(*) AS n FROM ops WHERE profile <> 'h100'").Int(0, "n"), 0);
  // On an H100 this tiny MLP's step is far shorter than on one CPU core.
  auto t = Q(db,
             "SELECT SUM(CASE WHEN clock = 'device' THEN dur_ns END) AS dev,"
             " SUM(CASE WHEN clock = 'modeled' THEN dur_ns END) AS model"
             " FROM events WHERE kind = 'compute'");
  EXPECT_LT(t.Int(0, "model") * 10, t.Int(0, "dev"));
  Output bad = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", db, " --profile tpu-v9"));
  EXPECT_EQ(bad.code, 2) << bad.text;
  EXPECT_TRUE(absl::StrContains(bad.text, "unknown chip profile 'tpu-v9'")) << bad.text;
}

}  // namespace
}  // namespace shardscope
