// The Metrics view: the run's metrics report (profiler/analysis/metrics.h, as
// `shardscope metrics` prints it: timing metrics, counters, warnings) and its
// figures as charts over the steps — step time on each clock, loss, compile
// time, transfers, where each step's device time went — and every stored
// counter over time (host clock). Drawn with ImDrawList (chart.h); hovering
// reads the values. Built once off the UI thread: the device time per step
// and kind comes from one pass over the device lanes (store/timeline.h), the
// counters from their level-of-detail summaries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/metrics.h"
#include "store/reader.h"
#include "ui/app/background.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

struct MetricsModel {
  analysis::MetricsReport report;
  // Per step (the union of the steps any table has), ascending; -1 or NaN
  // where a step lacks that figure.
  std::vector<int> steps;
  std::vector<int64_t> host_ns;     // steps.wall_ns (host clock)
  std::vector<int64_t> device_ns;   // step_bounds span on the device clock
  std::vector<int64_t> modeled_ns;  // step_bounds span on the modeled clock
  std::vector<double> loss, eval_loss;  // NaN: none recorded, or not finite
  int loss_not_finite_from = -1;        // the first step whose loss is NaN or Inf (diverged)
  std::vector<int64_t> compile_ns;  // compilations' duration in the step (host clock)
  std::vector<int64_t> compiles, compile_misses;
  // Device clock, depth 0, summed over every chip, by kind.
  std::vector<int64_t> compute_ns, collective_ns, transfer_ns, host_wait_ns;
  std::vector<int64_t> transfer_bytes;
  int64_t devices = 0;  // chips with device-clock slices
  // A stored counter (`counters`) over time on the host clock, from its
  // summaries: per bucket the smallest and largest value over its chips.
  struct Counter {
    std::string name;
    int64_t devices = 0;  // 0: process-wide
    std::vector<double> t_ns, min, max;
    double lowest = 0, highest = 0;  // over the run
  };
  std::vector<Counter> counters;

  size_t IndexOf(int step) const;  // steps.size() when absent
};

absl::StatusOr<MetricsModel> BuildMetricsModel(const store::Reader& reader, int64_t run_id);

class MetricsView {
 public:
  MetricsView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // Loaded, and drawn for a few frames (ImGui sizes a new table's columns
  // from the frame before).
  bool complete() const { return job_.ready() && drawn_ >= 3; }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s); }
  void StartLoading();
  const MetricsModel* model() const { return job_.get(); }

 private:
  const TraceModel& model_;
  std::function<void()> wake_;
  int drawn_ = 0;  // frames drawn since the model arrived
  BackgroundModel<MetricsModel> job_;
};

}  // namespace shardscope::app
