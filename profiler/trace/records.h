// Event records: the vocabulary every layer uses to report what happened.
// Plain structs with no behaviour, so compiler, runtime and core can describe
// events without knowing how (or whether) they are stored. The store maps each
// record onto a table (docs/schema.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::trace {

// Which clock a timeline is on. Never mixed silently: every track names one.
enum class Clock { kHost, kDevice, kModeled };
const char* ClockName(Clock c);

// What a timeline slice is. kHostWait is on device tracks only: the chip had
// finished its last program and the host had not yet enqueued the next one
// (runtime/scheduler.h says how it is measured).
enum class SliceKind { kCompute, kCollective, kTransfer, kHost, kCompile, kHostWait };
const char* SliceKindName(SliceKind k);

struct RunRecord {
  std::string sample;          // workload name, e.g. "mlp"
  std::string mesh;            // e.g. "2x2"
  std::string mesh_axes;       // e.g. "data,model"
  std::string sharding;        // strategy name, e.g. "dp"
  std::string config_json;     // the full run configuration
  std::string topology;        // e.g. "1 host x 4 chips"
  std::string profile = "cpu"; // target-chip profile of the modeled clock
  std::string clock_kinds = "host,device";
  std::string tool_version;
  int64_t started_at_unix_ns = 0;
  bool simulated = false;
  bool imported = false;       // read from another tool's trace (shardscope import)
  int num_hosts = 1;
  int num_devices = 1;
};

struct HostRecord {
  int host_id = 0;
  std::string name;
};

struct DeviceRecord {
  int device_id = 0;
  int host_id = 0;
  std::string coords;          // mesh coordinates, e.g. "[0,1]"
  int64_t hbm_bytes = 0;       // memory budget of the virtual chip
  double peak_flops = 0;       // peak FLOP/s of the run's profile
  // With a --topology (else empty): the chip's coordinates in it ("[1,0,3]")
  // and its links as JSON, one object per kind of link
  // ([{"bandwidth":...,"kind":"ici","latency_ns":...,"peers":[1,4]}]).
  std::string topology_coords{};
  std::string links_json{};
};

struct MeshRecord {
  int mesh_id = 0;
  std::string shape;           // e.g. "[2,2]"
  std::string axis_names;      // e.g. "data,model"
  std::string device_ids;      // row-major, e.g. "0,1,2,3"
};

// A timeline lane: one per device and per host thread, each on one clock.
struct TrackRecord {
  int64_t track_id = 0;
  std::string name;            // "chip 0", "host 0 / main"
  Clock clock = Clock::kHost;
  int device_id = -1;          // -1 on host tracks
  int host_id = 0;
  std::string thread_name;     // host tracks only
};

// One span of time on a track (Perfetto's slice). Ids are assigned by the
// producer so parents and flows can refer to each other before storage.
struct SliceRecord {
  int64_t slice_id = 0;
  int64_t track_id = 0;
  int64_t start_ns = 0;        // on the track's clock, since the run started
  int64_t dur_ns = 0;
  int depth = 0;
  int64_t parent_id = -1;
  std::string name;
  SliceKind kind = SliceKind::kHost;
  int step = -1;
  int64_t graph_id = -1;
  int64_t op_id = -1;          // instruction id within the graph, if any
  int64_t flow_id = -1;        // links the slices of one collective across devices
  int64_t bytes = 0;           // bytes moved (collectives, transfers)
  // A collective: when this chip's operands were ready (on the track's clock),
  // -1 when not a collective. The slice itself starts when the last member
  // arrived, so start_ns - arrival_ns is the time this chip waited for others.
  int64_t arrival_ns = -1;
  // The producing tool's own category, kept beside `kind` (an imported trace's
  // "cat", e.g. "cuda_runtime"); empty for slices shardscope recorded.
  std::string category;
  // The call's shape as the producing tool recorded it (an imported kernel's
  // launch grid and block and its op's input dims, an op's input dims and
  // types); empty for slices shardscope recorded (their op has its shape).
  std::string shape;
};

struct GraphRecord {
  int64_t graph_id = 0;
  std::string fingerprint;     // structural hash (hex)
  std::string call_site;       // mark_step location plus the user's stack
  std::string ir_text;         // StableHLO text as traced
  std::string ir_text_after;   // after SPMD partitioning and passes
  int op_count = 0;
  double flops = 0;
  int64_t bytes = 0;
};

