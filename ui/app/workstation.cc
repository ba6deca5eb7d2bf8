// The workstation's top level; see workstation.h.
#include "ui/app/workstation.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <imgui.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {

Workstation::Workstation(std::unique_ptr<TraceModel> model, std::function<void()> wake, bool start_loading)
    : wake_(std::move(wake)) {
  SetModel(std::move(model), start_loading);
  // Overview is the first tab, but the workstation lands on the timeline
  // (ImGui would show the first tab; --view picks another).
  ui_.bring_to_front = ViewId::kTimeline;
}

bool Workstation::Builds(ViewId id) {
  switch (id) {
    case ViewId::kOverview:
    case ViewId::kTimeline:
    case ViewId::kSharding:
    case ViewId::kRecompilations:
    case ViewId::kGraph:
    case ViewId::kOps:
    case ViewId::kMemory:
    case ViewId::kMetrics:
    case ViewId::kCompare:
    case ViewId::kFleet:
      return true;
    default:
      return false;
  }
}

bool Workstation::complete() const {
  switch (active_view_) {
    case ViewId::kTimeline: return timeline_->complete();
    case ViewId::kOverview: return overview_->complete();
    case ViewId::kRecompilations: return compilations_->complete();
    case ViewId::kGraph: return graph_->complete();
    case ViewId::kOps: return ops_->complete();
    case ViewId::kMetrics: return metrics_->complete();
    case ViewId::kMemory: return memory_->complete();
    case ViewId::kCompare: return compare_->complete();
    case ViewId::kFleet: return fleet_->complete();
    case ViewId::kSharding: return placement_->complete();
    default: return true;
  }
}

bool Workstation::WaitForData(double timeout_s) {
  switch (active_view_) {
    case ViewId::kOverview: return overview_->Wait(timeout_s);
    case ViewId::kOps: return ops_->Wait(timeout_s);
    case ViewId::kMetrics: return metrics_->Wait(timeout_s);
    case ViewId::kMemory: return memory_->Wait(timeout_s);
    case ViewId::kCompare: return compare_->Wait(timeout_s);
    case ViewId::kFleet: return fleet_->Wait(timeout_s);
    case ViewId::kSharding: return placement_->Wait(timeout_s);
    case ViewId::kRecompilations:
    case ViewId::kGraph:
      // Their queries wake the window when they finish; a capture polls.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, static_cast<int>(timeout_s * 1000))));
      return complete();
    default: return loader_->WaitIdle(timeout_s);
  }
}

void Workstation::SetModel(std::unique_ptr<TraceModel> model, bool start_loading) {
  // Views hold a reference to the model, so they go before it does.
  timeline_.reset();
  loader_.reset();  // joins its thread before the model it read goes
  placement_.reset();
  compilations_.reset();
  graph_.reset();
  overview_.reset();  // interrupts a model still being built
  ops_.reset();
  metrics_.reset();
  memory_.reset();
  fleet_.reset();
  std::optional<CompareTarget> compare_with;  // the comparison follows a new run of the same file
  if (compare_ && compare_->target()) compare_with = *compare_->target();
  compare_.reset();
  model_ = std::move(model);
  loader_ = std::make_unique<TimelineLoader>(*model_, wake_, LoaderOptions{}, start_loading);
  timeline_ = std::make_unique<TimelineView>(*model_, *loader_);
  placement_ = std::make_unique<PlacementView>(*model_, wake_);
  compilations_ = std::make_unique<CompilationsView>(*model_, wake_);
  graph_ = std::make_unique<GraphView>(*model_, wake_);
  overview_ = std::make_unique<OverviewView>(*model_, wake_);
  ops_ = std::make_unique<OpsView>(*model_, wake_);
  metrics_ = std::make_unique<MetricsView>(*model_, wake_);
  memory_ = std::make_unique<MemoryView>(*model_, wake_);
  fleet_ = std::make_unique<FleetView>(*model_, wake_);
  compare_ = std::make_unique<CompareView>(*model_, wake_);
  if (compare_with && !compare_with->path.empty()) compare_->SetTarget(*compare_with);
  ui_.selected_compile_id.reset();
  ui_.selected_op.reset();
  ui_.selected_graph.reset();
  ui_.show_chip.reset();
  ui_.playhead_step.reset();
  const int speed = playback_.speed();  // a new run plays at the speed picked
  playback_ = Playback{};
  playback_.SetSpeed(speed);
  ui_.selection_text.clear();
}

