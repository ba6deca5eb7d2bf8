// The text of shard_placements.index_ranges: each dimension's [begin, end)
// of the tensor a chip holds, "[0:128,0:256]" ("[]" for a scalar). One
// parser, so `shardscope check` flags exactly what the views cannot read.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::store {

class Reader;

// Where a file keeps its placements as spans of chips, for a FROM clause:
// the columns run_id, tensor_id, tensor_name, first_device, last_device,
// index_ranges, bytes. A version-4 file's shard_placement_spans; an older
// file's shard_placements table read as spans of one chip (a reader does not
// migrate), also while a writer is migrating it. Reading spans rather than the view's rows spares expanding a
// replicated tensor into a row per chip.
absl::StatusOr<std::string> PlacementSpansSql(const Reader& reader);

// DataLoss naming the text when it is not [b:e,...] with 0 <= b <= e.
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> ParseIndexRanges(std::string_view text);

// The rank of a tensors.shape text ("[64,784]" 2, "[]" 0), or -1 when it is
// not one.
int ShapeRank(std::string_view shape);

}  // namespace shardscope::store
