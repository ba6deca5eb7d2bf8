// The HTML report's fleet heatmap (profiler/analysis/heatmap.h): chips at
// their topology coordinates, suspects outlined, and a pod of any size kept
// to a bounded drawing (blocks of chips, said in the file) and a file under 2 MB.
#include "profiler/analysis/heatmap.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "profiler/analysis/run_report.h"
#include "tests/e2e/shell.h"

namespace shardscope::analysis {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A torus of x*y*z chips (coordinates [x,y,z], chip id x-major), chip `slow` late by 2 ms and flagged.
FleetMap Torus(int x, int y, int z, int slow) {
  FleetMap m;
  m.clock = "modeled";
  m.metric = "arrival at its collectives after its groups' median, mean per step";
  m.lateness = true;
  int id = 0;
  for (int i = 0; i < x; ++i)
    for (int j = 0; j < y; ++j)
      for (int k = 0; k < z; ++k, ++id)
        m.cells.push_back({id, id / 4, absl::StrCat("[", i, ",", j, ",", k, "]"), id == slow ? 2e6 : -1e3 * (id % 7),
                           id == slow});
  return m;
}

TEST(FleetHeatmap, DrawsEveryChipAtItsCoordinatesWithTheSuspectOutlined) {
  const std::string html = FleetHeatmapHtml(Torus(4, 4, 2, 9));
  EXPECT_TRUE(absl::StrContains(html, "<h2>Fleet heatmap</h2>")) << html;
  EXPECT_TRUE(absl::StrContains(html, "rows x, columns y, one panel per z")) << html;
  EXPECT_TRUE(absl::StrContains(html, "(modeled clock)")) << html;
  EXPECT_EQ(Count(html, "<rect"), 32u);
  EXPECT_EQ(Count(html, "stroke=\"#000\""), 1u);
  // Chip 9 is [1,0,1]: the red end of the scale, and named in its title.
  EXPECT_TRUE(absl::StrContains(html, "fill=\"#d62728\" stroke=\"#000\" stroke-width=\"2\"><title>chip 9 [1,0,1]: "
                                      "+2.0 ms (flagged)"))
      << html;
  EXPECT_FALSE(absl::StrContains(html, "Aggregated")) << html;
}

TEST(FleetHeatmap, NothingForOneChipAndChipIdsWithoutCoordinates) {
  FleetMap one = Torus(1, 1, 1, 0);
  EXPECT_EQ(FleetHeatmapHtml(one), "");
  FleetMap bare = Torus(2, 2, 1, 3);
  for (auto& c : bare.cells) c.coords = "";
  const std::string html = FleetHeatmapHtml(bare);
  EXPECT_TRUE(absl::StrContains(html, "chip id (no coordinates stored)")) << html;
  EXPECT_EQ(Count(html, "<rect"), 4u);
}

TEST(FleetHeatmap, AReportOfA4096ChipPodStaysSelfContainedAndUnder2MB) {
  RunReport r;
  r.run.db_path = "pod.db";
  r.run.num_devices = 4096;
  r.verdict.fleet_map = Torus(16, 16, 16, 1234);
  const std::string html = RenderHtml(r, "");
  e2e::ExpectSelfContainedHtml(html);  // under 2 MB, nothing fetched
  std::printf("a 4096-chip pod's HTML report, heatmap chip by chip: %zu bytes\n", html.size());
  EXPECT_EQ(Count(html, "<rect"), 4096u);  // every chip its own cell
  EXPECT_FALSE(absl::StrContains(html, "Aggregated"));
}

TEST(FleetHeatmap, A65536ChipPodIsDrawnInBlocksAndSaysSo) {
  RunReport r;
  r.verdict.fleet_map = Torus(64, 32, 32, 40000);
  const std::string html = RenderHtml(r, "");
  e2e::ExpectSelfContainedHtml(html);
  // 64x32x32 in blocks of 2 would still be 8192 cells; of 4, 16x8x8.
  EXPECT_TRUE(absl::StrContains(html, "Aggregated: 65536 chips drawn as 1024 blocks of up to 4x4x4 chips"))
      << html.substr(0, 2000);
  EXPECT_EQ(Count(html, "<rect"), 1024u);
  // The suspect's block keeps its outline and its worst value.
  EXPECT_EQ(Count(html, "stroke=\"#000\""), 1u);
  EXPECT_TRUE(absl::StrContains(html, "worst: +2.0 ms (flagged)"));
}

}  // namespace
}  // namespace shardscope::analysis
