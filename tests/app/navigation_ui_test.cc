// The timeline's navigation through the shardscope-ui binary, headless:
// --range shows a table whose figures equal SQL over the same slices,
// --search finds every match of the run and selects the first, and a
// selection's panel names its op and draws its program's dispatch to each
// chip; on a run the real stack records, --compile shows a recompiled graph
// beside the one it was compared with, scrolled to the difference, and
// --graph a program's neighbourhood of one op with its costs. Each reads
// --dump-layout (docs/app.md), not pixels.
#include <sqlite3.h>

#include <cmath>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/reader.h"
#include "tests/app/fixture.h"
#include "tests/app/ui_runner.h"

namespace shardscope::app {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::LayoutItems;

std::string Ui() { return SHARDSCOPE_UI_BINARY; }

store::QueryResult Q(const std::string& db, const std::string& sql) {
  auto r = store::Reader::Open(db);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  auto q = r->Query(sql);
  EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
  return q.ok() ? *q : store::QueryResult{};
}

json Capture(const std::string& db, const std::string& args, const std::string& name) {
  const std::string out = testing::TempPath(name);
  std::filesystem::remove(out);
  testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " ", args, " --dump-layout ", out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return testing::ReadLayout(out);
}

TEST(TimelineNavigation, RangeTableEqualsSqlOverTheSlicesStartingInIt) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_range.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.steps = 8}}).ok());
  json doc = Capture(db, "--range device:1.2ms:5650us", "nav_ui_range.json");
  ASSERT_TRUE(doc.is_object());
  const std::string in_range =
      "run_id = 1 AND clock = 'device' AND start_ns >= 1200000 AND start_ns < 5650000";
  auto head = LayoutItems(doc, "text", "range");
  ASSERT_EQ(head.size(), 1u);
  EXPECT_TRUE(head[0]["exact"].get<bool>());
  EXPECT_FALSE(head[0]["pending"].get<bool>());
  EXPECT_EQ(head[0]["count"], Q(db, "SELECT count(*) AS n FROM events WHERE " + in_range).Int(0, "n"));
  auto band = LayoutItems(doc, "marker", "range");
  ASSERT_EQ(band.size(), 1u);
  EXPECT_EQ(band[0]["start_ns"], 1'200'000);
  EXPECT_EQ(band[0]["end_ns"], 5'650'000);
  auto rows = LayoutItems(doc, "row", "range_row");
  auto sql = Q(db, "SELECT name, count(*) AS n, sum(dur_ns) AS total FROM events WHERE " + in_range +
                       " GROUP BY name ORDER BY total DESC");
  ASSERT_EQ(rows.size(), sql.rows.size());
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string name = sql.Text(i, "name");
    EXPECT_EQ(rows[i]["label"], name);  // largest total first
    EXPECT_EQ(rows[i]["count"], sql.Int(i, "n")) << name;
    EXPECT_EQ(rows[i]["total_ns"], sql.Int(i, "total")) << name;
    EXPECT_FALSE(rows[i]["from_summaries"].get<bool>());
    // p90 by nearest rank, from SQL's ordered durations.
    const int64_t n = sql.Int(i, "n");
    const int64_t rank = static_cast<int64_t>(std::ceil(0.9 * n));
    auto p90 = Q(db, absl::StrCat("SELECT dur_ns FROM events WHERE ", in_range, " AND name = '", name,
                                  "' ORDER BY dur_ns LIMIT 1 OFFSET ", rank - 1));
    EXPECT_EQ(rows[i]["p90_ns"], p90.Int(0, "dur_ns")) << name;
  }
}

