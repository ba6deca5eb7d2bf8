// BuildRunReport: reads one run's tables from the store and condenses them
// into the RunReport tables (see run_report.h).
#include "profiler/analysis/run_report.h"

#include "profiler/analysis/quantile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/clocks.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/quantile.h"
#include "profiler/analysis/recompiles.h"
#include "store/index_ranges.h"
#include "store/run_state.h"

namespace shardscope::analysis {

namespace {

using store::QueryResult;

// Nearest-rank percentile of an unsorted list; q in [0, 1].
int64_t Percentile(const std::vector<int64_t>& v, double q) { return QuantileOf(v, q); }

std::string Bottleneck(const DeviceTimes& t) {
  const std::pair<int64_t, const char*> cats[] = {{t.compute_ns, "compute"},
                                                  {t.collective_ns, "collective"},
                                                  {t.transfer_ns, "transfer"},
                                                  {t.idle_ns, "idle"},
                                                  {t.host_wait_ns, "host"}};
  int64_t best = 0;
  std::string name;
  for (const auto& [ns, n] : cats) {
    if (ns > best) {
      best = ns;
      name = n;
    }
  }
  return name;
}

// "cpu profile: measured 2026-11-26T11:58:03Z, cache PATH: GEMM 206.7 GFLOP/s ...".
std::string ProfileValuesLine(const nlohmann::json& v) {
  if (!v.is_object()) return "";
  const std::string source = v.value("source", "");
  std::string where;
  if (source == "measured") where = absl::StrCat("measured at the run's start, ", v.value("measured_at", ""), ", cached at ", v.value("path", ""));
  else if (source == "cache") where = absl::StrCat("measured ", v.value("measured_at", ""), ", from the cache ", v.value("path", ""));
  else if (source == "file") where = absl::StrCat("pinned by the file ", v.value("path", ""), " (measured ", v.value("measured_at", "?"), ")");
  else if (source == "fixed") where = "fixed values (SHARDSCOPE_CPU_PROFILE=fixed)";
  else where = "built in (specification sheet)";
  std::string line = absl::StrFormat("%s profile: %s: peak %.1f GFLOP/s", v.value("name", "?"), where,
                                     v.value("peak_flops", 0.0) / 1e9);
  if (v.value("gang_peak_flops", 0.0) > 0)
    absl::StrAppend(&line, absl::StrFormat(" (a gang of %d: %.1f)", v.value("gang_width", 1), v.value("gang_peak_flops", 0.0) / 1e9));
  absl::StrAppend(&line, absl::StrFormat(", memory %.2f GB/s, kernel overhead %.0f ns", v.value("hbm_bandwidth", 0.0) / 1e9,
                                         v.value("kernel_overhead_ns", 0.0)));
  if (v.value("conv_flops", 0.0) > 0)  // the measured op-class figures (docs/cost_model.md)
    absl::StrAppend(&line, absl::StrFormat("; convolution %.1f GFLOP/s, cold stream %.2f GB/s, window %.2f ns per read, "
                                           "transcendental %.2f ns, strided broadcast %.2f ns, skinny GEMM "
                                           "%.1f/%.1f/%.1f GFLOP/s",
                                           v.value("conv_flops", 0.0) / 1e9, v.value("cold_bandwidth", 0.0) / 1e9,
                                           v.value("window_read_ns", 0.0), v.value("transcendental_ns", 0.0),
                                           v.value("strided_broadcast_ns", 0.0), v.value("gemm8_flops", 0.0) / 1e9,
                                           v.value("gemm32_flops", 0.0) / 1e9, v.value("gemm128_flops", 0.0) / 1e9));
  // Format 3's figures: what shared cores cost (a small kernel, a reduce, the wait at collectives).
  if (v.value("chip_spread_ns", 0.0) > 0 || v.value("reduce_read_ns", 0.0) > 0)
    absl::StrAppend(&line, absl::StrFormat("; small kernel %.2f us, reduce %.2f ns per element, chip spread %.0f ns",
                                           v.value("cold_kernel_overhead_ns", 0.0) / 1e3,
                                           v.value("reduce_read_ns", 0.0), v.value("chip_spread_ns", 0.0)));
  // Which of the calibration's passes, for which speed of the machine (cpu_speed_probe.h).
  if (v.contains("speed_note") && v["speed_note"].is_string())
    absl::StrAppend(&line, "; ", v["speed_note"].get<std::string>());
  return line;
}

absl::Status Fill(const store::Reader& rd, int64_t run_id, RunHeader* h) {
  auto q = rd.Query("SELECT * FROM runs WHERE run_id = ?1", {absl::StrCat(run_id)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) {
    if (auto latest = rd.LatestRunId(); !latest.ok()) return latest.status();  // "holds no runs yet"
    absl::Status has = rd.RequireRun(run_id);
    return has.ok() ? absl::NotFoundError(absl::StrCat(rd.path(), " has no run ", run_id)) : has;
  }
  h->db_path = rd.path();
  h->run_id = run_id;
  h->sample = q->Text(0, "sample");
  h->mesh = q->Text(0, "mesh");
  h->mesh_axes = q->Text(0, "mesh_axes");
  h->sharding = q->Text(0, "sharding");
  h->topology = q->Text(0, "topology");
  h->profile = q->Text(0, "profile");
  h->clock_kinds = q->Text(0, "clock_kinds");
  h->tool_version = q->Text(0, "tool_version");
  h->started_at = q->Text(0, "started_at");
  h->status = q->Text(0, "status");
  if (auto state = store::ReadRunState(rd, run_id); state.ok()) {
    h->status = state->status;
    h->status_detail = state->Describe();
  }
  h->num_hosts = static_cast<int>(q->Int(0, "num_hosts"));
  h->num_devices = static_cast<int>(q->Int(0, "num_devices"));
  h->simulated = q->Int(0, "simulated") != 0;
  h->imported = q->Col("imported") >= 0 && q->Int(0, "imported") != 0;
  // An imported run starts when its trace did and ends when the import did: no duration.
  if (q->Text(0, "ended_at_ns") != "" && !h->imported) {
    h->duration_ns = q->Int(0, "ended_at_ns") - q->Int(0, "started_at_ns");
  }
  // runs.capture_note arrived with capture control (issue 14); older files lack it.
  auto has = rd.Query("SELECT COUNT(*) AS n FROM pragma_table_info('runs') WHERE name = 'capture_note'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") > 0) {
    auto note = rd.Query("SELECT capture_note FROM runs WHERE run_id = ?1", {absl::StrCat(run_id)});
    if (!note.ok()) return note.status();
    if (!note->rows.empty()) h->capture_note = note->Text(0, "capture_note");
  }
  if (h->imported) {
    auto losses = ReadImportLosses(rd, run_id);
    if (!losses.ok()) return losses.status();
    for (const ImportLoss& l : *losses) h->import_losses.push_back(l.Text());
    auto uneven = UnevenSteps(rd, run_id);
    if (!uneven.ok()) return uneven.status();
    h->uneven_steps = *uneven;
  }
  auto faults = ReadRunFaults(rd, run_id);
  if (!faults.ok()) return faults.status();
  h->faults_injected = !faults->empty();
  h->faults = *faults;
  auto values = rd.Query(
      "SELECT json_extract(config_json, '$.profile_values') AS v FROM runs WHERE run_id = ?1 AND json_valid(config_json)",
      {absl::StrCat(run_id)});
  if (!values.ok()) return values.status();
  if (!values->rows.empty() && !values->Text(0, "v").empty()) {
    h->profile_values_json = nlohmann::json::parse(values->Text(0, "v"), nullptr, /*allow_exceptions=*/false);
    h->profile_values = ProfileValuesLine(h->profile_values_json);
  }
  auto map = rd.Query(
      "SELECT json_extract(config_json, '$.mesh_map') AS v FROM runs WHERE run_id = ?1 AND json_valid(config_json)",
      {absl::StrCat(run_id)});
  if (!map.ok()) return map.status();
  if (!map->rows.empty() && !map->Text(0, "v").empty()) {
    h->mesh_map_json = nlohmann::json::parse(map->Text(0, "v"), nullptr, /*allow_exceptions=*/false);
    if (h->mesh_map_json.is_discarded()) h->mesh_map_json = nullptr;
    const nlohmann::json& m = h->mesh_map_json;
    if (m.is_object() && m.contains("axes") && m["axes"].is_array()) {
      std::vector<std::string> axes;
      for (const nlohmann::json& a : m["axes"])
        if (a.is_object() && a.contains("axis") && a.contains("rides") && a["axis"].is_string() &&
            a["rides"].is_string())
          axes.push_back(absl::StrCat(a["axis"].get<std::string>(), ": ", a["rides"].get<std::string>()));
      const std::string mode = m.contains("mode") && m["mode"].is_string() ? m["mode"].get<std::string>() : "?";
      h->mesh_map = absl::StrCat("(", mode, "): ", absl::StrJoin(axes, "; "));
    }
  }
  auto calibration = store::ReadSimCalibration(rd, run_id);
  if (!calibration.ok()) return calibration.status();
  h->calibration = *calibration;
  return absl::OkStatus();
}

absl::Status Fill(const store::Reader& rd, const std::string& run, StepStats* s) {
  auto q = rd.Query("SELECT step, loss, wall_ns FROM steps WHERE run_id = ?1 ORDER BY step", {run});
  if (!q.ok()) return q.status();
  FillStepStats(*q, s);
  s->dispatched_ahead = StepsDispatchedAhead(rd, run);
  auto sim = rd.Query("SELECT coalesce(simulated, 0) AS sim FROM runs WHERE run_id = ?1", {run});
  s->simulated = sim.ok() && !sim->rows.empty() && sim->Int(0, "sim", 0) != 0;
  if (s->simulated) {
    std::vector<int64_t> spans;
    if (auto b = rd.Query("SELECT end_ns - start_ns AS ns FROM step_bounds WHERE run_id = ?1 AND clock = 'modeled'",
                          {run});
        b.ok())
      for (size_t i = 0; i < b->rows.size(); ++i) spans.push_back(b->Int(i, "ns", 0));
    s->modeled_median_ns = QuantileOf(spans, 0.5);
  }
  return absl::OkStatus();
}

absl::Status Fill(const store::Reader& rd, const std::string& run, CompileStats* c) {
  // cause_subkind arrived with schema changes of issue 13; older files lack it.
  auto has = rd.Query("SELECT COUNT(*) AS n FROM pragma_table_info('compilations') WHERE name = 'cause_subkind'");
  if (!has.ok()) return has.status();
  auto q = rd.Query(absl::StrCat("SELECT compile_id, step, graph_id, cache, cause_kind, ",
                                 has->Int(0, "n") ? "cause_subkind" : "NULL AS cause_subkind",
                                 ", cause_detail, source_file, source_line, duration_ns FROM compilations"
                                 " WHERE run_id = ?1 ORDER BY step, compile_id"),
                    {run});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    ++c->count;
    c->total_ns += q->Int(i, "duration_ns");
    std::string cache = q->Text(i, "cache");
    if (cache == "memory_hit") ++c->memory_hits;
    if (cache == "disk_hit") ++c->disk_hits;
    if (cache != "miss") continue;
    ++c->misses;
    CompileMiss m;
    m.compile_id = q->Int(i, "compile_id");
    m.step = static_cast<int>(q->Int(i, "step"));
    m.graph_id = q->Int(i, "graph_id");
    m.cause_kind = q->Text(i, "cause_kind");
    m.cause_subkind = q->Text(i, "cause_subkind");
    m.cause_detail = q->Text(i, "cause_detail");
    m.source_file = q->Text(i, "source_file");
    m.source_line = static_cast<int>(q->Int(i, "source_line"));
    m.duration_ns = q->Int(i, "duration_ns");
    // A call site's first graph is no recompilation, nor is one a value read
    // cut off (its site's first too: the read made an extra program).
    if (m.cause_kind != "first_compile" && m.cause_kind != "value_read_cut") ++c->recompilations;
    c->miss_list.push_back(std::move(m));
  }
  return absl::OkStatus();
}

DeviceTimes TimesOf(const QueryResult& q, size_t i) {
  DeviceTimes t;
  t.compute_ns = q.Int(i, "compute_ns");
  t.collective_ns = q.Int(i, "collective_ns");
  t.transfer_ns = q.Int(i, "transfer_ns");
  t.idle_ns = q.Int(i, "idle_ns");
  t.host_wait_ns = q.Int(i, "host_wait_ns");
  return t;
}

void Add(DeviceTimes* into, const DeviceTimes& t) {
  into->compute_ns += t.compute_ns;
  into->collective_ns += t.collective_ns;
  into->transfer_ns += t.transfer_ns;
  into->idle_ns += t.idle_ns;
  into->host_wait_ns += t.host_wait_ns;
}

absl::Status Fill(const store::Reader& rd, const std::string& run, DeviceBreakdown* d) {
  auto tracks = rd.Query(
      "SELECT count(*) AS n FROM tracks WHERE run_id = ?1 AND clock = 'device'", {run});
  if (!tracks.ok()) return tracks.status();
  if (tracks->Int(0, "n") == 0) {
    d->empty_reason = "no device-clock tracks in this run, so there is no per-chip breakdown";
    return absl::OkStatus();
  }
  // Files no writer has opened since host_wait_ns was added lack the column.
  auto cols = rd.Query(
      "SELECT count(*) AS n FROM pragma_table_info('step_device_summary') WHERE name = 'host_wait_ns'");
  if (!cols.ok()) return cols.status();
  const char* host_wait = cols->Int(0, "n") > 0 ? "host_wait_ns" : "0 AS host_wait_ns";
  auto q = rd.Query(
      absl::StrCat("SELECT step, device_id, compute_ns, collective_ns, transfer_ns, idle_ns, span_ns, ", host_wait,
                   " FROM step_device_summary WHERE run_id = ?1 ORDER BY step, device_id"),
      {run});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) {
    d->empty_reason = "the device tracks hold no step-tagged top-level slices";
    return absl::OkStatus();
  }
  // The median step by device-clock span: typical, unlike the first (warm-up) step.
  std::map<int, int64_t> span_by_step;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    span_by_step[static_cast<int>(q->Int(i, "step"))] = q->Int(i, "span_ns");
  }
  std::vector<std::pair<int64_t, int>> spans;
  for (const auto& [step, span] : span_by_step) spans.push_back({span, step});
  std::sort(spans.begin(), spans.end());
  const auto& mid = spans[(spans.size() - 1) / 2];
  d->median_step = mid.second;
  d->median_span_ns = mid.first;
  d->steps_covered = static_cast<int64_t>(spans.size());
  std::vector<int64_t> all_spans;
  for (const auto& s : spans) all_spans.push_back(s.first);
  d->spans_median_ns = QuantileOf(all_spans, 0.5);

  std::map<int, DeviceRow> rows;
  auto devs = rd.Query("SELECT device_id, host_id, coords FROM devices WHERE run_id = ?1", {run});
  if (!devs.ok()) return devs.status();
  for (size_t i = 0; i < devs->rows.size(); ++i) {
    DeviceRow& r = rows[static_cast<int>(devs->Int(i, "device_id"))];
    r.device_id = static_cast<int>(devs->Int(i, "device_id"));
    r.host_id = static_cast<int>(devs->Int(i, "host_id"));
    r.coords = devs->Text(i, "coords");
  }
  for (size_t i = 0; i < q->rows.size(); ++i) {
    int dev = static_cast<int>(q->Int(i, "device_id"));
    DeviceRow& r = rows[dev];  // a device missing from `devices` still gets a row
    r.device_id = dev;
    DeviceTimes t = TimesOf(*q, i);
    Add(&r.all_steps, t);
    if (q->Int(i, "step") == d->median_step) r.median_step = t;
  }
  for (auto& [dev, r] : rows) {
    // A chip with no slices in the median step sat idle through all of it.
    if (r.median_step.compute_ns + r.median_step.collective_ns + r.median_step.transfer_ns +
            r.median_step.idle_ns + r.median_step.host_wait_ns == 0) {
      r.median_step.idle_ns = d->median_span_ns;
    }
    r.median_step.bottleneck = Bottleneck(r.median_step);
    r.all_steps.bottleneck = Bottleneck(r.all_steps);
    d->median_host_wait_ns += r.median_step.host_wait_ns;
    d->total_host_wait_ns += r.all_steps.host_wait_ns;
    d->rows.push_back(r);
  }
  if (!d->rows.empty()) {
    d->median_host_wait_ns /= static_cast<int64_t>(d->rows.size());
    d->total_host_wait_ns /= static_cast<int64_t>(d->rows.size());
  }
  return absl::OkStatus();
}

}  // namespace

