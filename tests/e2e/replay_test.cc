// `shardscope replay`: a stored run's programs parsed again from their IR,
// recompiled (fingerprints computed again and equal to the stored ones) and
// executed on the stored mesh as a new run of the same file, linked to the
// run it replays; imported runs and damaged IR are refused with a reason.
#include <sqlite3.h>

#include <regex>
#include <string>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

std::string Cli(const std::string& args) { return absl::StrCat(SHARDSCOPE_CLI_BINARY, " ", args); }

// The modeled median steps of runs a (returned) and b (*b_ns), from `shardscope diff --clock modeled`.
double ModeledStepNs(const std::string& db, int a, int b, double* b_ns) {
  e2e::Output o = e2e::Shell(Cli(absl::StrCat("diff ", db, " --runs ", a, ",", b, " --clock modeled --format json")));
  EXPECT_EQ(o.code, 0) << o.text;
  const auto j = nlohmann::json::parse(o.text, nullptr, false);
  EXPECT_TRUE(j.is_object()) << o.text;
  if (!j.is_object()) return 0;
  for (const auto& s : j["steps"])
    if (s["clock"] == "modeled") {
      *b_ns = s["b"]["median_ns"].get<double>();
      return s["a"]["median_ns"].get<double>();
    }
  ADD_FAILURE() << "no modeled steps in " << o.text;
  return 0;
}

// The graphs of run `b` that have run `a`'s fingerprint and op count, and run a's graphs.
std::pair<int64_t, int64_t> SameGraphs(const std::string& db, int a, int b, bool fingerprints) {
  const std::string join = fingerprints ? "a.fingerprint = b.fingerprint AND a.op_count = b.op_count"
                                        : "a.op_count = b.op_count AND a.call_site = b.call_site";
  auto same = e2e::Q(db, absl::StrCat("SELECT count(DISTINCT a.graph_id) AS n FROM graphs a JOIN graphs b ON ", join,
                                      " WHERE a.run_id = ", a, " AND b.run_id = ", b));
  auto all = e2e::Q(db, absl::StrCat("SELECT count(*) AS n FROM graphs WHERE run_id = ", a));
  return {same.Int(0, "n"), all.Int(0, "n")};
}

int64_t Executions(const std::string& db, int run) {
  return e2e::Q(db, absl::StrCat("SELECT count(*) AS n FROM executions WHERE run_id = ", run)).Int(0, "n");
}

TEST(ReplayE2e, RecompilesTheStoredProgramsAndRunsThemAgain) {
  const std::string db = e2e::TempDb("replay_mlp");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 4 --mesh 2x2 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "every fingerprint and op count equals the stored one")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "shardscope diff")) << o.text;
  // The new run says which run it replays.
  auto cfg = e2e::Q(db, "SELECT config_json FROM runs WHERE run_id = 2");
  ASSERT_EQ(cfg.rows.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(cfg.Text(0, "config_json"))["replay_of"], 1);
  // Its programs were compiled anew: the same fingerprints and op counts, computed, not copied.
  auto [same, stored] = SameGraphs(db, 1, 2, /*fingerprints=*/true);
  EXPECT_GT(stored, 0);
  EXPECT_EQ(same, stored);
  auto misses = e2e::Q(db, "SELECT count(*) AS n FROM compilations WHERE run_id = 2 AND cache = 'miss'");
  EXPECT_EQ(misses.Int(0, "n"), stored);
  // Every stored execution ran again, with its own device timeline.
  EXPECT_EQ(Executions(db, 1), Executions(db, 2));
  auto kernels = e2e::Q(db, "SELECT count(*) AS n FROM slices s JOIN tracks t ON t.run_id = s.run_id AND"
                            " t.track_id = s.track_id WHERE s.run_id = 2 AND t.clock = 'device' AND s.op_id IS NOT NULL");
  EXPECT_GT(kernels.Int(0, "n"), 0);
  // Replaying a replay works the same way (its IR is the same program).
  e2e::Output again = e2e::Shell(Cli("replay " + db + " --run 2 --quiet"));
  EXPECT_EQ(again.code, 0) << again.text;
}

