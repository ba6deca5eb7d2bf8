// The figures of a run's metrics report, in the spirit of PyTorch/XLA's
// metrics_report(): timing metrics (count, total, percentiles, each on its
// clock), counters, the ops the frontend traced per kind and the kernels run
// per opcode. Computed from the run's own tables by one function, which the
// Writer calls when a run ends to fill the `metrics` table and
// `shardscope metrics` calls for runs that have no rows there (a run that
// never ended, a file written before the table existed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <climits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "store/reader.h"

struct sqlite3;

namespace shardscope::store {

struct TimingMetric {
  std::string name;   // CompileTime, ExecuteTime, ...
  std::string clock;  // host | device
  std::string what;   // what one sample is
  int64_t count = 0;  // -1: not recorded (no timeline: --trace off); stored as NULL
  int64_t total_ns = 0;
  int64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;  // nearest rank
  bool operator==(const TimingMetric&) const = default;
};

struct CounterMetric {
  std::string name;              // MarkStep, CachedCompile, ...
  std::optional<int64_t> value;  // none: this run does not record it (the note says why)
  std::string note;
  bool operator==(const CounterMetric&) const = default;
};

struct RunMetrics {
  std::vector<TimingMetric> metrics;
  std::vector<CounterMetric> counters;
  std::vector<std::pair<std::string, int64_t>> ops_traced;  // opcode -> ops the frontend recorded, most first
  std::vector<std::pair<std::string, int64_t>> kernel_runs;  // opcode -> kernels run on all chips, most first
  bool operator==(const RunMetrics&) const = default;
};

// What the writer counts as a run's slices arrive, so that the run's end need
// not read every slice back (two passes over the timeline took seconds on a
// long run): per (step, graph, device track) the first start and the last end
// of its compute and collective kernels, and per (graph, op) the kernels run
// on device tracks. Only complete when every slice of the run is in the file.
struct RunAggregates {
  struct Span {
    int64_t start = INT64_MAX, end = INT64_MIN;
  };
  absl::flat_hash_map<std::tuple<int64_t, int64_t, int64_t>, Span> spans;  // (step or -1, graph, track)
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> kernels;        // (graph or -1, op) -> count
  void Merge(const RunAggregates& other);
  void Clear() {
    spans.clear();
    kernels.clear();
  }
};

// The figures from the run's stored tables (compilations, slices, counters,
// ops). With `slices` (the writer's, complete), ExecuteTime and the kernels per
// opcode come from it instead of the slices: the same figures.
absl::StatusOr<RunMetrics> ComputeRunMetrics(const Reader& reader, int64_t run_id,
                                             const RunAggregates* slices = nullptr);

// The run's rows of the `metrics` table; nullopt when it has none.
absl::StatusOr<std::optional<RunMetrics>> ReadRunMetrics(const Reader& reader, int64_t run_id);

namespace internal {
// Computes the run's figures on the writer's connection (inside its open
// transaction, so the run's last records count) and replaces its rows of the
// `metrics` table with them.
absl::Status StoreRunMetrics(sqlite3* db, int64_t run_id, const RunAggregates* slices = nullptr);
}  // namespace internal

}  // namespace shardscope::store
