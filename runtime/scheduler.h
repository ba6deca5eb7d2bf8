// The Scheduler lays out what each device did on one clock. It takes, per
// device, the ordered list of measured kernels, transfers and collectives of a
// program run, and places them: a device starts when it is free and the host
// has launched the program; kernels follow one another; a collective starts
// when its slowest participant arrives and ends together for all of them.
// Durations come from the executing thread's CPU time (device clock), so many
// virtual chips time-sharing two cores do not pass waiting for computing.
// The same Scheduler fed modeled durations gives the modeled clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/trace/records.h"

namespace shardscope::runtime {

}  // namespace shardscope::runtime
namespace shardscope::compiler {
struct Instruction;
}  // namespace shardscope::compiler
namespace shardscope::runtime {

struct DeviceOp {
  int64_t op_id = -1;        // instruction id in the program (a while's, for what its regions ran)
  std::string name;          // e.g. "dot_general.7"
  trace::SliceKind kind = trace::SliceKind::kCompute;
  int64_t dur_ns = 0;        // compute/transfer: measured; collective: see CollectiveRun
  int collective = -1;       // index into ScheduleInput::collectives
  int64_t bytes = 0;
  // What ran inside a while's region: that region's instruction (the
  // modeled clock prices it, not the whole loop). Owned by the program.
  const compiler::Instruction* region_op = nullptr;
  // Bytes this chip put on and took off its links: a collective's share under
  // the algorithm the cost model prices (CollectiveLinkBytes), a transfer's
  // bytes from the host (received). Summed into the device clock's counters.
  int64_t sent_bytes = 0, received_bytes = 0;
};

// HBM in use on one chip during a program run, from the executor's
// accounting (Device::in_use), which the device clock turns into
// "hbm_bytes_in_use" counter samples at the times it places them.
struct MemorySamples {
  int64_t peak_bytes = -1;   // the most in use at any allocation of the run; -1: not measured
  size_t peak_op = 0;        // seen while per_device[d][peak_op] ran (placed at its start)
  int64_t end_bytes = -1;    // in use once the run released its intermediates; -1: not measured
};

// What one link did during one group's collective (runtime/faults.h,
// AddLinkTraffic): drawn as a "link A-B" slice (kind transfer) inside the
// collective's slice on `device`'s lane, from the collective's start.
struct LinkTransfer {
  int a = 0, b = 0;          // the link, a < b
  int device = 0;            // the member whose lane shows it
  int hops = 1;              // ring hops it carries
  int64_t bytes = 0;
  int64_t dur_ns = 0;
};

// One collective instruction's run: its replica groups and each group's duration.
struct CollectiveRun {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> group_dur_ns;
  // Per group, the links its traffic crossed; empty without a topology.
  std::vector<std::vector<LinkTransfer>> group_links{};
};

struct ScheduleInput {
  int step = 0;
  int64_t graph_id = -1;
  int64_t launch_ns = 0;     // host clock time the program was launched
  // Host clock: how long the devices sat with nothing to run before this
  // program was enqueued (DispatchTiming::starved_ns); 0 when it queued behind
  // earlier work. On the device clock this becomes a "waiting for host" slice
  // (see Scheduler::Schedule).
  int64_t host_wait_ns = 0;
  std::vector<std::vector<DeviceOp>> per_device;
  std::vector<CollectiveRun> collectives;
  std::vector<MemorySamples> memory;  // per device; empty: not measured
  // Per device, time its chip was taken away before this program (an injected
  // host preemption, runtime/faults.h): it starts that much later, behind a
  // "waiting for host" slice (kind kHostWait; named as any host wait, so the
  // database does not name the fault). Empty: none.
  std::vector<int64_t> start_delay_ns{};
};

struct DeviceSpan {
  int64_t start_ns = 0, end_ns = 0;
  int64_t compute_ns = 0, collective_ns = 0, transfer_ns = 0;
  int64_t host_wait_ns = 0;  // the "waiting for host" slice before start_ns, if any
};

class Scheduler {
 public:
  // `track_ids[d]` is the timeline track of device d on `clock`.
  Scheduler(trace::Clock clock, std::vector<int64_t> track_ids);
  // Places one program run, emits its slices to the recorder, and returns each
  // device's span. Error when the devices' collectives do not line up.
  //
  // Waiting for the host (device clock only): a device starts a program at
  // max(free, launch_ns), so a gap opens before it when the launch came after
  // the device was free. That gap mixes two things: the host really being late
  // (the dispatch queue sat empty, measured on the host clock as
  // `host_wait_ns`), and the device clock running ahead of the host's wall
  // clock (it adds up CPU time, which is less than wall time, so a device kept
  // busy by a fast host still drifts ahead and meets each launch early). Only
  // the first is the host's doing: the slice "waiting for host" (kind
  // kHostWait) covers min(gap, host_wait_ns) and ends where the program
  // starts; the rest of the gap stays idle. No slice before a device's first
  // program, and none on the modeled clock, whose gaps compare modeled
  // durations with host launches and so say nothing about this run's host.
  //
  // What is emitted follows trace::slice_detail(in.step), asked once per run:
  // kKernels, a slice per kernel, collective and transfer (a collective's
  // slice carries each member's own arrival in arrival_ns; it starts at the
  // last arrival; with a topology, each link its group's traffic crossed is a
  // "link A-B" slice inside it, CollectiveRun::group_links); kPrograms, one
  // slice per device for the whole run ("graph N", kind compute, op_id -1)
  // plus the host waits; kNone, no slices. A preempted chip
  // (start_delay_ns) shows a "waiting for host" slice (kind kHostWait) first.
  //
  // Counters (device clock only, whenever a recorder is installed), per chip
  // at the times this clock gives them: "hbm_bytes_in_use" at the run's peak
  // and at its end (in.memory), and, at the end of a run that moved any,
  // the chip's cumulative "collective_bytes_sent", "collective_bytes_received"
  // and "host_to_device_bytes" since this Scheduler was made.
  absl::StatusOr<std::vector<DeviceSpan>> Schedule(const ScheduleInput& in);
  int64_t device_free_ns(int d) const { return free_[d]; }

 private:
  // Cumulative bytes moved by one chip, and what its counters last said.
  struct Moved {
    int64_t sent = 0, received = 0, from_host = 0;
    int64_t sent_said = 0, received_said = 0, from_host_said = 0;
  };

  trace::Clock clock_;
  std::vector<int64_t> tracks_;
  std::vector<int64_t> free_;
  std::vector<bool> ran_;  // has the device run a program yet?
  std::vector<Moved> moved_;
};

// Counter names of the device clock (docs/schema.md, counters).
inline constexpr const char* kHbmInUseCounter = "hbm_bytes_in_use";
inline constexpr const char* kCollectiveSentCounter = "collective_bytes_sent";
inline constexpr const char* kCollectiveReceivedCounter = "collective_bytes_received";
inline constexpr const char* kHostToDeviceCounter = "host_to_device_bytes";

}  // namespace shardscope::runtime
