// Loads a stored run into the TraceModel the views draw from. Everything comes
// from plain SQL on the store, so a run recorded long ago loads like a new one.
#include "ui/app/trace_model.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/run_state.h"

namespace shardscope::app {
namespace {

// Depth rows beyond this are folded into the last one: a runaway depth in an
// imported trace must not create thousands of empty rows.
constexpr int32_t kMaxDepth = 31;

// Column index that must exist; the schema is ours, so a missing one means
// the file predates or postdates this build.
absl::StatusOr<int> RequireCol(const store::QueryResult& result, const char* name,
                               const char* table) {
  int col = result.Col(name);
  if (col < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("table '", table, "' has no column '", name,
                     "'; was the database written by a different shardscope version?"));
  }
  return col;
}

// Cell parsing by index: the Reader's by-name helpers look the column up per
// call, which is too slow for the millions of cells a large trace has.
int64_t CellInt(const store::Cell& cell, int64_t dflt = 0) {
  if (!cell) return dflt;
  int64_t value = dflt;
  const std::string& s = *cell;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc()) {
    // REAL columns written where INTEGER was expected ("1.5e6"): round.
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return dflt;
    return static_cast<int64_t>(d);
  }
  return value;
}

std::string CellText(const store::Cell& cell) { return cell ? *cell : std::string(); }

absl::Status LoadRun(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto runs = reader.Query("SELECT run_id FROM runs ORDER BY run_id");
  if (!runs.ok()) return runs.status();
  for (const auto& row : runs->rows) model.run_ids.push_back(CellInt(row[0]));
  if (std::find(model.run_ids.begin(), model.run_ids.end(), run_id) == model.run_ids.end()) {
    std::vector<std::string> ids;
    for (int64_t id : model.run_ids) ids.push_back(absl::StrCat(id));
    return absl::NotFoundError(absl::StrCat(
        reader.path(), " has no run ", run_id, "; runs in this file: ",
        ids.empty() ? std::string("none") : absl::StrJoin(ids, ", ")));
  }
  auto info = reader.Query(
      "SELECT run_id, sample, mesh, profile, num_hosts, num_devices, simulated, status "
      "FROM runs WHERE run_id = ?1",
      {absl::StrCat(run_id)});
  if (!info.ok()) return info.status();
  RunInfo& run = model.run;
  run.run_id = run_id;
  run.sample = info->Text(0, "sample");
  run.mesh = info->Text(0, "mesh");
  run.profile = info->Text(0, "profile");
  run.num_hosts = info->Int(0, "num_hosts");
  run.num_devices = info->Int(0, "num_devices");
  run.simulated = info->Int(0, "simulated") != 0;
  run.status = info->Text(0, "status");
  // A run whose writer died shows as "ended abnormally", not "running" forever.
  if (auto state = store::ReadRunState(reader, run_id); state.ok()) run.status = state->status;
  return absl::OkStatus();
}

absl::StatusOr<Clock> ParseClock(const std::string& text, int64_t track_id) {
  if (text == "host") return Clock::kHost;
  if (text == "device") return Clock::kDevice;
  if (text == "modeled") return Clock::kModeled;
  return absl::DataLossError(
      absl::StrCat("track ", track_id, " has unknown clock '", text, "'"));
}

