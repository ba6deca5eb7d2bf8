// `shardscope report`'s verdict on real runs: a recompilation storm is bound by
// recompilation, with its numbers; every chip's priority-attributed parts add
// up to the step exactly; the HTML form is one self-contained file with charts.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using nlohmann::json;

std::string Cli(const std::string& args) { return absl::StrCat(SHARDSCOPE_CLI_BINARY, " ", args); }

json ReportJson(const std::string& db) {
  e2e::Output o = e2e::Shell(absl::StrCat("(", Cli("report " + db + " --format json"), " 2>/dev/null)"));
  EXPECT_EQ(o.code, 0) << o.text;
  json j = json::parse(o.text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.text;
  return j;
}

TEST(ReportVerdictE2e, ARecompilationStormIsBoundByRecompilation) {
  const std::string db = e2e::TempDb("verdict_storm");
  ASSERT_EQ(e2e::Shell(Cli("run recompile_storm --steps 20 --quiet --db " + db)).code, 0);
  json j = ReportJson(db);
  EXPECT_EQ(j["schema"], "shardscope.report/1");
  const json& first = j["verdict"]["evidence"][0];
  EXPECT_EQ(first["bound"], "recompilation");
  // The count is the program's; the share of host time (about a quarter
  // here) is measured, so a loaded machine can move it.
  EXPECT_TRUE(absl::StrContains(first["detail"].get<std::string>(), "5 recompilations after step 10")) << first.dump();
  EXPECT_GT(first["value"].get<double>(), 0);
  if (first["value"].get<double>() >= first["threshold"].get<double>()) {
    EXPECT_TRUE(first["passed"].get<bool>());
    EXPECT_EQ(j["verdict"]["bound"], "recompilation") << j["verdict"].dump(1);
    EXPECT_TRUE(absl::StrContains(first["detail"].get<std::string>(), "suggestion: pad to power-of-two")) << first.dump();
    e2e::Output text = e2e::Shell(Cli("report " + db));
    EXPECT_TRUE(absl::StrContains(text.text, "Verdict: bound by recompilation")) << text.text;
  } else {
    std::printf("recompiling took only %.1f%% of the late steps' host time here (threshold %.0f%%)\n",
                first["value"].get<double>(), first["threshold"].get<double>());
  }
  // Bucketed as the suggestion says, the same program does not recompile late, and is not so bound.
  const std::string bucketed = e2e::TempDb("verdict_bucketed");
  ASSERT_EQ(e2e::Shell(Cli("run recompile_storm --steps 20 --bucket --quiet --db " + bucketed)).code, 0);
  json b = ReportJson(bucketed);
  const json& late = b["verdict"]["evidence"][0];
  EXPECT_FALSE(late["passed"].get<bool>());
  EXPECT_TRUE(absl::StrContains(late["detail"].get<std::string>(), "0 recompilations after step 10")) << late.dump();
  EXPECT_NE(b["verdict"]["bound"], "recompilation");
}

TEST(ReportVerdictE2e, PartsAddUpToTheStepAndTheHtmlStandsAlone) {
  const std::string db = e2e::TempDb("verdict_mlp");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 4 --mesh 2x2 --quiet --db " + db)).code, 0);
  json j = ReportJson(db);
  const json& b = j["verdict"]["breakdown"];
  EXPECT_EQ(b["clock"], "device");
  ASSERT_EQ(b["chips"].size(), 4u) << b.dump();
  const int64_t span = b["span_ns"];
  EXPECT_GT(span, 0);
  for (const json& c : b["chips"]) {
    const int64_t sum = c["compute_ns"].get<int64_t>() + c["collective_ns"].get<int64_t>() +
                        c["transfer_ns"].get<int64_t>() + c["host_wait_ns"].get<int64_t>() + c["idle_ns"].get<int64_t>();
    EXPECT_EQ(sum, span) << c.dump();
    EXPECT_GT(c["compute_ns"].get<int64_t>(), 0);
  }
  // Every candidate bound is stated with its threshold; the verdict names one or says none passed.
  EXPECT_EQ(j["verdict"]["evidence"].size(), 7u);
  for (const json& e : j["verdict"]["evidence"]) EXPECT_GT(e["threshold"].get<double>(), 0) << e.dump();
  EXPECT_FALSE(j["verdict"]["line"].get<std::string>().empty());
  e2e::Output html = e2e::Shell(absl::StrCat("(", Cli("report " + db + " --format html"), " 2>/dev/null)"));
  ASSERT_EQ(html.code, 0);
  size_t svgs = 0;
  for (size_t at = html.text.find("<svg"); at != std::string::npos; at = html.text.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 4u);  // steps, per-chip parts, the median step drawn small, the fleet heatmap
  EXPECT_TRUE(absl::StrContains(html.text, "<h2>Metrics</h2>"));
  e2e::ExpectSelfContainedHtml(html.text);
  // The metrics report closes every form, with the counters `shardscope metrics` prints.
  ASSERT_TRUE(j["metrics"].is_object()) << j.dump().substr(0, 400);
  int64_t mark_steps = -1;
  for (const json& c : j["metrics"]["counters"])
    if (c["name"] == "MarkStep") mark_steps = c["value"].get<int64_t>();
  EXPECT_EQ(mark_steps, 4);
  e2e::Output metrics = e2e::Shell(absl::StrCat("(", Cli("metrics " + db), " 2>/dev/null)"));
  for (const char* format : {"text", "md"}) {
    e2e::Output o = e2e::Shell(absl::StrCat("(", Cli("report " + db + " --format " + format), " 2>/dev/null)"));
    ASSERT_EQ(o.code, 0);
    EXPECT_TRUE(absl::StrContains(o.text, format == std::string("md") ? "## Metrics" : "\nMetrics\n")) << format;
    EXPECT_TRUE(absl::StrContains(o.text, metrics.text)) << format;
  }
}

// Of an even number of steps the report breaks down the faster middle one; it
// called that "the median of 4 steps" while diff and fleet printed the
// interpolated median (7.4 against 9.6 ms). Now it says which step it is and
// gives the median diff prints.
TEST(ReportVerdictE2e, AnEvenCountOfStepsNamesTheMedianDiffPrints) {
  const std::string db = e2e::TempDb("verdict_even");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 4 --mesh 2x2 --quiet --db " + db)).code, 0);
  e2e::Output diff = e2e::Shell(absl::StrCat("(", Cli("diff " + db + " --runs 1,1"), " 2>/dev/null)"));
  ASSERT_EQ(diff.code, 0) << diff.text;
  const size_t row = diff.text.find("\n  device ");
  ASSERT_NE(row, std::string::npos) << diff.text;
  const size_t cell = diff.text.find_first_not_of(' ', row + 10);
  const std::string median = diff.text.substr(cell, diff.text.find(" (", cell) - cell);  // e.g. "9.6 ms"
  e2e::Output report = e2e::Shell(absl::StrCat("(", Cli("report " + db), " 2>/dev/null)"));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "the faster of the 2 middle steps of 4 steps, whose median is " + median))
      << median << "\n" << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "the median of 4 steps")) << report.text;
}

