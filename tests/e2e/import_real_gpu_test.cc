// `shardscope import` on traces recorded on a real H100 with PyTorch 2.11 and
// JAX 0.11 (tests/data/import/record_gpu_traces.py): a JAX program sharded
// over 8 CPU devices (XLA's own all-reduces; once more with one device really
// slowed), a jitted step on the GPU, a
// torch.compile'd model whose GPU waits for its launches, CUDA graphs, and a
// DDP pair over gloo. Each is checked in the database and through the reports
// a user reads; hand-written traces pin the rules the real ones exercise.
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

const std::string kData = std::string(SHARDSCOPE_TEST_SOURCE_DIR) + "/tests/data/import/";
const std::string kCli = SHARDSCOPE_CLI_BINARY;

e2e::Output Import(const std::string& files, const std::string& db) {
  return e2e::Shell(absl::StrCat(kCli, " import ", files, " --db ", db));
}

std::map<std::string, std::pair<int64_t, std::string>> Stats(const std::string& db) {
  std::map<std::string, std::pair<int64_t, std::string>> out;
  auto q = e2e::Q(db, "SELECT name, count, severity FROM import_stats WHERE run_id = 1");
  for (size_t i = 0; i < q.rows.size(); ++i) out[q.Text(i, "name")] = {q.Int(i, "count"), q.Text(i, "severity")};
  return out;
}

int64_t Scalar(const std::string& db, const std::string& sql) { return e2e::Q(db, sql).Int(0, "v", -999); }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/import_real_", getpid(), "_", name));
  std::ofstream(path) << text;
  return path;
}