absl::Status LoadTracks(const store::Reader& reader, int64_t run_id, TraceModel& model,
                        absl::flat_hash_map<int64_t, size_t>& index_of) {
  auto result = reader.Query(
      "SELECT track_id, name, clock, device_id, host_id, thread_name FROM tracks "
      "WHERE run_id = ?1 ORDER BY track_id",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  for (size_t i = 0; i < result->rows.size(); ++i) {
    Track track;
    track.track_id = result->Int(i, "track_id");
    track.name = result->Text(i, "name");
    auto clock = ParseClock(result->Text(i, "clock"), track.track_id);
    if (!clock.ok()) return clock.status();
    track.clock = *clock;
    int dev_col = result->Col("device_id");
    if (dev_col >= 0 && result->rows[i][dev_col]) track.device_id = CellInt(result->rows[i][dev_col]);
    track.host_id = result->Int(i, "host_id");
    track.thread_name = result->Text(i, "thread_name");
    model.tracks.push_back(std::move(track));
  }
  // Lane order: devices (by device id, device clock before modeled), then
  // host threads by host and track id.
  std::stable_sort(model.tracks.begin(), model.tracks.end(), [](const Track& a, const Track& b) {
    if (a.is_device() != b.is_device()) return a.is_device();
    if (a.is_device()) {
      if (*a.device_id != *b.device_id) return *a.device_id < *b.device_id;
      return a.clock < b.clock;
    }
    if (a.host_id != b.host_id) return a.host_id < b.host_id;
    return a.track_id < b.track_id;
  });
  for (size_t i = 0; i < model.tracks.size(); ++i) index_of[model.tracks[i].track_id] = i;
  return absl::OkStatus();
}

absl::Status LoadNames(const store::Reader& reader, int64_t run_id, TraceModel& model,
                       absl::flat_hash_map<int64_t, int32_t>& index_of) {
  // Only the names this run uses: the names table is shared by every run.
  auto result = reader.Query(
      "SELECT name_id, name FROM names WHERE name_id IN "
      "(SELECT DISTINCT name_id FROM slices WHERE run_id = ?1)",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  model.names.reserve(result->rows.size() + 1);
  model.names.push_back("(unnamed)");
  for (const auto& row : result->rows) {
    index_of[CellInt(row[0])] = static_cast<int32_t>(model.names.size());
    model.names.push_back(CellText(row[1]));
  }
  return absl::OkStatus();
}

// The value each collective of the run moves, by (graph, op), as an index
// into model.names (added there); empty for files from before ops.moves_op_id.
absl::StatusOr<absl::flat_hash_map<std::pair<int64_t, int64_t>, int32_t>> LoadMovedValues(const store::Reader& reader,
                                                                                         int64_t run_id,
                                                                                         TraceModel& model) {
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int32_t> out;
  auto has = reader.Query("SELECT COUNT(*) AS n FROM pragma_table_info('ops') WHERE name = 'moves_op_id'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") == 0) return out;
  auto result = reader.Query(
      "SELECT o.graph_id, o.op_id, d.name FROM ops o JOIN sharding_decisions d ON d.run_id = o.run_id"
      " AND d.graph_id = o.graph_id AND d.op_id = o.moves_op_id WHERE o.run_id = ?1",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  absl::flat_hash_map<std::string, int32_t> interned;
  for (const auto& row : result->rows) {
    const std::string name = CellText(row[2]);
    auto [it, fresh] = interned.try_emplace(name, static_cast<int32_t>(model.names.size()));
    if (fresh) model.names.push_back(name);
    out[{CellInt(row[0]), CellInt(row[1])}] = it->second;
  }
  return out;
}

absl::Status LoadSlices(const store::Reader& reader, int64_t run_id, TraceModel& model,
                        absl::flat_hash_map<int64_t, size_t>& track_index,
                        const absl::flat_hash_map<int64_t, int32_t>& name_index) {
  auto moved = LoadMovedValues(reader, run_id, model);
  if (!moved.ok()) return moved.status();
  auto result = reader.Query(
      "SELECT track_id, slice_id, start_ns, dur_ns, depth, name_id, kind, step, bytes, graph_id, op_id "
      "FROM slices WHERE run_id = ?1",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  int c_track, c_id, c_start, c_dur, c_depth, c_name, c_kind, c_step, c_bytes, c_graph, c_op;
  for (auto [col, name] : {std::pair{&c_track, "track_id"}, {&c_id, "slice_id"},
                           {&c_start, "start_ns"}, {&c_dur, "dur_ns"}, {&c_depth, "depth"},
                           {&c_name, "name_id"}, {&c_kind, "kind"}, {&c_step, "step"},
                           {&c_bytes, "bytes"}, {&c_graph, "graph_id"}, {&c_op, "op_id"}}) {
    auto c = RequireCol(*result, name, "slices");
    if (!c.ok()) return c.status();
    *col = *c;
  }
  for (const auto& row : result->rows) {
    int64_t track_id = CellInt(row[c_track]);
    auto it = track_index.find(track_id);
    if (it == track_index.end()) {
      // A slice on an undeclared track still deserves a lane rather than
      // vanishing; name it so the gap in the file is visible.
      Track orphan;
      orphan.track_id = track_id;
      orphan.name = absl::StrCat("track ", track_id, " (not in tracks table)");
      orphan.clock = Clock::kHost;
      it = track_index.emplace(track_id, model.tracks.size()).first;
      model.tracks.push_back(std::move(orphan));
    }
    Track& track = model.tracks[it->second];
    Slice s;
    s.slice_id = CellInt(row[c_id]);
    s.start_ns = CellInt(row[c_start]);
    s.dur_ns = std::max<int64_t>(0, CellInt(row[c_dur]));
    s.depth = static_cast<int16_t>(std::clamp<int64_t>(CellInt(row[c_depth]), 0, kMaxDepth));
    auto name_it = name_index.find(CellInt(row[c_name]));
    s.name = name_it == name_index.end() ? 0 : name_it->second;
    s.kind = ParseSliceKind(CellText(row[c_kind]));
    s.step = static_cast<int32_t>(CellInt(row[c_step], -1));
    s.bytes = CellInt(row[c_bytes]);
    if (s.kind == SliceKind::kCollective && !moved->empty()) {
      auto m = moved->find(std::pair{CellInt(row[c_graph], -1), CellInt(row[c_op], -1)});
      if (m != moved->end()) s.moves = m->second;
    }
    if (track.rows.size() <= static_cast<size_t>(s.depth)) track.rows.resize(s.depth + 1);
    track.rows[s.depth].slices.push_back(s);
  }
  for (Track& track : model.tracks) {
    track.num_slices = 0;
    track.min_start_ns = std::numeric_limits<int64_t>::max();
    track.max_end_ns = std::numeric_limits<int64_t>::min();
    for (SliceRow& row : track.rows) {
      row.Finish();
      track.num_slices += row.slices.size();
      if (!row.slices.empty()) {
        track.min_start_ns = std::min(track.min_start_ns, row.slices.front().start_ns);
        track.max_end_ns = std::max(track.max_end_ns, row.max_end.back());
      }
    }
    if (track.num_slices == 0) track.min_start_ns = track.max_end_ns = 0;
    model.num_slices += track.num_slices;
  }
  return absl::OkStatus();
}

absl::Status LoadCompilations(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto result = reader.Query(
      "SELECT compile_id, step, graph_id, cache, cause_kind, cause_detail, source_file, "
      "source_line, duration_ns, host_start_ns, call_site FROM compilations "
      "WHERE run_id = ?1 ORDER BY compile_id",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  for (size_t i = 0; i < result->rows.size(); ++i) {
    Compilation c;
    c.compile_id = result->Int(i, "compile_id");
    c.step = result->Int(i, "step");
    c.graph_id = result->Int(i, "graph_id");
    c.cache = result->Text(i, "cache");
    c.cause_kind = result->Text(i, "cause_kind");
    c.cause_detail = result->Text(i, "cause_detail");
    c.source_file = result->Text(i, "source_file");
    c.source_line = result->Int(i, "source_line");
    c.duration_ns = result->Int(i, "duration_ns");
    c.host_start_ns = result->Int(i, "host_start_ns");
    c.call_site = result->Text(i, "call_site");
    model.compilations.push_back(std::move(c));
  }
  return absl::OkStatus();
}

}  // namespace

const char* SliceKindName(SliceKind kind) {
  switch (kind) {
    case SliceKind::kCompute: return "compute";
    case SliceKind::kCollective: return "collective";
    case SliceKind::kTransfer: return "transfer";
    case SliceKind::kHost: return "host";
    case SliceKind::kCompile: return "compile";
    case SliceKind::kHostWait: return "host_wait";
  }
  return "compute";
}

SliceKind ParseSliceKind(const std::string& text) {
  if (text == "collective") return SliceKind::kCollective;
  if (text == "transfer") return SliceKind::kTransfer;
  if (text == "host") return SliceKind::kHost;
  if (text == "compile") return SliceKind::kCompile;
  if (text == "host_wait") return SliceKind::kHostWait;
  return SliceKind::kCompute;
}

const char* ClockName(Clock clock) {
  switch (clock) {
    case Clock::kHost: return "host";
    case Clock::kDevice: return "device";
    case Clock::kModeled: return "modeled";
  }
  return "host";
}

const char* ClockLabel(Clock clock) {
  switch (clock) {
    case Clock::kHost: return "host clock";
    case Clock::kDevice: return "device clock";
    case Clock::kModeled: return "modeled clock";
  }
  return "host clock";
}

void SliceRow::Finish() {
  std::stable_sort(slices.begin(), slices.end(),
                   [](const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; });
  max_end.resize(slices.size());
  int64_t running = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < slices.size(); ++i) {
    running = std::max(running, slices[i].end_ns());
    max_end[i] = running;
  }
}

std::pair<size_t, size_t> SliceRow::Visible(int64_t t0, int64_t t1) const {
  // First slice whose running max end passes t0: every slice before it ends
  // at or before t0. A zero-length slice exactly at t0 counts as visible.
  size_t first = std::upper_bound(max_end.begin(), max_end.end(), t0) - max_end.begin();
  while (first > 0 && max_end[first - 1] == t0 && slices[first - 1].dur_ns == 0 &&
         slices[first - 1].start_ns == t0) {
    --first;
  }
  size_t last = std::lower_bound(slices.begin(), slices.end(), t1,
                                 [](const Slice& s, int64_t t) { return s.start_ns < t; }) -
                slices.begin();
  if (last < first) last = first;
  return {first, last};
}

std::string Compilation::SourceLocation() const {
  if (source_file.empty()) return "";
  if (source_line <= 0) return source_file;
  return absl::StrCat(source_file, ":", source_line);
}

const std::string& TraceModel::Name(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= names.size()) return names.front();
  return names[index];
}

bool TraceModel::HasClock(Clock clock) const {
  for (const Track& t : tracks) {
    if (t.clock == clock) return true;
  }
  return false;
}

std::optional<std::pair<int64_t, int64_t>> TraceModel::ClockExtent(Clock clock) const {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  for (const Track& t : tracks) {
    if (t.clock != clock || t.num_slices == 0) continue;
    lo = std::min(lo, t.min_start_ns);
    hi = std::max(hi, t.max_end_ns);
  }
  if (clock == Clock::kHost) {
    for (const Compilation& c : compilations) {
      lo = std::min(lo, c.host_start_ns);
      hi = std::max(hi, c.host_start_ns + c.duration_ns);
    }
  }
  if (lo > hi) return std::nullopt;
  return std::pair{lo, hi};
}

absl::StatusOr<TraceModel> LoadTraceModel(const store::Reader& reader,
                                          std::optional<int64_t> run_id) {
  TraceModel model;
  model.path = reader.path();
  if (!run_id) {
    auto latest = reader.LatestRunId();
    if (!latest.ok()) return latest.status();
    run_id = *latest;
  }
  if (auto s = LoadRun(reader, *run_id, model); !s.ok()) return s;
  absl::flat_hash_map<int64_t, size_t> track_index;
  if (auto s = LoadTracks(reader, *run_id, model, track_index); !s.ok()) return s;
  absl::flat_hash_map<int64_t, int32_t> name_index;
  if (auto s = LoadNames(reader, *run_id, model, name_index); !s.ok()) return s;
  if (auto s = LoadSlices(reader, *run_id, model, track_index, name_index); !s.ok()) return s;
  if (auto s = LoadCompilations(reader, *run_id, model); !s.ok()) return s;
  auto sharding = analysis::BuildShardingView(reader, *run_id);
  if (!sharding.ok()) return sharding.status();
  model.sharding = *std::move(sharding);
  return model;
}

absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path,
                                          std::optional<int64_t> run_id) {
  auto reader = store::Reader::Open(path);
  if (!reader.ok()) return reader.status();
  return LoadTraceModel(*reader, run_id);
}

}  // namespace shardscope::app
