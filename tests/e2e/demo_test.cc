// The demo, end to end: `shardscope run mlp` on a 2x2 mesh for 20 steps with
// the batch changing at step 10, then the database is checked the way the
// README promises: device timelines with all-reduces, exactly two compile
// misses with the right causes and lines, every execution recorded, a falling
// loss equal to the single-device loss, and the report and the desktop app
// reading the same file.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/reader.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using e2e::Output;
using e2e::Shell;
using e2e::TempDb;

class DemoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sharded_ = new std::string(TempDb("demo_2x2"));
    single_ = new std::string(TempDb("demo_1x1"));
    run_2x2_ = new Output(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", *sharded_,
                                           " --mesh 2x2 --steps 20 --quiet")));
    run_1x1_ = new Output(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", *single_,
                                           " --mesh 1x1 --steps 20 --quiet")));
  }
  static store::QueryResult Q(const std::string& db, const std::string& sql) { return e2e::Q(db, sql); }
  static std::string* sharded_;
  static std::string* single_;
  static Output* run_2x2_;
  static Output* run_1x1_;
};
std::string* DemoTest::sharded_;
std::string* DemoTest::single_;
Output* DemoTest::run_2x2_;
Output* DemoTest::run_1x1_;

TEST_F(DemoTest, RunsSucceed) {
  EXPECT_EQ(run_2x2_->code, 0) << run_2x2_->text;
  EXPECT_EQ(run_1x1_->code, 0) << run_1x1_->text;
}

TEST_F(DemoTest, FourDevicesWithComputeAndAllReduceOnTheDeviceClock) {
  auto devs = Q(*sharded_, "SELECT COUNT(*) AS n FROM devices");
  ASSERT_EQ(devs.rows.size(), 1u);
  EXPECT_EQ(devs.Int(0, "n"), 4);
  auto per = Q(*sharded_,
               "SELECT device_id, SUM(kind='compute') AS compute, "
               "SUM(kind='collective' AND name LIKE 'all_reduce%') AS allreduce, "
               "SUM(clock = 'host') AS other_clock "
               "FROM events WHERE device_id IS NOT NULL GROUP BY device_id ORDER BY device_id");
  ASSERT_EQ(per.rows.size(), 4u);
  for (size_t r = 0; r < per.rows.size(); ++r) {
    EXPECT_EQ(per.Int(r, "device_id"), static_cast<int64_t>(r));
    EXPECT_GT(per.Int(r, "compute"), 0);
    EXPECT_GT(per.Int(r, "allreduce"), 0);
    EXPECT_EQ(per.Int(r, "other_clock"), 0);
  }
  // The slices of one all-reduce share a flow id across the devices of its group.
  auto flows = Q(*sharded_,
                 "SELECT flow_id, COUNT(DISTINCT device_id) AS devices FROM events "
                 "WHERE kind='collective' GROUP BY flow_id");
  ASSERT_FALSE(flows.rows.empty());
  for (size_t r = 0; r < flows.rows.size(); ++r) EXPECT_EQ(flows.Int(r, "devices"), 2);
  // Host tracks are on the host clock and have no device.
  auto host = Q(*sharded_, "SELECT COUNT(*) AS n FROM events WHERE device_id IS NULL AND clock='host'");
  EXPECT_GT(host.Int(0, "n"), 0);
}

