// Capture control through `shardscope run`: --trace off records no slice but
// every compilation, execution and step; --trace steps keeps step and program
// slices and no kernel; --trace-steps keeps its window and says what it left
// out in runs.capture_note and the report; bad values are flag errors that
// record nothing. Also the device clock's counters per chip (HBM in use, bytes
// moved) in a default run.
// --trace-ring and --trace-max-mb are the store writer's; these tests check
// them through the CLI, with the notes the writer adds.
#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

// Runs mlp on a 2x2 mesh (data parallel: an all-reduce per gradient) with `flags`.
std::string RunMlp(const std::string& name, const std::string& flags) {
  const std::string db = e2e::TempDb(name);
  e2e::Output o =
      e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --quiet --db ", db, " ", flags));
  EXPECT_EQ(o.code, 0) << o.text;
  return db;
}

int64_t Count(const std::string& db, const std::string& sql) { return e2e::Q(db, sql).Int(0, "n", -1); }

std::string CaptureNote(const std::string& db) {
  return e2e::Q(db, "SELECT capture_note FROM runs WHERE run_id = 1").Text(0, "capture_note");
}

TEST(CaptureE2e, OffRecordsNoSlicesButEverythingElse) {
  const std::string db = RunMlp("capture_off", "--steps 4 --trace off");
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM slices"), 0);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM compilations WHERE cache = 'miss'"), 0);
  EXPECT_GE(Count(db, "SELECT COUNT(*) AS n FROM executions"), 4);
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM steps"), 4);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM metrics"), 0);
  // Counters are not slices: HBM in use is still sampled per chip.
  EXPECT_EQ(Count(db, "SELECT COUNT(DISTINCT device_id) AS n FROM counters WHERE name = 'hbm_bytes_in_use'"), 4);
  EXPECT_EQ(e2e::Q(db, "SELECT config_json FROM runs").Text(0, "config_json").find("\"trace\":\"off\"") !=
                std::string::npos,
            true);
}

TEST(CaptureE2e, StepsKeepsStepAndProgramSlicesAndNoKernel) {
  const std::string db = RunMlp("capture_steps", "--steps 3 --trace steps");
  // Host lanes as in a full capture: each mark_step with its parts.
  EXPECT_GE(Count(db, "SELECT COUNT(*) AS n FROM events WHERE clock = 'host' AND name = 'mark_step'"), 3);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM events WHERE clock = 'host' AND name = 'dispatch'"), 0);
  // Chip lanes: no kernel, collective or transfer; one program slice per chip and program run, per clock.
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM events WHERE clock != 'host' AND "
                      "(op_id IS NOT NULL OR kind IN ('collective', 'transfer'))"),
            0);
  const int64_t runs = Count(db, "SELECT COUNT(*) AS n FROM executions");
  EXPECT_GT(runs, 0);
  for (const char* clock : {"device", "modeled"})
    EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM events WHERE clock = '", clock,
                                     "' AND kind = 'compute' AND name = 'graph ' || graph_id")),
              runs * 4)
        << clock;
  // The report still splits each chip's time (one program slice per run).
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db));
  EXPECT_EQ(report.code, 0) << report.text;
}

TEST(CaptureE2e, StepWindowKeepsOnlyItsSteps) {
  const std::string db = RunMlp("capture_window", "--steps 6 --trace-steps 2:3");
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM slices WHERE step IS NULL OR step NOT IN (2, 3)"), 0);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM slices WHERE step = 2 AND kind = 'collective'"), 0);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM slices WHERE step = 3 AND kind = 'compute'"), 0);
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM steps"), 6);  // every step's row, in the window or not
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM compilations WHERE step = 0"), 1);
}

TEST(CaptureE2e, StepWindowIsInTheCaptureNoteAndTheReport) {
  const std::string db = RunMlp("capture_window_note", "--steps 6 --trace-steps 2:3");
  const std::string note = CaptureNote(db);
  EXPECT_TRUE(absl::StrContains(note, "timeline only for steps 2-3 (--trace-steps 2:3)")) << note;
  EXPECT_TRUE(absl::StrContains(note, "steps 0-1 and 4-5 not captured (--trace-steps 2:3)")) << note;
  for (const char* format : {"text", "md", "json"}) {
    e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db, " --format ", format));
    EXPECT_EQ(report.code, 0) << report.text;
    EXPECT_TRUE(absl::StrContains(report.text, "steps 0-1 and 4-5 not captured")) << format << "\n" << report.text;
  }
}

