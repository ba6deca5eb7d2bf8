// The metrics report's figures (see metrics.h): computed from a run's tables,
// stored in and read back from the `metrics` table.
#include "store/metrics.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "profiler/trace/records.h"
#include "store/sqlite_util.h"

namespace shardscope::store {
namespace {

TimingMetric Timing(std::string name, std::string clock, std::string what, std::vector<int64_t> samples) {
  TimingMetric m{std::move(name), std::move(clock), std::move(what)};
  std::sort(samples.begin(), samples.end());
  m.count = static_cast<int64_t>(samples.size());
  for (int64_t s : samples) m.total_ns += s;
  auto rank = [&](double q) {  // nearest rank
    if (samples.empty()) return int64_t{0};
    size_t k = static_cast<size_t>(q * static_cast<double>(samples.size()) + 0.999999);
    return samples[std::clamp<size_t>(k, 1, samples.size()) - 1];
  };
  m.p50_ns = rank(0.5);
  m.p90_ns = rank(0.9);
  m.p99_ns = rank(0.99);
  m.max_ns = samples.empty() ? 0 : samples.back();
  return m;
}

// (name, count) rows of `sql` (columns name, n), in the order the query gives.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> Counts(const Reader& rd, const std::string& sql,
                                                                    const std::string& run) {
  auto q = rd.Query(sql, {run});
  if (!q.ok()) return q.status();
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < q->rows.size(); ++i) out.push_back({q->Text(i, "name"), q->Int(i, "n")});
  return out;
}

}  // namespace

void RunAggregates::Merge(const RunAggregates& other) {
  for (const auto& [key, span] : other.spans) {
    Span& s = spans[key];
    s.start = std::min(s.start, span.start);
    s.end = std::max(s.end, span.end);
  }
  for (const auto& [key, n] : other.kernels) kernels[key] += n;
}

