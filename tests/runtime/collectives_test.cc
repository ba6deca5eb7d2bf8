// The collectives that give each member its own result — reduce_scatter,
// all_to_all, collective_permute — and collective_broadcast, run end to end:
// hand-built per-device programs through ExecuteProgram on 2 and 4 devices,
// every device's result compared with values the test computes itself, element
// by element from the host inputs (not with the runtime's block copies). Also
// the participant groups the Scheduler waits on, per-device memory charging,
// and the errors of bad programs.
#include "runtime/collectives.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir.h"
#include "gtest/gtest.h"
#include "runtime/client.h"
#include "runtime/executor.h"
#include "runtime/scheduler.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::ReduceKind;
using Groups = std::vector<std::vector<int64_t>>;

// ---------------------------------------------------------------- host-side expectations

// Device d's input: distinct, nonzero values per device (i1: a pattern that differs by device).
Literal DeviceInput(DType t, const std::vector<int64_t>& dims, int d) {
  Literal l(Shape(t, dims));
  for (int64_t k = 0; k < l.elements(); ++k)
    l.SetDouble(
        k, t == DType::kI1 ? static_cast<double>((k + d) % 3 == 0) : 100.0 * d + static_cast<double>(k) + 1);
  return l;
}

std::vector<Literal> Inputs(DType t, const std::vector<int64_t>& dims, int n) {
  std::vector<Literal> v;
  for (int d = 0; d < n; ++d) v.push_back(DeviceInput(t, dims, d));
  return v;
}

Literal SliceAlong(const Literal& x, int64_t dim, int64_t start, int64_t size) {
  Shape s = x.shape();
  s.dims[dim] = size;
  Literal out(s);
  for (int64_t k = 0; k < out.elements(); ++k) {
    std::vector<int64_t> idx = Unravel(k, s.dims);
    idx[dim] += start;
    out.SetDouble(k, x.GetDouble(Ravel(idx, x.shape().dims)));
  }
  return out;
}

Literal ConcatAlong(const std::vector<Literal>& parts, int64_t dim) {
  Shape s = parts[0].shape();
  s.dims[dim] = 0;
  for (const Literal& p : parts) s.dims[dim] += p.shape().dims[dim];
  Literal out(s);
  for (int64_t k = 0; k < out.elements(); ++k) {
    std::vector<int64_t> idx = Unravel(k, s.dims);
    size_t part = 0;
    while (idx[dim] >= parts[part].shape().dims[dim]) idx[dim] -= parts[part++].shape().dims[dim];
    out.SetDouble(k, parts[part].GetDouble(Ravel(idx, parts[part].shape().dims)));
  }
  return out;
}

Literal Reduced(ReduceKind kind, const std::vector<const Literal*>& xs) {
  Literal out = *xs[0];
  for (size_t m = 1; m < xs.size(); ++m)
    for (int64_t k = 0; k < out.elements(); ++k) {
      double a = out.GetDouble(k), b = xs[m]->GetDouble(k);
      out.SetDouble(k, kind == ReduceKind::kSum   ? a + b
                       : kind == ReduceKind::kMax ? std::max(a, b)
                                                  : std::min(a, b));
    }
  return out;
}

std::vector<double> Values(const Literal& l) {
  std::vector<double> v;
  for (int64_t k = 0; k < l.elements(); ++k) v.push_back(l.GetDouble(k));
  return v;
}

// Every device's result against its expectation, by shape and value.
void ExpectResults(const std::vector<Literal>& got, const std::vector<Literal>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < got.size(); ++d) {
    EXPECT_EQ(got[d].shape(), want[d].shape()) << "device " << d;
    EXPECT_EQ(Values(got[d]), Values(want[d])) << "device " << d;
  }
}

// ---------------------------------------------------------------- running a program

struct Run {
  std::vector<Literal> out;  // first output, per device
  ScheduleInput timing;
  std::vector<int64_t> peak;  // per device
};

// One collective applied to parameter x, after an add (x + x is the value
// sent), so the collective's operand is a charged intermediate.
using Build = std::function<Instruction*(Module&, Instruction*)>;

