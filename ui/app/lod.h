// Level of detail for the timeline, independent of the screen library:
// which summary level or raw slices a zoom wants, how the raw slices of a
// window fold into blocks a few pixels wide, and how summary buckets become
// pixel columns. Every shape says what it holds (each kind's busy time, the
// busy fraction, the steps it covers), never just the colour of its first
// slice, and the number of shapes follows the screen width, not the trace.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/timeline.h"
#include "ui/app/trace_model.h"

namespace shardscope::app {

using KindNs = std::array<int64_t, kNumSliceKinds>;

// The kind with the most busy time (ties: the lower enum value); compute when empty.
SliceKind DominantKind(const KindNs& kind_ns);

// One shape to draw from raw slices: a single slice (count == 1) or a fold of
// `count` consecutive slices row.slices[first .. first + count).
struct DrawBlock {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  size_t first = 0;
  size_t count = 0;
  KindNs kind_ns{};         // busy time by kind of the slices it holds
  int64_t busy_ns = 0;      // their summed durations
  int32_t step = -1;        // the one step its slices belong to (-1: none)
  SliceKind kind = SliceKind::kCompute;  // a slice's own kind; a fold's dominant kind

  bool folded() const { return count > 1; }
  // Busy time over the block's span, at most 1.
  double busy_fraction() const;
};

// Blocks for the slices of `row` that overlap [t0, t1) when `min_width_ns` is
// the narrowest span worth drawing on its own (about 3 px in time units).
// Every visible slice lands in exactly one block, in start order. A slice at
// least `min_width_ns` wide is its own block; a run of narrower slices with
// gaps under `min_width_ns` becomes one folded block, which never holds two
// steps (a fold that crossed a step boundary would hide it) and never grows
// past kMaxFoldWidths * min_width_ns (so density along the run still shows).
inline constexpr int kMaxFoldWidths = 10;
std::vector<DrawBlock> FoldRow(const SliceRow& row, int64_t t0, int64_t t1,
                               double min_width_ns);

// The summary level to draw at `ns_per_px` when a drawn column is
// `column_px` wide: the coarsest level whose buckets are at most one column
// wide (so columns are made of whole buckets), or -1 when even level 0's
// buckets are wider than a column and the raw slices should be read.
int LevelForZoom(double ns_per_px, double column_px);

// One drawn column of summary buckets: what the slices starting in it hold.
// A slice longer than its bucket is counted where it starts (the store's
// rule); columns spill that excess over into the following columns, by kind,
// so a 50 ms all-reduce at 1 ms per column fills 50 columns, not one.
struct Column {
  int64_t start_ns = 0, end_ns = 0;
  int64_t count = 0;               // slices starting here
  KindNs kind_ns{};                // busy time inside the column, by kind
  int64_t busy_ns = 0;             // their sum (at most end - start)
  int32_t first_step = -1, last_step = -1;
  size_t first_bucket = 0, num_buckets = 0;  // the buckets starting here (may be 0: spill only)
  int64_t longest_slice_id = 0, longest_dur_ns = 0;
  int32_t longest_name_id = 0;
  SliceKind dominant = SliceKind::kCompute;

  double busy_fraction() const;
};

// Columns `column_ns` wide on a grid anchored at time 0 (so panning does not
// make them shimmer) for `buckets` of one depth sorted by start, restricted to
// [t0, t1). Only columns with something in them are returned.
std::vector<Column> SummaryColumns(const std::vector<store::SummaryBucket>& buckets, int64_t t0,
                                   int64_t t1, double column_ns);

// A counter's drawn column: min, max and last value of the buckets in it.
struct CounterColumn {
  int64_t start_ns = 0, end_ns = 0;
  double min = 0, max = 0, last = 0;
  int64_t count = 0;
  int64_t last_ts_ns = 0;  // when `last` was sampled
};
std::vector<CounterColumn> CounterColumns(const std::vector<store::CounterBucket>& buckets,
                                          int64_t t0, int64_t t1, double column_ns);

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

// The window worth loading around the visible [v0, v1): aligned to a
// power-of-two grid at least as wide as the view, one grid cell on each side,
// clipped to [lo, hi). Small moves keep the same window, so the loader's cache
// answers them; a pan past the margin asks for the next.
std::pair<int64_t, int64_t> LoadWindow(int64_t v0, int64_t v1, int64_t lo, int64_t hi);

}  // namespace shardscope::app
