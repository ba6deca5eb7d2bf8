// The PJRT-style client: compiles global programs into SPMD executables
// (through an in-memory compile cache keyed by fingerprint and device count),
// moves data onto and off the devices, and runs executables, laying out each
// run on the device clock through the Scheduler.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/buffer_assignment.h"
#include "compiler/ir.h"
#include "compiler/spmd.h"
#include "runtime/buffer.h"
#include "runtime/dispatch.h"
#include "runtime/faults.h"
#include "runtime/intra_op.h"
#include "runtime/modeled_clock.h"
#include "runtime/scheduler.h"
#include "runtime/simulate.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace shardscope::runtime {

enum class CacheOutcome { kMiss, kMemoryHit, kDiskHit };

// Where an output's layout came from when propagation carried it there: a
// parameter's layout, or a value the user constrained (made at `loc`, with
// `sharding`). A layout that changes a later step's input is then blamed on
// the annotation that set it, not on the op that made the value.
struct LayoutOrigin {
  int64_t param_index = -1;   // the global parameter, or -1
  compiler::SourceLoc loc;    // the constrained value (param_index < 0)
  std::string sharding;       // its constraint, as printed
  bool known() const { return param_index >= 0 || loc.known(); }
};

const char* CacheOutcomeName(CacheOutcome c);  // miss | memory_hit | disk_hit

struct Executable {
  int64_t graph_id = 0;           // unique per distinct program in this process
  std::string fingerprint;
  std::unique_ptr<compiler::Module> program;  // the per-device SPMD program
  std::vector<Shape> param_shapes, output_shapes;  // global
  std::vector<Sharding> param_shardings, output_shardings;
  // Every global op's sharding and every rematerialization, named as they
  // are recorded (graph_id set when recorded).
  trace::ShardingRecord sharding;
  std::vector<compiler::Rematerialization> rematerializations;
  std::vector<std::pair<int64_t, int64_t>> moved_values;  // (collective in `program`, global value it moves)
  std::vector<LayoutOrigin> output_layout_origins;         // per output; empty from an older disk entry
  std::string ir_before, ir_after;
  compiler::MemoryPlan memory;    // per device: peak, and what is live there
  double flops = 0;               // per device, one run
  int64_t bytes = 0;              // parameter + output bytes, global
  int op_count = 0;
  // Cost model of every op of `program` (by instruction id) on `cost_profile`.
  std::vector<compiler::OpCost> op_costs;
  std::string cost_profile;
  // Which ops run together as fused kernels (empty when fusion is off).
  compiler::FusionPlan fusion;
};

// The graph record of a compiled program (one per program new to a process),
// named by the call site that cut it.
trace::GraphRecord GraphRecordOf(const Executable& exe, const std::string& call_site);

struct CompileResult {
  std::shared_ptr<const Executable> executable;
  CacheOutcome cache = CacheOutcome::kMiss;
  int64_t duration_ns = 0;        // host clock
  std::string disk_error;         // a persistent entry that could not be read (removed; recompiled)
  bool evicted = false;           // a miss for a program this client compiled and then evicted
};

class CompileCache;

struct ExecuteOptions {
  int step = 0;
  int64_t launch_ns = 0;          // host clock time of the launch
  int64_t host_wait_ns = 0;       // devices idle for want of this run (ScheduleInput::host_wait_ns)
  // The transfers to show before this run, per device; null: those pending now.
  std::shared_ptr<const std::vector<std::vector<DeviceOp>>> transfers;
  // Simulated mode: the host-to-device copies to show before this run (the same on every chip).
  std::shared_ptr<const std::vector<trace::SimOp>> sim_transfers;
};

struct ExecuteStats {
  std::vector<DeviceSpan> spans;  // device clock
  int64_t host_ns = 0;
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Create(const TopologyOptions& opts);

  Topology& topology() { return *topology_; }
  int num_devices() const { return topology_->num_devices(); }

  // Emits the host, device and track records of this client to the recorder
  // (call once the run has begun). Device tracks are on the device clock.
  void RecordTopology(const std::string& coords_of_device_fmt = "");
  const std::vector<int64_t>& device_tracks() const { return device_tracks_; }

  // The chip profile of the modeled clock (`cpu` unless set). Set it before
  // compiling: ops record their cost on the profile current at compile time.
  absl::Status SetProfile(const std::string& name);
  const compiler::ChipProfile& profile() const { return modeled_clock_->model().profile(); }
  const std::vector<int64_t>& modeled_tracks() const { return modeled_clock_->tracks(); }

  // Faults to inject on the device clock from now on (runtime/faults.h);
  // each is checked against this client's chips, hosts and links.
  absl::Status SetFaults(FaultPlan faults);
  const FaultPlan& faults() const { return faults_; }
  // Faults that did nothing in the runs so far, one sentence each: a link
  // fault on a link that no collective's traffic crossed. Which links carry
  // traffic is known only once the programs are compiled and run, so this
  // is asked at the run's end (after Synchronize).
  // Each: what `run` says on stderr (naming the fault and the links that did
  // carry traffic), and what the run keeps (naming neither: the specs are kept
  // under runs.config_json "faults" alone, so a diagnosis test can remove them).
  struct FaultWithoutEffect {
    std::string said, stored;
  };
  std::vector<FaultWithoutEffect> FaultsWithoutEffect() const;