TEST_F(DemoTest, ExactlyTwoMissesWithCausesAndLines) {
  auto c = Q(*sharded_,
             "SELECT step, cause_kind, cause_detail, source_file, source_line FROM compilations "
             "WHERE cache='miss' ORDER BY step");
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.Int(0, "step"), 0);
  EXPECT_EQ(c.Text(0, "cause_kind"), "first_compile");
  EXPECT_EQ(c.Int(1, "step"), 10);
  EXPECT_EQ(c.Text(1, "cause_kind"), "input_shape_changed");
  std::string detail = c.Text(1, "cause_detail");
  EXPECT_TRUE(absl::StrContains(detail, "x")) << detail;
  EXPECT_TRUE(absl::StrContains(detail, "f32[64,784]")) << detail;
  EXPECT_TRUE(absl::StrContains(detail, "f32[48,784]")) << detail;
  // The line is the sample's line that created x.
  EXPECT_EQ(c.Text(1, "source_file"), "samples/mlp.cc");
  std::ifstream src(absl::StrCat(SHARDSCOPE_TEST_SOURCE_DIR, "/samples/mlp.cc"));
  std::vector<std::string> lines;
  for (std::string l; std::getline(src, l);) lines.push_back(l);
  int64_t line = c.Int(1, "source_line");
  ASSERT_GT(line, 0);
  ASSERT_LE(line, static_cast<int64_t>(lines.size()));
  EXPECT_TRUE(absl::StrContains(lines[line - 1], "from_host") && absl::StrContains(lines[line - 1], "\"x\""))
      << "line " << line << ": " << lines[line - 1];
  // Every other compile request was a memory hit.
  auto hits = Q(*sharded_, "SELECT COUNT(*) AS n FROM compilations WHERE cache='memory_hit'");
  EXPECT_EQ(hits.Int(0, "n"), 18);
}

TEST_F(DemoTest, TwentyExecutionsWithSignatures) {
  auto e = Q(*sharded_, "SELECT step, input_signature FROM executions ORDER BY step");
  ASSERT_EQ(e.rows.size(), 20u);
  for (size_t r = 0; r < e.rows.size(); ++r) {
    EXPECT_EQ(e.Int(r, "step"), static_cast<int64_t>(r));
    EXPECT_TRUE(absl::StrContains(e.Text(r, "input_signature"), r < 10 ? "f32[64,784]" : "f32[48,784]"));
  }
}

TEST_F(DemoTest, LossFallsAndEqualsTheSingleDeviceLoss) {
  auto a = Q(*sharded_, "SELECT step, loss FROM steps ORDER BY step");
  auto b = Q(*single_, "SELECT step, loss FROM steps ORDER BY step");
  ASSERT_EQ(a.rows.size(), 20u);
  ASSERT_EQ(b.rows.size(), 20u);
  double first = (a.Real(0, "loss") + a.Real(1, "loss") + a.Real(2, "loss")) / 3;
  double last = (a.Real(17, "loss") + a.Real(18, "loss") + a.Real(19, "loss")) / 3;
  EXPECT_LT(last, 0.5 * first) << "loss did not fall: " << first << " -> " << last;
  for (size_t r = 0; r < 20; ++r) {
    double x = a.Real(r, "loss"), y = b.Real(r, "loss");
    EXPECT_NEAR(x, y, 1e-4 * std::max(1.0, std::abs(y))) << "step " << r;
  }
}

TEST_F(DemoTest, ShardPlacementsOfTheBatch) {
  auto p = Q(*sharded_,
             "SELECT device_id, index_ranges, bytes FROM shard_placements p JOIN tensors t "
             "ON t.run_id=p.run_id AND t.tensor_id=p.tensor_id WHERE t.name='x' AND t.shape='[64,784]' "
             "ORDER BY device_id");
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.Text(0, "index_ranges"), "[0:32,0:784]");
  EXPECT_EQ(p.Text(2, "index_ranges"), "[32:64,0:784]");
  EXPECT_EQ(p.Int(0, "bytes"), 32 * 784 * 4);
}

