// Mesh axes onto the topology end to end (`run --mesh-map`, `--dcn-mesh`,
// docs/simulate.md "Mesh axes onto the topology"): a simulated llama with
// model on one torus dimension sends every model collective round that
// dimension's ring and nowhere else; the automatic map beats row-major where
// row-major straddles hosts (modeled clock); the order lands in
// meshes.device_ids and devices.coords of a real run; the report says what
// each axis rides; mistakes are refused before anything is recorded
// (e2e_mesh_map_test).
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/shell.h"

namespace shardscope::e2e {
namespace {

const std::string kCli = SHARDSCOPE_CLI_BINARY;

std::vector<int> Coords(const std::string& text) {  // "[1,2,3]"
  std::vector<int> out;
  for (absl::string_view p : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    int v = 0;
    EXPECT_TRUE(absl::SimpleAtoi(p, &v)) << text;
    out.push_back(v);
  }
  return out;
}

// The modeled step's median that `run --simulate` prints.
double ModeledStepMs(const std::string& text) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(R"(modeled step \(\S+\) median ([0-9.]+) ms)"))) << text;
  return m.size() > 1 ? std::stod(m[1]) : 0;
}

TEST(MeshMap, ModelOnOneTorusDimensionRidesOnlyItsRing) {
  const std::string db = TempDb("meshmap_tp");
  Output o = Shell(absl::StrCat(kCli, " run llama --simulate --topology 4x4x4 --mesh 16x4 --sharding tp",
                                " --mesh-map model=x --profile tpu-v4 --steps 2 --db ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("mesh axes on 4x4x4 (explicit): data: y,z (ici, 16 chips, 4x4 sub-torus, ring with "
                        "wraparound); model: x (ici, 4 chips, ring with wraparound)"),
            std::string::npos)
      << o.text;
  std::map<int, std::vector<int>> coords;
  store::QueryResult d = Q(db, "SELECT device_id, topology_coords FROM devices");
  for (size_t i = 0; i < d.rows.size(); ++i) coords[d.Int(i, "device_id")] = Coords(d.Text(i, "topology_coords"));
  ASSERT_EQ(coords.size(), 64u);
  // Each collective of step 1: its chips (one flow per group) and the links its traffic crossed.
  store::QueryResult parts = Q(db,
      "SELECT slice_id, flow_id, device_id FROM events WHERE clock = 'modeled' AND step = 1"
      " AND kind = 'collective' AND depth = 0 AND flow_id IS NOT NULL");
  std::map<int64_t, int64_t> flow_of;  // a collective's slice -> its flow (one per group)
  std::map<int64_t, std::vector<int>> chips_of;
  for (size_t i = 0; i < parts.rows.size(); ++i) {
    flow_of[parts.Int(i, "slice_id")] = parts.Int(i, "flow_id");
    chips_of[parts.Int(i, "flow_id")].push_back(static_cast<int>(parts.Int(i, "device_id")));
  }
  store::QueryResult links = Q(db,
      "SELECT parent_id, name FROM events WHERE clock = 'modeled' AND step = 1 AND depth = 1"
      " AND kind = 'transfer'");
  std::map<int64_t, std::set<std::string>> links_of;
  for (size_t i = 0; i < links.rows.size(); ++i)
    if (auto f = flow_of.find(links.Int(i, "parent_id")); f != flow_of.end())
      links_of[f->second].insert(links.Text(i, "name"));
  int model_collectives = 0, data_collectives = 0;
  for (const auto& [flow, chips] : chips_of) {
    const std::string where = absl::StrJoin(chips, ",");
    std::set<int> xs, ys, zs;
    for (int c : chips) {
      xs.insert(coords[c][0]);
      ys.insert(coords[c][1]);
      zs.insert(coords[c][2]);
    }
    const bool model = chips.size() == 4 && xs.size() == 4 && ys.size() == 1 && zs.size() == 1;
    const bool data = chips.size() == 16 && xs.size() == 1;
    EXPECT_TRUE(model || data) << "a collective over chips " << where;
    model_collectives += model;
    data_collectives += data;
    // Its traffic: links along x only (model), never along x (data).
    const auto& used = links_of[flow];
    if (model) EXPECT_FALSE(used.empty());
    for (const std::string& name : used) {
      int a = 0, b = 0;
      ASSERT_EQ(std::sscanf(name.c_str(), "link %d-%d", &a, &b), 2) << name;
      const bool along_x = coords[a][1] == coords[b][1] && coords[a][2] == coords[b][2];
      EXPECT_EQ(along_x, model) << name << " in a collective over " << where;
    }
  }
  EXPECT_GT(model_collectives, 0);
  EXPECT_GT(data_collectives, 0);
  // The order is the mesh's, and the report says what each axis rides.
  store::QueryResult mesh = Q(db, "SELECT device_ids FROM meshes");
  EXPECT_EQ(mesh.Text(0, "device_ids").rfind("0,16,32,48,", 0), 0u) << mesh.Text(0, "device_ids");
  Output report = Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_NE(report.text.find("mesh axes on the topology (explicit): data: y,z (ici, 16 chips"), std::string::npos)
      << report.text;
  Output json = Shell(absl::StrCat(kCli, " report ", db, " --format json"));
  ASSERT_EQ(json.code, 0) << json.text;
  auto j = nlohmann::json::parse(json.text);
  EXPECT_EQ(j["run"]["mesh_map"]["request"], "model=x");
  EXPECT_EQ(j["run"]["mesh_map"]["axes"][1]["rides"], "x (ici, 4 chips, ring with wraparound)");
}

TEST(MeshMap, AutoBeatsRowMajorWhereRowMajorStraddlesHosts) {
  // Data parallel on gpu:4x8 with a second axis of 4: row-major spreads each
  // data group over 4 hosts (2 chips each), so its gradient all-reduce crosses
  // the data-center network; the automatic map keeps it on one host's NVLink.
  double ms[2] = {0, 0};
  const char* maps[2] = {"row-major", "auto"};
  for (int k = 0; k < 2; ++k) {
    const std::string db = TempDb(absl::StrCat("meshmap_gpu_", k));
    Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --topology gpu:4x8 --mesh 8x4 --profile h100 --steps 2",
                                  " --mesh-map ", maps[k], " --db ", db));
    ASSERT_EQ(o.code, 0) << o.text;
    ms[k] = ModeledStepMs(o.text);
    store::QueryResult r = Q(db, "SELECT config_json FROM runs");
    auto cfg = nlohmann::json::parse(r.Text(0, "config_json"));
    EXPECT_EQ(cfg["mesh_map"]["axes"][0]["rides"],
              k == 0 ? "2 chips within a host (nvlink) x 4 hosts (dcn)" : "within a host (nvlink, 8 chips)");
  }
  EXPECT_LT(ms[1], ms[0]) << "auto " << ms[1] << " ms vs row-major " << ms[0] << " ms (modeled)";
}

