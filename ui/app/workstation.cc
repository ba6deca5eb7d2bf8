// The workstation's top level; see workstation.h.
#include "ui/app/workstation.h"

#include <algorithm>

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
}

bool Workstation::Builds(ViewId id) {
  switch (id) {
    case ViewId::kTimeline:
    case ViewId::kSharding:
    case ViewId::kRecompilations:
    case ViewId::kGraph:
      return true;
    default:
      return false;
  }
}

bool Workstation::complete() const {
  if (active_view_ == ViewId::kRecompilations) return compilations_->complete();
  if (active_view_ == ViewId::kGraph) return graph_->complete();
  return active_view_ != ViewId::kTimeline || timeline_->complete();
}

void Workstation::SetModel(std::unique_ptr<TraceModel> model, bool start_loading) {
  // Views hold a reference to the model, so they go before it does.
  timeline_.reset();
  loader_.reset();  // joins its thread before the model it read goes
  placement_.reset();
  compilations_.reset();
  graph_.reset();
  model_ = std::move(model);
  loader_ = std::make_unique<TimelineLoader>(*model_, wake_, LoaderOptions{}, start_loading);
  timeline_ = std::make_unique<TimelineView>(*model_, *loader_);
  placement_ = std::make_unique<PlacementView>(*model_);
  compilations_ = std::make_unique<CompilationsView>(*model_, wake_);
  graph_ = std::make_unique<GraphView>(*model_, wake_);
  ui_.selected_compile_id.reset();
  ui_.selection_text.clear();
}

std::string Workstation::Title() const {
  return absl::StrCat("shardscope \xE2\x80\x94 ", std::filesystem::path(model_->path).filename().string(),
                      " \xE2\x80\x94 run ", model_->run.run_id, " ", model_->run.sample);
}

void Workstation::DrawRunLine() {
  const RunInfo& run = model_->run;
  ImGui::TextColored(ImVec4(kClockLabel.r / 255.f, kClockLabel.g / 255.f, kClockLabel.b / 255.f, 1),
                     "%s", std::filesystem::path(model_->path).filename().string().c_str());
  ImGui::SameLine();
  std::string line = absl::StrFormat("run %d: %s, mesh %s, %d chips on %d hosts, profile %s%s",
                                     run.run_id, run.sample, run.mesh, run.num_devices,
                                     run.num_hosts, run.profile,
                                     run.simulated ? ", simulated (no numerics)" : "");
  if (run.status != "finished") absl::StrAppend(&line, " [", run.status, "]");
  ImGui::TextUnformatted(line.c_str());
  if (model_->run_ids.size() > 1) {
    ImGui::SameLine(0, 30);
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
                                 ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("shardscope", nullptr, flags);
  if (ui_.layout) ui_.layout->Begin("");  // the view drawn below names itself
  DrawRunLine();
  if (ImGui::BeginTabBar("##views")) {
    auto tab_flags = [this](ViewId id) {
      return ui_.bring_to_front == id ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
    };
    const auto timeline_flags = tab_flags(ViewId::kTimeline);
    const auto sharding_flags = tab_flags(ViewId::kSharding);
    const auto compile_flags = tab_flags(ViewId::kRecompilations);
    const auto graph_flags = tab_flags(ViewId::kGraph);
    ui_.bring_to_front.reset();
    if (ImGui::BeginTabItem("Timeline", nullptr, timeline_flags)) {
      active_view_ = ViewId::kTimeline;
      timeline_->Draw(ui_);
      ImGui::EndTabItem();
    }
    // The tab itself flags involuntary full rematerializations.
    const size_t remats = model_->sharding.rematerializations.size();
    std::string sharding_label =
        remats ? absl::StrCat("Sharding (", remats, " remat)###sharding") : std::string("Sharding###sharding");
    if (ImGui::BeginTabItem(sharding_label.c_str(), nullptr, sharding_flags)) {
      active_view_ = ViewId::kSharding;
      placement_->Draw(ui_);
      ImGui::EndTabItem();
    }
    // Compilations, not cache lookups: a run with no recompilation shows its one compile per call site.
    const int64_t misses = std::count_if(model_->compilations.begin(), model_->compilations.end(),
                                         [](const auto& c) { return c.cache == "miss"; });
    std::string compile_label = absl::StrCat("Recompilations (", misses, ")###recompilations");
    if (ImGui::BeginTabItem(compile_label.c_str(), nullptr, compile_flags)) {
      active_view_ = ViewId::kRecompilations;
      compilations_->Draw(ui_);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Graph", nullptr, graph_flags)) {
      active_view_ = ViewId::kGraph;
      graph_->Draw(ui_);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
}

}  // namespace shardscope::app
