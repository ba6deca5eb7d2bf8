// End-to-end tests of the shardscope-ui binary: its command line, its errors
// without a display or with a bad file, a screenshot under Xvfb that must
// show exactly one lane per device with that device's slices drawn in it,
// --dump-layout's record of what the captured frame drew (lanes, step
// markers, summaries, counters, a collective's flow with the last arrival
// marked), and the window using no CPU while nothing changes.
#include <sqlite3.h>
#include <stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/app/fixture.h"
#include "tests/app/ui_runner.h"

namespace shardscope::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout and stderr
};

Result RunCommand(const std::string& command) {
  Result result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Ui() { return SHARDSCOPE_UI_BINARY; }

bool HaveXvfb() {
  return std::system("command -v xvfb-run >/dev/null 2>&1") == 0 &&
         std::system("command -v xauth >/dev/null 2>&1") == 0;
}

// Runs the UI under a private X server; `timeout` so a hung GL driver fails
// the test instead of the whole CI job.
Result RunUnderXvfb(const std::string& args) {
  return RunCommand(absl::StrCat("timeout 120 xvfb-run -a -s \"-screen 0 1600x900x24\" ", Ui(),
                                 " ", args));
}

struct Lane {
  std::map<std::string, std::string> fields;
  int Int(const std::string& key) const {
    int v = -1;
    auto it = fields.find(key);
    if (it == fields.end() || !absl::SimpleAtoi(it->second, &v)) return -1;
    return v;
  }
};

std::vector<Lane> ParseLanes(const std::string& output) {
  std::vector<Lane> lanes;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("lane ", 0) != 0) continue;
    Lane lane;
    for (absl::string_view word : absl::StrSplit(line.substr(5), ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
      lane.fields[kv.first] = kv.second;
    }
    lanes.push_back(lane);
  }
  return lanes;
}

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> rgb;
};

Image LoadPng(const std::string& path) {
  Image image;
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &image.w, &image.h, &channels, 3);
  if (!data) return image;
  image.rgb.assign(data, data + size_t(image.w) * image.h * 3);
  stbi_image_free(data);
  return image;
}

// Pixels in the rectangle within `tol` of the colour given as "rrggbb".
int CountColor(const Image& img, int x, int y, int w, int h, const std::string& hex, int tol) {
  unsigned value = std::stoul(hex, nullptr, 16);
  int r = (value >> 16) & 255, g = (value >> 8) & 255, b = value & 255;
  int count = 0;
  for (int yy = std::max(0, y); yy < std::min(img.h, y + h); ++yy) {
    for (int xx = std::max(0, x); xx < std::min(img.w, x + w); ++xx) {
      const unsigned char* p = &img.rgb[(size_t(yy) * img.w + xx) * 3];
      if (std::abs(p[0] - r) <= tol && std::abs(p[1] - g) <= tol && std::abs(p[2] - b) <= tol) {
        ++count;
      }
    }
  }
  return count;
}

TEST(ShardscopeUi, HelpExitsZero) {
  Result r = RunCommand(Ui() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("usage: shardscope-ui PATH"));
  EXPECT_THAT(r.output, HasSubstr("--screenshot"));
}

