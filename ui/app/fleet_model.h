// The Fleet view's model: every chip of a run placed by its topology
// coordinates, with each step's breakdown and the fleet diagnosis's suspects.
// Built from the store alone, off the UI thread (a 4096-chip pod takes
// seconds): the figures are analysis::AnalyzeFleet's, the ones `shardscope
// fleet` prints, with its per-step rows (FleetOptions::per_step). Knows
// nothing of the screen, so it is tested without a display.
//
// Where a chip sits (FleetGrid): a 3D torus (AxBxC) is a row of C panels of
// A x B (rows x columns); a GPU cluster (gpu:NxM) is N rows (hosts) of M
// chips; a 2D torus is one A x B panel; a 2D grid of many more rows than
// columns is cut into panels of about square blocks of rows; a run without topology coordinates
// places chips by their mesh coordinates, or in device order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/fleet.h"
#include "store/reader.h"

namespace shardscope::app {

// What the heatmap colours each chip by, in the metric picker's order.
enum class FleetMetric { kStepTime, kComputeShare, kCollectiveWait, kLateness, kHbmPeak, kMfu };
inline constexpr int kNumFleetMetrics = 6;
const char* FleetMetricName(FleetMetric m);   // --dump-layout's "metric": "step_time", ...
std::optional<FleetMetric> FleetMetricFromName(std::string_view name);  // --metric NAME
const char* FleetMetricTitle(FleetMetric m);  // the picker's label

struct FleetGrid {
  // "torus3d", "gpu", "grid" (a 2D torus), "mesh" (mesh coordinates: no
  // --topology), "devices" (neither: device order)
  std::string kind;
  int panels = 1, rows = 1, cols = 1;
  std::string row_label, col_label, panel_label;  // what each axis is ("x", "host", ...)
  // A 2D grid of many rows of few chips (gpu:64x8) would be a strip one
  // column wide: its rows are cut into panels of this many (0: not cut),
  // out of total_rows.
  int rows_per_panel = 0, total_rows = 0;
};

struct FleetChipInfo {
  int device_id = 0;
  int host_id = 0;
  std::string coords;  // as stored: topology coordinates, else mesh coordinates
  bool topology_coords = false;  // `coords` are the topology's (devices.topology_coords)
  int panel = 0, row = 0, col = 0;
  double peak_flops = 0;       // devices.peak_flops (the run's profile)
  int64_t hbm_bytes = 0;       // devices.hbm_bytes: the chip's budget
  double hbm_peak_bytes = -1;  // over the run; -1: not recorded (see FleetModel::hbm_source)
  // Per step (report.per_step's order): the peak within the step; -1: none
  // there. Empty when the store cannot split it by step.
  std::vector<double> hbm_step_peak;
  int rank = 0;                // 1-based rank among the diagnosis's suspects (0: not a chip suspect)
  bool flagged = false;
};

struct FleetModel {
  analysis::FleetReport report;  // with per_step rows; chips follow report.step_devices
  FleetGrid grid;
  std::vector<FleetChipInfo> chips;  // per report.step_devices
  // Where the HBM peaks come from: the hbm_bytes_in_use counter (its largest
  // sample per chip in each step: from the step's start on the host clock,
  // which the counter is sampled on, to the next step's), else the largest
  // memory plan of the programs launched in the step (`executions`; the same
  // on every chip), else "" (none). Without the host clock's step bounds the
  // counter's largest sample over the run stands for every step, and this
  // says so.
  std::string hbm_source;

  // The metric's value for chip `chip` in step index `step` (into
  // report.per_step); NaN when it has none there.
  double Value(FleetMetric m, size_t step, size_t chip) const;
  // "12.3 ms", "41%", "2.1 GiB": how the view prints a value of `m`.
  static std::string Format(FleetMetric m, double value);
  // The colour scale for `m` over [lo, hi], the chips' values at a step
  // spanning `span_ns`: at least 2% of the step (times), 2 points (shares) or
  // 2% of the peak (HBM) wide, so that chips within noise of one another
  // share a colour (a healthy pod's lateness of -418..+385 us in a 3.5 s
  // step filled the ramp). Returns whether it widened [lo, hi].
  static bool ColorScale(FleetMetric m, double span_ns, double* lo, double* hi);
  // The index of device `device_id` in chips, or -1.
  int ChipIndex(int device_id) const;
  // The step the view opens on (an index into report.per_step): of the
  // analysed steps, the one whose span is the median, so that a warm-up or a
  // one-off stall is not what the user sees first; the last step when none
  // was analysed, 0 when there are none.
  size_t TypicalStep() const;
};

// `progress` (may be empty) is called from the building thread with what it
// is doing and how far (0..1, -1: unknown).
absl::StatusOr<FleetModel> BuildFleetModel(
    const store::Reader& reader, int64_t run_id,
    std::function<void(double fraction, const std::string& phase)> progress = {});

// Where a run's chips sit: from `topology` (runs.topology) and each chip's
// stored coordinates (JSON arrays, "[1,2,0]"); fills each chip's panel, row
// and col. Exposed for tests.
FleetGrid PlaceChips(const std::string& topology, std::vector<FleetChipInfo>& chips);

}  // namespace shardscope::app
