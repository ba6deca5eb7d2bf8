// A simulated run calibrated from a recorded one (`run --simulate
// --calibrate-from DB`, docs/simulate.md) and the measured `cpu` profile a
// run records (docs/cost_model.md), end to end through the CLI
// (e2e_sim_calibration_test). The assertions are on the mechanism — which op
// took which recorded time, what was counted, what was stored — never on how
// fast the live run was; the errors are printed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cpu_calibration.h"
#include "tests/e2e/shell.h"

namespace shardscope::e2e {
namespace {

const std::string kCli = SHARDSCOPE_CLI_BINARY;
// The mlp on the 8 chips this machine runs, a fixed batch (no recompilation).
const std::string kMlp8 = " run mlp --mesh 8x1 --topology 2x4 --batch 64 --change-step -1 --steps 4 --quiet";

// The recorded run: made once for the suite.
const std::string& RecordedDb() {
  static const std::string db = [] {
    std::string path = TempDb("calib_recorded");
    Output o = Shell(absl::StrCat(kCli, kMlp8, " --db ", path));
    EXPECT_EQ(o.code, 0) << o.text;
    return path;
  }();
  return db;
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

TEST(SimCalibration, EveryKernelTakesItsRecordedMedianAndBothErrorsAreStored) {
  const std::string sim = TempDb("calib_sim");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 4",
                                " --calibrate-from ", RecordedDb(), " --db ", sim));
  ASSERT_EQ(o.code, 0) << o.text;
  std::printf("%s", o.text.c_str());
  EXPECT_NE(o.text.find("calibrated from " + RecordedDb() + " run 1"), std::string::npos) << o.text;
  store::QueryResult c = Q(sim, "SELECT * FROM sim_calibrations");
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.Int(0, "source_run"), 1);
  // The same programs: every kernel and collective matched by (fingerprint, op).
  EXPECT_GT(c.Int(0, "kernels_by_op"), 0);
  EXPECT_EQ(c.Int(0, "kernels_by_signature"), 0);
  EXPECT_EQ(c.Int(0, "kernels_modeled"), 0);
  EXPECT_GT(c.Int(0, "collectives_recorded"), 0);
  EXPECT_EQ(c.Int(0, "collectives_modeled"), 0);
  EXPECT_GT(c.Int(0, "recorded_step_ns"), 0);
  EXPECT_GT(c.Int(0, "calibrated_step_ns"), 0);
  EXPECT_GT(c.Int(0, "uncalibrated_step_ns"), 0);

  // Each kernel of the simulated run lasts exactly its recorded median over
  // every chip and step (the mlp runs each program once a step).
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> samples;
  store::QueryResult rec = Q(RecordedDb(),
      "SELECT g.fingerprint, s.op_id, s.dur_ns FROM slices s JOIN tracks t USING (run_id, track_id)"
      " JOIN graphs g ON g.run_id = s.run_id AND g.graph_id = s.graph_id"
      " WHERE t.clock = 'device' AND s.depth = 0 AND s.kind = 'compute' AND s.op_id IS NOT NULL");
  for (size_t i = 0; i < rec.rows.size(); ++i)
    samples[{rec.Text(i, "fingerprint"), rec.Int(i, "op_id")}].push_back(rec.Int(i, "dur_ns"));
  store::QueryResult got = Q(sim,
      "SELECT g.fingerprint, s.op_id, s.dur_ns FROM slices s JOIN tracks t USING (run_id, track_id)"
      " JOIN graphs g ON g.run_id = s.run_id AND g.graph_id = s.graph_id"
      " WHERE t.device_id = 3 AND s.step = 2 AND s.depth = 0 AND s.kind = 'compute'");
  ASSERT_GT(got.rows.size(), 0u);
  for (size_t i = 0; i < got.rows.size(); ++i) {
    auto it = samples.find({got.Text(i, "fingerprint"), got.Int(i, "op_id")});
    ASSERT_NE(it, samples.end()) << "op " << got.Int(i, "op_id");
    EXPECT_EQ(got.Int(i, "dur_ns"), Median(it->second)) << "op " << got.Int(i, "op_id");
  }

