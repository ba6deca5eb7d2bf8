// Recording a run from your own program: what `shardscope run` does around a
// sample, as one object. Start() opens (or creates) the database, installs it
// as the recorder, writes the run's row, sets up the virtual chips and records
// them and the mesh; Finish() shuts the chips down, ends the run (its metrics
// report is computed then) and closes the file. Between the two, train with
// the frontend (core/shardscope.h): every compilation, execution, step and
// timeline lands in the database, for `shardscope report` and the workstation.
//
//   auto rec = shardscope::Recording::Start({.db = "run.db", .workload = "my_mlp", .mesh = {2, 2}});
//   if (!rec.ok()) return fail(rec.status());
//   ... build the model on (*rec)->mesh(), train with mark_step() and log_step(loss) ...
//   absl::Status s = (*rec)->Finish();
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "profiler/trace/capture.h"
#include "runtime/client.h"

namespace shardscope {
namespace runtime { class Simulator; }
namespace store { class Writer; }

struct RecordingOptions {
  // The SQLite file: created when missing; an existing shardscope database gains a new run.
  std::string db;
  // The run's name in reports (the runs table's `sample` column).
  std::string workload = "main";
  // The mesh's shape, row-major over chips 0..N-1; N is the product.
  std::vector<int64_t> mesh = {1, 1};
  // One name per mesh axis (default: data, model for two axes; axis0, axis1, ... otherwise).
  std::vector<std::string> mesh_axes;
  // The chip at each mesh position, row-major over `mesh` (a permutation of
  // 0..N-1; meshes.device_ids records it). Empty: chips 0..N-1 in order.
  // runtime/mesh_mapping.h's MapMesh gives a topology-aware order.
  std::vector<int64_t> mesh_device_ids;
  // Hosts the chips are spread over, evenly, in order.
  int hosts = 1;
  // How the chips are wired (`--topology`): a torus "2x4", "2x2x2" or a GPU
  // cluster "gpu:2x4" (runtime/interconnect.h). It must have as many chips as
  // the mesh, and decides the hosts (`hosts` must then be 1 or agree). The
  // devices rows get each chip's coordinates and links; with it, every
  // collective's traffic shows per link ("link A-B" slices). Empty: none.
  std::string topology{};
  // Faults injected on the device clock (`--fault`, runtime/faults.h):
  // "slow-chip:3:0.6", "link:3-4:0.25", "jitter:0.05", "fail-chip:2@5",
  // "host-preempt:1@4". Stored under "faults" in config_json, nowhere else.
  std::vector<std::string> faults{};
  // Seeds the jitter fault's draws.
  uint64_t fault_seed = 0;
  // The target chip of the modeled clock: cpu (this machine), tpu-v4 or h100.
  std::string profile = "cpu";
  // A label for the sharding strategy, shown by reports ("" for none).
  std::string sharding;
  // The run's configuration, a JSON object (your hyperparameters, say), stored
  // as given plus "cache_dir" and "profile_values" (the modeled clock's chip
  // values and where they came from, runtime/cpu_calibration.h) when it has none; empty: one describing
  // these options.
  std::string config_json;
  bool fusion = true;
  // The persistent compile cache's directory; empty: $SHARDSCOPE_CACHE_DIR if set, else none.
  std::string cache_dir;
  // Programs the in-memory compile cache keeps (0: no limit).
  size_t cache_capacity = 0;
  // A one-line notice on stderr at each recompilation (InitOptions::recompile_notices).
  bool recompile_notices = true;
  // Source files under this directory are stored relative to it (main.cc:12).
  // Empty: the directory of the file that calls Start.
  std::string source_root;

  // Timeline capture, like torch_xla's xp.trace (`shardscope run --trace ...`).
  // What a setting leaves out is said in the run's runs.capture_note, so no
  // report shows a silent gap.
  // kKernels: every slice; kPrograms: step and program slices only (trace::SliceDetail);
  // kNone: no slices (compilations, executions, steps, counters and metrics are still recorded).
  trace::SliceDetail trace = trace::SliceDetail::kKernels;
  // Slices only of steps trace_first_step..trace_last_step, inclusive (-1: no end).
  int trace_first_step = 0;
  int trace_last_step = -1;
  // Keep only the last N steps' slices (0: all); done by the store's writer.
  int trace_ring_steps = 0;
  // Stop capturing slices when the file would pass this many bytes (0: no cap); the store's writer.
  int64_t trace_max_bytes = 0;

