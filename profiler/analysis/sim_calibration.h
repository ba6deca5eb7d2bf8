// What `run --simulate --calibrate-from DB` takes from a recorded run
// (docs/simulate.md): each op's device time per program run, the median over
// every chip and step, and the run's device-clock step. Trace-driven, as
// Lumos and Echo are: the recorded kernels replace the cost model's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::analysis {

struct RecordedOp {
  std::string fingerprint;  // its program's (graphs.fingerprint)
  int64_t op_id = 0;
  bool collective = false;
  std::string opcode, shape;  // the ops row: what matches it in another program
  double flops = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  std::vector<int64_t> samples_ns;  // per chip and program run
  int64_t median_ns = 0;
  // A collective: per step and program run, what its chips waited before it
  // for the slowest to arrive (the median chip's idle gap before the
  // collective's slice), and the median of those. A simulation that gives
  // every chip each op's median time has every chip arrive together, so this
  // wait is carried on the collective (ToRecordedOpTimes).
  std::vector<int64_t> wait_samples_ns;
  int64_t median_wait_ns = 0;
};

struct RecordedDeviceTimes {
  std::string db;
  int64_t run_id = 0;
  std::string sample;  // runs.sample of that run (mlp, llama, ...)
  int64_t chips = 0;   // runs.num_devices
  int64_t batch = 0;   // the global batch its config_json records (0: not recorded)
  std::string mesh;      // runs.mesh ("8x1"), "" when not recorded
  std::string sharding;  // config_json's sharding (llama: dp, tp, ...), "" when not recorded
  std::string faults;  // the faults injected into it ("slow-chip:1:0.3, jitter:0.5"), "" when none
  std::string ended_early;  // how it ended when it did not finish (a hang: store::RunState::Describe), else ""
  // The machine's speed when it started (config_json profile_values.speed, a
  // runtime::SpeedProbe's JSON), "" when not recorded (fixed or pinned profile, older runs).
  std::string speed_json;
  std::string speed_at_end_json;  // ... and at its end (config_json speed_at_end), "" when not recorded
  std::vector<RecordedOp> ops;
  // Host-to-device transfers ("transfer x", per chip): (name, bytes) -> the
  // median device time of one, over every chip and step.
  std::map<std::pair<std::string, int64_t>, int64_t> transfer_ns;
  int steps = 0;  // the steps timed below
  // The first step whose inputs changed shape (-1: none), what changed, and
  // the steps from there on, left out of the step's time: they ran another
  // program than the one the run's batch compiles.
  int shapes_changed_at = -1;
  std::string shapes_change;
  int steps_left_out = 0;
  bool timed_after_change = false;  // no step from before was kept: the later ones are timed
  // Device clock, median over steps (analysis/quantile.h's, as the report's:
  // the lower middle of an even count had put a cnn's 8 steps at 28.8 ms
  // against a median of 30.1, and the errors with it): each step's span over every chip with
  // the time all chips waited for the host taken out (a simulated run assumes
  // the host keeps up), and what was taken out.
  int64_t step_ns = 0, host_wait_ns = 0;
};

// Reads run `run` of `db` (default: its newest run with a device clock).
// Errors name the file and the run: no such run, a simulated or imported run,
// a run with no kernel slices on the device clock (--trace steps or off).
absl::StatusOr<RecordedDeviceTimes> LoadRecordedDeviceTimes(const std::string& db, std::optional<int64_t> run);

// The median of `v` (the lower middle of an even count); 0 when empty.
int64_t MedianNs(std::vector<int64_t> v);

}  // namespace shardscope::analysis
