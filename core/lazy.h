// Cutting the pending graph: mark_step() and value reads. At each cut core
// builds the IR of every pending live tensor, compiles it through the
// client's cache, runs it on the mesh, and records the graph's call site, its
// input signature and, on a cache miss, why it differs from the nearest
// earlier graph of that call site.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <source_location>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir.h"
#include "core/tensor.h"

namespace shardscope {

// Cuts, compiles (cached) and runs everything pending. Returns the first
// error of an op that made a pending tensor, naming its line.
absl::Status mark_step(std::source_location loc = std::source_location::current());

// The graph the next mark_step() would compile, lowered as it would lower it
// (parameters in order, each with its input's current sharding), without
// running anything; inputs[k] is the tensor feeding parameter k, so laying it
// out anew (mark_sharding) changes how that step runs. For auto-sharding and
// for inspecting a step before it runs.
struct PendingGraph {
  std::unique_ptr<compiler::Module> module;
  std::vector<Tensor> inputs;
};
absl::StatusOr<PendingGraph> pending_graph();

// Records the step just ended: its loss and host wall time (the `steps` table).
// `eval_loss`, when given, is the held-out loss measured after this step.
void log_step(double loss, std::optional<double> eval_loss = std::nullopt);
// The same for step `step`, logged later: a loop that reads step N's loss only
// after enqueueing step N+1 (so tracing overlaps execution) logs N here. The
// wall time is the time since the previous log, which in a steady loop is one
// step's period.
void log_step_at(int step, double loss, std::optional<double> eval_loss = std::nullopt);
// The number of mark_step calls so far, or the step set by set_current_step.
int current_step();
// Continues step numbering from `step` (a run resumed from a checkpoint).
void set_current_step(int step);

namespace internal {
absl::StatusOr<Literal> ReadValue(const Tensor& t, const SourceLoc& loc);
// mark_step as one call site however it is reached: compile()'s steps.
absl::Status MarkStepAt(const SourceLoc& loc, const std::string& name);
// Records a tensor's sharding and each chip's shard of it (tables tensors and
// shard_placements), once per name, shape and sharding; `source` is
// annotated | propagated | auto | default. Replay records its inputs so.
void RecordTensor(const std::string& name, const Shape& shape, const Sharding& sharding, const std::string& source,
                  const SourceLoc& loc);
}  // namespace internal

}  // namespace shardscope