// One op (or fused kernel) of a compiled per-device program, with its cost on
// the run's chip profile. Emitted once per op when a program is compiled, so
// slices (which carry graph_id and op_id) can be joined to what each op is,
// where the user wrote it and what the cost model expects it to take.
struct OpRecord {
  int64_t graph_id = 0;
  int64_t op_id = 0;           // instruction id within the per-device program
  std::string name;            // as on the timeline, e.g. "dot_general.7"
  std::string opcode;          // e.g. "stablehlo.dot_general"
  std::string shape;           // result type, e.g. "f32[64,1024]"
  double flops = 0;            // per device, one run
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t modeled_ns = 0;      // cost-model time on `profile`
  std::string roofline;        // compute | memory | collective | none
  std::string profile;         // the chip profile the cost is for
  std::string source_file;     // the user's line that made the op
  int source_line = 0;
  std::string scope;           // module path, e.g. "layers.0.attn"
  int64_t moves_op_id = -1;    // a collective: the global value it moves (sharding_decisions.op_id)
};

// A compiled program's memory plan on each device: its peak, and the buffers
// live at the peak, largest first (so an out-of-memory run can be explained
// from the database alone).
struct PeakBuffer {
  int rank = 0;                // 0 = largest
  int64_t op_id = 0;           // instruction id in the per-device program
  std::string op;              // e.g. "dot_general.7"
  int64_t bytes = 0;
  bool input = false;          // a parameter, resident before the run
  std::string source_file;
  int source_line = 0;
  std::string scope;
};

struct MemoryPlanRecord {
  int64_t graph_id = 0;
  int64_t peak_bytes = 0;      // inputs included
  int64_t parameter_bytes = 0;
  int64_t arena_bytes = 0;     // intermediates and outputs, with reuse
  int64_t unshared_bytes = 0;  // the same without reuse
  std::string peak_op;         // where the peak is reached
  std::vector<PeakBuffer> live_at_peak;
  // The liveness curve: per op of the per-device program, in program order,
  // its instruction id and the bytes live while it runs (memory_curves).
  std::vector<int64_t> curve_op_ids, curve_live_bytes;
};

// Fusion of one compiled program: every producer -> consumer edge the pass
// looked at, fused or not and why (compiler/fusion.h).
struct FusionEdge {
  int64_t producer_op_id = 0, consumer_op_id = 0;
  std::string producer, consumer;  // "multiply.12"
  bool fused = false;
  std::string kernel;              // "fusion.40"; empty when the consumer runs alone
  std::string reason;
  std::string source_file;         // the consumer's line
  int source_line = 0;
  std::string scope;
};
// What each compiler pass did to one program: ops removed or rewritten.
struct PassRecord {
  int64_t graph_id = 0;
  std::string pass;      // cse | dce | algebraic | constant_folding | fusion
  int64_t changed = 0;   // ops merged, dropped, rewritten, folded or fused into a kernel
  int64_t ops_after = 0; // ops of the program after the pass pipeline
};

struct FusionRecord {
  int64_t graph_id = 0;
  std::vector<FusionEdge> edges;
};

// Sharding propagation of one compiled program (compiler/spmd.h): the
// sharding each op of the global program got and where it came from, and
// every involuntary full rematerialization.
struct ShardingDecisionRow {
  int64_t op_id = 0;           // instruction id in the global program
  std::string name;            // "dot_general.12", or a parameter's name
  std::string sharding;        // HLO text
  std::string source;          // annotated | propagated | default
  std::string via;             // the op propagation carried it through
  std::string source_file;
  int source_line = 0;
  int64_t from_op_id = -1;     // the op whose layout it took (-1: none)
};
struct RematerializationRow {
  int64_t op_id = 0;           // the value, in the global program
  std::string value;           // its name
  std::string op;              // the op that needed it whole
  int64_t bytes = 0;
  std::string source_file;     // where the value was made
  int source_line = 0;
};
struct ShardingRecord {
  int64_t graph_id = 0;
  std::vector<ShardingDecisionRow> decisions;
  std::vector<RematerializationRow> rematerializations;
};