// A run that recompiled every step: the replay compiles each program once
// and runs them back to back, so it is faster; it says why (the stored run's
// host time is not replayed), not that the build got faster.
TEST(ReplayE2e, TheStoredRunsHostTimeIsSaidNotToBeReplayed) {
  const std::string db = e2e::TempDb("replay_storm");
  ASSERT_EQ(e2e::Shell(Cli("run recompile_storm --steps 5 --mesh 2x1 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "note: run 1's host time is not replayed")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "and it recompiled") || absl::StrContains(o.text, ": it recompiled"))
      << o.text;
}

TEST(ReplayE2e, OnAnotherChipTheModeledClockAnswers) {
  const std::string db = e2e::TempDb("replay_h100");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --mesh 2x2 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db + " --profile h100"));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(e2e::Q(db, "SELECT profile FROM runs WHERE run_id = 2").Text(0, "profile"), "h100");
  // An h100 is modeled far faster than this machine's cores.
  EXPECT_TRUE(absl::StrContains(o.text, "B is faster: modeled step")) << o.text;
  e2e::Output bad = e2e::Shell(Cli("replay " + db + " --profile z80"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.text, "unknown chip profile 'z80'")) << bad.text;
}

TEST(ReplayE2e, ReSimulatedOnAnotherChipAndAnotherTopology) {
  const std::string db = e2e::TempDb("replay_modeled");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --mesh 2x2 --quiet --db " + db)).code, 0);

  // On an h100 cluster: simulated, nothing executed, the same programs.
  e2e::Output h100 = e2e::Shell(Cli("replay " + db + " --modeled --profile h100"));
  ASSERT_EQ(h100.code, 0) << h100.text;
  for (const char* said : {"re-simulated as run 2", "topology gpu:1x4", "the stored run named no topology",
                           "every fingerprint and op count equals the stored one", "not comparable across chips",
                           "B is faster: modeled step"})
    EXPECT_TRUE(absl::StrContains(h100.text, said)) << said << "\n" << h100.text;
  EXPECT_TRUE(absl::StrContains(e2e::Shell(Cli("runs " + db)).text, "simulated, replay of 1")) << "runs";
  auto run2 = e2e::Q(db, "SELECT simulated, profile, mesh, num_devices, config_json FROM runs WHERE run_id = 2");
  ASSERT_EQ(run2.rows.size(), 1u);
  EXPECT_EQ(run2.Int(0, "simulated"), 1);
  EXPECT_EQ(run2.Text(0, "profile"), "h100");
  EXPECT_EQ(run2.Text(0, "mesh"), "2x2");
  const auto cfg = nlohmann::json::parse(run2.Text(0, "config_json"));
  EXPECT_EQ(cfg["replay_of"], 1);
  EXPECT_EQ(cfg["replay"]["mode"], "modeled");
  EXPECT_EQ(cfg["replay"]["topology"], "gpu:1x4");
  auto [same, stored] = SameGraphs(db, 1, 2, /*fingerprints=*/true);
  EXPECT_GT(stored, 0);
  EXPECT_EQ(same, stored);
  EXPECT_EQ(Executions(db, 1), Executions(db, 2));
  // Nothing ran on a device clock; the modeled one has every chip.
  auto tracks = e2e::Q(db, "SELECT sum(clock = 'device') AS device, count(DISTINCT device_id) AS chips FROM tracks"
                           " WHERE run_id = 2 AND device_id IS NOT NULL");
  EXPECT_EQ(tracks.Int(0, "device"), 0);
  EXPECT_EQ(tracks.Int(0, "chips"), 4);

  // The same stored run re-simulated on its own profile (cpu): the h100's
  // modeled step is shorter, as its FLOP/s and bandwidth are far higher.
  ASSERT_EQ(e2e::Shell(Cli("replay " + db + " --run 1 --modeled --quiet")).code, 0);
  double h100_ns = 0;
  const double cpu_ns = ModeledStepNs(db, 3, 2, &h100_ns);
  EXPECT_GT(cpu_ns, 0);
  EXPECT_LT(h100_ns, cpu_ns / 2) << "h100 " << h100_ns << " ns, cpu " << cpu_ns << " ns";

  // On a 32-chip GPU cluster: the mesh's data axis takes the chips (16x2), every program re-partitioned.
  e2e::Output pod = e2e::Shell(Cli("replay " + db + " --run 1 --profile h100 --topology gpu:4x8"));
  ASSERT_EQ(pod.code, 0) << pod.text;
  EXPECT_TRUE(absl::StrContains(pod.text, "2x2 -> 16x2")) << pod.text;
  EXPECT_TRUE(absl::StrContains(pod.text, "fingerprints differ: the shardings are the new mesh's")) << pod.text;
  auto run4 = e2e::Q(db, "SELECT simulated, mesh, num_devices, num_hosts, config_json FROM runs WHERE run_id = 4");
  EXPECT_EQ(run4.Text(0, "mesh"), "16x2");
  EXPECT_EQ(run4.Int(0, "num_devices"), 32);
  EXPECT_EQ(run4.Int(0, "num_hosts"), 4);
  EXPECT_EQ(nlohmann::json::parse(run4.Text(0, "config_json"))["replay"]["repartitioned"], true);
  std::tie(same, stored) = SameGraphs(db, 1, 4, /*fingerprints=*/false);
  EXPECT_EQ(same, stored);  // op counts equal, call site by call site
  // The batch of 64 is split 16 ways: the input x's shard holds 4 rows on every chip.
  auto x = e2e::Q(db, "SELECT count(DISTINCT device_id) AS chips, max(bytes) AS bytes FROM shard_placements"
                      " WHERE run_id = 4 AND tensor_name = 'x'");
  EXPECT_EQ(x.Int(0, "chips"), 32);
  EXPECT_EQ(x.Int(0, "bytes"), 4 * 784 * 4);
  // x's new layout, in the diff: over the chips in the order the mesh map (auto) chose.
  const std::string order =
      e2e::Q(db, "SELECT device_ids FROM meshes WHERE run_id = 4").Text(0, "device_ids").substr(0, 12);
  EXPECT_TRUE(absl::StrContains(pod.text, "{devices=[16,1,2]" + order)) << order << "\n" << pod.text;
  EXPECT_TRUE(absl::StrContains(pod.text, "mesh axes on gpu:4x8 (auto): data: 8 chips within a host")) << pod.text;
}

// The replay injects no fault: a stored run's faults are named, on the replay's
// output and on the comparison's line for that run, as what the difference holds.
TEST(ReplayE2e, AStoredRunsFaultsAreNamedAsPartOfTheDifference) {
  const std::string db = e2e::TempDb("replay_faulted");
  ASSERT_EQ(e2e::Shell(
                Cli("run mlp --simulate --topology 4x4 --steps 3 --fault slow-chip:5:0.6 --quiet --db " + db))
                .code,
            0);
  e2e::Output o = e2e::Shell(Cli("replay " + db + " --run 1"));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text,
                                "note: run 1 was recorded with faults injected (slow-chip:5:0.6); run 2 "
                                "replays it without them, so the difference below includes them"))
      << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "simulated, faults injected (runs.config_json))")) << o.text;
  e2e::Output clean = e2e::Shell(Cli("replay " + db + " --run 2"));
  ASSERT_EQ(clean.code, 0) << clean.text;
  EXPECT_FALSE(absl::StrContains(clean.text, "faults injected")) << clean.text;
  // A recorded run's faults are on its device clock: re-simulated elsewhere,
  // the modeled clock compared has none of them (it said the difference held them).
  const std::string real = e2e::TempDb("replay_faulted_real");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --mesh 2x2 --steps 3 --fault slow-chip:1:0.5 --quiet --db " + real)).code, 0);
  e2e::Output elsewhere = e2e::Shell(Cli("replay " + real + " --modeled --profile h100 --topology gpu:1x4"));
  ASSERT_EQ(elsewhere.code, 0) << elsewhere.text;
  EXPECT_TRUE(absl::StrContains(elsewhere.text, "(slow-chip:1:0.5) on its device clock; the modeled clock compared "
                                                "below has none of them, on either side"))
      << elsewhere.text;
}