TEST(MeshMap, AutoRanksTheAxesByTheCompiledStepsCollectives) {
  // llama fsdp_tp on gpu:4x8 (h100): the rule put model within a host, but
  // this llama's fsdp axis moves more bytes (weights gathered, gradients
  // scattered), and model across hosts (--dcn-mesh 1x4) is faster. Auto,
  // ranking the axes by the compiled step's collectives, picks that map.
  const std::string flags = " --simulate --topology gpu:4x8 --mesh 4x8 --sharding fsdp_tp --profile h100 --steps 2";
  std::map<std::string, double> ms;
  std::map<std::string, std::string> ids;
  for (const std::string map : {"--mesh-map auto", "--mesh-map row-major", "--dcn-mesh 1x4"}) {
    const std::string db = TempDb("meshmap_ranked");
    Output o = Shell(absl::StrCat(kCli, " run llama", flags, " ", map, " --db ", db));
    ASSERT_EQ(o.code, 0) << o.text;
    ms[map] = ModeledStepMs(o.text);
    ids[map] = Q(db, "SELECT device_ids FROM meshes").Text(0, "device_ids");
    if (map != "--mesh-map auto") continue;
    EXPECT_NE(o.text.find("ranked by the compiled step's collectives: fsdp "), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("fsdp first"), std::string::npos) << o.text;
    auto cfg = nlohmann::json::parse(Q(db, "SELECT config_json FROM runs").Text(0, "config_json"));
    EXPECT_EQ(cfg["mesh_map"]["chosen"], "fsdp first") << cfg.dump();
    EXPECT_EQ(cfg["mesh_map"]["traffic"][0]["axis"], "fsdp") << cfg.dump();
    EXPECT_EQ(cfg["mesh_map"]["tried"].size(), 3u) << cfg.dump();
    EXPECT_EQ(cfg["mesh_map"]["axes"][0]["rides"], "within a host (nvlink, 4 chips)") << cfg.dump();
    EXPECT_EQ(cfg["mesh_map"]["axes"][1]["rides"], "2 chips within a host (nvlink) x 4 hosts (dcn)") << cfg.dump();
  }
  // What --dcn-mesh 1x4 places (in another order within the axes), as fast,
  // and faster than row-major (the rule's pick here; modeled clock, deterministic).
  EXPECT_NE(ids["--mesh-map auto"], ids["--mesh-map row-major"]);
  EXPECT_EQ(ms["--mesh-map auto"], ms["--dcn-mesh 1x4"]);
  EXPECT_LT(ms["--mesh-map auto"], ms["--mesh-map row-major"])
      << "auto " << ms["--mesh-map auto"] << " ms vs row-major " << ms["--mesh-map row-major"] << " ms (modeled)";
}

