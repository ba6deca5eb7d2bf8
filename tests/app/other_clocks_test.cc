// Runs without a device clock, checked against SQL on the same files: a
// simulated torus (the Op profile and the report's breakdown on the modeled
// clock) and an imported CPU-only PyTorch trace (the Op profile on the host
// clock, by self time per name, as PyTorch's key_averages).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"
#include "profiler/analysis/run_report.h"
#include "profiler/analysis/slice_names.h"
#include "store/reader.h"
#include "tests/app/fleet_pods.h"
#include "ui/app/ops_view.h"

namespace shardscope::app {
namespace {

using testing::SimulatedTorus;

// Every depth-0 slice on the chips' lanes of `clock`, host waits left out: what the Op profile adds up.
int64_t SqlTotal(const store::Reader& r, const std::string& clock, const std::string& step_filter = "") {
  auto q = r.Query(absl::StrCat(
      "SELECT coalesce(sum(s.dur_ns), 0) AS ns FROM slices s JOIN tracks t ON t.run_id = s.run_id AND"
      " t.track_id = s.track_id WHERE s.run_id = 1 AND t.clock = '", clock,
      "' AND t.device_id IS NOT NULL AND s.depth = 0 AND s.kind <> 'host_wait'", step_filter));
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? q->Int(0, "ns") : -1;
}

TEST(OtherClocks, OpProfileOfASimulatedRunIsOnTheModeledClock) {
  const auto& pod = SimulatedTorus();
  ASSERT_TRUE(pod.recorded);
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto p = BuildOpProfile(*reader, 1, std::nullopt);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->clock, "modeled");
  EXPECT_FALSE(p->self_time);
  EXPECT_EQ(p->devices, 16);
  EXPECT_EQ(p->chips_in_run, 16);
  EXPECT_TRUE(p->has_ops);
  EXPECT_FALSE(p->cost_error.has_value()) << "the model cannot be scored against itself";
  ASSERT_FALSE(p->kernels.empty());
  EXPECT_EQ(p->total_ns, SqlTotal(*reader, "modeled"));
  int64_t sum = 0;
  for (const OpKernel& k : p->kernels) sum += k.total_ns;
  EXPECT_EQ(sum, p->total_ns);
  EXPECT_GT(p->kernels.front().flops, 0) << p->kernels.front().name << ": its ops row joined";

  // One step: the step's slices only.
  auto steps = reader->Query("SELECT step FROM step_bounds WHERE run_id = 1 AND clock = 'modeled' ORDER BY step");
  ASSERT_TRUE(steps.ok() && steps->rows.size() >= 2) << steps.status();
  const int step = static_cast<int>(steps->Int(1, "step"));
  auto one = BuildOpProfile(*reader, 1, step);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->total_ns, SqlTotal(*reader, "modeled", absl::StrCat(" AND s.step = ", step)));
  EXPECT_LT(one->total_ns, p->total_ns);
}

TEST(OtherClocks, ABigPodIsProfiledOnAnEvenSampleOfItsChipsAndSaysSo) {
  const std::string db = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("other_clocks_pod_", getpid(), ".db"));
  std::filesystem::remove(db);
  const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 8x8x8 --steps 2 --db ",
                                       db, " --quiet > /dev/null 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto reader = store::Reader::Open(db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto p = BuildOpProfile(*reader, 1, std::nullopt);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->clock, "modeled");
  EXPECT_EQ(p->chips_in_run, 512);
  EXPECT_EQ(p->devices, kMaxModeledChips);
  // Every chip runs the same programs with no fault: each kernel ran as often
  // on each chip read, so every count is a multiple of the chips read.
  for (const OpKernel& k : p->kernels) EXPECT_EQ(k.count % kMaxModeledChips, 0) << k.name;
  // The report's names by self time read an even sample too, and say how many of how many.
  analysis::NameTimesOptions options;
  options.max_tracks = analysis::kModeledLanesSampled;
  options.top_level_only = true;
  auto names = analysis::TopNamesBySelfTime(*reader, 1, "modeled", 10, options);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->tracks, static_cast<int>(analysis::kModeledLanesSampled));
  EXPECT_EQ(names->tracks_in_run, 512);
  ASSERT_FALSE(names->top.empty());
  for (const analysis::NameTime& n : names->top) EXPECT_EQ(n.count % int64_t(analysis::kModeledLanesSampled), 0) << n.name;
  std::filesystem::remove(db);
}

