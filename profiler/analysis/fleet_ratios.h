// A chip's kernels against its peers' (the fleet diagnosis's score for a
// chip, fleet.cc): per step, each kernel's time over its peers' median for
// the same kernel, weighted by that median; over the analysed steps, the
// weighted median of those ratios. A pod of 4096 chips has tens of millions
// of them, too many to keep: a histogram by ratio finds the median's bucket
// in a first look at the steps, and a second look gathers only the ratios of
// that bucket, enough for the exact median. Internal to profiler/analysis.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/analysis/fleet_steps.h"

namespace shardscope::analysis::fleet_internal {

// 256 buckets per doubling (0.27% wide): a chip's ratios under 5% jitter fall in ~40.
int32_t RatioBucket(double ratio);

struct RatioHist {
  // bucket -> the weights of its ratios: a chip's ratios fall in a few dozen
  // buckets, kept in a vector from `lo` (added to for every kernel of every
  // chip); the rare ones far from them in a map.
  int64_t lo = 0;
  std::vector<double> near;
  absl::flat_hash_map<int32_t, double> far;
  int64_t count = 0;
  double total = 0;
  std::pair<double, double> largest{0, 0};  // the largest (ratio, weight): the median's fallback

  void Add(double ratio, double w);
  void Merge(RatioHist&& o);
  // (bucket, weight) of every bucket added to, ascending.
  std::vector<std::pair<int32_t, double>> Buckets() const;

 private:
  void AddWeight(int32_t bucket, double w);
};

// Where a chip's weighted median falls: its bucket, the weight below it, and
// (once gathered) the (ratio, weight) pairs of that bucket.
struct MedianAt {
  bool known = false;
  int32_t bucket = 0;
  double below = 0;
  std::vector<std::pair<double, double>> pairs;
};
MedianAt FindMedianBucket(const RatioHist& h);

// The weighted median of h's ratios, given its bucket's pairs in `m`: the
// ratio at which the weights, ascending, first reach half of all (every
// weight is a median of whole nanoseconds, so the sums are exact and this is
// what sorting every ratio gives). 1 with no ratios; h.largest's ratio when
// the bucket is unknown.
double WeightedMedian(const RatioHist& h, MedianAt& m);

// Each chip's kernels against the same kernels of its peers in this step:
// per (kernel name, occurrence), its time over the peers' median, weighted by
// the kernel's time. One kernel slowed by the machine (another process, a
// cache flushed) moves the chip's weighted median little; a chip slower at
// everything moves it by as much. `emit(chip, ratio, weight)` is called for
// every kernel of every chip that has peers.
template <typename Emit>
void KernelRatios(const StepData& s, size_t num_names, const Emit& emit) {
  // (name, occurrence) -> (chip, ns), chips ascending
  absl::flat_hash_map<std::pair<int32_t, int>, std::vector<std::pair<int, int64_t>>> same;
  std::vector<int> seen(num_names, 0);
  std::vector<int32_t> touched;
  for (const auto& [d, ops] : s.ops) {
    for (int32_t name : touched) seen[static_cast<size_t>(name)] = 0;
    touched.clear();
    for (const Op& op : ops)
      if (op.kind == kCompute || op.kind == kTransfer) {
        int& k = seen[static_cast<size_t>(op.name)];
        if (k == 0) touched.push_back(op.name);
        same[{op.name, k++}].push_back({d, op.dur});
      }
  }
  std::vector<double> all;
  for (const auto& [key, by_chip] : same) {
    if (by_chip.size() < 2) continue;
    all.clear();
    for (const auto& [d, ns] : by_chip) all.push_back(static_cast<double>(ns));
    const std::vector<double> peers_median = LeaveOneOutMedians(all);
    size_t k = 0;
    for (const auto& [d, ns] : by_chip) {
      const double med = peers_median[k++];
      if (med > 0) emit(d, ns / med, med);
    }
  }
}

}  // namespace shardscope::analysis::fleet_internal
