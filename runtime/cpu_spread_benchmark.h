// How much the virtual chips of one mesh differ when they time-share the
// cores (docs/cost_model.md, "Calibrating cpu", figure 13): every collective
// waits for its slowest participant, so a chip-to-chip spread of segment
// times becomes a wait the cost model alone cannot see (it gives every chip
// the same time). Measured through the runtime's own executor, thread pool
// and device clock on a small SPMD program, never on the samples.
//
// The spread grows like a random walk: the variance of a chip's time over a
// segment of work is proportional to the segment's length (interference
// comes in independent bursts), so one figure describes it, the variance rate
// v in ns: a segment of T ns has a chip-to-chip standard deviation of
// sqrt(v * T). The cost model turns it into the expected wait of a group of n
// chips, E[max of n] - mean = e(n) * sqrt(v * T) (compiler::ExpectedMaxOfNormals).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::runtime {

struct SpreadPlan {
  bool measure = true;
  int chips = 8;          // virtual chips sharing the machine's cores (the meshes it runs)
  int runs = 12;          // program runs (after a warm-up), 8 segments each
  int64_t rows = 64;      // the GEMMs' rows (a chip's share of a batch)
  int64_t width = 512;    // their other dims
  int64_t stream_elements = int64_t{1} << 20;  // each chip's streamed buffer (f32; 8 chips: 32 MiB)
  double stall_seconds = 1.5;  // MeasureHostStalls: every core working this long
};

struct SpreadFigures {
  double variance_ns = 0;   // v: chip-to-chip variance of a segment's time per ns of it
  int chips = 0;            // how many chips shared the cores
  int segments = 0;         // segment instances it was estimated from
};

// Runs the program `plan.runs` times on plan.chips chips (a pool of
// min(chips, cores) threads, as a Client makes) and estimates v from each
// segment's per-chip device times (the mean of the middle 80% of per-segment
// estimates); appends the table to `rows`.
SpreadFigures MeasureChipSpread(const SpreadPlan& plan, std::vector<std::string>* rows);

// The spread's tail: now and then the host takes a core for milliseconds and
// the thread's CPU clock runs through it (these VMs report no steal), so one
// chip's kernel runs 3-5 ms long and every chip of its next collective waits
// (docs/simulate.md, "What the misses are"). A few a core-second, alike on
// registers, streams and cache-resident work: measured by timing small units
// of work on every core at once, each unit's excess over the median unit of
// kStallNs or more being a stall.
constexpr int64_t kStallNs = 200000;
struct HostStalls {
  double per_s = 0;    // stalls per second of a core's work
  double mean_ns = 0;  // their mean excess (0: none seen)
};
HostStalls MeasureHostStalls(double seconds, std::vector<std::string>* rows);

}  // namespace shardscope::runtime
