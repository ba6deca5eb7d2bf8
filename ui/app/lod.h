// Level of detail for the timeline: which slices of a row fall in the visible
// window, and how runs of slices too narrow to see are folded into one drawn
// block. The number of blocks depends on the screen width, not on the trace,
// so a whole-run view of millions of slices draws as fast as a zoomed one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ui/app/trace_model.h"

namespace shardscope::app {

// One shape to draw: either a single slice (count == 1) or a fold of `count`
// consecutive slices row.slices[first .. first + count).
struct DrawBlock {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  size_t first = 0;
  size_t count = 0;
  SliceKind kind = SliceKind::kCompute;  // the first slice's kind

  bool folded() const { return count > 1; }
};

// Blocks for the slices of `row` that overlap [t0, t1) when `min_width_ns` is
// the narrowest span worth drawing on its own (about 3 px in time units).
// Every visible slice lands in exactly one block, in start order. A slice at
// least `min_width_ns` wide is its own block; a run of narrower slices with
// gaps under `min_width_ns` becomes one folded block. Each folded block grows
// by at least `min_width_ns` per binary search, so the work per row is about
// (screen width / 3 px) * log(slices).
std::vector<DrawBlock> FoldRow(const SliceRow& row, int64_t t0, int64_t t1,
                               double min_width_ns);

// Maps between time and screen x for one clock's section of the timeline.
struct TimeAxis {
  double origin_ns = 0;   // time at x == left
  double ns_per_px = 1;
  float left = 0;

  float ToX(double t_ns) const { return left + static_cast<float>((t_ns - origin_ns) / ns_per_px); }
  double ToNs(float x) const { return origin_ns + (x - left) * ns_per_px; }
};

// Zooms by `factor` (> 1 zooms in) keeping the time under screen x fixed,
// with ns_per_px clamped to [min_ns_per_px, max_ns_per_px].
void ZoomAround(TimeAxis& axis, float x, double factor, double min_ns_per_px,
                double max_ns_per_px);

}  // namespace shardscope::app