std::unique_ptr<Module> Program(const Shape& in, int partitions, const Build& collective) {
  auto m = std::make_unique<Module>("local");
  m->set_num_partitions(partitions);
  Instruction* x = m->Parameter(in, "x");
  m->AddOutput(collective(*m, x));
  return m;
}

absl::StatusOr<Run> Execute(const Module& m, const std::vector<Literal>& inputs) {
  const int n = static_cast<int>(inputs.size());
  auto topology = Topology::Create({.num_hosts = 1, .chips_per_host = n});
  if (!topology.ok()) return topology.status();
  ThreadPool pool(2);
  std::vector<std::vector<const Literal*>> args;
  for (const Literal& l : inputs) args.push_back({&l});
  Run run;
  auto out = ExecuteProgram(m, **topology, pool, args, &run.timing);
  if (!out.ok()) return out.status();
  for (int d = 0; d < n; ++d) {
    run.out.push_back((*out)[d][0]->literal());
    run.peak.push_back((*topology)->device(d).peak());
  }
  // The devices' collectives line up for the Scheduler (every device in one group).
  std::vector<int64_t> tracks;
  for (int d = 0; d < n; ++d) tracks.push_back(d + 1);
  Scheduler scheduler(trace::Clock::kDevice, tracks);
  if (auto spans = scheduler.Schedule(run.timing); !spans.ok()) return spans.status();
  out->clear();
  for (int d = 0; d < n; ++d)
    if ((*topology)->device(d).in_use() != 0) return absl::InternalError("a device still has bytes charged");
  return run;
}

// The positions of device d in `groups` (empty groups: every device, in order).
std::vector<int64_t> GroupOf(const Groups& groups, int n, int64_t d) {
  if (groups.empty()) {
    std::vector<int64_t> all;
    for (int k = 0; k < n; ++k) all.push_back(k);
    return all;
  }
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), d) != g.end()) return g;
  return {};
}

int64_t PositionIn(const std::vector<int64_t>& group, int64_t d) {
  return std::find(group.begin(), group.end(), d) - group.begin();
}

// ---------------------------------------------------------------- reduce_scatter

struct ReduceScatterCase {
  int n;
  Groups groups;
  std::vector<int64_t> dims;
  int64_t dim;
  ReduceKind kind;
  DType type;
};

TEST(ReduceScatter, EachMemberGetsItsBlockOfTheReduction) {
  const std::vector<ReduceScatterCase> cases = {
      {2, {}, {4, 3}, 0, ReduceKind::kSum, DType::kF32},
      {2, {{0, 1}}, {3, 4}, 1, ReduceKind::kMax, DType::kI32},
      {4, {}, {8, 2}, 0, ReduceKind::kSum, DType::kF32},
      {4, {{0, 2}, {1, 3}}, {2, 6}, 1, ReduceKind::kSum, DType::kF32},
      {4, {{3, 1}, {2, 0}}, {4, 2, 2}, 0, ReduceKind::kMin, DType::kI64},
      {4, {{0, 1, 2, 3}}, {2, 8}, 1, ReduceKind::kSum, DType::kF64},
      // 16-bit floats combine in f32 and round once, as the host's double sum rounded once does
      // for these small integers.
      {4, {{0, 2}, {1, 3}}, {4, 2}, 0, ReduceKind::kSum, DType::kBF16},
      {2, {}, {2, 4}, 1, ReduceKind::kMax, DType::kF16},
  };
  for (const ReduceScatterCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c.n << " devices, " << c.groups.size() << " groups, dim " << c.dim);
    auto m = Program(Shape(c.type, c.dims), c.n,
                     [&](Module& m, Instruction* x) { return m.ReduceScatter(x, c.dim, c.kind, c.groups); });
    ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
    std::vector<Literal> in = Inputs(c.type, c.dims, c.n);
    auto run = Execute(*m, in);
    ASSERT_TRUE(run.ok()) << run.status();
    std::vector<Literal> want;
    for (int d = 0; d < c.n; ++d) {
      std::vector<int64_t> group = GroupOf(c.groups, c.n, d);
      std::vector<const Literal*> xs;
      for (int64_t member : group) xs.push_back(&in[member]);
      const int64_t block = c.dims[c.dim] / static_cast<int64_t>(group.size());
      want.push_back(SliceAlong(Reduced(c.kind, xs), c.dim, PositionIn(group, d) * block, block));
    }
    ExpectResults(run->out, want);
  }
}