  // The report on the simulated run says it, with both errors.
  Output report = Shell(absl::StrCat(kCli, " report ", sim));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_NE(report.text.find("calibrated from " + RecordedDb() + " run 1: modeled step"), std::string::npos)
      << report.text;
  EXPECT_NE(report.text.find("the cost model alone"), std::string::npos) << report.text;
  Output json = Shell(absl::StrCat(kCli, " report ", sim, " --format json"));
  ASSERT_EQ(json.code, 0) << json.text;
  auto j = nlohmann::json::parse(json.text);
  EXPECT_EQ(j["run"]["calibration"]["kernels_modeled"], 0);
  EXPECT_TRUE(j["run"]["calibration"]["uncalibrated_error"].is_number());
  // The HTML says it too (it said nothing of it).
  Output html = Shell(absl::StrCat(kCli, " report ", sim, " --format html"));
  EXPECT_NE(html.text.find("<b>Calibrated:</b> calibrated from "), std::string::npos);
  // The recorded step is the median of its steps' spans, the mean of the two
  // middle ones for an even count (the lower middle had made its errors too).
  std::vector<int64_t> spans;
  store::QueryResult per_step = Q(RecordedDb(), "SELECT max(span_ns) - min(host_wait_ns) AS ns FROM "
                                                "step_device_summary WHERE run_id = 1 GROUP BY step");
  for (size_t i = 0; i < per_step.rows.size(); ++i) spans.push_back(per_step.Int(i, "ns"));
  ASSERT_EQ(spans.size() % 2, 0u) << "an even count of steps";
  std::sort(spans.begin(), spans.end());
  const int64_t lo = spans[spans.size() / 2 - 1], hi = spans[spans.size() / 2];
  EXPECT_EQ(c.Int(0, "recorded_step_ns"), std::llround((lo + hi) / 2.0));
  // diff names B's calibration: its modeled clock holds A's device times.
  Output d = Shell(absl::StrCat(kCli, " diff ", RecordedDb(), " ", sim));
  EXPECT_NE(d.text.find("B's modeled clock is calibrated: its kernels and collectives take the device times of " +
                        RecordedDb() + " run 1"),
            std::string::npos)
      << d.text;
}

TEST(SimCalibration, ACollectiveCarriesTheWaitForTheSlowestChip) {
  // On the device clock a collective starts when its last chip arrives; the
  // others sit idle before it. Every simulated chip takes each op's median,
  // so they would all arrive together: the collective carries the median
  // chip's idle gap before it (median over steps) on top of its own median.
  const std::string sim = TempDb("calib_wait");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 4",
                                " --calibrate-from ", RecordedDb(), " --db ", sim, " --quiet"));
  ASSERT_EQ(o.code, 0) << o.text;
  store::QueryResult rec = Q(RecordedDb(),
      "SELECT g.fingerprint, s.op_id, s.step, t.device_id, s.start_ns, s.dur_ns, s.kind FROM slices s"
      " JOIN tracks t USING (run_id, track_id) LEFT JOIN graphs g ON g.run_id = s.run_id AND g.graph_id = s.graph_id"
      " WHERE t.clock = 'device' AND s.depth = 0 ORDER BY t.device_id, s.start_ns");
  using Op = std::pair<std::string, int64_t>;
  std::map<Op, std::vector<int64_t>> durs;
  std::map<Op, std::map<int64_t, std::vector<int64_t>>> gaps;  // op -> step -> per chip
  int64_t device = -1, prev_end = 0, prev_step = -2;
  for (size_t i = 0; i < rec.rows.size(); ++i) {
    const int64_t dev = rec.Int(i, "device_id"), start = rec.Int(i, "start_ns"), step = rec.Int(i, "step", -1);
    if (rec.Text(i, "kind") == "collective") {
      const Op op{rec.Text(i, "fingerprint"), rec.Int(i, "op_id")};
      durs[op].push_back(rec.Int(i, "dur_ns"));
      if (dev == device && step == prev_step) gaps[op][step].push_back(std::max<int64_t>(0, start - prev_end));
    }
    device = dev;
    prev_step = step;
    prev_end = start + rec.Int(i, "dur_ns");
  }
  ASSERT_FALSE(gaps.empty());
  int64_t waited = 0;
  store::QueryResult got = Q(sim,
      "SELECT g.fingerprint, s.op_id, s.dur_ns FROM slices s JOIN tracks t USING (run_id, track_id)"
      " JOIN graphs g ON g.run_id = s.run_id AND g.graph_id = s.graph_id"
      " WHERE t.device_id = 5 AND s.step = 1 AND s.depth = 0 AND s.kind = 'collective'");
  ASSERT_GT(got.rows.size(), 0u);
  for (size_t i = 0; i < got.rows.size(); ++i) {
    const Op op{got.Text(i, "fingerprint"), got.Int(i, "op_id")};
    ASSERT_TRUE(durs.count(op)) << "op " << op.second;
    std::vector<int64_t> per_step;
    for (auto& [step, per_chip] : gaps[op]) per_step.push_back(Median(per_chip));
    const int64_t wait = per_step.empty() ? 0 : Median(per_step);
    waited += wait;
    EXPECT_EQ(got.Int(i, "dur_ns"), Median(durs[op]) + wait) << "op " << op.second;
  }
  std::printf("collectives of a step carry %.3f ms of waiting for the slowest chip\n", waited / 1e6);
}

