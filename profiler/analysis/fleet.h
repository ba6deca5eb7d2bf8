// Fleet diagnosis of a stored run, from the database alone: which chip, link
// or host slows the steps down, each suspect with its evidence (docs/fleet.md).
//  - Late arrival (HTA, TraceLens): per collective, which chip arrived last and
//    by how much, counted over the steps.
//  - Links: each "link A-B" slice's time for its bytes against its peers' in
//    the same collective (and the link's bandwidth from the `links` view).
//  - Score: how much slower than its peers a suspect is — a chip's kernels
//    against the same kernels on the other chips (weighted median of the
//    ratios), a link's time per byte against the other links of its kind in
//    the same collectives, a host's chips' shared excess outside collectives.
//  - What-if: the recorded steps re-scheduled (each chip's ops back to back, a
//    collective starting when its last member arrives, as the runtime's
//    Scheduler does) with the suspect's kernel or transfer times replaced by
//    the median of its peers: the step time that fixing it would save.
//  - A per-chip step breakdown (compute, collective, collective wait,
//    transfer, host wait, idle) and the chips that stand out from their peers.
// Works on imported multi-rank traces (ranks are hosts, a collective's
// arrival is its start there). Reads no config_json: what was injected is not
// known to it. When the data cannot support an answer (too few steps, no
// collectives) it says so and flags no one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::analysis {

// How many flagged suspects the one-line verdict names; it counts the rest
// ("... and 250 more"), which the ranking below it lists.
inline constexpr size_t kVerdictNames = 8;

struct FleetOptions {
  int64_t run_id = -1;  // -1: the newest run
  // A suspect is flagged when it is at least this much slower than its peers
  // (its score): a chip's kernels, a link's time per byte, a host's chips together.
  double flag_threshold = 0.08;
  int min_steps = 3;  // steps with collectives needed to say anything
  // Also keep every step's per-chip breakdown (FleetReport::per_step), for
  // the app's Fleet view; the report's text and JSON do not change.
  bool per_step = false;
  // Called now and then from the analysing thread: what it is doing and how
  // far (0..1; -1 when it cannot tell), so a caller off the UI thread can show progress.
  std::function<void(double fraction, const std::string& phase)> progress;
};

struct FleetSuspect {
  std::string kind;  // chip | link | host
  std::string id;    // "17", "3-4", "2"
  double score = 0;  // how much slower than its peers: slowdown - 1, at least 0
  bool flagged = false;
  // Over the threshold yet not flagged: why ("not steadily from step to
  // step"), so a report that shows its score says why it is not a culprit.
  std::string not_flagged_why;
  std::vector<std::string> evidence;
  // The figures behind the evidence.
  int last_arrivals = 0;         // chips: collectives it arrived last at
  int collectives = 0;           // chips, links: collectives it took part in
  double late_ns_per_step = 0;   // mean arrival after the group's median, per step
  double saved_ns_per_step = 0;  // what-if: step time saved by fixing it (flagged: with those above)
  bool saved_estimated = false;  // the what-if was made (else saved_ns_per_step says nothing)
  // Where a saving sits in a few steps (a one-off pause): "50.000 ms in step 2
  // alone", and saved_ns_per_step is that averaged over the run's steps; "" else.
  std::string saved_in_steps;
  double slowdown = 1;           // its time over its peers' (1: as fast)
  // A chip the run's hang detector found stopped (`hangs`): ranked first and
  // flagged whatever its score; JSON's score is null for it.
  bool stopped = false;
};

struct FleetChip {
  int device_id = 0;
  int host_id = 0;
  std::string coords;  // topology coordinates when recorded, else mesh coordinates
  // Mean per step (device clock, ns).
  double compute_ns = 0, collective_ns = 0, wait_ns = 0, transfer_ns = 0, host_wait_ns = 0, idle_ns = 0;
  double span_ns = 0;
  std::vector<std::string> stands_out;  // "compute 1.9 ms vs peers' 1.6 ms", ...
};

// One chip in one step (FleetOptions::per_step): what FleetChip averages.
// compute + collective + wait + transfer + host wait + other + idle is the
// step's span over every chip (when its ops do not overlap).
struct FleetChipStep {
  double compute_ns = 0, collective_ns = 0, wait_ns = 0, transfer_ns = 0, host_wait_ns = 0, idle_ns = 0;
  double other_ns = 0;  // host, compile and other kinds on the chip's lane
  double own_ns = 0;    // its own first start to last end in the step
  double late_ns = 0;   // summed over the step's collectives: its arrival after its group's median
  double flops = 0;     // ops.flops of the compute kernels it ran
  bool present = false;  // it ran something in the step
};
struct FleetStep {
  int step = 0;
  double span_ns = 0;     // first start to last end over every chip
  bool analysed = false;  // one of the steps the diagnosis used (not the warm-up)
  std::vector<FleetChipStep> chips;  // per FleetReport::step_devices
};

struct FleetReport {
  int64_t run_id = 0;
  std::string sample, topology;
  bool imported = false;
  // A simulated run (runs.simulated) has only the modeled clock: it is read instead of the device clock.
  bool simulated = false;
  std::string clock = "device";
  // The per-chip rows' clock: the device's, also while host-thread (gloo) collectives rank on the host clock.
  std::string breakdown_clock = "device";
  int chips = 0, hosts = 0;
  int steps = 0;            // steps analysed
  int64_t collectives = 0;  // collective instances (one per group and run)
  int links = 0;            // links with recorded traffic
  double median_step_ns = 0;
  double threshold = 0;
  bool supported = true;               // false: the data cannot support an answer (see verdict)
  std::string verdict;                 // one sentence
  std::vector<std::string> notes;      // what was left out and why
  std::vector<FleetSuspect> suspects;  // ranked by score, highest first
  std::vector<FleetChip> chip_rows;
  // With FleetOptions::per_step: every step with slices, in order, and the
  // chips (device ids, ascending) their rows follow.
  std::vector<int> step_devices;
  std::vector<FleetStep> per_step;
};

absl::StatusOr<FleetReport> AnalyzeFleet(const store::Reader& reader, const FleetOptions& options);
// A chip's coordinates as `devices` stores them ("[3,0,1]"): one to four
// integers in 0..2^20; empty when the text is anything else (a damaged row),
// so neither the report nor the Fleet view's grid takes it at its word.
std::vector<int> ParseChipCoords(std::string_view text);
std::string RenderFleetText(const FleetReport& r);
// {"run", "verdict", "supported", "threshold", "steps", "suspects": [{"kind",
// "id", "score", "flagged", "evidence": [...]}, ...], "chips": [...]}
std::string RenderFleetJson(const FleetReport& r);

}  // namespace shardscope::analysis
