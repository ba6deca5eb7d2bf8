// The timeline's background loader; see timeline_loader.h.
#include "ui/app/timeline_loader.h"

#include "ui/app/timeline_nav.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace shardscope::app {
namespace {

// Depth rows beyond this are folded into the last one: a runaway depth in an
// imported trace must not create thousands of empty rows.
constexpr int kMaxDepth = kMaxSliceDepth;
// Far enough to hold any stored time and still leave room for arithmetic.
constexpr int64_t kAllTimeLo = -(int64_t{1} << 61);
constexpr int64_t kAllTimeHi = int64_t{1} << 61;

int64_t LevelWidth(int level) { return store::kLevel0WidthNs << (2 * level); }

// The finest level whose buckets over [t0, t1) number at most `n`.
int LevelWithAtMost(int64_t t0, int64_t t1, int64_t n) {
  for (int level = 0; level < store::kNumSummaryLevels; ++level) {
    if ((t1 - t0) / LevelWidth(level) + 1 <= n) return level;
  }
  return store::kNumSummaryLevels - 1;
}

// Buckets split by depth (they come sorted by depth, then start).
std::vector<std::vector<store::SummaryBucket>> ByDepth(std::vector<store::SummaryBucket> buckets) {
  std::vector<std::vector<store::SummaryBucket>> depths;
  for (store::SummaryBucket& b : buckets) {
    const int d = std::clamp<int>(b.depth, 0, kMaxDepth);
    if (depths.size() <= static_cast<size_t>(d)) depths.resize(d + 1);
    depths[d].push_back(std::move(b));
  }
  for (auto& row : depths) {
    std::sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  }
  return depths;
}

size_t BytesOf(const WindowData& w) {
  size_t bytes = sizeof(WindowData);
  for (const SliceRow& r : w.rows) bytes += r.slices.capacity() * (sizeof(Slice) + sizeof(int64_t));
  for (const auto& d : w.depths) bytes += d.capacity() * sizeof(store::SummaryBucket);
  bytes += w.counter_buckets.capacity() * sizeof(store::CounterBucket);
  return bytes;
}

}  // namespace

TimelineLoader::TimelineLoader(const TraceModel& model, std::function<void()> on_data, LoaderOptions options,
                               bool start)
    : path_(model.path),
      run_id_(model.run.run_id),
      tracks_(model.tracks),
      dispatches_(model.dispatches),
      options_(options),
      on_data_(std::move(on_data)) {
  if (start) Start();
}

void TimelineLoader::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

