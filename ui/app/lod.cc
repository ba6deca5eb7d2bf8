// Level of detail; see lod.h for the contract.
#include "ui/app/lod.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace shardscope::app {

static_assert(kNumSliceKinds == store::kNumTimelineKinds,
              "SliceKind and store::TimelineKind must index kind_ns alike");

SliceKind DominantKind(const KindNs& kind_ns) {
  int best = 0;
  for (int k = 1; k < kNumSliceKinds; ++k) {
    if (kind_ns[k] > kind_ns[best]) best = k;
  }
  return static_cast<SliceKind>(best);
}

double DrawBlock::busy_fraction() const {
  const int64_t span = end_ns - start_ns;
  if (span <= 0) return busy_ns > 0 ? 1.0 : 0.0;
  return std::min(1.0, static_cast<double>(busy_ns) / static_cast<double>(span));
}

double Column::busy_fraction() const {
  const int64_t span = end_ns - start_ns;
  if (span <= 0) return 0;
  return std::min(1.0, static_cast<double>(busy_ns) / static_cast<double>(span));
}

std::vector<DrawBlock> FoldRow(const SliceRow& row, int64_t t0, int64_t t1,
                               double min_width_ns) {
  std::vector<DrawBlock> blocks;
  auto [i, last] = row.Visible(t0, t1);
  // Whole nanoseconds: a sub-ns threshold would fold nothing anyway, and an
  // integer keeps the comparisons exact.
  const int64_t min_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(min_width_ns)));
  const int64_t max_fold_ns = kMaxFoldWidths * min_ns;
  const auto& slices = row.slices;
  auto add = [](DrawBlock& b, const Slice& s) {
    b.end_ns = std::max(b.end_ns, s.end_ns());
    b.kind_ns[static_cast<int>(s.kind)] += s.dur_ns;
    b.busy_ns += s.dur_ns;
  };
  // One pass over the visible slices: the loader bounds how many a window
  // holds, and folds must look at each slice to know what they hold.
  while (i < last) {
    const Slice& s = slices[i];
    DrawBlock block;
    block.start_ns = s.start_ns;
    block.end_ns = s.end_ns();
    block.first = i;
    block.count = 1;
    block.step = s.step;
    block.kind = s.kind;
    add(block, s);
    ++i;
    if (s.dur_ns < min_ns) {
      while (i < last) {
        const Slice& n = slices[i];
        if (n.dur_ns >= min_ns || n.start_ns >= block.end_ns + min_ns || n.step != block.step ||
            n.start_ns - block.start_ns >= max_fold_ns) {
          break;
        }
        add(block, n);
        ++i;
      }
      block.count = i - block.first;
      if (block.folded()) block.kind = DominantKind(block.kind_ns);
    }
    blocks.push_back(block);
  }
  return blocks;
}

