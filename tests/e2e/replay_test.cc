// `shardscope replay`: a stored run's programs parsed again from their IR,
// recompiled (fingerprints computed again and equal to the stored ones) and
// executed on the stored mesh as a new run of the same file, linked to the
// run it replays; imported runs and damaged IR are refused with a reason.
#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

std::string Cli(const std::string& args) { return absl::StrCat(SHARDSCOPE_CLI_BINARY, " ", args); }

TEST(ReplayE2e, RecompilesTheStoredProgramsAndRunsThemAgain) {
  const std::string db = e2e::TempDb("replay_mlp");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 4 --mesh 2x2 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "every fingerprint and op count equals the stored one")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "shardscope diff")) << o.text;
  // The new run says which run it replays.
  auto cfg = e2e::Q(db, "SELECT config_json FROM runs WHERE run_id = 2");
  ASSERT_EQ(cfg.rows.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(cfg.Text(0, "config_json"))["replay_of"], 1);
  // Its programs were compiled anew: the same fingerprints and op counts, computed, not copied.
  auto graphs = e2e::Q(db,
                       "SELECT count(*) AS n FROM graphs a JOIN graphs b ON a.fingerprint = b.fingerprint"
                       " AND a.op_count = b.op_count WHERE a.run_id = 1 AND b.run_id = 2");
  auto stored = e2e::Q(db, "SELECT count(*) AS n FROM graphs WHERE run_id = 1");
  EXPECT_GT(stored.Int(0, "n"), 0);
  EXPECT_EQ(graphs.Int(0, "n"), stored.Int(0, "n"));
  auto misses = e2e::Q(db, "SELECT count(*) AS n FROM compilations WHERE run_id = 2 AND cache = 'miss'");
  EXPECT_EQ(misses.Int(0, "n"), stored.Int(0, "n"));
  // Every stored execution ran again, with its own device timeline.
  auto ex = e2e::Q(db, "SELECT (SELECT count(*) FROM executions WHERE run_id = 1) AS a,"
                       " (SELECT count(*) FROM executions WHERE run_id = 2) AS b");
  EXPECT_EQ(ex.Int(0, "a"), ex.Int(0, "b"));
  auto kernels = e2e::Q(db, "SELECT count(*) AS n FROM slices s JOIN tracks t ON t.run_id = s.run_id AND"
                            " t.track_id = s.track_id WHERE s.run_id = 2 AND t.clock = 'device' AND s.op_id IS NOT NULL");
  EXPECT_GT(kernels.Int(0, "n"), 0);
  // Replaying a replay works the same way (its IR is the same program).
  e2e::Output again = e2e::Shell(Cli("replay " + db + " --run 2 --quiet"));
  EXPECT_EQ(again.code, 0) << again.text;
}

TEST(ReplayE2e, OnAnotherChipTheModeledClockAnswers) {
  const std::string db = e2e::TempDb("replay_h100");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --mesh 2x2 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db + " --profile h100"));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(e2e::Q(db, "SELECT profile FROM runs WHERE run_id = 2").Text(0, "profile"), "h100");
  // An h100 is modeled far faster than this machine's cores.
  EXPECT_TRUE(absl::StrContains(o.text, "B is faster: modeled step")) << o.text;
  e2e::Output bad = e2e::Shell(Cli("replay " + db + " --profile z80"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(absl::StrContains(bad.text, "unknown chip profile 'z80'")) << bad.text;
}

TEST(ReplayE2e, ImportedRunsAndBadArgumentsAreRefusedWithAReason) {
  const std::string db = e2e::TempDb("replay_import");
  ASSERT_EQ(e2e::Shell(Cli(absl::StrCat("import ", SHARDSCOPE_TEST_DATA, "/import/gpu_rank0.json --quiet --db ", db)))
                .code,
            0);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "imported from another tool's trace")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "cannot be replayed")) << o.text;
  e2e::Output none = e2e::Shell(Cli("replay " + db + " --run 9"));
  EXPECT_EQ(none.code, 1);
  EXPECT_TRUE(absl::StrContains(none.text, "has no run 9")) << none.text;
  EXPECT_EQ(e2e::Shell(Cli("replay")).code, 2);
  EXPECT_EQ(e2e::Shell(Cli("replay " + db + " --run x")).code, 2);
}

TEST(ReplayE2e, AStoredProgramThatNoLongerParsesIsNamed) {
  const std::string db = e2e::TempDb("replay_damaged");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 2 --quiet --db " + db)).code, 0);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE graphs SET ir_text = 'func.func @main( garbage' WHERE run_id = 1", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "its stored IR does not parse")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "graph ")) << o.text;
}

}  // namespace
}  // namespace shardscope