TEST(ImportRealGpu, JaxOnEightCpuDevicesGivesEachDeviceItsOpsAndMatchesItsAllReduces) {
  const std::string db = e2e::TempDb("jax_cpu8");
  e2e::Output o = Import(kData + "jax_cpu8_gspmd.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "8 CPU devices")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives: 80 ops, 80 matched across devices")) << o.text;
  // XLA's list ends with {}: said, not counted as lost data.
  auto stats = Stats(db);
  EXPECT_EQ(stats["empty_event"], std::make_pair(int64_t{1}, std::string("info")));
  for (const auto& [name, s] : stats) EXPECT_NE(s.second, "data_loss") << name;

  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM devices WHERE run_id = 1"), 8);
  // Each device's HLO ops (args.device_ordinal) on that device's lanes, on the device clock.
  auto per = e2e::Q(db,
                    "SELECT t.device_id AS d, SUM(e.kind <> 'host_wait') AS n, SUM(e.kind = 'collective') AS c FROM events e"
                    " JOIN tracks t USING (run_id, track_id) WHERE t.clock = 'device' GROUP BY t.device_id");
  ASSERT_EQ(per.rows.size(), 8u);
  for (size_t i = 0; i < per.rows.size(); ++i) {
    EXPECT_EQ(per.Int(i, "n"), 75) << "device " << per.Int(i, "d");  // 15 HLO ops x 5 steps
    EXPECT_EQ(per.Int(i, "c"), 10) << "device " << per.Int(i, "d");  // all-reduce and all-reduce.4
  }
  // Its ops ran on whichever pool thread was free; packed, a device has a
  // lane or two, and no two ops of a lane overlap.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM tracks WHERE name = 'rank 0 / CPU device 3 / lane 0'"), 1);
  EXPECT_LE(Scalar(db, "SELECT MAX(n) AS v FROM (SELECT COUNT(*) AS n FROM tracks WHERE clock = 'device'"
                       " GROUP BY device_id)"),
            3);
  EXPECT_EQ(Scalar(db, "WITH d AS MATERIALIZED (SELECT track_id, slice_id, start_ns, dur_ns FROM events"
                       " WHERE clock = 'device' AND depth = 0) SELECT COUNT(*) AS v FROM d a JOIN d b ON"
                       " a.track_id = b.track_id AND a.slice_id < b.slice_id AND a.start_ns < b.start_ns + b.dur_ns"
                       " AND b.start_ns < a.start_ns + a.dur_ns"),
            0);
  // The executor's wait for its thunks is the host's, not device work.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events e JOIN tracks t USING (run_id, track_id)"
                       " WHERE t.clock = 'device' AND e.name LIKE 'ThunkExecutor%'"),
            0);
  // One flow per instance, its members on distinct devices: the model axis's
  // all-reduce meets in pairs and the data axis's all-reduce.4 in fours, as
  // the CPU client's rendezvous say.
  auto flows = e2e::Q(db,
                      "SELECT e.name AS name, e.flow_id AS flow, COUNT(*) AS n, COUNT(DISTINCT t.device_id) AS d"
                      " FROM events e JOIN tracks t USING (run_id, track_id)"
                      " WHERE t.clock = 'device' AND e.kind = 'collective' GROUP BY e.flow_id");
  ASSERT_EQ(flows.rows.size(), 30u);
  std::map<std::string, int> instances;
  for (size_t i = 0; i < flows.rows.size(); ++i) {
    ASSERT_NE(flows.Text(i, "flow"), "");
    EXPECT_EQ(flows.Int(i, "n"), flows.Int(i, "d"));
    EXPECT_EQ(flows.Int(i, "n"), flows.Text(i, "name") == "all-reduce" ? 2 : 4) << flows.Text(i, "name");
    ++instances[flows.Text(i, "name")];
  }
  EXPECT_EQ(instances["all-reduce"], 20);   // 4 pairs x 5 steps
  EXPECT_EQ(instances["all-reduce.4"], 10);  // 2 fours x 5 steps

  // The reports: per-chip time on the device clock, late arrivals from the
  // collectives' starts, and no chip flagged in a run without a fault.
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "8 chips on 1 host")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "Late arrivals (device clock, 30 collectives)")) << report.text;
  // No launches in an XLA CPU trace, but the host's dispatch of each execution (its run_id):
  // a device idle until its execution was dispatched waited for the host, and is measured.
  EXPECT_FALSE(absl::StrContains(report.text, "Waiting for host: not measurable")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "-  host           waiting for the host")) << report.text;
  EXPECT_GT(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE kind = 'host_wait'"), 0);
  e2e::Output fleet = e2e::Shell(absl::StrCat(kCli, " fleet ", db, " --format json 2>/dev/null"));
  ASSERT_EQ(fleet.code, 0) << fleet.text;
  auto j = nlohmann::json::parse(fleet.text);
  EXPECT_TRUE(j["supported"].get<bool>()) << fleet.text;
  EXPECT_EQ(j["suspects"].size(), 8u);
  for (const auto& s : j["suspects"]) EXPECT_FALSE(s["flagged"].get<bool>()) << s.dump();
}

TEST(ImportRealGpu, JaxWithOneReallySlowDeviceHasThatChipFlaggedAlone) {
  // The same program, 8 steps, with a host callback (inside a shard_map)
  // sleeping 4 ms on device 5 only: a slow chip, recorded, not injected here.
  const std::string db = e2e::TempDb("jax_slow");
  e2e::Output o = Import(kData + "jax_cpu8_slow_device5.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  e2e::Output fleet = e2e::Shell(absl::StrCat(kCli, " fleet ", db, " --format json 2>/dev/null"));
  ASSERT_EQ(fleet.code, 0) << fleet.text;
  auto j = nlohmann::json::parse(fleet.text);
  ASSERT_FALSE(j["suspects"].empty()) << fleet.text;
  EXPECT_EQ(j["suspects"][0]["kind"], "chip");
  EXPECT_EQ(j["suspects"][0]["id"], "5");
  EXPECT_TRUE(j["suspects"][0]["flagged"].get<bool>());
  for (size_t i = 1; i < j["suspects"].size(); ++i) EXPECT_FALSE(j["suspects"][i]["flagged"].get<bool>()) << i;
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "Verdict: bound by stragglers")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "last to arrive chip 5 ")) << report.text;
}

