// Loads the small part of a stored run (see trace_model.h). Everything comes
// from plain SQL on the store, so a run recorded long ago loads like a new one;
// no query here reads slices, so opening costs the same for any trace size.
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
  if (auto has = reader.HasColumn("runs", "capture_note"); has.ok() && *has) {
    auto note = reader.Query("SELECT capture_note FROM runs WHERE run_id = ?1", {absl::StrCat(run_id)});
    if (note.ok() && !note->rows.empty()) run.capture_note = note->Text(0, "capture_note");
  }
  if (auto has = reader.HasTable("hangs"); has.ok() && *has)
    if (auto hangs = reader.Query("SELECT device_id, step FROM hangs WHERE run_id = ?1", {absl::StrCat(run_id)});
        hangs.ok())
      for (size_t i = 0; i < hangs->rows.size(); ++i) run.stopped[hangs->Int(i, "device_id")] = hangs->Int(i, "step");
  return absl::OkStatus();
}

absl::Status LoadTracks(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto result = reader.Query(
      "SELECT track_id, name, clock, device_id, host_id, thread_name FROM tracks "
      "WHERE run_id = ?1 ORDER BY track_id",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  const int dev_col = result->Col("device_id");
  for (size_t i = 0; i < result->rows.size(); ++i) {
    Track track;
    track.track_id = result->Int(i, "track_id");
    track.name = result->Text(i, "name");
    auto clock = ParseClock(result->Text(i, "clock"));
    if (!clock) {
      return absl::DataLossError(absl::StrCat("track ", track.track_id, " has unknown clock '",
                                              result->Text(i, "clock"), "'"));
    }
    track.clock = *clock;
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
  return absl::OkStatus();
}

// The value each collective of the run moves, by (graph, op); empty for files
// from before ops.moves_op_id. One row per collective op, not per slice.
absl::Status LoadMovedValues(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto has = reader.Query("SELECT COUNT(*) AS n FROM pragma_table_info('ops') WHERE name = 'moves_op_id'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") == 0) return absl::OkStatus();
  auto result = reader.Query(
      "SELECT o.graph_id, o.op_id, d.name FROM ops o JOIN sharding_decisions d ON d.run_id = o.run_id"
      " AND d.graph_id = o.graph_id AND d.op_id = o.moves_op_id WHERE o.run_id = ?1",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  for (const auto& row : result->rows) {
    model.moved_values[{CellInt(row[0]), CellInt(row[1])}] = CellText(row[2]);
  }
  return absl::OkStatus();
}

// Every program launch of the run: a few per step, so small even for long runs.
absl::Status LoadDispatches(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto result = reader.Query(
      "SELECT step, graph_id, host_start_ns, host_dur_ns FROM executions WHERE run_id = ?1 "
      "ORDER BY host_start_ns",
      {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  model.dispatches.reserve(result->rows.size());
  for (const auto& row : result->rows) {
    model.dispatches.push_back(Dispatch{static_cast<int32_t>(CellInt(row[0])), CellInt(row[1]),
                                        CellInt(row[2]), CellInt(row[3])});
  }
  return absl::OkStatus();
}

// The run's step numbers, for the playhead: the host's steps and any clock's step bounds.
absl::Status LoadSteps(const store::Reader& reader, int64_t run_id, TraceModel& model) {
  auto has = reader.HasTable("step_bounds");
  if (!has.ok()) return has.status();
  auto result = reader.Query(absl::StrCat("SELECT step FROM steps WHERE run_id = ?1",
                                          *has ? " UNION SELECT step FROM step_bounds WHERE run_id = ?1" : "",
                                          " ORDER BY step"),
                             {absl::StrCat(run_id)});
  if (!result.ok()) return result.status();
  for (const auto& row : result->rows) model.steps.push_back(static_cast<int32_t>(CellInt(row[0])));
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

std::optional<Clock> ParseClock(const std::string& text) {
  if (text == "host") return Clock::kHost;
  if (text == "device") return Clock::kDevice;
  if (text == "modeled") return Clock::kModeled;
  return std::nullopt;
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

bool TraceModel::HasClock(Clock clock) const {
  for (const Track& t : tracks) {
    if (t.clock == clock) return true;
  }
  return false;
}

const Track* TraceModel::FindTrack(int64_t track_id) const {
  for (const Track& t : tracks) {
    if (t.track_id == track_id) return &t;
  }
  return nullptr;
}

const std::string* TraceModel::MovedValue(int64_t graph_id, int64_t op_id) const {
  auto it = moved_values.find(std::pair{graph_id, op_id});
  return it == moved_values.end() ? nullptr : &it->second;
}

std::string NoProgramsWhy(const store::Reader& reader, int64_t run_id) {
  auto run = reader.Query("SELECT * FROM runs WHERE run_id = ?1", {absl::StrCat(run_id)});  // *: older files
  if (run.ok() && !run->rows.empty() && run->Col("imported") >= 0 && run->Int(0, "imported") != 0)
    return "an imported trace";
  if (auto state = store::ReadRunState(reader, run_id); state.ok() && (state->EndedEarly() || !state->last_step))
    return absl::StrCat("no program was compiled and kept: the run ", state->Describe());
  return "no compiled program was stored";
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
  if (auto s = LoadTracks(reader, *run_id, model); !s.ok()) return s;
  if (auto s = LoadCompilations(reader, *run_id, model); !s.ok()) return s;
  if (auto s = LoadDispatches(reader, *run_id, model); !s.ok()) return s;
  if (auto s = LoadSteps(reader, *run_id, model); !s.ok()) return s;
  if (auto s = LoadMovedValues(reader, *run_id, model); !s.ok()) return s;
  // The Sharding view's data: when it cannot be read, that view says why and
  // every other view still opens.
  auto sharding = analysis::BuildShardingView(reader, *run_id);
  if (sharding.ok())
    model.sharding = *std::move(sharding);
  else
    model.sharding_error = absl::StrCat(reader.path(), ": ", sharding.status().message());
  return model;
}

absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path,
                                          std::optional<int64_t> run_id) {
  auto reader = store::Reader::Open(path);
  if (!reader.ok()) return reader.status();
  return LoadTraceModel(*reader, run_id);
}

}  // namespace shardscope::app
