// `shardscope calibrate` (see calibrate.h).
#include "ui/cli/calibrate.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/quantile.h"
#include "runtime/cpu_calibration.h"
#include "store/sim_calibration.h"

namespace shardscope::cli {

const char kCalibrateHelp[] =
    "usage: shardscope calibrate [--show] [--fresh]\n"
    "\n"
    "Measures the `cpu` chip profile of the modeled clock on this machine (three\n"
    "passes of about 7 s of CPU, each figure their median): GEMM FLOP/s on one\n"
    "core and on a gang of every core, stream bandwidth and per-kernel overhead;\n"
    "then the op classes those misprice: convolutions, a cold-operand stream,\n"
    "reduce_window per window read, transcendentals, a fused loop's strided\n"
    "broadcast and its arithmetic per op, skinny GEMMs (few rows, and a weight\n"
    "gradient's small contraction), small kernels, reduces, and kernels beside a\n"
    "busy core; the executor's collectives at four amounts of traffic; and the\n"
    "spread of 8 chips' times when they share the cores (each collective waits\n"
    "for the slowest). All through the runtime's own kernels and executor, timed\n"
    "as the device clock is (none fitted to the samples). Each pass is bracketed\n"
    "by a speed probe (a GEMM, a stream, exp and a reduce, 0.1-0.3 s): this\n"
    "VM switches between speeds every few seconds to minutes. The three passes\n"
    "join up to six of this machine's earlier passes (within a day) measured\n"
    "at the same speed, and each figure is the median of them all, so one\n"
    "calibration in a noisy minute moves the profile by a share, not outright.\n"
    "The entry keeps the newest 30 passes of every speed; a run probes the\n"
    "speed first and uses the passes measured at it (measuring the ones missing\n"
    "when fewer than three were). They rewrite this machine's cache entry\n"
    "($XDG_CACHE_HOME/shardscope, else ~/.cache/shardscope; keyed by CPU model,\n"
    "cores, host name, boot id and GEMM backend), which every later run with\n"
    "--profile cpu reads; a machine without an entry measures at its first run.\n"
    "Each run records the values it used in runs.config_json 'profile_values'.\n"
    "\n"
    "  --show   print the values a run would use now and where they come from\n"
    "           (measuring only when nothing is cached, or no kept pass ran at\n"
    "           the machine's speed now)\n"
    "  --fresh  keep none of the earlier passes: the profile is this calibration's\n"
    "           alone (after the machine changed: another host, another load)\n"
    "\n"
    "$SHARDSCOPE_CPU_PROFILE pins the profile instead: 'fixed' (the values in\n"
    "compiler/cost_model.cc, which the tests use) or a profile file in the cache's\n"
    "JSON format. Unset OPENBLAS_CORETYPE first: it forces slower BLAS kernels\n"
    "(and is part of the cache key). docs/cost_model.md, 'Calibrating cpu'.\n";

int RunCalibrate(const std::vector<std::string>& args) {
  bool show = false, fresh = false;
  for (const std::string& a : args) {
    if (a == "--show" || a == "--fresh") {
      (a == "--show" ? show : fresh) = true;
      continue;
    }
    std::cerr << "error: calibrate: unknown option '" << a << "'\n" << kCalibrateHelp;
    return 2;
  }
  if (!show)
    if (const char* pin = std::getenv("SHARDSCOPE_CPU_PROFILE"); pin && *pin)
      std::cerr << "note: $SHARDSCOPE_CPU_PROFILE=" << pin
                << " pins the profile: runs use it, not the cache this command writes\n";
  if (const char* c = std::getenv("OPENBLAS_CORETYPE"); c && *c)
    std::cerr << "note: OPENBLAS_CORETYPE=" << c << " is set: the GEMM peak measured is that kernel family's\n";
  if (show && fresh) {
    std::cerr << "error: calibrate: --fresh measures, --show does not: give one of them\n";
    return 2;
  }
  auto c = runtime::CurrentCpuCalibration(/*remeasure=*/!show, fresh);
  if (!c.ok()) {
    std::cerr << "error: " << c.status().message() << "\n";
    return 1;
  }
  for (const std::string& row : c->rows) std::printf("%s\n", row.c_str());
  std::printf("%scpu profile: %s\n", c->rows.empty() ? "" : "\n", c->Describe().c_str());
  std::printf("machine: %s\n", c->machine.empty() ? "(not recorded)" : c->machine.c_str());
  return 0;
}

runtime::RecordedOpTimes ToRecordedOpTimes(const analysis::RecordedDeviceTimes& times) {
  runtime::RecordedOpTimes out;
  out.source = absl::StrCat(times.db, " run ", times.run_id);
  std::map<std::string, std::vector<int64_t>> pooled;  // kernels of the same signature, every sample
  for (const analysis::RecordedOp& op : times.ops) {
    // A collective carries the wait for the slowest chip before it: every
    // simulated chip takes each op's median, so all would arrive together.
    out.by_op[{op.fingerprint, op.op_id}] = op.median_ns + (op.collective ? op.median_wait_ns : 0);
    if (op.collective) continue;  // its time depends on its group, which the signature does not name
    auto& v = pooled[runtime::KernelSignature(op.opcode, op.shape, op.flops, op.bytes_read, op.bytes_written)];
    v.insert(v.end(), op.samples_ns.begin(), op.samples_ns.end());
  }
  for (auto& [signature, samples] : pooled) out.by_signature[signature] = analysis::MedianNs(std::move(samples));
  out.transfers = times.transfer_ns;
  return out;
}

// "input x f32[64,784] -> f32[48,784]" of a recompilation's cause, without
// where the input was made and read.
static std::string ChangeOnly(const std::string& detail) { return detail.substr(0, std::min(detail.find(" ("), size_t{160})); }

std::string CalibrationCaveat(const analysis::RecordedDeviceTimes& times, int64_t chips, int64_t batch,
                              const std::string& mesh, const std::string& sharding) {
  std::vector<std::string> why;
  if (!times.faults.empty())
    why.push_back(absl::StrCat("it was recorded with faults injected (", times.faults,
                               "): its device times carry them, and so does this calibration"));
  // The newest run with a device clock may be one the hang detector ended:
  // its steps stop short of the run asked for (its "median of 2 steps" was
  // the only hint).
  if (!times.ended_early.empty())
    why.push_back(absl::StrCat("it did not finish (", times.ended_early, "): its ", times.steps,
                               times.steps == 1 ? " step is" : " steps are", " all it has to time"));
  if (times.timed_after_change)
    why.push_back(absl::StrCat("its inputs changed shape at step ", times.shapes_changed_at, " (",
                               ChangeOnly(times.shapes_change), ") and it kept no step from before: its ",
                               times.steps, times.steps == 1 ? " step runs" : " steps run",
                               " another program than its recorded batch compiles"));
  else if (times.steps_left_out > 0)
    why.push_back(absl::StrCat("its inputs changed shape at step ", times.shapes_changed_at, " (",
                               ChangeOnly(times.shapes_change), "): its step is timed over the ", times.steps,
                               times.steps == 1 ? " step" : " steps", " before, at the batch it was recorded with (",
                               times.steps_left_out, " later ", times.steps_left_out == 1 ? "step" : "steps",
                               " ran another program)"));
  std::vector<std::string> other;
  if (times.chips > 0 && times.chips != chips)
    other.push_back(absl::StrCat(times.chips, " chips against ", chips));
  if (times.batch > 0 && times.batch != batch)
    other.push_back(absl::StrCat("batch ", times.batch, " against ", batch));
  // The same chips laid out another way run other programs: their ops match
  // by signature at best (mesh 4x2 against 8x1 matched no op and read 21.0%).
  if (times.chips == chips && !times.mesh.empty() && !mesh.empty() && times.mesh != mesh)
    other.push_back(absl::StrCat("mesh ", times.mesh, " against ", mesh));
  if (!times.sharding.empty() && !sharding.empty() && times.sharding != sharding)
    other.push_back(absl::StrCat("sharding ", times.sharding, " against ", sharding));
  if (!other.empty())
    why.push_back(absl::StrCat("it is another workload (", absl::StrJoin(other, ", "),
                               "): its errors compare different steps and measure no accuracy"));
  if (why.empty()) return "";
  return absl::StrCat("--calibrate-from ", times.db, " run ", times.run_id, ": ", absl::StrJoin(why, "; "));
}

absl::Status FinishCalibration(const std::string& db, int64_t run_id,
                               const analysis::RecordedDeviceTimes& times,
                               const std::vector<std::pair<int, int64_t>>& calibrated,
                               const std::vector<std::pair<int, int64_t>>& uncalibrated,
                               const runtime::CalibrationCounts& n, bool quiet, const std::string& caveat) {
  auto median = [](const std::vector<std::pair<int, int64_t>>& spans) {
    std::vector<int64_t> ns;
    for (const auto& [step, span] : spans) ns.push_back(span);
    return analysis::QuantileOf(ns, 0.5);
  };
  store::SimCalibrationRow row;
  row.run_id = run_id;
  row.source_db = times.db;
  row.source_run = times.run_id;
  row.kernels_by_op = n.kernels_by_op;
  row.kernels_by_signature = n.kernels_by_signature;
  row.kernels_modeled = n.kernels_modeled;
  row.collectives_recorded = n.collectives_recorded;
  row.collectives_modeled = n.collectives_modeled;
  row.recorded_step_ns = times.step_ns;
  row.recorded_host_wait_ns = times.host_wait_ns;
  row.calibrated_step_ns = median(calibrated);
  row.uncalibrated_step_ns = median(uncalibrated);
  if (!quiet) {
    const int64_t kernels = n.kernels_by_op + n.kernels_by_signature + n.kernels_modeled;
    std::printf("  calibrated from %s run %lld: kernels %lld by program and op, %lld by opcode, shape, FLOPs and "
                "bytes, %lld of %lld from the cost model; collectives %lld recorded, %lld from the cost model; "
                "host-to-device transfers %lld recorded, %lld from the cost model\n",
                times.db.c_str(), static_cast<long long>(times.run_id), static_cast<long long>(n.kernels_by_op),
                static_cast<long long>(n.kernels_by_signature), static_cast<long long>(n.kernels_modeled),
                static_cast<long long>(kernels), static_cast<long long>(n.collectives_recorded),
                static_cast<long long>(n.collectives_modeled), static_cast<long long>(n.transfers_recorded),
                static_cast<long long>(n.transfers_modeled));
  }
  std::printf("  step against the recorded run's device clock (%.3f ms, median of %d steps, host waits of %.3f ms "
              "taken out): modeled calibrated %.3f ms (error %.1f%%), uncalibrated %.3f ms (error %.1f%%)\n",
              row.recorded_step_ns / 1e6, times.steps, row.recorded_host_wait_ns / 1e6, row.calibrated_step_ns / 1e6,
              100 * row.CalibratedError(), row.uncalibrated_step_ns / 1e6, 100 * row.UncalibratedError());
  if (!caveat.empty()) std::printf("  note: %s\n", caveat.c_str());
  return store::WriteSimCalibration(db, row);
}

}  // namespace shardscope::cli