// An unchanged simulated run re-simulated is the same run on the modeled
// clock: each step's inputs move as they moved (tokens every step, an eval
// program's weights shared with training), not every program's up front.
TEST(ReplayE2e, AnUnchangedSimulatedRunReplaysToTheSameSteps) {
  const std::string db = e2e::TempDb("replay_same_sim");
  ASSERT_EQ(e2e::Shell(Cli("run llama --simulate --topology 2x2 --steps 3 --eval-every 2 --quiet --db " + db)).code, 0);
  e2e::Output o = e2e::Shell(Cli("replay " + db + " --modeled --quiet"));
  ASSERT_EQ(o.code, 0) << o.text;
  e2e::Output j = e2e::Shell(Cli("diff " + db + " --runs 1,2 --clock modeled --format json"));
  ASSERT_EQ(j.code, 0) << j.text;
  const auto d = nlohmann::json::parse(j.text, nullptr, false);
  ASSERT_TRUE(d.is_object()) << j.text;
  for (const char* c : {"slower", "faster", "added", "removed"}) EXPECT_EQ(d["counts"][c], 0) << c << ": " << j.text.substr(0, 2000);
  for (const auto& s : d["steps"])
    if (s["clock"] == "modeled") EXPECT_EQ(s["delta"]["change"], "unchanged") << s.dump();
  // The transfers of every step, as stored.
  const std::string transfers =
      "SELECT step, count(*) AS n FROM events WHERE run_id = RUN AND kind = 'transfer' AND depth = 0 AND device_id = 0"
      " GROUP BY step ORDER BY step";
  auto per_step = [&](int run) {
    std::string sql = transfers;
    sql.replace(sql.find("RUN"), 3, std::to_string(run));
    auto q = e2e::Q(db, sql);
    std::string out;
    for (size_t i = 0; i < q.rows.size(); ++i) absl::StrAppend(&out, q.Int(i, "step"), ":", q.Int(i, "n"), " ");
    return out;
  };
  EXPECT_EQ(per_step(2), per_step(1));
}

