// The workstation window's contents for one run: the menu bar (app_menu.h:
// File, View, Run, Playback), the run line (with the run picker and the
// playhead's toolbar), the view tabs (one per built view, in
// kViews' order: [Overview] [Timeline] [Sharding] [Recompilations] ...) and
// the views themselves. Pure ImGui, no GL or windowing, so the shell in
// app.cc owns the platform and this owns the UI. The timeline is the view a
// new workstation lands on.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ui/app/app_menu.h"
#include "ui/app/compare_view.h"
#include "ui/app/compilations_view.h"
#include "ui/app/fleet_view.h"
#include "ui/app/graph_view.h"
#include "ui/app/memory_view.h"
#include "ui/app/metrics_view.h"
#include "ui/app/ops_view.h"
#include "ui/app/overview_view.h"
#include "ui/app/placement_view.h"
#include "ui/app/timeline_loader.h"
#include "ui/app/timeline_view.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// The run line beside the menus: "run 3: llama, mesh 2x2, 4 chips on 1 host, profile cpu".
std::string RunLine(const RunInfo& run);

class Workstation {
 public:
  // `wake` is called from the timeline's loader thread when data arrives, so
  // an idle window can redraw (the app posts an empty GLFW event).
  // With `start_loading` false the timeline's loader waits for StartLoading().
  explicit Workstation(std::unique_ptr<TraceModel> model, std::function<void()> wake = {}, bool start_loading = true);
  void StartLoading() { loader_->Start(); }

  // Draws one frame's UI filling the whole display.
  void Draw();

  // Whether this workstation draws view `id` (a tab and a View menu entry);
  // --view refuses a name whose view is not built yet.
  static bool Builds(ViewId id);

  // The window title: "shardscope — FILE — run N sample".
  std::string Title() const;
  const TraceModel& model() const { return *model_; }
  const TimelineView& timeline() const { return *timeline_; }
  TimelineView& timeline() { return *timeline_; }
  TimelineLoader& loader() { return *loader_; }
  // The last frame is final: the active view has all it needs drawn (the
  // timeline: its overview and every visible lane at its level of detail).
  bool complete() const;
  // Waits up to `timeout_s` for data the active view is loading (the
  // timeline's windows, an analysis view's model); true when it is idle.
  bool WaitForData(double timeout_s);
  PlacementView& placement() { return *placement_; }
  CompilationsView& compilations() { return *compilations_; }
  GraphView& graph() { return *graph_; }
  OverviewView& overview() { return *overview_; }
  OpsView& ops() { return *ops_; }
  MetricsView& metrics() { return *metrics_; }
  CompareView& compare() { return *compare_; }
  MemoryView& memory() { return *memory_; }
  FleetView& fleet() { return *fleet_; }
  UiState& ui() { return ui_; }
  Playback& playback() { return playback_; }
  // The view drawn in the last frame.
  ViewId active_view() const { return active_view_; }
  // Replaces the run shown (the run picker asked for another one).
  void SetModel(std::unique_ptr<TraceModel> model, bool start_loading = true);

 private:
  void DrawRunLine();
  void DrawMenuBar();
  void DrawView(ViewId id);
  std::string TabLabel(ViewId id) const;

  std::unique_ptr<TraceModel> model_;
  std::function<void()> wake_;
  std::unique_ptr<TimelineLoader> loader_;
  std::unique_ptr<TimelineView> timeline_;
  std::unique_ptr<PlacementView> placement_;
  std::unique_ptr<CompilationsView> compilations_;
  std::unique_ptr<GraphView> graph_;
  std::unique_ptr<OverviewView> overview_;
  std::unique_ptr<OpsView> ops_;
  std::unique_ptr<MetricsView> metrics_;
  std::unique_ptr<CompareView> compare_;
  std::unique_ptr<MemoryView> memory_;
  std::unique_ptr<FleetView> fleet_;
  UiState ui_;
  ViewId active_view_ = ViewId::kTimeline;
  FileDialog file_dialog_;
  Playback playback_;
  std::vector<std::string> recent_;  // read when the File menu opens
};

}  // namespace shardscope::app
