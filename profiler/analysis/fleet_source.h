// The fleet diagnosis's slices, a step at a time (fleet.cc): a simulated
// run's are made from its schedule and handed over step by step, so a pod of
// thousands of chips never holds more than one step of ops; a recorded run's
// are read a track at a time (runs of up to 64 chips) and then handed over in
// step order the same way. Internal to profiler/analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "profiler/analysis/fleet_steps.h"
#include "store/reader.h"

namespace shardscope::analysis::fleet_internal {

struct StepSource {
  int64_t run = 0;
  bool simulated = false;
  std::string clock;  // device | modeled
  bool has_arrival = false;
  // Called now and then: what is being read, and how far (0..1, -1: cannot tell).
  std::function<void(double, const std::string&)> progress;
  // Only the steps it wants (empty: all), and only the chips' ops, no link
  // slices, when `ops_only`: the second and third looks at a simulated pod
  // need no more, and the slices of the rest are not made for them.
  std::function<bool(int)> want_step;
  bool ops_only = false;
};

// Calls `fn` with each step's ops (each chip's depth-0 ops by start) and link
// slices (their flow: the collective they ran in), in ascending step order;
// a recorded run's are all read, whatever `want_step` and `ops_only` say.
// Names are interned in `names`, which outlives the steps. An error of `fn`
// stops the walk and is returned.
absl::Status ForEachStep(const store::Reader& rd, const StepSource& src, Names& names,
                         const std::function<absl::Status(StepData&)>& fn);

}  // namespace shardscope::analysis::fleet_internal
