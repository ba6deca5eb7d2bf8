// How well the cost model predicts the device clock: for every compute kernel
// a run executed (each device-clock slice of an op), the relative error
// |modeled - measured| / measured of the op's modeled time on the run's
// profile, summarised by its median. This is the score of the `cpu` profile's
// calibration (docs/cost_model.md); on another profile it measures how far the
// target chip is from this machine, not an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::analysis {

struct CostModelError {
  std::string profile;
  int64_t kernels = 0;          // kernels scored
  int64_t zero_duration = 0;    // measured 0 ns: no relative error, left out
  double median = 0;            // median |modeled - measured| / measured
  double p90 = 0;
  double median_ratio = 0;      // median modeled / measured (< 1: the model is optimistic)
};

// Scores (measured_ns, modeled_ns) pairs, one per kernel execution.
CostModelError ScoreCostModel(const std::vector<std::pair<int64_t, int64_t>>& measured_modeled,
                              const std::string& profile);

// Scores a stored run's compute slices on the device clock against its `ops`
// rows. nullopt when the run has no per-op costs (recorded before the cost
// model, or a trace imported without IR).
absl::StatusOr<std::optional<CostModelError>> ScoreRunCostModel(const store::Reader& reader, int64_t run_id);

// "cost model error (cpu profile): median 23% over 412 kernels"
std::string CostModelErrorLine(const CostModelError& e);

}  // namespace shardscope::analysis
