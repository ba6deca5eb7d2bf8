// Streaming reader of Chrome trace event JSON (internal to store/, used by
// trace_import.cc): a file, gzipped or not, is inflated in fixed-size pieces
// and fed to nlohmann's SAX parser, which hands over one event of
// `traceEvents` at a time. No document is ever built, so memory does not grow
// with the file. Both forms are read: the object form ({"traceEvents": [...],
// "distributedInfo": {...}, ...}) and the bare array form ([{...}, ...]).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::store::internal {

// A pid or tid: Chrome traces use numbers ("pid": 4242) or strings
// ("pid": "CPU functions", "tid": "PyTorch Profiler").
struct JsonId {
  bool present = false;
  bool is_string = false;
  int64_t num = 0;
  std::string str;
};

// One element of traceEvents, with the fields and args the importer reads.
// Fields of a wrong JSON type are flagged (TraceEvent::kBad*), never thrown.
struct TraceEvent {
  enum Flags : uint32_t {
    kNotObject = 1u << 0,       // the element is not an object
    kBadPhase = 1u << 1,        // "ph" is not a string
    kNameNotString = 1u << 2,   // "name" is a number or a literal (kept as its text)
    kBadPidTid = 1u << 3,       // "pid"/"tid" is an object, array, literal or fraction
    kArgsNotObject = 1u << 4,   // "args" is not an object (ignored)
    kCatNotString = 1u << 5,    // "cat" is not a string (ignored)
  };
  enum class Num : uint8_t { kAbsent, kOk, kBad };

  int64_t index = 0;        // position in traceEvents, from 0
  uint64_t offset = 0;      // byte offset of the event in the (uncompressed) JSON text
  uint32_t flags = 0;
  std::string ph, name, cat;
  bool has_name = false;
  JsonId pid, tid;
  Num ts_state = Num::kAbsent, dur_state = Num::kAbsent;
  int64_t ts_ns = 0, dur_ns = 0;  // microseconds in the file, nanoseconds here
  std::string id;                 // flow id ("id", "id2.global/local"), as text
  bool has_id = false;
  std::string bp, scope;          // flow binding point; instant scope ("s")
  std::string bind_id;            // flow v2: "bind_id" with "flow_in"/"flow_out"
  bool flow_in = false, flow_out = false;

  // args
  int64_t correlation = -1, device = -1, stream = -1, seq = -1;
  int64_t step_num = -1;  // XLA's profiler (JAX, TensorFlow) marks a step's span with its number
  int64_t in_nelems = -1, out_nelems = -1, bytes = -1, sort_index = -1;
  std::string pg_name, pg_ranks, collective_name, dtype, arg_name, labels;
  std::vector<std::pair<std::string, double>> numbers;  // every numeric arg (counters, [memory])
  int non_numeric_args = 0;                             // of counters and instants: args that are not numbers
  // The call's shape, as compact JSON arrays ("[8,8,1]", "[[64,32],[32]]"):
  // a kernel's launch grid and block, an op's "Input Dims" (record_shapes);
  // "Input type" as its strings joined by commas. "External id" links a
  // kernel or runtime call to the op that launched it.
  std::string grid, block, input_dims, input_types;
  int64_t external_id = -1;
  // XLA's profiler: the device an op ran for (its CPU client's thunks run on
  // shared host threads), the execution it belongs to, and the HLO op and module.
  int64_t device_ordinal = -1, xla_run_id = 0;
  bool has_xla_run_id = false;  // any int64 (a uint64 past int64's top keeps its bits)
  bool bad_run_id = false;      // a run_id that is no integer of 64 bits ("abc", 3.5, 1e30)
  std::string hlo_op, hlo_module;
  // shardscope's own Chrome export (`shardscope export --chrome`): a slice's
  // kind and step, and a collective's wait for the other chips.
  std::string slice_kind;
  int64_t step = -1, wait_ns = -1;
  int64_t own_depth = -1;  // its depth on its lane, as stored (args.depth; an older export has none)
  int keys = 0;  // top-level keys the object had ({} has none)

  void Clear();
};

// One arg's value as the JSON reader met it (strings and floats keep their text).
struct ArgValue {
  enum Kind { kNull, kBool, kInt, kFloat, kString } kind;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string_view text{};  // a string's value, a float's text
};

// Sets what the importer reads from an event's arg `k` (correlation, hlo_op,
// step_num, the numbers of counters and instants...): one mapping of arg names
// for every reader of traces, JSON or XLA's XSpace.
void ApplyTraceArg(TraceEvent& e, const std::string& k, const ArgValue& v);

