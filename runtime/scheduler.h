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

struct DeviceOp {
  int64_t op_id = -1;        // instruction id in the program
  std::string name;          // e.g. "dot_general.7"
  trace::SliceKind kind = trace::SliceKind::kCompute;
  int64_t dur_ns = 0;        // compute/transfer: measured; collective: see CollectiveRun
  int collective = -1;       // index into ScheduleInput::collectives
  int64_t bytes = 0;
};

// One collective instruction's run: its replica groups and each group's duration.
struct CollectiveRun {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> group_dur_ns;
};

struct ScheduleInput {
  int step = 0;
  int64_t graph_id = -1;
  int64_t launch_ns = 0;     // host clock time the program was launched
  std::vector<std::vector<DeviceOp>> per_device;
  std::vector<CollectiveRun> collectives;
};

struct DeviceSpan {
  int64_t start_ns = 0, end_ns = 0;
  int64_t compute_ns = 0, collective_ns = 0, transfer_ns = 0;
};

class Scheduler {
 public:
  // `track_ids[d]` is the timeline track of device d on `clock`.
  Scheduler(trace::Clock clock, std::vector<int64_t> track_ids);
  // Places one program run, emits its slices to the recorder, and returns each
  // device's span. Error when the devices' collectives do not line up.
  absl::StatusOr<std::vector<DeviceSpan>> Schedule(const ScheduleInput& in);
  int64_t device_free_ns(int d) const { return free_[d]; }

 private:
  trace::Clock clock_;
  std::vector<int64_t> tracks_;
  std::vector<int64_t> free_;
};

}  // namespace shardscope::runtime
