// The timeline's data, loaded off the UI thread: a background thread with its
// own read connection fetches, through store::TimelineReader, first the run
// overview (step bounds per clock, each clock's extent, whole-run summaries
// of every stored track, the counters and their whole-run summaries), then
// whatever windows the view asks for as it zooms and pans: summary buckets at
// the level the zoom wants, or raw slices when zoomed in past the finest
// level. Results go to a cache of windows (least recently used out first,
// within a memory budget), so the view never holds the run, only what the
// screen shows and a margin around it. Knows nothing of the screen; tests
// drive it directly.
//
// A simulated pod's chips have no stored summaries: each chip's are made from
// its schedule (store/sim_timeline.h), about a millisecond a chip and step, so
// reading all 4096 chips' at open took minutes and the cores other views
// needed. Their whole-run summaries are therefore loaded lazily: the view's
// requests (what is on screen) come first, then, only while the timeline is
// shown (SetPrefetchPaused), the chips the view lists in Prefetch, nearest the
// screen first, one chip at a time so that a pause or a new list takes effect
// at once.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "store/timeline.h"
#include "ui/app/clock_alignment.h"
#include "ui/app/trace_model.h"

namespace shardscope::app {

// What to load: one track's window at a summary level (>= 0) or its raw
// slices (level -1); or, with `counter` set, a counter's summaries.
struct WindowKey {
  int64_t track_id = 0;
  int level = 0;
  int64_t t0 = 0, t1 = 0;
  int counter = -1;  // index into RunOverview::counters

  bool operator==(const WindowKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const WindowKey& k) {
    return H::combine(std::move(h), k.track_id, k.level, k.t0, k.t1, k.counter);
  }
};

// One loaded window of one track.
struct WindowData {
  WindowKey key;
  // level -1: the slices overlapping the window, one row per depth.
  std::vector<SliceRow> rows;
  bool truncated = false;  // more slices than the loader takes per window
  // level >= 0: buckets per depth, sorted by start.
  std::vector<std::vector<store::SummaryBucket>> depths;
  // A counter's window: its buckets, by start.
  std::vector<store::CounterBucket> counter_buckets;
  size_t bytes = 0;

  size_t num_depths() const { return key.level < 0 ? rows.size() : depths.size(); }
};

// A counter track: one stored counter of one chip (or of the process).
struct CounterTrack {
  std::optional<int> device_id;  // nullopt: process-wide
  std::string name;
  double min = 0, max = 0;       // over the whole run, for the lane's scale
  std::vector<store::CounterBucket> whole_run;
  int whole_run_level = 0;
};

// What every frame needs, loaded once at open.
struct RunOverview {
  std::array<std::vector<StepSpan>, kNumClocks> steps;           // per clock, by step
  std::array<std::optional<std::pair<int64_t, int64_t>>, kNumClocks> extent;  // per clock [lo, hi)
  ClockAlignment alignment;
  std::vector<CounterTrack> counters;  // by name, then chip
  absl::flat_hash_map<int64_t, int> depths;  // track_id -> depth rows it has (at least 1)
  // A simulated run's chips, whose whole-run summaries load lazily (sorted; empty otherwise).
  std::vector<int64_t> lazy_tracks;
};

// The members of one collective (slices sharing a flow id) across the chips of
// one clock, for the selected slice.
struct FlowMembers {
  int64_t flow_id = -1;
  std::vector<std::pair<int64_t, Slice>> members;  // (track_id, slice), by track order
  bool done = false;
};

struct LoaderProgress {
  bool overview_done = false;
  size_t done = 0, total = 0;  // windows of the latest request
  // Whole-run summaries of a simulated run's chips: loaded, and how many chips.
  size_t whole_run_done = 0, whole_run_total = 0;
  bool busy() const { return !overview_done || done < total; }  // the prefetch is not waited for
};

struct LoaderOptions {
  // Windows with more slices than this come back truncated; the view then
  // draws level 0 instead.
  size_t max_slices_per_window = 100'000;
  // The cache's budget; whole-run summaries are kept apart and never evicted.
  size_t cache_bytes = size_t{384} << 20;
};

class TimelineLoader {
 public:
  // Starts the thread (unless `start` is false: then Start() does), which
  // opens `path` on its own connection and loads the overview of `model`'s
  // run. `on_data` is called (on the loader's thread) whenever something new
  // is ready, to wake an idle UI.
  TimelineLoader(const TraceModel& model, std::function<void()> on_data, LoaderOptions options = {},
                 bool start = true);
  // Starts the thread if it is not running yet: the app holds it back until
  // its window is made, so that the two do not share the cores.
  void Start();
  ~TimelineLoader();
  TimelineLoader(const TimelineLoader&) = delete;
  TimelineLoader& operator=(const TimelineLoader&) = delete;

  // Null until the overview is loaded; then fixed for the loader's life.
  const RunOverview* overview() const;
  // The first error met (the file went away, a damaged page), or OK.
  absl::Status error() const;
  LoaderProgress progress() const;