std::string Workstation::Title() const {
  return absl::StrCat("shardscope \xE2\x80\x94 ", std::filesystem::path(model_->path).filename().string(),
                      " \xE2\x80\x94 run ", model_->run.run_id, " ", model_->run.sample);
}

std::string RunLine(const RunInfo& run) {
  // An imported trace has no mesh: "mesh , 0 chips" read as a damaged row.
  std::string line = absl::StrCat("run ", run.run_id, ": ", run.sample);
  if (!run.mesh.empty()) absl::StrAppend(&line, ", mesh ", run.mesh);
  absl::StrAppend(&line, ", ", run.num_devices, run.num_devices == 1 ? " chip" : " chips", " on ", run.num_hosts,
                  run.num_hosts == 1 ? " host" : " hosts", ", profile ", run.profile,
                  run.simulated ? ", simulated (no numerics)" : "");
  if (run.status != "finished") absl::StrAppend(&line, " [", run.status, "]");
  return line;
}

void Workstation::DrawRunLine() {
  const RunInfo& run = model_->run;
  ImGui::TextColored(ImVec4(kClockLabel.r / 255.f, kClockLabel.g / 255.f, kClockLabel.b / 255.f, 1),
                     "%s", std::filesystem::path(model_->path).filename().string().c_str());
  ImGui::SameLine();
  ImGui::TextUnformatted(RunLine(run).c_str());
  ImGui::SameLine(0, 30);
  playback_.Draw(ui_, model_->steps);
  if (model_->run_ids.size() > 1) {
    ImGui::SameLine(0, 12);
    ImGui::SetNextItemWidth(110);
    std::string current = absl::StrCat("run ", run.run_id);
    if (ImGui::BeginCombo("##run", current.c_str())) {
      for (int64_t id : model_->run_ids) {
        std::string label = absl::StrCat("run ", id);
        if (ImGui::Selectable(label.c_str(), id == run.run_id) && id != run.run_id) {
          ui_.switch_to_run = id;
        }
      }
      ImGui::EndCombo();
    }
  }
}

std::string Workstation::TabLabel(ViewId id) const {
  const ViewInfo& info = ViewInfoOf(id);
  switch (id) {
    case ViewId::kSharding: {
      // The tab itself flags involuntary full rematerializations.
      const size_t remats = model_->sharding.rematerializations.size();
      if (remats) return absl::StrCat(info.title, " (", remats, " remat)###", info.name);
      break;
    }
    case ViewId::kRecompilations: {
      // Compilations, not cache lookups: a run with no recompilation shows its one compile per call site.
      const int64_t misses = std::count_if(model_->compilations.begin(), model_->compilations.end(),
                                           [](const auto& c) { return c.cache == "miss"; });
      return absl::StrCat(info.title, " (", misses, ")###", info.name);
    }
    default:
      break;
  }
  return absl::StrCat(info.title, "###", info.name);
}

void Workstation::DrawView(ViewId id) {
  switch (id) {
    case ViewId::kOverview: overview_->Draw(ui_); break;
    case ViewId::kOps: ops_->Draw(ui_); break;
    case ViewId::kMetrics: metrics_->Draw(ui_); break;
    case ViewId::kMemory: memory_->Draw(ui_); break;
    case ViewId::kCompare: compare_->Draw(ui_); break;
    case ViewId::kTimeline: timeline_->Draw(ui_); break;
    case ViewId::kSharding: placement_->Draw(ui_); break;
    case ViewId::kRecompilations: compilations_->Draw(ui_); break;
    case ViewId::kGraph: graph_->Draw(ui_); break;
    case ViewId::kFleet: fleet_->Draw(ui_); break;
    default: break;
  }
}

