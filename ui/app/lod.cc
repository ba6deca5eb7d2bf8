// Folding of narrow slices; see lod.h for the contract.
#include "ui/app/lod.h"

#include <algorithm>
#include <cmath>

namespace shardscope::app {

std::vector<DrawBlock> FoldRow(const SliceRow& row, int64_t t0, int64_t t1,
                               double min_width_ns) {
  std::vector<DrawBlock> blocks;
  auto [i, last] = row.Visible(t0, t1);
  // Whole nanoseconds: a sub-ns threshold would fold nothing anyway, and an
  // integer keeps the comparisons exact.
  const int64_t min_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(min_width_ns)));
  const auto& slices = row.slices;
  while (i < last) {
    const Slice& s = slices[i];
    DrawBlock block{s.start_ns, s.end_ns(), i, 1, s.kind};
    ++i;
    if (s.dur_ns < min_ns) {
      for (;;) {
        // Absorb everything that ends within min_ns of the block's end with
        // one binary search on the running max end, instead of walking slice
        // by slice through what may be millions of them.
        const int64_t limit = block.end_ns + min_ns;
        size_t j = std::lower_bound(row.max_end.begin() + i, row.max_end.begin() + last, limit) -
                   row.max_end.begin();
        if (j > i) {
          block.end_ns = std::max(block.end_ns, row.max_end[j - 1]);
          i = j;
        }
        // The next slice joins too if it is narrow and starts within the gap.
        if (i < last && slices[i].dur_ns < min_ns && slices[i].start_ns < block.end_ns + min_ns) {
          block.end_ns = std::max(block.end_ns, slices[i].end_ns());
          ++i;
          continue;
        }
        break;
      }
      block.count = i - block.first;
    }
    blocks.push_back(block);
  }
  return blocks;
}

void ZoomAround(TimeAxis& axis, float x, double factor, double min_ns_per_px,
                double max_ns_per_px) {
  const double t = axis.ToNs(x);
  axis.ns_per_px = std::clamp(axis.ns_per_px / factor, min_ns_per_px, max_ns_per_px);
  axis.origin_ns = t - (x - axis.left) * axis.ns_per_px;
}

}  // namespace shardscope::app
