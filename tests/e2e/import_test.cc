// `shardscope import`: PyTorch profiler traces recorded on this machine
// (tests/data/import/record_traces.py: a CPU MLP under torch.profiler, a
// two-process gloo job), hand-written GPU-shaped Kineto files (launches and
// kernels on two streams, memcpy/memset, NCCL collectives on two ranks with a
// known clock offset) and malformed inputs, imported through the CLI and
// checked in the database; a 200 MB generated trace imports in bounded memory.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/trace_import.h"
#include "store/trace_json.h"
#include "tests/e2e/kineto_ranks.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

const std::string kData = std::string(SHARDSCOPE_TEST_SOURCE_DIR) + "/tests/data/import/";
const std::string kCli = SHARDSCOPE_CLI_BINARY;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  if (!f) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

std::string Temp(const std::string& name) {
  return test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/import_", getpid(), "_", name));
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = Temp(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

e2e::Output Import(const std::string& files, const std::string& db) {
  return e2e::Shell(absl::StrCat(kCli, " import ", files, " --db ", db));
}

// The import_stats rows of a run: name -> (count, severity).
std::map<std::string, std::pair<int64_t, std::string>> Stats(const std::string& db, int64_t run = 1) {
  std::map<std::string, std::pair<int64_t, std::string>> out;
  auto q = e2e::Q(db, absl::StrCat("SELECT name, count, severity FROM import_stats WHERE run_id = ", run));
  for (size_t i = 0; i < q.rows.size(); ++i) out[q.Text(i, "name")] = {q.Int(i, "count"), q.Text(i, "severity")};
  return out;
}

int64_t Scalar(const std::string& db, const std::string& sql) { return e2e::Q(db, sql).Int(0, "v", -999); }

// A file of `text`, imported: the exit code and output.
e2e::Output ImportText(const std::string& name, const std::string& text, const std::string& db) {
  return Import(WriteTemp(name, text), db);
}

// Every slice with a parent lies inside it, on its track, one level deeper.
void ExpectProperNesting(const std::string& db) {
  auto bad = e2e::Q(db,
                    "SELECT COUNT(*) AS v FROM slices c JOIN slices p ON p.run_id = c.run_id AND p.slice_id = c.parent_id"
                    " WHERE p.track_id <> c.track_id OR c.start_ns < p.start_ns OR c.start_ns + c.dur_ns > p.start_ns"
                    " + p.dur_ns OR c.depth <> p.depth + 1");
  EXPECT_EQ(bad.Int(0, "v"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM slices WHERE (parent_id IS NULL) <> (depth = 0)"), 0);
  // Siblings never overlap.
  EXPECT_EQ(Scalar(db,
                   "SELECT COUNT(*) AS v FROM slices a JOIN slices b ON a.run_id = b.run_id AND a.track_id = b.track_id"
                   " AND a.depth = b.depth AND coalesce(a.parent_id, -1) = coalesce(b.parent_id, -1)"
                   " AND a.slice_id < b.slice_id WHERE a.start_ns < b.start_ns + b.dur_ns AND b.start_ns < a.start_ns"
                   " + a.dur_ns AND a.dur_ns > 0 AND b.dur_ns > 0"),
            0);
}

TEST(ImportUnit, MicrosecondTextToExactNanoseconds) {
  int64_t ns = 0;
  ASSERT_TRUE(store::internal::MicrosTextToNs("140.125", &ns));
  EXPECT_EQ(ns, 140125);
  ASSERT_TRUE(store::internal::MicrosTextToNs("5573226873937.293", &ns));
  EXPECT_EQ(ns, 5573226873937293);  // beyond a double's exact nanoseconds
  ASSERT_TRUE(store::internal::MicrosTextToNs("-2.0005", &ns));
  EXPECT_EQ(ns, -2001);
  ASSERT_TRUE(store::internal::MicrosTextToNs("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  ASSERT_TRUE(store::internal::MicrosTextToNs("1.7000000000000200e15", &ns));
  EXPECT_EQ(ns, 1700000000000020000);  // a double would give ...019968
  ASSERT_TRUE(store::internal::MicrosTextToNs("7", &ns));
  EXPECT_EQ(ns, 7000);
  EXPECT_FALSE(store::internal::MicrosTextToNs("abc", &ns));
  EXPECT_FALSE(store::internal::MicrosTextToNs("", &ns));
  EXPECT_FALSE(store::internal::MicrosTextToNs("1e400", &ns));
  EXPECT_FALSE(store::internal::MicrosTextToNs("99999999999999999999", &ns));
}

TEST(ImportE2e, RealCpuTraceHasStepsNestingAndNoUnusableEvents) {
  const std::string db = e2e::TempDb("import_cpu");
  e2e::Output o = Import(kData + "cpu_mlp.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "imported 1 file into run 1")) << o.text;
  // The recorded trace: PyTorch 1.13's profiler, array form, complete events.
  nlohmann::json events = nlohmann::json::parse(Gunzip(kData + "cpu_mlp.json.gz"));
  ASSERT_TRUE(events.is_array());
  int64_t x = 0;
  std::set<int> steps;
  for (const auto& e : events) {
    if (e["ph"] == "X") ++x;
    std::string name = e["name"];
    if (absl::StartsWith(name, "ProfilerStep#")) steps.insert(std::stoi(name.substr(13)));
  }
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM slices"), x);
  auto stored_steps = e2e::Q(db, "SELECT step FROM steps WHERE run_id = 1 ORDER BY step");
  ASSERT_EQ(stored_steps.rows.size(), 3u);
  EXPECT_EQ(stored_steps.Int(0, "step"), *steps.begin());
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM steps WHERE loss IS NOT NULL"), 0);
  ExpectProperNesting(db);
  // Ops sit inside their step: every aten::linear has a step and a parent.
  EXPECT_GT(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name = 'aten::linear'"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name = 'aten::linear' AND (step IS NULL OR depth < 1)"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events e JOIN slices p ON p.slice_id = e.parent_id AND p.run_id ="
                       " e.run_id WHERE e.name = 'aten::addmm' AND p.step <> e.step"),
            0);
  // Deepest nesting goes several levels (step > linear > addmm > ...).
  EXPECT_GE(Scalar(db, "SELECT MAX(depth) AS v FROM slices"), 3);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM tracks WHERE clock <> 'host'"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM slices WHERE kind <> 'host'"), 0);
  // Zero unusable events; nothing lost.
  for (const auto& [name, cs] : Stats(db)) EXPECT_EQ(cs.second, "info") << name;
  EXPECT_TRUE(absl::StrContains(o.text, "unusable 0 (0.00%)")) << o.text;
  auto file = e2e::Q(db, "SELECT * FROM trace_imports WHERE run_id = 1");
  ASSERT_EQ(file.rows.size(), 1u);
  EXPECT_EQ(file.Int(0, "rank"), 0);
  EXPECT_EQ(file.Int(0, "world_size"), 1);
  EXPECT_EQ(file.Int(0, "clock_offset_ns", -1), 0);
  EXPECT_EQ(file.Int(0, "events"), static_cast<int64_t>(events.size()));
  EXPECT_EQ(file.Int(0, "first_ts_ns"), 0);
  EXPECT_EQ(e2e::Q(db, "SELECT status FROM runs WHERE run_id = 1").Text(0, "status"), "finished");
  // No device clock on a CPU trace: the verdict's device-clock shares are not
  // measurable, never "0.0%, below the threshold".
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  for (const char* bound : {"?  host ", "?  collectives ", "?  compute "})
    EXPECT_TRUE(absl::StrContains(report.text, bound)) << bound << "\n" << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "0.0%   >=")) << report.text;
  // Where the time went, from the timeline: names by self time on the host clock.
  EXPECT_TRUE(absl::StrContains(report.text, "Top names by self time (host clock")) << report.text;
  EXPECT_TRUE(absl::StrContains(report.text, "aten::")) << report.text;
  e2e::Output json = e2e::Shell(absl::StrCat(kCli, " report ", db, " --format json"));
  ASSERT_EQ(json.code, 0) << json.text;
  auto j = nlohmann::json::parse(json.text);
  ASSERT_EQ(j["kernels"]["by_name"].size(), 1u) << json.text;
  const auto& host = j["kernels"]["by_name"][0];
  EXPECT_EQ(host["clock"], "host");
  EXPECT_EQ(host["slices"].get<int64_t>(), x);
  int64_t self = 0;
  for (const auto& t : host["top"]) self += t["self_ns"].get<int64_t>();
  EXPECT_LE(self, host["self_ns"].get<int64_t>());
  EXPECT_GT(self, 0);
}

TEST(ImportE2e, GlooPairMatchesCollectivesAcrossRanksWithOffsets) {
  const std::string db = e2e::TempDb("import_gloo");
  e2e::Output o = Import(absl::StrCat(kData, "gloo_rank0.json.gz ", kData, "gloo_rank1.json.gz"), db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM hosts WHERE run_id = 1"), 2);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT host_id) AS v FROM tracks WHERE run_id = 1"), 2);
  // Each gloo collective of rank 0 is linked to the same one of rank 1 by one flow.
  auto gloo = e2e::Q(db,
                     "SELECT flow_id, COUNT(*) AS n, COUNT(DISTINCT host_id) AS hosts, MIN(name) AS a, MAX(name) AS b"
                     " FROM events WHERE name LIKE 'gloo:%' GROUP BY flow_id");
  ASSERT_GE(gloo.rows.size(), 5u);
  for (size_t i = 0; i < gloo.rows.size(); ++i) {
    EXPECT_TRUE(gloo.rows[i][gloo.Col("flow_id")].has_value());
    EXPECT_EQ(gloo.Int(i, "n"), 2);
    EXPECT_EQ(gloo.Int(i, "hosts"), 2);
    EXPECT_EQ(gloo.Text(i, "a"), gloo.Text(i, "b"));
  }
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name LIKE 'gloo:%' AND kind <> 'collective'"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name LIKE 'c10d::%' AND (kind <> 'collective' OR"
                       " flow_id IS NULL)"),
            0);
  auto stats = Stats(db);
  EXPECT_EQ(stats.count("collective_unmatched"), 0u);
  EXPECT_EQ(stats.count("clock_offset_unknown"), 0u);
  // Offsets stored: the reference rank 0, and rank 1's estimate.
  auto files = e2e::Q(db, "SELECT rank, clock_offset_ns, host_id, world_size FROM trace_imports ORDER BY rank");
  ASSERT_EQ(files.rows.size(), 2u);
  EXPECT_EQ(files.Int(0, "clock_offset_ns", -1), 0);
  ASSERT_TRUE(files.rows[1][files.Col("clock_offset_ns")].has_value());
  EXPECT_EQ(files.Int(1, "host_id"), 1);
  EXPECT_EQ(files.Int(1, "world_size"), 2);
  // Lined up: when the offset is consistent, every matched gloo collective overlaps on both ranks
  // (but a broadcast, whose root may leave before the others arrive).
  EXPECT_EQ(stats.count("clock_offset_inconsistent"), 0u);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events a JOIN events b ON a.flow_id = b.flow_id AND a.host_id = 0"
                       " AND b.host_id = 1 WHERE a.name LIKE 'gloo:%' AND a.name NOT LIKE 'gloo:broadcast%' AND"
                       " (a.start_ns > b.start_ns + b.dur_ns OR b.start_ns > a.start_ns + a.dur_ns)"),
            0);
  EXPECT_TRUE(absl::StrContains(o.text, "rank 1 of 2")) << o.text;
}

