// The `cpu` chip profile measured on the machine itself (docs/cost_model.md,
// "Calibrating cpu"). The same VM runs at 3.3 GHz one day and 4.1 the next, so
// a profile fixed from one day's measurement drifts: the profile is measured
// when first needed, cached per machine, and reused.
//
// Four base parameters, from microbenchmarks through the runtime's own kernel
// entry (EvalInstruction), timed as the executor times the device clock:
//   GEMM FLOP/s on one core and on a gang spanning every core (square f32
//   dot_general), stream bandwidth and per-kernel overhead (an f32 add from
//   1 Ki to 16 Mi elements, fitted as t = overhead + bytes / bandwidth on the
//   relative error); then the op classes those misprice (cpu_op_benchmarks.h:
//   convolutions, cold streams, window ops, transcendentals, strided
//   broadcasts, skinny GEMMs, small kernels, reduces), the executor's
//   collectives (cpu_collective_benchmark.h) and the chips' spread when they
//   share the cores (cpu_spread_benchmark.h). bench/calibrate_cpu_bench
//   prints the same.
//
// Where the values come from, in order:
//   $SHARDSCOPE_CPU_PROFILE=fixed   the built-in values of compiler/cost_model.cc
//                                   (tests pin this: modeled-clock goldens need fixed numbers)
//   $SHARDSCOPE_CPU_PROFILE=PATH    a profile file (the cache's JSON format)
//   the cache                       $XDG_CACHE_HOME/shardscope (else ~/.cache/shardscope)
//                                   /cpu-profile-<key>.json, keyed by MachineKey()
//   a measurement                   three passes, about 20 s of CPU, then written to the cache
// `shardscope calibrate` measures again and rewrites the cache entry: its
// three passes join the entry's earlier ones (up to 30, within a day).
//
// The machine's speed moves (cpu_speed_probe.h): every pass carries a speed
// probe taken just before and just after it, and the profile is the median of
// the passes measured at the speed the machine has now (up to nine, newest
// first). Resolving from the cache probes the speed first (0.1-0.3 s); when
// fewer than three kept passes ran at it, the ones missing are measured now
// and join the entry. `--fresh` drops the old.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "runtime/cpu_collective_benchmark.h"
#include "runtime/cpu_op_benchmarks.h"
#include "runtime/cpu_spread_benchmark.h"
#include "runtime/cpu_speed_probe.h"

namespace shardscope::runtime {

struct CpuCalibration {
  double peak_flops = 0;          // GEMM FLOP/s, one core
  double gang_peak_flops = 0;     // GEMM FLOP/s, a gang spanning every core (0: one core only)
  int gang_width = 1;
  double hbm_bandwidth = 0;       // stream bytes/s, one core
  double kernel_overhead_ns = 0;  // stream fit intercept
  // Op classes the four values above misprice (cpu_op_benchmarks.h); 0: not
  // measured (a fixed profile, or a file written before they were).
  OpClassFigures ops;
  // The executor's collectives, ns per kind and amount of traffic
  // (cpu_collective_benchmark.h); all 0: not measured (format 3 and older).
  compiler::CollectiveTimes collectives{};
  std::string source;             // measured | cache | file | fixed
  std::string path;               // the cache or pinned file ("" for fixed)
  std::string machine;            // MachineKey() where it was measured
  int64_t measured_at_unix_s = 0; // 0 for fixed
  double seconds = 0;             // how long the measurement took
  int format = 0;                 // a file's layout (ReadCpuProfileFile); 0 when not read from one
  std::vector<std::string> rows;  // the microbenchmark table, as printed
  // The passes a cache entry keeps, oldest first (each with its figures,
  // measured_at_unix_s and probes only); empty for fixed values and for files
  // written before passes were kept.
  std::vector<CpuCalibration> passes;
  // Of `passes`, the ones whose median the figures are (indices); empty: all
  // of them (a pinned file, an older entry).
  std::vector<int> used;
  int earlier_passes = 0;  // of `used`, how many came from earlier calibrations (when measured)
  // A pass's: the machine's speed just before and just after it (format 6).
  SpeedProbe probe_before, probe_after;
  // The profile's: the speed the passes were chosen for (probed when the
  // profile was resolved, or a recorded run's), and what that choice did:
  // "9 of 21 kept passes ran at the machine's speed now ..." (empty when
  // no choice was made: fixed, pinned).
  SpeedProbe speed;
  std::string speed_note;

  // A pass's speed: the midpoint of its two probes (in ratio); steady when
  // they are kSameSpeedDistance or less apart (the speed did not move while
  // it ran: its figures are of one speed).
  SpeedProbe Speed() const;
  bool Steady() const;
  // How many passes the figures are the median of.
  int UsedPasses() const { return used.empty() ? static_cast<int>(passes.size()) : static_cast<int>(used.size()); }

