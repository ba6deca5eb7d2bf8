// A chip's kernels against its peers' (see fleet_ratios.h).
#include "profiler/analysis/fleet_ratios.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace shardscope::analysis::fleet_internal {

int32_t RatioBucket(double ratio) {
  if (!(ratio > 0)) return INT32_MIN;
  return static_cast<int32_t>(std::clamp(std::floor(std::log2(ratio) * 256), -1e6, 1e6));
}

void RatioHist::AddWeight(int32_t b, double w) {
  constexpr int64_t kNearSpan = 256,
                    kSlack = 16;  // buckets in the vector at most (one doubling); room to grow
  if (near.empty()) {
    lo = int64_t{b} - kSlack;
    near.assign(3 * kSlack, 0.0);
  }
  int64_t at = int64_t{b} - lo;
  const int64_t size = static_cast<int64_t>(near.size());
  if (at < 0 && size - at + kSlack <= kNearSpan) {
    const int64_t grow = kSlack - at;
    near.insert(near.begin(), static_cast<size_t>(grow), 0.0);
    lo -= grow;
    at += grow;
  } else if (at >= size && at + 1 + kSlack <= kNearSpan) {
    near.resize(static_cast<size_t>(at + 1 + kSlack), 0.0);
  }
  if (at >= 0 && at < static_cast<int64_t>(near.size()))
    near[static_cast<size_t>(at)] += w;
  else
    far[b] += w;
}

void RatioHist::Add(double ratio, double w) {
  AddWeight(RatioBucket(ratio), w);
  if (!count || std::make_pair(ratio, w) > largest) largest = {ratio, w};
  ++count;
  total += w;
}

void RatioHist::Merge(RatioHist&& o) {
  for (size_t k = 0; k < o.near.size(); ++k)
    if (o.near[k] != 0) AddWeight(static_cast<int32_t>(o.lo + static_cast<int64_t>(k)), o.near[k]);
  for (const auto& [b, w] : o.far) AddWeight(b, w);
  if (o.count && (!count || o.largest > largest)) largest = o.largest;
  count += o.count;
  total += o.total;
}

std::vector<std::pair<int32_t, double>> RatioHist::Buckets() const {
  std::vector<std::pair<int32_t, double>> out(far.begin(), far.end());
  for (size_t k = 0; k < near.size(); ++k)
    if (near[k] != 0) out.push_back({static_cast<int32_t>(lo + static_cast<int64_t>(k)), near[k]});
  std::sort(out.begin(), out.end());
  // A bucket the vector grew over after some of its weights went to the map:
  // summed (exactly: the weights are whole nanoseconds or halves).
  size_t n = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    if (n > 0 && out[n - 1].first == out[k].first)
      out[n - 1].second += out[k].second;
    else
      out[n++] = out[k];
  }
  out.resize(n);
  return out;
}

MedianAt FindMedianBucket(const RatioHist& h) {
  double acc = 0;
  for (const auto& [b, w] : h.Buckets()) {
    if (acc + w >= h.total / 2) return {true, b, acc, {}};
    acc += w;
  }
  return {};
}

double WeightedMedian(const RatioHist& h, MedianAt& m) {
  if (h.count == 0) return 1.0;
  if (m.known) {
    std::sort(m.pairs.begin(), m.pairs.end());
    double acc = m.below;
    for (const auto& [x, w] : m.pairs)
      if ((acc += w) >= h.total / 2) return x;
  }
  return h.largest.first;
}

}  // namespace shardscope::analysis::fleet_internal
