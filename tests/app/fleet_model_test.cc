// The Fleet view's model (ui/app/fleet_model.h) against SQL and against
// `shardscope fleet --format json` on the same files: a simulated 3D torus
// (mlp on 4x2x2, chip 5 at 60% speed) and a real 2x4 run on virtual chips
// (chip 5 at 60%). Each chip's step breakdown adds up to the step; its compute,
// collective and wait equal the slices' sums; the chips sit at their stored
// coordinates; the suspects are the CLI's, in its order, the culprit first.
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "tests/app/fleet_pods.h"
#include "tests/app/ui_runner.h"
#include "ui/app/fleet_model.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

using testing::Pod;
using testing::RealGrid;
using testing::SimulatedTorus;

json CliFleet(const std::string& db) {
  testing::UiResult r = testing::RunShell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " fleet ", db, " --format json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output, nullptr, false);
}

// The model and its checks against SQL, shared by both runs.
void CheckAgainstTheStore(const Pod& pod, const std::string& grid_kind) {
  ASSERT_TRUE(pod.recorded) << "shardscope run failed for " << pod.db;
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto built = BuildFleetModel(*reader, -1);
  ASSERT_TRUE(built.ok()) << built.status();
  const FleetModel& m = *built;
  const analysis::FleetReport& r = m.report;
  EXPECT_EQ(m.grid.kind, grid_kind);
  ASSERT_EQ(m.chips.size(), 8u + (grid_kind == "torus3d" ? 8u : 0u));
  ASSERT_FALSE(r.per_step.empty());

  // Every chip at its stored coordinates, each cell used once.
  std::set<std::tuple<int, int, int>> cells;
  for (const FleetChipInfo& c : m.chips) {
    EXPECT_TRUE(cells.insert({c.panel, c.row, c.col}).second) << "chip " << c.device_id;
    const std::string at = grid_kind == "torus3d" ? absl::StrCat("[", c.row, ",", c.col, ",", c.panel, "]")
                                                  : absl::StrCat("[", c.row, ",", c.col, "]");
    EXPECT_EQ(c.coords, at) << "chip " << c.device_id;
  }
  if (grid_kind == "torus3d") {
    EXPECT_EQ(m.grid.panels, 2);
    EXPECT_EQ(m.grid.rows, 4);
    EXPECT_EQ(m.grid.cols, 2);
  } else {
    EXPECT_EQ(m.grid.rows, 2);
    EXPECT_EQ(m.grid.cols, 4);
  }

  // Per step and chip: the parts add up to the step, and equal the slices' sums.
  const std::string clock = r.clock;
  for (const analysis::FleetStep& s : r.per_step) {
    auto span = reader->Query(absl::StrCat(
        "SELECT max(s.start_ns + s.dur_ns) - min(s.start_ns) AS span FROM slices s JOIN tracks t"
        " ON t.run_id = s.run_id AND t.track_id = s.track_id WHERE s.run_id = ", r.run_id, " AND t.clock = '", clock,
        "' AND t.device_id IS NOT NULL AND s.depth = 0 AND s.step = ", s.step));
    ASSERT_TRUE(span.ok()) << span.status();
    EXPECT_DOUBLE_EQ(s.span_ns, span->Real(0, "span")) << "step " << s.step;
    auto sums = reader->Query(absl::StrCat(
        "SELECT t.device_id AS d, sum(CASE WHEN s.kind = 'compute' THEN s.dur_ns ELSE 0 END) AS compute,"
        " sum(CASE WHEN s.kind = 'collective' THEN s.dur_ns ELSE 0 END) AS collective,"
        " sum(CASE WHEN s.kind = 'collective' AND s.arrival_ns >= 0 AND s.start_ns > s.arrival_ns"
        "     THEN s.start_ns - s.arrival_ns ELSE 0 END) AS wait"
        " FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id WHERE s.run_id = ",
        r.run_id, " AND t.clock = '", clock, "' AND t.device_id IS NOT NULL AND s.depth = 0 AND s.step = ", s.step,
        " GROUP BY t.device_id"));
    ASSERT_TRUE(sums.ok()) << sums.status();
    ASSERT_EQ(sums->rows.size(), m.chips.size());
    for (size_t i = 0; i < sums->rows.size(); ++i) {
      const int k = m.ChipIndex(static_cast<int>(sums->Int(i, "d")));
      ASSERT_GE(k, 0);
      const analysis::FleetChipStep& c = s.chips[static_cast<size_t>(k)];
      EXPECT_DOUBLE_EQ(c.compute_ns, sums->Real(i, "compute")) << "step " << s.step << " chip " << k;
      EXPECT_DOUBLE_EQ(c.collective_ns, sums->Real(i, "collective")) << "step " << s.step << " chip " << k;
      EXPECT_DOUBLE_EQ(c.wait_ns, sums->Real(i, "wait")) << "step " << s.step << " chip " << k;
      const double total =
          c.compute_ns + c.collective_ns + c.wait_ns + c.transfer_ns + c.host_wait_ns + c.other_ns + c.idle_ns;
      EXPECT_NEAR(total, s.span_ns, 1e-6 * s.span_ns) << "step " << s.step << " chip " << k;
      EXPECT_LE(c.own_ns, s.span_ns);
    }
    // Lateness is against the group's median: over the chips it sums to about 0 for groups of all chips.
    double late = 0;
    for (const auto& c : s.chips) late += c.late_ns;
    EXPECT_TRUE(std::isfinite(late));
  }

  // The suspects are the CLI's, in its order; the culprit first and flagged, ranked on its chip.
  const json cli = CliFleet(pod.db);
  ASSERT_TRUE(cli.contains("suspects"));
  ASSERT_EQ(cli["suspects"].size(), r.suspects.size());
  for (size_t k = 0; k < r.suspects.size(); ++k) {
    EXPECT_EQ(cli["suspects"][k]["kind"], r.suspects[k].kind) << k;
    EXPECT_EQ(cli["suspects"][k]["id"], r.suspects[k].id) << k;
    EXPECT_EQ(cli["suspects"][k]["flagged"], r.suspects[k].flagged) << k;
    EXPECT_DOUBLE_EQ(cli["suspects"][k]["score"].get<double>(), r.suspects[k].score) << k;
  }
  EXPECT_EQ(r.suspects.front().kind, "chip");
  EXPECT_EQ(r.suspects.front().id, "5");
  EXPECT_TRUE(r.suspects.front().flagged);
  const FleetChipInfo& culprit = m.chips[static_cast<size_t>(m.ChipIndex(5))];
  EXPECT_EQ(culprit.rank, 1);
  EXPECT_TRUE(culprit.flagged);
  // The per-chip means are the CLI's per-chip rows.
  ASSERT_EQ(cli["chips"].size(), r.chip_rows.size());
  for (size_t i = 0; i < r.chip_rows.size(); ++i)
    EXPECT_DOUBLE_EQ(cli["chips"][i]["compute_ns"].get<double>(), r.chip_rows[i].compute_ns);

  // The slow chip is the latest to arrive, step after step, and its compute share the highest.
  const analysis::FleetStep& last = r.per_step.back();
  size_t latest = 0, busiest = 0;
  for (size_t i = 0; i < m.chips.size(); ++i) {
    if (m.Value(FleetMetric::kLateness, r.per_step.size() - 1, i) >
        m.Value(FleetMetric::kLateness, r.per_step.size() - 1, latest))
      latest = i;
    if (last.chips[i].compute_ns > last.chips[busiest].compute_ns) busiest = i;
  }
  EXPECT_EQ(m.chips[latest].device_id, 5);
  EXPECT_EQ(m.chips[busiest].device_id, 5);
  EXPECT_GT(m.Value(FleetMetric::kComputeShare, r.per_step.size() - 1, static_cast<size_t>(m.ChipIndex(5))),
            m.Value(FleetMetric::kComputeShare, r.per_step.size() - 1, static_cast<size_t>(m.ChipIndex(0))));
}

