// The Fleet view's model; see fleet_model.h.
#include "ui/app/fleet_model.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ui/app/format.h"

namespace shardscope::app {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "[1,2,0]" -> {1, 2, 0}; empty when it is not a list of integers.
}  // namespace

const char* FleetMetricName(FleetMetric m) {
  switch (m) {
    case FleetMetric::kStepTime: return "step_time";
    case FleetMetric::kComputeShare: return "compute_share";
    case FleetMetric::kCollectiveWait: return "collective_wait";
    case FleetMetric::kLateness: return "arrival_lateness";
    case FleetMetric::kHbmPeak: return "hbm_peak";
    case FleetMetric::kMfu: return "mfu";
  }
  return "";
}

std::optional<FleetMetric> FleetMetricFromName(std::string_view name) {
  for (int i = 0; i < kNumFleetMetrics; ++i)
    if (name == FleetMetricName(static_cast<FleetMetric>(i))) return static_cast<FleetMetric>(i);
  return std::nullopt;
}

const char* FleetMetricTitle(FleetMetric m) {
  switch (m) {
    case FleetMetric::kStepTime: return "step time (its first start to last end)";
    case FleetMetric::kComputeShare: return "compute share of the step";
    case FleetMetric::kCollectiveWait: return "collective wait (arrival to start)";
    case FleetMetric::kLateness: return "arrival lateness (after its groups' median)";
    case FleetMetric::kHbmPeak: return "HBM peak";
    case FleetMetric::kMfu: return "MFU (FLOPs / step / peak)";
  }
  return "";
}

double FleetModel::Value(FleetMetric m, size_t step, size_t chip) const {
  if (step >= report.per_step.size() || chip >= chips.size()) return kNaN;
  const analysis::FleetStep& s = report.per_step[step];
  const analysis::FleetChipStep& c = s.chips[chip];
  if (m == FleetMetric::kHbmPeak) {
    const FleetChipInfo& info = chips[chip];
    if (!info.hbm_step_peak.empty()) return info.hbm_step_peak[step] >= 0 ? info.hbm_step_peak[step] : kNaN;
    return info.hbm_peak_bytes >= 0 ? info.hbm_peak_bytes : kNaN;
  }
  if (!c.present) return kNaN;
  switch (m) {
    case FleetMetric::kStepTime: return c.own_ns;
    case FleetMetric::kComputeShare: return s.span_ns > 0 ? c.compute_ns / s.span_ns : kNaN;
    case FleetMetric::kCollectiveWait: return c.wait_ns;
    case FleetMetric::kLateness: return c.late_ns;
    case FleetMetric::kMfu: {
      const double peak = chips[chip].peak_flops;
      return peak > 0 && s.span_ns > 0 ? c.flops / (s.span_ns * 1e-9 * peak) : kNaN;
    }
    case FleetMetric::kHbmPeak: break;
  }
  return kNaN;
}

std::string FleetModel::Format(FleetMetric m, double v) {
  if (std::isnan(v)) return "-";
  switch (m) {
    case FleetMetric::kComputeShare:
    case FleetMetric::kMfu: return absl::StrFormat("%.1f%%", v * 100);
    case FleetMetric::kHbmPeak: return FormatBytes(static_cast<int64_t>(v));
    case FleetMetric::kLateness: return (v < 0 ? "-" : "+") + FormatDuration(std::fabs(v));
    default: return FormatDuration(v);
  }
}

bool FleetModel::ColorScale(FleetMetric m, double span_ns, double* lo, double* hi) {
  double floor = 0;
  switch (m) {
    case FleetMetric::kComputeShare:
    case FleetMetric::kMfu: floor = 0.02; break;
    case FleetMetric::kHbmPeak: floor = 0.02 * std::max(std::fabs(*lo), std::fabs(*hi)); break;
    default: floor = 0.02 * span_ns; break;
  }
  if (!(floor > 0) || *hi - *lo >= floor) return false;
  const double mid = (*lo + *hi) / 2;
  double a = mid - floor / 2, b = mid + floor / 2;
  // Times, shares and bytes are never negative (lateness is): the scale starts at 0 at least.
  if (m != FleetMetric::kLateness && a < 0 && *lo >= 0) b -= a, a = 0;
  *lo = a;
  *hi = b;
  return true;
}