TEST(TimelineNavigation, SearchFindsEveryMatchOfTheRunAndSelectsTheFirst) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_search.db");
  const testing::FixtureRun run{.steps = 6};
  ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
  json doc = Capture(db, "--search ALL-RED", "nav_ui_search.json");
  ASSERT_TRUE(doc.is_object());
  auto search = LayoutItems(doc, "text", "search");
  ASSERT_EQ(search.size(), 1u);
  const int64_t total = Q(db, "SELECT count(*) AS n FROM events WHERE run_id = 1 AND name LIKE '%all-red%'").Int(0, "n");
  EXPECT_EQ(total, 6 * 4);
  EXPECT_EQ(search[0]["total"], total);
  EXPECT_EQ(search[0]["index"], 0);
  EXPECT_EQ(search[0]["names"], json::array({"all-reduce.2"}));
  // The first hit (step 0; the chips start it together, chip 0 first) is
  // selected, and the hits on screen are marked, that one as current.
  const int64_t first = testing::AllReduceSliceId(run, 0, 0);
  auto details = LayoutItems(doc, "text", "details");
  ASSERT_FALSE(details.empty());
  EXPECT_EQ(details[0]["ref"]["slice_id"], first);
  EXPECT_THAT(details[0]["label"].get<std::string>(), HasSubstr("all-reduce.2"));
  auto marks = LayoutItems(doc, "marker", "search_hit");
  EXPECT_GE(marks.size(), 4u);
  int current = 0;
  for (const json& m : marks) {
    if (m["current"].get<bool>()) {
      ++current;
      EXPECT_EQ(m["ref"]["slice_id"], first);
    }
  }
  EXPECT_EQ(current, 1);
  // A name no slice has says so.
  json none = Capture(db, "--search no-such-kernel", "nav_ui_search_none.json");
  auto status = LayoutItems(none, "text", "search");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0]["total"], 0);
  EXPECT_THAT(status[0]["label"].get<std::string>(), HasSubstr("no slice name contains"));
}

// A simulated chip's slices are made on demand, in no chunk: --select finds
// one by the chip and program run its id names.
TEST(TimelineNavigation, ASimulatedRunsSliceIsSelectedById) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_select_sim.db");
  std::filesystem::remove(db);
  ASSERT_EQ(std::system(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 2x4 --steps 4 --quiet --db ",
                                     db, " > /dev/null 2>&1")
                            .c_str()),
            0);
  auto pick = Q(db,
                "SELECT e.slice_id, e.name FROM events e WHERE e.run_id = 1 AND e.clock = 'modeled' AND e.kind = 'compute'"
                " AND e.step = 2 AND e.device_id = 5 AND e.depth = 0 ORDER BY e.start_ns LIMIT 1 OFFSET 3");
  ASSERT_EQ(pick.rows.size(), 1u);
  json doc = Capture(db, absl::StrCat("--select ", pick.Text(0, "slice_id")), "nav_ui_select_sim.json");
  ASSERT_TRUE(doc.is_object());
  bool named = false;
  for (const json& t : LayoutItems(doc, "text", "details"))
    named |= absl::StrContains(t["label"].get<std::string>(), pick.Text(0, "name"));
  EXPECT_TRUE(named) << pick.Text(0, "name") << "\n" << doc.dump(1).substr(0, 3000);
}

TEST(TimelineNavigation, SelectionNamesItsOpAndDrawsItsProgramsDispatchToEachChip) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_select.db");
  const testing::FixtureRun run;
  ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
  json doc = Capture(db, absl::StrCat("--select ", testing::AllReduceSliceId(run, 3, 1)), "nav_ui_select.json");
  ASSERT_TRUE(doc.is_object());
  auto op = Q(db, "SELECT name, opcode, shape FROM ops WHERE run_id = 1 AND graph_id = 1 AND op_id = 9");
  bool op_line = false, dispatch_line = false;
  for (const json& t : LayoutItems(doc, "text", "details")) {
    const std::string label = t["label"];
    op_line |= absl::StrContains(label, absl::StrCat("op ", op.Text(0, "name"), " (", op.Text(0, "opcode"), ") ",
                                                     op.Text(0, "shape")));
    dispatch_line |= absl::StrContains(label, "dispatched by the host") && absl::StrContains(label, "began on 4 chips");
  }
  EXPECT_TRUE(op_line) << doc.dump(1).substr(0, 3000);
  EXPECT_TRUE(dispatch_line);
  auto button = LayoutItems(doc, "button", "open_graph");
  ASSERT_EQ(button.size(), 1u);
  EXPECT_EQ(button[0]["ref"]["graph_id"], 1);
  EXPECT_EQ(button[0]["ref"]["op_id"], 9);
  // From the host's launch of step 3's program to where each chip began it.
  auto flows = LayoutItems(doc, "flow", "dispatch");
  ASSERT_EQ(flows.size(), 4u);
  auto firsts = Q(db, "SELECT track_id, slice_id FROM events e WHERE run_id = 1 AND step = 3 AND graph_id = 1 AND "
                      "clock = 'device' AND start_ns = (SELECT min(start_ns) FROM events f WHERE f.run_id = 1 AND "
                      "f.step = 3 AND f.graph_id = 1 AND f.track_id = e.track_id) ORDER BY track_id");
  ASSERT_EQ(firsts.rows.size(), 4u);
  const int64_t launch = Q(db, "SELECT host_start_ns FROM executions WHERE run_id = 1 AND step = 3").Int(0, "host_start_ns");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(flows[i]["to"]["slice_id"], firsts.Int(i, "slice_id"));
    EXPECT_EQ(flows[i]["from"]["host_start_ns"], launch);
    EXPECT_LT(flows[i]["x0"].get<double>(), flows[i]["x1"].get<double>() + 1)
        << "a chip drawn starting its program before the host launched it";
  }
}

