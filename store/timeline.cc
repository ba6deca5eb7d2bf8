// Timeline reads over chunks and summaries (see timeline.h), with the same
// answers from SQL on a version-1 file's one-row-per-slice table.
#include "store/timeline.h"

#include <algorithm>
#include <tuple>
#include <sqlite3.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "store/sim_timeline.h"
#include "store/slice_chunks.h"
#include "store/sqlite_util.h"

namespace shardscope::store {

using internal::Stmt;

const char* TimelineKindName(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kCompute: return "compute";
    case TimelineKind::kCollective: return "collective";
    case TimelineKind::kTransfer: return "transfer";
    case TimelineKind::kHost: return "host";
    case TimelineKind::kCompile: return "compile";
    case TimelineKind::kHostWait: return "host_wait";
  }
  return "compute";
}

int64_t SummaryWidthNs(int level) { return int64_t{1} << internal::SummaryShift(level); }

int SummaryLevelFor(int64_t t0, int64_t t1, int max_buckets) {
  if (t1 <= t0) t1 = t0 + 1;
  max_buckets = std::max(1, max_buckets);
  for (int level = 0; level < kNumSummaryLevels; ++level) {
    const int shift = internal::SummaryShift(level);
    const int64_t n = ((t1 - 1) >> shift) - (t0 >> shift) + 1;
    if (level == 0 && n <= max_buckets / 2) return -1;
    if (n <= max_buckets) return level;
  }
  return kNumSummaryLevels - 1;
}

namespace {

int64_t ColumnOr(sqlite3_stmt* q, int col, int64_t none) {
  return sqlite3_column_type(q, col) == SQLITE_NULL ? none : sqlite3_column_int64(q, col);
}

TimelineKind KindFromText(const unsigned char* text) {
  const std::string_view kind = text ? reinterpret_cast<const char*>(text) : "";
  for (int k = 0; k < kNumTimelineKinds; ++k)
    if (kind == TimelineKindName(static_cast<TimelineKind>(k))) return static_cast<TimelineKind>(k);
  return TimelineKind::kCompute;
}

// Steps a prepared query to its end, calling `row` per row; a damaged file
// is DataLoss naming `shardscope check`.
template <typename F>
absl::Status EachRow(sqlite3* db, Stmt& q, const std::string& path, F&& row) {
  int rc;
  while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
    if (absl::Status st = row(q.get()); !st.ok()) return st;
  }
  if (rc == SQLITE_DONE) return absl::OkStatus();
  std::string msg = absl::StrCat(path, ": reading the timeline: ", internal::DbError(db));
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
    return absl::DataLossError(absl::StrCat(msg, "; run `shardscope check ", path, "` for details"));
  return absl::InternalError(msg);
}

absl::Status CheckLevel(int level) {
  if (level >= 0 && level < kNumSummaryLevels) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("summary level ", level, " does not exist (levels are 0..", kNumSummaryLevels - 1, ")"));
}

// Rows arrive in key order (bucket, track, depth), so within one (track,
// depth) they are already in time order: a stable regroup by (track, depth)
// puts them in (track, depth, time) order in linear time. A comparison sort of
// these 140-byte rows cost a fifth of the whole-run query.
std::vector<TimelineReader::TrackBucket> GroupByTrackAndDepth(std::vector<TimelineReader::TrackBucket> rows) {
  using Key = std::pair<int64_t, int16_t>;
  std::vector<std::pair<Key, size_t>> groups;  // (track, depth) -> count, then offset
  absl::flat_hash_map<Key, size_t> index;
  std::vector<uint32_t> group_of(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Key k{rows[i].track_id, rows[i].bucket.depth};
    auto [it, fresh] = index.try_emplace(k, groups.size());
    if (fresh) groups.push_back({k, 0});
    ++groups[it->second].second;
    group_of[i] = static_cast<uint32_t>(it->second);
  }
  std::vector<size_t> order(groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  std::vector<size_t> next(groups.size());
  size_t at = 0;
  for (size_t g : order) {
    next[g] = at;
    at += groups[g].second;
  }
  std::vector<TimelineReader::TrackBucket> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[next[group_of[i]]++] = rows[i];
  return out;
}

}  // namespace

