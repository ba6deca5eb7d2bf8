// Collectives among the virtual chips of one host process. They really move
// and combine data between device buffers; the Scheduler makes each one wait
// for its slowest participant on the device clock.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "compiler/ir.h"
#include "compiler/literal.h"

namespace shardscope::runtime {

// Every member of the group gets the element-wise reduction of all inputs
// (summed in group order, so results are deterministic).
absl::Status AllReduce(compiler::ReduceKind kind, const std::vector<const Literal*>& inputs,
                       Literal* out);

// Concatenates the inputs along `dim` in group order.
absl::Status AllGather(int64_t dim, const std::vector<const Literal*>& inputs, Literal* out);

// Copies block `src` into `dst` at element offsets `offsets` (same rank).
void CopyBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst);
// Extracts the block of `src` starting at `offsets` with the shape of `dst`.
void ExtractBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst);

}  // namespace shardscope::runtime
