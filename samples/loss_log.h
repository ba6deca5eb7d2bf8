// The samples' step tail: each step's loss is read one step late, after the
// next step has been enqueued, so the host traces step N+1 while the chips
// still run step N. Reading the loss right after mark_step would make the
// chips wait for the host's tracing every step (visible as "waiting for
// host" on the device clock); PyTorch/XLA gives the same advice.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "samples/samples.h"

namespace shardscope::samples {

class LossLog {
 public:
  LossLog(const SampleConfig& cfg, SampleResult* result) : cfg_(cfg), result_(result) {}

  // After step `step`'s mark_step: keeps its loss, then reads and logs the
  // step before it (which has finished or is finishing).
  absl::Status Push(int step, Tensor loss);
  // Reads and logs the kept step now, with its held-out loss when given
  // (before an evaluation's own graph, a checkpoint, or the end of the run).
  absl::Status Flush(std::optional<double> eval_loss = std::nullopt);

 private:
  const SampleConfig& cfg_;
  SampleResult* result_;
  std::optional<Tensor> pending_;
  int pending_step_ = -1;
};

}  // namespace shardscope::samples
