// Tests of the runtime beyond the kernels: collectives, the Scheduler (device
// clock layout, collectives waiting for their slowest participant, mismatched
// programs), device HBM budgets, the Client's compile cache and host <->
// device transfers under several shardings.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/ir.h"
#include "gtest/gtest.h"
#include "profiler/trace/recorder.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/collectives.h"
#include "runtime/executor.h"
#include "runtime/gemm.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::ReduceKind;

Literal Iota(DType t, std::vector<int64_t> dims, double start = 0, double step = 1) {
  Literal l(Shape(t, std::move(dims)));
  for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, start + step * static_cast<double>(k));
  return l;
}

std::vector<double> Values(const Literal& l) {
  std::vector<double> v;
  for (int64_t k = 0; k < l.elements(); ++k) v.push_back(l.GetDouble(k));
  return v;
}

// ---------------------------------------------------------------- collectives

TEST(CollectivesTest, AllReduceSumMaxMinProd) {
  for (DType t : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    Literal a = Iota(t, {2, 2}, 1);        // 1 2 3 4
    Literal b = Iota(t, {2, 2}, 4, -1);    // 4 3 2 1
    Literal c = Iota(t, {2, 2}, 2, 0);     // 2 2 2 2
    Literal out(Shape(t, {2, 2}));
    ASSERT_TRUE(AllReduce(ReduceKind::kSum, {&a, &b, &c}, &out).ok());
    EXPECT_EQ(Values(out), (std::vector<double>{7, 7, 7, 7})) << DTypeName(t);
    ASSERT_TRUE(AllReduce(ReduceKind::kMax, {&a, &b, &c}, &out).ok());
    EXPECT_EQ(Values(out), (std::vector<double>{4, 3, 3, 4})) << DTypeName(t);
    ASSERT_TRUE(AllReduce(ReduceKind::kMin, {&a, &b}, &out).ok());
    EXPECT_EQ(Values(out), (std::vector<double>{1, 2, 2, 1})) << DTypeName(t);
    ASSERT_TRUE(AllReduce(ReduceKind::kProd, {&a, &b}, &out).ok());
    EXPECT_EQ(Values(out), (std::vector<double>{4, 6, 6, 4})) << DTypeName(t);
  }
}