TEST(ReduceScatter, ChargesEachDeviceItsBlockAndRecordsItsGroups) {
  // x + x (128 B, charged) is live while the 64 B block is written.
  auto m = Program(Shape(DType::kF32, {4, 8}), 4, [](Module& m, Instruction* x) {
    return m.ReduceScatter(m.Binary(compiler::Opcode::kAdd, x, x), 0, ReduceKind::kSum, {{0, 2}, {1, 3}});
  });
  ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
  auto run = Execute(*m, Inputs(DType::kF32, {4, 8}, 4));
  ASSERT_TRUE(run.ok()) << run.status();
  for (int d = 0; d < 4; ++d) EXPECT_EQ(run->peak[d], 128 + 64) << "device " << d;
  ASSERT_EQ(run->timing.collectives.size(), 1u);
  EXPECT_EQ(run->timing.collectives[0].groups, (Groups{{0, 2}, {1, 3}}));
}

TEST(ReduceScatter, ScatterDimensionNotDivisibleIsAClearError) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {3, 4}), "x");
  m.AddOutput(m.ReduceScatter(x, 0, ReduceKind::kSum, {{0, 1}}));
  absl::Status s = compiler::Verify(m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stablehlo.reduce_scatter"), std::string::npos) << s;
  EXPECT_NE(s.message().find("not divisible by the replica group size 2"), std::string::npos) << s;

  // The kernel itself, given a group the dimension does not split over.
  Literal a = DeviceInput(DType::kF32, {4}, 0), b = a, c = a, o1(Shape(DType::kF32, {1})), o2 = o1, o3 = o1;
  s = ReduceScatter(ReduceKind::kSum, 0, {&a, &b, &c}, {&o1, &o2, &o3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not divisible by the 3 participants"), std::string::npos) << s;
  // Types all_reduce does not combine.
  Literal p(Shape(DType::kI1, {2})), po(Shape(DType::kI1, {1}));
  s = ReduceScatter(ReduceKind::kSum, 0, {&p, &p}, {&po, &po});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("reduce_scatter on i1"), std::string::npos) << s;
}

TEST(ReduceScatter, EmptyGroupsBuiltForFewerDevicesThanItRunsOnIsAnError) {
  // Built for 2 partitions ([4] -> [2]) but run on 4: the block would be [1].
  auto m = Program(Shape(DType::kF32, {4}), 2,
                   [](Module& m, Instruction* x) { return m.ReduceScatter(x, 0, ReduceKind::kSum, {}); });
  ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
  EXPECT_EQ(m->outputs()[0]->shape, Shape(DType::kF32, {2}));
  auto run = Execute(*m, Inputs(DType::kF32, {4}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("reduce_scatter"), std::string::npos) << run.status();
  EXPECT_NE(run.status().message().find("the group makes results of f32[1] but the result type is f32[2]"),
            std::string::npos)
      << run.status();
}

// ---------------------------------------------------------------- all_to_all

struct AllToAllCase {
  int n;
  Groups groups;
  std::vector<int64_t> dims;
  int64_t split, concat;
  DType type;
};

TEST(AllToAll, MembersExchangeBlocksAndConcatenateInMemberOrder) {
  const std::vector<AllToAllCase> cases = {
      {2, {}, {4, 3}, 0, 1, DType::kF32},
      {2, {{1, 0}}, {2, 6}, 1, 0, DType::kBF16},
      {4, {}, {8, 2}, 0, 0, DType::kI32},
      {4, {}, {2, 4, 3}, 1, 2, DType::kF16},
      {4, {{0, 2}, {1, 3}}, {2, 6}, 1, 0, DType::kF32},
      {4, {{0, 2}, {1, 3}}, {4, 3}, 0, 1, DType::kI1},
      {4, {{3, 0}, {1, 2}}, {6, 2}, 0, 0, DType::kI64},
  };
  for (const AllToAllCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c.n << " devices, " << c.groups.size() << " groups, split " << c.split
                                    << " concat " << c.concat);
    const int64_t count = c.groups.empty() ? c.n : static_cast<int64_t>(c.groups[0].size());
    auto m = Program(Shape(c.type, c.dims), c.n, [&](Module& m, Instruction* x) {
      return m.AllToAll(x, c.split, c.concat, count, c.groups);
    });
    ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
    std::vector<Literal> in = Inputs(c.type, c.dims, c.n);
    auto run = Execute(*m, in);
    ASSERT_TRUE(run.ok()) << run.status();
    std::vector<Literal> want;
    const int64_t block = c.dims[c.split] / count;
    for (int d = 0; d < c.n; ++d) {
      std::vector<int64_t> group = GroupOf(c.groups, c.n, d);
      const int64_t j = PositionIn(group, d);
      std::vector<Literal> received;  // block j of every member, in member order
      for (int64_t member : group) received.push_back(SliceAlong(in[member], c.split, j * block, block));
      want.push_back(ConcatAlong(received, c.concat));
    }
    ExpectResults(run->out, want);
  }
}

TEST(AllToAll, BadSplitsAreClearErrors) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {3, 4}), "x");
  m.AddOutput(m.AllToAll(x, 0, 1, 2, {{0, 1}}));
  absl::Status s = compiler::Verify(m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stablehlo.all_to_all"), std::string::npos) << s;
  EXPECT_NE(s.message().find("split dimension 0 (size 3) is not divisible by split_count 2"),
            std::string::npos)
      << s;

  Module g;
  Instruction* y = g.Parameter(Shape(DType::kF32, {4, 4}), "y");
  g.AddOutput(g.AllToAll(y, 0, 1, 2, {{0, 1, 2, 3}}));
  s = compiler::Verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("split_count 2 differs from the replica group size 4"), std::string::npos) << s;

  // Empty groups: split_count must match the devices it runs on.
  auto p = Program(Shape(DType::kF32, {4}), 2,
                   [](Module& m, Instruction* x) { return m.AllToAll(x, 0, 0, 2, {}); });
  ASSERT_TRUE(compiler::Verify(*p).ok());
  auto run = Execute(*p, Inputs(DType::kF32, {4}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("split_count 2 differs from the 4 participants"), std::string::npos)
      << run.status();
}