TEST(ImportRealGpu, CpuDeviceOpsArePackedOnFewLanesKeepingNestingWithinAThread) {
  // Device 0: a loop on thread 1 holding its body, and an op of thread 2 that
  // overlaps the loop: lane 0 the loop with its body nested, lane 1 the other.
  // Then an op on thread 3 after all: back on lane 0.
  const std::string trace = WriteTemp("cpu_lanes.json", R"j({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":100,"name":"while.1","args":{"device_ordinal":"0","hlo_op":"while.1"}},
    {"ph":"X","pid":1,"tid":1,"ts":10,"dur":20,"name":"fusion.2","args":{"device_ordinal":"0","hlo_op":"fusion.2"}},
    {"ph":"X","pid":1,"tid":2,"ts":50,"dur":10,"name":"fusion.3","args":{"device_ordinal":"0","hlo_op":"fusion.3"}},
    {"ph":"X","pid":1,"tid":3,"ts":200,"dur":10,"name":"fusion.4","args":{"device_ordinal":"0","hlo_op":"fusion.4"}},
    {"ph":"X","pid":1,"tid":3,"ts":205,"dur":100,"name":"ThunkExecutor::Execute (wait for completion)","args":{"device_ordinal":"0"}}]})j");
  const std::string db = e2e::TempDb("cpu_lanes");
  e2e::Output o = Import(trace, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "1 CPU device,")) << o.text;
  auto q = e2e::Q(db, "SELECT e.name, t.name AS lane, e.depth FROM events e JOIN tracks t USING (run_id, track_id)"
                      " WHERE t.clock = 'device' ORDER BY e.start_ns");
  ASSERT_EQ(q.rows.size(), 4u);
  EXPECT_EQ(q.Text(0, "lane"), "rank 0 / CPU device 0 / lane 0");
  EXPECT_EQ(q.Text(1, "name"), "fusion.2");
  EXPECT_EQ(q.Text(1, "lane"), "rank 0 / CPU device 0 / lane 0");
  EXPECT_EQ(q.Int(1, "depth"), 1);
  EXPECT_EQ(q.Text(2, "lane"), "rank 0 / CPU device 0 / lane 1");
  EXPECT_EQ(q.Text(3, "lane"), "rank 0 / CPU device 0 / lane 0");
  // A span with a device and no HLO op is the host's.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE clock = 'host' AND name LIKE 'ThunkExecutor%'"), 1);
}

