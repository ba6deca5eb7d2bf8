// Injected faults (`--fault`), applied to real runs on virtual chips through
// the device clock: the Scheduler composes each chip's time from measured
// durations, and a fault changes what it is given, never what was measured
// elsewhere (the host clock and the modeled clock are untouched):
//   slow-chip:C:S     chip C at S of its speed (0.001 <= S < 1): its kernels and
//                     transfers take 1/S as long, so it reaches every
//                     collective late
//   link:A-B:F        link A-B (A < B, a link of --topology) at F of its
//                     bandwidth: the collectives whose traffic crosses it last
//                     longer by as much as that link holds them up
//   jitter:J          every kernel of every chip takes (1 + u) as long, u drawn
//                     uniformly from [-J, J], seeded by the run's seed
//   fail-chip:C@N     chip C stops at step N: the run ends with a hang error
//                     naming the chip, the step and the collective that never
//                     completed (what was recorded before stays)
//   host-preempt:H@N  host H's chips are taken away at step N and come back
//                     after 200 ms (or host-preempt:H@N:MS): they start that
//                     step late, a "waiting for host" wait on their lanes
//                     (named as any host wait: the trace does not tell the fault)
// Several faults combine (two slow chips multiply nothing: each is its own).
// The specs are recorded in runs.config_json under "faults" and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/interconnect.h"
#include "runtime/scheduler.h"

namespace shardscope::runtime {

struct Fault {
  enum Kind { kSlowChip, kLink, kJitter, kFailChip, kHostPreempt };
  Kind kind = kSlowChip;
  std::string spec;      // canonical: whole numbers without leading zeros, fractions as given
  int chip = -1;         // slow-chip, fail-chip
  int a = -1, b = -1;    // link
  int host = -1;         // host-preempt
  int step = -1;         // fail-chip, host-preempt
  double factor = 1;     // slow-chip: speed; link: bandwidth share; jitter: amplitude
  int64_t pause_ns = 0;  // host-preempt
};

// The form of one spec; errors name the part that is wrong.
absl::StatusOr<Fault> ParseFault(const std::string& spec);

// A parsed fault checked against the run: chips and hosts in range, a link
// that exists in `interconnect` (null: the run has no --topology, so no links).
absl::Status CheckFault(const Fault& f, int num_chips, int num_hosts, const Interconnect* interconnect);

// A fail-chip or host-preempt at a step the run never reaches (steps 0 to
// end_step - 1; `end_flag` says where that end comes from, e.g. "--steps 2")
// would never happen: refused rather than ignored.
absl::Status CheckFaultStep(const Fault& f, int end_step, const std::string& end_flag);

// The faults of one run together: two that set the same thing (a chip's speed,
// a link's bandwidth, the jitter, when a chip fails, a host's pause at a step)
// are refused, naming both.
absl::Status CheckFaultSet(const std::vector<Fault>& faults);

// The faults of one run, and what they do to a program run's timing.
class FaultPlan {
 public:
  FaultPlan() = default;
  FaultPlan(std::vector<Fault> faults, uint64_t seed) : faults_(std::move(faults)), seed_(seed) {}
  bool empty() const { return faults_.empty(); }
  const std::vector<Fault>& faults() const { return faults_; }
  uint64_t seed() const { return seed_; }

  // The chips that fail at or before `step`: those of the earliest such step
  // (several when they fail at the same step), in chip order; empty if none.
  std::vector<Fault> FailuresBy(int step) const;
  // Slow chips, jitter and preempted hosts: scales the chips' kernel and
  // transfer durations and delays the start of preempted hosts' chips.
  // `host_of[d]` is chip d's host.
  void Apply(ScheduleInput* in, const std::vector<int>& host_of) const;
  // The bandwidth share of link index `link` of `ic` (1 when healthy).
  double LinkFactor(const Interconnect& ic, int link) const;

 private:
  std::vector<Fault> faults_;
  uint64_t seed_ = 0;
};

// With a topology: what each collective's traffic does to the links. Every
// group is modeled as a ring in member order (all-reduce, all-gather and
// reduce-scatter run that way; other collectives are approximated by it),
// each hop routed over the topology. The measured duration D of a group is
// the time of its busiest link at full speed; a link carrying k of the ring's
// hops is busy D * k / kmax, divided by its fault's bandwidth share, and the
// group lasts as long as its slowest link. Adds one LinkTransfer per link to
// each group (recorded as "link A-B" slices inside the collective).
void AddLinkTraffic(ScheduleInput* in, const Interconnect& ic, const FaultPlan& faults);

}  // namespace shardscope::runtime