TEST(CaptureE2e, ModesAreInTheCaptureNote) {
  const std::string off = RunMlp("capture_off_note", "--steps 2 --trace off");
  EXPECT_TRUE(absl::StrContains(CaptureNote(off), "--trace off: no timeline")) << CaptureNote(off);
  const std::string steps = RunMlp("capture_steps_note", "--steps 2 --trace steps");
  EXPECT_TRUE(absl::StrContains(CaptureNote(steps), "--trace steps: kernels not recorded")) << CaptureNote(steps);
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", steps));
  EXPECT_TRUE(absl::StrContains(report.text, "capture: --trace steps: kernels not recorded")) << report.text;
  const std::string all = RunMlp("capture_all_note", "--steps 2");
  EXPECT_EQ(CaptureNote(all), "");  // everything captured: nothing to say
}

// What a capture left out is not measured as zero or as compute: --trace
// steps keeps whole programs (their collectives inside), so the report named
// "bound by compute 99%"; --trace off said "no step-tagged top-level slices"
// and blamed an imported trace for the missing roofline.
TEST(CaptureE2e, TheVerdictSaysWhatTheCaptureLeftOut) {
  const std::string steps = RunMlp("capture_steps_verdict", "--steps 4 --trace steps");
  e2e::Output a = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", steps));
  ASSERT_EQ(a.code, 0) << a.text;
  EXPECT_TRUE(absl::StrContains(a.text, "Verdict: no verdict on what bounds the step: recorded with --trace steps"))
      << a.text;
  EXPECT_FALSE(absl::StrContains(a.text, "bound by compute")) << a.text;
  EXPECT_FALSE(absl::StrContains(a.text, "an imported trace")) << a.text;
  EXPECT_TRUE(absl::StrContains(a.text, "--trace steps: whole programs, collectives inside them)")) << a.text;
  EXPECT_TRUE(absl::StrContains(a.text, "device clock: programs (--trace steps) over idle")) << a.text;
  e2e::Output json = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", steps, " --format json"));
  EXPECT_TRUE(absl::StrContains(json.text, "\"programs_only\": true")) << json.text;
  EXPECT_TRUE(absl::StrContains(json.text, "\"bound\": \"unknown\"")) << json.text;

  // Past step 10 the recompilation row is measurable; the verdict still has no timeline.
  const std::string off = RunMlp("capture_off_verdict", "--steps 12 --trace off");
  e2e::Output b = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", off));
  ASSERT_EQ(b.code, 0) << b.text;
  EXPECT_TRUE(absl::StrContains(b.text, "Verdict: no verdict: recorded with --trace off")) << b.text;
  EXPECT_TRUE(absl::StrContains(b.text, "not measurable: recorded with --trace off (no timeline)")) << b.text;
  EXPECT_FALSE(absl::StrContains(b.text, "an imported trace")) << b.text;
  EXPECT_FALSE(absl::StrContains(b.text, "step-tagged")) << b.text;
}