  // The `cpu` profile with these values, the rest derived as in
  // compiler/cost_model.cc.
  compiler::ChipProfile Profile() const;
  // {"source", "path", "machine", "measured_at", "peak_flops", ...}: what a run records.
  std::string ProvenanceJson() const;
  // "measured 2026-11-26 11:58 UTC, cached at PATH" and the like.
  std::string Describe() const;
};

// The microbenchmarks' sizes.
struct CalibrationPlan {
  std::vector<int64_t> gemm_sizes = {256, 512, 1024};
  int64_t stream_min = int64_t{1} << 10, stream_max = int64_t{1} << 24;
  OpClassPlan ops;
  CollectivePlan collectives;
  SpreadPlan spread;
  int passes = 3;  // every benchmark this many times, a few seconds apart; each figure their median
  // The profile is the median of up to this many passes measured at the
  // machine's speed now, this calibration's and earlier ones (the cache
  // entry's). 0 or `passes`: this calibration's only (`calibrate --fresh`).
  int history = 9;
  int kept = 30;                          // passes a cache entry keeps, the newest, of any speed
  int64_t history_max_age_s = 24 * 3600;  // older passes are dropped
  // Resolving from the cache: fewer passes than this at the speed now (and
  // not as many as the entry keeps) are measured again.
  int min_at_speed = 3;
  // The speed now (tests give their own); unset: MeasureSpeedProbe.
  std::function<SpeedProbe()> probe;
  // The speed to choose passes for instead of probing (a recorded run's:
  // `run --simulate --calibrate-from`); unset: the speed now.
  SpeedProbe at_speed;
  // Non-empty: a recorded run whose speed moved while it ran, and why: its
  // steps mix the speeds of its start and end (`mixed`), so the passes at
  // either (half of plan.history each), else the newest of any speed.
  std::string any_speed;
  std::vector<SpeedProbe> mixed;
};

// Of `passes`, the steady ones measured within kSameSpeedDistance of
// `speed`, newest first, at most `n` (indices).
std::vector<int> PassesAtSpeed(const std::vector<CpuCalibration>& passes, const SpeedProbe& speed, int n);

// What identifies this machine for the cache: CPU model, core count, host
// name, boot id, the GEMM backend chosen at start-up and $OPENBLAS_CORETYPE
// (a reboot may land the VM on another host; the BLAS kernel family halves or
// doubles the GEMM peak).
std::string MachineKey();
// The cache file for MachineKey().
std::string CpuProfileCachePath();

// Measures the values now (three passes of about 7 s of CPU each on 2 busy
// cores), each figure the median of the passes; no earlier passes.
CpuCalibration MeasureCpu(const CalibrationPlan& plan = {});

// Reads a profile file (the cache's format); errors name the file and the problem.
absl::StatusOr<CpuCalibration> ReadCpuProfileFile(const std::string& path);
absl::Status WriteCpuProfileFile(const std::string& path, const CpuCalibration& c);

// The resolution itself, without the process's memo: `pin` as
// $SHARDSCOPE_CPU_PROFILE ("" none, "fixed", a file), then the cache at
// `cache_path`, then a measurement by `plan` written there. A cache entry that
// cannot be read is measured again and replaced; a pinned file that cannot be
// read is an error naming it. `remeasure` skips the pin and the cache. A
// measurement keeps the readable cache entry's passes of the same machine, as
// `plan.history` says.
absl::StatusOr<CpuCalibration> ResolveCpuCalibration(const std::string& pin, const std::string& cache_path,
                                                     bool remeasure, const CalibrationPlan& plan = {});
// The process's `cpu` calibration (ResolveCpuCalibration from the
// environment), resolved once per process. `remeasure` measures again and
// rewrites the cache; `fresh` keeps none of the cache's earlier passes.
absl::StatusOr<CpuCalibration> CurrentCpuCalibration(bool remeasure = false, bool fresh = false);
// Makes the process's calibration choose its passes for a recorded run's
// speed (`run --simulate --calibrate-from` compares against that run) instead
// of probing the machine's speed now: its probes at its start and its end
// (`at_end` unmeasured: the start's alone). When they are further apart than
// kSameSpeedDistance the run's steps mix two speeds: the passes of every
// speed are used, and the profile says so. Resolved again at the next use.
void ChooseCpuPassesFor(const SpeedProbe& at_start, const SpeedProbe& at_end);
// What that choice sets in `plan` (at_speed, or any_speed and why).
void ChoosePassesFor(const SpeedProbe& at_start, const SpeedProbe& at_end, CalibrationPlan* plan);

// A profile by name: `cpu` through CurrentCpuCalibration, the others built in.
absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name);
// The same, with a JSON object saying where its values came from (a run's
// config_json records it under "profile_values").
absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name, std::string* provenance_json);

}  // namespace shardscope::runtime