TEST(MeshMap, RealRunRecordsTheOrderAndEachChipsMeshCoordinates) {
  const std::string db = TempDb("meshmap_real");
  Output o = Shell(absl::StrCat(kCli, " run mlp --topology gpu:2x4 --mesh 4x2 --dcn-mesh 2x1 --steps 2 --quiet",
                                " --change-step -1 --db ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  store::QueryResult mesh = Q(db, "SELECT device_ids FROM meshes");
  std::vector<std::string> ids = absl::StrSplit(mesh.Text(0, "device_ids"), ',');
  ASSERT_EQ(ids.size(), 8u);
  // Position p of the mesh holds chip ids[p]; its devices row says so.
  for (size_t p = 0; p < ids.size(); ++p) {
    store::QueryResult row = Q(db, absl::StrCat("SELECT coords, host_id FROM devices WHERE device_id = ", ids[p]));
    EXPECT_EQ(row.Text(0, "coords"), absl::StrCat("[", p / 2, ",", p % 2, "]")) << "chip " << ids[p];
  }
  // model (2) within a host: positions 2i and 2i+1 share one.
  for (size_t p = 0; p < ids.size(); p += 2)
    EXPECT_EQ(std::stoi(ids[p]) / 4, std::stoi(ids[p + 1]) / 4) << mesh.Text(0, "device_ids");
  store::QueryResult cfg = Q(db, "SELECT config_json FROM runs");
  EXPECT_EQ(nlohmann::json::parse(cfg.Text(0, "config_json"))["mesh_map"]["axes"][0]["rides"],
            "2 chips within a host (nvlink) x 2 hosts (dcn)");
}

TEST(MeshMap, MistakesAreRefusedBeforeAnythingIsRecorded) {
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--topology 4x4x4 --mesh 8x8 --mesh-map model=x", "axis 'model' has 8 chips but x make 4"},
           {"--topology 4x4x4 --mesh 16x4 --mesh-map model=x,data=xz", "dimension x is named twice"},
           {"--topology 4x4x4 --mesh 16x4 --mesh-map model=q", "axis 'model' names dimension 'q'"},
           {"--topology gpu:4x8 --mesh 4x8 --dcn-mesh 3x1", "axis 'data' spans 3 hosts, which does not divide the 4"},
           {"--topology gpu:4x8 --mesh 4x8 --dcn-mesh 4x2", "the axes span 8 hosts in all"},
           {"--topology 4x4x4 --mesh 16x4 --dcn-mesh 4x1", "is a torus"},
           {"--topology gpu:4x8 --mesh 4x8 --mesh-map model=x", "give --dcn-mesh"},
           {"--mesh 2x2 --mesh-map model=x", "--mesh-map lays the mesh's axes on the chips of a topology"},
           {"--topology gpu:4x8 --mesh 4x8 --dcn-mesh 4x1 --mesh-map row-major", "both place the axes"}}) {
    const std::string db = TempDb("meshmap_refused");
    Output o = Shell(absl::StrCat(kCli, " run mlp --simulate ", flags, " --steps 1 --db ", db));
    if (flags.rfind("--mesh 2x2", 0) == 0)  // a real run: no --simulate (it needs a topology of its own)
      o = Shell(absl::StrCat(kCli, " run mlp ", flags, " --steps 1 --db ", db));
    EXPECT_EQ(o.code, 2) << flags << "\n" << o.text;
    EXPECT_NE(o.text.find(says), std::string::npos) << flags << "\n" << o.text;
    EXPECT_NE(access(db.c_str(), F_OK), 0) << flags << ": nothing is recorded";
  }
}

}  // namespace
}  // namespace shardscope::e2e