// File, View, Run and Playback: every view and every run of the file, recent
// files and the open dialog, the playhead's actions.
void Workstation::DrawMenuBar() {
  if (!ImGui::BeginMenuBar()) return;
  const ImGuiIO& io = ImGui::GetIO();
  bool open_dialog = !ui_.headless && io.KeyCtrl && ImGui::IsKeyPressed('O', false);
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open...", "Ctrl+O")) open_dialog = true;
    if (ImGui::IsWindowAppearing()) recent_ = LoadRecentFiles();
    if (ImGui::BeginMenu("Recent files", !recent_.empty())) {
      for (const std::string& path : recent_)
        if (ImGui::MenuItem(path.c_str(), nullptr, path == model_->path)) ui_.open_path = path;
      ImGui::EndMenu();
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (const ViewInfo& view : kViews) {
      const bool built = Builds(view.id);
      const std::string label = built ? std::string(view.title) : absl::StrCat(view.title, " (not built yet)");
      if (ImGui::MenuItem(label.c_str(), nullptr, active_view_ == view.id, built)) ui_.bring_to_front = view.id;
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Run")) {
    for (int64_t id : model_->run_ids) {
      const std::string label = absl::StrCat("run ", id);
      if (ImGui::MenuItem(label.c_str(), nullptr, id == model_->run.run_id) && id != model_->run.run_id)
        ui_.switch_to_run = id;
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Playback", !model_->steps.empty())) {
    if (ImGui::MenuItem(playback_.playing() ? "Pause" : "Play", "Space")) playback_.Toggle(ui_, model_->steps);
    if (ImGui::MenuItem("Previous step", ",")) playback_.Step(ui_, model_->steps, -1);
    if (ImGui::MenuItem("Next step", ".")) playback_.Step(ui_, model_->steps, +1);
    if (ImGui::MenuItem("First step")) ui_.playhead_step = model_->steps.front();
    if (ImGui::MenuItem("Last step")) ui_.playhead_step = model_->steps.back();
    if (ImGui::BeginMenu("Speed")) {
      for (int i = 0; i < kNumPlaybackSpeeds; ++i) {
        const std::string label = absl::StrFormat("%g steps a second", kPlaybackSpeeds[i]);
        if (ImGui::MenuItem(label.c_str(), i == 0 ? "[" : i == kNumPlaybackSpeeds - 1 ? "]" : nullptr,
                            playback_.speed() == i))
          playback_.SetSpeed(i);
      }
      ImGui::EndMenu();
    }
    ImGui::EndMenu();
  }
  // The run line shares the bar: the views keep the window's height.
  ImGui::SameLine(0, 24);
  DrawRunLine();
  ImGui::EndMenuBar();
  if (open_dialog) file_dialog_.Open(std::filesystem::path(model_->path).parent_path().string());
  if (auto picked = file_dialog_.Draw()) ui_.open_path = *picked;
}

void Workstation::Draw() {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  // The window fills the display, whose every frame starts cleared to
  // kBackground (the shell's glClear): its own background would paint the
  // same colour over every pixel again, which a software renderer pays for
  // in full.
  ImGui::SetNextWindowBgAlpha(0.0f);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_MenuBar |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("shardscope", nullptr, flags);
  if (ui_.layout) ui_.layout->Begin("");  // the view drawn below names itself
  DrawMenuBar();
  if (ImGui::BeginTabBar("##views")) {
    // A view asked for (a link, --view) is drawn from the frame its tab
    // comes to the front: the tab shown until then is not drawn this frame,
    // so a view passed through never starts loading what it would show.
    std::optional<ViewId> pending = ui_.bring_to_front;
    if (pending && !Builds(*pending)) pending.reset();
    ui_.bring_to_front.reset();
    for (const ViewInfo& view : kViews) {
      if (!Builds(view.id)) continue;
      const std::string label = TabLabel(view.id);
      const auto flags = pending == view.id ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
      if (ImGui::BeginTabItem(label.c_str(), nullptr, flags)) {
        if (!pending || *pending == view.id) {
          active_view_ = view.id;
          DrawView(view.id);
        }
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
  // The timeline's background reading of a simulated pod's chips goes on only
  // while it is shown: another view's model gets the cores.
  loader_->SetPrefetchPaused(active_view_ != ViewId::kTimeline);
}

}  // namespace shardscope::app
