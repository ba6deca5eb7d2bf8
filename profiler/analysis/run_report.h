// The run report: what `shardscope report` prints and the app's overview shows.
// Built only from the store (so it works on any stored run) as plain tables;
// rendering to text, Markdown or JSON is separate (render.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "profiler/analysis/cost_error.h"
#include "profiler/analysis/verdict.h"
#include "profiler/analysis/slice_names.h"
#include "store/reader.h"
#include "store/sim_calibration.h"

namespace shardscope::analysis {

struct RunHeader {
  std::string db_path;
  int64_t run_id = 0;
  std::string sample, mesh, mesh_axes, sharding, topology, profile, clock_kinds;
  std::string tool_version, started_at;
  // running | finished | incomplete | ended abnormally (store/run_state.h), and
  // the line that says how, e.g. "ended abnormally after step 7: its writer ... is gone".
  std::string status, status_detail;
  int num_hosts = 0;
  int num_devices = 0;
  bool simulated = false;
  bool imported = false;               // read from another tool's trace: timelines, no IR
  std::optional<int64_t> duration_ns;  // ended_at - started_at (unix clock), when finished and recorded
  // What the run's capture settings left out of its timeline (runs.capture_note:
  // "--trace steps: kernels not recorded ..."); "" when everything was captured
  // or the file predates the column.
  std::string capture_note;
  // An imported run's losses (ReadImportLosses): a file cut short, ranks
  // that are one file twice. Said under the title, as the capture note is.
  std::vector<std::string> import_losses;
  // An imported run whose ranks' timelines cover different steps (a file
  // cut short, one started late): which, so a run's step count is not read
  // as every rank's. "" when they all cover the same steps.
  std::string uneven_steps;
  // Faults were injected on the device clock (`run --fault`): its timeline is
  // not the machine's own. Which ones: runs.config_json's "faults" only.
  bool faults_injected = false;
  std::vector<std::string> faults;  // their specs, as given ("slow-chip:17:0.6")
  // The chip profile's values the modeled clock used and where they came
  // from (runs.config_json "profile_values": measured when, cached where;
  // runtime/cpu_calibration.h); "" when the run predates them.
  std::string profile_values;
  nlohmann::json profile_values_json;
  // A simulated run calibrated from a recorded one (`--calibrate-from`).
  std::optional<store::SimCalibrationRow> calibration;
  // How the mesh's axes lie on the topology (runs.config_json "mesh_map",
  // `run --mesh-map`): "(auto): model: z (ici, ...); data: ..."; "" when the run
  // named no topology or predates it.
  std::string mesh_map;
  nlohmann::json mesh_map_json;
};

// Steps on the host clock (wall time of each training step).
struct StepStats {
  int64_t count = 0;
  int64_t median_wall_ns = 0;
  int64_t p90_wall_ns = 0;
  int first_step = 0, last_step = 0;
  std::optional<double> first_loss, last_loss;
  // The first step whose loss is NaN or infinite: training diverged there.
  std::optional<int> loss_not_finite_from;
  // An imported trace whose devices ran each step after its span on the host had
  // ended (import_stats steps_run_after_dispatch): the host's times are the dispatch.
  bool dispatched_ahead = false;
  // A simulated run: its host clock times the simulator, not the program;
  // its step is the modeled clock's (median over step_bounds), said first.
  bool simulated = false;
  int64_t modeled_median_ns = 0;
};

// Fills `s` from the run's `steps` rows (step, loss, wall_ns; by step).
void FillStepStats(const store::QueryResult& steps, StepStats* s);
// Whether an imported run's devices ran its steps after their host spans
// (import_stats steps_run_after_dispatch): StepStats::dispatched_ahead.
bool StepsDispatchedAhead(const store::Reader& rd, const std::string& run);

struct CompileMiss {
  int64_t compile_id = 0;
  int step = 0;
  int64_t graph_id = 0;
  std::string cause_kind;    // first_compile | input_shape_changed | ...
  std::string cause_subkind; // graph_changed: layer_added | ... | ops_changed
  std::string cause_detail;
  std::string source_file;   // empty when unknown
  int source_line = 0;
  int64_t duration_ns = 0;   // host clock
};

// What would stop a call site's recompilations (`shardscope recompiles` has
// the whole analysis); numbers only where the stored run proves them.
struct CompileSuggestion {
  std::string call_site;        // its first line
  std::string text;
  int64_t compilations_saved = -1;
};

struct CompileStats {
  int64_t count = 0;            // all compile requests, cache hits included
  int64_t misses = 0, memory_hits = 0, disk_hits = 0;
  int64_t recompilations = 0;   // misses other than a call site's first compile
  int64_t total_ns = 0;         // host clock, all requests
  std::vector<CompileMiss> miss_list;  // by step
  std::vector<CompileSuggestion> suggestions;  // for call sites that recompiled
};

// One chip's time by kind on the device clock.
struct DeviceTimes {
  int64_t compute_ns = 0, collective_ns = 0, transfer_ns = 0, idle_ns = 0;
  // Waiting for the host to enqueue the step's program ('host_wait' slices);
  // not part of idle_ns. 0 in files written before it was recorded.
  int64_t host_wait_ns = 0;
  std::string bottleneck;  // the largest category ("host" for host_wait); "" when all are 0
};

struct DeviceRow {
  int device_id = 0;
  int host_id = 0;
  std::string coords;
  DeviceTimes median_step;  // in the breakdown's median step
  DeviceTimes all_steps;    // summed over every step
};

struct DeviceBreakdown {
  int median_step = -1;        // the step with the median device-clock span
  int64_t median_span_ns = 0;
  // The steps' median span as diff and fleet give it (quantile.h): with an even
  // count, the mean of the two middle spans, which no step has.
  int64_t spans_median_ns = 0;
  int64_t steps_covered = 0;   // steps with device-clock slices
  std::vector<DeviceRow> rows; // empty when the run has no device timeline
  std::string empty_reason;    // why rows is empty, in words
  // Recorded with --trace steps: a chip's "compute" is whole programs, its
  // collectives and transfers inside them; no bottleneck can be named.
  bool programs_only = false;
  // Waiting for the host, chip average: in the median step, and summed over
  // all steps (device clock). Both 0 when the host always kept up.
  int64_t median_host_wait_ns = 0;
  int64_t total_host_wait_ns = 0;
  // An imported trace without launches (import_stats host_wait_unknown): a
  // wait for the host cannot be told from idle time.
  bool host_wait_unknown = false;
};

struct ShardingRow {
  int64_t tensor_id = 0;
  std::string name, dtype, shape, sharding, source;
  std::string source_file;
  int source_line = 0;
  int64_t devices = 0;          // devices holding a shard
  int64_t min_bytes = 0, max_bytes = 0;  // bytes per device (equal when even)
};

// The `tensors` columns of row `i` of a query that selects them (tensor_id,
// name, dtype, shape, sharding, sharding_source, source_file, source_line).
ShardingRow TensorColumns(const store::QueryResult& q, size_t i);

// One op of a compiled graph, by measured device time (the kernel_stats view).
struct KernelRow {
  int64_t graph_id = 0, op_id = 0;
  std::string name, opcode, shape, roofline, scope, source_file;
  int source_line = 0;
  int64_t count = 0;            // executions, all chips
  int64_t total_ns = 0;         // device clock
  int64_t mean_ns = 0;
  int64_t modeled_ns = 0;       // on the run's profile
  double flops = 0;             // per execution
  double achieved_flops = 0;    // flops * count / total time
  double fraction_of_peak = 0;  // achieved / the profile's peak
};

struct KernelStats {
  double peak_flops = 0;          // of the run's profile
  std::vector<KernelRow> top;     // by total device time, at most kTopKernels
  std::optional<CostModelError> cost_error;
  std::string empty_reason;       // why `top` is empty, in words
  // When `top` is empty (no IR: an imported trace): per clock with slices
  // (device, then host), the names with the most self time, from the timeline.
  std::vector<NameTimes> by_name;
};
inline constexpr int kTopKernels = 10;
// Chips read for a simulated run's names by self time on the modeled clock (an even sample).
inline constexpr size_t kModeledLanesSampled = 16;

// An involuntary full rematerialization (table `rematerializations`): a
// split value gathered whole on every chip.
struct RematRow {
  int64_t graph_id = 0;
  std::string value, op, source_file;
  int source_line = 0;
  int64_t bytes = 0;
};

// The run's rematerializations, every compiled program's (none in files from
// before the table).
absl::Status ReadRematerializations(const store::Reader& reader, int64_t run_id, std::vector<RematRow>* out);

// An auto-sharding search (tables auto_sharding*): how it went, what its
// choice and each hand-written strategy cost (modeled step), and the layout
// chosen per group of inputs.
struct AutoShardingSummary {
  int step = 0;
  std::string method, profile;
  double combinations = 0;
  int64_t evaluations = 0, search_ns = 0, memory_budget = 0;
  struct Candidate {
    std::string strategy;
    double modeled_ns = 0, collective_ns = 0;
    int64_t collectives = 0, peak_bytes = 0, rematerializations = 0;
    bool fits = true, chosen = false;
  };
  std::vector<Candidate> candidates;  // the chosen first
  struct Choice {
    std::string group, layout, sharding;
    int64_t tensors = 0;
  };
  std::vector<Choice> choices;
  // The chosen candidate's modeled step over the fastest hand-written one that fits (0 if none).
  double RatioToBestHand(std::string* best) const;
};

// The run's auto-sharding searches (none without --sharding auto, or in files
// from before the tables).
absl::Status ReadAutoSharding(const store::Reader& reader, int64_t run_id, std::vector<AutoShardingSummary>* out);

// Memory: each compiled program's planned peak on a chip (memory_plans,
// inputs included), the largest first, against the chips' HBM.
struct MemoryPeak {
  int64_t graph_id = 0;
  int64_t peak_bytes = 0, parameter_bytes = 0, arena_bytes = 0;
  std::string peak_op;  // the op at which the peak is reached
};
struct MemoryStats {
  int64_t hbm_bytes = 0;  // the smallest chip's (0: not recorded)
  int64_t programs = 0;   // programs with a plan
  std::vector<MemoryPeak> top;  // at most kTopMemoryPeaks
};
inline constexpr int kTopMemoryPeaks = 5;
absl::Status ReadMemoryPeaks(const store::Reader& reader, int64_t run_id, MemoryStats* out);

// Each step's time on the host clock and its span on the device clock (-1:
// not on that clock), for charts.
struct StepPoint {
  int step = 0;
  int64_t host_ns = -1, device_ns = -1;
  int64_t modeled_ns = -1;  // a simulated run's step on the modeled clock (it has no device clock)
};

struct RunReport {
  RunHeader run;
  StepStats steps;
  std::vector<StepPoint> series;
  CompileStats compiles;
  int64_t executions = 0;
  DeviceBreakdown devices;
  std::vector<ShardingRow> sharding;
  std::vector<RematRow> rematerializations;
  std::vector<AutoShardingSummary> auto_sharding;
  KernelStats kernels;
  MemoryStats memory;
  Verdict verdict;  // what bounds the step, with its evidence (verdict.h)
  // Sections a damaged part of the file kept from being read ("kernel
  // statistics: x.db is damaged (...)"): the rest of the report stands, and
  // each renderer says which are missing and why.
  std::vector<std::string> unreadable;
};

// Parts of the report on their own (the run comparison reads these too).
absl::StatusOr<RunHeader> ReadRunHeader(const store::Reader& reader, int64_t run_id);
absl::StatusOr<CompileStats> ReadCompileStats(const store::Reader& reader, int64_t run_id);
// The fault specs injected into run `run_id` (runs.config_json "faults", the
// only place they are kept), in order; empty when none or the JSON is damaged.
absl::StatusOr<std::vector<std::string>> ReadRunFaults(const store::Reader& reader, int64_t run_id);
// What the import of run `run_id` lost or could not trust: its import_stats
// rows of severity data_loss or error, errors first; empty for a run that
// was not imported, or lost nothing.
struct ImportLoss {
  std::string name;   // import_stats.name: truncated_json, identical_files, ...
  int64_t count = 0;
  std::string first;  // the first place it was met ("(first: ...)" of its description); "" when none
  std::string Text() const;  // "name (count): first WHERE"
};
absl::StatusOr<std::vector<ImportLoss>> ReadImportLosses(const store::Reader& reader, int64_t run_id);
// How a run that did not finish ended (a hang, a failure, a killed process):
// its status's detail; "" when it finished or is still running.
std::string RunEndedEarly(const RunHeader& h);
// A calibrated simulated run's errors against its source, in one sentence
// (the report's text and HTML; `diff` names the calibration too).
std::string DescribeCalibration(const store::SimCalibrationRow& c);
// An imported run's ranks (hosts) whose timelines cover fewer steps than the
// run's (RunHeader::uneven_steps); "" when all cover the same.
absl::StatusOr<std::string> UnevenSteps(const store::Reader& reader, int64_t run_id);

// Builds the report for `run_id`; NotFound when the file holds no such run.
absl::StatusOr<RunReport> BuildRunReport(const store::Reader& reader, int64_t run_id);

// Renderers. Every time is labelled with its clock ("host", "device").
std::string RenderText(const RunReport& r);
std::string RenderMarkdown(const RunReport& r);
nlohmann::json ReportToJson(const RunReport& r);
std::string RenderJson(const RunReport& r);  // pretty-printed ReportToJson
// "loss 2.303 -> NaN (not finite from step 4: diverged)": every view says it alike.
std::string LossText(const StepStats& s);
// The memory section as every form prints it: its heading, and a row per
// program (graph, peak, its share of HBM, inputs, intermediates, peak op).
std::string MemoryHeading(const MemoryStats& m);
const std::vector<std::string>& MemoryHead();
std::vector<std::vector<std::string>> MemoryRows(const MemoryStats& m);
// One self-contained HTML file (no scripts, fonts or styles from anywhere),
// with inline SVG charts; `metrics_text` (the metrics report) is shown as is.
std::string RenderHtml(const RunReport& r, const std::string& metrics_text);

}  // namespace shardscope::analysis
