// The fleet diagnosis's step data (fleet.cc): each chip's depth-0 ops per
// step, the collectives' instances and links, and what works on them — the
// what-if's re-schedule of a step, leave-one-out medians, and the per-chip,
// per-step breakdown. Internal to profiler/analysis; fleet.h is the API.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/analysis/fleet.h"

namespace shardscope::analysis::fleet_internal {

enum Kind : uint8_t { kCompute, kCollective, kTransfer, kHost, kCompile, kHostWait, kOther };

Kind KindOf(const std::string& k);

// A depth-0 op of one chip, as the analysis keeps it (a pod of 4096 chips
// holds millions, each read by several passes: names are interned ids, not
// strings, and the fields packed into 56 bytes).
struct Op {
  int64_t id = 0;
  int64_t start = 0, dur = 0, flow = -1, arrival = -1;
  int32_t name = -1;  // Names id
  int32_t graph = -1, op_id = -1;
  Kind kind = kCompute;
};
static_assert(sizeof(Op) == 56);

// Interned slice names: a kernel is compared with the same kernel on other
// chips by name, so each distinct name gets one id.
class Names {
 public:
  int32_t Id(const std::string& name) {
    auto [it, added] = ids_.try_emplace(name, static_cast<int32_t>(text_.size()));
    if (added) text_.push_back(name);
    return it->second;
  }
  // A simulated run hands out one stable string per stored name: keyed by its
  // address first. Stable within one walk of the run only: the next walk's
  // strings may sit where other names were (a link's name read as a kernel's,
  // which made a what-if that fixed links fix none, by the process's memory
  // layout), so each walk starts with ForgetAddresses.
  void ForgetAddresses() { by_address_.clear(); }
  int32_t Id(const std::string* name) {
    auto it = by_address_.find(name);
    if (it != by_address_.end()) return it->second;
    const int32_t id = Id(*name);
    by_address_.emplace(name, id);
    return id;
  }
  const std::string& Text(int32_t id) const { return text_[static_cast<size_t>(id)]; }
  size_t size() const { return text_.size(); }

