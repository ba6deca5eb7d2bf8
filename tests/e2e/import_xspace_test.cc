// `shardscope import` on XLA's own profiles: the XSpace protobuf
// (`*.xplane.pb`) that jax.profiler writes, recorded on an H200 with JAX 0.11
// together with the Perfetto JSON that XLA converts from the same capture
// (tests/data/import/record_gpu_traces.py, parts xplane_*). One capture read
// in its two forms must give the same run; the XSpace's wall-clock start lines
// up the hosts of a two-process job; damaged files keep what is whole.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"
#include "tests/temp_files.h"

namespace shardscope {
namespace {

const std::string kData = std::string(SHARDSCOPE_TEST_SOURCE_DIR) + "/tests/data/import/";
const std::string kCli = SHARDSCOPE_CLI_BINARY;

e2e::Output Import(const std::string& files, const std::string& db) {
  return e2e::Shell(absl::StrCat(kCli, " import ", files, " --db ", db, " 2>&1"));
}

nlohmann::json Fleet(const std::string& db) {
  e2e::Output o = e2e::Shell(absl::StrCat(kCli, " fleet ", db, " --format json 2>/dev/null"));
  EXPECT_EQ(o.code, 0) << o.text;
  return nlohmann::json::parse(o.text, nullptr, false);
}

// The fleet's first suspect is `kind` `id`, flagged, and no one else is.
void ExpectFlaggedAlone(const nlohmann::json& f, const std::string& kind, const std::string& id) {
  ASSERT_FALSE(f["suspects"].empty()) << f.dump();
  EXPECT_EQ(f["suspects"][0]["kind"], kind);
  EXPECT_EQ(f["suspects"][0]["id"], id);
  EXPECT_TRUE(f["suspects"][0]["flagged"].get<bool>());
  for (size_t i = 1; i < f["suspects"].size(); ++i) EXPECT_FALSE(f["suspects"][i]["flagged"].get<bool>()) << i;
}

std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  for (int n; f && (n = gzread(f, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  if (f) gzclose(f);
  return out;
}

std::string TempPath(const std::string& name) {
  return test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/xspace_", getpid(), "_", name));
}

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// What a run is made of, whichever form it was read from: each lane's slices
// (count and total time), the steps' lengths, the devices.
std::map<std::string, std::string> Shape(const std::string& db) {
  std::map<std::string, std::string> out;
  auto lanes = e2e::Q(db, "SELECT t.name AS lane, t.device_id AS dev, COUNT(*) AS n, SUM(s.dur_ns) AS total "
                          "FROM slices s JOIN tracks t USING (run_id, track_id) WHERE s.run_id = 1 "
                          "GROUP BY t.track_id ORDER BY t.device_id, t.name, n");
  for (size_t i = 0; i < lanes.rows.size(); ++i)
    out[absl::StrCat("lane ", lanes.Text(i, "dev"), " ", lanes.Text(i, "lane"), " #", i)] =
        absl::StrCat(lanes.Int(i, "n"), " slices, ", lanes.Int(i, "total"), " ns");
  auto steps = e2e::Q(db, "SELECT step, wall_ns FROM steps WHERE run_id = 1 ORDER BY step");
  for (size_t i = 0; i < steps.rows.size(); ++i)
    out[absl::StrCat("step ", steps.Int(i, "step"))] = std::to_string(steps.Int(i, "wall_ns"));
  out["devices"] = e2e::Q(db, "SELECT COUNT(*) AS v FROM devices WHERE run_id = 1").Text(0, "v");
  return out;
}

TEST(ImportXSpace, OneCaptureReadsTheSameFromItsXSpaceAsFromItsPerfettoJson) {
  for (const char* capture : {"xplane_gpu_mlp", "xplane_cpu8_slow5"}) {
    SCOPED_TRACE(capture);
    const std::string json_db = e2e::TempDb(absl::StrCat(capture, "_json"));
    const std::string pb_db = e2e::TempDb(absl::StrCat(capture, "_pb"));
    e2e::Output j = Import(kData + capture + ".json.gz", json_db);
    e2e::Output p = Import(kData + capture + ".xplane.pb.gz", pb_db);
    ASSERT_EQ(j.code, 0) << j.text;
    ASSERT_EQ(p.code, 0) << p.text;
    EXPECT_TRUE(absl::StrContains(p.text, "of XSpace protobuf")) << p.text;
    const auto a = Shape(json_db), b = Shape(pb_db);
    EXPECT_GT(a.size(), 3u);
    EXPECT_EQ(a, b);
    // The fleet's reading too: the same suspects, in the same order, as sure.
    nlohmann::json fa = Fleet(json_db), fb = Fleet(pb_db);
    ASSERT_EQ(fa["suspects"].size(), fb["suspects"].size());
    for (size_t i = 0; i < fa["suspects"].size(); ++i) {
      EXPECT_EQ(fa["suspects"][i]["id"], fb["suspects"][i]["id"]) << i;
      EXPECT_EQ(fa["suspects"][i]["flagged"], fb["suspects"][i]["flagged"]) << i;
    }
    // XLA's allocator events, which its JSON leaves out, become counters.
    const int64_t counters = e2e::Q(pb_db, "SELECT COUNT(*) AS v FROM counters WHERE run_id = 1 AND name LIKE "
                                           "'XLA allocator %: bytes allocated'").Int(0, "v");
    if (std::string(capture) == "xplane_gpu_mlp") {
      EXPECT_EQ(counters, 60);
    }
  }
}

TEST(ImportXSpace, TheRecordedSlowDeviceComesFirstAndAHealthyCaptureFlagsNobody) {
  // Device 5 sleeps 4 ms a step. On this capture's 7 analysed steps one step's
  // kernels read 0.94x, so its steadiness stays unproven (Student's bound 1.000x,
  // too few steps for the sign test): first, named, and not flagged.
  const std::string slow = e2e::TempDb("xspace_slow");
  ASSERT_EQ(Import(kData + "xplane_cpu8_slow5.xplane.pb.gz", slow).code, 0);
  nlohmann::json f = Fleet(slow);
  ASSERT_FALSE(f["suspects"].empty());
  EXPECT_EQ(f["suspects"][0]["id"], "5");
  EXPECT_GT(f["suspects"][0]["score"].get<double>(), 0.3);
  for (size_t i = 1; i < f["suspects"].size(); ++i) EXPECT_FALSE(f["suspects"][i]["flagged"].get<bool>()) << i;
  e2e::Output text = e2e::Shell(absl::StrCat(kCli, " fleet ", slow));
  EXPECT_TRUE(absl::StrContains(text.text, "the most: chip 5")) << text.text;

  const std::string healthy = e2e::TempDb("xspace_healthy");
  e2e::Output o = Import(kData + "xplane_cpu8.xplane.pb.gz", healthy);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "8 CPU devices")) << o.text;
  for (const auto& s : Fleet(healthy)["suspects"]) EXPECT_FALSE(s["flagged"].get<bool>()) << s.dump();
}

TEST(ImportXSpace, ATwoProcessJobIsTwoHostsOnTheWallClockWithItsSlowChipFound) {
  // jax.distributed on two processes of 4 CPU devices, gloo between them;
  // global device 6 (the second process's third) sleeps 4 ms a step.
  const std::string db = e2e::TempDb("xspace_2host");
  e2e::Output o = Import(kData + "xplane_2host_slow6_host0.xplane.pb.gz " + kData + "xplane_2host_slow6_host1.xplane.pb.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 hosts, 8 CPU devices")) << o.text;
  // Each XSpace keeps times from its own capture's start; the starts (0.18 ms
  // apart in this capture) put the second host where it ran.
  EXPECT_TRUE(absl::StrContains(o.text, "clock offset by the wall-clock start its XSpace records")) << o.text;
  // XLA's collectives of one execution (the same run_id on both hosts) are one instance across them.
  EXPECT_GT(e2e::Q(db, "SELECT COUNT(*) AS v FROM (SELECT flow_id FROM events e JOIN tracks t USING (run_id, track_id) "
                       "WHERE e.run_id = 1 AND e.kind = 'collective' AND e.flow_id IS NOT NULL GROUP BY flow_id "
                       "HAVING COUNT(DISTINCT t.host_id) = 2)").Int(0, "v"), 0);
  EXPECT_EQ(e2e::Q(db, "SELECT COUNT(DISTINCT host_id) AS v FROM devices WHERE run_id = 1").Int(0, "v"), 2);
  ExpectFlaggedAlone(Fleet(db), "chip", "6");
}

TEST(ImportXSpace, AHostLateToLaunchEachStepIsFlaggedAsItsHostAndAHealthyJobFlagsNobody) {
  // The same two processes, no device slowed: process 1 sleeps 3 ms before
  // dispatching each step, so its 4 chips wait for work together and reach
  // the all-reduces that span both hosts late. Its kernels run at speed: only
  // the cross-host instances and its chips' shared idle time show it.
  for (const char* form : {".xplane.pb.gz", ".json.gz"}) {
    SCOPED_TRACE(form);
    const std::string db = e2e::TempDb("xspace_slowhost");
    e2e::Output o = Import(absl::StrCat(kData, "xplane_2host_slowhost1_host0", form, " ", kData,
                                        "xplane_2host_slowhost1_host1", form), db);
    ASSERT_EQ(o.code, 0) << o.text;
    // The JSON has no wall clock: its hosts are lined up by those collectives' ends.
    if (std::string(form) == ".json.gz") {
      EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives of one execution")) << o.text;
    }
    ExpectFlaggedAlone(Fleet(db), "host", "1");
    e2e::Output text = e2e::Shell(absl::StrCat(kCli, " fleet ", db));
    EXPECT_TRUE(absl::StrContains(text.text, "wait for work (idle)")) << text.text;
    EXPECT_TRUE(absl::StrContains(text.text, "fixing it would save")) << text.text;
    // Its chips' waits for their host are seen from the host's dispatches (run_id):
    // about 3 ms a step more than the other host's (its 10 steps, 4 chips each).
    auto waits = e2e::Q(db, "SELECT t.host_id AS host, SUM(e.dur_ns) AS ns FROM events e JOIN tracks t USING "
                            "(run_id, track_id) WHERE e.kind = 'host_wait' GROUP BY t.host_id ORDER BY t.host_id");
    ASSERT_EQ(waits.rows.size(), 2u);
    EXPECT_GT(waits.Int(1, "ns") - waits.Int(0, "ns"), int64_t{2000000} * 10 * 4);
  }
  const std::string healthy = e2e::TempDb("xspace_2host_healthy");
  ASSERT_EQ(Import(kData + "xplane_2host_healthy_host0.xplane.pb.gz " + kData + "xplane_2host_healthy_host1.xplane.pb.gz",
                   healthy).code, 0);
  for (const auto& s : Fleet(healthy)["suspects"]) EXPECT_FALSE(s["flagged"].get<bool>()) << s.dump();
}

TEST(ImportXSpace, ALogDirectoryStandsForItsOneProfile) {
  const std::string logdir = TempPath("logdir");
  const std::string run1 = logdir + "/plugins/profile/2026_11_28_13_47_18";
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", run1).c_str()), 0);
  Write(run1 + "/vm.xplane.pb", Gunzip(kData + "xplane_gpu_mlp.xplane.pb.gz"));  // as XLA writes it: not gzipped
  const std::string db = e2e::TempDb("xspace_dir");
  e2e::Output o = Import(logdir, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "vm.xplane.pb")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "1 GPU")) << o.text;
  // A second capture in the same directory: which one is the user's to say.
  const std::string run2 = logdir + "/plugins/profile/2026_11_28_14_00_00";
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", run2, " && cp ", run1, "/vm.xplane.pb ", run2).c_str()), 0);
  o = Import(logdir, db);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "holds 2 profiles (plugins/profile/2026_11_28_13_47_18, 2026_11_28_14_00_00)"))
      << o.text;
  o = Import(run2, db);
  EXPECT_EQ(o.code, 0) << o.text;
  const std::string empty = TempPath("empty_dir");
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", empty).c_str()), 0);
  o = Import(empty, db);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "is a directory with no trace in it")) << o.text;
}

