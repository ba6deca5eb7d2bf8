// The Fleet view through the binary under Xvfb: `--view fleet --screenshot
// --dump-layout` on a simulated 3D torus and on a real 2x4 run with a slow
// chip. Every chip is one cell at its coordinates (the torus as a row of 2D
// panels), its breakdown adds up to the step, the culprit is outlined as
// suspect #1, and the bars cover every chip.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"
#include "store/reader.h"
#include "tests/app/fleet_pods.h"
#include "tests/app/ui_runner.h"
#include "ui/app/fleet_model.h"

namespace shardscope::app {
namespace {

using nlohmann::json;
using testing::LayoutItems;

json OpenFleet(const testing::Pod& pod, const std::string& name, const std::string& extra = "") {
  EXPECT_TRUE(pod.recorded) << pod.db;
  const std::string png = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("fleet_", name, "_", getpid(), ".png"));
  const std::string layout = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("fleet_", name, "_", getpid(), ".json"));
  std::filesystem::remove(png);
  std::filesystem::remove(layout);
  testing::UiResult r = testing::RunUi(
      SHARDSCOPE_UI_BINARY, absl::StrCat(pod.db, " --view fleet --screenshot ", png, " --dump-layout ", layout, " ", extra));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0, 1000u);
  return testing::ReadLayout(layout);
}

// What both runs must show.
void CheckFleet(const json& doc, size_t chips, const std::string& grid) {
  ASSERT_EQ(doc.value("view", ""), "fleet");
  auto header = LayoutItems(doc, "text", "header");
  ASSERT_EQ(header.size(), 1u);
  EXPECT_EQ(header[0]["grid"]["kind"], grid);
  EXPECT_EQ(header[0]["chips"], chips);
  auto cells = LayoutItems(doc, "chip");
  ASSERT_EQ(cells.size(), chips);
  for (const json& c : cells) {
    EXPECT_EQ(c["ref"]["table"], "devices");
    double total = 0;
    for (const auto& [part, ns] : c["breakdown"].items()) total += ns.get<double>();
    EXPECT_NEAR(total, c["span_ns"].get<double>(), 1e-6 * c["span_ns"].get<double>()) << c.dump();
    EXPECT_FALSE(c["value"].is_null()) << c.dump();
    EXPECT_GE(c["w"].get<double>(), 4) << "cells of a small pod are drawn large enough to see";
  }
  auto suspects = LayoutItems(doc, "suspect");
  ASSERT_FALSE(suspects.empty());
  EXPECT_EQ(suspects[0]["rank"], 1);
  EXPECT_EQ(suspects[0]["kind"], "chip");
  EXPECT_EQ(suspects[0]["id"], "5");
  EXPECT_EQ(suspects[0]["flagged"], true);
  EXPECT_EQ(suspects[0]["ref"]["device_id"], 5);
  for (size_t k = 1; k < suspects.size(); ++k) EXPECT_EQ(suspects[k]["flagged"], false) << suspects[k].dump();
  // The culprit's cell: outlined where the chip is.
  for (const json& c : cells)
    if (c["ref"]["device_id"] == 5) {
      EXPECT_EQ(c["rank"], 1);
      EXPECT_FLOAT_EQ(c["x"].get<float>(), suspects[0]["x"].get<float>());
      EXPECT_FLOAT_EQ(c["y"].get<float>(), suspects[0]["y"].get<float>());
    }
  // A bar per chip, with the same breakdown as its cell.
  auto bars = LayoutItems(doc, "bar");
  ASSERT_EQ(bars.size(), chips);
  for (size_t i = 0; i < chips; ++i) {
    EXPECT_EQ(bars[i]["first_device"], cells[i]["ref"]["device_id"]);
    EXPECT_DOUBLE_EQ(bars[i]["breakdown"]["compute_ns"].get<double>(), cells[i]["breakdown"]["compute_ns"].get<double>());
  }
  auto legend = LayoutItems(doc, "legend");
  ASSERT_EQ(legend.size(), 1u);
  EXPECT_LE(legend[0]["min"].get<double>(), legend[0]["max"].get<double>());
  // The bars' colour key: a swatch per part of the breakdown, in its order,
  // left to right, each its own colour.
  auto key = LayoutItems(doc, "key");
  ASSERT_EQ(key.size(), bars[0]["breakdown"].size());
  std::set<std::string> colours;
  for (size_t k = 0; k < key.size(); ++k) {
    EXPECT_EQ(key[k]["role"], "breakdown_key");
    std::string field = key[k]["label"].get<std::string>();
    std::replace(field.begin(), field.end(), ' ', '_');
    EXPECT_TRUE(bars[0]["breakdown"].contains(field + "_ns")) << key[k].dump();
    colours.insert(key[k]["color"].get<std::string>());
    if (k > 0) EXPECT_GT(key[k]["x"].get<double>(), key[k - 1]["x"].get<double>() + key[k - 1]["w"].get<double>());
  }
  EXPECT_EQ(colours.size(), key.size());
}

