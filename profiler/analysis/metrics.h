// The metrics report of a stored run, in the spirit of PyTorch/XLA's
// metrics_report(): timing metrics (count, total, percentiles, each on its
// clock), counters, kernel runs per opcode, and automatic warnings. Computed
// from the run's stored tables (compilations, slices, steps, ops), so it
// works on any shardscope database; printed by `shardscope metrics`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::analysis {

struct TimingMetric {
  std::string name;     // CompileTime, ExecuteTime, ...
  std::string clock;    // host | device
  std::string what;     // what one sample is
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;  // nearest rank
};

struct CounterMetric {
  std::string name;            // MarkStep, CachedCompile, ...
  std::optional<int64_t> value;  // none: this run does not record it (the note says why)
  std::string note;
};

struct MetricsReport {
  int64_t run_id = 0;
  int64_t steps = 0;
  std::vector<TimingMetric> metrics;
  std::vector<CounterMetric> counters;
  std::vector<std::pair<std::string, int64_t>> kernel_runs;  // opcode -> kernels run on all chips, most first
  std::vector<std::string> warnings;
};

absl::StatusOr<MetricsReport> BuildMetricsReport(const store::Reader& reader, int64_t run_id);
std::string RenderMetricsText(const MetricsReport& r);

}  // namespace shardscope::analysis
