// Simulated pods end to end (`shardscope run --simulate`, docs/simulate.md):
// the run is marked simulated with only the host and modeled clocks, every
// chip's timeline is drawable and queryable from the stored schedules, the
// reports work on it and say so, a failing chip ends it with a hang error, a
// pod of 64 llama chips stays under 1 KB of file per chip-step, and mistakes
// are refused (e2e_simulate_test).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope::e2e {
namespace {

const std::string kCli = SHARDSCOPE_CLI_BINARY;

int64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST(Simulate, MlpOnATorusIsStoredAsSchedulesAndReadAsSlices) {
  const std::string db = TempDb("sim_mlp");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --topology 4x4 --steps 6 --db ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("simulated: 4x4 torus"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("modeled step (cpu) median"), std::string::npos) << o.text;
  store::QueryResult run = Q(db, "SELECT simulated, clock_kinds, num_devices, mesh, config_json FROM runs");
  EXPECT_EQ(run.Int(0, "simulated"), 1);
  EXPECT_EQ(run.Text(0, "clock_kinds"), "host,modeled");
  EXPECT_EQ(run.Int(0, "num_devices"), 16);
  EXPECT_EQ(run.Text(0, "mesh"), "16x1");  // every chip on 'data'
  auto config = nlohmann::json::parse(run.Text(0, "config_json"));
  EXPECT_EQ(config["batch"], 16);  // one example per data-parallel chip
  EXPECT_EQ(config["simulate"], true);
  // Nothing is computed: every step is there, its loss unknown (NULL, not 0).
  store::QueryResult steps = Q(db, "SELECT COUNT(*) AS n, COUNT(loss) AS losses FROM steps");
  EXPECT_EQ(steps.Int(0, "n"), 6);
  EXPECT_EQ(steps.Int(0, "losses"), 0);
  // No device clock at all; a modeled track per chip.
  store::QueryResult tracks = Q(db, "SELECT clock, COUNT(*) AS n FROM tracks WHERE device_id IS NOT NULL GROUP BY clock");
  ASSERT_EQ(tracks.rows.size(), 1u);
  EXPECT_EQ(tracks.Text(0, "clock"), "modeled");
  EXPECT_EQ(tracks.Int(0, "n"), 16);
  // Every chip's slices, per step, through the events view: the same kernels on every chip.
  store::QueryResult per_chip = Q(db,
      "SELECT device_id, COUNT(*) AS n, SUM(kind = 'collective') AS coll FROM events"
      " WHERE clock = 'modeled' AND step = 3 AND depth = 0 GROUP BY device_id");
  ASSERT_EQ(per_chip.rows.size(), 16u);
  EXPECT_GT(per_chip.Int(0, "coll"), 0);
  for (size_t i = 1; i < per_chip.rows.size(); ++i) EXPECT_EQ(per_chip.Int(i, "n"), per_chip.Int(0, "n"));
  // Links carried each collective's traffic.
  store::QueryResult links = Q(db, "SELECT COUNT(DISTINCT name_id) AS n FROM slices WHERE depth = 1 AND kind = 'transfer'");
  EXPECT_EQ(links.Int(0, "n"), 32);  // a 4x4 torus has 32 links
  store::QueryResult none = Q(db, "SELECT COUNT(*) AS n FROM slice_chunks c JOIN tracks t USING (run_id, track_id)"
                                  " WHERE t.clock = 'modeled'");
  EXPECT_EQ(none.Int(0, "n"), 0);  // no slice is stored row by row

  // The reports work on it and say it is simulated, with no device clock.
  Output report = Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_EQ(report.code, 0) << report.text;
  EXPECT_NE(report.text.find("simulated"), std::string::npos) << report.text;
  // Its steps are the modeled clock's; the host's wall time is the simulator's own.
  const int64_t modeled = Q(db, "SELECT end_ns - start_ns AS ns FROM step_bounds WHERE clock = 'modeled' AND step = 3")
                              .Int(0, "ns");
  EXPECT_NE(report.text.find("(modeled clock)   the host's wall time is the simulator's own: median"),
            std::string::npos)
      << report.text;
  auto rj = nlohmann::json::parse(Shell(absl::StrCat(kCli, " report ", db, " --format json")).text, nullptr, false);
  ASSERT_TRUE(rj.is_object());
  EXPECT_EQ(rj["steps"]["host_times_are_simulator"], true);
  EXPECT_EQ(rj["steps"]["modeled_median_ns"].get<int64_t>(), modeled) << "every step alike on a healthy pod";
  Output runs = Shell(absl::StrCat(kCli, " runs ", db));
  EXPECT_EQ(runs.code, 0) << runs.text;
  EXPECT_NE(runs.text.find("simulated"), std::string::npos) << runs.text;
  Output metrics = Shell(absl::StrCat(kCli, " metrics ", db));
  EXPECT_EQ(metrics.code, 0) << metrics.text;
  Output fleet = Shell(absl::StrCat(kCli, " fleet ", db));
  EXPECT_EQ(fleet.code, 0) << fleet.text;
  EXPECT_NE(fleet.text.find("simulated"), std::string::npos) << fleet.text;
  EXPECT_NE(fleet.text.find("modeled clock"), std::string::npos) << fleet.text;
  const std::string json = absl::StrCat(::testing::TempDir(), "/sim_mlp_", getpid(), ".json");
  Output exported = Shell(absl::StrCat(kCli, " export ", db, " --chrome ", json));
  EXPECT_EQ(exported.code, 0) << exported.text;
  EXPECT_GT(FileBytes(json), 10000);
  Output diff = Shell(absl::StrCat(kCli, " diff ", db, " ", db));
  EXPECT_EQ(diff.code, 0) << diff.text;
  EXPECT_NE(diff.text.find("simulated"), std::string::npos) << diff.text;
  // The host row times the simulator: not called faster or slower.
  EXPECT_NE(diff.text.find("not compared: A's host clock times the simulator"), std::string::npos) << diff.text;
}

// What a chip-step costs in the file: the same 64-chip pod for 4 and for 12
// steps; the difference over the 8 extra steps (a run's fixed part -- its
// programs' IR, its devices, tensors and placements -- is the same in both).
// bench/simulate_bench.sh measures the whole file at 4096 chips x 20 steps.
TEST(Simulate, LlamaPodStaysUnderAKilobytePerChipStep) {
  int64_t bytes[2] = {0, 0};
  const int steps[2] = {4, 12};
  for (int k = 0; k < 2; ++k) {
    const std::string db = TempDb(absl::StrCat("sim_llama_", steps[k]));
    Output o = Shell(absl::StrCat(kCli, " run llama --simulate --topology 4x4x4 --quiet --fault jitter:0.05 --steps ",
                                  steps[k], " --db ", db));
    ASSERT_EQ(o.code, 0) << o.text;
    bytes[k] = FileBytes(db);
    if (k == 1) {
      store::QueryResult r = Q(db, "SELECT num_devices, config_json FROM runs");
      EXPECT_EQ(r.Int(0, "num_devices"), 64);
      EXPECT_EQ(nlohmann::json::parse(r.Text(0, "config_json"))["batch"], 64);
      // Jitter: one kernel's 64 chips all differ, reproducibly from the seed.
      store::QueryResult k = Q(db,
          "SELECT COUNT(DISTINCT dur_ns) AS n FROM events WHERE clock = 'modeled' AND step = 2 AND kind = 'compute'"
          " AND op_id = (SELECT op_id FROM events WHERE clock = 'modeled' AND kind = 'compute' AND step = 2"
          " ORDER BY dur_ns DESC LIMIT 1)");
      EXPECT_GT(k.Int(0, "n"), 32);
    }
  }
  const double per_chip_step = static_cast<double>(bytes[1] - bytes[0]) / (64.0 * (steps[1] - steps[0]));
  std::printf("llama, 64 chips: %lld bytes for 4 steps, %lld for 12: %.0f bytes per extra chip-step\n",
              static_cast<long long>(bytes[0]), static_cast<long long>(bytes[1]), per_chip_step);
  EXPECT_LT(per_chip_step, 1024);
}

// What a chip adds to a simulated pod's file whatever its steps: its device
// row, its schedule's differences, and its share of the placements. A
// replicated tensor's placements are one span of chips, not a row per chip,
// and each decision's sharding text (a list of 512 chips in snake order) is
// stored once: the 1024-chip llama of 5 steps had 12.6 MB of them (3.5 KB a
// chip-step), now 0.3 MB.
TEST(Simulate, APodsChipsAddLittleToItsFileWhateverItsSteps) {
  int64_t bytes[2] = {0, 0};
  const char* topology[2] = {"4x4x4", "8x8x8"};
  const int chips[2] = {64, 512};
  std::string big;
  for (int k = 0; k < 2; ++k) {
    const std::string db = TempDb(absl::StrCat("sim_chips_", chips[k]));
    Output o = Shell(absl::StrCat(kCli, " run llama --simulate --topology ", topology[k], " --quiet --steps 2 --db ", db));
    ASSERT_EQ(o.code, 0) << o.text;
    bytes[k] = FileBytes(db);
    big = db;
  }
  const double per_chip = static_cast<double>(bytes[1] - bytes[0]) / (chips[1] - chips[0]);
  std::printf("llama, 2 steps: %lld bytes on 64 chips, %lld on 512: %.0f bytes per extra chip\n",
              static_cast<long long>(bytes[0]), static_cast<long long>(bytes[1]), per_chip);
  EXPECT_LT(per_chip, 2048);
  // Every tensor on every chip through the view, from far fewer spans.
  store::QueryResult p = Q(big,
                           "SELECT (SELECT count(*) FROM shard_placements) AS rows,"
                           " (SELECT count(*) FROM tensors) * 512 AS want,"
                           " (SELECT count(*) FROM shard_placement_spans) AS spans,"
                           " (SELECT count(*) FROM (SELECT DISTINCT tensor_id, device_id FROM shard_placements)) AS pairs");
  EXPECT_EQ(p.Int(0, "rows"), p.Int(0, "want"));
  EXPECT_EQ(p.Int(0, "pairs"), p.Int(0, "want"));
  EXPECT_LT(p.Int(0, "spans") * 10, p.Int(0, "rows"));
  store::QueryResult d = Q(big,
                           "SELECT (SELECT count(*) FROM sharding_decisions WHERE sharding IS NOT NULL) AS decisions,"
                           " (SELECT count(*) FROM sharding_decision_rows) AS rows,"
                           " (SELECT count(*) FROM sharding_texts) AS texts,"
                           " (SELECT max(length(sharding)) FROM sharding_decisions) AS longest");
  EXPECT_EQ(d.Int(0, "decisions"), d.Int(0, "rows"));
  EXPECT_LT(d.Int(0, "texts") * 20, d.Int(0, "rows"));
  EXPECT_GT(d.Int(0, "longest"), 512);  // the snake order's chip list, whole in the view
}

// A GPU cluster's device rows are the run's fixed part, but they grow with
// its hosts (a rail to every other host): each chip's links are listed once
// per kind, so a chip with 127 rail peers keeps its row under a kilobyte
// (an object per link took 11 KB), and the links view still lists each once.
TEST(Simulate, AGpuClustersDeviceRowsStayUnderAKilobyteAChip) {
  const std::string db = TempDb("sim_gpu_rows");
  Output o =
      Shell(absl::StrCat(kCli, " run mlp --simulate --topology gpu:128x4 --steps 2 --quiet --db ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  store::QueryResult r = Q(db, "SELECT COUNT(*) AS n, MAX(length(links)) AS longest FROM devices");
  EXPECT_EQ(r.Int(0, "n"), 512);
  EXPECT_LT(r.Int(0, "longest"), 1024);
  store::QueryResult l = Q(db, "SELECT COUNT(*) AS n, SUM(kind = 'dcn') AS dcn FROM links");
  EXPECT_EQ(l.Int(0, "n"), 128 * 6 + 4 * (128 * 127 / 2));  // NVLink pairs in each host; host pairs per rail
  EXPECT_EQ(l.Int(0, "dcn"), 4 * (128 * 127 / 2));
}

// --sharding auto on a simulated torus of two hosts: its candidates are
// scored as the pod schedules them. A torus's ICI joins its hosts, so a mesh
// axis that crosses them is not DCN: a 2x4 torus had dp's collectives priced
// at DCN speed (8.1 ms modeled against 0.79 ms scheduled) and auto chose the
// slowest layout. Each estimate now meets its run's scheduled step (step 1:
// after the first step's weight transfers, before the last step's eval).
TEST(Simulate, AutoShardingScoresLayoutsAsThePodSchedulesThem) {
  const std::string flags = " --simulate --topology 2x4 --profile tpu-v4 --mesh 4x2 --steps 3 --quiet --db ";
  const std::string au = TempDb("sim_auto"), dp = TempDb("sim_auto_dp");
  Output a = Shell(absl::StrCat(kCli, " run llama --sharding auto", flags, au));
  ASSERT_EQ(a.code, 0) << a.text;
  ASSERT_EQ(Shell(absl::StrCat(kCli, " run llama --sharding dp", flags, dp)).code, 0);
  const auto step1 = [](const std::string& db) {
    return Q(db, "SELECT end_ns - start_ns AS ns FROM step_bounds WHERE clock = 'modeled' AND step = 1").Real(0, "ns");
  };
  store::QueryResult c = Q(au, "SELECT (SELECT modeled_ns FROM auto_sharding_candidates WHERE chosen = 1) AS chosen,"
                               " (SELECT modeled_ns FROM auto_sharding_candidates WHERE strategy = 'dp') AS dp");
  ASSERT_EQ(c.rows.size(), 1u);
  std::printf("auto: estimated %.3f ms, scheduled %.3f ms; dp: estimated %.3f ms, scheduled %.3f ms\n",
              c.Real(0, "chosen") / 1e6, step1(au) / 1e6, c.Real(0, "dp") / 1e6, step1(dp) / 1e6);
  EXPECT_NEAR(c.Real(0, "chosen") / step1(au), 1.0, 0.10);
  EXPECT_NEAR(c.Real(0, "dp") / step1(dp), 1.0, 0.10);
  EXPECT_LE(step1(au), 1.02 * step1(dp)) << "auto's layout schedules slower than dp's";
}

TEST(Simulate, FailingChipEndsTheRunWithAHangError) {
  const std::string db = TempDb("sim_fail");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --topology 4x4 --steps 8 --quiet --fault fail-chip:9@5 --db ",
                                db));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("hang detected at step 5: chip 9 (host 2)"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("collective all_reduce"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("chips 0-8,10-15 wait in it for chip 9"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("(run 1 ended by the hang detector; the steps before it are stored in"), std::string::npos)
      << o.text;
  store::QueryResult st = Q(db, "SELECT status, stored_status, last_step, note FROM run_status");
  EXPECT_EQ(st.Text(0, "status"), "hang detected");
  EXPECT_EQ(st.Text(0, "stored_status"), "hang detected");
  EXPECT_EQ(st.Text(0, "note").rfind("hang detected at step 5: chip 9 (host 2)", 0), 0u) << st.Text(0, "note");
  EXPECT_EQ(st.Int(0, "last_step", -1), 4);
  store::QueryResult sl = Q(db, "SELECT MAX(step) AS s, COUNT(*) AS n FROM slices WHERE kind = 'collective'");
  EXPECT_EQ(sl.Int(0, "s", -1), 4);  // the steps before it are drawable
  EXPECT_GT(sl.Int(0, "n"), 0);
  store::QueryResult hang = Q(db, "SELECT device_id, host_id, json_array_length(waiting) AS n FROM hangs");
  ASSERT_EQ(hang.rows.size(), 1u);
  EXPECT_EQ(hang.Int(0, "device_id"), 9);
  EXPECT_EQ(hang.Int(0, "host_id"), 2);
  EXPECT_EQ(hang.Int(0, "n"), 15);
}

// A llama batch that does not split over its data-parallel chips runs (as
// GSPMD would), with a note: the partitioner gathers where the uneven shards
// meet a reshape, and the step is far slower than at a multiple.
TEST(Simulate, AnUnevenLlamaBatchIsSaidToCostAGather) {
  const std::string even = TempDb("sim_llama_even"), uneven = TempDb("sim_llama_uneven");
  Output a = Shell(
      absl::StrCat(kCli, " run llama --simulate --topology 4x4 --batch 16 --steps 2 --quiet --db ", even));
  Output b = Shell(
      absl::StrCat(kCli, " run llama --simulate --topology 4x4 --batch 17 --steps 2 --quiet --db ", uneven));
  ASSERT_EQ(a.code, 0) << a.text;
  ASSERT_EQ(b.code, 0) << b.text;
  EXPECT_EQ(a.text.find("note: llama's batch"), std::string::npos) << a.text;
  EXPECT_NE(b.text.find("note: llama's batch (17) does not split evenly over its 16 data-parallel chips"),
            std::string::npos)
      << b.text;
  const char* gathers = "SELECT COUNT(*) AS n FROM ops WHERE opcode = 'stablehlo.all_gather'";
  EXPECT_EQ(Q(even, gathers).Int(0, "n"), 0);
  EXPECT_GT(Q(uneven, gathers).Int(0, "n"), 0);
}

TEST(Simulate, KilledRunKeepsTheStepsItLaidOut) {
  // A simulated run stores its schedule step by step: killed (SIGKILL, no
  // chance to write anything at the end), it keeps every whole step before.
  const std::string db = TempDb("sim_killed");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl(kCli.c_str(), kCli.c_str(), "run", "mlp", "--simulate", "--topology", "4x4", "--steps", "100000",
          "--quiet", "--db", db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int64_t stored = 0;
  for (int k = 0; k < 600 && stored < 4; ++k) {  // up to 60 s for four steps' schedules to land
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto r = store::Reader::Open(db);  // not an error while the run is still making the file
    if (!r.ok()) continue;
    auto q = r->Query("SELECT COUNT(DISTINCT step) AS n FROM sim_runs");
    if (q.ok()) stored = q->Int(0, "n");
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_GE(stored, 4);
  Output runs = Shell(absl::StrCat(kCli, " runs ", db));  // the CLI looks the writer's process up
  EXPECT_NE(runs.text.find("ended abnormally"), std::string::npos) << runs.text;
  // Every stored step is whole: all 16 chips ran it, and its bounds cover its slices.
  store::QueryResult steps = Q(db,
      "SELECT step, COUNT(DISTINCT s.track_id) AS chips, MIN(s.start_ns) AS t0, MAX(s.start_ns + s.dur_ns) AS t1,"
      " (SELECT start_ns FROM step_bounds b WHERE b.step = s.step AND clock = 'modeled') AS b0,"
      " (SELECT end_ns FROM step_bounds b WHERE b.step = s.step AND clock = 'modeled') AS b1"
      " FROM slices s JOIN tracks USING (run_id, track_id) WHERE clock = 'modeled' GROUP BY step ORDER BY step");
  ASSERT_GE(steps.rows.size(), 4u);
  for (size_t r = 0; r < steps.rows.size(); ++r) {
    EXPECT_EQ(steps.Int(r, "step"), static_cast<int64_t>(r));
    EXPECT_EQ(steps.Int(r, "chips"), 16) << "step " << r;
    EXPECT_LE(steps.Int(r, "b0"), steps.Int(r, "t0")) << "step " << r;
    EXPECT_GE(steps.Int(r, "b1"), steps.Int(r, "t1")) << "step " << r;
  }
  // The reports read it as any other simulated run.
  Output fleet = Shell(absl::StrCat(kCli, " fleet ", db));
  EXPECT_EQ(fleet.code, 0) << fleet.text;
  EXPECT_NE(fleet.text.find("no chip stands out"), std::string::npos) << fleet.text;
  Output report = Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_EQ(report.code, 0) << report.text;
  EXPECT_NE(report.text.find("ended abnormally"), std::string::npos) << report.text;
}

TEST(Simulate, MistakesAreRefused) {
  struct Bad {
    std::string flags, says;
  };
  const std::vector<Bad> bad = {
      {"--simulate --steps 2", "--simulate needs --topology T"},
      {"--simulate --topology 4x4 --mesh 8x1", "--topology 4x4 has 16 chips but --mesh 8x1 has 8"},
      {"--simulate --topology 4x4 --trace off", "--trace does not apply with --simulate"},
      {"--simulate --topology 4x4 --save w.safetensors", "--save does not apply with --simulate"},
      {"--simulate --topology 4x4 --fault slow-chip:16:0.5", "chip 16 does not exist"},
      {"--topology 16x16x16 --mesh 8x1", "larger pods: --simulate"},
      {"--mesh 64x2", "more: --simulate"},
  };
  for (const Bad& b : bad) {
    const std::string db = TempDb("sim_bad");
    Output o = Shell(absl::StrCat(kCli, " run mlp --db ", db, " ", b.flags));
    EXPECT_EQ(o.code, 2) << b.flags << "\n" << o.text;
    EXPECT_NE(o.text.find(b.says), std::string::npos) << b.flags << "\n" << o.text;
    EXPECT_NE(access(db.c_str(), F_OK), 0) << b.flags << ": nothing is recorded";
  }
}

}  // namespace
}  // namespace shardscope::e2e