TEST(FleetUi, SimulatedTorusIsARowOfPanels) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const json doc = OpenFleet(testing::SimulatedTorus(), "sim");
  CheckFleet(doc, 16, "torus3d");
  auto header = LayoutItems(doc, "text", "header");
  EXPECT_EQ(header[0]["grid"]["panels"], 2);
  EXPECT_EQ(header[0]["simulated"], true);
  EXPECT_EQ(header[0]["clock"], "modeled");
  // Panel z = 1 sits right of panel z = 0, each an x-by-y grid: rows go down, columns across.
  std::map<int, json> by_device;
  for (const json& c : LayoutItems(doc, "chip")) by_device[c["ref"]["device_id"].get<int>()] = c;
  auto at = [&](int x, int y, int z) {
    for (const auto& [d, c] : by_device)
      if (c["coords"] == absl::StrCat("[", x, ",", y, ",", z, "]")) return c;
    return json();
  };
  EXPECT_GT(at(0, 0, 1)["x"].get<double>(), at(0, 1, 0)["x"].get<double>());
  EXPECT_DOUBLE_EQ(at(0, 0, 1)["y"].get<double>(), at(0, 0, 0)["y"].get<double>());
  EXPECT_GT(at(1, 0, 0)["y"].get<double>(), at(0, 0, 0)["y"].get<double>());
  EXPECT_GT(at(0, 1, 0)["x"].get<double>(), at(0, 0, 0)["x"].get<double>());
}