TEST(ImportRealGpu, XlaGpuCollectivesWithoutAnExecutionIdAreMatchedByTheirPlaceInTheStep) {
  // XLA's GPU traces give no run_id: the k-th run of an HLO collective in a
  // step on one GPU meets the k-th on the others (a loop runs it twice).
  std::string events;
  auto add = [&](const std::string& e) { absl::StrAppend(&events, events.empty() ? "" : ",\n", e); };
  for (int gpu = 0; gpu < 2; ++gpu) {
    add(absl::StrCat(R"({"ph":"M","pid":)", gpu + 1, R"(,"name":"process_name","args":{"name":"/device:GPU:)", gpu,
                     R"("}})"));
    add(absl::StrCat(R"({"ph":"M","pid":)", gpu + 1, R"j(,"tid":7,"name":"thread_name","args":{"name":"Stream #7(Compute)"}})j"));
  }
  add(R"({"ph":"M","pid":9,"name":"process_name","args":{"name":"/host:CPU"}})");
  for (int step = 0; step < 2; ++step) {
    const int base = 1000 * step;
    add(absl::StrCat(R"({"ph":"X","pid":9,"tid":1,"ts":)", base, R"(,"dur":900,"name":"train","args":{"step_num":")",
                     step, R"("}})"));
    for (int gpu = 0; gpu < 2; ++gpu)
      for (int k = 0; k < 2; ++k)
        add(absl::StrCat(R"({"ph":"X","pid":)", gpu + 1, R"(,"tid":7,"ts":)", base + 100 + 300 * k + 10 * gpu,
                         R"(,"dur":50,"name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","args":{"hlo_op":"all-reduce-start.1","hlo_module":"jit_step"}})"));
  }
  const std::string trace = WriteTemp("xla_gpus.json", absl::StrCat(R"({"traceEvents":[)", events, "]}"));
  const std::string db = e2e::TempDb("xla_gpus");
  e2e::Output o = Import(trace, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 GPUs")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives: 8 ops, 8 matched across devices")) << o.text;
  auto flows = e2e::Q(db,
                      "SELECT e.flow_id AS flow, MIN(e.start_ns) AS first, COUNT(DISTINCT t.device_id) AS d,"
                      " COUNT(*) AS n FROM events e JOIN tracks t USING (run_id, track_id)"
                      " WHERE t.clock = 'device' GROUP BY e.flow_id ORDER BY first");
  ASSERT_EQ(flows.rows.size(), 4u);
  for (size_t i = 0; i < flows.rows.size(); ++i) {
    EXPECT_EQ(flows.Int(i, "n"), 2);
    EXPECT_EQ(flows.Int(i, "d"), 2);
  }
  // GPU 1 starts each 10 us after GPU 0: it is the late one at all four.
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "Late arrivals (device clock, 4 collectives): last to arrive chip 1 4x"))
      << report.text;
}

std::string XlaTwoGpuTrace(const std::vector<std::pair<int, int>>& starts_us) {
  // Two GPUs of one host; all-reduce.1 on each at the given (GPU 0, GPU 1)
  // start times, 100 us long; steps 0-2 of 1000 us each on the host.
  std::string events;
  auto add = [&](const std::string& e) { absl::StrAppend(&events, events.empty() ? "" : ",\n", e); };
  for (int gpu = 0; gpu < 2; ++gpu) {
    add(absl::StrCat(R"({"ph":"M","pid":)", gpu + 1, R"(,"name":"process_name","args":{"name":"/device:GPU:)", gpu,
                     R"("}})"));
    add(absl::StrCat(R"({"ph":"M","pid":)", gpu + 1,
                     R"j(,"tid":7,"name":"thread_name","args":{"name":"Stream #7(Compute)"}})j"));
  }
  for (int step = 0; step < 3; ++step)
    add(absl::StrCat(R"({"ph":"X","pid":9,"tid":1,"ts":)", 1000 * step,
                     R"(,"dur":1000,"name":"train","args":{"step_num":")", step, R"("}})"));
  for (const auto& [a, b] : starts_us)
    for (int gpu = 0; gpu < 2; ++gpu)
      add(absl::StrCat(R"({"ph":"X","pid":)", gpu + 1, R"(,"tid":7,"ts":)", gpu ? b : a,
                       R"(,"dur":100,"name":"all-reduce.1","args":{"hlo_op":"all-reduce.1","hlo_module":"jit_f"}})"));
  return absl::StrCat(R"({"traceEvents":[)", events, "]}");
}

TEST(ImportRealGpu, XlaCollectivesPastTheirStepsEndAreStillPairedInOrder) {
  // GPU 0 runs each all-reduce at 900 us into the step, GPU 1 110 us later:
  // past the step's end. The k-th on one GPU meets the k-th on the other.
  const std::string db = e2e::TempDb("xla_skew");
  e2e::Output o = Import(WriteTemp("skew.json", XlaTwoGpuTrace({{900, 1010}, {1900, 2010}, {2900, 3010}})), db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives: 6 ops, 6 matched")) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT MAX(d) AS v FROM (SELECT MAX(start_ns) - MIN(start_ns) AS d FROM events"
                       " WHERE kind = 'collective' GROUP BY flow_id)"),
            110000);
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "last to arrive chip 1 3x (330 us late in all)")) << report.text;
  // Before, after and between steps alike.
  const std::string db2 = e2e::TempDb("xla_outside");
  o = Import(WriteTemp("outside.json", XlaTwoGpuTrace({{3500, 3500}, {4500, 4500}})), db2);
  EXPECT_TRUE(absl::StrContains(o.text, "XLA collectives: 4 ops, 4 matched")) << o.text;
}