TEST(SimCalibration, HostToDeviceTransfersTakeTheirRecordedMedianByNameAndSize) {
  // The batch's "transfer x" and the scalars, per chip and step on the device
  // clock: a simulated run of the same batch takes each one's median.
  const std::string sim = TempDb("calib_transfer");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 4",
                                " --calibrate-from ", RecordedDb(), " --db ", sim));
  ASSERT_EQ(o.code, 0) << o.text;
  // The mlp's six parameters at the start, then x, y and lr each step.
  EXPECT_NE(o.text.find("host-to-device transfers 9 recorded, 0 from the cost model"), std::string::npos) << o.text;
  const std::string transfers =
      "SELECT n.name, s.bytes, s.dur_ns FROM slices s JOIN tracks t USING (run_id, track_id)"
      " JOIN names n ON n.name_id = s.name_id WHERE s.kind = 'transfer' AND s.depth = 0"
      " AND n.name LIKE 'transfer %'";
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> recorded;
  store::QueryResult rec = Q(RecordedDb(), transfers + " AND t.clock = 'device'");
  for (size_t i = 0; i < rec.rows.size(); ++i)
    recorded[{rec.Text(i, "name"), rec.Int(i, "bytes")}].push_back(rec.Int(i, "dur_ns"));
  store::QueryResult got = Q(sim, transfers + " AND s.step = 2");
  ASSERT_EQ(got.rows.size(), 8u * 3);  // x, y and lr on each of 8 chips
  for (size_t i = 0; i < got.rows.size(); ++i) {
    const std::pair<std::string, int64_t> key{got.Text(i, "name"), got.Int(i, "bytes")};
    ASSERT_TRUE(recorded.count(key)) << key.first << " of " << key.second << " bytes";
    EXPECT_EQ(got.Int(i, "dur_ns"), Median(recorded[key])) << key.first;
  }
  // Another batch: x and y of another size keep the model's time, counted.
  const std::string other = TempDb("calib_transfer32");
  Output o32 = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 32 --steps 2",
                                  " --calibrate-from ", RecordedDb(), " --db ", other));
  ASSERT_EQ(o32.code, 0) << o32.text;
  EXPECT_NE(o32.text.find("host-to-device transfers 7 recorded, 2 from the cost model"), std::string::npos)
      << o32.text;
}