TEST(CollectivesTest, AllReduceErrors) {
  Literal a = Iota(DType::kF32, {2});
  Literal b = Iota(DType::kF32, {3});
  Literal out(Shape(DType::kF32, {2}));
  EXPECT_EQ(AllReduce(ReduceKind::kSum, {}, &out).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = AllReduce(ReduceKind::kSum, {&a, &b}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("f32[3]"), std::string::npos) << s;
  Literal p(Shape(DType::kI1, {2}));
  Literal po(Shape(DType::kI1, {2}));
  EXPECT_EQ(AllReduce(ReduceKind::kSum, {&p}, &po).code(), absl::StatusCode::kUnimplemented);
}

// 16-bit floats (autocast's gradients) are summed in f32 and rounded once.
TEST(CollectivesTest, AllReduceOfBf16SumsInF32) {
  Literal a(Shape(DType::kBF16, {2})), b(Shape(DType::kBF16, {2})), c(Shape(DType::kBF16, {2}));
  for (Literal* l : {&a, &b, &c}) l->SetDouble(0, 256);
  a.SetDouble(1, 1.5);
  b.SetDouble(1, 0.25);
  c.SetDouble(1, -3);
  Literal out(Shape(DType::kBF16, {2}));
  ASSERT_TRUE(AllReduce(ReduceKind::kSum, {&a, &b, &c}, &out).ok());
  EXPECT_EQ(out.GetDouble(0), 768);
  EXPECT_EQ(out.GetDouble(1), -1.25);
  ASSERT_TRUE(AllReduce(ReduceKind::kMax, {&a, &b, &c}, &out).ok());
  EXPECT_EQ(out.GetDouble(1), 1.5);
}

TEST(CollectivesTest, AllGatherAlongEachDim) {
  Literal a = Iota(DType::kF32, {2, 3}, 0);    // 0..5
  Literal b = Iota(DType::kF32, {2, 3}, 10);   // 10..15
  Literal rows(Shape(DType::kF32, {4, 3}));
  ASSERT_TRUE(AllGather(0, {&a, &b}, &rows).ok());
  EXPECT_EQ(Values(rows), (std::vector<double>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  Literal cols(Shape(DType::kF32, {2, 6}));
  ASSERT_TRUE(AllGather(1, {&a, &b}, &cols).ok());
  EXPECT_EQ(Values(cols), (std::vector<double>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}));
  // Group order decides the order of the blocks.
  ASSERT_TRUE(AllGather(0, {&b, &a}, &rows).ok());
  EXPECT_EQ(Values(rows), (std::vector<double>{10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5}));
  // Three participants, rank 3, middle dimension, f64.
  Literal x = Iota(DType::kF64, {2, 1, 2}, 0), y = Iota(DType::kF64, {2, 1, 2}, 4), z = Iota(DType::kF64, {2, 1, 2}, 8);
  Literal mid(Shape(DType::kF64, {2, 3, 2}));
  ASSERT_TRUE(AllGather(1, {&x, &y, &z}, &mid).ok());
  EXPECT_EQ(Values(mid), (std::vector<double>{0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11}));
}

TEST(CollectivesTest, CopyAndExtractBlock) {
  Literal big = Iota(DType::kI32, {4, 4});
  Literal block(Shape(DType::kI32, {2, 2}));
  ExtractBlock(big, {1, 2}, &block);
  EXPECT_EQ(Values(block), (std::vector<double>{6, 7, 10, 11}));
  Literal dst(Shape(DType::kI32, {4, 4}));
  CopyBlock(block, {2, 0}, &dst);
  EXPECT_EQ(Values(dst), (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 6, 7, 0, 0, 10, 11, 0, 0}));
}

// ---------------------------------------------------------------- scheduler

DeviceOp Kernel(const std::string& name, int64_t dur) {
  DeviceOp op;
  op.name = name;
  op.dur_ns = dur;
  return op;
}
DeviceOp Coll(const std::string& name, int c) {
  DeviceOp op;
  op.name = name;
  op.kind = trace::SliceKind::kCollective;
  op.collective = c;
  return op;
}

TEST(SchedulerTest, CollectiveWaitsForSlowestParticipant) {
  Scheduler s(trace::Clock::kDevice, {1, 2, 3, 4});
  ScheduleInput in;
  in.launch_ns = 100;
  // Devices 0,1 all-reduce together (group 0), devices 2,3 too (group 1);
  // device 1 and device 2 are slow before the collective.
  in.per_device = {
      {Kernel("a", 10), Coll("ar", 0), Kernel("b", 5)},
      {Kernel("a", 50), Coll("ar", 0), Kernel("b", 5)},
      {Kernel("a", 30), Coll("ar", 0), Kernel("b", 1)},
      {Kernel("a", 20), Coll("ar", 0)},
  };
  in.collectives = {{{{0, 1}, {2, 3}}, {7, 3}}};
  auto spans = s.Schedule(in);
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 4u);
  // Group {0,1}: starts when device 1 arrives (100+50), lasts 7.
  EXPECT_EQ((*spans)[0].start_ns, 100);
  EXPECT_EQ((*spans)[0].end_ns, 150 + 7 + 5);
  EXPECT_EQ((*spans)[1].end_ns, 150 + 7 + 5);
  // Group {2,3}: starts at 130 (device 2), lasts 3.
  EXPECT_EQ((*spans)[2].end_ns, 130 + 3 + 1);
  EXPECT_EQ((*spans)[3].end_ns, 130 + 3);
  EXPECT_EQ((*spans)[0].compute_ns, 15);
  EXPECT_EQ((*spans)[0].collective_ns, 7);  // the wait is idle, not collective time
  EXPECT_EQ((*spans)[3].collective_ns, 3);

  // The next run starts where each device became free, or at its launch.
  ScheduleInput next;
  next.launch_ns = 140;
  next.per_device = {{Kernel("c", 1)}, {Kernel("c", 1)}, {Kernel("c", 1)}, {}};
  auto again = s.Schedule(next);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].start_ns, 162);
  EXPECT_EQ((*again)[2].start_ns, 140 > 134 ? 140 : 134);
  EXPECT_EQ((*again)[3].start_ns, 140);
  EXPECT_EQ((*again)[3].end_ns, 140);
  EXPECT_EQ(s.device_free_ns(0), 163);
}