int LevelForZoom(double ns_per_px, double column_px) {
  const double column_ns = ns_per_px * column_px;
  if (static_cast<double>(store::kLevel0WidthNs) > column_ns) return -1;
  int level = 0;
  while (level + 1 < store::kNumSummaryLevels &&
         static_cast<double>(store::kLevel0WidthNs << (2 * (level + 1))) <= column_ns) {
    ++level;
  }
  return level;
}

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::vector<Column> SummaryColumns(const std::vector<store::SummaryBucket>& buckets, int64_t t0,
                                   int64_t t1, double column_ns) {
  std::vector<Column> out;
  const int64_t width = std::max<int64_t>(1, static_cast<int64_t>(std::llround(column_ns)));
  // Busy time that did not fit the column where its slices started, by kind.
  std::array<double, kNumSliceKinds> carry{};
  double carry_total = 0;
  size_t b = 0;
  // Buckets that start before the window may still spill into it.
  while (b < buckets.size() && buckets[b].start_ns < t0 - 64 * width) ++b;
  int64_t col = b < buckets.size() ? FloorDiv(buckets[b].start_ns, width) : 0;
  const int64_t last_col = FloorDiv(t1 - 1, width);
  while (col <= last_col && (b < buckets.size() || carry_total > 0.5)) {
    // Skip empty time quickly when nothing is carried.
    if (carry_total <= 0.5 && b < buckets.size()) {
      col = std::max(col, FloorDiv(buckets[b].start_ns, width));
      if (col > last_col) break;
    }
    Column c;
    c.start_ns = col * width;
    c.end_ns = c.start_ns + width;
    c.first_bucket = b;
    std::array<double, kNumSliceKinds> fill = carry;
    double fill_total = carry_total;
    while (b < buckets.size() && buckets[b].start_ns < c.end_ns) {
      const store::SummaryBucket& s = buckets[b];
      c.count += s.count;
      for (int k = 0; k < kNumSliceKinds; ++k) fill[k] += static_cast<double>(s.kind_ns[k]);
      fill_total += static_cast<double>(s.busy_ns);
      if (s.first_step >= 0 && (c.first_step < 0 || s.first_step < c.first_step)) c.first_step = s.first_step;
      c.last_step = std::max(c.last_step, s.last_step);
      if (s.longest_dur_ns > c.longest_dur_ns || c.longest_slice_id == 0) {
        c.longest_slice_id = s.longest_slice_id;
        c.longest_dur_ns = s.longest_dur_ns;
        c.longest_name_id = s.longest_name_id;
      }
      ++b;
      ++c.num_buckets;
    }
    // busy_ns may exceed the sum of kind_ns if a kind is unknown; trust the total.
    double kinds_sum = 0;
    for (double v : fill) kinds_sum += v;
    if (fill_total < kinds_sum) fill_total = kinds_sum;
    const double keep = fill_total > width ? width / fill_total : 1.0;
    for (int k = 0; k < kNumSliceKinds; ++k) {
      c.kind_ns[k] = static_cast<int64_t>(fill[k] * keep);
      carry[k] = fill[k] - fill[k] * keep;
    }
    c.busy_ns = static_cast<int64_t>(fill_total * keep);
    carry_total = fill_total - fill_total * keep;
    c.dominant = DominantKind(c.kind_ns);
    if (c.end_ns > t0 && (c.count > 0 || c.busy_ns > 0)) out.push_back(c);
    ++col;
  }
  return out;
}

std::vector<CounterColumn> CounterColumns(const std::vector<store::CounterBucket>& buckets,
                                          int64_t t0, int64_t t1, double column_ns) {
  std::vector<CounterColumn> out;
  const int64_t width = std::max<int64_t>(1, static_cast<int64_t>(std::llround(column_ns)));
  for (const store::CounterBucket& b : buckets) {
    if (b.count <= 0 || b.start_ns >= t1 || b.start_ns + b.width_ns <= t0) continue;
    const int64_t start = FloorDiv(b.start_ns, width) * width;
    if (!out.empty() && out.back().start_ns == start) {
      CounterColumn& c = out.back();
      c.min = std::min(c.min, b.min);
      c.max = std::max(c.max, b.max);
      c.last = b.last;
      c.last_ts_ns = b.last_ts_ns;
      c.count += b.count;
    } else {
      out.push_back(CounterColumn{start, start + width, b.min, b.max, b.last, b.count, b.last_ts_ns});
    }
  }
  return out;
}

void ZoomAround(TimeAxis& axis, float x, double factor, double min_ns_per_px,
                double max_ns_per_px) {
  const double t = axis.ToNs(x);
  axis.ns_per_px = std::clamp(axis.ns_per_px / factor, min_ns_per_px, max_ns_per_px);
  axis.origin_ns = t - (x - axis.left) * axis.ns_per_px;
}

std::pair<int64_t, int64_t> LoadWindow(int64_t v0, int64_t v1, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(std::max<int64_t>(1, v1 - v0));
  const int64_t grid = static_cast<int64_t>(std::bit_ceil(span));
  const int64_t k = FloorDiv(v0, grid);
  int64_t t0 = (k - 1) * grid;
  int64_t t1 = (k + 2) * grid;
  t0 = std::max(t0, lo);
  t1 = std::min(t1, hi);
  if (t1 <= t0) t1 = t0 + 1;
  return {t0, t1};
}

}  // namespace shardscope::app