// A directory of export_chrome_trace's files, named as the user chose
// (rank0.json.gz, rank1.json.gz): no *.pt.trace.json in it, so its JSON files
// are the ranks, in name order. It was refused as "a directory with no trace".
TEST(ImportE2e, ADirectoryOfPlainJsonTracesIsItsRanks) {
  const std::string dir = Temp("export_chrome_trace_dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true) << dir;
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(system(absl::StrCat("cp ", kData, "gloo_rank", r, ".json.gz ", dir, "/rank", r, ".json.gz").c_str()), 0);
  const std::string db = e2e::TempDb("import_json_dir");
  e2e::Output o = Import(dir, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM hosts WHERE run_id = 1"), 2);
  EXPECT_TRUE(absl::StrContains(o.text, "rank 1 of 2")) << o.text;
  std::remove((dir + "/rank0.json.gz").c_str());
  std::remove((dir + "/rank1.json.gz").c_str());
  rmdir(dir.c_str());
}

// Two files tensorboard_trace_handler wrote for one process (a profiling
// schedule with repeat=2) are not two ranks: imported as given, and said, as
// a warning even with --quiet. Four ranks of one job (four processes) are not.
TEST(ImportE2e, TwoWindowsOfOneProcessAreSaidNotToBeRanks) {
  const std::string db = e2e::TempDb("import_tb_windows");
  // Its file names say so (WORKER.MILLISECONDS.pt.trace.json.gz); the legacy profiler's events name no pid.
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " import ", kData,
                                          "tb_w0.1795821906812.pt.trace.json.gz ", kData,
                                          "tb_w0.1795821906840.pt.trace.json.gz --quiet --db ", db, " 2>&1"));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "warning: files without distributedInfo that come from the same process"))
      << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "tb_w0.1795821906840.pt.trace.json.gz (worker tb_w0, as ")) << o.text;
  EXPECT_EQ(Stats(db).count("same_process_files"), 1u);
  const std::string job = e2e::TempDb("import_gloo4_pids");
  std::string ranks;
  for (int r = 0; r < 4; ++r) absl::StrAppend(&ranks, kData, "gloo4_rank", r, ".json.gz ");
  ASSERT_EQ(Import(ranks, job).code, 0);
  EXPECT_EQ(Stats(job).count("same_process_files"), 0u);
}

// A DDP job profiled with schedule(..., repeat=2): tensorboard_trace_handler
// wrote a file per rank per window, each saying its rank. Given all at once
// (in any order), they are one run per window, the k-th file of each rank by
// start time in window k; it was refused ("both say they are rank 0").
// Windows that differ in number between ranks, or files of one rank that
// overlap in time (not windows), are refused as before.
TEST(ImportE2e, ProfilingWindowsOfEveryRankAreARunEach) {
  const std::string dir_a = ::testing::TempDir() + absl::StrCat("/import_window_a_", getpid());
  const std::string dir_b = ::testing::TempDir() + absl::StrCat("/import_window_b_", getpid());
  std::filesystem::create_directories(dir_a);
  std::filesystem::create_directories(dir_b);
  e2e::KinetoJob job;
  job.ranks = 2;
  job.steps = 4;
  e2e::WriteKinetoJob(dir_a, job);
  job.offsets_us = {5e6, 5e6};  // the second window, 5 s later on both ranks' clocks
  job.slow = 1;
  job.factor = 1.5;
  e2e::WriteKinetoJob(dir_b, job);
  const std::string a0 = dir_a + "/rank0.json", a1 = dir_a + "/rank1.json", b0 = dir_b + "/rank0.json",
                    b1 = dir_b + "/rank1.json";
  const std::string db = e2e::TempDb("import_windows");
  e2e::Output o = Import(absl::StrCat(b1, " ", a0, " ", b0, " ", a1), db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "the files are 2 profiling windows of 2 ranks")) << o.text;
  auto files = e2e::Q(db, "SELECT run_id, rank, file AS path FROM trace_imports ORDER BY run_id, rank");
  ASSERT_EQ(files.rows.size(), 4u);
  EXPECT_EQ(files.Text(0, "path"), a0);
  EXPECT_EQ(files.Text(1, "path"), a1);
  EXPECT_EQ(files.Int(2, "run_id"), 2);
  EXPECT_EQ(files.Text(2, "path"), b0);
  EXPECT_EQ(files.Text(3, "path"), b1);
  // Each window is a whole job: its steps, and fleet finds window 2's slow rank there only.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT step) AS v FROM steps WHERE run_id = 2"), 4);
  e2e::Output f2 = e2e::Shell(absl::StrCat(kCli, " fleet ", db, " --run 2"));
  EXPECT_TRUE(absl::StrContains(f2.text, "suspect: chip 1")) << f2.text;
  // Uneven windows, and two files of one rank that overlap: refused.
  const std::string uneven = e2e::TempDb("import_windows_uneven");
  o = Import(absl::StrCat(a0, " ", a1, " ", b0), uneven);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "rank 0 has 2 files and rank 1 has 1")) << o.text;
  const std::string copy = WriteTemp("window_copy.json", ReadAll(a0) + "\n");
  o = Import(absl::StrCat(a0, " ", copy), e2e::TempDb("import_windows_overlap"));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "overlap in time: not two profiling windows of rank 0")) << o.text;
  // A window file without baseTimeNanoseconds among files with it (Kineto
  // writes it last: a file cut short loses it) cannot be ordered: it paired
  // window 2 of one rank with window 1 of the other. Refused, naming it.
  nlohmann::json cut = nlohmann::json::parse(ReadAll(b1));
  cut.erase("baseTimeNanoseconds");
  const std::string no_base = WriteTemp("window_no_base.json", cut.dump());
  o = Import(absl::StrCat(a0, " ", a1, " ", b0, " ", no_base), e2e::TempDb("import_windows_no_base"));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "window_no_base.json has no baseTimeNanoseconds and others have")) << o.text;
}

TEST(ImportE2e, GpuShapedKinetoPairHasLanesFlowsAndMatchedNccl) {
  const std::string db = e2e::TempDb("import_gpu");
  e2e::Output o = Import(absl::StrCat(kData, "gpu_rank1.json ", kData, "gpu_rank0.json"), db);
  ASSERT_EQ(o.code, 0) << o.text;
  // One GPU per rank, with its memory from deviceProperties; lanes per stream on the device clock.
  auto devices = e2e::Q(db, "SELECT device_id, host_id, hbm_bytes FROM devices ORDER BY device_id");
  ASSERT_EQ(devices.rows.size(), 2u);
  EXPECT_EQ(devices.Int(0, "host_id"), 0);
  EXPECT_EQ(devices.Int(1, "host_id"), 1);
  EXPECT_EQ(devices.Int(0, "hbm_bytes"), 85045870592);
  auto lanes = e2e::Q(db,
                      "SELECT host_id, device_id, thread_name FROM tracks WHERE clock = 'device' AND device_id IS NOT"
                      " NULL AND thread_name <> 'waiting for host' ORDER BY host_id, thread_name");
  ASSERT_EQ(lanes.rows.size(), 4u);
  EXPECT_EQ(lanes.Text(0, "thread_name"), "stream 20");
  EXPECT_EQ(lanes.Text(1, "thread_name"), "stream 7");
  EXPECT_EQ(lanes.Int(2, "device_id"), 1);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM tracks WHERE clock = 'device' AND device_id IS NULL"), 2);
  // Launch -> kernel: one flow per pair; microseconds with fractions kept to the nanosecond.
  auto gemm = e2e::Q(db, "SELECT start_ns, dur_ns, flow_id, step, kind FROM events WHERE name LIKE 'sm90_xmma_gemm%'"
                         " AND host_id = 0");
  ASSERT_EQ(gemm.rows.size(), 1u);
  EXPECT_EQ(gemm.Int(0, "start_ns"), 140125 - 90000);
  EXPECT_EQ(gemm.Int(0, "dur_ns"), 50500);
  EXPECT_EQ(gemm.Text(0, "kind"), "compute");
  EXPECT_EQ(gemm.Int(0, "step"), 5);
  auto launch = e2e::Q(db, absl::StrCat("SELECT name, clock, kind FROM events WHERE flow_id = ", gemm.Int(0, "flow_id"),
                                        " AND slice_id <> (SELECT slice_id FROM events WHERE name LIKE",
                                        " 'sm90_xmma_gemm%' AND host_id = 0)"));
  ASSERT_EQ(launch.rows.size(), 1u);
  EXPECT_EQ(launch.Text(0, "name"), "cudaLaunchKernel");
  EXPECT_EQ(launch.Text(0, "clock"), "host");
  // Copies and sets are transfers with their bytes, linked to their API call
  // (the memset has no ac2g flow event: the correlation id alone links it).
  auto copies = e2e::Q(db, "SELECT e.name, e.kind, e.bytes, (SELECT COUNT(*) FROM events l WHERE l.flow_id = e.flow_id"
                           " AND l.clock = 'host' AND l.name LIKE 'cudaMem%') AS launches FROM events e WHERE e.name"
                           " LIKE 'Mem%' AND e.host_id = 0 ORDER BY e.name");
  ASSERT_EQ(copies.rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(copies.Text(i, "kind"), "transfer");
    EXPECT_EQ(copies.Int(i, "launches"), 1) << copies.Text(i, "name");
  }
  EXPECT_EQ(copies.Int(0, "bytes"), 4096);
  EXPECT_EQ(copies.Int(1, "bytes"), 1024);
  // NCCL: each collective is one flow over both ranks' kernels, launches and nccl: ops.
  for (const char* kernel : {"ncclDevKernel_AllReduce%", "ncclKernel_Broadcast%"}) {
    auto k = e2e::Q(db, absl::StrCat("SELECT flow_id, kind, host_id, start_ns + dur_ns AS end_ns FROM events WHERE"
                                     " name LIKE '", kernel, "' ORDER BY host_id"));
    ASSERT_EQ(k.rows.size(), 2u) << kernel;
    EXPECT_EQ(k.Text(0, "kind"), "collective");
    EXPECT_EQ(k.Int(0, "flow_id"), k.Int(1, "flow_id")) << kernel;
    EXPECT_EQ(k.Int(0, "end_ns"), k.Int(1, "end_ns")) << kernel;  // the offset lines up their ends
    auto members = e2e::Q(db, absl::StrCat("SELECT host_id, name, clock FROM events WHERE flow_id = ",
                                           k.Int(0, "flow_id"), " ORDER BY host_id, clock DESC, name"));
    ASSERT_EQ(members.rows.size(), 6u) << kernel;
    EXPECT_EQ(members.Text(0, "name"), "cudaLaunchKernel");
    EXPECT_TRUE(absl::StartsWith(members.Text(1, "name"), "nccl:")) << members.Text(1, "name");
    EXPECT_EQ(members.Text(1, "clock"), "host");
  }
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name LIKE 'nccl:%' AND kind = 'collective'"), 4);
  // Bytes from the message size and dtype (1M floats).
  EXPECT_EQ(Scalar(db, "SELECT MIN(bytes) AS v FROM events WHERE name = 'nccl:all_reduce'"), 4 << 20);
  // Rank 1's clock is 37.5 us behind rank 0's; times start at the earliest event.
  auto files = e2e::Q(db, "SELECT rank, clock_offset_ns FROM trace_imports ORDER BY rank");
  ASSERT_EQ(files.rows.size(), 2u);
  EXPECT_EQ(files.Int(0, "clock_offset_ns", -1), 0);
  EXPECT_EQ(files.Int(1, "clock_offset_ns", -1), 37500);
  EXPECT_EQ(Scalar(db, "SELECT started_at_ns AS v FROM runs"), 1700000000000000000 + 90000);
  EXPECT_EQ(Scalar(db, "SELECT MIN(start_ns) AS v FROM slices"), 0);
  // Kineto's allocator events become a counter on the GPU.
  auto mem = e2e::Q(db, "SELECT device_id, value FROM counters WHERE name = 'GPU memory allocated (bytes)'");
  ASSERT_EQ(mem.rows.size(), 1u);
  EXPECT_EQ(mem.Int(0, "device_id"), 0);
  EXPECT_EQ(mem.Real(0, "value"), 8388608);
  // A global instant has no lane; displayTimeUnit is noted. Nothing lost.
  auto stats = Stats(db);
  EXPECT_EQ(stats["instant_not_thread_scoped"].first, 1);
  EXPECT_EQ(stats["display_time_unit_ignored"].first, 2);
  for (const auto& [name, cs] : stats) EXPECT_EQ(cs.second, "info") << name;
  ExpectProperNesting(db);
  EXPECT_EQ(e2e::Q(db, "SELECT clock_kinds FROM runs").Text(0, "clock_kinds"), "host,device");
}