TEST(SchedulerTest, TransfersCountAsTransferTime) {
  Scheduler s(trace::Clock::kDevice, {1, 2});
  ScheduleInput in;
  DeviceOp t = Kernel("transfer x", 4);
  t.kind = trace::SliceKind::kTransfer;
  in.per_device = {{t, Kernel("k", 6), Coll("ag", 0)}, {Kernel("k", 2), Coll("ag", 0)}};
  in.collectives = {{{{0, 1}}, {5}}};
  auto spans = s.Schedule(in);
  ASSERT_TRUE(spans.ok());
  EXPECT_EQ((*spans)[0].transfer_ns, 4);
  EXPECT_EQ((*spans)[0].compute_ns, 6);
  EXPECT_EQ((*spans)[1].end_ns, 15);
}

TEST(SchedulerTest, MismatchedCollectivesAreAnErrorNotAHang) {
  {
    // Device 0 runs collective 0 then 1; device 1 runs them the other way round.
    Scheduler s(trace::Clock::kDevice, {1, 2});
    ScheduleInput in;
    in.per_device = {{Coll("ar", 0), Coll("ag", 1)}, {Coll("ag", 1), Coll("ar", 0)}};
    in.collectives = {{{{0, 1}}, {1}}, {{{0, 1}}, {1}}};
    auto spans = s.Schedule(in);
    ASSERT_FALSE(spans.ok());
    EXPECT_NE(spans.status().message().find("never line up"), std::string::npos) << spans.status();
  }
  {
    // Device 1 never reaches the collective its group waits on.
    Scheduler s(trace::Clock::kDevice, {1, 2});
    ScheduleInput in;
    in.per_device = {{Kernel("k", 1), Coll("ar", 0)}, {Kernel("k", 1)}};
    in.collectives = {{{{0, 1}}, {1}}};
    EXPECT_FALSE(s.Schedule(in).ok());
  }
  {
    // A device in no group of its collective.
    Scheduler s(trace::Clock::kDevice, {1, 2});
    ScheduleInput in;
    in.per_device = {{Coll("ar", 0)}, {Coll("ar", 0)}};
    in.collectives = {{{{0}}, {1}}};
    auto spans = s.Schedule(in);
    ASSERT_FALSE(spans.ok());
    EXPECT_NE(spans.status().message().find("no group"), std::string::npos) << spans.status();
  }
  {
    // Malformed input: an unknown collective, a group naming a device that
    // does not exist, durations missing. Errors, not crashes.
    Scheduler s(trace::Clock::kDevice, {1, 2});
    ScheduleInput in;
    in.per_device = {{Coll("ar", 3)}, {}};
    EXPECT_FALSE(s.Schedule(in).ok());
    in.per_device = {{Coll("ar", 0)}, {Coll("ar", 0)}};
    in.collectives = {{{{0, 1, 5}}, {1}}};
    EXPECT_FALSE(s.Schedule(in).ok());
    in.collectives = {{{{0, 1}}, {}}};
    EXPECT_FALSE(s.Schedule(in).ok());
  }
  {
    Scheduler s(trace::Clock::kDevice, {1, 2, 3});
    ScheduleInput in;
    in.per_device = {{}, {}};
    EXPECT_FALSE(s.Schedule(in).ok());
  }
}

// A recorder that keeps the slices, to check what the Scheduler emits.
class SliceRecorder : public trace::Recorder {
 public:
  void Record(const trace::SliceRecord& s) override { slices.push_back(s); }
  using trace::Recorder::Record;
  std::vector<trace::SliceRecord> slices;
};

TEST(SchedulerTest, EmitsSlicesWithSharedFlowPerCollective) {
  SliceRecorder rec;
  trace::SetRecorder(&rec);
  Scheduler s(trace::Clock::kDevice, {11, 12});
  ScheduleInput in;
  in.step = 3;
  in.graph_id = 9;
  in.per_device = {{Kernel("k", 2), Coll("ar", 0)}, {Kernel("k", 4), Coll("ar", 0)}};
  in.collectives = {{{{0, 1}}, {3}}};
  auto spans = s.Schedule(in);
  trace::SetRecorder(nullptr);
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(rec.slices.size(), 4u);
  std::vector<const trace::SliceRecord*> coll;
  for (const auto& sl : rec.slices) {
    EXPECT_EQ(sl.step, 3);
    EXPECT_EQ(sl.graph_id, 9);
    if (sl.kind == trace::SliceKind::kCollective) coll.push_back(&sl);
  }
  ASSERT_EQ(coll.size(), 2u);
  EXPECT_EQ(coll[0]->flow_id, coll[1]->flow_id);
  EXPECT_GT(coll[0]->flow_id, 0);
  EXPECT_EQ(coll[0]->start_ns, 4);
  EXPECT_EQ(coll[1]->start_ns, 4);
  EXPECT_EQ(coll[0]->dur_ns, 3);
  EXPECT_NE(coll[0]->track_id, coll[1]->track_id);
}