// ---------------------------------------------------------------- collective_permute

struct PermuteCase {
  int n;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  Groups participants;  // what the Scheduler waits on
};

TEST(CollectivePermute, TargetsGetTheirSourcesValueOthersZeros) {
  const std::vector<PermuteCase> cases = {
      {2, {{0, 1}, {1, 0}}, {{0, 1}}},
      {2, {{0, 1}}, {{0, 1}}},
      {4, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, {{0, 1, 2, 3}}},
      {4, {{0, 2}, {2, 0}}, {{0, 2}, {1}, {3}}},
      {4, {{1, 0}, {3, 2}}, {{0, 1}, {2, 3}}},
      {4, {{2, 2}}, {{0}, {1}, {2}, {3}}},
      {4, {}, {{0}, {1}, {2}, {3}}},
  };
  for (DType type : {DType::kF32, DType::kBF16, DType::kI32, DType::kI1}) {
    for (const PermuteCase& c : cases) {
      SCOPED_TRACE(testing::Message()
                   << c.n << " devices, " << c.pairs.size() << " pairs, " << DTypeName(type));
      auto m = Program(Shape(type, {2, 3}), c.n,
                       [&](Module& m, Instruction* x) { return m.CollectivePermute(x, c.pairs); });
      ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
      std::vector<Literal> in = Inputs(type, {2, 3}, c.n);
      auto run = Execute(*m, in);
      ASSERT_TRUE(run.ok()) << run.status();
      std::vector<Literal> want;
      for (int d = 0; d < c.n; ++d) want.push_back(Literal(Shape(type, {2, 3})));  // zeros
      for (const auto& [source, target] : c.pairs) want[target] = in[source];
      ExpectResults(run->out, want);
      EXPECT_EQ(run->timing.collectives[0].groups, c.participants);
    }
  }
}

