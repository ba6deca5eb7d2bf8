// Process-wide state of the lazy frontend: the runtime client, the live
// tensors whose values are pending, the graphs seen at each call site (for
// recompilation causes) and the host track. Internal to core/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "runtime/client.h"

namespace shardscope {

struct InitOptions {
  int num_hosts = 1;
  int chips_per_host = 1;
  int64_t hbm_bytes = int64_t{16} << 30;
  // The persistent compile cache's directory (runtime/compile_cache.h); empty:
  // $SHARDSCOPE_CACHE_DIR if set, else none.
  std::string cache_dir;
  // Programs the in-memory compile cache keeps (0: no limit).
  size_t cache_capacity = 0;
  // How the chips are wired (runtime/interconnect.h: "2x4", "gpu:2x4"); empty:
  // not said. Its chips must number num_hosts * chips_per_host; it decides the hosts.
  std::string topology{};
  // A one-line notice on stderr at each recompilation (a miss at a call site
  // that compiled before), as PT_XLA_DEBUG and TORCH_LOGS=recompiles do.
  bool recompile_notices = true;
  // Simulated mode (runtime/simulate.h): nothing is computed; every run is laid
  // out on the modeled clock only. Needs a topology.
  bool simulate = false;
  // The modeled clock's chip profile: cpu (this machine, measured when first
  // needed and cached: runtime/cpu_calibration.h), tpu-v4 or h100.
  std::string profile = "cpu";
};

// Sets up the runtime (once per run). Emits the topology to the recorder.
absl::Status Init(const InitOptions& opts);
// Tears down the runtime and forgets the graph history.
void Shutdown();
bool Initialized();
runtime::Client& GetClient();

namespace internal {

// An input of a cut graph, as the recompilation diagnosis needs it.
struct GraphInput {
  std::string name;
  Shape shape;
  Sharding sharding;
  SourceLoc created;
  bool shape_from_data = false;  // made by nonzero: its shape follows the values
  SourceLoc sharding_loc;        // the call that laid it out, if any: mark_sharding, clear_sharding, ...
  std::string sharding_by;       // that call's name
  SourceLoc layout_from_loc;     // else the call its propagated layout came from
  std::string layout_from;       // and what that call laid out
  std::string layout_from_by;    // its name
  bool requires_grad = false;
  SourceLoc requires_grad_loc;
  // What pairs it with an input of another graph: its name, else where it was made.
  std::string Key() const;
};

// A graph compiled at some call site, kept to diff later graphs against.
struct SeenGraph {
  int64_t graph_id = 0;
  std::unique_ptr<compiler::Module> module;
  std::vector<GraphInput> inputs;
  std::vector<SourceLoc> notes;  // per instruction: Node::note_loc
  SourceLoc read_before;         // a value read that cut this step before this graph
  std::string options;           // compile options it was compiled under
  std::string site_text;
};

struct Context {
  std::unique_ptr<runtime::Client> client;
  std::mutex mu;
  std::map<int64_t, std::weak_ptr<TensorImpl>> live;  // by creation id
  std::map<std::string, std::vector<SeenGraph>> sites;  // call-site key -> graphs
  int64_t next_tensor_id = 1;
  int64_t host_track = 0;
  int step = 0;
  int64_t step_start_ns = 0;
  // When each step began on the host clock: Init or a resume for the first,
  // then the end of the mark_step before it (the first such, an evaluation's
  // own cuts do not move it). A step's wall time runs to the next one's
  // beginning, whenever its loss is logged.
  std::map<int, int64_t> step_began_ns;
  std::map<std::string, int64_t> recorded_tensors;  // name|shape|sharding -> tensor id
  // The newest cut's program: for compile()'s guard on distinct graphs.
  struct LastCut {
    std::string fingerprint;
    bool compiled = false;           // a cache miss
    std::string cause_kind, cause_detail;
  } last_cut;
  int64_t tensors_created = 0;  // the CreateTensor counter
  int64_t mark_steps = 0;       // the MarkStep counter: every call, whether or not it ran anything
  SourceLoc step_read;          // this step's first value read that cut the graph
  bool step_cut = false;        // this step has run a program (a mark_step or a read that cut)
  int64_t value_reads = 0;      // the ValueRead counter: every item()/to_host()
  int64_t tensors_at_step = 0;  // tensors_created when this step began (a mark_step); -1: set_current_step
  bool recompile_notices = true;
  // The per-op counters: op nodes the frontend traced (each once, when a
  // tensor first holds it), by opcode, and the values last sampled into the
  // recorder (only changed ones are sampled).
  std::map<compiler::Opcode, int64_t> ops_traced, ops_traced_sampled;
};

Context& Ctx();

// The graphs of the runtime before the last Shutdown, and its chip count.
struct PreviousRuntime {
  std::map<std::string, std::vector<SeenGraph>> sites;
  int chips = 0;
};
PreviousRuntime& Previous();
void RegisterLive(const std::shared_ptr<TensorImpl>& t);

}  // namespace internal
}  // namespace shardscope