TEST(ShardscopeUi, NoDisplayIsAClearErrorNotACrash) {
  std::string db = testing::TempPath("fixture.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  Result r = RunCommand(absl::StrCat("env -u DISPLAY -u WAYLAND_DISPLAY ", Ui(), " ", db));
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no display (DISPLAY is unset)"));
  EXPECT_THAT(r.output, HasSubstr("xvfb-run"));
  EXPECT_THAT(r.output, HasSubstr("shardscope report"));
}

TEST(ShardscopeUi, BadFileIsAClearErrorNotACrash) {
  std::string junk = testing::TempPath("junk.db");
  std::ofstream(junk) << "not a database at all, only text; long enough to have a header.......\n";
  Result r = RunCommand(absl::StrCat(Ui(), " ", junk));
  EXPECT_GT(r.exit_code, 0) << r.output;  // > 0: exited, not killed by a signal
  EXPECT_THAT(r.output, HasSubstr("junk.db"));

  Result missing = RunCommand(absl::StrCat(Ui(), " ", testing::TempPath("missing.db")));
  EXPECT_GT(missing.exit_code, 0) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("missing.db"));

  std::string db = testing::TempPath("fixture.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  Result no_run = RunCommand(absl::StrCat(Ui(), " ", db, " --run 42"));
  EXPECT_GT(no_run.exit_code, 0);
  EXPECT_THAT(no_run.output, HasSubstr("has no run 42"));

  Result bad_flag = RunCommand(absl::StrCat(Ui(), " ", db, " --width abc"));
  EXPECT_GT(bad_flag.exit_code, 0);
  EXPECT_THAT(bad_flag.output, HasSubstr("--width"));
}

// An option naming what the run lacks is that option's error: the capture
// exits 1 naming it, without calling the file damaged; an op a graph lacks
// (--graph G:OP) is said, not silently swapped for the graph's costliest kernel.
TEST(ShardscopeUi, WhatAnOptionAsksForAndTheRunLacksIsNotDamage) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run not installed";
  const std::string db = testing::TempPath("options.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  {
    // Graph 1's program, which the fixture does not write: one op, %1.
    const char* ir = "module @graph attributes {mhlo.num_partitions = 1 : i32} {\n"
                     "  func.func @main(%arg0: tensor<4x6xf32>) -> (tensor<4x6xf32>) {\n"
                     "    %1 = stablehlo.add %arg0, %arg0 : tensor<4x6xf32>\n"
                     "    return %1 : tensor<4x6xf32>\n"
                     "  }\n"
                     "}\n";
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h,
                                 "INSERT OR REPLACE INTO graphs(run_id, graph_id, fingerprint, call_site, ir_text,"
                                 " ir_text_after, op_count, flops, bytes) VALUES (1, 1, 'f1', 'samples/mlp.cc:52',"
                                 " ?1, ?1, 1, 0, 0)",
                                 -1, &st, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(h);
    sqlite3_bind_text(st, 1, ir, -1, SQLITE_STATIC);
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sqlite3_errmsg(h);
    sqlite3_finalize(st);
    sqlite3_close(h);
  }
  const std::string layout = testing::TempPath("options.json");
  // Each option is its own error (exit 1), never a pointer at damage.
  for (const auto& [option, said] : {std::pair{"--view sharding --chip 99", "--chip 99: run 1 has no chip 99"},
                                     std::pair{"--graph 1:99999", "--graph 1:99999: graph 1 has no op 99999"},
                                     std::pair{"--graph 9999", "--graph 9999: run 1 compiled no graph 9999"}}) {
    testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " ", option, " --dump-layout ", layout));
    EXPECT_EQ(r.exit_code, 1) << option << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(said));
    EXPECT_THAT(r.output, Not(HasSubstr("damage")));
  }

  testing::UiResult fine = testing::RunUi(Ui(), absl::StrCat(db, " --graph 1:1 --dump-layout ", layout));
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
}

class ScreenshotTest : public ::testing::TestWithParam<int> {};