TEST(FleetModel, SimulatedTorusAgreesWithSqlAndTheCli) { CheckAgainstTheStore(SimulatedTorus(), "torus3d"); }

TEST(FleetModel, RealTwoByFourRunAgreesWithSqlAndTheCli) { CheckAgainstTheStore(RealGrid(), "grid"); }

// The view opens on a typical analysed step: not the warm-up, not a stall.
TEST(FleetModel, TheTypicalStepIsTheAnalysedStepOfMedianSpan) {
  FleetModel m;
  EXPECT_EQ(m.TypicalStep(), 0u);  // no steps
  auto add = [&](int step, double span, bool analysed) {
    analysis::FleetStep s;
    s.step = step;
    s.span_ns = span;
    s.analysed = analysed;
    m.report.per_step.push_back(s);
  };
  add(0, 90e6, false);             // the warm-up: first touch and compiles
  EXPECT_EQ(m.TypicalStep(), 0u);  // none analysed: the last step
  add(1, 10e6, true);
  add(2, 40e6, true);  // a stall
  add(3, 12e6, true);
  add(4, 11e6, true);
  EXPECT_EQ(m.report.per_step[m.TypicalStep()].step, 4);  // spans 10, 11, 12, 40: the lower median
  add(5, 13e6, true);
  EXPECT_EQ(m.report.per_step[m.TypicalStep()].step, 3);  // 10, 11, 12, 13, 40: the median
}

