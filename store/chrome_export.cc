#include "store/chrome_export.h"

#include <csignal>
#include <climits>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "store/json_text.h"
#include "store/sim_timeline.h"
#include "store/sqlite_util.h"
#include "store/timeline.h"

namespace shardscope::store {
namespace {

// While an export is written beside its name, a stop signal (Ctrl-C,
// SIGTERM, SIGHUP) removes the half-written file before the process dies of
// it, as it would have: a failed export leaves no file behind. One export at
// a time (the CLI's); the path is kept in a fixed buffer, since a handler may
// only call what is async-signal-safe (unlink, sigaction, raise).
char g_partial[4096];
struct sigaction g_before[3];
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void RemovePartialAndDie(int sig) {
  if (g_partial[0]) ::unlink(g_partial);
  for (int k = 0; k < 3; ++k)
    if (kStopSignals[k] == sig) ::sigaction(sig, &g_before[k], nullptr);
  ::raise(sig);
}

void GuardPartial(const std::string& path) {
  if (path.size() >= sizeof g_partial) return;
  std::memcpy(g_partial, path.c_str(), path.size() + 1);
  struct sigaction a = {};
  a.sa_handler = RemovePartialAndDie;
  sigemptyset(&a.sa_mask);
  for (int k = 0; k < 3; ++k) {
    ::sigaction(kStopSignals[k], nullptr, &g_before[k]);
    if (g_before[k].sa_handler != SIG_IGN) ::sigaction(kStopSignals[k], &a, nullptr);  // nohup's stays ignored
  }
}

void UnguardPartial() {
  if (!g_partial[0]) return;
  for (int k = 0; k < 3; ++k) ::sigaction(kStopSignals[k], &g_before[k], nullptr);
  g_partial[0] = 0;
}

// A file written plain or through gzip, with the first error kept. A
// regular file is written beside its name and renamed into place by
// Commit(), so an export that fails leaves no half-written trace behind (nor
// destroys the one that was there); a pipe or device is written directly.
class Out {
 public:
  static absl::StatusOr<Out> Open(const std::string& path) {
    Out o;
    o.path_ = path;
    // Not through a link (it would be replaced by a file, /dev/stdout
    // included) nor over a file that may not be written.
    struct stat st;
    const bool exists = lstat(path.c_str(), &st) == 0;
    if (exists && S_ISREG(st.st_mode) && access(path.c_str(), W_OK) != 0)
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    o.writing_ = exists && !S_ISREG(st.st_mode) ? path : path + ".partial";
    if (o.writing_ != path) GuardPartial(o.writing_);
    if (absl::EndsWith(path, ".gz")) {
      o.gz_ = gzopen(o.writing_.c_str(), "wb6");
      if (!o.gz_)
        return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    } else {
      o.f_ = std::fopen(o.writing_.c_str(), "wb");
      if (!o.f_)
        return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    return o;
  }
  Out() = default;
  Out(Out&& o) noexcept
      : path_(std::move(o.path_)), writing_(std::move(o.writing_)), f_(o.f_), gz_(o.gz_), ok_(o.ok_) {
    o.f_ = nullptr, o.gz_ = nullptr, o.writing_.clear();
  }
  ~Out() {
    Close().IgnoreError();
    if (!writing_.empty() && writing_ != path_) {
      std::remove(writing_.c_str());  // never committed
      UnguardPartial();
    }
  }
  // Closes the file and puts it in place.
  absl::Status Commit() {
    if (absl::Status st = Close(); !st.ok()) return st;
    if (writing_ != path_ && std::rename(writing_.c_str(), path_.c_str()) != 0)
      return absl::UnavailableError(
          absl::StrCat("cannot put ", writing_, " in place of ", path_, ": ", std::strerror(errno)));
    if (writing_ != path_) UnguardPartial();
    writing_.clear();
    return absl::OkStatus();
  }

  void Write(const std::string& s) {
    if (!ok_ || s.empty()) return;
    if (gz_) ok_ = gzwrite(gz_, s.data(), static_cast<unsigned>(s.size())) == static_cast<int>(s.size());
    else ok_ = std::fwrite(s.data(), 1, s.size(), f_) == s.size();
  }
  absl::Status Close() {
    bool closed = true;
    if (gz_) closed = gzclose(gz_) == Z_OK;
    if (f_) closed = std::fclose(f_) == 0;
    gz_ = nullptr;
    f_ = nullptr;
    if (!ok_ || !closed) {
      ok_ = true;
      return absl::UnavailableError(absl::StrCat("writing ", path_, " failed (disk full?)"));
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  std::string writing_;  // the file written to: path_ itself, or beside it
  std::FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
  bool ok_ = true;
};

std::string Quote(const std::string& s) { return JsonText(nlohmann::json(s)); }
// Chrome trace timestamps are microseconds.
std::string Us(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1000.0); }

struct Lane {
  int64_t pid = 0, tid = 0;
};

// The export is renamed over OUT: were OUT the database itself (by name, a
// link or a hard link) or one of its side files, the run would be destroyed.
absl::Status NotTheDatabase(const std::string& db, const std::string& out) {
  struct stat o;
  if (stat(out.c_str(), &o) != 0) {
    // A new file, unless it is named as a side file the database may have
    // (an export written as DB-wal would be read as the database's log).
    char buf[PATH_MAX];  // the database itself by its target: SQLite names side files after it
    const std::string named = internal::FullPath(out),
                      real_db = ::realpath(db.c_str(), buf) ? std::string(buf) : internal::FullPath(db);
    for (const char* suffix : {"-wal", "-shm", "-journal"})
      if (named == absl::StrCat(real_db, suffix))
        return absl::InvalidArgumentError(absl::StrCat("cannot write ", out, ": it is named as ", db, suffix,
                                                       ", a side file of the database being exported (SQLite "
                                                       "would read it as part of the database); name another file"));
    return absl::OkStatus();
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string side = db + suffix;
    struct stat d;
    if (stat(side.c_str(), &d) == 0 && d.st_dev == o.st_dev && d.st_ino == o.st_ino)
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", out, ": it is ", side,
                                                     ", the database being exported; name another file"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t EstimateChromeSlices(const Reader& rd, int64_t run_id, const ChromeExportOptions& options) {
  const bool some_steps = options.first_step >= 0;
  const std::string run = std::to_string(run_id);
  const auto steps_of = [&](const char* column) {
    return some_steps ? absl::StrCat(" AND (", column, " BETWEEN ", options.first_step, " AND ", options.last_step, ")")
                      : std::string();
  };
  const auto chip_kept = [&](int64_t device) { return options.chips.empty() || options.chips.count(device) > 0; };
  int64_t slices = 0;
  // Stored slices (every lane of a recorded or imported run, a simulated run's host lanes).
  if (auto q = rd.Query(absl::StrCat("SELECT coalesce(t.device_id, -1) AS device, sum(c.count) AS n FROM slice_chunks c"
                                     " JOIN tracks t ON t.run_id = c.run_id AND t.track_id = c.track_id"
                                     " WHERE c.run_id = ?1", steps_of("coalesce(c.step, -1) = -1 OR c.step"),
                                     " GROUP BY device"),
                        {run});
      q.ok()) {
    for (size_t i = 0; i < q->rows.size(); ++i) {
      const int64_t device = q->Int(i, "device", -1);
      if (device < 0 || chip_kept(device)) slices += q->Int(i, "n", 0);
    }
  }
  // A simulated run's chips, whose slices are made from the schedule: a few
  // kept chips' slices in the steps' window on the modeled clock are made and
  // counted, and their mean stands for every kept chip (chips share their
  // programs; a link slice per collective differs with the group).
  auto chips = rd.Query("SELECT device_id, track_id FROM sim_chips WHERE run_id = ?1 ORDER BY device_id", {run});
  if (!chips.ok() || chips->rows.empty()) return slices;
  std::vector<int64_t> kept_tracks;
  for (size_t i = 0; i < chips->rows.size(); ++i)
    if (chip_kept(chips->Int(i, "device_id", -1))) kept_tracks.push_back(chips->Int(i, "track_id", -1));
  auto window = rd.Query(absl::StrCat("SELECT min(start_ns) AS t0, max(end_ns) AS t1 FROM step_bounds"
                                      " WHERE run_id = ?1 AND clock = 'modeled'",
                                      steps_of("step")),
                         {run});
  if (kept_tracks.empty() || !window.ok() || window->rows.empty() || window->Text(0, "t0").empty()) return slices;
  const int64_t t0 = window->Int(0, "t0"), t1 = window->Int(0, "t1");
  constexpr size_t kSampled = 4;
  int64_t counted = 0;
  size_t sampled = 0;
  const SimTimelineReader sim(rd);
  for (size_t k = 0; k < kSampled && k < kept_tracks.size(); ++k) {
    auto made = sim.Slices(run_id, kept_tracks[k * kept_tracks.size() / std::min(kSampled, kept_tracks.size())], t0, t1);
    if (!made.ok()) return slices;
    counted += static_cast<int64_t>(made->size());
    ++sampled;
  }
  return slices + counted * static_cast<int64_t>(kept_tracks.size()) / static_cast<int64_t>(sampled);
}

absl::StatusOr<ChromeExportStats> ExportChromeTrace(const Reader& rd, int64_t run_id, const std::string& path,
                                                    const ChromeExportOptions& options) {
  const bool some_steps = options.first_step >= 0;
  const auto step_kept = [&](int64_t step) {
    return !some_steps || (step >= options.first_step && step <= options.last_step);
  };
  const std::string run = std::to_string(run_id);
  auto info = rd.Query("SELECT * FROM runs WHERE run_id = ?1", {run});
  if (!info.ok()) return info.status();
  if (info->rows.empty()) return absl::NotFoundError(absl::StrCat(rd.path(), " has no run ", run_id));
  auto tracks = rd.Query(
      "SELECT track_id, name, clock, device_id, host_id, COALESCE(thread_name, name) AS thread FROM tracks"
      " WHERE run_id = ?1 ORDER BY track_id",
      {run});
  if (!tracks.ok()) return tracks.status();
  if (absl::Status st = NotTheDatabase(rd.path(), path); !st.ok()) return st;
  auto out = Out::Open(path);
  if (!out.ok()) return out.status();
  ChromeExportStats stats;

  // Processes: hosts first (host clock), then every chip on the device clock
  // in chip order, then on the modeled clock. pid 0 is not used.
  const auto pid_of = [](const std::string& clock, int64_t device, int64_t host) -> int64_t {
    if (clock == "host" || device < 0) return 1 + host;
    return (clock == "modeled" ? 2'000'000 : 1'000'000) + device;
  };
  std::map<int64_t, Lane> lanes;                     // track -> (pid, tid)
  std::map<int64_t, std::pair<std::string, int64_t>> processes;  // pid -> (name, sort index)
  std::map<int64_t, int64_t> chip_host;              // a chip's process -> its host, said as a label
  std::map<int64_t, int64_t> device_pid;             // chip -> its device-clock process, for counters
  std::string meta;
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    const int64_t track = tracks->Int(i, "track_id"), host = tracks->Int(i, "host_id");
    const std::string clock = tracks->Text(i, "clock");
    const int64_t device = tracks->rows[i][tracks->Col("device_id")] ? tracks->Int(i, "device_id") : -1;
    if (device >= 0 && !options.chips.empty() && !options.chips.count(device)) continue;
    const int64_t pid = pid_of(clock, device, host);
    lanes[track] = {pid, track};
    if (!processes.count(pid)) {
      const bool chip = clock != "host" && device >= 0;
      const std::string name = chip ? absl::StrCat("chip ", device, " (", clock, " clock)")
                                    : absl::StrCat("host ", host, " (host clock)");
      const int64_t sort = chip ? (clock == "modeled" ? 2'000'000 : 1'000'000) + device : host;
      processes[pid] = {name, sort};
      if (chip && clock == "device") device_pid[device] = pid;
      if (chip && tracks->rows[i][tracks->Col("host_id")]) chip_host[pid] = host;
    }
    absl::StrAppend(&meta, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid, ",\"tid\":", track,
                    ",\"args\":{\"name\":", Quote(tracks->Text(i, "thread")), "}}");
  }
  // A simulated run computed nothing: its chips' times are the cost model's,
  // and a viewer of the file alone must be able to tell. Faults injected are
  // said too: its timeline is not the machine's own.
  const bool simulated = info->Col("simulated") >= 0 && info->Int(0, "simulated") != 0;
  nlohmann::json other = {{"run_id", run_id},
                          {"sample", info->Text(0, "sample")},
                          {"mesh", info->Text(0, "mesh")},
                          {"topology", info->Text(0, "topology")},
                          {"profile", info->Text(0, "profile")},
                          {"simulated", simulated},
                          {"tool", absl::StrCat("shardscope ", info->Text(0, "tool_version"))},
                          {"clocks", simulated ? "simulated: nothing was computed; host: wall time of the simulator; "
                                                 "modeled: the cost model on the run's profile (no device clock)"
                                               : "host: wall time of the process; device: measured kernel times laid "
                                                 "out per chip; modeled: the cost model on the run's profile"}};
  const nlohmann::json config = nlohmann::json::parse(info->Text(0, "config_json", "{}"), nullptr, false);
  if (config.is_object() && config.contains("faults") && config["faults"].is_array() && !config["faults"].empty())
    other["faults_injected"] = config["faults"];
  // How the run ended, and a hang's sentence: a trace of a run the hang
  // detector ended read as a whole run that just stopped.
  struct Hang {
    int64_t device;
    std::string message;
  };
  std::vector<Hang> hangs;
  if (auto has = rd.HasTable("hangs"); has.ok() && *has) {
    auto h = rd.Query("SELECT device_id, message FROM hangs WHERE run_id = ?1 ORDER BY device_id", {run});
    if (!h.ok()) return h.status();
    nlohmann::json said = nlohmann::json::array();
    for (size_t i = 0; i < h->rows.size(); ++i) {
      hangs.push_back({h->Int(i, "device_id"), h->Text(i, "message")});
      said.push_back(hangs.back().message);
    }
    if (!said.empty()) other["hangs"] = said;
  }
  if (auto st = rd.Query("SELECT status FROM run_status WHERE run_id = ?1", {run}); st.ok() && !st->rows.empty())
    other["run_status"] = st->Text(0, "status");
  // What the run's capture left out (--trace steps, a window): read back, the
  // trace must not look like a whole timeline (a verdict on kernels it lacks).
  {
    std::string note = info->Col("capture_note") >= 0 ? info->Text(0, "capture_note") : "";
    if (!options.selection.empty())
      note = absl::StrCat(note, note.empty() ? "" : "; ", "exported: ", options.selection);
    if (!note.empty()) other["capture_note"] = note;
  }
  // A part that starts after step 0: where its first step starts (the end
  // of the mark_step before it), so that import times that step as the run did.
  if (some_steps) {
    auto before = rd.Query(
        "SELECT max(s.start_ns + s.dur_ns) AS end_ns FROM slices s JOIN tracks t ON t.run_id = s.run_id AND"
        " t.track_id = s.track_id JOIN names n ON n.name_id = s.name_id WHERE s.run_id = ?1 AND t.clock = 'host'"
        " AND n.name = 'mark_step' AND s.step = ?2",
        {run, std::to_string(options.first_step - 1)});
    if (!before.ok()) return before.status();
    if (!before->rows.empty() && !before->Text(0, "end_ns").empty())
      other["first_step_from_ns"] = before->Int(0, "end_ns");
  }
  // Each step's wall time as recorded: from mark_steps alone, a step began at
  // the end of the mark_step before it while the run timed it from its own
  // start (a part's first step read 9.9 ms for 6.1 once in a loaded test).
  {
    auto walls = rd.Query("SELECT step, wall_ns FROM steps WHERE run_id = ?1 ORDER BY step", {run});
    if (!walls.ok()) return walls.status();
    std::vector<std::string> parts;
    for (size_t i = 0; i < walls->rows.size(); ++i)
      if (step_kept(walls->Int(i, "step")))
        parts.push_back(absl::StrCat(walls->Int(i, "step"), ":", walls->Int(i, "wall_ns")));
    if (!parts.empty()) other["step_walls"] = absl::StrJoin(parts, ",");
  }
  // The steps' span on each clock: a lane is read over that window only.
  std::map<std::string, std::pair<int64_t, int64_t>> window;  // clock -> [t0, t1)
  if (some_steps) {
    auto bounds = rd.Query(
        "SELECT clock, min(start_ns) AS t0, max(end_ns) AS t1 FROM step_bounds WHERE run_id = ?1 AND step >= ?2"
        " AND step <= ?3 GROUP BY clock",
        {run, std::to_string(options.first_step), std::to_string(options.last_step)});
    if (!bounds.ok()) return bounds.status();
    for (size_t i = 0; i < bounds->rows.size(); ++i)
      window[bounds->Text(i, "clock")] = {bounds->Int(i, "t0"), bounds->Int(i, "t1")};
  }
  std::map<int64_t, std::string> clock_of;  // track -> clock
  for (size_t i = 0; i < tracks->rows.size(); ++i) clock_of[tracks->Int(i, "track_id")] = tracks->Text(i, "clock");
  out->Write(absl::StrCat(
      "{\"displayTimeUnit\":\"ns\",\"otherData\":", JsonText(other),
      ",\n\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"trace_clock\",\"pid\":0,\"tid\":0,"
      "\"args\":{\"name\":\"shardscope: host, device and modeled clocks are separate processes\"}}"));
  for (const auto& [pid, p] : processes) {
    out->Write(absl::StrCat(",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid, ",\"tid\":0,\"args\":{\"name\":",
                            Quote(p.first), "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", pid,
                            ",\"tid\":0,\"args\":{\"sort_index\":", p.second, "}}"));
    if (chip_host.count(pid))  // which host a chip is on: `import` reads it back
      out->Write(absl::StrCat(",\n{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":", pid,
                              ",\"tid\":0,\"args\":{\"labels\":\"host ", chip_host[pid], "\"}}"));
    ++stats.processes;
  }
  out->Write(meta);

  // Slices, a track at a time in time order, the enclosing one first: X
  // events nest as stored. Decoded natively (TimelineReader, or a simulated
  // run's schedule): memory holds one lane, and the run is never sorted
  // whole by SQL, nor made text row by row.
  struct FlowPoint {
    int64_t flow, start, track;
  };
  std::vector<FlowPoint> flow_points;
  {
    std::vector<std::string> quoted;  // name_id -> the name as a JSON string
    absl::Status st = rd.ForEachRow("SELECT name_id, name FROM names", {}, [&](const std::vector<Cell>& r) {
      int64_t id = -1;
      if (!r[0] || !absl::SimpleAtoi(*r[0], &id) || id < 0 || id > INT32_MAX) return;
      if (static_cast<size_t>(id) >= quoted.size()) quoted.resize(static_cast<size_t>(id) + 1, "\"\"");
      quoted[static_cast<size_t>(id)] = Quote(r[1].value_or(""));
    });
    if (!st.ok()) return st;
    std::string kinds[kNumTimelineKinds];
    for (int k = 0; k < kNumTimelineKinds; ++k) kinds[k] = Quote(TimelineKindName(static_cast<TimelineKind>(k)));
    TimelineReader timeline(rd);
    constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
    std::string buf;
    for (const auto& [track, lane] : lanes) {
      int64_t t0 = -kAll, t1 = kAll;
      if (auto w = window.find(clock_of[track]); w != window.end()) std::tie(t0, t1) = w->second;
      auto slices = timeline.Slices(run_id, track, t0, t1);
      if (!slices.ok()) return slices.status();
      // Steps asked for: a slice of another step goes, one of no step stays
      // when it falls in their window (a compile, a host wait between them).
      if (some_steps)
        slices->erase(std::remove_if(slices->begin(), slices->end(),
                                     [&](const TimelineSlice& x) {
                                       return x.step >= 0 ? !step_kept(x.step)
                                                          : !window.count(clock_of[track]) ||
                                                                x.start_ns < t0 || x.start_ns >= t1;
                                     }),
                      slices->end());
      std::sort(slices->begin(), slices->end(), [](const TimelineSlice& a, const TimelineSlice& b) {
        return std::tie(a.start_ns, b.dur_ns, a.depth, a.slice_id) < std::tie(b.start_ns, a.dur_ns, b.depth, b.slice_id);
      });
      buf.clear();
      for (const TimelineSlice& x : *slices) {
        const std::string& kind = kinds[static_cast<int>(x.kind)];
        absl::StrAppend(&buf, ",\n{\"ph\":\"X\",\"pid\":", lane.pid, ",\"tid\":", lane.tid, ",\"ts\":", Us(x.start_ns),
                        ",\"dur\":", Us(x.dur_ns), ",\"name\":",
                        x.name_id >= 0 && static_cast<size_t>(x.name_id) < quoted.size() ? quoted[x.name_id] : "\"\"",
                        ",\"cat\":", kind, ",\"args\":{\"kind\":", kind);
        if (x.step >= 0) absl::StrAppend(&buf, ",\"step\":", x.step);
        // Siblings of the same bounds (a collective's links) nest by time
        // alone when read back: the depth says which are not inside which.
        absl::StrAppend(&buf, ",\"depth\":", x.depth);
        if (x.graph_id >= 0) absl::StrAppend(&buf, ",\"graph_id\":", x.graph_id);
        if (x.op_id >= 0) absl::StrAppend(&buf, ",\"op_id\":", x.op_id);
        if (x.bytes != 0) absl::StrAppend(&buf, ",\"bytes\":", x.bytes);
        if (x.arrival_ns >= 0) absl::StrAppend(&buf, ",\"wait_us\":", Us(x.start_ns - x.arrival_ns));
        buf += "}}";
        ++stats.slices;
        if (x.flow_id >= 0) flow_points.push_back({x.flow_id, x.start_ns, track});
        if (buf.size() > (1 << 20)) {
          out->Write(buf);
          buf.clear();
        }
      }
      out->Write(buf);
    }
  }

  // Flows: the slices of one collective across chips, earliest first.
  {
    std::sort(flow_points.begin(), flow_points.end(), [](const FlowPoint& a, const FlowPoint& b) {
      return std::tie(a.flow, a.start, a.track) < std::tie(b.flow, b.start, b.track);
    });
    int64_t flow = -1, n = 0;
    std::string pending;  // the previous slice's event, written once the next shows it was not the last
    const auto event = [&](const char* ph, int64_t id, const Lane& l, int64_t ts) {
      return absl::StrCat(",\n{\"ph\":\"", ph, "\",\"id\":", id, ",\"pid\":", l.pid, ",\"tid\":", l.tid,
                          ",\"ts\":", Us(ts), ",\"name\":\"collective\",\"cat\":\"collective\"",
                          ph[0] == 'f' ? ",\"bp\":\"e\"" : "", "}");
    };
    Lane last_lane;
    int64_t last_ts = 0;
    const auto finish = [&]() {
      if (n >= 2) {
        out->Write(pending);
        out->Write(event("f", flow, last_lane, last_ts));
        ++stats.flows;
      }
    };
    for (const FlowPoint& p : flow_points) {
      if (p.flow != flow) {
        finish();
        flow = p.flow, n = 0, pending.clear();
      } else {
        // The previous slice was not the last: it starts the flow or is a step on it.
        absl::StrAppend(&pending, event(n == 1 ? "s" : "t", flow, last_lane, last_ts));
      }
      ++n;
      last_lane = lanes[p.track];
      last_ts = p.start;
    }
    finish();
  }

  // Counters: a chip's on its device-clock process, process-wide ones on host 0.
  {
    absl::Status st = rd.ForEachRow(
        "SELECT device_id, name, ts_ns, value FROM counters WHERE run_id = ?1 ORDER BY device_id, name, "
        "ts_ns",
        {run}, [&](const std::vector<Cell>& r) {
          int64_t pid = 1, device = 0, ts = 0;
          double value = 0;
          // JSON has no Inf or NaN, and a damaged cell is no number: such a
          // sample is left out and counted, never written as invalid JSON.
          if ((r[0] && !absl::SimpleAtoi(*r[0], &device)) || !r[2] || !absl::SimpleAtoi(*r[2], &ts) ||
              !r[3] || !absl::SimpleAtod(*r[3], &value) || !std::isfinite(value)) {
            ++stats.counters_left_out;
            return;
          }
          if (r[0] && !options.chips.empty() && !options.chips.count(device)) return;
          if (some_steps) {
            // A chip's counter within the steps' span on its device clock (else
            // modeled), a process-wide one on the host clock, the end included;
            // with no span on any clock (--trace off), none can be placed.
            const char* order[] = {r[0] ? "device" : "host", r[0] ? "modeled" : "device", "host"};
            const std::pair<int64_t, int64_t>* w = nullptr;
            for (const char* clock : order)
              if (auto it = window.find(clock); it != window.end()) {
                w = &it->second;
                break;
              }
            if (!w) {
              ++stats.counters_unplaced;
              return;
            }
            if (ts < w->first || ts > w->second) return;
          }
          if (r[0]) {
            auto it = device_pid.find(device);
            if (it != device_pid.end()) pid = it->second;
          }
          out->Write(absl::StrCat(",\n{\"ph\":\"C\",\"pid\":", pid, ",\"tid\":0,\"ts\":", Us(ts),
                                  ",\"name\":", Quote(r[1].value_or("")),
                                  ",\"args\":{\"value\":", JsonText(nlohmann::json(value)), "}}"));
          ++stats.counters;
        });
    if (!st.ok()) return st;
  }
  // Each stopped chip marked on its lane where the recorded steps end on its
  // clock (the device's; a simulated run's modeled one), with the detector's
  // sentence; at the clock's start when no step ended (a hang in step 0).
  if (!hangs.empty()) {
    auto ends = rd.Query("SELECT clock, max(end_ns) AS t1 FROM step_bounds WHERE run_id = ?1 GROUP BY clock", {run});
    if (!ends.ok()) return ends.status();
    std::map<std::string, int64_t> end_of;
    for (size_t i = 0; i < ends->rows.size(); ++i) end_of[ends->Text(i, "clock")] = ends->Int(i, "t1");
    for (const Hang& h : hangs)
      for (const char* clock : {"device", "modeled"}) {
        const int64_t pid = pid_of(clock, h.device, 0);
        if (!processes.count(pid)) continue;
        out->Write(absl::StrCat(",\n{\"ph\":\"i\",\"s\":\"p\",\"pid\":", pid, ",\"tid\":0,\"ts\":",
                                Us(end_of.count(clock) ? end_of[clock] : 0), ",\"name\":", Quote(absl::StrCat("chip ", h.device, " stopped responding")),
                                ",\"args\":{\"hang\":", Quote(h.message), "}}"));
        break;
      }
  }
  out->Write("\n]}\n");
  if (absl::Status s = out->Commit(); !s.ok()) return s;
  return stats;
}

}  // namespace shardscope::store
