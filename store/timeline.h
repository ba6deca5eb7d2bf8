// Timeline reads for views that must stay fast on runs of millions of slices:
// the slices of one track in a time window (decoded from the chunked layout,
// docs/schema.md "Timelines"), and the level-of-detail summaries that draw any
// zoom level, the whole run included, from a few thousand rows. The desktop
// app reads timelines only through this; SQL users have the `slices` view.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::store {

// The kinds stored in slices.kind, in the order of SummaryBucket::kind_ns.
enum class TimelineKind : uint8_t { kCompute, kCollective, kTransfer, kHost, kCompile, kHostWait };
inline constexpr int kNumTimelineKinds = 6;
const char* TimelineKindName(TimelineKind kind);  // "compute", ... as in slices.kind

struct TimelineSlice {
  int64_t slice_id = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t parent_id = -1;
  int64_t graph_id = -1;
  int64_t op_id = -1;
  int64_t flow_id = -1;
  int64_t bytes = 0;
  int64_t arrival_ns = -1;  // a collective: when this chip was ready (-1: not recorded)
  int32_t name_id = 0;      // names.name_id
  int32_t category_id = 0;  // names.name_id of the producer's category, 0: none
  int32_t shape_id = 0;     // names.name_id of the producer's shape of the call, 0: none
  int32_t step = -1;
  int16_t depth = 0;
  TimelineKind kind = TimelineKind::kCompute;
};

// One time bucket of one track at one depth and level: what the slices that
// START in [start_ns, start_ns + width) hold. Slices longer than a bucket are
// counted in the bucket they start in (busy_ns may exceed the width).
struct SummaryBucket {
  int64_t start_ns = 0;
  int64_t width_ns = 0;
  int16_t depth = 0;
  int64_t count = 0;
  int64_t busy_ns = 0;                                  // sum of durations
  std::array<int64_t, kNumTimelineKinds> kind_ns{};     // busy time by kind
  int64_t longest_slice_id = 0;                         // the longest slice starting here
  int64_t longest_start_ns = 0, longest_dur_ns = 0;
  int32_t longest_name_id = 0;
  TimelineKind longest_kind = TimelineKind::kCompute;
  int32_t first_step = -1, last_step = -1;              // steps seen (-1: none)
};

// A counter's summary per bucket: min, max and the last value.
struct CounterBucket {
  int64_t start_ns = 0;
  int64_t width_ns = 0;
  int64_t count = 0;
  double min = 0, max = 0, last = 0;
  int64_t last_ts_ns = 0;
};

// Where a step ran on one clock (over all tracks of that clock), from the
// slices that carry it.
struct StepBounds {
  int32_t step = 0;
  std::string clock;  // host | device | modeled
  int64_t start_ns = 0, end_ns = 0;
};

// Summary levels: level L buckets are kLevel0WidthNs << (2 * L) wide (4.2 ms,
// 16.8 ms, 67 ms, ... 78 hours at level 13), so any run's whole span is a few
// buckets at some level. Level 0 is no finer so that summaries stay a few
// bytes per slice (windows narrower than a few seconds read slices).
inline constexpr int64_t kLevel0WidthNs = int64_t{1} << 22;
inline constexpr int kNumSummaryLevels = 14;
int64_t SummaryWidthNs(int level);
// The finest level whose buckets over [t0, t1) number at most `max_buckets`
// (one per pixel, say); -1 when level 0 would have at most max_buckets / 2 of
// them (a bucket wider than two pixels): then read slices instead.
int SummaryLevelFor(int64_t t0, int64_t t1, int max_buckets);

class TimelineReader {
 public:
  explicit TimelineReader(const Reader& reader) : reader_(reader) {}

  // False on a schema-version-1 file (one row per slice, no stored summaries;
  // readable, answered by SQL over its `slices` table; a writer migrates it).
  absl::StatusOr<bool> chunked() const;
  // Whether `run_id` was simulated (its slices are made from stored
  // schedules by SimTimelineReader, which Slices and the summaries defer to).
  absl::StatusOr<bool> simulated(int64_t run_id) const;