// A file name is bytes, not always UTF-8 (a Latin-1 name, a damaged one): it
// used to abort the import (nlohmann's type_error 316 while writing
// runs.config_json) and then every JSON report of the run. Now the bytes are
// kept as U+FFFD in JSON and the run imports and reports as any other.
TEST(ImportE2e, FileNamesThatAreNotUtf8ImportAndReport) {
  const std::string db = e2e::TempDb("import_latin1");
  const std::string r0 = WriteTemp(
      "r\xff"
      "0.json",
      ReadAll(absl::StrCat(kData, "gpu_rank0.json")));
  const std::string r1 = WriteTemp(
      "r\xff"
      "1.json",
      ReadAll(absl::StrCat(kData, "gpu_rank1.json")));
  e2e::Output o = Import(absl::StrCat("'", r0, "' '", r1, "'"), db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(nlohmann::json::accept(e2e::Q(db, "SELECT config_json FROM runs").Text(0, "config_json")));
  for (const std::string cmd : {"fleet", "metrics", "recompiles", "report"}) {
    e2e::Output j = e2e::Shell(absl::StrCat(kCli, " ", cmd, " ", db, " --format json"));
    EXPECT_EQ(j.code, 0) << cmd << "\n" << j.text;
    EXPECT_TRUE(nlohmann::json::accept(j.text)) << cmd << "\n" << j.text;
  }
}

TEST(ImportE2e, ShapesOfKernelsAndOpsAreKept) {
  // record_shapes: an op's Input Dims and types; a kernel's launch grid and
  // block after the dims of the op that launched it (through its launch's
  // correlation id, or its own External id), so `diff` can tell calls apart.
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 9, "ts": 10, "dur": 40,
   "args": {"External id": 3, "Input Dims": [[64, 32], [16, 32], [16]], "Input type": ["float", "float", ""]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 20, "dur": 5,
   "args": {"correlation": 101, "External id": 3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 9, "ts": 60, "dur": 40,
   "args": {"External id": 5, "Input Dims": [[128, 32], [], [16]]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 70, "dur": 5,
   "args": {"correlation": 102, "External id": 5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 110, "dur": 5,
   "args": {"correlation": 103}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 130, "dur": 5,
   "args": {"correlation": 104}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 10,
   "args": {"device": 0, "stream": 7, "correlation": 101, "grid": [8, 8, 1], "block": [256, 1, 1]}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 80, "dur": 20,
   "args": {"device": 0, "stream": 7, "correlation": 102, "External id": 5, "grid": [16, 8, 1], "block": [256, 1, 1]}},
  {"ph": "X", "cat": "kernel", "name": "fill", "pid": 0, "tid": 7, "ts": 120, "dur": 2,
   "args": {"device": 0, "stream": 7, "correlation": 103, "grid": [1, 1, 1], "block": [128, 1, 1]}},
  {"ph": "X", "cat": "kernel", "name": "odd", "pid": 0, "tid": 7, "ts": 140, "dur": 2,
   "args": {"device": 0, "stream": 7, "correlation": 104, "grid": [{"x": 1}], "block": [32, [1, 2]]}}
]})";
  const std::string db = e2e::TempDb("import_shapes");
  e2e::Output o = ImportText("shapes.json", text, db);
  ASSERT_EQ(o.code, 0) << o.text;
  std::map<std::string, std::string> shape;  // "name at ts" -> shape
  auto q = e2e::Q(db, "SELECT name, start_ns, coalesce(shape, '') AS shape FROM events ORDER BY start_ns");
  for (size_t i = 0; i < q.rows.size(); ++i)
    shape[absl::StrCat(q.Text(i, "name"), "@", q.Int(i, "start_ns") / 1000)] = q.Text(i, "shape");
  EXPECT_EQ(shape["aten::addmm@0"], "[[64,32],[16,32],[16]] (float,float,-)");
  EXPECT_EQ(shape["aten::addmm@50"], "[[128,32],[],[16]]");
  EXPECT_EQ(shape["cudaLaunchKernel@10"], "");
  EXPECT_EQ(shape["gemm@20"], "[[64,32],[16,32],[16]] (float,float,-) grid [8,8,1] block [256,1,1]");
  EXPECT_EQ(shape["gemm@70"], "[[128,32],[],[16]] grid [16,8,1] block [256,1,1]");
  EXPECT_EQ(shape["fill@110"], "grid [1,1,1] block [128,1,1]");
  EXPECT_EQ(shape["odd@130"], "block [32,[1,2]]");  // a grid that is not numbers is dropped
  // The shape travels with the slice through every reader: the timeline's own decoder too.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT shape_id) AS v FROM slices WHERE shape_id IS NOT NULL"), 6);
}

TEST(ImportE2e, RealCudaTraceLinksEveryKernelToItsLaunch) {
  // Recorded on an NVIDIA H200 with PyTorch 2.11 (record_traces.py --cuda, with
  // a one-rank NCCL process group): Kineto's own format, ac2g and fwdbwd flows.
  const std::string db = e2e::TempDb("import_cuda");
  e2e::Output o = Import(kData + "cuda_mlp_nccl.json.gz", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "unusable 0 (0.00%)")) << o.text;
  for (const auto& [name, cs] : Stats(db)) EXPECT_EQ(cs.second, "info") << name;
  // (Not counting the waits for the host the import worked out: docs/import.md.)
  const int64_t kernels = Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE clock = 'device' AND device_id IS NOT NULL"
                                     " AND kind <> 'host_wait'");
  EXPECT_GT(kernels, 50);
  // Each kernel shares its flow with exactly one launch on a host thread, and takes its step.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events k WHERE k.clock = 'device' AND k.device_id IS NOT NULL AND"
                       " k.kind <> 'host_wait' AND k.step IS NOT NULL AND (SELECT COUNT(*) FROM events l WHERE l.flow_id = k.flow_id AND"
                       " l.clock = 'host' AND l.name LIKE 'cuda%Launch%') = 1"),
            kernels);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE clock = 'device' AND device_id IS NOT NULL AND kind NOT"
                       " IN ('compute', 'host_wait')"),
            0);
  // Each kernel keeps its launch grid and block (the trace was not recorded with record_shapes).
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE clock = 'device' AND device_id IS NOT NULL AND kind <>"
                       " 'host_wait' AND shape LIKE 'grid [%] block [%]'"),
            kernels);
  // Forward ops linked to their backward ops on the autograd thread (fwdbwd flows).
  EXPECT_GE(Scalar(db, "SELECT COUNT(*) AS v FROM (SELECT flow_id FROM events WHERE clock = 'host' AND flow_id IS NOT"
                       " NULL GROUP BY flow_id HAVING COUNT(DISTINCT track_id) = 2 AND COUNT(*) = 2)"),
            20);
  // One flow per all_reduce: its c10d op, record_param_comms and nccl: op.
  auto coll = e2e::Q(db, "SELECT flow_id, COUNT(*) AS n, GROUP_CONCAT(name, '|') AS names FROM events WHERE kind ="
                         " 'collective' GROUP BY flow_id");
  ASSERT_EQ(coll.rows.size(), 18u);
  for (size_t i = 0; i < coll.rows.size(); ++i) {
    EXPECT_EQ(coll.Int(i, "n"), 3) << coll.Text(i, "names");
    EXPECT_TRUE(absl::StrContains(coll.Text(i, "names"), "nccl:all_reduce")) << coll.Text(i, "names");
  }
  // Kineto's absolute time: baseTimeNanoseconds plus the first event.
  EXPECT_GT(Scalar(db, "SELECT started_at_ns AS v FROM runs"), 1790857026000000000);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM steps"), 3);
  ExpectProperNesting(db);
  // The GPU's user annotations (ProfilerStep#N spanning the kernels) are not
  // device time: they read as 91% of it when their lane was counted.
  e2e::Output report = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db));
  ASSERT_EQ(report.code, 0) << report.text;
  const size_t device = report.text.find("Top names by self time (device clock");
  ASSERT_NE(device, std::string::npos) << report.text;
  const std::string table = report.text.substr(device, report.text.find("\n\n", device) - device);
  EXPECT_TRUE(absl::StrContains(table, "1 annotation lane left out")) << table;
  EXPECT_FALSE(absl::StrContains(table, "ProfilerStep")) << table;
  EXPECT_TRUE(absl::StrContains(table, "gemm")) << table;
}

// A Kineto file of one rank of two: per collective, an nccl:all_reduce op
// (its process group and, when >= 0, its sequence number), the launch inside
// it and the NCCL kernel on the group's stream (20 for group "0", 21 for "1").
struct Collective {
  std::string group;
  int seq;
  int ts;
};
std::string RankFile(int rank, const std::vector<Collective>& cs) {
  std::string ev;
  int corr = 1;
  for (const Collective& c : cs) {
    const int stream = c.group == "0" ? 20 : 21;
    absl::StrAppend(&ev, ev.empty() ? "" : ",\n",
                    absl::StrFormat(R"({"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 9, "tid": 9,)"
                                    R"( "ts": %d, "dur": 20, "args": {"Process Group Name": "%s", "Process Group Ranks":)"
                                    R"( "[0, 1]"%s}},)",
                                    c.ts, c.group, c.seq >= 0 ? absl::StrCat(", \"Seq\": ", c.seq) : ""),
                    absl::StrFormat(R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,)"
                                    R"( "ts": %d, "dur": 5, "args": {"correlation": %d}},)",
                                    c.ts + 5, corr),
                    absl::StrFormat(R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",)"
                                    R"( "pid": 0, "tid": %d, "ts": %d, "dur": 50, "args": {"device": 0, "stream": %d,)"
                                    R"( "correlation": %d}})",
                                    stream, c.ts + 30, stream, corr));
    ++corr;
  }
  return absl::StrCat(R"({"distributedInfo": {"rank": )", rank, R"(, "world_size": 2}, "traceEvents": [)", ev, "]}");
}

TEST(ImportE2e, CollectivesMatchPerProcessGroupAndBySequenceNumber) {
  // Two groups whose collectives the ranks issue in opposite orders: kernels
  // (which carry no group) take their launch's op's group, so each is matched
  // within its own group, not by one order over all kernels.
  {
    const std::string db = e2e::TempDb("import_groups");
    const std::string r0 = WriteTemp("groups0.json", RankFile(0, {{"0", -1, 100}, {"1", -1, 200}}));
    const std::string r1 = WriteTemp("groups1.json", RankFile(1, {{"1", -1, 100}, {"0", -1, 200}}));
    e2e::Output o = Import(absl::StrCat(r0, " ", r1), db);
    ASSERT_EQ(o.code, 0) << o.text;
    auto flows = e2e::Q(db, "SELECT e.flow_id, COUNT(*) AS n, COUNT(DISTINCT e.host_id) AS hosts,"
                            " COUNT(DISTINCT t.thread_name) AS streams FROM events e JOIN tracks t ON t.run_id ="
                            " e.run_id AND t.track_id = e.track_id WHERE e.clock = 'device' AND e.kind <> 'host_wait' GROUP BY"
                            " e.flow_id");
    ASSERT_EQ(flows.rows.size(), 2u) << o.text;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(flows.Int(i, "n"), 2);
      EXPECT_EQ(flows.Int(i, "hosts"), 2);
      EXPECT_EQ(flows.Int(i, "streams"), 1);  // one group's stream on both ranks
    }
    EXPECT_EQ(Stats(db).count("collective_unmatched"), 0u) << o.text;
  }
  // Rank 1's window starts one collective later: by order, its first would
  // pair with rank 0's first; by sequence number it pairs with rank 0's second.
  {
    const std::string db = e2e::TempDb("import_seq");
    const std::string r0 = WriteTemp("seq0.json", RankFile(0, {{"0", 7, 100}, {"0", 8, 200}}));
    const std::string r1 = WriteTemp("seq1.json", RankFile(1, {{"0", 8, 100}}));
    e2e::Output o = Import(absl::StrCat(r0, " ", r1), db);
    ASSERT_EQ(o.code, 0) << o.text;
    // Rank 1's kernel shares its flow with rank 0's second kernel (the one launched at 205 us).
    auto pair = e2e::Q(db, "SELECT b.host_id, b.start_ns FROM events a JOIN events b ON b.flow_id = a.flow_id AND"
                           " b.host_id = 0 WHERE a.host_id = 1 AND a.clock = 'device' AND b.clock = 'device'");
    ASSERT_EQ(pair.rows.size(), 1u) << o.text;
    auto second = e2e::Q(db, "SELECT MAX(start_ns) AS v FROM events WHERE host_id = 0 AND clock = 'device'");
    EXPECT_EQ(pair.Int(0, "start_ns"), second.Int(0, "v"));
    EXPECT_EQ(Stats(db)["collective_unmatched"].first, 2);  // rank 0's seq 7: its op and its kernel
  }
}