TEST_P(ScreenshotTest, DrawsOneLanePerDeviceWithItsSlices) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  const int devices = GetParam();
  std::string db = testing::TempPath("fixture.db");
  std::string png = testing::TempPath("timeline.png");
  // Run 1 has a different device count, so drawing the wrong run would show.
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.run_id = 1, .num_devices = 1},
                                           testing::FixtureRun{.run_id = 2, .num_devices = devices}})
                  .ok());
  std::filesystem::remove(png);
  Result r = RunUnderXvfb(absl::StrCat(db, " --screenshot ", png, " --width 1400 --height 860"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("screenshot " + png + " 1400x860"));

  Image img = LoadPng(png);
  ASSERT_EQ(img.w, 1400) << "could not read " << png;
  ASSERT_EQ(img.h, 860);

  std::vector<Lane> device_lanes, host_lanes;
  for (const Lane& lane : ParseLanes(r.output)) {
    (lane.fields.count("device") ? device_lanes : host_lanes).push_back(lane);
  }
  ASSERT_EQ(device_lanes.size(), size_t(devices)) << r.output;
  EXPECT_EQ(host_lanes.size(), 2u) << r.output;  // the fixture's two host threads
  std::set<int> seen;
  int previous_bottom = 0;
  for (const Lane& lane : device_lanes) {
    const int device = lane.Int("device");
    seen.insert(device);
    EXPECT_EQ(lane.fields.at("clock"), "device");
    const int x = lane.Int("x"), y = lane.Int("y"), w = lane.Int("w"), h = lane.Int("h");
    ASSERT_GT(w, 100);
    ASSERT_GT(h, 10);
    EXPECT_GE(y, previous_bottom) << "lanes overlap";
    previous_bottom = y + h;
    // Six steps of two compute slices each, ~15 px wide at this size: well
    // over a thousand pixels of the compute colour in every device's lane.
    int pixels = CountColor(img, x, y, w, h, lane.fields.at("color"), 2);
    EXPECT_GT(pixels, 1000) << "device " << device << " lane has no slices drawn";
    // And not everywhere: the lane has gaps and other kinds too.
    EXPECT_LT(pixels, w * h * 0.9);
  }
  EXPECT_EQ(seen.size(), size_t(devices));
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), devices - 1);
  // Host lanes sit below the device lanes and hold no device compute colour.
  for (const Lane& lane : host_lanes) {
    EXPECT_EQ(lane.fields.at("clock"), "host");
    EXPECT_GE(lane.Int("y"), previous_bottom);
    EXPECT_EQ(CountColor(img, lane.Int("x"), lane.Int("y"), lane.Int("w"), lane.Int("h"),
                         lane.fields.at("color"), 2),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ScreenshotTest, ::testing::Values(2, 8),
                         [](const auto& info) { return absl::StrCat(info.param, "Devices"); });

TEST(ShardscopeUi, ScreenshotOfRecompilationsAndFoldedRun) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string db = testing::TempPath("fixture.db");
  std::string png = testing::TempPath("recompilations.png");
  // 40k tiny slices on chip 0: the whole-run view must still come up.
  ASSERT_TRUE(
      testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 4, .tiny_slices = 40'000}})
          .ok());
  std::filesystem::remove(png);
  Result timeline = RunUnderXvfb(absl::StrCat(db, " --screenshot ", png));
  ASSERT_EQ(timeline.exit_code, 0) << timeline.output;
  auto lanes = ParseLanes(timeline.output);
  ASSERT_FALSE(lanes.empty());
  int blocks = -1;
  for (const Lane& lane : lanes) {
    if (lane.fields.count("device") && lane.Int("device") == 0) blocks = lane.Int("blocks");
  }
  // Folded to the screen: far fewer shapes than the 40k slices.
  EXPECT_GT(blocks, 0);
  EXPECT_LT(blocks, 2000);

  Result r = RunUnderXvfb(absl::StrCat(db, " --view recompilations --screenshot ", png));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Image img = LoadPng(png);
  EXPECT_EQ(img.w, 1600);
  EXPECT_EQ(img.h, 900);
}

using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json();
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<json> ItemsOf(const json& doc, const std::string& type, const std::string& role = "") {
  std::vector<json> out;
  for (const json& item : doc["items"]) {
    if (item["type"] == type && (role.empty() || item.value("role", "") == role)) out.push_back(item);
  }
  return out;
}

// What the first finished frame draws, as data: a lane per chip and host
// thread, step markers on each clock, rectangles that name the stored rows
// they show, and counter lanes.
TEST(ShardscopeUi, DumpLayoutRecordsWhatTheTimelineDraws) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string db = testing::TempPath("fixture.db");
  std::string out = testing::TempPath("layout.json");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 4, .num_hosts = 2, .with_counters = true}}).ok());
  std::filesystem::remove(out);
  Result r = RunUnderXvfb(absl::StrCat(db, " --dump-layout ", out, " --width 1400 --height 860"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("layout " + out));
  json doc = ReadJson(out);
  ASSERT_TRUE(doc.is_object()) << "not JSON: " << out;
  EXPECT_EQ(doc["view"], "timeline");

  std::set<int> chips;
  int host_lanes = 0;
  for (const json& lane : ItemsOf(doc, "lane")) {
    EXPECT_EQ(lane["ref"]["table"], "tracks");
    EXPECT_FALSE(lane["fallback"].get<bool>()) << "captured before " << lane["label"] << " loaded";
    EXPECT_EQ(lane["drawn_as"], "image");  // one textured quad; its shapes are the rects below
    if (lane.contains("device_id")) chips.insert(lane["device_id"].get<int>());
    else ++host_lanes;
  }
  EXPECT_EQ(chips, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(host_lanes, 2);
  std::map<std::string, int> steps;
  for (const json& m : ItemsOf(doc, "marker", "step")) steps[m["clock"]]++;
  EXPECT_EQ(steps["device"], 6);
  EXPECT_EQ(steps["host"], 6);
  auto rects = ItemsOf(doc, "rect");
  EXPECT_GE(rects.size(), size_t(4 * 6 * testing::kSlicesPerDeviceStep));
  for (const json& rect : rects) {
    const std::string table = rect["ref"]["table"];
    EXPECT_TRUE(table == "slices" || table == "slice_summaries") << rect.dump();
  }
  auto counters = ItemsOf(doc, "counter");
  EXPECT_EQ(counters.size(), 5u);  // hbm_bytes_in_use on 4 chips, CreateTensor
  auto axes = ItemsOf(doc, "axis");
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0]["label"], "device clock");
  EXPECT_EQ(axes[1]["label"], "host clock");
}