absl::StatusOr<bool> TimelineReader::chunked() const {
  if (chunked_ < 0) {
    auto r = reader_.Query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'slice_chunks'");
    if (!r.ok()) return r.status();
    chunked_ = r->Int(0, "n") > 0 ? 1 : 0;
  }
  return chunked_ == 1;
}

absl::StatusOr<bool> TimelineReader::simulated(int64_t run_id) const {
  for (const auto& [run, sim] : simulated_)
    if (run == run_id) return sim;
  auto sim = SimTimelineReader(reader_).IsSimulated(run_id);
  if (!sim.ok()) return sim.status();
  simulated_.emplace_back(run_id, *sim);
  return *sim;
}

absl::StatusOr<std::vector<int64_t>> TimelineReader::SimChipTracks(int64_t run_id) const {
  auto sim = simulated(run_id);
  if (!sim.ok()) return sim.status();
  if (!*sim) return std::vector<int64_t>{};
  if (auto probe = SimChipTrack(run_id, -1); !probe.ok()) return probe.status();  // fills sim_tracks_
  return sim_tracks_.at(run_id);
}

absl::StatusOr<bool> TimelineReader::SimChipTrack(int64_t run_id, int64_t track_id) const {
  auto it = sim_tracks_.find(run_id);
  if (it == sim_tracks_.end()) {
    auto q = reader_.Query("SELECT track_id FROM sim_chips WHERE run_id = ?1 ORDER BY track_id",
                           {absl::StrCat(run_id)});
    if (!q.ok()) return q.status();
    std::vector<int64_t> tracks;
    for (size_t i = 0; i < q->rows.size(); ++i) tracks.push_back(q->Int(i, "track_id"));
    it = sim_tracks_.emplace(run_id, std::move(tracks)).first;
  }
  return std::binary_search(it->second.begin(), it->second.end(), track_id);
}

// A simulated run stores schedules, not slices (store/sim_timeline.h): its
// buckets are made from them, a chip at a time, in (track, depth, time) order.
absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::ReadSimSummaries(int64_t run_id,
                                                                                         int64_t track_id, int level,
                                                                                         int64_t t0,
                                                                                         int64_t t1) const {
  std::vector<int64_t> tracks;
  if (track_id >= 0) {
    tracks.push_back(track_id);
  } else {
    auto q = reader_.Query("SELECT track_id FROM sim_chips WHERE run_id = ?1 ORDER BY track_id",
                           {absl::StrCat(run_id)});
    if (!q.ok()) return q.status();
    for (size_t i = 0; i < q->rows.size(); ++i) tracks.push_back(q->Int(i, "track_id"));
  }
  SimTimelineReader sim(reader_);
  std::vector<TrackBucket> out;
  for (int64_t track : tracks) {
    auto b = sim.Summaries(run_id, track, level, t0, t1);
    if (!b.ok()) return b.status();
    for (const SummaryBucket& x : *b) out.push_back({track, x});
  }
  return GroupByTrackAndDepth(std::move(out));
}

absl::StatusOr<bool> TimelineReader::grouped() const {
  if (grouped_ < 0) {
    auto r = reader_.Query(
        "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'slice_summary_groups'");
    if (!r.ok()) return r.status();
    grouped_ = r->Int(0, "n") > 0 ? 1 : 0;
  }
  return grouped_ == 1;
}

