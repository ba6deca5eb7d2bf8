// Fleet diagnosis of a run whose collectives ran on host threads only: a
// CPU-only PyTorch job on gloo, imported rank by rank (docs/fleet.md). There
// are no kernels on a device clock to compare, so ranks (hosts) are compared
// by what the host clock shows of each collective:
//  - arrival: which rank called it last, and by how much (HTA's ranking);
//  - the time from the group's last release (the end of the latest collective
//    every rank had left) to each rank's arrival: its own work in between,
//    against its peers' for the same collective (weighted median of the
//    ratios): how much slower than its peers it is;
//  - a what-if: had it arrived with its peers, each collective it was last at
//    would have started that much sooner.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "profiler/analysis/fleet.h"
#include "store/reader.h"

namespace shardscope::analysis::internal {

// Fills `r` (its run, sample and threshold already set) from run `run_id`'s
// host-clock collectives. False (and `r` untouched) when no collective there
// was matched across two or more ranks.
absl::StatusOr<bool> AnalyzeHostCollectives(const store::Reader& reader, int64_t run_id, const FleetOptions& options,
                                            FleetReport* r);

// The run's median step wall time (host clock), over its steps with one; 0 when none.
absl::StatusOr<double> MedianStepWallNs(const store::Reader& reader, int64_t run_id);

}  // namespace shardscope::analysis::internal
