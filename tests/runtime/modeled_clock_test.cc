// The modeled clock: a client run produces, beside the device clock, modeled
// tracks on Clock::kModeled for every device, one modeled slice per measured
// one, with the cost model's durations; a collective starts together on all
// its chips and takes the alpha-beta time. Ops are recorded once per compile.
#include "runtime/modeled_clock.h"

#include <map>

#include "gtest/gtest.h"
#include "profiler/trace/recorder.h"
#include "runtime/client.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

class Capture : public trace::Recorder {
 public:
  void Record(const trace::TrackRecord& t) override { tracks.push_back(t); }
  void Record(const trace::SliceRecord& s) override { slices.push_back(s); }
  void Record(const trace::OpRecord& o) override { ops.push_back(o); }
  using trace::Recorder::Record;
  std::vector<trace::TrackRecord> tracks;
  std::vector<trace::SliceRecord> slices;
  std::vector<trace::OpRecord> ops;
};

// sum over dim 0 of x, split over 4 chips on dim 0: an all-reduce.
std::unique_ptr<Module> ShardedSum() {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {8, 16}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* e = m->Unary(Opcode::kExponential, x);
  Instruction* s = m->Reduce(e, m->ScalarConstant(DType::kF32, 0), {0}, compiler::ReduceKind::kSum);
  m->AddOutput(s);
  return m;
}

TEST(ModeledClockTest, EveryRunIsLaidOutOnTheModeledClockToo) {
  Capture rec;
  trace::SetRecorder(&rec);
  auto client = Client::Create({.num_hosts = 2, .chips_per_host = 2});
  ASSERT_TRUE(client.ok()) << client.status();
  Client& c = **client;
  ASSERT_TRUE(c.SetProfile("tpu-v4").ok());
  EXPECT_EQ(c.profile().name, "tpu-v4");
  EXPECT_FALSE(c.SetProfile("abacus").ok());
  c.RecordTopology();
  auto compiled = c.Compile(*ShardedSum());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const Executable& exe = *compiled->executable;
  Literal value(Shape(DType::kF32, {8, 16}));
  for (int64_t i = 0; i < value.elements(); ++i) value.as<float>()[i] = 0.01f * static_cast<float>(i);
  auto a = c.TransferToDevices(value, exe.param_shardings[0], "x");
  ASSERT_TRUE(a.ok()) << a.status();
  for (int step = 0; step < 2; ++step) {
    ExecuteOptions eo;
    eo.step = step;
    auto out = c.Execute(exe, {&*a}, eo);
    ASSERT_TRUE(out.ok()) << out.status();
  }
  trace::SetRecorder(nullptr);

  // One modeled track per device, on the modeled clock, named for its chip.
  std::map<int64_t, const trace::TrackRecord*> modeled;
  std::map<int64_t, const trace::TrackRecord*> device;
  for (const auto& t : rec.tracks) (t.clock == trace::Clock::kModeled ? modeled : device)[t.track_id] = &t;
  ASSERT_EQ(modeled.size(), 4u);
  ASSERT_EQ(device.size(), 4u);
  for (int d = 0; d < 4; ++d) {
    const trace::TrackRecord* t = modeled.at(c.modeled_tracks()[d]);
    EXPECT_EQ(t->device_id, d);
    EXPECT_EQ(t->host_id, d / 2);
    EXPECT_EQ(t->name, "chip " + std::to_string(d) + " (modeled)");
  }

  // Ops: every kernel of the per-device program, once, costed on tpu-v4 (a
  // fused kernel is one row; the ops inside it have none of their own).
  EXPECT_EQ(static_cast<int64_t>(rec.ops.size()),
            static_cast<int64_t>(exe.program->instructions().size()) - exe.fusion.fused_ops());
  compiler::CostModel tpu(*compiler::FindProfile("tpu-v4"));
  int64_t all_reduce_ns = -1;
  for (const auto& o : rec.ops) {
    EXPECT_EQ(o.graph_id, exe.graph_id);
    EXPECT_EQ(o.profile, "tpu-v4");
    const Instruction& i = *exe.program->instructions()[o.op_id];
    if (const compiler::FusedKernel* k = exe.fusion.KernelOf(i.id)) {
      EXPECT_EQ(o.opcode, "fusion");
      EXPECT_EQ(o.modeled_ns, tpu.KernelCost(k->members).modeled_ns);
    } else {
      EXPECT_EQ(o.modeled_ns, tpu.InstructionCost(i, 4).modeled_ns);
    }
    if (i.op == Opcode::kAllReduce) {
      EXPECT_EQ(o.roofline, "collective");
      all_reduce_ns = o.modeled_ns;
    }
  }
  ASSERT_GT(all_reduce_ns, 0) << "the program has no all-reduce";

  // Slices: the modeled clock mirrors the device clock slice for slice.
  std::vector<const trace::SliceRecord*> on_modeled, on_device;
  for (const auto& s : rec.slices) (modeled.count(s.track_id) ? on_modeled : on_device).push_back(&s);
  ASSERT_EQ(on_modeled.size(), on_device.size());
  ASSERT_FALSE(on_modeled.empty());
  std::map<int64_t, std::vector<const trace::SliceRecord*>> flows;
  for (const trace::SliceRecord* s : on_modeled) {
    EXPECT_EQ(s->graph_id, exe.graph_id);
    if (s->kind == trace::SliceKind::kCompute) {
      EXPECT_EQ(s->dur_ns, tpu.InstructionCost(*exe.program->instructions()[s->op_id], 4).modeled_ns);
    }
    if (s->kind == trace::SliceKind::kCollective) flows[s->flow_id].push_back(s);
  }
  // Each all-reduce: all four chips, same start, the alpha-beta duration.
  ASSERT_EQ(flows.size(), 2u);  // one per step
  for (const auto& [flow, members] : flows) {
    ASSERT_EQ(members.size(), 4u);
    for (const trace::SliceRecord* s : members) {
      EXPECT_EQ(s->start_ns, members[0]->start_ns);
      EXPECT_EQ(s->dur_ns, all_reduce_ns);
    }
  }
}