// A hung run's last step started and never completed: the replay stops where
// the stored run's steps stop, and says so, rather than running past the hang.
TEST(ReplayE2e, AHungRunIsReplayedUpToItsLastCompleteStep) {
  const std::string db = e2e::TempDb("replay_hung");
  e2e::Output run = e2e::Shell(Cli("run mlp --mesh 2x4 --steps 6 --fault fail-chip:2@3 --quiet --db " + db));
  ASSERT_NE(run.code, 0) << run.text;
  ASSERT_GT(e2e::Q(db, "SELECT count(*) AS n FROM executions WHERE run_id = 1 AND step = 3").Int(0, "n"), 0)
      << "the hung step's execution should be stored";
  e2e::Output o = e2e::Shell(Cli("replay " + db + " --run 1"));
  ASSERT_EQ(o.code, 0) << o.text;
  // Dispatch runs ahead of the chips: the hung step, and maybe the next, were queued.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.text, m,
                                std::regex("note: run 1 was ended by the hang detector in step 3, which never completed "
                                           "there \\(([0-9]+) executions? left out\\): the replay stops after step 2")))
      << o.text;
  const int64_t left_out = std::stoll(m[1].str());
  EXPECT_GE(left_out, 1);
  EXPECT_EQ(e2e::Q(db, "SELECT max(step) AS s FROM steps WHERE run_id = 2").Int(0, "s"), 2);
  EXPECT_EQ(Executions(db, 2), Executions(db, 1) - left_out);
  EXPECT_EQ(Executions(db, 2), e2e::Q(db, "SELECT count(*) AS n FROM executions WHERE run_id = 1 AND step <= 2").Int(0, "n"));
  // A finished run is replayed whole, with no such note.
  e2e::Output whole = e2e::Shell(Cli("replay " + db + " --run 2"));
  ASSERT_EQ(whole.code, 0) << whole.text;
  EXPECT_FALSE(absl::StrContains(whole.text, "never completed")) << whole.text;
  EXPECT_EQ(Executions(db, 3), Executions(db, 2));
}