TEST(CollectivePermute, ReusedSourceOrTargetAndUnknownDevicesAreClearErrors) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {2}), "x");
  m.AddOutput(m.CollectivePermute(x, {{0, 1}, {2, 1}}));
  absl::Status s = compiler::Verify(m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stablehlo.collective_permute"), std::string::npos) << s;
  EXPECT_NE(s.message().find("device 1 is the target of two source_target_pairs"), std::string::npos) << s;

  Module src;
  Instruction* y = src.Parameter(Shape(DType::kF32, {2}), "y");
  src.AddOutput(src.CollectivePermute(y, {{0, 1}, {0, 2}}));
  s = compiler::Verify(src);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device 0 is the source of two source_target_pairs"), std::string::npos) << s;

  // Unverified, the executor still refuses (rather than racing two writes).
  auto run = Execute(m, Inputs(DType::kF32, {2}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("collective_permute"), std::string::npos) << run.status();
  EXPECT_NE(run.status().message().find("device 1 is the target of two source_target_pairs"),
            std::string::npos)
      << run.status();

  // A device the topology does not have.
  auto far = Program(Shape(DType::kF32, {2}), 2, [](Module& m, Instruction* x) {
    return m.CollectivePermute(x, {{0, 5}});
  });
  ASSERT_TRUE(compiler::Verify(*far).ok());
  run = Execute(*far, Inputs(DType::kF32, {2}, 2));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("source_target_pairs name [0, 5]; there are 2 devices"),
            std::string::npos)
      << run.status();
}

// ---------------------------------------------------------------- collective_broadcast

TEST(CollectiveBroadcast, EveryMemberGetsTheFirstMembersValue) {
  struct Case {
    int n;
    Groups groups;
  };
  const std::vector<Case> cases = {
      {2, {}},
      {2, {{1, 0}}},
      {4, {}},
      {4, {{0, 2}, {1, 3}}},
      {4, {{2, 1}, {3, 0}}},
      {4, {{3}, {1}, {0}, {2}}},
  };
  for (DType type : {DType::kF32, DType::kF16, DType::kI64, DType::kI1}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message()
                   << c.n << " devices, " << c.groups.size() << " groups, " << DTypeName(type));
      auto m = Program(Shape(type, {3, 2}), c.n,
                       [&](Module& m, Instruction* x) { return m.CollectiveBroadcast(x, c.groups); });
      ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
      std::vector<Literal> in = Inputs(type, {3, 2}, c.n);
      auto run = Execute(*m, in);
      ASSERT_TRUE(run.ok()) << run.status();
      std::vector<Literal> want;
      for (int d = 0; d < c.n; ++d) want.push_back(in[GroupOf(c.groups, c.n, d)[0]]);
      ExpectResults(run->out, want);
    }
  }
}

TEST(CollectiveBroadcast, DevicesInNoGroupGetZeros) {
  auto m = Program(Shape(DType::kF32, {2}), 4, [](Module& m, Instruction* x) {
    return m.CollectiveBroadcast(x, {{2, 1}});
  });
  ASSERT_TRUE(compiler::Verify(*m).ok());
  std::vector<Literal> in = Inputs(DType::kF32, {2}, 4);
  auto run = Execute(*m, in);
  ASSERT_TRUE(run.ok()) << run.status();
  Literal zeros(Shape(DType::kF32, {2}));
  std::vector<Literal> want = {zeros, in[2], in[2], zeros};
  ExpectResults(run->out, want);
  EXPECT_EQ(run->timing.collectives[0].groups, (Groups{{2, 1}, {0}, {3}}));
}

// ---------------------------------------------------------------- replica groups