TEST(ModeledClockTest, ModeledInputReplacesDurations) {
  compiler::ChipProfile p = *compiler::FindProfile("h100");
  compiler::CostModel model(p);
  std::vector<compiler::OpCost> costs(3);
  costs[1].modeled_ns = 700;
  costs[2].modeled_ns = 9000;
  ScheduleInput in;
  in.per_device = {{{-1, "transfer x", trace::SliceKind::kTransfer, 5, -1, 64000},
                    {1, "add.1", trace::SliceKind::kCompute, 123456, -1, 0},
                    {2, "all_reduce.2", trace::SliceKind::kCollective, 0, 0, 4096},
                    {77, "mystery.77", trace::SliceKind::kCompute, 1, -1, 0}}};
  in.collectives = {{{{0}}, {55555}}};
  ScheduleInput m = ModeledInput(in, costs, model);
  EXPECT_EQ(m.per_device[0][0].dur_ns, model.TransferCost(64000).modeled_ns);
  EXPECT_EQ(m.per_device[0][1].dur_ns, 700);
  EXPECT_EQ(m.collectives[0].group_dur_ns[0], 9000);
  // An op the costs do not know (a newer opcode, a foreign id) costs the overhead.
  EXPECT_EQ(m.per_device[0][3].dur_ns, static_cast<int64_t>(p.kernel_overhead_ns));
}

TEST(ModeledClockTest, ChipsSharingCoresWaitForTheSlowestAtEachCollective) {
  // 4 chips on 2 cores with a measured chip spread: each group's collective
  // lasts its cost plus the expected wait for its slowest chip after the
  // modeled work since the previous collective; a chip per core, none.
  compiler::ChipProfile p = *compiler::FindProfile("cpu");
  p.chip_spread_ns = 1e4;
  std::vector<compiler::OpCost> costs(4);
  costs[1].modeled_ns = 300000;   // a kernel
  costs[2].modeled_ns = 700000;   // another
  costs[3].modeled_ns = 9000;     // the all-reduce
  ScheduleInput in;
  for (int d = 0; d < 4; ++d)
    in.per_device.push_back({{1, "tanh.1", trace::SliceKind::kCompute, 11, -1, 0},
                             {2, "exponential.2", trace::SliceKind::kCompute, 22, -1, 0},
                             {3, "all_reduce.3", trace::SliceKind::kCollective, 0, 0, 4096},
                             {1, "tanh.1", trace::SliceKind::kCompute, 11, -1, 0},
                             {3, "all_reduce.3", trace::SliceKind::kCollective, 0, 1, 4096}});
  in.collectives = {{{{0, 1}, {2, 3}}, {1, 1}}, {{{0, 1, 2, 3}}, {1}}};
  const compiler::CostModel shared(p.ForSharedCores(4, 2));
  ScheduleInput m = ModeledInput(in, costs, shared);
  for (int g = 0; g < 2; ++g)
    EXPECT_EQ(m.collectives[0].group_dur_ns[g], 9000 + std::llround(shared.ChipWaitNs(1e6, 2))) << g;
  EXPECT_EQ(m.collectives[1].group_dur_ns[0], 9000 + std::llround(shared.ChipWaitNs(3e5, 4)));
  EXPECT_GT(shared.ChipWaitNs(1e6, 2), 0);
  ScheduleInput own_cores = ModeledInput(in, costs, compiler::CostModel(p.ForSharedCores(2, 2)));
  EXPECT_EQ(own_cores.collectives[0].group_dur_ns[0], 9000);
  EXPECT_EQ(own_cores.collectives[1].group_dur_ns[0], 9000);
}

}  // namespace
}  // namespace shardscope::runtime
