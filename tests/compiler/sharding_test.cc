// Tests of HLO-style shardings (compiler/sharding.h): the text form in both
// directions, the iota device-list form, error messages for bad texts, and the
// shard shapes and index ranges each device holds.
#include "compiler/sharding.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardscope {
namespace {

Sharding MustParse(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : Sharding();
}

TEST(ShardingTest, RoundTripExplicitForms) {
  for (const char* text : {"{replicated}", "{maximal device=1}", "{devices=[2,2]0,1,2,3}",
                           "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "{devices=[4,1]3,2,1,0}",
                           "{manual}"}) {
    Sharding s = MustParse(text);
    EXPECT_EQ(s.ToString(), text);
    Sharding again = MustParse(s.ToString());
    EXPECT_EQ(again, s) << text;
  }
}

TEST(ShardingTest, Kinds) {
  EXPECT_TRUE(MustParse("{replicated}").IsReplicated());
  Sharding m = MustParse("{maximal device=1}");
  EXPECT_EQ(m.kind(), Sharding::Kind::kMaximal);
  EXPECT_EQ(m.maximal_device(), 1);
  Sharding t = MustParse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  ASSERT_TRUE(t.IsTiled());
  EXPECT_TRUE(t.last_tile_dim_replicate());
  EXPECT_EQ(t.data_rank(), 2);
  EXPECT_EQ(t.TilesInDim(0), 2);
  EXPECT_EQ(t.TilesInDim(1), 1);
  EXPECT_EQ(t.TilesInDim(5), 1);
  // Every tile count 1: nothing is split, so it is replicated.
  EXPECT_TRUE(MustParse("{devices=[1,1]0}").IsReplicated());
  EXPECT_TRUE(MustParse("{devices=[1,1,4]0,1,2,3 last_tile_dim_replicate}").IsReplicated());
}

TEST(ShardingTest, IotaForms) {
  Sharding a = MustParse("{devices=[2,2]<=[4]}");
  EXPECT_EQ(a, MustParse("{devices=[2,2]0,1,2,3}"));
  EXPECT_EQ(MustParse(a.ToString()), a);

  Sharding b = MustParse("{devices=[2,4]<=[4,2]T(1,0)}");
  ASSERT_TRUE(b.IsTiled());
  EXPECT_EQ(b.devices(), (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(b.tile_dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(MustParse(b.ToString()), b);

  Sharding c = MustParse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(c, MustParse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"));
  Sharding d = MustParse("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(d.devices(), (std::vector<int64_t>{0, 2, 1, 3}));
}

TEST(ShardingTest, PrintsTheIotaFormWhereItFits) {
  // As XLA prints them; each parses back to the same device list.
  for (const char* text : {"{devices=[2,2]<=[4]}", "{devices=[2,4]<=[4,2]T(1,0)}",
                           "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                           "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
                           "{devices=[2,2,2]<=[2,2,2]T(2,1,0)}", "{devices=[4,2]<=[2,2,2]T(0,2,1)}"}) {
    Sharding s = MustParse(text);
    EXPECT_EQ(s.ToIotaString(), text);
    EXPECT_EQ(MustParse(s.ToIotaString()), s) << text;
  }
  // Not an iota: the written-out list; the other kinds as they are.
  EXPECT_EQ(MustParse("{devices=[4,1]3,0,2,1}").ToIotaString(), "{devices=[4,1]3,0,2,1}");
  EXPECT_EQ(MustParse("{maximal device=1}").ToIotaString(), "{maximal device=1}");
  EXPECT_EQ(Sharding::Replicated().ToIotaString(), "{replicated}");
}

TEST(ShardingTest, BadTextsGiveClearErrors) {
  struct Case {
    const char* text;
    const char* expect;  // a fragment of the message
  };
  for (const Case& c : std::vector<Case>{
           {"replicated", "expected {...}"},
           {"{devices=[2,2]0,1,2,3", "expected {...}"},
           {"{bogus}", "expected replicated, maximal or devices="},
           {"{maximal device=x}", "bad device id"},
           {"{devices=[2,2 0,1,2,3}", "missing ']'"},
           {"{devices=[2,x]0,1}", "bad number 'x' in tile dimensions"},
           {"{devices=[2,2]0,1,2}", "has 4 tiles but 3 devices are listed"},
           {"{devices=[2,2]0,1,2,2}", "appears twice"},
           {"{devices=[2,0]0,1}", "tile dimensions must be >= 1"},
           {"{devices=[2,2]<=[4}", "missing ']'"},
           {"{devices=[2,4]<=[4,2]T(1,0}", "missing ')'"},
           {"{devices=[2,4]<=[4,2]T(0)}", "transpose rank differs"},
           {"{devices=[2,4]<=[4,2]T(0,2)}", "bad permutation"},
           {"{devices=[2,4]<=[4,2]T(1,1)}", "bad permutation"},
           {"{devices=[2,2]<=[8]}", "has 4 tiles but 8 devices"},
       }) {
    auto s = Sharding::Parse(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << s.status().message();
    // Every error quotes the text it could not read.
    EXPECT_NE(s.status().message().find(c.text), std::string::npos) << s.status().message();
  }
}

TEST(ShardingTest, Validate) {
  Sharding t = MustParse("{devices=[2,2]0,1,2,3}");
  EXPECT_TRUE(t.Validate(2, 4).ok());
  EXPECT_FALSE(t.Validate(3, 4).ok());
  auto small = t.Validate(2, 3);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.message().find("device 3 is not in the mesh of 3 devices"), std::string::npos);
  EXPECT_FALSE(Sharding::Maximal(4).Validate(1, 4).ok());
  EXPECT_TRUE(Sharding::Maximal(3).Validate(1, 4).ok());
  EXPECT_TRUE(Sharding::Replicated().Validate(7, 1).ok());
}

TEST(ShardingTest, ShardShapeAndRanges) {
  Shape g(DType::kF32, {8, 6});
  Sharding t = MustParse("{devices=[2,2]0,1,2,3}");
  EXPECT_EQ(t.ShardShape(g), Shape(DType::kF32, {4, 3}));
  EXPECT_EQ(RangesToString(t.ShardRanges(g, 0)), "[0:4,0:3]");
  EXPECT_EQ(RangesToString(t.ShardRanges(g, 1)), "[0:4,3:6]");
  EXPECT_EQ(RangesToString(t.ShardRanges(g, 2)), "[4:8,0:3]");
  EXPECT_EQ(RangesToString(t.ShardRanges(g, 3)), "[4:8,3:6]");

  // Device order matters: the iota-transposed list puts 1 below 0.
  Sharding tt = MustParse("{devices=[2,2]<=[2,2]T(1,0)}");
  EXPECT_EQ(RangesToString(tt.ShardRanges(g, 1)), "[4:8,0:3]");
  EXPECT_EQ(RangesToString(tt.ShardRanges(g, 2)), "[0:4,3:6]");

  // Partially replicated: devices 0,1 hold rows 0:4, devices 2,3 rows 4:8.
  Sharding p = MustParse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_EQ(p.ShardShape(g), Shape(DType::kF32, {4, 6}));
  EXPECT_EQ(RangesToString(p.ShardRanges(g, 0)), "[0:4,0:6]");
  EXPECT_EQ(RangesToString(p.ShardRanges(g, 1)), "[0:4,0:6]");
  EXPECT_EQ(RangesToString(p.ShardRanges(g, 2)), "[4:8,0:6]");
  EXPECT_EQ(RangesToString(p.ShardRanges(g, 3)), "[4:8,0:6]");

  // Uneven: ceil-sized shards, clipped at the edge.
  Shape u(DType::kF32, {5});
  Sharding h = MustParse("{devices=[2]0,1}");
  EXPECT_EQ(h.ShardShape(u), Shape(DType::kF32, {3}));
  EXPECT_EQ(RangesToString(h.ShardRanges(u, 0)), "[0:3]");
  EXPECT_EQ(RangesToString(h.ShardRanges(u, 1)), "[3:5]");

  // Replicated and maximal.
  EXPECT_EQ(RangesToString(Sharding().ShardRanges(g, 2)), "[0:8,0:6]");
  Sharding m = Sharding::Maximal(1);
  EXPECT_EQ(m.ShardShape(g), g);
  EXPECT_EQ(RangesToString(m.ShardRanges(g, 1)), "[0:8,0:6]");
  EXPECT_EQ(RangesToString(m.ShardRanges(g, 0)), "[0:0,0:0]");
}

TEST(ShardingTest, TileIndex) {
  Sharding t = MustParse("{devices=[2,4]<=[4,2]T(1,0)}");
  EXPECT_EQ(t.TileIndex(0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(t.TileIndex(2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.TileIndex(1), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(t.TileIndex(7), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(t.TileIndex(9).empty());
}

}  // namespace
}  // namespace shardscope