TEST(ImportRealGpu, ChipsTiedForLastAreEachLastAndNotTogether) {
  // Four CPU devices; in each of 3 executions devices 2 and 3 arrive 1 ms after 0 and 1, at the same time.
  std::string events;
  for (int run = 0; run < 3; ++run)
    for (int d = 0; d < 4; ++d)
      absl::StrAppend(&events, events.empty() ? "" : ",\n",
                      absl::StrCat(R"({"ph":"X","pid":1,"tid":)", d + 1, R"(,"ts":)", 10000 * run + (d >= 2 ? 1000 : 0),
                                   R"(,"dur":50,"name":"all-reduce.1","args":{"device_ordinal":")", d,
                                   R"(","hlo_op":"all-reduce.1","hlo_module":"jit_f","run_id":")", run, R"("}})"));
  const std::string db = e2e::TempDb("xla_tie");
  e2e::Output o = Import(WriteTemp("tie.json", absl::StrCat(R"({"traceEvents":[)", events, "]}")), db);
  ASSERT_EQ(o.code, 0) << o.text;
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "Late arrivals (device clock, 3 collectives): last to arrive chip 2 3x"))
      << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "chip 3 3x")) << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "arrived together")) << report.text;
}

TEST(ImportRealGpu, AGpuAndACpuDeviceOfOneIndexAreTwoDevices) {
  const std::string db = e2e::TempDb("xla_mix");
  e2e::Output o = Import(WriteTemp("mix.json", R"j({"traceEvents":[
    {"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:GPU:0"}},
    {"ph":"M","pid":1,"tid":5,"name":"thread_name","args":{"name":"Stream #5(Compute)"}},
    {"ph":"X","pid":1,"tid":5,"ts":10,"dur":5,"name":"fusion.1"},
    {"ph":"X","pid":2,"tid":1,"ts":10,"dur":5,"name":"dot.1","args":{"device_ordinal":"0","hlo_op":"dot.1"}},
    {"ph":"X","pid":2,"tid":1,"ts":20,"dur":5,"name":"dot.1","args":{"device_ordinal":"1","hlo_op":"dot.1"}}]})j"),
                         db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "3 devices")) << o.text;
  auto q = e2e::Q(db, "SELECT name, device_id FROM tracks WHERE clock = 'device' ORDER BY device_id");
  ASSERT_EQ(q.rows.size(), 3u);
  std::set<int64_t> ids;
  for (size_t i = 0; i < q.rows.size(); ++i) ids.insert(q.Int(i, "device_id"));
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM tracks WHERE name = 'rank 0 / CPU device 0 / lane 0'"), 1);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM devices WHERE coords = '[0,0]'"), 2);  // GPU 0 and CPU device 0
}