// Tensor- and data-parallel groups: rank 3 shares no collective with rank 0
// (the reference) but does with ranks 1 and 2, whose offsets are known. Its
// clock is lined up through them, not left 250 ms away.
TEST(ImportE2e, ARankThatNeverMeetsTheReferenceIsLinedUpThroughAnother) {
  const std::string dir = Temp("tp_dp");
  std::filesystem::create_directories(dir);
  e2e::KinetoJob job;
  job.tp_dp = true;
  job.offsets_us = {0, 1500, -3000, 250000};
  const std::string files = e2e::WriteKinetoJob(dir, job);
  const std::string db = e2e::TempDb("import_tp_dp");
  e2e::Output o = Import(files, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto offsets = e2e::Q(db, "SELECT rank, clock_offset_ns FROM trace_imports ORDER BY rank");
  ASSERT_EQ(offsets.rows.size(), 4u);
  const int64_t want[] = {0, -1500000, 3000000, -250000000};
  for (size_t r = 0; r < 4; ++r) EXPECT_EQ(offsets.Int(r, "clock_offset_ns", 1), want[r]) << "rank " << r;
  EXPECT_TRUE(absl::StrContains(o.text, "matched collective kernels with rank 1")) << o.text;
  EXPECT_EQ(Stats(db).count("clock_offset_unknown"), 0u) << o.text;
  // Lined up, the steps are about a millisecond, not a quarter second.
  EXPECT_LT(Scalar(db, "SELECT MAX(end_ns - start_ns) AS v FROM step_bounds WHERE clock = 'device'"), 2000000);
}

// An older PyTorch's gloo traces name no process group: collectives are
// matched by order. Ranks in subgroups call a different number a step (rank 1
// is in both {0,1} and {1,2}), so the order pairs calls of different groups:
// said as data loss, not left to skew offsets silently. Ranks that all call
// the same number are not warned about.
TEST(ImportE2e, SubgroupsWithoutGroupNamesAreSaidToBeAmbiguous) {
  // (Each rank's process named apart: identical files are refused as copies.)
  auto rank_trace = [](int calls_per_step, size_t rank) {
    nlohmann::json ev = nlohmann::json::array();
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", "CPU functions"},
                  {"args", {{"name", absl::StrCat("trainer ", rank)}}}});
    for (int step = 0; step < 4; ++step) {
      const double t0 = 1000.0 * step;
      ev.push_back({{"ph", "X"}, {"name", absl::StrCat("ProfilerStep#", step)}, {"ts", t0}, {"dur", 900},
                    {"pid", "CPU functions"}, {"tid", 1}});
      for (int k = 0; k < calls_per_step; ++k)
        ev.push_back({{"ph", "X"}, {"name", "gloo:all_reduce"}, {"ts", t0 + 100 + 200 * k}, {"dur", 150},
                      {"pid", "CPU functions"}, {"tid", 2}});
    }
    return ev.dump();
  };
  std::string files;
  for (int r : {2, 3, 2})
    absl::StrAppend(&files, " ", WriteTemp(absl::StrCat("subgroups_", files.size(), ".json"), rank_trace(r, files.size())));
  const std::string db = e2e::TempDb("import_subgroups");
  e2e::Output o = Import(files, db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Stats(db)["collective_order_ambiguous"].second, "data_loss") << o.text;
  std::string even;
  for (int r : {2, 2, 2})
    absl::StrAppend(&even, " ", WriteTemp(absl::StrCat("even_", even.size(), ".json"), rank_trace(r, even.size())));
  const std::string even_db = e2e::TempDb("import_no_subgroups");
  o = Import(even, even_db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Stats(even_db).count("collective_order_ambiguous"), 0u) << o.text;
}

// A JAX (XLA profiler) trace: a process per device named "/device:GPU:N",
// its stream threads holding the kernels, its "XLA Ops" thread the ops that
// span them: the kernels are a GPU's device lane (XLA collectives as
// collectives), the ops annotations, the host's threads host lanes.
TEST(ImportE2e, XlaDeviceProcessesAreDevices) {
  const std::string trace = R"json({"displayTimeUnit": "ns", "traceEvents": [
    {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:GPU:1"}},
    {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "Stream #14(Compute)"}},
    {"ph": "M", "pid": 7, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
    {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "M", "pid": 9, "tid": 3, "name": "thread_name", "args": {"name": "python3"}},
    {"ph": "X", "pid": 7, "tid": 1, "ts": 1000, "dur": 50, "name": "fusion.1"},
    {"ph": "X", "pid": 7, "tid": 2, "ts": 1000, "dur": 50, "name": "fusion.1"},
    {"ph": "X", "pid": 7, "tid": 1, "ts": 1060, "dur": 20, "name": "all-reduce.3"},
    {"ph": "X", "pid": 9, "tid": 3, "ts": 990, "dur": 200, "name": "PjitFunction(train_step)"},
    {"ph": "X", "pid": 9, "tid": 3, "ts": 995, "dur": 150, "name": "train", "args": {"step_num": "3"}}]})json";
  const std::string db = e2e::TempDb("import_jax");
  e2e::Output o = ImportText("jax.json", trace, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto lanes = e2e::Q(db, "SELECT t.clock, t.device_id, e.name, e.kind FROM events e JOIN tracks t USING (run_id, track_id)"
                          " ORDER BY e.start_ns, t.device_id IS NULL");
  ASSERT_EQ(lanes.rows.size(), 5u);
  std::map<std::string, std::vector<std::string>> seen;
  for (size_t i = 0; i < lanes.rows.size(); ++i)
    seen[lanes.Text(i, "name")].push_back(
        absl::StrCat(lanes.Text(i, "clock"), " ", lanes.Text(i, "device_id", "-"), " ", lanes.Text(i, "kind")));
  EXPECT_EQ(seen["fusion.1"], (std::vector<std::string>{"device 0 compute", "device - host"}));
  EXPECT_EQ(seen["all-reduce.3"], (std::vector<std::string>{"device 0 collective"}));
  EXPECT_EQ(seen["PjitFunction(train_step)"], (std::vector<std::string>{"host - host"}));
  EXPECT_TRUE(absl::StrContains(o.text, "1 GPU")) << o.text;
  // jax.profiler.StepTraceAnnotation's span (args.step_num) is the step, and its kernels are in it.
  EXPECT_EQ(Scalar(db, "SELECT step AS v FROM steps"), 3);
  EXPECT_EQ(Scalar(db, "SELECT step AS v FROM events WHERE name = 'all-reduce.3'"), 3);
}

TEST(ImportE2e, OneRankOfTwoStillImportsWithCollectivesUnmatched) {
  const std::string db = e2e::TempDb("import_one_rank");
  e2e::Output o = Import(kData + "gpu_rank1.json", db);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Scalar(db, "SELECT host_id AS v FROM hosts"), 1);  // the rank distributedInfo gives
  auto stats = Stats(db);
  ASSERT_TRUE(stats.count("collective_unmatched")) << o.text;
  EXPECT_EQ(stats["collective_unmatched"].first, 4);  // two nccl: ops, two NCCL kernels
  EXPECT_EQ(stats["collective_unmatched"].second, "info");
  // Launch links stay.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT flow_id) AS v FROM events WHERE clock = 'device' AND flow_id IS NOT NULL"),
            6);
  EXPECT_TRUE(absl::StrContains(o.text, "collective_unmatched")) << o.text;
}

TEST(ImportE2e, ReportsOnAnImportedRunWorkOrSayTheyNeedIr) {
  const std::string db = e2e::TempDb("import_reports");
  ASSERT_EQ(Import(absl::StrCat(kData, "gpu_rank0.json ", kData, "gpu_rank1.json"), db).code, 0);
  e2e::Output runs = e2e::Shell(absl::StrCat(kCli, " runs ", db));
  ASSERT_EQ(runs.code, 0) << runs.text;
  EXPECT_TRUE(absl::StrContains(runs.text, "imported  finished")) << runs.text;
  for (const char* format : {"text", "md", "json"}) {
    e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db, " --format ", format));
    ASSERT_EQ(report.code, 0) << report.text;
    EXPECT_TRUE(absl::StrContains(report.text, format == std::string("json") ? "\"imported\": true" : "imported trace"))
        << report.text;
    EXPECT_FALSE(absl::StrContains(report.text, " h (host)")) << report.text;  // no duration from 2023 to today
  }
  e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
  EXPECT_TRUE(absl::StrContains(report.text, "chip 1 (host 1)")) << report.text;  // per-GPU time, device clock
  // The report's Metrics section says the run has none, not a table of zeros.
  EXPECT_TRUE(absl::StrContains(report.text, "was imported from another tool's trace (2 files, the first "))
      << report.text;
  EXPECT_FALSE(absl::StrContains(report.text, "CompileTime")) << report.text;
  // The commands that need IR say so in one line, and succeed.
  for (const char* cmd : {"recompiles", "sharding", "metrics", "sharding --why dot_general.1",
                          "recompiles --format json", "metrics --format json"}) {
    e2e::Output o = e2e::Shell(absl::StrCat(kCli, " ", cmd, " ", db));
    EXPECT_EQ(o.code, 0) << cmd << ": " << o.text;
    EXPECT_EQ(std::count(o.text.begin(), o.text.end(), '\n'), 1) << cmd << ": " << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "no IR")) << cmd << ": " << o.text;
    if (absl::StrContains(cmd, "json")) {
      EXPECT_TRUE(nlohmann::json::accept(o.text)) << o.text;
    }
  }
  // The timeline goes back out to Perfetto: every slice once, the flows kept.
  const std::string out = Temp("export.json");
  e2e::Output ex = e2e::Shell(absl::StrCat(kCli, " export ", db, " --chrome ", out));
  ASSERT_EQ(ex.code, 0) << ex.text;
  nlohmann::json j = nlohmann::json::parse(ReadAll(out));
  int64_t x = 0;
  std::set<int64_t> flows;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") ++x;
    if (e["ph"] == "s" || e["ph"] == "f" || e["ph"] == "t") flows.insert(e["id"].get<int64_t>());
  }
  EXPECT_EQ(x, Scalar(db, "SELECT COUNT(*) AS v FROM slices"));
  EXPECT_EQ(static_cast<int64_t>(flows.size()), Scalar(db, "SELECT COUNT(DISTINCT flow_id) AS v FROM slices"));
  // A second import appends a run to the same file.
  ASSERT_EQ(Import(kData + "cpu_mlp.json.gz", db).code, 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM runs WHERE imported = 1"), 2);
}