TEST(FleetModel, MfuAndHbmComeFromTheStore) {
  const Pod& pod = SimulatedTorus();
  ASSERT_TRUE(pod.recorded);
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok());
  auto m = BuildFleetModel(*reader, -1);
  ASSERT_TRUE(m.ok()) << m.status();
  // FLOPs per step: the ops of the compute kernels each chip ran.
  const analysis::FleetStep& s = m->report.per_step.back();
  auto flops = reader->Query(absl::StrCat(
      "SELECT sum(o.flops) AS f FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " JOIN ops o ON o.run_id = s.run_id AND o.graph_id = s.graph_id AND o.op_id = s.op_id"
      " WHERE s.run_id = ", m->report.run_id, " AND t.device_id = 0 AND t.clock = 'modeled' AND s.depth = 0"
      " AND s.kind = 'compute' AND s.step = ", s.step));
  ASSERT_TRUE(flops.ok()) << flops.status();
  EXPECT_NEAR(s.chips[0].flops, flops->Real(0, "f"), 1e-6 * flops->Real(0, "f"));
  EXPECT_GT(s.chips[0].flops, 0);
  const double mfu = m->Value(FleetMetric::kMfu, m->report.per_step.size() - 1, 0);
  EXPECT_NEAR(mfu, s.chips[0].flops / (s.span_ns * 1e-9 * m->chips[0].peak_flops), 1e-12);
  EXPECT_GT(mfu, 0);
  EXPECT_LT(mfu, 1);
  // A simulated run samples no HBM counter: each step's peak is the largest plan of the programs
  // launched in it, the same on every chip.
  EXPECT_NE(m->hbm_source, "");
  for (size_t i = 0; i < m->report.per_step.size(); ++i) {
    auto plan = reader->Query(absl::StrCat(
        "SELECT max(p.peak_bytes) AS p FROM executions e JOIN memory_plans p ON p.run_id = e.run_id"
        " AND p.graph_id = e.graph_id WHERE e.run_id = ", m->report.run_id, " AND e.step = ", m->report.per_step[i].step));
    ASSERT_TRUE(plan.ok());
    EXPECT_DOUBLE_EQ(m->Value(FleetMetric::kHbmPeak, i, 3), plan->Real(0, "p")) << "step " << m->report.per_step[i].step;
    EXPECT_DOUBLE_EQ(m->Value(FleetMetric::kHbmPeak, i, 0), m->Value(FleetMetric::kHbmPeak, i, 3));
  }
}

