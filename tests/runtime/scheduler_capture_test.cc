// The Scheduler and capture: each chip's arrival at a collective recorded
// apart from its wait (on the device and modeled clocks), what each capture
// mode makes it emit (and not build), and the device clock's counters per chip
// (HBM in use at a run's peak and end, bytes moved over links and from the
// host), with the executor's byte and memory accounting behind them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "compiler/ir.h"
#include "profiler/trace/capture.h"
#include "profiler/trace/recorder.h"
#include "runtime/collectives.h"
#include "runtime/executor.h"
#include "runtime/scheduler.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace shardscope::runtime {
namespace {

class Sink : public trace::Recorder {
 public:
  void Record(const trace::SliceRecord& s) override { slices.push_back(s); }
  void Record(const trace::CounterRecord& c) override { counters.push_back(c); }
  using trace::Recorder::Record;
  std::vector<trace::SliceRecord> slices;
  std::vector<trace::CounterRecord> counters;
  std::vector<trace::CounterRecord> Counters(int device, const std::string& name) const {
    std::vector<trace::CounterRecord> out;
    for (const auto& c : counters)
      if (c.device_id == device && c.name == name) out.push_back(c);
    return out;
  }
};

// Installs a recorder for the scope of a test.
struct Installed {
  explicit Installed(trace::Recorder* r) { trace::SetRecorder(r); }
  ~Installed() { trace::SetRecorder(nullptr); }
};

DeviceOp Kernel(int64_t op_id, int64_t dur) { return {op_id, "k", trace::SliceKind::kCompute, dur, -1, 0}; }
DeviceOp Collective(int64_t op_id, int c) { return {op_id, "all_reduce", trace::SliceKind::kCollective, 0, c, 64}; }

// Three chips compute, then all-reduce together; chip 1 is slow (500 against 100 and 200).
ScheduleInput SlowChipOne() {
  ScheduleInput in;
  in.step = 3;
  in.graph_id = 8;
  in.per_device = {{Kernel(1, 100), Collective(2, 0), Kernel(3, 10)},
                   {Kernel(1, 500), Collective(2, 0), Kernel(3, 10)},
                   {Kernel(1, 200), Collective(2, 0), Kernel(3, 10)}};
  in.collectives = {CollectiveRun{{{0, 1, 2}}, {50}}};
  return in;
}

TEST(SchedulerArrival, EachMemberKeepsItsOwnArrivalOnBothClocks) {
  for (trace::Clock clock : {trace::Clock::kDevice, trace::Clock::kModeled}) {
    Sink sink;
    Installed installed(&sink);
    Scheduler s(clock, {11, 12, 13});
    ASSERT_TRUE(s.Schedule(SlowChipOne()).ok());
    std::map<int64_t, trace::SliceRecord> coll;  // by track
    for (const auto& x : sink.slices) {
      if (x.kind == trace::SliceKind::kCollective) coll[x.track_id] = x;
      else EXPECT_EQ(x.arrival_ns, -1) << x.name;  // only collectives arrive
    }
    ASSERT_EQ(coll.size(), 3u) << trace::ClockName(clock);
    // All start together, at the slow chip's arrival, and end together.
    for (const auto& [track, x] : coll) {
      EXPECT_EQ(x.start_ns, 500);
      EXPECT_EQ(x.dur_ns, 50);
      EXPECT_EQ(x.flow_id, coll.begin()->second.flow_id);
    }
    EXPECT_EQ(coll[11].arrival_ns, 100);
    EXPECT_EQ(coll[12].arrival_ns, 500);
    EXPECT_EQ(coll[13].arrival_ns, 200);
    // The latest arrival names the straggler; the others waited start - arrival.
    const auto latest = std::max_element(coll.begin(), coll.end(), [](const auto& a, const auto& b) {
      return a.second.arrival_ns < b.second.arrival_ns;
    });
    EXPECT_EQ(latest->first, 12);
    EXPECT_EQ(coll[11].start_ns - coll[11].arrival_ns, 400);
    EXPECT_EQ(coll[12].start_ns - coll[12].arrival_ns, 0);
    EXPECT_EQ(coll[13].start_ns - coll[13].arrival_ns, 300);
  }
}

TEST(SchedulerCapture, StepsModeGivesOneProgramSlicePerChip) {
  Sink sink;
  trace::CaptureFilter filter(&sink, {trace::SliceDetail::kPrograms});
  Installed installed(&filter);
  Scheduler s(trace::Clock::kDevice, {11, 12, 13});
  auto spans = s.Schedule(SlowChipOne());
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(sink.slices.size(), 3u);
  for (size_t d = 0; d < 3; ++d) {
    const trace::SliceRecord& p = sink.slices[d];
    EXPECT_EQ(p.name, "graph 8");
    EXPECT_EQ(p.kind, trace::SliceKind::kCompute);
    EXPECT_EQ(p.op_id, -1);
    EXPECT_EQ(p.step, 3);
    EXPECT_EQ(p.graph_id, 8);
    EXPECT_EQ(p.start_ns, (*spans)[d].start_ns);
    EXPECT_EQ(p.start_ns + p.dur_ns, 560);  // through the collective and the last kernel
  }
  EXPECT_EQ(filter.slices_dropped(), 0);  // nothing per kernel was even handed over
}

TEST(SchedulerCapture, OffAndOutsideTheWindowBuildNoSlices) {
  Sink sink;
  trace::CaptureFilter off(&sink, {trace::SliceDetail::kNone});
  {
    Installed installed(&off);
    Scheduler s(trace::Clock::kDevice, {11, 12, 13});
    ASSERT_TRUE(s.Schedule(SlowChipOne()).ok());
  }
  trace::CaptureFilter window(&sink, {trace::SliceDetail::kKernels, 5, 9});
  {
    Installed installed(&window);
    Scheduler s(trace::Clock::kDevice, {11, 12, 13});
    ASSERT_TRUE(s.Schedule(SlowChipOne()).ok());  // step 3
    EXPECT_TRUE(sink.slices.empty());
    ScheduleInput in = SlowChipOne();
    in.step = 5;
    ASSERT_TRUE(s.Schedule(in).ok());
  }
  EXPECT_EQ(sink.slices.size(), 9u);
  EXPECT_EQ(off.slices_dropped() + window.slices_dropped(), 0);
}

TEST(SchedulerCounters, HbmAndBytesMovedOnTheDeviceClockOnly) {
  Sink sink;
  Installed installed(&sink);
  ScheduleInput in = SlowChipOne();
  in.per_device[0].insert(in.per_device[0].begin(),
                          DeviceOp{.op_id = -1, .name = "transfer x", .kind = trace::SliceKind::kTransfer,
                                   .dur_ns = 5, .bytes = 256, .received_bytes = 256});
  for (int d = 0; d < 3; ++d) {
    DeviceOp& c = in.per_device[d][d == 0 ? 2 : 1];
    c.sent_bytes = 10 + d;
    c.received_bytes = 20 + d;
  }
  // Chip 0 peaks at its collective (op 2, after the transfer), chip 1 at its first kernel.
  in.memory = {{1000, 2, 600}, {900, 0, 700}, {800, 3, 800}};
  Scheduler modeled(trace::Clock::kModeled, {21, 22, 23});
  ASSERT_TRUE(modeled.Schedule(in).ok());
  EXPECT_TRUE(sink.counters.empty());  // counters are drawn on the device lanes
  Scheduler s(trace::Clock::kDevice, {11, 12, 13});
  auto first = s.Schedule(in);
  ASSERT_TRUE(first.ok());
  auto hbm0 = sink.Counters(0, kHbmInUseCounter);
  ASSERT_EQ(hbm0.size(), 2u);
  EXPECT_EQ(hbm0[0].ts_ns, 500);  // the collective starts when chip 1 arrives
  EXPECT_EQ(hbm0[0].value, 1000);
  EXPECT_EQ(hbm0[1].ts_ns, (*first)[0].end_ns);
  EXPECT_EQ(hbm0[1].value, 600);
  auto hbm1 = sink.Counters(1, kHbmInUseCounter);
  ASSERT_EQ(hbm1.size(), 2u);
  EXPECT_EQ(hbm1[0].ts_ns, 0);
  EXPECT_EQ(hbm1[0].value, 900);
  auto hbm2 = sink.Counters(2, kHbmInUseCounter);  // op 3 is past the end: placed at the end
  ASSERT_EQ(hbm2.size(), 2u);
  EXPECT_EQ(hbm2[0].ts_ns, (*first)[2].end_ns);
  // Cumulative bytes: a second run adds to the first.
  ASSERT_TRUE(s.Schedule(in).ok());
  for (int d = 0; d < 3; ++d) {
    auto sent = sink.Counters(d, kCollectiveSentCounter);
    auto received = sink.Counters(d, kCollectiveReceivedCounter);
    ASSERT_EQ(sent.size(), 2u) << d;
    ASSERT_EQ(received.size(), 2u) << d;
    EXPECT_EQ(sent[0].value, 10 + d);
    EXPECT_EQ(sent[1].value, 2 * (10 + d));
    EXPECT_EQ(received[1].value, 2 * (20 + d));
    EXPECT_GT(sent[1].ts_ns, sent[0].ts_ns);
  }
  auto h2d = sink.Counters(0, kHostToDeviceCounter);
  ASSERT_EQ(h2d.size(), 2u);
  EXPECT_EQ(h2d[1].value, 512);
  EXPECT_TRUE(sink.Counters(1, kHostToDeviceCounter).empty());  // nothing moved: no rows
}

// ------------------------------------------------------------ the executor's accounting

using compiler::Instruction;
using compiler::Module;
using Groups = std::vector<std::vector<int64_t>>;

// Link bytes per member of a group of `n`, operand of `b` bytes.
std::vector<LinkBytes> Moved(const Instruction& c, const std::vector<int64_t>& group) {
  std::vector<LinkBytes> out;
  for (size_t p = 0; p < group.size(); ++p) out.push_back(CollectiveLinkBytes(c, group, p));
  return out;
}

TEST(CollectiveLinkBytes, EveryKindSendsWhatTheOthersReceive) {
  Module m("local");
  m.set_num_partitions(4);
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 4}), "x");  // 128 bytes
  const std::vector<int64_t> all = {0, 1, 2, 3};
  struct Case {
    Instruction* op;
    int64_t each;  // sent = received per member (-1: uneven, checked by sums only)
  };
  std::vector<Case> cases = {
      {m.AllReduce(x, compiler::ReduceKind::kSum, {all}), 2 * 3 * 128 / 4},
      {m.AllGather(x, 0, {all}), 3 * 128},
      {m.ReduceScatter(x, 0, compiler::ReduceKind::kSum, {all}), 3 * 128 / 4},
      {m.AllToAll(x, 0, 0, 4, {all}), 3 * 128 / 4},
      {m.CollectiveBroadcast(x, {all}), -1},
      {m.CollectivePermute(x, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}), 128},
  };
  for (const Case& c : cases) {
    std::vector<LinkBytes> moved = Moved(*c.op, all);
    int64_t sent = 0, received = 0;
    for (const LinkBytes& b : moved) {
      sent += b.sent;
      received += b.received;
      if (c.each >= 0) {
        EXPECT_EQ(b.sent, c.each) << c.op->name;
        EXPECT_EQ(b.received, c.each) << c.op->name;
      }
    }
    EXPECT_EQ(sent, received) << c.op->name;
    EXPECT_GT(sent, 0) << c.op->name;
  }
  // Broadcast over 4 by a binomial tree: 0 sends twice, 1 once, and every other member receives.
  std::vector<LinkBytes> tree = Moved(*cases[4].op, all);
  EXPECT_EQ(tree[0].sent, 256);
  EXPECT_EQ(tree[1].sent, 128);
  EXPECT_EQ(tree[2].sent + tree[3].sent, 0);
  EXPECT_EQ(tree[0].received, 0);
  EXPECT_EQ(tree[3].received, 128);
  // A pair to itself and a one-member group move nothing.
  Instruction* self = m.CollectivePermute(x, {{2, 2}});
  EXPECT_EQ(CollectiveLinkBytes(*self, {2}, 0).sent, 0);
  EXPECT_EQ(CollectiveLinkBytes(*cases[0].op, {3}, 0).received, 0);
}

