// The fleet heatmap of the HTML report: every chip of a run drawn at its
// topology coordinates (a torus's x rows by y columns, one panel per z; a GPU
// cluster's hosts by chips), coloured by the fleet diagnosis (verdict.h's
// FleetMap: lateness at collectives, else step span), its suspects outlined.
// A pod of more than kMaxHeatCells chips is drawn in blocks of 2x2(x2),
// 4x4(x4), ... chips, each coloured by its worst chip, and the file says so:
// the section stays a few hundred KB whatever the pod's size.
#pragma once

#include <string>

#include "profiler/analysis/verdict.h"

namespace shardscope::analysis {

inline constexpr int kMaxHeatCells = 4096;

// The report's "Fleet heatmap" section (a heading, the SVG, its legend and
// notes); "" for a run of fewer than two chips.
std::string FleetHeatmapHtml(const FleetMap& m);

}  // namespace shardscope::analysis
