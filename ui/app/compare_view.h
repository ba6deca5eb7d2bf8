// The Compare view: two runs side by side — two files (`--compare OTHER.db
// [--compare-run N]`, or a path typed in the view), or two runs of one file
// (picked in the view; by default the run before this one). The comparison
// is profiler/analysis/compare.h's, the one `shardscope diff` prints: step
// time on each clock, compile counts, the largest program's peak, every op's
// time per step classed added, removed, faster, slower or unchanged beyond
// the runs' own noise, and sharding changes. Clicking an op shows it on both
// sides. The other run is the baseline (A); this one is B.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "profiler/analysis/compare.h"
#include "ui/app/background.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// What to compare this run with: a run of another file, or of this one.
struct CompareTarget {
  std::string path;  // "" : this run's own file
  std::optional<int64_t> run_id;  // unset: the file's latest run (this file: the run before this one)
};

class CompareView {
 public:
  CompareView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // Loaded, and drawn for a few frames (ImGui sizes a new table's columns
  // from the frame before).
  bool complete() const { return !target_ || (job_.ready() && drawn_ >= 3); }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s); }
  // Compares with `target` (built off the UI thread).
  void SetTarget(CompareTarget target);
  const CompareTarget* target() const { return target_ ? &*target_ : nullptr; }
  const analysis::RunComparison* comparison() const { return job_.get(); }
  // The op row picked (an index into comparison()->ops).
  std::optional<size_t> picked() const { return picked_; }

 private:
  void StartLoading();
  void DrawPicker();
  void DrawComparison(UiState& ui, const analysis::RunComparison& c);

  const TraceModel& model_;
  std::function<void()> wake_;
  std::optional<CompareTarget> target_;
  bool defaulted_ = false;  // the default target was considered once
  int drawn_ = 0;  // frames drawn since the model arrived
  BackgroundModel<analysis::RunComparison> job_;
  std::optional<size_t> picked_;
  bool show_unchanged_ = false;
  char path_buf_[512] = {};
};

}  // namespace shardscope::app