TEST(ReportVerdictE2e, TheHtmlHeatmapPlacesChipsOnTheTorusAndMarksTheSlowOne) {
  // A 4x4 simulated torus with chip 6 at 60% speed: on the heatmap it is [1,2], red and outlined, alone.
  const std::string db = e2e::TempDb("verdict_heatmap");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --simulate --topology 4x4 --steps 6 --fault slow-chip:6:0.6 --quiet --db " + db))
                .code,
            0);
  e2e::Output html = e2e::Shell(Cli("report " + db + " --format html"));
  ASSERT_EQ(html.code, 0) << html.text;
  e2e::ExpectSelfContainedHtml(html.text);
  EXPECT_TRUE(absl::StrContains(html.text, "<h2>Fleet heatmap</h2>")) << html.text;
  EXPECT_TRUE(absl::StrContains(html.text, "(modeled clock)")) << html.text;
  EXPECT_TRUE(absl::StrContains(html.text, "fill=\"#d62728\" stroke=\"#000\" stroke-width=\"2\"><title>chip 6 [1,2]: +"))
      << html.text;
  size_t outlined = 0;
  for (size_t at = html.text.find("stroke=\"#000\""); at != std::string::npos; at = html.text.find("stroke=\"#000\"", at + 1))
    ++outlined;
  EXPECT_EQ(outlined, 1u);
}

