// The metrics report of a stored run, in the spirit of PyTorch/XLA's
// metrics_report(): timing metrics (count, total, percentiles, each on its
// clock), counters, ops traced per kind, kernel runs per opcode, and
// automatic warnings. The figures are the run's rows of the `metrics` table
// (store/metrics.h, written when the run ended), or, for a run without them
// (it never ended; an older file), computed from its tables by the same code,
// so it works on any shardscope database; printed by `shardscope metrics`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/metrics.h"
#include "store/reader.h"

namespace shardscope::analysis {

using TimingMetric = store::TimingMetric;
using CounterMetric = store::CounterMetric;

// The figures (store::RunMetrics: metrics, counters, ops traced, kernels run),
// the run's step count and the warnings drawn from them.
struct MetricsReport : store::RunMetrics {
  int64_t run_id = 0;
  int64_t steps = 0;
  bool stored = false;  // the figures came from the `metrics` table (else computed now)
  std::string run_state;  // store::RunState::Describe(), e.g. "ended abnormally after step 7: ..."
  // Set for a run imported from another tool's trace ("4 files, the first
  // cuda_r0.json"): it has none of these figures, which only shardscope's
  // frontend records, and the report says so instead of printing zeros.
  std::string imported;
  // What the run's capture left out of its timeline (runs.capture_note): the
  // timings drawn from the timeline cover only what it kept.
  std::string capture_note;
  std::vector<std::string> warnings;
};

absl::StatusOr<MetricsReport> BuildMetricsReport(const store::Reader& reader, int64_t run_id);
std::string RenderMetricsText(const MetricsReport& r);
// The documented JSON form (docs/schema.md, "metrics --format json").
std::string RenderMetricsJson(const MetricsReport& r);

}  // namespace shardscope::analysis