TEST(ImportE2e, FlowEventsLinkTheSlicesTheyBindTo) {
  // No correlation ids: an ac2g flow alone links a launch and its kernel;
  // fwdbwd-style flows bind to the slice open at their time (bp "e" at the
  // end too), an "f" without bp to the next slice on its thread; v2 flows by bind_id.
  const std::string text = R"([
    {"ph": "X", "cat": "cuda_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
    {"ph": "X", "cat": "kernel", "name": "kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 5},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 1, "tid": 1, "ts": 10},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 0, "tid": 7, "ts": 20, "bp": "e"},
    {"ph": "X", "name": "fwd", "pid": 1, "tid": 1, "ts": 30, "dur": 5},
    {"ph": "X", "name": "bwd", "pid": 1, "tid": 2, "ts": 50, "dur": 5},
    {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 31},
    {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 2, "ts": 50, "bp": "e"},
    {"ph": "X", "name": "other", "pid": 1, "tid": 4, "ts": 70, "dur": 5},
    {"ph": "s", "cat": "x", "name": "n", "id": 5, "pid": 1, "tid": 4, "ts": 71},
    {"ph": "f", "cat": "x", "name": "n", "id": 5, "pid": 1, "tid": 3, "ts": 60},
    {"ph": "X", "name": "next", "pid": 1, "tid": 3, "ts": 65, "dur": 5},
    {"ph": "X", "name": "p", "pid": 2, "tid": 1, "ts": 80, "dur": 1, "bind_id": "b", "flow_out": true},
    {"ph": "X", "name": "q", "pid": 2, "tid": 2, "ts": 90, "dur": 1, "bind_id": "b", "flow_in": true}
  ])";
  const std::string db = e2e::TempDb("import_flows");
  e2e::Output o = ImportText("flows.json", text, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto flows = e2e::Q(db, "SELECT GROUP_CONCAT(name, '+') AS names FROM (SELECT flow_id, name FROM events WHERE flow_id"
                          " IS NOT NULL ORDER BY flow_id, start_ns) GROUP BY flow_id ORDER BY names");
  std::vector<std::string> got;
  for (size_t i = 0; i < flows.rows.size(); ++i) got.push_back(flows.Text(i, "names"));
  EXPECT_EQ(got, (std::vector<std::string>{"fwd+bwd", "launch+kernel", "next+other", "p+q"})) << o.text;
  EXPECT_EQ(Stats(db).size(), 0u) << o.text;
  // A flow through collectives' slices (s, t, t, f): one flow, and no flow
  // said to lack its source (the collectives' op names are not flows).
  const std::string through = e2e::TempDb("import_flow_through");
  o = ImportText("flow_through.json", R"([
    {"ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 9, "name": "c10d::allreduce_"},
    {"ph": "X", "pid": 2, "tid": 4, "ts": 6, "dur": 11, "name": "c10d::allreduce_"},
    {"ph": "X", "pid": 3, "tid": 7, "ts": 4, "dur": 16, "name": "c10d::allreduce_"},
    {"ph": "s", "id": 1, "pid": 3, "tid": 7, "ts": 4, "name": "collective", "cat": "collective"},
    {"ph": "t", "id": 1, "pid": 1, "tid": 1, "ts": 5, "name": "collective", "cat": "collective"},
    {"ph": "f", "id": 1, "pid": 2, "tid": 4, "ts": 6, "name": "collective", "cat": "collective", "bp": "e"}])",
                 through);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(Stats(through).count("flow_without_source"), 0u) << o.text;
  EXPECT_EQ(Scalar(through, "SELECT count(DISTINCT flow_id) AS v FROM events WHERE flow_id IS NOT NULL"), 1);
}

TEST(ImportE2e, SpilledChunksGiveTheSameRun) {
  // The same import with records spilled in chunks of 16 (merged back from
  // temporary files) and held in memory must store the same slices.
  const std::string a = e2e::TempDb("import_mem"), b = e2e::TempDb("import_spill");
  // The CPU trace has no distributedInfo: it takes the lowest free rank, 2.
  const std::vector<std::string> files = {kData + "gpu_rank0.json", kData + "gpu_rank1.json",
                                          kData + "cpu_mlp.json.gz"};
  store::ImportOptions spill;
  spill.chunk_records = 16;
  auto ra = store::ImportChromeTraces(files, a);
  ASSERT_TRUE(ra.ok()) << ra.status();
  auto rb = store::ImportChromeTraces(files, b, spill);
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(ra->slices, rb->slices);
  const std::string sql =
      "SELECT slice_id, track_id, start_ns, dur_ns, depth, parent_id, name, kind, step, flow_id, bytes FROM events"
      " ORDER BY slice_id";
  auto qa = e2e::Q(a, sql), qb = e2e::Q(b, sql);
  ASSERT_GT(qa.rows.size(), 500u);
  EXPECT_EQ(qa.rows, qb.rows);
  EXPECT_EQ(ra->hosts, 3);
}