ShardingRow TensorColumns(const store::QueryResult& q, size_t i) {
  ShardingRow r;
  r.tensor_id = q.Int(i, "tensor_id");
  r.name = q.Text(i, "name");
  r.dtype = q.Text(i, "dtype");
  r.shape = q.Text(i, "shape");
  r.sharding = ShortSharding(q.Text(i, "sharding"));
  r.source = q.Text(i, "sharding_source");
  r.source_file = q.Text(i, "source_file");
  r.source_line = static_cast<int>(q.Int(i, "source_line"));
  return r;
}

namespace {

absl::Status Fill(const store::Reader& rd, const std::string& run, std::vector<ShardingRow>* out) {
  auto spans = store::PlacementSpansSql(rd);
  if (!spans.ok()) return spans.status();
  auto q = rd.Query(
      absl::StrCat("SELECT t.tensor_id, t.name, t.dtype, t.shape, t.sharding, t.sharding_source,"
                   " t.source_file, t.source_line,"
                   " coalesce(sum(p.last_device - p.first_device + 1), 0) AS devices,"
                   " min(p.bytes) AS min_bytes, max(p.bytes) AS max_bytes"
                   " FROM tensors t LEFT JOIN ", *spans, " p"
                   "   ON p.run_id = t.run_id AND p.tensor_id = t.tensor_id"
                   // A damaged span (backwards, or chips the run lacks) is left out, as the Sharding view does.
                   "   AND p.first_device >= 0 AND p.last_device >= p.first_device"
                   "   AND p.last_device < (SELECT num_devices FROM runs WHERE run_id = ?1)"
                   " WHERE t.run_id = ?1 GROUP BY t.tensor_id ORDER BY t.step, t.tensor_id"),
      {run});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    ShardingRow r = TensorColumns(*q, i);
    r.devices = q->Int(i, "devices");
    r.min_bytes = q->Int(i, "min_bytes");
    r.max_bytes = q->Int(i, "max_bytes");
    out->push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status Fill(const store::Reader& rd, int64_t run_id, KernelStats* k) {
  auto has = rd.Query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'view' AND name = 'kernel_stats'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") == 0) {
    k->empty_reason = "this file predates per-op statistics (no kernel_stats view)";
    return absl::OkStatus();
  }
  auto lanes = HasChipLanes(rd, run_id, "device");
  if (!lanes.ok()) return lanes.status();
  if (!*lanes) {
    k->empty_reason = "no per-op statistics in this run (no chip has device-clock slices)";
    return absl::OkStatus();
  }
  std::string run = absl::StrCat(run_id);
  // kernel_stats' rows of this run, measured ones only, with the run's filter
  // inside: the view's left join reads every run's slices first, so a damaged
  // chunk of another run failed this one's report.
  auto q = rd.Query(
      "WITH m AS (SELECT s.graph_id AS graph_id, s.op_id AS op_id, count(*) AS count, sum(s.dur_ns) AS total_ns"
      " FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " WHERE s.run_id = ?1 AND t.run_id = ?1 AND t.clock = 'device' AND s.graph_id IS NOT NULL"
      " AND s.op_id IS NOT NULL AND s.depth = 0 GROUP BY s.graph_id, s.op_id),"
      " p AS (SELECT max(peak_flops) AS peak_flops FROM devices WHERE run_id = ?1)"
      " SELECT o.graph_id, o.op_id, o.name, o.opcode, o.shape, o.roofline, o.scope, o.source_file, o.source_line,"
      " m.count, m.total_ns, m.total_ns * 1.0 / m.count AS mean_ns, o.modeled_ns, o.flops,"
      " CASE WHEN m.total_ns > 0 THEN o.flops * m.count * 1e9 / m.total_ns END AS achieved_flops,"
      " CASE WHEN m.total_ns > 0 AND p.peak_flops > 0 THEN o.flops * m.count * 1e9 / m.total_ns / p.peak_flops END"
      " AS fraction_of_peak, p.peak_flops"
      " FROM ops o JOIN m ON m.graph_id = o.graph_id AND m.op_id = o.op_id, p WHERE o.run_id = ?1"
      " ORDER BY m.total_ns DESC, o.graph_id, o.op_id LIMIT ?2",
      {run, absl::StrCat(kTopKernels)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) k->empty_reason = "no per-op statistics in this run (ops without device-clock slices)";
  for (size_t i = 0; i < q->rows.size(); ++i) {
    KernelRow r;
    r.graph_id = q->Int(i, "graph_id");
    r.op_id = q->Int(i, "op_id");
    r.name = q->Text(i, "name");
    r.opcode = q->Text(i, "opcode");
    r.shape = q->Text(i, "shape");
    r.roofline = q->Text(i, "roofline");
    r.scope = q->Text(i, "scope");
    r.source_file = q->Text(i, "source_file");
    r.source_line = static_cast<int>(q->Int(i, "source_line"));
    r.count = q->Int(i, "count");
    r.total_ns = q->Int(i, "total_ns");
    r.mean_ns = static_cast<int64_t>(q->Real(i, "mean_ns"));
    r.modeled_ns = q->Int(i, "modeled_ns");
    r.flops = q->Real(i, "flops");
    r.achieved_flops = q->Real(i, "achieved_flops");
    r.fraction_of_peak = q->Real(i, "fraction_of_peak");
    k->peak_flops = q->Real(i, "peak_flops");
    k->top.push_back(std::move(r));
  }
  auto err = ScoreRunCostModel(rd, run_id);
  if (!err.ok()) return err.status();
  k->cost_error = *err;
  return absl::OkStatus();
}

absl::Status Context(absl::Status st, const store::Reader& rd, const char* what) {
  if (st.ok() || absl::IsNotFound(st)) return st;
  return absl::Status(st.code(),
                      absl::StrCat(rd.path(), ": reading ", what, ": ", st.message()));
}

}  // namespace

absl::Status ReadRematerializations(const store::Reader& rd, int64_t run_id, std::vector<RematRow>* out) {
  auto has = rd.Query("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'rematerializations'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") == 0) return absl::OkStatus();
  auto r = rd.Query("SELECT graph_id, value, op, bytes, source_file, source_line FROM rematerializations"
                    " WHERE run_id = ?1 ORDER BY graph_id, seq",
                    {std::to_string(run_id)});
  if (!r.ok()) return r.status();
  for (size_t i = 0; i < r->rows.size(); ++i)
    out->push_back({r->Int(i, "graph_id"), r->Text(i, "value"), r->Text(i, "op"), r->Text(i, "source_file"),
                    static_cast<int>(r->Int(i, "source_line")), r->Int(i, "bytes")});
  return absl::OkStatus();
}