TEST(ImportXSpace, DamagedFilesKeepWhatIsWholeAndNeverCrash) {
  const std::string bytes = Gunzip(kData + "xplane_cpu8_slow5.xplane.pb.gz");
  ASSERT_GT(bytes.size(), 1000000u);
  struct Case {
    std::string name, bytes;
  };
  std::vector<Case> cases;
  // Cut in the first plane, in the big host plane, in the last.
  for (double at : {0.02, 0.3, 0.7, 0.9999}) {
    const size_t n = static_cast<size_t>(static_cast<double>(bytes.size()) * at);
    cases.push_back({absl::StrCat("cut_", n), bytes.substr(0, n)});
  }
  std::mt19937 rng(7);
  for (int k = 0; k < 4; ++k) {
    std::string b = bytes;
    for (int i = 0; i < 30; ++i) b[rng() % b.size()] = static_cast<char>(rng() & 0xff);
    cases.push_back({absl::StrCat("flipped_", k), b});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = TempPath(c.name + ".xplane.pb");
    Write(path, c.bytes);
    const std::string db = e2e::TempDb("xspace_damaged");
    e2e::Output o = Import(path, db);
    ASSERT_TRUE(o.code == 0 || o.code == 1) << o.code << " " << o.text;
    if (o.code == 1) {
      EXPECT_TRUE(absl::StartsWith(o.text, absl::StrCat("error: ", path))) << o.text;
      continue;
    }
    if (absl::StartsWith(c.name, "cut_")) {
      // A cut is always said: what was lost, at which byte.
      EXPECT_TRUE(absl::StrContains(o.text, "truncated_xspace")) << o.text;
      EXPECT_TRUE(absl::StrContains(o.text, "is cut short")) << o.text;
    }
    EXPECT_GT(e2e::Q(db, "SELECT COUNT(*) AS v FROM slices WHERE run_id = 1").Int(0, "v"), 0);
  }
  // The first plane cut: nothing whole, said as a cut.
  e2e::Output o = Import(TempPath(cases[0].name + ".xplane.pb"), e2e::TempDb("xspace_cut0"));
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(absl::StrContains(o.text, "is cut short: an XSpace (XLA's profile)")) << o.text;
}

