// `shardscope calibrate`: measures the `cpu` chip profile on this machine and
// caches it (runtime/cpu_calibration.h); `--show` prints the values a run
// would use now and where they come from. Also the calibration of a simulated
// run from a recorded one (`run --simulate --calibrate-from DB`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "profiler/analysis/sim_calibration.h"
#include "runtime/simulate.h"

namespace shardscope::cli {

extern const char kCalibrateHelp[];
int RunCalibrate(const std::vector<std::string>& args);

// `run --simulate --calibrate-from DB`: the recorded run's op times as the
// simulator takes them, and, once the run is stored, both errors against its
// device-clock step, printed and written to sim_calibrations.
runtime::RecordedOpTimes ToRecordedOpTimes(const analysis::RecordedDeviceTimes& times);
// `calibrated` and `uncalibrated`: each step's modeled span (Simulator::StepSpans,
// UncalibratedStepSpans), read before the client shut down.
// What makes the recorded run a poor yardstick for this simulated one, or ""
// when nothing does: faults injected into it (its times carry them into the
// calibration), another chip count or batch (its step is another workload's).
std::string CalibrationCaveat(const analysis::RecordedDeviceTimes& times, int64_t chips, int64_t batch,
                              const std::string& mesh = "", const std::string& sharding = "");
// `caveat` (CalibrationCaveat's) follows the errors when it is not empty.
absl::Status FinishCalibration(const std::string& db, int64_t run_id,
                               const analysis::RecordedDeviceTimes& times,
                               const std::vector<std::pair<int, int64_t>>& calibrated,
                               const std::vector<std::pair<int, int64_t>>& uncalibrated,
                               const runtime::CalibrationCounts& n, bool quiet, const std::string& caveat);

}  // namespace shardscope::cli
