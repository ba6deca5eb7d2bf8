// Meshes and sharding annotations, GSPMD style: a logical grid of devices
// with named axes, and mark_sharding(tensor, mesh, spec) splitting tensor
// dimensions over mesh axes.
#pragma once

#include <optional>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/sharding.h"
#include "core/tensor.h"

namespace shardscope {

struct None {};
inline constexpr None none{};

// One entry of a partition spec: a mesh axis by name or index, none, or a
// tuple of axes (axes("data", "fsdp")) that together split one dimension,
// the first the most major.
class AxisSpec {
 public:
  struct Axis {
    std::optional<std::string> name;
    int index = -1;
  };
  AxisSpec(None) {}
  AxisSpec(const char* name) : axes_{{std::string(name), -1}} {}
  AxisSpec(std::string name) : axes_{{std::move(name), -1}} {}
  AxisSpec(int index) : axes_{{std::nullopt, index}} {}
  static AxisSpec Tuple(const std::vector<AxisSpec>& parts);
  bool is_none() const { return axes_.empty(); }
  const std::vector<Axis>& axes() const { return axes_; }
  std::string ToString() const;

 private:
  std::vector<Axis> axes_;
};

// A tuple entry: axes("data", "fsdp") splits one dimension over both axes.
template <typename... A>
AxisSpec axes(A... a) {
  return AxisSpec::Tuple({AxisSpec(a)...});
}

class Mesh {
 public:
  // `device_ids` in row-major order over `shape`; one name per axis.
  static absl::StatusOr<Mesh> Create(std::vector<int64_t> device_ids, std::vector<int64_t> shape,
                                     std::vector<std::string> axis_names);
  const std::vector<int64_t>& device_ids() const { return ids_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  int size() const { return static_cast<int>(ids_.size()); }
  // "data (2), model (2)"
  std::string Describe() const;
  // The sharding a spec gives a tensor of `rank` dimensions.
  absl::StatusOr<Sharding> ToSharding(const std::vector<AxisSpec>& spec, int rank) const;

 private:
  std::vector<int64_t> ids_, shape_;
  std::vector<std::string> names_;
};

// A mesh over slices (hosts) of chips: `ici_shape` the chips of one slice,
// `dcn_shape` the slices, per axis; the mesh's shape is their element-wise
// product, row-major, each axis being dcn blocks of ici chips, and each
// slice's chips consecutive device ids (0..n-1). Errors as Mesh::Create's.
absl::StatusOr<Mesh> HybridMesh(const std::vector<int64_t>& ici_shape, const std::vector<int64_t>& dcn_shape,
                                std::vector<std::string> axis_names);

// Annotates `t` with a sharding: an input or a value on the devices is laid
// out so; a value of the graph being recorded keeps it as a constraint the
// partitioner honours (propagation starts from it). Errors name the tensor,
// where it was made, and the mesh's axes.
absl::Status mark_sharding(Tensor& t, const Mesh& mesh, const std::vector<AxisSpec>& spec,
                           std::source_location loc = std::source_location::current());

// As mark_sharding, on a value of the graph being recorded, and backward
// gives its gradient the same sharding.
absl::Status mark_sharding_with_gradients(Tensor& t, const Mesh& mesh, const std::vector<AxisSpec>& spec,
                                          std::source_location loc = std::source_location::current());

// Lays out an input (or a value on the devices) as auto-sharding chose: as
// mark_sharding does, the recorded source being "auto".
absl::Status apply_auto_sharding(Tensor& t, const Sharding& s,
                                 std::source_location loc = std::source_location::current());

// Drops `t`'s annotation: an input or a value on the devices is replicated
// again; a value being recorded is left to propagation.
absl::Status clear_sharding(Tensor& t, std::source_location loc = std::source_location::current());

}  // namespace shardscope
