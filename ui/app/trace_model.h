// The workstation's in-memory picture of one stored run: its tracks (one lane
// per device and per host thread, each on one clock), the slices of every lane
// split into depth rows sorted by start, the run's compilations and its
// tensors' placement. Loaded
// once from the store; the views only read it. Knows nothing of the screen, so
// it is tested without a display.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/sharding_view.h"
#include "store/reader.h"

namespace shardscope::app {

// kHostWait: a chip waiting for the host to enqueue its next program (drawn
// muted, as the absence of work it is, not as work).
enum class SliceKind : uint8_t { kCompute, kCollective, kTransfer, kHost, kCompile, kHostWait };
inline constexpr int kNumSliceKinds = 6;

const char* SliceKindName(SliceKind kind);
// Unknown kinds read as compute: a trace imported from another tool may use
// words we do not know, and showing them beats refusing the whole run.
SliceKind ParseSliceKind(const std::string& text);

enum class Clock : uint8_t { kHost, kDevice, kModeled };
const char* ClockName(Clock clock);        // "host", "device", "modeled"
const char* ClockLabel(Clock clock);       // "host clock", "device clock", ...

struct Slice {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t slice_id = 0;
  int64_t bytes = 0;
  int32_t name = 0;        // index into TraceModel::names
  int32_t step = -1;       // -1: not part of a step
  int32_t moves = -1;      // a collective: the value it moves (index into names), -1 unknown
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
  std::vector<SliceRow> rows;  // rows[d]: slices at depth d
  size_t num_slices = 0;
  int64_t min_start_ns = 0;   // over all rows; meaningless when num_slices == 0
  int64_t max_end_ns = 0;

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

struct RunInfo {
  int64_t run_id = 0;
  std::string sample;
  std::string mesh;
  std::string profile;
  int64_t num_hosts = 0;
  int64_t num_devices = 0;
  bool simulated = false;
  std::string status;
};

struct TraceModel {
  std::string path;
  RunInfo run;
  std::vector<int64_t> run_ids;  // every run in the file, ascending
  std::vector<std::string> names;
  // Device tracks first (by device, then clock), then host tracks (by host,
  // then track id): the order lanes are drawn in.
  std::vector<Track> tracks;
  std::vector<Compilation> compilations;  // by compile_id
  size_t num_slices = 0;
  // Where each tensor's shards live, and the involuntary full
  // rematerializations (what `shardscope sharding` prints).
  analysis::ShardingView sharding;

  const std::string& Name(int32_t index) const;
  bool HasClock(Clock clock) const;
  // Earliest start and latest end over tracks on `clock` (host also counts
  // compilations). nullopt when nothing is on that clock.
  std::optional<std::pair<int64_t, int64_t>> ClockExtent(Clock clock) const;
};

// Loads run `run_id` (the latest run when unset). Errors say which run is
// missing and which runs the file has.
absl::StatusOr<TraceModel> LoadTraceModel(const store::Reader& reader,
                                          std::optional<int64_t> run_id);

// Opens `path` and loads it: the one call the app makes.
absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path,
                                          std::optional<int64_t> run_id);

}  // namespace shardscope::app
