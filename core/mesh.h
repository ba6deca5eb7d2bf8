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

// One entry of a partition spec: a mesh axis by name or index, or none.
class AxisSpec {
 public:
  AxisSpec(None) {}
  AxisSpec(const char* name) : name_(name) {}
  AxisSpec(std::string name) : name_(std::move(name)) {}
  AxisSpec(int index) : index_(index) {}
  bool is_none() const { return !name_ && index_ < 0; }
  const std::optional<std::string>& name() const { return name_; }
  int index() const { return index_; }
  std::string ToString() const;

 private:
  std::optional<std::string> name_;
  int index_ = -1;
};

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

// Annotates `t` (an input or a value on the devices) with a sharding. Errors
// name the tensor, where it was made, and the mesh's axes.
absl::Status mark_sharding(Tensor& t, const Mesh& mesh, const std::vector<AxisSpec>& spec,
                           std::source_location loc = std::source_location::current());

}  // namespace shardscope
