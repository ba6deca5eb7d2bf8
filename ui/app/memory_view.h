// The Memory view: each compiled program's memory plan on a chip (every chip
// runs the same per-device program) — its peak against the chip's HBM
// budget, parameters, the arena with and without buffer reuse, the op where
// the peak is reached and the buffers live there with their sizes, source
// lines and module paths (`memory_plans`, `peak_buffers`) — and the chip's
// hbm_bytes_in_use counter over time (host clock) with the budget line.
// The picked program's liveness curve (`memory_curves`: live bytes at each op
// that runs, in program order) with its peak marked and the budget line;
// hovering reads an op, clicking opens it in the Graph view. Files written
// before that table have no curve, and the view says so.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"
#include "ui/app/background.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

struct MemoryModel {
  int64_t run_id = 0;
  struct Buffer {
    int rank = 0;
    int64_t op_id = 0;
    std::string op;
    int64_t bytes = 0;
    bool input = false;
    std::string source, scope;
  };
  struct Plan {
    int64_t graph_id = 0;
    int64_t peak_bytes = 0, parameter_bytes = 0, arena_bytes = 0, unshared_bytes = 0;
    std::string peak_op;
    int64_t executions = 0;         // launches of the program (`executions`)
    int first_step = -1, last_step = -1;
    std::vector<Buffer> live_at_peak;  // largest first
    // The liveness curve, one point per op that runs, in program order
    // (empty when not recorded): the op, its name and line, the bytes live.
    struct Point {
      int64_t op_id = 0;
      int64_t live_bytes = 0;
      std::string name, source;
    };
    std::vector<Point> curve;
    size_t CurvePeak() const;  // index of the first highest point (curve.size() when none)
  };
  std::vector<Plan> plans;            // by graph id
  std::vector<std::pair<int, int64_t>> hbm;  // (device, HBM bytes), by device
  // hbm_bytes_in_use per chip over time (host clock): per bin the smallest
  // and largest sample.
  struct Series {
    int device = 0;
    std::vector<double> t_ns, min, max;
  };
  std::vector<Series> in_use;         // by device; empty when not recorded
  bool has_ir = false;                // compiled programs are stored (not an imported trace)
  std::string no_ir_why;  // NoProgramsWhy, when !has_ir
  bool curves_recorded = false;       // the file has memory_curves (written since it was added)

  int64_t HbmOf(int device) const;    // 0 when unknown
  size_t LargestPlan() const;         // index of the largest peak (plans.size() when none)
};

absl::StatusOr<MemoryModel> BuildMemoryModel(const store::Reader& reader, int64_t run_id);

class MemoryView {
 public:
  MemoryView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  bool complete() const { return job_.ready() && drawn_ >= 3; }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s); }
  void StartLoading();
  const MemoryModel* model() const { return job_.get(); }
  void SetDevice(int device) { device_ = device; }

 private:
  void DrawCurve(UiState& ui, const MemoryModel& m, const MemoryModel::Plan& p, int64_t hbm);
  const TraceModel& model_;
  std::function<void()> wake_;
  int drawn_ = 0;  // frames drawn since the model arrived
  BackgroundModel<MemoryModel> job_;
  int device_ = 0;  // the chip whose budget and counter are shown
};

}  // namespace shardscope::app
