// See trace_import.h and docs/import.md.
//
// Two phases. Phase 1 reads every file (trace_json.h) and turns each usable
// event into a 64-byte record (Rec) holding interned names, rank-local
// nanoseconds and the ids that link events; records go to a bounded buffer
// that is sorted and spilled to an unlinked temporary file when full. The few
// things needed across the whole set — ProfilerStep spans, collectives,
// correlation ids, metadata — are kept aside, small. Between the phases,
// collectives are matched across ranks, flows numbered and clock offsets
// estimated. Phase 2 merges the sorted records back, per thread and in time
// order, nests slices with a stack per lane and writes them through
// store::Writer. Nothing is written before every file has been read, so a
// file that is not a trace leaves the database untouched.
#include "store/trace_import.h"

#include <malloc.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/algorithm/container.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "profiler/trace/records.h"
#include "store/json_text.h"
#include "store/sqlite_util.h"
#include "store/trace_json.h"
#include "store/writer.h"

namespace shardscope::store {

// The payload of a duplicate-rank refusal: every file's rank and start (JSON).
constexpr char kRanksPayload[] = "shardscope.dev/import-ranks";

namespace {


using internal::TraceEvent;
using trace::SliceKind;

// ---------------------------------------------------------------------------
// import_stats: every reason an event was dropped or changed.

struct StatDef {
  const char* name;
  const char* severity;
  const char* description;
};

constexpr StatDef kStatDefs[] = {
    {"unusable_x_events_over_1pct", "error",
     "more than 1% of the complete (X) events could not be used: the timeline misses a noticeable part of the "
     "trace (the other rows say why)"},
    {"x_event_negative_dur", "data_loss", "complete (X) events with a negative duration: dropped"},
    {"x_event_bad_dur", "data_loss", "complete (X) events without a numeric \"dur\": dropped"},
    {"bad_timestamp", "data_loss", "events whose \"ts\" is missing, not a number or beyond +-100 years: dropped"},
    {"bad_pid_tid", "data_loss", "events whose pid or tid is not a number or a string: dropped"},
    {"event_not_object", "data_loss", "elements of traceEvents that are not objects: dropped"},
    {"missing_phase", "data_loss", "events without a \"ph\" (or with one that is not a string): dropped"},
    {"unknown_phase", "data_loss", "events whose \"ph\" is no phase of the Chrome trace event format: dropped"},
    {"async_missing_id", "data_loss", "async events (ph b/e/n, S/T/p/F) without an \"id\": dropped"},
    {"async_step_ignored", "info",
     "async step events (ph T/p): skipped; the S..F slice they divide is kept whole"},
    {"async_unmatched_end", "data_loss",
     "async ends (ph e/F) with no open begin of that name on their (process, category, id) lane: dropped"},
    {"unsupported_phase", "info",
     "events of phases that carry no timeline slice here (object O/N/D, sample P, mark R, clock sync c, memory "
     "dump v/V, context ( )): skipped"},
    {"unmatched_end", "data_loss", "E events with no B event on their thread to close: dropped"},
    {"end_before_its_begin_in_file", "info",
     "E events written before the B they close (a file not in time order): paired as the events sorted by time "
     "would be"},
    {"end_before_begin", "data_loss", "E (or async e/F) events earlier than the begin they close: the pair is dropped"},
    {"begin_without_end", "data_loss", "B (or async b/S) events never closed: kept, ending at the file's last timestamp"},
    {"truncated_gzip", "data_loss", "files whose gzip stream ends early: the events before the cut are imported"},
    {"gzip_corrupt", "data_loss", "files whose gzip data is damaged: the events before the damage are imported"},
    {"truncated_json", "data_loss", "files whose JSON ends in the middle: the events before the cut are imported"},
    {"truncated_xspace", "data_loss",
     "XSpace files (XLA's .xplane.pb) that end inside a plane: the planes before it are imported, that one and any "
     "after it are lost"},
    {"xspace_aggregated_events", "info",
     "XSpace events that count occurrences over their line instead of holding a time: not timeline slices, skipped"},
    {"device_work_outside_steps", "data_loss",
     "files (ranks) whose devices did most of their work outside the host's step spans, with no launch or "
     "dispatch (XLA's run_id) inside a step to tie it to one (asynchronous dispatch: JAX returns before the "
     "device runs the step): that work belongs to no "
     "step, so per-step figures and fleet miss it; mark steps around a blocking call (block_until_ready) or "
     "record launches"},
    {"steps_run_after_dispatch", "info",
     "runs whose devices did most of their work after the host's step span had ended (asynchronous dispatch: "
     "JAX returns before the device runs the step): device ops are tied to the step that launched them (a "
     "launch's correlation id, or XLA's run_id on the host's dispatch), so per-step device figures and fleet "
     "hold them; a step's host-clock time (steps.wall_ns) is its dispatch, not its devices' work"},
    {"xspace_event_without_metadata", "data_loss",
     "XSpace events whose metadata id names no event kind of their plane (a damaged or hand-made profile): kept, "
     "named '<unknown>', without their kind's stats"},
    {"xspace_duplicate_planes", "data_loss",
     "XSpace planes named as an earlier plane of the same file (two profiles concatenated, as `cat a.xplane.pb "
     "b.xplane.pb` makes one): their lines are read as one device's or host's, so their events may overlap; "
     "import each profile as a file of its own"},
    {"run_id_unusable", "data_loss",
     "events whose args.run_id is no integer of 64 bits (\"abc\", 3.5, 1e30): not tied to their XLA execution by "
     "it, so their step is taken by time and the host's dispatch of them is not seen"},
    {"run_id_dispatched_twice", "data_loss",
     "XLA run ids dispatched by the host in two steps (reused, or traces merged by hand): they tie no op to a "
     "step, whose steps are then taken by time"},
    {"xspace_damaged", "data_loss",
     "planes or lines of an XSpace (XLA's .xplane.pb) whose bytes do not parse: left out, the rest imported"},
    {"xspace_profiler_errors", "info",
     "errors and warnings XLA's profiler wrote into the XSpace (what it could not collect; the first "
     "is quoted)"},
    {"slice_overlaps_parent", "info",
     "slices that start inside another on their thread and end after it, mostly inside it (improper nesting, often "
     "rounding to whole microseconds): clipped to end with it"},
    {"slice_overlaps_previous", "info",
     "slices that start before the one before them on their lane ends, mostly after it (kernels of one stream "
     "whose timestamps overlap by rounding): started when it ends, beside it, not nested in it"},
    {"instant_not_thread_scoped", "info", "global or process instant events (s: g/p): skipped, no thread to place them on"},
    {"counter_not_numeric", "info", "counter (C) events without a numeric arg: dropped"},
    {"name_not_string", "info", "events whose name is not a string: kept, named by the value's text"},
    {"args_not_object", "info", "events whose args is not an object: the args are ignored"},
    {"flow_missing_id", "info", "flow events (s/t/f) without an id: dropped"},
    {"flow_without_target", "info", "flows with a start and no end among the files: not linked"},
    {"flow_without_source", "info",
     "flows with an end and no start among the files: not linked (Kineto ends ac2g flows on host calls such as "
     "cudaStreamIsCapturing and cudaEventRecord without starting them)"},
    {"flow_unbound", "info", "flow events with no slice on their thread at their time to attach to: dropped"},
    {"slice_with_several_flows", "info",
     "slices bound to more than one flow: a slice keeps one flow id (the first), the others are not linked"},
    {"kernel_without_launch", "info",
     "GPU events whose correlation id matches no launch of their rank (the launch fell outside the profiled "
     "window): no launch flow"},
    {"collective_unmatched", "info",
     "collectives that no other imported rank's collective matched: their other ranks are not among the files, "
     "or recorded a different sequence"},
    {"collective_partial", "info", "collectives matched on some but not all of the imported ranks of their group"},
    {"step_number_repeated", "info",
     "ProfilerStep numbers that appear at two separate times in one file (a profiler schedule that restarted its "
     "count): the spans share that step number"},
    {"p2p_not_matched", "info",
     "point-to-point sends and receives in a trace that numbers no call (older PyTorch): a send pairs with its "
     "peer's receive, which the trace does not name, so they are not matched across ranks; they stay on their "
     "rank's timeline, and ranks are compared by their collectives"},
    {"collective_order_ambiguous", "data_loss",
     "ranks that called a collective a different number of times in a step, or whose collectives matched by order "
     "cannot all overlap under any one clock offset, in a trace that names no process group (older PyTorch): "
     "calls of different subgroups were likely paired, or the files are of different runs (such a trace's clock "
     "counts from its process's start, so two jobs' files cannot be told apart by time), so clock offsets and "
     "late arrivals drawn from them may be wrong (fleet compares no ranks on them); a newer PyTorch's traces name "
     "each call's group"},
    {"host_wait_derived", "info",
     "device idle gaps whose next op was launched (a GPU's kernel or copy), or its XLA execution dispatched, only "
     "after the device went idle: stored as 'waiting for host' slices (kind host_wait, category derived) on a "
     "lane of their own per device"},
    {"host_wait_unknown", "info",
     "runs in which a rank's device ops (the first such rank named) carry no launch the trace recorded (XLA "
     "traces without run ids; CUDA activity without CPU activity): a device's waits for the host cannot be told "
     "from its idle time, so none are counted"},
    {"empty_event", "info", "empty objects ({}) in traceEvents (XLA's profiler ends its list with one): skipped"},
    {"unknown_slice_kind", "data_loss",
     "slices of a shardscope export whose args.kind names no kind shardscope records: kept, of the kind their "
     "lane gives (compute on a chip, host on a host)"},
    {"begin_end_out_of_order", "info",
     "threads whose B/E events are not in time order in the file: from the first out of order on, held and paired "
     "in time order when the file ends (at one time, ends before begins, as back-to-back slices need)"},
    {"begin_end_ambiguous", "data_loss",
     "times at which a thread whose B/E events are out of order has both a B and an E that the file's order "
     "does not pair: back-to-back slices and a zero-length slice cannot be told apart there (ends are taken "
     "first), so slices and steps near them may be wrong; sort the file by ts or write complete (X) events"},
    {"counter_value_not_numeric", "data_loss",
     "counter (C) events with some args that are not numbers (nor strings holding one): those values are "
     "dropped, the numeric ones kept"},
    {"nesting_too_deep", "data_loss",
     "slices nested more than 32767 deep on their lane: stored at depth 32767 (their parent_id is right, the "
     "timeline draws them on the deepest row)"},
    {"invalid_utf8", "info",
     "bytes that are not UTF-8 (a name from a C tool in Latin-1; JSON must be UTF-8, and its parsers refuse the "
     "whole file): each read as U+FFFD, as viewers show it"},
    {"same_process_files", "error",
     "files without distributedInfo that come from the same process as another (the same process id, or "
     "tensorboard_trace_handler's file names of one worker): likely two windows of one process (a file per "
     "profiling cycle), imported as two ranks whose collectives and clocks do not line up; import each window on "
     "its own"},
    {"identical_files", "error",
     "files that hold the same bytes, or the same events (one of them compressed), as another given with them: two "
     "ranks never record identical traces, so one is likely a copy, a rank in perfect step with another that makes "
     "its collectives look healthy; give each rank's own trace"},
    {"ranks_not_concurrent", "error",
     "files that do not overlap in time with the reference rank's on their own clocks, lined up only by an offset "
     "of more than a second: one job's ranks record at the same time, so these are likely traces of different "
     "jobs (or of hosts whose clocks are minutes apart); import one job's files together"},
    {"trace_events_repeated", "info",
     "files with a second \"traceEvents\" key: the events of every such array are imported (a JSON parser "
     "keeps only the last, and a viewer may show fewer)"},
    {"own_export", "info",
     "files written by `shardscope export --chrome`: read back as the run they came from (a process per chip and "
     "clock, each slice's kind and step from its args, a collective's wait for the others as its arrival)"},
    {"xla_collective_ambiguous", "info",
     "XLA collectives whose HLO op and execution (or place in order) matched two instances on one device: not "
     "linked across devices"},
    {"collective_seq_duplicate", "info",
     "a rank holds two collectives of one process group with the same sequence number: that group is matched by "
     "order instead"},
    {"collective_match_conflict", "info",
     "collectives whose cross-rank matches disagree with their launches or enclosing ops: each kind of event "
     "(c10d op, backend op, kernel) keeps its own cross-rank flow instead of one for all"},
    {"clock_offset_unknown", "info",
     "ranks whose clock offset could not be estimated (no collective kernel or gloo collective matched with the "
     "reference rank): their times are placed as recorded"},
    {"clock_offset_inconsistent", "info",
     "ranks where no single clock offset makes every matched collective overlap on both ranks: the median of "
     "the end differences is used as is"},
    {"bad_base_time", "info", "files whose baseTimeNanoseconds is negative or beyond 2096: ignored, times placed as recorded"},
    {"display_time_unit_ignored", "info",
     "files that set displayTimeUnit: it changes only how viewers display times; ts and dur are microseconds "
     "either way (as chrome://tracing and Perfetto read them)"},
    {"json_array_unterminated", "info", "array-form files without their final ']' (the format allows it)"},
    {"trailing_data", "info", "files with more bytes after the JSON value: ignored"},
    {"gzip_trailing_garbage", "info", "gzip files with bytes after the last gzip member: ignored"},
    {"second_json_document", "data_loss",
     "files holding a second JSON document after the first (two traces concatenated): only the first is imported; "
     "give each trace as its own file"},
    {"gzip_checksum_mismatch", "data_loss",
     "gzip files whose checksum does not match their data: the file is damaged, and what was imported may be wrong"},
    {"non_finite_literal", "data_loss",
     "bare NaN, Infinity or inf values (Python's json and some profilers write them; JSON has none, and parsers "
     "refuse the whole file): read as null, so a field that needs a number (ts, dur) drops its event, counted "
     "under its own reason"},
    {"lone_surrogate_escape", "info",
     "\\u escapes of half a UTF-16 surrogate pair (Python's json writes them for undecodable bytes; JSON parsers "
     "refuse them): read as U+FFFD"},
    {"gzip_trailer_missing", "info",
     "gzip files that end inside their trailer, after the whole JSON: nothing lost, but the checksum went unchecked"},
};

const StatDef* FindStat(std::string_view name) {
  for (const StatDef& d : kStatDefs)
    if (name == d.name) return &d;
  return nullptr;
}

struct StatAcc {
  int64_t count = 0;
  std::string first;   // where the first one was
  std::string detail;  // or what it amounts to, said instead
};

// ---------------------------------------------------------------------------
// Records of phase 1.

// Times beyond this (about 126 years in ns) are not trusted: sums of a few
// of them stay within int64.
constexpr int64_t kMaxNs = 4000000000000000000;

// kDeviceOp: a copy of a GPU op's times and launch on its GPU's "waiting for host" thread, from which
// phase 2 works out the GPU's waits (Importer::HostWait).
enum RecType : uint8_t { kFlowNext = 0, kSlice = 1, kFlowEnclosing = 2, kCounter = 3, kDeviceOp = 4 };
enum Lane : uint8_t { kHostLane = 0, kDeviceLane = 1, kAnnotationLane = 2 };
enum RecFlags : uint8_t {
  kCollective = 1,
  kAc2g = 2,        // a flow point whose id is a CUDA correlation id
  kFlowStart = 4,   // a flow point that starts its flow (s; v2 flow_out)
  kFlowEnd = 8,     // a flow point that ends it (f; v2 flow_in)
  kOwnStep = 16,    // a slice of shardscope's own export: corr holds its step (args.step), not a correlation
  kOwnDepth = 32,   // a slice of shardscope's own export: shape holds its depth + 1 (args.depth), not a shape
  kRunId = 64,      // a slice of XLA's execution: corr holds its run id (args.run_id), not a correlation
};

// One event as phase 1 keeps it (64 bytes; sorted and spilled as is).
struct Rec {
  int64_t ts = 0;     // rank-local nanoseconds (baseTimeNanoseconds not yet added)
  int64_t dur = 0;    // slices: duration; counters: the value's bits
  int64_t corr = -1;  // CUDA correlation id (slices, ac2g flow points); see kOwnStep, kRunId
  int64_t bytes = 0;
  uint64_t seq = 0;   // order of appearance over the whole import
  uint32_t thread = 0;
  uint32_t name = 0;
  uint32_t cat = 0;
  uint32_t flow = 0;  // generic flow key + 1; 0: none
  uint8_t type = kSlice;
  uint8_t lane = kHostLane;
  uint8_t kind = static_cast<uint8_t>(SliceKind::kHost);
  uint8_t flags = 0;
  uint32_t shape = 0;  // Importer::shapes_ id + 1; 0: none (kOwnDepth: the slice's depth + 1)
};
static_assert(sizeof(Rec) == 64);

bool RecLess(const Rec& a, const Rec& b) {
  if (a.thread != b.thread) return a.thread < b.thread;
  if (a.ts != b.ts) return a.ts < b.ts;
  if (a.type != b.type) return a.type < b.type;
  if (a.type == kSlice && a.dur != b.dur) return a.dur > b.dur;  // the longer one is the parent
  return a.seq < b.seq;
}

// Records in a bounded buffer; full buffers are sorted and written to
// unlinked temporary files, read back in one merged, sorted stream.
class Spiller {
 public:
  Spiller(size_t cap, std::string dir) : cap_(std::max<size_t>(cap, 16)), dir_(std::move(dir)) {}
  ~Spiller() {
    for (Run& r : runs_)
      if (r.f) std::fclose(r.f);
  }

  absl::Status Push(const Rec& r) {
    buf_.push_back(r);
    ++total_;
    if (buf_.size() >= cap_) return Spill();
    return absl::OkStatus();
  }
  int64_t total() const { return total_; }
  int spilled_chunks() const { return static_cast<int>(runs_.size()); }

  // Ends phase 1: what is buffered is sorted (and spilled, when earlier chunks were).
  absl::Status Finish() {
    if (!runs_.empty() && !buf_.empty()) {
      if (absl::Status st = Spill(); !st.ok()) return st;
    }
    if (runs_.empty()) {
      std::sort(buf_.begin(), buf_.end(), RecLess);
      return absl::OkStatus();
    }
    buf_.clear();
    buf_.shrink_to_fit();
    return Rewind();
  }

  // Starts the sorted stream over (a second pass).
  absl::Status Rewind() {
    next_ = 0;
    heap_ = decltype(heap_)(HeapLess{&runs_});
    for (Run& r : runs_) {
      std::rewind(r.f);
      r.buf.resize(kReadRecs);
      Refill(r);
    }
    for (size_t i = 0; i < runs_.size(); ++i)
      if (runs_[i].pos < runs_[i].n) heap_.push(i);
    return error_;
  }

  // The next record in sorted order; false at the end (or on a read error: error()).
  bool Next(Rec* out) {
    if (runs_.empty()) {
      if (next_ >= buf_.size()) return false;
      *out = buf_[next_++];
      return true;
    }
    if (heap_.empty()) return false;
    size_t i = heap_.top();
    heap_.pop();
    Run& r = runs_[i];
    *out = r.buf[r.pos++];
    if (r.pos >= r.n) Refill(r);
    if (r.pos < r.n) heap_.push(i);
    return true;
  }
  const absl::Status& error() const { return error_; }

 private:
  static constexpr size_t kReadRecs = 4096;
  struct Run {
    FILE* f = nullptr;
    std::vector<Rec> buf;
    size_t pos = 0, n = 0;
  };
  struct HeapLess {
    const std::vector<Run>* runs;
    bool operator()(size_t a, size_t b) const {
      return RecLess((*runs)[b].buf[(*runs)[b].pos], (*runs)[a].buf[(*runs)[a].pos]);
    }
  };

  FILE* TempFile() {
    std::string dir = dir_;
    if (dir.empty()) {
      const char* t = std::getenv("TMPDIR");
      dir = t && *t ? t : "/tmp";
    }
    std::string tmpl = dir + "/shardscope-import-XXXXXX";
    int fd = mkstemp(tmpl.data());
    if (fd < 0) return nullptr;
    ::unlink(tmpl.c_str());  // gone when closed, whatever happens to the process
    return fdopen(fd, "w+b");
  }

  absl::Status Spill() {
    std::sort(buf_.begin(), buf_.end(), RecLess);
    Run r;
    r.f = TempFile();
    if (!r.f)
      return absl::ResourceExhaustedError(absl::StrCat("cannot make a temporary file for the import in ",
                                                       dir_.empty() ? "$TMPDIR or /tmp" : dir_, ": ",
                                                       std::strerror(errno)));
    if (std::fwrite(buf_.data(), sizeof(Rec), buf_.size(), r.f) != buf_.size() || std::fflush(r.f) != 0) {
      std::fclose(r.f);
      return absl::ResourceExhaustedError(
          absl::StrCat("writing the import's temporary file failed (", std::strerror(errno),
                       "); free space in $TMPDIR or /tmp, or set TMPDIR to a disk with room"));
    }
    runs_.push_back(std::move(r));
    buf_.clear();
    return absl::OkStatus();
  }