int FleetModel::ChipIndex(int device_id) const {
  auto it = std::lower_bound(chips.begin(), chips.end(), device_id,
                             [](const FleetChipInfo& c, int d) { return c.device_id < d; });
  return it != chips.end() && it->device_id == device_id ? static_cast<int>(it - chips.begin()) : -1;
}

size_t FleetModel::TypicalStep() const {
  const auto& steps = report.per_step;
  std::vector<size_t> analysed;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].analysed) analysed.push_back(i);
  if (analysed.empty()) return steps.empty() ? 0 : steps.size() - 1;
  // The lower median: of an even count, the faster of the two middle steps.
  auto mid = analysed.begin() + static_cast<std::ptrdiff_t>((analysed.size() - 1) / 2);
  std::nth_element(analysed.begin(), mid, analysed.end(), [&](size_t a, size_t b) {
    return std::make_pair(steps[a].span_ns, a) < std::make_pair(steps[b].span_ns, b);
  });
  return *mid;
}

FleetGrid PlaceChips(const std::string& topology, std::vector<FleetChipInfo>& chips) {
  FleetGrid g;
  std::vector<std::vector<int>> coords;
  size_t rank = 0;
  bool same_rank = !chips.empty();
  for (const FleetChipInfo& c : chips) {
    coords.push_back(analysis::ParseChipCoords(c.coords));
    if (coords.size() == 1) rank = coords.back().size();
    same_rank = same_rank && coords.back().size() == rank;
  }
  auto extent = [&](size_t k) {
    int n = 0;
    for (const auto& v : coords) n = std::max(n, v[k] + 1);
    return n;
  };
  // A grid is drawn only where the coordinates place each chip in a cell of
  // its own, in a grid not much larger than the chips (a damaged row could
  // ask for a billion cells).
  if (same_rank && (rank == 2 || rank == 3)) {
    double cells = 1;
    for (size_t k = 0; k < rank; ++k) cells *= extent(k);
    std::set<std::vector<int>> distinct(coords.begin(), coords.end());
    same_rank = distinct.size() == coords.size() && cells <= 16.0 * static_cast<double>(chips.size()) + 64;
  }
  const bool topo = std::all_of(chips.begin(), chips.end(), [](const FleetChipInfo& c) { return c.topology_coords; });
  if (same_rank && rank == 3) {
    g = {topo ? "torus3d" : "mesh", extent(2), extent(0), extent(1), topo ? "x" : "mesh axis 0",
         topo ? "y" : "mesh axis 1", topo ? "z" : "mesh axis 2"};
    for (size_t i = 0; i < chips.size(); ++i) {
      chips[i].panel = coords[i][2];
      chips[i].row = coords[i][0];
      chips[i].col = coords[i][1];
    }
  } else if (same_rank && rank == 2) {
    // The spec ("gpu:4x8") or the fleet diagnosis's description of it ("gpu cluster 4x8 (...)").
    const bool gpu = topo && (topology.rfind("gpu:", 0) == 0 || topology.rfind("gpu cluster", 0) == 0);
    g = {gpu ? "gpu" : topo ? "grid" : "mesh", 1, extent(0), extent(1), gpu ? "host" : topo ? "x" : "mesh axis 0",
         gpu ? "chip" : topo ? "y" : "mesh axis 1", ""};
    for (size_t i = 0; i < chips.size(); ++i) {
      chips[i].row = coords[i][0];
      chips[i].col = coords[i][1];
    }
    // Many rows of few chips (gpu:64x8, a 64x8 torus): panels of about
    // square blocks of rows, which the view lays out side by side, instead
    // of one tall strip.
    if (g.rows > 8 && g.rows > 4 * g.cols) {
      // At most 32 panels: each takes a label and a gap.
      g.rows_per_panel = std::max({4, g.cols, (g.rows + 31) / 32});
      g.panels = (g.rows + g.rows_per_panel - 1) / g.rows_per_panel;
      g.total_rows = g.rows;
      g.rows = g.rows_per_panel;
      g.panel_label = g.row_label;
      for (FleetChipInfo& c : chips) {
        c.panel = c.row / g.rows_per_panel;
        c.row %= g.rows_per_panel;
      }
    }
  } else {
    // No usable coordinates (one mesh axis, an imported trace): device order, about square.
    const int n = static_cast<int>(chips.size());
    const int cols = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
    g = {"devices", 1, std::max(1, (n + cols - 1) / cols), cols, "", "", ""};
    for (int i = 0; i < n; ++i) {
      chips[i].row = i / cols;
      chips[i].col = i % cols;
    }
  }
  return g;
}