TEST(OtherClocks, TheReportBreaksASimulatedStepDownOnTheModeledClock) {
  const auto& pod = SimulatedTorus();
  ASSERT_TRUE(pod.recorded);
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto r = analysis::BuildRunReport(*reader, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const analysis::Verdict& v = r->verdict;
  EXPECT_EQ(v.clock, "modeled");
  ASSERT_EQ(v.parts.size(), 16u);
  // The step's span is the modeled clock's, from the slices.
  auto span = reader->Query(absl::StrCat(
      "SELECT max(s.start_ns + s.dur_ns) - min(s.start_ns) AS span FROM slices s JOIN tracks t ON t.run_id = s.run_id"
      " AND t.track_id = s.track_id WHERE s.run_id = 1 AND t.clock = 'modeled' AND t.device_id IS NOT NULL"
      " AND s.depth = 0 AND s.step = ", v.step));
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(v.span_ns, span->Int(0, "span"));
  std::map<int, int64_t> compute;
  for (const analysis::StepParts& p : v.parts) {
    EXPECT_EQ(p.compute_ns + p.collective_ns + p.transfer_ns + p.host_wait_ns + p.idle_ns, v.span_ns)
        << "chip " << p.device_id;
    compute[p.device_id] = p.compute_ns;
  }
  // Chip 5 runs at 60%: its compute is the longest, the others wait for it at the collectives.
  for (const auto& [d, ns] : compute)
    if (d != 5) EXPECT_GT(compute[5], ns) << "chip " << d;
  // The shares are measured now, not "not measurable".
  for (const analysis::Evidence& e : v.evidence) {
    if (e.bound == "compute" || e.bound == "collectives" || e.bound == "host") {
      EXPECT_FALSE(absl::StartsWith(e.detail, "not measurable")) << e.bound << ": " << e.detail;
    }
  }
  EXPECT_NE(v.bound, "unknown") << v.line;
  // Its top list is the modeled clock's names by self time, every chip read (16 of 16).
  ASSERT_FALSE(r->kernels.by_name.empty());
  const analysis::NameTimes& names = r->kernels.by_name.front();
  EXPECT_EQ(names.clock, "modeled");
  EXPECT_EQ(names.tracks, 16);
  EXPECT_EQ(names.tracks_in_run, 16);
  // A chip's top-level ops only (a collective's link slices run side by side inside it): their whole time.
  auto top = reader->Query(
      "SELECT sum(s.dur_ns) AS ns FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " WHERE s.run_id = 1 AND t.clock = 'modeled' AND s.depth = 0");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(names.self_ns, top->Int(0, "ns"));
}

TEST(OtherClocks, OpProfileOfACpuTraceIsSelfTimeOnTheHostClock) {
  const std::string db = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("other_clocks_cpu_", getpid(), ".db"));
  std::filesystem::remove(db);
  const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", SHARDSCOPE_TEST_DATA,
                                       "/import/cpu_mlp.json.gz --db ", db, " > /dev/null 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto reader = store::Reader::Open(db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto p = BuildOpProfile(*reader, 1, std::nullopt);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->clock, "host");
  EXPECT_TRUE(p->self_time);
  EXPECT_FALSE(p->has_ops);
  ASSERT_FALSE(p->kernels.empty());

  // Self time per name in SQL: each slice's time less its children's, at least 0.
  auto q = reader->Query(
      "SELECT CASE WHEN e.name GLOB 'ProfilerStep#[0-9]*' THEN 'ProfilerStep#*' ELSE e.name END AS name,"
      " count(*) AS n, sum(max(0, e.dur_ns - coalesce((SELECT sum(c.dur_ns) FROM slices c WHERE c.run_id = e.run_id"
      " AND c.track_id = e.track_id AND c.parent_id = e.slice_id), 0))) AS self"
      " FROM events e WHERE e.run_id = 1 AND e.clock = 'host' GROUP BY 1");
  ASSERT_TRUE(q.ok()) << q.status();
  std::map<std::string, std::pair<int64_t, int64_t>> sql;
  int64_t total = 0;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    sql[q->Text(i, "name")] = {q->Int(i, "n"), q->Int(i, "self")};
    total += q->Int(i, "self");
  }
  EXPECT_EQ(p->total_ns, total);
  ASSERT_EQ(p->kernels.size(), sql.size());
  for (const OpKernel& k : p->kernels) {
    ASSERT_TRUE(sql.count(k.name)) << k.name;
    EXPECT_EQ(k.count, sql[k.name].first) << k.name;
    EXPECT_EQ(k.total_ns, sql[k.name].second) << k.name;
  }
  for (size_t i = 1; i < p->kernels.size(); ++i) EXPECT_GE(p->kernels[i - 1].total_ns, p->kernels[i].total_ns);
  // An aten op is among the names (not only the step markers).
  EXPECT_TRUE(std::any_of(p->kernels.begin(), p->kernels.end(),
                          [](const OpKernel& k) { return absl::StartsWith(k.name, "aten::"); }));

  // One step: only the slices tagged with it.
  auto steps = reader->Query("SELECT DISTINCT step FROM events WHERE run_id = 1 AND step IS NOT NULL ORDER BY step");
  ASSERT_TRUE(steps.ok() && !steps->rows.empty());
  const int step = static_cast<int>(steps->Int(0, "step"));
  auto one = BuildOpProfile(*reader, 1, step);
  ASSERT_TRUE(one.ok()) << one.status();
  int64_t in_step = 0;
  for (const OpKernel& k : one->kernels) in_step += k.count;
  auto n = reader->Query(absl::StrCat("SELECT count(*) AS n FROM events WHERE run_id = 1 AND clock = 'host' AND step = ",
                                      step));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(in_step, n->Int(0, "n"));
  EXPECT_LT(one->total_ns, p->total_ns);
  std::filesystem::remove(db);
}

}  // namespace
}  // namespace shardscope::app
