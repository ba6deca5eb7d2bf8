// The workstation window's contents for one run: the run line, the view tabs
// ([Timeline] [Sharding] [Recompilations]) and the views themselves. Pure ImGui, no GL or
// windowing, so the shell in app.cc owns the platform and this owns the UI.
#pragma once

#include <memory>
#include <string>

#include "ui/app/compilations_view.h"
#include "ui/app/placement_view.h"
#include "ui/app/timeline_view.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class Workstation {
 public:
  explicit Workstation(std::unique_ptr<TraceModel> model);

  // Draws one frame's UI filling the whole display.
  void Draw();

  // The window title: "shardscope — FILE — run N sample".
  std::string Title() const;
  const TraceModel& model() const { return *model_; }
  const TimelineView& timeline() const { return *timeline_; }
  PlacementView& placement() { return *placement_; }
  UiState& ui() { return ui_; }
  // The view drawn in the last frame.
  ViewId active_view() const { return active_view_; }
  // Replaces the run shown (the run picker asked for another one).
  void SetModel(std::unique_ptr<TraceModel> model);

 private:
  void DrawRunLine();

  std::unique_ptr<TraceModel> model_;
  std::unique_ptr<TimelineView> timeline_;
  std::unique_ptr<PlacementView> placement_;
  std::unique_ptr<CompilationsView> compilations_;
  UiState ui_;
  ViewId active_view_ = ViewId::kTimeline;
};

}  // namespace shardscope::app