// ---------------------------------------------------------------- devices

TEST(DeviceTest, HbmBudget) {
  Device d(3, 0, 1000);
  EXPECT_TRUE(d.Allocate(600, "a").ok());
  absl::Status s = d.Allocate(500, "weights");
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("chip 3"), std::string::npos) << s;
  EXPECT_NE(s.message().find("weights"), std::string::npos) << s;
  EXPECT_NE(s.message().find("500"), std::string::npos) << s;
  EXPECT_EQ(d.in_use(), 600);
  EXPECT_TRUE(d.Allocate(400, "b").ok());
  EXPECT_EQ(d.peak(), 1000);
  d.Release(1000);
  EXPECT_EQ(d.in_use(), 0);
  EXPECT_EQ(d.peak(), 1000);
}

TEST(DeviceTest, BuffersChargeAndRelease) {
  auto topo = Topology::Create({.num_hosts = 2, .chips_per_host = 2, .hbm_bytes = 64});
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ((*topo)->num_devices(), 4);
  EXPECT_EQ((*topo)->device(3).host_id(), 1);
  EXPECT_EQ((*topo)->ToString(), "2 hosts x 2 chips");
  Device& dev = (*topo)->device(2);
  {
    auto b = DeviceBuffer::Create(dev, Literal(Shape(DType::kF32, {8})), "x");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(dev.in_use(), 32);
    auto big = DeviceBuffer::Create(dev, Literal(Shape(DType::kF32, {9})), "y");
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(big.status().message().find("chip 2"), std::string::npos);
  }
  EXPECT_EQ(dev.in_use(), 0);
  EXPECT_FALSE(Topology::Create({.num_hosts = 0, .chips_per_host = 2}).ok());
  EXPECT_FALSE(Topology::Create({.num_hosts = 8, .chips_per_host = 16}).ok());
}

// ---------------------------------------------------------------- client

std::unique_ptr<Client> MakeClient(int chips, int64_t hbm = int64_t{1} << 30) {
  auto c = Client::Create({.num_hosts = 1, .chips_per_host = chips, .hbm_bytes = hbm});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

std::unique_ptr<Module> AddOne(std::vector<int64_t> dims, std::optional<Sharding> sharding = std::nullopt) {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, dims), "x");
  x->sharding = sharding;
  Instruction* one = m->BroadcastInDim(m->ScalarConstant(DType::kF32, 1), dims, {});
  m->AddOutput(m->Binary(Opcode::kAdd, x, one));
  return m;
}