// Protobuf's wire format, by hand: enough to write the XSpaces real profilers
// write in shapes this machine cannot record (a TPU's planes).
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string VarintField(int field, uint64_t v) { return Varint(static_cast<uint64_t>(field) << 3) + Varint(v); }
std::string LenField(int field, const std::string& bytes) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(bytes.size()) + bytes;
}
std::string IntStat(int stat_id, int64_t v) { return VarintField(1, stat_id) + VarintField(4, static_cast<uint64_t>(v)); }
std::string Metadata(int map_field, int id, const std::string& name, const std::string& stats = "") {
  return LenField(map_field, VarintField(1, id) + LenField(2, VarintField(1, id) + LenField(2, name) + stats));
}

// One host of a TPU job: `chips` device planes, each with an "XLA Modules"
// line (one module execution a step, its run_id there) and an "XLA Ops" line
// (a fusion, then an all-reduce that ends 0.1 ms after the last chip of the
// job arrives; a real TPU's ops carry no run_id of their own), and a host
// plane whose python thread marks each step (step_num). `shift_ns` is how
// much later this host's capture clock reads than the job's (it started that
// much earlier: `start_ns`, its start on the wall clock, is that much lower);
// `late_ns` delays its chips' arrival, `last_ns` is the job's latest.
// `dispatch`: inside each step's span the host dispatches that step's execution
// (PjRt's Execute, with its run_id), as JAX's host plane records.
std::string TpuHost(int first_chip, int chips, int64_t start_ns, int64_t shift_ns = 0, int64_t late_ns = 0,
                    int64_t last_ns = 0, int steps = 6, int64_t host_step_ns = 999000, int64_t device_lag_ns = 0,
                    int late_step = -1, bool dispatch = false, int64_t run_base = -77000) {
  const int64_t step_ns = 1000000, fusion_ns = 400000;
  auto ps = [](int64_t ns) { return static_cast<uint64_t>(ns) * 1000; };
  std::string space;
  for (int c = first_chip; c < first_chip + chips; ++c) {
    std::string modules, ops;
    for (int s = 0; s < steps; ++s) {
      const int64_t t0 = s * step_ns + shift_ns + device_lag_ns;
      const bool late_here = late_step < 0 || s == late_step;  // late in every step, or in that one
      const int64_t late = late_here ? late_ns : 0, last = late_here ? last_ns : 0;
      const int64_t arrive = t0 + fusion_ns + late, end = t0 + fusion_ns + last + 100000;
      modules += LenField(4, VarintField(1, 1) + VarintField(2, ps(t0)) + VarintField(3, ps(end - t0)) +
                                 LenField(4, IntStat(1, run_base + s)));
      ops += LenField(4, VarintField(1, 2) + VarintField(2, ps(t0 + late)) + VarintField(3, ps(fusion_ns)));
      ops += LenField(4, VarintField(1, 3) + VarintField(2, ps(arrive)) + VarintField(3, ps(end - arrive)));
    }
    std::string plane = LenField(2, absl::StrCat("/device:TPU:", c));
    plane += LenField(3, VarintField(1, 1) + LenField(2, "XLA Modules") + VarintField(3, 0) + modules);
    plane += LenField(3, VarintField(1, 2) + LenField(2, "XLA Ops") + VarintField(3, 0) + ops);
    plane += Metadata(4, 1, "jit_train_step(12)") + Metadata(4, 2, "fusion.7") + Metadata(4, 3, "all-reduce.3");
    plane += Metadata(5, 1, "run_id");
    space += LenField(1, plane);
  }
  std::string train;
  for (int s = 0; s < steps; ++s) {
    train += LenField(4, VarintField(1, 1) + VarintField(2, ps(s * step_ns + shift_ns)) + VarintField(3, ps(host_step_ns)) +
                             LenField(4, IntStat(1, s)));
    if (dispatch)
      train += LenField(4, VarintField(1, 2) + VarintField(2, ps(s * step_ns + shift_ns + 5000)) +
                               VarintField(3, ps(10000)) + LenField(4, IntStat(2, run_base + s)));
  }
  space += LenField(1, LenField(2, "/host:CPU") +
                           LenField(3, VarintField(1, 77) + LenField(2, "python3") + VarintField(3, 0) + train) +
                           Metadata(4, 1, "train") + Metadata(4, 2, "CommonPjRtLoadedExecutable::Execute (jit_train_step)") +
                           Metadata(5, 1, "step_num") + Metadata(5, 2, "run_id"));
  std::string env = LenField(2, "Task Environment") + Metadata(5, 1, "profile_start_time") +
                    LenField(6, VarintField(1, 1) + VarintField(3, static_cast<uint64_t>(start_ns)));
  return space + LenField(1, env);
}

