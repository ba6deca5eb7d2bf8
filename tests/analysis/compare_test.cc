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

// Two simulated pods: an op's time averaged over 4096 chips moves by a
// fraction of a nanosecond, steadily (no noise): not a change.
TEST(Compare, UnderANanosecondIsNoChange) {
  EXPECT_EQ(Classify(SpreadOf({1692, 1692, 1692, 1692}), SpreadOf({1692.4, 1692.4, 1692.4, 1692.4})).change,
            Change::kUnchanged);
  EXPECT_EQ(Classify(SpreadOf({1692, 1692, 1692, 1692}), SpreadOf({1693.5, 1693.5, 1693.5, 1693.5})).change,
            Change::kSlower);
}

TEST(Compare, TooFewStepsFallBackToAFixedShareAndSaySo) {
  Delta d = Classify(SpreadOf({100, 100}), SpreadOf({108, 108}));
  EXPECT_FALSE(d.noise_measured);
  EXPECT_DOUBLE_EQ(d.threshold, kFallbackThreshold * 100);
  EXPECT_EQ(d.change, Change::kUnchanged);
  EXPECT_EQ(Classify(SpreadOf({100, 100}), SpreadOf({115, 115})).change, Change::kSlower);
}

TEST(Compare, RankTestPIsExactForSmallSamplesWithoutTies) {
  // Every one of 8 below every one of 8: 2 orderings of C(16, 8) = 12870 are as extreme.
  EXPECT_NEAR(RankTestP({1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16}), 2.0 / 12870, 1e-12);
  // Three against three can never be rarer than 2 in 20.
  EXPECT_NEAR(RankTestP({1, 2, 3}, {4, 5, 6}), 0.1, 1e-12);
  // Interleaved: as likely as it gets.
  EXPECT_NEAR(RankTestP({1, 4, 5, 8}, {2, 3, 6, 7}), 1.0, 1e-12);
  // One pair out of order among 4 and 4: U = 1, P(U <= 1) = 2 / 70 on each side.
  EXPECT_NEAR(RankTestP({1, 2, 3, 5}, {4, 6, 7, 8}), 4.0 / 70, 1e-12);
  // 20 against 20, B shifted by 7.5 of 20 ranks: U = 322 of 400; the exact
  // tail (Python's integers) is 0.00066756...
  std::vector<double> a20, b20;
  for (int i = 0; i < 20; ++i) {
    a20.push_back(i);
    b20.push_back(i + 7.5);
  }
  EXPECT_NEAR(RankTestP(a20, b20), 0.0006675619675571313, 1e-12);
  // Symmetric in its arguments.
  EXPECT_DOUBLE_EQ(RankTestP({1, 2, 9}, {3, 4, 5, 6}), RankTestP({3, 4, 5, 6}, {1, 2, 9}));
}

TEST(Compare, RankTestPFallsBackToTheNormalApproximationWithTies) {
  // Every sample equal: nothing to tell apart.
  EXPECT_DOUBLE_EQ(RankTestP({5, 5, 5}, {5, 5, 5}), 1.0);
  // Ties across the sides: U = 8 of 16 pairs, the middle.
  EXPECT_NEAR(RankTestP({1, 3, 3, 5}, {2, 3, 3, 4}), 1.0, 1e-9);
  // 60 against 60 apart: far below any threshold.
  std::vector<double> a, b;
  for (int i = 0; i < 60; ++i) {
    a.push_back(i);
    b.push_back(100 + i);
  }
  EXPECT_LT(RankTestP(a, b), 1e-15);
  // The approximation lands near the exact figure where both apply.
  std::vector<double> a20, b20;
  for (int i = 0; i < 20; ++i) {
    a20.push_back(i);
    b20.push_back(i + 7.5);
  }
  b20.push_back(0);  // one tie sends it to the approximation
  EXPECT_NEAR(RankTestP(a20, b20), 0.0007, 0.0004);
}

TEST(Compare, RanksCallAChangeTheMediansNoiseHides) {
  // Eight steps a side that swing between two levels (a VM's phases), every
  // step of B slower than every step of A: +91% within a median noise of ±93%.
  const Spread a = SpreadOf({10, 11, 12, 13, 20, 21, 22, 23.5}), b = SpreadOf({24, 25, 26, 27, 36, 37, 38, 39});
  const Delta d = Classify(a, b);
  EXPECT_LT(std::abs(d.diff), d.threshold);
  EXPECT_NEAR(d.rank_p, 2.0 / 12870, 1e-12);
  EXPECT_TRUE(d.by_ranks);
  EXPECT_EQ(d.change, Change::kSlower);
  EXPECT_EQ(Classify(b, a).change, Change::kFaster);
  // The same swing on both sides, interleaved: no change by either rule.
  const Delta same = Classify(a, SpreadOf({10.5, 11.5, 12.5, 13.5, 20.5, 21.5, 22.5, 23}));
  EXPECT_EQ(same.change, Change::kUnchanged);
  EXPECT_FALSE(same.by_ranks);
  EXPECT_GT(same.rank_p, 0.5);
  // Too few steps for the ranks to say anything: 3 against 3 is at best p = 0.1.
  const Delta few = Classify(SpreadOf({10, 11, 30}), SpreadOf({31, 32, 60}));
  EXPECT_FALSE(few.by_ranks);
  // A change the medians already call is not the ranks'.
  EXPECT_FALSE(Classify(SpreadOf({100, 102, 98, 101, 99, 100}), SpreadOf({120, 121, 119, 122, 120, 118})).by_ranks);
}

}  // namespace
}  // namespace shardscope::analysis
