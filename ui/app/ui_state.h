// State the workstation's views share within one window: what is selected and
// which view should come to the front. Views write requests here instead of
// calling each other, so each view stays in its own file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardscope::app {

class LayoutDump;
class TextureHost;

// Every view the workstation has or will have, in tab order. Which of them
// the workstation draws is Workstation::Builds(id); main.cc's --view accepts
// every name below and refuses one not built yet with a clear message.
enum class ViewId {
  kOverview,
  kTimeline,
  kSharding,
  kRecompilations,
  kGraph,
  kOps,
  kMemory,
  kMetrics,
  kCompare,
  kFleet,
};

struct ViewInfo {
  ViewId id;
  const char* name;   // --view NAME, and the layout dump's "view"
  const char* title;  // the tab's and the View menu's label
};

inline constexpr ViewInfo kViews[] = {
    {ViewId::kOverview, "overview", "Overview"},
    {ViewId::kTimeline, "timeline", "Timeline"},
    {ViewId::kSharding, "sharding", "Sharding"},
    {ViewId::kRecompilations, "recompilations", "Recompilations"},
    {ViewId::kGraph, "graph", "Graph"},
    {ViewId::kOps, "ops", "Op profile"},
    {ViewId::kMemory, "memory", "Memory"},
    {ViewId::kMetrics, "metrics", "Metrics"},
    {ViewId::kCompare, "compare", "Compare"},
    {ViewId::kFleet, "fleet", "Fleet"},
};

inline const ViewInfo& ViewInfoOf(ViewId id) {
  for (const ViewInfo& v : kViews) {
    if (v.id == id) return v;
  }
  return kViews[0];
}
inline const char* ViewName(ViewId id) { return ViewInfoOf(id).name; }
inline std::optional<ViewId> ViewFromName(std::string_view name) {
  for (const ViewInfo& v : kViews) {
    if (name == v.name) return v.id;
  }
  return std::nullopt;
}

// An op of a compiled program to show in the Graph view (op_id -1: the program).
struct GraphFocus {
  int64_t graph_id = -1;
  int64_t op_id = -1;
  bool from_option = false;  // `--graph G:OP`: an op the graph lacks is an option error
};

// A chip's lane at a step, for the timeline to show (a chip clicked in Fleet).
struct ChipFocus {
  int device_id = 0;
  int step = -1;
};

struct UiState {
  std::optional<int64_t> selected_compile_id;  // a compilation picked anywhere
  bool scroll_to_selected_compile = false;     // once, when picked elsewhere
  std::optional<ViewId> bring_to_front;        // consumed by the tab bar next frame
  std::optional<int64_t> switch_to_run;        // the app reloads the model
  std::optional<std::string> open_path;        // the app opens this file (File > Open, a recent file)
  std::optional<std::string> show_value;       // the Sharding view picks this tensor (a collective's)
  // An op of a compiled program picked anywhere, (graph_id, op_id): the op
  // profile selects and scrolls to it.
  std::optional<std::pair<int64_t, int64_t>> selected_op;
  bool scroll_to_selected_op = false;
  // A compiled program picked anywhere (graph_id): the memory view shows its plan.
  std::optional<int64_t> selected_graph;
  std::string selection_text;                  // the status bar's line
  // What the command line asked for that the run does not have (a slice id,
  // a compilation, a time range outside its steps): shown in the status bar,
  // printed after a capture, which then exits 1.
  std::vector<std::string> option_errors;
  // What a view could not read from the file (a damaged chunk, a table that
  // is gone): drawn in the view, printed after a capture, which then exits 1
  // instead of waiting for data that will never come.
  std::vector<std::string> data_errors;
  void DataError(absl::string_view what) {
    for (const std::string& e : data_errors)
      if (e == what) return;
    data_errors.emplace_back(what);
  }
  // The Graph view opens here (a kernel picked on the timeline); the
  // timeline outlines the slices of `highlight_op` (an op picked in Graph).
  std::optional<GraphFocus> graph_focus;
  std::optional<GraphFocus> highlight_op;
  // The timeline opens this chip's lane at that step (consumed by the timeline).
  std::optional<ChipFocus> show_chip;
  // The playhead: the step of the stored run the views show (playback). A
  // view that has steps (Fleet's slider, Metrics' cursor, the timeline) follows it.
  std::optional<int> playhead_step;
  // Screenshot mode: no hover effects from wherever Xvfb's pointer sits.
  bool headless = false;
  // Set for a frame whose drawing should be recorded (--dump-layout): each
  // view adds what it draws (layout_dump.h).
  LayoutDump* layout = nullptr;
  // Where the timeline's lane images become textures (the shell's OpenGL);
  // null: drawn on the CPU but not shown (tests without GL).
  TextureHost* textures = nullptr;
};

}  // namespace shardscope::app
