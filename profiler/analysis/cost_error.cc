// ScoreCostModel and friends (see cost_error.h).
#include "profiler/analysis/cost_error.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/analysis/clocks.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/quantile.h"

namespace shardscope::analysis {

namespace {
double Median(const std::vector<double>& sorted) { return Quantile(sorted, 0.5); }
}  // namespace

CostModelError ScoreCostModel(const std::vector<std::pair<int64_t, int64_t>>& measured_modeled,
                              const std::string& profile) {
  CostModelError e;
  e.profile = profile;
  std::vector<double> err, ratio;
  for (const auto& [measured, modeled] : measured_modeled) {
    if (measured <= 0) {
      ++e.zero_duration;
      continue;
    }
    double m = static_cast<double>(measured);
    err.push_back(std::abs(static_cast<double>(modeled) - m) / m);
    ratio.push_back(static_cast<double>(modeled) / m);
  }
  std::sort(err.begin(), err.end());
  std::sort(ratio.begin(), ratio.end());
  e.kernels = static_cast<int64_t>(err.size());
  e.median = Median(err);
  e.p90 = Quantile(err, 0.9);
  e.median_ratio = Median(ratio);
  return e;
}

absl::StatusOr<std::optional<CostModelError>> ScoreRunCostModel(const store::Reader& reader, int64_t run_id) {
  auto has = reader.HasTable("ops");
  if (!has.ok()) return has.status();
  if (!*has) return std::optional<CostModelError>();
  auto lanes = HasChipLanes(reader, run_id, "device");
  if (!lanes.ok()) return lanes.status();
  if (!*lanes) return std::optional<CostModelError>();
  std::string run = absl::StrCat(run_id);
  // The device lanes' compute kernels first, then each looked up in `ops`
  // (CROSS JOIN keeps that order): joined freely, the planner put `ops`
  // outside and scanned every kernel of the graph once per op — 10 s of a
  // 240k-slice run's report.
  // A run without ops (an imported trace, a file from before them) has nothing to score.
  auto profile = reader.Query("SELECT profile FROM ops WHERE run_id = ?1 LIMIT 1", {run});
  if (!profile.ok()) return profile.status();
  if (profile->rows.empty()) return std::optional<CostModelError>();
  std::vector<std::pair<int64_t, int64_t>> pairs;
  absl::Status st = reader.ForEachIntRow(
      "WITH k AS MATERIALIZED (SELECT s.graph_id, s.op_id, s.dur_ns FROM slices s"
      "   WHERE s.run_id = ?1 AND s.kind = 'compute' AND s.depth = 0"
      "   AND s.track_id IN (SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = 'device'))"
      " SELECT k.dur_ns AS measured, o.modeled_ns AS modeled"
      " FROM k CROSS JOIN ops o ON o.run_id = ?1 AND o.graph_id = k.graph_id AND o.op_id = k.op_id",
      {run}, 0, [&](const std::vector<int64_t>& row) { pairs.push_back({row[0], row[1]}); });
  if (!st.ok()) return st;
  if (pairs.empty()) return std::optional<CostModelError>();
  return std::optional<CostModelError>(ScoreCostModel(pairs, profile->Text(0, "profile")));
}

std::string CostModelErrorLine(const CostModelError& e) {
  return absl::StrFormat("cost model error (%s profile): median %.0f%% over %d kernels", Printable(e.profile),
                         100 * e.median, e.kernels);
}

}  // namespace shardscope::analysis