// A slow chip is "the bound" only where fixing it saves the step a share
// worth the name: at 88% speed in a llama step its collectives dominate (256
// chips), the fleet still flags it, but the verdict is the collectives; at
// 60% speed on 64 chips it costs more than 3% of the step and is the bound.
TEST(ReportVerdictE2e, AStragglerThatCostsTheStepLittleIsNotItsBound) {
  struct Case {
    const char* topology;
    const char* speed;
    const char* bound;
    bool row_passed;
  };
  for (const Case& c : {Case{"4x4x4", "0.6", "stragglers", true}, Case{"8x8x4", "0.88", "collectives", false}}) {
    SCOPED_TRACE(c.topology);
    const std::string db = e2e::TempDb(absl::StrCat("verdict_straggler_", c.topology));
    ASSERT_EQ(e2e::Shell(absl::StrCat("SHARDSCOPE_CPU_PROFILE=fixed ",
                                      Cli(absl::StrCat("run llama --simulate --topology ", c.topology,
                                                       " --steps 3 --quiet --fault slow-chip:17:", c.speed,
                                                       " --db ", db))))
                  .code,
              0);
    const json v = ReportJson(db)["verdict"];
    EXPECT_EQ(v["bound"], c.bound) << v.dump();
    for (const json& e : v["evidence"]) {
      if (e["bound"] != "stragglers") continue;
      EXPECT_EQ(e["passed"], c.row_passed) << e.dump();
      EXPECT_EQ(e["flagged_not_bound"], !c.row_passed) << e.dump();
      EXPECT_TRUE(absl::StrContains(e["detail"].get<std::string>(), "chip 17")) << e.dump();
      EXPECT_EQ(absl::StrContains(e["detail"].get<std::string>(), "not what bounds the step"), !c.row_passed)
          << e.dump();
    }
    e2e::Output fleet = e2e::Shell(Cli("fleet " + db + " --format json"));
    const json f = json::parse(fleet.text, nullptr, false);
    ASSERT_TRUE(f.is_object()) << fleet.text;
    EXPECT_EQ(f["suspects"][0]["id"], "17");
    EXPECT_EQ(f["suspects"][0]["flagged"], true);  // flagged either way: the fleet ranks, the verdict weighs
  }
}

// A chunk whose slice times overflow (a damaged file that `check` passes):
// the report says which step of which run is damaged, and does not crash.
TEST(ReportVerdictE2e, OverflowingSliceTimesAreAnErrorNotACrash) {
  const std::string db = e2e::TempDb("verdict_overflow");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --mesh 4x1 --steps 3 --quiet --db " + db)).code, 0);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h,
                         "UPDATE slice_chunks SET slices = replace(slices, '[0,', '[9223372036854775807,')"
                         " WHERE track_id = 1",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  e2e::Output o = e2e::Shell(Cli("report " + db));
  EXPECT_EQ(o.code, 1) << o.text;  // not 139 (SIGSEGV)
  EXPECT_TRUE(absl::StrContains(o.text, "its timeline is damaged (shardscope check")) << o.text;
}

// A damaged chunk of run 1's timeline: run 2's report is whole, and run 1's
// says what it could not read instead of failing outright.
TEST(ReportVerdictE2e, AnotherRunsDamagedTimelineLeavesThisRunsReportWhole) {
  const std::string db = e2e::TempDb("verdict_damaged_other");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --quiet --db " + db)).code, 0);
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --quiet --db " + db)).code, 0);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h,
                         "UPDATE slice_chunks SET slices = 'X' || substr(slices, 2) WHERE chunk_id ="
                         " (SELECT min(chunk_id) FROM slice_chunks WHERE run_id = 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  json two = ReportJson(db + " --run 2");
  EXPECT_FALSE(two.contains("unreadable")) << two["unreadable"].dump();
  EXPECT_FALSE(two["kernels"]["top"].empty()) << two["kernels"].dump();
  EXPECT_TRUE(absl::StartsWith(two["verdict"]["line"].get<std::string>(), "bound by")) << two["verdict"]["line"];
  e2e::Output summary = e2e::Shell(Cli("query " + db + " \"SELECT count(*) AS n FROM step_device_summary WHERE run_id = 2\""));
  EXPECT_EQ(summary.code, 0) << summary.text;
  EXPECT_TRUE(absl::StrContains(summary.text, "\n3")) << summary.text;
  e2e::Output one = e2e::Shell(Cli("report " + db + " --run 1"));
  EXPECT_EQ(one.code, 0) << one.text;
  EXPECT_TRUE(absl::StrContains(one.text, "Not read (part of the file is damaged; `shardscope check")) << one.text;
  EXPECT_TRUE(absl::StrContains(one.text, "slice_chunks row 1 is damaged")) << one.text;
  EXPECT_TRUE(absl::StrContains(one.text, "\nSteps         3  median")) << one.text;
}

