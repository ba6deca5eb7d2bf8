// The Fleet view: every chip of the run laid out by its topology coordinates
// (fleet_model.h) as a heatmap of one metric at one step (a slider picks the
// step), each chip's step breakdown as stacked bars, and the fleet
// diagnosis's suspects outlined with their rank. Hovering a chip says its
// figures; clicking one opens its lane in the timeline at that step.
//
// Drawing follows the screen, not the pod: the heatmap and the bars are
// painted on the CPU into two images shown as one textured quad each (as the
// timeline's lanes are), repainted only when the metric, the step, the size
// or the selection changes; only the few suspects' outlines are shapes. The
// model is built once off the UI thread, with a progress line meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <imgui.h>

#include "ui/app/background.h"
#include "ui/app/fleet_model.h"
#include "ui/app/lane_texture.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class FleetView {
 public:
  FleetView(const TraceModel& model, std::function<void()> wake);
  ~FleetView();
  void Draw(UiState& ui);
  // Built and drawn for a few frames (ImGui sizes a new window from the frame before).
  bool complete() const { return job_.ready() && drawn_ >= 3; }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s); }
  void StartLoading();
  const FleetModel* model() const { return job_.get(); }

  // The step shown (a step number of the run; the nearest one it has).
  void SetStep(int step);
  int step() const;
  void SetMetric(FleetMetric m) { metric_ = m; }
  FleetMetric metric() const { return metric_; }

 private:
  struct Progress {
    std::mutex mu;
    double fraction = -1;
    std::string phase = "starting";
  };
  struct Area {
    float x = 0, y = 0, w = 0, h = 0;
  };
  // Where each chip's cell is in the heatmap (pixels from its top left).
  struct Placement {
    int panels_per_row = 1;
    float cell = 1, gap = 0, panel_gap = 0;
    float panel_w = 0, panel_h = 0;
    // Chips per pixel along each axis: 1 while every chip gets a pixel or
    // more; on a pod larger than the window, each pixel holds a block x block
    // square of chips and shows the worst of them.
    int block = 1;
  };
  void DrawHeader(const FleetModel& m, UiState& ui);
  void DrawBreakdownKey(UiState& ui);
  void DrawHeatmap(const FleetModel& m, const Area& a, UiState& ui);
  void DrawBars(const FleetModel& m, const Area& a, UiState& ui);
  void DrawSuspects(const FleetModel& m, UiState& ui);
  // A run with no chip lanes (a CPU-only multi-rank trace): the ranked
  // suspects with their evidence written out, as there is no map to hover.
  void DrawSuspectsWithoutMap(const FleetModel& m, UiState& ui);
  void DrawTooltip(const FleetModel& m, size_t chip, const std::string& note = "");
  void Open(const FleetModel& m, size_t chip, UiState& ui);
  Placement Place(const FleetModel& m, float w, float h) const;
  // The cell of chip `i` in the heatmap, relative to its top left.
  void CellRect(const FleetModel& m, const Placement& p, size_t i, float* x0, float* y0, float* x1, float* y1) const;
  // Uploads `image` when it was just `painted` (or has no texture yet) and draws it at `a`.
  void Show(UiState& ui, LaneImage& image, ImTextureID& texture, const Area& a, bool painted);

  const TraceModel& model_;
  std::function<void()> wake_;
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
  BackgroundModel<FleetModel> job_;
  int drawn_ = 0;
  size_t step_index_ = 0;
  int playhead_elsewhere_ = -1;  // the playhead's step when it has no chip timeline here, else -1
  bool step_chosen_ = false;        // false until the model is in: then the typical step
  std::optional<int> wanted_step_;  // SetStep before the model is in
  // Lateness first: the chip everybody waits for is the one that stands out.
  FleetMetric metric_ = FleetMetric::kLateness;
  int selected_ = -1;  // a chip index, picked from the suspects list or the bars
  // The images and what they were painted for.
  LaneImage heat_, bars_;
  ImTextureID heat_texture_ = nullptr, bars_texture_ = nullptr;
  TextureHost* textures_ = nullptr;
  std::string heat_key_, bars_key_;
  double lo_ = 0, hi_ = 0;  // the colour scale of the metric at the step
  bool widened_ = false;    // lo_..hi_ widened past the chips' values (FleetModel::ColorScale)
  // With blocks (Placement::block > 1): per pixel of the heatmap, the chip it
  // shows (the block's worst, -1: none) and how many chips the block holds.
  std::vector<int> block_worst_;
  std::vector<int> block_count_;
};

}  // namespace shardscope::app