  // Simulated mode (`shardscope run --simulate`, docs/simulate.md): the steps
  // are traced, compiled and partitioned for every chip of `topology` (which
  // must be set; it may have thousands of chips), and laid out on the modeled
  // clock without computing values; faults apply there. Each chip has the
  // profile's HBM. The run is marked simulated (runs.simulated = 1, clocks
  // host and modeled); its timeline is stored as schedules
  // (store/sim_timeline.h) when it finishes or is abandoned. Values read back
  // (a loss) are zeros. Timeline capture options do not apply.
  bool simulate = false;
};

class Recording {
 public:
  // Starts recording a run. Errors: bad options (InvalidArgument), another
  // recording still open (FailedPrecondition), a database that cannot be
  // opened or written (named in the message). Nothing is written on a bad option.
  static absl::StatusOr<std::unique_ptr<Recording>> Start(
      RecordingOptions options, std::source_location caller = std::source_location::current());
  // Finishes the run if Finish was not called (its error is then lost).
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  // Shuts the chips down, marks the run finished and closes the database.
  // Returns the first error writing it hit, if any. Later calls return the same.
  absl::Status Finish();
  // Ends the run as the runtime's hang detector ended it (a chip stopped:
  // --fault fail-chip): status 'hang detected', `message` (the detector's
  // sentence) as its note, every step before it recorded. Like Finish
  // otherwise; returns the first error writing it hit.
  absl::Status EndByHangDetector(const std::string& message);
  // Ends the run as 'failed': the program stopped with an error (out of
  // memory, a batch that does not split); `error` becomes the run's note, so
  // no reader takes the steps before it for a finished run. Like Finish otherwise.
  absl::Status EndWithError(const std::string& error);
  // Stops recording without ending the run, as a process that died would: the
  // run stays 'running' with its writer gone, which readers show as ended
  // abnormally (a chip lost). What was recorded stays.
  // `why` (may be empty) is stored as the reason (run_writers.note).
  void Abandon(const std::string& why = "");
  // Faults that turned out to do nothing (a link fault on a link no
  // collective crossed), each said in full and stored without naming the
  // fault; set by Finish and EndByHangDetector, which also store them in
  // runs.config_json ("fault_notes": "faults[0] had no effect: ...").
  const std::vector<runtime::Client::FaultWithoutEffect>& faults_without_effect() const { return faults_without_effect_; }

  // The mesh of the options' shape and axis names, over all the chips.
  const Mesh& mesh() const { return mesh_; }
  int64_t run_id() const { return run_id_; }
  const std::string& db() const { return options_.db; }
  // "1 host x 4 chips"
  const std::string& topology() const { return topology_; }
  bool finished() const { return finished_; }
  // Whether writing the database failed (a full disk, a lock held too long):
  // the run should stop; Finish then ends it as 'incomplete' and says why.
  bool failed() const;
  // The first write error, naming the file (OK while none).
  absl::Status write_status() const;

 private:
  Recording(RecordingOptions options, Mesh mesh);
  // Simulated mode: waits for the queued runs and stores the schedule not yet stored.
  absl::Status StoreSimulation();
  // Simulated mode: stores the runs laid out since the last call (whole steps,
  // from the thread that runs programs), so a run killed part way keeps them.
  absl::Status StoreSimulatedSoFar(const runtime::Simulator& sim);
  // Finish, EndByHangDetector and EndWithError: `status` "finished", "hang
  // detected" or "failed", `note` why it ended so.
  absl::Status End(const std::string& status, const std::string& note);

  RecordingOptions options_;
  Mesh mesh_;
  std::string topology_;
  std::string previous_source_root_;
  std::unique_ptr<store::Writer> writer_;
  // Between the stack and the writer when capture is narrowed (null: everything goes to the writer).
  std::unique_ptr<trace::CaptureFilter> capture_;
  int64_t run_id_ = 0;
  // What of a simulated run's schedule is stored (StoreSimulatedSoFar).
  std::mutex sim_mu_;
  size_t sim_runs_stored_ = 0;
  std::set<int64_t> sim_programs_stored_;
  bool sim_chips_stored_ = false;
  absl::Status sim_status_;
  bool finished_ = false;
  absl::Status finish_status_;
  std::vector<runtime::Client::FaultWithoutEffect> faults_without_effect_;
};

}  // namespace shardscope