// An auto-sharding search: the layout it chose for each group of parameters,
// and what that layout and each hand-written strategy cost on the same
// graph (the modeled step of the cost model's profile).
struct AutoShardingCandidateRow {
  std::string strategy;        // "auto", or a hand-written strategy's name
  double modeled_ns = 0;
  double collective_ns = 0;
  int collectives = 0;
  int64_t peak_bytes = 0;      // per chip
  bool fits = true;            // within the memory budget
  int rematerializations = 0;
  bool chosen = false;
};
struct AutoShardingChoiceRow {
  std::string group;           // "layers.*.attn.q_proj.weight"
  int tensors = 0;             // parameters sharing the choice
  std::string layout;          // mesh axes per dim: "[model, none]"
  std::string sharding;        // HLO text
};
struct AutoShardingRecord {
  int step = 0;
  std::string method;          // exact | heuristic
  double combinations = 0;     // size of the search space
  int evaluations = 0;
  int64_t search_ns = 0;       // host clock
  std::string profile;
  int64_t memory_budget = 0;   // bytes per chip, 0: none
  std::vector<AutoShardingCandidateRow> candidates;
  std::vector<AutoShardingChoiceRow> choices;
};

// One op of a recompiled graph's aligned diff against the graph it was
// compared with (compiler/graph_diff.h).
struct CompileDiffOp {
  std::string change;       // added | removed | changed
  std::string opcode;       // e.g. stablehlo.exponential
  int64_t op_index = -1;    // in the new graph's instructions (added, changed), else the old one's
  std::string what;         // changed: constant | sharding constraint | attributes | operands
  std::string source_file;  // the user's line that made it
  int source_line = 0;
  std::string via;          // the library call between, if any (e.g. optim::AdamW::step)
};

struct CompilationRecord {
  int64_t compile_id = 0;
  int step = 0;
  int64_t graph_id = 0;
  std::string cache;           // miss | memory_hit | disk_hit
  std::string cause_kind;      // first_compile | input_shape_changed | ... (empty on hits)
  std::string cause_subkind;   // graph_changed: layer_added | ... | ops_changed (docs/schema.md)
  std::string cause_detail;
  std::string source_file;     // the user's line the cause points at
  int source_line = 0;
  int64_t duration_ns = 0;     // host clock
  int64_t prev_graph_id = -1;  // the graph this one was diffed against
  std::string call_site;
  int64_t host_start_ns = 0;
  std::vector<CompileDiffOp> diff;  // against prev_graph_id (at most kMaxDiffOps)
  int64_t diff_total = 0;           // ops that differ in all (diff may hold fewer)
};
inline constexpr size_t kMaxDiffOps = 200;

struct ExecutionRecord {
  int64_t execution_id = 0;
  int step = 0;
  int64_t graph_id = 0;
  std::string cache;           // how the executable was obtained
  std::string input_signature; // JSON array: name, shape, dtype, sharding, source
  std::string cause;           // mark_step | value_read | step_end
  std::string source_file;     // where the cut happened
  int source_line = 0;
  int64_t host_start_ns = 0;
  int64_t host_dur_ns = 0;
};

struct StepRecord {
  int step = 0;
  double loss = 0;             // NaN or Inf when training diverged
  int64_t wall_ns = 0;         // host clock
  bool has_eval_loss = false;  // a held-out loss was measured after this step
  double eval_loss = 0;
  bool has_loss = true;  // false: no loss was computed (imported, replayed)
};

struct TensorRecord {
  int64_t tensor_id = 0;
  std::string name;
  std::string shape;           // e.g. "[64,784]"
  std::string dtype;           // e.g. "f32"
  std::string sharding;        // XLA text form, e.g. "{replicated}"
  std::string sharding_source; // annotated | propagated | auto | default
  std::string source_file;
  int source_line = 0;
  int step = 0;                // first step the tensor was seen with this sharding
};

struct ShardPlacementRecord {
  int64_t tensor_id = 0;
  std::string tensor_name;
  int device_id = 0;
  std::string index_ranges;    // e.g. "[0:32,0:784]"
  int64_t bytes = 0;
  int last_device_id = -1;     // the same shard on device_id..this (-1: device_id alone)
};

struct CounterRecord {
  int device_id = -1;          // -1: process-wide
  std::string name;
  int64_t ts_ns = 0;
  double value = 0;
};

// What a hang detector saw when a chip stopped responding: the chip, the
// step, the collective the others waited in for it (empty: its program has
// none), and who waited. The run ends there (`hangs`).
struct HangRecord {
  int step = 0;
  int device_id = 0;
  int host_id = 0;
  int64_t graph_id = 0;
  std::string collective;
  std::vector<int> waiting;
  std::string message;  // the detector's sentence, as the run's error says it
};

// The frontend's per-op counters: this prefix and the opcode
// ("TracedOp:stablehlo.add"), the op tensors traced so far in the run,
// sampled at every mark_step when they moved.
inline constexpr const char* kTracedOpCounterPrefix = "TracedOp:";

}  // namespace shardscope::trace
