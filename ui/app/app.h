// The desktop shell: opens a database, a GLFW window with an OpenGL 3.3
// context and ImGui, and runs the Workstation until the window closes, or, in
// screenshot mode, for a few frames before writing the window to a PNG.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardscope::app {

struct AppOptions {
  std::string db_path;
  std::optional<int64_t> run_id;  // unset: the latest run
  int width = 1600;
  int height = 900;
  std::string screenshot_path;    // set: render, write the PNG, exit
  std::string dump_layout_path;   // set: write what the captured frame draws as JSON, exit
  std::string view = "timeline";  // a ViewInfo name (ui_state.h) the workstation builds
  std::optional<int64_t> select_slice;  // select this slice (and show its step) at open
  std::string range;    // --range [CLOCK:]T0:T1: a range selected at open, its table shown
  std::string search;   // --search NAME: found in the whole run at open, the first hit selected
  std::optional<int64_t> compile_id;  // --compile ID: that compilation picked in Recompilations
  std::optional<std::pair<int64_t, int64_t>> graph_op;  // --graph G[:OP]: the Graph view at that op (-1: costliest)
  // The Compare view's other run: a file (--compare) and a run in it
  // (--compare-run; alone: a run of this file).
  std::string compare_path;
  std::optional<int64_t> compare_run;
  // Run this long, then exit (idle CPU measurements); 0: until closed.
  double exit_after_s = 0;
  // Measure open time, memory and frame times (an empty window, the
  // workstation with its lanes collapsed, the whole run, panning), print
  // them, and exit.
  bool bench = false;
  // Follow the newest run as steps land: the store is polled once a second and
  // the view reloads when a newer run starts or the run gains steps.
  bool follow = false;
  // Screenshot mode only: where the pointer is, to capture a tooltip.
  std::optional<std::pair<float, float>> mouse;
  // --step N: the playhead at step N at open (the views follow it).
  std::optional<int> step;
  // --metric NAME: the Fleet view's heatmap metric at open (fleet_model.h FleetMetricName).
  std::optional<std::string> fleet_metric;
  // --chip D: the Sharding view lists what chip D holds of every tensor.
  std::optional<int64_t> chip;
};

// Runs the app; returns the process exit code. Errors are printed to stderr
// with what the user can do about them.
int RunApp(const AppOptions& options);

}  // namespace shardscope::app