TEST(ImportXSpace, ATpuJobsOpsTakeTheirModulesExecutionAndPairAcrossHosts) {
  // Two hosts of 4 chips, captures 3 ms apart on the wall clock, host 1's chips 0.3 ms late each step.
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string h0 = TempPath("tpu_host0.xplane.pb"), h1 = TempPath("tpu_host1.xplane.pb");
  Write(h0, TpuHost(0, 4, start, 0, 0, 300000));
  Write(h1, TpuHost(4, 4, start - 3000000, 3000000, 300000, 300000));  // started 3 ms earlier: its clock 3 ms ahead
  const std::string db = e2e::TempDb("xspace_tpu");
  e2e::Output o = Import(h0 + " " + h1, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 hosts, 8 TPUs")) << o.text;
  // A TPU's lines keep their names (they are no GPU streams).
  EXPECT_EQ(e2e::Q(db, "SELECT COUNT(*) AS n FROM tracks WHERE name IN ('rank 0 / TPU 0 / XLA Ops', "
                       "'rank 0 / TPU 0 / XLA Modules annotations')").Int(0, "n"), 2);
  EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives: 48 ops, 48 matched across devices (by HLO op and execution)"))
      << o.text;
  // Each step's all-reduce is one instance over both hosts, ending together once the wall clock lines them up.
  auto flows = e2e::Q(db, "SELECT COUNT(DISTINCT t.host_id) AS hosts, MAX(e.start_ns + e.dur_ns) - MIN(e.start_ns + "
                          "e.dur_ns) AS spread FROM events e JOIN tracks t USING (run_id, track_id) WHERE e.run_id = 1 "
                          "AND e.kind = 'collective' GROUP BY e.flow_id");
  ASSERT_EQ(flows.rows.size(), 6u);
  for (size_t i = 0; i < flows.rows.size(); ++i) {
    EXPECT_EQ(flows.Int(i, "hosts"), 2);
    EXPECT_EQ(flows.Int(i, "spread"), 0);
  }
  ExpectFlaggedAlone(Fleet(db), "host", "1");
}

TEST(ImportXSpace, AHostLateInOneStepIsSaidToCostThatStepNotEveryStep) {
  // Host 1's chips idle 0.3 ms before step 4's work (a one-off stall of its process), on time otherwise.
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string h0 = TempPath("stall_host0.xplane.pb"), h1 = TempPath("stall_host1.xplane.pb");
  Write(h0, TpuHost(0, 4, start, 0, 0, 300000, 8, 999000, 0, 4));
  Write(h1, TpuHost(4, 4, start, 0, 300000, 300000, 8, 999000, 0, 4));
  const std::string db = e2e::TempDb("xspace_stall");
  ASSERT_EQ(Import(h0 + " " + h1, db).code, 0);
  ExpectFlaggedAlone(Fleet(db), "host", "1");
  e2e::Output text = e2e::Shell(absl::StrCat(kCli, " fleet ", db));
  EXPECT_TRUE(absl::StrContains(text.text, "fixing it would save 0.300 ms in step 4 alone")) << text.text;
  EXPECT_TRUE(absl::StrContains(text.text, "would start sooner by 0.300 ms in step 4 alone")) << text.text;
}

TEST(ImportXSpace, DeviceWorkOutsideTheHostsStepsIsSaidNotReadAsNoCollective) {
  // Asynchronous dispatch: the host's step span (30 us) ends before its device
  // runs the step, and nothing (no launch) ties the device's ops to it.
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string path = TempPath("tpu_async.xplane.pb");
  Write(path, TpuHost(0, 4, start, 0, 0, 0, 6, 30000, 50000));  // the device starts 50 us into the step
  const std::string db = e2e::TempDb("xspace_async");
  e2e::Output o = Import(path, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "data_loss device_work_outside_steps")) << o.text;
  e2e::Output fleet = e2e::Shell(absl::StrCat(kCli, " fleet ", db));
  EXPECT_TRUE(absl::StrContains(fleet.text, "outside the host's step spans, as under asynchronous dispatch"))
      << fleet.text;
  // With the steps spanning the device's work, nothing is said.
  Write(path, TpuHost(0, 4, start));
  o = Import(path, e2e::TempDb("xspace_sync"));
  EXPECT_FALSE(absl::StrContains(o.text, "device_work_outside_steps")) << o.text;
}