  // Replaces what is waiting to load with `keys` (those already cached or
  // loading are skipped): the view sends what this frame lacks, so a window
  // scrolled past before it loaded is never fetched.
  void Request(const std::vector<WindowKey>& keys);
  // A cached window exactly for `key`, or null.
  std::shared_ptr<const WindowData> Get(const WindowKey& key) const;
  // The cached window of `track_id` covering [t0, t1) whose level is closest
  // to `level` from below (finer; raw slices are the finest), else the
  // coarsest one above it; null when none covers. Truncated slices never count.
  std::shared_ptr<const WindowData> Best(int64_t track_id, int level, int64_t t0, int64_t t1) const;
  // The whole-run summaries of a track (after the overview; a simulated
  // chip's once prefetched), or null.
  std::shared_ptr<const WindowData> WholeRun(int64_t track_id) const;
  // Which lazy tracks (RunOverview::lazy_tracks) to load whole-run summaries
  // for when no requested window waits, in this order (nearest the screen
  // first); replaces the previous list. Others are ignored.
  void Prefetch(std::vector<int64_t> tracks);
  // While paused (another view is shown; at first, until the timeline is
  // drawn), nothing is prefetched, so the
  // cores go to that view's model; a chip being loaded finishes first.
  void SetPrefetchPaused(bool paused);

  // Finds the members of collective `flow_id` on `tracks` within [t0, t1).
  void RequestFlow(int64_t flow_id, std::vector<int64_t> tracks, int64_t t0, int64_t t1);
  FlowMembers flow() const;

  // Finds a slice by id (--select): its track and its full row.
  void RequestLocate(int64_t slice_id);
  // The slice found, once found; nullopt while looking or when there is none.
  std::optional<std::pair<int64_t, Slice>> located() const;
  // Why the last RequestLocate found nothing (OK while looking or when found).
  absl::Status locate_error() const;

  // names.name for a name id the loader has delivered ("" when unknown yet).
  std::string Name(int32_t name_id) const;
  // Learns names found elsewhere (a search, a range's table), so Name() knows them.
  void AddNames(const std::vector<std::pair<int32_t, std::string>>& names);
  // Wakes an idle UI the way new data does (for the view's own background queries).
  // Safe from any thread.
  void Wake() const {
    if (on_data_) on_data_();
  }
  const std::string& path() const { return path_; }
  int64_t run_id() const { return run_id_; }

  // Blocks until the overview and every requested window are loaded (tests,
  // and --screenshot, which must capture a finished frame). False on timeout.
  bool WaitIdle(double timeout_s) const;

  // Whole-run summaries: the level whose buckets over the run number at most this.
  static constexpr int kWholeRunBuckets = 2048;

 private:
  struct FlowJob {
    int64_t flow_id;
    std::vector<int64_t> tracks;
    int64_t t0, t1;
  };
  void Loop();
  absl::Status LoadWholeRun(const store::TimelineReader& tl, int64_t track_id);
  absl::StatusOr<std::shared_ptr<WindowData>> WholeRunOf(const store::TimelineReader& tl, int64_t track_id,
                                                         const RunOverview& ov) const;
  absl::Status LoadOverview(const store::TimelineReader& tl, const store::Reader& reader);
  absl::StatusOr<std::shared_ptr<WindowData>> LoadWindowData(const store::TimelineReader& tl,
                                                             const WindowKey& key);
  absl::Status LoadFlow(const store::TimelineReader& tl, const FlowJob& job);
  absl::Status Locate(const store::TimelineReader& tl, const store::Reader& reader, int64_t slice_id);
  absl::Status ResolveNames(const store::TimelineReader& tl, std::vector<int32_t> ids);
  void Insert(std::shared_ptr<WindowData> data);
  void SetError(const absl::Status& status);

  const std::string path_;
  const int64_t run_id_;
  const std::vector<Track> tracks_;
  const std::vector<Dispatch> dispatches_;
  const LoaderOptions options_;
  std::function<void()> on_data_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;       // the thread waits for work
  mutable std::condition_variable idle_cv_;  // WaitIdle waits for it to finish
  bool stop_ = false;
  // Set when the loader goes: its connection's statements fail at once, so a
  // whole-run overview still being read (minutes on a simulated pod of
  // thousands of chips) does not hold up the window's closing.
  std::atomic<bool> quitting_{false};
  absl::Status error_;
  std::unique_ptr<RunOverview> overview_;
  absl::flat_hash_map<int64_t, std::shared_ptr<const WindowData>> whole_run_;
  // The cache, in use order (front: most recent).
  std::deque<std::shared_ptr<const WindowData>> cache_;
  size_t cache_bytes_ = 0;
  std::deque<WindowKey> pending_;
  std::deque<int64_t> prefetch_;      // lazy tracks still to load, in order
  bool prefetch_paused_ = true;  // until a shown timeline says otherwise
  std::array<int, kNumClocks> whole_run_level_{};  // each clock's whole-run level
  absl::flat_hash_map<int64_t, Clock> clock_of_;   // track -> its clock
  size_t lazy_total_ = 0, lazy_done_ = 0;
  std::optional<WindowKey> loading_;
  // A flow or locate job taken off its slot and still running: not idle yet
  // (WaitIdle returned while a flow was loading, its members still empty).
  bool job_running_ = false;
  size_t request_total_ = 0, request_done_ = 0;
  std::optional<FlowJob> flow_job_;
  FlowMembers flow_;
  std::optional<int64_t> locate_job_;
  std::optional<std::pair<int64_t, Slice>> located_;
  absl::Status locate_error_;
  absl::flat_hash_map<int32_t, std::string> names_;
  std::thread thread_;
};

}  // namespace shardscope::app
