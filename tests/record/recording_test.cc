// Recording: a run recorded from a program's own code, read back from the file.
#include "record/recording.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <source_location>
#include <string>

#include <gtest/gtest.h>

#include "core/shardscope.h"
#include "profiler/analysis/fleet.h"
#include "store/reader.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

std::string TempDb(const std::string& name) {
  fs::path p = fs::path(testing::TempDir()) / ("recording_test_" + name + ".db");
  fs::remove(p);
  fs::remove(p.string() + "-wal");
  fs::remove(p.string() + "-shm");
  return p.string();
}

store::QueryResult Query(const std::string& db, const std::string& sql) {
  auto reader = store::Reader::Open(db);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  auto q = reader->Query(sql);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? *q : store::QueryResult{};
}

// Two steps of a small data-parallel regression on `mesh`.
absl::Status Train(const Mesh& mesh) {
  nn::Linear l(4, 1, "l");
  optim::SGD opt(parameters(l), {.lr = 0.1});
  for (int step = 0; step < 2; ++step) {
    Tensor x = Tensor::from_host(Literal::FromF32({8, 4}, std::vector<float>(32, 0.5f)), "x");
    Tensor y = Tensor::from_host(Literal::FromF32({8, 1}, std::vector<float>(8, 1.f)), "y");
    if (auto s = mark_sharding(x, mesh, {"data", none}); !s.ok()) return s;
    Tensor loss = mse_loss(l(x), y);
    if (auto s = backward(loss); !s.ok()) return s;
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = mark_step(); !s.ok()) return s;
    auto v = loss.item();
    if (!v.ok()) return v.status();
    log_step(*v);
  }
  return absl::OkStatus();
}

// A small MLP of the user's own on 8 chips of a 2x4 torus, data parallel,
// `steps` steps; `faults` as --fault takes them.
absl::Status TrainMlp(const std::string& db, std::vector<std::string> faults, int steps) {
  auto rec = Recording::Start(
      {.db = db, .workload = "own_mlp", .mesh = {8, 1}, .topology = "2x4", .faults = std::move(faults)});
  if (!rec.ok()) return rec.status();
  const int64_t b = 256, d = 256, h = 512;
  nn::Linear l1(d, h, "l1"), l2(h, h, "l2"), l3(h, 1, "l3");
  optim::SGD opt(parameters(l1, l2, l3), {.lr = 0.01});
  std::vector<float> xs(b * d), ys(b);
  for (int64_t i = 0; i < b * d; ++i) xs[i] = static_cast<float>((i * 7919) % 101) / 100.f - 0.5f;
  for (int64_t i = 0; i < b * d; ++i) ys[i / d] += xs[i] / static_cast<float>(d);
  for (int step = 0; step < steps; ++step) {
    Tensor x = Tensor::from_host(Literal::FromF32({b, d}, xs), "x");
    Tensor y = Tensor::from_host(Literal::FromF32({b, 1}, ys), "y");
    if (auto s = mark_sharding(x, (*rec)->mesh(), {"data", none}); !s.ok()) return s;
    if (auto s = mark_sharding(y, (*rec)->mesh(), {"data", none}); !s.ok()) return s;
    Tensor loss = mse_loss(l3(relu(l2(relu(l1(x))))), y);
    if (auto s = backward(loss); !s.ok()) return s;
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = mark_step(); !s.ok()) return s;
    auto v = loss.item();
    if (!v.ok()) return v.status();
    log_step(*v);
  }
  return (*rec)->Finish();
}

// The flagged suspects; `why` gets the whole diagnosis, so that a failure shows its evidence.
std::vector<std::string> Flagged(const std::string& db, std::string* why = nullptr) {
  auto reader = store::Reader::Open(db);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  auto report = analysis::AnalyzeFleet(*reader, {});
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return {};
  if (why) *why = analysis::RenderFleetText(*report);
  std::vector<std::string> out;
  for (const analysis::FleetSuspect& s : report->suspects)
    if (s.flagged) out.push_back(s.kind + " " + s.id);
  return out;
}

