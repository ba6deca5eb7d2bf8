// A chip's kernels against its peers' (see fleet_ratios.h).
#include "profiler/analysis/fleet_ratios.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <limits>

namespace shardscope::analysis::fleet_internal {

namespace {

constexpr double kSeveral = std::numeric_limits<double>::quiet_NaN();  // a bucket of several ratios

// A bucket's one ratio after adding `r` to what it held (weight `w`, one ratio `have`): NaN once two differ.
double OneRatio(double w, double have, double r) { return w == 0 || have == r ? r : kSeveral; }

}  // namespace

int32_t RatioBucket(double ratio) {
  if (!(ratio > 0)) return INT32_MIN;
  // The exponent and the mantissa's top 8 bits (a positive double's bits
  // ascend with it, so the buckets keep the ratios' order): a log2 for every
  // kernel of every chip, twice, was 3% of a pod's diagnosis.
  return static_cast<int32_t>((std::bit_cast<int64_t>(ratio) >> 44) - (int64_t{1023} << 8));
}

void RatioHist::AddWeight(int32_t b, double w, double r) {
  // Most ratios land in the vector as it is (a chip's few dozen buckets): that first.
  if (const int64_t k = int64_t{b} - lo; k >= 0 && k < static_cast<int64_t>(near.size())) {
    near_ratio[static_cast<size_t>(k)] = OneRatio(near[static_cast<size_t>(k)], near_ratio[static_cast<size_t>(k)], r);
    near[static_cast<size_t>(k)] += w;
    return;
  }
  constexpr int64_t kNearSpan = 256,
                    kSlack = 16;  // buckets in the vector at most (one doubling); room to grow
  if (near.empty()) {
    lo = int64_t{b} - kSlack;
    near.assign(3 * kSlack, 0.0);
    near_ratio.assign(3 * kSlack, 0.0);
  }
  int64_t at = int64_t{b} - lo;
  const int64_t size = static_cast<int64_t>(near.size());
  if (at < 0 && size - at + kSlack <= kNearSpan) {
    const int64_t grow = kSlack - at;
    near.insert(near.begin(), static_cast<size_t>(grow), 0.0);
    near_ratio.insert(near_ratio.begin(), static_cast<size_t>(grow), 0.0);
    lo -= grow;
    at += grow;
  } else if (at >= size && at + 1 + kSlack <= kNearSpan) {
    near.resize(static_cast<size_t>(at + 1 + kSlack), 0.0);
    near_ratio.resize(near.size(), 0.0);
  }
  if (at >= 0 && at < static_cast<int64_t>(near.size())) {
    const size_t k = static_cast<size_t>(at);
    near_ratio[k] = OneRatio(near[k], near_ratio[k], r);
    near[k] += w;
  } else {
    Far& f = far[b];
    f.ratio = OneRatio(f.weight, f.ratio, r);
    f.weight += w;
  }
}

void RatioHist::Add(double ratio, double w) {
  AddWeight(RatioBucket(ratio), w, ratio);
  if (!count || std::make_pair(ratio, w) > largest) largest = {ratio, w};
  ++count;
  total += w;
}

void RatioHist::Merge(RatioHist&& o) {
  for (size_t k = 0; k < o.near.size(); ++k)
    if (o.near[k] != 0)
      AddWeight(static_cast<int32_t>(o.lo + static_cast<int64_t>(k)), o.near[k], o.near_ratio[k]);
  for (const auto& [b, f] : o.far) AddWeight(b, f.weight, f.ratio);
  if (o.count && (!count || o.largest > largest)) largest = o.largest;
  count += o.count;
  total += o.total;
}

std::vector<RatioHist::Bucket> RatioHist::Buckets() const {
  std::vector<Bucket> out;
  for (const auto& [b, f] : far) out.push_back({b, f.weight, f.ratio});
  for (size_t k = 0; k < near.size(); ++k)
    if (near[k] != 0)
      out.push_back({static_cast<int32_t>(lo + static_cast<int64_t>(k)), near[k], near_ratio[k]});
  std::sort(out.begin(), out.end(), [](const Bucket& a, const Bucket& b) { return a.bucket < b.bucket; });
  // A bucket the vector grew over after some of its weights went to the map:
  // summed (exactly: the weights are whole nanoseconds or halves).
  size_t n = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    if (n > 0 && out[n - 1].bucket == out[k].bucket) {
      out[n - 1].ratio = OneRatio(out[n - 1].weight, out[n - 1].ratio, out[k].ratio);
      out[n - 1].weight += out[k].weight;
    } else {
      out[n++] = out[k];
    }
  }
  out.resize(n);
  return out;
}

MedianAt FindMedianBucket(const RatioHist& h) {
  MedianAt m;
  double acc = 0;
  for (const RatioHist::Bucket& b : h.Buckets()) {
    if (acc + b.weight >= h.total / 2) {
      m.known = true;
      m.bucket = b.bucket;
      m.below = acc;
      m.one_ratio = b.ratio;
      return m;
    }
    acc += b.weight;
  }
  return m;
}

void MedianAt::Keep(double ratio, double w) {
  pairs.push_back({ratio, w});
  if (pairs.size() < merge_at_) return;
  std::sort(pairs.begin(), pairs.end());
  size_t n = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (n > 0 && pairs[n - 1].first == pairs[k].first)
      pairs[n - 1].second += pairs[k].second;
    else
      pairs[n++] = pairs[k];
  }
  pairs.resize(n);
  merge_at_ = std::max<size_t>(256, 2 * n);  // distinct ratios: sorted again only once they double
}

double WeightedMedian(const RatioHist& h, MedianAt& m) {
  if (h.count == 0) return 1.0;
  if (m.known) {
    // Every ratio of the median's bucket is this one: the walk below would stop at it.
    if (!std::isnan(m.one_ratio)) return m.one_ratio;
    std::sort(m.pairs.begin(), m.pairs.end());
    double acc = m.below;
    for (const auto& [x, w] : m.pairs)
      if ((acc += w) >= h.total / 2) return x;
  }
  return h.largest.first;
}

}  // namespace shardscope::analysis::fleet_internal
