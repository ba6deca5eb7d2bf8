// Finding slices by name anywhere in a run, not only in the windows a view
// has loaded: the timeline's search (Ctrl+F) asks here. Names are matched in
// the interned `names` table first (a substring, case-insensitive), then only
// the chunks whose text can hold one of those name ids are decoded (an SQL
// `instr` on the chunk text skips the rest without decoding them), so a
// search of a 10M-slice run reads its chunks once and decodes a few. A
// simulated run's chips have schedules, not chunks: their slices are made
// again from the schedule and matched (SimTimelineReader::ForEachSlice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"
#include "store/timeline.h"

namespace shardscope::store {

struct SliceHit {
  int64_t track_id = 0;
  TimelineSlice slice;
};

struct SliceSearch {
  // The names that matched (name_id, name), by name.
  std::vector<std::pair<int32_t, std::string>> names;
  // The earliest `max_hits` matching slices of the run, by (start_ns, track_id,
  // slice_id): times are each track's own clock, so callers that mix clocks
  // re-sort on their shared axis.
  std::vector<SliceHit> hits;
  int64_t total = 0;  // every matching slice of the run (hits.size() when not truncated)
  bool truncated() const { return total > static_cast<int64_t>(hits.size()); }
};

// Slices of `run_id` (every track, every depth) whose name contains `needle`
// (ASCII case-insensitive). An empty needle matches nothing. `max_hits` keeps
// memory bounded on runs of millions of matches; `total` still counts them all.
absl::StatusOr<SliceSearch> FindSlicesByName(const Reader& reader, int64_t run_id, const std::string& needle,
                                             size_t max_hits = 100'000);

// Slices of `run_id` that ran op `op_id` of graph `graph_id` (a kernel's
// slices, on every clock): only chunks of that graph are decoded. `names`
// holds the names they carry.
absl::StatusOr<SliceSearch> FindSlicesByOp(const Reader& reader, int64_t run_id, int64_t graph_id, int64_t op_id,
                                           size_t max_hits = 100'000);

}  // namespace shardscope::store
