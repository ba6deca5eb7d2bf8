// Builds small shardscope databases for the app's tests at test time (no
// binary files in the repository): the store's schema plus hand-made runs,
// devices, tracks, slices and compilations whose shapes the tests know.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardscope::app::testing {

struct FixtureRun {
  int64_t run_id = 1;
  int num_devices = 4;
  int num_hosts = 2;
  int steps = 6;
  // Extra 1 ns slices, 1 ns apart, on device 0 after the steps: folding food.
  int tiny_slices = 0;
  bool with_compilations = true;
};

// Per step and device: fusion.3 (compute), dot.7 (compute), all-reduce.2
// (collective). Per step and host thread: mark_step (host) with a nested
// trace (host). Device clock starts at 0; host clock at 5 s, so a view that
// mixed the clocks would show a gap of seconds.
inline constexpr int64_t kStepNs = 1'000'000;
inline constexpr int64_t kHostClockStart = 5'000'000'000;
inline constexpr int kSlicesPerDeviceStep = 3;
inline constexpr int kSlicesPerHostStep = 2;
inline constexpr int kCompilationsPerRun = 3;

// Writes `runs` into a new database at `path` (replacing any file there).
absl::Status WriteFixtureDb(const std::string& path, const std::vector<FixtureRun>& runs);

// A fresh path under the test's temporary directory.
std::string TempPath(const std::string& name);

}  // namespace shardscope::app::testing