TEST(ImportRealGpu, XlaCollectivesOfTwoHostsAreNotPairedOnClocksNotLinedUp) {
  // Two files (hosts) of TPU ops, the second's clock 5 ms ahead: nothing lines
  // the clocks up, so no collective is paired across them and none is late.
  auto host = [](int rank, int shift) {
    std::string events = absl::StrCat(R"({"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:TPU:0"}},)",
                                      R"({"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"XLA Ops"}})");
    for (int k = 0; k < 3; ++k)
      absl::StrAppend(&events, absl::StrCat(R"(,{"ph":"X","pid":1,"tid":2,"ts":)", shift + 1000 * k,
                                            R"(,"dur":50,"name":"all-reduce.1","args":{"hlo_op":"all-reduce.1"}})"));
    return absl::StrCat(R"({"distributedInfo":{"rank":)", rank, R"(,"world_size":2},"traceEvents":[)", events, "]}");
  };
  const std::string db = e2e::TempDb("xla_hosts");
  e2e::Output o = Import(absl::StrCat(WriteTemp("tpu0.json", host(0, 0)), " ", WriteTemp("tpu1.json", host(1, 5000))),
                         db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 TPUs")) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE kind = 'collective' AND flow_id IS NOT NULL"), 0);
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "Late arrivals: no collective")) << report.text;
}

// The torch.compile'd run with its GPU's work moved 40 ms later, past every
// ProfilerStep span, as a GPU far behind its host runs: each kernel keeps its
// launch's step, the import says its steps ran after their spans, and the
// report says its host step times are the dispatch. (The GPU's own
// ProfilerStep annotations, where they stay, are not device work: counted as
// such, they had hidden it.)
TEST(ImportRealGpu, AGpuFarBehindItsHostKeepsItsLaunchesStepsAndSaysSo) {
  e2e::Output text = e2e::Shell(absl::StrCat("gzip -dc ", kData, "cuda_compile.json.gz"));
  ASSERT_EQ(text.code, 0);
  nlohmann::json trace = nlohmann::json::parse(text.text);
  int moved = 0;
  for (auto& e : trace["traceEvents"])
    if (e.contains("cat") && (e["cat"] == "kernel" || e["cat"] == "gpu_memcpy" || e["cat"] == "gpu_memset")) {
      e["ts"] = e["ts"].get<double>() + 40000;
      ++moved;
    }
  ASSERT_GT(moved, 400);
  const std::string path = WriteTemp("behind.json", trace.dump());
  const std::string before = e2e::TempDb("cuda_compile_steps"), behind = e2e::TempDb("cuda_compile_behind");
  ASSERT_EQ(Import(kData + "cuda_compile.json.gz", before).code, 0);
  e2e::Output o = Import(path, behind);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Stats(behind)["steps_run_after_dispatch"].second, "info") << o.text;
  EXPECT_FALSE(Stats(behind).count("device_work_outside_steps")) << o.text;
  EXPECT_FALSE(Stats(before).count("steps_run_after_dispatch"));
  const std::string per_step = "SELECT step || ':' || COUNT(*) AS v FROM events e JOIN tracks t USING (run_id, track_id) "
                               "WHERE t.device_id = 0 AND e.kind IN ('compute', 'transfer') AND e.depth = 0 "
                               "GROUP BY step ORDER BY step";
  auto a = e2e::Q(before, per_step), b = e2e::Q(behind, per_step);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) EXPECT_EQ(a.Text(i, "v"), b.Text(i, "v"));
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", behind));
  EXPECT_TRUE(absl::StrContains(report.text, "(host: its dispatch only;")) << report.text;
}

