// The Sharding view: every tensor of the run with its sharding, where it came
// from and the bytes each chip holds; the picked tensor's tiles as a grid
// naming the chips that hold each, each distinct shard in its own colour and
// each split dim named by the mesh axis that splits it (as JAX's
// visualize_tensor_sharding); the bytes every chip holds as bars, a click on
// one listing the index ranges and bytes it holds of every tensor; and,
// flagged, every involuntary full rematerialization (a split value gathered
// whole on every chip). What it reads beyond the run's tensors is read off
// the UI thread (sharding_model.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ui/app/background.h"
#include "ui/app/sharding_model.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// The chips holding a tile: "chip 3", "chips 0,2", "chips 0-3,8-11".
std::string ChipsShort(const std::vector<int64_t>& chips);

class PlacementView {
 public:
  explicit PlacementView(const TraceModel& model, std::function<void()> wake = {})
      : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // Lists what chip `device_id` holds (a click on its bar; --chip).
  void SelectChip(int64_t device_id);
  std::optional<int64_t> selected_chip() const { return chip_; }
  // The per-chip bytes are in, and the picked chip's shards when one is picked.
  bool complete() const { return chips_job_.ready() && (!chip_ || chip_job_.ready()); }
  bool Wait(double timeout_s) const {
    return chips_job_.Wait(timeout_s) && (!chip_ || chip_job_.Wait(timeout_s));
  }

  // For tests: the picked tensor, and the grid cells drawn in the last frame
  // (row-major, "chips 0,2", "chips 0-7").
  size_t selected() const { return selected_; }
  void Select(size_t tensor) { selected_ = tensor; }
  const std::vector<std::string>& drawn_cells() const { return drawn_cells_; }

 private:
  void DrawGrid(const analysis::TensorTiles& t);
  void DrawScaledTiles(const analysis::TensorTiles& t, const std::vector<std::string>& axes,
                       const std::function<std::string(size_t)>& dim,
                       const std::function<size_t(const std::vector<int64_t>&)>& shard_of);
  void DrawChips(UiState& ui);

  const TraceModel& model_;
  std::function<void()> wake_;
  BackgroundModel<ShardingChips> chips_job_;
  BackgroundModel<std::vector<ChipShard>> chip_job_;
  std::optional<int64_t> chip_;
  size_t selected_ = 0;
  bool scroll_to_selected_ = false;
  std::string note_;  // about a picked value that is not a stored tensor
  std::vector<std::string> drawn_cells_;
  LayoutDump* layout_ = nullptr;  // this frame's dump, if any
};

}  // namespace shardscope::app
