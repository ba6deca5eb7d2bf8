// `--mesh-map auto` measured on the step (runtime/mesh_ranking.h): the axis
// whose collectives move the most bytes gets the fastest links, each candidate
// priced over its own chips; a tie keeps the rule's order; bytes per axis are
// a ring's per-chip traffic (runtime_mesh_ranking_test).
#include "runtime/mesh_ranking.h"

#include <gtest/gtest.h>

#include "compiler/ir.h"
#include "runtime/simulate.h"

namespace shardscope::runtime {
namespace {

using compiler::CollectiveKind;

Interconnect Wiring(const std::string& spec) {
  auto ic = Interconnect::Parse(spec);
  EXPECT_TRUE(ic.ok()) << ic.status();
  return *ic;
}

// An all-reduce over every group of mesh axis `axis` of `shape`, `bytes` a chip.
StepCollective AlongAxis(const std::vector<int64_t>& shape, int axis, int64_t bytes, int64_t runs = 1) {
  std::vector<int64_t> ids;
  for (int64_t p = 0; p < shape[0] * shape[1]; ++p) ids.push_back(p);
  StepCollective c;
  c.name = axis == 0 ? "over data" : "over model";
  c.kind = CollectiveKind::kAllReduce;
  c.bytes = bytes;
  c.runs = runs;
  c.groups = MeshAxisGroups(shape, ids, axis);
  return c;
}

TEST(MeshRanking, TheAxisMovingMostBytesGetsNvlink) {
  const Interconnect ic = Wiring("gpu:4x8");
  const compiler::CostModel model(*compiler::FindProfile("h100"));
  const std::vector<int64_t> shape = {8, 4};  // data 8, model 4
  for (const bool data_heavy : {true, false}) {
    const std::vector<StepCollective> step = {AlongAxis(shape, 0, data_heavy ? 64 << 20 : 1 << 20),
                                              AlongAxis(shape, 1, data_heavy ? 1 << 20 : 64 << 20, 2)};
    // The rule says model first: measured, data first wins when data moves the most.
    auto c = ChooseMeshMap(ic, model, shape, {"data", "model"}, step, {"model"});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->tried.size(), 3u);
    EXPECT_EQ(c->tried[0].label, "model first");
    EXPECT_EQ(c->tried[1].label, "data first");
    EXPECT_EQ(c->tried[2].label, "row-major");
    EXPECT_EQ(c->tried[c->chosen].label, data_heavy ? "data first" : "model first") << c->Describe();
    EXPECT_EQ(c->mapping.mode, "auto");
    // The heavy axis within one host (NVLink), and each tried map's time is what the pricer says of it.
    EXPECT_EQ(c->mapping.axes[data_heavy ? 0 : 1].hosts_spanned, 1) << c->mapping.Describe();
    for (const PricedMap& p : c->tried) {
      CollectivePricer pricer(model, &ic, FaultPlan());
      int64_t want = 0;
      for (const StepCollective& s : step) {
        int64_t slowest = 0;
        for (const auto& g : s.groups) {
          std::vector<int> chips;
          for (int pos : g) chips.push_back(static_cast<int>(p.mapping.device_ids[pos]));
          slowest = std::max(slowest, pricer.Price(s.kind, s.bytes, chips).dur_ns);
        }
        want += slowest * s.runs;
      }
      EXPECT_EQ(p.collective_ns, want) << p.label;
      EXPECT_GE(p.collective_ns, c->tried[c->chosen].collective_ns) << p.label;
    }
    // Bytes per axis: a ring all-reduce puts 2(n-1)/n of the value on a chip's links.
    ASSERT_EQ(c->traffic.size(), 2u);
    EXPECT_EQ(c->traffic[0].axis, data_heavy ? "data" : "model");
    const double data_bytes = 2.0 * 7 / 8 * (data_heavy ? 64 << 20 : 1 << 20);
    const double model_bytes = 2 * 2.0 * 3 / 4 * (data_heavy ? 1 << 20 : 64 << 20);
    EXPECT_DOUBLE_EQ(c->traffic[data_heavy ? 0 : 1].bytes, data_bytes);
    EXPECT_DOUBLE_EQ(c->traffic[data_heavy ? 1 : 0].bytes, model_bytes);
    EXPECT_NE(c->Describe().find("(chosen)"), std::string::npos);
  }
}

TEST(MeshRanking, ATieKeepsTheRulesOrder) {
  // No collectives at all: every placement costs 0, the rule's order stands.
  const Interconnect ic = Wiring("4x4x4");
  const compiler::CostModel model(*compiler::FindProfile("tpu-v4"));
  auto c = ChooseMeshMap(ic, model, {16, 4}, {"data", "model"}, {}, {"model"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->chosen, 0);
  EXPECT_EQ(c->tried[0].label, "model first");
  MeshMapRequest r;
  r.priority = {"model"};
  EXPECT_EQ(c->mapping.device_ids, MapMesh(ic, {16, 4}, {"data", "model"}, r)->device_ids);
}

TEST(MeshRanking, StepCollectivesAreReadBackAsMeshPositions) {
  // A program compiled with chips in another order: its groups name chips,
  // read back as the positions that hold them.
  compiler::Module m;
  m.set_num_partitions(4);
  compiler::Instruction* x = m.Parameter(Shape(DType::kF32, {256}), "x");
  m.SetOutputs({m.AllReduce(x, compiler::ReduceKind::kSum, {{3, 1}, {2, 0}})});
  auto c = StepCollectivesOf(m, {3, 2, 1, 0});  // position p holds chip 3-p
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].bytes, 1024);
  EXPECT_EQ((*c)[0].groups, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  // Along axis 0 of a 2x2 mesh (positions 0,2 and 1,3): data carries it all.
  const auto t = TrafficPerAxis(*c, {2, 2}, {"data", "model"});
  EXPECT_EQ(t[0].axis, "data");
  EXPECT_DOUBLE_EQ(t[0].bytes, 1024.0);
  EXPECT_DOUBLE_EQ(t[1].bytes, 0.0);
  // A chip outside the mesh is named.
  auto bad = StepCollectivesOf(m, {0, 1, 2});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace shardscope::runtime
