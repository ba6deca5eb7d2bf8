// Checkpoints as safetensors files: an 8-byte little-endian header length, a
// JSON header mapping each tensor name to its dtype, shape and byte range, then
// the raw little-endian data. Readable by any safetensors tool; parameters are
// stored under their module paths ("l1.weight").
#pragma once

#include <cstdint>
#include <map>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/literal.h"
#include "core/tensor.h"

namespace shardscope {

struct Checkpoint {
  std::map<std::string, Literal> tensors;
  std::map<std::string, std::string> metadata;  // the header's __metadata__
};

// Writes the current values of `tensors` (reading them forces what is
// pending) under their names. Writes to a temporary file and renames it, so a
// crash never leaves a half-written checkpoint under `path`.
// Reading a value pending in the step cuts the graph there: `loc`, the
// caller's line, is where the read is recorded.
absl::Status save_checkpoint(const std::string& path, const std::vector<Tensor*>& tensors,
                             const std::map<std::string, std::string>& metadata = {},
                             std::source_location loc = std::source_location::current());

// The largest step a checkpoint may record (its __metadata__ "step").
inline constexpr int64_t kMaxCheckpointStep = 10'000'000;

// Reads a safetensors file. It must be a regular file (a FIFO or a directory
// is refused without waiting on it) whose header length is within the file
// and safetensors' 100 MiB, whose header is a JSON object, each tensor with a
// known dtype, a shape of non-negative dims and data_offsets that cover
// exactly its bytes inside the file, and whose __metadata__ holds strings,
// "step" (when present) a decimal number 0..kMaxCheckpointStep. Errors name
// the file and what is wrong with it; nothing is allocated for a tensor
// before its shape is known to fit in the file.
absl::StatusOr<Checkpoint> load_checkpoint(const std::string& path);

// Sets each tensor's value from the checkpoint entry of the same name. Every
// tensor must be present with the same shape and dtype. A tensor on the chips
// keeps its layout (a sharded weight stays sharded, as an in-place copy keeps
// it in PyTorch/XLA); the new values are made at `loc`, the caller's line.
absl::Status load_into(const Checkpoint& ckpt, const std::vector<Tensor*>& tensors,
                       const std::string& path_for_errors = "checkpoint",
                       std::source_location loc = std::source_location::current());

}  // namespace shardscope
