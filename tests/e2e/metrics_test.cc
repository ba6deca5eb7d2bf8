// `shardscope metrics` on a stored mlp run: the `metrics` table the writer
// filled when the run ended holds exactly what the command prints, row for
// row — timing metrics, counters, ops traced per kind, kernels run.
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/format.h"
#include "store/metrics.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

// The cells of the rows printed under `title` (up to the next blank line),
// split where columns meet (two spaces or more).
std::vector<std::vector<std::string>> Section(const std::string& text, const std::string& title) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  size_t k = 0;
  while (k < lines.size() && lines[k].rfind(title, 0) != 0) ++k;
  const std::regex gap(" {2,}");
  for (++k; k < lines.size() && !lines[k].empty(); ++k) {
    std::vector<std::string> cells;
    for (std::sregex_token_iterator it(lines[k].begin(), lines[k].end(), gap, -1), end; it != end; ++it)
      if (!it->str().empty()) cells.push_back(*it);
    rows.push_back(cells);
  }
  return rows;
}

TEST(MetricsE2e, StoredRowsAreWhatTheCommandPrints) {
  const std::string db = e2e::TempDb("metrics_stored");
  const std::string run = " run mlp --steps 3 --change-step -1 --batch 16 --quiet --db ";
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, run, db)).code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "stored when the run ended")) << o.text;
  auto rows = e2e::Q(db,
                     "SELECT kind, name, clock, count, total_ns, p50_ns, p90_ns, p99_ns, max_ns, value, note"
                     " FROM metrics WHERE run_id = 1 ORDER BY position");
  auto ns = [&](size_t i, const char* col) { return analysis::FormatNs(rows.Int(i, col)); };
  std::vector<std::vector<std::string>> metrics, counters, traced, kernels;
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    const std::string kind = rows.Text(i, "kind"), name = rows.Text(i, "name"), note = rows.Text(i, "note");
    if (kind == "metric") {
      metrics.push_back({name, rows.Text(i, "clock"), rows.Text(i, "count"), ns(i, "total_ns"),
                         ns(i, "p50_ns"), ns(i, "p90_ns"), ns(i, "p99_ns"), ns(i, "max_ns"), note});
    } else if (kind == "counter") {
      counters.push_back({name, rows.Text(i, "value", "-")});
      if (!note.empty()) counters.back().push_back(note);
    } else {
      (kind == "op_traced" ? traced : kernels).push_back({name, rows.Text(i, "value")});
    }
  }
  std::vector<std::vector<std::string>> printed = Section(o.text, "Metric");
  ASSERT_FALSE(printed.empty()) << o.text;
  printed.erase(printed.begin());  // the header
  EXPECT_EQ(printed, metrics) << o.text;
  EXPECT_EQ(metrics.size(), 6u);
  EXPECT_EQ(Section(o.text, "Counter"), counters) << o.text;
  EXPECT_EQ(Section(o.text, "Ops traced"), traced) << o.text;
  EXPECT_EQ(Section(o.text, "Kernels run"), kernels) << o.text;
  // Three steps of a 3-layer MLP: three matmuls forward and more backward, each step.
  bool dots = false;
  for (const auto& t : traced) dots = dots || (t[0] == "stablehlo.dot_general" && std::stoll(t[1]) >= 9);
  EXPECT_TRUE(dots) << o.text;
  EXPECT_FALSE(kernels.empty()) << o.text;
  auto steps = e2e::Q(db, "SELECT value FROM metrics WHERE kind = 'counter' AND name = 'MarkStep'");
  EXPECT_EQ(steps.Int(0, "value"), 3);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// The writer stores a run's metrics from what it counted as the slices came
// (no read-back of the timeline at the run's end); they equal what the same
// code computes from the stored slices, on real runs with collectives, an
// eval program and a recompilation.
TEST(MetricsE2e, TheWritersCountsEqualTheSlices) {
  const std::string db = e2e::TempDb("metrics_aggregates");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 12 --mesh 2x2 --quiet --db ", db)).code, 0);
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run llama --steps 3 --mesh 2x2 --quiet --db ", db)).code, 0);
  auto rd = store::Reader::Open(db);
  ASSERT_TRUE(rd.ok()) << rd.status();
  for (int64_t run : {1, 2}) {
    auto stored = store::ReadRunMetrics(*rd, run);
    ASSERT_TRUE(stored.ok()) << stored.status();
    ASSERT_TRUE(stored->has_value()) << "run " << run << " stored no metrics";
    auto computed = store::ComputeRunMetrics(*rd, run);
    ASSERT_TRUE(computed.ok()) << computed.status();
    EXPECT_TRUE(**stored == *computed) << "run " << run;
    EXPECT_FALSE(computed->kernel_runs.empty());
  }
}