// Steps 0..steps-1 each hold `each` of what `count` counts over the device
// lanes' slices (`where` narrows them), and no slice lies in no step.
void ExpectEachStepHolds(const std::string& db, const std::string& count, const std::string& where, int64_t steps,
                         int64_t each) {
  auto per_step = e2e::Q(db, absl::StrCat("SELECT s.step AS step, ", count, " AS n FROM slices s JOIN tracks t "
                                          "USING (run_id, track_id) WHERE s.run_id = 1 AND t.device_id >= 0 ",
                                          where, " GROUP BY s.step ORDER BY s.step"));
  ASSERT_EQ(per_step.rows.size(), static_cast<size_t>(steps));
  for (size_t i = 0; i < per_step.rows.size(); ++i) {
    EXPECT_EQ(per_step.Int(i, "step"), static_cast<int64_t>(i));
    EXPECT_EQ(per_step.Int(i, "n"), each) << "step " << i;
  }
}

// Asynchronous dispatch: JAX returns from each step before its devices run
// it, so a device's work lies after its step's span on the host, often inside
// a later step's. The host's dispatch of each execution carries its run_id,
// as the device's ops (or their module) do: that ties each op to its step.
TEST(ImportXSpace, AsynchronousDispatchTiesEachOpToTheStepThatDispatchedIt) {
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string path = TempPath("tpu_dispatch.xplane.pb");
  // The devices run 2.5 ms behind the host: step s's work lies in step s+2's span.
  Write(path, TpuHost(0, 4, start, 0, 0, 0, 6, 999000, 2500000, -1, true));
  const std::string db = e2e::TempDb("xspace_dispatch");
  e2e::Output o = Import(path, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "info      steps_run_after_dispatch")) << o.text;
  EXPECT_FALSE(absl::StrContains(o.text, "device_work_outside_steps")) << o.text;
  // Each step's device work starts 2.5 ms after its span does, on every chip.
  auto steps = e2e::Q(db, "SELECT s.step AS step, t.device_id AS dev, MIN(s.start_ns) AS first FROM slices s "
                          "JOIN tracks t USING (run_id, track_id) WHERE s.run_id = 1 AND t.device_id >= 0 "
                          "AND s.step IS NOT NULL GROUP BY s.step, t.device_id ORDER BY s.step, t.device_id");
  ASSERT_EQ(steps.rows.size(), 24u);
  const int64_t base = steps.Int(0, "first") - 2500000;
  for (size_t i = 0; i < steps.rows.size(); ++i)
    EXPECT_EQ(steps.Int(i, "first") - base, steps.Int(i, "step") * 1000000 + 2500000) << "row " << i;
  // Without the dispatch, containment would put them in the wrong steps; the
  // work past the last span is said, not given a step.
  Write(path, TpuHost(0, 4, start, 0, 0, 0, 6, 999000, 2500000));
  const std::string plain = e2e::TempDb("xspace_no_dispatch");
  ASSERT_EQ(Import(path, plain).code, 0);
  auto wrong = e2e::Q(plain, "SELECT COUNT(*) AS n FROM slices s JOIN tracks t USING (run_id, track_id) "
                             "WHERE s.run_id = 1 AND t.device_id >= 0 AND s.step = 0");
  EXPECT_EQ(wrong.Int(0, "n"), 0);  // step 0's span holds no device work then

  // Run ids past 32 bits (a TPU's are 64-bit) tie as well.
  Write(path, TpuHost(0, 4, start, 0, 0, 0, 6, 999000, 2500000, -1, true, int64_t{5} << 40));
  const std::string wide = e2e::TempDb("xspace_wide_run_ids");
  o = Import(path, wide);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "steps_run_after_dispatch")) << o.text;
  auto first = e2e::Q(wide, "SELECT MIN(s.start_ns) AS first FROM slices s JOIN tracks t USING (run_id, track_id) "
                            "WHERE s.run_id = 1 AND t.device_id >= 0 AND s.step = 0");
  EXPECT_EQ(first.Int(0, "first"), base + 2500000);
}