TimelineLoader::~TimelineLoader() {
  quitting_ = true;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const RunOverview* TimelineLoader::overview() const {
  std::lock_guard lock(mu_);
  return overview_.get();
}

absl::Status TimelineLoader::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

LoaderProgress TimelineLoader::progress() const {
  std::lock_guard lock(mu_);
  // After an error nothing more will come: say done rather than spin forever.
  const bool failed = !error_.ok();
  LoaderProgress p{overview_ != nullptr || failed, failed ? request_total_ : request_done_, request_total_};
  p.whole_run_done = lazy_done_;
  p.whole_run_total = lazy_total_;
  return p;
}

void TimelineLoader::SetError(const absl::Status& status) {
  std::lock_guard lock(mu_);
  if (error_.ok()) error_ = status;
}

void TimelineLoader::Request(const std::vector<WindowKey>& keys) {
  {
    std::lock_guard lock(mu_);
    auto cached = [&](const WindowKey& k) {
      for (const auto& w : cache_) {
        if (w->key == k) return true;
      }
      return false;
    };
    std::deque<WindowKey> next;
    absl::flat_hash_set<WindowKey> seen;
    for (const WindowKey& k : keys) {
      if (!seen.insert(k).second || cached(k) || (loading_ && *loading_ == k)) continue;
      next.push_back(k);
    }
    // The same set as before (the view asks every frame until it has it):
    // keep the progress count running rather than restarting it.
    const bool same = next.size() == pending_.size() && std::equal(next.begin(), next.end(), pending_.begin());
    if (same) return;
    pending_ = std::move(next);
    request_total_ = pending_.size() + (loading_ ? 1 : 0);
    request_done_ = 0;
  }
  cv_.notify_all();
}

std::shared_ptr<const WindowData> TimelineLoader::Get(const WindowKey& key) const {
  std::lock_guard lock(mu_);
  for (const auto& w : cache_) {
    if (w->key == key) return w;
  }
  return nullptr;
}

std::shared_ptr<const WindowData> TimelineLoader::WholeRun(int64_t track_id) const {
  std::lock_guard lock(mu_);
  auto it = whole_run_.find(track_id);
  return it == whole_run_.end() ? nullptr : it->second;
}

std::shared_ptr<const WindowData> TimelineLoader::Best(int64_t track_id, int level, int64_t t0,
                                                       int64_t t1) const {
  std::lock_guard lock(mu_);
  std::shared_ptr<const WindowData> finer, coarser;
  auto consider = [&](const std::shared_ptr<const WindowData>& w) {
    if (w->key.track_id != track_id || w->key.t0 > t0 || w->key.t1 < t1 || w->truncated) return;
    if (w->key.level <= level) {
      if (!finer || w->key.level > finer->key.level) finer = w;
    } else if (!coarser || w->key.level < coarser->key.level) {
      coarser = w;
    }
  };
  for (const auto& w : cache_) consider(w);
  if (auto it = whole_run_.find(track_id); it != whole_run_.end()) {
    // Whole-run summaries cover every window: there is nothing outside the run.
    const auto& w = it->second;
    if (w->key.level <= level) {
      if (!finer || w->key.level > finer->key.level) finer = w;
    } else if (!coarser || w->key.level < coarser->key.level) {
      coarser = w;
    }
  }
  return finer ? finer : coarser;
}

void TimelineLoader::RequestFlow(int64_t flow_id, std::vector<int64_t> tracks, int64_t t0, int64_t t1) {
  {
    std::lock_guard lock(mu_);
    flow_job_ = FlowJob{flow_id, std::move(tracks), t0, t1};
    flow_ = FlowMembers{flow_id, {}, false};
  }
  cv_.notify_all();
}

void TimelineLoader::RequestLocate(int64_t slice_id) {
  {
    std::lock_guard lock(mu_);
    locate_job_ = slice_id;
    located_.reset();
    locate_error_ = absl::OkStatus();
  }
  cv_.notify_all();
}

std::optional<std::pair<int64_t, Slice>> TimelineLoader::located() const {
  std::lock_guard lock(mu_);
  return located_;
}

absl::Status TimelineLoader::locate_error() const {
  std::lock_guard lock(mu_);
  return locate_error_;
}

absl::Status TimelineLoader::Locate(const store::TimelineReader& tl, const store::Reader& reader,
                                    int64_t slice_id) {
  // Candidate windows: per track, the chunk whose first slice id is the
  // largest not above the one sought (ids grow within a track's chunks), so
  // at most one chunk per track; the `slices` view would decode every chunk
  // of the run to find one row. A version-1 file has no chunks: ask the table.
  struct Candidate {
    int64_t track, t0, t1, first_id;
  };
  std::vector<Candidate> candidates;
  auto chunked = tl.chunked();
  if (!chunked.ok()) return chunked.status();
  const std::vector<std::string> params{absl::StrCat(run_id_), absl::StrCat(slice_id)};
  // A simulated chip's slice is made on demand, in no chunk: its id says
  // which program run (seq) and chip (profiler/trace/sim_program.h,
  // SimSliceId), so the chip's lane in that run's step is the one window.
  if (slice_id >= (int64_t{1} << 62)) {
    auto sim = reader.Query(
        "SELECT c.track_id, c.device_id, (SELECT count(*) FROM sim_chips WHERE run_id = ?1) AS chips"
        " FROM sim_chips c WHERE c.run_id = ?1 ORDER BY c.device_id",
        {absl::StrCat(run_id_)});
    if (sim.ok() && !sim->rows.empty()) {
      const int64_t chips = std::max<int64_t>(1, sim->Int(0, "chips"));
      const int64_t idx = (slice_id >> 17) & 0xffffffffLL, seq = idx / chips, chip = idx % chips;
      auto step = reader.Query(
          "SELECT b.start_ns, b.end_ns FROM sim_runs r JOIN step_bounds b ON b.run_id = r.run_id AND b.step = r.step"
          " AND b.clock = 'modeled' WHERE r.run_id = ?1 AND r.seq = ?2",
          {absl::StrCat(run_id_), absl::StrCat(seq)});
      if (step.ok() && !step->rows.empty() && chip < static_cast<int64_t>(sim->rows.size()))
        candidates.push_back(Candidate{sim->Int(static_cast<size_t>(chip), "track_id"), step->Int(0, "start_ns"),
                                       step->Int(0, "end_ns"), slice_id});
    }
  }
  auto rows = *chunked
                  ? reader.Query("SELECT c.track_id, c.start_ns, c.end_ns, c.first_slice_id FROM slice_chunks c JOIN "
                                 "(SELECT track_id, max(first_slice_id) AS f FROM slice_chunks WHERE run_id = ?1 AND "
                                 "first_slice_id <= ?2 GROUP BY track_id) m ON c.run_id = ?1 AND c.track_id = m.track_id "
                                 "AND c.first_slice_id = m.f",
                                 params)
                  : reader.Query("SELECT track_id, start_ns, start_ns + dur_ns AS end_ns, slice_id FROM slices "
                                 "WHERE run_id = ?1 AND slice_id = ?2",
                                 params);
  if (!rows.ok()) return rows.status();
  for (size_t i = 0; i < rows->rows.size(); ++i) {
    candidates.push_back(Candidate{rows->Int(i, "track_id"), rows->Int(i, "start_ns"), rows->Int(i, "end_ns"),
                                   rows->Int(i, rows->columns[3])});
  }
  // The closest first id is the likeliest holder.
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.first_id > b.first_id; });
  for (const Candidate& c : candidates) {
    auto slices = tl.Slices(run_id_, c.track, c.t0, std::max(c.t1, c.t0) + 1, 0);
    if (!slices.ok()) return slices.status();
    for (const store::TimelineSlice& t : *slices) {
      if (t.slice_id != slice_id) continue;
      if (auto s = ResolveNames(tl, {t.name_id}); !s.ok()) return s;
      std::lock_guard lock(mu_);
      located_ = std::pair{c.track, SliceFromStore(t)};
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("run ", run_id_, " has no slice ", slice_id));
}


