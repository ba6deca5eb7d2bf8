// The fleet diagnosis's fast paths against plain reference ones: leave-one-out
// medians (O(n) against a sort per value), the what-if's re-schedule (a whole
// segment added at once against op by op, including times that cross a
// power of two and chips scaled by a fraction), and each chip's weighted
// median ratio (histogram, then its median's bucket, against a sort).
#include "profiler/analysis/fleet_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "profiler/analysis/fleet_ratios.h"

namespace shardscope::analysis::fleet_internal {
namespace {

double MedianOfOthers(const std::vector<double>& v, size_t j) {
  std::vector<double> others;
  for (size_t k = 0; k < v.size(); ++k)
    if (k != j) others.push_back(v[k]);
  return Median(others);
}

TEST(FleetSteps, LeaveOneOutMediansMatchASortPerValue) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 40;
    const int range = 1 + static_cast<int>(rng() % 12);  // small ranges: many ties
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<double>(rng() % range) + (rng() % 2 ? 0.5 : 0.0);
    const std::vector<double> got = LeaveOneOutMedians(v);
    ASSERT_EQ(got.size(), n);
    for (size_t j = 0; j < n; ++j)
      ASSERT_EQ(got[j], n < 2 ? 0.0 : MedianOfOthers(v, j)) << "trial " << trial << " n " << n << " j " << j;
  }
}