absl::Status ReadMemoryPeaks(const store::Reader& rd, int64_t run_id, MemoryStats* out) {
  auto has = rd.HasTable("memory_plans");
  if (!has.ok()) return has.status();
  if (!*has) return absl::OkStatus();
  const std::string id = std::to_string(run_id);
  auto r = rd.Query("SELECT graph_id, peak_bytes, parameter_bytes, arena_bytes, peak_op FROM memory_plans"
                    " WHERE run_id = ?1 ORDER BY peak_bytes DESC, graph_id",
                    {id});
  if (!r.ok()) return r.status();
  out->programs = static_cast<int64_t>(r->rows.size());
  for (size_t i = 0; i < r->rows.size() && i < kTopMemoryPeaks; ++i)
    out->top.push_back({r->Int(i, "graph_id"), r->Int(i, "peak_bytes"), r->Int(i, "parameter_bytes"),
                        r->Int(i, "arena_bytes"), r->Text(i, "peak_op")});
  auto hbm = rd.Query("SELECT coalesce(min(hbm_bytes), 0) AS b FROM devices WHERE run_id = ?1", {id});
  if (!hbm.ok()) return hbm.status();
  out->hbm_bytes = hbm->Int(0, "b");
  return absl::OkStatus();
}

double AutoShardingSummary::RatioToBestHand(std::string* best) const {
  const Candidate* chosen = nullptr;
  const Candidate* hand = nullptr;
  for (const Candidate& c : candidates) {
    if (c.chosen) chosen = &c;
    else if (c.fits && (!hand || c.modeled_ns < hand->modeled_ns)) hand = &c;
  }
  if (!chosen || !hand || hand->modeled_ns <= 0) return 0;
  if (best) *best = hand->strategy;
  return chosen->modeled_ns / hand->modeled_ns;
}

