// The workstation's menu bar and what it needs beyond the views: the recent
// files (persisted), an open-file dialog drawn with ImGui (no toolkit), and
// the playhead that steps through a stored run (playback) with the views
// following it (UiState::playhead_step).
//   File      Open... (Ctrl+O), Recent files
//   View      every view, those not built greyed
//   Run       every run in the file
//   Playback  play/pause (Space), previous/next step (, and .), first/last
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// Recent files: absolute paths, newest first, at most kMaxRecentFiles, one a
// line in $XDG_CONFIG_HOME/shardscope/recent (~/.config/shardscope/recent
// when XDG_CONFIG_HOME is unset). "" when neither variable is set.
inline constexpr size_t kMaxRecentFiles = 10;
std::string RecentFilesPath();
std::vector<std::string> LoadRecentFiles();
// Puts `path` first (made absolute, once); the error names the file it could not write.
absl::Status AddRecentFile(const std::string& path);

// A modal file browser: a directory's folders and files (databases first
// marked), a filter field that narrows them as one types (focused when the
// dialog opens), Up and Down to move the cursor through what is shown, Enter
// to open the entry under it (a folder is entered), a path field, Open and
// Cancel.
class FileDialog {
 public:
  void Open(const std::string& start_dir);
  bool is_open() const { return open_; }
  // Draws it while open; returns the path picked, once.
  std::optional<std::string> Draw();

  // The same without a window (Draw calls these; tests too).
  // Shows only the entries whose name holds `text` (any case); the cursor
  // goes to the first of them.
  void SetFilter(const std::string& text);
  // The shown entries' names (folders end in '/'), in order; the cursor's index.
  std::vector<std::string> Shown() const;
  int cursor() const { return cursor_; }
  const std::filesystem::path& dir() const { return dir_; }
  // Moves the cursor by `delta` within what is shown (stops at the ends).
  void MoveCursor(int delta);
  // Enter: a folder under the cursor is entered (the filter cleared); a file
  // is returned.
  std::optional<std::string> Activate();

 private:
  struct Entry {
    std::string name;
    bool dir = false;
  };
  void List(const std::filesystem::path& dir);
  void Refilter();

  bool open_ = false, just_opened_ = false;
  std::filesystem::path dir_;
  std::vector<Entry> entries_;
  std::vector<size_t> shown_;  // indices into entries_ that pass the filter
  int cursor_ = 0;             // into shown_
  bool scroll_to_cursor_ = false;
  std::string error_;
  char path_[1024] = {};
  char filter_[256] = {};
};

// Playback speeds, in steps a second: [ and ] (or the Playback menu) pick the next slower or faster.
inline constexpr double kPlaybackSpeeds[] = {0.25, 0.5, 1, 2, 4, 8, 16};
inline constexpr int kNumPlaybackSpeeds = 7;

// The playhead over a run's steps: buttons, keys and, while playing, one step a `period_s`.
class Playback {
 public:
  // One of kPlaybackSpeeds by index (clamped); period_s follows. Keeps the playhead where it is.
  void SetSpeed(int index);
  // -1 slower, +1 faster.
  void ChangeSpeed(int delta) { SetSpeed(speed_ + delta); }
  int speed() const { return speed_; }
  double steps_per_s() const { return kPlaybackSpeeds[speed_]; }
  // Handles the keys, advances when playing, and draws the toolbar on the current line.
  void Draw(UiState& ui, const std::vector<int32_t>& steps);
  // Menu actions and tests.
  void Step(UiState& ui, const std::vector<int32_t>& steps, int delta);
  void Toggle(UiState& ui, const std::vector<int32_t>& steps);
  bool playing() const { return playing_; }
  // Seconds until it next moves the playhead (-1: not playing): the shell sleeps that long at most.
  double NextWakeS() const;
  double period_s = 1.0;

 private:
  bool playing_ = false;
  int speed_ = 2;  // 1 step a second
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace shardscope::app
