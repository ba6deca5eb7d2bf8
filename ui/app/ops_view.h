// The Op profile, as XProf's: where the device time went, per op and per
// fused kernel of every compiled program, and grouped by opcode, by the
// user's source line and by module path; each row with its FLOPs, bytes,
// arithmetic intensity, the FLOP/s it achieved against the profile's peak,
// what bounds it (the cost model's roofline class: compute, memory or
// collective) and the cost model's error; and a roofline chart, log-log, with
// one dot per kernel.
//
// The model is aggregated once, off the UI thread: every device-clock slice
// at depth 0 (waits for the host excluded) decoded through store/timeline.h
// and summed per (graph, op) — per name on an imported trace, which has no
// ops — then joined with the `ops` rows. A frame only draws the aggregate.
// A run without device-clock lanes is profiled on the clock it has, and says
// which: a simulated run on the modeled clock (its chips' schedules; a pod of
// more than kMaxModeledChips chips by an even sample of them), an imported
// CPU-only trace on the host clock by self time per name (PyTorch's
// key_averages table).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/cost_error.h"
#include "store/reader.h"
#include "ui/app/background.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// One kernel: an op (or fused kernel) of a compiled per-device program, or,
// for slices without an op, a kernel name of one kind.
struct OpKernel {
  int64_t graph_id = -1, op_id = -1;  // -1: no `ops` row
  std::string name, opcode, shape;
  std::string kind;       // the slices' kind: compute | collective | transfer
  std::string bound;      // compute | memory | collective | none (ops.roofline); the kind's without an op
  std::string source;     // "file:line", "" when unknown
  std::string scope;      // module path, "" when none
  int64_t count = 0;      // executions, every chip
  int64_t total_ns = 0;   // device clock
  bool has_cost = false;  // an `ops` row: the fields below are known
  double flops = 0;       // per execution
  double bytes = 0;       // read + written, per execution
  int64_t modeled_ns = 0; // per execution, on the run's profile
  double model_error = -1;  // median |modeled - measured| / measured over its executions (-1: none)

  double Intensity() const { return bytes > 0 ? flops / bytes : 0; }          // FLOP per byte
  double AchievedFlops() const { return total_ns > 0 ? flops * double(count) * 1e9 / double(total_ns) : 0; }
};

// Kernels grouped by one key (opcode, source line or module path).
struct OpGroup {
  std::string key;
  int64_t kernels = 0;       // distinct kernels
  int64_t count = 0;         // executions
  int64_t total_ns = 0;
  double flops = 0, bytes = 0;  // totals over the executions with costs
  int64_t costed_ns = 0;        // measured time of the executions with costs
  std::string bound;            // the class holding most of its time
  double model_error = -1;      // median over its executions

  double Intensity() const { return bytes > 0 ? flops / bytes : 0; }
  double AchievedFlops() const { return costed_ns > 0 ? flops * 1e9 / double(costed_ns) : 0; }
};

// Chips read for the modeled clock's op profile of a simulated pod: every
// chip runs the same programs, so an even sample gives the op mix without
// expanding thousands of schedules (the Fleet view compares the chips).
inline constexpr int kMaxModeledChips = 256;

struct OpProfile {
  int64_t run_id = 0;
  // The clock of every time here: "device", else "modeled" (a simulated
  // run), else "host" (a trace with host lanes only: `total_ns` is self time).
  std::string clock = "device";
  bool self_time = false;       // host clock: a slice's time less its children's
  int64_t chips_in_run = 0;     // modeled clock: the run's chips (devices <= this: a sample)
  std::optional<int> step;      // unset: every step (and slices outside steps)
  std::string profile;
  double peak_flops = 0;        // the profile's per chip (devices.peak_flops)
  // HBM bandwidth and per-kernel overhead of the profile, fitted to the
  // stored estimates of memory-bound ops (modeled = overhead + bytes / bw,
  // docs/cost_model.md); 0 when fewer than two sizes were modeled.
  double peak_bytes_per_s = 0, overhead_ns = 0;
  int64_t total_ns = 0;         // every kernel's time: the sum of `kernels`
  int64_t devices = 0;          // lanes read with slices: chips, or host threads on the host clock
  bool has_ops = false;         // the run stored per-op costs (not an imported trace)
  std::string no_ops_why;       // NoProgramsWhy, when !has_ops
  std::vector<OpKernel> kernels;  // by total time, longest first
  std::vector<OpGroup> by_opcode, by_source, by_module;  // each by total time
  std::optional<analysis::CostModelError> cost_error;    // every compute execution (cost_error.h)
};

// Aggregates run `run_id` (one step, or all when `step` is unset).
absl::StatusOr<OpProfile> BuildOpProfile(const store::Reader& reader, int64_t run_id, std::optional<int> step);

class OpsView {
 public:
  OpsView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // Loaded, and drawn for a few frames (ImGui sizes a new table's columns
  // from the frame before).
  bool complete() const { return job_.ready() && drawn_ >= 3; }
  bool Wait(double timeout_s) const { return job_.Wait(timeout_s); }
  void StartLoading();
  const OpProfile* profile() const { return job_.get(); }
  // Grouping of the table: 0 per kernel, 1 opcode, 2 source line, 3 module path.
  void SetGrouping(int g) { grouping_ = g; }

 private:
  void DrawTable(UiState& ui, const OpProfile& p, float height);
  void DrawRoofline(UiState& ui, const OpProfile& p, float height);

  const TraceModel& model_;
  std::function<void()> wake_;
  int drawn_ = 0;  // frames drawn since the model arrived
  BackgroundModel<OpProfile> job_;
  std::optional<int> step_;
  int grouping_ = 0;
  std::optional<size_t> hovered_;  // a kernel under the pointer in the chart
};

}  // namespace shardscope::app