TEST(ImportE2e, MalformedFilesGiveClearErrorsOrDataLossStats) {
  // Refused outright, naming the file; the database is not created.
  struct Refused {
    std::string name, text, says;
  };
  const std::vector<Refused> refused = {
      {"empty.json", "", "is empty"},
      {"text.json", "this is not a trace\n", "is not JSON"},
      {"number.json", "42", "not a Chrome trace"},
      {"noevents.json", "{\"foo\": 1}", "no \"traceEvents\" array"},
      {"events_number.json", "{\"traceEvents\": 5}", "\"traceEvents\" is not an array"},
      {"events_object.json", "{\"traceEvents\": {}}", "\"traceEvents\" is an object"},
      {"bad_middle.json",
       "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"name\": \"a\"}, {\"ph\": X}]}",
       "(in event #1 of traceEvents)"},
      {"nothing_usable.json", "[{\"ph\": \"X\", \"ts\": \"soon\", \"dur\": 1, \"pid\": 1, \"tid\": 1}]",
       "holds no usable trace events"},
      {"protobuf.perfetto-trace", std::string("\x0a\x2a\x0a\x12\x08\x01\x12\x0e\x00\x00\x00\x00", 12),
       "looks like a Perfetto protobuf trace"},
      {"centuries.json",
       "[{\"ph\": \"X\", \"name\": \"a\", \"ts\": -4000000000000000, \"dur\": 1, \"pid\": 1, \"tid\": 1},"
       " {\"ph\": \"X\", \"name\": \"b\", \"ts\": 3999999999999999, \"dur\": 1, \"pid\": 1, \"tid\": 1}]",
       "span more than a century"},
  };
  for (const Refused& r : refused) {
    const std::string db = e2e::TempDb("import_refused");
    e2e::Output o = ImportText(r.name, r.text, db);
    EXPECT_EQ(o.code, 1) << r.name << ": " << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, r.name)) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, r.says)) << r.name << ": " << o.text;
    EXPECT_NE(access(db.c_str(), F_OK), 0) << r.name << ": a failed import made " << db;
  }
  {
    // Bad JSON deep in the file: the byte offset.
    const std::string db = e2e::TempDb("import_refused");
    const std::string text = "[{\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1,\"name\":\"a\"},\n{\"ph\":\"X\",]";
    e2e::Output o = ImportText("bad_middle2.json", text, db);
    EXPECT_EQ(o.code, 1) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, absl::StrCat("at byte ", text.rfind(']') + 1))) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "event #1")) << o.text;
  }
  // A copy of a rank's trace given as another rank: said, naming both.
  {
    const std::string db = e2e::TempDb("import_copy");
    const std::string copy = Temp("rank_copy.json");
    ASSERT_EQ(e2e::Shell(absl::StrCat("cp ", kData, "gloo_rank0.json.gz ", copy)).code, 0);
    e2e::Output o = e2e::Shell(absl::StrCat(kCli, " import --quiet ", kData, "gloo_rank0.json.gz ", copy, " --db ", db));
    EXPECT_TRUE(absl::StrContains(o.text, "warning: files that hold the same bytes") &&
                absl::StrContains(o.text, "rank_copy.json"))
        << o.text;
    EXPECT_EQ(Stats(db)["identical_files"], (std::pair<int64_t, std::string>{1, "error"})) << o.text;
  }
  // Damaged compressed data that inflates to broken JSON: the gzip's damage is
  // named, not only the JSON error it caused.
  {
    const std::string db = e2e::TempDb("import_refused");
    const std::string gz = Temp("damaged.json.gz");
    std::string text = "[";
    for (int i = 0; i < 4000; ++i)
      absl::StrAppend(&text, i ? "," : "", R"({"ph":"X","name":"op)", i % 7, R"(","ts":)", i * 10,
                      R"(,"dur":5,"pid":1,"tid":1})");
    const std::string plain = WriteTemp("damaged.json", text + "]");
    ASSERT_EQ(e2e::Shell(absl::StrCat("gzip -n -c ", plain, " > ", gz)).code, 0);
    const std::string bytes = ReadAll(gz);
    std::string broken = bytes;
    for (size_t at = bytes.size() / 2; at < bytes.size() / 2 + 8; ++at) broken[at] = static_cast<char>(~broken[at]);
    std::ofstream(gz, std::ios::binary) << broken;
    e2e::Output o = Import(gz, db);
    EXPECT_TRUE(absl::StrContains(o.text, "gzip data is damaged")) << o.text;
  }
  // A database given as a trace, a directory, a FIFO (never blocks), a missing file.
  {
    const std::string db = e2e::TempDb("import_refused");
    const std::string other = e2e::TempDb("import_other");
    ASSERT_EQ(Import(kData + "gpu_rank0.json", other).code, 0);
    e2e::Output o = Import(other, db);
    EXPECT_EQ(o.code, 1);
    EXPECT_TRUE(absl::StrContains(o.text, "is an SQLite database")) << o.text;
    // A directory stands for the traces in it (docs/import.md): one with none is refused, saying where it looked.
    const std::string dir = Temp("no_traces_dir");
    ASSERT_EQ(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true) << dir;
    o = Import(dir, db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "is a directory with no trace in it")) << o.text;
    rmdir(dir.c_str());
    const std::string fifo = Temp("fifo");
    std::remove(fifo.c_str());  // one left by an earlier run whose process had this pid
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo << ": " << std::strerror(errno);
    o = Import(fifo, db);
    std::remove(fifo.c_str());
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "FIFO")) << o.text;
    o = Import(Temp("missing.json"), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "no such file")) << o.text;
    o = e2e::Shell(absl::StrCat(kCli, " import ", kData, "gpu_rank0.json"));
    EXPECT_EQ(o.code, 2) << o.text;
    // Two files that claim the same rank.
    const std::string copy0 = WriteTemp("rank0_again.json", ReadAll(kData + "gpu_rank0.json") + "\n");
    o = Import(absl::StrCat(kData, "gpu_rank0.json ", copy0), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "both say they are rank 0")) << o.text;
    // One file given twice, by one path or by a link: one rank, not two (a
    // file without distributedInfo would otherwise become ranks 0 and 1).
    o = Import(absl::StrCat(kData, "cpu_mlp.json.gz ", kData, "cpu_mlp.json.gz"), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "are the same path: each rank's trace is imported once"))
        << o.text;
    const std::string link = Temp("link_to_cpu_mlp.json.gz");
    std::remove(link.c_str());
    ASSERT_EQ(symlink((kData + "cpu_mlp.json.gz").c_str(), link.c_str()), 0);
    o = Import(absl::StrCat(kData, "cpu_mlp.json.gz ", link), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "are the same file")) << o.text;
    // distributedInfo that contradicts itself, or the other ranks: refused, not a "rank 5 of 6".
    const std::string rank1 = kData + "gpu_rank1.json";
    const std::string rank0 = ReadAll(kData + "gpu_rank0.json");
    auto with = [&](const std::string& from, const std::string& to) {
      std::string t = rank0;
      const size_t at = t.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) t.replace(at, from.size(), to);
      return t;
    };
    const std::string r5 = WriteTemp("rank5_of_2.json", with("\"rank\": 0", "\"rank\": 5"));
    const std::string w4 = WriteTemp("world4.json", with("\"world_size\": 2", "\"world_size\": 4"));
    o = Import(absl::StrCat(r5, " ", rank1), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "distributedInfo.rank 5 is not below its world_size 2"))
        << o.text;
    o = Import(absl::StrCat(w4, " ", rank1), db);
    EXPECT_TRUE(o.code == 1 && absl::StrContains(o.text, "says world_size 4 and") &&
                absl::StrContains(o.text, "not ranks of one job"))
        << o.text;
    EXPECT_NE(access(db.c_str(), F_OK), 0) << "a refused import made " << db;
  }
  // Cut short: what came before is kept, and the loss is counted and said.
  const std::string gz = ReadAll(kData + "cpu_mlp.json.gz");
  const std::string json = Gunzip(kData + "cpu_mlp.json.gz");
  const std::string gpu = ReadAll(kData + "gpu_rank0.json");
  struct Cut {
    std::string name, bytes, stat;
  };
  const std::vector<Cut> cuts = {
      {"cut.json.gz", gz.substr(0, gz.size() * 6 / 10), "truncated_gzip"},
      {"cut_array.json", json.substr(0, json.size() * 6 / 10), "truncated_json"},
      {"cut_object.json", gpu.substr(0, gpu.size() / 2), "truncated_json"},
  };
  for (const Cut& c : cuts) {
    const std::string db = e2e::TempDb("import_cut");
    e2e::Output o = ImportText(c.name, c.bytes, db);
    ASSERT_EQ(o.code, 0) << c.name << ": " << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "cut short")) << o.text;
    auto stats = Stats(db);
    ASSERT_TRUE(stats.count(c.stat)) << c.name << ": " << o.text;
    EXPECT_EQ(stats[c.stat].second, "data_loss");
    EXPECT_GT(Scalar(db, "SELECT COUNT(*) AS v FROM slices"), 0) << c.name;
    ExpectProperNesting(db);
  }
  // A baseTimeNanoseconds at int64's end is ignored, not overflowed.
  {
    const std::string db = e2e::TempDb("import_base");
    e2e::Output o = ImportText("base.json",
                               "{\"baseTimeNanoseconds\": 9223372036854775807, \"traceEvents\": [{\"ph\": \"X\","
                               " \"name\": \"a\", \"ts\": 1, \"dur\": 4000000000000000, \"pid\": 1, \"tid\": 1}]}",
                               db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["bad_base_time"].first, 1);
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM slices"), 4000000000000000000);
  }
  // Two traces concatenated into one file: the second is not imported, and
  // that is data lost (said), not "trailing bytes"; trailing junk that is not
  // a document loses nothing.
  {
    const std::string one = R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 5, "pid": 1, "tid": 1}]})";
    const std::string db = e2e::TempDb("import_two_docs");
    e2e::Output o = ImportText("two_docs.json", one + "\n" + one, db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["second_json_document"].second, "data_loss") << o.text;
    const std::string junk = e2e::TempDb("import_junk_after");
    o = ImportText("junk_after.json", one + "\n%%EOF", junk);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(junk)["trailing_data"].second, "info") << o.text;
    EXPECT_EQ(Stats(junk).count("second_json_document"), 0u) << o.text;
  }
  // A gzip whose checksum does not match (a byte of its stored data changed):
  // what was read may be wrong, and the import says so; a gzip cut inside its
  // trailer, after the whole JSON, lost nothing but the check.
  {
    const std::string text =
        R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 5000, "pid": 1, "tid": 1}]})";
    std::string gz(compressBound(text.size()) + 64, '\0');
    z_stream zs{};
    ASSERT_EQ(deflateInit2(&zs, 0, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);  // level 0: stored
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(gz.data());
    zs.avail_out = static_cast<uInt>(gz.size());
    ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
    gz.resize(zs.total_out);
    deflateEnd(&zs);
    std::string flipped = gz;
    const size_t at = flipped.find("5000");
    ASSERT_NE(at, std::string::npos);
    flipped[at] = '9';
    const std::string db = e2e::TempDb("import_gzip_crc");
    e2e::Output o = ImportText("flipped.json.gz", flipped, db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["gzip_checksum_mismatch"].second, "data_loss") << o.text;
    EXPECT_EQ(Stats(db).count("gzip_trailing_garbage"), 0u) << o.text;
    const std::string cut = e2e::TempDb("import_gzip_no_trailer");
    o = ImportText("no_trailer.json.gz", gz.substr(0, gz.size() - 4), cut);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(cut)["gzip_trailer_missing"].second, "info") << o.text;
    EXPECT_EQ(Scalar(cut, "SELECT dur_ns AS v FROM events"), 5000000);
  }
  // A lone surrogate escape (Python's json.dumps writes them) is read as
  // U+FFFD, not a refusal of the file; a proper pair stays its character,
  // wherever the escapes fall against the reader's 256 KiB pieces.
  for (size_t pad = 262130; pad <= 262146; pad += 4) {
    const std::string head = R"([{"ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "name": ")";
    const std::string name = std::string(pad - head.size(), 'a') + R"(\ud800x\ud83d\ude00)";
    const std::string db = e2e::TempDb(absl::StrCat("import_surrogate_", pad));
    e2e::Output o = ImportText(absl::StrCat("surrogate_", pad, ".json"), head + name + R"("}])", db);
    ASSERT_EQ(o.code, 0) << pad << ": " << o.text;
    EXPECT_EQ(Stats(db)["lone_surrogate_escape"].first, 1) << pad;
    const std::string stored = e2e::Q(db, "SELECT name FROM names WHERE name LIKE 'aaa%'").Text(0, "name");
    EXPECT_TRUE(absl::EndsWith(stored, "\xef\xbf\xbdx\xf0\x9f\x98\x80")) << pad;  // U+FFFD, x, U+1F600
  }
  // A byte that is not UTF-8 (Latin-1 from a C tool) is read as U+FFFD and
  // counted, not a refusal of the file; a real 4-byte character stays whole
  // wherever it falls against the reader's 256 KiB pieces.
  for (size_t pad = 262141; pad <= 262145; ++pad) {
    const std::string head = R"([{"ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "name": ")";
    const std::string name = std::string(pad - head.size(), 'a') + "\xf0\x9f\x98\x80" + "caf\xe9";
    const std::string db = e2e::TempDb(absl::StrCat("import_latin1_", pad));
    e2e::Output o = ImportText(absl::StrCat("latin1_", pad, ".json"), head + name + R"("}])", db);
    ASSERT_EQ(o.code, 0) << pad << ": " << o.text;
    EXPECT_EQ(Stats(db)["invalid_utf8"], (std::pair<int64_t, std::string>{1, "info"})) << pad;
    const std::string stored = e2e::Q(db, "SELECT name FROM names WHERE name LIKE 'aaa%'").Text(0, "name");
    EXPECT_TRUE(absl::EndsWith(stored, "a\xf0\x9f\x98\x80" "caf\xef\xbf\xbd")) << pad;  // U+1F600, caf, U+FFFD
  }
  // Bare NaN, Infinity, -Infinity and inf (Python's json, Kineto's bandwidth
  // of a zero-length copy) are read as null and counted, not a refusal of the
  // file; the same words inside strings stay as written, wherever a word falls
  // against the reader's 256 KiB pieces.
  for (size_t pad = 262138; pad <= 262146; pad += 2) {
    const std::string head = R"([{"ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "name": ")";
    const std::string name = std::string(pad - head.size(), 'a');
    const std::string text =
        head + name + R"(", "args": {"bw": NaN, "x": [Infinity, -Infinity, inf, -inf, nan], "ok": true}},)" +
        R"({"ph": "X", "ts": 20, "dur": 5, "pid": 1, "tid": 1, "name": "NaN Infinity \"inf\" -Infinity",)" +
        R"( "args": {"n": null, "f": false}},)" + R"({"ph": "X", "ts": 30, "dur": NaN, "pid": 1, "tid": 1, "name": "c"}])";
    const std::string db = e2e::TempDb(absl::StrCat("import_non_finite_", pad));
    e2e::Output o = ImportText(absl::StrCat("non_finite_", pad, ".json"), text, db);
    ASSERT_EQ(o.code, 0) << pad << ": " << o.text;
    EXPECT_EQ(Stats(db)["non_finite_literal"], (std::pair<int64_t, std::string>{7, "data_loss"})) << pad;
    EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM names WHERE name = 'NaN Infinity \"inf\" -Infinity'"), 1) << pad;
    EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name LIKE 'aaa%' OR name LIKE 'NaN%'"), 2) << pad;
  }
  // A NUL inside a name is part of it: the report shows it escaped, whole.
  {
    const std::string db = e2e::TempDb("import_nul_name");
    e2e::Output o = ImportText("nul.json", R"([{"ph": "X", "name": "ab\u0000cd", "ts": 0, "dur": 10, "pid": 1, "tid": 1}])", db);
    ASSERT_EQ(o.code, 0) << o.text;
    e2e::Output report = e2e::Shell(absl::StrCat(kCli, " report ", db));
    EXPECT_TRUE(absl::StrContains(report.text, "ab\\x00cd")) << report.text;
  }
  // An E written before its B (a file not in time order) closes it as the
  // events sorted by time would, instead of being dropped while the B runs
  // to the end of the file.
  {
    const std::string db = e2e::TempDb("import_end_first");
    e2e::Output o = ImportText(
        "end_first.json",
        R"([{"ph": "E", "pid": 1, "tid": 1, "ts": 100}, {"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": 500, "dur": 10},
            {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
            {"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": 10, "dur": 20}])",
        db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'outer'"), 100000);
    EXPECT_EQ(Scalar(db, "SELECT depth AS v FROM events WHERE name = 'late'"), 0);
    EXPECT_EQ(Stats(db)["begin_end_out_of_order"].second, "info") << o.text;
    EXPECT_EQ(Stats(db).count("unmatched_end"), 0u) << o.text;
    EXPECT_EQ(Stats(db).count("begin_without_end"), 0u) << o.text;
  }
  // B/E events out of time order (a file merged or written unsorted) are
  // paired in time order, as the viewers sort them: not LIFO in file order,
  // which closed the wrong slice and dropped the other.
  {
    const std::string db = e2e::TempDb("import_be_unsorted");
    e2e::Output o = ImportText("be_unsorted.json",
                               R"([{"ph": "B", "name": "first", "pid": 1, "tid": 1, "ts": 0},
                                   {"ph": "B", "name": "second", "pid": 1, "tid": 1, "ts": 20},
                                   {"ph": "E", "pid": 1, "tid": 1, "ts": 10},
                                   {"ph": "E", "pid": 1, "tid": 1, "ts": 30}])",
                               db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'first'"), 10000);
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'second'"), 10000);
    EXPECT_EQ(Scalar(db, "SELECT max(depth) AS v FROM events"), 0);
    EXPECT_EQ(Stats(db)["begin_end_out_of_order"].second, "info") << o.text;
    EXPECT_EQ(Stats(db).count("end_before_begin"), 0u) << o.text;
    EXPECT_EQ(Stats(db).count("begin_end_ambiguous"), 0u) << o.text;
  }
  // Every step's B, then every E: steps of their own length, nested work kept.
  {
    std::string text = "[";
    for (int i = 0; i < 4; ++i)
      absl::StrAppend(&text, R"({"ph": "B", "name": "ProfilerStep#)", i, R"(", "pid": 1, "tid": 1, "ts": )", i * 1000,
                      "},", R"({"ph": "B", "name": "work", "pid": 1, "tid": 1, "ts": )", i * 1000 + 100, "},");
    for (int i = 0; i < 4; ++i)
      absl::StrAppend(&text, R"({"ph": "E", "pid": 1, "tid": 1, "ts": )", i * 1000 + 600, "},",
                      R"({"ph": "E", "pid": 1, "tid": 1, "ts": )", i * 1000 + 800, i == 3 ? "}" : "},");
    const std::string db = e2e::TempDb("import_be_steps");
    e2e::Output o = ImportText("be_steps.json", text + "]", db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(e2e::Q(db, "SELECT count(*) AS n, min(wall_ns) AS lo, max(wall_ns) AS hi FROM steps").Int(0, "n"), 4);
    EXPECT_EQ(Scalar(db, "SELECT min(wall_ns) AS v FROM steps"), 800000);
    EXPECT_EQ(Scalar(db, "SELECT max(wall_ns) AS v FROM steps"), 800000);
    EXPECT_EQ(Scalar(db, "SELECT count(*) AS v FROM events WHERE name = 'work' AND dur_ns = 500000 AND depth = 1"), 4);
    ExpectProperNesting(db);
  }
  // Back-to-back slices written in reverse: at the shared times an end and a
  // begin the file's order cannot pair. The numbers there may be wrong, so it
  // is data loss, said on stderr even with --quiet.
  {
    const std::string path = WriteTemp("be_reversed.json",
                                       R"([{"ph": "E", "pid": 1, "tid": 1, "ts": 20},
                                           {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 10},
                                           {"ph": "E", "pid": 1, "tid": 1, "ts": 10},
                                           {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0}])");
    const std::string db = e2e::TempDb("import_be_reversed");
    e2e::Output o = e2e::Shell(absl::StrCat(kCli, " import --quiet ", path, " --db ", db));
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["begin_end_ambiguous"], (std::pair<int64_t, std::string>{1, "data_loss"})) << o.text;
    EXPECT_TRUE(absl::StrContains(o.text, "warning: 1 begin_end_ambiguous")) << o.text;
    // Ends first at a shared time: two back-to-back slices, as written.
    EXPECT_EQ(Scalar(db, "SELECT count(*) AS v FROM events WHERE dur_ns = 10000 AND depth = 0"), 2);
  }
  // Counters: a series per arg whichever args each event carries, an id's
  // series apart, numbers in strings read, other values counted; the same
  // host counter from two ranks is a series per rank, not one zigzag.
  {
    const std::string db = e2e::TempDb("import_counter_series");
    e2e::Output o = ImportText("counters.json",
                               R"([{"ph": "C", "name": "mem", "ts": 0, "pid": 1, "args": {"used": 10}},
                                   {"ph": "C", "name": "mem", "ts": 1, "pid": 1, "args": {"used": 20, "free": "5"}},
                                   {"ph": "C", "name": "mem", "ts": 2, "pid": 1, "args": {"used": 30, "note": "x"}},
                                   {"ph": "C", "name": "ctr", "id": "a", "ts": 0, "pid": 1, "args": {"value": 1}},
                                   {"ph": "C", "name": "ctr", "id": "b", "ts": 0, "pid": 1, "args": {"value": 2}}])",
                               db);
    ASSERT_EQ(o.code, 0) << o.text;
    auto series = [&](const std::string& name) {
      return e2e::Q(db, absl::StrCat("SELECT group_concat(value) AS v FROM (SELECT value FROM counters WHERE name = '",
                                     name, "' ORDER BY ts_ns)"))
          .Text(0, "v");
    };
    EXPECT_EQ(series("mem.used"), "10.0,20.0,30.0");
    EXPECT_EQ(series("mem.free"), "5.0");
    EXPECT_EQ(series("ctr [a]"), "1.0");
    EXPECT_EQ(series("ctr [b]"), "2.0");
    EXPECT_EQ(Stats(db)["counter_value_not_numeric"], (std::pair<int64_t, std::string>{1, "data_loss"}));
    const std::string r0 = WriteTemp("mem_rank0.json", R"({"distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": [{"ph": "C", "name": "rss", "ts": 0, "pid": 10, "args": {"value": 1000}},
                        {"ph": "C", "name": "rss", "ts": 2, "pid": 10, "args": {"value": 1001}}]})");
    const std::string r1 = WriteTemp("mem_rank1.json", R"({"distributedInfo": {"rank": 1, "world_size": 2},
        "traceEvents": [{"ph": "C", "name": "rss", "ts": 1, "pid": 10, "args": {"value": 5000}}]})");
    const std::string two = e2e::TempDb("import_counter_ranks");
    ASSERT_EQ(Import(absl::StrCat(r0, " ", r1), two).code, 0);
    EXPECT_EQ(e2e::Q(two, "SELECT group_concat(value) AS v FROM counters WHERE name = 'rank 0 / pid 10 / rss'")
                  .Text(0, "v"),
              "1000.0,1001.0");
    EXPECT_EQ(e2e::Q(two, "SELECT group_concat(value) AS v FROM counters WHERE name = 'rank 1 / pid 10 / rss'")
                  .Text(0, "v"),
              "5000.0");
  }
  // A second "traceEvents" key: both arrays' events, said.
  {
    const std::string db = e2e::TempDb("import_events_twice");
    e2e::Output o = ImportText("events_twice.json",
                               R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 1}],
                                   "traceEvents": [{"ph": "X", "name": "b", "ts": 5, "dur": 1, "pid": 1, "tid": 1}]})",
                               db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Scalar(db, "SELECT count(*) AS v FROM events"), 2);
    EXPECT_EQ(Stats(db)["trace_events_repeated"], (std::pair<int64_t, std::string>{1, "info"}));
  }
  // One step number at two separate times (a restarted schedule): said.
  {
    const std::string db = e2e::TempDb("import_step_twice");
    e2e::Output o = ImportText(
        "step_twice.json",
        R"([{"ph": "X", "name": "ProfilerStep#0", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
            {"ph": "X", "name": "ProfilerStep#0", "ts": 20, "dur": 10, "pid": 1, "tid": 1}])",
        db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["step_number_repeated"], (std::pair<int64_t, std::string>{1, "info"})) << o.text;
  }
  // An array without its final ']' is allowed by the format: nothing lost.
  {
    const std::string db = e2e::TempDb("import_unterminated");
    e2e::Output o = ImportText("open_array.json", json.substr(0, json.rfind(']')), db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Stats(db)["json_array_unterminated"].second, "info");
  }
  // Two kernels of one GPU stream whose timestamps overlap by a rounding
  // (Kineto writes such): the second stays a kernel of its own, all but the
  // overlap kept, not a 1 ns child of the first.
  {
    const std::string db = e2e::TempDb("import_kernel_overlap");
    e2e::Output o = ImportText(
        "kernels.json",
        R"({"traceEvents": [
          {"ph": "X", "cat": "kernel", "name": "k1", "ts": 1000.0, "dur": 100.0, "pid": 0, "tid": 7,
           "args": {"device": 0, "stream": 7}},
          {"ph": "X", "cat": "kernel", "name": "k2", "ts": 1099.999, "dur": 100.0, "pid": 0, "tid": 7,
           "args": {"device": 0, "stream": 7}}]})",
        db);
    ASSERT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(Scalar(db, "SELECT depth AS v FROM events WHERE name = 'k2'"), 0);
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'k2'"), 99999);
    EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'k1'"), 100000);
    EXPECT_EQ(Stats(db)["slice_overlaps_previous"].first, 1);
  }
  // Wrong types, negative durations, unknown phases, B/E trouble: each counted
  // by reason, the good events kept.
  const std::string odd = R"([
    {"ph": "X", "name": "good", "ts": 10, "dur": 100, "pid": 1, "tid": 1},
    {"ph": "X", "name": "child", "ts": 20, "dur": 10, "pid": 1, "tid": 1, "args": [1, 2]},
    {"ph": "X", "name": 5, "ts": 30, "dur": 5, "pid": 1, "tid": 1},
    {"ph": "X", "name": "bad ts", "ts": "abc", "dur": 1, "pid": 1, "tid": 1},
    {"ph": "X", "name": "no dur", "ts": 40, "pid": 1, "tid": 1},
    {"ph": "X", "name": "text dur", "ts": 40, "dur": true, "pid": 1, "tid": 1},
    {"ph": "X", "name": "negative", "ts": 50, "dur": -5, "pid": 1, "tid": 1},
    {"ph": "X", "name": "pid object", "ts": 50, "dur": 5, "pid": {"a": 1}, "tid": 1},
    {"ph": "Z", "name": "unknown", "ts": 60, "pid": 1, "tid": 1},
    {"ph": "XX", "name": "unknown too", "ts": 60, "pid": 1, "tid": 1},
    {"name": "no phase", "ts": 60, "pid": 1, "tid": 1},
    {"ph": "b", "name": "async", "ts": 60, "id": 1, "pid": 1, "tid": 1},
    7, [1], "x", null,
    {"ph": "E", "ts": 70, "pid": 1, "tid": 2},
    {"ph": "B", "name": "opened", "ts": 80, "pid": 1, "tid": 2},
    {"ph": "B", "name": "closed", "ts": 90, "pid": 1, "tid": 2},
    {"ph": "E", "ts": 95, "pid": 1, "tid": 2},
    {"ph": "X", "name": "overhangs", "ts": 100, "dur": 12, "pid": 1, "tid": 1},
    {"ph": "X", "name": "overlaps", "ts": 105, "dur": 20, "pid": 1, "tid": 1},
    {"ph": "s", "name": "lonely", "cat": "c", "id": 9, "ts": 12, "pid": 1, "tid": 1},
    {"ph": "C", "name": "no numbers", "ts": 12, "pid": 1, "args": {"a": "b"}}
  ])";
  const std::string db = e2e::TempDb("import_odd");
  e2e::Output o = ImportText("odd.json", odd, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto stats = Stats(db);
  const std::map<std::string, std::pair<int64_t, std::string>> want = {
      {"args_not_object", {1, "info"}},      {"name_not_string", {1, "info"}},
      {"bad_timestamp", {1, "data_loss"}},   {"x_event_bad_dur", {2, "data_loss"}},
      {"x_event_negative_dur", {1, "data_loss"}}, {"bad_pid_tid", {1, "data_loss"}},
      {"unknown_phase", {2, "data_loss"}},   {"missing_phase", {1, "data_loss"}},
      {"event_not_object", {4, "data_loss"}},
      {"unmatched_end", {1, "data_loss"}},   {"begin_without_end", {2, "data_loss"}},
      {"slice_overlaps_parent", {1, "info"}}, {"slice_overlaps_previous", {1, "info"}},
      {"flow_without_target", {1, "info"}},
      {"counter_not_numeric", {1, "info"}},   {"unusable_x_events_over_1pct", {1, "error"}},
  };
  for (const auto& [name, cs] : want) {
    ASSERT_TRUE(stats.count(name)) << name << "\n" << o.text;
    EXPECT_EQ(stats[name], cs) << name;
  }
  EXPECT_EQ(stats.size(), want.size()) << o.text;
  auto kept = e2e::Q(db, "SELECT name, depth, dur_ns FROM events ORDER BY slice_id");
  std::set<std::string> names;
  for (size_t i = 0; i < kept.rows.size(); ++i) names.insert(kept.Text(i, "name"));
  EXPECT_EQ(names,
            (std::set<std::string>{"good", "child", "5", "async", "opened", "closed", "overhangs", "overlaps"}));
  // Each slice that overlaps the one open keeps its larger part: mostly
  // inside, clipped to end with it (a child); mostly after, started when it
  // (and its parent) ended, beside them. The unclosed B ends with the file.
  EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'overhangs'"), 10000);
  EXPECT_EQ(Scalar(db, "SELECT depth AS v FROM events WHERE name = 'overhangs'"), 1);
  EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'overlaps'"), 15000);
  EXPECT_EQ(Scalar(db, "SELECT depth AS v FROM events WHERE name = 'overlaps'"), 0);
  EXPECT_EQ(Scalar(db, "SELECT dur_ns AS v FROM events WHERE name = 'opened'"), 45000);
  EXPECT_TRUE(absl::StrContains(o.text, "warning: more than 1%")) << o.text;
  ExpectProperNesting(db);
}

