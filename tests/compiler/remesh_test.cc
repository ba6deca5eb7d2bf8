// Shardings laid again on a mesh of another size (compiler/remesh.h): the
// axes behind each layout are found on the stored mesh and kept on the new one.
#include "compiler/remesh.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "compiler/parser.h"

namespace shardscope::compiler {
namespace {

Sharding S(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Sharding();
}

TEST(Remesh, FindsTheAxesOfEachLayoutOnASquareMesh) {
  // On 2x2 both axes have 2 chips: only the device order tells data from model.
  const std::vector<int64_t> mesh = {2, 2};
  auto data = MeshAxesOf(*Sharding::OnMesh(mesh, {0, 1, 2, 3}, {{0}, {}}), mesh, 2);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, (std::vector<std::vector<int>>{{0}, {}}));
  auto model = MeshAxesOf(*Sharding::OnMesh(mesh, {0, 1, 2, 3}, {{1}, {}}), mesh, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, (std::vector<std::vector<int>>{{1}, {}}));
  auto both = MeshAxesOf(*Sharding::OnMesh(mesh, {0, 1, 2, 3}, {{1, 0}, {}}), mesh, 2);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, (std::vector<std::vector<int>>{{1, 0}, {}}));
  // A device order no axis assignment makes.
  EXPECT_FALSE(MeshAxesOf(S("{devices=[4,1]0,3,1,2}"), mesh, 2).ok());
}

TEST(Remesh, KeepsTheAxesOnALargerMesh) {
  // Batch over data on 2x2, then on 16x2: 16 tiles of the batch, replicated over model.
  const Sharding batch = *Sharding::OnMesh({2, 2}, {0, 1, 2, 3}, {{0}, {}});
  auto s = Remesh(batch, {2, 2}, {16, 2}, 2, "x");
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<int64_t> ids(32);
  for (int i = 0; i < 32; ++i) ids[i] = i;
  EXPECT_EQ(*s, *Sharding::OnMesh({16, 2}, ids, {{0}, {}}));
  EXPECT_EQ(s->TilesInDim(0), 16);
  EXPECT_EQ(s->TilesInDim(1), 1);
  // Replicated stays replicated; a maximal sharding needs its chip.
  EXPECT_TRUE(Remesh(Sharding::Replicated(), {2, 2}, {16, 2}, 2, "x")->IsReplicated());
  auto gone = Remesh(Sharding::Maximal(3), {2, 2}, {1, 2}, 2, "w");
  EXPECT_FALSE(gone.ok());
  EXPECT_TRUE(absl::StrContains(gone.status().message(), "w lives on chip 3")) << gone.status();
}

TEST(Remesh, RelaysAWholeProgramOrSaysWhyNot) {
  const char* text = R"(module @m attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%x: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"}, %w: tensor<4x4xf32> {mhlo.sharding = "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"}) -> tensor<8x4xf32> {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
})";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(RemeshModule(**m, {2, 2}, {4, 2}).ok());
  EXPECT_EQ((*m)->num_partitions(), 8);
  const Sharding& x = *(*m)->parameters()[0]->sharding;
  const Sharding& w = *(*m)->parameters()[1]->sharding;
  EXPECT_EQ(x.TilesInDim(0), 4);  // the batch over data, now 4 chips
  EXPECT_EQ(w.TilesInDim(1), 2);  // the weight over model, still 2
  EXPECT_EQ(w.TilesInDim(0), 1);

  // 8 rows cannot fill 16 tiles.
  auto again = ParseModule(text);
  ASSERT_TRUE(again.ok());
  absl::Status s = RemeshModule(**again, {2, 2}, {16, 2});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "splits dim 0 of size 8 into 16 tiles")) << s;

  // A collective written into the program names the old chips.
  auto coll = ParseModule(R"(module @c attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
})");
  ASSERT_TRUE(coll.ok()) << coll.status();
  s = RemeshModule(**coll, {2, 1}, {4, 1});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "is a collective written into the program")) << s;
}

}  // namespace
}  // namespace shardscope::compiler
