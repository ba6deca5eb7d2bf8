#include "profiler/analysis/metrics.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/recompiles.h"
#include "store/json_text.h"
#include "store/run_state.h"

namespace shardscope::analysis {
namespace {

// Warnings apply from this step on, when warm-up compilations are over.
constexpr int kWarmSteps = 10;

}  // namespace

absl::StatusOr<MetricsReport> BuildMetricsReport(const store::Reader& rd, int64_t run_id) {
  MetricsReport r;
  r.run_id = run_id;
  const std::string run = std::to_string(run_id);
  auto steps = rd.Query("SELECT COUNT(*) AS n FROM steps WHERE run_id = ?1", {run});
  if (!steps.ok()) return steps.status();
  r.steps = steps->Int(0, "n");
  if (auto state = store::ReadRunState(rd, run_id); state.ok()) r.run_state = state->Describe();
  auto has_imports = rd.HasTable("trace_imports");
  if (!has_imports.ok()) return has_imports.status();
  if (*has_imports) {
    auto files = rd.Query("SELECT COUNT(*) AS n, MIN(file) AS file FROM trace_imports WHERE run_id = ?1", {run});
    if (!files.ok()) return files.status();
    if (const int64_t n = files->Int(0, "n"); n > 0) {
      r.imported = n == 1 ? files->Text(0, "file")
                          : absl::StrCat(n, " files, the first ", files->Text(0, "file"));
      return r;
    }
  }
  if (auto has_note = rd.HasColumn("runs", "capture_note"); has_note.ok() && *has_note) {
    auto note = rd.Query("SELECT coalesce(capture_note, '') AS note FROM runs WHERE run_id = ?1", {run});
    if (note.ok() && !note->rows.empty()) r.capture_note = note->Text(0, "note");
  }
  auto stored = store::ReadRunMetrics(rd, run_id);
  if (!stored.ok()) return stored.status();
  r.stored = stored->has_value();
  if (r.stored) {
    static_cast<store::RunMetrics&>(r) = **std::move(stored);
  } else {
    auto computed = store::ComputeRunMetrics(rd, run_id);
    if (!computed.ok()) return computed.status();
    static_cast<store::RunMetrics&>(r) = *std::move(computed);
  }
  // A diverged run's losses are stored as NaN or Inf: said at once, at any length.
  auto diverged = rd.Query(
      "SELECT step, loss FROM steps WHERE run_id = ?1 AND loss IN ('NaN', 9e999, -9e999)"
      " ORDER BY step LIMIT 1",
      {run});
  if (!diverged.ok()) return diverged.status();
  if (!diverged->rows.empty())
    r.warnings.push_back(absl::StrCat("the loss is not finite from step ", diverged->Int(0, "step"), " (",
                                      diverged->Text(0, "loss"),
                                      "): training diverged; lower the learning rate, or look at the steps "
                                      "before it (`shardscope query`: SELECT step, loss FROM steps)"));
  if (r.steps <= kWarmSteps) return r;

  // Counted as the report's verdict counts them: recompilations (not a call
  // site's first graph) in the steps after step 10.
  auto late = rd.Query(
      "SELECT (SELECT COUNT(*) FROM compilations WHERE run_id = ?1 AND cache = 'miss' AND step > ?2"
      " AND coalesce(cause_kind, '') NOT IN ('first_compile', 'value_read_cut')) AS n,"
      " (SELECT COUNT(*) FROM steps WHERE run_id = ?1 AND step > ?2) AS steps",
      {run, std::to_string(kWarmSteps)});
  if (!late.ok()) return late.status();
  const int64_t late_misses = late->Int(0, "n"), late_steps = late->Int(0, "steps");
  const double per_step =
      late_steps > 0 ? static_cast<double>(late_misses) / static_cast<double>(late_steps) : 0;
  if (per_step > 0.5)
    r.warnings.push_back(absl::StrFormat(
        "%d recompilations in the %d steps after step %d (%.2f per step): the graph keeps changing; "
        "`shardscope report` names each compilation's cause and line",
        late_misses, late_steps, kWarmSteps, per_step));
  auto host_tracks = store::TrackIdList(rd, run_id, "host");
  if (!host_tracks.ok()) return host_tracks.status();
  auto reading = rd.Query(
      "SELECT COUNT(DISTINCT s.step) AS n FROM slices s JOIN names n ON n.name_id = s.name_id"
      " WHERE s.run_id = ?1 AND s.kind = 'host' AND n.name = 'read value'"
      " AND s.step IN (SELECT step FROM steps WHERE run_id = ?1)"
      // Host lanes only, listed: a simulated pod's chip lanes are not made.
      " AND s.track_id IN " + *host_tracks,
      {run});
  if (!reading.ok()) return reading.status();
  const int64_t steps_reading = reading->Int(0, "n");
  if (steps_reading >= r.steps - 1) {
    int64_t reads = 0, waited_ns = 0;
    for (const CounterMetric& c : r.counters)
      if (c.name == "ValueRead") reads = c.value.value_or(0);
    for (const TimingMetric& m : r.metrics)
      if (m.name == "TransferFromDeviceTime") waited_ns = m.total_ns;
    // Reads mid-step also cut the graph: what reading every N steps saves (`shardscope recompiles` too).
    auto cuts = FindValueReadCuts(rd, run_id);
    if (!cuts.ok()) return cuts.status();
    const bool cutting =
        std::any_of(cuts->begin(), cuts->end(), [](const ValueReadCuts& c) { return c.steps_cut > 0; });
    // A simulated run's reads wait for nothing: its host time is the
    // simulator's own, not what the program would wait on chips.
    auto sim = rd.Query("SELECT coalesce(simulated, 0) AS s FROM runs WHERE run_id = ?1", {run});
    const bool simulated = sim.ok() && !sim->rows.empty() && sim->Int(0, "s") != 0;
    const std::string waited =
        simulated ? "no wait measured: the run is simulated and its host time is the simulator's"
                  : absl::StrCat(FormatNs(waited_ns), " waiting on the host clock");
    std::string warning = absl::StrFormat(
        "a value is read back in %d of %d steps (%d reads, %s): each read "
        "waits for the chips to finish, so the host cannot trace the next step meanwhile; %s",
        steps_reading, r.steps, reads, waited,
        cutting ? "read every N steps, or after the next mark_step"
                : "read every N steps (the reads already follow mark_step: they cut nothing)");
    for (const ValueReadCuts& c : *cuts)
      if (c.executions_saved > 0)
        absl::StrAppend(&warning,
                        absl::StrFormat("; the read at %s cut the graph in %d steps: every %d steps, "
                                        "%d program runs saved",
                                        c.at, c.steps_cut, c.every, c.executions_saved));
    r.warnings.push_back(std::move(warning));
  }
  return r;
}

std::string RenderMetricsText(const MetricsReport& r) {
  std::string out = absl::StrCat("run ", r.run_id, ": metrics over ", r.steps, " steps (",
                                 r.stored ? "stored when the run ended" : "computed from the run's tables",
                                 ")\n");
  if (!r.run_state.empty() && r.run_state != "finished") absl::StrAppend(&out, "status: ", r.run_state, "\n");
  if (!r.imported.empty()) {
    absl::StrAppend(&out, "\nRun ", r.run_id, " was imported from another tool's trace (", Printable(r.imported),
                    "): it has none of these figures\n(compilations, lazy tracing, transfers, mark_step calls, "
                    "counters), which only shardscope's own frontend records.\n");
    return out;
  }
  if (!r.capture_note.empty() && r.capture_note.find("--trace off") == std::string::npos)
    absl::StrAppend(&out, "capture: ", Printable(r.capture_note),
                    "\n  (LazyTracing, TransferToDeviceTime, TransferFromDeviceTime, MarkStep, ExecuteTime and the "
                    "kernels run are timed from the timeline: they cover what it kept)\n");
  out += "\nMetric\n";
  std::vector<std::vector<std::string>> t = {
      {"name", "clock", "count", "total", "p50", "p90", "p99", "max", "one sample is"}};
  for (const TimingMetric& m : r.metrics) {
    if (m.count < 0) {
      t.push_back({m.name, m.clock, "-", "-", "-", "-", "-", "-", m.what});
      continue;
    }
    t.push_back({m.name, m.clock, std::to_string(m.count), FormatNs(m.total_ns), FormatNs(m.p50_ns),
                 FormatNs(m.p90_ns), FormatNs(m.p99_ns), FormatNs(m.max_ns), m.what});
  }
  out += AlignTable(t, "  ", {false, false, true, true, true, true, true, true, false});
  out += "\nCounter\n";
  std::vector<std::vector<std::string>> c;
  for (const CounterMetric& m : r.counters)
    c.push_back({m.name, m.value ? std::to_string(*m.value) : "-", m.note});
  out += AlignTable(c, "  ", {false, true, false});
  auto counts = [&](const char* title, const std::vector<std::pair<std::string, int64_t>>& rows) {
    absl::StrAppend(&out, "\n", title, "\n");
    if (rows.empty()) out += "  none recorded\n";
    std::vector<std::vector<std::string>> k;
    for (const auto& [opcode, n] : rows) k.push_back({opcode, std::to_string(n)});
    out += AlignTable(k, "  ", {false, true});
  };
  counts("Ops traced (by the frontend, all steps)", r.ops_traced);
  counts("Kernels run (all chips, device clock)", r.kernel_runs);
  if (r.warnings.empty()) {
    out += "\nNo warnings.\n";
  } else {
    out += "\nWarnings\n";
    for (const std::string& w : r.warnings) absl::StrAppend(&out, "  ! ", Printable(w), "\n");
  }
  return out;
}

std::string RenderMetricsJson(const MetricsReport& r) {
  nlohmann::json j;
  j["schema"] = "shardscope.metrics/1";
  j["run_id"] = r.run_id;
  j["steps"] = r.steps;
  j["stored"] = r.stored;
  j["imported"] = r.imported.empty() ? nlohmann::json() : nlohmann::json(r.imported);
  j["capture_note"] = r.capture_note.empty() ? nlohmann::json() : nlohmann::json(r.capture_note);
  j["metrics"] = nlohmann::json::array();
  for (const TimingMetric& m : r.metrics) {
    auto n = [&](int64_t v) { return m.count < 0 ? nlohmann::json() : nlohmann::json(v); };  // null: not recorded
    j["metrics"].push_back({{"name", m.name}, {"clock", m.clock}, {"what", m.what}, {"count", n(m.count)},
                            {"total_ns", n(m.total_ns)}, {"p50_ns", n(m.p50_ns)}, {"p90_ns", n(m.p90_ns)},
                            {"p99_ns", n(m.p99_ns)}, {"max_ns", n(m.max_ns)}});
  }
  j["counters"] = nlohmann::json::array();
  for (const CounterMetric& c : r.counters)
    j["counters"].push_back(
        {{"name", c.name}, {"value", c.value ? nlohmann::json(*c.value) : nlohmann::json()}, {"note", c.note}});
  j["ops_traced"] = nlohmann::json::object();
  for (const auto& [op, n] : r.ops_traced) j["ops_traced"][op] = n;
  j["kernel_runs"] = nlohmann::json::object();
  for (const auto& [op, n] : r.kernel_runs) j["kernel_runs"][op] = n;
  j["warnings"] = r.warnings;
  j["warning_count"] = r.warnings.size();
  return store::JsonText(j, 2) + "\n";
}

}  // namespace shardscope::analysis