TEST(ExecutorAccounting, CollectivesCarryLinkBytesAndRunsTheirMemoryPeak) {
  // y = x + x; all-reduce(y) over 4 chips; the peak is at the all-reduce
  // (x, y and the result all live), after the add.
  auto m = std::make_unique<Module>("local");
  m->set_num_partitions(4);
  Instruction* x = m->Parameter(Shape(DType::kF32, {256}), "x");
  Instruction* y = m->Binary(compiler::Opcode::kAdd, x, x);
  Instruction* r = m->AllReduce(y, compiler::ReduceKind::kSum, {{0, 1, 2, 3}});
  m->AddOutput(m->Binary(compiler::Opcode::kMultiply, r, r));
  auto topology = Topology::Create({.num_hosts = 1, .chips_per_host = 4});
  ASSERT_TRUE(topology.ok());
  ThreadPool pool(2);
  std::vector<Literal> inputs(4, Literal(Shape(DType::kF32, {256})));
  std::vector<std::vector<const Literal*>> args;
  for (const Literal& l : inputs) args.push_back({&l});
  ScheduleInput timing;
  auto out = ExecuteProgram(*m, **topology, pool, args, &timing);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(timing.memory.size(), 4u);
  for (int d = 0; d < 4; ++d) {
    const auto& ops = timing.per_device[d];
    auto coll = std::find_if(ops.begin(), ops.end(), [](const DeviceOp& op) { return op.collective >= 0; });
    ASSERT_NE(coll, ops.end());
    EXPECT_EQ(coll->sent_bytes, 2 * 3 * 1024 / 4);
    EXPECT_EQ(coll->received_bytes, 2 * 3 * 1024 / 4);
    // y (1 KiB) and the all-reduce's result (1 KiB) charged; the input is the caller's.
    EXPECT_EQ(timing.memory[d].peak_bytes, 2048) << d;
    ASSERT_LT(timing.memory[d].peak_op, ops.size());
    EXPECT_GE(ops[timing.memory[d].peak_op].collective, 0) << d;  // reached when the result was allocated
  }
}

}  // namespace
}  // namespace shardscope::runtime
