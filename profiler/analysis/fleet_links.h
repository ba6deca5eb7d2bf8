// The fleet diagnosis's links (fleet.cc): each link's time per byte against
// its peers in the same collective, and how much shorter a collective gets
// when some links are fixed (run at their peers' rate), for the what-if.
// Internal to profiler/analysis; fleet.h is the API.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/analysis/fleet_steps.h"

namespace shardscope::analysis::fleet_internal {

// A link's kind (ici, dcn) as a small id, by the link's Names id.
using LinkKindOf = std::function<int32_t(int32_t)>;

struct LinkStats {
  std::vector<double> slowdowns;  // per collective: its time per byte over its peers' median
  int uses = 0;
  std::pair<double, double> moved;  // (bytes, ns) over the steps
  std::set<int> slow_steps;         // steps where it ran slower than its peers: a what-if fixes it there
  bool seen = false;
  void Merge(LinkStats&& o);
};

// Adds step s's links to `stats` (by link Names id).
void AddLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow, const LinkKindOf& kind_of,
              absl::flat_hash_map<int32_t, LinkStats>& stats);

// Step s's collectives with the `fixed` links run at their peers' median
// rate: flow -> its new duration, for those that get shorter.
std::map<int64_t, int64_t> FixLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow,
                                    const LinkKindOf& kind_of, const std::set<int32_t>& fixed);

}  // namespace shardscope::analysis::fleet_internal
