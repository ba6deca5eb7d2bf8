// HLO-style shardings: how a tensor's elements are laid out over the devices of
// a mesh. Printed and parsed in XLA's text form ({replicated},
// {maximal device=1}, {devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}, and the
// iota form {devices=[2,4]<=[4,2]T(1,0)}).
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/types.h"

namespace shardscope {

// A half-open index range [begin, end) along one dimension.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};

class Sharding {
 public:
  enum class Kind { kReplicated, kMaximal, kTiled, kManual };

  Sharding() = default;  // replicated
  static Sharding Replicated();
  static Sharding Maximal(int64_t device);
  static Sharding Manual();
  // `tile_dims` has one entry per tensor dimension, plus a trailing replication
  // dimension when `last_tile_dim_replicate`; `devices` lists the tile
  // assignment row-major. A tiling with every entry 1 normalises to replicated.
  static absl::StatusOr<Sharding> Tiled(std::vector<int64_t> tile_dims,
                                        std::vector<int64_t> devices,
                                        bool last_tile_dim_replicate);
  static absl::StatusOr<Sharding> Parse(absl::string_view text);
  // The layout that splits tensor dim d over the mesh axes axes_of_dim[d]
  // (several multiply, the first the most major) of a mesh of `mesh_shape`
  // whose devices are `device_ids` row-major; the axes no dim uses replicate.
  // Axes must be valid and used once (callers check and name the tensor).
  static absl::StatusOr<Sharding> OnMesh(const std::vector<int64_t>& mesh_shape,
                                         const std::vector<int64_t>& device_ids,
                                         const std::vector<std::vector<int>>& axes_of_dim);

  Kind kind() const { return kind_; }
  bool IsReplicated() const { return kind_ == Kind::kReplicated; }
  bool IsTiled() const { return kind_ == Kind::kTiled; }
  const std::vector<int64_t>& tile_dims() const { return tile_dims_; }
  const std::vector<int64_t>& devices() const { return devices_; }
  bool last_tile_dim_replicate() const { return last_tile_dim_replicate_; }
  int64_t maximal_device() const { return maximal_device_; }

  // Number of tensor dimensions the tiling covers (tile_dims minus the replication dim).
  int data_rank() const;
  // Tiles along tensor dimension `d` (1 when not tiled there).
  int64_t TilesInDim(int d) const;
  // Position of `device` in the tile assignment, one coordinate per tile dim; empty if absent.
  std::vector<int64_t> TileIndex(int64_t device) const;
  // The shard shape each device holds: ceil(dim / tiles) per dimension.
  Shape ShardShape(const Shape& global) const;
  // The global index ranges device `device` holds (clipped at the edge for uneven dims).
  std::vector<IndexRange> ShardRanges(const Shape& global, int64_t device) const;
  // Checks the sharding against a tensor rank and a device count.
  absl::Status Validate(int rank, int64_t num_devices) const;

  // XLA's text form with the device list written out ({devices=[2,2]0,2,1,3}).
  std::string ToString() const;
  // The same, in XLA's iota form where the device list is a reshaped and
  // transposed iota ({devices=[2,2]<=[4]}, {devices=[2,4]<=[4,2]T(1,0)}, as
  // XLA prints them); the written-out form where it is not.
  std::string ToIotaString() const;
  bool operator==(const Sharding& o) const;
  bool operator!=(const Sharding& o) const { return !(*this == o); }

 private:
  Kind kind_ = Kind::kReplicated;
  std::vector<int64_t> tile_dims_;
  std::vector<int64_t> devices_;
  bool last_tile_dim_replicate_ = false;
  int64_t maximal_device_ = 0;
};

// "[0:32,0:784]"
std::string RangesToString(const std::vector<IndexRange>& ranges);

}  // namespace shardscope
