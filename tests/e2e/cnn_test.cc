// The cnn sample end to end: `shardscope run cnn` trains (the loss falls),
// compiles its training step once (a new dropout mask every step is data),
// and the database's `ops` table holds the convolutions and window
// reductions under their module paths.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using e2e::Output;
using e2e::Q;
using e2e::Shell;
using e2e::TempDb;

class CnnE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(TempDb("cnn"));
    run_ = new Output(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn --db ", *db_, " --steps 20 --quiet")));
  }
  static std::string* db_;
  static Output* run_;
};
std::string* CnnE2eTest::db_;
Output* CnnE2eTest::run_;

TEST_F(CnnE2eTest, TheLossFalls) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  auto first = Q(*db_, "SELECT AVG(loss) AS l FROM steps WHERE step < 5");
  auto last = Q(*db_, "SELECT AVG(loss) AS l FROM steps WHERE step >= 15");
  EXPECT_EQ(Q(*db_, "SELECT COUNT(*) AS n FROM steps").Int(0, "n"), 20);
  EXPECT_LT(last.Real(0, "l"), 0.75 * first.Real(0, "l")) << first.Real(0, "l") << " -> " << last.Real(0, "l");
  // The held-out loss (eval mode: running statistics, no dropout) is measured at the end.
  auto eval = Q(*db_, "SELECT eval_loss FROM steps WHERE eval_loss IS NOT NULL");
  ASSERT_EQ(eval.rows.size(), 1u);
  EXPECT_LT(eval.Real(0, "eval_loss"), first.Real(0, "l"));
}

TEST_F(CnnE2eTest, OneGraphForTrainingOneForEvaluation) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  EXPECT_EQ(Q(*db_, "SELECT COUNT(DISTINCT graph_id) AS g FROM executions").Int(0, "g"), 2);
  EXPECT_EQ(Q(*db_, "SELECT COUNT(*) AS n FROM compilations WHERE cache <> 'memory_hit' AND step > 0 AND step < 19")
                .Int(0, "n"),
            0);
}

TEST_F(CnnE2eTest, OpsCarryModulePaths) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  auto convs = Q(*db_,
                 "SELECT DISTINCT scope FROM ops WHERE opcode = 'stablehlo.convolution' AND scope IS NOT NULL"
                 " ORDER BY scope");
  std::string scopes;
  for (size_t r = 0; r < convs.rows.size(); ++r) scopes += convs.Text(r, "scope") + ";";
  for (const char* s : {"stem.conv;", "layer1.0.conv1;", "layer1.0.conv2;", "layer2.0.conv1;",
                        "layer2.0.shortcut.conv;", "layer3.0.conv2;"})
    EXPECT_NE(scopes.find(s), std::string::npos) << s << " not in " << scopes;
  auto pools = Q(*db_, "SELECT DISTINCT scope FROM ops WHERE opcode = 'stablehlo.reduce_window' ORDER BY scope");
  std::string pscopes;
  for (size_t r = 0; r < pools.rows.size(); ++r) pscopes += pools.Text(r, "scope") + ";";
  EXPECT_NE(pscopes.find("layer2.0.shortcut.pool;"), std::string::npos) << pscopes;
  // Convolutions are the bulk of the work, and they ran.
  auto k = Q(*db_,
             "SELECT SUM(total_ns) AS t, SUM(count) AS c FROM kernel_stats WHERE opcode = 'stablehlo.convolution'");
  EXPECT_GT(k.Int(0, "c"), 0);
  EXPECT_GT(k.Int(0, "t"), 0);
}

}  // namespace
}  // namespace shardscope
