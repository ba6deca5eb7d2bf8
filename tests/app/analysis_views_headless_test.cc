// The analysis views through the real binary under Xvfb: `shardscope-ui DB
// --view NAME --screenshot F.png --dump-layout F.json` opens each view
// headless, waits for its model, and writes what the finished frame drew.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "tests/app/fixture.h"
#include "tests/app/profile_fixture.h"

namespace shardscope::app {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string output;
};

Result RunUi(const std::string& args) {
  const std::string cmd = absl::StrCat("timeout 120 xvfb-run -a -s \"-screen 0 1600x900x24\" ", SHARDSCOPE_UI_BINARY,
                                       " ", args, " 2>&1");
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  json j;
  if (in) in >> j;
  return j;
}

std::multiset<std::string> Types(const json& dump) {
  std::multiset<std::string> out;
  for (const json& item : dump["items"]) out.insert(item["type"].get<std::string>());
  return out;
}

class AnalysisViewsHeadless : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(::testing::TempDir() + "/analysis_views_headless.db");
    ASSERT_TRUE(testing::WriteProfileDb(*db_, {{}}).ok());
  }
  static void TearDownTestSuite() { delete db_; }
  // Opens `view` headless; returns its layout dump.
  json Open(const std::string& view) {
    const std::string png = testing::TempPath(view + ".png"), layout = testing::TempPath(view + ".json");
    Result r = RunUi(absl::StrCat(*db_, " --view ", view, " --screenshot ", png, " --dump-layout ", layout));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("layout ", layout, " view=", view)));
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("screenshot ", png, " 1600x900")));
    return ReadJson(layout);
  }
  static std::string* db_;
};
std::string* AnalysisViewsHeadless::db_;

TEST_F(AnalysisViewsHeadless, Overview) {
  json dump = Open("overview");
  EXPECT_EQ(dump["view"], "overview");
  auto types = Types(dump);
  EXPECT_EQ(types.count("verdict"), 1u);
  EXPECT_GE(types.count("evidence"), 6u);
  EXPECT_EQ(types.count("compilation"), 2u);
  EXPECT_GE(types.count("op"), 1u);
  for (const json& item : dump["items"]) {
    if (item["type"] == "verdict") {
      EXPECT_TRUE(absl::StartsWith(item["label"].get<std::string>(), "bound by"));
    }
  }
}

TEST_F(AnalysisViewsHeadless, OpProfile) {
  json dump = Open("ops");
  EXPECT_EQ(dump["view"], "ops");
  auto reader = store::Reader::Open(*db_);
  ASSERT_TRUE(reader.ok());
  auto busy = reader->Query("SELECT sum(busy_ns) AS ns FROM step_device_summary WHERE run_id = 1");
  ASSERT_TRUE(busy.ok());
  int64_t rows_ns = 0;
  for (const json& item : dump["items"]) {
    if (item["type"] == "row") rows_ns += item["total_ns"].get<int64_t>();
  }
  // Every kernel is on screen: their times are the run's device time.
  EXPECT_NEAR(double(rows_ns), double(busy->Int(0, "ns")), 0.01 * double(busy->Int(0, "ns")));
  auto types = Types(dump);
  EXPECT_EQ(types.count("roof"), 2u);
  EXPECT_EQ(types.count("dot"), 8u);  // fusion, dot, add, all-reduce of two programs
}

TEST_F(AnalysisViewsHeadless, Metrics) {
  json dump = Open("metrics");
  EXPECT_EQ(dump["view"], "metrics");
  auto types = Types(dump);
  EXPECT_GE(types.count("chart"), 6u);  // step time, loss, compile, kinds, transfers, two counters
  EXPECT_GE(types.count("row"), 6u);    // the report's timing metrics and counters
}

TEST_F(AnalysisViewsHeadless, Memory) {
  json dump = Open("memory");
  EXPECT_EQ(dump["view"], "memory");
  auto reader = store::Reader::Open(*db_);
  ASSERT_TRUE(reader.ok());
  auto peak = reader->Query("SELECT graph_id, peak_bytes FROM memory_plans WHERE run_id = 1 ORDER BY peak_bytes DESC");
  ASSERT_TRUE(peak.ok());
  int largest = 0;
  for (const json& item : dump["items"]) {
    if (item["type"] == "program" && item["largest"].get<bool>()) {
      ++largest;
      EXPECT_EQ(item["peak_bytes"].get<int64_t>(), peak->Int(0, "peak_bytes"));
      EXPECT_EQ(item["ref"]["graph_id"].get<int64_t>(), peak->Int(0, "graph_id"));
    }
  }
  EXPECT_EQ(largest, 1);
  EXPECT_EQ(Types(dump).count("buffer"), 3u);
}

