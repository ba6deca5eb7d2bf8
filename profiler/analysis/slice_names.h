// Where a run's time went by slice name, from the stored timeline alone: the
// per-name table PyTorch's profiler prints (key_averages), for runs that have
// no per-op statistics because they have no IR -- an imported trace. Self time
// is a slice's duration less its children's, so nested host ops (step >
// aten::linear > aten::addmm) are not counted several times over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::analysis {

struct NameTime {
  std::string name;
  std::string kind;        // slices.kind of its slices (the most common one)
  int64_t count = 0;
  int64_t total_ns = 0;    // sum of durations (nested calls of one name count each time)
  int64_t self_ns = 0;     // sum of durations less the children's, at least 0 per slice
  int64_t max_ns = 0;      // the longest one
};

struct NameTimes {
  std::string clock;            // "host" or "device": every slice here is on it
  int tracks = 0;               // lanes read
  int tracks_in_run = 0;        // lanes of that clock in the run (more than `tracks`: an even sample)
  int annotation_tracks = 0;    // device-clock lanes without a device, left out (not in tracks_in_run)
  int64_t slices = 0;
  int64_t self_ns = 0;          // all names' self time: the lanes' busy time
  int64_t names = 0;            // distinct names (top may hold fewer)
  std::vector<NameTime> top;    // by self time, then name
};

// The `limit` names of `clock`'s lanes in run `run_id` with the most self
// time. PyTorch's step markers, ProfilerStep#N, are one row, ProfilerStep#*:
// their self time is the step's time outside any op (Python, the dataloader).
struct NameTimesOptions {
  std::optional<int> step;  // only the slices tagged with this step
  // With more lanes, an even sample of this many (first and last included):
  // a simulated pod's chips all run the same programs.
  size_t max_tracks = std::numeric_limits<size_t>::max();
  // Only depth-0 slices, each its whole duration: a chip's lane, whose
  // children (a collective's link transfers) run side by side, not nested.
  bool top_level_only = false;
};
absl::StatusOr<NameTimes> TopNamesBySelfTime(const store::Reader& reader, int64_t run_id, const std::string& clock,
                                             size_t limit, const NameTimesOptions& options = {});

// "; 1 annotation lane left out" when the device clock's annotation lanes
// were not counted, else "": every heading of the table says it alike.
std::string AnnotationLanesLeftOut(const NameTimes& n);

}  // namespace shardscope::analysis
