// State the workstation's views share within one window: what is selected and
// which view should come to the front. Views write requests here instead of
// calling each other, so each view stays in its own file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardscope::app {

class LayoutDump;
class TextureHost;

enum class ViewId { kTimeline, kSharding, kRecompilations };

struct UiState {
  std::optional<int64_t> selected_compile_id;  // a compilation picked anywhere
  bool scroll_to_selected_compile = false;     // once, when picked elsewhere
  std::optional<ViewId> bring_to_front;        // consumed by the tab bar next frame
  std::optional<int64_t> switch_to_run;        // the app reloads the model
  std::optional<std::string> show_value;       // the Sharding view picks this tensor (a collective's)
  std::string selection_text;                  // the status bar's line
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