TEST(SimCalibration, AnotherMeshMatchesKernelsBySignatureAndCountsTheRest) {
  // 4 chips with half the batch: the same per-chip kernels in other programs,
  // collectives over groups of 4 instead of 8 (the model prices those).
  const std::string sim = TempDb("calib_sim4");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 4x1 --topology 2x2 --batch 32 --steps 3",
                                " --calibrate-from ", RecordedDb(), " --calibrate-run 1 --db ", sim));
  ASSERT_EQ(o.code, 0) << o.text;
  std::printf("%s", o.text.c_str());
  store::QueryResult c = Q(sim, "SELECT * FROM sim_calibrations");
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.Int(0, "kernels_by_op"), 0);
  EXPECT_GT(c.Int(0, "kernels_by_signature"), 0);
  EXPECT_EQ(c.Int(0, "collectives_recorded"), 0);
  EXPECT_GT(c.Int(0, "collectives_modeled"), 0);
  // Its errors are against another workload's step: said so, beside them.
  EXPECT_NE(o.text.find("note: --calibrate-from " + RecordedDb() +
                        " run 1: it is another workload (8 chips against 4, batch 64 against 32)"),
            std::string::npos)
      << o.text;
  // The same chips laid out another way run other programs: said too (it
  // matched no op and read its error with no note).
  const std::string other = TempDb("calib_sim_4x2");
  Output m = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 4x2 --topology 2x4 --batch 64 --steps 2 --quiet",
                                " --calibrate-from ", RecordedDb(), " --db ", other));
  ASSERT_EQ(m.code, 0) << m.text;
  EXPECT_NE(m.text.find("it is another workload (mesh 8x1 against 4x2)"), std::string::npos) << m.text;
}

// A source run with faults injected hands them to the calibration: said so.
// The same workload unfaulted gets no note.
TEST(SimCalibration, AFaultedSourceRunIsNamedWithItsFaults) {
  const std::string faulted = TempDb("calib_faulted");
  ASSERT_EQ(Shell(absl::StrCat(kCli, kMlp8, " --fault link:0-4:0.25 --db ", faulted)).code, 0);
  const std::string sim = TempDb("calib_from_faulted");
  const std::string flags = " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 2 --quiet";
  Output o = Shell(absl::StrCat(kCli, flags, " --calibrate-from ", faulted, " --db ", sim));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("it was recorded with faults injected (link:0-4:0.25): its device times carry them"),
            std::string::npos)
      << o.text;
  // A source the hang detector ended: its steps stop short, said with how it ended.
  const std::string hung = TempDb("calib_hung_source");
  ASSERT_EQ(Shell(absl::StrCat(kCli, kMlp8, " --fault fail-chip:3@2 --db ", hung)).code, 1);
  Output h = Shell(absl::StrCat(kCli, flags, " --calibrate-from ", hung, " --db ", TempDb("calib_from_hung_source")));
  ASSERT_EQ(h.code, 0) << h.text;
  EXPECT_NE(h.text.find("it did not finish (ended by the hang detector"), std::string::npos) << h.text;
  EXPECT_NE(h.text.find("steps are all it has to time"), std::string::npos) << h.text;
  const std::string clean = TempDb("calib_from_clean");
  Output c = Shell(absl::StrCat(kCli, flags, " --calibrate-from ", RecordedDb(), " --db ", clean));
  ASSERT_EQ(c.code, 0) << c.text;
  EXPECT_EQ(c.text.find("note: --calibrate-from"), std::string::npos) << c.text;
}