  void Refill(Run& r) {
    r.pos = 0;
    r.n = std::fread(r.buf.data(), sizeof(Rec), r.buf.size(), r.f);
    if (r.n == 0 && std::ferror(r.f) && error_.ok())
      error_ = absl::DataLossError(absl::StrCat("reading the import's temporary file failed: ", std::strerror(errno)));
  }

  size_t cap_;
  std::string dir_;
  std::vector<Rec> buf_;
  size_t next_ = 0;
  int64_t total_ = 0;
  std::vector<Run> runs_;
  std::priority_queue<size_t, std::vector<size_t>, HeapLess> heap_{HeapLess{&runs_}};
  absl::Status error_;
};

// Strings kept once: names, categories, flow keys.
class Interner {
 public:
  uint32_t Id(std::string_view s) {
    auto it = map_.find(s);
    if (it != map_.end()) return it->second;
    strs_.emplace_back(s);
    uint32_t id = static_cast<uint32_t>(strs_.size() - 1);
    map_.emplace(strs_.back(), id);
    return id;
  }
  const std::string& Str(uint32_t id) const { return strs_[id]; }
  size_t size() const { return strs_.size(); }

 private:
  std::deque<std::string> strs_;  // stable addresses for the map's views
  std::unordered_map<std::string_view, uint32_t> map_;
};

// ---------------------------------------------------------------------------
// What phase 1 keeps aside.

struct ThreadInfo {
  uint32_t file = 0;
  uint32_t process = 0;
  std::string tid_text;
  int64_t tid_num = -1;
  std::string name;             // from thread_name metadata
  int local_device = -1;        // the GPU of its device lanes (-2: not yet known)
  int64_t stream = -1;
  std::string device_word = "GPU";    // XLA's processes also name TPU; its CPU client "CPU device"
  bool xla = false;                   // a device lane of XLA's profiler (its collectives matched by HLO op)
  uint32_t host_thread = UINT32_MAX;  // a CPU device's ops kept aside: the host thread they ran on
  uint32_t wait_thread = UINT32_MAX;  // a GPU stream: its GPU's "waiting for host" thread, once made
  bool own = false;                   // a chip's lane in shardscope's own export (kind, step, wait from args)
  bool modeled = false;               // ... on the modeled clock
  int64_t track[3] = {0, 0, 0}; // per lane, once made in phase 2
};

struct ProcessInfo {
  uint32_t file = 0;
  std::string pid_text;
  int64_t pid_num = -1;
  bool pid_is_string = false;
  std::string name, labels;     // process_name / process_labels metadata
  int chip = -1;                // shardscope's own export: "chip N (device clock)" or "(modeled clock)"
  bool modeled = false;
  int host = -1;                // shardscope's own export: "host N (host clock)", or a chip's label "host N"
};

struct StepSpan {
  int64_t start = 0, end = 0;   // rank-local ns
  int step = 0;
};

struct HostCorr {
  int64_t corr = 0;
  int64_t ts = 0;        // the launch's time; kNoTime when only an ac2g flow start told of it
  uint32_t thread = 0;
};
constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

enum Family : uint8_t { kFamKernel = 0, kFamBackend = 1, kFamParamComms = 2, kFamC10d = 3 };

struct Coll {
  uint64_t seq = 0;             // the slice's Rec::seq
  uint32_t file = 0, thread = 0;
  uint8_t family = 0;
  bool gloo = false;
  uint32_t op = 0, group = 0;   // interned
  std::string ranks;            // "Process Group Ranks", when given
  int64_t seq_arg = -1;
  int64_t ts = 0, end = 0;      // rank-local ns
  int64_t corr = -1;
  int step = -1;
};

// An XLA collective on a device lane, matched across devices by its HLO op
// and execution (run_id), else by its place in order within its step.
struct XlaColl {
  uint64_t seq = 0;
  uint32_t file = 0, thread = 0;  // the device lane's thread
  uint32_t host_thread = 0;       // where a CPU client's Rendezvous tells its device group
  int device = -1;
  uint32_t module = 0, op = 0;    // interned
  bool has_run_id = false;
  int64_t run_id = 0;             // the execution (XLA's RunId: any int32)
  int64_t ts = 0, end = 0;
};

// XLA's CPU client's rendezvous: the global devices of one collective.
struct Rendezvous {
  int64_t ts = 0;
  std::string devices;  // "0, 2, 4, 6"
};

// XLA's CPU devices are numbered apart from GPUs and TPUs in a file's local
// device ids (a trace can hold GPU 0 and CPU device 0); shown as their ordinal.
constexpr int kCpuDeviceBase = 1 << 20;
int ShownIndex(int local) { return local >= kCpuDeviceBase ? local - kCpuDeviceBase : local; }

// A device's own work: the idle gaps before it may be waits for the host.
bool DeviceWork(SliceKind k) {
  return k == SliceKind::kCompute || k == SliceKind::kTransfer || k == SliceKind::kCollective;
}

// AddSlice's thread: the event's own (pid, tid).
constexpr uint32_t kOwnThread = UINT32_MAX;

struct OpenBegin {
  TraceEvent event;
  uint32_t thread = kOwnThread;  // an async lane (AsyncLaneOf), or the event's own thread
};

struct HeldBeginEnd {
  int64_t ts = 0, index = 0;           // time, and position in traceEvents
  std::unique_ptr<TraceEvent> begin;   // a B; null for an E
  // Among events at one time, Es go first (a slice that ends where the next
  // begins, common at microsecond resolution), but a B followed at once in
  // the file by an E at its time (a zero-length slice) goes with them.
  uint8_t order = 0;
};
// B events held for pairing in time order, over a file: beyond this (about
// 1 KB each) the file is refused and asked to be sorted.
constexpr int64_t kMaxHeldBegins = 262144;

struct FileState {
  std::string path;
  internal::TraceFileInfo info;
  internal::ParseOutcome outcome;
  int rank = 0, world_size = 1;
  int64_t first_ts = INT64_MAX, last_ts = INT64_MIN;  // rank-local ns
  int64_t base = 0;       // baseTimeNanoseconds, 0 when absent
  // Its events' fingerprint: a copy of another rank's trace holds the same
  // events in other bytes (one gzipped), which a byte comparison misses.
  size_t content_hash = 0;
  int64_t content_events = 0;
  int64_t offset = 0;     // estimated clock offset
  bool offset_known = false;
  std::string offset_source;
  int64_t x_events = 0, x_unusable = 0;
  std::vector<StepSpan> steps;
  // shardscope's own export (otherData.tool "shardscope ..."): each step's
  // span over its slices (args.step), for want of ProfilerStep spans.
  bool own_export = false;
  std::map<int, std::pair<int64_t, int64_t>> own_steps;
  std::map<int, int64_t> own_mark_step_end;  // a step ends when its mark_step does (docs/schema.md, steps)
  int64_t own_host_first = INT64_MAX;         // the earliest host-lane slice of shardscope's own export
  // Correlation ids seen, sorted and matched between the phases (about 48 bytes per launch).
  std::vector<HostCorr> host_corr;    // launches (cuda_runtime slices, ac2g starts)
  std::vector<int64_t> dev_corr;      // GPU-side slices (kernels, memcpy, memset)
  std::vector<int64_t> flow_starts, flow_ends;  // ac2g flow events (s, f)
  std::vector<HostCorr> linked;      // correlations seen on both sides, by corr
  int64_t device_ns = 0, device_ns_outside_steps = 0;  // its devices' top-level work, and that in no step
  // XLA's executions by the host's dispatch (CommonPjRtLoadedExecutable::Execute and its
  // kin carry args.run_id, and no device): run id -> its dispatch slices' earliest and
  // latest start; the earliest is the time a device's ops of it take their step from.
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> dispatch;
  // Its devices' ops whose launch (or dispatch) is known, and idle gaps before an op of unknown launch.
  int64_t ops_launched = 0, gaps_unknown = 0;
  int64_t corr_flow_base = 0;
  std::unordered_map<uint32_t, std::vector<OpenBegin>> open_begins;
  // E events that came before any B they could close (a file not in time
  // order): (ts, index in traceEvents) per thread, tried against the B events
  // still open when the file ends.
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> early_ends;
  // B/E events of a thread that came out of time order: held from there on
  // and paired in time order when the file ends, as chrome://tracing and
  // Perfetto sort them first. A thread in order holds only its open Bs.
  std::unordered_map<uint32_t, int64_t> be_last_ts;
  std::unordered_map<uint32_t, std::vector<HeldBeginEnd>> be_held;
  int64_t be_held_begins = 0;
  std::map<int, int> devices;        // local GPU index -> global device id
  // Shapes (Importer::shapes_ id + 1) by External id of the ops that recorded
  // input dims, and by correlation id of the launches those ops made: dense
  // ids, 4 bytes each, kept through phase 1 only.
  std::vector<uint32_t> op_shape, launch_shape;
};

struct GenericFlow {
  bool start = false, end = false;
  int64_t id = -1;  // flow id, once numbered
};

// The importer's state across both phases.
class Importer {
 public:
  Importer(const ImportOptions& o) : opts_(o), spill_(static_cast<size_t>(o.chunk_records), o.temp_dir) {}

  absl::StatusOr<ImportResult> Run(const std::vector<std::string>& paths, const std::string& db_path);

 private:
  // phase 1
  absl::Status ReadFile(size_t index);
  void OnEvent(FileState& f, uint32_t file, TraceEvent& e);
  void AddSlice(FileState& f, uint32_t file, const TraceEvent& e, int64_t dur, uint32_t thread = kOwnThread);
  uint32_t ShapeOf(FileState& f, const TraceEvent& e, Lane lane);
  void AsyncEvent(FileState& f, uint32_t file, const TraceEvent& e);
  uint32_t AsyncLaneOf(uint32_t file, const TraceEvent& e);
  uint32_t ThreadOf(uint32_t file, const TraceEvent& e);
  // The thread known by `key`, made by `make` the first time.
  template <typename Make>
  uint32_t ThreadFor(std::string key, Make&& make) {
    auto it = thread_index_.find(key);
    if (it != thread_index_.end()) return it->second;
    threads_.push_back(make());
    const uint32_t id = static_cast<uint32_t>(threads_.size() - 1);
    thread_index_.emplace(std::move(key), id);
    return id;
  }
  uint32_t CpuDeviceThreadOf(uint32_t file, uint32_t host_thread, int device);
  void PackCpuDeviceLanes();
  uint32_t WaitThreadOf(uint32_t stream_thread);
  Rec DeviceOpOf(const Rec& r);
  uint32_t ProcessOf(uint32_t file, const TraceEvent& e);
  bool HoldBeginEnd(FileState& f, uint32_t thread, TraceEvent& e);
  void PairHeldBeginEnds(FileState& f, uint32_t file);
  void Metadata(uint32_t file, const TraceEvent& e);
  void Stat(const char* name, const std::string& where = "", int64_t n = 1);
  // One more of `name`; where it was is worked out for the first only.
  template <typename Where>
  void StatAt(const char* name, Where&& where) {
    StatAcc& s = stats_[name];
    if (s.count++ == 0) s.first = where();
  }
  std::string Where(const FileState& f, const TraceEvent& e) const {
    return absl::StrCat(f.path, " event #", e.index);
  }
  absl::Status Push(const Rec& r) {
    if (!pushed_error_.ok()) return pushed_error_;
    pushed_error_ = spill_.Push(r);
    return pushed_error_;
  }

  // between the phases
  absl::Status AssignRanks();
  void SameProcessFiles();
  void LinkCorrelations();
  void MatchCollectives();
  void MatchXlaCollectives();
  void XlaOffsets(const std::vector<std::vector<size_t>>& cross_file);
  void MarkUnknownOffsets();
  void EstimateOffsets(const std::map<std::tuple<int, uint32_t, uint32_t, int, int64_t>, std::vector<size_t>>& buckets);
  int StepAt(const FileState& f, int64_t ts) const;
  // When the host dispatched the XLA execution a device slice belongs to (its own
  // run_id, else its module's on that device); kNoTime when the trace does not say.
  int64_t DispatchOf(const Rec& r) const;
  void DropAmbiguousDispatches();
  int64_t CorrFlow(uint32_t file, int64_t corr) const;
  const HostCorr* Linked(uint32_t file, int64_t corr) const;

  // phase 2
  int AssignDevices();
  std::vector<size_t> ByRank() const;
  // Shardscope's own export read back: each chip's host, from its process's label.
  std::map<int, int> OwnHosts() const {
    std::map<int, int> out;
    if (files_.size() != 1) return out;  // several files: each one rank, as given
    for (const ProcessInfo& p : processes_)
      if (p.chip >= 0 && p.host >= 0) out[p.chip] = p.host;
    return out;
  }
  int64_t OwnFlow(const Rec& r) const;
  int64_t PointFlow(const Rec& p) const;
  absl::Status Walk(Writer* w, ImportResult& res);
  absl::Status Emit(Writer& w, ImportResult& res);
  // Run-relative ns; in 128 bits, since a rank's base, offset and the origin
  // may each be near the ends of int64 before they cancel.
  int64_t Align(uint32_t file, int64_t ts) const {
    return static_cast<int64_t>(static_cast<__int128>(ts) + files_[file].base + files_[file].offset - origin_);
  }
  absl::Status WriteStatsAndFiles(const std::string& db_path, int64_t run_id, ImportResult& res);
  void Progress(const std::string& what, double fraction, const std::string& detail, bool force = false);
  void EndProgress();

