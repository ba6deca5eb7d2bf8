// --dump-layout: what a view drew in one frame, as data. Every view that is
// asked to (UiState::layout set) adds an item per thing it draws — a lane, a
// rectangle, a flow, a marker, a text — with the stored row it shows, so tests
// and scripts check what is on screen without reading pixels or colours:
//   {"view": "timeline",
//    "items": [{"type": "rect", "label": "dot.7",
//               "ref": {"table": "slices", "slice_id": 12},
//               "x": 310, "y": 96, "w": 14, "h": 7, ...item-specific fields}]}
// Coordinates are window pixels, origin top left. docs/app.md lists each
// view's item types and fields.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace shardscope::app {

class LayoutDump {
 public:
  // Starts a new frame's dump for `view` (drops what an earlier frame added).
  void Begin(std::string_view view);
  // Adds an item and returns it, for item-specific fields.
  nlohmann::json& Add(std::string_view type, std::string_view label, nlohmann::json ref, float x,
                      float y, float w, float h);
  const nlohmann::json& doc() const { return doc_; }
  std::string view() const;
  size_t size() const { return doc_["items"].size(); }
  // Writes the dump as JSON, naming the file in any error.
  absl::Status WriteFile(const std::string& path) const;

 private:
  nlohmann::json doc_ = {{"view", ""}, {"items", nlohmann::json::array()}};
};

}  // namespace shardscope::app