// --select a collective: the frame shows its step, its flow across the four
// chips, and marks the chip that arrived last.
TEST(ShardscopeUi, SelectingACollectiveDrawsItsFlowWithTheLastArrivalMarked) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string db = testing::TempPath("fixture.db");
  std::string out = testing::TempPath("layout.json");
  const testing::FixtureRun run{.num_devices = 4, .num_hosts = 2, .late_device = 2};
  ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
  std::filesystem::remove(out);
  Result r = RunUnderXvfb(absl::StrCat(db, " --select ", testing::AllReduceSliceId(run, 3, 1), " --dump-layout ", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json doc = ReadJson(out);
  ASSERT_TRUE(doc.is_object());
  // The collective's links (its program's dispatch flows have a role).
  std::vector<json> flows;
  for (const json& f : ItemsOf(doc, "flow")) {
    if (!f.contains("role")) flows.push_back(f);
  }
  ASSERT_EQ(flows.size(), 3u) << doc.dump(1).substr(0, 2000);
  auto last = ItemsOf(doc, "marker", "last_arrival");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["ref"]["slice_id"], testing::AllReduceSliceId(run, 3, 2));
  bool panel = false;
  for (const json& t : ItemsOf(doc, "text", "details")) {
    panel |= absl::StrContains(t["label"].get<std::string>(), "last to arrive: chip 2");
  }
  EXPECT_TRUE(panel) << "the details panel does not name the late chip";
}