TEST(ReplayE2e, TheMeshIsMappedOntoTheNewTopologyAsRunMapsIt) {
  // A llama fsdp_tp recorded in chip order (row-major) on gpu:4x8, replayed
  // there: auto ranks the axes by the re-partitioned programs' collectives,
  // as `run` does, says which map it used, and lays every program on it.
  const std::string db = e2e::TempDb("replay_mesh_map");
  const std::string flags = " --simulate --topology gpu:4x8 --mesh 4x8 --sharding fsdp_tp --profile h100 --steps 2";
  ASSERT_EQ(e2e::Shell(Cli("run llama" + flags + " --mesh-map row-major --quiet --db " + db)).code, 0);
  e2e::Output a = e2e::Shell(Cli("replay " + db + " --run 1 --topology gpu:4x8"));
  ASSERT_EQ(a.code, 0) << a.text;
  for (const char* said : {"mesh axes on gpu:4x8 (auto): fsdp: within a host (nvlink, 4 chips); model: 2 chips within a host "
                           "(nvlink) x 4 hosts (dcn)",
                           "ranked by the stored run's collectives",
                           "fingerprints differ: the shardings are the new mesh's"})
    EXPECT_TRUE(absl::StrContains(a.text, said)) << said << "\n" << a.text;
  EXPECT_TRUE(std::regex_search(a.text, std::regex(R"(fsdp first [0-9.]+ ms \(chosen\))"))) << a.text;
  // Run 3: `run` itself, auto: the same order as the replay's.
  ASSERT_EQ(e2e::Shell(Cli("run llama" + flags + " --quiet --db " + db)).code, 0);
  auto order = [&](int run) {
    return e2e::Q(db, absl::StrCat("SELECT device_ids FROM meshes WHERE run_id = ", run)).Text(0, "device_ids");
  };
  EXPECT_EQ(order(2), order(3));
  EXPECT_NE(order(2), order(1));
  auto cfg = nlohmann::json::parse(e2e::Q(db, "SELECT config_json FROM runs WHERE run_id = 2").Text(0, "config_json"));
  EXPECT_EQ(cfg["mesh_map"]["mode"], "auto");
  EXPECT_EQ(cfg["mesh_map"]["chosen"], "fsdp first");
  EXPECT_EQ(cfg["replay"]["repartitioned"], true);
  // Asked for row-major: the stored order, every program as stored.
  e2e::Output rm = e2e::Shell(Cli("replay " + db + " --run 1 --topology gpu:4x8 --mesh-map row-major"));
  ASSERT_EQ(rm.code, 0) << rm.text;
  EXPECT_TRUE(absl::StrContains(rm.text, "mesh axes on gpu:4x8 (row-major): fsdp: ")) << rm.text;
  EXPECT_TRUE(absl::StrContains(rm.text, "every fingerprint and op count equals the stored one")) << rm.text;
  EXPECT_EQ(order(4), order(1));
  // Auto's modeled step is the shorter (deterministic: the modeled clock).
  double row_major_ns = 0;
  const double auto_ns = ModeledStepNs(db, 2, 4, &row_major_ns);
  EXPECT_GT(auto_ns, 0);
  EXPECT_LT(auto_ns, row_major_ns);
  // Refused before anything is written: a map the topology cannot take, a map without a topology.
  const int64_t runs = e2e::Q(db, "SELECT count(*) AS n FROM runs").Int(0, "n");
  e2e::Output bad = e2e::Shell(Cli("replay " + db + " --run 1 --topology gpu:4x8 --mesh-map model=x"));
  EXPECT_EQ(bad.code, 2) << bad.text;
  EXPECT_TRUE(absl::StrContains(bad.text, "give --dcn-mesh")) << bad.text;
  const std::string real = e2e::TempDb("replay_mesh_map_real");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 2 --mesh 2x2 --quiet --db " + real)).code, 0);
  e2e::Output no_topology = e2e::Shell(Cli("replay " + real + " --mesh-map auto"));
  EXPECT_EQ(no_topology.code, 2) << no_topology.text;
  EXPECT_TRUE(absl::StrContains(no_topology.text, "give --topology")) << no_topology.text;
  EXPECT_EQ(e2e::Q(db, "SELECT count(*) AS n FROM runs").Int(0, "n"), runs);
}