TEST(ImportRealGpu, ALaunchBoundTorchCompileRunIsBoundByTheHost) {
  const std::string db = e2e::TempDb("cuda_compile");
  e2e::Output o = Import(kData + "cuda_compile.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto stats = Stats(db);
  ASSERT_TRUE(stats.count("host_wait_derived")) << o.text;
  const int64_t waits = Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE kind = 'host_wait'");
  EXPECT_EQ(stats["host_wait_derived"].first, waits);
  EXPECT_GT(waits, 100);
  // On the GPU's own lane, its device, the device clock.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events e JOIN tracks t USING (run_id, track_id) WHERE e.kind ="
                       " 'host_wait' AND t.clock = 'device' AND t.device_id = 0 AND t.name = 'rank 0 / GPU 0 /"
                       " waiting for host'"),
            waits);
  // Each wait ends when a kernel or copy starts whose launch began after the
  // wait did, and no kernel of the GPU runs inside a wait.
  EXPECT_EQ(Scalar(db,
                   "SELECT COUNT(*) AS v FROM events w WHERE w.kind = 'host_wait' AND NOT EXISTS ("
                   " SELECT 1 FROM events k JOIN tracks kt USING (run_id, track_id)"
                   " JOIN events l ON l.flow_id = k.flow_id AND l.clock = 'host'"
                   " WHERE kt.device_id = 0 AND k.kind <> 'host_wait' AND k.start_ns = w.start_ns + w.dur_ns"
                   " AND l.start_ns > w.start_ns)"),
            0);
  EXPECT_EQ(Scalar(db,
                   "SELECT COUNT(*) AS v FROM events w JOIN events k ON k.clock = 'device' AND k.device_id IS NOT NULL"
                   " AND k.kind <> 'host_wait'"
                   " AND k.depth = 0 AND k.start_ns < w.start_ns + w.dur_ns AND k.start_ns + k.dur_ns > w.start_ns"
                   " WHERE w.kind = 'host_wait'"),
            0);
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "Verdict: bound by host")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "launched their next op (from the trace's launches or dispatches)")) << report.text;
  // A kernel's whole C++ signature is cut in the table, whole in JSON.
  EXPECT_TRUE(absl::StrContains(report.text, "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_alig..."))
      << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)")) << report.text;
  for (absl::string_view line : absl::StrSplit(report.text, '\n')) EXPECT_LT(line.size(), 400u) << line;
  e2e::Output json = e2e::Shell(absl::StrCat(kCli, " report ", db, " --format json 2>/dev/null"));
  EXPECT_TRUE(absl::StrContains(json.text, "cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)")) << json.text;
}

TEST(ImportRealGpu, CudaGraphLaunchesGiveHostWaitsToo) {
  const std::string db = e2e::TempDb("cuda_graphs");
  e2e::Output o = Import(kData + "cuda_graphs.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_GT(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name = 'cudaGraphLaunch'"), 0);
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "Waiting for host: ")) << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "Waiting for host: none")) << report.text;
}

TEST(ImportRealGpu, AHostWaitIsAGapWhoseKernelWasLaunchedAfterTheGpuWentIdle) {
  // A: launched at 50, runs 100-200. B: launched at 250, after A ended: the
  // GPU waited 200-300. C: launched at 260, queued behind B: no wait. D:
  // launched at 150, long before the GPU went idle at 500, starts at 600 (an
  // event on another stream held it): idle, not the host's doing. E: on a
  // second stream, launched at 640 while D runs: no gap, no wait.
  std::string events = R"({"ph":"M","pid":0,"name":"process_name","args":{"name":"python"}},
    {"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":100,"dur":100,"name":"A","args":{"device":0,"stream":7,"correlation":1}},
    {"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":300,"dur":100,"name":"B","args":{"device":0,"stream":7,"correlation":2}},
    {"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":400,"dur":100,"name":"C","args":{"device":0,"stream":7,"correlation":3}},
    {"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":600,"dur":100,"name":"D","args":{"device":0,"stream":7,"correlation":4}},
    {"ph":"X","cat":"kernel","pid":0,"tid":8,"ts":650,"dur":100,"name":"E","args":{"device":0,"stream":8,"correlation":5}},
    {"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":50,"dur":5,"name":"cudaLaunchKernel","args":{"correlation":1}},
    {"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":150,"dur":5,"name":"cudaLaunchKernel","args":{"correlation":4}},
    {"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":250,"dur":5,"name":"cudaLaunchKernel","args":{"correlation":2}},
    {"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":260,"dur":5,"name":"cudaLaunchKernel","args":{"correlation":3}},
    {"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":640,"dur":5,"name":"cudaLaunchKernel","args":{"correlation":5}})";
  const std::string trace = WriteTemp("waits.json", absl::StrCat(R"({"traceEvents":[)", events, "]}"));
  const std::string db = e2e::TempDb("host_waits");
  e2e::Output o = Import(trace, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto waits = e2e::Q(db, "SELECT start_ns, dur_ns FROM events WHERE kind = 'host_wait'");
  ASSERT_EQ(waits.rows.size(), 1u) << o.text;
  // Run-relative: the earliest event (the launch at 50 us) is 0.
  EXPECT_EQ(waits.Int(0, "start_ns"), 150000);
  EXPECT_EQ(waits.Int(0, "dur_ns"), 100000);
}