TEST_F(AnalysisViewsHeadless, CompareWithAnotherFile) {
  const std::string other = testing::TempPath("other.db");
  ASSERT_TRUE(testing::WriteProfileDb(other, {{.dot_scale = 1.5, .with_extra_op = true}}).ok());
  const std::string layout = testing::TempPath("compare.json");
  Result r = RunUi(absl::StrCat(other, " --view compare --compare ", *db_, " --compare-run 1 --dump-layout ", layout));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json dump = ReadJson(layout);
  EXPECT_EQ(dump["view"], "compare");
  std::map<std::string, std::string> change;
  for (const json& item : dump["items"]) {
    if (item["type"] == "row") change[item["label"].get<std::string>()] = item["change"];
  }
  EXPECT_EQ(change["dot.7"], "slower");
  EXPECT_EQ(change["multiply.9"], "added");
}

// A real run of the stack (`shardscope run mlp`): every analysis view opens
// on it, and the op profile's rows add up to the device time the store has.
TEST_F(AnalysisViewsHeadless, EveryViewOpensOnARealRun) {
#ifndef SHARDSCOPE_CLI_BINARY
  GTEST_SKIP() << "built without the shardscope CLI";
#else
  const std::string db = testing::TempPath("mlp.db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  Result run;
  {
    FILE* p = popen(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", db,
                                 " --mesh 2x2 --steps 4 --change-step 2 --quiet 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) run.output.append(buf, n);
    const int status = pclose(p);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto reader = store::Reader::Open(db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const char* view : {"overview", "ops", "memory", "metrics"}) {
    const std::string layout = testing::TempPath(absl::StrCat("mlp_", view, ".json"));
    Result r = RunUi(absl::StrCat(db, " --view ", view, " --dump-layout ", layout));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    json dump = ReadJson(layout);
    EXPECT_EQ(dump["view"], view);
    auto types = Types(dump);
    if (std::string(view) == "overview") {
      EXPECT_EQ(types.count("verdict"), 1u);
      EXPECT_EQ(types.count("compilation"), 2u);  // the first compile and the recompilation at step 2
    }
    if (std::string(view) == "ops") {
      auto busy = reader->Query("SELECT sum(busy_ns) AS ns FROM step_device_summary WHERE run_id = 1");
      ASSERT_TRUE(busy.ok());
      int64_t total = 0;
      for (const json& item : dump["items"]) {
        if (item["type"] == "text" && item["ref"]["table"] == "ops") total = item["total_ns"];
      }
      EXPECT_NEAR(double(total), double(busy->Int(0, "ns")), 0.01 * double(busy->Int(0, "ns")));
      EXPECT_GT(types.count("dot"), 10u);
    }
    if (std::string(view) == "memory") {
      auto plans = reader->Query("SELECT count(*) AS n FROM memory_plans WHERE run_id = 1");
      ASSERT_TRUE(plans.ok());
      EXPECT_EQ(int64_t(types.count("program")), plans->Int(0, "n"));
      // The largest program's liveness curve, peaking at its planned peak.
      auto largest = reader->Query("SELECT graph_id, peak_bytes FROM memory_plans WHERE run_id = 1"
                                   " ORDER BY peak_bytes DESC, graph_id LIMIT 1");
      ASSERT_TRUE(largest.ok());
      ASSERT_EQ(types.count("curve"), 1u);
      for (const json& item : dump["items"]) {
        if (item["type"] != "curve") continue;
        EXPECT_EQ(item["ref"]["graph_id"].get<int64_t>(), largest->Int(0, "graph_id"));
        EXPECT_EQ(item["peak_bytes"].get<int64_t>(), largest->Int(0, "peak_bytes"));
        EXPECT_GT(item["points"].get<int>(), 2);
      }
    }
    if (std::string(view) == "metrics") {
      EXPECT_GE(types.count("chart"), 5u);
    }
  }
#endif
}

// Every view is built now (Fleet last): an unknown name lists them all.
TEST_F(AnalysisViewsHeadless, AnUnknownViewIsAClearUsageError) {
  Result r = RunUi(absl::StrCat(*db_, " --view nonsense"));
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.output, HasSubstr("overview, timeline, sharding"));
  EXPECT_THAT(r.output, HasSubstr("compare, fleet"));
  r = RunUi(absl::StrCat(*db_, " --step x"));
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.output, HasSubstr("--step wants a step number, got 'x'"));
  r = RunUi(absl::StrCat(*db_, " --chip -1"));
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.output, HasSubstr("--chip wants a device id, got '-1'"));
}

}  // namespace
}  // namespace shardscope::app