 private:
  absl::flat_hash_map<std::string, int32_t> ids_;
  absl::flat_hash_map<const std::string*, int32_t> by_address_;
  std::vector<std::string> text_;
};

// A collective of one group in one step: its members' arrivals.
struct Instance {
  int step = 0;
  int64_t flow = 0;
  struct Member {
    int device;
    int64_t arrival, start, dur;
  };
  std::vector<Member> members;
  int64_t proper_ns = 0;  // the collective itself: the shortest member's time after the last arrival
};

// One link slice inside a collective.
struct LinkUse {
  int32_t link = -1;  // Names id of "A-B"
  int64_t flow = 0;
  int64_t bytes = 0, dur = 0;
};

struct StepData {
  int step = 0;
  std::map<int, std::vector<Op>> ops;  // device -> depth-0 ops by start
  std::vector<LinkUse> links;
  // Collectives (flows) whose algorithm uses its links in phases one after
  // another (a simulated tree or torus), not all at once (a ring, or the
  // device clock's in-memory rule): a link's peers in its phase are the
  // links that play its part (PeerGroups), not every link of the collective.
  std::set<int64_t> phased_flows;
};

double Median(std::vector<double> v);

// Median(v without v[j]) for every j, in O(n) (a pod of thousands of chips
// compares each chip with all its peers, kernel by kernel): only the values
// next to the middle rank matter.
std::vector<double> LeaveOneOutMedians(const std::vector<double>& v);

// What a what-if changes: per device a factor on its kernels and transfers
// (`scale`) and one on its recorded host waits (`wait_scale`), per collective
// (flow) a new duration. A host's pause is taken out of its waits, not spread
// over its kernels: scaled together, a pause at the step's start shrank by
// only part and the kernels after it by the rest, so the chip still came late
// to the first collectives and early (to wait) at the last.
struct Change {
  std::map<int, double> scale;
  std::map<int, double> wait_scale;
  std::map<int64_t, int64_t> collective_ns;
  // Links (Names ids) run at their peers' rate: made into collective_ns per
  // step, from that step's links (fleet_links.h FixLinks), before Replay.
  std::set<int32_t> fixed_links;
  bool empty() const {
    return scale.empty() && wait_scale.empty() && collective_ns.empty() && fixed_links.empty();
  }
};

// A step laid out for re-scheduling: chips as dense indices and each op's
// collective resolved once, as the what-if re-schedules every step once per
// suspect (on a pod of thousands of chips, map lookups per op and a scan of
// every chip per collective took minutes).
struct ReplayStep {
  struct ROp {
    int64_t dur = 0;
    int32_t sync = -1;  // the collective instance it waits at, -1: none
    bool collective = false;
    bool host_wait = false;  // scaled by Change::wait_scale, not Change::scale
  };
  // The ops before each of a chip's collective waits (and after the last)
  // summed: an unscaled chip (all of them but a what-if's few) moves from
  // wait to wait in one add, which gives what adding its ops one by one gives
  // whenever no rounding happens on the way (Replay checks; ns < 0: a
  // negative duration inside, go op by op).
  struct Segment {
    int64_t ns = 0;
    int32_t end = 0;    // the index of the op that ends it: a wait, or ops.size()
    int32_t sync = -1;  // that wait's instance (ops[end].sync), -1 for the last: read here, not from ops
  };
  std::vector<int> devices;  // dense index -> device id, ascending
  std::vector<int64_t> first_start;
  std::vector<std::vector<ROp>> ops;
  std::vector<std::vector<Segment>> segments;  // per chip, in order
  std::vector<int64_t> flows, proper;         // per instance
  std::vector<std::vector<int32_t>> members;  // per instance: its chips' dense indices
  std::vector<int32_t> need;                  // per instance: members recorded (a missing one never arrives)
};

ReplayStep IndexStep(const StepData& s, const std::map<int64_t, Instance*>& instances);

// The step's time re-scheduled with `change`: each chip's ops back to back
// from its recorded first start, a collective starting when its last member
// arrives. -1 when the chips' collectives do not line up (overlapping streams
// of an imported trace). Each chip runs until it reaches a collective; the
// last member to reach one places it and moves its members on.
int64_t Replay(const ReplayStep& s, const Change& change);

// Median of `sorted` without the values at ranks `removed` (ascending,
// distinct): a host's peers are every chip but its own few.
double MedianWithout(const std::vector<double>& sorted, const std::vector<size_t>& removed);

// Adds a depth-0 op to a chip's breakdown (FleetChip, or one step's
// FleetChipStep, which also counts other kinds); returns the time it keeps
// the chip busy, a collective's wait for its peers included.
template <typename Row>
double AddToBreakdown(const Op& op, Row& c) {
  double busy = static_cast<double>(op.dur);
  switch (op.kind) {
    case kCompute: c.compute_ns += op.dur; break;
    case kCollective:
      c.collective_ns += op.dur;
      if (op.arrival >= 0 && op.start > op.arrival) {
        c.wait_ns += op.start - op.arrival;
        busy += static_cast<double>(op.start - op.arrival);
      }
      break;
    case kTransfer: c.transfer_ns += op.dur; break;
    case kHostWait: c.host_wait_ns += op.dur; break;
    default:
      if constexpr (requires { c.other_ns; }) c.other_ns += op.dur;
      break;
  }
  return busy;
}

// One step's per-chip breakdown, as the report's per-chip rows count it
// (FleetOptions::per_step): the Fleet view's heatmap and bars. Its span over
// every chip in *span_ns, each chip that ran something in *chips.
void StepRow(const StepData& s, const std::map<int64_t, Instance*>& by_flow,
             const absl::flat_hash_map<std::pair<int32_t, int32_t>, double>& flops_of, double* span_ns,
             std::map<int, FleetChipStep>* chips);

}  // namespace shardscope::analysis::fleet_internal
