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
// three passes join the (up to six) newest of the entry's earlier ones, within
// a day, and each figure is the median of them all; `--fresh` drops the old.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "runtime/cpu_collective_benchmark.h"
#include "runtime/cpu_op_benchmarks.h"
#include "runtime/cpu_spread_benchmark.h"

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
  // The passes whose median the figures are, oldest first (each with its
  // figures and measured_at_unix_s only); empty for fixed values and for
  // files written before passes were kept.
  std::vector<CpuCalibration> passes;
  int earlier_passes = 0;  // of `passes`, how many came from earlier calibrations (when measured)

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
  // Passes kept across calibrations of one machine (its cache entry), the
  // newest; the profile is the median of all kept. 0 or `passes`: this
  // calibration's only (`shardscope calibrate --fresh`).
  int history = 9;
  int64_t history_max_age_s = 24 * 3600;  // older passes are dropped
};

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

// A profile by name: `cpu` through CurrentCpuCalibration, the others built in.
absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name);
// The same, with a JSON object saying where its values came from (a run's
// config_json records it under "profile_values").
absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name, std::string* provenance_json);

}  // namespace shardscope::runtime