// One host's dispatches unrecorded: its devices' work lies in no step while
// the other host's is tied. That host is named, and fleet does not give its
// all-clear as if every chip had been compared.
TEST(ImportXSpace, AHostWhoseWorkLiesInNoStepIsNamedAndNotCleared) {
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string h0 = TempPath("half_host0.xplane.pb"), h1 = TempPath("half_host1.xplane.pb");
  Write(h0, TpuHost(0, 4, start, 0, 0, 0, 6, 30000, 50000, -1, true));
  Write(h1, TpuHost(4, 4, start, 0, 0, 0, 6, 30000, 50000, -1, false));
  const std::string db = e2e::TempDb("xspace_half_tied");
  e2e::Output o = Import(h0 + " " + h1, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "data_loss device_work_outside_steps")) << o.text;
  auto stat = e2e::Q(db, "SELECT count, description FROM import_stats WHERE name = 'device_work_outside_steps'");
  ASSERT_EQ(stat.rows.size(), 1u);
  EXPECT_EQ(stat.Int(0, "count"), 1);  // one rank
  EXPECT_TRUE(absl::StrContains(stat.Text(0, "description"), "(first: rank 1 (")) << stat.Text(0, "description");
  e2e::Output fleet = e2e::Shell(absl::StrCat(kCli, " fleet ", db));
  EXPECT_TRUE(absl::StrContains(fleet.text, "device work in no step")) << fleet.text;
  EXPECT_FALSE(absl::StrContains(fleet.text, "verdict: no chip, link or host stands out: none is 8.0% or more "
                                             "slower than its peers\n"))
      << fleet.text;
}

// Real asynchronous captures (JAX 0.11 on an H200 machine, the loop not
// blocking on each step): 8 CPU devices with device 5 sleeping 4 ms a step,
// and two processes of 4 with global device 6 slowed. Before, 85-92% of the
// device time lay in no step, and fleet could not rank (2 steps with collectives).
TEST(ImportXSpace, RecordedAsynchronousJobsFindTheirSlowDevice) {
  for (const std::string form : {".xplane.pb.gz", ".json.gz"}) {
    SCOPED_TRACE(form);
    const std::string db = e2e::TempDb("xspace_async_cpu8");
    e2e::Output o = Import(kData + "xplane_cpu8_async_slow5" + form, db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "steps_run_after_dispatch")) << o.text;
    EXPECT_FALSE(absl::StrContains(o.text, "device_work_outside_steps")) << o.text;
    ExpectEachStepHolds(db, "COUNT(DISTINCT t.device_id)", "", 8, 8);  // the work of all 8 devices
    // So do the host threads' slices of each execution (the CPU client waiting on each device's run).
    auto waits = e2e::Q(db, "SELECT step || ':' || COUNT(*) AS v FROM events WHERE run_id = 1 AND name = "
                            "'ThunkExecutor::Execute (wait for completion)' GROUP BY step ORDER BY step");
    ASSERT_EQ(waits.rows.size(), 8u);
    for (size_t i = 0; i < waits.rows.size(); ++i) EXPECT_EQ(waits.Text(i, "v"), absl::StrCat(i, ":8"));
    ExpectFlaggedAlone(Fleet(db), "chip", "5");
  }
  const std::string two = e2e::TempDb("xspace_async_2host");
  ASSERT_EQ(Import(kData + "xplane_2host_async_slow6_host0.xplane.pb.gz " + kData +
                       "xplane_2host_async_slow6_host1.xplane.pb.gz",
                   two)
                .code,
            0);
  ExpectFlaggedAlone(Fleet(two), "chip", "6");
}

