// The modeled clock: the same Scheduler as the device clock, fed with the cost
// model's durations on a target-chip profile instead of measured ones. The
// Client owns one; it has its own per-device tracks ("chip N (modeled)") and
// turns every measured program run into a modeled one, op for op, so the two
// clocks can be put side by side (docs/cost_model.md).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "compiler/ir.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"

namespace shardscope::runtime {

// Replaces the durations of a measured run by the modeled ones: compute ops
// by `costs[op_id]`, collectives by their op's alpha-beta time (per group),
// transfers by the profile's host bandwidth. An op the costs do not cover
// (an id out of range) costs the profile's kernel overhead. On a profile with
// chip_waits (chips sharing the cores), each group's collective also lasts
// the expected wait for its slowest chip after the group's modeled work since
// their previous collective (CostModel::ChipWaitNs).
ScheduleInput ModeledInput(const ScheduleInput& measured, const std::vector<compiler::OpCost>& costs,
                           const compiler::CostModel& model);

// The timeline name of an op, as the executor names its slices ("dot_general.7").
std::string ModeledOpName(const compiler::Instruction& i);

class ModeledClock {
 public:
  // Allocates one track id per device.
  ModeledClock(compiler::CostModel model, int num_devices);

  const compiler::CostModel& model() const { return model_; }
  // Changes the profile. Call before programs are compiled: costs computed
  // under another profile are recomputed at run time, but ops already
  // recorded keep the old profile's numbers.
  void set_model(compiler::CostModel model) { model_ = std::move(model); }
  const std::vector<int64_t>& tracks() const { return tracks_; }

  // Emits the modeled tracks (one per device, on Clock::kModeled).
  void RecordTracks(const Topology& topology) const;
  // Emits one OpRecord per kernel of a newly compiled program (a fused
  // kernel is one row, "fusion.<root id>", opcode "fusion").
  // `moved_values` names the global value each collective moves (ops.moves_op_id).
  void RecordOps(int64_t graph_id, const compiler::Module& program,
                 const std::vector<compiler::OpCost>& costs,
                 const compiler::FusionPlan* fusion = nullptr,
                 const std::vector<std::pair<int64_t, int64_t>>& moved_values = {}) const;
  // Lays out a run on the modeled clock and emits its slices. `costs` are the
  // program's (ProgramCosts); recomputed when `profile` is not this clock's.
  absl::StatusOr<std::vector<DeviceSpan>> Schedule(const ScheduleInput& measured,
                                                   const compiler::Module& program,
                                                   const std::vector<compiler::OpCost>& costs,
                                                   const std::string& profile,
                                                   const compiler::FusionPlan* fusion = nullptr);

 private:
  compiler::CostModel model_;
  std::vector<int64_t> tracks_;
  Scheduler scheduler_;
};

}  // namespace shardscope::runtime