  ImportOptions opts_;
  std::vector<FileState> files_;
  Spiller spill_;
  absl::Status pushed_error_;
  Interner names_, cats_, keys_, shapes_;
  std::vector<ThreadInfo> threads_;
  std::vector<ProcessInfo> processes_;
  std::unordered_map<std::string, uint32_t> thread_index_, process_index_;
  std::vector<GenericFlow> generic_flows_;  // by keys_ id
  std::vector<Coll> colls_;
  std::vector<XlaColl> xla_colls_;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<Rendezvous>> rendezvous_;  // (file, host thread) -> in time order
  // A device's module executions that carry their run_id (a TPU's "XLA Modules" line, when its ops
  // carry none): (file, device) -> (start, end, run_id).
  std::map<std::pair<uint32_t, int>, std::vector<std::tuple<int64_t, int64_t, int64_t>>> module_runs_;
  int64_t xla_matched_ = 0;
  std::vector<Rec> cpu_device_ops_;  // XLA CPU devices' ops, until PackCpuDeviceLanes
  int64_t next_slice_ = 1;
  // Phase 2's host waits: found, device ops (with a known launch), idle gaps whose op's launch is unknown.
  int64_t host_waits_ = 0, device_ops_ = 0, ops_launched_ = 0, gaps_unknown_ = 0;
  // Device time (outermost slices) of files that mark steps, and the part no step holds.
  int64_t device_ns_ = 0;
  int64_t device_ns_after_dispatch_ = 0;  // tied to its step by launch or dispatch, run outside its span
  std::unordered_map<uint64_t, int64_t> coll_flow_;               // Rec::seq -> flow id
  std::unordered_map<uint64_t, int64_t> own_waits_;
  // Host counters' names -> the processes (over every file) that recorded
  // them: a name from several is kept apart per process (and rank).
  std::unordered_map<uint32_t, std::set<uint32_t>> counter_processes_;               // Rec::seq -> a collective's wait (own export)
  std::map<std::pair<uint32_t, int64_t>, int64_t> coll_corr_flow_;  // (file, corr) -> flow id
  std::map<std::string, StatAcc> stats_;
  bool has_flow_events_ = false;
  std::unordered_map<uint64_t, int64_t> bound_;  // Rec::seq -> flow id, from flow events
  std::vector<bool> flows_used_;
  uint64_t seq_ = 0;
  int64_t origin_ = 0;
  int64_t next_flow_ = 1;
  int64_t collectives_matched_ = 0;
  std::map<int, std::pair<int64_t, int64_t>> step_wall_;  // step -> (wall ns, ranks)
  // progress
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_draw_{};
  bool drew_ = false;
  uint64_t bytes_done_ = 0, bytes_total_ = 0, json_done_ = 0;
};

void Importer::Stat(const char* name, const std::string& where, int64_t n) {
  StatAcc& s = stats_[name];
  if (s.count == 0 && !where.empty()) s.first = where;
  s.count += n;
}

// ---------------------------------------------------------------------------
// Progress on a terminal.

void Importer::Progress(const std::string& what, double fraction, const std::string& detail, bool force) {
  if (!opts_.progress) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && drew_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drew_ = true;
  fraction = std::clamp(fraction, 0.0, 1.0);
  constexpr int kWidth = 30;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  std::string label = what.size() > 40 ? "..." + what.substr(what.size() - 37) : what;
  for (char& c : label)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // a file name never drives the terminal
  std::fprintf(stderr, "\r\x1b[2K%-40s [%s] %3d%%  %s", label.c_str(), bar.c_str(),
               static_cast<int>(fraction * 100), detail.c_str());
  std::fflush(stderr);
}

void Importer::EndProgress() {
  if (opts_.progress && drew_) {
    std::fprintf(stderr, "\r\x1b[2K");
    std::fflush(stderr);
  }
}

// ---------------------------------------------------------------------------
// Phase 1: events to records.

std::string IdText(const internal::JsonId& id) {
  if (!id.present) return "0";
  return id.is_string ? id.str : std::to_string(id.num);
}

uint32_t Importer::ProcessOf(uint32_t file, const TraceEvent& e) {
  std::string key = absl::StrCat(file, "\x1f", e.pid.is_string ? "s" : "n", IdText(e.pid));
  auto [it, fresh] = process_index_.emplace(std::move(key), static_cast<uint32_t>(processes_.size()));
  if (fresh) {
    ProcessInfo p;
    p.file = file;
    p.pid_text = IdText(e.pid);
    p.pid_is_string = e.pid.is_string;
    p.pid_num = e.pid.is_string ? -1 : e.pid.num;
    processes_.push_back(std::move(p));
  }
  return it->second;
}

// Async events (nestable b/e/n and the older S/T/p/F) go on a lane of their
// own per (process, category, id), as Perfetto places them: the begins and
// ends of one id nest on it, and the operations of different ids that
// overlap in time (requests, prefetches) never pretend to nest.
uint32_t Importer::AsyncLaneOf(uint32_t file, const TraceEvent& e) {
  std::string key = absl::StrCat(file, "\x1f", e.pid.is_string ? "s" : "n", IdText(e.pid), "\x1f" "async\x1f", e.cat,
                                 "\x1f", e.id);
  return ThreadFor(std::move(key), [&] {
    ThreadInfo t;
    t.file = file;
    t.process = ProcessOf(file, e);
    t.tid_text = absl::StrCat("async ", e.id);
    t.name = absl::StrCat(e.cat.empty() ? "async" : e.cat, " #", e.id);
    return t;
  });
}

void Importer::AsyncEvent(FileState& f, uint32_t file, const TraceEvent& e) {
  if (!e.has_id) return StatAt("async_missing_id", [&] { return Where(f, e); });
  const uint32_t lane = AsyncLaneOf(file, e);
  switch (e.ph[0]) {
    case 'b':
    case 'S':
      f.open_begins[lane].push_back({e, lane});
      return;
    case 'n':
      return AddSlice(f, file, e, 0, lane);
    case 'T':
    case 'p':
      return StatAt("async_step_ignored", [&] { return Where(f, e); });
    default: {  // e, F: the innermost open begin of that name (a nameless end: the innermost)
      auto it = f.open_begins.find(lane);
      if (it == f.open_begins.end()) return StatAt("async_unmatched_end", [&] { return Where(f, e); });
      std::vector<OpenBegin>& open = it->second;
      auto b = std::find_if(open.rbegin(), open.rend(), [&](const OpenBegin& o) {
        return !e.has_name || e.name.empty() || o.event.name == e.name;
      });
      if (b == open.rend()) return StatAt("async_unmatched_end", [&] { return Where(f, e); });
      OpenBegin begin = std::move(*b);
      open.erase(std::next(b).base());
      if (e.ts_ns < begin.event.ts_ns) return StatAt("end_before_begin", [&] { return Where(f, e); });
      return AddSlice(f, file, begin.event, e.ts_ns - begin.event.ts_ns, lane);
    }
  }
}

uint32_t Importer::ThreadOf(uint32_t file, const TraceEvent& e) {
  std::string key = absl::StrCat(file, "\x1f", e.pid.is_string ? "s" : "n", IdText(e.pid), "\x1f",
                                 e.tid.is_string ? "s" : "n", IdText(e.tid));
  return ThreadFor(std::move(key), [&] {
    ThreadInfo t;
    t.file = file;
    t.process = ProcessOf(file, e);
    t.tid_text = IdText(e.tid);
    t.tid_num = e.tid.is_string ? -1 : e.tid.num;
    return t;
  });
}

// XLA's CPU client runs each device's thunks on shared host threads: its ops
// on one thread wait here (AddSlice keeps them aside) until
// PackCpuDeviceLanes places them on the device's lanes.
uint32_t Importer::CpuDeviceThreadOf(uint32_t file, uint32_t host_thread, int device) {
  return ThreadFor(absl::StrCat(file, "\x1f" "cpu-device\x1f", host_thread, "\x1f", device), [&] {
    ThreadInfo t;
    t.file = file;
    t.process = threads_[host_thread].process;
    t.tid_text = threads_[host_thread].tid_text;
    t.local_device = kCpuDeviceBase + device;
    t.device_word = "CPU device";
    t.xla = true;
    t.host_thread = host_thread;
    return t;
  });
}

// A CPU device's ops ran on whichever pool thread was free: a lane per
// thread would give a device a dozen sparse lanes. They are packed instead,
// as Perfetto packs async slices: each op on the device's first lane free at
// its start, or nested there in an op of the same host thread that holds it
// (a loop's body in the loop); ops that overlap get lanes of their own.
void Importer::PackCpuDeviceLanes() {
  std::sort(cpu_device_ops_.begin(), cpu_device_ops_.end(), [&](const Rec& a, const Rec& b) {
    const ThreadInfo &x = threads_[a.thread], &y = threads_[b.thread];
    return std::make_tuple(x.file, x.local_device, a.ts, -a.dur, a.seq) <
           std::make_tuple(y.file, y.local_device, b.ts, -b.dur, b.seq);
  });
  struct Open {
    int64_t end;
    uint32_t host_thread;
  };
  std::vector<std::vector<Open>> lanes;  // the current device's lanes, each a stack of open ops
  std::vector<uint32_t> lane_thread;      // and each one's thread
  std::pair<uint32_t, int> device{UINT32_MAX, -1};
  for (Rec& r : cpu_device_ops_) {
    const ThreadInfo& t = threads_[r.thread];
    const uint32_t file = t.file, host = t.host_thread;
    const int local = t.local_device;
    if (std::make_pair(file, local) != device) {
      device = {file, local};
      lanes.clear();
      lane_thread.clear();
    }
    size_t k = 0;
    for (; k < lanes.size(); ++k) {
      std::vector<Open>& open = lanes[k];
      while (!open.empty() && open.back().end <= r.ts) open.pop_back();
      if (open.empty() || (open.back().host_thread == host && r.ts + r.dur <= open.back().end)) break;
    }
    if (k == lanes.size()) {
      lanes.emplace_back();
      lane_thread.push_back(ThreadFor(absl::StrCat(file, "\x1f" "cpu-device-lane\x1f", local, "\x1f", k), [&] {
        ThreadInfo lane;
        lane.file = file;
        lane.process = threads_[host].process;
        lane.tid_text = absl::StrCat("lane ", k);
        lane.name = lane.tid_text;
        lane.local_device = local;
        lane.device_word = "CPU device";
        lane.xla = true;
        return lane;
      }));
    }
    lanes[k].push_back({r.ts + r.dur, host});
    r.thread = lane_thread[k];
    Push(r).IgnoreError();
    // A CPU device's waits for its host: each op's execution and its dispatch (its run_id).
    if (DeviceWork(static_cast<SliceKind>(r.kind))) Push(DeviceOpOf(r)).IgnoreError();
  }
  cpu_device_ops_.clear();
  cpu_device_ops_.shrink_to_fit();
}

// A copy of a device op's times and launch (its correlation id, or its run id)
// on its device's "waiting for host" thread, for Walk to work out its waits.
Rec Importer::DeviceOpOf(const Rec& r) {
  Rec op = r;
  op.type = kDeviceOp;
  op.thread = WaitThreadOf(r.thread);
  op.flags = r.flags & kRunId;
  if (r.flags & kOwnStep) op.corr = -1;  // (its step, not a launch)
  op.flow = 0;
  return op;
}

// The "waiting for host" thread of a device's lanes: one per device (its
// index, else its process while the index is not yet known).
uint32_t Importer::WaitThreadOf(uint32_t stream_thread) {
  if (threads_[stream_thread].wait_thread != UINT32_MAX) return threads_[stream_thread].wait_thread;
  const uint32_t file = threads_[stream_thread].file, process = threads_[stream_thread].process;
  const int local = threads_[stream_thread].local_device;
  const std::string word = threads_[stream_thread].device_word;
  std::string key = local >= 0 ? absl::StrCat(file, "\x1f" "wait\x1f", local)
                               : absl::StrCat(file, "\x1f" "wait-process\x1f", process);
  const uint32_t id = ThreadFor(std::move(key), [&] {
    ThreadInfo t;
    t.file = file;
    t.process = process;
    t.tid_text = "waiting for host";
    t.name = t.tid_text;
    t.local_device = local;  // -2 (not yet known) is numbered with its process's streams
    t.device_word = word;
    return t;
  });
  threads_[stream_thread].wait_thread = id;  // once per stream: the key is not built per kernel
  return id;
}

// shardscope's own export names a process per chip and clock: "chip 3 (device
// clock)", "chip 3 (modeled clock)".
// "host N": the host a process of shardscope's own export belongs to; -1 when not that.
int OwnHost(absl::string_view s) {
  int n = -1;
  if (!absl::ConsumePrefix(&s, "host ")) return -1;
  absl::ConsumeSuffix(&s, " (host clock)");
  return absl::SimpleAtoi(s, &n) && n >= 0 && n < kCpuDeviceBase ? n : -1;
}

void ParseOwnChip(ProcessInfo& p) {
  absl::string_view s = p.name;
  int n = -1;
  if (absl::EndsWith(s, " (host clock)")) p.host = OwnHost(s);  // a host's threads: its tracks' host
  if (!absl::ConsumePrefix(&s, "chip ")) return;
  const bool modeled = absl::ConsumeSuffix(&s, " (modeled clock)");
  if (!modeled && !absl::ConsumeSuffix(&s, " (device clock)")) return;
  if (!absl::SimpleAtoi(s, &n) || n < 0 || n >= kCpuDeviceBase) return;
  p.chip = n;
  p.modeled = modeled;
}

// args.kind of shardscope's own export as a slice kind; false when it names none.
bool OwnKind(const std::string& name, SliceKind* kind) {
  static constexpr std::pair<std::string_view, SliceKind> kKinds[] = {
      {"compute", SliceKind::kCompute}, {"collective", SliceKind::kCollective}, {"transfer", SliceKind::kTransfer},
      {"host", SliceKind::kHost},       {"compile", SliceKind::kCompile},       {"host_wait", SliceKind::kHostWait}};
  for (const auto& [text, k] : kKinds)
    if (name == text) {
      *kind = k;
      return true;
    }
  return false;
}

void Importer::Metadata(uint32_t file, const TraceEvent& e) {
  if (e.name == "process_name" || e.name == "process_labels") {
    ProcessInfo& p = processes_[ProcessOf(file, e)];
    (e.name == "process_name" ? p.name : p.labels) = e.name == "process_name" ? e.arg_name : e.labels;
    if (e.name == "process_name" && files_[file].own_export) ParseOwnChip(p);
    if (e.name == "process_labels" && files_[file].own_export && p.host < 0) p.host = OwnHost(p.labels);
  } else if (e.name == "thread_name") {
    threads_[ThreadOf(file, e)].name = e.arg_name;
  }
  // process_sort_index / thread_sort_index and others: tracks are ordered by rank, device and stream.
}

// Which lane an event belongs on, from its category (Kineto's, or the older
// capitalised ones) and, for the legacy profiler, its process's name.
Lane LaneOf(const TraceEvent& e) {
  std::string cat = absl::AsciiStrToLower(e.cat);
  // Kineto's CUDA sync events (enable_cuda_sync_events): a stream waiting for
  // an event, the host waiting for a stream, on the GPU's row. Markers of a
  // wait, not work: beside the stream, not in its device time.
  if (cat == "gpu_user_annotation" || cat == "cuda_sync") return kAnnotationLane;
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset" ||
      cat == "gpu_instant_event")
    return kDeviceLane;
  if (cat.empty() && e.pid.is_string && absl::StartsWith(e.pid.str, "CUDA functions")) return kDeviceLane;
  return kHostLane;
}

// "all_reduce", "AllReduce", "allreduce_" -> "allreduce": one spelling per op,
// so each family's ops compare across ranks.
std::string NormalOp(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == ':' || c == ' ') continue;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

struct Classified {
  SliceKind kind = SliceKind::kHost;
  bool collective = false;
  uint8_t family = 0;
  bool gloo = false;
  std::string op;
};

// "/device:GPU:3" -> 3: a device process of XLA's profiler (JAX, TensorFlow); else -1.
int XlaDeviceIndex(std::string_view process_name) {
  absl::string_view s(process_name.data(), process_name.size());
  if (!absl::ConsumePrefix(&s, "/device:")) return -1;
  const size_t colon = s.rfind(':');
  int n = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(s.substr(colon + 1), &n) || n < 0 || n > 65535) return -1;
  return n;
}

// An XLA collective's HLO name: "all-reduce.3", "all-gather-start.1", "collective-permute-done".
bool IsXlaCollective(std::string_view n) {
  for (std::string_view op : {"all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all"})
    if (n.substr(0, op.size()) == op && (n.size() == op.size() || n[op.size()] == '.' || n[op.size()] == '-'))
      return true;
  return false;
}

Classified Classify(const TraceEvent& e, Lane lane) {
  Classified c;
  const std::string& n = e.name;
  std::string cat = absl::AsciiStrToLower(e.cat);
  if (lane == kAnnotationLane) return c;
  if (lane == kDeviceLane) {
    for (std::string_view prefix : {std::string_view("ncclKernel_"), std::string_view("ncclDevKernel_")}) {
      if (n.compare(0, prefix.size(), prefix) == 0) {
        c.kind = SliceKind::kCollective;
        c.collective = true;
        c.family = kFamKernel;
        std::string_view rest = std::string_view(n).substr(prefix.size());
        c.op = NormalOp(rest.substr(0, rest.find_first_of("_(<")));
        return c;
      }
    }
    if (cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset" ||
        absl::StartsWith(n, "Memcpy") || absl::StartsWith(n, "Memset"))
      c.kind = SliceKind::kTransfer;
    else if (IsXlaCollective(n))
      c.kind = SliceKind::kCollective;  // timed as a collective; not matched across ranks (no group or order)
    else
      c.kind = SliceKind::kCompute;
    return c;
  }
  if (absl::StartsWith(n, "nccl:") || absl::StartsWith(n, "gloo:")) {
    c.kind = SliceKind::kCollective;
    c.collective = true;
    c.family = kFamBackend;
    c.gloo = n[0] == 'g';
    c.op = NormalOp(std::string_view(n).substr(5));
  } else if (absl::StartsWith(n, "c10d::")) {
    c.kind = SliceKind::kCollective;
    c.collective = true;
    c.family = kFamC10d;
    c.op = NormalOp(std::string_view(n).substr(6));
  } else if (n == "record_param_comms") {
    c.kind = SliceKind::kCollective;
    c.collective = true;
    c.family = kFamParamComms;
    c.op = NormalOp(e.collective_name);
  }
  return c;
}

int64_t DtypeBytes(const std::string& dtype) {
  std::string d = absl::AsciiStrToLower(dtype);
  if (absl::StrContains(d, "64") || d == "double" || d == "long") return 8;
  if (absl::StrContains(d, "32") || d == "float" || d == "int") return 4;
  if (absl::StrContains(d, "16") || d == "half") return 2;
  if (absl::StrContains(d, "8") || d == "bool" || d == "byte" || d == "char") return 1;
  return 0;
}

void Importer::AddSlice(FileState& f, uint32_t file, const TraceEvent& e, int64_t dur, uint32_t thread) {
  Lane lane = LaneOf(e);
  if (thread == kOwnThread) thread = ThreadOf(file, e);
  if (f.own_export) {
    // shardscope's own export: a chip's process holds its lanes on the device
    // or modeled clock, whatever the slices' categories.
    ThreadInfo& t = threads_[thread];
    const ProcessInfo& p = processes_[t.process];
    if (p.chip >= 0) {
      lane = kDeviceLane;
      if (t.local_device == -1) {
        t.local_device = p.chip;
        t.device_word = "chip";
        t.own = true;
        t.modeled = p.modeled;
      }
    }
  }
  if (lane == kHostLane && e.device_ordinal >= 0 && e.device_ordinal < 65536 && !e.hlo_op.empty() &&
      XlaDeviceIndex(processes_[threads_[thread].process].name) < 0) {
    // XLA's CPU client (JAX on CPU devices): an HLO op run for device N on a
    // host thread is that device's work.
    thread = CpuDeviceThreadOf(file, thread, static_cast<int>(e.device_ordinal));
    lane = kDeviceLane;
  }
  ThreadInfo& t = threads_[thread];
  if (lane == kHostLane) {
    // JAX / TensorFlow (XLA's profiler): a process per device, named
    // "/device:GPU:0"; its stream threads hold the kernels (a TPU's "XLA Ops"
    // its ops), its other threads (ops, modules, steps) span them.
    const std::string& process = processes_[t.process].name;
    if (const int device = XlaDeviceIndex(process); device >= 0) {
      const bool gpu = absl::StrContains(process, ":GPU:");
      lane = absl::StartsWith(t.name, "Stream") || (!gpu && t.name == "XLA Ops") ? kDeviceLane : kAnnotationLane;
      if (t.local_device == -1) {
        t.local_device = device;
        t.stream = t.tid_num;
        t.xla = true;
        // "/device:TPU:0" -> "TPU"
        const size_t colon = process.rfind(':');
        t.device_word = process.substr(8, colon > 8 ? colon - 8 : 0);
        if (t.device_word.empty()) t.device_word = "device";
      }
    } else if (e.name == "Rendezvous") {
      // XLA's CPU client: "all reduce RendezvousKey{run_id=..., global_devices=[0, 1], ...}".
      const size_t at = e.arg_name.find("global_devices=[");
      const size_t end = at == std::string::npos ? at : e.arg_name.find(']', at);
      if (end != std::string::npos)
        rendezvous_[{file, thread}].push_back({e.ts_ns, e.arg_name.substr(at + 16, end - at - 16)});
    }
  }
  if (lane != kHostLane && t.local_device == -1) {
    // Kineto: args.device, else the GPU's pid is its index.
    if (e.device >= 0) t.local_device = static_cast<int>(e.device);
    else if (!e.pid.is_string && e.pid.num >= 0 && e.pid.num < 4096) t.local_device = static_cast<int>(e.pid.num);
    else t.local_device = -2;
    t.stream = e.stream >= 0 ? e.stream : t.tid_num;
  }
  Classified c = Classify(e, lane);
  if (f.own_export && !e.slice_kind.empty() && !OwnKind(e.slice_kind, &c.kind))
    StatAt("unknown_slice_kind", [&] { return absl::StrCat(Where(f, e), ": kind \"", e.slice_kind, "\""); });
  // XLA's NCCL kernels in a job of several files are matched across the
  // ranks as any NCCL kernel is (and line up the ranks' clocks).
  const bool xla_collective =
      t.xla && lane == kDeviceLane && !(c.family == kFamKernel && c.collective && files_.size() > 1) &&
      (c.kind == SliceKind::kCollective || (!e.hlo_op.empty() && IsXlaCollective(e.hlo_op)));
  if (xla_collective) {  // matched across devices below, not as NCCL's are
    c = Classified{};
    c.kind = SliceKind::kCollective;
  }
  Rec r;
  r.ts = e.ts_ns;
  r.dur = dur;
  r.seq = seq_++;
  r.thread = thread;
  r.name = names_.Id(e.name);
  r.cat = cats_.Id(e.cat);
  r.type = kSlice;
  r.lane = lane;
  r.kind = static_cast<uint8_t>(c.kind);
  r.corr = e.correlation;
  r.shape = ShapeOf(f, e, lane);
  // XLA's execution (any int64: a TPU's run ids are 64-bit). Its earliest host
  // slice is its dispatch; its ops, and its host slices on other threads (the
  // CPU client's ThunkExecutor), belong to the step that dispatched it.
  if (e.has_xla_run_id && r.corr < 0 && !f.own_export) {  // a launch, where there is one, ties it already
    r.flags |= kRunId;
    r.corr = e.xla_run_id;
  }
  // A dispatch: on the host, for no one device (the CPU client's ThunkExecutor
  // slices, with a device_ordinal, run the execution; they do not start it).
  if (e.has_xla_run_id && lane == kHostLane && e.device_ordinal < 0 && e.hlo_op.empty()) {
    auto [it, added] = f.dispatch.try_emplace(e.xla_run_id, r.ts, r.ts);
    it->second.first = std::min(it->second.first, r.ts);
    it->second.second = std::max(it->second.second, r.ts);
  }
  if (e.bad_run_id) StatAt("run_id_unusable", [&] { return Where(f, e); });
  // Its stored depth: siblings of the same bounds (a collective's link slices)
  // would nest in each other by time alone. (An export records no shapes.)
  if (f.own_export && e.own_depth >= 0 && e.own_depth < INT16_MAX && r.shape == 0) {
    r.shape = static_cast<uint32_t>(e.own_depth) + 1;
    r.flags |= kOwnDepth;
  }
  if (e.bytes >= 0) {
    r.bytes = e.bytes;
  } else if (int64_t size = DtypeBytes(e.dtype); size > 0 && std::max(e.in_nelems, e.out_nelems) > 0) {
    r.bytes = std::max(e.in_nelems, e.out_nelems) * size;
  }
  if (!e.bind_id.empty() && (e.flow_in || e.flow_out)) {
    uint32_t key = keys_.Id(absl::StrCat("v2\x1f", e.bind_id));
    if (key >= generic_flows_.size()) generic_flows_.resize(key + 1);
    (e.flow_out ? generic_flows_[key].start : generic_flows_[key].end) = true;
    r.flow = key + 1;
  }
  f.first_ts = std::min(f.first_ts, r.ts);
  f.last_ts = std::max(f.last_ts, r.ts + dur);
  if (f.own_export && e.step >= 0 && e.step <= INT32_MAX) {
    r.corr = e.step;  // no correlation ids in shardscope's export
    r.flags |= kOwnStep;
    if (!t.modeled) {
      auto [it, added] = f.own_steps.try_emplace(static_cast<int>(e.step), r.ts, r.ts + dur);
      it->second.first = std::min(it->second.first, r.ts);
      it->second.second = std::max(it->second.second, r.ts + dur);
    }
    if (c.kind == SliceKind::kCollective && e.wait_ns >= 0) own_waits_[r.seq] = e.wait_ns;
    if (lane == kHostLane && e.name == "mark_step") f.own_mark_step_end[static_cast<int>(e.step)] = r.ts + dur;
  }
  if (f.own_export && lane == kHostLane) f.own_host_first = std::min(f.own_host_first, r.ts);
  if (absl::StartsWith(e.name, "ProfilerStep#") && lane == kHostLane) {
    int n;
    if (absl::SimpleAtoi(absl::string_view(e.name).substr(13), &n) && n >= 0) f.steps.push_back({r.ts, r.ts + dur, n});
  } else if (e.step_num >= 0 && e.step_num <= INT32_MAX && lane == kHostLane) {
    // jax.profiler.StepTraceAnnotation("train", step_num=3): the span of step 3.
    f.steps.push_back({r.ts, r.ts + dur, static_cast<int>(e.step_num)});
  }
  if (e.correlation >= 0) {
    if (lane == kHostLane) f.host_corr.push_back({e.correlation, r.ts, thread});
    else if (lane == kDeviceLane) f.dev_corr.push_back(e.correlation);
  }
  if (t.xla && lane != kHostLane && t.local_device >= 0 && e.has_xla_run_id && !xla_collective)
    module_runs_[{file, t.local_device}].emplace_back(r.ts, r.ts + dur, e.xla_run_id);
  if (xla_collective) {
    r.flags |= kCollective;
    XlaColl k;
    k.seq = r.seq;
    k.file = file;
    k.thread = thread;
    k.host_thread = t.host_thread != UINT32_MAX ? t.host_thread : thread;
    k.device = t.local_device;
    k.module = keys_.Id(e.hlo_module);
    k.op = keys_.Id(e.hlo_op.empty() ? e.name : e.hlo_op);
    k.has_run_id = e.has_xla_run_id;
    k.run_id = e.xla_run_id;
    k.ts = r.ts;
    k.end = r.ts + dur;
    xla_colls_.push_back(k);
  }
  if (c.collective) {
    r.flags |= kCollective;
    Coll k;
    k.seq = r.seq;
    k.file = file;
    k.thread = thread;
    k.family = c.family;
    k.gloo = c.gloo;
    k.op = keys_.Id(c.op);
    k.group = keys_.Id(!e.pg_name.empty() ? e.pg_name : e.pg_ranks);
    k.ranks = e.pg_ranks;
    k.seq_arg = e.seq;
    k.ts = r.ts;
    k.end = r.ts + dur;
    k.corr = e.correlation;
    colls_.push_back(std::move(k));
  }
  if (t.host_thread != UINT32_MAX) {
    cpu_device_ops_.push_back(r);  // placed on its device's lanes once every file is read
    return;
  }
  Push(r).IgnoreError();  // the error stays in pushed_error_, checked after the file
  // (XLA's GPU kernels carry their launch's correlation id too; its TPUs' ops
  // their execution, whose dispatch the host's trace holds.)
  if (lane == kDeviceLane && !t.own && DeviceWork(c.kind)) {
    // Its GPU's waits for the host are worked out in phase 2 from a copy of
    // its times and launch on a thread of their own, which the spill sorts
    // like any other: no list of every kernel is held.
    Push(DeviceOpOf(r)).IgnoreError();
  }
}

