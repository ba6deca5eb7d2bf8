// The Recorder: the one interface through which compiler, runtime and core
// report events. It sits at the bottom of the library stack; the store plugs
// in a sink that writes SQLite. When nothing is installed every call is a
// cheap no-op, so instrumentation can stay in hot paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "profiler/trace/records.h"

namespace shardscope::trace {

// How much of the timeline a recorder wants (shardscope run --trace):
//   kNone      no slices at all (compilations, executions, steps, counters still recorded);
//   kPrograms  step and program slices: every host-clock slice (mark_step with its
//              trace/transfer/compile/dispatch children, value reads, host calls), and on
//              each chip's device and modeled lanes one slice per program run ("graph N",
//              kind compute, op_id -1) and the "waiting for host" slices; no per-kernel,
//              collective or transfer slices;
//   kKernels   everything (the default).
enum class SliceDetail : uint8_t { kNone, kPrograms, kKernels };
const char* SliceDetailName(SliceDetail d);  // off | steps | kernels (the --trace values)

class Recorder {
 public:
  virtual ~Recorder() = default;
  // The timeline detail this recorder wants for slices of `step` (-1: outside
  // any step). Producers ask once per program run (trace::slice_detail) so
  // that slices nobody keeps are never built. A sink keeps everything.
  virtual SliceDetail Detail(int step) const { return SliceDetail::kKernels; }
  virtual void BeginRun(const RunRecord&) {}
  virtual void Record(const HostRecord&) {}
  virtual void Record(const DeviceRecord&) {}
  virtual void Record(const MeshRecord&) {}
  virtual void Record(const TrackRecord&) {}
  virtual void Record(const SliceRecord&) {}
  // The slices of one program run at once (the Scheduler's), in order; the
  // recorder takes them. A sink that queues records can take the batch in one
  // step instead of one per slice; by default each goes to Record.
  virtual void RecordSlices(std::vector<SliceRecord>&& slices) {
    for (const SliceRecord& s : slices) Record(s);
  }
  virtual void Record(const GraphRecord&) {}
  virtual void Record(const OpRecord&) {}
  virtual void Record(const MemoryPlanRecord&) {}
  virtual void Record(const FusionRecord&) {}
  virtual void Record(const PassRecord&) {}
  virtual void Record(const ShardingRecord&) {}
  virtual void Record(const AutoShardingRecord&) {}
  virtual void Record(const CompilationRecord&) {}
  virtual void Record(const ExecutionRecord&) {}
  virtual void Record(const StepRecord&) {}
  virtual void Record(const TensorRecord&) {}
  virtual void Record(const ShardPlacementRecord&) {}
  virtual void Record(const CounterRecord&) {}
  virtual void Record(const HangRecord&) {}
  // Blocks until everything recorded so far is durable.
  virtual void Flush() {}
  virtual void EndRun() {}
};

// The installed recorder; a no-op recorder when none is installed.
Recorder& recorder();
// True when a real recorder is installed (lets callers skip building records).
bool enabled();
// The installed recorder's Detail(step): kNone when none is installed. One
// atomic load and a virtual call: ask per program run, not per kernel.
SliceDetail slice_detail(int step);
// Installs `r` (not owned); nullptr restores the no-op recorder.
void SetRecorder(Recorder* r);

// Host clock: nanoseconds since the clock was last reset (at run start).
int64_t HostNowNs();
void ResetHostClock();

// Process-wide id sources, so records can reference each other before storage.
int64_t NextId();

}  // namespace shardscope::trace