  // Simulated mode (TopologyOptions::simulate): no values are computed. Every
  // array holds one zero-filled shard shared by all chips, and every run is
  // laid out by the Simulator on the modeled clock (nothing on the device
  // clock); the store keeps its schedule (store/sim_timeline.h).
  bool simulated() const { return simulator_ != nullptr; }
  // Null unless simulated. Read it once the runs are done (Synchronize).
  const Simulator* simulator() const { return simulator_.get(); }
  Simulator* simulator() { return simulator_.get(); }
  // Simulated mode: kernel and collective times from a recorded run where
  // they match (`--calibrate-from`, Simulator::SetCalibration); before the first run.
  absl::Status SetSimCalibration(RecordedOpTimes times);

  // Producer-consumer fusion of the compiled programs (on by default; off
  // runs every op as its own kernel, for comparison). Part of the cache key.
  void set_fusion(bool on) { fusion_enabled_ = on; }
  bool fusion() const { return fusion_enabled_; }

  // Compiles `global` (parameters carry their shardings) for every device:
  // from the in-memory cache, else the persistent one (when set), else anew.
  absl::StatusOr<CompileResult> Compile(const compiler::Module& global);

  // Keeps compiled programs in `dir` (created if missing) across processes;
  // empty turns it off. See runtime/compile_cache.h.
  absl::Status SetCacheDir(const std::string& dir);
  const CompileCache* disk_cache() const { return disk_cache_.get(); }

  // At most `programs` executables in memory (0: no limit); the least
  // recently used one goes first. A later miss for it says it was evicted.
  void set_cache_capacity(size_t programs);
  size_t cache_capacity() const { return cache_capacity_; }

  // What an uneven shard holds past the end of the value: zeros, or (to find
  // a program that reads its padding) NaN for floats and 1e9 for integers.
  // Partitioned programs mask or cut padding wherever it could reach data.
  void set_poison_padding(bool on) { poison_padding_ = on; }

  // Splits a host value onto the devices by `sharding` (a dimension that does
  // not divide evenly gives every device ceil(size / tiles) elements, the
  // last ones padded). The copy is timed and appears as a transfer on each
  // device's timeline at its next run.
  absl::StatusOr<DeviceArray> TransferToDevices(const Literal& value, const Sharding& sharding,
                                                const std::string& name);
  // Assembles a host value from the shards.
  absl::StatusOr<Literal> TransferToHost(const DeviceArray& array);

  absl::StatusOr<std::vector<DeviceArray>> Execute(const Executable& exe,
                                                   const std::vector<const DeviceArray*>& args,
                                                   const ExecuteOptions& opts,
                                                   ExecuteStats* stats = nullptr);

  // Enqueues a run and returns its outputs at once, as pending values; the
  // host goes on tracing while the devices work. Inputs may be pending
  // outputs of earlier runs (runs go in order). A failed run fails its
  // outputs, and its error is kept for TakeAsyncError.
  std::vector<std::shared_ptr<AsyncArray>> ExecuteAsync(std::shared_ptr<const Executable> exe,
                                                        std::vector<std::shared_ptr<AsyncArray>> args,
                                                        const ExecuteOptions& opts);
  // Waits for every enqueued run.
  void Synchronize();
  // The first error of an asynchronous run since the last call (OK if none).
  absl::Status TakeAsyncError();

  size_t cache_size() const;
  // The executables in the in-memory cache, in compilation order (graph id).
  std::vector<std::shared_ptr<const Executable>> CachedExecutables() const;

 private:
  Client() = default;
  std::unique_ptr<Topology> topology_;
  void RecordFusion(int64_t graph_id, const compiler::Module& program, const compiler::FusionPlan& plan) const;
  // The decisions and rematerializations of `spmd`, named from `global`.
  static trace::ShardingRecord ShardingRows(const compiler::Module& global, const compiler::SpmdResult& spmd);
  std::string CompileCacheKey(const std::string& key) const;
  std::shared_ptr<CompileCache> disk_cache_;

  bool fusion_enabled_ = true;
  bool poison_padding_ = false;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<std::unique_ptr<Gang>> gangs_;  // per device, when cores outnumber devices
  int gang_width() const { return gangs_.empty() ? 1 : gangs_[0]->width(); }
  // `p` for this client's chips: a gang's peak where they have gangs, cold
  // operands where more chips than cores share the caches.
  compiler::ChipProfile ChipProfileHere(const compiler::ChipProfile& p) const;
  std::unique_ptr<Scheduler> device_clock_;
  FaultPlan faults_;
  std::vector<int> host_of_;  // per device
  // The hang error of the chips that failed (fail-chip) at one step, for every later run.
  absl::Status FailedChips(const Executable& exe, int step, const std::vector<Fault>& failed) const;
  std::unique_ptr<ModeledClock> modeled_clock_;  // every run is laid out on it too
  std::unique_ptr<Simulator> simulator_;         // simulated mode only
  std::vector<trace::SimOp> pending_sim_transfers_;
  absl::StatusOr<std::vector<DeviceArray>> Simulate(const Executable& exe,
                                                    const std::vector<const DeviceArray*>& args,
                                                    const ExecuteOptions& opts, ExecuteStats* stats);
  std::vector<int64_t> device_tracks_;
  mutable std::mutex mu_;
  std::vector<bool> links_used_;  // per link of the topology: a collective's traffic crossed it (under mu_)
  std::map<std::string, std::shared_ptr<const Executable>> cache_;
  size_t cache_capacity_ = 0;
  std::list<std::string> cache_use_;     // keys, least recently used first
  std::set<std::string> evicted_;        // keys compiled here and evicted since
  std::vector<std::vector<DeviceOp>> pending_transfers_;
  absl::Status async_error_;
  // Last, so it is destroyed first: queued runs finish while the devices live.
  std::unique_ptr<DispatchQueue> dispatch_;
};

}  // namespace shardscope::runtime