struct DeviceProperty {
  int64_t id = -1;
  std::string name;
  int64_t total_memory = 0;
};

// The top-level keys beside traceEvents (object form only).
struct TraceFileInfo {
  bool object_form = false;
  bool has_rank = false, has_world_size = false, has_base_time = false;
  int64_t rank = -1, world_size = -1;
  std::string backend;
  int64_t base_time_ns = 0;  // Kineto's baseTimeNanoseconds: ts are relative to it
  std::string display_time_unit;
  // otherData: "tool": "shardscope 0.1.0" marks shardscope's own export, which
  // also names the run's mesh and its modeled clock's profile.
  std::string tool, mesh, profile;
  std::string capture_note;  // what the exported run's capture left out
  // A part of a run (export --steps A:B): where its first step starts, the
  // end of the mark_step before it (ns, host clock); -1 when not said.
  int64_t first_step_from_ns = -1;
  // Each exported step's wall time as the run recorded it (steps.wall_ns), as
  // "STEP:NS,STEP:NS": read back exactly, not re-derived from mark_steps.
  std::string step_walls;
  std::vector<DeviceProperty> devices;
  std::string hostname;  // an XSpace's first host name
};

struct ParseOutcome {
  bool gzip = false;
  int64_t events = 0;              // elements of traceEvents delivered
  uint64_t file_bytes = 0;         // the file's size on disk
  uint64_t json_bytes = 0;         // uncompressed bytes read
  // Set when the input stopped early (a truncated gzip member, damaged
  // compressed data, JSON cut off); what was read before is kept.
  bool truncated = false;
  std::string truncation;          // what stopped it, where
  std::string truncation_stat;     // truncated_gzip | gzip_corrupt | truncated_json
  bool array_unterminated = false; // array form without its final ']' (allowed by the format)
  bool trailing_data = false;      // bytes after the top-level value (ignored)
  bool second_document = false;    // another JSON document after the first (not read)
  bool gzip_trailing_garbage = false;
  bool gzip_checksum_mismatch = false;  // the JSON was whole, the gzip CRC or length did not match
  bool gzip_trailer_missing = false;    // the JSON was whole, the gzip stream ended in its trailer
  int64_t lone_surrogates = 0;          // "\ud800" escapes without their pair, read as U+FFFD
  int64_t non_finite = 0;               // bare NaN, Infinity, inf... (not JSON), read as null
  int64_t bad_utf8 = 0;                 // bytes that are not UTF-8, read as U+FFFD
  bool events_repeated = false;         // a second "traceEvents" key: its events read too
  // XLA's XSpace protobuf (.xplane.pb) rather than JSON: json_bytes are then
  // the protobuf's, inflated.
  bool xspace = false;
  int64_t xspace_aggregated_events = 0;  // XEvents that count occurrences over a line, with no time
  int64_t xspace_profiler_errors = 0;    // errors and warnings the profiler wrote into the XSpace
  std::string xspace_first_error;        // the first of them
  int64_t xspace_damaged = 0;            // planes and lines whose bytes do not parse: left out
  std::string xspace_damage;             // where the first one is
  int64_t xspace_unnamed_events = 0;     // events whose metadata id names no event of their plane
  std::string xspace_first_unnamed;      // where the first one is
  int64_t xspace_duplicate_planes = 0;   // planes named as an earlier one (two profiles concatenated?)
  std::string xspace_first_duplicate;    // the first one's name
};

// Reads the trace at `path`, calling `on_event` for each event in file order
// and `on_progress` with the file's bytes read and the JSON bytes parsed so
// far (every 256 KiB of file).
// Errors (InvalidArgument/NotFound/PermissionDenied) name the file and, for
// bad JSON, the byte offset and the event index; a file that ends early is
// not an error (ParseOutcome::truncated) once at least the start of
// traceEvents was read.
absl::StatusOr<ParseOutcome> ReadChromeTrace(const std::string& path, TraceFileInfo* info,
                                             const std::function<void(TraceEvent&)>& on_event,
                                             const std::function<void(uint64_t, uint64_t)>& on_progress = nullptr);

// Microseconds as JSON number text ("123", "-4.5", "1.25e3") to integer
// nanoseconds, exactly for plain decimals; false when it is not a number or
// is out of range (beyond about +-100 years).
bool MicrosTextToNs(std::string_view text, int64_t* ns);

}  // namespace shardscope::store::internal