// Version 3: 32 buckets to a row; the rows whose groups meet [b0, b1],
// decoded natively (the whole-run view of a 10M-slice run is ~1.5k rows).
absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::ReadGroups(int64_t run_id, int64_t track_id,
                                                                                    int level, int64_t t0,
                                                                                    int64_t t1) const {
  const int shift = internal::SummaryShift(level);
  const int64_t b0 = t0 >> shift, b1 = (std::max(t1, t0 + 1) - 1) >> shift;
  sqlite3* db = reader_.connection();
  Stmt q;
  if (absl::Status st = q.Prepare(db,
                                  "SELECT track_id, depth, first_bucket, slice_base, step_base, count, buckets"
                                  " FROM slice_summary_groups WHERE run_id = ?1 AND level = ?2"
                                  " AND first_bucket >= ?4 AND first_bucket <= ?5 AND (?3 < 0 OR track_id = ?3)");
      !st.ok())
    return st;
  q.Int(1, run_id);
  q.Int(2, level);
  q.Int(3, track_id);
  q.Int(4, internal::GroupOf(b0));
  q.Int(5, b1);
  // Rows come in key order (first_bucket, track, depth): decode them as they
  // come, then order the rows (a few thousand), not the buckets.
  struct Span {
    int64_t track, first_bucket;
    int16_t depth;
    uint32_t begin, end;
  };
  std::vector<Span> spans;
  std::vector<SummaryBucket> buckets;
  absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
    const size_t begin = buckets.size();
    const int64_t track = sqlite3_column_int64(s, 0), first_bucket = sqlite3_column_int64(s, 2);
    const auto depth = static_cast<int16_t>(std::clamp<int64_t>(sqlite3_column_int64(s, 1), 0, INT16_MAX));
    absl::Status st = internal::DecodeGroup(
        level, depth, first_bucket, sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4), sqlite3_column_int64(s, 5),
        internal::ColumnView(s, 6), &buckets, b0,
        b1);
    if (!st.ok()) return absl::DataLossError(absl::StrCat(reader_.path(), ": ", st.message(), "; run `shardscope check ",
                                                          reader_.path(), "` for details"));
    if (buckets.size() > begin)
      spans.push_back({track, first_bucket, depth, static_cast<uint32_t>(begin), static_cast<uint32_t>(buckets.size())});
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.track, a.depth, a.first_bucket) < std::tie(b.track, b.depth, b.first_bucket);
  });
  std::vector<TrackBucket> out;
  out.reserve(buckets.size());
  for (const Span& sp : spans)
    for (uint32_t i = sp.begin; i < sp.end; ++i) out.push_back({sp.track, buckets[i]});
  return out;
}

absl::StatusOr<int64_t> TimelineReader::MaxChunkSpan(int64_t run_id, int64_t track_id) const {
  auto found = [&]() -> const int64_t* {
    for (const auto& [run, track, span] : spans_)
      if (run == run_id && track == track_id) return &span;
    return nullptr;
  };
  if (const int64_t* span = found()) return *span;
  sqlite3* db = reader_.connection();
  // A run still being written may store longer chunks later: ask again each
  // time, one track through the index. A finished run's spans never change:
  // every track's at once, from the (run, track, start, end) index alone
  // (the chunk rows, the whole trace, are never read for it).
  bool finished = false;
  {
    Stmt q;
    if (absl::Status st = q.Prepare(db, "SELECT ended_at_ns IS NOT NULL FROM runs WHERE run_id = ?1"); !st.ok())
      return st;
    q.Int(1, run_id);
    if (absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
          finished = sqlite3_column_int64(s, 0) != 0;
          return absl::OkStatus();
        });
        !st.ok())
      return st;
  }
  Stmt q;
  if (absl::Status st = q.Prepare(db, finished ? "SELECT track_id, max(end_ns - start_ns) FROM slice_chunks"
                                                 " WHERE run_id = ?1 GROUP BY track_id"
                                               : "SELECT track_id, max(end_ns - start_ns) FROM slice_chunks"
                                                 " WHERE run_id = ?1 AND track_id = ?2");
      !st.ok())
    return st;
  q.Int(1, run_id);
  if (!finished) q.Int(2, track_id);
  int64_t span = 0;
  if (finished && spans_.size() > 65536) spans_.clear();
  if (absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
        const int64_t track = sqlite3_column_int64(s, 0), longest = std::max<int64_t>(0, sqlite3_column_int64(s, 1));
        if (track == track_id) span = longest;
        if (finished) spans_.emplace_back(run_id, track, longest);
        return absl::OkStatus();
      });
      !st.ok())
    return st;
  // A track with no chunks: remembered too, so an empty lane costs one query.
  if (finished && !found()) spans_.emplace_back(run_id, track_id, 0);
  return span;
}