TEST(ClientTest, CompileCache) {
  auto client = MakeClient(2);
  auto first = client->Compile(*AddOne({4, 2}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->cache, CacheOutcome::kMiss);
  auto second = client->Compile(*AddOne({4, 2}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->cache, CacheOutcome::kMemoryHit);
  EXPECT_EQ(second->executable.get(), first->executable.get());
  EXPECT_STREQ(CacheOutcomeName(second->cache), "memory_hit");
  auto other = client->Compile(*AddOne({8, 2}));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->cache, CacheOutcome::kMiss);
  EXPECT_NE(other->executable->graph_id, first->executable->graph_id);
  auto sharded = client->Compile(*AddOne({4, 2}, *Sharding::Parse("{devices=[2,1]0,1}")));
  ASSERT_TRUE(sharded.ok());
  EXPECT_EQ(sharded->cache, CacheOutcome::kMiss);
  EXPECT_EQ(client->cache_size(), 3u);
  EXPECT_EQ(first->executable->fingerprint.size(), 32u);
  EXPECT_NE(first->executable->ir_before.find("stablehlo.add"), std::string::npos);

  // The same module on another device count is another executable.
  auto client4 = MakeClient(4);
  auto on4 = client4->Compile(*AddOne({4, 2}));
  ASSERT_TRUE(on4.ok());
  EXPECT_EQ(on4->cache, CacheOutcome::kMiss);
}

TEST(ClientTest, CompileErrorsAreStatuses) {
  auto client = MakeClient(2);
  Module m;
  Instruction* a = m.Parameter(Shape(DType::kF32, {2}), "a");
  Instruction* b = m.Parameter(Shape(DType::kF32, {3}), "b");
  m.AddOutput(m.Binary(Opcode::kAdd, a, b));
  auto r = client->Compile(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stablehlo.add"), std::string::npos);
  EXPECT_EQ(client->cache_size(), 0u);
}

TEST(ClientTest, TransferRoundTrip) {
  auto client = MakeClient(4);
  Literal value = Iota(DType::kF32, {4, 6});
  for (const char* text :
       {"{replicated}", "{devices=[4,1]0,1,2,3}", "{devices=[4,1]3,1,0,2}", "{devices=[2,2]0,1,2,3}",
        "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
        "{maximal device=2}"}) {
    Sharding s = *Sharding::Parse(text);
    auto a = client->TransferToDevices(value, s, "v");
    ASSERT_TRUE(a.ok()) << text << ": " << a.status();
    ASSERT_EQ(a->shards.size(), 4u);
    for (int d = 0; d < 4; ++d) {
      // Each shard holds exactly its index ranges of the value.
      auto r = s.ShardRanges(value.shape(), d);
      if (s.kind() == Sharding::Kind::kMaximal && d != 2) continue;
      const Literal& shard = a->shards[d]->literal();
      ASSERT_EQ(shard.shape().dims[0], r[0].end - r[0].begin) << text;
      ASSERT_EQ(shard.shape().dims[1], r[1].end - r[1].begin) << text;
      for (int64_t i = r[0].begin; i < r[0].end; ++i)
        for (int64_t j = r[1].begin; j < r[1].end; ++j)
          ASSERT_EQ(shard.GetDouble((i - r[0].begin) * shard.shape().dims[1] + (j - r[1].begin)),
                    value.GetDouble(i * 6 + j))
              << text << " device " << d;
    }
    auto back = client->TransferToHost(*a);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(Values(*back), Values(value)) << text;
  }
}

TEST(ClientTest, TransferErrors) {
  auto client = MakeClient(2, 64);
  Literal value = Iota(DType::kF32, {4, 4});
  auto bad = client->TransferToDevices(value, *Sharding::Parse("{devices=[2,2]0,1,2,3}"), "w");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor 'w'"), std::string::npos) << bad.status();
  // Uneven tiling: ceil(3/2) = 2 elements per chip, the last one padded (with
  // zeros, or NaN when poisoned); the host sees the value without padding.
  Literal odd = Iota(DType::kF32, {3});
  for (bool poison : {false, true}) {
    client->set_poison_padding(poison);
    auto uneven = client->TransferToDevices(odd, *Sharding::Parse("{devices=[2]0,1}"), "odd");
    ASSERT_TRUE(uneven.ok()) << uneven.status();
    ASSERT_EQ(uneven->shards[1]->literal().shape(), Shape(DType::kF32, {2}));
    EXPECT_EQ(uneven->shards[1]->literal().as<float>()[0], 2.f);
    EXPECT_EQ(std::isnan(uneven->shards[1]->literal().as<float>()[1]), poison);
    auto back = client->TransferToHost(*uneven);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ToF32Vector(), (std::vector<float>{0, 1, 2}));
  }
  client->set_poison_padding(false);
  // Over the HBM budget: 4x4 f32 = 64 bytes per chip fits once, not twice.
  auto one = client->TransferToDevices(value, Sharding(), "a");
  ASSERT_TRUE(one.ok()) << one.status();
  auto two = client->TransferToDevices(value, Sharding(), "b");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(two.status().message().find("chip 0"), std::string::npos) << two.status();
}

TEST(ClientTest, ExecuteShardedAndCheckArguments) {
  auto client = MakeClient(4);
  Sharding s = *Sharding::Parse("{devices=[2,2]0,1,2,3}");
  auto compiled = client->Compile(*AddOne({4, 6}, s));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  Literal value = Iota(DType::kF32, {4, 6});
  auto a = client->TransferToDevices(value, s, "x");
  ASSERT_TRUE(a.ok());
  ExecuteStats stats;
  auto out = client->Execute(*compiled->executable, {&*a}, {.step = 1, .launch_ns = 0}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].sharding, s);
  auto host = client->TransferToHost((*out)[0]);
  ASSERT_TRUE(host.ok());
  std::vector<double> want = Values(value);
  for (double& v : want) v += 1;
  EXPECT_EQ(Values(*host), want);
  EXPECT_EQ(stats.spans.size(), 4u);

  // An argument with another sharding than the program expects.
  auto r = client->TransferToDevices(value, Sharding(), "x");
  ASSERT_TRUE(r.ok());
  auto wrong = client->Execute(*compiled->executable, {&*r}, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("argument 0"), std::string::npos) << wrong.status();
  EXPECT_FALSE(client->Execute(*compiled->executable, {}, {}).ok());
}