// --metric picks the heatmap for a screenshot or layout (the picker needed a
// click, so headless captures always showed arrival lateness).
TEST(FleetUi, TheMetricIsChosenFromTheCommandLine) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const json doc = OpenFleet(testing::SimulatedTorus(), "sim_metric", "--metric compute_share");
  auto legend = LayoutItems(doc, "legend");
  ASSERT_EQ(legend.size(), 1u);
  EXPECT_EQ(legend[0]["metric"], "compute_share");
  for (const json& c : LayoutItems(doc, "chip")) {
    EXPECT_EQ(c["metric"], "compute_share");
    EXPECT_NEAR(c["value"].get<double>(), c["breakdown"]["compute_ns"].get<double>() / c["span_ns"].get<double>(),
                1e-6)
        << c.dump();
  }
  testing::UiResult bad = testing::RunUi(SHARDSCOPE_UI_BINARY,
                                         absl::StrCat(testing::SimulatedTorus().db, " --view fleet --metric speed"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--metric is one of step_time, compute_share"), std::string::npos) << bad.output;
}

TEST(FleetUi, RealTwoByFourRunShowsTheSlowChip) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const json doc = OpenFleet(testing::RealGrid(), "real");
  CheckFleet(doc, 8, "grid");
  auto header = LayoutItems(doc, "text", "header");
  EXPECT_EQ(header[0]["clock"], "device");
  // It opens on a typical analysed step, not the warm-up (step 0: first
  // touch and compiles, where any chip may be the latest).
  auto reader = store::Reader::Open(testing::RealGrid().db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto model = BuildFleetModel(*reader, -1);
  ASSERT_TRUE(model.ok()) << model.status();
  const analysis::FleetStep& typical = model->report.per_step[model->TypicalStep()];
  EXPECT_TRUE(typical.analysed);
  EXPECT_GT(typical.step, 0);
  // Arrival lateness is the default metric: the slow chip is the latest, and the scale's top.
  auto legend = LayoutItems(doc, "legend");
  EXPECT_EQ(legend[0]["metric"], "arrival_lateness");
  for (const json& c : LayoutItems(doc, "chip")) {
    EXPECT_EQ(c["step"], typical.step);
    if (c["ref"]["device_id"] == 5) {
      EXPECT_DOUBLE_EQ(c["value"].get<double>(), legend[0]["max"].get<double>());
    }
  }
}

// A chip that stopped (a hang): outlined as suspect #1, flagged, "stopped"
// in place of a score, the header in the singular where it is one.
TEST(FleetUi, AStoppedChipIsTheFirstSuspect) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  testing::Pod pod = testing::RecordPod("hung", "--simulate --topology 4x2x2 --steps 6");  // for the path only
  std::filesystem::remove(pod.db);
  const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", pod.db,
                                       " --simulate --topology 4x2x2 --steps 6 --fault fail-chip:5@4 --quiet"
                                       " > /dev/null 2>&1");
  EXPECT_NE(std::system(cmd.c_str()), 0);  // the run ends with the hang
  const json doc = OpenFleet(pod, "hung");
  auto suspects = LayoutItems(doc, "suspect");
  ASSERT_FALSE(suspects.empty());
  EXPECT_EQ(suspects[0]["id"], "5");
  EXPECT_EQ(suspects[0]["flagged"], true);
  EXPECT_EQ(suspects[0]["stopped"], true);
  EXPECT_TRUE(suspects[0]["score"].is_null());
  auto listed = LayoutItems(doc, "text", "suspect");
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed[0]["label"], "#1 chip 5  stopped  FLAGGED");
  // The host clock traced a step or two more before the hang was found (how
  // many depends on timing); the chips have none. The playhead there shows
  // the nearest chip step, and says so.
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto last = reader->Query(
      "SELECT max(CASE WHEN clock = 'host' THEN step END) AS host, max(CASE WHEN clock = 'modeled' THEN step END) "
      "AS chips FROM step_bounds");
  ASSERT_TRUE(last.ok()) << last.status();
  const int64_t host_last = last->Int(0, "host"), chip_last = last->Int(0, "chips");
  ASSERT_GT(host_last, chip_last);
  // The timeline's lane of the stopped chip says so (it just ended).
  {
    const std::string layout =
        test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("hung_timeline_", getpid(), ".json"));
    testing::UiResult t = testing::RunUi(SHARDSCOPE_UI_BINARY,
                                         absl::StrCat(pod.db, " --view timeline --chip 5 --dump-layout ", layout));
    EXPECT_EQ(t.exit_code, 0) << t.output;
    int stopped = 0;
    for (const json& lane : LayoutItems(testing::ReadLayout(layout), "lane"))
      if (lane.contains("stopped_at_step")) {
        ++stopped;
        EXPECT_EQ(lane["device_id"], 5) << lane.dump();
        EXPECT_EQ(lane["stopped_at_step"], 4) << lane.dump();
      }
    EXPECT_EQ(stopped, 1);
  }
  const json after = OpenFleet(pod, "hung_after", absl::StrCat("--step ", host_last));
  auto said = LayoutItems(after, "text", "playhead_elsewhere");
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0]["label"], absl::StrCat("(the playhead's step ", host_last, " has no chip timeline: step ", chip_last,
                                           ", the nearest, is shown)"));
  EXPECT_TRUE(LayoutItems(doc, "text", "playhead_elsewhere").empty());
}

