// What the samples share: the --autocast option, and the step tail (LossLog),
// where each step's loss is read one step late, after the next step has been
// enqueued, so the host traces step N+1 while the chips
// still run step N. Reading the loss right after mark_step would make the
// chips wait for the host's tracing every step (visible as "waiting for
// host" on the device clock); PyTorch/XLA gives the same advice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "samples/samples.h"

namespace shardscope::samples {

// --autocast: "" (f32 throughout), "bf16" or "f16"; anything else is an error
// naming the value.
absl::StatusOr<std::optional<DType>> AutocastType(const SampleConfig& c);

// The mesh of cfg.mesh over cfg.mesh_device_ids (chips 0..n-1 in order when empty), with these axis names.
absl::StatusOr<shardscope::Mesh> SampleMesh(const SampleConfig& cfg, std::vector<std::string> axes = {"data", "model"});

// --init: loads `tensors` (weights and optimizer state) from cfg.init_path
// when given, and continues the step numbering at the step it recorded.
// Returns the first step to run (0 without --init). A checkpoint of another
// sample (its __metadata__ "sample"), or holding tensors the run does not
// have, is refused: loading the rest would train on a model it only partly
// describes.
absl::StatusOr<int> ResumeFromCheckpoint(const SampleConfig& cfg, const std::vector<Tensor*>& tensors,
                                         const std::string& sample);
// The part of that check a driver can make before anything is recorded: a
// checkpoint another sample saved (its __metadata__ "sample") is an error.
absl::Status CheckCheckpointSample(const Checkpoint& ckpt, const std::string& path, const std::string& sample);
// --save: writes `tensors` to cfg.save_path when given, recording `step`
// (where a resumed run starts) and the sample's name.
absl::Status SaveCheckpoint(const SampleConfig& cfg, const std::vector<Tensor*>& tensors, int step,
                            const std::string& sample);

class LossLog {
 public:
  LossLog(const SampleConfig& cfg, SampleResult* result) : cfg_(cfg), result_(result) {}

  // After step `step`'s mark_step: keeps its loss, then reads and logs the
  // step before it (which has finished or is finishing).
  absl::Status Push(int step, Tensor loss);
  // Reads and logs the kept step now, with its held-out loss when given
  // (before an evaluation's own graph, a checkpoint, or the end of the run).
  // The read is recorded under the step just cut (mark_step has moved the
  // count on to the next): a read after the run's last mark_step would
  // otherwise make a host-clock step that never ran.
  absl::Status Flush(std::optional<double> eval_loss = std::nullopt);

 private:
  const SampleConfig& cfg_;
  SampleResult* result_;
  std::optional<Tensor> pending_;
  int pending_step_ = -1;
};

}  // namespace shardscope::samples
