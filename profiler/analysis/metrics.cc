#include "profiler/analysis/metrics.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/format.h"

namespace shardscope::analysis {
namespace {

// Warnings apply from this step on, when warm-up compilations are over.
constexpr int kWarmSteps = 10;

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

}  // namespace

absl::StatusOr<MetricsReport> BuildMetricsReport(const store::Reader& rd, int64_t run_id) {
  MetricsReport r;
  r.run_id = run_id;
  const std::string run = std::to_string(run_id);
  auto steps = rd.Query("SELECT COUNT(*) AS n FROM steps WHERE run_id = ?1", {run});
  if (!steps.ok()) return steps.status();
  r.steps = steps->Int(0, "n");

  // Host-clock spans the frontend records around each cut and read.
  auto host = rd.Query(
      "SELECT n.name AS name, s.dur_ns AS dur, s.step AS step FROM slices s JOIN names n ON n.name_id = s.name_id"
      " WHERE s.run_id = ?1 AND s.kind = 'host'"
      " AND (n.name IN ('mark_step', 'trace', 'transfer to device', 'read value') OR n.name LIKE 'host_call at %')",
      {run});
  if (!host.ok()) return host.status();
  std::map<std::string, std::vector<int64_t>> by_name;
  std::set<int64_t> steps_reading;
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
    if (name == "read value") steps_reading.insert(host->Int(i, "step", -1));
  }
  auto compiles = rd.Query("SELECT cache, duration_ns, step, cause_kind FROM compilations WHERE run_id = ?1", {run});
  if (!compiles.ok()) return compiles.status();
  std::vector<int64_t> compile_ns;
  int64_t cached = 0, uncached = 0, disk_hits = 0, late_misses = 0, unreadable = 0;
  for (size_t i = 0; i < compiles->rows.size(); ++i) {
    const std::string cache = compiles->Text(i, "cache");
    unreadable += compiles->Text(i, "cause_kind") == "disk_cache_unreadable";
    if (cache == "miss") {
      compile_ns.push_back(compiles->Int(i, "duration_ns"));
      ++uncached;
      if (compiles->Int(i, "step") >= kWarmSteps) ++late_misses;
    } else {
      ++cached;
      disk_hits += cache == "disk_hit";
    }
  }
  // A program's run on the device clock: on each chip from its first kernel
  // to its last of that step and graph; the slowest chip is the run's time.
  auto runs = rd.Query(
      "SELECT s.step AS step, s.graph_id AS graph, MAX(s.start_ns + s.dur_ns) - MIN(s.start_ns) AS span"
      " FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " WHERE s.run_id = ?1 AND t.clock = 'device' AND s.kind IN ('compute', 'collective')"
      " AND s.graph_id IS NOT NULL GROUP BY s.step, s.graph_id, s.track_id",
      {run});
  if (!runs.ok()) return runs.status();
  std::map<std::pair<int64_t, int64_t>, int64_t> slowest;
  for (size_t i = 0; i < runs->rows.size(); ++i) {
    int64_t& s = slowest[{runs->Int(i, "step", -1), runs->Int(i, "graph")}];
    s = std::max(s, runs->Int(i, "span"));
  }
  std::vector<int64_t> execute_ns;
  for (const auto& [key, span] : slowest) execute_ns.push_back(span);

  r.metrics.push_back(Timing("CompileTime", "host", "a compilation (cache miss)", compile_ns));
  r.metrics.push_back(Timing("ExecuteTime", "device", "a program's run, slowest chip", execute_ns));
  r.metrics.push_back(Timing("LazyTracing", "host", "lowering a cut's pending graph", by_name["trace"]));
  r.metrics.push_back(
      Timing("TransferToDeviceTime", "host", "moving a cut's host inputs to the chips", by_name["transfer to device"]));
  r.metrics.push_back(
      Timing("TransferFromDeviceTime", "host", "reading a value back (waiting included)", by_name["read value"]));
  r.metrics.push_back(Timing("MarkStep", "host", "a mark_step call", by_name["mark_step"]));

