// The comparison's statistics: robust spreads and the noise rule that decides
// faster, slower and unchanged.
#include "profiler/analysis/compare.h"

#include <cmath>

#include <gtest/gtest.h>

namespace shardscope::analysis {
namespace {

TEST(Compare, SpreadIsRobustToOneOutlier) {
  Spread s = SpreadOf({10, 11, 9, 10, 1000});  // a compile step among five
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 10);
  EXPECT_DOUBLE_EQ(s.mad, 1);
  EXPECT_NEAR(s.StandardError(), 1.2533 * 1.4826 / std::sqrt(5.0), 1e-9);
  EXPECT_EQ(SpreadOf({}).n, 0);
}

TEST(Compare, ChangesCountOnlyBeyondTheMeasuredNoise) {
  const Spread a = SpreadOf({100, 102, 98, 101, 99, 100});
  // Within three standard errors: unchanged.
  Delta same = Classify(a, SpreadOf({101, 100, 99, 102, 100, 101}));
  EXPECT_EQ(same.change, Change::kUnchanged);
  EXPECT_TRUE(same.noise_measured);
  EXPECT_GT(same.threshold, std::abs(same.diff));
  // Far beyond: slower, and faster the other way.
  EXPECT_EQ(Classify(a, SpreadOf({120, 121, 119, 122, 120, 118})).change, Change::kSlower);
  EXPECT_EQ(Classify(SpreadOf({120, 121, 119, 122, 120, 118}), a).change, Change::kFaster);
  // A deterministic clock has no noise: any difference counts, none is unchanged.
  EXPECT_EQ(Classify(SpreadOf({50, 50, 50}), SpreadOf({50, 50, 50})).change, Change::kUnchanged);
  EXPECT_EQ(Classify(SpreadOf({50, 50, 50}), SpreadOf({51, 51, 51})).change, Change::kSlower);
  // Present on one side only.
  EXPECT_EQ(Classify(Spread{}, a).change, Change::kAdded);
  EXPECT_EQ(Classify(a, Spread{}).change, Change::kRemoved);
}

TEST(Compare, TooFewStepsFallBackToAFixedShareAndSaySo) {
  Delta d = Classify(SpreadOf({100, 100}), SpreadOf({108, 108}));
  EXPECT_FALSE(d.noise_measured);
  EXPECT_DOUBLE_EQ(d.threshold, kFallbackThreshold * 100);
  EXPECT_EQ(d.change, Change::kUnchanged);
  EXPECT_EQ(Classify(SpreadOf({100, 100}), SpreadOf({115, 115})).change, Change::kSlower);
}

}  // namespace
}  // namespace shardscope::analysis
