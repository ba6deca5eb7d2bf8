// Per-op device times of a recorded run (see sim_calibration.h).
#include "profiler/analysis/sim_calibration.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/quantile.h"
#include "profiler/analysis/run_report.h"
#include "store/reader.h"
#include "store/run_state.h"

namespace shardscope::analysis {

int64_t MedianNs(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

absl::StatusOr<RecordedDeviceTimes> LoadRecordedDeviceTimes(const std::string& db, std::optional<int64_t> run) {
  auto reader = store::Reader::Open(db, store::Reader::Threads::kOneThread);
  if (!reader.ok()) return reader.status();
  const std::string where = absl::StrCat("--calibrate-from ", db);
  RecordedDeviceTimes out;
  out.db = db;
  if (!run) {
    auto q = reader->Query(
        "SELECT max(run_id) AS id FROM runs WHERE simulated = 0 AND imported = 0 AND instr(clock_kinds, 'device') > 0");
    if (!q.ok()) return q.status();
    if (q->rows.empty() || q->Int(0, "id", -1) < 0) {
      // Say what the file's runs are instead: an imported trace has a device
      // clock too, and "none on the device clock" read as a damaged file.
      auto kinds = reader->Query(
          "SELECT sum(simulated <> 0) AS simulated, sum(imported <> 0 AND simulated = 0) AS imported,"
          " sum(simulated = 0 AND imported = 0 AND instr(clock_kinds, 'device') = 0) AS untimed, count(*) AS n"
          " FROM runs");
      std::vector<std::string> have;
      if (kinds.ok() && !kinds->rows.empty()) {
        if (int64_t k = kinds->Int(0, "imported", 0); k > 0)
          have.push_back(absl::StrCat(k, k == 1 ? " run" : " runs", " imported from another tool (its kernels name no "
                                                                 "program)"));
        if (int64_t k = kinds->Int(0, "simulated", 0); k > 0)
          have.push_back(absl::StrCat(k, k == 1 ? " simulated run" : " simulated runs", " (no device clock)"));
        if (int64_t k = kinds->Int(0, "untimed", 0); k > 0)
          have.push_back(absl::StrCat(k, k == 1 ? " run" : " runs", " recorded without device times (--trace off)"));
      }
      return absl::NotFoundError(absl::StrCat(
          where, ": no run of shardscope's recorded on its virtual chips' device clock",
          have.empty() ? std::string(" (the file has no run)") : absl::StrCat(" (the file has ", absl::StrJoin(have, ", "), ")"),
          "; record one with: shardscope run SAMPLE --db ", db));
    }
    run = q->Int(0, "id");
  }
  out.run_id = *run;
  const std::string id = absl::StrCat(*run);
  auto info = reader->Query(
      "SELECT simulated, imported, clock_kinds, sample, num_devices, mesh,"
      " CASE WHEN json_valid(config_json) THEN json_extract(config_json, '$.batch') END AS batch,"
      " CASE WHEN json_valid(config_json) THEN json_extract(config_json, '$.sharding') END AS sharding,"
      " CASE WHEN json_valid(config_json) THEN json_extract(config_json, '$.profile_values.speed') END AS speed,"
      " CASE WHEN json_valid(config_json) THEN json_extract(config_json, '$.speed_at_end') END AS speed_at_end"
      " FROM runs WHERE run_id = ?1",
      {id});
  if (!info.ok()) return info.status();
  if (info->rows.empty()) return absl::NotFoundError(absl::StrCat(where, " has no run ", id, " (--calibrate-run)"));
  out.sample = info->Text(0, "sample");
  out.chips = info->Int(0, "num_devices", 0);
  out.batch = info->Int(0, "batch", 0);
  out.mesh = info->Text(0, "mesh");
  out.sharding = info->Text(0, "sharding");
  out.speed_json = info->Text(0, "speed");
  out.speed_at_end_json = info->Text(0, "speed_at_end");
  auto faults = ReadRunFaults(*reader, *run);
  if (!faults.ok()) return faults.status();
  out.faults = absl::StrJoin(*faults, ", ");
  if (auto state = store::ReadRunState(*reader, *run); state.ok() && state->EndedEarly())
    out.ended_early = state->Describe();
  if (info->Int(0, "simulated") != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": run ", id, " is simulated: it has no device clock to calibrate from"));
  if (info->Int(0, "imported") != 0)
    return absl::InvalidArgumentError(absl::StrCat(where, ": run ", id,
                                                   " was imported from another tool: its kernels name no program"));

  // The ops of the recorded programs: what each matches by.
  std::map<std::pair<int64_t, int64_t>, size_t> index;  // (graph, op) -> out.ops
  auto ops = reader->Query(
      "SELECT o.graph_id, o.op_id, o.opcode, o.shape, o.flops, o.bytes_read, o.bytes_written, o.roofline,"
      " g.fingerprint FROM ops o JOIN graphs g ON g.run_id = o.run_id AND g.graph_id = o.graph_id"
      " WHERE o.run_id = ?1",
      {id});
  if (!ops.ok()) return ops.status();
  for (size_t r = 0; r < ops->rows.size(); ++r) {
    RecordedOp op;
    op.fingerprint = ops->Text(r, "fingerprint");
    op.op_id = ops->Int(r, "op_id");
    op.collective = ops->Text(r, "roofline") == "collective";
    op.opcode = ops->Text(r, "opcode");
    op.shape = ops->Text(r, "shape");
    op.flops = ops->Real(r, "flops");
    op.bytes_read = ops->Int(r, "bytes_read");
    op.bytes_written = ops->Int(r, "bytes_written");
    index[{ops->Int(r, "graph_id"), op.op_id}] = out.ops.size();
    out.ops.push_back(std::move(op));
  }
  // Runs of each program per step: an op's slices in a step, summed, over them
  // is its time per program run (a while's region ops carry the while's id).
  std::map<std::pair<int64_t, int64_t>, int64_t> runs_of;  // (step, graph) -> executions
  if (absl::Status s = reader->ForEachIntRow(
          "SELECT step, graph_id, count(*) FROM executions WHERE run_id = ?1 GROUP BY step, graph_id", {id}, 0,
          [&](const std::vector<int64_t>& r) { runs_of[{r[0], r[1]}] = r[2]; });
      !s.ok())
    return s;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // (graph, op, step, device)
  std::map<Key, int64_t> sum;
  // A collective's wait: the idle gap on each chip between its previous slice
  // (of the same step) and the collective's, which starts when the last chip arrives.
  std::map<Key, int64_t> gap;
  int64_t device = -1, prev_end = 0, prev_step = -1;
  if (absl::Status s = reader->ForEachIntRow(
          "SELECT t.device_id, s.start_ns, s.dur_ns, coalesce(s.step, -1), coalesce(s.graph_id, -1),"
          " coalesce(s.op_id, -1), s.kind IN ('compute', 'collective'), s.kind = 'collective' FROM slices s"
          " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
          " WHERE s.run_id = ?1 AND t.clock = 'device' AND s.depth = 0 ORDER BY t.device_id, s.start_ns",
          {id}, -1,
          [&](const std::vector<int64_t>& r) {
            const int64_t dev = r[0], start = r[1], dur = r[2], step = r[3], graph = r[4], op = r[5];
            const bool timed = r[6] != 0 && step >= 0 && graph >= 0 && op >= 0;
            if (timed) sum[{graph, op, step, dev}] += dur;
            if (timed && r[7] != 0 && dev == device && prev_step == step)
              gap[{graph, op, step, dev}] += std::max<int64_t>(0, start - prev_end);
            if (dev != device || start + dur > prev_end || prev_step != step) prev_end = start + dur;
            device = dev;
            prev_step = step;
          });
      !s.ok())
    return s;
  if (sum.empty()) {
    // Why: a run that stored no step (it hung, failed or was stopped before
    // one ended) has nothing to time; one whose capture kept no kernels does.
    std::string why = " (was it recorded with --trace steps or off?)";
    if (auto state = store::ReadRunState(*reader, *run); state.ok() && !state->last_step)
      why = absl::StrCat(": it stored no step", state->EndedEarly() || state->status != "finished"
                                                     ? absl::StrCat(" (", state->Describe(), ")")
                                                     : "");
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": run ", id, " has no kernel slices on the device clock", why,
                     "; --calibrate-run N picks another of its runs (shardscope runs ", db, " lists them)"));
  }
  for (const auto& [key, ns] : sum) {
    const auto& [graph, op, step, device] = key;
    auto it = index.find({graph, op});
    if (it == index.end()) continue;  // an op the ops table lacks: nothing to match it by
    auto n = runs_of.find({step, graph});
    out.ops[it->second].samples_ns.push_back(n != runs_of.end() && n->second > 1 ? ns / n->second : ns);
  }
  // Per step and program run: the median chip's wait.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<int64_t>> op_waits;  // (graph, op, step) -> per chip
  for (const auto& [key, ns] : gap) {
    const auto& [graph, op, step, dev] = key;
    auto n = runs_of.find({step, graph});
    op_waits[{graph, op, step}].push_back(n != runs_of.end() && n->second > 1 ? ns / n->second : ns);
  }
  for (auto& [key, per_chip] : op_waits) {
    const auto& [graph, op, step] = key;
    auto it = index.find({graph, op});
    if (it != index.end()) out.ops[it->second].wait_samples_ns.push_back(MedianNs(per_chip));
  }
  std::erase_if(out.ops, [](const RecordedOp& o) { return o.samples_ns.empty(); });
  for (RecordedOp& o : out.ops) {
    o.median_ns = MedianNs(o.samples_ns);
    o.median_wait_ns = MedianNs(o.wait_samples_ns);
  }

  // Host-to-device transfers by name and size (what a simulated run's transfers are named by).
  std::map<int64_t, std::string> transfer_names;
  auto names = reader->Query("SELECT name_id, name FROM names WHERE name LIKE 'transfer %'");
  if (!names.ok()) return names.status();
  for (size_t r = 0; r < names->rows.size(); ++r) transfer_names[names->Int(r, "name_id")] = names->Text(r, "name");
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> transfers;
  if (!transfer_names.empty())
    if (absl::Status s = reader->ForEachIntRow(
            "SELECT s.name_id, coalesce(s.bytes, 0), s.dur_ns FROM slices s"
            " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
            " WHERE s.run_id = ?1 AND t.clock = 'device' AND s.kind = 'transfer' AND s.depth = 0",
            {id}, 0,
            [&](const std::vector<int64_t>& r) {
              auto n = transfer_names.find(r[0]);
              if (n != transfer_names.end()) transfers[{n->second, r[1]}].push_back(r[2]);
            });
        !s.ok())
      return s;
  for (auto& [key, ns] : transfers) out.transfer_ns[key] = MedianNs(std::move(ns));

  // A run whose inputs changed shape part way (the mlp demo's batch at step
  // 10) ran another program from then on: its step is timed over the steps
  // before, at the batch it was recorded with, which is the one a simulated
  // run of that workload runs (mixed, mlp's 20 steps of batch 64 then 48 put
  // the median between the two).
  auto changed = reader->Query(
      "SELECT step, cause_detail FROM compilations WHERE run_id = ?1 AND cause_kind = 'input_shape_changed'"
      " AND step > 0 ORDER BY step LIMIT 1",
      {id});
  if (!changed.ok()) return changed.status();
  if (!changed->rows.empty()) {
    out.shapes_changed_at = static_cast<int>(changed->Int(0, "step"));
    out.shapes_change = changed->Text(0, "cause_detail");
  }
  // The step: each step's span over every chip, less what every chip waited for the host.
  std::vector<int64_t> spans, waits, later_spans, later_waits;
  if (absl::Status s = reader->ForEachIntRow(
          "SELECT max(span_ns), min(host_wait_ns), step FROM step_device_summary WHERE run_id = ?1 GROUP BY step", {id},
          0,
          [&](const std::vector<int64_t>& r) {
            const bool later = out.shapes_changed_at >= 0 && r[2] >= out.shapes_changed_at;
            (later ? later_spans : spans).push_back(r[0] - r[1]);
            (later ? later_waits : waits).push_back(r[1]);
          });
      !s.ok())
    return s;
  out.steps_left_out = static_cast<int>(later_spans.size());
  if (spans.empty() && !later_spans.empty()) {
    // Only later steps were kept (a ring capture): they are all there is.
    spans = std::move(later_spans);
    waits = std::move(later_waits);
    out.steps_left_out = 0;
    out.timed_after_change = true;
  }
  out.steps = static_cast<int>(spans.size());
  out.step_ns = QuantileOf(spans, 0.5);
  out.host_wait_ns = MedianNs(waits);
  return out;
}

}  // namespace shardscope::analysis