  const int64_t reads = static_cast<int64_t>(by_name["read value"].size());
  auto created = rd.Query("SELECT MAX(value) AS n FROM counters WHERE run_id = ?1 AND name = 'CreateTensor'", {run});
  if (!created.ok()) return created.status();
  const bool counted = !created->rows.empty() && !created->Text(0, "n").empty();
  // The persistent cache counts only for runs that had one (the run's config says which directory).
  auto config = rd.Query("SELECT COALESCE(json_extract(config_json, '$.cache_dir'), '') AS dir FROM runs"
                         " WHERE run_id = ?1",
                         {run});
  const bool persistent = config.ok() && !config->rows.empty() && !config->Text(0, "dir").empty();
  auto persistent_count = [&](int64_t n) { return persistent ? std::optional<int64_t>(n) : std::nullopt; };
  const char* no_cache = "no --cache-dir in this run";
  r.counters = {
      {"MarkStep", static_cast<int64_t>(by_name["mark_step"].size()), ""},
      {"CachedCompile", cached, "programs taken from a cache (memory or disk)"},
      {"UncachedCompile", uncached, "programs compiled"},
      {"PersistentCacheHit", persistent_count(disk_hits), persistent ? "from the on-disk cache" : no_cache},
      {"PersistentCacheMiss", persistent_count(uncached), persistent ? "not on disk: compiled and stored" : no_cache},
      {"PersistentCacheDeserializeFailure", persistent_count(unreadable),
       persistent ? "unreadable entries, removed and recompiled" : no_cache},
      {"CreateTensor", counted ? std::optional<int64_t>(created->Int(0, "n")) : std::nullopt,
       counted ? "tensors the frontend made" : "not recorded in this run"},
      {"ValueRead", reads, "host reads of a tensor's value"},
      {"Fallback", fallbacks,
       fallback_lines.empty() ? "host_call: C++ run on host values"
                              : absl::StrCat("host_call at ", absl::StrJoin(fallback_lines, ", "))},
  };

  auto kernels = rd.Query(
      "SELECT o.opcode AS opcode, COUNT(*) AS n FROM slices s"
      " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " JOIN ops o ON o.run_id = s.run_id AND o.graph_id = s.graph_id AND o.op_id = s.op_id"
      " WHERE s.run_id = ?1 AND t.clock = 'device' GROUP BY o.opcode ORDER BY n DESC, o.opcode",
      {run});
  if (!kernels.ok()) return kernels.status();
  for (size_t i = 0; i < kernels->rows.size(); ++i)
    r.kernel_runs.push_back({kernels->Text(i, "opcode"), kernels->Int(i, "n")});

  if (r.steps > kWarmSteps) {
    const double per_step = static_cast<double>(late_misses) / static_cast<double>(r.steps - kWarmSteps);
    if (per_step > 0.5)
      r.warnings.push_back(absl::StrFormat(
          "%d compilations in the %d steps after step %d (%.2f per step): the graph keeps changing; "
          "`shardscope report` names each compilation's cause and line",
          late_misses, r.steps - kWarmSteps, kWarmSteps, per_step));
    steps_reading.erase(-1);
    if (static_cast<int64_t>(steps_reading.size()) >= r.steps - 1)
      r.warnings.push_back(absl::StrFormat(
          "a value is read back in %d of %d steps (%d reads, %s waiting on the host clock): each read "
          "waits for the chips; read every N steps, or after the next mark_step",
          steps_reading.size(), r.steps, reads, FormatNs(r.metrics[4].total_ns)));
  }
  return r;
}

std::string RenderMetricsText(const MetricsReport& r) {
  std::string out = absl::StrCat("run ", r.run_id, ": metrics over ", r.steps, " steps\n\nMetric\n");
  std::vector<std::vector<std::string>> t = {
      {"name", "clock", "count", "total", "p50", "p90", "p99", "max", "one sample is"}};
  for (const TimingMetric& m : r.metrics)
    t.push_back({m.name, m.clock, std::to_string(m.count), FormatNs(m.total_ns), FormatNs(m.p50_ns),
                 FormatNs(m.p90_ns), FormatNs(m.p99_ns), FormatNs(m.max_ns), m.what});
  out += AlignTable(t, "  ", {false, false, true, true, true, true, true, true, false});
  out += "\nCounter\n";
  std::vector<std::vector<std::string>> c;
  for (const CounterMetric& m : r.counters)
    c.push_back({m.name, m.value ? std::to_string(*m.value) : "-", m.note});
  out += AlignTable(c, "  ", {false, true, false});
  out += "\nKernels run (all chips, device clock)\n";
  if (r.kernel_runs.empty()) out += "  none recorded\n";
  std::vector<std::vector<std::string>> k;
  for (const auto& [opcode, n] : r.kernel_runs) k.push_back({opcode, std::to_string(n)});
  out += AlignTable(k, "  ", {false, true});
  if (r.warnings.empty()) {
    out += "\nNo warnings.\n";
  } else {
    out += "\nWarnings\n";
    for (const std::string& w : r.warnings) absl::StrAppend(&out, "  ! ", w, "\n");
  }
  return out;
}

}  // namespace shardscope::analysis