TEST(ClientTest, ExecuteOverBudgetIsResourceExhausted) {
  // 2 chips of 256 bytes: the 32-element input (128 B) fits, the program's
  // intermediates do not.
  auto client = MakeClient(2, 256);
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {32}), "x");
  Instruction* e = m->Unary(Opcode::kExponential, x);
  Instruction* b = m->BroadcastInDim(e, {4, 32}, {1});
  m->AddOutput(b);
  auto compiled = client->Compile(*m);
  ASSERT_TRUE(compiled.ok());
  auto a = client->TransferToDevices(Iota(DType::kF32, {32}), Sharding(), "x");
  ASSERT_TRUE(a.ok());
  auto out = client->Execute(*compiled->executable, {&*a}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("chip"), std::string::npos) << out.status();
  // The error names what makes the peak, largest first.
  EXPECT_NE(out.status().message().find("largest live buffers at the peak: 512 B broadcast_in_dim"),
            std::string::npos)
      << out.status();
  // Nothing stays charged after the failed run but the input.
  EXPECT_EQ(client->topology().device(0).in_use(), 128);
  EXPECT_EQ(client->topology().device(1).in_use(), 128);
}

TEST(GemmBackend, TheChoiceIsFixedNotTimed) {
  // Two processes of one program must compute the same numbers; a choice made
  // by timing both libraries flipped under load (their sums differ in order).
  if (std::getenv("SHARDSCOPE_GEMM")) GTEST_SKIP() << "SHARDSCOPE_GEMM is set";
  const GemmBackend& g = ChosenGemmBackend();
  EXPECT_TRUE(g.use_blas) << g.Describe();
  EXPECT_GT(g.blas_gflops, 0);
  EXPECT_GT(g.eigen_gflops, 0) << "both rates are measured for the record";
  EXPECT_EQ(g.Describe().rfind("openblas (measured on one thread", 0), 0u) << g.Describe();
}

// Which chip goes first in a segment must not follow the segment's place in
// the step: with a golden-ratio counter, 24 steps of the mlp's 8-segment step
// ran the same parity of chips first at each place, and its odd chips read
// 1-5% slower than the even ones in runs with no fault (an outside probe saw
// fleet flag one). In every window of 32 steps (a run's length) of 2 to 16
// segments, each place in the step sees odd and even chips first about
// equally, and over 512 steps every chip first about as often.
TEST(SegmentRotation, EveryChipGoesFirstAsOftenAtEveryPlaceInAStep) {
  for (int chips : {2, 4, 8}) {
    for (int segments = 2; segments <= 16; ++segments) {
      for (uint64_t start : {uint64_t{0}, uint64_t{1000}, uint64_t{123457}}) {
        for (int place = 0; place < segments; ++place) {
          constexpr int kWindow = 32, kLong = 512;
          std::vector<int> first(chips, 0);
          int odd = 0;
          for (int step = 0; step < kLong; ++step) {
            const int r = SegmentRotation((start + static_cast<uint64_t>(step)) * segments + place, chips);
            ASSERT_GE(r, 0);
            ASSERT_LT(r, chips);
            ++first[r];
            if (step < kWindow) odd += r % 2;
          }
          // Binomials: within 5 standard deviations of their means.
          EXPECT_NEAR(odd, kWindow / 2, 5 * std::sqrt(kWindow / 4.0))
              << chips << " chips, " << segments << " segments, place " << place << ", from step " << start;
          const double mean = static_cast<double>(kLong) / chips, sd = std::sqrt(mean * (1.0 - 1.0 / chips));
          for (int c = 0; c < chips; ++c)
            EXPECT_NEAR(first[c], mean, 5 * sd) << chips << " chips, " << segments << " segments, place " << place
                                               << ", chip " << c;
        }
      }
    }
  }
  // Every run of `chips` segments starts each chip once.
  for (int chips : {2, 3, 8, 64})
    for (uint64_t block : {uint64_t{0}, uint64_t{7}, uint64_t{99991}}) {
      std::vector<int> seen(chips, 0);
      for (int k = 0; k < chips; ++k) ++seen[SegmentRotation(block * chips + k, chips)];
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), chips) << chips << " chips, block " << block;
    }
  EXPECT_EQ(SegmentRotation(12345, 1), 0);
}

}  // namespace
}  // namespace shardscope::runtime