// On a GPU, XLA's kernels carry their launch's correlation id (the graph's
// cuGraphLaunch on the host, inside its step): each step's 18 kernels take
// that step (16 kernels and 2 copies), and the GPU's waits for the host are
// worked out as for PyTorch's.
TEST(ImportXSpace, AGpusKernelsTakeTheStepOfTheirLaunch) {
  for (const std::string form : {".xplane.pb.gz", ".json.gz"}) {
    SCOPED_TRACE(form);
    const std::string db = e2e::TempDb("xspace_async_gpu");
    e2e::Output o = Import(kData + "xplane_gpu_async" + form, db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "8 steps, 8 flows")) << o.text;  // a launch -> kernels flow a step
    EXPECT_TRUE(absl::StrContains(o.text, "steps_run_after_dispatch")) << o.text;
    EXPECT_FALSE(absl::StrContains(o.text, "host_wait_unknown")) << o.text;
    ExpectEachStepHolds(db, "COUNT(*)", "AND s.kind IN ('compute', 'transfer')", 8, 18);
    // The host's step times are its dispatch (about 0.2 ms against 1.3 ms on the GPU): the report says so.
    e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
    EXPECT_TRUE(absl::StrContains(report.text, "(host: its dispatch only; the devices ran each step after it"))
        << report.text;
  }
  // The blocking capture's small steps: the GPU waits for each launch, and says so.
  const std::string sync = e2e::TempDb("xspace_sync_gpu");
  e2e::Output o = Import(kData + "xplane_gpu_mlp.xplane.pb.gz", sync);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "host_wait_derived")) << o.text;
}

// Two hosts' profiles concatenated into one file (`cat`: protobuf merges
// them into one XSpace with two "/host:CPU" planes), and an event whose kind
// its plane does not define: imported, and said.
TEST(ImportXSpace, ConcatenatedProfilesAndEventsOfNoKindAreSaid) {
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string path = TempPath("cat.xplane.pb");
  Write(path, TpuHost(0, 2, start) + TpuHost(2, 2, start));
  const std::string db = e2e::TempDb("xspace_cat");
  e2e::Output o = Import(path, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "data_loss xspace_duplicate_planes")) << o.text;
  EXPECT_TRUE(absl::StrContains(e2e::Q(db, "SELECT description FROM import_stats WHERE name = "
                                           "'xspace_duplicate_planes'").Text(0, "description"),
                                "(first: " + path + ": /host:CPU)"));
  const std::string plane =
      LenField(2, "/device:TPU:0") +
      LenField(3, VarintField(1, 2) + LenField(2, "XLA Ops") + VarintField(3, 0) +
                      LenField(4, VarintField(1, 9) + VarintField(2, 1000000) + VarintField(3, 5000000000)));
  Write(path, LenField(1, plane));
  const std::string nameless = e2e::TempDb("xspace_nameless");
  o = Import(path, nameless);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "data_loss xspace_event_without_metadata")) << o.text;
  EXPECT_EQ(e2e::Q(nameless, "SELECT COUNT(*) AS n FROM events WHERE run_id = 1 AND name = '<unknown>' "
                             "AND dur_ns = 5000000").Int(0, "n"), 1);
  // A whole profile has neither.
  o = Import(kData + "xplane_gpu_mlp.xplane.pb.gz", e2e::TempDb("xspace_whole"));
  EXPECT_FALSE(absl::StrContains(o.text, "xspace_duplicate_planes")) << o.text;
  EXPECT_FALSE(absl::StrContains(o.text, "xspace_event_without_metadata")) << o.text;
}