// A pod taller than the window (a 1024x2 torus: 2048 chips, chip 700 at 60%):
// each pixel holds a 2x2 block of chips and shows the worst of them; the
// legend says so, and every pixel's value is the highest of its chips'.
TEST(FleetUi, APodLargerThanTheWindowShowsEachPixelsWorstChip) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  static const testing::Pod* tall =
      new testing::Pod(testing::RecordPod("tall", "--simulate --topology 1024x2 --steps 2 --fault slow-chip:700:0.6"));
  // A small window: 2048 chips in 32 panels of 32 rows (a 1024-row strip is
  // cut into panels of rows) do not get a pixel each.
  const json doc = OpenFleet(*tall, "tall", "--width 500 --height 400");
  auto header = LayoutItems(doc, "text", "header");
  ASSERT_EQ(header.size(), 1u);
  EXPECT_EQ(header[0]["chips"], 2048);
  EXPECT_EQ(header[0]["grid"]["rows"], 1024);
  EXPECT_EQ(header[0]["grid"]["panels_drawn"], 32);
  EXPECT_EQ(header[0]["grid"]["rows_per_panel"], 32);
  auto legend = LayoutItems(doc, "legend");
  ASSERT_EQ(legend.size(), 1u);
  const int per_pixel = legend[0]["chips_per_pixel"].get<int>();
  EXPECT_GT(per_pixel, 1);
  EXPECT_LE(per_pixel, 64);
  EXPECT_EQ(legend[0]["pixel_shows"], "highest (worst) of them");  // arrival lateness: more is worse
  // The chips at each pixel, and the value the pixel shows.
  std::map<std::pair<int, int>, std::vector<double>> at;
  for (const json& c : LayoutItems(doc, "chip")) {
    if (!c["value"].is_null()) at[{c["x"].get<int>(), c["y"].get<int>()}].push_back(c["value"].get<double>());
  }
  auto pixels = LayoutItems(doc, "pixel");
  ASSERT_FALSE(pixels.empty());
  size_t checked = 0;
  int64_t chips = 0;
  for (const json& px : pixels) {
    EXPECT_GE(px["chips"].get<int>(), 1);
    EXPECT_LE(px["chips"].get<int>(), per_pixel);
    chips += px["chips"].get<int>();
    const auto& values = at[{px["x"].get<int>(), px["y"].get<int>()}];
    if (values.empty() || px["value"].is_null()) continue;
    EXPECT_DOUBLE_EQ(px["value"].get<double>(), *std::max_element(values.begin(), values.end()));
    ++checked;
  }
  EXPECT_EQ(chips, 2048);  // every chip in one pixel
  EXPECT_EQ(checked, pixels.size());
}

}  // namespace
}  // namespace shardscope::app

namespace shardscope::app {
namespace {

// The Sharding view's additions on the real 2x4 run: a memory bar per chip
// with the bytes shard_placements gives it, and chip 5's shards listed with
// their index ranges (--chip 5); tiles numbered by the shard they hold.
// Three CPU-only ranks (gloo, rank 2 slow): no chip lanes to lay out, so the
// view lists the ranked ranks with their evidence instead of an empty map.
TEST(FleetUi, CpuOnlyRanksAreRankedWithoutAMap) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  testing::Pod pod;
  pod.db = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("fleet_gloo_", getpid(), ".db"));
  std::filesystem::remove(pod.db);
  std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " import");
  for (int rank = 0; rank < 3; ++rank)
    absl::StrAppend(&cmd, " ", SHARDSCOPE_TEST_DATA, "/import/gloo_slow_rank", rank, ".json.gz");
  absl::StrAppend(&cmd, " --db ", pod.db, " > /dev/null 2>&1");
  pod.recorded = std::system(cmd.c_str()) == 0;
  ASSERT_TRUE(pod.recorded) << cmd;
  const json doc = OpenFleet(pod, "gloo");
  EXPECT_TRUE(LayoutItems(doc, "chip").empty());
  auto suspects = LayoutItems(doc, "text", "suspect");
  ASSERT_EQ(suspects.size(), 3u) << doc.dump();
  EXPECT_EQ(suspects[0]["rank"], 1);
  EXPECT_EQ(suspects[0]["kind"], "host");
  EXPECT_EQ(suspects[0]["id"], "2");
  EXPECT_EQ(suspects[0]["flagged"], true);
  EXPECT_EQ(suspects[0]["ref"]["table"], "hosts");
  for (size_t k = 1; k < suspects.size(); ++k) EXPECT_EQ(suspects[k]["flagged"], false) << suspects[k].dump();
  std::filesystem::remove(pod.db);
}