FlowMembers TimelineLoader::flow() const {
  std::lock_guard lock(mu_);
  return flow_;
}

std::string TimelineLoader::Name(int32_t name_id) const {
  std::lock_guard lock(mu_);
  auto it = names_.find(name_id);
  return it == names_.end() ? std::string() : it->second;
}

void TimelineLoader::AddNames(const std::vector<std::pair<int32_t, std::string>>& names) {
  std::lock_guard lock(mu_);
  for (const auto& [id, name] : names) names_.try_emplace(id, name);
}

bool TimelineLoader::WaitIdle(double timeout_s) const {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] {
    return !error_.ok() ||
           (overview_ && pending_.empty() && !loading_ && !flow_job_ && !locate_job_ && !job_running_);
  });
}

void TimelineLoader::Insert(std::shared_ptr<WindowData> data) {
  data->bytes = BytesOf(*data);
  std::lock_guard lock(mu_);
  cache_bytes_ += data->bytes;
  cache_.push_front(std::move(data));
  // Oldest out first; what a frame still draws stays alive through its shared_ptr.
  while (cache_bytes_ > options_.cache_bytes && cache_.size() > 1) {
    cache_bytes_ -= cache_.back()->bytes;
    cache_.pop_back();
  }
}

absl::Status TimelineLoader::ResolveNames(const store::TimelineReader& tl, std::vector<int32_t> ids) {
  {
    std::lock_guard lock(mu_);
    std::erase_if(ids, [&](int32_t id) { return id == 0 || names_.contains(id); });
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return absl::OkStatus();
  auto names = tl.Names(ids);
  if (!names.ok()) return names.status();
  std::lock_guard lock(mu_);
  for (auto& [id, name] : *names) names_[id] = std::move(name);
  return absl::OkStatus();
}

absl::Status TimelineLoader::LoadOverview(const store::TimelineReader& tl, const store::Reader& reader) {
  auto ov = std::make_unique<RunOverview>();
  // A simulated run's chips: their summaries are made from the schedule, a
  // chip at a time, so the passes below read only the stored tracks, and the
  // chips' extent is their clock's steps' (the store makes a chip's slices
  // from the program runs that step_bounds places, so none lies outside).
  auto lazy = tl.SimChipTracks(run_id_);
  if (!lazy.ok()) return lazy.status();
  ov->lazy_tracks = *std::move(lazy);
  auto is_lazy = [&](int64_t track) {
    return std::binary_search(ov->lazy_tracks.begin(), ov->lazy_tracks.end(), track);
  };
  auto steps = tl.Steps(run_id_);
  if (!steps.ok()) return steps.status();
  for (const store::StepBounds& s : *steps) {
    auto clock = ParseClock(s.clock);
    if (!clock) continue;
    ov->steps[static_cast<int>(*clock)].push_back(StepSpan{s.step, s.start_ns, s.end_ns});
  }
  for (auto& v : ov->steps) {
    std::sort(v.begin(), v.end(), [](const StepSpan& a, const StepSpan& b) { return a.step < b.step; });
  }

  // Each track's extent, found coarse to fine over all tracks of a clock at
  // once: a few buckets per track per query, a few queries per clock.
  struct Extent {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    bool empty() const { return lo > hi; }
  };
  absl::flat_hash_map<int64_t, Clock> clock_of;
  for (const Track& t : tracks_) clock_of[t.track_id] = t.clock;
  absl::flat_hash_map<int64_t, Extent> track_extent;
  for (Clock clock : {Clock::kHost, Clock::kDevice, Clock::kModeled}) {
    int level = store::kNumSummaryLevels - 1;
    int64_t lo = kAllTimeLo, hi = kAllTimeHi;
    for (int pass = 0; pass < store::kNumSummaryLevels; ++pass) {
      auto buckets = tl.StoredSummaries(run_id_, level, lo, hi);
      if (!buckets.ok()) return buckets.status();
      Extent all;
      absl::flat_hash_map<int64_t, Extent> found;
      for (const auto& tb : *buckets) {
        auto it = clock_of.find(tb.track_id);
        if (it == clock_of.end() || it->second != clock || tb.bucket.count <= 0) continue;
        const store::SummaryBucket& b = tb.bucket;
        Extent& e = found[tb.track_id];
        e.lo = std::min(e.lo, b.start_ns);
        e.hi = std::max({e.hi, b.start_ns + b.width_ns, b.longest_start_ns + b.longest_dur_ns});
        all.lo = std::min(all.lo, e.lo);
        all.hi = std::max(all.hi, e.hi);
      }
      if (all.empty()) break;  // keep what the coarser pass found
      for (auto& [track, e] : found) track_extent[track] = e;
      const int finer = LevelWithAtMost(all.lo, all.hi, 64);
      if (finer >= level) break;
      level = finer;
      lo = all.lo;
      hi = all.hi;
    }
  }
  // A clock's extent: its tracks', its steps', and for the host its compilations'.
  std::array<Extent, kNumClocks> clock_extent;
  for (const Track& t : tracks_) {
    auto it = track_extent.find(t.track_id);
    if (it == track_extent.end()) continue;
    Extent& ce = clock_extent[static_cast<int>(t.clock)];
    ce.lo = std::min(ce.lo, it->second.lo);
    ce.hi = std::max(ce.hi, it->second.hi);
  }
  for (int c = 0; c < kNumClocks; ++c) {
    for (const StepSpan& s : ov->steps[c]) {
      clock_extent[c].lo = std::min(clock_extent[c].lo, s.start_ns);
      clock_extent[c].hi = std::max(clock_extent[c].hi, s.end_ns);
    }
  }
  auto compiles = reader.Query(
      "SELECT MIN(host_start_ns) AS lo, MAX(host_start_ns + duration_ns) AS hi, COUNT(*) AS n "
      "FROM compilations WHERE run_id = ?1",
      {absl::StrCat(run_id_)});
  if (!compiles.ok()) return compiles.status();
  if (compiles->Int(0, "n") > 0) {
    Extent& he = clock_extent[static_cast<int>(Clock::kHost)];
    he.lo = std::min(he.lo, compiles->Int(0, "lo"));
    he.hi = std::max(he.hi, compiles->Int(0, "hi"));
  }
  for (int c = 0; c < kNumClocks; ++c) {
    if (!clock_extent[c].empty()) ov->extent[c] = std::pair{clock_extent[c].lo, clock_extent[c].hi};
  }
  ov->alignment = AlignClocks(ov->steps, dispatches_, ov->extent);

  // Whole-run summaries per track, at the level that gives each clock about
  // kWholeRunBuckets buckets: what any zoomed-out frame draws from.
  std::vector<int32_t> names;
  absl::flat_hash_map<int64_t, std::shared_ptr<WindowData>> whole;
  for (const Track& t : tracks_) {
    if (is_lazy(t.track_id)) continue;
    const auto& ext = ov->extent[static_cast<int>(t.clock)];
    auto w = std::make_shared<WindowData>();
    const int level = ext ? LevelWithAtMost(ext->first, ext->second, kWholeRunBuckets) : 0;
    w->key = WindowKey{t.track_id, level, kAllTimeLo, kAllTimeHi};
    whole[t.track_id] = std::move(w);
  }
  // One query per level (clocks usually share one), over the union of their extents.
  std::map<int, std::pair<int64_t, int64_t>> ranges;  // level -> [lo, hi)
  std::array<int, kNumClocks> clock_level{};
  for (int c = 0; c < kNumClocks; ++c) {
    const auto& ext = ov->extent[c];
    if (!ext) continue;
    clock_level[c] = LevelWithAtMost(ext->first, ext->second, kWholeRunBuckets);
    auto [it, fresh] = ranges.try_emplace(clock_level[c], *ext);
    it->second = {std::min(it->second.first, ext->first), std::max(it->second.second, ext->second)};
  }
  for (const auto& [level, range] : ranges) {
    auto buckets = tl.StoredSummaries(run_id_, level, range.first, range.second);
    if (!buckets.ok()) return buckets.status();
    absl::flat_hash_map<int64_t, std::vector<store::SummaryBucket>> per_track;
    for (auto& tb : *buckets) {
      auto it = clock_of.find(tb.track_id);
      if (it == clock_of.end() || clock_level[static_cast<int>(it->second)] != level) continue;
      if (!whole.contains(tb.track_id)) continue;
      const auto& ext = ov->extent[static_cast<int>(it->second)];
      if (!ext || tb.bucket.start_ns + tb.bucket.width_ns <= ext->first || tb.bucket.start_ns >= ext->second) continue;
      names.push_back(tb.bucket.longest_name_id);
      per_track[tb.track_id].push_back(std::move(tb.bucket));
    }
    for (auto& [track, list] : per_track) whole[track]->depths = ByDepth(std::move(list));
  }
  absl::flat_hash_map<int64_t, std::shared_ptr<const WindowData>> whole_const;
  for (auto& [track, w] : whole) {
    ov->depths[track] = std::max<int>(1, static_cast<int>(w->depths.size()));
    w->bytes = BytesOf(*w);
    whole_const[track] = std::move(w);
  }
  whole_run_level_ = clock_level;
  clock_of_ = clock_of;
  if (!ov->lazy_tracks.empty()) {
    // The chips' rows: every chip of a simulated pod runs the same SPMD
    // programs, so its first chip's depth stands for all (the layout needs
    // one before any other chip is read). Its summaries are the only chip's
    // read at open.
    const int64_t first = ov->lazy_tracks.front();
    auto w = WholeRunOf(tl, first, *ov);
    if (!w.ok()) return w.status();
    for (const auto& row : (*w)->depths) {
      for (const store::SummaryBucket& b : row) names.push_back(b.longest_name_id);
    }
    const int rows = std::max<int>(1, static_cast<int>((*w)->depths.size()));
    for (int64_t track : ov->lazy_tracks) ov->depths[track] = rows;
    whole_const[first] = *std::move(w);
  }

  // Counters: which exist (names through the (run, name, ts) index, one probe
  // per name; then the chips of the per-chip ones), with whole-run summaries
  // on the host clock, which counters are sampled on.
  std::vector<std::string> counter_names;
  std::string after;
  for (;;) {
    auto next = reader.Query(
        "SELECT name, device_id FROM counters WHERE run_id = ?1 AND name > ?2 ORDER BY name LIMIT 1",
        {absl::StrCat(run_id_), after});
    if (!next.ok()) return next.status();
    if (next->rows.empty() || next->Text(0, "name") == after) break;
    after = next->Text(0, "name");
    counter_names.push_back(after);
  }
  const auto& host_ext = ov->extent[static_cast<int>(Clock::kHost)];
  int64_t c_lo = host_ext ? host_ext->first : 0, c_hi = host_ext ? host_ext->second : 1;
  for (const std::string& name : counter_names) {
    auto span = reader.Query("SELECT MIN(ts_ns) AS lo, MAX(ts_ns) AS hi FROM counters WHERE run_id = ?1 AND name = ?2",
                             {absl::StrCat(run_id_), name});
    if (!span.ok()) return span.status();
    c_lo = std::min(c_lo, span->Int(0, "lo"));
    c_hi = std::max(c_hi, span->Int(0, "hi") + 1);
  }
  const int counter_level = LevelWithAtMost(c_lo, c_hi, kWholeRunBuckets);
  const int shift = 22 + 2 * counter_level;  // kLevel0WidthNs << (2 * level), as a shift
  static_assert(store::kLevel0WidthNs == int64_t{1} << 22, "the shift above follows kLevel0WidthNs");
  for (const std::string& name : counter_names) {
    // One pass over the name's samples for every chip at once, bucketed as
    // CounterSummaries would: asking it chip by chip would read every chip's
    // samples once per chip (its index has no device_id).
    std::map<int, std::vector<store::CounterBucket>> per_device;
    // Straight from SQLite's columns: these can be millions of samples, and
    // text cells would cost an allocation each.
    sqlite3* db = reader.connection();
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db,
                           "SELECT coalesce(device_id, -1), ts_ns, value FROM counters WHERE run_id = ?1 AND name = ?2 "
                           "ORDER BY ts_ns",
                           -1, &q, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat(path_, ": reading counters: ", sqlite3_errmsg(db)));
    }
    sqlite3_bind_int64(q, 1, run_id_);
    sqlite3_bind_text(q, 2, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      const int device = sqlite3_column_int(q, 0);
      const int64_t ts = sqlite3_column_int64(q, 1);
      const double v = sqlite3_column_double(q, 2);
      auto& buckets = per_device[device];
      const int64_t start = (ts >> shift) << shift;
      if (buckets.empty() || buckets.back().start_ns != start) {
        store::CounterBucket b;
        b.start_ns = start;
        b.width_ns = int64_t{1} << shift;
        b.min = b.max = v;
        buckets.push_back(b);
      }
      store::CounterBucket& b = buckets.back();
      ++b.count;
      b.min = std::min(b.min, v);
      b.max = std::max(b.max, v);
      b.last = v;
      b.last_ts_ns = ts;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
      return absl::DataLossError(absl::StrCat(path_, ": reading counters: ", sqlite3_errmsg(db),
                                              "; run `shardscope check ", path_, "` for details"));
    }
    for (auto& [device, buckets] : per_device) {
      CounterTrack ct;
      if (device >= 0) ct.device_id = device;
      ct.name = name;
      ct.min = std::numeric_limits<double>::max();
      ct.max = std::numeric_limits<double>::lowest();
      for (const auto& b : buckets) {
        ct.min = std::min(ct.min, b.min);
        ct.max = std::max(ct.max, b.max);
      }
      ct.whole_run = std::move(buckets);
      ct.whole_run_level = counter_level;
      ov->counters.push_back(std::move(ct));
    }
  }
  if (auto s = ResolveNames(tl, std::move(names)); !s.ok()) return s;

  {
    std::lock_guard lock(mu_);
    whole_run_ = std::move(whole_const);
    lazy_total_ = ov->lazy_tracks.size();
    lazy_done_ = ov->lazy_tracks.empty() ? 0 : 1;
    overview_ = std::move(ov);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<WindowData>> TimelineLoader::WholeRunOf(const store::TimelineReader& tl,
                                                                      int64_t track_id, const RunOverview& ov) const {
  auto w = std::make_shared<WindowData>();
  auto it = clock_of_.find(track_id);
  const int c = it == clock_of_.end() ? 0 : static_cast<int>(it->second);
  const int level = whole_run_level_[c];
  w->key = WindowKey{track_id, level, kAllTimeLo, kAllTimeHi};
  if (const auto& ext = ov.extent[c]) {
    auto buckets = tl.Summaries(run_id_, track_id, level, ext->first, ext->second);
    if (!buckets.ok()) return buckets.status();
    w->depths = ByDepth(*std::move(buckets));
  }
  w->bytes = BytesOf(*w);
  return w;
}

absl::Status TimelineLoader::LoadWholeRun(const store::TimelineReader& tl, int64_t track_id) {
  const RunOverview* ov = overview();
  if (!ov) return absl::OkStatus();
  auto w = WholeRunOf(tl, track_id, *ov);
  if (!w.ok()) return w.status();
  std::vector<int32_t> names;
  for (const auto& row : (*w)->depths) {
    for (const store::SummaryBucket& b : row) names.push_back(b.longest_name_id);
  }
  if (auto s = ResolveNames(tl, std::move(names)); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (whole_run_.try_emplace(track_id, *std::move(w)).second) ++lazy_done_;
  return absl::OkStatus();
}

void TimelineLoader::Prefetch(std::vector<int64_t> tracks) {
  {
    std::lock_guard lock(mu_);
    prefetch_.assign(tracks.begin(), tracks.end());
  }
  cv_.notify_all();
}

void TimelineLoader::SetPrefetchPaused(bool paused) {
  {
    std::lock_guard lock(mu_);
    if (prefetch_paused_ == paused) return;
    prefetch_paused_ = paused;
  }
  cv_.notify_all();
}

absl::StatusOr<std::shared_ptr<WindowData>> TimelineLoader::LoadWindowData(const store::TimelineReader& tl,
                                                                          const WindowKey& key) {
  auto w = std::make_shared<WindowData>();
  w->key = key;
  std::vector<int32_t> names;
  if (key.counter >= 0) {
    const CounterTrack* counter = nullptr;
    {
      std::lock_guard lock(mu_);
      if (overview_ && key.counter < static_cast<int>(overview_->counters.size())) {
        counter = &overview_->counters[key.counter];  // fixed once published
      }
    }
    if (!counter) return absl::InvalidArgumentError(absl::StrCat("no counter ", key.counter));
    auto buckets = tl.CounterSummaries(run_id_, counter->device_id.value_or(-1), counter->name, key.level,
                                       key.t0 - LevelWidth(key.level), key.t1);
    if (!buckets.ok()) return buckets.status();
    w->counter_buckets = *std::move(buckets);
    w->bytes = BytesOf(*w);
    return w;
  }
  if (key.level < 0) {
    bool truncated = false;
    auto slices = tl.Slices(run_id_, key.track_id, key.t0, key.t1, options_.max_slices_per_window, &truncated);
    if (!slices.ok()) return slices.status();
    w->truncated = truncated;
    // A truncated window is not drawn (the view falls back to summaries), so
    // keep nothing of it but the fact.
    if (!truncated) {
      for (const store::TimelineSlice& t : *slices) {
        Slice s = SliceFromStore(t);
        if (w->rows.size() <= static_cast<size_t>(s.depth)) w->rows.resize(s.depth + 1);
        w->rows[s.depth].slices.push_back(s);
        names.push_back(s.name_id);
      }
      for (SliceRow& row : w->rows) row.Finish();
    }
  } else {
    auto buckets = tl.Summaries(run_id_, key.track_id, key.level, key.t0 - LevelWidth(key.level), key.t1);
    if (!buckets.ok()) return buckets.status();
    for (const auto& b : *buckets) names.push_back(b.longest_name_id);
    w->depths = ByDepth(*std::move(buckets));
  }
  if (auto s = ResolveNames(tl, std::move(names)); !s.ok()) return s;
  return w;
}

absl::Status TimelineLoader::LoadFlow(const store::TimelineReader& tl, const FlowJob& job) {
  FlowMembers found{job.flow_id, {}, true};
  std::vector<int32_t> names;
  for (int64_t track : job.tracks) {
    auto slices = tl.Slices(run_id_, track, job.t0, job.t1, 4096);
    if (!slices.ok()) return slices.status();
    for (const store::TimelineSlice& t : *slices) {
      if (t.flow_id != job.flow_id) continue;
      found.members.emplace_back(track, SliceFromStore(t));
      names.push_back(t.name_id);
    }
  }
  if (auto s = ResolveNames(tl, std::move(names)); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (flow_.flow_id == job.flow_id) flow_ = std::move(found);  // unless another was asked for since
  return absl::OkStatus();
}

void TimelineLoader::Loop() {
  auto reader = store::Reader::Open(path_, store::Reader::Threads::kOneThread);  // this thread's own
  if (!reader.ok()) {
    SetError(reader.status());
    idle_cv_.notify_all();
    if (on_data_) on_data_();
    return;
  }
  sqlite3_progress_handler(
      reader->connection(), 1000, [](void* self) { return static_cast<TimelineLoader*>(self)->quitting_ ? 1 : 0; },
      this);
  store::TimelineReader tl(*reader);
  if (auto s = LoadOverview(tl, *reader); !s.ok()) SetError(s);
  idle_cv_.notify_all();
  if (on_data_) on_data_();
  for (;;) {
    std::optional<FlowJob> flow;
    std::optional<int64_t> locate;
    std::optional<int64_t> prefetch;
    WindowKey key;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || flow_job_ || locate_job_ || !pending_.empty() || (!prefetch_paused_ && !prefetch_.empty());
      });
      if (stop_) return;
      if (!error_.ok()) {  // nothing more will load; let waiters go
        pending_.clear();
        prefetch_.clear();
        flow_job_.reset();
        locate_job_.reset();
        idle_cv_.notify_all();
        continue;
      }
      // The selection first: the user just clicked.
      if (locate_job_) {
        locate = *locate_job_;
        locate_job_.reset();
        job_running_ = true;
      } else if (flow_job_) {
        flow = std::move(flow_job_);
        flow_job_.reset();
        job_running_ = true;
      } else if (!pending_.empty()) {
        key = pending_.front();
        pending_.pop_front();
        loading_ = key;
      } else {
        // Nothing on screen waits: the next chip nearest the screen whose
        // whole-run summaries are still to read (the list may hold others).
        while (!prefetch_.empty()) {
          const int64_t t = prefetch_.front();
          prefetch_.pop_front();
          if (whole_run_.contains(t) || !overview_ ||
              !std::binary_search(overview_->lazy_tracks.begin(), overview_->lazy_tracks.end(), t)) {
            continue;
          }
          prefetch = t;
          break;
        }
        if (!prefetch) continue;
      }
    }
    if (locate) {
      // A slice that is not there is the user's mistake, not the loader's end.
      if (auto s = Locate(tl, *reader, *locate); !s.ok()) {
        std::lock_guard lock(mu_);
        locate_error_ = s;
      }
    } else if (flow) {
      if (auto s = LoadFlow(tl, *flow); !s.ok()) SetError(s);
    } else if (prefetch) {
      if (auto s = LoadWholeRun(tl, *prefetch); !s.ok()) SetError(s);
    } else {
      auto data = LoadWindowData(tl, key);
      if (data.ok()) Insert(*std::move(data));
      else SetError(data.status());
      std::lock_guard lock(mu_);
      loading_.reset();
      ++request_done_;
    }
    {
      std::lock_guard lock(mu_);
      job_running_ = false;
      if (pending_.empty() && !flow_job_ && !locate_job_) idle_cv_.notify_all();
    }
    if (on_data_) on_data_();
  }
}

}  // namespace shardscope::app