TEST_F(DemoTest, MemoryPlanOfEachProgram) {
  auto m = Q(*sharded_,
             "SELECT graph_id, peak_bytes, parameter_bytes, arena_bytes, unshared_bytes, peak_op FROM memory_plans "
             "ORDER BY graph_id");
  ASSERT_EQ(m.rows.size(), 2u);  // the two compiled programs
  for (size_t r = 0; r < m.rows.size(); ++r) {
    EXPECT_GT(m.Int(r, "peak_bytes"), m.Int(r, "parameter_bytes"));
    EXPECT_LE(m.Int(r, "arena_bytes"), m.Int(r, "unshared_bytes"));  // reuse never costs memory
    EXPECT_FALSE(m.Text(r, "peak_op").empty());
  }
  // The buffers live at the peak, largest first; l2.weight (4 MiB per chip) is among them.
  auto b = Q(*sharded_,
             "SELECT rank, op, bytes, is_input, source_file FROM peak_buffers WHERE graph_id = " +
                 m.Text(0, "graph_id") + " ORDER BY rank");
  ASSERT_GE(b.rows.size(), 3u);
  for (size_t r = 1; r < b.rows.size(); ++r) EXPECT_LE(b.Int(r, "bytes"), b.Int(r - 1, "bytes"));
  EXPECT_GE(b.Int(0, "bytes"), 1024 * 1024 * 4);
  EXPECT_EQ(b.Text(0, "source_file"), "samples/mlp.cc");
}

TEST_F(DemoTest, ReportShowsTheRecompilation) {
  Output r = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", *sharded_));
  EXPECT_EQ(r.code, 0) << r.text;
  EXPECT_TRUE(absl::StrContains(r.text, "f32[64,784] -> f32[48,784]")) << r.text;
  EXPECT_TRUE(absl::StrContains(r.text, "samples/mlp.cc:")) << r.text;
}

TEST_F(DemoTest, DesktopAppDrawsOneLanePerDevice) {
  std::string ui = SHARDSCOPE_UI_BINARY;
  if (ui.empty()) GTEST_SKIP() << "built without the desktop app";
  if (std::system("command -v xvfb-run >/dev/null 2>&1 && command -v xauth >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string png = absl::StrCat(::testing::TempDir(), "/demo_", getpid(), ".png");
  Output r = Shell(absl::StrCat("timeout 120 xvfb-run -a -s \"-screen 0 1600x900x24\" ", ui, " ", *sharded_,
                              " --screenshot ", png));
  ASSERT_EQ(r.code, 0) << r.text;
  int device_lanes = 0;
  for (absl::string_view line : absl::StrSplit(r.text, '\n'))
    if (absl::StartsWith(line, "lane device=")) ++device_lanes;
  EXPECT_EQ(device_lanes, 4) << r.text;
}

// Driver commands re-execute themselves once with glibc's huge-page heap
// (ui/cli/drivers.h); each run records whether it had it, and
// SHARDSCOPE_HUGEPAGES=0 turns it off.
TEST(HugePageHeapTest, RecordedPerRunAndCanBeTurnedOff) {
  for (const char* setting : {"", "0"}) {
    const std::string db = TempDb(absl::StrCat("hugepages", setting));
    Output r = Shell(absl::StrCat("env -u GLIBC_TUNABLES SHARDSCOPE_HUGEPAGES=", setting, " ", SHARDSCOPE_CLI_BINARY,
                                  " run mlp --db ", db, " --steps 2 --quiet"));
    ASSERT_EQ(r.code, 0) << r.text;
    auto q = e2e::Q(db, "SELECT json_extract(config_json, '$.huge_page_heap') AS h FROM runs");
    ASSERT_EQ(q.rows.size(), 1u);
    EXPECT_EQ(q.Int(0, "h"), std::string(setting) == "0" ? 0 : 1) << "SHARDSCOPE_HUGEPAGES=" << setting;
  }
  // A choice already made in GLIBC_TUNABLES is kept.
  const std::string db = TempDb("hugepages_tunable");
  Output r = Shell(absl::StrCat("env GLIBC_TUNABLES=glibc.malloc.hugetlb=0 ", SHARDSCOPE_CLI_BINARY, " run mlp --db ", db,
                                " --steps 2 --quiet"));
  ASSERT_EQ(r.code, 0) << r.text;
  auto q = e2e::Q(db, "SELECT json_extract(config_json, '$.huge_page_heap') AS h FROM runs");
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(q.Int(0, "h"), 0);
}

}  // namespace
}  // namespace shardscope
