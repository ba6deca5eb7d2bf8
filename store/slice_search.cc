// Finding slices by name across a run; see slice_search.h.
#include "store/slice_search.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/sim_timeline.h"
#include "store/slice_chunks.h"
#include "store/sqlite_util.h"

namespace shardscope::store {
namespace {

using internal::Stmt;

// More names than this and the chunk prefilter (one `instr` per name) would
// cost more than it saves: every chunk is decoded instead.
constexpr size_t kMaxPrefilterNames = 48;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Earlier(const SliceHit& a, const SliceHit& b) {
  if (a.slice.start_ns != b.slice.start_ns) return a.slice.start_ns < b.slice.start_ns;
  if (a.track_id != b.track_id) return a.track_id < b.track_id;
  return a.slice.slice_id < b.slice.slice_id;
}

// One more hit: at most 2 * max_hits are held between trims to the earliest max_hits.
void Keep(SliceSearch& out, SliceHit hit, size_t max_hits) {
  ++out.total;
  out.hits.push_back(std::move(hit));
  if (max_hits > 0 && out.hits.size() >= 2 * max_hits) {
    std::nth_element(out.hits.begin(), out.hits.begin() + max_hits, out.hits.end(), Earlier);
    out.hits.resize(max_hits);
  }
}

// The earliest max_hits, in order.
void Finish(SliceSearch& out, size_t max_hits) {
  std::sort(out.hits.begin(), out.hits.end(), Earlier);
  if (max_hits > 0 && out.hits.size() > max_hits) out.hits.resize(max_hits);
}

absl::Status Step(sqlite3* db, Stmt& q, const std::string& path, const std::function<absl::Status(sqlite3_stmt*)>& row) {
  for (;;) {
    const int rc = sqlite3_step(q.get());
    if (rc == SQLITE_DONE) return absl::OkStatus();
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) return internal::DamagedFileError(path, internal::DbError(db));
      return internal::SqliteStatus(rc, absl::StrCat(path, ": ", internal::DbError(db)));
    }
    if (absl::Status st = row(q.get()); !st.ok()) return st;
  }
}

static_assert(static_cast<int>(TimelineKind::kHostWait) == static_cast<int>(trace::SliceKind::kHostWait) &&
                  static_cast<int>(TimelineKind::kCollective) == static_cast<int>(trace::SliceKind::kCollective),
              "the store's kinds follow the recorder's");

// A simulated run keeps each program's schedule, not chunks, for its chips:
// their slices are made again, program run by program run, and offered to
// `fn` with the chip's modeled track (host lanes are chunks, searched above).
absl::Status ForEachSimSlice(const Reader& reader, int64_t run_id,
                             const std::function<void(int64_t track_id, const TimelineSlice&)>& fn) {
  auto sim = TimelineReader(reader).simulated(run_id);
  if (!sim.ok()) return sim.status();
  if (!*sim) return absl::OkStatus();
  auto tracks = reader.Query("SELECT device_id, track_id FROM sim_chips WHERE run_id = ?1", {std::to_string(run_id)});
  if (!tracks.ok()) return tracks.status();
  std::vector<int64_t> track_of;
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    const int64_t device = tracks->Int(i, "device_id");
    if (device < 0 || device > (int64_t{1} << 24)) continue;
    if (static_cast<size_t>(device) >= track_of.size()) track_of.resize(static_cast<size_t>(device) + 1, -1);
    track_of[static_cast<size_t>(device)] = tracks->Int(i, "track_id");
  }
  return SimTimelineReader(reader).ForEachSlice(run_id, [&](const SimTimelineReader::Row& row) {
    const size_t device = static_cast<size_t>(row.device_id);
    if (device >= track_of.size() || track_of[device] < 0) return;
    const trace::SimSlice& x = row.slice;
    TimelineSlice t;
    t.slice_id = x.slice_id;
    t.start_ns = x.start_ns;
    t.dur_ns = x.dur_ns;
    t.parent_id = x.parent_id;
    t.graph_id = row.graph_id;
    t.op_id = x.op_id;
    t.flow_id = x.flow_id;
    t.bytes = x.bytes;
    t.arrival_ns = x.arrival_ns;
    t.name_id = x.name_id;
    t.step = row.step;
    t.depth = x.depth;
    t.kind = static_cast<TimelineKind>(x.kind);
    fn(track_of[device], t);
  });
}

}  // namespace

