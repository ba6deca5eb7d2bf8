// A chip's kernels against its peers' (the fleet diagnosis's score for a
// chip, fleet.cc): per step, each kernel's time over its peers' median for
// the same kernel, weighted by that median; over the analysed steps, the
// weighted median of those ratios. A pod of 4096 chips has tens of millions
// of them, too many to keep: a histogram by ratio finds the median's bucket
// in a first look at the steps, and a second look gathers only the ratios of
// that bucket, enough for the exact median. Internal to profiler/analysis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/analysis/fleet_steps.h"

namespace shardscope::analysis::fleet_internal {

// 256 buckets per doubling (0.2-0.4% wide), in the ratios' order; bucket 0
// starts at 1. A chip's ratios under 5% jitter fall in ~40.
int32_t RatioBucket(double ratio);

struct RatioHist {
  // bucket -> the weights of its ratios: a chip's ratios fall in a few dozen
  // buckets, kept in a vector from `lo` (added to for every kernel of every
  // chip); the rare ones far from them in a map. Beside each bucket's weight,
  // its one ratio while all it holds are equal (NaN once they differ): a pod
  // without jitter gives every kernel the same ratio, and then the median is
  // known without a second look.
  int64_t lo = 0;
  std::vector<double> near, near_ratio;
  struct Far {
    double weight = 0, ratio = 0;
  };
  absl::flat_hash_map<int32_t, Far> far;
  int64_t count = 0;
  double total = 0;
  std::pair<double, double> largest{0, 0};  // the largest (ratio, weight): the median's fallback

  void Add(double ratio, double w);
  void Merge(RatioHist&& o);
  struct Bucket {
    int32_t bucket = 0;
    double weight = 0;
    double ratio = 0;  // its only ratio; NaN: several
  };
  // Every bucket added to, ascending.
  std::vector<Bucket> Buckets() const;

 private:
  void AddWeight(int32_t bucket, double w, double ratio);
};

// Where a chip's weighted median falls: its bucket, the weight below it, the
// bucket's only ratio when it holds one (the median then, with no second
// look), and (once gathered) the (ratio, weight) pairs of that bucket.
struct MedianAt {
  bool known = false;
  int32_t bucket = 0;
  double below = 0;
  double one_ratio = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<double, double>> pairs;

  // Whether the second look must gather this chip's pairs.
  bool NeedsPairs() const { return known && std::isnan(one_ratio); }
  // Adds a pair of the median's bucket. Equal ratios are merged now and then
  // (their weights summed, exactly: whole nanoseconds or halves), so a bucket
  // of a few distinct ratios stays small however many kernels fall in it (a
  // 4096-chip pod without jitter held 0.8 GiB of equal pairs).
  void Keep(double ratio, double w);

 private:
  size_t merge_at_ = 256;
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
// every kernel of every chip that has peers, in no set order.
//
// The plain way: kernels matched by (name, occurrence) through a map.
template <typename Emit>
void KernelRatiosByName(const StepData& s, size_t num_names, const Emit& emit) {
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

// The fast way, when every chip ran the same kernels in the same order (the
// chips of a simulated pod run one program): the k-th kernel of each chip is
// the same (name, occurrence), so the chips are compared column by column,
// with no map. False, having emitted nothing, when the chips' kernels differ.
template <typename Emit>
bool KernelRatiosByColumn(const StepData& s, const Emit& emit) {
  if (s.ops.size() < 2) return false;
  const size_t n = s.ops.size();
  std::vector<int32_t> names;  // the first chip's kernels
  for (const Op& op : s.ops.begin()->second)
    if (op.kind == kCompute || op.kind == kTransfer) names.push_back(op.name);
  const size_t kn = names.size();
  std::vector<int> devices;
  std::vector<double> rows(n * kn);  // chip by chip: rows[c * kn + k]
  for (const auto& [d, ops] : s.ops) {
    double* row = rows.data() + devices.size() * kn;
    size_t k = 0;
    for (const Op& op : ops)
      if (op.kind == kCompute || op.kind == kTransfer) {
        if (k == kn || op.name != names[k]) return false;
        row[k++] = static_cast<double>(op.dur);
      }
    if (k != kn) return false;
    devices.push_back(d);
  }
  // Eight kernels at a time: one cache line of each chip's row per block.
  constexpr size_t kBlock = 8;
  std::vector<std::vector<double>> cols(kBlock, std::vector<double>(n));
  for (size_t k0 = 0; k0 < kn; k0 += kBlock) {
    const size_t nb = std::min(kBlock, kn - k0);
    for (size_t c = 0; c < n; ++c)
      for (size_t j = 0; j < nb; ++j) cols[j][c] = rows[c * kn + k0 + j];
    for (size_t j = 0; j < nb; ++j) {
      const std::vector<double> peers_median = LeaveOneOutMedians(cols[j]);
      for (size_t c = 0; c < n; ++c)
        if (peers_median[c] > 0) emit(devices[c], cols[j][c] / peers_median[c], peers_median[c]);
    }
  }
  return true;
}

template <typename Emit>
void KernelRatios(const StepData& s, size_t num_names, const Emit& emit) {
  if (!KernelRatiosByColumn(s, emit)) KernelRatiosByName(s, num_names, emit);
}

}  // namespace shardscope::analysis::fleet_internal