// A source whose batch changed part way (the mlp demo's, at --change-step)
// ran another program from there: its step is timed over the steps before,
// and the note says so. Mixed, the median fell between the two batches.
TEST(SimCalibration, ASourceWhoseBatchChangedIsTimedBeforeTheChange) {
  const std::string changed = TempDb("calib_batch_changed");
  ASSERT_EQ(Shell(absl::StrCat(kCli, " run mlp --mesh 8x1 --topology 2x4 --batch 64 --change-step 3 --steps 6 --quiet",
                               " --db ", changed))
                .code,
            0);
  const std::string sim = TempDb("calib_from_batch_changed");
  Output o = Shell(absl::StrCat(kCli, " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 2 --quiet",
                                " --calibrate-from ", changed, " --db ", sim));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("its inputs changed shape at step 3 (input x f32[64,784] -> f32[48,784]): its step is timed "
                        "over the 3 steps before, at the batch it was recorded with (3 later steps ran another program)"),
            std::string::npos)
      << o.text;
  // The recorded step stored is the median of steps 0-2 alone.
  store::QueryResult steps = Q(changed,
                               "SELECT step, max(span_ns) - min(host_wait_ns) AS s FROM step_device_summary"
                               " GROUP BY step ORDER BY step");
  ASSERT_EQ(steps.rows.size(), 6u);
  std::vector<int64_t> before = {steps.Int(0, "s"), steps.Int(1, "s"), steps.Int(2, "s")};
  std::sort(before.begin(), before.end());
  EXPECT_EQ(Q(sim, "SELECT recorded_step_ns FROM sim_calibrations").Int(0, "recorded_step_ns"), before[1]);
}

TEST(SimCalibration, MistakesAreRefusedBeforeAnythingIsRecorded) {
  const std::string never = TempDb("calib_never");
  auto refused = [&](const std::string& args, const std::string& message) {
    Output o = Shell(absl::StrCat(kCli, " run mlp ", args, " --db ", never));
    EXPECT_EQ(o.code, 2) << args << "\n" << o.text;
    EXPECT_NE(o.text.find(message), std::string::npos) << args << "\n" << o.text;
  };
  refused(absl::StrCat("--calibrate-from ", RecordedDb()), "--calibrate-from applies to a simulated run");
  refused("--simulate --topology 2x2 --calibrate-run 1", "--calibrate-run N names a run of --calibrate-from DB");
  refused("--simulate --topology 2x2 --calibrate-from /nonexistent/rec.db", "/nonexistent/rec.db");
  refused(absl::StrCat("--simulate --topology 2x2 --calibrate-from ", RecordedDb(), " --calibrate-run 9"),
          "has no run 9");
  // A simulated run has no device clock to calibrate from.
  const std::string sim = TempDb("calib_from_sim");
  ASSERT_EQ(Shell(absl::StrCat(kCli, " run mlp --simulate --topology 2x2 --steps 1 --quiet --db ", sim)).code, 0);
  refused(absl::StrCat("--simulate --topology 2x2 --calibrate-from ", sim, " --calibrate-run 1"),
          "run 1 is simulated: it has no device clock");
  // Asked of the file, it says what the file's runs are (an imported trace's
  // run has a device clock too: "none on the device clock" read as damage).
  refused(absl::StrCat("--simulate --topology 2x2 --calibrate-from ", sim),
          "no run of shardscope's recorded on its virtual chips' device clock (the file has 1 simulated run (no "
          "device clock)); record one with: shardscope run SAMPLE --db");
  // Another sample's run: its kernels match almost none, its step is no yardstick.
  Output other = Shell(absl::StrCat(kCli, " run llama --simulate --topology 2x2 --steps 1 --calibrate-from ",
                                    RecordedDb(), " --db ", never));
  EXPECT_EQ(other.code, 2) << other.text;
  EXPECT_NE(other.text.find("run 1 is mlp, not llama: calibrate from a recorded run of the same sample"),
            std::string::npos)
      << other.text;
  // The device clock is this machine's CPU: its times under another
  // profile's name would read as that chip's step.
  refused(absl::StrCat("--simulate --topology 2x4 --mesh 8x1 --profile h100 --calibrate-from ", RecordedDb()),
          "device times were measured on this machine's chips (the cpu profile); a simulated run on --profile h100 "
          "would show them under h100's name");
  // A run that hung before its first step ended has nothing to time: said
  // so, not taken for a run recorded without its kernels.
  const std::string hung = TempDb("calib_from_hung");
  Output h = Shell(absl::StrCat(kCli, " run mlp --mesh 2x4 --topology 2x4 --steps 2 --fault fail-chip:3@0 --quiet",
                                " --db ", hung));
  ASSERT_EQ(h.code, 1) << h.text;
  refused(absl::StrCat("--simulate --topology 2x4 --mesh 2x4 --calibrate-from ", hung),
          "run 1 has no kernel slices on the device clock: it stored no step (ended by the hang detector");
  EXPECT_EQ(::access(never.c_str(), F_OK), -1) << "nothing recorded";
}

