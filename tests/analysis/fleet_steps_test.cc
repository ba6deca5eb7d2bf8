// The fleet diagnosis's fast paths against plain reference ones: leave-one-out
// medians (O(n) against a sort per value), the what-if's re-schedule (a whole
// segment added at once against op by op, including times that cross a
// power of two and chips scaled by a fraction), each chip's weighted median
// ratio (histogram, then its median's bucket, against a sort; a bucket of one
// ratio, and equal ratios merged), and kernels compared chip against chip
// column by column against matching them by name.
#include "profiler/analysis/fleet_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
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
  std::vector<double> t(n), f(n, 1.0), fw(n, 1.0);
  std::vector<size_t> pos(n, 0);
  for (const auto& [d, x] : change.scale)
    for (size_t i = 0; i < n; ++i)
      if (s.devices[i] == d) f[i] = x;
  for (const auto& [d, x] : change.wait_scale)
    for (size_t i = 0; i < n; ++i)
      if (s.devices[i] == d) fw[i] = x;
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
      t[i] += ops[k].collective ? ops[k].dur : ops[k].dur * (ops[k].host_wait ? fw[i] : f[i]);
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
        // A collective without a flow (not waited at) now and then, a host wait (a pause) too.
        op.kind = rng() % 7 ? (rng() % 5 ? kCompute : kHostWait) : kCollective;
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
      if (w >= 2)  // a pause taken out, whole or in part
        for (const auto& [d, ops] : step.data.ops)
          if (rng() % 3 == 0) change.wait_scale[d] = static_cast<double>(rng() % 3) / 2;
      if (w == 3 && !by_flow.empty()) change.collective_ns[by_flow.begin()->first] = 123;
      scaled += !change.scale.empty() || !change.wait_scale.empty();
      ASSERT_EQ(Replay(rs, change), ReplayOpByOp(rs, change)) << "trial " << trial << " what-if " << w;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 1200);
  EXPECT_GT(scaled, 500);
}

// A ratio in bucket b (256 per doubling, bucket 0 from 1), `at` of the way across.
double InBucket(int b, double at = 0.5) {
  const int doubling = b >= 0 ? b / 256 : -((-b + 255) / 256);
  return std::ldexp(1 + (b - 256 * doubling + at) / 256, doubling);
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
  auto in_bucket = [](int b) { return InBucket(b); };
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
  for (const auto& [b, w, one] : h.Buckets()) {
    sum += w;
    if (b == 230) {
      ++b230;
      EXPECT_EQ(w, 13);
    }
  }
  EXPECT_EQ(sum, 96);
  EXPECT_EQ(b230, 1);
  EXPECT_EQ(RatioBucket(in_bucket(230)), 230);
  // The buckets keep the ratios' order, 256 per doubling, and a bucket's edges fall in it.
  for (int b : {-700, -257, -256, -255, -1, 0, 1, 255, 256, 511, 900})
    for (double at : {0.0, 0.5, 0.999}) EXPECT_EQ(RatioBucket(InBucket(b, at)), b) << b << " " << at;
  EXPECT_EQ(RatioBucket(1.0), 0);
  EXPECT_EQ(RatioBucket(2.0), 256);
  EXPECT_EQ(RatioBucket(0.5), -256);
  EXPECT_EQ(RatioBucket(std::nextafter(1.0, 0.0)), -1);
  EXPECT_EQ(RatioBucket(0.0), INT32_MIN);
  EXPECT_EQ(RatioBucket(-1.0), INT32_MIN);
  std::mt19937_64 rng(2);
  for (int k = 0; k < 10000; ++k) {
    const double x = std::exp(std::normal_distribution<double>(0, 2)(rng)), y = x * (1 + 1e-9 * (rng() % 5000));
    EXPECT_LE(RatioBucket(x), RatioBucket(y));
  }
  EXPECT_EQ(h.far.count(230), 1u);  // the case the merge in Buckets() is for
}

// A bucket that holds one ratio (a pod without jitter: every kernel at its
// peers' time) gives its median with no second look; one more ratio in it, or
// in the warm-up's tallies merged later, makes it need the look again.
TEST(FleetRatios, ABucketOfOneRatioNeedsNoSecondLook) {
  auto in_bucket = [](int b, double at) { return InBucket(b, at); };
  for (int trial = 0; trial < 4; ++trial) {
    RatioHist first, rest;
    std::vector<std::pair<double, double>> all;
    auto add = [&](RatioHist& h, double x, double w) {
      h.Add(x, w);
      all.push_back({x, w});
    };
    for (int k = 0; k < 500; ++k) add(rest, 1.0, 100 + k % 7);         // the bulk, at exactly 1
    for (int k = 0; k < 100; ++k) add(rest, in_bucket(3, 0.5), 90);    // a few buckets up
    for (int k = 0; k < 100; ++k) add(first, in_bucket(-4, 0.5), 80);  // a few down, in the warm-up's
    if (trial == 1) add(rest, in_bucket(0, 0.9), 1);                   // another ratio in bucket 0
    if (trial == 2) add(first, in_bucket(0, 0.1), 2);                  // ... in the tallies merged later
    if (trial == 3) add(first, 1.0, 3);                                // the same ratio, merged later
    rest.Merge(std::move(first));
    MedianAt m = FindMedianBucket(rest);
    ASSERT_TRUE(m.known);
    EXPECT_EQ(m.bucket, 0);
    EXPECT_EQ(m.NeedsPairs(), trial == 1 || trial == 2) << "trial " << trial;
    if (m.NeedsPairs())
      for (const auto& [x, w] : all)
        if (RatioBucket(x) == m.bucket) m.Keep(x, w);
    EXPECT_EQ(WeightedMedian(rest, m), SortedWeightedMedian(all)) << "trial " << trial;
  }
}

