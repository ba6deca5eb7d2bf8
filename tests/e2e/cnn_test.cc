// The cnn sample end to end: `shardscope run cnn` trains (the loss falls),
// compiles its training step once (a new dropout mask every step is data),
// and the database's `ops` table holds the convolutions and window
// reductions under their module paths.
#include <cmath>
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

// One run serves every check: ctest starts each test in its own process, so
// separate tests would train the sample once each.
TEST(CnnE2eTest, LearnsCompilesOnceAndRecordsOpsUnderModulePaths) {
  const std::string db = TempDb("cnn");
  Output run = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn --db ", db, " --steps 20 --quiet"));
  ASSERT_EQ(run.code, 0) << run.text;

  // The loss falls; the held-out loss (eval mode: running statistics, no
  // dropout) is measured after the last step.
  EXPECT_EQ(Q(db, "SELECT COUNT(*) AS n FROM steps").Int(0, "n"), 20);
  const double first = Q(db, "SELECT AVG(loss) AS l FROM steps WHERE step < 5").Real(0, "l");
  const double last = Q(db, "SELECT AVG(loss) AS l FROM steps WHERE step >= 15").Real(0, "l");
  EXPECT_LT(last, 0.75 * first) << first << " -> " << last;
  auto eval = Q(db, "SELECT eval_loss FROM steps WHERE eval_loss IS NOT NULL");
  ASSERT_EQ(eval.rows.size(), 1u);
  EXPECT_LT(eval.Real(0, "eval_loss"), first);

  // One graph for training, one for evaluation: a new dropout mask every step is data.
  EXPECT_EQ(Q(db, "SELECT COUNT(DISTINCT graph_id) AS g FROM executions").Int(0, "g"), 2);
  EXPECT_EQ(
      Q(db, "SELECT COUNT(*) AS n FROM compilations WHERE cache <> 'memory_hit' AND step > 0 AND step < 19").Int(0, "n"),
      0);

  // Convolutions and window reductions under their module paths (forward and gradient ops alike).
  auto convs = Q(db,
                 "SELECT DISTINCT scope FROM ops WHERE opcode = 'stablehlo.convolution' AND scope IS NOT NULL"
                 " ORDER BY scope");
  std::string scopes;
  for (size_t r = 0; r < convs.rows.size(); ++r) scopes += convs.Text(r, "scope") + ";";
  for (const char* s : {"stem.conv;", "layer1.0.conv1;", "layer1.0.conv2;", "layer2.0.conv1;",
                        "layer2.0.shortcut.conv;", "layer3.0.conv2;"})
    EXPECT_NE(scopes.find(s), std::string::npos) << s << " not in " << scopes;
  EXPECT_EQ(Q(db, "SELECT MAX(n) AS n FROM (SELECT COUNT(*) AS n FROM ops WHERE opcode = 'stablehlo.convolution'"
                  " AND scope = 'layer1.0.conv1' GROUP BY graph_id)")
                .Int(0, "n"),
            3);  // in the training graph: forward, input gradient, kernel gradient
  auto pools = Q(db, "SELECT DISTINCT scope FROM ops WHERE opcode = 'stablehlo.reduce_window' ORDER BY scope");
  std::string pscopes;
  for (size_t r = 0; r < pools.rows.size(); ++r) pscopes += pools.Text(r, "scope") + ";";
  EXPECT_NE(pscopes.find("layer2.0.shortcut.pool;"), std::string::npos) << pscopes;
  // Convolutions ran, on the device clock.
  auto k = Q(db, "SELECT SUM(total_ns) AS t, SUM(count) AS c FROM kernel_stats WHERE opcode = 'stablehlo.convolution'");
  EXPECT_GT(k.Int(0, "c"), 0);
  EXPECT_GT(k.Int(0, "t"), 0);
}

// The held-out evaluation after a step runs under that step's number, on
// every clock: no step beyond the run's last, no host step overlapping the
// next, and a simulated run's schedule stays in step order (fleet reads it).
// Before, the evaluation's cuts took the next step's numbers.
TEST(CnnE2eTest, EvaluationPassesBelongToTheStepTheyFollow) {
  for (const std::string mode : {"--mesh 4x1", "--simulate --topology 2x2"}) {
    SCOPED_TRACE(mode);
    const std::string db = TempDb("cnn_eval");
    Output run = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn ", mode,
                                    " --batch 16 --steps 4 --eval-every 2 --quiet --db ", db));
    ASSERT_EQ(run.code, 0) << run.text;
    auto bounds = Q(
        db, "SELECT clock, COUNT(*) AS n, MIN(step) AS lo, MAX(step) AS hi FROM step_bounds GROUP BY clock");
    ASSERT_GE(bounds.rows.size(), 2u);
    for (size_t r = 0; r < bounds.rows.size(); ++r) {
      EXPECT_EQ(bounds.Int(r, "n"), 4) << bounds.Text(r, "clock");
      EXPECT_EQ(bounds.Int(r, "lo"), 0) << bounds.Text(r, "clock");
      EXPECT_EQ(bounds.Int(r, "hi"), 3) << bounds.Text(r, "clock");
    }
    // The host's steps follow one another.
    EXPECT_EQ(
        Q(db,
          "SELECT COUNT(*) AS n FROM step_bounds a JOIN step_bounds b ON a.run_id = b.run_id"
          " AND a.clock = 'host' AND b.clock = 'host' AND b.step = a.step + 1 WHERE b.start_ns < a.end_ns")
            .Int(0, "n"),
        0);
    // Steps 1 and 3 ran the training program and the evaluation's two batches.
    auto per_step = Q(db, "SELECT step, COUNT(*) AS n FROM executions GROUP BY step ORDER BY step");
    ASSERT_EQ(per_step.rows.size(), 4u);
    for (size_t r = 0; r < 4; ++r) EXPECT_EQ(per_step.Int(r, "n"), r % 2 == 1 ? 3 : 1) << "step " << r;
    Output fleet = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " fleet ", db));
    EXPECT_EQ(fleet.code, 0) << fleet.text;
    EXPECT_NE(fleet.text.find("4 steps analysed"), std::string::npos) << fleet.text;
  }
}

// --autocast bf16: the convolutions take bf16 operands and return f32, and
// the run still learns like the f32 one.
TEST(CnnE2eTest, AutocastRunsConvolutionsOnBf16Operands) {
  const std::string db = TempDb("cnn_autocast");
  Output run = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn --db ", db, " --steps 4 --eval-every 0 --autocast bf16 --quiet"));
  ASSERT_EQ(run.code, 0) << run.text;
  auto g = e2e::Q(db, "SELECT ir_text FROM graphs ORDER BY graph_id LIMIT 1");
  ASSERT_EQ(g.rows.size(), 1u);
  const std::string ir = g.Text(0, "ir_text");
  EXPECT_NE(ir.find("stablehlo.convolution"), std::string::npos);
  EXPECT_NE(ir.find("x16x3x3xbf16>) -> tensor<32x16x32x32xf32>"), std::string::npos) << ir.substr(0, 4000);
  auto steps = e2e::Q(db, "SELECT loss FROM steps ORDER BY step");
  ASSERT_EQ(steps.rows.size(), 4u);
  for (size_t r = 0; r < steps.rows.size(); ++r) EXPECT_TRUE(std::isfinite(steps.Real(r, "loss", NAN)));
}

}  // namespace
}  // namespace shardscope
