// The Overview: the workstation's first page, as XProf's overview is. What
// ran, the step time on each clock, what bounds the step with the numbers
// that say so, the top ops, the compilations, memory and the warnings — each
// line with a link to the view that explains it. The verdict, top ops and
// compilations are `shardscope report`'s (analysis::BuildRunReport), never
// computed a second way; the model is built once, off the UI thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/run_report.h"
#include "store/reader.h"
#include "ui/app/background.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// What the run's small tables say, in well under a second on any run.
struct OverviewModel {
  analysis::RunHeader run;         // analysis::ReadRunHeader, as the report's
  analysis::StepStats steps;       // host clock, as the report's (analysis/quantile.h)
  analysis::CompileStats compiles; // analysis::ReadCompileStats, as the report's
  // The median step on each clock (analysis/quantile.h; -1: the run has no step on
  // that clock). Host: each step's wall time (`steps`, as the report's
  // Steps line); device and modeled: each step's span over every chip
  // (`step_bounds`).
  int64_t host_step_ns = -1, device_step_ns = -1, modeled_step_ns = -1;
  int64_t device_steps = 0, modeled_steps = 0;
  // The largest compiled program's memory plan (per chip), and the buffer
  // largest at its peak.
  struct Memory {
    int64_t graph_id = -1;
    int64_t peak_bytes = 0, hbm_bytes = 0;
    std::string peak_op;
    std::string top_buffer, top_source;
    int64_t top_bytes = 0;
  } memory;
  // A compiled program's IR is stored (not an imported trace).
  bool has_ir = false;
  std::string no_ir_why;  // NoProgramsWhy, when !has_ir
  // What the user should know before trusting the numbers: the run's state,
  // the capture's gaps, injected faults, what an import lost, the metrics
  // report's warnings.
  std::vector<std::string> warnings;
};

// The report's analysis of every slice (the verdict, top ops, the cost
// model's error): seconds to minutes on a run of millions of slices, so the
// overview shows the model above first and fills these in when they come.
struct OverviewReport {
  analysis::RunReport report;          // analysis::BuildRunReport: `shardscope report`'s
  std::vector<std::string> warnings;   // rematerializations, the metrics report's warnings
};

absl::StatusOr<OverviewModel> BuildOverviewModel(const store::Reader& reader, int64_t run_id);
absl::StatusOr<OverviewReport> BuildOverviewReport(const store::Reader& reader, int64_t run_id);

// Which view explains a verdict's bound ("compute", "memory", ...), given the
// evidence line's wording (the HBM peak goes to Memory, memory-bound kernels
// to the op profile).
ViewId ViewForBound(const std::string& bound, const std::string& what);

class OverviewView {
 public:
  OverviewView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // The model is built (or failed): the view draws its final content.
  // Loaded, and drawn for a few frames (ImGui sizes a new table's columns
  // from the frame before).
  bool complete() const { return job_.ready() && report_job_.ready() && drawn_ >= 3; }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s) && report_job_.Wait(timeout_s); }
  void StartLoading();
  const OverviewModel* model() const { return job_.get(); }
  const OverviewReport* report() const { return report_job_.get(); }

 private:
  const TraceModel& model_;
  std::function<void()> wake_;
  int drawn_ = 0;  // frames drawn since the model arrived
  BackgroundModel<OverviewModel> job_;
  BackgroundModel<OverviewReport> report_job_;
};

}  // namespace shardscope::app