// Async events, as Chrome, Perfetto's SDK and many servers write them: one
// lane per (process, category, id); b/e nest on it (an end closes the
// innermost open begin of its name), n is an instant, the older S..F pair is
// one slice (its T/p steps are counted, not drawn); operations of two ids that
// overlap get two lanes rather than a false nesting.
TEST(ImportE2e, AsyncEventsGetALanePerId) {
  const std::string text = R"({"traceEvents": [
    {"ph": "X", "name": "main work", "ts": 0, "dur": 1000, "pid": 7, "tid": 1},
    {"ph": "b", "name": "request", "cat": "net", "id": "0x1", "ts": 100, "pid": 7, "tid": 1},
    {"ph": "b", "name": "dns", "cat": "net", "id": "0x1", "ts": 110, "pid": 7, "tid": 1},
    {"ph": "b", "name": "request", "cat": "net", "id": "0x2", "ts": 150, "pid": 7, "tid": 3},
    {"ph": "n", "name": "retry", "cat": "net", "id": "0x1", "ts": 120, "pid": 7, "tid": 1},
    {"ph": "e", "name": "dns", "cat": "net", "id": "0x1", "ts": 130, "pid": 7, "tid": 1},
    {"ph": "e", "name": "request", "cat": "net", "id": "0x1", "ts": 300, "pid": 7, "tid": 1},
    {"ph": "e", "name": "request", "cat": "net", "id": "0x2", "ts": 400, "pid": 7, "tid": 3},
    {"ph": "S", "name": "load", "cat": "io", "id": 5, "ts": 200, "pid": 7, "tid": 1},
    {"ph": "T", "name": "load", "cat": "io", "id": 5, "ts": 250, "pid": 7, "tid": 1, "args": {"step": "parse"}},
    {"ph": "F", "name": "load", "cat": "io", "id": 5, "ts": 600, "pid": 7, "tid": 1},
    {"ph": "e", "name": "never begun", "cat": "net", "id": "0x9", "ts": 700, "pid": 7, "tid": 1},
    {"ph": "b", "name": "no id", "cat": "net", "ts": 700, "pid": 7, "tid": 1}
  ]})";
  const std::string db = e2e::TempDb("import_async");
  e2e::Output o = ImportText("async.json", text, db);
  ASSERT_EQ(o.code, 0) << o.text;
  auto stats = Stats(db);
  EXPECT_EQ(stats["async_step_ignored"], (std::pair<int64_t, std::string>{1, "info"}));
  EXPECT_EQ(stats["async_unmatched_end"], (std::pair<int64_t, std::string>{1, "data_loss"}));
  EXPECT_EQ(stats["async_missing_id"], (std::pair<int64_t, std::string>{1, "data_loss"}));
  EXPECT_FALSE(stats.count("begin_without_end")) << o.text;
  auto rows = e2e::Q(db,
                     "SELECT e.name, e.depth, e.start_ns, e.dur_ns, t.name AS track FROM events e"
                     " JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id ORDER BY e.start_ns, e.depth");
  std::map<std::string, std::tuple<int64_t, int64_t, int64_t, std::string>> by_name;  // depth, start, dur, track
  for (size_t i = 0; i < rows.rows.size(); ++i)
    by_name[rows.Text(i, "name") + "@" + std::to_string(rows.Int(i, "start_ns") / 1000)] = {
        rows.Int(i, "depth"), rows.Int(i, "start_ns"), rows.Int(i, "dur_ns"), rows.Text(i, "track")};
  ASSERT_EQ(by_name.size(), 6u) << o.text;
  auto track = [&](const std::string& k) { return std::get<3>(by_name[k]); };
  EXPECT_EQ(std::get<2>(by_name["request@100"]), 200000);
  EXPECT_EQ(std::get<0>(by_name["request@100"]), 0);
  EXPECT_EQ(std::get<0>(by_name["dns@110"]), 1);  // inside the request of its id
  EXPECT_EQ(std::get<2>(by_name["dns@110"]), 20000);
  EXPECT_EQ(std::get<2>(by_name["retry@120"]), 0);
  EXPECT_EQ(track("dns@110"), track("request@100"));
  EXPECT_EQ(track("retry@120"), track("request@100"));
  EXPECT_NE(track("request@150"), track("request@100"));  // overlapping ids: two lanes
  EXPECT_EQ(std::get<0>(by_name["request@150"]), 0);
  EXPECT_EQ(std::get<2>(by_name["load@200"]), 400000);  // S..F, the T step inside it
  EXPECT_NE(track("load@200"), track("main work@0"));
  EXPECT_TRUE(absl::StrContains(track("request@100"), "net #0x1")) << track("request@100");
  EXPECT_TRUE(absl::StrContains(track("load@200"), "io #5")) << track("load@200");
  ExpectProperNesting(db);
}

