// The menu bar's parts; see app_menu.h.
#include "ui/app/app_menu.h"

#include <imgui.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardscope::app {
namespace {

// The GLFW backend indexes ImGui's keys by GLFW's key codes.
constexpr int kKeyComma = 44, kKeyPeriod = 46, kKeyLeftBracket = 91, kKeyRightBracket = 93;

bool LooksLikeDatabase(const std::string& name) {
  for (const char* ext : {".db", ".sqlite", ".sqlite3"})
    if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return false;
}

}  // namespace

std::string RecentFilesPath() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return absl::StrCat(xdg, "/shardscope/recent");
  if (const char* home = std::getenv("HOME"); home && *home) return absl::StrCat(home, "/.config/shardscope/recent");
  return "";
}

std::vector<std::string> LoadRecentFiles() {
  std::vector<std::string> out;
  const std::string path = RecentFilesPath();
  if (path.empty()) return out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line) && out.size() < kMaxRecentFiles)
    if (!line.empty() && std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
  return out;
}

absl::Status AddRecentFile(const std::string& path) {
  const std::string file = RecentFilesPath();
  if (file.empty()) return absl::FailedPreconditionError("recent files: neither XDG_CONFIG_HOME nor HOME is set");
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  std::vector<std::string> recent = LoadRecentFiles();
  recent.erase(std::remove(recent.begin(), recent.end(), absolute), recent.end());
  recent.insert(recent.begin(), absolute);
  if (recent.size() > kMaxRecentFiles) recent.resize(kMaxRecentFiles);
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  // Written whole to a new file, then renamed: two windows never leave half a list.
  const std::string tmp = absl::StrCat(file, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const std::string& r : recent) out << r << "\n";
    if (!out) return absl::UnavailableError(absl::StrCat("recent files: cannot write ", tmp));
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("recent files: cannot write ", file, ": ", ec.message()));
  return absl::OkStatus();
}

void FileDialog::Open(const std::string& start_dir) {
  open_ = just_opened_ = true;
  std::error_code ec;
  filter_[0] = '\0';
  List(std::filesystem::absolute(start_dir.empty() ? "." : start_dir, ec));
  path_[0] = '\0';
}

void FileDialog::SetFilter(const std::string& text) {
  std::snprintf(filter_, sizeof(filter_), "%s", text.c_str());
  Refilter();
}

void FileDialog::Refilter() {
  const std::string want = absl::AsciiStrToLower(filter_);
  shown_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (want.empty() || absl::StrContains(absl::AsciiStrToLower(entries_[i].name), want)) shown_.push_back(i);
  }
  cursor_ = 0;
  scroll_to_cursor_ = true;
}

std::vector<std::string> FileDialog::Shown() const {
  std::vector<std::string> out;
  for (size_t i : shown_) out.push_back(entries_[i].dir ? entries_[i].name + "/" : entries_[i].name);
  return out;
}

void FileDialog::MoveCursor(int delta) {
  if (shown_.empty()) return;
  cursor_ = std::clamp(cursor_ + delta, 0, static_cast<int>(shown_.size()) - 1);
  scroll_to_cursor_ = true;
}

std::optional<std::string> FileDialog::Activate() {
  if (cursor_ < 0 || cursor_ >= static_cast<int>(shown_.size())) return std::nullopt;
  const Entry e = entries_[shown_[static_cast<size_t>(cursor_)]];
  if (e.dir) {
    filter_[0] = '\0';
    List(dir_ / e.name);
    return std::nullopt;
  }
  std::snprintf(path_, sizeof(path_), "%s", (dir_ / e.name).string().c_str());
  return std::string(path_);
}

void FileDialog::List(const std::filesystem::path& dir) {
  dir_ = dir.lexically_normal();
  entries_.clear();
  error_.clear();
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir_, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_ec;
    entries_.push_back({name, it->is_directory(type_ec)});
  }
  if (ec) error_ = absl::StrCat("cannot list ", dir_.string(), ": ", ec.message());
  // Folders first, then databases, then the rest; by name within each.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    auto rank = [](const Entry& e) { return e.dir ? 0 : LooksLikeDatabase(e.name) ? 1 : 2; };
    return std::pair(rank(a), a.name) < std::pair(rank(b), b.name);
  });
  Refilter();
}

