// Simulated runs in the store (docs/simulate.md): a simulated pod's timeline is
// kept as each program's schedule once, each chip's differences and seeds, and
// per program run each chip's start and each collective group's end (the
// sim_programs, sim_chips and sim_runs tables, store/schema.sql) -- a few bytes
// per chip and step instead of a row per slice. Slices are made again on
// demand, by the same code that scheduled them (profiler/trace/sim_program.h):
// through the `slices` view (and the views over it) on shardscope's own
// connections, and through SimTimelineReader for a chip's window.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/trace/sim_program.h"
#include "store/reader.h"
#include "store/timeline.h"

struct sqlite3;

namespace shardscope::store {

struct SimTimelineInput {
  int64_t run_id = 0;
  const std::map<int64_t, trace::SimProgram>* programs = nullptr;
  const std::vector<trace::SimChip>* chips = nullptr;
  const std::vector<int64_t>* track_ids = nullptr;  // per chip: its modeled-clock track
  const std::vector<trace::SimRun>* runs = nullptr;
  // Written step by step while the run goes (so a run killed part way keeps
  // its schedule up to its last whole step): runs before `first_run` are
  // stored already, programs in `stored_programs` too (those written are
  // added), and the chips only when `write_chips`.
  size_t first_run = 0;
  std::set<int64_t>* stored_programs = nullptr;
  bool write_chips = true;
};

// Writes a simulated run's schedule into the database at `path` over a
// connection of its own, in one transaction: the names its slices use, its
// programs, chips and runs, and each step's bounds on the modeled clock
// (step_bounds, widened where a step's runs came in earlier calls). Call once
// the run's writer has flushed what it queued.
absl::Status WriteSimTimeline(const std::string& path, const SimTimelineInput& in);

// A simulated run's timeline, read from its schedule.
class SimTimelineReader {
 public:
  explicit SimTimelineReader(const Reader& reader) : reader_(reader) {}
  // Whether `run_id` is simulated (runs.simulated = 1 with a stored schedule).
  absl::StatusOr<bool> IsSimulated(int64_t run_id) const;
  // Slices of `track_id` (a chip's modeled track) overlapping [t0, t1), sorted
  // by (depth, start), made from the program runs that overlap the window.
  absl::StatusOr<std::vector<TimelineSlice>> Slices(int64_t run_id, int64_t track_id, int64_t t0, int64_t t1,
                                                    size_t max_slices = 0, bool* truncated = nullptr) const;
  // Summary buckets of `track_id` at `level` over [t0, t1), as
  // TimelineReader::Summaries gives them for stored slices, computed from the
  // slices made for the window.
  absl::StatusOr<std::vector<SummaryBucket>> Summaries(int64_t run_id, int64_t track_id, int level, int64_t t0,
                                                       int64_t t1) const;

  // Every slice of the run, made in C++ without a row through SQL (what the
  // `slices` view gives, ~10x faster for whole-run analyses such as the fleet
  // diagnosis): program runs in order, chips in order within each.
  struct Row {
    int device_id = 0;
    int step = 0;
    int64_t graph_id = -1;
    const std::string* name = nullptr;  // names.name
    trace::SimSlice slice;
  };
  absl::Status ForEachSlice(int64_t run_id, const std::function<void(const Row&)>& fn) const;

 private:
  const Reader& reader_;
};

namespace internal {
// Registers shardscope_sim_slices (the table-valued function that makes one
// program run's slices) on `db`, and returns the SELECT that the TEMP `slices`
// view appends with UNION ALL ("" when the file has no sim_runs table).
std::string InstallSimSlices(sqlite3* db);
}  // namespace internal

}  // namespace shardscope::store