namespace {

// The counter's largest sample per chip and step: a sample belongs to the
// step whose start on the host clock (step_bounds) is the latest at or
// before it. Without host step bounds, the run's peak stands for every step.
absl::Status HbmPeaksPerStep(const store::Reader& reader, const std::string& run,
                             const std::map<int, size_t>& index_of_step, FleetModel& m) {
  auto has_bounds = reader.HasTable("step_bounds");  // not in schema version 1 files
  if (!has_bounds.ok()) return has_bounds.status();
  absl::StatusOr<store::QueryResult> bounds = store::QueryResult{};
  if (*has_bounds)
    bounds = reader.Query("SELECT step, start_ns FROM step_bounds WHERE run_id = ?1 AND clock = 'host' ORDER BY start_ns",
                          {run});
  if (!bounds.ok()) return bounds.status();
  if (bounds->rows.empty()) {
    m.hbm_source = "hbm_bytes_in_use counter: its largest sample per chip over the run (the host clock's steps are "
                   "not stored, so it is not split by step)";
    return absl::OkStatus();
  }
  m.hbm_source = "hbm_bytes_in_use counter: its largest sample per chip in the step (host clock, from the step's "
                 "start to the next one's)";
  std::vector<int64_t> starts;
  std::vector<int> steps;
  for (size_t i = 0; i < bounds->rows.size(); ++i) {
    starts.push_back(bounds->Int(i, "start_ns"));
    steps.push_back(static_cast<int>(bounds->Int(i, "step")));
  }
  for (FleetChipInfo& c : m.chips) c.hbm_step_peak.assign(m.report.per_step.size(), -1);
  sqlite3* db = reader.connection();
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(db,
                         "SELECT device_id, ts_ns, value FROM counters WHERE run_id = ?1 AND name = 'hbm_bytes_in_use'"
                         " AND device_id IS NOT NULL",
                         -1, &q, nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat(reader.path(), ": reading hbm_bytes_in_use: ", sqlite3_errmsg(db)));
  }
  sqlite3_bind_text(q, 1, run.data(), static_cast<int>(run.size()), SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const int k = m.ChipIndex(sqlite3_column_int(q, 0));
    const int64_t ts = sqlite3_column_int64(q, 1);
    auto after = std::upper_bound(starts.begin(), starts.end(), ts);
    if (k < 0 || after == starts.begin()) continue;  // before the first step
    auto idx = index_of_step.find(steps[static_cast<size_t>(after - starts.begin()) - 1]);
    if (idx == index_of_step.end()) continue;
    double& peak = m.chips[static_cast<size_t>(k)].hbm_step_peak[idx->second];
    peak = std::max(peak, sqlite3_column_double(q, 2));
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) {
    return absl::DataLossError(absl::StrCat(reader.path(), ": reading hbm_bytes_in_use: ", sqlite3_errmsg(db)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FleetModel> BuildFleetModel(const store::Reader& reader, int64_t run_id,
                                           std::function<void(double, const std::string&)> progress) {
  FleetModel m;
  analysis::FleetOptions opt;
  opt.run_id = run_id;
  opt.per_step = true;
  opt.progress = progress;
  auto report = analysis::AnalyzeFleet(reader, opt);
  if (!report.ok()) return report.status();
  m.report = *std::move(report);
  const std::string run = absl::StrCat(m.report.run_id);

  auto has_topology = reader.HasColumn("devices", "topology_coords");
  if (!has_topology.ok()) return has_topology.status();
  auto devs = reader.Query(absl::StrCat("SELECT device_id, host_id, coords, hbm_bytes, peak_flops",
                                        *has_topology ? ", topology_coords" : ", NULL AS topology_coords",
                                        " FROM devices WHERE run_id = ?1 ORDER BY device_id"),
                           {run});
  if (!devs.ok()) return devs.status();
  std::map<int, size_t> row_of;
  for (size_t i = 0; i < devs->rows.size(); ++i) row_of[static_cast<int>(devs->Int(i, "device_id"))] = i;
  for (int d : m.report.step_devices) {
    FleetChipInfo c;
    c.device_id = d;
    c.host_id = d;
    if (auto it = row_of.find(d); it != row_of.end()) {
      c.host_id = static_cast<int>(devs->Int(it->second, "host_id"));
      c.coords = devs->Text(it->second, "topology_coords");
      c.topology_coords = !c.coords.empty();
      if (!c.topology_coords) c.coords = devs->Text(it->second, "coords");
      c.hbm_bytes = devs->Int(it->second, "hbm_bytes");
      c.peak_flops = devs->Real(it->second, "peak_flops");
    }
    m.chips.push_back(std::move(c));
  }
  m.grid = PlaceChips(m.report.topology, m.chips);

  // Suspects: each chip's rank in the diagnosis.
  for (size_t k = 0; k < m.report.suspects.size(); ++k) {
    const analysis::FleetSuspect& s = m.report.suspects[k];
    int d = 0;
    if (s.kind != "chip" || !absl::SimpleAtoi(s.id, &d)) continue;
    if (int i = m.ChipIndex(d); i >= 0) {
      m.chips[static_cast<size_t>(i)].rank = static_cast<int>(k) + 1;
      m.chips[static_cast<size_t>(i)].flagged = s.flagged;
    }
  }

  // HBM peaks: the counter where it was sampled, else the programs' plans.
  if (progress) progress(-1, "reading HBM peaks");
  auto counters = reader.Query(
      "SELECT device_id, max(value) AS peak FROM counters WHERE run_id = ?1 AND name = 'hbm_bytes_in_use'"
      " AND device_id IS NOT NULL GROUP BY device_id",
      {run});
  if (!counters.ok()) return counters.status();
  std::map<int, size_t> index_of_step;
  for (size_t i = 0; i < m.report.per_step.size(); ++i) index_of_step[m.report.per_step[i].step] = i;
  if (!counters->rows.empty()) {
    for (size_t i = 0; i < counters->rows.size(); ++i)
      if (int k = m.ChipIndex(static_cast<int>(counters->Int(i, "device_id"))); k >= 0)
        m.chips[static_cast<size_t>(k)].hbm_peak_bytes = counters->Real(i, "peak");
    if (absl::Status st = HbmPeaksPerStep(reader, run, index_of_step, m); !st.ok()) return st;
  } else if (auto has = reader.HasTable("memory_plans"); has.ok() && *has) {
    auto plans = reader.Query(
        "SELECT e.step, max(p.peak_bytes) AS peak FROM executions e JOIN memory_plans p ON p.run_id = e.run_id"
        " AND p.graph_id = e.graph_id WHERE e.run_id = ?1 GROUP BY e.step",
        {run});
    if (!plans.ok()) return plans.status();
    if (!plans->rows.empty()) {
      m.hbm_source = "memory plans: the largest planned peak of the programs launched in the step (the same on every chip)";
      for (FleetChipInfo& c : m.chips) c.hbm_step_peak.assign(m.report.per_step.size(), -1);
      for (size_t i = 0; i < plans->rows.size(); ++i) {
        auto it = index_of_step.find(static_cast<int>(plans->Int(i, "step")));
        if (it == index_of_step.end()) continue;
        for (FleetChipInfo& c : m.chips) {
          c.hbm_step_peak[it->second] = plans->Real(i, "peak");
          c.hbm_peak_bytes = std::max(c.hbm_peak_bytes, plans->Real(i, "peak"));
        }
      }
    }
  }
  return m;
}

}  // namespace shardscope::app
