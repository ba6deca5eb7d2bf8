// `shardscope runs`: every run a file holds, with how it ended — a finished
// run, and a run killed mid-way, which reads as ended abnormally with the
// last step that reached the file. While that run still runs, `report` and
// `runs` say so and exit 0.
#include <signal.h>
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

}  // namespace
}  // namespace shardscope