// The call's shape, for matching calls across runs (`shardscope diff`): an
// op's "Input Dims" (and "Input type"), remembered by its External id; a
// launch passes its op's on by correlation id; a kernel's launch grid and
// block, after its op's dims where they are known (through its own External
// id, else its launch's correlation id).
uint32_t Importer::ShapeOf(FileState& f, const TraceEvent& e, Lane lane) {
  // Kineto numbers External and correlation ids densely from 0 or 1; larger
  // ones are not remembered rather than grow these without bound.
  static constexpr int64_t kMaxId = int64_t{1} << 26;
  auto get = [](const std::vector<uint32_t>& v, int64_t id) -> uint32_t {
    return id >= 0 && id < static_cast<int64_t>(v.size()) ? v[static_cast<size_t>(id)] : 0;
  };
  auto put = [](std::vector<uint32_t>& v, int64_t id, uint32_t shape) {
    if (id < 0 || id >= kMaxId) return;
    if (id >= static_cast<int64_t>(v.size())) v.resize(std::max<size_t>(static_cast<size_t>(id) + 1, v.size() * 2));
    v[static_cast<size_t>(id)] = shape;
  };
  if (lane == kHostLane) {
    if (!e.input_dims.empty()) {
      const uint32_t shape =
          shapes_.Id(e.input_types.empty() ? e.input_dims : absl::StrCat(e.input_dims, " (", e.input_types, ")")) + 1;
      put(f.op_shape, e.external_id, shape);
      return shape;
    }
    if (e.correlation >= 0)
      if (uint32_t op = get(f.op_shape, e.external_id)) put(f.launch_shape, e.correlation, op);
    return 0;
  }
  const uint32_t op = e.external_id >= 0 ? get(f.op_shape, e.external_id) : get(f.launch_shape, e.correlation);
  if (e.grid.empty() && e.block.empty()) return op;
  std::string text = op ? absl::StrCat(shapes_.Str(op - 1), " ") : "";
  if (!e.grid.empty()) absl::StrAppend(&text, "grid ", e.grid);
  if (!e.block.empty()) absl::StrAppend(&text, e.grid.empty() ? "" : " ", "block ", e.block);
  return shapes_.Id(text) + 1;
}

// A B or E of a thread whose B/E events left time order is held (true), to
// be paired in time order when the file ends (PairHeldBeginEnds). The first
// one out of order starts holding: the thread's open Bs and its Es that came
// before any B go along.
bool Importer::HoldBeginEnd(FileState& f, uint32_t thread, TraceEvent& e) {
  auto held = f.be_held.find(thread);
  if (held == f.be_held.end()) {
    int64_t& last = f.be_last_ts.try_emplace(thread, INT64_MIN).first->second;
    if (e.ts_ns >= last) {
      last = e.ts_ns;
      return false;
    }
    Stat("begin_end_out_of_order", Where(f, e));
    held = f.be_held.try_emplace(thread).first;
    if (auto open = f.open_begins.find(thread); open != f.open_begins.end()) {
      for (OpenBegin& b : open->second) {
        ++f.be_held_begins;
        const int64_t ts = b.event.ts_ns, index = b.event.index;
        held->second.push_back({ts, index, std::make_unique<TraceEvent>(std::move(b.event)), 1});
      }
      f.open_begins.erase(open);
    }
    if (auto ends = f.early_ends.find(thread); ends != f.early_ends.end()) {
      for (const auto& [ts, index] : ends->second) held->second.push_back({ts, index, nullptr, 0});
      f.early_ends.erase(ends);
    }
  }
  if (!pushed_error_.ok()) return true;
  if (e.ph[0] == 'B') {
    if (++f.be_held_begins > kMaxHeldBegins) {
      pushed_error_ = absl::InvalidArgumentError(absl::StrCat(
          f.path, ": more than ", kMaxHeldBegins, " B (begin) events out of time order (this one event #",
          e.index, "): pairing them with their E events needs them sorted; sort the file's events by ts, or "
          "write complete (X) events"));
      return true;
    }
    held->second.push_back({e.ts_ns, e.index, std::make_unique<TraceEvent>(std::move(e)), 1});
  } else {
    std::vector<HeldBeginEnd>& v = held->second;
    if (!v.empty() && v.back().begin && v.back().ts == e.ts_ns && v.back().index + 1 == e.index) v.back().order = 0;
    v.push_back({e.ts_ns, e.index, nullptr, 0});
  }
  return true;
}

// The held B/E events of each thread, sorted by time (see HeldBeginEnd::order
// for equal times, then file order) and paired as a stack.
void Importer::PairHeldBeginEnds(FileState& f, uint32_t file) {
  for (auto& [thread, events] : f.be_held) {
    // How much of the thread's file order runs forward: in a file mostly in
    // order (streams merged, a few events late) an E just before a B at one
    // time is back-to-back slices; in one reversed or shuffled it may as well
    // be a zero-length slice.
    int64_t forward = 0;
    for (size_t k = 1; k < events.size(); ++k) forward += events[k].ts >= events[k - 1].ts;
    const bool mostly_forward = forward * 10 >= static_cast<int64_t>(events.size() - 1) * 9;
    if (!mostly_forward)
      for (HeldBeginEnd& ev : events) ev.order = ev.begin ? 1 : 0;  // adjacency tells nothing either
    std::sort(events.begin(), events.end(), [](const HeldBeginEnd& a, const HeldBeginEnd& b) {
      return std::tie(a.ts, a.order, a.index) < std::tie(b.ts, b.order, b.index);
    });
    // At one time, a B and an E the file did not pair at once: back-to-back
    // slices or a zero-length one, which the file does not tell apart when it
    // puts the B first, or when its order says nothing (not mostly forward).
    for (size_t i = 0, j; i < events.size(); i = j) {
      int64_t first_begin = INT64_MAX, last_end = INT64_MIN;
      for (j = i; j < events.size() && events[j].ts == events[i].ts; ++j) {
        if (events[j].begin && events[j].order == 1) first_begin = std::min(first_begin, events[j].index);
        if (!events[j].begin) last_end = std::max(last_end, events[j].index);
      }
      if (first_begin != INT64_MAX && last_end != INT64_MIN && (!mostly_forward || first_begin < last_end))
        Stat("begin_end_ambiguous", absl::StrCat(f.path, " event #", first_begin));
    }
    std::vector<const HeldBeginEnd*> open;
    for (const HeldBeginEnd& ev : events) {
      if (ev.begin) {
        open.push_back(&ev);
      } else if (open.empty()) {
        Stat("unmatched_end", absl::StrCat(f.path, " event #", ev.index));
      } else {
        AddSlice(f, file, *open.back()->begin, ev.ts - open.back()->ts);
        open.pop_back();
      }
    }
    for (const HeldBeginEnd* b : open) {
      Stat("begin_without_end", Where(f, *b->begin));
      AddSlice(f, file, *b->begin, std::max(f.last_ts, b->ts) - b->ts);
    }
  }
  f.be_held.clear();
  f.be_last_ts.clear();
}

void Importer::OnEvent(FileState& f, uint32_t file, TraceEvent& e) {
  f.content_hash = absl::HashOf(f.content_hash, e.ph, e.name, e.ts_ns, e.dur_ns, e.index, e.pid.num, e.pid.str,
                                e.tid.num, e.tid.str);
  ++f.content_events;
  if (e.flags & TraceEvent::kNotObject) {
    StatAt("event_not_object", [&] { return Where(f, e); });
    return;
  }
  if (e.keys == 0) return StatAt("empty_event", [&] { return Where(f, e); });
  if (!f.own_export && !f.info.tool.empty() && absl::StartsWith(f.info.tool, "shardscope")) {
    f.own_export = true;
    Stat("own_export", f.path);
  }
  const bool x = e.ph == "X";
  if (x) ++f.x_events;
  auto unusable = [&](const char* why) {
    StatAt(why, [&] { return Where(f, e); });
    if (x) ++f.x_unusable;
  };
  if (e.ph.empty() || (e.flags & TraceEvent::kBadPhase)) return unusable("missing_phase");
  if (e.ph.size() != 1) return unusable("unknown_phase");
  if (e.flags & TraceEvent::kBadPidTid) return unusable("bad_pid_tid");
  if (e.flags & TraceEvent::kNameNotString) StatAt("name_not_string", [&] { return Where(f, e); });
  if (e.flags & TraceEvent::kArgsNotObject) StatAt("args_not_object", [&] { return Where(f, e); });
  const char ph = e.ph[0];
  if (ph == '\0') return unusable("unknown_phase");  // "\u0000": strchr would match the terminator
  if (ph == 'M') return Metadata(file, e);
  if (std::strchr("beSTpFn", ph)) {
    if (e.ts_state != TraceEvent::Num::kOk) return unusable("bad_timestamp");
    return AsyncEvent(f, file, e);
  }
  if (std::strchr("ONDPRcvV()", ph)) return StatAt("unsupported_phase", [&] { return Where(f, e); });
  if (!std::strchr("XBEiICstf", ph)) return unusable("unknown_phase");
  if (e.ts_state != TraceEvent::Num::kOk) return unusable("bad_timestamp");

  switch (ph) {
    case 'X':
      if (e.dur_state != TraceEvent::Num::kOk) return unusable("x_event_bad_dur");
      if (e.dur_ns < 0) return unusable("x_event_negative_dur");
      return AddSlice(f, file, e, e.dur_ns);
    case 'B': {
      const uint32_t thread = ThreadOf(file, e);  // (a key built per call: once per event)
      if (HoldBeginEnd(f, thread, e)) return;
      f.open_begins[thread].push_back({e, kOwnThread});
      return;
    }
    case 'E': {
      const uint32_t thread = ThreadOf(file, e);
      if (HoldBeginEnd(f, thread, e)) return;
      auto it = f.open_begins.find(thread);
      if (it == f.open_begins.end() || it->second.empty()) {
        f.early_ends[thread].push_back({e.ts_ns, e.index});  // its B may come later in the file
        return;
      }
      OpenBegin b = std::move(it->second.back());
      it->second.pop_back();
      return AddSlice(f, file, b.event, e.ts_ns - b.event.ts_ns);  // in order: it ends after its B began
    }
    case 'i':
    case 'I': {
      if (e.name == "[memory]") {
        // Kineto's allocator events: the running total as a counter per device.
        double total = NAN, type = 0, dev = -1;
        for (const auto& [k, v] : e.numbers) {
          if (k == "Total Allocated") total = v;
          if (k == "Device Type") type = v;
          if (k == "Device Id") dev = v;
        }
        if (std::isnan(total)) return;
        Rec r;
        r.type = kCounter;
        r.ts = e.ts_ns;
        r.seq = seq_++;
        r.thread = ThreadOf(file, e);
        r.dur = std::bit_cast<int64_t>(total);
        // A GPU's total goes to that device (corr carries the local GPU index), the host's to the process.
        r.corr = type != 0 && dev >= 0 ? static_cast<int64_t>(dev) : -1;
        r.name = names_.Id(r.corr >= 0 ? "GPU memory allocated (bytes)" : "CPU memory allocated (bytes)");
        if (r.corr >= 0) f.devices.emplace(static_cast<int>(dev), -1);
        else counter_processes_[r.name].insert(threads_[r.thread].process);
        f.first_ts = std::min(f.first_ts, r.ts);
        f.last_ts = std::max(f.last_ts, r.ts);
        Push(r).IgnoreError();
        return;
      }
      if (e.scope == "g" || e.scope == "p") return StatAt("instant_not_thread_scoped", [&] { return Where(f, e); });
      return AddSlice(f, file, e, 0);
    }
    case 'C': {
      // A series per arg, "name.key" ("name" for the usual "value"), named
      // the same whichever args an event carries; an "id" is a series of its own.
      int numeric = 0;
      const std::string base = e.has_id ? absl::StrCat(e.name, " [", e.id, "]") : e.name;
      if (!e.numbers.empty() && e.non_numeric_args > 0)
        StatAt("counter_value_not_numeric", [&] { return Where(f, e); });
      for (const auto& [k, v] : e.numbers) {
        Rec r;
        r.type = kCounter;
        r.ts = e.ts_ns;
        r.seq = seq_++;
        r.thread = ThreadOf(file, e);
        r.dur = std::bit_cast<int64_t>(v);
        r.name = names_.Id(k == "value" ? base : absl::StrCat(base, ".", k));
        if (f.own_export) {  // a chip's counter (its memory) goes to that chip
          const ProcessInfo& p = processes_[threads_[r.thread].process];
          if (p.chip >= 0 && !p.modeled) {
            r.corr = p.chip;
            f.devices.emplace(p.chip, -1);
          }
        }
        f.first_ts = std::min(f.first_ts, r.ts);
        f.last_ts = std::max(f.last_ts, r.ts);
        counter_processes_[r.name].insert(threads_[r.thread].process);
        Push(r).IgnoreError();
        ++numeric;
      }
      if (numeric == 0) StatAt("counter_not_numeric", [&] { return Where(f, e); });
      return;
    }
    default: {  // s, t, f
      if (!e.has_id) return StatAt("flow_missing_id", [&] { return Where(f, e); });
      has_flow_events_ = true;
      Rec r;
      r.ts = e.ts_ns;
      r.seq = seq_++;
      r.thread = ThreadOf(file, e);
      r.type = ph == 'f' && e.bp != "e" ? kFlowNext : kFlowEnclosing;
      r.flags = ph == 's' ? kFlowStart : ph == 'f' ? kFlowEnd : 0;
      int64_t corr;
      if ((e.cat == "ac2g" || e.name == "ac2g") && absl::SimpleAtoi(e.id, &corr) && corr >= 0) {
        // Kineto's launch -> kernel link: the id is the correlation id.
        r.flags |= kAc2g;
        r.corr = corr;
        if (ph == 's') f.flow_starts.push_back(corr);
        if (ph == 'f') f.flow_ends.push_back(corr);
      } else {
        uint32_t key = keys_.Id(absl::StrCat("v1\x1f", e.cat, "\x1f", e.name, "\x1f", e.id));
        if (key >= generic_flows_.size()) generic_flows_.resize(key + 1);
        if (ph == 's') generic_flows_[key].start = true;
        if (ph == 'f') generic_flows_[key].end = true;
        r.flow = key + 1;
      }
      Push(r).IgnoreError();
      return;
    }
  }
}

