// A database written before `steps.eval_loss` existed gains the column when
// a writer opens it, keeps what it held, and takes new steps with eval losses.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"

namespace shardscope::store {
namespace {

TEST(Migration, OldStepsTableGainsEvalLoss) {
  std::string path = absl::StrCat(::testing::TempDir(), "/old_", getpid(), ".db");
  std::remove(path.c_str());
  {
    // The schema as it was: steps without eval_loss, one finished run, one step.
    std::string old = absl::StrReplaceAll(
        SchemaSql(), {{"  eval_loss REAL,                           -- held-out loss after this step, when measured\n", ""}});
    ASSERT_EQ(old.find("eval_loss"), std::string::npos) << "the schema text changed; update this test";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql = old + R"(
      INSERT INTO meta VALUES ('schema_version', '1'), ('tool', 'shardscope');
      INSERT INTO runs(run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,
                       tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)
        VALUES (1, 'mlp', '1x1', 'data,model', 'dp', '{}', '1 host x 1 chip', 'cpu', 'host,device', '0.1.0', 1,
                1, 1, '2026-11-01T00:00:00Z', 0, 'finished');
      INSERT INTO steps VALUES (1, 0, 2.5, 1000);)";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    trace::RunRecord run;
    run.sample = "llama";
    run.mesh = "1x1";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    trace::StepRecord s{4, 1.5, 2000};
    s.has_eval_loss = true;
    s.eval_loss = 1.75;
    (*w)->Record(s);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT run_id, step, loss, eval_loss FROM steps ORDER BY run_id");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_FALSE(q->rows[0][3].has_value());  // the old step: no eval loss
  EXPECT_DOUBLE_EQ(q->Real(1, "eval_loss"), 1.75);
  EXPECT_DOUBLE_EQ(q->Real(0, "loss"), 2.5);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope::store
