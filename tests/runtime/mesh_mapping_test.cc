// Mesh axes onto a topology (runtime/mesh_mapping.h): each axis's groups lie
// where the map puts them, their collectives are priced over those links
// only, and the maps that cannot be made are refused naming the axis, its
// size and the dimensions (runtime_mesh_mapping_test).
#include "runtime/mesh_mapping.h"

#include <gtest/gtest.h>

#include <set>

#include "runtime/simulate.h"

namespace shardscope::runtime {
namespace {

using compiler::CollectiveKind;

Interconnect Wiring(const std::string& spec) {
  auto ic = Interconnect::Parse(spec);
  EXPECT_TRUE(ic.ok()) << ic.status();
  return *ic;
}

MeshMapping Map(const Interconnect& ic, std::vector<int64_t> shape, MeshMapRequest r,
                std::vector<std::string> priority = {"model"}) {
  r.priority = priority;
  auto m = MapMesh(ic, shape, {"data", "model"}, r);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : MeshMapping{};
}

// The torus dimensions along which a link runs (its two chips' coordinates differ there).
int LinkDim(const Interconnect& ic, const trace::SimLinkUse& u) {
  for (size_t k = 0; k < ic.dims().size(); ++k)
    if (ic.coords(u.a)[k] != ic.coords(u.b)[k]) return static_cast<int>(k);
  return -1;
}

TEST(MeshMapping, ModelOnOneTorusDimensionIsARingOfItsLinksOnly) {
  const Interconnect ic = Wiring("4x4x4");
  const MeshMapping m = Map(ic, {16, 4}, *ParseMeshMap("model=x"));
  ASSERT_EQ(m.device_ids.size(), 64u);
  EXPECT_EQ(m.axes[1].rides, "x (ici, 4 chips, ring with wraparound)");
  EXPECT_EQ(m.axes[0].rides, "y,z (ici, 16 chips, 4x4 sub-torus, ring with wraparound)");
  const compiler::CostModel model(*compiler::FindProfile("tpu-v4"));
  const compiler::ChipProfile& p = model.profile();
  CollectivePricer pricer(model, &ic, FaultPlan());
  const int64_t bytes = 16 << 20;
  const auto groups = MeshAxisGroups({16, 4}, m.device_ids, 1);
  ASSERT_EQ(groups.size(), 16u);
  for (const std::vector<int>& g : groups) {
    // A ring along x: y and z fixed, each member the next one's x-neighbour, wraparound included.
    for (size_t i = 0; i < g.size(); ++i) {
      const int next = g[(i + 1) % g.size()];
      EXPECT_EQ(ic.coords(g[i])[1], ic.coords(next)[1]);
      EXPECT_EQ(ic.coords(g[i])[2], ic.coords(next)[2]);
      EXPECT_EQ((ic.coords(g[i])[0] + 1) % 4, ic.coords(next)[0]);
    }
    CollectivePrice price = pricer.Price(CollectiveKind::kAllReduce, bytes, g);
    ASSERT_EQ(price.links.size(), 4u);  // the 4 links of its x ring
    for (const trace::SimLinkUse& u : price.links) EXPECT_EQ(LinkDim(ic, u), 0) << u.a << "-" << u.b;
    // The per-dimension torus algorithm on one dimension: 2(n-1) steps of B/n over single hops.
    EXPECT_NEAR(price.dur_ns, 2 * 3 * (p.link_latency_ns + (bytes / 4.0) / p.link_bandwidth * 1e9), 2);
  }
  // The data axis: whole y and z, priced per dimension, never over an x link.
  for (const std::vector<int>& g : MeshAxisGroups({16, 4}, m.device_ids, 0)) {
    CollectivePrice price = pricer.Price(CollectiveKind::kAllReduce, bytes, g);
    EXPECT_EQ(price.algorithm, "torus");
    for (const trace::SimLinkUse& u : price.links) EXPECT_NE(LinkDim(ic, u), 0);
  }
  // The automatic map gives model the minor dimension z, a whole ring as well.
  const MeshMapping a = Map(ic, {16, 4}, MeshMapRequest{});
  EXPECT_EQ(a.mode, "auto");
  EXPECT_EQ(a.axes[1].rides, "z (ici, 4 chips, ring with wraparound)");
}

TEST(MeshMapping, AutoMakesAContiguousRingWhereRowMajorTakesLongerSteps) {
  // 8x8 on 4x4x4: no whole dimension has 8 chips, so model gets a 2x4 block
  // (2 of y, all of z) laid out as a snake: every step one hop.
  const Interconnect ic = Wiring("4x4x4");
  const MeshMapping a = Map(ic, {8, 8}, MeshMapRequest{});
  const MeshMapping r = Map(ic, {8, 8}, *ParseMeshMap("row-major"));
  EXPECT_EQ(a.axes[1].rides, "2 of y,z (ici, 8 chips, 2x4 block, ring of neighbours)");
  EXPECT_EQ(a.axes[1].max_hop, 1);
  EXPECT_EQ(r.axes[1].max_hop, 2);
  const compiler::CostModel model(*compiler::FindProfile("tpu-v4"));
  CollectivePricer pricer(model, &ic, FaultPlan());
  const int64_t bytes = 16 << 20;
  const auto auto_group = MeshAxisGroups({8, 8}, a.device_ids, 1)[0];
  const auto row_group = MeshAxisGroups({8, 8}, r.device_ids, 1)[0];
  EXPECT_EQ(std::set<int>(auto_group.begin(), auto_group.end()), std::set<int>(row_group.begin(), row_group.end()));
  // The same chips; row-major's two-hop steps share links, so its ring is slower.
  EXPECT_LT(pricer.Price(CollectiveKind::kAllReduce, bytes, auto_group).dur_ns,
            pricer.Price(CollectiveKind::kAllReduce, bytes, row_group).dur_ns);
}

TEST(MeshMapping, GpuClusterPutsModelWithinHostsAndDataAcrossThem) {
  const Interconnect ic = Wiring("gpu:4x8");
  const compiler::CostModel model(*compiler::FindProfile("h100"));
  CollectivePricer pricer(model, &ic, FaultPlan());
  for (const MeshMapping& m : {Map(ic, {4, 8}, MeshMapRequest{}), Map(ic, {4, 8}, *ParseDcnMesh("4x1"))}) {
    EXPECT_EQ(m.axes[1].rides, "within a host (nvlink, 8 chips)");
    EXPECT_EQ(m.axes[0].rides, "across 4 hosts (dcn, one rail)");
    for (const auto& g : MeshAxisGroups({4, 8}, m.device_ids, 1)) {
      CollectivePrice price = pricer.Price(CollectiveKind::kAllReduce, 1 << 24, g);
      ASSERT_FALSE(price.links.empty());
      for (const trace::SimLinkUse& u : price.links) {
        EXPECT_EQ(ic.host_of(u.a), ic.host_of(u.b));  // NVLink only
        EXPECT_EQ(ic.host_of(u.a), ic.host_of(g[0]));
      }
    }
    for (const auto& g : MeshAxisGroups({4, 8}, m.device_ids, 0)) {
      CollectivePrice price = pricer.Price(CollectiveKind::kAllReduce, 1 << 24, g);
      ASSERT_FALSE(price.links.empty());
      for (const trace::SimLinkUse& u : price.links) {
        EXPECT_NE(ic.host_of(u.a), ic.host_of(u.b));  // the data-center network's rail
        EXPECT_EQ(u.a % 8, g[0] % 8);
      }
    }
  }
  // Data parallel with a second axis of 4: auto puts data (the communicating
  // axis) on a host's 8 chips; row-major spreads it 2 chips x 4 hosts.
  const MeshMapping dp = Map(ic, {8, 4}, MeshMapRequest{}, {"data"});
  const MeshMapping rows = Map(ic, {8, 4}, *ParseMeshMap("row-major"), {"data"});
  EXPECT_EQ(dp.axes[0].rides, "within a host (nvlink, 8 chips)");
  EXPECT_EQ(rows.axes[0].rides, "2 chips within a host (nvlink) x 4 hosts (dcn)");
  EXPECT_EQ(rows.axes[0].hosts_spanned, 4);
  // HybridMesh's split: --dcn-mesh 2x2 gives each axis 2 hosts.
  const MeshMapping hybrid = Map(ic, {8, 4}, *ParseDcnMesh("2x2"));
  EXPECT_EQ(hybrid.axes[0].rides, "4 chips within a host (nvlink) x 2 hosts (dcn)");
  EXPECT_EQ(hybrid.axes[1].rides, "2 chips within a host (nvlink) x 2 hosts (dcn)");
}

TEST(MeshMapping, EveryMapIsAPermutationOfTheChips) {
  for (const auto& [spec, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"4x4x4", {16, 4}}, {"4x4x4", {8, 8}}, {"4x4x4", {2, 32}}, {"6x4", {8, 3}}, {"6x6", {9, 4}},
           {"8x8x16", {128, 8}}, {"gpu:4x6", {6, 4}}, {"gpu:8x4", {4, 8}}, {"16x16x16", {256, 16}}}) {
    const Interconnect ic = Wiring(spec);
    const MeshMapping m = Map(ic, shape, MeshMapRequest{});
    std::set<int64_t> ids(m.device_ids.begin(), m.device_ids.end());
    EXPECT_EQ(ids.size(), static_cast<size_t>(ic.num_chips())) << spec;
    EXPECT_EQ(*ids.rbegin(), ic.num_chips() - 1) << spec;
  }
}

TEST(MeshMapping, MapsThatCannotBeMadeAreRefusedNamingTheAxisAndDimensions) {
  const Interconnect torus = Wiring("4x4x4"), gpu = Wiring("gpu:4x8");
  auto refused = [](const Interconnect& ic, std::vector<int64_t> shape, absl::StatusOr<MeshMapRequest> r,
                    const std::string& says) {
    absl::Status s = r.status();
    if (r.ok()) s = MapMesh(ic, shape, {"data", "model"}, *r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_NE(std::string(s.message()).find(says), std::string::npos) << s.message();
  };
  refused(torus, {16, 4}, ParseMeshMap("model=xy"), "axis 'model' has 4 chips but xy make 16 (the 4x4x4 torus");
  refused(torus, {16, 4}, ParseMeshMap("model=x,data=xz"), "dimension x is named twice");
  refused(torus, {16, 4}, ParseMeshMap("model=w"), "axis 'model' names dimension 'w'");
  refused(Wiring("4x4"), {4, 4}, ParseMeshMap("model=z"), "names dimension z, which --topology 4x4 does not have");
  refused(torus, {16, 4}, ParseMeshMap("fsdp=x"), "axis 'fsdp' is not an axis of the mesh 16x4");
  refused(torus, {16, 4}, ParseMeshMap("model=x,model=y"), "axis 'model' is named twice");
  refused(torus, {8, 8}, ParseMeshMap("model=x"), "axis 'model' has 8 chips but x make 4");
  refused(gpu, {4, 8}, ParseDcnMesh("3x1"), "axis 'data' spans 3 hosts, which does not divide the 4 hosts");
  refused(gpu, {4, 8}, ParseDcnMesh("2x1"), "the axes span 2 hosts in all but --topology gpu:4x8 has 4");
  refused(gpu, {4, 8}, ParseDcnMesh("1x4x1"), "has 3 factors but the mesh 4x8 (data 4, model 8) has 2 axes");
  refused(gpu, {8, 4}, ParseDcnMesh("1x0"), "'0' is not a whole number of hosts");
  refused(gpu, {4, 8}, ParseMeshMap("model=x"), "is a GPU cluster: give --dcn-mesh");
  refused(torus, {16, 4}, ParseDcnMesh("4x1"), "is a torus");
  refused(torus, {16, 4}, ParseMeshMap("model=a=b"), "names dimension 'a'");
}

}  // namespace
}  // namespace shardscope::runtime
