// What bounds a run's step, in the manner of XProf's smart suggestions, from
// the store alone (issue 17): each candidate bound is a measured value against
// a threshold stated as a number, and the verdict is the first one that
// passes, in a fixed order (recompilation, host, stragglers, collectives,
// memory, compute). Where the data cannot support an answer it says so.
//
// The step-time breakdown behind it is attributed by priority, so that the
// parts of each chip's step add up to the step: at every instant of the
// median step, a chip counts as computing if any compute kernel runs, else in
// a collective (from its arrival at it: waiting for the others counts there),
// else transferring, else waiting for the host, else idle (device clock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"

namespace shardscope::analysis {

struct RunReport;  // run_report.h, which holds a Verdict

// One candidate bound: `value` measured against `threshold` (same unit).
struct Evidence {
  std::string bound;  // recompilation | host | stragglers | collectives | memory | compute
  std::string what;   // what was measured, in words, e.g. "collectives' share of the median step"
  double value = 0, threshold = 0;
  std::string unit;   // "%" (a share, 0-100), "x" (a ratio)
  bool passed = false;
  bool flagged_not_bound = false;  // past its threshold, yet not what bounds the step (its detail says why)
  std::string detail; // the numbers behind it, e.g. "chip 3 last at 47 of 60 collectives"
  // False when the run cannot support the figure (its detail begins "not
  // measurable: " and says why); value is then 0 and means nothing.
  bool Measurable() const { return detail.rfind("not measurable", 0) != 0; }
};

// One chip's median step, attributed by priority (sums to span_ns).
struct StepParts {
  int device_id = 0;
  int64_t compute_ns = 0, collective_ns = 0, transfer_ns = 0, host_wait_ns = 0, idle_ns = 0;
};

// One chip's median step drawn small: kThumbColumns columns, each the part
// that held most of its time (0 compute, 1 collective, 2 transfer, 3 host
// wait, 4 idle), run-length coded as (columns, part).
inline constexpr int kThumbColumns = 600;
struct ThumbLane {
  int device_id = 0;
  std::vector<std::pair<int, int>> runs;
};

// Which chip arrives last at collectives (device clock, every step).
struct LateArrivals {
  int64_t collectives = 0;  // collectives with an arrival recorded on at least two chips
  struct Chip {
    int device_id = 0;
    int64_t last = 0;             // collectives it reached last
    int64_t late_ns = 0;          // summed: its arrival minus the median of the others'
  };
  std::vector<Chip> chips;        // most often last first
};

// The fleet diagnosis per chip (fleet.h), kept for the report's heatmap: each
// chip's topology coordinates, a value to colour it by and whether the
// diagnosis flagged it (or its host). Empty for a run of one chip.
struct FleetMap {
  std::string clock;   // device | modeled (a simulated run)
  std::string metric;  // what `value_ns` is, in words
  bool lateness = false;  // value_ns: arrival after the groups' median (else the chip's step span)
  struct Cell {
    int device_id = 0, host_id = 0;
    std::string coords;  // "[1,0,3]" (topology), or mesh coordinates
    double value_ns = 0;
    bool flagged = false;
  };
  std::vector<Cell> cells;                  // by device id
  std::vector<std::string> flagged_others;  // flagged links and hosts: "link 3-4 (1.35x)"
};

struct Verdict {
  std::string bound;              // the first bound that passed, or "none" / "unknown"
  std::string line;               // one line, with its numbers
  std::vector<Evidence> evidence; // every candidate, in order
  int step = -1;                  // the median step the breakdown covers
  // The breakdown's clock: "device", or "modeled" for a simulated run (from
  // the fleet diagnosis's per-step rows: no thumbnail then).
  std::string clock = "device";
  int64_t span_ns = 0;
  std::vector<StepParts> parts;   // per chip
  // Recorded with --trace steps: `compute` is whole programs, their
  // collectives and transfers inside (RunReport::devices.programs_only).
  bool programs_only = false;
  std::vector<ThumbLane> thumbnail;  // per chip, the same step
  LateArrivals late;
  FleetMap fleet_map;
};

// Thresholds (stated in the report next to each value).
inline constexpr double kRecompileShare = 10;     // % of the host time of steps after kLateCompileStep
inline constexpr int kLateCompileStep = 10;
inline constexpr double kHostWaitShare = 20;      // % of the median step, chip average
inline constexpr double kStragglerShare = 8;      // % slower than its peers (fleet.h's flag threshold)
// ... and what fixing it would save (the fleet's what-if, where estimated),
// % of the median step: a straggler that costs less does not bound the step.
inline constexpr double kStragglerSavedShare = 3;
inline constexpr double kCollectiveShare = 30;    // % of the median step, chip average
inline constexpr double kHbmShare = 90;           // % of a chip's HBM for the largest program's peak
inline constexpr double kMemoryBoundShare = 50;   // % of kernel time in memory-bound kernels
inline constexpr double kComputeShare = 50;       // % of the median step, chip average

// From the report's other parts (its run, its device breakdown) and the store.
absl::StatusOr<Verdict> BuildVerdict(const store::Reader& reader, const RunReport& report);

nlohmann::json VerdictToJson(const Verdict& v);

}  // namespace shardscope::analysis
