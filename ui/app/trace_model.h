// The workstation's picture of one stored run, as far as it is small: the
// run's facts, its tracks (one lane per device and per host thread, each on
// one clock), its compilations, the host's dispatch of every program
// (executions), the value each collective moves, and its tensors' placement.
// Loaded once at open in a few small queries; slices are never read here: the
// timeline asks for the visible window through TimelineLoader
// (timeline_loader.h). Knows nothing of the screen, so it is tested without a
// display.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "profiler/analysis/sharding_view.h"
#include "store/reader.h"

namespace shardscope::app {

// kHostWait: a chip waiting for the host to enqueue its next program (drawn
// muted, as the absence of work it is, not as work). The order is
// store::TimelineKind's, so summaries' kind_ns index by it.
enum class SliceKind : uint8_t { kCompute, kCollective, kTransfer, kHost, kCompile, kHostWait };
inline constexpr int kNumSliceKinds = 6;

const char* SliceKindName(SliceKind kind);
// Unknown kinds read as compute: a trace imported from another tool may use
// words we do not know, and showing them beats refusing the whole run.
SliceKind ParseSliceKind(const std::string& text);

enum class Clock : uint8_t { kHost, kDevice, kModeled };
inline constexpr int kNumClocks = 3;
const char* ClockName(Clock clock);        // "host", "device", "modeled"
const char* ClockLabel(Clock clock);       // "host clock", "device clock", ...
std::optional<Clock> ParseClock(const std::string& text);

// One slice as the timeline holds it for a loaded window.
struct Slice {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t slice_id = 0;
  int64_t bytes = 0;
  int64_t flow_id = -1;     // the slices of one collective share it
  int64_t arrival_ns = -1;  // a collective: when this chip was ready (-1: not recorded)
  int64_t graph_id = -1;
  int64_t op_id = -1;
  int32_t name_id = 0;      // names.name_id
  int32_t step = -1;        // -1: not part of a step
  int16_t depth = 0;
  SliceKind kind = SliceKind::kCompute;

  int64_t end_ns() const { return start_ns + dur_ns; }
};

// The slices of one depth of one track, sorted by start. `max_end` is the
// running maximum of end times, which is non-decreasing even if slices
// overlap; it lets a binary search find the first slice still visible at a
// time, which a search on start alone cannot (a long slice may start far left).
struct SliceRow {
  std::vector<Slice> slices;
  std::vector<int64_t> max_end;

  void Finish();  // sorts by start and fills max_end
  // Index range [first, last) of slices that overlap [t0, t1).
  std::pair<size_t, size_t> Visible(int64_t t0, int64_t t1) const;
};

struct Track {
  int64_t track_id = 0;
  std::string name;
  Clock clock = Clock::kHost;
  std::optional<int64_t> device_id;  // set on device lanes
  int64_t host_id = 0;
  std::string thread_name;

  bool is_device() const { return device_id.has_value(); }
};

struct Compilation {
  int64_t compile_id = 0;
  int64_t step = 0;
  int64_t graph_id = 0;
  std::string cache;          // miss | memory_hit | disk_hit
  std::string cause_kind;     // empty on hits
  std::string cause_detail;
  std::string source_file;
  int64_t source_line = 0;    // 0: unknown
  int64_t duration_ns = 0;
  int64_t host_start_ns = 0;  // host clock
  std::string call_site;

  bool is_miss() const { return cache == "miss"; }
  std::string SourceLocation() const;  // "file:line", "file", or ""
};

// The host's launch of one compiled program (a row of `executions`): the
// chips cannot start it before host_start_ns on the host clock.
struct Dispatch {
  int32_t step = 0;
  int64_t graph_id = 0;
  int64_t host_start_ns = 0;
  int64_t host_dur_ns = 0;
};

struct RunInfo {
  int64_t run_id = 0;
  std::string sample;
  std::string mesh;
  std::string profile;
  int64_t num_hosts = 0;
  int64_t num_devices = 0;
  bool simulated = false;
  std::string status;
  // What the run's capture settings left off the timeline (runs.capture_note;
  // "" when nothing was, or the file predates the column).
  std::string capture_note;
  // The chips the hang detector found stopped (`hangs`): chip -> the step it
  // stopped responding in. Their lanes say so: a lane that just ends read as
  // a run that just stopped.
  std::map<int64_t, int64_t> stopped;
};

struct TraceModel {
  std::string path;
  RunInfo run;
  std::vector<int64_t> run_ids;  // every run in the file, ascending
  // Device tracks first (by device, then clock), then host tracks (by host,
  // then track id): the order lanes are drawn in.
  std::vector<Track> tracks;
  std::vector<Compilation> compilations;  // by compile_id
  std::vector<Dispatch> dispatches;       // by host_start_ns
  std::vector<int32_t> steps;             // the run's step numbers, ascending (the playhead's)
  // The value each collective moves, by (graph_id, op_id): what the Sharding
  // view can show for a selected collective.
  absl::flat_hash_map<std::pair<int64_t, int64_t>, std::string> moved_values;
  // Where each tensor's shards live, and the involuntary full
  // rematerializations (what `shardscope sharding` prints).
  analysis::ShardingView sharding;
  std::string sharding_error;  // why `sharding` could not be read ("" when it was)

  bool HasClock(Clock clock) const;
  const Track* FindTrack(int64_t track_id) const;
  // The value a collective slice moves, or nullptr.
  const std::string* MovedValue(int64_t graph_id, int64_t op_id) const;
};

// Loads run `run_id` (the latest run when unset). Errors say which run is
// missing and which runs the file has.
// Why a run has no compiled program to show (its graphs hold no IR), said
// as "This run has no IR (WHY)": "an imported trace" (it never has any), or a
// recorded run's end ("no program was compiled and kept: the run failed
// before any step: out of memory ...").
std::string NoProgramsWhy(const store::Reader& reader, int64_t run_id);

absl::StatusOr<TraceModel> LoadTraceModel(const store::Reader& reader,
                                          std::optional<int64_t> run_id);

// Opens `path` and loads it: the one call the app makes.
absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path,
                                          std::optional<int64_t> run_id);

}  // namespace shardscope::app