// `shardscope run mlp` on 2x2 for 12 steps: the batch shrinks at step 10.
const std::string& RecordedRun() {
  static const std::string* db = [] {
    auto* path = new std::string(testing::TempPath("nav_ui_mlp.db"));
    std::filesystem::remove(*path);
    const std::string cmd =
        absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", *path, " --mesh 2x2 --steps 12 --quiet > /dev/null 2>&1");
    if (std::system(cmd.c_str()) != 0) path->clear();
    return path;
  }();
  return *db;
}

TEST(RecompilationsView, APickedRecompileStandsBesideItsPreviousGraphScrolledToTheDifference) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string& db = RecordedRun();
  ASSERT_FALSE(db.empty()) << "shardscope run mlp failed";
  auto miss = Q(db, "SELECT compile_id, graph_id, prev_graph_id FROM compilations WHERE run_id = 1 AND cache = 'miss' "
                    "AND prev_graph_id IS NOT NULL");
  ASSERT_EQ(miss.rows.size(), 1u);
  const int64_t id = miss.Int(0, "compile_id");
  json doc = Capture(db, absl::StrCat("--compile ", id), "nav_ui_recompile.json");
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["view"], "recompilations");
  // Every compilation, grouped by call site, the picked one selected.
  std::vector<json> rows;
  for (const json& r : LayoutItems(doc, "row")) {
    if (r["ref"]["table"] == "compilations") rows.push_back(r);
  }
  EXPECT_EQ(static_cast<int64_t>(rows.size()), Q(db, "SELECT count(*) AS n FROM compilations WHERE run_id = 1").Int(0, "n"));
  int selected = 0;
  for (const json& r : rows) {
    if (r["selected"].get<bool>()) {
      ++selected;
      EXPECT_EQ(r["ref"]["compile_id"], id);
      EXPECT_EQ(r["label"], "input_shape_changed");
      EXPECT_EQ(r["source"], "samples/mlp.cc:41");
    }
  }
  EXPECT_EQ(selected, 1);
  EXPECT_EQ(LayoutItems(doc, "group").size(),
            static_cast<size_t>(Q(db, "SELECT count(DISTINCT call_site) AS n FROM compilations WHERE run_id = 1").Int(0, "n")));
  EXPECT_FALSE(LayoutItems(doc, "text", "suggestion").empty());
  // The two graphs, aligned, the difference on screen.
  auto diff = LayoutItems(doc, "text", "diff");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0]["old_graph_id"], miss.Int(0, "prev_graph_id"));
  EXPECT_EQ(diff[0]["new_graph_id"], miss.Int(0, "graph_id"));
  EXPECT_TRUE(diff[0]["from_diff"].get<bool>());
  auto stored = Q(db, absl::StrCat("SELECT change, opcode, op_index FROM compile_diffs WHERE run_id = 1 AND compile_id = ", id));
  ASSERT_FALSE(stored.rows.empty());
  EXPECT_EQ(diff[0]["diff_rows"], static_cast<int64_t>(stored.rows.size()));
  bool shown = false;
  for (const json& r : LayoutItems(doc, "row", "diff_row")) {
    if (r["change"] == stored.Text(0, "change") && r["new_index"] == stored.Int(0, "op_index")) {
      shown = true;
      EXPECT_EQ(r["new_opcode"], stored.Text(0, "opcode"));
      EXPECT_EQ(r["old_opcode"], stored.Text(0, "opcode"));  // a changed op faces its old self
      EXPECT_FALSE(r["new_source"].get<std::string>().empty());
      EXPECT_FALSE(r["old_source"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(shown) << "the stored difference is not on screen (not scrolled to)";
}

TEST(GraphView, OpensAtAnOpWithItsNeighbourhoodFusedKernelsFoldedAndTheirCosts) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string& db = RecordedRun();
  ASSERT_FALSE(db.empty()) << "shardscope run mlp failed";
  // The costliest fused kernel by the cost model.
  auto k = Q(db, "SELECT graph_id, op_id, name, flops, modeled_ns FROM ops WHERE run_id = 1 AND opcode = 'fusion' "
                 "ORDER BY modeled_ns DESC LIMIT 1");
  ASSERT_EQ(k.rows.size(), 1u);
  const int64_t graph = k.Int(0, "graph_id"), op = k.Int(0, "op_id");
  json doc = Capture(db, absl::StrCat("--graph ", graph, ":", op), "nav_ui_graph.json");
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["view"], "graph");
  auto head = LayoutItems(doc, "text", "graph");
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(head[0]["ref"]["graph_id"], graph);
  EXPECT_EQ(head[0]["center_op_id"], op);
  EXPECT_TRUE(head[0]["partitioned"].get<bool>());
  auto rows = LayoutItems(doc, "row", "graph_op");
  ASSERT_FALSE(rows.empty());
  EXPECT_LT(rows.size(), head[0]["ops"].get<size_t>());  // a neighbourhood, not the program
  int centers = 0;
  for (const json& r : rows) {
    EXPECT_LE(r["distance"].get<int>(), 2);
    if (!r["center"].get<bool>()) continue;
    ++centers;
    // The centre is the kernel, folded, with the cost model's figures.
    EXPECT_EQ(r["ref"]["op_id"], op);
    EXPECT_TRUE(r["fused_kernel"].get<bool>());
    EXPECT_TRUE(r["folded"].get<bool>());
    EXPECT_EQ(r["label"], k.Text(0, "name"));
    EXPECT_DOUBLE_EQ(r["flops"].get<double>(), k.Real(0, "flops"));
    EXPECT_EQ(r["modeled_ns"], k.Int(0, "modeled_ns"));
    EXPECT_GT(r["measured_count"].get<int64_t>(), 0);
    EXPECT_EQ(r["members"], Q(db, absl::StrCat("SELECT count(DISTINCT producer_op_id) + 1 AS n FROM fusion_decisions "
                                               "WHERE run_id = 1 AND graph_id = ", graph, " AND fused AND kernel = '",
                                               k.Text(0, "name"), "'")).Int(0, "n"));
    EXPECT_FALSE(r["source"].get<std::string>().empty());
  }
  EXPECT_EQ(centers, 1);
  EXPECT_EQ(LayoutItems(doc, "button", "show_on_timeline").size(), 1u);
}

TEST(GraphView, AnImportedRunSaysItHasNoIrInOneLine) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_imported.db");
  std::filesystem::remove(db);
  testing::UiResult imported = testing::RunShell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", SHARDSCOPE_SOURCE_DIR,
                                                              "/tests/data/import/gpu_rank0.json --db ", db));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  for (const std::string view : {"graph", "recompilations"}) {
    json doc = Capture(db, "--view " + view, absl::StrCat("nav_ui_imported_", view, ".json"));
    EXPECT_EQ(doc["view"], view);
    auto line = LayoutItems(doc, "text", "no_ir");
    ASSERT_EQ(line.size(), 1u) << view;
    EXPECT_THAT(line[0]["label"].get<std::string>(), HasSubstr("no IR"));
  }
}