// Writes a Kineto-shaped trace of about `target` bytes of JSON, gzipped:
// steps of CPU ops with launches, kernels on two streams with ac2g flows, and
// an optimizer op with its inputs' shapes.
int64_t WriteBigTrace(const std::string& path, int64_t target) {
  gzFile f = gzopen(path.c_str(), "wb1");
  std::string buf = "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": [\n";
  int64_t written = 0, events = 0;
  double ts = 1000.0;
  auto us = [](double v) { return absl::StrFormat("%.3f", v); };  // StrCat(double) keeps only 6 digits
  int step = 0;
  int64_t corr = 1;
  auto flush = [&](bool force) {
    if (buf.size() > (1 << 20) || force) {
      gzwrite(f, buf.data(), static_cast<unsigned>(buf.size()));
      written += static_cast<int64_t>(buf.size());
      buf.clear();
    }
  };
  bool first = true;
  // The optimizer op's args (record_shapes=True): every input's shape and type.
  std::string dims, types;
  for (int p = 0; p < 8000; ++p) {
    absl::StrAppend(&dims, p ? ", " : "", "[", 256 + p % 7, ", 1024]");
    absl::StrAppend(&types, p ? ", " : "", "\"float\"");
  }
  auto add = [&](const std::string& e) {
    if (!first) buf += ",\n";
    first = false;
    buf += e;
    ++events;
  };
  while (written + static_cast<int64_t>(buf.size()) < target) {
    const double step_start = ts;
    add(absl::StrCat("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#", step,
                     "\", \"pid\": 77, \"tid\": 77, \"ts\": ", us(step_start), ", \"dur\": 2000.5, \"args\": {}}"));
    for (int op = 0; op < 40; ++op) {
      const double t = step_start + 1 + op * 49.25;
      add(absl::StrCat("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 77, \"tid\": 77,"
                       " \"ts\": ", us(t), ", \"dur\": 40.125, \"args\": {\"External id\": ", corr,
                       ", \"Record function id\": 0, \"Ev Idx\": ", corr, ", \"Sequence number\": ", corr,
                       ", \"Fwd thread id\": 0, \"Input Dims\": [[64, 784], [1024, 784], [1024]],"
                       " \"Input type\": [\"float\", \"float\", \"float\"]}}"));
      add(absl::StrCat("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 77, \"tid\":"
                       " 77, \"ts\": ", us(t + 2), ", \"dur\": 6.5, \"args\": {\"cbid\": 211, \"correlation\": ", corr,
                       ", \"External id\": ", corr, "}}"));
      add(absl::StrCat("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_kernel<float, 128>(float const*, float*)\","
                       " \"pid\": 0, \"tid\": ", op % 2 ? 7 : 20, ", \"ts\": ", us(t + 10), ", \"dur\": 20.75, \"args\":"
                       " {\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": ", op % 2 ? 7 : 20,
                       ", \"correlation\": ", corr, ", \"registers per thread\": 128, \"shared memory\": 49152,"
                       " \"blocks per SM\": 0.969697, \"warps per SM\": 7.757576, \"grid\": [128, 1, 1],"
                       " \"block\": [256, 1, 1], \"est. achieved occupancy %\": 12}}"));
      add(absl::StrCat("{\"ph\": \"s\", \"id\": ", corr, ", \"pid\": 77, \"tid\": 77, \"ts\": ", us(t + 2),
                       ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}"));
      add(absl::StrCat("{\"ph\": \"f\", \"id\": ", corr, ", \"pid\": 0, \"tid\": ", op % 2 ? 7 : 20, ", \"ts\": ",
                       us(t + 10), ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}"));
      ++corr;
    }
    // An optimizer step over 8000 parameters, recorded with shapes.
    add(absl::StrCat("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::_foreach_add_\", \"pid\": 77, \"tid\": 77,"
                     " \"ts\": ", us(step_start + 1980), ", \"dur\": 15.5, \"args\": {\"Input Dims\": [", dims,
                     "], \"Input type\": [", types, "]}}"));
    ts += 2100;
    ++step;
    flush(false);
  }
  buf += "\n], \"baseTimeNanoseconds\": 1700000000000000000}\n";
  flush(true);
  gzclose(f);
  return events;
}

// `shardscope import TRACE --db DB` in a child process: its peak RSS in bytes
// (-1 when it failed).
int64_t ImportPeakRss(const std::string& trace, const std::string& db) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    execl(SHARDSCOPE_CLI_BINARY, SHARDSCOPE_CLI_BINARY, "import", trace.c_str(), "--db", db.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(child, &status, 0, &ru) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

TEST(ImportE2e, LargeTraceStreamsInBoundedMemory) {
  const std::string trace = Temp("big.json.gz");
  const int64_t kJsonBytes = 200 << 20;
  const int64_t events = WriteBigTrace(trace, kJsonBytes);
  const std::string db = e2e::TempDb("import_big");
  auto t0 = std::chrono::steady_clock::now();
  const int64_t peak = ImportPeakRss(trace, db);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(peak, 0) << "the import failed";
  std::printf("[ import ] %.0f MB of JSON (%.1f MB gzipped), %lld events: %.2f s, %.1f MB/s of JSON, peak RSS %.1f MB\n",
              kJsonBytes / 1e6, static_cast<double>(ReadAll(trace).size()) / 1e6, static_cast<long long>(events), secs,
              kJsonBytes / 1e6 / secs, peak / 1e6);
  // Streaming: far below the trace's size (the store's SQLite cache included).
  EXPECT_LT(peak, kJsonBytes / 4) << "peak RSS " << peak;
  // Every X event became a slice: a step, 40 x (op, launch, kernel), the optimizer op.
  ASSERT_EQ(events % 202, 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM slices WHERE kind <> 'host_wait'"), events / 202 * 122);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM events WHERE name = 'cudaLaunchKernel' AND (flow_id IS NULL OR depth <> 2)"), 0);
  std::remove(trace.c_str());
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// A lane per thread, 20000 of them (a trace of many short-lived threads or
// async ids): the writer frees each lane's chunk and summaries once its
// slices are written, instead of holding about 10 KB per lane to the end.
TEST(ImportE2e, ManyLanesImportInBoundedMemory) {
  constexpr int kLanes = 20000;
  std::string text = "[";
  for (int t = 0; t < kLanes; ++t)
    absl::StrAppend(&text, t ? "," : "", R"({"ph":"X","name":"op","ts":)", t, R"(,"dur":3,"pid":1,"tid":)", t, "}");
  const std::string trace = WriteTemp("many_lanes.json", text + "]");
  const std::string db = e2e::TempDb("import_many_lanes");
  const int64_t peak = ImportPeakRss(trace, db);
  ASSERT_GT(peak, 0) << "the import failed";
  std::printf("[ import ] %d lanes: peak RSS %.1f MB\n", kLanes, peak / 1e6);
  EXPECT_LT(peak, int64_t{120} << 20) << "peak RSS " << peak;  // it was about 240 MB
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) AS v FROM slices"), kLanes);
  // Every lane's summaries reached the file: the timeline draws each.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT track_id) AS v FROM slice_summary_groups"), kLanes);
  std::remove(trace.c_str());
}

}  // namespace
}  // namespace shardscope