// A user's program gets the heap `shardscope run` keeps (runtime/heap.h):
// before, a freed GEMM result came back as fresh pages whose faults counted
// as device time, one in three of this MLP's big kernels took 3-4 ms instead
// of 0.2 ms, fleet flagged a healthy chip in 2 of 17 runs, and missed a chip
// at 70% speed in most. (Its steps still swing: the chip is found by the
// sign test's bound on its median step, as Student's t on the mean is not.)
TEST(Recording, AUserProgramsSlowChipIsFoundAndAHealthyRunFlagsNone) {
  // 16 steps, 15 analysed: the sign test's bound is then the third-lowest
  // step's ratio, where at 10 steps it was the lowest. At 10 the chip was
  // missed once in CI (never in 185 runs here, idle or loaded), its cause not
  // kept: a failure now prints the diagnosis, to say which test held it back.
  const int kSteps = 16;
  const std::string slow = TempDb("fleet_slow"), healthy = TempDb("fleet_healthy");
  std::string why;
  ASSERT_TRUE(TrainMlp(slow, {"slow-chip:6:0.7"}, kSteps).ok());
  EXPECT_EQ(Flagged(slow, &why), std::vector<std::string>{"chip 6"}) << why;
  ASSERT_TRUE(TrainMlp(healthy, {}, kSteps).ok());
  EXPECT_EQ(Flagged(healthy, &why), std::vector<std::string>{}) << why;
  // Its kernels run at their speed: before, 12% of them took over a
  // millisecond after the first step (faults); now under 1% may.
  auto slow_kernels = Query(healthy,
                            "SELECT sum(s.dur_ns > 1000000) AS slow, count(*) AS n FROM slices s JOIN tracks t ON "
                            "t.run_id = s.run_id AND t.track_id = s.track_id WHERE t.clock = 'device' AND "
                            "s.kind = 'compute' AND s.step > 1");
  EXPECT_GT(slow_kernels.Int(0, "n"), 1000);
  EXPECT_LE(slow_kernels.Int(0, "slow") * 100, slow_kernels.Int(0, "n"));
}

TEST(Recording, RecordsTheRunItsDevicesMeshAndSteps) {
  const std::string db = TempDb("run");
  auto rec = Recording::Start({.db = db,
                               .workload = "tiny",
                               .mesh = {2, 1, 2},
                               .mesh_axes = {"data", "stage", "model"},
                               .hosts = 2,
                               .profile = "tpu-v4"});
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ((*rec)->topology(), "2 hosts x 2 chips");
  EXPECT_EQ((*rec)->mesh().shape(), (std::vector<int64_t>{2, 1, 2}));
  ASSERT_TRUE(Train((*rec)->mesh()).ok());
  ASSERT_TRUE((*rec)->Finish().ok());
  EXPECT_TRUE((*rec)->finished());
  EXPECT_TRUE((*rec)->Finish().ok());  // again: the same answer, nothing more written

  auto run = Query(db, "SELECT * FROM runs");
  ASSERT_EQ(run.rows.size(), 1u);
  EXPECT_EQ(run.Text(0, "sample"), "tiny");
  EXPECT_EQ(run.Text(0, "mesh"), "2x1x2");
  EXPECT_EQ(run.Text(0, "mesh_axes"), "data,stage,model");
  EXPECT_EQ(run.Text(0, "profile"), "tpu-v4");
  EXPECT_EQ(run.Text(0, "clock_kinds"), "host,device,modeled");
  EXPECT_EQ(run.Text(0, "status"), "finished");
  EXPECT_EQ(run.Int(0, "num_hosts"), 2);
  EXPECT_EQ(run.Int(0, "num_devices"), 4);
  EXPECT_NE(run.Text(0, "config_json").find("\"workload\":\"tiny\""), std::string::npos);

  auto dev = Query(db, "SELECT device_id, host_id, coords FROM devices ORDER BY device_id");
  ASSERT_EQ(dev.rows.size(), 4u);
  EXPECT_EQ(dev.Text(1, "coords"), "[0,0,1]");
  EXPECT_EQ(dev.Text(2, "coords"), "[1,0,0]");
  EXPECT_EQ(dev.Int(1, "host_id"), 0);
  EXPECT_EQ(dev.Int(2, "host_id"), 1);
  auto mesh = Query(db, "SELECT shape, axis_names, device_ids FROM meshes");
  ASSERT_EQ(mesh.rows.size(), 1u);
  EXPECT_EQ(mesh.Text(0, "shape"), "[2,1,2]");
  EXPECT_EQ(mesh.Text(0, "device_ids"), "0,1,2,3");
  EXPECT_EQ(Query(db, "SELECT COUNT(*) AS n FROM steps").Int(0, "n"), 2);
  EXPECT_GT(Query(db, "SELECT COUNT(*) AS n FROM metrics").Int(0, "n"), 0);  // written as the run ended
}

