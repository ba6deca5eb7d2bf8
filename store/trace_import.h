// `shardscope import`: Chrome trace event JSON (PyTorch profiler / Kineto
// traces above all) read into the store as one imported run. docs/import.md
// has the mapping; in short, each file is one rank and becomes one host, its
// CPU threads host tracks (host clock), its GPU streams device lanes (device
// clock); slices keep their kinds, launches and kernels their flows;
// collectives are matched across the ranks present, per-rank clock offsets
// estimated from their ends. Every event that could not be used is counted by
// reason in `import_stats`, one row per file goes to `trace_imports`.
//
// Streaming: files are parsed event by event (never a whole-file document),
// events are kept as fixed-size records that spill to sorted temporary files
// past a bound, and are written through store::Writer, so memory stays
// bounded whatever the size of the trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::store {

struct ImportOptions {
  // Draw a progress bar on stderr (the CLI sets it when stderr is a terminal).
  bool progress = false;
  // Records held in memory before a sorted chunk is spilled to a temporary
  // file (64 bytes each); smaller bounds memory further, at some speed.
  int64_t chunk_records = 1 << 17;
  // Where spilled chunks go; "" means $TMPDIR or /tmp. They are unlinked at once.
  std::string temp_dir;
};

// One reason events were unusable or odd, as Perfetto's `stats` table.
struct ImportStat {
  std::string name;         // e.g. x_event_negative_dur
  int64_t count = 0;
  std::string severity;     // info | data_loss | error
  std::string description;  // what it means, and where the first one was
};

struct ImportedFile {
  std::string path;
  int rank = 0;
  int world_size = 1;
  int host_id = 0;
  bool offset_known = false;      // false: no matched collective to estimate it from
  int64_t clock_offset_ns = 0;    // added to this rank's times to line it up with the reference rank
  std::string offset_source;      // e.g. "7 matched gloo collectives", "reference rank"
  int64_t events = 0;             // elements of traceEvents
  int64_t first_ts_ns = 0;        // run-relative, after the offset
  int64_t last_ts_ns = 0;
  bool truncated = false;
  std::string truncation;         // what cut it short
  bool gzip = false;
  uint64_t file_bytes = 0, json_bytes = 0;  // json_bytes: the inflated JSON or XSpace protobuf
  bool xspace = false;                       // XLA's XSpace (.xplane.pb), not Chrome trace JSON
};

struct ImportResult {
  int64_t run_id = 0;
  std::string db_path;
  std::vector<ImportedFile> files;  // in rank order
  std::vector<ImportStat> stats;    // by severity (error, data_loss, info), then name
  int64_t slices = 0, tracks = 0, flows = 0, counters = 0, steps = 0, hosts = 0, devices = 0;
  int64_t x_events = 0, x_events_unusable = 0;  // complete events, and those dropped
  int64_t collectives = 0, collectives_matched = 0;
  int64_t xla_collectives = 0, xla_collectives_matched = 0;  // HLO collectives on XLA's device lanes
  int64_t xla_collectives_by_execution = 0;  // of them, those whose execution (run_id, theirs or their module's) is known
  // What the devices are, for the summary: "GPU", "TPU" or "CPU device" when all are one kind, else "device".
  std::string device_word = "GPU";
  uint64_t input_bytes = 0, json_bytes = 0;
  double seconds = 0;        // all of it
  double read_seconds = 0;   // parsing the files (phase 1), the rest is matching and writing
};

// Imports `files` (one per rank) into the database at `db_path` (created when
// missing) as one new run. Fails before writing anything when a file cannot
// be read as a Chrome trace: the error names the file and, for bad JSON, the
// byte offset and event index. A file cut short (truncated gzip or JSON) keeps
// what was read and says so in the stats (severity data_loss).
absl::StatusOr<ImportResult> ImportChromeTraces(const std::vector<std::string>& files, const std::string& db_path,
                                                const ImportOptions& options = {});

// What the import did, for a terminal: the run, each file's rank and clock
// offset, and every import_stats row.
// As ImportChromeTraces, but files that are several profiling windows of the
// same ranks (tensorboard_trace_handler writes a file per rank per cycle with
// schedule(..., repeat=N); distributedInfo says each file's rank) become one
// run per window: the k-th file of every rank, by start time, is window k.
// Other files give one run, as ImportChromeTraces does.
absl::StatusOr<std::vector<ImportResult>> ImportChromeTraceWindows(const std::vector<std::string>& files,
                                                                   const std::string& db_path,
                                                                   const ImportOptions& options = {});

std::string RenderImportSummary(const ImportResult& r);

// The files that `import`'s arguments name: files as they are; a directory
// stands for the traces in it (*.xplane.pb[.gz], *.pt.trace.json[.gz]) or, as
// a TensorBoard log directory, in its one profile plugins/profile/RUN/ (an
// error names the runs when there are several, and a directory with none).
absl::StatusOr<std::vector<std::string>> ExpandTraceArgs(const std::vector<std::string>& args);

}  // namespace shardscope::store