// A one-off pause is said as fleet says it: where the saving is, not "per step".
TEST(ReportVerdictE2e, AOneOffPauseIsNotASavingPerStep) {
  const std::string db = e2e::TempDb("verdict_one_off");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --simulate --topology 4x4x4 --steps 6 --fault host-preempt:3@2:50 --quiet --db " +
                           db)).code,
            0);
  e2e::Output report = e2e::Shell(Cli("report " + db));
  EXPECT_TRUE(absl::StrContains(report.text, "host 3 at ")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "fixing it would save 50.000 ms in step 2 alone (")) << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "per step (what-if)")) << report.text;
  e2e::Output fleet = e2e::Shell(Cli("fleet " + db));
  EXPECT_TRUE(absl::StrContains(fleet.text, "50.000 ms in step 2 alone")) << fleet.text;
  // The HTML step chart draws a simulated run's modeled steps (it drew no second series).
  e2e::Output html = e2e::Shell(Cli("report " + db + " --format html"));
  EXPECT_TRUE(absl::StrContains(html.text, "per step (host clock grey, modeled clock blue)"));
  EXPECT_TRUE(absl::StrContains(html.text, "<title>step 2, modeled clock: "));
}

// Another tool's trace records no compilations: none recorded is not "0
// recompilations, 0.0%", in the report's verdict, its JSON, or a diff.
TEST(ReportVerdictE2e, AnImportedTraceHasNoRecompilationFigure) {
  const std::string trace = e2e::TempDb("verdict_imported_trace") + ".json";
  test_files::RemoveAtExit(trace);
  {
    std::ofstream out(trace);
    out << "[";
    for (int s = 0; s < 14; ++s)
      out << (s ? "," : "") << "{\"name\":\"ProfilerStep#" << s << "\",\"ph\":\"X\",\"ts\":" << s * 1000
          << ",\"dur\":900,\"pid\":1,\"tid\":1},{\"name\":\"aten::mm\",\"ph\":\"X\",\"ts\":" << s * 1000 + 10
          << ",\"dur\":500,\"pid\":1,\"tid\":1}";
    out << "]";
  }
  const std::string db = e2e::TempDb("verdict_imported");
  ASSERT_EQ(e2e::Shell(Cli("import " + trace + " --quiet --db " + db)).code, 0);
  json j = ReportJson(db);
  const json* recompilation = nullptr;
  for (const json& e : j["verdict"]["evidence"])
    if (e["bound"] == "recompilation") recompilation = &e;
  ASSERT_NE(recompilation, nullptr) << j["verdict"].dump(1);
  EXPECT_FALSE((*recompilation)["measurable"].get<bool>()) << recompilation->dump();
  EXPECT_FALSE((*recompilation)["passed"].get<bool>());
  EXPECT_TRUE(absl::StrContains((*recompilation)["detail"].get<std::string>(),
                                "not measurable: an imported trace records no compilations"))
      << recompilation->dump();
  // Every row the run cannot support says so, and the rest are measured.
  for (const json& e : j["verdict"]["evidence"])
    EXPECT_EQ(e["measurable"].get<bool>(), !absl::StartsWith(e["detail"].get<std::string>(), "not measurable"))
        << e.dump();
  e2e::Output text = e2e::Shell(Cli("report " + db));
  EXPECT_FALSE(absl::StrContains(text.text, "0 recompilations after step")) << text.text;
  e2e::Output diff = e2e::Shell(Cli("diff " + db + " " + db));
  ASSERT_EQ(diff.code, 0) << diff.text;
  EXPECT_TRUE(absl::StrContains(diff.text, "A: not recorded (an imported trace has no compilations)")) << diff.text;
  EXPECT_FALSE(absl::StrContains(diff.text, "0 requests")) << diff.text;
}

}  // namespace
}  // namespace shardscope