std::optional<std::string> FileDialog::Draw() {
  if (!open_) return std::nullopt;
  if (just_opened_) {
    ImGui::OpenPopup("Open a shardscope database");
    just_opened_ = false;
  }
  std::optional<std::string> picked;
  ImGui::SetNextWindowSize(ImVec2(640, 460), ImGuiCond_Appearing);
  if (ImGui::BeginPopupModal("Open a shardscope database", &open_)) {
    if (ImGui::Button("Up")) List(dir_.parent_path());
    ImGui::SameLine();
    ImGui::TextUnformatted(dir_.string().c_str());
    // The filter has the keyboard: typing narrows the list, Up/Down move the
    // cursor, Enter opens what it is on.
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    ImGui::SetNextItemWidth(-1);
    if (ImGui::InputTextWithHint("##filter", "filter: type to narrow, Up/Down to move, Enter to open", filter_,
                                 sizeof(filter_))) {
      Refilter();
    }
    const bool filter_active = ImGui::IsItemActive();
    if (filter_active || ImGui::IsWindowFocused(ImGuiFocusedFlags_ChildWindows)) {
      if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) MoveCursor(+1);
      if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) MoveCursor(-1);
      if (filter_active && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false)) {
        picked = Activate();
        ImGui::SetKeyboardFocusHere(-1);  // keep typing after entering a folder
      }
    }
    if (!error_.empty()) ImGui::TextColored(ImVec4(0.92f, 0.43f, 0.31f, 1), "%s", error_.c_str());
    ImGui::BeginChild("##entries", ImVec2(0, -2 * ImGui::GetFrameHeightWithSpacing()), true);
    std::optional<std::filesystem::path> enter;
    const std::vector<size_t> shown = shown_;  // a click below may list another folder
    for (size_t k = 0; k < shown.size() && !enter; ++k) {
      const Entry& e = entries_[shown[k]];
      const std::string label = e.dir ? e.name + "/" : e.name;
      const bool db = !e.dir && LooksLikeDatabase(e.name);
      if (!e.dir && !db) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
      const bool at_cursor = static_cast<int>(k) == cursor_;
      if (at_cursor && scroll_to_cursor_) {
        ImGui::SetScrollHereY();
        scroll_to_cursor_ = false;
      }
      if (ImGui::Selectable(label.c_str(), at_cursor, ImGuiSelectableFlags_AllowDoubleClick)) {
        cursor_ = static_cast<int>(k);
        if (e.dir) {
          enter = dir_ / e.name;
        } else {
          std::snprintf(path_, sizeof(path_), "%s", (dir_ / e.name).string().c_str());
          if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) picked = path_;
        }
      }
      if (!e.dir && !db) ImGui::PopStyleColor();
    }
    ImGui::EndChild();
    if (enter) {
      filter_[0] = '\0';
      List(*enter);
    }
    ImGui::SetNextItemWidth(-140);
    const bool typed = ImGui::InputText("##path", path_, sizeof(path_), ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if ((ImGui::Button("Open") || typed) && path_[0]) {
      std::error_code ec;
      if (std::filesystem::is_directory(path_, ec)) {
        List(path_);
        path_[0] = '\0';
      } else {
        picked = path_;
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) open_ = false;
    if (picked) open_ = false;
    if (!open_) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return picked;
}

void Playback::Step(UiState& ui, const std::vector<int32_t>& steps, int delta) {
  if (steps.empty()) return;
  auto it = ui.playhead_step ? std::lower_bound(steps.begin(), steps.end(), *ui.playhead_step) : steps.begin();
  long i = it - steps.begin();
  if (!ui.playhead_step) i = delta > 0 ? -1 : static_cast<long>(steps.size());
  i = std::clamp<long>(i + delta, 0, static_cast<long>(steps.size()) - 1);
  ui.playhead_step = steps[static_cast<size_t>(i)];
  last_ = std::chrono::steady_clock::now();
}

void Playback::Toggle(UiState& ui, const std::vector<int32_t>& steps) {
  playing_ = !playing_ && !steps.empty();
  // Playing from the last step starts over.
  if (playing_ && (!ui.playhead_step || *ui.playhead_step >= steps.back())) ui.playhead_step = steps.front();
  last_ = std::chrono::steady_clock::now();
}

void Playback::SetSpeed(int index) {
  speed_ = std::clamp(index, 0, kNumPlaybackSpeeds - 1);
  period_s = 1.0 / kPlaybackSpeeds[speed_];
}

double Playback::NextWakeS() const {
  if (!playing_) return -1;
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
  return std::max(0.0, period_s - since);
}

void Playback::Draw(UiState& ui, const std::vector<int32_t>& steps) {
  ImGuiIO& io = ImGui::GetIO();
  if (!ui.headless && !io.WantTextInput && !io.KeyCtrl) {
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) Toggle(ui, steps);
    if (ImGui::IsKeyPressed(kKeyComma)) Step(ui, steps, -1);
    if (ImGui::IsKeyPressed(kKeyPeriod)) Step(ui, steps, +1);
    if (ImGui::IsKeyPressed(kKeyLeftBracket)) ChangeSpeed(-1);
    if (ImGui::IsKeyPressed(kKeyRightBracket)) ChangeSpeed(+1);
  }
  if (playing_ && NextWakeS() <= 0) {
    if (ui.playhead_step && *ui.playhead_step >= steps.back()) {
      playing_ = false;  // the end of the run
    } else {
      Step(ui, steps, +1);
    }
  }
  if (steps.empty()) return;
  if (ImGui::SmallButton("|<")) ui.playhead_step = steps.front();
  ImGui::SameLine(0, 2);
  if (ImGui::SmallButton("<")) Step(ui, steps, -1);
  ImGui::SameLine(0, 2);
  if (ImGui::SmallButton(playing_ ? "pause" : "play")) Toggle(ui, steps);
  ImGui::SameLine(0, 2);
  if (ImGui::SmallButton(">")) Step(ui, steps, +1);
  ImGui::SameLine(0, 2);
  if (ImGui::SmallButton(">|")) ui.playhead_step = steps.back();
  ImGui::SameLine(0, 6);
  // The speed: a click goes one faster, wrapping round to the slowest.
  const double sps = steps_per_s();
  const std::string speed =
      sps < 1 ? absl::StrFormat("1 step / %gs", 1 / sps) : absl::StrFormat("%g step%s/s", sps, sps == 1 ? "" : "s");
  if (ImGui::SmallButton(speed.c_str())) SetSpeed(speed_ + 1 < kNumPlaybackSpeeds ? speed_ + 1 : 0);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("playback speed: [ slower, ] faster");
  ImGui::SameLine();
  const std::string where = ui.playhead_step ? absl::StrFormat("step %d of %d-%d", *ui.playhead_step, steps.front(),
                                                               steps.back())
                                             : absl::StrFormat("steps %d-%d (Space: play, , and .: step, [ ]: speed)",
                                                               steps.front(), steps.back());
  ImGui::TextUnformatted(where.c_str());
}

}  // namespace shardscope::app