// The second look's pairs of equal ratios are merged as they come, so a
// bucket of few distinct ratios stays small; the median is the sorted one.
TEST(FleetRatios, KeptPairsOfEqualRatiosAreMerged) {
  std::mt19937_64 rng(11);
  for (int distinct : {1, 3, 40, 5000}) {
    RatioHist h;
    std::vector<std::pair<double, double>> all;
    for (int k = 0; k < 100000; ++k) {
      const double x = 1 + static_cast<double>(rng() % static_cast<uint64_t>(distinct)) * 1e-7;
      const double w = static_cast<double>(1 + rng() % 4000) / 2;  // whole or half nanoseconds
      h.Add(x, w);
      all.push_back({x, w});
    }
    MedianAt m = FindMedianBucket(h);
    ASSERT_TRUE(m.known);
    ASSERT_EQ(m.NeedsPairs(), distinct > 1);
    size_t most = 0;
    if (m.NeedsPairs())
      for (const auto& [x, w] : all)
        if (RatioBucket(x) == m.bucket) {
          m.Keep(x, w);
          most = std::max(most, m.pairs.size());
        }
    if (distinct <= 40) {
      EXPECT_LE(most, 256u) << distinct << " ratios";
    }
    EXPECT_EQ(WeightedMedian(h, m), SortedWeightedMedian(all)) << distinct << " ratios";
  }
}

// A step of `chips` chips, each running `kernels` (names from a few, so the
// same name recurs) between collectives and host waits.
StepData MakeStep(std::mt19937_64& rng, int chips, const std::vector<int32_t>& kernels) {
  StepData s;
  s.step = 3;
  for (int d = 0; d < chips; ++d) {
    std::vector<Op>& ops = s.ops[d * 2 + 1];  // sparse device ids
    int64_t t = 0;
    for (size_t k = 0; k < kernels.size(); ++k) {
      Op op;
      op.id = static_cast<int64_t>(ops.size());
      op.start = t;
      op.name = kernels[k];
      op.kind = k % 5 == 4 ? kTransfer : kCompute;
      // Often equal (ties at the median), sometimes zero or negative.
      op.dur = rng() % 3 ? 1000 + static_cast<int64_t>(rng() % 8) * 100 : static_cast<int64_t>(rng() % 5) - 1;
      t += std::max<int64_t>(op.dur, 0);
      ops.push_back(op);
      if (k % 7 == 6) {  // a collective and a host wait: not kernels
        Op c = op;
        c.kind = kCollective;
        c.name = 99;
        ops.push_back(c);
        c.kind = kHostWait;
        ops.push_back(c);
      }
    }
  }
  return s;
}

// (chip, ratio, weight), sorted: the emits in no set order.
template <typename F>
std::vector<std::tuple<int, double, double>> Emitted(const F& ratios) {
  std::vector<std::tuple<int, double, double>> out;
  ratios([&](int d, double x, double w) { out.push_back({d, x, w}); });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FleetRatios, KernelsComparedColumnByColumnAsByName) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int chips = 1 + trial % 9;
    std::vector<int32_t> kernels;
    for (int k = 0; k < 5 + trial % 40; ++k) kernels.push_back(static_cast<int32_t>(rng() % 6));
    StepData s = MakeStep(rng, chips, kernels);
    const auto by_name = Emitted([&](const auto& emit) { KernelRatiosByName(s, 100, emit); });
    bool column = false;
    const auto by_column = Emitted([&](const auto& emit) { column = KernelRatiosByColumn(s, emit); });
    EXPECT_EQ(column, chips > 1);
    if (column) {
      EXPECT_EQ(by_column, by_name) << "trial " << trial;
    }
    EXPECT_EQ(Emitted([&](const auto& emit) { KernelRatios(s, 100, emit); }), by_name);
    // Chips whose kernels differ (one missing, one renamed, one more): by name, as before.
    if (chips > 2) {
      for (int change = 0; change < 3; ++change) {
        StepData t = s;
        std::vector<Op>& ops = t.ops.rbegin()->second;
        if (change == 0) ops.erase(ops.begin());
        if (change == 1) ops.front().name = 42;
        if (change == 2) ops.push_back(ops.front());
        EXPECT_FALSE(KernelRatiosByColumn(t, [](int, double, double) { FAIL() << "emitted"; }));
        EXPECT_EQ(Emitted([&](const auto& emit) { KernelRatios(t, 100, emit); }),
                  Emitted([&](const auto& emit) { KernelRatiosByName(t, 100, emit); }));
      }
    }
  }
}

}  // namespace
}  // namespace shardscope::analysis::fleet_internal