// A learning rate that blows the loss up to NaN: SQLite would store the NaN
// as NULL, which every reader took for "no loss" ("loss 2.303 -> -", no
// warning). The step it diverged at is kept and said everywhere.
TEST(MetricsE2e, ADivergedLossIsSaidNotReadAsNoLoss) {
  const std::string db = e2e::TempDb("metrics_diverged");
  e2e::Output run = e2e::Shell(
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 8 --lr 100 --quiet --db ", db, " 2>&1"));
  ASSERT_EQ(run.code, 0) << run.text;
  auto first = e2e::Q(db, "SELECT MIN(step) AS s FROM steps WHERE run_id = 1 AND loss = 'NaN'");
  ASSERT_FALSE(first.rows.empty());
  ASSERT_TRUE(first.rows[0][0].has_value()) << "the NaN loss was not kept; " << run.text;
  const std::string step = first.Text(0, "s");
  EXPECT_TRUE(absl::StrContains(run.text, absl::StrCat("warning: the loss is not finite from step ", step)))
      << run.text;
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, absl::StrCat("-> NaN (not finite from step ", step, ": diverged)")))
      << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, absl::StrCat("! the loss is not finite from step ", step)))
      << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "No warnings")) << report.text;
  e2e::Output json = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db, " --format json"));
  ASSERT_EQ(json.code, 0) << json.text;
  EXPECT_TRUE(absl::StrContains(json.text, absl::StrCat("\"loss_not_finite_from_step\": ", step))) << json.text;
  // A run that trains well has none of it.
  const std::string good = e2e::TempDb("metrics_not_diverged");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 3 --quiet --db ", good)).code,
            0);
  e2e::Output fine = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", good));
  EXPECT_FALSE(absl::StrContains(fine.text, "not finite")) << fine.text;
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// --trace off keeps no timeline: the timings drawn from it are "not
// recorded", never zeros, and the reads are still counted (core counts them
// as they happen), as many as the same run with its timeline reads.
TEST(MetricsE2e, WithoutATimelineTimingsAreNotRecordedAndReadsStillCounted) {
  const std::string off = e2e::TempDb("metrics_trace_off"), on = e2e::TempDb("metrics_trace_on");
  const std::string run =
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 6 --read-loss-every 1 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + off + " --trace off").code, 0);
  ASSERT_EQ(e2e::Shell(run + on).code, 0);
  auto metrics = [](const std::string& db) {
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", db, " --format json"));
    EXPECT_EQ(o.code, 0) << o.text;
    return nlohmann::json::parse(o.text, nullptr, false);
  };
  nlohmann::json a = metrics(off), b = metrics(on);
  ASSERT_TRUE(a.is_object() && b.is_object());
  auto find = [](const nlohmann::json& j, const char* list, const std::string& name) {
    for (const auto& m : j[list])
      if (m["name"] == name) return m;
    return nlohmann::json();
  };
  for (const char* name : {"ExecuteTime", "LazyTracing", "TransferFromDeviceTime", "MarkStep"}) {
    EXPECT_TRUE(find(a, "metrics", name)["count"].is_null()) << name << ": " << a.dump();
    EXPECT_TRUE(absl::StrContains(find(a, "metrics", name)["what"].get<std::string>(), "--trace off")) << name;
    EXPECT_GT(find(b, "metrics", name)["count"].get<int64_t>(), 0) << name;
  }
  EXPECT_GT(find(a, "metrics", "CompileTime")["count"].get<int64_t>(), 0);
  const nlohmann::json reads_off = find(a, "counters", "ValueRead")["value"];
  ASSERT_TRUE(reads_off.is_number()) << a.dump();
  EXPECT_GE(reads_off.get<int64_t>(), 6);
  EXPECT_EQ(reads_off, find(b, "counters", "ValueRead")["value"]);
  // The text says "-" for them, not 0.
  e2e::Output text = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", off));
  EXPECT_TRUE(std::regex_search(text.text, std::regex("ExecuteTime +device +- +- "))) << text.text;
}

// A partly captured run: its timings cover what the timeline kept, and the
// metrics say so (they read "over 80 steps" next to ExecuteTime 42, with no
// word of the capture); a capture that kept nothing is not called --trace off.
TEST(MetricsE2e, APartlyCapturedRunSaysWhatItsTimingsCover) {
  const std::string window = e2e::TempDb("metrics_window"), capped = e2e::TempDb("metrics_capped");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 5 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + window + " --trace-steps 1:2").code, 0);
  ASSERT_EQ(e2e::Shell(run + capped + " --trace-max-mb 1").code, 0);
  e2e::Output text = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", window));
  EXPECT_TRUE(absl::StrContains(text.text, "capture: timeline only for steps 1-2")) << text.text;
  e2e::Output j = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", window, " --format json"));
  nlohmann::json m = nlohmann::json::parse(j.text, nullptr, false);
  ASSERT_TRUE(m.is_object()) << j.text;
  EXPECT_TRUE(absl::StrContains(m["capture_note"].get<std::string>(), "--trace-steps 1:2")) << j.text;
  e2e::Output c = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", capped));
  EXPECT_FALSE(absl::StrContains(c.text, "--trace off")) << c.text;
  EXPECT_TRUE(absl::StrContains(c.text, "capture: timeline capture stopped")) << c.text;
}

}  // namespace
}  // namespace shardscope