  // Slices of `track_id` that overlap [t0, t1), sorted by (depth, start).
  // Stops after `max_slices` (0: no limit) and says so in *truncated.
  absl::StatusOr<std::vector<TimelineSlice>> Slices(int64_t run_id, int64_t track_id, int64_t t0,
                                                    int64_t t1, size_t max_slices = 0,
                                                    bool* truncated = nullptr) const;
  // Summary buckets of `track_id` at `level` that start in [t0, t1), by (depth, start).
  absl::StatusOr<std::vector<SummaryBucket>> Summaries(int64_t run_id, int64_t track_id, int level,
                                                       int64_t t0, int64_t t1) const;
  // The same for every track of the run in one query (the whole-run view):
  // by (track_id, depth, start).
  struct TrackBucket {
    int64_t track_id = 0;
    SummaryBucket bucket;
  };
  absl::StatusOr<std::vector<TrackBucket>> AllSummaries(int64_t run_id, int level, int64_t t0, int64_t t1) const;
  // The same, but only the tracks whose buckets are stored: a simulated run's
  // chips, whose buckets are made from their schedules a chip at a time
  // (seconds for a pod of thousands), are left out; ask for those by track.
  absl::StatusOr<std::vector<TrackBucket>> StoredSummaries(int64_t run_id, int level, int64_t t0, int64_t t1) const;
  // The tracks of a simulated run's chips (made from its schedule), sorted;
  // empty for a recorded or imported run.
  absl::StatusOr<std::vector<int64_t>> SimChipTracks(int64_t run_id) const;
  // A counter's buckets at `level` (device_id -1: process-wide).
  absl::StatusOr<std::vector<CounterBucket>> CounterSummaries(int64_t run_id, int device_id,
                                                              const std::string& name, int level,
                                                              int64_t t0, int64_t t1) const;
  // Every step's bounds on every clock, by (clock, step).
  absl::StatusOr<std::vector<StepBounds>> Steps(int64_t run_id) const;
  // names.name for a name_id ("" when unknown).
  absl::StatusOr<std::vector<std::pair<int32_t, std::string>>> Names(
      const std::vector<int32_t>& name_ids) const;

 private:
  absl::StatusOr<int64_t> MaxChunkSpan(int64_t run_id, int64_t track_id) const;
  absl::StatusOr<std::vector<TrackBucket>> ReadSimSummaries(int64_t run_id, int64_t track_id, int level, int64_t t0,
                                                            int64_t t1) const;
  // True on a version-3 file (summaries 32 buckets to a row).
  absl::StatusOr<bool> grouped() const;
  absl::StatusOr<std::vector<TrackBucket>> ReadGroups(int64_t run_id, int64_t track_id, int level, int64_t t0,
                                                      int64_t t1) const;
  absl::StatusOr<std::vector<TrackBucket>> ReadSummaries(int64_t run_id, int64_t track_id, int level, int64_t t0,
                                                         int64_t t1) const;
  // The stored buckets (every run's host lanes; a recorded run's chips too).
  absl::StatusOr<std::vector<TrackBucket>> ReadStoredSummaries(int64_t run_id, int64_t track_id, int level, int64_t t0,
                                                               int64_t t1) const;
  // Whether `track_id` is a chip of simulated run `run_id` (made from its schedule).
  absl::StatusOr<bool> SimChipTrack(int64_t run_id, int64_t track_id) const;
  const Reader& reader_;
  mutable int chunked_ = -1;  // -1 unknown
  mutable int grouped_ = -1;
  mutable std::vector<std::pair<int64_t, bool>> simulated_;  // run -> simulated
  mutable std::map<int64_t, std::vector<int64_t>> sim_tracks_;  // simulated run -> its chips' tracks, sorted
  mutable std::vector<std::tuple<int64_t, int64_t, int64_t>> spans_;  // run, track, longest chunk
};

}  // namespace shardscope::store