absl::Status Importer::ReadFile(size_t index) {
  FileState& f = files_[index];
  const uint32_t file = static_cast<uint32_t>(index);
  const std::string label = absl::StrCat("reading ", f.path);
  const uint64_t done_before = bytes_done_;
  const uint64_t json_before = json_done_;
  auto on_progress = [&](uint64_t read, uint64_t json) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    Progress(label, bytes_total_ ? static_cast<double>(done_before + read) / static_cast<double>(bytes_total_) : 0,
             absl::StrFormat("%.0f MB of trace, %.1f MB/s", static_cast<double>(json_before + json) / 1e6,
                             secs > 0 ? static_cast<double>(json_before + json) / 1e6 / secs : 0.0));
  };
  absl::StatusOr<internal::ParseOutcome> out = internal::ReadChromeTrace(
      f.path, &f.info, [&](TraceEvent& e) { OnEvent(f, file, e); }, on_progress);
  if (!out.ok()) return out.status();
  if (!pushed_error_.ok()) return pushed_error_;
  f.outcome = *out;
  bytes_done_ += out->file_bytes;
  json_done_ += out->json_bytes;
  PairHeldBeginEnds(f, file);
  // B events still open: an E that came earlier in the file closes the
  // innermost first, as the events sorted by time would pair them (each B the
  // earliest unused E at or after it); the rest end with the file.
  for (auto& [thread, open] : f.open_begins) {
    auto& ends = f.early_ends[thread];
    std::sort(ends.begin(), ends.end());
    std::vector<bool> used(ends.size(), false);
    for (auto b = open.rbegin(); b != open.rend(); ++b) {
      size_t k = std::lower_bound(ends.begin(), ends.end(), std::make_pair(b->event.ts_ns, INT64_MIN)) - ends.begin();
      while (k < ends.size() && used[k]) ++k;
      if (k < ends.size()) {
        used[k] = true;
        Stat("end_before_its_begin_in_file");
        AddSlice(f, file, b->event, ends[k].first - b->event.ts_ns, b->thread);
        continue;
      }
      Stat("begin_without_end", Where(f, b->event));
      int64_t end = std::max(f.last_ts, b->event.ts_ns);
      AddSlice(f, file, b->event, end - b->event.ts_ns, b->thread);
    }
    for (size_t k = 0; k < ends.size(); ++k)
      if (!used[k]) Stat("unmatched_end", absl::StrCat(f.path, " event #", ends[k].second));
    ends.clear();
  }
  for (auto& [thread, ends] : f.early_ends)
    for (const auto& [ts, index] : ends) Stat("unmatched_end", absl::StrCat(f.path, " event #", index));
  f.early_ends.clear();
  f.open_begins.clear();
  if (f.steps.empty() && !f.own_mark_step_end.empty()) {
    // As shardscope records a step: from the end of the mark_step before (the
    // run's start, time 0 in its export, for step 0) to the end of its own. A
    // part of a run (export --steps 2:3) has no mark_step before its first:
    // the export says where it ended (otherData first_step_from_ns), else the
    // step starts at the first host slice the part kept (from 0 it read 148
    // ms for 60).
    const int first = f.own_mark_step_end.begin()->first;
    int64_t from = 0;
    if (first > 0 && f.info.first_step_from_ns >= 0) from = f.info.first_step_from_ns;
    else if (first > 0 && f.own_host_first != INT64_MAX) from = f.own_host_first;
    for (const auto& [n, end] : f.own_mark_step_end) {
      f.steps.push_back({std::min(from, end), end, n});
      from = end;
    }
  } else if (f.steps.empty()) {
    for (const auto& [n, span] : f.own_steps) f.steps.push_back({span.first, span.second, n});
  }
  f.own_steps.clear();
  f.own_mark_step_end.clear();
  if (!pushed_error_.ok()) return pushed_error_;
  if (out->truncated) Stat(out->truncation_stat.c_str(), absl::StrCat(f.path, ": ", out->truncation));
  if (out->array_unterminated) Stat("json_array_unterminated", f.path);
  if (out->trailing_data) Stat("trailing_data", f.path);
  if (out->second_document) Stat("second_json_document", f.path);
  if (out->gzip_trailing_garbage) Stat("gzip_trailing_garbage", f.path);
  if (out->gzip_checksum_mismatch) Stat("gzip_checksum_mismatch", f.path);
  if (out->gzip_trailer_missing) Stat("gzip_trailer_missing", f.path);
  if (out->lone_surrogates > 0) Stat("lone_surrogate_escape", f.path, out->lone_surrogates);
  if (out->non_finite > 0) Stat("non_finite_literal", f.path, out->non_finite);
  if (out->bad_utf8 > 0) Stat("invalid_utf8", f.path, out->bad_utf8);
  if (out->events_repeated) Stat("trace_events_repeated", f.path);
  if (out->xspace_aggregated_events > 0) Stat("xspace_aggregated_events", f.path, out->xspace_aggregated_events);
  if (out->xspace_unnamed_events > 0)
    Stat("xspace_event_without_metadata", absl::StrCat(f.path, ": ", out->xspace_first_unnamed),
         out->xspace_unnamed_events);
  if (out->xspace_duplicate_planes > 0)
    Stat("xspace_duplicate_planes", absl::StrCat(f.path, ": ", out->xspace_first_duplicate),
         out->xspace_duplicate_planes);
  if (out->xspace_damaged > 0)
    Stat("xspace_damaged", absl::StrCat(f.path, ": ", out->xspace_damage), out->xspace_damaged);
  if (out->xspace_profiler_errors > 0)
    Stat("xspace_profiler_errors", absl::StrCat(f.path, ": \"", out->xspace_first_error, "\""),
         out->xspace_profiler_errors);
  if (!f.info.display_time_unit.empty()) Stat("display_time_unit_ignored", f.path);
  if (f.first_ts == INT64_MAX) {
    // Why: what this file's events lost, by reason, as the stats count them.
    std::vector<std::string> why;
    for (const auto& [name, acc] : stats_) {
      const StatDef* d = FindStat(name);
      if (!d || std::string_view(d->severity) == "info" || !absl::StartsWith(acc.first, f.path)) continue;
      why.push_back(absl::StrCat(acc.count, " ", name, " (", d->description, "; first: ", acc.first, ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        f.path, " holds no usable trace events (", out->events, out->xspace ? " events in its XSpace" : " elements in traceEvents",
        out->truncated ? absl::StrCat("; ", out->truncation) : "", ")",
        why.empty() ? "" : absl::StrCat(": ", absl::StrJoin(why, "; "))));
  }
  f.base = f.info.has_base_time ? f.info.base_time_ns : 0;
  if (f.base < 0 || f.base > kMaxNs) {
    Stat("bad_base_time", absl::StrCat(f.path, ": ", f.base));
    f.base = 0;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Between the phases.

// Files without distributedInfo whose events name the same process id are
// likely windows of one process (tensorboard_trace_handler writes a file per
// profiling cycle), which the command line made ranks: said, not silent. Only
// ids above 1000: a device's pid in Kineto is its index, and a container's
// processes count from 1, so those repeat across ranks.
void Importer::SameProcessFiles() {
  std::map<std::string, std::set<uint32_t>> files_of;  // "pid N" or "worker W" -> files
  for (const ProcessInfo& p : processes_)
    if (p.pid_num > 1000 && !files_[p.file].info.has_rank) files_of[absl::StrCat("pid ", p.pid_num)].insert(p.file);
  // tensorboard_trace_handler names its files WORKER.MILLISECONDS.pt.trace.json[.gz], the worker
  // "host_pid" unless given: one worker's files are one process (the legacy profiler's events name
  // no pid at all, "CPU functions").
  for (uint32_t i = 0; i < files_.size(); ++i) {
    if (files_[i].info.has_rank) continue;
    const std::string base = files_[i].path.substr(files_[i].path.rfind('/') + 1);
    absl::string_view b(base);
    absl::ConsumeSuffix(&b, ".gz");
    if (!absl::ConsumeSuffix(&b, ".pt.trace.json")) continue;
    const size_t dot = b.rfind('.');
    if (dot == absl::string_view::npos || dot == 0) continue;
    const absl::string_view millis = b.substr(dot + 1);
    if (millis.empty() || !std::all_of(millis.begin(), millis.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    files_of[absl::StrCat("worker ", b.substr(0, dot))].insert(i);
  }
  std::set<uint32_t> said;
  for (const auto& [who, files] : files_of)
    if (files.size() > 1)
      for (uint32_t f : files)
        if (f != *files.begin() && said.insert(f).second)
          Stat("same_process_files", absl::StrCat(files_[f].path, " (", who, ", as ", files_[*files.begin()].path, ")"));
}

absl::Status Importer::AssignRanks() {
  std::map<int, size_t> taken;
  for (size_t i = 0; i < files_.size(); ++i) {
    FileState& f = files_[i];
    if (!f.info.has_rank) continue;
    if (f.info.rank < 0 || f.info.rank > 1000000)
      return absl::InvalidArgumentError(
          absl::StrCat(f.path, ": distributedInfo.rank is ", f.info.rank, ", not a rank (0..1000000)"));
    auto [it, fresh] = taken.emplace(static_cast<int>(f.info.rank), i);
    if (!fresh) {
      // Each file's rank and start, for ImportChromeTraceWindows to tell
      // profiling windows apart.
      nlohmann::json files = nlohmann::json::array();
      for (const FileState& g : files_)
        files.push_back({{"path", g.path},
                         {"rank", g.info.has_rank ? g.info.rank : -1},
                         {"start_ns", g.first_ts == INT64_MAX ? 0 : g.base + g.first_ts},
                         {"end_ns", g.last_ts == INT64_MIN ? 0 : g.base + g.last_ts},
                         {"based", g.base != 0}});
      absl::Status st = absl::InvalidArgumentError(absl::StrCat(
          files_[it->second].path, " and ", f.path, " both say they are rank ", f.info.rank,
          " (distributedInfo.rank); import each rank once. Two profiling windows of one job "
          "(tensorboard_trace_handler writes a file per rank per cycle, with schedule(..., repeat=N)) are two "
          "runs: import each window's files, one per rank, with its own `shardscope import`"));
      st.SetPayload(kRanksPayload, absl::Cord(files.dump()));
      return st;
    }
    f.rank = static_cast<int>(f.info.rank);
  }
  // Files without distributedInfo take the lowest free ranks, in command-line order.
  int next = 0;
  int world = 0;
  const FileState* world_from = nullptr;
  for (FileState& f : files_) {
    if (!f.info.has_rank) {
      while (taken.count(next)) ++next;
      f.rank = next;
      taken.emplace(next, 0);
    }
    if (!f.info.has_world_size || f.info.world_size <= 0 || f.info.world_size > 1000000) continue;
    // One job's ranks agree on its size, and each is below it.
    if (f.info.has_rank && f.info.rank >= f.info.world_size)
      return absl::InvalidArgumentError(absl::StrCat(f.path, ": distributedInfo.rank ", f.info.rank,
                                                     " is not below its world_size ", f.info.world_size,
                                                     " (ranks count from 0)"));
    if (world_from && world != f.info.world_size)
      return absl::InvalidArgumentError(absl::StrCat(world_from->path, " says world_size ", world, " and ", f.path,
                                                     " says ", f.info.world_size,
                                                     " (distributedInfo): not ranks of one job"));
    world = static_cast<int>(f.info.world_size);
    world_from = &f;
  }
  // The size the files show, one for all: their count, or past the highest
  // rank (a file without distributedInfo given beside a job's ranks extends it).
  int size = std::max(world, static_cast<int>(files_.size()));
  for (const FileState& f : files_) size = std::max(size, f.rank + 1);
  for (FileState& f : files_) f.world_size = size;
  return absl::OkStatus();
}

void Importer::LinkCorrelations() {
  for (size_t i = 0; i < files_.size(); ++i) {
    FileState& f = files_[i];
    std::sort(f.host_corr.begin(), f.host_corr.end(), [](const HostCorr& a, const HostCorr& b) {
      return a.corr != b.corr ? a.corr < b.corr : a.ts < b.ts;
    });
    f.host_corr.erase(std::unique(f.host_corr.begin(), f.host_corr.end(),
                                  [](const HostCorr& a, const HostCorr& b) { return a.corr == b.corr; }),
                      f.host_corr.end());
    auto sorted_set = [](std::vector<int64_t>& v) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    };
    sorted_set(f.dev_corr);
    sorted_set(f.flow_starts);
    sorted_set(f.flow_ends);
    int64_t orphans = 0;
    {
      // A GPU-side slice without its launch.
      size_t h = 0;
      for (int64_t c : f.dev_corr) {
        while (h < f.host_corr.size() && f.host_corr[h].corr < c) ++h;
        if (h == f.host_corr.size() || f.host_corr[h].corr != c) ++orphans;
      }
    }
    // The GPU side: slices carrying the id, or ac2g flows with both ends
    // (Kineto also ends ac2g flows on host calls such as cudaStreamIsCapturing,
    // with no start: those link nothing). The host side: launch slices, or
    // flow starts (time and thread then unknown: the flow still links).
    auto in = [](const std::vector<int64_t>& v, int64_t c) { return std::binary_search(v.begin(), v.end(), c); };
    int64_t no_source = 0, no_target = 0;
    for (int64_t c : f.flow_ends) no_source += !in(f.flow_starts, c);
    auto gpu_side = [&](int64_t c) { return in(f.dev_corr, c) || (in(f.flow_starts, c) && in(f.flow_ends, c)); };
    for (int64_t c : f.flow_starts) no_target += !gpu_side(c);
    // Counted first, so `linked` (kept for phase 2) is allocated once, at its size.
    auto for_each_linked = [&](auto&& take) {
      // Merge of the sorted host side (slices, flow starts), each id once, kept when the GPU side has it.
      size_t h = 0, st = 0;
      while (h < f.host_corr.size() || st < f.flow_starts.size()) {
        const bool from_slice =
            h < f.host_corr.size() && (st == f.flow_starts.size() || f.host_corr[h].corr <= f.flow_starts[st]);
        const int64_t c = from_slice ? f.host_corr[h].corr : f.flow_starts[st];
        if (gpu_side(c)) take(from_slice ? f.host_corr[h] : HostCorr{c, kNoTime, UINT32_MAX});
        while (h < f.host_corr.size() && f.host_corr[h].corr == c) ++h;
        while (st < f.flow_starts.size() && f.flow_starts[st] == c) ++st;
      }
    };
    size_t n = 0;
    for_each_linked([&](const HostCorr&) { ++n; });
    f.linked.clear();
    f.linked.reserve(n);
    for_each_linked([&](const HostCorr& l) { f.linked.push_back(l); });
    if (orphans) Stat("kernel_without_launch", f.path, orphans);
    if (no_source) Stat("flow_without_source", f.path, no_source);
    if (no_target) Stat("flow_without_target", f.path, no_target);
    for (auto* v : {&f.dev_corr, &f.flow_starts, &f.flow_ends}) std::vector<int64_t>().swap(*v);
    for (auto* v : {&f.op_shape, &f.launch_shape}) std::vector<uint32_t>().swap(*v);
    std::vector<HostCorr>().swap(f.host_corr);
  }
  // What the indexes held goes back to the system, not just to malloc's free
  // lists, so phase 2 starts from a smaller footprint.
  malloc_trim(0);
}

// The launch slice of a linked correlation id; nullptr when there is none (or
// only an ac2g flow start told of it, without a slice's time and thread).
const HostCorr* Importer::Linked(uint32_t file, int64_t corr) const {
  const std::vector<HostCorr>& v = files_[file].linked;
  auto it = std::lower_bound(v.begin(), v.end(), corr, [](const HostCorr& a, int64_t c) { return a.corr < c; });
  return it != v.end() && it->corr == corr && it->ts != kNoTime ? &*it : nullptr;
}

int64_t Importer::CorrFlow(uint32_t file, int64_t corr) const {
  if (corr < 0) return -1;
  if (auto it = coll_corr_flow_.find({file, corr}); it != coll_corr_flow_.end()) return it->second;
  const std::vector<HostCorr>& v = files_[file].linked;
  auto it = std::lower_bound(v.begin(), v.end(), corr, [](const HostCorr& a, int64_t c) { return a.corr < c; });
  if (it == v.end() || it->corr != corr) return -1;
  return files_[file].corr_flow_base + (it - v.begin());
}

// The execution of an op without its own run_id: its module's on its device, when one holds it.
bool ModuleRunAt(const std::vector<std::tuple<int64_t, int64_t, int64_t>>& runs, int64_t ts, int64_t end,
                 int64_t* run) {
  auto m = std::upper_bound(runs.begin(), runs.end(), std::make_tuple(ts, INT64_MAX, INT64_MAX));
  if (m == runs.begin()) return false;
  --m;
  if (std::get<1>(*m) < end) return false;
  *run = std::get<2>(*m);
  return true;
}

int64_t Importer::DispatchOf(const Rec& r) const {
  const ThreadInfo& t = threads_[r.thread];
  const FileState& f = files_[t.file];
  if (f.dispatch.empty()) return kNoTime;
  int64_t run = r.corr;
  if (!(r.flags & kRunId)) {
    auto it = module_runs_.find({t.file, t.local_device});
    if (it == module_runs_.end() || !ModuleRunAt(it->second, r.ts, r.ts + r.dur, &run)) return kNoTime;
  }
  auto d = f.dispatch.find(run);
  return d == f.dispatch.end() ? kNoTime : d->second.first;
}

// A run id dispatched in two steps (reused, or a hand-merged trace) ties
// nothing: its ops' steps are taken by time, as if no dispatch were recorded.
void Importer::DropAmbiguousDispatches() {
  for (FileState& f : files_)
    for (auto it = f.dispatch.begin(); it != f.dispatch.end();) {
      const int first = StepAt(f, it->second.first), last = StepAt(f, it->second.second);
      if (first == last) {
        ++it;
        continue;
      }
      StatAt("run_id_dispatched_twice", [&] {
        return absl::StrCat(f.path, ": run id ", it->first, " in step ", first, " and step ", last);
      });
      it = f.dispatch.erase(it);
    }
}

int Importer::StepAt(const FileState& f, int64_t ts) const {
  auto it = std::upper_bound(f.steps.begin(), f.steps.end(), ts,
                             [](int64_t t, const StepSpan& s) { return t < s.start; });
  if (it == f.steps.begin()) return -1;
  --it;
  return ts < it->end || (ts == it->start) ? it->step : -1;
}

// Disjoint sets over collective instances.
struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t Find(size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Join(size_t a, size_t b) {
    a = Find(a), b = Find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

std::set<int> ParseRanks(const std::string& text) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("[], "), absl::SkipEmpty())) {
    int r;
    if (absl::SimpleAtoi(part, &r)) out.insert(r);
  }
  return out;
}

void Importer::MatchCollectives() {
  for (FileState& f : files_) {
    std::sort(f.steps.begin(), f.steps.end(), [](auto& a, auto& b) { return a.start < b.start; });
    // One number at two times (a profiler whose schedule restarted its count):
    // both are that step; said, since their times add up in it.
    std::map<int, int64_t> ended;  // step -> the end of its latest span so far
    for (const StepSpan& s : f.steps) {
      auto [it, fresh] = ended.try_emplace(s.step, s.end);
      if (fresh) continue;
      if (s.start >= it->second)
        StatAt("step_number_repeated", [&] { return absl::StrCat(f.path, ": ProfilerStep#", s.step); });
      it->second = std::max(it->second, s.end);
    }
  }
  bool all_have_steps = !files_.empty();
  for (const FileState& f : files_) all_have_steps = all_have_steps && !f.steps.empty();
  // Steps of each instance (a kernel's is its launch's), for order within a step.
  for (Coll& c : colls_) {
    const FileState& f = files_[c.file];
    int64_t at = c.ts;
    if (c.family == kFamKernel)
      if (const HostCorr* l = Linked(c.file, c.corr)) at = l->ts;
    c.step = all_have_steps ? StepAt(f, at) : -1;
  }
  // Host collective ops by (rank, thread), in start order, longer first.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> host_by_thread;
  for (size_t i = 0; i < colls_.size(); ++i)
    if (colls_[i].family != kFamKernel) host_by_thread[{colls_[i].file, colls_[i].thread}].push_back(i);
  for (auto& [ft, v] : host_by_thread)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      const Coll &x = colls_[a], &y = colls_[b];
      return x.ts != y.ts ? x.ts < y.ts : (x.end - x.ts) > (y.end - y.ts);
    });
  // The host ops whose span holds a kernel's launch (nccl:, record_param_comms, c10d::).
  auto around_launch = [&](const Coll& k, const std::function<void(size_t)>& each) {
    const HostCorr* l = Linked(k.file, k.corr);
    if (!l) return;
    auto it = host_by_thread.find({k.file, l->thread});
    if (it == host_by_thread.end()) return;
    for (size_t j : it->second)
      if (colls_[j].ts <= l->ts && l->ts <= colls_[j].end) each(j);
  };
  // A kernel carries no process group or sequence number: it takes those of
  // the innermost op around its launch that has them, so kernels of different
  // groups are not matched by one order.
  const uint32_t no_group = keys_.Id("");
  for (Coll& k : colls_) {
    if (k.family != kFamKernel) continue;
    around_launch(k, [&](size_t j) {
      const Coll& h = colls_[j];
      if (h.group != no_group) k.group = h.group, k.ranks = h.ranks;
      if (h.seq_arg >= 0) k.seq_arg = h.seq_arg;
    });
  }
  // Sequence numbers are used per (family, group) when every instance has one
  // and none repeats on a rank.
  std::map<std::pair<uint8_t, uint32_t>, bool> use_seq;
  {
    std::set<std::tuple<uint8_t, uint32_t, uint32_t, int64_t>> seen;
    for (const Coll& c : colls_) {
      auto [it, fresh] = use_seq.emplace(std::make_pair(c.family, c.group), true);
      if (c.seq_arg < 0) it->second = false;
      if (!seen.emplace(c.family, c.group, c.file, c.seq_arg).second && c.seq_arg >= 0 && it->second) {
        it->second = false;
        Stat("collective_seq_duplicate", files_[c.file].path);
      }
    }
  }
  // A send pairs with its peer's receive, and a trace that numbers no call
  // names no peer either: matched by order, rank 0's send (0 -> 1) would be
  // joined with rank 1's (1 -> 2), a pipeline read as a collective.
  const auto point_to_point = [&](const Coll& c) {
    const std::string& op = keys_.Str(c.op);
    return op == "send" || op == "recv" || op == "isend" || op == "irecv" || op == "sendrecv";
  };
  // Order within (file, family, group, op, step).
  std::vector<size_t> order(colls_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Coll &x = colls_[a], &y = colls_[b];
    return std::tie(x.file, x.family, x.group, x.op, x.step, x.ts, x.seq) <
           std::tie(y.file, y.family, y.group, y.op, y.step, y.ts, y.seq);
  });
  // Key: (family, group, op or -1, step or -1, index within or seq) -> instances.
  std::map<std::tuple<int, uint32_t, uint32_t, int, int64_t>, std::vector<size_t>> buckets;
  {
    std::map<std::tuple<uint32_t, int, uint32_t, uint32_t, int>, int64_t> counter;
    for (size_t i : order) {
      const Coll& c = colls_[i];
      if (use_seq[{c.family, c.group}]) {
        buckets[{c.family, c.group, UINT32_MAX, -1, c.seq_arg}].push_back(i);
      } else if (point_to_point(c)) {
        Stat("p2p_not_matched", files_[c.file].path);
      } else {
        int64_t k = counter[{c.file, c.family, c.group, c.op, c.step}]++;
        buckets[{c.family, c.group, c.op, c.step, k}].push_back(i);
      }
    }
    // Matched by order with no process group named: when the ranks called an
    // op a different number of times in a step (subgroups), the order pairs
    // some calls of different groups. Said, not silent.
    std::map<std::tuple<int, uint32_t, int>, std::map<uint32_t, int64_t>> calls;  // (family, op, step) -> rank -> n
    for (const auto& [key, n] : counter) {
      const auto& [file, family, group, op, step] = key;
      if (group == no_group) calls[{family, op, step}][file] = n;
    }
    std::set<uint32_t> ambiguous;
    for (const auto& [key, per_rank] : calls) {
      if (per_rank.size() < 2) continue;
      int64_t lo = INT64_MAX, hi = 0;
      for (const auto& [file, n] : per_rank) lo = std::min(lo, n), hi = std::max(hi, n);
      if (lo != hi)
        for (const auto& [file, n] : per_rank) ambiguous.insert(file);
    }
    for (uint32_t file : ambiguous) Stat("collective_order_ambiguous", files_[file].path);
  }
  UnionFind by_family(colls_.size()), all(colls_.size());
  const bool single_rank = files_.size() == 1 && files_[0].world_size <= 1;
  for (const auto& [key, members] : buckets) {
    std::set<uint32_t> ranks_here;
    for (size_t i : members) ranks_here.insert(colls_[i].file);
    for (size_t i = 1; i < members.size(); ++i) {
      by_family.Join(members[0], members[i]);
      all.Join(members[0], members[i]);
    }
    if (ranks_here.size() > 1) collectives_matched_ += static_cast<int64_t>(members.size());
    // Which imported ranks should hold it: its group's, else all.
    std::set<int> group = ParseRanks(colls_[members[0]].ranks);
    size_t expected = 0;
    for (const FileState& f : files_)
      if (group.empty() || group.count(f.rank)) ++expected;
    const FileState& f0 = files_[colls_[members[0]].file];
    if (ranks_here.size() == 1) {
      if (!single_rank && (group.empty() ? f0.world_size > 1 : group.size() > 1))
        Stat("collective_unmatched", f0.path, static_cast<int64_t>(members.size()));
    } else if (ranks_here.size() < expected) {
      Stat("collective_partial", f0.path, static_cast<int64_t>(members.size()));
    }
  }
  // Within a rank: a host op that encloses another collective op on its
  // thread, or a collective kernel's launch, is the same collective.
  for (auto& [ft, v] : host_by_thread) {
    std::vector<size_t> open;
    for (size_t i : v) {
      while (!open.empty() && colls_[open.back()].end < colls_[i].end) open.pop_back();
      if (!open.empty() && colls_[open.back()].ts <= colls_[i].ts) all.Join(open.back(), i);
      open.push_back(i);
    }
  }
  for (size_t i = 0; i < colls_.size(); ++i)
    if (colls_[i].family == kFamKernel) around_launch(colls_[i], [&](size_t j) { all.Join(i, j); });
  // gloo runs a c10d call on a worker thread, often after the call returned
  // (DDP's all_reduce): not nested, yet the same collective. In a trace that
  // numbers no call (older PyTorch), on one rank, the k-th c10d call of an op
  // in a step and its k-th gloo op there are joined, when the two counts
  // agree (else the trace's window cut one: left apart). Sends and receives
  // stay unmatched (see point_to_point).
  {
    using Key = std::tuple<uint32_t, uint32_t, int>;  // (file, op, step)
    std::map<Key, std::vector<size_t>> calls, runs;
    for (size_t i = 0; i < colls_.size(); ++i) {
      const Coll& c = colls_[i];
      // (shardscope's own export of such a run holds its collectives' flows as they were.)
      if (c.seq_arg >= 0 || c.group != no_group || point_to_point(c) || files_[c.file].own_export) continue;
      if (c.family == kFamC10d) calls[{c.file, c.op, c.step}].push_back(i);
      else if (c.family == kFamBackend && c.gloo) runs[{c.file, c.op, c.step}].push_back(i);
    }
    const auto by_start = [&](size_t a, size_t b) { return colls_[a].ts < colls_[b].ts; };
    for (auto& [key, v] : calls) {
      auto it = runs.find(key);
      if (it == runs.end() || it->second.size() != v.size()) continue;
      std::sort(v.begin(), v.end(), by_start);
      std::sort(it->second.begin(), it->second.end(), by_start);
      for (size_t k = 0; k < v.size(); ++k) all.Join(v[k], it->second[k]);
    }
  }
  // A joined set holding two instances of one family on one rank mixed up
  // two collectives: those fall back to their family's cross-rank flows.
  std::map<size_t, std::set<std::pair<uint32_t, uint8_t>>> seen;
  std::set<size_t> conflicted;
  for (size_t i = 0; i < colls_.size(); ++i) {
    size_t root = all.Find(i);
    if (!seen[root].emplace(colls_[i].file, colls_[i].family).second) conflicted.insert(root);
  }
  if (!conflicted.empty()) Stat("collective_match_conflict", "", static_cast<int64_t>(conflicted.size()));
  std::map<std::pair<int, size_t>, std::vector<size_t>> groups;  // (which union-find, root) -> members
  for (size_t i = 0; i < colls_.size(); ++i) {
    size_t root = all.Find(i);
    if (conflicted.count(root)) groups[{0, by_family.Find(i)}].push_back(i);
    else groups[{1, root}].push_back(i);
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;  // a lone instance keeps its launch link only
    int64_t flow = next_flow_++;
    for (size_t i : members) {
      coll_flow_[colls_[i].seq] = flow;
      if (colls_[i].family == kFamKernel && colls_[i].corr >= 0) coll_corr_flow_[{colls_[i].file, colls_[i].corr}] = flow;
    }
  }
  EstimateOffsets(buckets);
}