TEST(ReplicaGroups, OutOfRangeOrUncoveredDevicesAreClearErrors) {
  // Device 4 on 4 devices.
  auto far = Program(Shape(DType::kF32, {4}), 4, [](Module& m, Instruction* x) {
    return m.ReduceScatter(x, 0, ReduceKind::kSum, {{0, 4}, {1, 2}});
  });
  ASSERT_TRUE(compiler::Verify(*far).ok());
  auto run = Execute(*far, Inputs(DType::kF32, {4}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("reduce_scatter"), std::string::npos) << run.status();
  EXPECT_NE(run.status().message().find("replica_groups name device 4; there are 4 devices"),
            std::string::npos)
      << run.status();

  // Device 1 in two groups (unverified: the verifier says so too).
  auto twice = Program(Shape(DType::kF32, {4}), 4, [](Module& m, Instruction* x) {
    return m.CollectiveBroadcast(x, {{0, 1}, {1, 2}});
  });
  run = Execute(*twice, Inputs(DType::kF32, {4}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("device 1 is in two replica groups"), std::string::npos)
      << run.status();

  // Device 3 in no group of an all_to_all.
  auto uncovered = Program(Shape(DType::kF32, {4}), 4, [](Module& m, Instruction* x) {
    return m.AllToAll(x, 0, 0, 2, {{0, 1}, {2, 3}});
  });
  run = Execute(*uncovered, Inputs(DType::kF32, {4}, 3));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("replica_groups name device 3; there are 3 devices"),
            std::string::npos)
      << run.status();
  auto partial = Program(Shape(DType::kF32, {4}), 4, [](Module& m, Instruction* x) {
    return m.AllToAll(x, 0, 0, 2, {{0, 1}});
  });
  run = Execute(*partial, Inputs(DType::kF32, {4}, 4));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("device 2 is in no replica group"), std::string::npos)
      << run.status();

  // Groups of different sizes, which the result types cannot follow.
  Module uneven;
  Instruction* x = uneven.Parameter(Shape(DType::kF32, {4}), "x");
  uneven.AddOutput(uneven.CollectiveBroadcast(x, {{0, 1}, {2}}));
  absl::Status s = compiler::Verify(uneven);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("replica groups differ in size (2 and 1 members)"), std::string::npos) << s;
}

TEST(ReplicaGroups, AllReduceAndAllGatherStillGiveEveryMemberTheSameResult) {
  auto m = Program(Shape(DType::kF32, {2, 2}), 4, [](Module& m, Instruction* x) {
    return m.AllGather(m.AllReduce(x, ReduceKind::kSum, {{0, 1}, {2, 3}}), 1, {{0, 2}, {1, 3}});
  });
  ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
  std::vector<Literal> in = Inputs(DType::kF32, {2, 2}, 4);
  auto run = Execute(*m, in);
  ASSERT_TRUE(run.ok()) << run.status();
  Literal s01 = Reduced(ReduceKind::kSum, {&in[0], &in[1]}),
          s23 = Reduced(ReduceKind::kSum, {&in[2], &in[3]});
  Literal gathered = ConcatAlong({s01, s23}, 1);
  ExpectResults(run->out, {gathered, gathered, gathered, gathered});

  // An all_gather whose result type assumed a smaller group is refused, not overrun.
  auto small =
      Program(Shape(DType::kF32, {2}), 4, [](Module& m, Instruction* x) { return m.AllGather(x, 0, {}); });
  auto bad = Execute(*small, Inputs(DType::kF32, {2}, 4));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("4 participants of f32[2] do not make the result f32[2]"),
            std::string::npos)
      << bad.status();
}

TEST(ReplicaGroups, CollectivesInAGlobalProgramAreRefusedByCompile) {
  // Only the partitioner inserts collectives; a user's global program with one
  // would otherwise be partitioned as if the op were local.
  auto client = Client::Create({.num_hosts = 1, .chips_per_host = 2});
  ASSERT_TRUE(client.ok()) << client.status();
  for (const Build& make : std::vector<Build>{
           [](Module&m, Instruction*x) {
             return m.ReduceScatter(x, 0, ReduceKind::kSum, {{0, 1}});
           },
           [](Module&m, Instruction*x) {
             return m.AllToAll(x, 0, 1, 2, {{0, 1}});
           },
           [](Module&m, Instruction*x) {
             return m.CollectivePermute(x, {{0, 1}});
           },
           [](Module&m, Instruction*x) {
             return m.CollectiveBroadcast(x, {{0, 1}});
           },
       }) {
    auto m = Program(Shape(DType::kF32, {4, 4}), 1, make);
    auto compiled = (*client)->Compile(*m);
    ASSERT_FALSE(compiled.ok()) << compiler::OpcodeName(m->outputs()[0]->op);
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(compiled.status().message().find(
                  absl::StrCat(compiler::OpcodeName(m->outputs()[0]->op), " in a global program")),
              std::string::npos)
        << compiled.status();
  }
}

}  // namespace
}  // namespace shardscope::runtime
