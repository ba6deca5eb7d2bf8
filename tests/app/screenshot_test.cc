// End-to-end tests of the shardscope-ui binary: its command line, its errors
// without a display or with a bad file, and a screenshot under Xvfb that must
// show exactly one lane per device with that device's slices drawn in it.
#include <stb_image.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/app/fixture.h"

namespace shardscope::app {
namespace {

using ::testing::HasSubstr;

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
  // 200k tiny slices on chip 0: the whole-run view must still come up.
  ASSERT_TRUE(
      testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 4, .tiny_slices = 200'000}})
          .ok());
  Result timeline = RunUnderXvfb(absl::StrCat(db, " --screenshot ", png));
  ASSERT_EQ(timeline.exit_code, 0) << timeline.output;
  auto lanes = ParseLanes(timeline.output);
  ASSERT_FALSE(lanes.empty());
  int blocks = -1;
  for (const Lane& lane : lanes) {
    if (lane.fields.count("device") && lane.Int("device") == 0) blocks = lane.Int("blocks");
  }
  // Folded to the screen: far fewer shapes than the 200k slices.
  EXPECT_GT(blocks, 0);
  EXPECT_LT(blocks, 2000);

  Result r = RunUnderXvfb(absl::StrCat(db, " --view recompilations --screenshot ", png));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Image img = LoadPng(png);
  EXPECT_EQ(img.w, 1600);
  EXPECT_EQ(img.h, 900);
}

}  // namespace
}  // namespace shardscope::app
