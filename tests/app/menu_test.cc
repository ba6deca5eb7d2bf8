// The menu bar's parts without a window (ui/app/app_menu.h): recent files kept
// in $XDG_CONFIG_HOME/shardscope/recent, newest first, once each, at most 10;
// the playhead stepping through a run's steps and stopping at its ends.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"
#include "ui/app/app_menu.h"

namespace shardscope::app {
namespace {

TEST(RecentFiles, NewestFirstOnceEachAtMostTen) {
  const std::string dir = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("recent_", getpid()));
  std::filesystem::remove_all(dir);
  setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  EXPECT_EQ(RecentFilesPath(), dir + "/shardscope/recent");
  EXPECT_TRUE(LoadRecentFiles().empty());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(AddRecentFile(absl::StrCat("/data/run", i, ".db")).ok());
  ASSERT_TRUE(AddRecentFile("/data/run5.db").ok());
  auto recent = LoadRecentFiles();
  ASSERT_EQ(recent.size(), kMaxRecentFiles);
  EXPECT_EQ(recent[0], "/data/run5.db");
  EXPECT_EQ(recent[1], "/data/run11.db");
  EXPECT_EQ(std::count(recent.begin(), recent.end(), "/data/run5.db"), 1);
  // A relative path is kept absolute.
  ASSERT_TRUE(AddRecentFile("x.db").ok());
  EXPECT_EQ(LoadRecentFiles()[0], (std::filesystem::current_path() / "x.db").lexically_normal().string());
  std::ifstream in(RecentFilesPath());
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, LoadRecentFiles()[0]);
  // A file that cannot be written says which.
  setenv("XDG_CONFIG_HOME", "/proc/no/such", 1);
  auto st = AddRecentFile("/data/a.db");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("/proc/no/such/shardscope/recent"), std::string::npos) << st;
  unsetenv("XDG_CONFIG_HOME");
}

TEST(Playback, StepsThroughTheRunAndStopsAtItsEnds) {
  const std::vector<int32_t> steps = {0, 1, 2, 5, 9};
  UiState ui;
  Playback p;
  p.Step(ui, steps, +1);
  EXPECT_EQ(ui.playhead_step, 0);
  p.Step(ui, steps, +1);
  p.Step(ui, steps, +1);
  p.Step(ui, steps, +1);
  EXPECT_EQ(ui.playhead_step, 5);
  p.Step(ui, steps, +5);
  EXPECT_EQ(ui.playhead_step, 9);
  p.Step(ui, steps, -1);
  EXPECT_EQ(ui.playhead_step, 5);
  // Playing from the last step starts over; the next move is a period away.
  ui.playhead_step = 9;
  p.Toggle(ui, steps);
  EXPECT_TRUE(p.playing());
  EXPECT_EQ(ui.playhead_step, 0);
  EXPECT_GT(p.NextWakeS(), 0);
  EXPECT_LE(p.NextWakeS(), p.period_s);
  p.Toggle(ui, steps);
  EXPECT_FALSE(p.playing());
  EXPECT_LT(p.NextWakeS(), 0);
  // A run without steps has nothing to play.
  UiState empty;
  p.Toggle(empty, {});
  EXPECT_FALSE(p.playing());
  EXPECT_FALSE(empty.playhead_step.has_value());
}

// The speed: [ and ] walk kPlaybackSpeeds and stop at its ends; the period is one step at that speed.
TEST(Playback, SpeedSetsThePeriodAndStopsAtItsEnds) {
  Playback p;
  EXPECT_DOUBLE_EQ(p.steps_per_s(), 1);
  EXPECT_DOUBLE_EQ(p.period_s, 1);
  p.ChangeSpeed(+1);
  EXPECT_DOUBLE_EQ(p.steps_per_s(), 2);
  EXPECT_DOUBLE_EQ(p.period_s, 0.5);
  for (int i = 0; i < 20; ++i) p.ChangeSpeed(+1);
  EXPECT_DOUBLE_EQ(p.steps_per_s(), kPlaybackSpeeds[kNumPlaybackSpeeds - 1]);
  for (int i = 0; i < 20; ++i) p.ChangeSpeed(-1);
  EXPECT_DOUBLE_EQ(p.steps_per_s(), 0.25);
  EXPECT_DOUBLE_EQ(p.period_s, 4);
  // Playing at that speed: the next move is at most a period away.
  const std::vector<int32_t> steps = {0, 1, 2};
  UiState ui;
  p.Toggle(ui, steps);
  EXPECT_GT(p.NextWakeS(), 1);
  EXPECT_LE(p.NextWakeS(), 4);
}

// The open dialog without a window: folders, then databases, then the rest;
// a typed filter narrows them (any case), Up/Down move the cursor within what
// is shown and stop at the ends, Enter enters a folder or returns a file.
TEST(FileDialog, FilterAndKeysPickAFile) {
  const std::filesystem::path dir = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("dialog_", getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "pods");
  std::filesystem::create_directories(dir / "other");
  for (const char* f : {"mlp.db", "Llama.sqlite", "notes.txt", "pods/pod512.db", "pods/pod4k.db"}) {
    std::ofstream(dir / f) << "x";
  }
  FileDialog d;
  d.Open(dir.string());
  EXPECT_EQ(d.Shown(), (std::vector<std::string>{"other/", "pods/", "Llama.sqlite", "mlp.db", "notes.txt"}));
  EXPECT_EQ(d.cursor(), 0);
  d.SetFilter("LLA");
  EXPECT_EQ(d.Shown(), (std::vector<std::string>{"Llama.sqlite"}));
  d.MoveCursor(+1);  // one entry: the cursor stays on it
  EXPECT_EQ(d.cursor(), 0);
  EXPECT_EQ(d.Activate(), (dir / "Llama.sqlite").lexically_normal().string());
  // Into a folder with the keys: the filter is cleared there.
  d.SetFilter("o");
  EXPECT_EQ(d.Shown(), (std::vector<std::string>{"other/", "pods/", "notes.txt"}));
  d.MoveCursor(+1);
  EXPECT_EQ(d.cursor(), 1);
  EXPECT_EQ(d.Activate(), std::nullopt);
  EXPECT_EQ(d.dir(), (dir / "pods").lexically_normal());
  EXPECT_EQ(d.Shown(), (std::vector<std::string>{"pod4k.db", "pod512.db"}));
  d.MoveCursor(+5);
  EXPECT_EQ(d.cursor(), 1);
  d.MoveCursor(-9);
  EXPECT_EQ(d.cursor(), 0);
  EXPECT_EQ(d.Activate(), (dir / "pods" / "pod4k.db").lexically_normal().string());
  // Nothing matches: Enter does nothing.
  d.SetFilter("zzz");
  EXPECT_TRUE(d.Shown().empty());
  EXPECT_EQ(d.Activate(), std::nullopt);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardscope::app