// `--calibrate-from` prices the uncalibrated step with the calibration passes
// measured at the recorded run's speed (its probes at start and end), not at
// the machine's speed when the simulation runs; where the run's speed moved
// while it ran, every speed's, said so. A cache entry of two speeds, and a
// recorded run given each speed by hand: no probe or measurement runs.
TEST(CpuProfile, ACalibratedSimulationChoosesThePassesOfTheRecordedRunsSpeed) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/speed_cache_", getpid());
  ASSERT_EQ(setenv("XDG_CACHE_HOME", dir.c_str(), 1), 0);
  const std::string cache = runtime::CpuProfileCachePath();  // what the CLI reads with that home
  ASSERT_EQ(unsetenv("XDG_CACHE_HOME"), 0);  // this process's own lookups stay as they were
  auto probe = [](double f) {
    runtime::SpeedProbe p;
    p.gemm_flops = 100e9 * f;
    p.stream_bytes = 20e9 * f;
    p.exp_ns = 3 / f;
    p.reduce_ns = 0.2 / f;
    return p;
  };
  runtime::CpuCalibration entry;
  entry.machine = runtime::MachineKey();
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (int k = 0; k < 6; ++k) {  // three passes at speed 1 (GEMM 100 GFLOP/s), three at 2 (200)
    runtime::CpuCalibration pass;
    const double f = k < 3 ? 1 : 2;
    pass.peak_flops = 100e9 * f + k * 1e9;
    pass.hbm_bandwidth = 20e9 * f;
    pass.kernel_overhead_ns = 1500;
    pass.probe_before = pass.probe_after = probe(f);
    pass.measured_at_unix_s = now - 600 + k * 60;
    entry.passes.push_back(pass);
  }
  entry.peak_flops = 1e11;
  entry.hbm_bandwidth = 2e10;
  entry.measured_at_unix_s = now - 300;
  ASSERT_TRUE(runtime::WriteCpuProfileFile(cache, entry).ok());

  const std::string recorded = TempDb("speed_recorded");
  ASSERT_EQ(Shell(absl::StrCat(kCli, kMlp8, " --db ", recorded)).code, 0);  // pinned, as every test
  // A simulation calibrated from `recorded` into `sim`: what it printed.
  auto simulate_into = [&](const std::string& sim) {
    Output o = Shell(absl::StrCat("env -u SHARDSCOPE_CPU_PROFILE XDG_CACHE_HOME=", dir, " ", kCli,
                                  " run mlp --simulate --mesh 8x1 --topology 2x4 --batch 64 --steps 2 --quiet",
                                  " --calibrate-from ", recorded, " --db ", sim));
    EXPECT_EQ(o.code, 0) << o.text;
    return o;
  };
  auto profile_values = [](const std::string& sim) {
    return nlohmann::json::parse(Q(sim, "SELECT config_json FROM runs").Text(0, "config_json"))["profile_values"];
  };
  auto simulate = [&](const std::string& name) {
    const std::string sim = TempDb(name);
    simulate_into(sim);
    return profile_values(sim);
  };
  auto set_speeds = [&](double start, double end) {
    Exec(recorded, absl::StrCat("UPDATE runs SET config_json = json_set(config_json, '$.profile_values.speed', json('",
                                probe(start).Json(), "'), '$.speed_at_end', json('", probe(end).Json(), "'))"));
  };
  set_speeds(2, 2.1);  // a fast run
  nlohmann::json v = simulate("speed_sim_fast");
  EXPECT_EQ(v["source"], "cache");
  EXPECT_EQ(v["peak_flops"], 204e9) << "the median of the fast passes (203, 204, 205 GFLOP/s)";
  EXPECT_EQ(v["passes_used"], 3);
  EXPECT_NE(v["speed_note"].get<std::string>().find("3 of the 6 kept passes ran at the recorded run's speed"),
            std::string::npos)
      << v.dump();
  set_speeds(1, 1);  // a slow one
  v = simulate("speed_sim_slow");
  EXPECT_EQ(v["peak_flops"], 101e9);
  // A damaged probe at its end: said, and priced at its start's speed (nothing measured).
  Exec(recorded, absl::StrCat("UPDATE runs SET config_json = json_set(config_json, '$.profile_values.speed', json('",
                              probe(2).Json(), "'), '$.speed_at_end', json('{\"gemm_flops\": -5}'))"));
  {
    const std::string sim = TempDb("speed_sim_damaged_end");
    Output o = simulate_into(sim);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_NE(o.text.find("config_json 'speed_at_end' is not a speed probe ({\"gemm_flops\":-5}): whether its "
                          "speed held while it ran is unknown; its step is priced at its start's speed"),
              std::string::npos)
        << o.text;
    EXPECT_EQ(o.text.find("measuring this machine's cpu profile"), std::string::npos) << o.text;
    EXPECT_EQ(profile_values(sim)["peak_flops"], 204e9);
  }
  set_speeds(1, 2);  // it moved: every speed's passes, and why
  v = simulate("speed_sim_moved");
  EXPECT_EQ(v["passes_used"], 6);
  EXPECT_NE(v["speed_note"].get<std::string>().find("the recorded run's machine changed speed while it ran"),
            std::string::npos)
      << v.dump();
  std::remove(cache.c_str());
}

