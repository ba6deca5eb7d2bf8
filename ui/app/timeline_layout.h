// The timeline's vertical layout, apart from drawing: which rows exist (a
// section per clock with its ruler, groups of lanes per host, lanes,
// compilations, counters), which are collapsed, and how tall each is so that
// a pod's lanes fit the window — lanes shrink together down to a few pixels
// before anything scrolls. Pure functions of the run's tracks, tested without
// a display.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "ui/app/timeline_loader.h"
#include "ui/app/trace_model.h"

namespace shardscope::app {

enum class RowType { kSection, kGroup, kLane, kCompiles, kCounter };

struct LaneRef {
  RowType type = RowType::kLane;  // kLane, kCompiles or kCounter
  int index = -1;                 // into TraceModel::tracks or RunOverview::counters
  int depth_rows = 1;
  std::string label;              // "chip 3", "host 0: main", "hbm_bytes_in_use chip 3"
};

struct LaneGroup {
  std::string key;     // collapse state key, e.g. "device/host 0"
  std::string label;   // "host 0 · chips 0-7"
  bool header = true;  // a group of one lane has no header row and cannot collapse
  std::vector<LaneRef> lanes;
};

struct Section {
  Clock clock = Clock::kHost;
  std::string key;     // "device", "modeled", "host"
  std::vector<LaneGroup> groups;
};

// Sections in drawing order (device, modeled, host), lanes grouped by host;
// compilations and counters in the host section (counters are sampled on the
// host clock). `overview` may be null (before it loads: no counters, one row
// per lane).
std::vector<Section> BuildSections(const TraceModel& model, const RunOverview* overview);

// What starts collapsed: the modeled section when measured device lanes exist
// (one clock's lanes at a time fit a pod on screen; the other is a click
// away), and counter groups of more than 8 lanes.
absl::flat_hash_set<std::string> DefaultCollapsed(const std::vector<Section>& sections);

struct Row {
  RowType type = RowType::kLane;
  int section = 0;   // index into the sections
  int group = -1;    // index into the section's groups (-1: the section's header)
  LaneRef lane;      // kLane, kCompiles, kCounter
  std::string label;
  bool collapsed = false;  // kSection, kGroup
  float y = 0, h = 0;      // from the top of the timeline
  int rows_shown = 1;      // depth rows that fit the lane's height
};

inline constexpr float kSectionHeight = 44;  // title and note, step numbers, the ruler
inline constexpr float kGroupHeight = 15;
inline constexpr float kDepthRowHeight = 18;
inline constexpr float kMinLaneHeight = 6;
inline constexpr float kMinDepthRowHeight = 5;
inline constexpr int kMaxDepthRowsShown = 6;
inline constexpr float kCounterHeight = 26;
inline constexpr float kCompilesHeight = 24;
inline constexpr float kMinCompilesHeight = 13;  // its label, whole

struct RowLayout {
  std::vector<Row> rows;
  float total_h = 0;
  bool fits = true;  // everything fits `avail_h` (else the view scrolls)
};

// Rows top to bottom for `avail_h` pixels. Each lane wants a row per depth
// (at most kMaxDepthRowsShown); when that does not fit, every lane shrinks by
// the same factor, down to kMinLaneHeight, and shows as many depth rows as fit.
RowLayout LayoutRows(const std::vector<Section>& sections,
                     const absl::flat_hash_set<std::string>& collapsed, float avail_h);

}  // namespace shardscope::app
