// `shardscope runs`: every run a file holds, with how it ended — a finished
// run, and a run killed mid-way, which reads as ended abnormally with the
// last step that reached the file. While that run still runs, `report` and
// `runs` say so and exit 0.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

TEST(RunsE2e, ListsFinishedAndKilledRuns) {
  const std::string db = e2e::TempDb("runs_list");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 2 --quiet --db ", db)).code, 0);
  // A long run, killed once a few steps have reached the file.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl(SHARDSCOPE_CLI_BINARY, SHARDSCOPE_CLI_BINARY, "run", "mlp", "--steps", "100000", "--quiet", "--db",
          db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int k = 0; k < 600; ++k) {  // up to 60 s for the second run's third step to land
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto steps = e2e::Q(db, "SELECT COUNT(*) AS n FROM steps WHERE run_id = 2");
    if (steps.Int(0, "n") >= 3) break;
  }
  // While it runs: the report covers what has landed, says the run is still
  // running, and is not an error.
  e2e::Output live = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db));
  EXPECT_EQ(live.code, 0) << live.text;
  EXPECT_TRUE(absl::StrContains(live.text, "running after step")) << live.text;
  e2e::Output live_runs = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db));
  EXPECT_EQ(live_runs.code, 0) << live_runs.text;
  EXPECT_TRUE(absl::StrContains(live_runs.text, "running")) << live_runs.text;
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "finished")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "ended abnormally after step")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "recorded")) << o.text;
  e2e::Output missing = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db, ".missing"));
  EXPECT_EQ(missing.code, 1) << missing.text;
  e2e::Output usage = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs"));
  EXPECT_EQ(usage.code, 2) << usage.text;
}

// Starts `shardscope run mlp` for a long time in a child whose stop signals
// are as a terminal leaves them (`ignore_int`: SIGINT ignored, as for a
// background job of a script), and waits for three steps to reach the file.
pid_t StartLongRun(const std::string& db, bool ignore_int = false) {
  const pid_t child = fork();
  if (child == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
    if (ignore_int) signal(SIGINT, SIG_IGN);
    execl(SHARDSCOPE_CLI_BINARY, SHARDSCOPE_CLI_BINARY, "run", "mlp", "--steps", "1000000", "--quiet", "--db",
          db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int k = 0; k < 600 && child > 0; ++k) {  // the file may not be there yet, nor its tables
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    e2e::Output n = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " query ", db,
                                            " 'SELECT COUNT(*) >= 3 AS ok FROM steps' 2>/dev/null"));
    if (n.code == 0 && absl::StrContains(n.text, "\n1")) break;
  }
  return child;
}

// Ctrl-C or `kill` ends the run as interrupted, every step it recorded kept,
// and the process still dies of the signal (its exit status says so).
TEST(RunsE2e, AStopSignalEndsTheRunAsInterrupted) {
  for (const auto& [sig, name] : {std::pair{SIGINT, "SIGINT (Ctrl-C)"}, std::pair{SIGTERM, "SIGTERM"}}) {
    SCOPED_TRACE(name);
    const std::string db = e2e::TempDb(absl::StrCat("runs_signal_", sig));
    const pid_t child = StartLongRun(db);
    ASSERT_GT(child, 0);
    kill(child, sig);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    // The file is whole on its own, as a finished run leaves it: no -wal
    // holding its steps (a copy of the .db alone lost them, and its status).
    struct stat wal {};
    EXPECT_TRUE(::stat((db + "-wal").c_str(), &wal) != 0 || wal.st_size == 0) << wal.st_size << " bytes of -wal";
    auto run = e2e::Q(db, "SELECT status, (SELECT max(step) FROM steps) AS last FROM runs");
    EXPECT_EQ(run.Text(0, "status"), "interrupted");
    e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db));
    EXPECT_TRUE(absl::StrContains(o.text, absl::StrCat("interrupted by ", name, " after step ", run.Text(0, "last"))))
        << o.text;
    e2e::Output check = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " check ", db));
    EXPECT_EQ(check.code, 0) << check.text;
    e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db));
    EXPECT_EQ(report.code, 0) << report.text;
    EXPECT_TRUE(absl::StrContains(report.text, absl::StrCat("Verdict: interrupted by ", name))) << report.text;
  }
}

// A run its program's error stopped (a simulated pod out of memory) is stored
// as failed with the error; it read "finished" with 0 steps.
TEST(RunsE2e, ARunStoppedByAnErrorIsStoredAsFailed) {
  const std::string db = e2e::TempDb("runs_failed");
  e2e::Output oom =
      e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run llama --simulate --topology 1x1 --batch 2000 --steps 2 --db ", db));
  EXPECT_EQ(oom.code, 1) << oom.text;
  EXPECT_TRUE(absl::StrContains(oom.text, "(run 1 is stored as failed in ")) << oom.text;
  // A cnn batch that does not split over its chips is known before the run:
  // a usage error, nothing stored (it was a run stored as failed).
  e2e::Output batch = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn --mesh 4x1 --batch 3 --steps 2 --db ", db));
  EXPECT_EQ(batch.code, 2) << batch.text;
  EXPECT_TRUE(absl::StrContains(batch.text, "must split evenly over the 4 chips")) << batch.text;
  auto runs = e2e::Q(db, "SELECT r.status, w.note FROM runs r JOIN run_writers w USING (run_id) ORDER BY run_id");
  ASSERT_EQ(runs.rows.size(), 1u);
  EXPECT_EQ(runs.Text(0, "status"), "failed");
  EXPECT_TRUE(absl::StartsWith(runs.Text(0, "note"), "out of memory on every chip (simulated)")) << runs.Text(0, "note");
  e2e::Output listed = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " runs ", db));
  EXPECT_TRUE(absl::StrContains(listed.text, "failed before any step: out of memory")) << listed.text;
  EXPECT_FALSE(absl::StrContains(listed.text, "finished")) << listed.text;
  e2e::Output check = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " check ", db));
  EXPECT_EQ(check.code, 0) << check.text;
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db, " --run 1"));
  EXPECT_TRUE(absl::StrContains(report.text, "failed before any step")) << report.text;
}

// A program that ignores SIGINT (a script's background job) keeps ignoring it.
TEST(RunsE2e, AnIgnoredSignalStaysIgnored) {
  const std::string db = e2e::TempDb("runs_signal_ignored");
  const pid_t child = StartLongRun(db, /*ignore_int=*/true);
  ASSERT_GT(child, 0);
  kill(child, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "the run stopped on an ignored SIGINT";
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
}

}  // namespace
}  // namespace shardscope