TEST(CpuProfile, ARunRecordsThePinnedValuesItUsed) {
  const std::string file = absl::StrCat(::testing::TempDir(), "/pinned_profile_", getpid(), ".json");
  std::ofstream(file) << R"({"peak_flops": 1.25e11, "gang_peak_flops": 0, "hbm_bandwidth": 3e10,
                             "kernel_overhead_ns": 1800, "measured_at_unix_s": 1764000000})";
  const std::string db = TempDb("pinned_profile");
  Output o = Shell(absl::StrCat("SHARDSCOPE_CPU_PROFILE=", file, " ", kCli,
                                " run mlp --mesh 2x1 --steps 1 --db ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("cpu profile of the modeled clock: pinned by $SHARDSCOPE_CPU_PROFILE=" + file),
            std::string::npos) << o.text;
  auto config = nlohmann::json::parse(Q(db, "SELECT config_json FROM runs").Text(0, "config_json"));
  EXPECT_EQ(config["profile_values"]["source"], "file");
  EXPECT_EQ(config["profile_values"]["path"], file);
  EXPECT_EQ(config["profile_values"]["peak_flops"], 1.25e11);
  EXPECT_EQ(config["profile_values"]["measured_at"], "2025-11-24T16:00:00Z");
  EXPECT_EQ(Q(db, "SELECT max(peak_flops) AS p FROM devices").Real(0, "p"), 1.25e11);
  Output report = Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_NE(report.text.find("modeled clock: cpu profile: pinned by the file " + file), std::string::npos)
      << report.text;
  // A pinned file that cannot be read stops the run before it starts, naming it.
  std::ofstream(file) << "{}";
  const std::string bad = TempDb("pinned_bad");
  Output refused = Shell(absl::StrCat("SHARDSCOPE_CPU_PROFILE=", file, " ", kCli, " run mlp --steps 1 --db ", bad));
  EXPECT_EQ(refused.code, 1) << refused.text;
  EXPECT_NE(refused.text.find(file + ": 'peak_flops' is missing"), std::string::npos) << refused.text;
  std::remove(file.c_str());
}

}  // namespace
}  // namespace shardscope::e2e