TEST(ImportRealGpu, CudaSyncEventsAreMarkersBesideTheirStreamNotHostThreads) {
  // Recorded on an H200: eager steps with with_stack, record_function spans, a
  // side stream joined by an event, and enable_cuda_sync_events.
  const std::string db = e2e::TempDb("cuda_features");
  e2e::Output o = Import(kData + "cuda_features.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  const int64_t syncs = Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE category = 'cuda_sync'");
  EXPECT_EQ(syncs, 10);
  // On the GPU's rows (device clock, no chip: not device time), never a host thread.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events e JOIN tracks t USING (run_id, track_id) WHERE"
                       " e.category = 'cuda_sync' AND t.clock = 'device' AND t.device_id IS NULL"),
            syncs);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM tracks WHERE clock = 'host' AND name LIKE '%stream%'"), 0);
  // Two streams' kernels, each on its lane of GPU 0.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT track_id) AS v FROM events WHERE clock = 'device' AND device_id = 0"
                       " AND kind = 'compute'"),
            2);
}

TEST(ImportRealGpu, DdpOverGlooOnGpusRanksTheRanksOnTheHostAndBreaksTheGpusDownOnTheirOwnClock) {
  const std::string db = e2e::TempDb("ddp_gloo");
  e2e::Output o = Import(absl::StrCat(kData, "cuda_ddp_gloo_rank0.json.gz ", kData, "cuda_ddp_gloo_rank1.json.gz"), db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 hosts, 2 GPUs")) << o.text;
  e2e::Output fleet = e2e::Shell(absl::StrCat(kCli, " fleet ", db));
  ASSERT_EQ(fleet.code, 0) << fleet.text;
  EXPECT_TRUE(absl::StrContains(fleet.text, "2 chips on 2 hosts")) << fleet.text;
  EXPECT_TRUE(absl::StrContains(fleet.text, "collectives on host threads only (gloo)")) << fleet.text;
  EXPECT_TRUE(absl::StrContains(fleet.text, "per-chip step breakdown (mean per step, ms, device clock)")) << fleet.text;
  EXPECT_FALSE(absl::StrContains(fleet.text, "CPU-only")) << fleet.text;
  e2e::Output json = e2e::Shell(absl::StrCat(kCli, " fleet ", db, " --format json 2>/dev/null"));
  auto j = nlohmann::json::parse(json.text);
  EXPECT_EQ(j["clock"], "host");
  EXPECT_EQ(j["breakdown_clock"], "device");
}

TEST(ImportRealGpu, AJittedJaxStepOnOneGpuHasItsKernelsAndSteps) {
  const std::string db = e2e::TempDb("jax_gpu");
  e2e::Output o = Import(kData + "jax_gpu_mlp.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "1 GPU")) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM steps"), 5);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events e JOIN tracks t USING (run_id, track_id)"
                       " WHERE t.device_id = 0 AND t.name = 'rank 0 / GPU 0 / stream 14' AND e.step BETWEEN 0 AND 4"),
            50);  // 10 kernels of the step's command buffer, 5 steps
  for (const auto& [name, s] : Stats(db)) EXPECT_NE(s.second, "data_loss") << name;
}

}  // namespace
}  // namespace shardscope