TEST(ShardingUi, ChipBarsAndAChipsShards) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const testing::Pod& pod = testing::RealGrid();
  ASSERT_TRUE(pod.recorded);
  const std::string layout = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("sharding_chip_", getpid(), ".json"));
  testing::UiResult r =
      testing::RunUi(SHARDSCOPE_UI_BINARY, absl::StrCat(pod.db, " --view sharding --chip 5 --dump-layout ", layout));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json doc = testing::ReadLayout(layout);
  auto sql = [&](const std::string& q) {
    return testing::RunShell(absl::StrCat("sqlite3 ", pod.db, " \"", q, "\"")).output;
  };
  auto bars = LayoutItems(doc, "bar", "chip_memory");
  ASSERT_EQ(bars.size(), 8u);
  for (const json& b : bars) {
    const std::string want = sql(absl::StrCat("SELECT coalesce(sum(bytes), 0) FROM shard_placements WHERE device_id = ",
                                              b["ref"]["device_id"].get<int>()));
    EXPECT_EQ(absl::StrCat(b["bytes"].get<int64_t>(), "\n"), want) << b.dump();
  }
  auto rows = LayoutItems(doc, "row", "chip_shard");
  ASSERT_FALSE(rows.empty());
  for (const json& row : rows) {
    EXPECT_EQ(row["ref"]["device_id"], 5);
    const std::string want = sql(absl::StrCat("SELECT index_ranges || '|' || bytes FROM shard_placements WHERE device_id = 5"
                                              " AND tensor_name = '", row["label"].get<std::string>(), "'"));
    EXPECT_EQ(absl::StrCat(row["index_ranges"].get<std::string>(), "|", row["bytes"].get<int64_t>(), "\n"), want);
  }
  // Tiles: the same shard number exactly when the same chips hold it.
  std::map<std::string, int> shard_of;
  for (const json& cell : LayoutItems(doc, "cell")) {
    ASSERT_TRUE(cell.contains("shard")) << cell.dump();
    auto [it, added] = shard_of.try_emplace(cell["label"].get<std::string>(), cell["shard"].get<int>());
    EXPECT_EQ(it->second, cell["shard"].get<int>());
  }
}

}  // namespace
}  // namespace shardscope::app

namespace shardscope::app {
namespace {

// The playhead at open (--step): Fleet shows that step, Metrics marks it on its charts over steps.
TEST(PlayheadUi, FleetAndMetricsFollowTheStep) {
  if (!testing::HaveXvfb()) GTEST_SKIP() << "xvfb-run and xauth are needed";
  const json fleet = OpenFleet(testing::SimulatedTorus(), "sim_step", "--step 2");
  auto cells = LayoutItems(fleet, "chip");
  ASSERT_FALSE(cells.empty());
  for (const json& c : cells) EXPECT_EQ(c["step"], 2);
  const std::string layout = test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("metrics_step_", getpid(), ".json"));
  testing::UiResult r = testing::RunUi(
      SHARDSCOPE_UI_BINARY, absl::StrCat(testing::RealGrid().db, " --view metrics --step 3 --dump-layout ", layout));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int marked = 0;
  for (const json& chart : LayoutItems(testing::ReadLayout(layout), "chart"))
    if (chart.value("x_label", "") == "step") {
      EXPECT_EQ(chart["mark_x"], 3) << chart["label"];
      ++marked;
    }
  EXPECT_GE(marked, 1);
}

}  // namespace
}  // namespace shardscope::app
