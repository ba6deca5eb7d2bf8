// Test helper: writes a small, fully known run through store::Writer, so store,
// analysis and CLI tests can check exact numbers. 4 chips on 2 hosts, mesh 2x2,
// 5 steps; per step every chip computes (chip d takes 1.0 + 0.1*d ms), then all
// join one all-reduce (flow id 1000 + step, 0.5 ms) that starts when the slowest
// chip is done. Step 0 compiles (first_compile), step 3 recompiles
// (input_shape_changed); the other steps hit the memory cache.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "store/writer.h"

namespace shardscope::testing {

inline constexpr int kDevices = 4;
inline constexpr int kSteps = 5;
inline constexpr int64_t kMs = 1000000;
inline constexpr int64_t kCollectiveNs = kMs / 2;
inline constexpr int64_t kStepPeriodNs = 5 * kMs;
// Device d's compute time per step, in ns.
inline int64_t ComputeNs(int d) { return kMs + d * (kMs / 10); }

// Writes the run (BeginRun .. EndRun) and returns its id, or the writer's error.
absl::StatusOr<int64_t> WriteSyntheticRun(store::Writer& w);

// A fresh path under the test temp dir, with any old db/-wal/-shm removed.
std::string TempDbPath(const std::string& name);

}  // namespace shardscope::testing