absl::StatusOr<SliceSearch> FindSlicesByName(const Reader& reader, int64_t run_id, const std::string& needle,
                                             size_t max_hits) {
  SliceSearch out;
  if (needle.empty()) return out;
  // Names are few (interned, shared by the file's runs): matched in C++ so
  // that '%' or '_' in the needle mean themselves.
  const std::string want = Lower(needle);
  auto names = reader.Query("SELECT name_id, name FROM names ORDER BY name");
  if (!names.ok()) return names.status();
  absl::flat_hash_set<int32_t> ids;
  for (size_t i = 0; i < names->rows.size(); ++i) {
    std::string name = names->Text(i, "name");
    if (Lower(name).find(want) == std::string::npos) continue;
    const auto id = static_cast<int32_t>(names->Int(i, "name_id"));
    if (id == 0) continue;  // 0 is "no name"
    ids.insert(id);
    out.names.emplace_back(id, std::move(name));
  }
  if (ids.empty()) return out;

  auto keep = [&](SliceHit hit) { Keep(out, std::move(hit), max_hits); };

  auto chunked = TimelineReader(reader).chunked();
  if (!chunked.ok()) return chunked.status();
  sqlite3* db = reader.connection();
  Stmt q;
  if (*chunked) {
    // A slice's name id is the third number of its array ("[gap,dur,name,..."),
    // so a chunk holding it has ",ID," or ",ID]" in its text; other fields may
    // match too (decoded, then dropped), but no chunk holding it is skipped.
    std::string filter;
    if (ids.size() <= kMaxPrefilterNames) {
      std::vector<std::string> terms;
      for (int32_t id : ids) {
        terms.push_back(absl::StrCat("instr(slices, ',", id, ",') > 0 OR instr(slices, ',", id, "]') > 0"));
      }
      filter = absl::StrCat(" AND (", absl::StrJoin(terms, " OR "), ")");
    }
    if (absl::Status st = q.Prepare(db, absl::StrCat("SELECT ", internal::kChunkRowColumns,
                                                     ", track_id FROM slice_chunks WHERE run_id = ?1", filter));
        !st.ok())
      return st;
    q.Int(1, run_id);
    std::vector<TimelineSlice> chunk;
    absl::Status st = Step(db, q, reader.path(), [&](sqlite3_stmt* s) -> absl::Status {
      chunk.clear();
      if (absl::Status d = internal::DecodeChunkRow(s, &chunk); !d.ok())
        return absl::Status(d.code(), absl::StrCat(reader.path(), ": ", d.message()));
      const int64_t track_id = sqlite3_column_int64(s, 7);
      for (const TimelineSlice& x : chunk) {
        if (ids.contains(x.name_id)) keep(SliceHit{track_id, x});
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  } else {
    // Schema version 1: one row per slice.
    std::vector<std::string> list;
    for (int32_t id : ids) list.push_back(absl::StrCat(id));
    if (absl::Status st = q.Prepare(
            db, absl::StrCat("SELECT track_id, slice_id, start_ns, dur_ns, depth, name_id, step, graph_id, op_id,"
                             " flow_id, bytes, kind FROM slices WHERE run_id = ?1 AND name_id IN (",
                             absl::StrJoin(list, ","), ")"));
        !st.ok())
      return st;
    q.Int(1, run_id);
    auto opt = [](sqlite3_stmt* s, int col) {
      return sqlite3_column_type(s, col) == SQLITE_NULL ? int64_t{-1} : sqlite3_column_int64(s, col);
    };
    absl::Status st = Step(db, q, reader.path(), [&](sqlite3_stmt* s) -> absl::Status {
      SliceHit h;
      h.track_id = sqlite3_column_int64(s, 0);
      h.slice.slice_id = sqlite3_column_int64(s, 1);
      h.slice.start_ns = sqlite3_column_int64(s, 2);
      h.slice.dur_ns = std::max<int64_t>(0, sqlite3_column_int64(s, 3));
      h.slice.depth = static_cast<int16_t>(sqlite3_column_int64(s, 4));
      h.slice.name_id = static_cast<int32_t>(sqlite3_column_int64(s, 5));
      h.slice.step = static_cast<int32_t>(opt(s, 6));
      h.slice.graph_id = opt(s, 7);
      h.slice.op_id = opt(s, 8);
      h.slice.flow_id = opt(s, 9);
      h.slice.bytes = sqlite3_column_int64(s, 10);
      const unsigned char* kind = sqlite3_column_text(s, 11);
      for (int k = 0; kind && k < kNumTimelineKinds; ++k) {
        if (TimelineKindName(static_cast<TimelineKind>(k)) == std::string_view(reinterpret_cast<const char*>(kind)))
          h.slice.kind = static_cast<TimelineKind>(k);
      }
      keep(std::move(h));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  if (absl::Status st = ForEachSimSlice(reader, run_id,
                                        [&](int64_t track_id, const TimelineSlice& x) {
                                          if (ids.contains(x.name_id)) keep(SliceHit{track_id, x});
                                        });
      !st.ok())
    return st;
  Finish(out, max_hits);
  return out;
}

absl::StatusOr<SliceSearch> FindSlicesByOp(const Reader& reader, int64_t run_id, int64_t graph_id, int64_t op_id,
                                           size_t max_hits) {
  SliceSearch out;
  absl::flat_hash_set<int32_t> names;
  auto keep = [&](int64_t track_id, const TimelineSlice& x) {
    names.insert(x.name_id);
    Keep(out, SliceHit{track_id, x}, max_hits);
  };
  auto chunked = TimelineReader(reader).chunked();
  if (!chunked.ok()) return chunked.status();
  sqlite3* db = reader.connection();
  Stmt q;
  if (*chunked) {
    // A chunk holds one program's slices: its graph_id column finds them.
    if (absl::Status st = q.Prepare(db, absl::StrCat("SELECT ", internal::kChunkRowColumns,
                                                     ", track_id FROM slice_chunks WHERE run_id = ?1 AND graph_id = ?2"));
        !st.ok())
      return st;
    q.Int(1, run_id);
    q.Int(2, graph_id);
    std::vector<TimelineSlice> chunk;
    absl::Status st = Step(db, q, reader.path(), [&](sqlite3_stmt* s) -> absl::Status {
      chunk.clear();
      if (absl::Status d = internal::DecodeChunkRow(s, &chunk); !d.ok())
        return absl::Status(d.code(), absl::StrCat(reader.path(), ": ", d.message()));
      const int64_t track_id = sqlite3_column_int64(s, 7);
      for (const TimelineSlice& x : chunk) {
        if (x.op_id == op_id && x.graph_id == graph_id) keep(track_id, x);
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  } else {
    auto rows = reader.Query(
        "SELECT track_id, slice_id, start_ns, dur_ns, depth, name_id, step, flow_id, bytes FROM slices"
        " WHERE run_id = ?1 AND graph_id = ?2 AND op_id = ?3",
        {std::to_string(run_id), std::to_string(graph_id), std::to_string(op_id)});
    if (!rows.ok()) return rows.status();
    for (size_t i = 0; i < rows->rows.size(); ++i) {
      TimelineSlice x;
      x.slice_id = rows->Int(i, "slice_id");
      x.start_ns = rows->Int(i, "start_ns");
      x.dur_ns = std::max<int64_t>(0, rows->Int(i, "dur_ns"));
      x.depth = static_cast<int16_t>(rows->Int(i, "depth"));
      x.name_id = static_cast<int32_t>(rows->Int(i, "name_id"));
      x.step = static_cast<int32_t>(rows->Int(i, "step", -1));
      x.flow_id = rows->Int(i, "flow_id", -1);
      x.bytes = rows->Int(i, "bytes");
      x.graph_id = graph_id;
      x.op_id = op_id;
      keep(rows->Int(i, "track_id"), x);
    }
  }
  if (absl::Status st = ForEachSimSlice(reader, run_id,
                                        [&](int64_t track_id, const TimelineSlice& x) {
                                          if (x.op_id == op_id && x.graph_id == graph_id) keep(track_id, x);
                                        });
      !st.ok())
    return st;
  Finish(out, max_hits);
  if (!names.empty()) {
    std::vector<int32_t> ids(names.begin(), names.end());
    auto named = TimelineReader(reader).Names(ids);
    if (!named.ok()) return named.status();
    out.names = *std::move(named);
    std::sort(out.names.begin(), out.names.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  }
  return out;
}

}  // namespace shardscope::store