// Zoomed out over a long run, lanes draw from the stored summaries, and what
// is drawn is bounded by the screen's width.
TEST(ShardscopeUi, ALongRunIsDrawnFromSummariesBoundedByTheScreen) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string db = testing::TempPath("fixture.db");
  std::string out = testing::TempPath("layout.json");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 2, .num_hosts = 1, .steps = 4000}}).ok());
  Result r = RunUnderXvfb(absl::StrCat(db, " --dump-layout ", out, " --width 1200 --height 800"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json doc = ReadJson(out);
  ASSERT_TRUE(doc.is_object());
  std::map<std::pair<int64_t, int>, int> rects_per_row;  // (track, depth)
  for (const json& rect : ItemsOf(doc, "rect")) {
    EXPECT_EQ(rect["ref"]["table"], "slice_summaries") << rect.dump();
    EXPECT_GE(rect["level"].get<int>(), 0);
    rects_per_row[{rect["track_id"].get<int64_t>(), rect["depth"].get<int>()}]++;
    // What a column holds: busy time by kind, adding up to its busy fraction.
    int64_t kinds = 0;
    for (auto& [kind, ns] : rect["kinds"].items()) kinds += ns.get<int64_t>();
    const double span = rect["end_ns"].get<double>() - rect["start_ns"].get<double>();
    EXPECT_NEAR(double(kinds) / span, rect["busy_fraction"].get<double>(), 0.01);
  }
  ASSERT_EQ(rects_per_row.size(), 4u);  // 2 chips and the host thread's two depths
  for (auto [row, n] : rects_per_row) EXPECT_LE(n, 1200 / 3) << "track " << row.first;
  for (const json& lane : ItemsOf(doc, "lane")) EXPECT_GE(lane["level"].get<int>(), 0);
  std::map<std::string, int> steps;
  for (const json& m : ItemsOf(doc, "marker", "step")) steps[m["clock"]]++;
  EXPECT_GT(steps["device"], 0);  // thinned to every k-th step, but there
  EXPECT_LT(steps["device"], 4000);
}

// Nothing changes, nothing is drawn: the window sleeps in glfwWaitEvents.
TEST(ShardscopeUi, UsesNoCpuWhileNothingChanges) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  std::string db = testing::TempPath("fixture.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 8}}).ok());
  Result r = RunUnderXvfb(absl::StrCat(db, " --exit-after 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string line;
  for (absl::string_view l : absl::StrSplit(r.output, '\n')) {
    if (absl::StartsWith(l, "idle ")) line = std::string(l);
  }
  ASSERT_FALSE(line.empty()) << r.output;
  double percent = -1, wall = 0;
  for (absl::string_view word : absl::StrSplit(line, ' ')) {
    if (absl::StartsWith(word, "cpu_percent=")) {
      ASSERT_TRUE(absl::SimpleAtod(word.substr(12), &percent));
    }
    if (absl::StartsWith(word, "wall_s=")) {
      ASSERT_TRUE(absl::SimpleAtod(word.substr(7), &wall));
    }
  }
  EXPECT_GT(wall, 2.0) << line;
  // The goal is 1%; the margin covers a loaded CI machine's scheduling noise.
  EXPECT_LT(percent, 3.0) << line;
}

// --follow: the window follows a run while another process writes it, and
// reloads as its steps land.
// --follow started before the run: the app waits for the file and its first
// run (it exited with "no such file" or "holds no runs yet").
TEST(Screenshot, FollowWaitsForTheFirstRun) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  const std::string db = testing::TempPath("follow_wait.db");
  const std::string layout = testing::TempPath("follow_wait.json");
  std::filesystem::remove(db);
  std::filesystem::remove(layout);
  std::thread run([&] {
    usleep(1500000);  // the app is up and waiting
    EXPECT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  });
  testing::UiResult r = testing::RunUi(Ui(), absl::StrCat(db, " --follow --dump-layout ", layout));
  run.join();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("waiting for a run to start (--follow)"));
  EXPECT_EQ(testing::ReadLayout(layout).value("view", ""), "timeline") << r.output;
}

TEST(Screenshot, FollowReloadsAsStepsLand) {
  if (!HaveXvfb()) GTEST_SKIP() << "xvfb-run or xauth is not installed (apt-get install xvfb xauth)";
  const std::string db = absl::StrCat(::testing::TempDir(), "/follow_", getpid(), ".db");
  std::remove(db.c_str());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = store::Writer::Open(db);
    if (!w.ok()) _exit(3);
    trace::RunRecord run;
    run.sample = "follow";
    if (!(*w)->StartRun(run).ok()) _exit(4);
    trace::TrackRecord t;
    t.track_id = 1;
    t.name = "chip 0";
    t.clock = trace::Clock::kDevice;
    t.device_id = 0;
    (*w)->Record(t);
    for (int step = 0; step < 40; ++step) {
      for (int i = 0; i < 50; ++i) {
        trace::SliceRecord s;
        s.slice_id = step * 100 + i + 1;
        s.track_id = 1;
        s.start_ns = (step * 50 + i) * 100000;
        s.dur_ns = 90000;
        s.name = "fusion.1";
        s.kind = trace::SliceKind::kCompute;
        s.step = step;
        (*w)->Record(s);
      }
      trace::StepRecord st;
      st.step = step;
      st.wall_ns = 1;
      (*w)->Record(st);
      (*w)->Flush();
      usleep(200000);
    }
    (*w)->EndRun();
    _exit(0);
  }
  for (int k = 0; k < 100; ++k) {  // the run's first step is in the file
    usleep(50000);
    auto r = store::Reader::Open(db);
    if (!r.ok()) continue;
    auto q = r->Query("SELECT count(*) AS n FROM steps");
    if (q.ok() && q->Int(0, "n") > 0) break;
  }
  Result r = RunUnderXvfb(absl::StrCat(db, " --follow --exit-after 5"));
  int status = 0;
  waitpid(child, &status, 0);
  int reloads = 0;
  long long last = -1;
  bool increasing = true;
  for (absl::string_view l : absl::StrSplit(r.output, '\n')) {
    long long steps = 0;
    if (!absl::ConsumePrefix(&l, "following run 1: ")) continue;
    ASSERT_TRUE(absl::SimpleAtoi(l.substr(0, l.find(' ')), &steps)) << l;
    increasing &= steps > last;
    last = steps;
    ++reloads;
  }
  EXPECT_GE(reloads, 2) << r.output;
  EXPECT_TRUE(increasing) << r.output;
}

}  // namespace
}  // namespace shardscope::app
