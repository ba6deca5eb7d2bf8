// The executor's collectives on this machine (docs/cost_model.md,
// "Calibrating cpu"). A group's collective is one thread's pass over its
// members' buffers (runtime/collectives.cc), whose traffic the cost model
// counts as InMemoryCollectiveBytes. That count assumes every byte goes to
// memory, but the pass keeps its accumulator in the caches, and how much it
// gains depends on how much fits: priced at the cold stream, the samples'
// all-reduces came out 1.4-2.1x their device time. So each kind is timed
// through RunCollective at a few amounts of traffic (compiler::
// kCollectiveTraffic), operands and results out of cache as when the chips'
// kernels have run in between, on the thread's CPU clock as the device clock
// times a collective.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/cost_model.h"

namespace shardscope::runtime {

struct CollectivePlan {
  bool measure = true;
  int members = 8;                           // a group as the 8-chip meshes have
  int points = compiler::kCollectivePoints;  // the first `points` amounts of traffic (tests: fewer)
  int64_t cold_bytes = int64_t{96} << 20;    // buffer copies rotate over at least this much
  int rounds = 7;                            // timed calls of each kind at each point (median)
};

// ns per kind and point (all 0 when not measured); appends the table (as
// `shardscope calibrate` prints it) to `rows`.
compiler::CollectiveTimes MeasureCollectives(const CollectivePlan& plan, std::vector<std::string>* rows);

}  // namespace shardscope::runtime
