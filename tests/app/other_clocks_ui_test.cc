// Runs without a device clock through the binary under Xvfb: the Op profile
// and the Overview of an imported CPU-only trace (host clock, self time per
// name) and the Op profile of a simulated run (modeled clock) say which
// clock they show and list what it has, instead of "no device-clock kernels".
// And a file of schema version 1, which has no step spans (step_bounds) on
// any clock: every analysis view opens on it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"
#include "tests/app/ui_runner.h"

namespace shardscope::app {
namespace {

using nlohmann::json;
using testing::LayoutItems;

std::string Record(const std::string& name, const std::string& cli_args) {
  const std::string db = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("clocks_ui_", name, "_", getpid(), ".db"));
  std::filesystem::remove(db);
  const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " ", cli_args, " --db ", db, " > /dev/null 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return db;
}

json Open(const std::string& db, const std::string& view) {
  const std::string layout = test_files::RemoveAtExit(absl::StrCat(db, ".", view, ".json"));
  std::filesystem::remove(layout);
  testing::UiResult r = testing::RunUi(SHARDSCOPE_UI_BINARY, absl::StrCat(db, " --view ", view, " --dump-layout ", layout));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return testing::ReadLayout(layout);
}

// The Op profile's header line: the first text item with a `clock`.
json Header(const json& doc) {
  for (const json& t : LayoutItems(doc, "text"))
    if (t.contains("clock")) return t;
  return json();
}

TEST(OtherClocksUi, ACpuTraceIsProfiledByNameOnTheHostClock) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const std::string db = Record("cpu", absl::StrCat("import ", SHARDSCOPE_TEST_DATA, "/import/cpu_mlp.json.gz"));
  const json ops = Open(db, "ops");
  const json head = Header(ops);
  ASSERT_FALSE(head.is_null()) << ops.dump();
  EXPECT_EQ(head["clock"], "host");
  EXPECT_TRUE(absl::StrContains(head["label"].get<std::string>(), "self time")) << head.dump();
  EXPECT_GT(head["kernels"].get<int>(), 5);
  EXPECT_FALSE(LayoutItems(ops, "row").empty());

  // The Overview's top list is the report's names by self time, each a link to the Op profile.
  const json overview = Open(db, "overview");
  int names = 0, aten = 0;
  for (const json& item : overview["items"]) {
    if (!item.contains("ref") || !item["ref"].is_object() || item["ref"].value("table", "") != "slices") continue;
    if (!item["ref"].contains("name")) continue;
    ++names;
    EXPECT_EQ(item["ref"]["clock"], "host");
    if (absl::StartsWith(item["ref"]["name"].get<std::string>(), "aten::")) ++aten;
  }
  EXPECT_GT(names, 3) << overview.dump();
  EXPECT_GT(aten, 0);
  std::filesystem::remove(db);
}

TEST(OtherClocksUi, ASimulatedRunIsProfiledOnTheModeledClock) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const std::string db = Record("sim", "run mlp --simulate --topology 2x4 --steps 3 --quiet");
  const json ops = Open(db, "ops");
  const json head = Header(ops);
  ASSERT_FALSE(head.is_null()) << ops.dump();
  EXPECT_EQ(head["clock"], "modeled");
  EXPECT_EQ(head["lanes"], 8);
  EXPECT_TRUE(absl::StrContains(head["label"].get<std::string>(), "modeled clock")) << head.dump();
  EXPECT_FALSE(LayoutItems(ops, "row").empty());
  EXPECT_FALSE(LayoutItems(ops, "dot").empty()) << "the ops' FLOPs and bytes place them on the roofline";
  std::filesystem::remove(db);
}

// A run recorded with --trace off has chips and a device clock, only no
// slices: the Metrics view says so, not "no device timeline in this run".
TEST(OtherClocksUi, TheMetricsViewSaysATraceOffRunKeptNoSlices) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const std::string db = Record("trace_off", "run mlp --steps 2 --trace off --quiet");
  const json metrics = Open(db, "metrics");
  std::vector<std::string> notes;
  for (const json& n : LayoutItems(metrics, "note")) notes.push_back(n["label"]);
  ASSERT_EQ(notes.size(), 1u) << metrics.dump();
  EXPECT_EQ(notes[0], "No device-clock slices: the run was recorded with --trace off.");
  std::filesystem::remove(db);
}

TEST(OtherClocksUi, ASchemaOneFileWithoutStepSpansOpensEveryAnalysisView) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const std::string db = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("clocks_ui_v1_", getpid(), ".db"));
  std::filesystem::copy_file(absl::StrCat(SHARDSCOPE_TEST_DATA, "/store/schema_v1_mlp.db"), db,
                             std::filesystem::copy_options::overwrite_existing);
  for (const char* view : {"overview", "ops", "metrics", "memory", "fleet"}) {
    const json doc = Open(db, view);
    ASSERT_EQ(doc.value("view", ""), view) << doc.dump();
    for (const json& item : doc["items"]) {
      const std::string label = item.value("label", "");
      EXPECT_FALSE(absl::StrContains(label, "could not") || absl::StrContains(label, "no such table"))
          << view << ": " << label;
    }
    EXPECT_GT(doc["items"].size(), 3u) << view << ": " << doc.dump();
  }
  std::filesystem::remove(db);
}

}  // namespace
}  // namespace shardscope::app
