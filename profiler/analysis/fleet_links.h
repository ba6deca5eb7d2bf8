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
  // Per collective: its time per byte over its peers' median, and the weight
  // of that collective, the time its peers' rate gives its bytes. Its slowdown
  // is their weighted median: a plain median over collectives let a real
  // run's latency-bound all-reduces of a few bytes decide it (a healthy link
  // read 1.15x while its megabytes moved at its peers' rate), and a sum of
  // times one step's stall (4.8x once).
  std::vector<std::pair<float, float>> slowdowns;
  int uses = 0;
  std::pair<double, double> moved;  // (bytes, ns) over the steps
  double dur_sum = 0, expected_sum = 0;  // its ns, and its peers' rate x its bytes, where it had peers
  std::map<int, double> by_step;         // step -> that step's weighted median slowdown
  std::set<int> slow_steps;  // steps where it ran slower than its peers: a what-if fixes it there
  bool seen = false;
  void Merge(LinkStats&& o);
};

// One collective's links, laid out for comparing and fixing them.
struct FlowLinks {
  int64_t flow = 0;
  int64_t dur = 0;  // the collective itself (Instance::proper_ns)
  std::vector<const LinkUse*> ls;
  std::vector<std::vector<size_t>> peers;  // PeerGroups
  // What bounds the collective: its links all at once (a ring, the device
  // clock's in-memory rule), one set; in phases one after another (a tree's
  // rounds, a torus's dimensions), each peer group, whose phase lasts as long
  // as its longest link. Bounded by all its links at once, a torus's slow
  // y link was said to save nothing behind the x links' longer phase, while
  // it had added 9 us to a 187 us step.
  std::vector<std::vector<size_t>> bounds;
  std::vector<double> peer_rate;  // each link's peers' median time per byte; 0: no peers
};

// Step s's collectives' links, each link with its peers' rate and what
// bounds its collective.
std::vector<FlowLinks> StepLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow,
                                 const LinkKindOf& kind_of);

// Adds step s's links to `stats` (by link Names id).
void AddLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow, const LinkKindOf& kind_of,
              absl::flat_hash_map<int32_t, LinkStats>& stats);

// A step's collectives (StepLinks, made once for every what-if of the step)
// with the `fixed` links run at their peers' median rate: flow -> its new
// duration, for those that get shorter.
// The weighted median of (value, weight) pairs: the value where half the
// weight lies below. Reorders `v`; 1 when it is empty or weighs nothing.
double WeightedMedianOf(std::vector<std::pair<float, float>>& v);

std::map<int64_t, int64_t> FixLinks(const std::vector<FlowLinks>& flows, const std::set<int32_t>& fixed);

}  // namespace shardscope::analysis::fleet_internal