// Replay as it was written first: every op added one by one.
int64_t ReplayOpByOp(const ReplayStep& s, const Change& change) {
  const size_t n = s.devices.size();
  std::vector<double> t(n), f(n, 1.0);
  std::vector<size_t> pos(n, 0);
  for (const auto& [d, x] : change.scale)
    for (size_t i = 0; i < n; ++i)
      if (s.devices[i] == d) f[i] = x;
  double t0 = 1e300;
  for (size_t i = 0; i < n; ++i) {
    t[i] = static_cast<double>(s.first_start[i]);
    t0 = std::min(t0, t[i]);
  }
  std::vector<int32_t> arrived(s.flows.size(), 0);
  std::vector<int32_t> work;
  for (size_t i = n; i-- > 0;) work.push_back(static_cast<int32_t>(i));
  while (!work.empty()) {
    const int32_t i = work.back();
    work.pop_back();
    const auto& ops = s.ops[i];
    size_t& k = pos[i];
    while (k < ops.size() && ops[k].sync < 0) {
      t[i] += ops[k].collective ? ops[k].dur : ops[k].dur * f[i];
      ++k;
    }
    if (k == ops.size()) continue;
    const int32_t in = ops[k].sync;
    if (++arrived[in] < s.need[in]) continue;
    double start = 0;
    for (int32_t m : s.members[in]) start = std::max(start, t[m]);
    const auto over = change.collective_ns.find(s.flows[in]);
    const double dur = over == change.collective_ns.end() ? s.proper[in] : over->second;
    for (int32_t m : s.members[in]) {
      t[m] = start + dur;
      ++pos[m];
      work.push_back(m);
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (pos[i] < s.ops[i].size()) return -1;
  double end = 0;
  for (double x : t) end = std::max(end, x);
  return static_cast<int64_t>(end - t0);
}

// A step of `chips` chips from `t0` on: kernels of odd lengths between
// collectives of random groups (every chip in the first), an unmatched
// collective now and then, a negative duration rarely.
struct RandomStep {
  StepData data;
  std::map<int64_t, Instance> instances;
};
RandomStep MakeStep(std::mt19937_64& rng, int chips, int64_t t0) {
  RandomStep r;
  const int collectives = 1 + static_cast<int>(rng() % 5);
  std::vector<std::vector<int>> groups(collectives);
  for (int c = 0; c < collectives; ++c)
    for (int d = 0; d < chips; ++d)
      if (c == 0 || rng() % 3) groups[c].push_back(d);
  int64_t id = 0;
  for (int d = 0; d < chips; ++d) {
    std::vector<Op>& ops = r.data.ops[d * 2 + 1];  // device ids need not be dense
    int64_t t = t0 + static_cast<int64_t>(rng() % 1000);
    for (int c = 0; c <= collectives; ++c) {
      const int kernels = static_cast<int>(rng() % 6);
      for (int k = 0; k < kernels; ++k) {
        Op op;
        op.id = id++;
        op.kind = rng() % 7 ? kCompute : kCollective;  // a collective without a flow: not waited at
        op.start = t;
        op.dur = rng() % 50 == 0 ? -3 : static_cast<int64_t>(rng() % 2'000'000'000) + 1;
        t += std::max<int64_t>(op.dur, 0);
        ops.push_back(op);
      }
      if (c == collectives) break;
      if (std::find(groups[c].begin(), groups[c].end(), d) == groups[c].end()) continue;
      Op op;
      op.id = id++;
      op.kind = kCollective;
      op.start = t;
      op.dur = 1000;
      op.flow = 100 + c;
      ops.push_back(op);
      Instance& in = r.instances[op.flow];
      in.flow = op.flow;
      in.members.push_back({d * 2 + 1, t, t, op.dur});
      in.proper_ns = 777 + c;
      t += op.dur;
    }
  }
  for (auto it = r.instances.begin(); it != r.instances.end();)
    it = it->second.members.size() < 2 ? r.instances.erase(it) : std::next(it);
  return r;
}

TEST(FleetSteps, ReplayGivesWhatAddingOpByOpGives) {
  std::mt19937_64 rng(11);
  const int64_t kTwo34 = int64_t{1} << 34;  // a step's times cross it: adds there round
  int compared = 0, scaled = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int chips = 2 + static_cast<int>(rng() % 7);
    RandomStep step = MakeStep(rng, chips, kTwo34 - static_cast<int64_t>(rng() % 6'000'000'000));
    std::map<int64_t, Instance*> by_flow;
    for (auto& [flow, in] : step.instances) by_flow[flow] = &in;
    const ReplayStep rs = IndexStep(step.data, by_flow);
    for (int w = 0; w < 4; ++w) {
      Change change;
      if (w > 0)
        for (const auto& [d, ops] : step.data.ops)
          if (rng() % 3 == 0) change.scale[d] = 0.5 + static_cast<double>(rng() % 1000) / 1999.0;
      if (w == 3 && !by_flow.empty()) change.collective_ns[by_flow.begin()->first] = 123;
      scaled += !change.scale.empty();
      ASSERT_EQ(Replay(rs, change), ReplayOpByOp(rs, change)) << "trial " << trial << " what-if " << w;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 1200);
  EXPECT_GT(scaled, 500);
}

// The weighted median by sorting every (ratio, weight).
double SortedWeightedMedian(std::vector<std::pair<double, double>> all) {
  if (all.empty()) return 1.0;
  std::sort(all.begin(), all.end());
  double total = 0;
  for (const auto& [x, w] : all) total += w;
  double acc = 0;
  for (const auto& [x, w] : all)
    if ((acc += w) >= total / 2) return x;
  return all.back().first;
}

TEST(FleetRatios, HistogramThenMedianBucketGiveTheSortedWeightedMedian) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> jitter(0, 0.05);
  for (int trial = 0; trial < 200; ++trial) {
    // Steps tallied apart and merged (the warm-up keeps its own until the
    // end); a slow chip's ratios drift by up to 8%.
    const double drift = static_cast<double>(rng() % 9) / 100;
    RatioHist first, rest;
    std::vector<std::pair<double, double>> all;
    for (int n = 0; n < 6; ++n)
      for (int k = 0; k < 300; ++k) {
        const double med = static_cast<double>(1000 + rng() % 100000) / 2;  // whole or half nanoseconds
        const double ns = std::round(med * (1 + (n ? drift : 0.0)) * std::exp(jitter(rng)));
        (n == 0 ? first : rest).Add(ns / med, med);
        all.push_back({ns / med, med});
      }
    rest.Merge(std::move(first));
    MedianAt m = FindMedianBucket(rest);
    ASSERT_TRUE(m.known);
    for (const auto& [x, w] : all)  // the second look: that bucket's ratios only
      if (RatioBucket(x) == m.bucket) m.pairs.push_back({x, w});
    ASSERT_LT(m.pairs.size(), all.size() / 10);
    ASSERT_EQ(WeightedMedian(rest, m), SortedWeightedMedian(all)) << "trial " << trial;
  }
}

TEST(FleetRatios, FarBucketsAndEmptyHistograms) {
  RatioHist h;
  MedianAt none = FindMedianBucket(h);
  EXPECT_FALSE(none.known);
  EXPECT_EQ(WeightedMedian(h, none), 1.0);
  // Ratios doublings apart (the vector holds one doubling), a zero ratio,
  // and bucket 230 first in the map (too far from bucket 0) and later in the
  // vector grown to bucket 220.
  auto in_bucket = [](int b) { return std::exp2((b + 0.5) / 256); };
  std::vector<std::pair<double, double>> all = {
      {1.0, 10},           {0.0, 1},  {300.0, 2},          {1.0 / 64, 3}, {1.01, 4}, {in_bucket(230), 5},
      {in_bucket(220), 6}, {20.0, 7}, {in_bucket(230), 8}, {1.02, 50}};
  for (const auto& [x, w] : all) h.Add(x, w);
  MedianAt m = FindMedianBucket(h);
  ASSERT_TRUE(m.known);
  for (const auto& [x, w] : all)
    if (RatioBucket(x) == m.bucket) m.pairs.push_back({x, w});
  EXPECT_EQ(WeightedMedian(h, m), SortedWeightedMedian(all));
  double sum = 0;
  int b230 = 0;
  for (const auto& [b, w] : h.Buckets()) {
    sum += w;
    if (b == 230) {
      ++b230;
      EXPECT_EQ(w, 13);
    }
  }
  EXPECT_EQ(sum, 96);
  EXPECT_EQ(b230, 1);
  EXPECT_EQ(RatioBucket(in_bucket(230)), 230);
  EXPECT_EQ(h.far.count(230), 1u);  // the case the merge in Buckets() is for
}

}  // namespace
}  // namespace shardscope::analysis::fleet_internal