// XLA's collectives, across the devices of each file (one host: across files
// their clocks are not lined up by them, and XLA's NCCL kernels are matched
// across ranks as NCCL kernels are, which does). One instance is the same HLO
// op of the same module in the same execution (args.run_id, which XLA's CPU
// client gives; else the whole file), its k-th run there on each device (a
// loop runs one op several times). The CPU client also names the devices that
// meet (its Rendezvous inside the op), so the groups of one op ("all-reduce"
// over [0,1], [2,3], ...) stay apart; without it one op's groups are one.
void Importer::MatchXlaCollectives() {
  if (xla_colls_.empty()) return;
  // An op without an execution id takes its module's, on its device, when one holds it in time.
  for (XlaColl& c : xla_colls_) {
    if (c.has_run_id) continue;
    auto it = module_runs_.find({c.file, c.device});
    if (it != module_runs_.end()) c.has_run_id = ModuleRunAt(it->second, c.ts, c.end, &c.run_id);
  }

  for (auto& [thread, v] : rendezvous_)
    std::sort(v.begin(), v.end(), [](const Rendezvous& a, const Rendezvous& b) { return a.ts < b.ts; });
  std::vector<size_t> order(xla_colls_.size());
  std::iota(order.begin(), order.end(), 0);
  auto where = [&](size_t i) {
    const XlaColl& c = xla_colls_[i];
    return std::make_tuple(c.file, c.device, c.module, c.op, c.has_run_id, c.run_id, c.ts);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return where(a) < where(b); });
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, std::pair<bool, int64_t>, int64_t, std::string>, std::vector<size_t>>
      instances;
  std::map<std::tuple<uint32_t, int, uint32_t, uint32_t, std::pair<bool, int64_t>>, int64_t> seen;  // runs so far, per device
  for (size_t i : order) {
    const XlaColl& c = xla_colls_[i];
    // Without an execution id, the k-th run over the whole file: a device's
    // kernels run past their host step's end (dispatch is asynchronous), so
    // counting within steps would pair one device's k-th with another's k+1-th.
    const std::pair<bool, int64_t> execution{c.has_run_id, c.run_id};
    const int64_t occurrence = seen[{c.file, c.device, c.module, c.op, execution}]++;
    std::string group;
    if (auto it = rendezvous_.find({c.file, c.host_thread}); it != rendezvous_.end()) {
      auto r = std::lower_bound(it->second.begin(), it->second.end(), c.ts,
                                [](const Rendezvous& x, int64_t ts) { return x.ts < ts; });
      if (r != it->second.end() && r->ts <= c.end) group = r->devices;
    }
    // One execution's collectives meet across hosts too: one instance over the files.
    const uint32_t file = c.has_run_id && files_.size() > 1 ? UINT32_MAX : c.file;
    instances[{file, c.module, c.op, execution, occurrence, group}].push_back(i);
  }
  std::vector<std::vector<size_t>> cross_file;
  for (const auto& [key, members] : instances) {
    std::set<std::pair<uint32_t, int>> devices;
    bool twice = false;
    for (size_t i : members) twice |= !devices.emplace(xla_colls_[i].file, xla_colls_[i].device).second;
    if (twice) {
      Stat("xla_collective_ambiguous", files_[xla_colls_[members[0]].file].path,
           static_cast<int64_t>(members.size()));
      continue;
    }
    if (members.size() < 2) {
      Stat("collective_unmatched", files_[xla_colls_[members[0]].file].path);
      continue;
    }
    const int64_t flow = next_flow_++;
    for (size_t i : members) coll_flow_[xla_colls_[i].seq] = flow;
    xla_matched_ += static_cast<int64_t>(members.size());
    if (std::get<0>(key) == UINT32_MAX &&
        std::any_of(members.begin(), members.end(), [&](size_t i) { return xla_colls_[i].file != xla_colls_[members[0]].file; }))
      cross_file.push_back(members);
  }
  XlaOffsets(cross_file);
}

// Each rank's offset against the reference (the lowest rank): collectives
// that really synchronise (NCCL kernels, gloo ops) end together on every
// rank, so the median of end differences estimates it; the offset is then
// kept within what every matched pair allows (each collective starts on both
// ranks before it ends on either). A rank that shares no collective with the
// reference (tensor- and data-parallel groups: rank 3 meets ranks 1 and 2,
// not 0) is lined up through a rank already lined up, one hop at a time.
void Importer::EstimateOffsets(
    const std::map<std::tuple<int, uint32_t, uint32_t, int, int64_t>, std::vector<size_t>>& buckets) {
  size_t ref = 0;
  for (size_t i = 1; i < files_.size(); ++i)
    if (files_[i].rank < files_[ref].rank) ref = i;
  files_[ref].offset_known = true;
  files_[ref].offset_source = "reference rank";
  using Wide = __int128;  // sums and differences of times near int64's ends
  const uint32_t no_group = keys_.Id("");
  // What to add to rank `r`'s times to line them up with rank `k`'s, from the
  // collectives of one family the two share.
  struct Pair {
    Wide offset = 0;
    size_t matched = 0;
    bool consistent = true;
    int family = 0;  // 0 kernels, 1 gloo ops
    // Matched by order, none naming its process group, and none rooted: when
    // no one offset lets them all overlap, the order paired calls of
    // different groups (two subgroups calling all_reduce as often).
    bool by_order_only = false;
  };
  // A rooted collective (a broadcast's root, a reduce's senders) may leave
  // before the others arrive: it bounds no offset and its end is no common
  // moment. Used only where a pair shares nothing else.
  const auto rooted = [&](const Coll& c) {
    const std::string& op = keys_.Str(c.op);
    for (const char* r : {"broadcast", "reduce", "scatter", "gather", "send", "recv", "isend", "irecv", "sendrecv"})
      if (op == r) return true;
    return false;
  };
  auto pair = [&](size_t k, size_t r) -> std::optional<Pair> {
    for (int pass = 0; pass < 4; ++pass) {  // synchronising kernels, gloo ops; then rooted ones too
      const int fam = pass % 2;
      const bool all_ops = pass / 2 == 1;
      std::vector<Wide> diffs;
      Wide lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      bool unnamed = true;
      for (const auto& [key, members] : buckets) {
        const Coll *a = nullptr, *b = nullptr;
        int na = 0, nb = 0;
        for (size_t i : members) {
          const Coll& c = colls_[i];
          if (fam == 0 ? c.family != kFamKernel : !(c.family == kFamBackend && c.gloo)) break;
          if (!all_ops && rooted(c)) break;
          if (c.file == k) a = &c, ++na;
          if (c.file == r) b = &c, ++nb;
        }
        if (na != 1 || nb != 1) continue;
        unnamed = unnamed && a->group == no_group && a->seq_arg < 0;
        const Wide ra = files_[k].base, rb = files_[r].base;
        diffs.push_back((a->end + ra) - (b->end + rb));
        lo = std::max(lo, (a->ts + ra) - (b->end + rb));
        hi = std::min(hi, (a->end + ra) - (b->ts + rb));
      }
      if (diffs.empty()) continue;
      std::sort(diffs.begin(), diffs.end());
      Wide off = diffs.size() % 2 ? diffs[diffs.size() / 2]
                                  : diffs[diffs.size() / 2 - 1] + (diffs[diffs.size() / 2] - diffs[diffs.size() / 2 - 1]) / 2;
      if (lo <= hi) off = std::clamp(off, lo, hi);
      if (off > kMaxNs || off < -kMaxNs) continue;  // more than a century apart: not one job's clocks
      return Pair{off, diffs.size(), lo <= hi, fam, unnamed && !all_ops};
    }
    return std::nullopt;
  };
  // Breadth first from the reference: each pass lines up the ranks that
  // share collectives with one lined up in an earlier pass (the lowest first).
  std::vector<size_t> order(files_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return files_[x].rank < files_[y].rank; });
  for (std::vector<size_t> frontier = {ref}; !frontier.empty();) {
    std::vector<size_t> next;
    for (size_t r : order) {
      FileState& f = files_[r];
      if (f.offset_known) continue;
      for (size_t k : frontier) {
        const std::optional<Pair> p = pair(k, r);
        if (!p) continue;
        const Wide off = files_[k].offset + p->offset;
        if (off > kMaxNs || off < -kMaxNs) continue;
        if (!p->consistent) Stat("clock_offset_inconsistent", f.path);
        if (!p->consistent && p->by_order_only) Stat("collective_order_ambiguous", f.path);
        f.offset = static_cast<int64_t>(off);
        f.offset_known = true;
        f.offset_source = absl::StrCat(p->consistent ? "" : "inconsistent: ", "median end difference of ", p->matched,
                                       " matched ", p->family == 0 ? "collective kernels" : "gloo collectives",
                                       k == ref ? "" : absl::StrCat(" with rank ", files_[k].rank),
                                       p->consistent ? ", within what their starts allow" : "");
        next.push_back(r);
        break;
      }
    }
    frontier = std::move(next);
  }
}

// The ranks no collective lined up: said, and placed as recorded (an XSpace
// by the wall-clock start it records).
void Importer::MarkUnknownOffsets() {
  // Files lined up by a large offset that do not overlap the reference's on
  // their own clocks: two jobs' traces given together (the collectives of two
  // runs of one script match by order, 187 s apart).
  constexpr int64_t kConcurrentSlackNs = 1'000'000'000;
  const std::vector<size_t> by_rank = ByRank();
  if (!by_rank.empty()) {
    const FileState& ref = files_[by_rank.front()];
    using Wide = __int128;
    auto span = [](const FileState& f) {
      return std::make_pair(static_cast<Wide>(f.base) + f.first_ts, static_cast<Wide>(f.base) + f.last_ts);
    };
    for (size_t i : by_rank) {
      const FileState& f = files_[i];
      if (&f == &ref || !f.offset_known || f.first_ts > f.last_ts || ref.first_ts > ref.last_ts) continue;
      if (f.offset < kConcurrentSlackNs && f.offset > -kConcurrentSlackNs) continue;
      const auto [a0, a1] = span(ref);
      const auto [b0, b1] = span(f);
      const Wide gap = b1 < a0 ? a0 - b1 : b0 > a1 ? b0 - a1 : 0;
      if (gap <= kConcurrentSlackNs) continue;
      Stat("ranks_not_concurrent",
           absl::StrFormat("%s (on its own clock it %s %.1f s %s %s; lining its collectives up took an offset of "
                           "%.3f s)",
                           f.path, b1 < a0 ? "ends" : "begins", static_cast<double>(gap) / 1e9,
                           b1 < a0 ? "before" : "after", ref.path + (b1 < a0 ? " begins" : " ends"),
                           static_cast<double>(f.offset) / 1e9));
    }
  }
  for (FileState& f : files_) {
    if (f.offset_known) continue;
    if (f.outcome.xspace && f.info.has_base_time) {
      f.offset_source = "by the wall-clock start its XSpace records (profile_start_time; no NCCL or gloo "
                        "collective lines it up)";
      continue;
    }
    Stat("clock_offset_unknown", f.path);
    f.offset_source = "unknown: no collective kernel, gloo collective or XLA collective of one execution matched "
                      "with a rank lined up with the reference";
  }
}