TEST(ReplayE2e, BadProfilesAndTopologiesAreUsageErrors) {
  const std::string db = e2e::TempDb("replay_bad_target");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 2 --mesh 2x2 --quiet --db " + db)).code, 0);
  struct Case {
    std::string args, said;
  } cases[] = {
      {"--modeled --profile z80", "unknown chip profile 'z80'"},
      {"--topology 4x0", "--topology '4x0'"},
      {"--topology gpu:banana", "--topology 'gpu:banana'"},
      {"--topology", "--topology needs a topology"},
      // 9 chips: the model axis keeps 2, which does not divide them.
      {"--topology 3x3", "keeps 2 chips on its other axes, which do not divide them"},
      // 64 tiles of a 64-row batch are fine; 128 chips on data would leave chips with nothing.
      {"--topology gpu:32x8", "cannot be re-partitioned for a 128x2 mesh"},
  };
  for (const Case& c : cases) {
    e2e::Output o = e2e::Shell(Cli("replay " + db + " " + c.args));
    EXPECT_EQ(o.code, 2) << c.args << "\n" << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, c.said)) << c.args << "\n" << o.text;
  }
  // Nothing was written by a refused replay.
  EXPECT_EQ(e2e::Q(db, "SELECT count(*) AS n FROM runs").Int(0, "n"), 1);
}

TEST(ReplayE2e, ImportedRunsAndBadArgumentsAreRefusedWithAReason) {
  const std::string db = e2e::TempDb("replay_import");
  ASSERT_EQ(e2e::Shell(Cli(absl::StrCat("import ", SHARDSCOPE_TEST_DATA, "/import/gpu_rank0.json --quiet --db ", db)))
                .code,
            0);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "imported from another tool's trace")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "cannot be replayed")) << o.text;
  // Re-simulating needs programs just as much.
  e2e::Output modeled = e2e::Shell(Cli("replay " + db + " --modeled --profile h100"));
  EXPECT_EQ(modeled.code, 1) << modeled.text;
  EXPECT_TRUE(absl::StrContains(modeled.text, "cannot be replayed")) << modeled.text;
  e2e::Output none = e2e::Shell(Cli("replay " + db + " --run 9"));
  EXPECT_EQ(none.code, 1);
  EXPECT_TRUE(absl::StrContains(none.text, "has no run 9")) << none.text;
  EXPECT_EQ(e2e::Shell(Cli("replay")).code, 2);
  EXPECT_EQ(e2e::Shell(Cli("replay " + db + " --run x")).code, 2);
}

TEST(ReplayE2e, AStoredProgramThatNoLongerParsesIsNamed) {
  const std::string db = e2e::TempDb("replay_damaged");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 2 --quiet --db " + db)).code, 0);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE graphs SET ir_text = 'func.func @main( garbage' WHERE run_id = 1", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "its stored IR does not parse")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "graph ")) << o.text;
}

// A damaged chunk of the stored run's timeline: its programs (in `graphs`)
// still replay, and the comparison says its ops were not read rather than
// ending in an error after the new run was written (it exited 1 then).
TEST(ReplayE2e, AStoredRunWithADamagedTimelineIsReplayedAndSaysWhatItCouldNotCompare) {
  const std::string db = e2e::TempDb("replay_damaged_chunk");
  ASSERT_EQ(e2e::Shell(Cli("run mlp --steps 3 --quiet --db " + db)).code, 0);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "UPDATE slice_chunks SET slices = 'X' || substr(slices, 2) WHERE chunk_id ="
                         " (SELECT min(chunk_id) FROM slice_chunks WHERE run_id = 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  e2e::Output o = e2e::Shell(Cli("replay " + db));
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "ops not compared: A's timeline is damaged")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "A's timeline could not be read")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "slice_chunks row")) << o.text;
  // diff of the two says the same, in JSON too; the undamaged side is not "removed".
  e2e::Output d = e2e::Shell(Cli("diff " + db + " --runs 1,2 --format json 2>/dev/null"));
  ASSERT_EQ(d.code, 0) << d.text;
  const auto j = nlohmann::json::parse(d.text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << d.text;
  EXPECT_TRUE(absl::StrContains(j["verdict"].get<std::string>(), "ops not compared: A's timeline is damaged"));
  EXPECT_EQ(j["counts"]["added"], 0) << j["counts"].dump();
}

}  // namespace
}  // namespace shardscope
