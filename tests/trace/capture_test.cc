// Capture control: the CaptureFilter forwards every record but the slices its
// mode and step window leave out, tells producers what it wants before they
// build a slice, and says in notes what it left out.
#include "profiler/trace/capture.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace shardscope::trace {
namespace {

class Sink : public Recorder {
 public:
  void Record(const SliceRecord& s) override { slices.push_back(s); }
  void Record(const StepRecord& s) override { steps.push_back(s.step); }
  void Record(const CounterRecord&) override { ++counters; }
  void Record(const CompilationRecord&) override { ++compilations; }
  void Record(const ExecutionRecord&) override { ++executions; }
  std::vector<SliceRecord> slices;
  std::vector<int> steps;
  int counters = 0, compilations = 0, executions = 0;
};

SliceRecord Slice(int step, SliceKind kind, int64_t op_id, const char* name) {
  SliceRecord s;
  s.step = step;
  s.kind = kind;
  s.op_id = op_id;
  s.name = name;
  return s;
}

// One step's worth of every kind of slice the stack makes.
void RecordStep(Recorder& r, int step) {
  r.Record(Slice(step, SliceKind::kHost, -1, "mark_step"));
  r.Record(Slice(step, SliceKind::kCompile, -1, "compile"));
  r.Record(Slice(step, SliceKind::kCompute, 7, "dot_general.7"));
  r.Record(Slice(step, SliceKind::kCollective, 9, "all_reduce.9"));
  r.Record(Slice(step, SliceKind::kTransfer, -1, "transfer x"));
  r.Record(Slice(step, SliceKind::kHostWait, -1, "waiting for host"));
  r.Record(Slice(step, SliceKind::kCompute, -1, "graph 3"));
  r.Record(CounterRecord{0, "hbm_bytes_in_use", 1, 2});
  r.Record(CompilationRecord{});
  r.Record(ExecutionRecord{});
  r.Record(StepRecord{step, 1.0, 5});
}

std::vector<std::string> Names(const Sink& s) {
  std::vector<std::string> out;
  for (const auto& x : s.slices) out.push_back(x.name);
  return out;
}

TEST(CaptureFilter, NothingInstalledWantsNoSlices) {
  SetRecorder(nullptr);
  EXPECT_EQ(slice_detail(0), SliceDetail::kNone);
  Sink sink;
  SetRecorder(&sink);
  EXPECT_EQ(slice_detail(0), SliceDetail::kKernels);  // a plain sink keeps everything
  SetRecorder(nullptr);
  EXPECT_STREQ(SliceDetailName(SliceDetail::kNone), "off");
  EXPECT_STREQ(SliceDetailName(SliceDetail::kPrograms), "steps");
  EXPECT_STREQ(SliceDetailName(SliceDetail::kKernels), "kernels");
}

TEST(CaptureFilter, OffDropsEverySliceAndNothingElse) {
  Sink sink;
  CaptureFilter f(&sink, {SliceDetail::kNone});
  SetRecorder(&f);
  EXPECT_EQ(slice_detail(0), SliceDetail::kNone);
  EXPECT_TRUE(enabled());  // compilations and steps still want recording
  SetRecorder(nullptr);
  for (int step = 0; step < 3; ++step) RecordStep(f, step);
  EXPECT_TRUE(sink.slices.empty());
  EXPECT_EQ(sink.steps, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(sink.counters, 3);
  EXPECT_EQ(sink.compilations, 3);
  EXPECT_EQ(sink.executions, 3);
  EXPECT_EQ(f.slices_dropped(), 21);
  ASSERT_EQ(f.NotesAtStart().size(), 1u);
  EXPECT_EQ(f.NotesAtStart()[0].rfind("--trace off: no timeline", 0), 0u) << f.NotesAtStart()[0];
  EXPECT_EQ(f.NoteAtEnd(), "");
}

TEST(CaptureFilter, StepsKeepsStepAndProgramSlicesOnly) {
  Sink sink;
  CaptureFilter f(&sink, {SliceDetail::kPrograms});
  EXPECT_EQ(f.Detail(4), SliceDetail::kPrograms);
  RecordStep(f, 4);
  EXPECT_EQ(Names(sink), (std::vector<std::string>{"mark_step", "compile", "waiting for host", "graph 3"}));
  ASSERT_EQ(f.NotesAtStart().size(), 1u);
  EXPECT_EQ(f.NotesAtStart()[0].rfind("--trace steps: kernels not recorded", 0), 0u);
  EXPECT_FALSE(IsKernelSlice(Slice(0, SliceKind::kHost, -1, "dispatch")));
  EXPECT_TRUE(IsKernelSlice(Slice(0, SliceKind::kCompute, 0, "fusion.0")));
}

TEST(CaptureFilter, BatchesAreFilteredLikeSingleSlices) {
  Sink sink;
  CaptureFilter f(&sink, {SliceDetail::kPrograms, 2, 3});
  std::vector<SliceRecord> batch;
  for (int step = 1; step < 5; ++step)
    for (auto [kind, op, name] : {std::tuple{SliceKind::kCompute, 7, "dot_general.7"},
                                  std::tuple{SliceKind::kCompute, -1, "graph 3"},
                                  std::tuple{SliceKind::kCollective, 9, "all_reduce.9"}})
      batch.push_back(Slice(step, kind, op, name));
  f.RecordSlices(std::move(batch));
  ASSERT_EQ(sink.slices.size(), 2u);  // the program slices of steps 2 and 3, in order
  EXPECT_EQ(sink.slices[0].step, 2);
  EXPECT_EQ(sink.slices[1].step, 3);
  EXPECT_EQ(sink.slices[1].name, "graph 3");
  EXPECT_EQ(f.slices_dropped(), 10);
}

TEST(CaptureFilter, WindowKeepsItsStepsAndNamesTheOthers) {
  Sink sink;
  CaptureFilter f(&sink, {SliceDetail::kKernels, 10, 20});
  EXPECT_TRUE(f.settings().windowed());
  EXPECT_EQ(f.Detail(9), SliceDetail::kNone);
  EXPECT_EQ(f.Detail(10), SliceDetail::kKernels);
  EXPECT_EQ(f.Detail(20), SliceDetail::kKernels);
  EXPECT_EQ(f.Detail(21), SliceDetail::kNone);
  for (int step = 0; step < 100; ++step) RecordStep(f, step);
  EXPECT_EQ(sink.slices.size(), 11u * 7);
  for (const auto& s : sink.slices) {
    EXPECT_GE(s.step, 10);
    EXPECT_LE(s.step, 20);
  }
  EXPECT_EQ(sink.steps.size(), 100u);  // every step's row, in the window or not
  EXPECT_EQ(f.NotesAtStart(), (std::vector<std::string>{"timeline only for steps 10-20 (--trace-steps 10:20)"}));
  EXPECT_EQ(f.NoteAtEnd(), "steps 0-9 and 21-99 not captured (--trace-steps 10:20)");
}

TEST(CaptureFilter, OpenWindowsAndRunsInsideTheWindow) {
  {
    Sink sink;
    CaptureFilter f(&sink, {SliceDetail::kKernels, 5, INT_MAX});
    for (int step = 0; step < 8; ++step) f.Record(StepRecord{step, 0, 0});
    EXPECT_EQ(f.settings().WindowText(), "5:");
    EXPECT_EQ(f.NotesAtStart(), (std::vector<std::string>{"timeline only for steps 5 on (--trace-steps 5:)"}));
    EXPECT_EQ(f.NoteAtEnd(), "steps 0-4 not captured (--trace-steps 5:)");
  }
  {
    Sink sink;
    CaptureFilter f(&sink, {SliceDetail::kPrograms, 0, 3});
    for (int step = 0; step < 5; ++step) f.Record(StepRecord{step, 0, 0});
    EXPECT_EQ(f.NoteAtEnd(), "step 4 not captured (--trace-steps 0:3)");
    EXPECT_EQ(f.NotesAtStart().size(), 2u);  // the mode's note and the window's
  }
  {
    Sink sink;  // a resumed run (steps 12-14) wholly inside the window: nothing left out
    CaptureFilter f(&sink, {SliceDetail::kKernels, 10, 20});
    for (int step = 12; step < 15; ++step) f.Record(StepRecord{step, 0, 0});
    EXPECT_EQ(f.NoteAtEnd(), "");
  }
  {
    Sink sink;  // the steps logged name the gaps; the frontend's step after the last is no step of the run
    CaptureFilter f(&sink, {SliceDetail::kKernels, 2, 3});
    for (int step = 0; step < 6; ++step) f.Record(StepRecord{step, 0, 0});
    f.Detail(6);
    EXPECT_EQ(f.NoteAtEnd(), "steps 0-1 and 4-5 not captured (--trace-steps 2:3)");
  }
  {
    Sink sink;  // a program that logs no steps: the steps asked about
    CaptureFilter f(&sink, {SliceDetail::kKernels, 2, 3});
    for (int step = 0; step < 5; ++step) f.Detail(step);
    EXPECT_EQ(f.NoteAtEnd(), "steps 0-1 and 4 not captured (--trace-steps 2:3)");
  }
  {
    Sink sink;  // slices outside any step follow the mode alone
    CaptureFilter f(&sink, {SliceDetail::kKernels, 10, 20});
    f.Record(Slice(-1, SliceKind::kHost, -1, "read value"));
    EXPECT_EQ(sink.slices.size(), 1u);
  }
}

}  // namespace
}  // namespace shardscope::trace