absl::Status ReadAutoSharding(const store::Reader& rd, int64_t run_id, std::vector<AutoShardingSummary>* out) {
  auto has = rd.Query("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'auto_sharding'");
  if (!has.ok()) return has.status();
  if (has->Int(0, "n") == 0) return absl::OkStatus();
  const std::string run = std::to_string(run_id);
  auto s = rd.Query("SELECT * FROM auto_sharding WHERE run_id = ?1 ORDER BY step", {run});
  if (!s.ok()) return s.status();
  for (size_t i = 0; i < s->rows.size(); ++i) {
    AutoShardingSummary a;
    a.step = static_cast<int>(s->Int(i, "step"));
    a.method = s->Text(i, "method");
    a.profile = s->Text(i, "profile");
    a.combinations = s->Real(i, "combinations");
    a.evaluations = s->Int(i, "evaluations");
    a.search_ns = s->Int(i, "search_ns");
    a.memory_budget = s->Int(i, "memory_budget");
    const std::string step = std::to_string(a.step);
    auto c = rd.Query("SELECT * FROM auto_sharding_candidates WHERE run_id = ?1 AND step = ?2"
                      " ORDER BY chosen DESC, modeled_ns",
                      {run, step});
    if (!c.ok()) return c.status();
    for (size_t k = 0; k < c->rows.size(); ++k)
      a.candidates.push_back({c->Text(k, "strategy"), c->Real(k, "modeled_ns"), c->Real(k, "collective_ns"),
                              c->Int(k, "collectives"), c->Int(k, "peak_bytes"), c->Int(k, "rematerializations"),
                              c->Int(k, "fits") != 0, c->Int(k, "chosen") != 0});
    auto g = rd.Query("SELECT * FROM auto_sharding_choices WHERE run_id = ?1 AND step = ?2", {run, step});
    if (!g.ok()) return g.status();
    for (size_t k = 0; k < g->rows.size(); ++k)
      a.choices.push_back({g->Text(k, "group_name"), g->Text(k, "layout"), g->Text(k, "sharding"),
                           g->Int(k, "tensors")});
    out->push_back(std::move(a));
  }
  return absl::OkStatus();
}

