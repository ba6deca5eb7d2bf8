// Capture control, like torch_xla's xp.trace: which timeline slices a run
// keeps (shardscope run --trace off|steps|kernels, --trace-steps N:M;
// RecordingOptions in record/recording.h).
//
// CaptureFilter is a Recorder that forwards every record to a sink (the
// store's writer) and drops the SliceRecords outside its mode and step
// window. It lives here, at the bottom of the stack, rather than in record/,
// because the producers must ask it before they build a slice: the runtime's
// Scheduler and core's host slices call trace::slice_detail(step), which
// reaches CaptureFilter::Detail, so with --trace off no SliceRecord is even
// made. Dropping in Record() is the safety net for producers that do not ask
// (a user's own slices). Other records (compilations, executions, steps,
// counters, ...) always pass. Keeping only the last N steps (--trace-ring) and
// stopping at a size (--trace-max-mb) are the store writer's
// (store::WriterOptions), since only it knows what reached the file.
#pragma once

#include <atomic>
#include <climits>
#include <string>
#include <vector>

#include "profiler/trace/recorder.h"

namespace shardscope::trace {

struct CaptureSettings {
  SliceDetail detail = SliceDetail::kKernels;
  // Slices only of steps first_step..last_step (inclusive); INT_MAX: no end.
  // Slices outside any step (step -1) follow `detail` alone.
  int first_step = 0;
  int last_step = INT_MAX;

  bool windowed() const { return first_step > 0 || last_step != INT_MAX; }
  // Everything kept: no filter needed at all.
  bool keeps_everything() const { return detail == SliceDetail::kKernels && !windowed(); }
  // The window as --trace-steps takes it: "10:20", "10:".
  std::string WindowText() const;
};

// Whether `s` is finer than a program: a kernel (an op of a program), a
// collective or a transfer. What --trace steps leaves out.
bool IsKernelSlice(const SliceRecord& s);

class CaptureFilter : public Recorder {
 public:
  // `sink` is not owned and must outlive the filter.
  CaptureFilter(Recorder* sink, CaptureSettings settings);

  const CaptureSettings& settings() const { return settings_; }

  SliceDetail Detail(int step) const override;

  // What the settings leave out, said before the run starts so that even a
  // run killed half way shows no silent gap ("--trace off: no timeline ...").
  std::vector<std::string> NotesAtStart() const;
  // The steps outside the window, once the run's steps are known:
  // "steps 0-9 and 21-99 not captured (--trace-steps 10:20)"; "" when the
  // window held every step the run took (or there is no window).
  std::string NoteAtEnd() const;
  // Slices that reached Record and were dropped (producers that asked Detail first make none).
  int64_t slices_dropped() const { return dropped_.load(std::memory_order_relaxed); }

  void BeginRun(const RunRecord& r) override { sink_->BeginRun(r); }
  void Record(const HostRecord& r) override { sink_->Record(r); }
  void Record(const DeviceRecord& r) override { sink_->Record(r); }
  void Record(const MeshRecord& r) override { sink_->Record(r); }
  void Record(const TrackRecord& r) override { sink_->Record(r); }
  void Record(const SliceRecord& r) override;
  void RecordSlices(std::vector<SliceRecord>&& slices) override;
  void Record(const GraphRecord& r) override { sink_->Record(r); }
  void Record(const OpRecord& r) override { sink_->Record(r); }
  void Record(const MemoryPlanRecord& r) override { sink_->Record(r); }
  void Record(const FusionRecord& r) override { sink_->Record(r); }
  void Record(const PassRecord& r) override { sink_->Record(r); }
  void Record(const ShardingRecord& r) override { sink_->Record(r); }
  void Record(const AutoShardingRecord& r) override { sink_->Record(r); }
  void Record(const CompilationRecord& r) override { sink_->Record(r); }
  void Record(const ExecutionRecord& r) override { sink_->Record(r); }
  void Record(const StepRecord& r) override;
  void Record(const TensorRecord& r) override { sink_->Record(r); }
  void Record(const ShardPlacementRecord& r) override { sink_->Record(r); }
  void Record(const CounterRecord& r) override { sink_->Record(r); }
  void Record(const HangRecord& r) override { sink_->Record(r); }
  void Flush() override { sink_->Flush(); }
  void EndRun() override { sink_->EndRun(); }

 private:
  bool Drops(const SliceRecord& r) const;
  // A range of steps, widened from any thread; first > last: empty.
  struct StepRange {
    std::atomic<int> first{INT_MAX}, last{INT_MIN};
    void Add(int step);
  };

  Recorder* sink_;
  CaptureSettings settings_;
  // The steps the run logged (StepRecords): what the end note names. Steps
  // only asked about (Detail) stand in for a program that logs none; they
  // also include the frontend's step after the last one (its final value
  // reads), which is no training step.
  StepRange logged_;
  mutable StepRange asked_;
  std::atomic<int64_t> dropped_{0};
};

}  // namespace shardscope::trace