// The recorded slow-host job's host 0, edited as traces get damaged or
// merged: each way its dispatches can mislead is said, and no wait for the
// host is made up from a slice that did not start the execution.
TEST(ImportXSpace, DispatchesThatCannotTieAreSaidNotTrusted) {
  e2e::Output text = e2e::Shell(absl::StrCat("gzip -dc ", kData, "xplane_2host_slowhost1_host0.json.gz"));
  ASSERT_EQ(text.code, 0);
  const nlohmann::json whole = nlohmann::json::parse(text.text);
  auto edited = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json t = whole;
    for (auto& e : t["traceEvents"]) edit(e);
    const std::string path = TempPath(name + ".json");
    Write(path, t.dump());
    const std::string db = e2e::TempDb("xspace_" + name);
    e2e::Output o = Import(path, db);
    EXPECT_EQ(o.code, 0) << o.text;
    return std::make_pair(db, o.text);
  };
  auto execute = [](const nlohmann::json& e) {
    return e.contains("name") && e["name"].is_string() &&
           absl::StartsWith(e["name"].get<std::string>(), "CommonPjRtLoadedExecutable::Execute (");
  };
  auto waits = [](const std::string& db) {
    return e2e::Q(db, "SELECT COUNT(*) AS n FROM events WHERE kind = 'host_wait'").Int(0, "n");
  };
  // As recorded: one wait a chip a step, none inside an execution.
  auto [plain, plain_text] = edited("plain", [](nlohmann::json&) {});
  EXPECT_EQ(waits(plain), 36) << plain_text;
  // The dispatches' run ids lost: the CPU client's ThunkExecutor slices, which
  // carry them but start after the ops, are no dispatch. Before, every gap
  // inside an execution read as a wait (269 of them).
  auto [lost, lost_text] = edited("no_dispatch", [&](nlohmann::json& e) {
    if (execute(e)) e["args"].erase("run_id");
  });
  EXPECT_EQ(waits(lost), 0);
  EXPECT_TRUE(absl::StrContains(lost_text, "host_wait_unknown")) << lost_text;
  // Run ids that are no integers: said.
  auto [bad, bad_text] = edited("bad_run_ids", [](nlohmann::json& e) {
    if (e.contains("args") && e["args"].contains("run_id")) e["args"]["run_id"] = "run-" + e["args"]["run_id"].dump();
  });
  EXPECT_TRUE(absl::StrContains(bad_text, "data_loss run_id_unusable")) << bad_text;
  // One execution's run id given to the next step's too: it ties nothing, said.
  std::string first_run;
  for (const auto& e : whole["traceEvents"])
    if (execute(e) && first_run.empty()) first_run = e["args"]["run_id"].dump();
  int seen = 0;
  auto [twice, twice_text] = edited("run_id_twice", [&](nlohmann::json& e) {
    if (execute(e) && ++seen == 2) e["args"]["run_id"] = nlohmann::json::parse(first_run);
  });
  EXPECT_TRUE(absl::StrContains(twice_text, "data_loss run_id_dispatched_twice")) << twice_text;
  // A rank with no run id at all beside one with them: its chips' waits are not
  // known, not 0, so the run's are not measurable (they had diluted the other
  // host's to a 2.7% average).
  nlohmann::json none = whole;
  for (auto& e : none["traceEvents"])
    if (e.contains("args") && e["args"].is_object()) e["args"].erase("run_id");
  const std::string host0 = TempPath("host0_no_run_ids.json");
  Write(host0, none.dump());
  const std::string mixed = e2e::TempDb("xspace_mixed_ranks");
  e2e::Output o = Import(host0 + " " + kData + "xplane_2host_slowhost1_host1.json.gz", mixed);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "info      host_wait_unknown")) << o.text;
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", mixed));
  EXPECT_TRUE(absl::StrContains(report.text, "?  host ")) << report.text;
}

TEST(ImportXSpace, DamageAndEmptinessAreNamedForWhatTheyAre) {
  const int64_t start = int64_t{1795873650} * 1000000000;
  const std::string db = e2e::TempDb("xspace_odd");
  // A third plane whose length runs past the end (2^62): the planes before it are kept, the loss said.
  const std::string whole = TpuHost(0, 1, start, 0);
  const std::string broken = whole + std::string("\x0a", 1) + Varint(uint64_t{1} << 62) + whole.substr(0, 40);
  const std::string past = TempPath("past.xplane.pb");
  Write(past, broken);
  e2e::Output o = Import(past, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "data_loss truncated_xspace")) << o.text;
  // The profiler's own errors, and no plane: its words, not a JSON error.
  const std::string errors = TempPath("errors.xplane.pb");
  Write(errors, LenField(2, "Profiler failed: no TPU found") + LenField(4, "tpu-vm-0"));
  o = Import(errors, e2e::TempDb("xspace_errors"));
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(absl::StrContains(o.text, "the profiler wrote: \"Profiler failed: no TPU found\"")) << o.text;
  // A gzip of nothing.
  const std::string empty = TempPath("empty.xplane.pb.gz");
  gzFile g = gzopen(empty.c_str(), "wb");
  gzclose(g);
  o = Import(empty, e2e::TempDb("xspace_empty"));
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(absl::StrContains(o.text, "is a gzip of nothing")) << o.text;
}

TEST(ImportXSpace, APerfettoProtobufTraceIsStillNamedForWhatItIs) {
  // A Perfetto TracePacket (timestamp, then a track event): the same first
  // tag as an XSpace, not a plane.
  const std::string packet = std::string("\x40\x80\xad\xe2\x04\x5a\x04\x48\x01\x50\x02", 11);
  std::string trace = std::string("\x0a", 1) + static_cast<char>(packet.size()) + packet;
  const std::string path = TempPath("trace.perfetto-trace");
  Write(path, trace);
  e2e::Output o = Import(path, e2e::TempDb("xspace_perfetto"));
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(absl::StrContains(o.text, "looks like a Perfetto protobuf trace")) << o.text;
}

}  // namespace
}  // namespace shardscope