// XLA's own collectives of one execution (the same run_id on every host:
// XLA's collectives meet by it) end together on every host as gloo's and
// NCCL's do: ranks the others left unlined are lined up by the median
// difference of their ends, kept within what the instances' starts allow,
// breadth first from the ranks already lined up.
void Importer::XlaOffsets(const std::vector<std::vector<size_t>>& cross_file) {
  using Wide = __int128;
  struct Side {
    int64_t first_ts = INT64_MAX, last_ts = INT64_MIN, first_end = INT64_MAX;
    std::vector<int64_t> ends;
  };
  auto median = [](std::vector<int64_t>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::vector<std::map<uint32_t, Side>> sides;  // per instance, per file
  for (const std::vector<size_t>& members : cross_file) {
    std::map<uint32_t, Side>& by_file = sides.emplace_back();
    for (size_t i : members) {
      const XlaColl& c = xla_colls_[i];
      Side& s = by_file[c.file];
      s.first_ts = std::min(s.first_ts, c.ts);
      s.last_ts = std::max(s.last_ts, c.ts);
      s.first_end = std::min(s.first_end, c.end);
      s.ends.push_back(c.end);
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < files_.size(); ++r) {
      // An XSpace's wall-clock start lines it up better than ends that may be of groups
      // meeting within a host: its offset stays that (MarkUnknownOffsets says so).
      if (files_[r].offset_known || (files_[r].outcome.xspace && files_[r].info.has_base_time)) continue;
      for (size_t k = 0; k < files_.size() && !files_[r].offset_known; ++k) {
        if (k == r || !files_[k].offset_known) continue;
        std::vector<Wide> diffs;
        Wide lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
        const Wide bk = static_cast<Wide>(files_[k].base) + files_[k].offset, br = files_[r].base;
        for (std::map<uint32_t, Side>& inst : sides) {
          auto a = inst.find(static_cast<uint32_t>(k)), b = inst.find(static_cast<uint32_t>(r));
          if (a == inst.end() || b == inst.end()) continue;
          diffs.push_back((median(a->second.ends) + bk) - (median(b->second.ends) + br));
          // No member ends before every member has started.
          lo = std::max(lo, (a->second.last_ts + bk) - (b->second.first_end + br));
          hi = std::min(hi, (a->second.first_end + bk) - (b->second.last_ts + br));
        }
        if (diffs.empty()) continue;
        std::sort(diffs.begin(), diffs.end());
        Wide off = diffs[diffs.size() / 2];
        const bool consistent = lo <= hi;
        if (consistent) off = std::clamp(off, lo, hi);
        if (off > kMaxNs || off < -kMaxNs) continue;
        if (!consistent) Stat("clock_offset_inconsistent", files_[r].path);
        files_[r].offset = static_cast<int64_t>(off);
        files_[r].offset_known = true;
        files_[r].offset_source = absl::StrCat(
            consistent ? "" : "inconsistent: ", "median end difference of ", diffs.size(),
            " XLA collectives of one execution", k == 0 ? "" : absl::StrCat(" with rank ", files_[k].rank),
            consistent ? ", within what their starts allow"
                       : " (an op's groups that meet within a host are one instance when the trace names no "
                         "groups: their ends need not meet)");
        progress = true;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Phase 2: sorted records to tracks and slices.

// Global device ids, in rank order then local GPU index (before the run row,
// which counts them).
int Importer::AssignDevices() {
  for (ThreadInfo& t : threads_)
    if (t.local_device == -2) {
      // A GPU process without an index: number it after the known ones.
      FileState& f = files_[t.file];
      const auto below = f.devices.lower_bound(kCpuDeviceBase);  // GPU indices, not XLA's CPU devices
      int idx = below == f.devices.begin() ? 0 : std::prev(below)->first + 1;
      for (ThreadInfo& u : threads_)
        if (u.process == t.process && u.local_device == -2) u.local_device = idx;
      f.devices.emplace(idx, -1);
    }
  for (ThreadInfo& t : threads_)
    if (t.local_device >= 0) files_[t.file].devices.emplace(t.local_device, -1);
  // shardscope's own export read back keeps its chips' ids ("chip 17"): a
  // part of a pod (export --chips 0-7,17) renumbered would name chip 8 for
  // chip 17. Its device ids are chips (below kCpuDeviceBase), one file.
  if (files_.size() == 1 && files_[0].own_export &&
      (files_[0].devices.empty() || files_[0].devices.rbegin()->first < kCpuDeviceBase)) {
    for (auto& [local, global] : files_[0].devices) global = local;
    return static_cast<int>(files_[0].devices.size());
  }
  int next = 0;
  for (size_t i : ByRank())
    for (auto& [local, global] : files_[i].devices) global = next++;
  return next;
}

std::vector<size_t> Importer::ByRank() const {
  std::vector<size_t> order(files_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return files_[a].rank < files_[b].rank; });
  return order;
}

// A slice's flow from what it carries itself: its collective's, its launch
// correlation's, or a v2 flow's (bind_id); -1 when none.
int64_t Importer::OwnFlow(const Rec& r) const {
  if (r.flags & kCollective)
    if (auto it = coll_flow_.find(r.seq); it != coll_flow_.end()) return it->second;
  if (r.corr >= 0 && !(r.flags & (kOwnStep | kRunId)))
    if (int64_t f = CorrFlow(threads_[r.thread].file, r.corr); f >= 0) return f;
  if (r.flow) return generic_flows_[r.flow - 1].id;
  return -1;
}

int64_t Importer::PointFlow(const Rec& p) const {
  if (p.flags & kAc2g) return CorrFlow(threads_[p.thread].file, p.corr);
  if (p.flow) return generic_flows_[p.flow - 1].id;
  return -1;
}

// One pass over the sorted records, nesting slices with a stack per lane.
// Without a writer it only binds flow events to the slices open at their
// time (bound_); with one it writes each slice as it opens, so every track's
// slices reach the store in start order, parents before children.
absl::Status Importer::Walk(Writer* w, ImportResult& res) {
  struct Open {
    int64_t id, start, end;
    uint64_t seq;
    int64_t flow;
    uint32_t name;
    uint8_t kind;
  };
  std::vector<Open> stacks[3];
  std::vector<int64_t> pending_next;
  uint32_t cur_thread = UINT32_MAX;
  int64_t done = 0;
  next_slice_ = 1;
  int64_t busy_until = INT64_MIN;  // a "waiting for host" thread's GPU: the latest end of its ops so far
  const int64_t total = spill_.total();
  constexpr int64_t kFlushEvery = 8192;
  std::future<void> flushing;

  auto track_of = [&](uint32_t thread, uint8_t lane) -> int64_t {
    ThreadInfo& t = threads_[thread];
    if (t.track[lane]) return t.track[lane];
    const FileState& f = files_[t.file];
    const ProcessInfo& p = processes_[t.process];
    trace::TrackRecord tr;
    tr.track_id = t.track[lane] = ++res.tracks;
    // Shardscope's own export of several hosts (ranks) in one file: each its own host again
    // (given beside other files, each file stays one rank).
    const int host = p.host >= 0 && files_.size() == 1 ? p.host : f.rank;
    tr.host_id = host;
    if (lane == kHostLane) {
      std::string proc = !p.name.empty() ? p.name : p.pid_is_string ? p.pid_text : absl::StrCat("pid ", p.pid_text);
      std::string thread_label = !t.name.empty() ? t.name : absl::StrCat("thread ", t.tid_text);
      tr.clock = trace::Clock::kHost;
      tr.device_id = -1;
      tr.thread_name = thread_label;
      tr.name = absl::StrCat("rank ", host, " / ", proc, " / ", thread_label);
    } else {
      int global = f.devices.count(t.local_device) ? f.devices.at(t.local_device) : -1;
      std::string stream = t.stream >= 0 ? absl::StrCat("stream ", t.stream) : (!t.name.empty() ? t.name : t.tid_text);
      // XLA's lines: a GPU's "Stream #14(Compute)" is stream 14; others ("XLA Ops", "XLA Modules") keep their names.
      if (t.xla && !t.name.empty() && !absl::StartsWith(t.name, "Stream")) stream = t.name;
      const std::string device = absl::StrCat(t.device_word, " ", ShownIndex(t.local_device));
      tr.clock = t.modeled ? trace::Clock::kModeled : trace::Clock::kDevice;
      tr.thread_name = stream;
      if (lane == kDeviceLane) {
        tr.device_id = global;
        tr.name = absl::StrCat("rank ", f.rank, " / ", device, " / ", stream);
      } else {
        // Annotations span kernels; on a lane of their own, without a device,
        // so per-device time is counted from the kernels alone.
        tr.device_id = -1;
        tr.name = absl::StrCat("rank ", f.rank, " / ", device, " / ", stream, " annotations");
      }
    }
    w->Record(tr);
    return tr.track_id;
  };

  // Every slice written goes through here.
  auto write = [&](const trace::SliceRecord& s) {
    w->Record(s);
    if (++res.slices % kFlushEvery == 0) {
      // Bounds the writer's queue (memory stays flat on big traces) without
      // stopping here while it writes: wait for the previous flush, start the next.
      if (flushing.valid()) flushing.wait();
      flushing = std::async(std::launch::async, [w] { w->Flush(); });
      Progress("writing the run", total ? static_cast<double>(done) / static_cast<double>(total) : 1,
               absl::StrCat(res.slices, " slices"));
    }
  };
  auto finish_thread = [&]() {
    if (w && cur_thread != UINT32_MAX)  // its lanes are done: the writer frees what it held for them
      for (int64_t track : threads_[cur_thread].track)
        if (track) w->EndTrack(track);
    for (auto& st : stacks) st.clear();
    busy_until = INT64_MIN;
    if (!w && !pending_next.empty()) Stat("flow_unbound", "", static_cast<int64_t>(pending_next.size()));
    pending_next.clear();
  };
  // A flow reaching a slice: kept when the slice has none, else counted.
  auto bind = [&](Open& o, int64_t fl, uint32_t file) {
    if (fl < 0) return;
    if (o.flow < 0) {
      o.flow = fl;
      bound_[o.seq] = fl;
    } else if (o.flow != fl) {
      Stat("slice_with_several_flows", files_[file].path);
    }
  };

  Rec r;
  while (spill_.Next(&r)) {
    ++done;
    if (r.thread != cur_thread) {
      finish_thread();
      cur_thread = r.thread;
    }
    const uint32_t file = threads_[r.thread].file;
    if (r.type == kCounter) {
      if (!w) continue;
      trace::CounterRecord c;
      c.name = names_.Str(r.name);
      c.ts_ns = Align(file, r.ts);
      c.value = std::bit_cast<double>(r.dur);
      const ThreadInfo& t = threads_[r.thread];
      const FileState& f = files_[file];
      int local = r.corr >= 0 ? static_cast<int>(r.corr) : t.local_device;
      c.device_id = local >= 0 && f.devices.count(local) ? f.devices.at(local) : -1;
      if (c.device_id < 0) {
        // The host's: a name two processes (two ranks' allocators, two
        // browsers' tabs) recorded is a series per process, not one.
        auto procs = counter_processes_.find(r.name);
        if (procs != counter_processes_.end() && procs->second.size() > 1) {
          const ProcessInfo& p = processes_[t.process];
          const std::string proc = !p.name.empty() ? p.name : absl::StrCat("pid ", p.pid_text);
          c.name = files_.size() > 1 ? absl::StrCat("rank ", f.rank, " / ", proc, " / ", c.name)
                                     : absl::StrCat(proc, " / ", c.name);
        }
      }
      w->Record(c);
      ++res.counters;
      continue;
    }
    if (r.type == kDeviceOp) {
      // A GPU that went idle and whose next op was launched only after that
      // waited for the host: the whole gap (docs/import.md).
      const int64_t idle_from = busy_until;
      busy_until = std::max(busy_until, r.ts + r.dur);
      if (!w) continue;
      ++device_ops_;
      // Its launch, else (XLA's CPU devices, TPUs) the host's dispatch of its execution.
      const HostCorr* l = r.corr >= 0 && !(r.flags & kRunId) ? Linked(file, r.corr) : nullptr;
      int64_t launch = l && l->ts != kNoTime ? l->ts : DispatchOf(r);
      // A dispatch recorded after its op began is not what started it: unknown.
      if (!(l && l->ts != kNoTime) && launch != kNoTime && launch > r.ts) launch = kNoTime;
      const bool launched = launch != kNoTime;
      ops_launched_ += launched;
      files_[file].ops_launched += launched;
      if (idle_from == INT64_MIN || idle_from >= r.ts) continue;
      gaps_unknown_ += !launched;
      files_[file].gaps_unknown += !launched;
      if (!launched || launch < idle_from) continue;
      trace::SliceRecord s;
      s.slice_id = next_slice_++;
      s.track_id = track_of(r.thread, kDeviceLane);
      s.start_ns = Align(file, idle_from);
      s.dur_ns = r.ts - idle_from;
      s.name = "waiting for host";
      s.category = "derived";
      s.kind = SliceKind::kHostWait;
      s.step = StepAt(files_[file], launch);  // the step that launched the op it waited for
      write(s);
      ++host_waits_;
      continue;
    }
    if (r.type == kSlice) {
      std::vector<Open>& st = stacks[r.lane];
      // A slice that starts inside the open one and ends after it is not
      // nested: it keeps its larger part. Mostly inside, it is clipped to end
      // with it; mostly after (two kernels of a stream overlapping by a
      // rounding), it starts when that one ends, beside it.
      int64_t start = r.ts, end = r.ts + r.dur;
      if (r.flags & kOwnDepth)  // the slices its export says it is not inside
        while (st.size() > r.shape - 1) st.pop_back();
      for (;;) {
        while (!st.empty() && st.back().end <= start) st.pop_back();
        if (st.empty() || end <= st.back().end) break;
        const bool after = end - st.back().end > st.back().end - start;
        if (w)
          StatAt(after ? "slice_overlaps_previous" : "slice_overlaps_parent", [&] {
            return absl::StrFormat("%s: '%s' at %.3f us, %s '%s'", files_[file].path, names_.Str(r.name),
                                   static_cast<double>(r.ts) / 1e3, after ? "overlapping" : "in",
                                   names_.Str(st.back().name));
          });
        if (!after) {
          end = st.back().end;
          break;
        }
        start = st.back().end;
        st.pop_back();
      }
      Open o{next_slice_++, start, end, r.seq, OwnFlow(r), r.name, r.kind};
      if (!w) {
        for (int64_t fl : pending_next) bind(o, fl, file);
        pending_next.clear();
      } else if (o.flow < 0 && !bound_.empty()) {
        if (auto it = bound_.find(r.seq); it != bound_.end()) o.flow = it->second;
      }
      if (w) {
        const ThreadInfo& t = threads_[r.thread];
        const FileState& f = files_[file];
        trace::SliceRecord s;
        s.slice_id = o.id;
        s.track_id = track_of(r.thread, r.lane);
        s.start_ns = Align(file, start);
        s.dur_ns = end - start;
        s.depth = static_cast<int>(st.size());
        if (s.depth > INT16_MAX)  // the store keeps depths in 16 bits
          StatAt("nesting_too_deep", [&] { return absl::StrCat(files_[file].path, ": '", names_.Str(r.name), "'"); });
        s.parent_id = st.empty() ? -1 : st.back().id;
        s.name = names_.Str(r.name);
        s.category = cats_.Str(r.cat);
        if (r.shape && !(r.flags & kOwnDepth)) s.shape = shapes_.Str(r.shape - 1);
        s.kind = static_cast<SliceKind>(r.kind);
        if (r.flags & kOwnStep) {
          s.step = static_cast<int>(r.corr);
          if (auto it = own_waits_.find(r.seq); it != own_waits_.end()) s.arrival_ns = s.start_ns - it->second;
        } else if (r.lane == kHostLane) {
          const int64_t at = (r.flags & kRunId) ? DispatchOf(r) : kNoTime;
          s.step = StepAt(f, at != kNoTime ? at : r.ts);
        } else {
          // A device slice belongs to the step that launched it: its launch (a CUDA
          // correlation id), else the host's dispatch of its XLA execution (run_id),
          // else the step whose span holds it.
          const HostCorr* l = r.corr >= 0 && !(r.flags & kRunId) ? Linked(t.file, r.corr) : nullptr;
          const int64_t at = l && l->ts != kNoTime ? l->ts : DispatchOf(r);
          s.step = StepAt(f, at != kNoTime ? at : r.ts);
          if (st.empty() && !f.steps.empty() && r.lane == kDeviceLane) {  // (not annotations' spans)
            device_ns_ += s.dur_ns;
            files_[t.file].device_ns += s.dur_ns;
            if (s.step < 0) {
              files_[t.file].device_ns_outside_steps += s.dur_ns;
            } else if (at != kNoTime && StepAt(f, r.ts) != s.step) {
              device_ns_after_dispatch_ += s.dur_ns;
            }
          }
        }
        s.flow_id = o.flow;
        s.bytes = r.bytes;
        if (o.flow >= 0 && o.flow < next_flow_) flows_used_[static_cast<size_t>(o.flow)] = true;
        write(s);
      }
      st.push_back(o);
      continue;
    }
    if (w) continue;  // flow events were bound in the first pass
    if (r.type == kFlowNext) {
      pending_next.push_back(PointFlow(r));
      continue;
    }
    // A flow event binds to the innermost slice open at its time: for an end,
    // preferably a GPU lane's (the kernel), for a start the host's (the launch).
    const int64_t fl = PointFlow(r);
    static constexpr uint8_t kPrefer[2][3] = {{kHostLane, kDeviceLane, kAnnotationLane},
                                              {kDeviceLane, kHostLane, kAnnotationLane}};
    const uint8_t* lanes = kPrefer[(r.flags & kFlowEnd) ? 1 : 0];
    bool bound = false;
    for (int i = 0; i < 3 && !bound; ++i) {
      std::vector<Open>& st = stacks[lanes[i]];
      while (!st.empty() && st.back().end < r.ts) st.pop_back();
      if (st.empty() || st.back().start > r.ts) continue;
      bound = true;
      // shardscope's export links a collective's slices across chips; its
      // phases (transfers) nest inside it and start with it.
      auto at = st.end() - 1;
      if (threads_[r.thread].own)
        for (auto it = st.rbegin(); it != st.rend(); ++it)
          if (it->kind == static_cast<uint8_t>(SliceKind::kCollective) && it->start <= r.ts) {
            at = std::prev(it.base());
            break;
          }
      bind(*at, fl, file);
    }
    if (!bound) Stat("flow_unbound", files_[file].path);
  }
  finish_thread();
  if (flushing.valid()) flushing.wait();
  return spill_.error();
}

absl::Status Importer::Emit(Writer& w, ImportResult& res) {
  absl::Status st = spill_.Finish();
  if (!st.ok()) return st;
  const std::map<int, int> own_hosts = OwnHosts();  // chip -> host of a multi-host export read back
  int64_t extra_hosts = 0;
  for (size_t i : ByRank()) {
    FileState& f = files_[i];
    w.Record(trace::HostRecord{f.rank, absl::StrCat("rank ", f.rank, " (", f.path.substr(f.path.rfind('/') + 1), ")")});
    std::set<int> more_hosts;
    for (const ProcessInfo& p : processes_)
      if (files_.size() == 1 && p.file == i && p.host >= 0 && p.host != f.rank) more_hosts.insert(p.host);
    for (int h : more_hosts)
      w.Record(trace::HostRecord{h, absl::StrCat("host ", h, " (", f.path.substr(f.path.rfind('/') + 1), ")")});
    extra_hosts += static_cast<int64_t>(more_hosts.size());
    for (const auto& [local, global] : f.devices) {
      trace::DeviceRecord d;
      d.device_id = global;
      d.host_id = own_hosts.count(local) ? own_hosts.at(local) : f.rank;
      d.coords = absl::StrCat("[", f.rank, ",", ShownIndex(local), "]");
      for (const internal::DeviceProperty& p : f.info.devices)
        if (p.id == local) d.hbm_bytes = p.total_memory;
      w.Record(d);
    }
  }
  res.hosts = static_cast<int64_t>(files_.size()) + extra_hosts;
  flows_used_.assign(static_cast<size_t>(next_flow_), false);  // flow ids are dense
  if (has_flow_events_) {
    if (st = Walk(nullptr, res); !st.ok()) return st;
    if (st = spill_.Rewind(); !st.ok()) return st;
  }
 host_waits_ = ops_launched_ = device_ops_ = gaps_unknown_ = device_ns_ = device_ns_after_dispatch_ = 0;
  for (FileState& f : files_)
    f.device_ns = f.device_ns_outside_steps = f.ops_launched = f.gaps_unknown = 0;
  if (st = Walk(&w, res); !st.ok()) return st;
  if (host_waits_ > 0) Stat("host_wait_derived", "", host_waits_);
  // Per file: one host's devices in no step (its dispatches not recorded) is
  // lost to its host's comparison however the other hosts fare.
  for (const FileState& f : files_)
    if (f.device_ns > 0 && 2 * f.device_ns_outside_steps > f.device_ns)
      Stat("device_work_outside_steps",
           absl::StrFormat("rank %d (%s): %.0f%% of its device time", f.rank, f.path,
                           100.0 * static_cast<double>(f.device_ns_outside_steps) / static_cast<double>(f.device_ns)));
  if (device_ns_ > 0 && 2 * device_ns_after_dispatch_ > device_ns_)
    Stat("steps_run_after_dispatch",
         absl::StrFormat("%.0f%% of the device time", 100.0 * static_cast<double>(device_ns_after_dispatch_) /
                                                          static_cast<double>(device_ns_)));
  // Without launches a GPU's wait for the host looks like any idle time.
  // (shardscope's own export carries the waits it recorded.)
  const bool own_only = std::all_of(threads_.begin(), threads_.end(),
                                    [](const ThreadInfo& t) { return t.local_device < 0 || t.own; });
  // Per rank too: one rank's ops with no launch at all would read as no wait, diluting the others'.
  std::string unlaunched;
  for (const FileState& f : files_)
    if (unlaunched.empty() && f.ops_launched == 0 && f.gaps_unknown > 0) unlaunched = f.path;
  if (res.devices > 0 && !own_only &&
      ((ops_launched_ == 0 && (device_ops_ == 0 || gaps_unknown_ > 0)) || !unlaunched.empty()))
    Stat("host_wait_unknown", unlaunched);
  res.flows = std::count(flows_used_.begin(), flows_used_.end(), true);

  // Steps: one row per ProfilerStep number, its longest span over the ranks.
  std::map<int, int64_t> steps;
  for (const FileState& f : files_)
    for (const StepSpan& s : f.steps) steps[s.step] = std::max(steps[s.step], s.end - s.start);
  // shardscope's own export says each step's wall time as its run recorded it.
  for (const FileState& f : files_)
    for (absl::string_view part : absl::StrSplit(f.info.step_walls, ',', absl::SkipEmpty())) {
      int step = 0;
      int64_t wall = 0;
      const size_t colon = part.find(':');
      if (colon != absl::string_view::npos && absl::SimpleAtoi(part.substr(0, colon), &step) &&
          absl::SimpleAtoi(part.substr(colon + 1), &wall) && wall >= 0 && steps.count(step))
        steps[step] = wall;
    }
  for (const auto& [n, wall] : steps) {
    trace::StepRecord s;
    s.step = n;
    s.has_loss = false;  // no loss in a trace
    s.wall_ns = wall;
    w.Record(s);
  }
  res.steps = static_cast<int64_t>(steps.size());
  return absl::OkStatus();
}

absl::Status Importer::WriteStatsAndFiles(const std::string& db_path, int64_t run_id, ImportResult& res) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string e = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("cannot reopen ", db_path, " to write import_stats: ", e));
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> guard(db, sqlite3_close);
  sqlite3_busy_timeout(db, 10000);
  absl::Status st = internal::Exec(db, "BEGIN IMMEDIATE");
  internal::Stmt stat, file;
  if (st.ok())
    st = stat.Prepare(db, "INSERT INTO import_stats(run_id, name, count, severity, description) VALUES (?,?,?,?,?)");
  if (st.ok())
    st = file.Prepare(db,
                      "INSERT INTO trace_imports(run_id, file, rank, world_size, host_id, clock_offset_ns, events,"
                      " first_ts_ns, last_ts_ns) VALUES (?,?,?,?,?,?,?,?,?)");
  for (const ImportStat& s : res.stats) {
    if (!st.ok()) break;
    stat.Int(1, run_id); stat.Text(2, s.name); stat.Int(3, s.count); stat.Text(4, s.severity);
    stat.Text(5, s.description);
    st = stat.Run();
  }
  for (const ImportedFile& f : res.files) {
    if (!st.ok()) break;
    file.Int(1, run_id); file.Text(2, f.path); file.Int(3, f.rank); file.Int(4, f.world_size);
    file.Int(5, f.host_id);
    f.offset_known ? file.Int(6, f.clock_offset_ns) : file.Null(6);
    file.Int(7, f.events); file.Int(8, f.first_ts_ns); file.Int(9, f.last_ts_ns);
    st = file.Run();
  }
  st = st.ok() ? internal::Exec(db, "COMMIT") : st;
  if (!st.ok()) {
    internal::Exec(db, "ROLLBACK").IgnoreError();
    return absl::Status(st.code(), absl::StrCat("writing import_stats of run ", run_id, " to ", db_path, ": ", st.message()));
  }
  return absl::OkStatus();
}

// Files with the same bytes as another given with them: two ranks never
// record identical traces (their ranks, pids and times differ), so one is
// likely a copy, a second rank in perfect step with the first. Said, not
// refused (a generator may write ranks that differ in nothing). Only files of
// equal size are compared, up to their first difference.
std::vector<std::pair<size_t, size_t>> IdenticalFiles(const std::vector<std::string>& paths) {
  std::vector<std::pair<size_t, size_t>> found;
  std::map<uint64_t, std::vector<size_t>> by_size;
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat sb;
    if (::stat(paths[i].c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
      by_size[static_cast<uint64_t>(sb.st_size)].push_back(i);
  }
  auto same = [&](const std::string& a, const std::string& b) {
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    std::vector<char> ba(1 << 16), bb(1 << 16);
    while (fa && fb) {
      fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
      fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
      if (fa.gcount() != fb.gcount() || std::memcmp(ba.data(), bb.data(), static_cast<size_t>(fa.gcount())) != 0)
        return false;
    }
    return fa.eof() && fb.eof();
  };
  for (const auto& [size, group] : by_size)
    for (size_t x = 0; x < group.size(); ++x)
      for (size_t y = x + 1; y < group.size(); ++y)
        if (same(paths[group[x]], paths[group[y]])) found.push_back({group[x], group[y]});
  return found;
}

absl::StatusOr<ImportResult> Importer::Run(const std::vector<std::string>& paths, const std::string& db_path) {
  if (paths.empty()) return absl::InvalidArgumentError("no trace files to import");
  ImportResult res;
  res.db_path = db_path;
  files_.resize(paths.size());
  std::map<std::pair<dev_t, ino_t>, size_t> seen;  // one file given twice (or by two names) is one rank
  for (size_t i = 0; i < paths.size(); ++i) {
    files_[i].path = paths[i];
    struct stat sb;
    if (::stat(paths[i].c_str(), &sb) != 0) continue;  // ReadFile says why
    bytes_total_ += static_cast<uint64_t>(sb.st_size);
    if (!S_ISREG(sb.st_mode)) continue;
    if (auto [it, fresh] = seen.emplace(std::make_pair(sb.st_dev, sb.st_ino), i); !fresh)
      return absl::InvalidArgumentError(absl::StrCat(
          paths[it->second], " and ", paths[i],
          paths[it->second] == paths[i] ? " are the same path" : " are the same file",
          ": each rank's trace is imported once"));
  }
  const std::vector<std::pair<size_t, size_t>> same_bytes = IdenticalFiles(paths);
  for (const auto& [a, b] : same_bytes) {
    struct stat sb;
    const int64_t size = ::stat(paths[a].c_str(), &sb) == 0 ? static_cast<int64_t>(sb.st_size) : 0;
    Stat("identical_files", absl::StrCat(paths[a], " and ", paths[b], " (", size, " bytes)"));
  }
  for (size_t i = 0; i < files_.size(); ++i) {
    if (absl::Status st = ReadFile(i); !st.ok()) {
      EndProgress();
      return st;
    }
  }
  // Files that name different ranks (distributedInfo) say they are two: a
  // generator may write ranks whose events differ in nothing.
  for (size_t a = 0; a < files_.size(); ++a)
    for (size_t b = a + 1; b < files_.size(); ++b)
      if (!(files_[a].info.has_rank && files_[b].info.has_rank && files_[a].info.rank != files_[b].info.rank) &&
          files_[a].content_events > 0 && files_[a].content_events == files_[b].content_events &&
          files_[a].content_hash == files_[b].content_hash &&
          absl::c_find(same_bytes, std::make_pair(a, b)) == same_bytes.end())
        Stat("identical_files", absl::StrCat(paths[a], " and ", paths[b], " (the same ", files_[a].content_events,
                                             " events in other bytes: one compressed, or written again)"));
  PackCpuDeviceLanes();
  if (!pushed_error_.ok()) {
    EndProgress();
    return pushed_error_;
  }
  if (absl::Status st = AssignRanks(); !st.ok()) {
    EndProgress();
    return st;
  }
  SameProcessFiles();
  res.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  LinkCorrelations();
  for (auto& [device, runs] : module_runs_) std::sort(runs.begin(), runs.end());
  MatchCollectives();  // (sorts each file's steps)
  DropAmbiguousDispatches();
  MatchXlaCollectives();
  MarkUnknownOffsets();
  // Flow ids: collectives first (numbered while matching), then each rank's
  // launch -> kernel links, then other flows present at both ends.
  for (FileState& f : files_) {
    f.corr_flow_base = next_flow_;
    next_flow_ += static_cast<int64_t>(f.linked.size());
  }
  for (GenericFlow& g : generic_flows_) {
    // (keys_ also names collectives' ops and groups: their slots here hold no flow.)
    if (g.start && g.end) g.id = next_flow_++;
    else if (g.start || g.end) Stat(g.start ? "flow_without_target" : "flow_without_source");
  }
  {
    __int128 origin = std::numeric_limits<int64_t>::max(), end = std::numeric_limits<int64_t>::min();
    for (const FileState& f : files_) {
      origin = std::min(origin, static_cast<__int128>(f.first_ts) + f.base + f.offset);
      end = std::max(end, static_cast<__int128>(f.last_ts) + f.base + f.offset);
    }
    if (end - origin > kMaxNs) {
      EndProgress();
      return absl::InvalidArgumentError(absl::StrCat(
          "the files' times span more than a century once placed on one clock (",
          files_.size() == 1 ? "a timestamp far from the others" : "are they from one job?",
          "): ", absl::StrJoin(paths, ", ")));
    }
    origin_ = static_cast<int64_t>(origin);
  }

  // The run.
  absl::StatusOr<std::unique_ptr<Writer>> writer = Writer::Open(db_path);
  if (!writer.ok()) {
    EndProgress();
    return writer.status();
  }
  const std::vector<size_t> by_rank = ByRank();
  res.devices = AssignDevices();
  {
    std::set<std::string> words;
    for (const ThreadInfo& t : threads_)
      if (t.local_device >= 0) words.insert(t.device_word);
    if (words.size() == 1) res.device_word = *words.begin();
    if (words.size() > 1) res.device_word = "device";
  }
  const bool any_device = res.devices > 0;
  trace::RunRecord run;
  const std::string first = paths[by_rank[0]].substr(paths[by_rank[0]].rfind('/') + 1);
  run.sample = files_.size() == 1 ? first : absl::StrCat(first, " +", files_.size() - 1);
  run.imported = true;
  run.profile = "none";
  run.clock_kinds = any_device ? "host,device" : "host";
  if (std::any_of(threads_.begin(), threads_.end(), [](const ThreadInfo& t) { return t.modeled; })) {
    // shardscope's own export with its modeled clock: that clock's profile comes along.
    run.clock_kinds += ",modeled";
    for (size_t i : by_rank)
      if (!files_[i].info.profile.empty()) run.profile = files_[i].info.profile;
  }
  if (files_.size() == 1 && files_[0].own_export) run.mesh = files_[0].info.mesh;
  run.num_hosts = static_cast<int>(files_.size());
  if (files_.size() == 1 && files_[0].own_export) {  // the hosts of the run it came from
    std::set<int> hosts = {files_[0].rank};
    for (const ProcessInfo& p : processes_)
      if (p.host >= 0) hosts.insert(p.host);
    run.num_hosts = static_cast<int>(hosts.size());
  }
  run.num_devices = static_cast<int>(res.devices);
  std::vector<std::string> ranks, quoted;
  for (size_t i : by_rank) ranks.push_back(std::to_string(files_[i].rank));
  for (const std::string& p : paths) quoted.push_back(JsonText(nlohmann::json(p)));
  run.topology = absl::StrCat(files_.size(), files_.size() == 1 ? " host" : " hosts", " (rank",
                              files_.size() == 1 ? " " : "s ", absl::StrJoin(ranks, ","), " of ", files_[0].world_size,
                              ")");
  // shardscope's own export of a run of several hosts is one file: its hosts
  // come back (above), and the header said "1 host (rank 0 of 1)" beside them.
  if (files_.size() == 1 && run.num_hosts > 1)
    run.topology = absl::StrCat(run.num_hosts, " hosts (one file, exported by shardscope)");
  run.config_json = absl::StrCat("{\"imported_from\": [", absl::StrJoin(quoted, ", "), "], \"format\": \"chrome_trace_json\"}");
  // Absolute times: Kineto's baseTimeNanoseconds, or timestamps that already are unix time.
  run.started_at_unix_ns = origin_ > 1000000000000000000 ? origin_ : 0;
  absl::StatusOr<int64_t> run_id = (*writer)->StartRun(run);
  if (!run_id.ok()) {
    EndProgress();
    return run_id.status();
  }
  res.run_id = *run_id;
  // shardscope's own export of a partly captured run stays partly captured.
  if (files_.size() == 1 && files_[0].own_export && !files_[0].info.capture_note.empty())
    (*writer)->AddCaptureNote(files_[0].info.capture_note);
  absl::Status st = Emit(**writer, res);
  if (st.ok()) st = (*writer)->FlushAndCheck();
  EndProgress();
  if (!st.ok()) {
    (*writer)->EndRun();
    return absl::Status(st.code(), absl::StrCat("importing into ", db_path, " (run ", res.run_id, "): ", st.message()));
  }

  // The files, in rank order, and the stats.
  for (size_t i : by_rank) {
    const FileState& f = files_[i];
    ImportedFile out;
    out.path = f.path;
    out.rank = f.rank;
    out.world_size = f.world_size;
    out.host_id = f.rank;
    out.offset_known = f.offset_known;
    out.clock_offset_ns = f.offset;
    out.offset_source = f.offset_source;
    out.events = f.outcome.events;
    out.first_ts_ns = Align(static_cast<uint32_t>(i), f.first_ts);
    out.last_ts_ns = Align(static_cast<uint32_t>(i), f.last_ts);
    out.truncated = f.outcome.truncated;
    out.truncation = f.outcome.truncation;
    out.gzip = f.outcome.gzip;
    out.file_bytes = f.outcome.file_bytes;
    out.json_bytes = f.outcome.json_bytes;
    out.xspace = f.outcome.xspace;
    res.input_bytes += f.outcome.file_bytes;
    res.json_bytes += f.outcome.json_bytes;
    res.x_events += f.x_events;
    res.x_events_unusable += f.x_unusable;
    res.files.push_back(std::move(out));
  }
  if (res.x_events > 0 && res.x_events_unusable * 100 > res.x_events) {
    StatAcc& s = stats_["unusable_x_events_over_1pct"];
    s.count = 1;
    s.detail = absl::StrFormat("%d of %d, %.1f%%", res.x_events_unusable, res.x_events,
                               100.0 * static_cast<double>(res.x_events_unusable) / static_cast<double>(res.x_events));
  }
  res.collectives = static_cast<int64_t>(colls_.size());
  res.collectives_matched = collectives_matched_;
  res.xla_collectives = static_cast<int64_t>(xla_colls_.size());
  res.xla_collectives_by_execution =
      std::count_if(xla_colls_.begin(), xla_colls_.end(), [](const XlaColl& c) { return c.has_run_id; });
  res.xla_collectives_matched = xla_matched_;
  for (const auto& [name, acc] : stats_) {
    const StatDef* d = FindStat(name);
    ImportStat s;
    s.name = name;
    s.count = acc.count;
    s.severity = d ? d->severity : "info";
    s.description = d ? d->description : name;
    if (!acc.detail.empty()) absl::StrAppend(&s.description, " (", acc.detail, ")");
    else if (!acc.first.empty()) absl::StrAppend(&s.description, " (first: ", acc.first, ")");
    res.stats.push_back(std::move(s));
  }
  auto sev = [](const std::string& s) { return s == "error" ? 0 : s == "data_loss" ? 1 : 2; };
  std::stable_sort(res.stats.begin(), res.stats.end(),
                   [&](const ImportStat& a, const ImportStat& b) { return sev(a.severity) < sev(b.severity); });
  st = WriteStatsAndFiles(db_path, res.run_id, res);
  // The run ends either way: its slices are in; a failure above is still the answer.
  absl::Status ended = (*writer)->EndRunAndCheck();
  if (!st.ok()) return st;
  if (!ended.ok()) return ended;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return res;
}

}  // namespace

absl::StatusOr<ImportResult> ImportChromeTraces(const std::vector<std::string>& files, const std::string& db_path,
                                                const ImportOptions& options) {
  Importer importer(options);
  return importer.Run(files, db_path);
}

absl::StatusOr<std::vector<ImportResult>> ImportChromeTraceWindows(const std::vector<std::string>& files,
                                                                   const std::string& db_path,
                                                                   const ImportOptions& options) {
  absl::StatusOr<ImportResult> one = ImportChromeTraces(files, db_path, options);
  if (one.ok()) return std::vector<ImportResult>{*std::move(one)};
  const auto payload = one.status().GetPayload(kRanksPayload);
  if (!payload) return one.status();
  const nlohmann::json given = nlohmann::json::parse(std::string(*payload), nullptr, false);
  if (!given.is_array()) return one.status();
  // Each rank's files in the order they started: the k-th of every rank is window k.
  struct Window {
    int64_t start, end;
    std::string path;
    bool operator<(const Window& o) const { return std::tie(start, end, path) < std::tie(o.start, o.end, o.path); }
  };
  std::map<int64_t, std::vector<Window>> by_rank;
  for (const nlohmann::json& f : given) {
    if (f.value("rank", int64_t{-1}) < 0) return one.status();  // a file without distributedInfo: ranks are guesses
    // A file without baseTimeNanoseconds beside files with it (Kineto writes
    // it after the events: a file cut short loses it) has no start comparable
    // with theirs to order windows by.
    if (f.value("based", false) != given.front().value("based", false))
      return absl::InvalidArgumentError(absl::StrCat(
          one.status().message(), "\n(", f.value("based", false) ? given.front().value("path", "") : f.value("path", ""),
          " has no baseTimeNanoseconds and others have (cut short?), so its profiling window cannot be told from "
          "theirs by time: import each window's files on their own)"));
    by_rank[f["rank"].get<int64_t>()].push_back(
        {f.value("start_ns", int64_t{0}), f.value("end_ns", int64_t{0}), f.value("path", "")});
  }
  const size_t windows = by_rank.begin()->second.size();
  for (auto& [rank, list] : by_rank) {
    if (list.size() != windows)
      return absl::InvalidArgumentError(absl::StrCat(
          one.status().message(), "\n(rank ", by_rank.begin()->first, " has ", windows, " files and rank ", rank,
          " has ", list.size(), ": not the same profiling windows of every rank, so they are not imported as "
          "one run per window)"));
    std::sort(list.begin(), list.end());
    // Windows of one process follow one another; two files of a rank that
    // overlap in time are not two windows (a copy, another job's rank).
    for (size_t k = 1; k < list.size(); ++k)
      if (list[k].start < list[k - 1].end)
        return absl::InvalidArgumentError(absl::StrCat(one.status().message(), "\n(", list[k - 1].path, " and ",
                                                       list[k].path, " overlap in time: not two profiling windows "
                                                       "of rank ", rank, ")"));
  }
  // The k-th files of the ranks are one window: they overlap in time (the
  // ranks' clocks differ by far less than windows are apart).
  for (size_t w = 0; w < windows; ++w) {
    int64_t latest_start = INT64_MIN, earliest_end = INT64_MAX;
    const Window* late = nullptr;
    const Window* early = nullptr;
    for (const auto& [rank, list] : by_rank) {
      if (list[w].start > latest_start) latest_start = list[w].start, late = &list[w];
      if (list[w].end < earliest_end) earliest_end = list[w].end, early = &list[w];
    }
    if (latest_start > earliest_end)
      return absl::InvalidArgumentError(absl::StrCat(
          one.status().message(), "\n(taken as window ", w + 1, " of each rank by start time, ", early->path,
          " ends before ", late->path, " starts: the ranks' windows do not line up, so they are not imported as "
          "one run per window)"));
  }
  std::vector<ImportResult> out;
  for (size_t w = 0; w < windows; ++w) {
    std::vector<std::string> window;
    for (const auto& [rank, list] : by_rank) window.push_back(list[w].path);
    absl::StatusOr<ImportResult> r = ImportChromeTraces(window, db_path, options);
    if (!r.ok())
      return absl::Status(r.status().code(), absl::StrCat("profiling window ", w + 1, " of ", windows, " (",
                                                          absl::StrJoin(window, ", "), "): ", r.status().message(),
                                                          w > 0 ? absl::StrCat(" (windows 1-", w, " were imported)")
                                                                : ""));
    out.push_back(*std::move(r));
  }
  return out;
}

std::string RenderImportSummary(const ImportResult& r) {
  auto n = [](int64_t count, const char* one, const char* many) {
    return absl::StrCat(count, " ", count == 1 ? one : many);
  };
  std::string out = absl::StrCat("imported ", n(static_cast<int64_t>(r.files.size()), "file", "files"), " into run ",
                                 r.run_id, " of ", r.db_path, ": ", n(r.hosts, "host", "hosts"), ", ",
                                 n(r.devices, r.device_word.c_str(), (r.device_word + "s").c_str()),
                                 ", ", n(r.tracks, "track", "tracks"), ", ",
                                 n(r.slices, "slice", "slices"), ", ", n(r.steps, "step", "steps"), ", ",
                                 n(r.flows, "flow", "flows"), ", ", n(r.counters, "counter sample", "counter samples"),
                                 "\n");
  for (const ImportedFile& f : r.files) {
    const double off = static_cast<double>(f.clock_offset_ns);
    std::string offset =
        !f.offset_known ? absl::StrCat("clock offset ", f.offset_source)
        : f.offset_source == "reference rank"
            ? "clock offset 0 (reference rank)"
            : absl::StrCat("clock offset ",
                           std::fabs(off) < 1e6 ? absl::StrFormat("%+.3f us", off / 1e3)
                                                : absl::StrFormat("%+.3f ms", off / 1e6),
                           " (", f.offset_source, ")");
    absl::StrAppend(&out, "  rank ", f.rank, " of ", f.world_size, "  ", f.path, "  ", f.events, " events  ", offset,
                    f.truncated ? absl::StrCat("  TRUNCATED: ", f.truncation) : "", "\n");
  }
  if (r.collectives > 0)
    absl::StrAppend(&out, "  collectives: ", r.collectives, " ops, ", r.collectives_matched,
                    " matched across ranks\n");
  if (r.xla_collectives > 0)
    absl::StrAppend(&out, "  XLA collectives: ", r.xla_collectives, " ops, ", r.xla_collectives_matched,
                    " matched across devices (",
                    r.xla_collectives_by_execution == r.xla_collectives ? "by HLO op and execution"
                    : r.xla_collectives_by_execution == 0
                        ? "by HLO op and order: the trace names no execution (run_id), so they are not paired across hosts"
                        : absl::StrCat("by HLO op and execution; ", r.xla_collectives - r.xla_collectives_by_execution,
                                       " named no execution (run_id) and were paired by order within their host"),
                    ")\n");
  absl::StrAppend(&out, absl::StrFormat("  complete (X) events: %d, unusable %d (%.2f%%)\n", r.x_events,
                                        r.x_events_unusable,
                                        r.x_events ? 100.0 * static_cast<double>(r.x_events_unusable) /
                                                         static_cast<double>(r.x_events)
                                                   : 0.0));
  if (r.stats.empty()) {
    absl::StrAppend(&out, "import_stats: none (every event was used)\n");
  } else {
    absl::StrAppend(&out, "import_stats (SELECT * FROM import_stats WHERE run_id = ", r.run_id, "):\n");
    for (const ImportStat& s : r.stats)
      absl::StrAppend(&out, absl::StrFormat("  %-9s %-28s %8d  %s\n", s.severity, s.name, s.count, s.description));
  }
  const double mb = static_cast<double>(r.input_bytes) / 1e6;
  const double json_mb = static_cast<double>(r.json_bytes) / 1e6;
  const size_t xspace = std::count_if(r.files.begin(), r.files.end(), [](const ImportedFile& f) { return f.xspace; });
  const char* form = xspace == 0 ? "JSON" : xspace == r.files.size() ? "XSpace protobuf" : "JSON and XSpace protobuf";
  absl::StrAppend(&out, absl::StrFormat("%.1f MB read (%.1f MB of %s) in %.2f s, %.1f MB/s of it; parsing took "
                                        "%.2f s (%.1f MB/s), matching and writing %.2f s\n",
                                        mb, json_mb, form, r.seconds, r.seconds > 0 ? json_mb / r.seconds : 0.0,
                                        r.read_seconds, r.read_seconds > 0 ? json_mb / r.read_seconds : 0.0,
                                        r.seconds - r.read_seconds));
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandTraceArgs(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  auto is_trace = [](const std::string& name) {
    for (const char* suffix : {".xplane.pb", ".xplane.pb.gz", ".pt.trace.json", ".pt.trace.json.gz"})
      if (absl::EndsWith(name, suffix)) return true;
    return false;
  };
  // Any JSON: export_chrome_trace's files are named by the user (rank0.json).
  auto is_json = [](const std::string& name) {
    return absl::EndsWith(name, ".json") || absl::EndsWith(name, ".json.gz");
  };
  // The traces directly in `dir`, by name.
  auto traces_in = [&](const fs::path& dir, const std::function<bool(const std::string&)>& wanted) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec) && wanted(e.path().filename().string())) found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    return found;
  };
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      files.push_back(arg);  // a file, or a path whose error the reader names
      continue;
    }
    std::vector<std::string> found = traces_in(arg, is_trace);
    if (found.empty()) {
      // A TensorBoard log directory: its profiles are plugins/profile/RUN/, one per capture.
      std::vector<fs::path> runs;
      for (const fs::directory_entry& e : fs::directory_iterator(fs::path(arg) / "plugins" / "profile", ec))
        if (e.is_directory(ec) && !traces_in(e.path(), is_trace).empty()) runs.push_back(e.path());
      std::sort(runs.begin(), runs.end());
      if (runs.size() > 1) {
        std::vector<std::string> names;
        for (const fs::path& r : runs) names.push_back(r.filename().string());
        return absl::InvalidArgumentError(absl::StrCat(
            arg, " holds ", runs.size(), " profiles (plugins/profile/", absl::StrJoin(names, ", "),
            "), one per capture: give the one to import, e.g. ", runs.back().string()));
      }
      if (runs.size() == 1) found = traces_in(runs.front(), is_trace);
    }
    if (found.empty()) found = traces_in(arg, is_json);
    if (found.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          arg, " is a directory with no trace in it: looked for *.xplane.pb[.gz] (XLA's profiler) and "
               "*.pt.trace.json[.gz] (torch.profiler's tensorboard_trace_handler) in it and in plugins/profile/RUN/, "
               "then for any *.json[.gz] in it (export_chrome_trace's files)"));
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

}  // namespace shardscope::store
