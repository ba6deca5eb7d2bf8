// What the Sharding view reads beyond the run's tensors (TraceModel::sharding):
// the mesh (its shape, axis names and device order), so each split dim of a
// tensor is named by the mesh axis that splits it (as JAX's
// visualize_tensor_sharding labels tiles); the bytes every chip holds over
// all tensors (the per-chip memory bars); and, for one chip, the index ranges
// and bytes it holds of every tensor. All from `meshes` and `shard_placements`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/sharding_view.h"
#include "store/reader.h"

namespace shardscope::app {

struct MeshInfo {
  std::vector<int> shape;           // meshes.shape
  std::vector<std::string> axes;    // meshes.axis_names
  std::vector<int64_t> devices;     // meshes.device_ids, row-major over shape
};

struct ChipBytes {
  int64_t device_id = 0;
  int64_t bytes = 0;     // shard_placements over every tensor
  int64_t tensors = 0;   // tensors it holds a shard of
  int64_t hbm_bytes = 0; // devices.hbm_bytes (0: unknown)
};

struct ChipShard {
  std::string tensor, dtype, shape, sharding;
  std::string index_ranges;  // "[0:128,0:784]"; "[]" for a scalar
  int64_t bytes = 0;
};

struct ShardingChips {
  MeshInfo mesh;                 // the run's first mesh (empty: none stored)
  std::vector<ChipBytes> chips;  // by device id
};

absl::StatusOr<ShardingChips> LoadShardingChips(const store::Reader& reader, int64_t run_id);
// What chip `device_id` holds of every tensor, largest first.
absl::StatusOr<std::vector<ChipShard>> LoadChipShards(const store::Reader& reader, int64_t run_id, int64_t device_id);

// The mesh axis (or axes, "data+model") that splits each of `t`'s split dims,
// found from which mesh coordinate changes between neighbouring tiles; "" when
// the mesh does not say.
std::vector<std::string> SplitAxisNames(const analysis::TensorTiles& t, const MeshInfo& mesh);

}  // namespace shardscope::app