absl::StatusOr<std::vector<TimelineSlice>> TimelineReader::Slices(int64_t run_id, int64_t track_id, int64_t t0,
                                                                  int64_t t1, size_t max_slices,
                                                                  bool* truncated) const {
  if (truncated) *truncated = false;
  auto sim = simulated(run_id);
  if (!sim.ok()) return sim.status();
  if (*sim) {
    // Its chips are made from the schedule; its host lanes are stored slices.
    auto chip = SimChipTrack(run_id, track_id);
    if (!chip.ok()) return chip.status();
    if (*chip) return SimTimelineReader(reader_).Slices(run_id, track_id, t0, t1, max_slices, truncated);
  }
  auto is_chunked = chunked();
  if (!is_chunked.ok()) return is_chunked.status();
  sqlite3* db = reader_.connection();
  std::vector<TimelineSlice> out;
  auto full = [&] { return max_slices > 0 && out.size() >= max_slices; };
  Stmt q;
  if (*is_chunked) {
    // Chunks are found by start through the index; one that starts before t0
    // can reach into the window by at most the track's longest chunk.
    auto span = MaxChunkSpan(run_id, track_id);
    if (!span.ok()) return span.status();
    if (absl::Status st = q.Prepare(db,
                                    absl::StrCat("SELECT ", internal::kChunkRowColumns,
                                                 " FROM slice_chunks WHERE run_id = ?1 AND track_id = ?2 AND start_ns >= ?3"
                                    " AND start_ns < ?4 AND end_ns >= ?5 ORDER BY start_ns"));
        !st.ok())
      return st;
    q.Int(1, run_id);
    q.Int(2, track_id);
    q.Int(3, t0 - *span);
    q.Int(4, t1);
    q.Int(5, t0);
    std::vector<TimelineSlice> chunk;
    absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) -> absl::Status {
      if (full()) return absl::OkStatus();
      chunk.clear();
      if (absl::Status d = internal::DecodeChunkRow(s, &chunk); !d.ok())
        return absl::Status(d.code(), absl::StrCat(reader_.path(), ": ", d.message()));
      for (const TimelineSlice& x : chunk) {
        if (x.start_ns >= t1 || x.start_ns + x.dur_ns < t0) continue;
        if (full()) break;
        out.push_back(x);
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  } else {
    if (absl::Status st = q.Prepare(db,
                                    "SELECT slice_id, start_ns, dur_ns, depth, parent_id, name_id, kind, step,"
                                    " graph_id, op_id, flow_id, bytes FROM slices WHERE run_id = ?1 AND"
                                    " track_id = ?2 AND start_ns < ?3 AND start_ns + dur_ns >= ?4 ORDER BY start_ns");
        !st.ok())
      return st;
    q.Int(1, run_id);
    q.Int(2, track_id);
    q.Int(3, t1);
    q.Int(4, t0);
    absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
      if (full()) return absl::OkStatus();
      TimelineSlice x;
      x.slice_id = sqlite3_column_int64(s, 0);
      x.start_ns = sqlite3_column_int64(s, 1);
      x.dur_ns = std::max<int64_t>(0, sqlite3_column_int64(s, 2));
      x.depth = static_cast<int16_t>(std::clamp<int64_t>(sqlite3_column_int64(s, 3), 0, INT16_MAX));
      x.parent_id = ColumnOr(s, 4, -1);
      x.name_id = static_cast<int32_t>(sqlite3_column_int64(s, 5));
      x.kind = KindFromText(sqlite3_column_text(s, 6));
      const int64_t step = ColumnOr(s, 7, -1);
      x.step = step > INT32_MAX ? -1 : static_cast<int32_t>(step);
      x.graph_id = ColumnOr(s, 8, -1);
      x.op_id = ColumnOr(s, 9, -1);
      x.flow_id = ColumnOr(s, 10, -1);
      x.bytes = sqlite3_column_int64(s, 11);
      out.push_back(x);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  if (truncated) *truncated = full();
  std::sort(out.begin(), out.end(), [](const TimelineSlice& a, const TimelineSlice& b) {
    return a.depth != b.depth ? a.depth < b.depth : a.start_ns != b.start_ns ? a.start_ns < b.start_ns
                                                                             : a.slice_id < b.slice_id;
  });
  return out;
}

absl::StatusOr<std::vector<SummaryBucket>> TimelineReader::Summaries(int64_t run_id, int64_t track_id, int level,
                                                                     int64_t t0, int64_t t1) const {
  auto all = ReadSummaries(run_id, track_id, level, t0, t1);
  if (!all.ok()) return all.status();
  std::vector<SummaryBucket> out;
  out.reserve(all->size());
  for (TrackBucket& b : *all) out.push_back(b.bucket);
  return out;
}

absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::AllSummaries(int64_t run_id, int level,
                                                                                      int64_t t0, int64_t t1) const {
  return ReadSummaries(run_id, -1, level, t0, t1);
}

absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::StoredSummaries(int64_t run_id, int level,
                                                                                         int64_t t0, int64_t t1) const {
  if (absl::Status st = CheckLevel(level); !st.ok()) return st;
  return ReadStoredSummaries(run_id, -1, level, t0, t1);  // a simulated run's chips have none stored
}

absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::ReadSummaries(int64_t run_id,
                                                                                       int64_t track_id, int level,
                                                                                       int64_t t0, int64_t t1) const {
  if (absl::Status st = CheckLevel(level); !st.ok()) return st;
  auto sim = simulated(run_id);
  if (!sim.ok()) return sim.status();
  if (*sim) {
    // Its chips' buckets are made from the schedule; its host lanes' are stored.
    if (track_id >= 0) {
      auto chip = SimChipTrack(run_id, track_id);
      if (!chip.ok()) return chip.status();
      if (*chip) return ReadSimSummaries(run_id, track_id, level, t0, t1);
    } else {
      auto chips = ReadSimSummaries(run_id, -1, level, t0, t1);
      if (!chips.ok()) return chips.status();
      auto stored = ReadStoredSummaries(run_id, -1, level, t0, t1);
      if (!stored.ok()) return stored.status();
      chips->insert(chips->end(), stored->begin(), stored->end());
      return GroupByTrackAndDepth(*std::move(chips));
    }
  }
  return ReadStoredSummaries(run_id, track_id, level, t0, t1);
}

absl::StatusOr<std::vector<TimelineReader::TrackBucket>> TimelineReader::ReadStoredSummaries(int64_t run_id,
                                                                                             int64_t track_id,
                                                                                             int level, int64_t t0,
                                                                                             int64_t t1) const {
  auto is_chunked = chunked();
  if (!is_chunked.ok()) return is_chunked.status();
  auto is_grouped = grouped();
  if (!is_grouped.ok()) return is_grouped.status();
  if (*is_grouped) return ReadGroups(run_id, track_id, level, t0, t1);
  const int shift = internal::SummaryShift(level);
  sqlite3* db = reader_.connection();
  Stmt q;
  // Version 2 kept a row per bucket; version 1 stored no summaries: the same buckets by SQL (the bare columns
  // beside max(dur_ns) come from the longest slice's row). ?3 = -1: every track.
  const char* sql =
      *is_chunked
          ? "SELECT depth, bucket, count, busy_ns, compute_ns, collective_ns, transfer_ns, host_ns, compile_ns,"
            " host_wait_ns, longest_slice_id, longest_start_ns, longest_dur_ns, longest_name_id, longest_kind,"
            " first_step, last_step, track_id FROM slice_summaries WHERE run_id = ?1 AND level = ?2"
            " AND bucket >= ?4 AND bucket <= ?5 AND (?3 < 0 OR track_id = ?3)"  // key order; sorted below
          : "SELECT depth, start_ns >> ?6 AS b, count(*), sum(dur_ns),"
            " sum(CASE kind WHEN 'compute' THEN dur_ns ELSE 0 END),"
            " sum(CASE kind WHEN 'collective' THEN dur_ns ELSE 0 END),"
            " sum(CASE kind WHEN 'transfer' THEN dur_ns ELSE 0 END),"
            " sum(CASE kind WHEN 'host' THEN dur_ns ELSE 0 END),"
            " sum(CASE kind WHEN 'compile' THEN dur_ns ELSE 0 END),"
            " sum(CASE kind WHEN 'host_wait' THEN dur_ns ELSE 0 END),"
            " slice_id, start_ns, max(dur_ns), name_id, kind, min(step), max(step), track_id FROM slices"
            " WHERE run_id = ?1 AND ?2 >= 0 AND (?3 < 0 OR track_id = ?3) AND start_ns >= (?4 << ?6)"
            " AND start_ns < ((?5 + 1) << ?6) GROUP BY track_id, depth, b ORDER BY track_id, depth, b";
  if (absl::Status st = q.Prepare(db, sql); !st.ok()) return st;
  q.Int(1, run_id);
  q.Int(2, level);
  q.Int(3, track_id);
  q.Int(4, t0 >> shift);
  q.Int(5, (std::max(t1, t0 + 1) - 1) >> shift);
  if (!*is_chunked) q.Int(6, shift);
  std::vector<TrackBucket> out;
  {
    // Room for a bucket per track over the range (more come with depth):
    // growing a vector of these rows copied them over and over.
    int64_t tracks = 1;
    if (track_id < 0) {
      Stmt n;
      if (n.Prepare(db, "SELECT count(*) FROM tracks WHERE run_id = ?1").ok()) {
        n.Int(1, run_id);
        if (sqlite3_step(n.get()) == SQLITE_ROW) tracks = std::max<int64_t>(1, sqlite3_column_int64(n.get(), 0));
      }
    }
    const int64_t buckets = ((std::max(t1, t0 + 1) - 1) >> shift) - (t0 >> shift) + 1;
    out.reserve(static_cast<size_t>(std::min<int64_t>(int64_t{1} << 22, std::min<int64_t>(buckets, 1 << 16) * tracks)));
  }
  absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
    SummaryBucket b;
    b.depth = static_cast<int16_t>(std::clamp<int64_t>(sqlite3_column_int64(s, 0), 0, INT16_MAX));
    b.start_ns = sqlite3_column_int64(s, 1) << shift;
    b.width_ns = int64_t{1} << shift;
    b.count = sqlite3_column_int64(s, 2);
    b.busy_ns = sqlite3_column_int64(s, 3);
    for (int k = 0; k < kNumTimelineKinds; ++k) b.kind_ns[k] = sqlite3_column_int64(s, 4 + k);
    b.longest_slice_id = sqlite3_column_int64(s, 10);
    b.longest_start_ns = sqlite3_column_int64(s, 11);
    b.longest_dur_ns = sqlite3_column_int64(s, 12);
    b.longest_name_id = static_cast<int32_t>(sqlite3_column_int64(s, 13));
    if (*is_chunked) {
      const int64_t kind = sqlite3_column_int64(s, 14);
      b.longest_kind = kind >= 0 && kind < kNumTimelineKinds ? static_cast<TimelineKind>(kind) : TimelineKind::kCompute;
    } else {
      b.longest_kind = KindFromText(sqlite3_column_text(s, 14));
    }
    b.first_step = static_cast<int32_t>(ColumnOr(s, 15, -1));
    b.last_step = static_cast<int32_t>(ColumnOr(s, 16, -1));
    out.push_back({sqlite3_column_int64(s, 17), b});
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return GroupByTrackAndDepth(std::move(out));
}

absl::StatusOr<std::vector<CounterBucket>> TimelineReader::CounterSummaries(int64_t run_id, int device_id,
                                                                            const std::string& name, int level,
                                                                            int64_t t0, int64_t t1) const {
  if (absl::Status st = CheckLevel(level); !st.ok()) return st;
  const int shift = internal::SummaryShift(level);
  sqlite3* db = reader_.connection();
  Stmt q;
  // Counters are sampled per program run, not per kernel: the index on
  // (run_id, name, ts_ns) answers this without stored summaries.
  if (absl::Status st = q.Prepare(
          db,
          "SELECT ts_ns >> ?6 AS b, count(*), min(value), max(value),"
          " (SELECT c2.value FROM counters c2 WHERE c2.run_id = ?1 AND c2.name = ?2 AND c2.device_id IS ?3"
          "   AND c2.ts_ns >= ((ts_ns >> ?6) << ?6) AND c2.ts_ns < (((ts_ns >> ?6) + 1) << ?6)"
          "   ORDER BY c2.ts_ns DESC, c2.rowid DESC LIMIT 1),"
          " max(ts_ns) FROM counters WHERE run_id = ?1 AND name = ?2 AND device_id IS ?3"
          " AND ts_ns >= (?4 << ?6) AND ts_ns < ((?5 + 1) << ?6) GROUP BY b ORDER BY b");
      !st.ok())
    return st;
  q.Int(1, run_id);
  q.Text(2, name);
  if (device_id < 0) q.Null(3);
  else q.Int(3, device_id);
  q.Int(4, t0 >> shift);
  q.Int(5, (std::max(t1, t0 + 1) - 1) >> shift);
  q.Int(6, shift);
  std::vector<CounterBucket> out;
  absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
    CounterBucket b;
    b.start_ns = sqlite3_column_int64(s, 0) << shift;
    b.width_ns = int64_t{1} << shift;
    b.count = sqlite3_column_int64(s, 1);
    b.min = sqlite3_column_double(s, 2);
    b.max = sqlite3_column_double(s, 3);
    b.last = sqlite3_column_double(s, 4);
    b.last_ts_ns = sqlite3_column_int64(s, 5);
    out.push_back(b);
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<std::vector<StepBounds>> TimelineReader::Steps(int64_t run_id) const {
  auto is_chunked = chunked();
  if (!is_chunked.ok()) return is_chunked.status();
  sqlite3* db = reader_.connection();
  Stmt q;
  const char* sql = *is_chunked
                        ? "SELECT step, clock, start_ns, end_ns FROM step_bounds WHERE run_id = ?1 ORDER BY clock, step"
                        : "SELECT s.step, t.clock, min(s.start_ns), max(s.start_ns + s.dur_ns) FROM slices s"
                          " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
                          " WHERE s.run_id = ?1 AND s.step IS NOT NULL GROUP BY t.clock, s.step ORDER BY t.clock, s.step";
  if (absl::Status st = q.Prepare(db, sql); !st.ok()) return st;
  q.Int(1, run_id);
  std::vector<StepBounds> out;
  absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
    StepBounds b;
    b.step = static_cast<int32_t>(sqlite3_column_int64(s, 0));
    const unsigned char* clock = sqlite3_column_text(s, 1);
    b.clock = clock ? reinterpret_cast<const char*>(clock) : "";
    b.start_ns = sqlite3_column_int64(s, 2);
    b.end_ns = sqlite3_column_int64(s, 3);
    out.push_back(std::move(b));
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<std::vector<std::pair<int32_t, std::string>>> TimelineReader::Names(
    const std::vector<int32_t>& name_ids) const {
  sqlite3* db = reader_.connection();
  Stmt q;
  if (absl::Status st = q.Prepare(db, "SELECT name FROM names WHERE name_id = ?1"); !st.ok()) return st;
  std::vector<std::pair<int32_t, std::string>> out;
  out.reserve(name_ids.size());
  for (int32_t id : name_ids) {
    q.Int(1, id);
    std::string name;
    absl::Status st = EachRow(db, q, reader_.path(), [&](sqlite3_stmt* s) {
      name = std::string(internal::ColumnView(s, 0));  // the whole name, a NUL in it too
      return absl::OkStatus();
    });
    sqlite3_reset(q.get());
    if (!st.ok()) return st;
    out.emplace_back(id, std::move(name));
  }
  return out;
}

}  // namespace shardscope::store
