// The Sharding view: every tensor of the run with its sharding, where it came
// from and the bytes each chip holds; the picked tensor's tiles as a grid
// naming the chips that hold each; and, flagged, every involuntary full
// rematerialization (a split value gathered whole on every chip).
#pragma once

#include <string>
#include <vector>

#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class PlacementView {
 public:
  explicit PlacementView(const TraceModel& model) : model_(model) {}
  void Draw(UiState& ui);

  // For tests: the picked tensor, and the grid cells drawn in the last frame
  // (row-major, "chips 0,2").
  size_t selected() const { return selected_; }
  void Select(size_t tensor) { selected_ = tensor; }
  const std::vector<std::string>& drawn_cells() const { return drawn_cells_; }

 private:
  void DrawGrid(const analysis::TensorTiles& t);

  const TraceModel& model_;
  size_t selected_ = 0;
  bool scroll_to_selected_ = false;
  std::string note_;  // about a picked value that is not a stored tensor
  std::vector<std::string> drawn_cells_;
  LayoutDump* layout_ = nullptr;  // this frame's dump, if any
};

}  // namespace shardscope::app
