// Line and bar charts drawn with ImDrawList (no plotting library is packaged):
// the metrics and memory views' series over steps, time or op order. Hovering
// a chart reads every series' value at the nearest x; --dump-layout lists the
// chart with its series' points, so tests check what is plotted.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "ui/app/palette.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// How a chart's values read: durations in ns, bytes, or plain numbers.
enum class ChartUnit { kNs, kBytes, kNumber };
std::string FormatChartValue(double v, ChartUnit unit);

struct ChartSeries {
  std::string name{};
  Rgb color{110, 200, 210};
  std::vector<double> x{}, y{};  // same length; NaN in y: no value there
  bool bars = false;             // bars from 0 instead of a line
  std::vector<double> y_min{};   // optional band under the line (same length as y)
};

struct ChartSpec {
  std::string title{};
  std::string x_label{};           // "step", "host clock", "op order"
  ChartUnit unit = ChartUnit::kNs;
  ChartUnit x_unit = ChartUnit::kNumber;
  bool from_zero = true;           // y axis starts at 0
  // A horizontal line across the chart (a budget), with its label.
  std::optional<double> limit{};
  std::string limit_label{};
  // A point to mark (a peak): x and its label.
  std::optional<double> mark_x{};
  std::string mark_label{};
  // More tooltip lines for the point under the pointer (its index in the
  // first series): what the point is, beyond its x and values.
  std::function<void(size_t)> hover_lines{};
};

// Draws the chart at the cursor, full width, `height` tall, and advances the
// cursor. `ref` is the stored rows it shows (the layout dump's ref).
// Returns the index of the x under the pointer in the first series, if any.
std::optional<size_t> DrawChart(UiState& ui, const char* id, const ChartSpec& spec,
                                const std::vector<ChartSeries>& series, float height, const nlohmann::json& ref);

}  // namespace shardscope::app
