// Auto-sharding (compiler/auto_sharding.h): the exact search tries every
// layout, the heuristic comes within 5% of it, the memory budget is honoured
// (or the failure says by how much it is missed), and a mesh axis that
// crosses hosts is priced on the DCN link.
#include "compiler/auto_sharding.h"

#include <cmath>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

// One SGD step of a linear layer: w - lr * x^T (x w), with x [batch, in] and w [in, out].
struct Step {
  Module m;
  Instruction* x;
  Instruction* w;
};

std::unique_ptr<Step> LinearStep(int64_t batch, int64_t in, int64_t out) {
  auto s = std::make_unique<Step>();
  Module& m = s->m;
  s->x = m.Parameter(Shape(DType::kF32, {batch, in}), "x");
  s->w = m.Parameter(Shape(DType::kF32, {in, out}), "w");
  Instruction* y = m.DotGeneral(s->x, s->w, {{}, {}, {1}, {0}});         // [batch, out]
  Instruction* g = m.DotGeneral(s->x, y, {{}, {}, {0}, {0}});            // [in, out]
  Instruction* lr = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0.01), {in, out}, {});
  m.AddOutput(m.Binary(Opcode::kSubtract, s->w, m.Binary(Opcode::kMultiply, lr, g)));
  return s;
}

// Two layers: h = x w1, y = h w2; both weights take a gradient step (the
// activation's gradient is y itself, as for a squared loss).
std::unique_ptr<Module> TwoLayerStep(int64_t batch, int64_t in, int64_t hidden, int64_t out) {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {batch, in}), "x");
  Instruction* w1 = m->Parameter(Shape(DType::kF32, {in, hidden}), "w1");
  Instruction* w2 = m->Parameter(Shape(DType::kF32, {hidden, out}), "w2");
  Instruction* h = m->DotGeneral(x, w1, {{}, {}, {1}, {0}});
  Instruction* y = m->DotGeneral(h, w2, {{}, {}, {1}, {0}});
  Instruction* g2 = m->DotGeneral(h, y, {{}, {}, {0}, {0}});   // [hidden, out]
  Instruction* dh = m->DotGeneral(y, w2, {{}, {}, {1}, {1}});  // [batch, hidden]
  Instruction* g1 = m->DotGeneral(x, dh, {{}, {}, {0}, {0}});  // [in, hidden]
  for (auto [w, g] : {std::pair{w1, g1}, std::pair{w2, g2}}) {
    Instruction* lr = m->BroadcastInDim(m->ScalarConstant(DType::kF32, 0.01), w->shape.dims, {});
    m->AddOutput(m->Binary(Opcode::kSubtract, w, m->Binary(Opcode::kMultiply, lr, g)));
  }
  return m;
}

AutoMesh Mesh2x2(const CostModel& model, std::vector<int> hosts = {0, 0, 0, 0}) {
  return AutoMesh::Make({2, 2}, {0, 1, 2, 3}, {"a", "b"}, hosts, model);
}

CostModel Cpu() { return CostModel(*FindProfile("cpu")); }

TEST(AutoShardingTest, ExactSearchTriesEveryLayoutAndBeatsReplication) {
  auto s = LinearStep(256, 128, 128);
  const CostModel model = Cpu();
  const AutoMesh mesh = Mesh2x2(model);
  auto r = AutoShard(s->m, {}, mesh, model, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "exact");
  EXPECT_EQ(r->groups.size(), 2u);  // x and w, one group each
  EXPECT_EQ(r->combinations, 81);    // 9 layouts of a matrix on two axes, squared
  EXPECT_EQ(r->evaluations, 81);
  // Nothing scored lower: check against a few layouts by hand.
  auto replicated = EstimateLayout(s->m, {Sharding(), Sharding()}, mesh, model, 0);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  auto batch = EstimateLayout(s->m, {*Sharding::Parse("{devices=[4,1]0,1,2,3}"), Sharding()}, mesh, model, 0);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_LE(r->estimate.modeled_ns, replicated->modeled_ns);
  EXPECT_LE(r->estimate.modeled_ns, batch->modeled_ns);
  EXPECT_LT(r->estimate.modeled_ns, replicated->modeled_ns / 2);  // four chips share the work
  // Here the weight's columns split, x whole: each chip computes its columns
  // of y and of the gradient, and nothing moves.
  EXPECT_EQ(r->param_shardings[0].ToString(), "{replicated}");
  EXPECT_EQ(r->param_shardings[1].TilesInDim(1), 4) << r->param_shardings[1].ToString();
  EXPECT_EQ(r->estimate.collectives, 0);
}