std::string RunEndedEarly(const RunHeader& h) {
  if (h.status != "hang detected" && h.status != "failed" && h.status != "interrupted" &&
      h.status != "ended abnormally")
    return "";
  return h.status_detail.empty() ? h.status : h.status_detail;
}

std::string ImportLoss::Text() const {
  return absl::StrCat(name, " (", count, ")", first.empty() ? "" : absl::StrCat(": first ", first));
}

absl::StatusOr<std::string> UnevenSteps(const store::Reader& reader, int64_t run_id) {
  // From the chunks, a step's slices each: not the slices view, which unpacks every slice.
  auto q = reader.Query(
      "SELECT t.host_id AS host, coalesce(h.name, 'host ' || t.host_id) AS name, MIN(c.step) AS first,"
      " MAX(c.step) AS last FROM slice_chunks c JOIN tracks t USING (run_id, track_id)"
      " LEFT JOIN hosts h ON h.run_id = t.run_id AND h.host_id = t.host_id"
      " WHERE c.run_id = ?1 AND c.step >= 0 GROUP BY t.host_id ORDER BY t.host_id",
      {absl::StrCat(run_id)});
  if (!q.ok()) return q.status();
  if (q->rows.size() < 2) return std::string();
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    first = std::min(first, q->Int(i, "first"));
    last = std::max(last, q->Int(i, "last"));
  }
  std::vector<std::string> short_ones;
  for (size_t i = 0; i < q->rows.size(); ++i)
    if (q->Int(i, "first") != first || q->Int(i, "last") != last)
      short_ones.push_back(absl::StrCat(q->Text(i, "name"), " has steps ", q->Int(i, "first"), "-", q->Int(i, "last")));
  if (short_ones.empty()) return std::string();
  return absl::StrCat(JoinFirst(short_ones, 4), " of the run's ", first, "-", last,
                      ": the steps a rank lacks are compared without it");
}

