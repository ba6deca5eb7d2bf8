// Simulated pods (`shardscope run --simulate`, docs/simulate.md): every chip
// runs the same SPMD program, so a simulated run is stored as each program's
// schedule once (its kernels with their modeled durations, its collectives with
// each group's link-priced duration), each chip's differences (its speed, its
// jitter and seed) and, per program run, each chip's start and each
// collective group's end. From these, any chip's slices are made again on
// demand, exactly as the run placed them (SimChipSlices), by the runtime when
// it simulates and by the store when a window is asked for.
//
// The schedule follows the Scheduler's rules (runtime/scheduler.h): a chip's
// kernels follow one another from its start; a collective starts when the
// last member of its group arrives, lasts the group's duration, and ends
// together for all of them. No values are computed.
//
// This sits in the trace library (absl only) so that the runtime, which
// simulates, and the store, which redraws, share one implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "profiler/trace/records.h"

namespace shardscope::trace {

// One kernel or collective of a program, the same on every chip.
struct SimOp {
  std::string name;          // "dot_general.7", "fusion.40", "all_reduce.12"
  int32_t name_id = 0;       // names.name_id once stored (0: not interned)
  SliceKind kind = SliceKind::kCompute;  // compute, collective or transfer
  int64_t op_id = -1;        // instruction id in the program (-1: a transfer)
  int64_t dur_ns = 0;        // compute/transfer: modeled at full speed; collective: see SimCollective
  int collective = -1;       // index into SimProgram::collectives (ops of the same layout, kind and size share one)
  int coll_seq = -1;         // a collective: its place among the program's collective ops (SimRun::collective_end_ns)
  int64_t bytes = 0;
};

// The traffic one link carried in one group's collective: drawn as a
// "link A-B" slice (kind transfer, depth 1) inside the collective's slice on
// `device`'s lane, from the collective's start.
struct SimLinkUse {
  int a = 0, b = 0;          // a < b
  int device = 0;            // the member whose lane shows it
  int32_t name_id = 0;       // "link A-B" once stored
  int64_t bytes = 0;         // what crossed it
  int64_t busy_ns = 0;       // its transfer time at its (possibly faulted) bandwidth
};

struct SimCollective {
  int group_set = 0;                       // index into SimProgram::group_sets
  std::string algorithm;                   // "ring", "tree", "torus" or "alpha-beta"
  std::vector<int64_t> group_dur_ns;       // per group: from the last arrival to the end
  std::vector<std::vector<SimLinkUse>> group_links;  // per group (empty without a topology)
};

struct SimProgram {
  int64_t graph_id = -1;
  std::vector<SimOp> ops;
  int num_collective_ops = 0;  // ops with a collective (coll_seq 0..n-1)
  int32_t preempted_name_id = 0;  // names.name_id of "waiting for host" once stored
  std::vector<SimCollective> collectives;
  // Distinct replica-group layouts: each a list of groups of chip ids.
  std::vector<std::vector<std::vector<int>>> group_sets;

  // Derived (BuildIndex): per group set, each chip's group (-1: none), and
  // per chip the most link slices it shows in one run (for slice ids).
  std::vector<std::vector<int>> group_of;
  int max_links_per_chip = 0;
  // Per collective and group, its link uses' indices ordered by (device,
  // index): a chip finds its own by binary search. A 4096-chip all-reduce's
  // group holds thousands, and scanning them for every chip was quadratic.
  std::vector<std::vector<std::vector<uint32_t>>> links_by_device;
  // Fills group_of and max_links_per_chip for `num_chips` chips.
  void BuildIndex(int num_chips);
};

// One chip's differences from the program's schedule.
struct SimChip {
  double time_scale = 1;     // its kernels and transfers take this many times as long (slow-chip: 1/S)
  double jitter = 0;         // each kernel takes (1 + u) as long, u uniform in [-jitter, jitter]
  uint64_t seed = 0;         // of u, drawn from (seed, step, chip, kernel index)

  // What `run` can store: a scale above 0 and at most 1000 (a speed of 0.001),
  // a jitter in [0, 1). A stored row outside them is a damaged file.
  bool Valid() const { return time_scale > 0 && time_scale <= 1000 && jitter >= 0 && jitter < 1; }
};

// One program run on every chip.
struct SimRun {
  int64_t seq = 0;           // order of the run in its simulated run (0, 1, ...)
  int step = 0;
  int64_t graph_id = -1;
  std::vector<SimOp> transfers;            // host-to-device copies before it, on every chip
  std::vector<int64_t> start_ns;           // per chip: when its first op starts
  std::vector<int64_t> preempted_ns;       // per chip: a preemption before start_ns (empty: none)
  std::vector<std::vector<int64_t>> collective_end_ns;  // [coll_seq][group]
  std::vector<int64_t> end_ns;             // per chip: when its last op ends
};

// u in [-1, 1], from (seed, step, chip, kernel index): the same arguments give the same draw.
double SimJitterDraw(uint64_t seed, int step, int chip, int kernel);
// A compute or transfer op's duration on `chip` at `step` (k: its index in the run).
int64_t SimOpDuration(const SimOp& op, const SimChip& chip, int step, int chip_id, int k);

// Places one program run on every chip: from run->start_ns (one per chip),
// fills run->collective_end_ns and run->end_ns. Error when the sizes disagree.
absl::Status SimSchedule(const SimProgram& program, const std::vector<SimChip>& chips, SimRun* run);

// Ids of the slices made for a simulated run: unique in the file, the same
// each time they are made. (Recorded runs take ids from trace::NextId, far
// below 2^62.) Bits: 2^62 | run_id (12 bits) | seq * chips + chip (32 bits) |
// slot (17 bits); a flow: 2^62 | run_id | seq (24 bits) | collective (12) | group (13).
int64_t SimSliceId(int64_t run_id, const SimProgram& program, const SimRun& run, int chip, int slot);
int64_t SimFlowId(int64_t run_id, const SimRun& run, int coll_seq, int group);

// The slices of `chip` in `run`, on track `track_id`, in the order the
// Scheduler emits them: a "waiting for host" wait, transfers, then the program's
// kernels and collectives (each collective with its links inside).
struct SimSlice {
  int64_t slice_id = 0, start_ns = 0, dur_ns = 0, parent_id = -1, op_id = -1, flow_id = -1, bytes = 0;
  int64_t arrival_ns = -1;
  int32_t name_id = 0;
  const std::string* name = nullptr;  // points into the program or run
  SliceKind kind = SliceKind::kCompute;
  int16_t depth = 0;
};
void SimChipSlices(int64_t run_id, const SimProgram& program, const SimChip& chip, const SimRun& run, int chip_id,
                   std::vector<SimSlice>* out);

}  // namespace shardscope::trace