TEST(CaptureE2e, RingKeepsOnlyTheLastSteps) {
  const std::string db = RunMlp("capture_ring", "--steps 8 --trace-ring 3");
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM slices WHERE step < 5"), 0);
  for (int step = 5; step < 8; ++step)
    EXPECT_GT(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM slices WHERE step = ", step)), 0) << step;
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM steps"), 8);
  EXPECT_TRUE(absl::StrContains(CaptureNote(db), "last 3 steps only")) << CaptureNote(db);
}

TEST(CaptureE2e, SizeCapStopsCapturingAndSaysSo) {
  // A full capture of 150 steps is several MB; slices must stop near 2 MB (an
  // empty file is about 0.7 MB: the schema on 16 KiB pages).
  const std::string db = RunMlp("capture_max_mb", "--steps 150 --trace-max-mb 2");
  EXPECT_EQ(Count(db, "SELECT COUNT(*) AS n FROM steps"), 150);
  // Slices stop part way; the other records go on to the end.
  EXPECT_LT(Count(db, "SELECT MAX(step) AS n FROM slices"), 149);
  EXPECT_GT(Count(db, "SELECT COUNT(*) AS n FROM slices"), 0);
  EXPECT_TRUE(absl::StrContains(CaptureNote(db), "2.0 MB capture limit")) << CaptureNote(db);
}

TEST(CaptureE2e, BadValuesAreFlagErrorsAndRecordNothing) {
  const struct {
    const char* flags;
    const char* says;
  } cases[] = {
      {"--trace foo", "--trace 'foo' is not off, steps or kernels"},
      {"--trace-steps 5:2", "--trace-steps '5:2': the first step 5 is after the last 2"},
      {"--trace-steps 5", "--trace-steps '5' is not a window of steps"},
      {"--trace-steps :", "--trace-steps ':' is not a window of steps"},
      {"--trace-steps 1:x", "--trace-steps 1:x: M 'x' is not an integer"},
      {"--trace-steps 30:40", "--trace-steps 30:40 starts after the run's last step 19 (--steps 20)"},
      {"--trace-ring 0", "--trace-ring '0' is out of range (allowed 1..10000000)"},
      {"--trace-max-mb -1", "--trace-max-mb '-1' is out of range (allowed 1..1048576)"},
      {"--trace off --trace-steps 1:2", "--trace-steps has nothing to limit with --trace off"},
      {"--trace off --trace-ring 5", "--trace-ring has nothing to limit with --trace off"},
      {"--trace", "--trace needs a value"},
  };
  for (const auto& c : cases) {
    const std::string db = e2e::TempDb("capture_bad");
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", db, " ", c.flags));
    EXPECT_EQ(o.code, 2) << c.flags << "\n" << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, c.says)) << c.flags << "\n" << o.text;
    struct stat st {};
    EXPECT_NE(stat(db.c_str(), &st), 0) << c.flags << ": a refused run made " << db;
  }
  e2e::Output help = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run --help"));
  for (const char* flag : {"--trace MODE", "--trace-steps N:M", "--trace-ring N", "--trace-max-mb N"})
    EXPECT_TRUE(absl::StrContains(help.text, flag)) << flag << "\n" << help.text;
}

// The device clock's counters per chip, in a default (kernels) run.
TEST(CaptureE2e, CountersPerChipOnTheDeviceClock) {
  const std::string db = RunMlp("capture_counters", "--steps 3");
  for (int d = 0; d < 4; ++d) {
    const std::string chip = absl::StrCat(d);
    // HBM in use: at least two samples per program run (its peak and its end), never above the budget.
    EXPECT_GE(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM counters WHERE name = 'hbm_bytes_in_use' "
                                     "AND device_id = ", chip)),
              2 * Count(db, "SELECT COUNT(*) AS n FROM executions"))
        << d;
    EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM counters c JOIN devices v USING (run_id, device_id) "
                                     "WHERE c.name = 'hbm_bytes_in_use' AND c.device_id = ", chip,
                                     " AND (c.value <= 0 OR c.value > v.hbm_bytes)")),
              0)
        << d;
    // On the chip's device lane: within the span of its device-clock slices.
    EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM counters WHERE device_id = ", chip,
                                     " AND (ts_ns < (SELECT MIN(start_ns) FROM events WHERE clock = 'device' AND "
                                     "device_id = ", chip, ") OR ts_ns > (SELECT MAX(start_ns + dur_ns) FROM events "
                                     "WHERE clock = 'device' AND device_id = ", chip, "))")),
              0)
        << d;
    // Cumulative bytes never go down.
    EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM counters a JOIN counters b ON a.run_id = b.run_id "
                                     "AND a.device_id = b.device_id AND a.name = b.name AND b.ts_ns > a.ts_ns "
                                     "WHERE a.name = 'collective_bytes_sent' AND b.value < a.value AND "
                                     "a.device_id = ", chip)),
              0)
        << d;
    EXPECT_GT(Count(db, absl::StrCat("SELECT COUNT(*) AS n FROM counters WHERE name = 'host_to_device_bytes' "
                                     "AND device_id = ", chip)),
              0)
        << d;
  }
  // Over the chips, what was sent was received.
  auto totals = e2e::Q(db,
                       "SELECT name, SUM(v) AS total FROM (SELECT device_id, name, MAX(value) AS v FROM counters "
                       "WHERE name IN ('collective_bytes_sent', 'collective_bytes_received') GROUP BY device_id, name) "
                       "GROUP BY name ORDER BY name");
  ASSERT_EQ(totals.rows.size(), 2u);
  EXPECT_GT(totals.Int(0, "total"), 0);
  EXPECT_EQ(totals.Int(0, "total"), totals.Int(1, "total"));
}

}  // namespace
}  // namespace shardscope