TEST(TimelineNavigation, BadRangeIsAUsageError) {
  testing::UiResult r = testing::RunShell(absl::StrCat(Ui(), " x.db --range 5ms:1ms"));
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.output, HasSubstr("the end must come after the start"));
  r = testing::RunShell(absl::StrCat(Ui(), " x.db --range sundial:1:2"));
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.output, HasSubstr("unknown clock"));
  EXPECT_THAT(r.output, HasSubstr("--help lists them"));
  EXPECT_THAT(r.output, Not(HasSubstr("xvfb")));  // not a display problem
}

// What the command line asks of the run and the run lacks is said, and a
// capture then exits 1 (the picture is still written); what it has is not.
// Steps that do not advance (every device step at one time: a damaged
// step_bounds) once made the step markers' thinning spin for ever; the
// capture now finishes.
TEST(TimelineNavigation, StepsAtOneTimeDoNotHangTheTimeline) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_steps_at_once.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.steps = 8}}).ok());
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "UPDATE step_bounds SET start_ns = 0 WHERE clock = 'device'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  json doc = Capture(db, "", "nav_ui_steps_at_once.json");
  EXPECT_EQ(doc.value("view", ""), "timeline");
}

// The step a hang stopped reached the host clock only. Shown with --step,
// the chips' lanes have nothing in view to load: the capture finishes at once
// (it waited out its 120 s, every device lane asking for a window that could
// never cover the view).
TEST(TimelineNavigation, TheStepAHangStoppedOpensAtOnce) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_hung.db");
  std::filesystem::remove(db);
  testing::UiResult run = testing::RunShell(absl::StrCat(SHARDSCOPE_CLI_BINARY,
                                                         " run mlp --mesh 2x4 --topology 2x4 --steps 4 --quiet"
                                                         " --fault fail-chip:3@2 --db ",
                                                         db));
  ASSERT_EQ(run.exit_code, 1) << run.output;
  const std::string out = testing::TempPath("nav_ui_hung.json");
  const auto start = std::chrono::steady_clock::now();
  testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " --step 2 --dump-layout ", out));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("did not finish loading"))) << seconds << " s";
  EXPECT_EQ(testing::ReadLayout(out).value("view", ""), "timeline");
}

