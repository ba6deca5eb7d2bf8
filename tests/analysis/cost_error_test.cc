// The cost model's error score: median relative error over kernels, zero
// durations left out, and the line the run report prints; and the report's
// kernel section on a file without per-op statistics.
#include "profiler/analysis/cost_error.h"

#include "gtest/gtest.h"
#include "profiler/analysis/run_report.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::analysis {
namespace {

TEST(CostErrorTest, MedianRelativeError) {
  // Errors: 0.5, 0.0, 1.0, 0.25, (zero duration: left out).
  CostModelError e = ScoreCostModel({{100, 150}, {200, 200}, {50, 100}, {400, 300}, {0, 10}}, "cpu");
  EXPECT_EQ(e.profile, "cpu");
  EXPECT_EQ(e.kernels, 4);
  EXPECT_EQ(e.zero_duration, 1);
  EXPECT_DOUBLE_EQ(e.median, (0.25 + 0.5) / 2);
  EXPECT_NEAR(e.p90, 0.85, 1e-12);  // rank 2.7 of 0..3: 0.5 + 0.7 * (1.0 - 0.5)
  // Ratios 1.5, 1.0, 2.0, 0.75 -> median (1.0 + 1.5) / 2.
  EXPECT_DOUBLE_EQ(e.median_ratio, 1.25);
  EXPECT_EQ(CostModelErrorLine(e), "cost model error (cpu profile): median 38% over 4 kernels");
}

TEST(CostErrorTest, OddCountAndEmpty) {
  CostModelError e = ScoreCostModel({{10, 11}, {10, 13}, {10, 30}}, "h100");
  EXPECT_DOUBLE_EQ(e.median, 0.3);
  CostModelError none = ScoreCostModel({}, "cpu");
  EXPECT_EQ(none.kernels, 0);
  EXPECT_EQ(none.median, 0);
}

TEST(CostErrorTest, RunWithoutOpsHasNoScore) {
  std::string path = shardscope::testing::TempDbPath("cost_error_no_ops");
  {
    auto w = store::Writer::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(shardscope::testing::WriteSyntheticRun(**w).ok());
  }
  auto r = store::Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto score = ScoreRunCostModel(*r, 1);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_FALSE(score->has_value());
  auto rep = BuildRunReport(*r, 1);
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_TRUE(rep->kernels.top.empty());
  EXPECT_FALSE(rep->kernels.empty_reason.empty());
  std::string text = RenderText(*rep);
  EXPECT_NE(text.find("Top kernels: "), std::string::npos) << text;
  EXPECT_EQ(text.find("cost model error"), std::string::npos) << text;
}

}  // namespace
}  // namespace shardscope::analysis