// A recorded run samples hbm_bytes_in_use per chip on the host clock: each step's peak is the
// largest sample from the step's start (step_bounds, host) to the next step's.
TEST(FleetModel, HbmPeakPerStepIsTheCountersLargestSampleInTheStep) {
  const Pod& pod = RealGrid();
  ASSERT_TRUE(pod.recorded);
  auto reader = store::Reader::Open(pod.db);
  ASSERT_TRUE(reader.ok());
  auto m = BuildFleetModel(*reader, -1);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(absl::StrContains(m->hbm_source, "in the step")) << m->hbm_source;
  const int64_t run = m->report.run_id;
  size_t checked = 0;
  for (size_t i = 0; i < m->report.per_step.size(); ++i) {
    const int step = m->report.per_step[i].step;
    for (size_t k = 0; k < m->chips.size(); ++k) {
      auto q = reader->Query(absl::StrCat(
          "SELECT max(c.value) AS p FROM counters c WHERE c.run_id = ", run, " AND c.name = 'hbm_bytes_in_use'"
          " AND c.device_id = ", m->chips[k].device_id,
          " AND c.ts_ns >= (SELECT start_ns FROM step_bounds WHERE run_id = ", run, " AND clock = 'host' AND step = ", step,
          ") AND c.ts_ns < coalesce((SELECT min(start_ns) FROM step_bounds WHERE run_id = ", run,
          " AND clock = 'host' AND step > ", step, "), 9223372036854775807)"));
      ASSERT_TRUE(q.ok()) << q.status();
      const double v = m->Value(FleetMetric::kHbmPeak, i, k);
      if (q->Text(0, "p").empty()) {
        EXPECT_TRUE(std::isnan(v));
      } else {
        EXPECT_DOUBLE_EQ(v, q->Real(0, "p")) << "step " << step << " chip " << m->chips[k].device_id;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, m->chips.size());
}

TEST(FleetModel, PlacesGpuClustersByHostAndChipsWithoutCoordinatesInOrder) {
  std::vector<FleetChipInfo> chips(8);
  for (int d = 0; d < 8; ++d) {
    chips[d].device_id = d;
    chips[d].coords = absl::StrCat("[", d / 4, ",", d % 4, "]");
    chips[d].topology_coords = true;
  }
  FleetGrid g = PlaceChips("gpu:2x4", chips);
  EXPECT_EQ(g.kind, "gpu");
  // As the fleet diagnosis describes it (the view's header read "4 x 8 (x x y)").
  EXPECT_EQ(PlaceChips("gpu cluster 2x4 (2 hosts x 4 chips, 40 links, 8 of them between hosts)", chips).kind, "gpu");
  EXPECT_EQ(g.rows, 2);
  EXPECT_EQ(g.cols, 4);
  EXPECT_EQ(chips[6].row, 1);
  EXPECT_EQ(chips[6].col, 2);
  for (auto& c : chips) c.coords = absl::StrCat("[", c.device_id, "]"), c.topology_coords = false;
  g = PlaceChips("1 host x 8 chips", chips);
  EXPECT_EQ(g.kind, "devices");
  EXPECT_EQ(g.cols, 3);
  EXPECT_EQ(g.rows, 3);
  EXPECT_EQ(chips[7].row, 2);
  EXPECT_EQ(chips[7].col, 1);
}

// Damaged coordinates (a billion rows, two chips in one cell, text) never
// size the grid: the chips are drawn in device order instead.
TEST(FleetModel, DamagedCoordinatesFallBackToDeviceOrder) {
  for (const std::string bad : {"[999999999,0]", "[0,0]", "[1,x]", "[-1,2]", "[1,2,3,4,5]"}) {
    SCOPED_TRACE(bad);
    std::vector<FleetChipInfo> chips(8);
    for (int d = 0; d < 8; ++d) {
      chips[d].device_id = d;
      chips[d].coords = absl::StrCat("[", d / 4, ",", d % 4, "]");
      chips[d].topology_coords = true;
    }
    chips[5].coords = bad;
    FleetGrid g = PlaceChips("gpu:2x4", chips);
    EXPECT_EQ(g.kind, "devices");
    EXPECT_EQ(g.rows * g.cols, 9);
  }
}

}  // namespace
// The heatmap's colour scale is never narrower than what tells chips apart:
// a healthy pod's lateness of -418..+385 us in a 3.5 s step filled the
// ramp from blue to red. Wide spreads keep their own range.
TEST(FleetModel, TheColourScaleIsNoNarrowerThanTheStepsNoise) {
  double lo = -418e3, hi = 385e3;
  EXPECT_TRUE(FleetModel::ColorScale(FleetMetric::kLateness, 3.53e9, &lo, &hi));
  EXPECT_NEAR(hi - lo, 0.02 * 3.53e9, 1);
  EXPECT_LT(lo, -418e3);
  EXPECT_GT(hi, 385e3);
  lo = 0.40, hi = 0.41;  // compute shares a point apart: widened to two, never below 0
  EXPECT_TRUE(FleetModel::ColorScale(FleetMetric::kComputeShare, 1e6, &lo, &hi));
  EXPECT_NEAR(hi - lo, 0.02, 1e-12);
  lo = 0, hi = 1e3;  // step times near 0: the scale starts at 0
  EXPECT_TRUE(FleetModel::ColorScale(FleetMetric::kStepTime, 1e6, &lo, &hi));
  EXPECT_EQ(lo, 0);
  EXPECT_NEAR(hi, 0.02e6, 1e-6);
  lo = 10e6, hi = 16e6;  // a slow chip at 1.6x: the chips' own range
  EXPECT_FALSE(FleetModel::ColorScale(FleetMetric::kStepTime, 16e6, &lo, &hi));
  EXPECT_EQ(lo, 10e6);
  EXPECT_EQ(hi, 16e6);
}

}  // namespace shardscope::app