absl::StatusOr<std::vector<ImportLoss>> ReadImportLosses(const store::Reader& reader, int64_t run_id) {
  std::vector<ImportLoss> out;
  auto has = reader.HasTable("import_stats");
  if (!has.ok()) return has.status();
  if (!*has) return out;
  auto q = reader.Query(
      "SELECT name, count, description FROM import_stats WHERE run_id = ?1 AND count > 0 AND severity IN "
      "('data_loss', 'error') ORDER BY severity DESC, name",
      {absl::StrCat(run_id)});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const std::string d = q->Text(i, "description");
    const size_t at = d.rfind("(first: ");
    ImportLoss& l = out.emplace_back();
    l.name = q->Text(i, "name");
    l.count = q->Int(i, "count");
    l.first = at == std::string::npos ? "" : d.substr(at + 8);
    if (!l.first.empty() && l.first.back() == ')') l.first.pop_back();
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadRunFaults(const store::Reader& rd, int64_t run_id) {
  auto q = rd.Query(
      "SELECT f.value AS spec FROM runs r, json_each(r.config_json, '$.faults') f"
      " WHERE r.run_id = ?1 AND json_valid(r.config_json) AND json_type(r.config_json, '$.faults') = 'array'"
      " ORDER BY f.key",
      {absl::StrCat(run_id)});
  if (!q.ok()) return q.status();
  std::vector<std::string> specs;
  for (size_t i = 0; i < q->rows.size(); ++i) specs.push_back(q->Text(i, "spec"));
  return specs;
}

absl::StatusOr<RunHeader> ReadRunHeader(const store::Reader& reader, int64_t run_id) {
  RunHeader h;
  if (auto st = Context(Fill(reader, run_id, &h), reader, "the run"); !st.ok()) return st;
  return h;
}

absl::StatusOr<CompileStats> ReadCompileStats(const store::Reader& reader, int64_t run_id) {
  CompileStats c;
  if (auto st = Context(Fill(reader, absl::StrCat(run_id), &c), reader, "compilations"); !st.ok()) return st;
  return c;
}

absl::StatusOr<RunReport> BuildRunReport(const store::Reader& reader, int64_t run_id) {
  RunReport r;
  std::string run = absl::StrCat(run_id);
  if (auto st = Context(Fill(reader, run_id, &r.run), reader, "the run"); !st.ok()) return st;
  if (auto st = Context(Fill(reader, run, &r.steps), reader, "steps"); !st.ok()) return st;
  if (auto st = Context(Fill(reader, run, &r.compiles), reader, "compilations"); !st.ok()) return st;
  if (r.compiles.recompilations > 0) {
    auto rec = BuildRecompilesReport(reader, run_id);
    if (!rec.ok()) return Context(rec.status(), reader, "recompilation suggestions");
    for (const CallSiteRecompiles& site : rec->sites) {
      if (site.misses < 2) continue;
      const std::string first_line = site.call_site.substr(0, site.call_site.find('\n'));
      for (const Suggestion& sg : site.suggestions) r.compiles.suggestions.push_back({first_line, sg.text, sg.compilations_saved});
    }
  }
  // Past the run and its steps, a section that meets damage (SQLITE_CORRUPT:
  // a damaged chunk of another run's timeline, a damaged page of memory_plans)
  // is left out and named, rather than failing the whole report.
  auto tolerate = [&](absl::Status st, std::string* reason) -> absl::Status {
    if (st.ok() || !absl::IsDataLoss(st)) return st;
    r.unreadable.push_back(std::string(st.message()));
    if (reason) *reason = absl::StrCat("not read: ", st.message());
    return absl::OkStatus();
  };
  if (auto st = tolerate(Context(Fill(reader, run, &r.devices), reader, "device timelines"), &r.devices.empty_reason);
      !st.ok()) {
    return st;
  }
  if (r.run.imported) {
    auto unknown = reader.Query(
        "SELECT COUNT(*) AS n FROM import_stats WHERE run_id = ?1 AND name = 'host_wait_unknown'",
        {absl::StrCat(run_id)});
    r.devices.host_wait_unknown = unknown.ok() && unknown->Int(0, "n") > 0;
  }
  if (absl::StartsWith(r.run.capture_note, "--trace steps")) {
    r.devices.programs_only = true;
    for (DeviceRow& row : r.devices.rows) row.median_step.bottleneck = row.all_steps.bottleneck = "";
  }
  // A capture that left the timeline out says so, not "no step-tagged slices".
  if (r.devices.rows.empty() && absl::StartsWith(r.run.capture_note, "--trace off"))
    r.devices.empty_reason = absl::StrCat("recorded with ", r.run.capture_note);
  if (r.run.simulated)  // docs/simulate.md: no device clock to break down; say so, not zeros
    r.devices.empty_reason =
        "a simulated run has only the modeled clock (no device clock): no measured per-chip breakdown; "
        "`shardscope fleet` breaks each chip's step down on the modeled clock";
  if (auto st = tolerate(Context(Fill(reader, run, &r.sharding), reader, "tensors"), nullptr); !st.ok()) return st;
  if (auto st = tolerate(
          Context(ReadRematerializations(reader, run_id, &r.rematerializations), reader, "rematerializations"), nullptr);
      !st.ok())
    return st;
  if (auto st = tolerate(Context(ReadAutoSharding(reader, run_id, &r.auto_sharding), reader, "auto-sharding"), nullptr);
      !st.ok())
    return st;
  if (auto st = tolerate(Context(Fill(reader, run_id, &r.kernels), reader, "kernel statistics"), &r.kernels.empty_reason);
      !st.ok())
    return st;
  // Without per-op statistics, names by self time on the first clock with
  // slices: a simulated run's modeled clock (an even sample of its chips,
  // which all run the same programs: a pod's thousands would cost minutes)
  // before the host's.
  if (r.kernels.top.empty())
    for (const char* clock : {r.run.simulated ? "modeled" : "device", "host"}) {
      NameTimesOptions options;
      if (std::string(clock) == "modeled") {  // a chip's ops, not nested calls: each its whole time
        options.max_tracks = kModeledLanesSampled;
        options.top_level_only = true;
      }
      auto names = TopNamesBySelfTime(reader, run_id, clock, kTopKernels, options);
      if (auto st = tolerate(Context(names.status(), reader, "time by slice name"), nullptr); !st.ok()) return st;
      if (names.ok() && names->slices > 0) r.kernels.by_name.push_back(*std::move(names));
    }
  if (auto st = tolerate(Context(ReadMemoryPeaks(reader, run_id, &r.memory), reader, "memory plans"), nullptr);
      !st.ok())
    return st;
  auto ex = reader.Query("SELECT count(*) AS n FROM executions WHERE run_id = ?1", {run});
  if (!ex.ok()) return Context(ex.status(), reader, "executions");
  r.executions = ex->Int(0, "n");
  {
    std::map<int, StepPoint> by_step;
    auto host = reader.Query("SELECT step, wall_ns FROM steps WHERE run_id = ?1", {run});
    if (!host.ok()) return Context(host.status(), reader, "steps");
    for (size_t i = 0; i < host->rows.size(); ++i) {
      StepPoint& p = by_step[static_cast<int>(host->Int(i, "step"))];
      p.host_ns = host->Int(i, "wall_ns");
    }
    auto has = reader.HasTable("step_bounds");
    if (has.ok() && *has) {
      auto dev = reader.Query("SELECT step, clock, end_ns - start_ns AS ns FROM step_bounds WHERE run_id = ?1 AND clock = ?2",
                              {run, r.run.simulated ? "modeled" : "device"});
      if (!dev.ok()) return Context(dev.status(), reader, "step bounds");
      for (size_t i = 0; i < dev->rows.size(); ++i) {
        StepPoint& p = by_step[static_cast<int>(dev->Int(i, "step"))];
        (r.run.simulated ? p.modeled_ns : p.device_ns) = dev->Int(i, "ns");
      }
    }
    for (auto& [step, p] : by_step) {
      p.step = step;
      r.series.push_back(p);
    }
  }
  auto verdict = BuildVerdict(reader, r);
  if (!verdict.ok() && absl::IsDataLoss(verdict.status()) && !r.unreadable.empty()) {
    // Its evidence reads the damaged part again: no verdict, said so.
    r.unreadable.push_back(std::string(Context(verdict.status(), reader, "the verdict").message()));
    r.verdict.line = "no verdict: part of the file it needs is damaged (see \"Not read\")";
    return r;
  }
  if (!verdict.ok()) return Context(verdict.status(), reader, "the verdict");
  r.verdict = *std::move(verdict);
  return r;
}

bool StepsDispatchedAhead(const store::Reader& rd, const std::string& run) {
  auto has = rd.HasTable("import_stats");
  if (!has.ok() || !*has) return false;
  auto ahead = rd.Query("SELECT COUNT(*) AS n FROM import_stats WHERE run_id = ?1 AND name = 'steps_run_after_dispatch'",
                        {run});
  return ahead.ok() && ahead->Int(0, "n") > 0;
}

void FillStepStats(const store::QueryResult& q, StepStats* s) {
  *s = StepStats{};
  s->count = static_cast<int64_t>(q.rows.size());
  if (q.rows.empty()) return;
  std::vector<int64_t> walls;
  for (size_t i = 0; i < q.rows.size(); ++i) walls.push_back(q.Int(i, "wall_ns"));
  s->median_wall_ns = Percentile(walls, 0.5);
  s->p90_wall_ns = Percentile(walls, 0.9);
  const size_t last = q.rows.size() - 1;
  const int loss = q.Col("loss");
  s->first_step = static_cast<int>(q.Int(0, "step"));
  s->last_step = static_cast<int>(q.Int(last, "step"));
  if (q.rows[0][loss]) s->first_loss = q.Real(0, "loss");
  if (q.rows[last][loss]) s->last_loss = q.Real(last, "loss");
  for (size_t i = 0; i < q.rows.size(); ++i) {
    if (!q.rows[i][loss]) continue;
    double v = 0;
    // Only what parses: a damaged cell is not a diverged run.
    if (absl::SimpleAtod(*q.rows[i][loss], &v) && !std::isfinite(v)) {
      s->loss_not_finite_from = static_cast<int>(q.Int(i, "step"));
      break;
    }
  }
}

}  // namespace shardscope::analysis
