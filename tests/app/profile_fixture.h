// A run for the analysis views' tests (overview, op profile, metrics, memory,
// compare), written through store::Writer as a real run is: 4 chips on 2
// hosts, two compiled programs (step 3 recompiles), per step and chip a
// compute-bound fusion, a dot, a memory-bound add, an all-reduce, a
// host-to-device transfer (no op) and, on chip 0 in step 5, a wait for the
// host; every op with its cost, source line and module path; memory plans
// with the buffers live at the peak; hbm_bytes_in_use per chip; each step's
// loss. Durations jitter by step and chip (deterministically), so noise,
// medians and sums are not all alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardscope::app::testing {

struct ProfileRun {
  int steps = 8;
  int devices = 4;
  // The dot's duration is multiplied by this (a compare's "slower" op).
  double dot_scale = 1.0;
  // A second run's extra op (added in compare) and a dropped one (removed).
  bool with_extra_op = false;
  bool without_add = false;
  bool imported = false;  // an imported trace: no ops, graphs, plans
};

inline constexpr int kProfileRecompileStep = 3;
// Each chip's HBM budget in the fixture.
inline constexpr int64_t kProfileHbm = int64_t{1} << 30;

// Writes one run (run 1) into a new database at `path`; `runs` more calls
// with the same writer are not needed: WriteProfileDb writes each in order.
absl::Status WriteProfileDb(const std::string& path, const std::vector<ProfileRun>& runs);

}  // namespace shardscope::app::testing