absl::StatusOr<RunMetrics> ComputeRunMetrics(const Reader& rd, int64_t run_id, const RunAggregates* slices) {
  RunMetrics r;
  const std::string run = std::to_string(run_id);
  // A simulated run has no device clock: its chips' (virtual) slices are not
  // asked for, which would rebuild every chip's timeline of a pod for nothing
  // (a killed 1024-chip pod's metrics took minutes).
  bool simulated = false;
  if (auto q = rd.Query("SELECT * FROM runs WHERE run_id = ?1", {run}); q.ok() && !q->rows.empty())
    simulated = q->Col("simulated") >= 0 && q->Int(0, "simulated") != 0;
  auto host_tracks = TrackIdList(rd, run_id, "host");
  if (!host_tracks.ok()) return host_tracks.status();
  // Host-clock spans the frontend records around each cut and read.
  auto host = rd.Query(
      "SELECT n.name AS name, s.dur_ns AS dur FROM slices s JOIN names n ON n.name_id = s.name_id"
      " WHERE s.run_id = ?1 AND s.kind = 'host'"
      // Only the host lanes' chunks are decoded (the list reaches slice_chunks' index).
      " AND s.track_id IN " + *host_tracks +
      " AND (n.name IN ('mark_step', 'trace', 'transfer to device', 'read value')"
      " OR n.name LIKE 'host_call at %')",
      {run});
  if (!host.ok()) return host.status();
  std::map<std::string, std::vector<int64_t>> by_name;
  std::set<std::string> fallback_lines;
  int64_t fallbacks = 0;
  for (size_t i = 0; i < host->rows.size(); ++i) {
    const std::string name = host->Text(i, "name");
    if (name.rfind("host_call at ", 0) == 0) {
      ++fallbacks;
      fallback_lines.insert(name.substr(13));
      continue;
    }
    by_name[name].push_back(host->Int(i, "dur"));
  }
  auto compiles =
      rd.Query("SELECT cache, duration_ns, cause_kind FROM compilations WHERE run_id = ?1", {run});
  if (!compiles.ok()) return compiles.status();
  std::vector<int64_t> compile_ns;
  int64_t cached = 0, uncached = 0, disk_hits = 0, unreadable = 0;
  for (size_t i = 0; i < compiles->rows.size(); ++i) {
    const std::string cache = compiles->Text(i, "cache");
    unreadable += compiles->Text(i, "cause_kind") == "disk_cache_unreadable";
    if (cache == "miss") {
      compile_ns.push_back(compiles->Int(i, "duration_ns"));
      ++uncached;
    } else {
      ++cached;
      disk_hits += cache == "disk_hit";
    }
  }
  // A program's run on the device clock: on each chip from its first kernel
  // to its last of that step and graph; the slowest chip is the run's time.
  std::map<std::pair<int64_t, int64_t>, int64_t> slowest;
  if (simulated) {
    // No device clock: ExecuteTime below is its steps on the modeled clock.
  } else if (slices) {
    for (const auto& [key, span] : slices->spans) {
      int64_t& s = slowest[{std::get<0>(key), std::get<1>(key)}];
      s = std::max(s, span.end - span.start);
    }
  } else {
    auto runs = rd.Query(
        "SELECT s.step AS step, s.graph_id AS graph, MAX(s.start_ns + s.dur_ns) - MIN(s.start_ns) AS span"
        " FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
        " WHERE s.run_id = ?1 AND t.clock = 'device' AND s.kind IN ('compute', 'collective')"
        " AND s.track_id IN (SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = 'device')"
        " AND s.graph_id IS NOT NULL GROUP BY s.step, s.graph_id, s.track_id",
        {run});
    if (!runs.ok()) return runs.status();
    for (size_t i = 0; i < runs->rows.size(); ++i) {
      int64_t& s = slowest[{runs->Int(i, "step", -1), runs->Int(i, "graph")}];
      s = std::max(s, runs->Int(i, "span"));
    }
  }
  std::vector<int64_t> execute_ns;
  for (const auto& [key, span] : slowest) execute_ns.push_back(span);

  r.metrics.push_back(Timing("CompileTime", "host", "a compilation (cache miss)", compile_ns));
  // A simulated run has no device clock (docs/simulate.md): its steps' spans on
  // the modeled clock stand in, labelled so, never an empty device clock as zeros.
  if (simulated) {
    auto spans = rd.Query("SELECT end_ns - start_ns AS ns FROM step_bounds WHERE run_id = ?1 AND clock = 'modeled'",
                          {run});
    if (!spans.ok()) return spans.status();
    for (size_t i = 0; i < spans->rows.size(); ++i) execute_ns.push_back(spans->Int(i, "ns"));
    r.metrics.push_back(Timing("ExecuteTime", "modeled", "a step on every chip (simulated: no device clock)", execute_ns));
  } else {
    r.metrics.push_back(Timing("ExecuteTime", "device", "a program's run, slowest chip", execute_ns));
  }
  r.metrics.push_back(Timing("LazyTracing", "host", "lowering a cut's pending graph", by_name["trace"]));
  r.metrics.push_back(Timing("TransferToDeviceTime", "host", "moving a cut's host inputs to the chips",
                             by_name["transfer to device"]));
  r.metrics.push_back(Timing("TransferFromDeviceTime", "host", "reading a value back (waiting included)",
                             by_name["read value"]));
  r.metrics.push_back(Timing("MarkStep", "host", "a mark_step that ran a program", by_name["mark_step"]));
  // A recorded run without a timeline (--trace off) times nothing from it:
  // said, not shown as zeros.
  bool no_timeline = false;
  if (!simulated) {
    auto chunks = rd.Query("SELECT EXISTS (SELECT 1 FROM slice_chunks WHERE run_id = ?1) AS any", {run});
    no_timeline = chunks.ok() && !chunks->rows.empty() && chunks->Int(0, "any") == 0 && r.metrics[0].count > 0;
  }
  if (no_timeline) {
    // Why: --trace off, or a capture that stopped before its first slice (--trace-max-mb).
    std::string why = "the run kept no timeline (--trace off)";
    if (auto has_note = rd.HasColumn("runs", "capture_note"); has_note.ok() && *has_note) {
      auto note = rd.Query("SELECT coalesce(capture_note, '') AS note FROM runs WHERE run_id = ?1", {run});
      if (note.ok() && !note->rows.empty() && !note->Text(0, "note").empty() &&
          note->Text(0, "note").find("--trace off") == std::string::npos)
        why = "the capture kept no slices of the timeline (runs.capture_note says why)";
    }
    for (TimingMetric& m : r.metrics)
      if (m.name != "CompileTime") {
        m = TimingMetric{m.name, m.clock, absl::StrCat("not recorded: ", why)};
        m.count = -1;
      }
  }

  // Every mark_step() call is counted by core (a call with nothing pending
  // runs no program and leaves no slice); older files only have the slices.
  auto marks = rd.Query("SELECT MAX(value) AS n FROM counters WHERE run_id = ?1 AND name = 'MarkStep'", {run});
  if (!marks.ok()) return marks.status();
  const int64_t mark_steps = !marks->rows.empty() && !marks->Text(0, "n").empty()
                                 ? marks->Int(0, "n")
                                 : static_cast<int64_t>(by_name["mark_step"].size());
  auto created =
      rd.Query("SELECT MAX(value) AS n FROM counters WHERE run_id = ?1 AND name = 'CreateTensor'", {run});
  if (!created.ok()) return created.status();
  const bool counted = !created->rows.empty() && !created->Text(0, "n").empty();
  // Value reads: counted by core as they happen (a timeline may not be kept);
  // older files only have the slices.
  auto reads = rd.Query("SELECT MAX(value) AS n FROM counters WHERE run_id = ?1 AND name = 'ValueRead'", {run});
  if (!reads.ok()) return reads.status();
  std::optional<int64_t> value_reads;
  if (!reads->rows.empty() && !reads->Text(0, "n").empty()) value_reads = reads->Int(0, "n");
  else if (!no_timeline) value_reads = static_cast<int64_t>(by_name["read value"].size());
  // The persistent cache counts only for runs that had one (the run's config says which directory).
  auto config = rd.Query(
      "SELECT COALESCE(json_extract(config_json, '$.cache_dir'), '') AS dir FROM runs"
      " WHERE run_id = ?1",
      {run});
  const bool persistent = config.ok() && !config->rows.empty() && !config->Text(0, "dir").empty();
  auto persistent_count = [&](int64_t n) { return persistent ? std::optional<int64_t>(n) : std::nullopt; };
  const char* no_cache = "no --cache-dir in this run";
  r.counters = {
      {"MarkStep", mark_steps, "mark_step() calls"},
      {"CachedCompile", cached, "programs taken from a cache (memory or disk)"},
      {"UncachedCompile", uncached, "programs compiled"},
      {"PersistentCacheHit", persistent_count(disk_hits), persistent ? "from the on-disk cache" : no_cache},
      {"PersistentCacheMiss", persistent_count(uncached),
       persistent ? "not on disk: compiled and stored" : no_cache},
      {"PersistentCacheDeserializeFailure", persistent_count(unreadable),
       persistent ? "unreadable entries, removed and recompiled" : no_cache},
      {"CreateTensor", counted ? std::optional<int64_t>(created->Int(0, "n")) : std::nullopt,
       counted ? "tensors the frontend made" : "not recorded in this run"},
      {"ValueRead", value_reads,
       value_reads ? "host reads of a tensor's value" : "not recorded: no timeline, and a file before the counter"},
      {"Fallback", fallbacks,
       fallback_lines.empty() ? "host_call: C++ run on host values"
                              : absl::StrCat("host_call at ", absl::StrJoin(fallback_lines, ", "))},
  };

  // The frontend's per-op counters: cumulative, sampled at every mark_step, so the last (largest) sample.
  const std::string prefix = trace::kTracedOpCounterPrefix;
  auto traced = Counts(rd,
                       absl::StrCat("SELECT substr(name, ", prefix.size() + 1, ") AS name,",
                                    " CAST(MAX(value) AS INTEGER) AS n FROM counters WHERE run_id = ?1",
                                    " AND name LIKE '", prefix, "%' GROUP BY name ORDER BY n DESC, name"),
                       run);
  if (!traced.ok()) return traced.status();
  r.ops_traced = *std::move(traced);
  if (slices) {
    // Named through `ops`, as the query below joins them (a kernel of no op row is not counted).
    auto ops = rd.Query("SELECT graph_id, op_id, opcode FROM ops WHERE run_id = ?1", {run});
    if (!ops.ok()) return ops.status();
    std::map<std::string, int64_t> by_opcode;
    for (size_t i = 0; i < ops->rows.size(); ++i) {
      auto it = slices->kernels.find({ops->Int(i, "graph_id"), ops->Int(i, "op_id")});
      if (it != slices->kernels.end()) by_opcode[ops->Text(i, "opcode")] += it->second;
    }
    for (const auto& [name, n] : by_opcode) r.kernel_runs.push_back({name, n});
    std::sort(r.kernel_runs.begin(), r.kernel_runs.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return r;
  }
  if (simulated) return r;  // kernels run per opcode are counted on the device clock, which it has not
  auto kernels =
      Counts(rd,
             // Slices counted per op first (one pass over the device lanes'
             // chunks), then named: joined the other way round, the planner
             // may decode every chunk once per op.
             "SELECT o.opcode AS name, SUM(k.n) AS n FROM (SELECT s.graph_id, s.op_id, COUNT(*) AS n FROM slices s"
             " WHERE s.run_id = ?1 AND s.op_id IS NOT NULL"
             " AND s.track_id IN (SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = 'device')"
             " GROUP BY s.graph_id, s.op_id) k"
             " JOIN ops o ON o.run_id = ?1 AND o.graph_id = k.graph_id AND o.op_id = k.op_id"
             " GROUP BY o.opcode ORDER BY n DESC, o.opcode",
             run);
  if (!kernels.ok()) return kernels.status();
  r.kernel_runs = *std::move(kernels);
  return r;
}

absl::StatusOr<std::optional<RunMetrics>> ReadRunMetrics(const Reader& rd, int64_t run_id) {
  auto table = rd.Query("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'metrics'");
  if (!table.ok()) return table.status();
  if (table->Int(0, "n") == 0) return std::nullopt;  // a file from before the table
  auto q = rd.Query(
      "SELECT kind, name, clock, count, total_ns, p50_ns, p90_ns, p99_ns, max_ns, value, note FROM metrics"
      " WHERE run_id = ?1 ORDER BY kind, position",
      {std::to_string(run_id)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) return std::nullopt;
  RunMetrics r;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const std::string kind = q->Text(i, "kind"), name = q->Text(i, "name");
    if (kind == "metric") {
      const bool known = q->rows[i][q->Col("count")].has_value();  // NULL: not recorded
      r.metrics.push_back({name, q->Text(i, "clock"), q->Text(i, "note"), known ? q->Int(i, "count") : -1,
                           q->Int(i, "total_ns"), q->Int(i, "p50_ns"), q->Int(i, "p90_ns"),
                           q->Int(i, "p99_ns"), q->Int(i, "max_ns")});
    } else if (kind == "counter") {
      const bool known = q->rows[i][q->Col("value")].has_value();  // NULL: not recorded in that run
      r.counters.push_back(
          {name, known ? std::optional<int64_t>(q->Int(i, "value")) : std::nullopt, q->Text(i, "note")});
    } else if (kind == "op_traced") {
      r.ops_traced.push_back({name, q->Int(i, "value")});
    } else if (kind == "kernel_runs") {
      r.kernel_runs.push_back({name, q->Int(i, "value")});
    }
  }
  return r;
}

namespace internal {

absl::Status StoreRunMetrics(sqlite3* db, int64_t run_id, const RunAggregates* slices) {
  const Reader rd = Reader::OnConnection(db);
  auto r = ComputeRunMetrics(rd, run_id, slices);
  if (!r.ok()) return r.status();
  Stmt clear, insert;
  if (absl::Status st = clear.Prepare(db, "DELETE FROM metrics WHERE run_id = ?1"); !st.ok()) return st;
  clear.Int(1, run_id);
  if (absl::Status st = clear.Run(); !st.ok()) return st;
  if (absl::Status st =
          insert.Prepare(db,
                         "INSERT INTO metrics(run_id, kind, name, position, clock, count, total_ns,"
                         " p50_ns, p90_ns, p99_ns, max_ns, value, note)"
                         " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)");
      !st.ok())
    return st;
  // One row: the kind, name and position; the caller binds the rest (NULL unless bound).
  auto row = [&](const char* kind, const std::string& name, size_t position, const auto& bind) {
    sqlite3_clear_bindings(insert.get());
    insert.Int(1, run_id);
    insert.Text(2, kind);
    insert.Text(3, name);
    insert.Int(4, static_cast<int64_t>(position));
    insert.Text(13, "");
    bind();
    return insert.Run();
  };
  for (size_t k = 0; k < r->metrics.size(); ++k) {
    const TimingMetric& m = r->metrics[k];
    absl::Status st = row("metric", m.name, k, [&] {
      insert.Text(5, m.clock);
      if (m.count >= 0) {
        insert.Int(6, m.count);
        insert.Int(7, m.total_ns);
        insert.Int(8, m.p50_ns);
        insert.Int(9, m.p90_ns);
        insert.Int(10, m.p99_ns);
        insert.Int(11, m.max_ns);
      }
      insert.Text(13, m.what);
    });
    if (!st.ok()) return st;
  }
  for (size_t k = 0; k < r->counters.size(); ++k) {
    const CounterMetric& c = r->counters[k];
    absl::Status st = row("counter", c.name, k, [&] {
      if (c.value) insert.Int(12, *c.value);
      insert.Text(13, c.note);
    });
    if (!st.ok()) return st;
  }
  for (const char* kind : {"op_traced", "kernel_runs"}) {
    const auto& counts = kind == std::string("op_traced") ? r->ops_traced : r->kernel_runs;
    for (size_t k = 0; k < counts.size(); ++k) {
      absl::Status st = row(kind, counts[k].first, k, [&] { insert.Int(12, counts[k].second); });
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace shardscope::store
