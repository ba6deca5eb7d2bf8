// The Timeline view: one lane per device on the device (or modeled) clock,
// then the compilations and one lane per host thread on the host clock. Each
// clock has its own ruler and its own zero, so the clocks are never mixed;
// zoom and pan move both sections together. Wheel zooms around the mouse,
// dragging pans, double-click fits the whole run.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// Where a lane's slices were drawn in the last frame, in window pixels (top
// left origin). Screenshot mode prints these so a test can check the image.
struct LaneRect {
  int64_t track_id = 0;
  std::optional<int64_t> device_id;
  int64_t host_id = 0;
  Clock clock = Clock::kHost;
  float x = 0, y = 0, w = 0, h = 0;
  size_t blocks_drawn = 0;
};

class TimelineView {
 public:
  explicit TimelineView(const TraceModel& model);

  void Draw(UiState& ui);

  const std::vector<LaneRect>& lanes() const { return lanes_; }
  // Slice shapes drawn in the last frame (single and folded).
  size_t shapes_drawn() const { return shapes_drawn_; }
  Clock device_section_clock() const { return device_clock_; }
  // The view: time (since each clock's first event) at the slice area's left
  // edge, and the zoom.
  double offset_ns() const { return offset_ns_; }
  double ns_per_px() const { return ns_per_px_; }

 private:
  struct Hover;

  void Fit(float area_width);
  float DrawRuler(Clock clock, float y, float left, float right, float label_w);
  void DrawLane(const Track& track, int lane_index, float y, float h, float left, float right,
                float label_w, Hover& hover);
  void DrawCompileLane(float y, float h, float left, float right, float label_w, Hover& hover);
  double ClockOrigin(Clock clock) const;

  const TraceModel& model_;
  Clock device_clock_ = Clock::kDevice;
  bool has_modeled_ = false;
  bool has_device_ = false;
  // View, shared by both sections: time since each clock's origin at the
  // left edge of the slice area, and the zoom. ns_per_px_ == 0: fit next frame.
  double offset_ns_ = 0;
  double ns_per_px_ = 0;
  double fit_ns_per_px_ = 1;
  double fit_span_ns_ = 1;
  double origin_ns_[3] = {0, 0, 0};  // per Clock: its first event's time
  std::vector<LaneRect> lanes_;
  size_t shapes_drawn_ = 0;
};

}  // namespace shardscope::app
