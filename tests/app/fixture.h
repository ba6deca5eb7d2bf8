// Builds small shardscope databases for the app's tests at test time (no
// binary files in the repository), through the store's own Writer, so they
// have whatever layout and level-of-detail summaries the store keeps: runs,
// devices, tracks, slices, compilations, program launches and counters whose
// shapes the tests know.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardscope::app::testing {

struct FixtureRun {
  int64_t run_id = 1;  // runs are written in order; ids must be 1, 2, ...
  int num_devices = 4;
  int num_hosts = 2;
  int steps = 6;
  // Extra 1 ns slices, 1 ns apart, on device 0 after the steps: folding food.
  int tiny_slices = 0;
  bool with_compilations = true;
  // One program launch per step (executions), at the end of its mark_step.
  bool with_dispatches = true;
  // hbm_bytes_in_use per chip and CreateTensor for the process, per step.
  bool with_counters = false;
  // Each chip also on the modeled clock (track 500 + d), its slices at half
  // the measured durations, from 0.
  bool with_modeled = false;
  // Each chip's arrival at the all-reduce; this chip arrives last.
  bool with_arrivals = true;
  int late_device = 1;
};

// Per step and device: fusion.3 (compute), dot.7 (compute), all-reduce.2
// (collective, one flow per step across the chips). Per step and host thread:
// mark_step (host) with a nested trace (host). Device clock starts at 0; host
// clock at 5 s, so a view that mixed the clocks would show a gap of seconds;
// each step's program is launched on the host at kHostClockStart + step *
// kStepNs + kDispatchAfterNs.
inline constexpr int64_t kStepNs = 1'000'000;
inline constexpr int64_t kHostClockStart = 5'000'000'000;
inline constexpr int64_t kDispatchAfterNs = 400'000;
inline constexpr int kSlicesPerDeviceStep = 3;
inline constexpr int kSlicesPerHostStep = 2;
inline constexpr int kCompilationsPerRun = 3;

// Track ids: chip d is track d + 1; host h's main thread is track 1000 + h.
inline int64_t DeviceTrack(int device) { return device + 1; }
inline int64_t HostTrack(int host) { return 1000 + host; }
inline int64_t ModeledTrack(int device) { return 500 + device; }
// Slice ids: the all-reduce of `step` on chip `device` in run `run_id`.
int64_t AllReduceSliceId(const FixtureRun& run, int step, int device);

// Writes `runs` into a new database at `path` (replacing any file there).
absl::Status WriteFixtureDb(const std::string& path, const std::vector<FixtureRun>& runs);

// A fresh path under the test's temporary directory.
std::string TempPath(const std::string& name);

}  // namespace shardscope::app::testing
