// The calibration of a simulated run from a recorded one (`run --simulate
// --calibrate-from DB`, docs/simulate.md): the sim_calibrations row, written
// once the run ends, and read by the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::store {

struct SimCalibrationRow {
  int64_t run_id = 0;
  std::string source_db;
  int64_t source_run = 0;
  int64_t kernels_by_op = 0, kernels_by_signature = 0, kernels_modeled = 0;
  int64_t collectives_recorded = 0, collectives_modeled = 0;
  int64_t recorded_step_ns = 0, recorded_host_wait_ns = 0;
  int64_t calibrated_step_ns = 0, uncalibrated_step_ns = 0;

  // |simulated - recorded| / recorded (0 when nothing was recorded).
  double CalibratedError() const;
  double UncalibratedError() const;
};

absl::Status WriteSimCalibration(const std::string& path, const SimCalibrationRow& row);
// The run's row; nullopt when it has none (or the file predates the table).
absl::StatusOr<std::optional<SimCalibrationRow>> ReadSimCalibration(const Reader& reader, int64_t run_id);

}  // namespace shardscope::store