TEST(AutoShardingTest, HeuristicComesWithinFivePercentOfExact) {
  for (auto dims : {std::vector<int64_t>{256, 128, 128, 128}, std::vector<int64_t>{16, 512, 512, 512},
                    std::vector<int64_t>{64, 64, 1024, 64}, std::vector<int64_t>{512, 32, 64, 32}}) {
    auto m = TwoLayerStep(dims[0], dims[1], dims[2], dims[3]);
    const CostModel model = Cpu();
    const AutoMesh mesh = Mesh2x2(model);
    auto exact = AutoShard(*m, {}, mesh, model, {});
    AutoShardingOptions h;
    h.exact_limit = 1;
    auto heuristic = AutoShard(*m, {}, mesh, model, h);
    ASSERT_TRUE(exact.ok() && heuristic.ok());
    EXPECT_EQ(exact->evaluations, 729);
    EXPECT_EQ(heuristic->method, "heuristic");
    EXPECT_LT(heuristic->evaluations, exact->evaluations);
    std::printf("%ldx%ldx%ldx%ld: heuristic %.1f us in %d layouts, exact %.1f us in %d\n", dims[0], dims[1],
                dims[2], dims[3], heuristic->estimate.modeled_ns / 1e3, heuristic->evaluations,
                exact->estimate.modeled_ns / 1e3, exact->evaluations);
    EXPECT_LE(heuristic->estimate.modeled_ns, 1.05 * exact->estimate.modeled_ns);
  }
}

TEST(AutoShardingTest, MemoryBudgetSplitsTheWeight) {
  auto s = LinearStep(8, 1024, 1024);  // a 4 MiB weight, a tiny batch
  const CostModel model = Cpu();
  const AutoMesh mesh = Mesh2x2(model);
  auto replicated = EstimateLayout(s->m, {Sharding(), Sharding()}, mesh, model, 0);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  AutoShardingOptions tight;
  tight.memory_budget = replicated->peak_bytes / 2;
  auto r = AutoShard(s->m, {}, mesh, model, tight);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->estimate.fits);
  EXPECT_LE(r->estimate.peak_bytes, tight.memory_budget);
  EXPECT_TRUE(r->param_shardings[1].IsTiled()) << r->param_shardings[1].ToString();
  AutoShardingOptions impossible;
  impossible.memory_budget = 1024;
  auto none = AutoShard(s->m, {}, mesh, model, impossible);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "no layout fits 1.0 KiB per chip")) << none.status();
}

TEST(AutoShardingTest, GroupsShareOneLayout) {
  Module m;
  Instruction* a = m.Parameter(Shape(DType::kF32, {64, 64}), "layers.0.w");
  Instruction* b = m.Parameter(Shape(DType::kF32, {64, 64}), "layers.1.w");
  m.AddOutput(m.DotGeneral(a, b, {{}, {}, {1}, {0}}));
  const CostModel model = Cpu();
  auto r = AutoShard(m, {{"layers.*.w", {0, 1}}}, Mesh2x2(model), model, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 1u);
  EXPECT_EQ(r->combinations, 9);
  EXPECT_EQ(r->param_shardings[0], r->param_shardings[1]);
  // Bad groups are errors naming the problem.
  Instruction* v = m.Parameter(Shape(DType::kF32, {64}), "v");
  m.AddOutput(v);
  auto mixed = AutoShard(m, {{"g", {0, 2}}}, Mesh2x2(model), model, {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(absl::StrContains(mixed.status().message(), "group 'g' mixes ranks")) << mixed.status();
  auto twice = AutoShard(m, {{"g", {0}}, {"h", {0}}}, Mesh2x2(model), model, {});
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(absl::StrContains(twice.status().message(), "'layers.0.w' is in two groups")) << twice.status();
}

// Hosts {0,0,1,1} on a 2x2 mesh: axis a crosses hosts, axis b does not. On
// tpu-v4 (DCN far slower than ICI) the same all-reduce costs more over a.
TEST(AutoShardingTest, AxisAcrossHostsUsesTheDcnLink) {
  const CostModel model(*FindProfile("tpu-v4"));
  const AutoMesh mesh = Mesh2x2(model, {0, 0, 1, 1});
  EXPECT_EQ(mesh.links[0].bandwidth, model.dcn().bandwidth);
  EXPECT_EQ(mesh.links[1].bandwidth, model.ici().bandwidth);
  EXPECT_LT(model.dcn().bandwidth, model.ici().bandwidth);
  // The gradient x^T y summed over a batch split on one axis: an all-reduce over that axis.
  auto s = LinearStep(256, 128, 128);
  auto over_a = EstimateLayout(s->m, {*Sharding::Parse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"), Sharding()},
                               mesh, model, 0);
  auto over_b = EstimateLayout(s->m, {*Sharding::Parse("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}"), Sharding()},
                               mesh, model, 0);
  ASSERT_TRUE(over_a.ok() && over_b.ok());
  EXPECT_GT(over_a->collectives, 0);
  EXPECT_GT(over_a->collective_ns, 2 * over_b->collective_ns);
  EXPECT_EQ(AxesToString({{0, 1}, {}}, mesh), "[(a, b), none]");
}

}  // namespace
}  // namespace shardscope::compiler