TEST(TimelineNavigation, WhatTheRunLacksIsSaid) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_lacks.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  const std::string out = testing::TempPath("nav_ui_lacks.json");
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--select 999999999", "--select 999999999: run 1 has no slice 999999999"},
           {"--range 500s:600s", "no slice of run 1 starts in it on the device clock (its steps there span"},
           {"--range modeled:0:1ms", "--range modeled:0:1ms: run 1 has no timeline on the modeled clock"},
           {"--compile 987654", "--compile 987654: run 1 has no compilation 987654 (it has "},
           {"--graph 987654", "--graph 987654: run 1 compiled no graph 987654"},
           {"--step 4321", "--step 4321: run 1 has no step 4321 (it has 0-"},
           {"--chip 512", "--chip 512: run 1 has no chip 512 (it has 0-"},
           {"--view compare --compare /nonexistent/other.db", "Cannot compare: /nonexistent/other.db: no such file"},
           {absl::StrCat("--view compare --compare ", db, " --compare-run 9"), "has no run 9"},
       }) {
    testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " ", c.args, " --dump-layout ", out));
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.args;
    EXPECT_THAT(r.output, HasSubstr("layout ")) << c.args;  // the capture was still made
  }
  testing::UiResult fine = testing::RunUi(Ui(), absl::StrCat(db, " --step 1 --chip 0 --dump-layout ", out));
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
}

// A damaged slice chunk: the CLI names it at once, and the app's capture
// waited its whole 120 s for the rest of the timeline and exited 0. Now the
// capture ends when the loader has met the damage, says it, and exits 1;
// every view that cannot read its data does the same.
TEST(TimelineNavigation, DamageEndsTheCaptureWithAnError) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed";
  const std::string db = testing::TempPath("nav_ui_damaged.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "UPDATE slice_chunks SET count = count * 1000", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  const std::string out = testing::TempPath("nav_ui_damaged.json");
  testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " --dump-layout ", out));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is damaged: it says ")) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("`shardscope check ", db, "` names the damage"))) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("did not finish loading"))) << r.output;
  EXPECT_THAT(r.output, HasSubstr("layout ")) << r.output;  // what could be read is still captured
  // The Overview shows the report's "Not read" lines it points at, and says
  // them on stderr: it exited 0, its verdict pointing at a section it lacked.
  const std::string overview = testing::TempPath("nav_ui_damaged_overview.json");
  testing::UiResult o = testing::RunUi(Ui(), absl::StrCat(db, " --view overview --dump-layout ", overview));
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr("is damaged")) << o.output;
  const json doc = testing::ReadLayout(overview);
  EXPECT_FALSE(LayoutItems(doc, "not_read").empty()) << doc.dump().substr(0, 2000);
}

}  // namespace
}  // namespace shardscope::app