// Recordings one after another in one process, the last on more chips: each
// run's compilations are its own (a first compile, compared with nothing of
// the run before, whose graph ids are another run's).
TEST(Recording, EachRecordingComparesOnlyItsOwnGraphs) {
  const std::string db = TempDb("three");
  for (int64_t chips : {2, 2, 4}) {
    auto rec = Recording::Start({.db = db, .mesh = {chips}, .recompile_notices = false});
    ASSERT_TRUE(rec.ok()) << rec.status();
    ASSERT_TRUE(Train((*rec)->mesh()).ok());
    ASSERT_TRUE((*rec)->Finish().ok());
  }
  auto c = Query(db,
                 "SELECT run_id, count(*) AS misses, sum(cause_kind = 'first_compile') AS first,"
                 " sum(prev_graph_id IS NOT NULL) AS compared FROM compilations WHERE cache = 'miss'"
                 " GROUP BY run_id ORDER BY run_id");
  ASSERT_EQ(c.rows.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(c.Int(r, "misses"), 1) << "run " << r + 1;
    EXPECT_EQ(c.Int(r, "first"), 1) << "run " << r + 1;
    EXPECT_EQ(c.Int(r, "compared"), 0) << "run " << r + 1;
  }
}

TEST(Recording, NamesSourcesRelativeToTheCallersDirectory) {
  const std::string db = TempDb("source");
  auto rec = Recording::Start({.db = db, .mesh = {4}});
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ((*rec)->mesh().axis_names(), (std::vector<std::string>{"data"}));
  ASSERT_TRUE(Train((*rec)->mesh()).ok());
  ASSERT_TRUE((*rec)->Finish().ok());
  const std::string here = fs::path(std::source_location::current().file_name()).filename().string();
  auto c = Query(db, "SELECT DISTINCT source_file FROM compilations WHERE source_file IS NOT NULL");
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.Text(0, "source_file"), here);  // recording_test.cc, not a path
  EXPECT_EQ(SourceRoot(), "");                // restored when the recording ended
}

TEST(Recording, BadOptionsWriteNothing) {
  const std::string db = TempDb("bad");
  auto err = [&](RecordingOptions o) {
    o.db = db;
    auto r = Recording::Start(std::move(o));
    EXPECT_FALSE(r.ok());
    return r.ok() ? absl::OkStatus() : r.status();
  };
  EXPECT_EQ(err({.mesh = {2, 0}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(err({.mesh = {2, 3}, .hosts = 4}).message().find("6 chips do not split evenly over 4 hosts"),
            std::string::npos);
  EXPECT_NE(err({.profile = "tpu-v9"}).message().find("tpu-v9"), std::string::npos);
  EXPECT_NE(err({.mesh = {2, 2}, .mesh_axes = {"data"}}).message().find("1 axis names (data) for a mesh of 2 axes"),
            std::string::npos);
  EXPECT_NE(err({.config_json = "[1, 2"}).message().find("config_json is not a JSON object"), std::string::npos);
  EXPECT_FALSE(fs::exists(db));
  auto no_db = Recording::Start({});
  ASSERT_FALSE(no_db.ok());
  EXPECT_NE(no_db.status().message().find("no database path"), std::string::npos);
  // A database that cannot be written is named before the profile's calibration (minutes on a new machine).
  auto no_dir = Recording::Start({.db = "/nonexistent_shardscope_dir/run.db", .profile = "tpu-v4"});
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("the directory /nonexistent_shardscope_dir does not exist"),
            std::string::npos)
      << no_dir.status();
}

TEST(Recording, OneAtATimeAndAnUnreadableFileIsNamed) {
  const std::string db = TempDb("first");
  auto first = Recording::Start({.db = db});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Recording::Start({.db = TempDb("second")});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();  // the destructor finishes the run
  EXPECT_EQ(Query(db, "SELECT status FROM runs").Text(0, "status"), "finished");

  const std::string garbage = TempDb("garbage");
  std::ofstream(garbage) << "not a database, just text long enough to have a header of sorts";
  auto bad = Recording::Start({.db = garbage});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(garbage), std::string::npos) << bad.status();
  // A failed start leaves nothing open; a given config is kept, naming the cache directory.
  unsetenv("SHARDSCOPE_CACHE_DIR");
  const std::string again_db = TempDb("again");
  auto again = Recording::Start({.db = again_db, .mesh = {2, 1, 2}, .config_json = R"({"lr": 0.1})"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->mesh().axis_names(), (std::vector<std::string>{"axis0", "axis1", "axis2"}));
  ASSERT_TRUE((*again)->Finish().ok());
  const std::string again_config = Query(again_db, "SELECT config_json FROM runs").Text(0, "config_json");
  EXPECT_EQ(again_config.rfind(R"({"cache_dir":"","lr":0.1,"profile_values":{)", 0), 0u) << again_config;
}

}  // namespace
}  // namespace shardscope
